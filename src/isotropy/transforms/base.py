"""The transform protocol every calibration follows (layer 3).

A transform is a scikit-learn estimator over sentence vectors (it derives from scikit-learn's
``BaseEstimator`` and ``TransformerMixin``):

* hyper-parameters in ``__init__``, stored unmodified (``get_params``/``set_params``/``clone``
  come from ``BaseEstimator`` through :class:`isotropy._params.EstimatorParams`);
* ``fit(X)`` (and, where the statistics allow it, ``partial_fit``), ``transform``,
  ``inverse_transform`` where it is defined, ``fit_transform`` (``TransformerMixin``);
  ``set_output(transform="pandas")`` and ``get_feature_names_out()`` (``whitening0``,
  ``whitening1``, ...: the output columns are new directions, not the input's);
* learned state in attributes ending in ``_``; ``n_features_in_`` and ``n_features_out_``
  (the output width); ``__sklearn_is_fitted__``;
* ``save(path)`` / ``load(path)``: a folder of ``config.json`` + ``state.safetensors``
  written atomically by :func:`isotropy.storage.artifacts.save_state`, its ``kind`` the
  transform's registry key (:data:`isotropy.transforms.TRANSFORMS`);
* ``to_torch()``: the ``torch.nn.Module`` computing ``transform`` on a (batch x dim)
  tensor, which the sentence-transformers and ONNX exports embed;
* ``describe()``: one line for logs and model cards.

:class:`Transform` implements the shared parts; a subclass provides ``fit``,
``transform``, ``_check_fitted``, ``n_features_in_``, ``n_features_out_``,
``_get_state``/``_from_state`` and ``to_torch``. :class:`AffineTransform` goes further
for every calibration that is ``y = (x - shift) @ kernel`` computed from
:class:`~isotropy.transforms.moments.Moments` alone (whitening, centering, all-but-the-top,
common-component removal): such a subclass only says how to solve the moments.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin

from .._checks import check_matrix
from .._params import EstimatorParams
from ..errors import IsotropyError, NotFittedError
from ..storage.artifacts import load_state, save_state
from .moments import Moments

__all__ = ["Transform", "AffineTransform", "AffineSolution", "stored_moments", "check_config_counts"]


class Transform(ClassNamePrefixFeaturesOutMixin, TransformerMixin, EstimatorParams):
    """Base of every transform: scikit-learn's estimator and transformer, save/load, ``__sklearn_is_fitted__``."""

    kind: ClassVar[str] = ""  # the registry key and the saved folder's kind
    version_key: ClassVar[str | None] = None  # config key of the state layout version, if the kind has one
    state_version: ClassVar[int] = 1
    required_arrays: ClassVar[tuple[str, ...]] = ()
    transient_params: ClassVar[tuple[str, ...]] = ()  # not saved (e.g. a device); given again to load
    # The encoder of the vectors it was fitted on (storage.integrity.provenance_of_record), when known:
    # not a hyper-parameter, saved in config.json, checked where it is applied.
    provenance: dict[str, Any] | None = None
    _preserves_dtype: ClassVar[tuple[str, ...]] = ("float64", "float32")  # input dtypes transform returns as they are

    # ---------------------------------------------------------------- what subclasses provide

    def fit(self, X: Any, y: Any = None) -> Transform:  # pragma: no cover - abstract
        raise NotImplementedError

    def transform(self, X: Any) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_fitted(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # ``n_features_in_`` and ``n_features_out_``: attributes or properties of the subclass,
    # absent (hasattr False) before fit, as scikit-learn expects.

    def _get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:  # pragma: no cover - abstract
        """``(config, arrays)`` to save beside the parameters (the object is fitted)."""
        raise NotImplementedError

    @classmethod
    def _from_state(cls, est: Transform, config: dict[str, Any], arrays: dict[str, np.ndarray], path: Path) -> Transform:
        """Restore the learned state of ``est`` (built from the saved parameters); raise on inconsistency."""
        raise NotImplementedError  # pragma: no cover - abstract

    def to_torch(self, dtype: Any = None):  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:
        return repr(self)

    def min_fit_rows(self, d: int) -> int:
        """Fewest fitting rows for a well-defined fit on ``d``-dimensional vectors (callers check
        it before any encoding, so a too-small corpus is said early)."""
        return 2

    def _params_to_save(self) -> dict[str, Any]:
        """The hyper-parameters written to ``config.json`` (normalised, transient ones left out)."""
        return {k: v for k, v in self.get_params().items() if k not in self.transient_params}

    # ---------------------------------------------------------------- shared

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = list(self._preserves_dtype)
        return tags

    @property
    def _n_features_out(self) -> int:
        # what scikit-learn's get_feature_names_out (ClassNamePrefixFeaturesOutMixin) counts; absent before fit
        return self.n_features_out_

    def __sklearn_is_fitted__(self) -> bool:
        try:
            self._check_fitted()
        except NotFittedError:
            return False
        return True

    def save(self, path: str | os.PathLike, *, force: bool = False) -> Path:
        """Write ``config.json`` + ``state.safetensors`` atomically.

        An existing ``path`` is replaced only when it holds a transform of the same kind
        (or is an empty folder), unless ``force``.
        """
        self._check_fitted()
        config, arrays = self._get_state()
        meta = {"params": self._params_to_save(), **config}
        if getattr(self, "provenance", None):
            meta["provenance"] = dict(self.provenance)  # the encoder of the vectors it was fitted on
        if hasattr(self, "feature_names_in_"):  # fitted on a DataFrame: transform keeps checking its columns
            meta["feature_names_in"] = [str(name) for name in self.feature_names_in_]
        if self.version_key:
            meta[self.version_key] = self.state_version
        return save_state(path, self.kind, meta, arrays, force=force)

    @classmethod
    def load(cls, path: str | os.PathLike, *, verify: bool | None = None, **transient: Any) -> Transform:
        """Read a folder written by :meth:`save`; every problem is one clear IsotropyError.

        Its files are verified against the sha256 digests its ``config.json`` records
        (``verify=False`` skips that; None: unless the CLI's ``--no-verify``).
        """
        path = Path(path)
        cfg, arrays = load_state(path, cls.kind, cls.required_arrays, verify=verify)
        if cls.version_key and cfg.get(cls.version_key) != cls.state_version:
            raise IsotropyError(
                f"{path} was written by an incompatible isotropy ({cfg.get('isotropy_version', 'unknown')}, "
                f"{cls.kind} layout {cfg.get(cls.version_key)!r}; this one reads {cls.state_version}); refit it"
            )
        params = cfg.get("params")
        expected = set(cls._get_param_names()) - set(cls.transient_params)
        if not isinstance(params, dict) or set(params) != expected:
            raise IsotropyError(f"{path}/config.json has missing or unknown {cls.kind} parameters: {params!r}")
        try:
            est = cls(**params, **transient)
        except (TypeError, ValueError) as exc:
            raise IsotropyError(f"{path}/config.json: bad {cls.kind} parameters ({exc})") from None
        est = cls._from_state(est, cfg, arrays, path)
        prov = cfg.get("provenance")
        est.provenance = dict(prov) if isinstance(prov, dict) else None
        names = cfg.get("feature_names_in")
        if names is not None:
            if not (isinstance(names, list) and all(isinstance(n, str) for n in names) and len(names) == est.n_features_in_):
                raise IsotropyError(
                    f"{path}/config.json: feature_names_in must be {est.n_features_in_} column names, got {names!r}"
                )
            est.feature_names_in_ = np.asarray(names, dtype=object)
        return est


class AffineSolution:
    """A solved affine calibration ``y = (x - shift) @ kernel``; ``inverse`` maps back (None: no inverse).

    ``info`` holds what else the solve found (eigenvalues, the shrinkage used, ...).
    """

    __slots__ = ("moments", "key", "shift", "kernel", "inverse", "info")

    def __init__(self, shift: np.ndarray, kernel: np.ndarray, inverse: np.ndarray | None, **info: Any):
        self.shift, self.kernel, self.inverse, self.info = shift, kernel, inverse, info
        self.moments: Moments | None = None  # the statistics it was solved from, and their version
        self.key: Any = None


def stored_moments(arrays: dict[str, np.ndarray], path: Path) -> Moments:
    """The ``moments.*`` arrays of a saved state as :class:`Moments`; a corrupt set is one error naming the file."""
    try:
        return Moments.from_arrays({k[len("moments.") :]: v for k, v in arrays.items() if k.startswith("moments.")})
    except IsotropyError as exc:
        raise IsotropyError(f"{path}/state.safetensors: {exc}; the artefact is corrupt, refit it") from None


def check_config_counts(cfg: dict[str, Any], path: Path, held: list[tuple[str, int | float, str]]) -> None:
    """Each ``(key, value, what)``: ``config.json``'s integer ``key`` (``n_samples_seen``: a number) must equal ``value``, which the arrays
    hold (``what`` says it in words); a disagreement (an edited config, or the files of two fits mixed up,
    either of which would transform with the wrong statistics) is one error naming the folder."""
    for key, value, what in held:
        said = cfg.get(key)
        kinds = int | float if key == "n_samples_seen" else int  # a float total when the rows were weighted
        if isinstance(said, bool) or not isinstance(said, kinds) or said != value:
            raise IsotropyError(
                f"{path}: config.json says {key} {said!r}, but state.safetensors holds {what}; the folder was edited "
                f"or its files mixed up: restore it or refit"
            )


def _as_array(values: Any) -> Any:
    """``values`` as a numpy array (through ``__array__``, which array-likes such as scikit-learn's test
    doubles provide); what cannot be converted is returned as it is, for the validators to name."""
    if isinstance(values, np.ndarray):
        return values
    try:
        return np.asarray(values)
    except (TypeError, ValueError):
        return values


def _feature_names(est: Any, X: Any, *, reset: bool) -> None:
    """scikit-learn's own column-name contract (``feature_names_in_``): set by ``fit`` from a DataFrame's columns,
    checked by ``transform`` (other columns, or the same in another order: scikit-learn's ValueError)."""
    from sklearn.utils.validation import _check_feature_names

    _check_feature_names(est, X, reset=reset)


def _width(X: Any) -> int | None:
    """The number of columns of a 2-D ``X`` (None otherwise: the validators say what is wrong)."""
    arr = _as_array(X)
    return int(arr.shape[-1]) if isinstance(arr, np.ndarray) and arr.ndim == 2 else None


class AffineTransform(Transform):
    """A calibration solved from :class:`Moments` alone: ``y = (x - shift) @ kernel``.

    Fitting only accumulates the moments (``fit``, ``partial_fit`` over a stream,
    ``merge`` of shards, :meth:`from_moments` for a distributed fit), so one set of
    moments serves every candidate; the kernel is solved lazily and cached per
    (parameters, moments) version. A subclass implements :meth:`_solve`, and may
    extend :meth:`_check_params`. ``transform`` computes in float64; float32 input gives
    float32 output. The map is also ``x @ A + b`` (:meth:`affine_`), which is what the
    sentence-transformers export writes as a stock ``Dense`` module.
    """

    _preserves_dtype = ("float64", "float32")
    # The default saved state (see _get_state): the moments, re-solved on load. Whitening keeps
    # isotropy 0.1's own layout (kernel and eigenvalues too) and overrides all three.
    version_key = "layout_version"
    state_version = 1
    required_arrays = tuple(f"moments.{name}" for name in ("n", "mean", "scatter", "third", "fourth"))

    # ---------------------------------------------------------------- what subclasses provide

    def _check_params(self, d: int | None) -> None:
        """Raise IsotropyError for a bad hyper-parameter (``d``: the input width, when known)."""

    def _solve(self, m: Moments) -> AffineSolution:  # pragma: no cover - abstract
        raise NotImplementedError

    # ---------------------------------------------------------------- fitting

    def fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> AffineTransform:
        """Fit on all rows of ``X`` at once (the kernel is solved now, so problems surface here);
        ``sample_weight``: a frequency weight per row (a row of weight 2 counts twice)."""
        self._check_params(_width(X))
        if sample_weight is not None and np.size(sample_weight := _as_array(sample_weight)) and not np.any(sample_weight):
            raise IsotropyError(f"every sample_weight is zero: there is nothing to fit the {self.kind} on")
        m = Moments().update(X, weights=sample_weight)
        self._attach(m, self._solve(m))
        _feature_names(self, X, reset=True)
        return self

    def partial_fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> AffineTransform:
        """Add one chunk of rows (any size, any number of calls). A failed call changes nothing."""
        self._check_params(_width(X))
        first = not hasattr(self, "moments_")
        if not first:
            _feature_names(self, X, reset=False)  # later chunks: the same columns, in the same order
        if first:
            self.moments_ = Moments().update(X, weights=sample_weight)
        else:
            self.moments_.update(X, weights=sample_weight)
        if first:
            _feature_names(self, X, reset=True)
        return self

    def merge(self, other: AffineTransform) -> AffineTransform:
        """Add the statistics of another fit (e.g. on another shard); keeps self's hyper-parameters."""
        if not isinstance(other, AffineTransform):
            raise IsotropyError(f"can only merge moments-based transforms, not a {type(other).__name__}")
        other._check_fitted()
        if not hasattr(self, "moments_"):
            self.moments_ = other.moments_.copy()
        else:
            self.moments_.merge(other.moments_)
        return self

    @classmethod
    def from_moments(cls, moments: Moments, **params: Any) -> AffineTransform:
        """A fitted transform on statistics accumulated elsewhere (a distributed fit, a shared
        set of candidates); solved now, so too few rows or a singular covariance fail here."""
        est = cls(**params)
        est._check_params(moments.dim)
        est._attach(moments, est._solve(moments))
        return est

    def _attach(self, m: Moments, solution: AffineSolution) -> None:
        solution.moments, solution.key = m, self._key(m)
        self.moments_ = m
        self._solution_cache = solution

    # ---------------------------------------------------------------- learned state

    def _check_fitted(self) -> None:
        if not hasattr(self, "moments_") or self.moments_.n == 0:
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit or partial_fit first")

    def _key(self, m: Moments) -> tuple:
        return (tuple(repr(v) for v in self.get_params().values()), m.version)

    def _solution(self) -> AffineSolution:
        """The solved map for the current parameters and statistics (solved again only when either changed)."""
        self._check_fitted()
        cached = getattr(self, "_solution_cache", None)
        m = self.moments_
        if cached is None or cached.moments is not m or cached.key != self._key(m):
            self._check_params(m.dim)
            self._attach(m, self._solve(m))
            cached = self._solution_cache
        return cached

    @property
    def mean_(self) -> np.ndarray:
        self._check_fitted()
        return self.moments_.mean

    @property
    def kernel_(self) -> np.ndarray:
        return self._solution().kernel

    @property
    def n_samples_seen_(self) -> int | float:
        self._check_fitted()
        return self.moments_.n

    @property
    def n_features_in_(self) -> int:
        self._check_fitted()
        return int(self.moments_.dim)

    @property
    def n_features_out_(self) -> int:
        return int(self._solution().kernel.shape[1])

    # ---------------------------------------------------------------- persistence (default)

    def _get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The moments and their size; the map is solved again from them on load (a few ms)."""
        self._solution()  # solvable with these parameters before anything is written
        config = {"dim": self.moments_.dim, "n_samples_seen": self.moments_.n}
        return config, {f"moments.{k}": v for k, v in self.moments_.to_arrays().items()}

    @classmethod
    def _from_state(cls, est: AffineTransform, cfg: dict[str, Any], arrays: dict[str, np.ndarray], path: Path) -> AffineTransform:
        """Rebuild the moments, check them against ``config.json``, and solve (the same code, the same map)."""
        m = stored_moments(arrays, path)
        check_config_counts(cfg, path, [("dim", m.dim, str(m.dim)), ("n_samples_seen", m.n, str(m.n))])
        try:
            est._check_params(m.dim)
            est._attach(m, est._solve(m))
        except IsotropyError as exc:
            raise IsotropyError(f"{path}: {exc}") from None
        return est

    def affine_(self) -> tuple[np.ndarray, np.ndarray]:
        """``(A, b)`` with ``transform(x) == x @ A + b`` (float64)."""
        sol = self._solution()
        return sol.kernel, -(sol.shift @ sol.kernel)

    def shift_kernel_(self) -> tuple[np.ndarray, np.ndarray]:
        """``(shift, kernel)`` with ``transform(x) == (x - shift) @ kernel`` (float64): the
        form to compute in float32, where folding the shift into a bias (``affine_``) cancels
        two large terms when the kernel magnifies (a whitening of small eigenvalues)."""
        sol = self._solution()
        return sol.shift, sol.kernel

    # ---------------------------------------------------------------- applying

    def transform(self, X: Any) -> np.ndarray:
        """``(X - shift) @ kernel``, computed in float64; float32 input gives float32 output."""
        sol = self._solution()
        _feature_names(self, X, reset=False)  # fitted on a DataFrame: the same columns, in the same order (#31, W14)
        out_dtype = np.float32 if getattr(X, "dtype", None) == np.float32 else np.float64
        X = check_matrix(X, "X", expected_dim=self.moments_.dim)
        return ((X - sol.shift) @ sol.kernel).astype(out_dtype, copy=False)

    def inverse_transform(self, Y: Any) -> np.ndarray:
        """Map back to the input space: exact when the map is invertible, else the
        projection onto the kept directions (like PCA's inverse_transform)."""
        sol = self._solution()
        if sol.inverse is None:
            raise IsotropyError(f"{type(self).__name__} removes directions for good: it has no inverse")
        out_dtype = np.float32 if getattr(Y, "dtype", None) == np.float32 else np.float64
        Y = check_matrix(Y, "Y", expected_dim=sol.kernel.shape[1])
        return (Y @ sol.inverse + sol.shift).astype(out_dtype, copy=False)

    def to_torch(self, dtype: Any = None):
        """An ``nn.Module`` computing :meth:`transform` (in ``dtype``, float64 by default)."""
        from ._torch import AffineMap

        sol = self._solution()
        return AffineMap(sol.shift, sol.kernel, dtype)
