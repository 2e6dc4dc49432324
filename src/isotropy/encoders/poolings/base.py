"""The pooling protocol: how a sentence vector is read off one forward pass (layer 3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...errors import IsotropyError

__all__ = ["Pooling", "ForwardOutput", "ModelInfo", "masked_mean"]


@dataclass(frozen=True)
class ModelInfo:
    """What a pooling may need to know about the model before it runs."""

    name: str
    num_hidden_states: int  # embeddings + transformer layers
    has_pooler: bool


@dataclass
class ForwardOutput:
    """One forward pass, as the poolings see it (torch tensors).

    ``hidden_states`` holds every layer's output when some pooling asked for them
    (index 0 = embeddings, -1 = last layer), else only the last layer; ``attentions``
    and ``pooler_output`` are present only when asked for.
    """

    hidden_states: tuple[Any, ...]
    attention_mask: Any
    input_ids: Any = None
    pooler_output: Any = None
    attentions: tuple[Any, ...] | None = None


class Pooling:
    """Base of every pooling. A subclass sets what the forward pass must return and computes
    the vector in :meth:`__call__`; :meth:`validate` rejects a model it cannot run on.

    Poolings are values: two with the same ``name`` are the same pooling.
    """

    name: str = ""
    kind: str = ""  # the family (cls, pooler, avg, ...), for exporters that rebuild it
    layers: tuple[int, ...] = ()  # hidden-state indices read, when the family reads layers
    needs_hidden_states: bool = False  # every layer, not only the last
    needs_attentions: bool = False
    needs_pooler: bool = False

    def validate(self, model: ModelInfo) -> None:
        """Raise IsotropyError when ``model`` cannot give what this pooling reads."""

    def __call__(self, out: ForwardOutput):  # pragma: no cover - abstract
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
