"""PromptBERT's poolings (Jiang et al., EMNLP 2022): ``prompt`` and ``prompt-denoised``.

The sentence is placed in a template -- the paper's default for BERT without fine-tuning is
``This sentence : "[X]" means [MASK] .`` (kongds/Prompt-BERT ``run.sh`` 47-55) -- and the
vector is the last layer's hidden state at the mask token (``evaluation.py`` 293-294).
``prompt:TEMPLATE`` / ``prompt-denoised:TEMPLATE`` take any template holding ``[X]`` (where
the sentence goes) and ``[MASK]`` (the tokenizer's mask token, however it is spelled;
``<mask>`` is read the same). Any model whose tokenizer has a mask token runs them.

Token ids are concatenated, as the paper's training code does (``train.py`` 673-699):
``[CLS] + prefix + sentence + suffix + [SEP]`` (the tokenizer's own special tokens), the
sentence alone cut to fit ``max_length``, so the template is never truncated away. The
mask's position follows from each row's length (``prefix`` and ``suffix`` have fixed
lengths), so a sentence that itself spells ``[MASK]`` cannot move it. The paper's
evaluation instead spliced strings and appended '.' to a sentence not ending in
punctuation (``evaluation.py`` 201); nothing is appended here.

``prompt-denoised`` subtracts the template's own vector, the paper's template denoising
(``evaluation.py`` ``get_delta`` 47-70, used at 297-302): the template with an empty
sentence is run with the position ids its tokens have when a sentence of ``n`` tokens sits
in it (the suffix shifted by ``n``), and its mask vector is subtracted from that of every
sentence of ``n`` tokens. Those vectors, one per ``n`` from 0 to the room ``max_length``
leaves, are computed once per encoder (:meth:`Prompt.state`) and travel with the exports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import IsotropyError
from .base import ForwardOutput, ModelInfo, Pooling, PoolingContext

__all__ = ["Prompt", "PromptLayout", "DEFAULT_TEMPLATE", "DEFAULTS", "prompt", "prompt_denoised", "prompt_layout"]

DEFAULT_TEMPLATE = 'This sentence : "[X]" means [MASK] .'
SLOT = "[X]"
MASKS = ("[MASK]", "<mask>")
EXAMPLE = f"prompt:{DEFAULT_TEMPLATE}"
DENOISE_BATCH = 64  # template-only rows per forward pass when computing the template vectors


def check_template(template: str, given: str) -> str:
    if template.count(SLOT) != 1:
        what = "no [X] (where the sentence goes)" if SLOT not in template else "[X] more than once"
        raise IsotropyError(f"pooling {given!r}: the template has {what}; e.g. {EXAMPLE!r}")
    masks = sum(template.count(m) for m in MASKS)
    if masks != 1:
        what = "no [MASK] (whose hidden state is the vector)" if masks == 0 else "more than one [MASK]"
        raise IsotropyError(f"pooling {given!r}: the template has {what}; e.g. {EXAMPLE!r}")
    return template


@dataclass(frozen=True)
class PromptLayout:
    """A template tokenised: ``head`` ids (special tokens + prefix), ``tail`` ids (suffix +
    special tokens), and where the mask is (``mask_in_head``: index in ``head``, else in ``tail``)."""

    head: tuple[int, ...]
    tail: tuple[int, ...]
    mask_index: int
    mask_in_head: bool
    token_types: bool  # the tokenizer makes token_type_ids (all 0 here: one segment)

    def room(self, max_length: int, given: str = "prompt") -> int:
        """Sentence tokens that fit beside the template in ``max_length``."""
        room = int(max_length) - len(self.head) - len(self.tail)
        if room < 1:
            raise IsotropyError(
                f"pooling {given!r}: the template takes {len(self.head) + len(self.tail)} tokens, so max_length "
                f"{max_length} leaves no room for the sentence; raise max_length or shorten the template"
            )
        return room

    def positions(self) -> np.ndarray:
        """``[base, shift, template length]``: the mask sits at ``base + shift * n`` in a row of ``n`` sentence tokens."""
        if self.mask_in_head:
            return np.array([self.mask_index, 0, len(self.head) + len(self.tail)], dtype=np.int64)
        return np.array([len(self.head) + self.mask_index, 1, len(self.head) + len(self.tail)], dtype=np.int64)

    def wrap(self, tokenizer, sentences: list[str], max_length: int, given: str = "prompt"):
        """``(ids per sentence, token types or None)``: head + sentence cut to fit + tail."""
        room = self.room(max_length, given)
        enc = tokenizer(sentences, add_special_tokens=False, truncation=True, max_length=room, return_attention_mask=False)
        head, tail = list(self.head), list(self.tail)
        ids = [head + s[:room] + tail for s in enc["input_ids"]]
        return ids, ([[0] * len(row) for row in ids] if self.token_types else None)


def _split_specials(tokenizer) -> tuple[list[int], list[int]]:
    """The special tokens the tokenizer puts before and after one sentence ([CLS] / [SEP], <s> / </s>)."""
    inner = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a")["input_ids"]
    for i in range(len(full) - len(inner) + 1):
        if full[i : i + len(inner)] == inner:
            return full[:i], full[i + len(inner) :]
    return [], []  # pragma: no cover - a tokenizer that rewrites the text when adding specials


def prompt_layout(tokenizer, template: str, model_name: str, given: str) -> PromptLayout:
    """Tokenise ``template`` with ``tokenizer``; a tokenizer without a mask token is one clear error."""
    mask = getattr(tokenizer, "mask_token", None)
    mask_id = getattr(tokenizer, "mask_token_id", None)
    if mask is None or mask_id is None:
        raise IsotropyError(
            f"pooling {given!r} reads the hidden state at the mask token, but the tokenizer of model {model_name} has "
            f"no mask token; use a masked-language model (BERT, RoBERTa, ...) or another pooling"
        )
    for m in MASKS:
        template = template.replace(m, mask)
    prefix, _, suffix = template.partition(SLOT)
    before, after = _split_specials(tokenizer)
    head = before + tokenizer(prefix, add_special_tokens=False)["input_ids"]
    tail = tokenizer(suffix, add_special_tokens=False)["input_ids"] + after
    where = [(True, i) for i, t in enumerate(head) if t == mask_id] + [(False, i) for i, t in enumerate(tail) if t == mask_id]
    if len(where) != 1:  # pragma: no cover - check_template guarantees one placeholder
        raise IsotropyError(f"pooling {given!r}: the template tokenises to {len(where)} mask tokens, not one")
    types = "token_type_ids" in getattr(tokenizer, "model_input_names", ())
    return PromptLayout(tuple(head), tuple(tail), where[0][1], where[0][0], types)


class Prompt(Pooling):
    """The last layer's state at the template's mask token (minus the template's own, when denoised)."""

    kind = "prompt"
    layers = (-1,)

    def __init__(self, template: str = DEFAULT_TEMPLATE, denoised: bool = False) -> None:
        self.template, self.denoised = template, bool(denoised)
        family = "prompt-denoised" if denoised else "prompt"
        self.name = family if template == DEFAULT_TEMPLATE else f"{family}:{template}"

    def validate(self, model: ModelInfo) -> None:
        if model.mask_token is None:
            raise IsotropyError(
                f"pooling {self.name!r} reads the hidden state at the mask token, but the tokenizer of model {model.name} "
                f"has no mask token; use a masked-language model (BERT, RoBERTa, ...) or another pooling"
            )

    def layout(self, tokenizer, model_name: str) -> PromptLayout:
        return prompt_layout(tokenizer, self.template, model_name, self.name)

    def state(self, ctx: PoolingContext) -> dict[str, Any]:
        layout = self.layout(ctx.tokenizer, ctx.model_name)
        out = {"positions": layout.positions()}
        if self.denoised:
            out["template"] = self._template_vectors(layout, ctx)
        return out

    def _template_vectors(self, layout: PromptLayout, ctx: PoolingContext) -> np.ndarray:
        """Row n: the mask vector of the template alone, its tail at the positions it has after n sentence tokens."""
        if ctx.forward is None:  # pragma: no cover - the encoders give a forward wherever a model runs
            raise IsotropyError(f"pooling {self.name!r} needs the model to compute the template's vector")
        room = layout.room(ctx.max_length, self.name)
        head, tail = len(layout.head), len(layout.tail)
        ids = np.array(layout.head + layout.tail, dtype=np.int64)
        mask_at = layout.mask_index + (0 if layout.mask_in_head else head)
        rows = []
        for start in range(0, room + 1, DENOISE_BATCH):
            shifts = np.arange(start, min(room + 1, start + DENOISE_BATCH), dtype=np.int64)
            positions = np.tile(np.arange(head + tail, dtype=np.int64), (len(shifts), 1))
            positions[:, head:] += shifts[:, None]
            batch_ids = np.tile(ids, (len(shifts), 1))
            last = ctx.forward(batch_ids, np.ones_like(batch_ids), positions)
            rows.append(np.asarray(last[:, mask_at], dtype=np.float32))
        return np.concatenate(rows)

    def __call__(self, out: ForwardOutput, state: dict[str, Any] | None = None):
        h = out.hidden_states[-1]
        pos = state["positions"].to(out.attention_mask.device)
        n = out.attention_mask.sum(dim=1).to(pos.dtype) - pos[2]  # sentence tokens in each row
        at = (pos[0] + pos[1] * n).clamp(min=0, max=h.shape[1] - 1)
        vec = h.gather(1, at.view(-1, 1, 1).expand(-1, 1, h.shape[-1])).squeeze(1)
        if self.denoised:
            table = state["template"].to(device=h.device, dtype=h.dtype)
            vec = vec - table[n.clamp(min=0, max=table.shape[0] - 1)]
        return vec


def _family(denoised: bool, given: str) -> Pooling:
    template = given.strip().partition(":")[2]
    return Prompt(check_template(template, given), denoised)


def prompt(spec: str, given: str) -> Pooling:
    """``prompt:TEMPLATE`` (the template keeps its case: ``given`` is read, not the lower-cased ``spec``)."""
    return _family(False, given)


def prompt_denoised(spec: str, given: str) -> Pooling:
    """``prompt-denoised:TEMPLATE``."""
    return _family(True, given)


DEFAULTS: dict[str, Pooling] = {"prompt": Prompt(), "prompt-denoised": Prompt(denoised=True)}
