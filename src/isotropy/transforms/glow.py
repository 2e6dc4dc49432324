"""The Glow normalizing flow of BERT-flow (Li et al., EMNLP 2020) as plain ``torch.nn`` modules.

The architecture is the one of the paper's code (``glow_1x1.py``, adapted from
tensor2tensor's ``glow_ops``): each d-dimensional vector is a 1x1 "image" with d
channels, fed to a multi-scale Glow of ``levels`` levels of ``depth`` steps.

* step = actnorm (per-channel ``(x + b) * exp(3 * logs)``, data-dependent
  initialisation on the first batch: zero mean, unit variance)
  -> invertible 1x1 convolution, i.e. a d x d matrix ``W = P L (U + diag(sign * exp(log_s)))``
  in LU form (P fixed, initialised from a random rotation)
  -> coupling: the second half of the channels is shifted (``additive``, the
  paper's choice) or shifted and scaled by ``sigmoid(h + 2)`` (``affine``, Glow's
  formula) by a network of the first half: linear -> actnorm -> ReLU -> linear ->
  actnorm -> ReLU -> zero-initialised linear (so an additive step starts as the
  identity; an affine one starts as the scale ``sigmoid(2)``, as in Glow).
  A 3x3 convolution on a 1x1 image is a linear map, which is why the layers here
  are ``x @ W``; tensor2tensor's edge-padding channel reduces to a bias there.
* between levels the last ``c // 2`` channels are factored out with a learned
  conditional Gaussian prior ``N(mean(x1), exp(log_scale(x1)))`` whose
  parameters come from a zero-initialised linear map of the kept channels; the
  factored-out part enters ``z`` standardised, ``eps = (x2 - mean) / scale``,
  as in the paper's ``self.z = concat(eps + [z_top])``.
* the last level's output has a standard normal prior (the issue's choice; the
  paper's code can also learn the top prior).
* ``z`` concatenates every ``eps`` with the top latent: ``dim z == dim u``.
  An odd number of channels is split as ``c - c // 2`` kept / ``c // 2`` moved.

Library evaluation (why the layers are written here by hand). ``zuko`` 1.6
(installed) offers ``LULinearTransform`` (``L U`` without the permutation
``P`` nor a sign/log-scale diagonal, and it rebuilds ``L @ U`` on every call),
additive and monotonic-affine coupling transforms (its affine scale is a soft
clip, not Glow's ``sigmoid(h + 2)``), but no actnorm, no data-dependent
initialisation and no multi-scale split: its flows are flat compositions of
``torch.distributions.Transform`` objects with one base distribution.
``nflows`` has ``ActNorm`` (data-dependent), ``LULinear`` and a
``MultiscaleCompositeTransform``, but its factored-out parts go straight to the
base distribution (no learned conditional prior), and it has had no release
since 2020. ``normflows`` has ``ActNorm``, ``Invertible1x1Conv(use_lu=True)``
and ``MultiscaleFlow``, but its per-level base distributions (``GlowBase``) are
not conditioned on the kept half either, and its Glow blocks are built for
images (convolutions over height x width). Building the paper's split on top
of any of them would mean rewriting their multi-scale plumbing, so the ~200
lines below are plain ``torch.nn`` modules that each return ``(output,
log|det J|)`` and are checked against autograd Jacobians in the tests.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..errors import IsotropyError

__all__ = [
    "Glow",
    "ActNorm",
    "InvConvLU",
    "ZeroLinear",
    "CouplingNet",
    "Coupling",
    "FlowStep",
    "Split",
    "level_channels",
    "min_dim",
    "COUPLINGS",
]

COUPLINGS = ("additive", "affine")
LOGSCALE_FACTOR = 3.0  # Glow / tensor2tensor parametrise log-scales as 3 * logs
_LOG_2PI = math.log(2.0 * math.pi)


# --------------------------------------------------------------------------- layers


class ActNorm(nn.Module):
    """Per-channel affine map ``y = (x + bias) * exp(3 * logs)``, data-initialised.

    While ``ddi`` is true the next forward call first sets ``bias`` and ``logs`` so
    that its output has zero mean and unit (population) variance per channel.
    """

    def __init__(self, channels: int):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(channels))
        self.logs = nn.Parameter(torch.zeros(channels))
        self.ddi = False

    @torch.no_grad()
    def _initialize(self, x: torch.Tensor) -> None:
        mean = x.mean(dim=0)
        std = (x - mean).pow(2).mean(dim=0).sqrt()
        # A (near-)constant channel would get a scale of ~1e6 (Glow divides by std + 1e-6),
        # and the 1x1 convolutions then mix that amplified noise into every channel:
        # training diverges within ten steps. Real encoders have such channels
        # (all-MiniLM-L6-v2's cls vector has three, std < 1e-8), so the scale is
        # capped at 1 / (1e-3 x the largest channel std).
        std = torch.maximum(std, 1e-3 * std.max())
        self.bias.copy_(-mean)
        self.logs.copy_(torch.log(1.0 / (std + 1e-6)) / LOGSCALE_FACTOR)
        self.ddi = False

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.ddi:
            self._initialize(x)
        logs = self.logs * LOGSCALE_FACTOR
        return (x + self.bias) * torch.exp(logs), logs.sum().expand(x.shape[0])

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        return y * torch.exp(-self.logs * LOGSCALE_FACTOR) - self.bias


class InvConvLU(nn.Module):
    """Invertible 1x1 convolution ``y = x @ W`` with ``W = P L (U + diag(sign * exp(log_s)))``.

    ``P`` (a fixed permutation), ``L`` (unit lower triangular) and ``U`` come from
    the LU decomposition of a random rotation, as in Glow; log|det W| = sum(log_s).
    """

    def __init__(self, channels: int, generator: torch.Generator | None = None):
        super().__init__()
        q, _ = torch.linalg.qr(torch.randn(channels, channels, generator=generator, dtype=torch.float64))
        p, lower, upper = torch.linalg.lu(q)
        s = torch.diagonal(upper)
        self.register_buffer("perm", p.argmax(dim=0))  # (x @ P)[:, j] == x[:, perm[j]]
        self.register_buffer("sign_s", torch.sign(s).float())
        self.lower = nn.Parameter(torch.tril(lower, -1).float())
        self.upper = nn.Parameter(torch.triu(upper, 1).float())
        self.log_s = nn.Parameter(torch.log(s.abs()).float())

    def factors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The triangular factors ``L`` and ``U + diag``, built once per forward call."""
        eye = torch.eye(self.lower.shape[0], dtype=self.lower.dtype, device=self.lower.device)
        lower = torch.tril(self.lower, -1) + eye
        upper = torch.triu(self.upper, 1) + torch.diag(self.sign_s.to(self.log_s.dtype) * torch.exp(self.log_s))
        return lower, upper

    def weight(self) -> torch.Tensor:
        lower, upper = self.factors()
        return (lower @ upper)[torch.argsort(self.perm)]  # P @ (L U): row perm[j] of W is row j of L U

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logdet = self.log_s.sum().expand(x.shape[0])
        if x.shape[0] >= x.shape[1]:
            # Many rows (transform): one d x d product, then one n x d x d product.
            return x @ self.weight(), logdet
        # Few rows (a training batch): two n x d x d products beat building W (d^3).
        lower, upper = self.factors()
        return (x[:, self.perm] @ lower) @ upper, logdet

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        lower, upper = self.factors()
        a = torch.linalg.solve_triangular(upper, y, upper=True, left=False)
        b = torch.linalg.solve_triangular(lower, a, upper=False, left=False, unitriangular=True)
        return b[:, torch.argsort(self.perm)]


class ZeroLinear(nn.Module):
    """tensor2tensor's zero-initialised output layer: ``(x @ W + b) * exp(3 * logs)``."""

    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))
        self.logs = nn.Parameter(torch.zeros(n_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.weight + self.bias) * torch.exp(self.logs * LOGSCALE_FACTOR)


class CouplingNet(nn.Module):
    """linear -> actnorm -> ReLU -> linear -> actnorm -> ReLU -> zero linear (tensor2tensor's conv_stack)."""

    def __init__(self, n_in: int, hidden: int, n_out: int, generator: torch.Generator | None = None):
        super().__init__()
        # tensor2tensor's default conv initialiser: N(0, 0.05); no bias (actnorm follows).
        self.w1 = nn.Parameter(torch.randn(n_in, hidden, generator=generator) * 0.05)
        self.norm1 = ActNorm(hidden)
        self.w2 = nn.Parameter(torch.randn(hidden, hidden, generator=generator) * 0.05)
        self.norm2 = ActNorm(hidden)
        self.out = ZeroLinear(hidden, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.norm1(x @ self.w1)[0])
        h = torch.relu(self.norm2(h @ self.w2)[0])
        return self.out(h)


class Coupling(nn.Module):
    """Coupling layer: the last ``c // 2`` channels are shifted (and scaled) by a net of the first."""

    def __init__(self, channels: int, hidden: int, coupling: str = "additive", generator: torch.Generator | None = None):
        super().__init__()
        self.n_keep = channels - channels // 2
        self.affine = coupling == "affine"
        n_move = channels // 2
        self.net = CouplingNet(self.n_keep, hidden, n_move * (2 if self.affine else 1), generator)

    def _shift_scale(self, xa: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        h = self.net(xa)
        if not self.affine:
            return h, None
        return h[:, 0::2], h[:, 1::2]

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        xa, xb = x[:, : self.n_keep], x[:, self.n_keep :]
        shift, raw = self._shift_scale(xa)
        if raw is None:
            return torch.cat([xa, xb + shift], dim=1), x.new_zeros(x.shape[0])
        log_scale = nn.functional.logsigmoid(raw + 2.0)  # Glow: scale = sigmoid(h + 2)
        return torch.cat([xa, (xb + shift) * torch.exp(log_scale)], dim=1), log_scale.sum(dim=1)

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        ya, yb = y[:, : self.n_keep], y[:, self.n_keep :]
        shift, raw = self._shift_scale(ya)
        if raw is None:
            return torch.cat([ya, yb - shift], dim=1)
        return torch.cat([ya, yb * torch.exp(-nn.functional.logsigmoid(raw + 2.0)) - shift], dim=1)


class FlowStep(nn.Module):
    """One Glow step: actnorm -> invertible 1x1 convolution (LU) -> coupling."""

    def __init__(self, channels: int, hidden: int, coupling: str, generator: torch.Generator | None = None):
        super().__init__()
        self.actnorm = ActNorm(channels)
        self.invconv = InvConvLU(channels, generator)
        self.coupling = Coupling(channels, hidden, coupling, generator)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, ld1 = self.actnorm(x)
        x, ld2 = self.invconv(x)
        x, ld3 = self.coupling(x)
        return x, ld1 + ld2 + ld3

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        return self.actnorm.inverse(self.invconv.inverse(self.coupling.inverse(y)))


class Split(nn.Module):
    """Glow's split: factor out the last ``c // 2`` channels under a learned prior conditioned on the rest.

    ``forward`` maps ``x -> (x1, eps)`` with ``eps = (x2 - mean(x1)) / exp(log_scale(x1))``;
    its log|det J| is ``-sum(log_scale)``, so ``log N(eps) - sum(log_scale)`` is the
    conditional log-density ``log p(x2 | x1)`` that Glow's objective adds.
    """

    def __init__(self, channels: int):
        super().__init__()
        self.n_keep = channels - channels // 2
        self.prior = ZeroLinear(self.n_keep, 2 * (channels // 2))

    def _params(self, x1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.prior(x1)
        return h[:, 0::2], h[:, 1::2]

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x1, x2 = x[:, : self.n_keep], x[:, self.n_keep :]
        mean, log_scale = self._params(x1)
        return x1, (x2 - mean) * torch.exp(-log_scale), -log_scale.sum(dim=1)

    def inverse(self, x1: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
        mean, log_scale = self._params(x1)
        return torch.cat([x1, eps * torch.exp(log_scale) + mean], dim=1)


def level_channels(dim: int, levels: int) -> list[int]:
    """Channels entering each level (the split keeps ``c - c // 2``)."""
    out = [dim]
    for _ in range(levels - 1):
        out.append(out[-1] - out[-1] // 2)
    return out


class Glow(nn.Module):
    """Multi-scale Glow on d-channel 1x1 images; ``forward(x) -> (z, log|det J|)`` with ``dim z == d``."""

    def __init__(
        self,
        dim: int,
        levels: int = 2,
        depth: int = 3,
        hidden: int = 32,
        coupling: str = "additive",
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        self.dim = dim
        self.channels = level_channels(dim, levels)
        if self.channels[-1] < 2:
            raise IsotropyError(f"a {levels}-level flow needs vectors of at least {min_dim(levels)} dimensions, got {dim}")
        self.levels = nn.ModuleList(
            nn.ModuleList(FlowStep(c, hidden, coupling, generator) for _ in range(depth)) for c in self.channels
        )
        self.splits = nn.ModuleList(Split(c) for c in self.channels[:-1])

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logdet = x.new_zeros(x.shape[0])
        parts = []
        for i, steps in enumerate(self.levels):
            for step in steps:
                x, ld = step(x)
                logdet = logdet + ld
            if i < len(self.splits):
                x, eps, ld = self.splits[i](x)
                logdet = logdet + ld
                parts.append(eps)
        return torch.cat([*parts, x], dim=1), logdet

    def inverse(self, z: torch.Tensor) -> torch.Tensor:
        widths = [c // 2 for c in self.channels[:-1]] + [self.channels[-1]]
        parts = list(torch.split(z, widths, dim=1))
        x = parts[-1]
        for i in reversed(range(len(self.levels))):
            if i < len(self.splits):
                x = self.splits[i].inverse(x, parts[i])
            for step in reversed(self.levels[i]):
                x = step.inverse(x)
        return x

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """log p(x) per row, in nats: standard normal log-density of z plus log|det J|."""
        z, logdet = self(x)
        return -0.5 * (z.pow(2).sum(dim=1) + z.shape[1] * _LOG_2PI) + logdet

    @torch.no_grad()
    def data_init(self, x: torch.Tensor) -> None:
        """Data-dependent actnorm initialisation: one forward pass over ``x``."""
        for m in self.modules():
            if isinstance(m, ActNorm):
                m.ddi = True
        try:
            self(x)
        finally:
            for m in self.modules():
                if isinstance(m, ActNorm):
                    m.ddi = False


def min_dim(levels: int) -> int:
    d = 2
    while level_channels(d, levels)[-1] < 2:
        d += 1
    return d


# --------------------------------------------------------------------------- estimator
