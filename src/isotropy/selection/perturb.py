"""Lightly perturbed copies of sentences: the label-free criteria's positive pairs.

A copy deletes a fraction ``rate`` of a sentence's words (whitespace-separated): ``round(rate x n)``
of its ``n`` words, at least one, never all; a one-word sentence is its own copy. Words rather
than sub-word tokens, so the perturbation does not depend on the model's tokenizer and the same
copies serve every encoder. Token deletion is one of SimCSE's (Gao et al., EMNLP 2021, Table 1)
and ConSERT's (Yan et al., ACL 2021) augmentations; unlike dropout noise it needs no training
mode and is the same on every run: the positions are drawn from ``numpy.random.default_rng``
seeded with (seed, rate in thousandths), so a copy depends only on the seed, the rate and the
sentence list.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["delete_words", "perturbed_copies"]


def delete_words(sentence: str, rate: float, rng: np.random.Generator) -> str:
    """``sentence`` with ``round(rate x n)`` of its ``n`` words deleted (at least 1, at most n - 1)."""
    words = sentence.split()
    n = len(words)
    if n < 2:
        return sentence
    k = min(n - 1, max(1, int(round(rate * n))))
    drop = set(rng.choice(n, size=k, replace=False).tolist())
    return " ".join(w for i, w in enumerate(words) if i not in drop)


def perturbed_copies(sentences: Sequence[str], rate: float, seed: int = 0) -> list[str]:
    """One copy of each sentence with words deleted at ``rate`` (deterministic under ``seed``)."""
    rng = np.random.default_rng([int(seed), int(round(rate * 1000))])
    return [delete_words(s, rate, rng) for s in sentences]
