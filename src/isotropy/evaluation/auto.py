"""``--method auto`` as a column of ``isotropy eval``: the calibration chosen label-free on the setting's fit corpus.

Per task and pooling (once per pooling under ``--fit-on FILE``), :class:`isotropy.selection.Selector`
compares the candidates on the vectors the other methods are fitted on, and the label-free
rule (:data:`isotropy.selection.LABEL_FREE_RULE`) chooses; the word-deleted copies its
criteria read are encoded by the same encoder and pooling, through the run's vector cache.
No gold score of any task is read. The choice and its evidence go into the cell's ``extra``
(``auto``: ``choice``, ``p_beats_raw``, ``selection``), so the results JSON keeps them.
"""

from __future__ import annotations

import copy
from typing import Any

from .fitting import fit_pairs, pair_sides

__all__ = ["fit_sentences", "select_for_cell"]


def fit_sentences(run: Any, i: int) -> list[str]:
    """The sentences of task ``i``'s fit corpus, one per row of its fitting vectors (``_fit_data``'s order)."""
    if run.fit_mode == "file":
        return list(run.fit_sentences)
    if run.fit_mode == "others":
        return [run.tasks[j].sentences()[k] for j, rows in run.others[i].parts for k in rows]
    return pair_sides(fit_pairs(run.tasks[i], run.fit_mode))


def select_for_cell(run: Any, i: int, pooling: str, X: Any, seed: int = 0) -> tuple[Any, dict[str, Any]]:
    """``(the chosen fitted transform or None for raw, the cell's extra)`` for task ``i`` and ``pooling``."""
    import numpy as np

    from ..selection import select_calibration

    encoder = copy.copy(run.encoder)
    encoder.pooling = pooling  # the same encoder reading this pooling (what the perturbed copies are encoded with)
    where = f"{pooling} vectors of " + (run.fit_on if run.fit_mode == "file" else f"{run.tasks[i].name}'s fitting sentences")
    sel = select_calibration(
        np.asarray(X, dtype=np.float64),
        fit_sentences(run, i),
        encoder=encoder,
        cache=run.cache if run.cache.enabled else None,
        seed=seed,
        source=where,
        show_progress=False,
    )
    return sel.transform, {"auto": {"choice": sel.choice, "p_beats_raw": sel.p_beats_raw, "selection": sel.to_dict()}}
