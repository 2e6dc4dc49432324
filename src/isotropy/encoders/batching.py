"""Batches of token ids for the forward passes (layer 4).

Sentences are tokenised once, without padding, sorted longest first and cut into batches
padded only to their own longest sentence, so short sentences never pay for long ones;
each batch carries the row indices its outputs go to, so results come back in input order.
A pooling that reads the sentence inside a prompt template (:mod:`.poolings.prompt`) gets
its own token ids: the template's, with the sentence cut to fit ``max_length``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["length_sorted_batches", "tokenize", "pad_batch", "token_budget_cuts"]


def tokenize(tokenizer, sentences: list[str], max_length: int, layout=None, given: str = "prompt"):
    """``(ids per sentence, token types per sentence or None)``: plain (truncated to ``max_length``),
    or wrapped in a prompt ``layout`` (:class:`~isotropy.encoders.poolings.prompt.PromptLayout`)."""
    if layout is not None:
        return layout.wrap(tokenizer, sentences, max_length, given)
    enc = tokenizer(sentences, truncation=True, max_length=max_length, padding=False, return_attention_mask=False)
    return enc["input_ids"], enc.get("token_type_ids")


def pad_batch(ids, types, rows, pad_id: int) -> dict[str, np.ndarray]:
    """The rows ``rows`` of ``ids`` (and ``types``) padded on the right to the longest of them."""
    width = max((len(ids[i]) for i in rows), default=0)
    feeds = {
        "input_ids": np.full((len(rows), width), pad_id, dtype=np.int64),
        "attention_mask": np.zeros((len(rows), width), dtype=np.int64),
    }
    if types is not None:
        feeds["token_type_ids"] = np.zeros((len(rows), width), dtype=np.int64)
    for row, idx in enumerate(rows):
        seq = ids[idx]
        feeds["input_ids"][row, : len(seq)] = seq
        feeds["attention_mask"][row, : len(seq)] = 1
        if types is not None:
            feeds["token_type_ids"][row, : len(seq)] = types[idx]
    return feeds


def token_budget_cuts(lengths_desc, batch_tokens: int, batch_size: int | None = None) -> list[int]:
    """Where to cut rows sorted longest first so each batch's padded size (rows x its first,
    longest row) stays within ``batch_tokens`` (at least one row a batch; at most
    ``batch_size`` rows when given). Returns the start index of every batch."""
    starts, start = [], 0
    n = len(lengths_desc)
    while start < n:
        rows = max(1, int(batch_tokens) // max(1, int(lengths_desc[start])))
        if batch_size is not None:
            rows = min(rows, int(batch_size))
        starts.append(start)
        start += rows
    return starts


def length_sorted_batches(
    tokenizer,
    sentences: list[str],
    max_length: int,
    batch_size: int,
    layout=None,
    given: str = "prompt",
    batch_tokens: int | None = None,
):
    """Tokenise once without padding, sort longest first, and cut padded batches.

    Returns ``(number of batches, iterator of (row indices, {name: int64 array}))``: each
    batch is padded only to its own longest sentence, and the row indices say where its
    outputs go, so results come back in input order. ``token_type_ids`` is present when
    the tokenizer makes them. With a prompt ``layout``, the ids are the template's.
    With ``batch_tokens``, batches hold about that many padded tokens instead of
    ``batch_size`` sentences (short sentences come in large batches, long ones in small).
    """
    ids, types = tokenize(tokenizer, sentences, max_length, layout, given)
    lengths = np.array([len(x) for x in ids], dtype=np.int64)
    order = np.argsort(lengths, kind="stable")[::-1]
    pad_id = tokenizer.pad_token_id or 0
    if batch_tokens is None:
        batches = [order[i : i + batch_size] for i in range(0, len(ids), batch_size)]
    else:
        starts = token_budget_cuts(lengths[order], batch_tokens) + [len(order)]
        batches = [order[a:b] for a, b in zip(starts, starts[1:])]

    def generate():
        for batch in batches:
            yield batch, pad_batch(ids, types, batch, pad_id)

    return len(batches), generate()
