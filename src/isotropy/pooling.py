"""Poolings: how a sentence vector is read off a transformer's hidden states.

Hidden-state indices follow transformers' ``output_hidden_states``: 0 is the
embedding layer's output, 1 the first transformer layer, -1 the last.

=================  ===========================================================  =========================================
option             what it computes                                             name in the papers' code
=================  ===========================================================  =========================================
``cls``            last layer's hidden state at the first token                 BERT-whitening "cls"
``pooler``         the model's pooler output (tanh dense over CLS)              BERT-flow "cls"
``last-avg``       mask-aware average of the last layer's tokens                "last_avg" / "avg" (both papers);
                                                                                sentence-transformers mean pooling
``first-last-avg`` mean of (first transformer layer's token average,            BERT-whitening "first_last_avg";
                   last layer's token average)                                  BERT-flow "last2avg" (its loop reads
                                                                                layers [-0] and [-1]: first and last)
``embed-last-avg`` the same with the embedding layer instead of layer 1         (the "first" of some re-implementations)
``last2-avg``      average of the last two transformer layers                   what the name "last2avg" says
``layers-avg:I,J`` average over any set of hidden-state indices                 (generalisation)
=================  ===========================================================  =========================================

Averages never count padding: each layer's tokens are averaged under the
attention mask, then the per-layer averages are averaged (the same as averaging
layers first, since the mask is shared).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._io import IsotropyError

POOLINGS: tuple[str, ...] = (
    "cls",
    "pooler",
    "last-avg",
    "first-last-avg",
    "embed-last-avg",
    "last2-avg",
    "layers-avg:I,J,...",
)

# Spellings users bring from the papers' code and from sentence-transformers.
_ALIASES = {
    "mean": "last-avg",
    "avg": "last-avg",
    "last_avg": "last-avg",
    "last-average": "last-avg",
    "first_last_avg": "first-last-avg",
    "first-last-average": "first-last-avg",
    "embed_last_avg": "embed-last-avg",
    "last2_avg": "last2-avg",
}


@dataclass(frozen=True)
class Pooling:
    """A parsed pooling: ``kind`` is ``cls``, ``pooler`` or ``avg`` over hidden-state ``layers``."""

    name: str
    kind: str
    layers: tuple[int, ...] = ()

    @property
    def needs_hidden_states(self) -> bool:
        return self.kind == "avg" and self.layers != (-1,)

    def resolve_layers(self, num_hidden_states: int) -> tuple[int, ...]:
        """Hidden-state indices made non-negative and checked against the model's depth."""
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


_FIXED = {
    "cls": Pooling("cls", "cls", (-1,)),
    "pooler": Pooling("pooler", "pooler"),
    "last-avg": Pooling("last-avg", "avg", (-1,)),
    "first-last-avg": Pooling("first-last-avg", "avg", (1, -1)),
    "embed-last-avg": Pooling("embed-last-avg", "avg", (0, -1)),
    "last2-avg": Pooling("last2-avg", "avg", (-2, -1)),
}


def parse_pooling(name: str | Pooling) -> Pooling:
    """Parse a pooling name; an unknown one raises an error listing the valid ones."""
    if isinstance(name, Pooling):
        return name
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key in _FIXED:
        return _FIXED[key]
    if key == "last2avg":
        raise IsotropyError(
            "pooling 'last2avg' is ambiguous: BERT-flow's code uses that name for the first and last "
            "layers ('first-last-avg'); for the last two layers use 'last2-avg'"
        )
    if key.startswith("layers-avg:") or key.startswith("layers_avg:"):
        spec = key.split(":", 1)[1]
        try:
            layers = tuple(int(part) for part in spec.split(",") if part.strip())
        except ValueError:
            layers = ()
        if not layers:
            raise IsotropyError(
                f"pooling {name!r}: give hidden-state indices after the colon, e.g. 'layers-avg:0,1,-1'"
            )
        if len(set(layers)) != len(layers):
            raise IsotropyError(f"pooling {name!r} repeats a layer index")
        return Pooling("layers-avg:" + ",".join(map(str, layers)), "avg", layers)
    raise IsotropyError(f"unknown pooling {name!r}; valid poolings: {', '.join(POOLINGS)}")


def pool(pooling: Pooling, hidden_states, attention_mask, pooler_output=None):
    """Compute one pooling from a forward pass's outputs (torch tensors).

    ``hidden_states`` is the tuple of every layer's output (or a one-element tuple
    holding the last layer when only that was requested).
    """
    import torch

    if pooling.kind == "cls":
        return hidden_states[-1][:, 0]
    if pooling.kind == "pooler":
        if pooler_output is None:
            raise IsotropyError("this model has no pooler output; use 'cls' for the first token's state")
        return pooler_output
    mask = attention_mask.unsqueeze(-1).to(hidden_states[-1].dtype)
    counts = mask.sum(dim=1).clamp(min=1.0)
    if pooling.layers == (-1,):
        layers: tuple[int, ...] = (len(hidden_states) - 1,)
    else:
        layers = pooling.resolve_layers(len(hidden_states))
    total = torch.zeros_like(hidden_states[-1][:, 0])
    for i in layers:
        total += (hidden_states[i] * mask).sum(dim=1) / counts
    return total / len(layers)
