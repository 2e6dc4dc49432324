"""The pooling protocol: how a sentence vector is read off one forward pass (layer 4)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...errors import IsotropyError

__all__ = ["Pooling", "ForwardOutput", "ModelInfo", "PoolingContext", "masked_mean", "weighted_mean", "NORMS"]


@dataclass(frozen=True)
class ModelInfo:
    """What a pooling may need to know about the model (and its tokenizer) before it runs."""

    name: str
    num_hidden_states: int  # embeddings + transformer layers
    has_pooler: bool
    num_attention_heads: int | None = None
    mask_token: str | None = None  # the tokenizer's mask token, None when it has none


@dataclass
class ForwardOutput:
    """One forward pass, as the poolings see it (torch tensors).

    ``hidden_states`` holds every layer's output when some pooling asked for them
    (index 0 = embeddings, -1 = last layer), else only the last layer; ``attentions``
    (one ``batch x heads x seq x seq`` tensor per transformer layer) and ``pooler_output``
    are present only when asked for.
    """

    hidden_states: tuple[Any, ...]
    attention_mask: Any
    input_ids: Any = None
    pooler_output: Any = None
    attentions: tuple[Any, ...] | None = None


@dataclass
class PoolingContext:
    """What :meth:`Pooling.state` may read to compute its constants, once per encoder.

    ``forward(input_ids, attention_mask, position_ids)`` runs the model on int64 numpy
    arrays (0-based positions) and returns the last layer's states (float32 numpy); it is
    None where no model can be run (an ONNX graph, whose pooling constants are inside it).
    """

    tokenizer: Any
    max_length: int
    model_name: str
    token_stats: Any = None  # a TokenFrequencies, for the poolings that weight tokens by frequency
    forward: Callable[..., Any] | None = None


class Pooling:
    """Base of every pooling. A subclass sets what the forward pass must return and computes
    the vector in :meth:`__call__`; :meth:`validate` rejects a model it cannot run on.

    A pooling that reads something besides the forward pass declares it:

    * ``template`` -- the input is the sentence inside this prompt template, not the plain
      sentence, so it needs its own tokenisation and forward pass (:mod:`.prompt`);
    * ``needs_attentions`` -- attention weights, which only the eager attention path gives
      (the encoder runs such poolings in a pass of their own, so the others keep the fast one);
    * ``needs_token_stats`` -- a fitted :class:`~isotropy.encoders.token_stats.TokenFrequencies`;
    * :meth:`state` -- constant arrays computed once per encoder (a weight per token id, the
      template's own vector, ...), handed back to :meth:`__call__` as torch tensors and stored
      as buffers by the exports, so one code path computes the vector everywhere.

    Poolings are values: two with the same ``name`` are the same pooling.
    """

    name: str = ""
    kind: str = ""  # the family (cls, pooler, avg, ...), for exporters that rebuild it
    layers: tuple[int, ...] = ()  # hidden-state indices read, when the family reads layers
    needs_hidden_states: bool = False  # every layer, not only the last
    needs_attentions: bool = False
    needs_pooler: bool = False
    needs_token_stats: bool = False
    template: str | None = None

    def validate(self, model: ModelInfo) -> None:
        """Raise IsotropyError when ``model`` cannot give what this pooling reads."""

    def state(self, ctx: PoolingContext) -> dict[str, Any]:
        """Constant numpy arrays this pooling reads besides the forward pass ({} for most)."""
        return {}

    def __call__(self, out: ForwardOutput, state: dict[str, Any] | None = None):  # pragma: no cover - abstract
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pooling) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"Pooling({self.name!r})"

    def resolve_layers(self, num_hidden_states: int) -> tuple[int, ...]:
        """``layers`` made non-negative and checked against the model's depth."""
        out = []
        for i in self.layers:
            j = i + num_hidden_states if i < 0 else i
            if not 0 <= j < num_hidden_states:
                raise IsotropyError(
                    f"pooling {self.name!r} reads hidden state {i}, but the model has only "
                    f"{num_hidden_states} (0 = embeddings .. {num_hidden_states - 1} = last layer)"
                )
            out.append(j)
        return tuple(out)


def masked_mean(states, attention_mask, weights=None):
    """Average of token states over the real tokens (padding never counts), optionally weighted."""
    mask = attention_mask.unsqueeze(-1).to(states.dtype)
    if weights is not None:
        mask = mask * weights.unsqueeze(-1).to(states.dtype)
    return (states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-12 if weights is not None else 1.0)


# What a token-weighted average divides its weighted sum by.
NORMS = ("tokens", "weights", "none")


def weighted_mean(states, attention_mask, weights, norm: str, counted=None):
    """``sum_i w_i h_i / Z`` over the real tokens, ``Z`` per ``norm``:

    * ``tokens``: the number of tokens counted (``counted``, a 0/1 mask; default every real
      token) -- SIF's code divides by the number of words, not by the sum of the weights;
    * ``weights``: the sum of the weights, a weighted mean on the same scale as an average;
    * ``none``: no division, the weighted sum (Ditto's code).
    """
    mask = attention_mask.to(states.dtype)
    w = weights.to(states.dtype) * mask
    total = (states * w.unsqueeze(-1)).sum(dim=1)
    if norm == "none":
        return total
    if norm == "weights":
        return total / w.sum(dim=1, keepdim=True).clamp(min=1e-12)
    n = (mask if counted is None else counted.to(states.dtype) * mask).sum(dim=1, keepdim=True)
    return total / n.clamp(min=1.0)


def parse_options(spec: str, given: str, allowed: dict[str, type], example: str) -> dict[str, Any]:
    """``key=value,key=value`` after a family's colon, each value converted by ``allowed[key]``."""
    out: dict[str, Any] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        key, eq, value = (s.strip() for s in part.partition("="))
        if not eq or key not in allowed:
            raise IsotropyError(
                f"pooling {given!r}: {part!r} is not an option; give {', '.join(k + '=...' for k in allowed)}, e.g. {example!r}"
            )
        if key in out:
            raise IsotropyError(f"pooling {given!r} sets {key} twice")
        try:
            out[key] = allowed[key](value)
        except ValueError:
            raise IsotropyError(f"pooling {given!r}: {key}={value!r} is not a valid {allowed[key].__name__}") from None
    return out
