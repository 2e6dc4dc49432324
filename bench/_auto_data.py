"""The held-out tasks' vectors and dev pools, shared by bench/auto.py and the zoo (bench/_auto_zoo.py).

One module per concern, without an import circle: the data here, the zoo's runs in bench/_auto_zoo.py, the tables in
bench/_render.py, the command line in bench/auto.py (which imports all of them; none imports it back). The product's
rule is read from the library (``isotropy.selection.signals``), never re-derived here.
"""

from __future__ import annotations

import numpy as np


class Corpus:
    """The vectors of one task (its unique sentences) for every pooling, and index helpers."""

    def __init__(self, task, vectors: dict[str, np.ndarray]):
        self.task, self.vectors = task, vectors
        self.sentences = task.sentences()
        self.at = {s: i for i, s in enumerate(self.sentences)}

    def rows(self, sentences) -> np.ndarray:
        return np.array([self.at[s] for s in sentences], dtype=np.int64)


def dev_pool(corpora: list[Corpus], i: int) -> tuple[str, list[tuple[int, int, int, float]]]:
    """Where task ``i``'s dev pairs come from, and the pool ``(task, row a, row b, gold)`` they are drawn from."""
    from isotropy.evaluation.fitting import overlap_key

    task = corpora[i].task
    if task.train_split is not None:
        pairs = task.splits[task.train_split]
        c = corpora[i]
        return f"{task.name} {task.train_split} split", [(i, c.at[p.s1], c.at[p.s2], p.score) for p in pairs]
    held = {overlap_key(s) for s in corpora[i].sentences}
    pool = []
    for j, c in enumerate(corpora):
        if j == i:
            continue
        for p in c.task.pairs():
            if overlap_key(p.s1) not in held and overlap_key(p.s2) not in held:
                pool.append((j, c.at[p.s1], c.at[p.s2], p.score))
    return "the other tasks' pairs (none sharing a sentence with it)", pool
