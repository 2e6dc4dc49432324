"""Token-weighted averages of the last layer whose weights come from corpus frequencies: ``sif``, ``idf``.

=====================  =================================================================
option                 weight of token w (special tokens: 0)
=====================  =================================================================
``sif``                ``a / (a + p(w))``, p(w) its relative frequency in the fit corpus,
                       ``a = 1e-3`` (SIF, Arora et al. 2017); ``sif:a=3e-4`` sets a
``idf``                ``log((1 + N) / (1 + df(w))) + 1`` (smoothed inverse document frequency)
=====================  =================================================================

Frequencies are counted on a fit corpus with the encoder's own tokenizer (sub-word tokens):
a :class:`~isotropy.encoders.token_stats.TokenFrequencies`, fitted by
``Encoder.fit_pooling(sentences)`` or ``isotropy fit token-frequencies``, passed as
``Encoder(pooling_stats=...)`` / ``--pooling-stats``, and recorded by every artefact that
records the encoder.

What the weighted sum is divided by (``norm=``): SIF's code divides by the number of words,
not by the sum of the weights (PrincetonML/SIF ``src/SIF_embedding.py`` line 16,
``w[i,:].dot(We[x[i,:],:]) / np.count_nonzero(w[i,:])``). Both poolings do the same by
default (``norm=tokens``: the number of real, non-special tokens), so ``sif`` is the paper's
vector; ``norm=weights`` gives the weighted mean (``sum w h / sum w``, on the scale of
``last-avg`` whatever the sentence's words), ``norm=none`` the plain weighted sum. Cosine
similarity does not see the difference (one positive factor per sentence); centring,
whitening and SIF's common-component removal do. A sentence without any non-special token
(an empty line) falls back to the plain average of its special tokens, never a zero vector.
"""

from __future__ import annotations

from typing import Any

from ...errors import IsotropyError
from .base import NORMS, ForwardOutput, Pooling, PoolingContext, parse_options, weighted_mean

__all__ = ["FrequencyWeighted", "DEFAULTS", "sif", "idf", "DEFAULT_A"]

DEFAULT_A = 1e-3


class FrequencyWeighted(Pooling):
    """Average of the last layer's tokens weighted by a table of per-token weights (see the module docs)."""

    kind = "weighted"
    layers = (-1,)
    needs_token_stats = True

    def __init__(self, weighting: str, a: float = DEFAULT_A, norm: str = "tokens") -> None:
        self.weighting, self.a, self.norm = weighting, float(a), norm
        options = []
        if weighting == "sif" and self.a != DEFAULT_A:
            options.append(f"a={self.a:g}")
        if norm != "tokens":
            options.append(f"norm={norm}")
        self.name = weighting + (":" + ",".join(options) if options else "")

    def state(self, ctx: PoolingContext) -> dict[str, Any]:
        if ctx.token_stats is None:
            raise IsotropyError(
                f"pooling {self.name!r} needs token frequencies counted on a corpus: pass --pooling-stats FILE_OR_FOLDER "
                f"(Python: Encoder(..., pooling_stats=...) or encoder.fit_pooling(sentences))"
            )
        return {"weights": ctx.token_stats.weights(self.weighting, self.a, ctx.tokenizer)}

    def __call__(self, out: ForwardOutput, state: dict[str, Any] | None = None):
        import torch

        h = out.hidden_states[-1]
        mask = out.attention_mask.to(h.dtype)
        table = state["weights"].to(device=h.device, dtype=h.dtype)
        w = table[out.input_ids] * mask
        words = (w > 0).to(h.dtype)
        # a row of special tokens only (an empty sentence) is the plain average of those tokens
        empty = words.sum(dim=1, keepdim=True) == 0
        w = torch.where(empty, mask, w)
        words = torch.where(empty, mask, words)
        return weighted_mean(h, out.attention_mask, w, self.norm, counted=words)


def _family(weighting: str, spec: str, given: str) -> Pooling:
    allowed: dict[str, type] = {"a": float, "norm": str} if weighting == "sif" else {"norm": str}
    opts = parse_options(spec, given, allowed, f"{weighting}:{'a=1e-3,' if weighting == 'sif' else ''}norm=weights")
    norm = opts.get("norm", "tokens")
    if norm not in NORMS:
        raise IsotropyError(f"pooling {given!r}: norm must be one of {', '.join(NORMS)}, got {norm!r}")
    a = opts.get("a", DEFAULT_A)
    if not a > 0 or a == float("inf"):
        raise IsotropyError(f"pooling {given!r}: a must be a positive number (SIF uses 1e-3), got {a!r}")
    return FrequencyWeighted(weighting, a, norm)


def sif(spec: str, given: str) -> Pooling:
    """``sif:a=A,norm=N``."""
    return _family("sif", spec, given)


def idf(spec: str, given: str) -> Pooling:
    """``idf:norm=N``."""
    return _family("idf", spec, given)


DEFAULTS: dict[str, Pooling] = {"sif": FrequencyWeighted("sif"), "idf": FrequencyWeighted("idf")}
