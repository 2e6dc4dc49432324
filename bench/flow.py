"""Benchmark: BERT-flow (default l2_d3_w32, one epoch) on all 17,256 STS-B sentence vectors.

Measures, in one run on the same vectors: the wall time of ``Flow().fit`` (target: at most 60 s on the 2-core CI
machine), ``transform`` throughput (target: at least 10,000 vectors/s), ``isotropy.Whitening().fit`` as the reference,
and for context the STS-B test Spearman of raw / flow / whitening. The vectors are the default model's ``cls`` pooling
at max_length 64 (train+dev+test, both sides, in file order: the papers' "target" setting), read from the project's
verified vector cache (``.cache/vectors``) or encoded once into it. ``--synthetic`` uses random vectors of the same
shape instead (for machines without the model or the data; not recorded unless asked). Writes the ``flow`` section of
docs/BENCHMARKS.md.

    .venv/bin/python bench/flow.py               # real vectors, 3 repeats, writes the section
    .venv/bin/python bench/flow.py --no-write    # print it instead
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _render  # noqa: E402

from _report import DATA, ROOT, Section, machine, median_time, pair_spearman  # noqa: E402
from isotropy.transforms.flow import Flow  # noqa: E402
from isotropy.transforms.whitening import Whitening  # noqa: E402

FIT_TARGET_S = 60.0
TRANSFORM_TARGET = 10_000.0
SECTION = Section("BENCHMARKS.md", "flow", _render.flow, ROOT / "bench" / "results" / "flow.json")


def stsb_vectors() -> dict:
    """STS-B cls vectors (max_length 64): ``fit`` (17,256 rows), test ``a``/``b`` and ``gold``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from isotropy.encoders import Encoder
    from isotropy.encoders.cache import VectorCache, encode_cached
    from isotropy.evaluation import load_stsb

    task = load_stsb(DATA / "sts" / "STSBenchmark")
    fit_sents = [s for p in task.pairs() for s in (p.s1, p.s2)]
    test = task.pairs(["test"])
    uniq = list(dict.fromkeys(fit_sents))
    # the same poolings as the test fixtures, so the cache entry is shared with them
    vecs = encode_cached(Encoder(max_length=64), uniq, ("cls", "last-avg"), VectorCache(ROOT / ".cache" / "vectors"))["cls"]
    row = {s: i for i, s in enumerate(uniq)}
    return {
        "fit": vecs[[row[s] for s in fit_sents]],
        "a": vecs[[row[p.s1] for p in test]],
        "b": vecs[[row[p.s2] for p in test]],
        "gold": np.array([p.score for p in test], dtype=np.float64),
    }


def synthetic() -> dict:
    rng = np.random.default_rng(0)
    A = rng.standard_normal((384, 384)).astype(np.float32) * np.geomspace(0.5, 0.01, 384).astype(np.float32)
    return {"fit": (rng.standard_normal((17256, 384), dtype=np.float32) @ A + 0.3).astype(np.float32)}


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--synthetic", action="store_true", help="random vectors of the same shape instead of STS-B")
    args = ap.parse_args()
    if SECTION.rendered(args):
        return

    data = synthetic() if args.synthetic else stsb_vectors()
    X = data["fit"]
    n, d = X.shape
    print(f"vectors: {n} x {d} ({'synthetic' if args.synthetic else 'STS-B cls, max_length 64'})", file=sys.stderr)
    load_before = os.getloadavg()

    fitted: list[Flow] = []
    t_fit, fit_times = median_time(lambda: fitted.append(Flow().fit(X, show_progress=False)), args.repeats)
    flow = fitted[-1]
    same = all(np.array_equal(f.loss_curve_, flow.loss_curve_) for f in fitted)
    print(
        f"flow fit: median {t_fit:.2f} s ({_render._runs(fit_times)}); {flow.n_iter_} steps; repeats identical: {same}",
        file=sys.stderr,
    )

    flow.transform(X[:2048])  # warm-up (first-call allocations)
    t_tr, tr_times = median_time(lambda: flow.transform(X), max(args.repeats, 5))
    rate = n / t_tr
    print(f"flow transform: median {t_tr:.3f} s = {rate:,.0f} vectors/s", file=sys.stderr)
    t_inv, _ = median_time(lambda: flow.inverse_transform(flow.transform(X)), 3)
    err = float(np.abs(flow.inverse_transform(flow.transform(X)) - X).max())

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rank-deficient cls vectors: a warning, measured anyway
        t_w, w_times = median_time(lambda: Whitening().fit(X), max(args.repeats, 5))
        white = Whitening().fit(X)
    print(f"whitening fit: median {t_w:.3f} s", file=sys.stderr)

    load_after = os.getloadavg()

    quality = None
    if "gold" in data:
        a, b, gold = data["a"], data["b"], data["gold"]
        quality = {"raw": pair_spearman(a, b, gold), "flow": pair_spearman(flow.transform(a), flow.transform(b), gold)}
        quality["whitening"] = pair_spearman(white.transform(a), white.transform(b), gold)
    r = {"synthetic": args.synthetic, "n": n, "d": d, "machine": machine(), "load": [load_before[0], load_after[0]]}
    r.update(fit_s=t_fit, fit_runs=fit_times, transform_s=t_tr, transform_runs=tr_times, rate=rate, inverse_s=t_inv)
    r.update(whitening_s=t_w, whitening_runs=w_times, err=err, same=same)
    r.update(steps=flow.n_iter_, batch_size=flow.batch_size, quality=quality)
    r.update(fit_target_s=FIT_TARGET_S, transform_target=TRANSFORM_TARGET)
    SECTION.publish(r, args)


if __name__ == "__main__":
    main()
