"""The poolings of the papers: first token, pooler output, averages over layers.

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

from ...errors import IsotropyError
from .base import ForwardOutput, ModelInfo, Pooling, masked_mean

__all__ = ["Cls", "Pooler", "LayersAvg", "FIXED", "layers_avg"]


class Cls(Pooling):
    name = kind = "cls"
    layers = (-1,)

    def __call__(self, out: ForwardOutput, state=None):
        return out.hidden_states[-1][:, 0]


class Pooler(Pooling):
    name = kind = "pooler"
    needs_pooler = True

    def validate(self, model: ModelInfo) -> None:
        if not model.has_pooler:
            raise IsotropyError(f"model {model.name} has no pooler layer, so pooling 'pooler' is unavailable; use 'cls'")

    def __call__(self, out: ForwardOutput, state=None):
        if out.pooler_output is None:
            raise IsotropyError("this model has no pooler output; use 'cls' for the first token's state")
        return out.pooler_output


class LayersAvg(Pooling):
    """Mean over hidden-state ``layers`` of each layer's mask-aware token average."""

    kind = "avg"

    def __init__(self, name: str, layers: tuple[int, ...]) -> None:
        self.name, self.layers = name, tuple(layers)
        self.needs_hidden_states = self.layers != (-1,)

    def validate(self, model: ModelInfo) -> None:
        self.resolve_layers(model.num_hidden_states)

    def __call__(self, out: ForwardOutput, state=None):
        hidden = out.hidden_states
        layers = (len(hidden) - 1,) if self.layers == (-1,) else self.resolve_layers(len(hidden))
        total = masked_mean(hidden[layers[0]], out.attention_mask)
        for i in layers[1:]:
            total = total + masked_mean(hidden[i], out.attention_mask)
        return total / len(layers)


FIXED: dict[str, Pooling] = {
    "cls": Cls(),
    "pooler": Pooler(),
    "last-avg": LayersAvg("last-avg", (-1,)),
    "first-last-avg": LayersAvg("first-last-avg", (1, -1)),
    "embed-last-avg": LayersAvg("embed-last-avg", (0, -1)),
    "last2-avg": LayersAvg("last2-avg", (-2, -1)),
}


def layers_avg(spec: str, given: str) -> Pooling:
    """``layers-avg:I,J,...`` over any hidden-state indices."""
    try:
        layers = tuple(int(part) for part in spec.split(",") if part.strip())
    except ValueError:
        layers = ()
    if not layers:
        raise IsotropyError(f"pooling {given!r}: give hidden-state indices after the colon, e.g. 'layers-avg:0,1,-1'")
    if len(set(layers)) != len(layers):
        raise IsotropyError(f"pooling {given!r} repeats a layer index")
    return LayersAvg("layers-avg:" + ",".join(map(str, layers)), layers)
