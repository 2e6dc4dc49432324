"""Poolings: how a sentence vector is read off a transformer's forward pass (layer 4).

Each pooling is a :class:`~.base.Pooling`: it says what the forward pass must return
(every layer's hidden states, attentions, the pooler output) and computes the vector
from it. The registry below maps the names users type to poolings; adding a pooling is
one module under ``encoders/poolings/`` plus one entry in :data:`FAMILIES` (a name, or a
``prefix:`` for a parametrised family such as ``layers-avg:I,J``).
"""

from __future__ import annotations

import importlib

from ...errors import IsotropyError
from .base import ForwardOutput, ModelInfo, Pooling, PoolingContext, masked_mean

__all__ = [
    "POOLINGS",
    "FAMILIES",
    "Pooling",
    "ForwardOutput",
    "ModelInfo",
    "PoolingContext",
    "parse_pooling",
    "pool",
    "masked_mean",
]

# The names shown in help texts and errors, in the order users meet them.
POOLINGS: tuple[str, ...] = (
    "cls",
    "pooler",
    "last-avg",
    "first-last-avg",
    "embed-last-avg",
    "last2-avg",
    "layers-avg:I,J,...",
    "sif[:a=A]",
    "idf",
    "prompt[:TEMPLATE]",
    "prompt-denoised[:TEMPLATE]",
    "ditto[:layer=L,head=H]",
)

# name -> "module:attribute" (a Pooling instance), or "prefix:" -> "module:factory(spec, given)".
FAMILIES: dict[str, str] = {
    "cls": "isotropy.encoders.poolings.standard:FIXED",
    "pooler": "isotropy.encoders.poolings.standard:FIXED",
    "last-avg": "isotropy.encoders.poolings.standard:FIXED",
    "first-last-avg": "isotropy.encoders.poolings.standard:FIXED",
    "embed-last-avg": "isotropy.encoders.poolings.standard:FIXED",
    "last2-avg": "isotropy.encoders.poolings.standard:FIXED",
    "layers-avg:": "isotropy.encoders.poolings.standard:layers_avg",
    "sif": "isotropy.encoders.poolings.weighted:DEFAULTS",
    "sif:": "isotropy.encoders.poolings.weighted:sif",
    "idf": "isotropy.encoders.poolings.weighted:DEFAULTS",
    "idf:": "isotropy.encoders.poolings.weighted:idf",
    "prompt": "isotropy.encoders.poolings.prompt:DEFAULTS",
    "prompt:": "isotropy.encoders.poolings.prompt:prompt",
    "prompt-denoised": "isotropy.encoders.poolings.prompt:DEFAULTS",
    "prompt-denoised:": "isotropy.encoders.poolings.prompt:prompt_denoised",
    "ditto": "isotropy.encoders.poolings.ditto:DEFAULTS",
    "ditto:": "isotropy.encoders.poolings.ditto:ditto",
}

# Spellings users bring from the papers' code and from sentence-transformers.
ALIASES = {
    "mean": "last-avg",
    "avg": "last-avg",
    "last_avg": "last-avg",
    "last-average": "last-avg",
    "first_last_avg": "first-last-avg",
    "first-last-average": "first-last-avg",
    "embed_last_avg": "embed-last-avg",
    "last2_avg": "last2-avg",
    "layers_avg": "layers-avg",
    "prompt_denoised": "prompt-denoised",
    "promptbert": "prompt",
}


def _target(ref: str):
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def parse_pooling(name: str | Pooling) -> Pooling:
    """The pooling a name stands for; an unknown name raises an error listing the valid ones."""
    if isinstance(name, Pooling):
        return name
    given = str(name)
    key = given.strip().lower()
    head, colon, spec = key.partition(":")
    key = ALIASES.get(head, head) + colon + spec
    if key == "last2avg":
        raise IsotropyError(
            "pooling 'last2avg' is ambiguous: BERT-flow's code uses that name for the first and last "
            "layers ('first-last-avg'); for the last two layers use 'last2-avg'"
        )
    if colon:
        family = FAMILIES.get(key.partition(":")[0] + ":")
        if family is not None:
            return _target(family)(spec, given)
    elif key in FAMILIES:
        target = _target(FAMILIES[key])
        return target[key] if isinstance(target, dict) else target
    raise IsotropyError(f"unknown pooling {given!r}; valid poolings: {', '.join(POOLINGS)}")


def pool(pooling: Pooling, hidden_states, attention_mask, pooler_output=None, *, input_ids=None, attentions=None, state=None):
    """Compute one pooling from a forward pass's outputs (torch tensors).

    ``hidden_states`` is the tuple of every layer's output (or a one-element tuple
    holding the last layer when only that was requested); ``input_ids``, ``attentions``
    and ``state`` (the pooling's constants as tensors: :meth:`Pooling.state`) are needed
    by the poolings that read them.
    """
    out = ForwardOutput(
        tuple(hidden_states),
        attention_mask,
        input_ids=input_ids,
        pooler_output=pooler_output,
        attentions=None if attentions is None else tuple(attentions),
    )
    return parse_pooling(pooling)(out, state)
