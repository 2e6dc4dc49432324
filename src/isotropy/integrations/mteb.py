"""MTEB, the field's evaluation harness, on sentence pairs you hold locally (layer 5).

MTEB's own STS tasks download their data from the Hugging Face hub. :func:`local_sts_task`
builds an MTEB STS task from pairs already in memory (anything with ``s1``, ``s2`` and
``score``, such as :class:`isotropy.evaluation.Pair`), so a calibrated model folder can be
scored by MTEB's evaluator where no hub is reachable, and the figure compared with
``isotropy eval`` on the very same pairs (tests/test_calibrate.py, bench/calibrate.py)::

    task = local_sts_task("STS-B-local", load_stsb(folder).pairs(["test"]))
    result = mteb.evaluate(SentenceTransformer("my-model"), task, cache=None)

Needs ``pip install mteb datasets`` (``mteb`` pulls ``datasets``); imported on first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import IsotropyError

__all__ = ["local_sts_task", "mteb_sts_spearman"]


def local_sts_task(name: str, pairs: Sequence[Any], *, min_score: float = 0.0, max_score: float = 5.0, lang: str = "eng-Latn"):
    """An MTEB ``AbsTaskSTS`` whose one ``test`` split is ``pairs`` (no hub access); main score: cosine Spearman."""
    try:
        import datasets
        from mteb.abstasks.sts import AbsTaskSTS
    except ImportError as exc:
        raise IsotropyError(f"this needs MTEB: pip install mteb ({exc})") from None
    from mteb.abstasks.task_metadata import TaskMetadata

    columns = {"sentence1": [p.s1 for p in pairs], "sentence2": [p.s2 for p in pairs], "score": [float(p.score) for p in pairs]}

    class LocalSTS(AbsTaskSTS):
        metadata = TaskMetadata(
            name=name,
            dataset={"path": f"local/{name}", "revision": "local"},
            description=f"{len(pairs)} sentence pairs given in memory (isotropy.integrations.mteb).",
            reference=None,
            type="STS",
            category="t2t",
            modalities=["text"],
            eval_splits=["test"],
            eval_langs=[lang],
            main_score="cosine_spearman",
            date=None,
            domains=None,
            task_subtypes=None,
            license=None,
            annotations_creators=None,
            dialect=None,
            sample_creation=None,
            bibtex_citation=None,
        )

        def load_data(self, num_proc=None, **kwargs):
            self.dataset = {"test": datasets.Dataset.from_dict(columns)}
            self.data_loaded = True

    LocalSTS.min_score, LocalSTS.max_score = min_score, max_score
    return LocalSTS()


def mteb_sts_spearman(model: Any, pairs: Sequence[Any], name: str = "LocalSTS") -> float:
    """Spearman x 100 of MTEB's STS evaluator (cosine) for ``model`` (a loaded ``SentenceTransformer``) on ``pairs``."""
    import mteb

    result = mteb.evaluate(model, local_sts_task(name, pairs), cache=None, show_progress_bar=False)
    return 100 * result.task_results[0].scores["test"][0]["cosine_spearman"]
