"""BERT-flow (Li et al., EMNLP 2020): a Glow normalizing flow fitted on sentence vectors.

A flow ``f`` maps the frozen encoder's sentence vectors ``u`` to latents
``z = f(u)`` whose density is a standard Gaussian; it is trained by maximum
likelihood (loss in bits per dimension) on unlabelled sentences of the target
domain, and sentences are then compared by the cosine of ``z``.

The model is :class:`isotropy.transforms.glow.Glow` (architecture and why it is written by hand:
that module's notes). This module fits and applies it; the checks of a saved flow and the
frozen forward map that the exports embed are :mod:`isotropy.transforms.flow_state`'s.

Training: Adam (learning rate ``lr``), mini-batches of ``batch_size`` drawn by a
local ``torch.Generator`` (the same ``seed`` gives bit-identical parameters and
outputs on the same machine and thread count), ``epochs`` passes. ``fit`` and
``fit`` runs on one intra-op thread (``THREADS``) and ``transform`` on torch's own
setting (``TRANSFORM_THREADS``); :func:`_flow_threads` has the measurements behind that.

Interrupting ``fit`` (Ctrl-C) leaves the estimator as it was before the call:
the new model is trained on the side and attached only when training ends; no
file is written by ``fit``, and :meth:`Flow.save` is atomic.
"""

from __future__ import annotations

import contextlib
import copy
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .._checks import check_matrix
from .._progress import ProgressBar
from .._spelling import spell
from ..errors import IsotropyError, NotFittedError
from .base import Transform
from .flow_state import FlowMap, check_permutations, check_structure
from .glow import COUPLINGS, Glow, min_dim

__all__ = ["Flow"]

_TRANSFORM_CHUNK = 16384
THREADS: int | None = 1  # intra-op threads of fit; None = torch's setting (see _flow_threads)
TRANSFORM_THREADS: int | None = None  # intra-op threads of transform/inverse/score; None = torch's setting
DIVERGED_RISE = 3.0  # bits/dim: a fit whose loss ends this far above where it started diverged (see _check_fit)
PROBE_ROWS = 2048  # training rows the loss is measured on before and after training (see _train)
ABSURD_LOSS = 1e3  # bits/dim: beyond any float32 data's scale (2^1000); training stops and fails there


# Bounds of the settings that size loops and layers. levels: each level halves the channels, so a
# k-level flow needs at least 2^k dimensions (16: 65,536-dimensional vectors); the others are far
# beyond any use in the papers (BERT-flow: levels 2, depth 3, hidden 32, 1 epoch) yet finish.
FLOW_LIMITS = {"levels": 16, "depth": 256, "hidden": 65_536, "epochs": 100_000, "batch_size": 2**24}


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


class Flow(Transform):
    """BERT-flow calibration: a multi-scale Glow fitted by maximum likelihood; ``transform`` gives ``z``.

    Parameters follow the paper's code (default ``l2_d3_w32``): ``levels`` levels
    of ``depth`` steps, coupling networks of width ``hidden``, ``coupling`` is
    ``"additive"`` (the paper's) or ``"affine"``; Adam with ``lr``, ``batch_size``
    rows a step, ``epochs`` passes; ``seed`` fixes initialisation and shuffling;
    ``device`` is a torch device name (default: CUDA when available, else CPU).

    Fitted attributes: ``n_features_in_``, ``model_`` (a :class:`Glow`, eval mode),
    ``loss_curve_`` (bits/dim of every optimisation step), ``n_iter_`` (steps).
    """

    kind = "flow"
    required_arrays = ("loss_curve",)
    transient_params = ("device",)  # where it runs is not part of what was fitted
    _preserves_dtype = ("float32",)  # transform returns float32 whatever the input

    def __init__(
        self,
        levels: int = 2,
        depth: int = 3,
        hidden: int = 32,
        coupling: str = "additive",
        epochs: int = 1,
        lr: float = 1e-3,
        batch_size: int = 32,
        seed: int = 0,
        device: str | None = None,
    ):
        self.levels = levels
        self.depth = depth
        self.hidden = hidden
        self.coupling = coupling
        self.epochs = epochs
        self.lr = lr
        self.batch_size = batch_size
        self.seed = seed
        self.device = device

    # ---------------------------------------------------------------- sklearn plumbing

    def _check_params(self) -> torch.device:
        for name in ("levels", "depth", "hidden", "epochs", "batch_size"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise IsotropyError(f"Flow {name} must be a positive integer, got {value!r}")
            if value > FLOW_LIMITS[name]:  # loops and layers sized by it: an absurd value would run for hours
                raise IsotropyError(f"Flow {name} must be at most {FLOW_LIMITS[name]:,}, got {value:,}")
        if self.batch_size < 2:
            raise IsotropyError(f"Flow batch_size must be at least 2 (actnorm needs a variance), got {self.batch_size}")
        if self.coupling not in COUPLINGS:
            raise IsotropyError(f"Flow coupling must be one of {', '.join(COUPLINGS)}, got {self.coupling!r}")
        if (
            isinstance(self.lr, bool)
            or not isinstance(self.lr, (int, float, np.floating))
            or not (math.isfinite(self.lr) and self.lr > 0)
        ):
            raise IsotropyError(f"Flow lr must be a positive number, got {self.lr!r}")
        if not _is_int(self.seed) or self.seed < 0:
            raise IsotropyError(f"Flow seed must be a non-negative integer, got {self.seed!r}")
        return _resolve_device(self.device)

    def min_fit_rows(self, d: int) -> int:
        """More rows than dimensions, and one batch (:meth:`_check_fit_input` has the measurements)."""
        return max(d + 1, self.batch_size if _is_int(self.batch_size) else 0)  # a bad batch_size is fit's to name

    def _check_fitted(self) -> None:
        if not hasattr(self, "model_"):
            raise NotFittedError("this Flow is not fitted yet: call fit(X) first")

    def _check_fit_input(self, X: Any, whole: bool = True) -> np.ndarray:
        """The rows a new flow is fitted on; ``whole`` when they are all it will see (``fit``, not
        the first ``partial_fit`` of a stream), which must then outnumber the dimensions."""
        X = check_matrix(X, "X", dtype=np.float32)
        n, d = X.shape
        if n < self.batch_size:
            raise IsotropyError(
                f"X has {n} rows, fewer than one batch ({spell('batch_size', self.batch_size)}); "
                f"fit the flow on more sentences or lower {spell('batch_size')}"
            )
        need = min_dim(self.levels)
        if d < need:
            raise IsotropyError(f"a {self.levels}-level flow needs vectors of at least {need} dimensions, X has {d}")
        # Rows <= dimensions: the rows span at most n - 1 directions, maximum likelihood has no optimum
        # (the density can collapse onto their affine hull), and the loss ends wherever training stops.
        # Measured with the default Flow() on all-MiniLM-L6-v2 cls vectors of generated sentences
        # (d = 384; loss of the last 50 steps; |z| = largest latent of 1,000 held-out vectors; 3 seeds):
        #   n=4, batch 2, 1 epoch:     loss 1.5e26 bits/dim, 86,325 infinite latents (the reported failure)
        #   n=8, batch 4, 5 epochs:    loss 5e5 .. 1.2e23, |z| 1.6e5 .. 1.5e13
        #   n=16, batch 4, 1 epoch:    loss 560 .. 2,100, |z| 470 .. 5,500
        #   n=32, batch 32, 100 epochs: loss 11 .. 87 or diverged; n=64, 100 epochs: 1 seed of 3 at 5e32
        #   n=300 .. 600, batch 32, 30-50 epochs, and n=256 .. 2,000 at 1-10 epochs: loss -1.5 .. 0.3, |z| < 11
        # On 32-dim Gaussian data, n=4 (batch 2) ended at 1e8 .. 1.5e11 bits/dim with infinite latents,
        # n=16 .. 64 with |z| up to 3,300 (overfitted), n=128 with |z| < 17. Some fits on n <= d rows
        # (300 or 384 of 384 dims, batch 32) still ended sound, but nothing bounds the failures below d
        # and the density is degenerate there: hence more rows than dimensions.
        if whole and n <= d:
            raise IsotropyError(
                f"X has {n} rows for {d} dimensions: a flow needs more rows than dimensions (at most {n - 1} "
                f"directions vary, so the fitted density degenerates and its loss can run to absurd values); "
                f"fit it on at least {d + 1} sentences"
            )
        spread = np.ptp(X, axis=0)
        flat = np.flatnonzero(spread == 0)
        if flat.size == d:
            raise IsotropyError(
                f"all {n} rows of X are identical: a flow cannot be fitted on vectors without variance; fit it on different sentences"
            )
        if flat.size:
            j = int(flat[0])
            raise IsotropyError(
                f"column {j} of X holds the same value ({float(X[0, j]):g}) in every row"
                + (f", and {flat.size - 1} more columns too" if flat.size > 1 else "")
                + ": a flow cannot model a direction without variance; drop the constant columns or fit on more varied vectors"
            )
        return X

    def _check_input(self, X: Any, name: str = "X") -> np.ndarray:
        self._check_fitted()
        return check_matrix(X, name, expected_dim=self.n_features_in_, dtype=np.float32)

    # ---------------------------------------------------------------- fitting

    def fit(self, X: Any, y: Any = None, show_progress: bool | None = None) -> Flow:
        """Fit the flow on the rows of ``X`` (n x d, n >= batch_size); returns ``self``."""
        device = self._check_params()
        X = self._check_fit_input(X)
        model, optimizer, curve = self._fit_new(X, self.epochs, device, show_progress)
        # Only now, training finished, does the estimator change (Ctrl-C leaves it as it was).
        self._commit(model, optimizer, curve, X.shape[1], epochs_done=self.epochs)
        return self

    def _fit_new(self, X: np.ndarray, epochs: int, device: torch.device, show_progress: bool | None):
        with _flow_threads(THREADS):  # the rotations' QR too: slow on contended threads
            gen = torch.Generator().manual_seed(int(self.seed))
            model = Glow(X.shape[1], self.levels, self.depth, self.hidden, self.coupling, generator=gen).to(device)
            optimizer = _adam(model, self.lr)
            curve = _train(model, optimizer, X, epochs, self.batch_size, gen, device, True, show_progress)
        return model, optimizer, curve

    def partial_fit(self, X: Any, y: Any = None, show_progress: bool | None = None) -> Flow:
        """One more pass over ``X`` (initialising on it when unfitted), continuing Adam's state."""
        device = self._check_params()
        if not hasattr(self, "model_"):
            X = self._check_fit_input(X, whole=False)
            model, optimizer, curve = self._fit_new(X, 1, device, show_progress)
            self._commit(model, optimizer, curve, X.shape[1], epochs_done=1)
            return self
        X = self._check_input(X)
        if X.shape[0] < self.batch_size:
            raise IsotropyError(f"X has {X.shape[0]} rows, fewer than one batch ({spell('batch_size', self.batch_size)})")
        model = copy.deepcopy(self.model_).to(device)
        optimizer = _adam(model, self.lr)
        if getattr(self, "_optimizer_state", None) is not None:
            # load_state_dict shares same-device tensors: copy, so an interrupted pass leaves ours intact
            optimizer.load_state_dict(copy.deepcopy(self._optimizer_state))
        # A fresh stream per pass, still a function of (seed, passes done): reruns are identical.
        gen = torch.Generator().manual_seed(int(self.seed) * 1_000_003 + self._epochs_done)
        curve = _train(model, optimizer, X, 1, self.batch_size, gen, device, False, show_progress)
        self._commit(model, optimizer, np.concatenate([self.loss_curve_, curve]), X.shape[1], self._epochs_done + 1)
        return self

    def _commit(self, model: Glow, optimizer: torch.optim.Optimizer, curve: Any, dim: int, epochs_done: int) -> None:
        model.eval()
        self.model_ = model
        self.n_features_in_ = int(dim)
        self.loss_curve_ = np.asarray(curve, dtype=np.float64)
        self.n_iter_ = int(self.loss_curve_.shape[0])
        self._optimizer_state = optimizer.state_dict()  # references; partial_fit copies before use
        self._epochs_done = int(epochs_done)

    # ---------------------------------------------------------------- inference

    def _device_of_model(self) -> torch.device:
        return next(self.model_.parameters()).device

    def _map(self, X: np.ndarray, fn) -> np.ndarray:
        device = self._device_of_model()
        out = []
        with _flow_threads(TRANSFORM_THREADS), torch.inference_mode():
            for start in range(0, X.shape[0], _TRANSFORM_CHUNK):
                chunk = torch.from_numpy(_writable(X[start : start + _TRANSFORM_CHUNK])).to(device)
                out.append(fn(chunk).cpu().numpy())
        if not out:
            return np.zeros((0, X.shape[1]), dtype=np.float32)
        return np.concatenate(out, axis=0)

    def transform(self, X: Any) -> np.ndarray:
        """Map vectors to the flow's latent ``z`` (float32, same shape)."""
        X = self._check_input(X)
        return self._map(X, lambda x: self.model_(x)[0]).astype(np.float32, copy=False)

    def fit_transform(self, X: Any, y: Any = None, show_progress: bool | None = None) -> np.ndarray:
        return self.fit(X, show_progress=show_progress).transform(X)

    def inverse_transform(self, Z: Any) -> np.ndarray:
        """Map latents back to vectors (float32)."""
        Z = self._check_input(Z, "Z")
        return self._map(Z, self.model_.inverse).astype(np.float32, copy=False)

    def score_samples(self, X: Any) -> np.ndarray:
        """Log-likelihood of each row in nats, in the data space (log N(z) + log|det J|); float64."""
        X = self._check_input(X)
        if X.shape[0] == 0:
            return np.zeros(0)
        return self._map(X, lambda x: self.model_.log_prob(x)[:, None])[:, 0].astype(np.float64)

    def score(self, X: Any, y: Any = None) -> float:
        """Mean log-likelihood per row (nats)."""
        return float(np.mean(self.score_samples(X)))

    def describe(self) -> str:
        """One line: configuration and, when fitted, the training outcome."""
        name = f"flow l{self.levels}_d{self.depth}_w{self.hidden} ({self.coupling} coupling)"
        if not hasattr(self, "model_"):
            return name + ", not fitted"
        tail = self.loss_curve_[-50:]
        return (
            f"{name} on {self.n_features_in_} dims, {self.n_iter_} steps, final loss {float(np.mean(tail)):.3f} bits/dim"
            if tail.size
            else f"{name} on {self.n_features_in_} dims"
        )

    @property
    def n_features_out_(self) -> int:
        """A flow keeps the dimension: ``dim z == dim x``."""
        return self.n_features_in_

    def to_torch(self, dtype: Any = None):
        """An ``nn.Module`` computing :meth:`transform` (the Glow's forward map, for exports)."""
        self._check_fitted()
        return FlowMap(self.model_)

    # ---------------------------------------------------------------- persistence

    def _get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        config = {"n_features_in": self.n_features_in_, "epochs_done": self._epochs_done}
        arrays = {f"model.{k}": v.detach().cpu().numpy() for k, v in self.model_.state_dict().items()}
        arrays["loss_curve"] = self.loss_curve_
        return config, arrays

    @classmethod
    def _from_state(cls, flow: Flow, cfg: dict[str, Any], arrays: dict[str, np.ndarray], path: Path) -> Flow:
        """Rebuild the Glow from a folder written by :meth:`save`; every problem is one clear IsotropyError."""
        dim = cfg.get("n_features_in")
        if not _is_int(dim):
            raise IsotropyError(f"{path}: config.json does not describe a flow this isotropy can read")
        try:
            dev = flow._check_params()
        except IsotropyError as exc:
            raise IsotropyError(f"{path}: {exc}") from None
        check_structure(path, arrays, flow, int(dim))
        check_permutations(path, arrays)
        try:
            model = Glow(dim, flow.levels, flow.depth, flow.hidden, flow.coupling)
            state = {k[len("model.") :]: torch.from_numpy(v.copy()) for k, v in arrays.items() if k.startswith("model.")}
            model.load_state_dict(state, strict=True)
        except (RuntimeError, IsotropyError) as exc:
            first = str(exc).strip().splitlines()[0]
            raise IsotropyError(f"{path}: saved state does not match its config ({first})") from None
        model.to(dev).eval()
        flow.model_ = model
        flow.n_features_in_ = int(dim)
        flow.loss_curve_ = np.asarray(arrays["loss_curve"], dtype=np.float64)
        flow.n_iter_ = int(flow.loss_curve_.shape[0])
        flow._optimizer_state = None
        flow._epochs_done = int(cfg.get("epochs_done", flow.epochs))
        return flow


def _writable(a: np.ndarray) -> np.ndarray:
    """torch warns on read-only arrays (memory-mapped .npy files): copy those."""
    return a if a.flags.writeable else a.copy()


def _resolve_device(device: Any) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise IsotropyError(f"Flow device {device!r} is not a torch device: {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise IsotropyError(f"Flow device {device!r} asked for, but CUDA is not available here")
    return dev


def _adam(model: nn.Module, lr: float) -> torch.optim.Adam:
    # fused: one kernel over all parameters instead of ~10 ops per tensor (Adam was a
    # third of a training step's time with the default per-tensor loop on CPU).
    return torch.optim.Adam(model.parameters(), lr=float(lr), fused=True)


@contextlib.contextmanager
def _flow_threads(threads: int | None):
    """Run the flow's own computation on ``threads`` intra-op threads (None: torch's setting).

    ``fit`` uses ``THREADS`` = 1, the robust choice: on the idle 2-core machine torch's
    2 threads trained 30 steps somewhat faster (0.35 s against 0.54 s), but under load
    (more runnable threads than cores) they made them 12x slower (14.9 s against 1.2 s),
    because OpenMP's synchronisation dominates. Set ``THREADS = None`` on a dedicated machine. ``transform``
    works on large chunks and gains from threads on an idle machine (79,000 against
    46,000 vectors/s on 2 cores), so it keeps torch's setting (``TRANSFORM_THREADS`` =
    None). Both figures are in docs/BENCHMARKS.md (section flow).
    ``torch.set_num_threads`` is process-wide, so it is changed only for the call.
    """
    before = torch.get_num_threads()
    use = threads if threads is not None and threads != before else None
    if use is not None:
        torch.set_num_threads(use)
    try:
        yield
    finally:
        if use is not None:
            torch.set_num_threads(before)


def _train(
    model: Glow,
    optimizer: torch.optim.Optimizer,
    X: np.ndarray,
    epochs: int,
    batch_size: int,
    gen: torch.Generator,
    device: torch.device,
    init: bool,
    show_progress: bool | None,
) -> np.ndarray:
    """Maximum-likelihood training; loss = bits per dimension. Returns the loss of each step.

    The loss on up to ``PROBE_ROWS`` evenly spaced rows before training (right after the
    data-dependent initialisation) and after it decides whether the fit diverged (:func:`_check_fit`).
    """
    n, d = X.shape
    data = torch.from_numpy(_writable(X)).to(device)
    steps_per_epoch = math.ceil(n / batch_size)
    losses = torch.empty(epochs * steps_per_epoch, dtype=torch.float64, device=device)
    scale = 1.0 / (d * math.log(2.0))
    probe = data[torch.from_numpy(np.linspace(0, n - 1, min(n, PROBE_ROWS)).round().astype(np.int64)).to(device)]

    def probe_loss() -> float:  # no random numbers drawn: the fit stays what it was without it
        with torch.no_grad():
            return float(-model.log_prob(probe).mean() * scale)

    model.train()
    total = epochs * steps_per_epoch
    with _flow_threads(THREADS), ProgressBar(total, show_progress, "fitting flow") as bar:
        before = None if init else probe_loss()
        step = bar_done = 0
        for _ in range(epochs):
            order = torch.randperm(n, generator=gen).to(device)
            for start in range(0, n, batch_size):
                batch = data[order[start : start + batch_size]]
                if init:
                    model.data_init(batch)
                    init = False
                    before = probe_loss()
                loss = -model.log_prob(batch).mean() * scale
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                losses[step] = loss.detach()
                step += 1
                if step % 20 == 0 or step == total:  # the running loss, without a sync every step
                    running = float(losses[max(0, step - 50) : step].mean())
                    if not math.isfinite(running) or running > ABSURD_LOSS:
                        break
                    bar.advance(step - bar_done, description=f"fitting flow, loss {running:.3f} bits/dim")
                    bar_done = step
            else:
                continue
            break  # diverged
        curve = losses[:step].cpu().numpy()
        after = probe_loss() if np.isfinite(curve).all() else float("nan")
    _check_fit(curve, before, after, optimizer.param_groups[0]["lr"], batch_size)
    return curve


def _check_fit(curve: np.ndarray, before: float, after: float, lr: float, batch_size: int) -> None:
    """Refuse a fit whose loss is not finite, absurd, or worse than before training.

    ``before`` and ``after`` are the loss (bits/dim) on the same rows of the training data (up
    to ``PROBE_ROWS``, evenly spaced) before and after training: for a new flow, ``before`` is the
    data-initialised flow's (a per-channel standardisation and a rotation), whatever the vectors'
    scale. Training must not end more than ``DIVERGED_RISE`` bits/dim above it, i.e. with a density
    2^3 = 8 times lower per dimension than that trivial model's. Measured (3 seeds each), as
    ``after - before``: sound fits -4.4 .. -0.2 (384-dim cls vectors of all-MiniLM-L6-v2, batch
    16-32, 1-20 epochs; 6-dim test data, lr 1e-3 .. 1e-2; sklearn's 2-dim blobs, batch 4); fits with
    too high an lr (0.03, 6 dims) -13 .. +2.3, poor but finite; broken ones +6e13 .. +9e21 (384 dims,
    batch 8; latents of held-out vectors up to 4e13) or non-finite, and 2e26 (32 dims, lr 0.03, batch 4).
    """
    fix = f"lower lr (now {lr:g}), raise batch_size (now {batch_size}) or fit on more rows"
    if not np.isfinite(curve).all():
        bad = int(np.flatnonzero(~np.isfinite(curve))[0])
        raise IsotropyError(f"flow training diverged (loss not finite at step {bad}); {fix}, or check the vectors' scale")
    if not math.isfinite(after) or after > ABSURD_LOSS:
        raise IsotropyError(
            f"flow training diverged: the loss on its training rows reached {after:.3g} bits/dim (it was {before:.3g} "
            f"before training), so the flow would map vectors to huge or infinite values; {fix}"
        )
    if after > before + DIVERGED_RISE:
        raise IsotropyError(
            f"flow training diverged: the loss on its training rows ended at {after:.3g} bits/dim, {after - before:.3g} "
            f"above the {before:.3g} it started from, so the flow maps vectors worse than its initialisation did; {fix}"
        )
