"""Ditto (Chen et al., EMNLP 2023): tokens weighted by one attention head's attention to themselves.

Ditto's code (alibaba-damo-academy/SpokenNLP, ``ditto/evaluation_ditto.py`` 121-127, 150-155)
takes the diagonal of head ``head`` of layer ``layer``'s attention matrix
(``outputs.attentions[layer]``: 0 is the first transformer layer) -- the softmax weight of
each token on itself -- and weights the average of the embedding layer's output
(``hidden_states[0]``) and the last layer's by it, [CLS] and [SEP] included. Its defaults
for bert-base-uncased are ``layer=0, head=9`` (0-based; ``run_eval_ditto.sh`` 17-37; other
values for RoBERTa, ELECTRA and an SBERT model; the paper's code holds no search for them).
They are the defaults here too; ``ditto:layer=L,head=H`` sets others. The default model,
all-MiniLM-L6-v2, has 12 heads per layer, so head 9 exists; nobody published a choice for it.

Normalisation (``norm=``): Ditto's code sums without normalising. Here the default is the
weighted mean (``norm=weights``: divided by the sum of the weights), so a vector's scale does
not grow with the sentence's length and stays comparable to ``embed-last-avg``'s; cosine
similarity is the same either way (one positive factor per sentence), centring and whitening
are not. ``norm=none`` is the paper's sum, ``norm=tokens`` divides by the number of tokens.

Attention weights exist only on transformers' eager attention path: the encoder runs this
pooling in a pass of its own with the model switched to eager attention and back, so every
other pooling keeps the fast (sdpa) path.
"""

from __future__ import annotations

from typing import Any

from ...errors import IsotropyError
from .base import NORMS, ForwardOutput, ModelInfo, Pooling, parse_options, weighted_mean

__all__ = ["Ditto", "DEFAULTS", "ditto", "DEFAULT_LAYER", "DEFAULT_HEAD"]

DEFAULT_LAYER, DEFAULT_HEAD, DEFAULT_NORM = 0, 9, "weights"


class Ditto(Pooling):
    """Average of (embeddings + last layer) / 2 weighted by the diagonal of one attention head."""

    kind = "ditto"
    layers = (0, -1)
    needs_hidden_states = True
    needs_attentions = True

    def __init__(self, layer: int = DEFAULT_LAYER, head: int = DEFAULT_HEAD, norm: str = DEFAULT_NORM) -> None:
        self.layer, self.head, self.norm = int(layer), int(head), norm
        default = (self.layer, self.head, norm) == (DEFAULT_LAYER, DEFAULT_HEAD, DEFAULT_NORM)
        extra = "" if norm == DEFAULT_NORM else f",norm={norm}"
        self.name = "ditto" if default else f"ditto:layer={self.layer},head={self.head}{extra}"

    def validate(self, model: ModelInfo) -> None:
        n_layers = model.num_hidden_states - 1
        if not -n_layers <= self.layer < n_layers:
            raise IsotropyError(
                f"pooling {self.name!r} reads the attention of layer {self.layer}, but model {model.name} has "
                f"{n_layers} transformer layers (0 .. {n_layers - 1})"
            )
        heads = model.num_attention_heads
        if heads is not None and not 0 <= self.head < heads:
            raise IsotropyError(
                f"pooling {self.name!r} reads attention head {self.head}, but model {model.name} has {heads} heads "
                f"per layer (0 .. {heads - 1})"
            )

    def __call__(self, out: ForwardOutput, state: dict[str, Any] | None = None):
        if not out.attentions:
            raise IsotropyError(
                f"pooling {self.name!r} needs attention weights, but the forward pass returned none "
                f"(the model must run with eager attention)"
            )
        att = out.attentions[self.layer][:, self.head]  # batch x query x key
        diag = att.diagonal(dim1=-2, dim2=-1)  # each token's attention to itself
        hidden = out.hidden_states
        states = (hidden[0] + hidden[-1]) / 2
        return weighted_mean(states, out.attention_mask, diag, self.norm)


def ditto(spec: str, given: str) -> Pooling:
    """``ditto:layer=L,head=H,norm=N``."""
    opts = parse_options(spec, given, {"layer": int, "head": int, "norm": str}, "ditto:layer=0,head=9")
    norm = opts.get("norm", DEFAULT_NORM)
    if norm not in NORMS:
        raise IsotropyError(f"pooling {given!r}: norm must be one of {', '.join(NORMS)}, got {norm!r}")
    if opts.get("head", DEFAULT_HEAD) < 0:
        raise IsotropyError(f"pooling {given!r}: head must be 0 or more, got {opts['head']}")
    return Ditto(opts.get("layer", DEFAULT_LAYER), opts.get("head", DEFAULT_HEAD), norm)


DEFAULTS: dict[str, Pooling] = {"ditto": Ditto()}
