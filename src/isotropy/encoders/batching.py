"""Batches of token ids for the forward passes (layer 3).

Sentences are tokenised once, without padding, sorted longest first and cut into batches
padded only to their own longest sentence, so short sentences never pay for long ones;
each batch carries the row indices its outputs go to, so results come back in input order.
"""

from __future__ import annotations

import numpy as np

__all__ = ["length_sorted_batches"]


def length_sorted_batches(tokenizer, sentences: list[str], max_length: int, batch_size: int):
    """Tokenise once without padding, sort longest first, and cut padded batches.

    Returns ``(number of batches, iterator of (row indices, {name: int64 array}))``: each
    batch is padded only to its own longest sentence, and the row indices say where its
    outputs go, so results come back in input order. ``token_type_ids`` is present when
    the tokenizer makes them.
    """
    enc = tokenizer(sentences, truncation=True, max_length=max_length, padding=False, return_attention_mask=False)
    ids = enc["input_ids"]
    types = enc.get("token_type_ids")
    order = np.argsort([len(x) for x in ids], kind="stable")[::-1]
    pad_id = tokenizer.pad_token_id or 0
    batches = [order[i : i + batch_size] for i in range(0, len(ids), batch_size)]

    def generate():
        for batch in batches:
            width = len(ids[batch[0]])
            feeds = {
                "input_ids": np.full((len(batch), width), pad_id, dtype=np.int64),
                "attention_mask": np.zeros((len(batch), width), dtype=np.int64),
            }
            if types is not None:
                feeds["token_type_ids"] = np.zeros((len(batch), width), dtype=np.int64)
            for row, idx in enumerate(batch):
                seq = ids[idx]
                feeds["input_ids"][row, : len(seq)] = seq
                feeds["attention_mask"][row, : len(seq)] = 1
                if types is not None:
                    feeds["token_type_ids"][row, : len(seq)] = types[idx]
            yield batch, feeds

    return len(batches), generate()
