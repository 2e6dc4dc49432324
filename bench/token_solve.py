"""The token fit's solve (issue #32): torch's threaded sparse product against scipy's, and the strength grid that
stops past its peak against the whole grid, on the sums of a real corpus.

    nice -n 5 .venv/bin/python bench/token_solve.py             # writes docs/BENCHMARKS.md (token-solve) + results
    .venv/bin/python bench/token_solve.py --no-write --repeats 1

Sums: `isotropy distill --corpus`'s corpus pass on wiki + Cranfield's abstract sentences (bench/_factory_data.py's
cached teacher vectors, the product's spans: halves, drop, cut), from the full-width distill (bench/static.py's
``distilled_folder(384)``), targets on their 256 principal axes, as ``fit_on_corpus`` makes them. Then, in one process,
in turns within a round (load from other users hits all alike), median of ``--repeats`` rounds:

* one product of the seen tokens' Gram with a 256-column block: ``sparse_product`` (torch's CSR product on every
  intra-op thread) against scipy.sparse's ``@`` (single-threaded), the same float32 matrix;
* the whole solve (``solve_tokens``: the strength chosen on held-out lines, then all lines at that strength) with
  each product; and with the grid run to its end (every strength of ``LAMBDAS``, as before this change) against the
  grid that stops at the first strength scoring worse than the best, both with torch's product. The tables of the
  two products are compared (relative Frobenius difference) and the strengths of the two grids must agree.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _report import machine, portable, update_section, write_json  # noqa: E402

COMMAND = "nice -n 5 .venv/bin/python bench/token_solve.py"
RESULTS = HERE / "results" / "token_solve.json"


def sums():
    """(fit sums, held-out sums, prior table, agreement scorer) of wiki + cran, as ``fit_on_corpus`` projects them."""
    import _factory_data as fd
    import _factory_round3 as r3
    from _factory_common import CachedTeacher

    from isotropy.calibration.distill_fit import DEFAULT_SPANS, cosine_agreement, fit_corpus, principal_axes

    corpora = fd.corpora()
    parts = [corpora["wiki"], corpora["cran"]]
    texts, Y, _ = r3.teacher_for(parts, DEFAULT_SPANS)
    start = r3.starts()[384]
    cf = fit_corpus(start, CachedTeacher(texts, Y), [s for p in parts for s in p], spans=True, show_progress=False)
    P = principal_axes(cf.teacher_map, 256)
    A, b = cf.teacher_map.affine_()
    prior = np.asarray(start.embedding, dtype=np.float64) @ (A @ P) + b @ P
    mean = cf.teacher_map.moments_.mean[cf.teacher_map.n_features_in_ :]
    return cf.fit.project(P), cf.held.project(P), prior, cosine_agreement(*cf.held_sample(), mean, mean @ P)


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def run(repeats: int) -> dict:
    import isotropy.calibration.distill_fit as df
    from isotropy.transforms import token_regression as tr

    fit, held, prior, agree = sums()
    seen = fit.seen
    G = fit.gram_[seen][:, seen].tocsr().astype(np.float32)
    X = np.ascontiguousarray(prior[seen], dtype=np.float32)
    torch_product = tr.sparse_product(G)
    threaded = tr.sparse_product

    def scipy_product(matrix, dtype=np.float32):
        from scipy.sparse import csr_matrix

        M = csr_matrix(matrix, dtype=dtype)
        return lambda P: M @ P

    def solve(product, whole_grid=False):
        tr.sparse_product = product  # this process only: what NormalEquations multiplies with
        try:
            if whole_grid:
                return _whole_grid(df, fit, held, prior, agree)
            return df.solve_tokens(fit, held, prior, None, False, agreement=agree)
        finally:
            tr.sparse_product = threaded

    times: dict[str, list[float]] = {
        k: [] for k in ("product_torch", "product_scipy", "solve_torch", "solve_scipy", "solve_whole_grid")
    }
    load = [os.getloadavg()[0]]
    tables = {}
    for _ in range(repeats):
        times["product_torch"].append(statistics.median(timed(lambda: torch_product(X))[0] for _ in range(5)))
        times["product_scipy"].append(statistics.median(timed(lambda: G @ X)[0] for _ in range(5)))
        for key, fn in (
            ("solve_torch", lambda: solve(threaded)),
            ("solve_scipy", lambda: solve(scipy_product)),
            ("solve_whole_grid", lambda: solve(threaded, whole_grid=True)),
        ):
            seconds, (E, info) = timed(fn)
            times[key].append(seconds)
            tables[key] = (E, info["lambda"])
        load.append(os.getloadavg()[0])
    diff = float(np.linalg.norm(tables["solve_torch"][0] - tables["solve_scipy"][0]) / np.linalg.norm(tables["solve_scipy"][0]))
    return {
        "seen": int(seen.size),
        "nnz": int(G.nnz),
        "columns": int(X.shape[1]),
        "median_s": {k: float(np.median(v)) for k, v in times.items()},
        "runs_s": times,
        "torch_vs_scipy_table_rel_diff": diff,
        "strengths": {k: float(v[1]) for k, v in tables.items()},
        "machine": machine(),
        "load": load,
        "repeats": repeats,
    }


def _whole_grid(df, fit, held, prior, agree):
    """``solve_tokens`` as it ran before the stop: every strength of the grid solved and scored, then the best refit."""
    system = fit.solver(prior)
    best, start = None, None
    for value in df.LAMBDAS:
        E, _ = system.solve(value, x0=start, rtol=1e-2, maxiter=df.GRID_ITERATIONS)
        held.error(E)  # the held-out error is recorded for every strength, as solve_tokens does
        score = agree(E)
        if best is None or score > best[0]:
            best, start = (score, value, E), E
    del system
    both = type(fit)(fit.vocab_size, fit.dim).merge(fit).merge(held)
    E, info = both.solve(prior, best[1], x0=best[2], rtol=1e-2, maxiter=100)
    info["lambda"] = best[1]
    return E, info


def render(r: dict) -> str:
    m = r["median_s"]
    same = len(set(r["strengths"].values())) == 1
    return "\n".join(
        [
            "## The token fit's solve (issue #32)",
            "",
            f"`isotropy distill --corpus`'s token fit on wiki + Cranfield's abstract sentences with the product's spans: "
            f"{r['seen']:,} seen tokens, a Gram of {r['nnz']:,} nonzeros, {r['columns']} columns. Median of "
            f"{r['repeats']} rounds, the variants in turns within a round, one process.",
            "",
            "| what | torch's threaded CSR product (the product) | scipy.sparse's product | ratio |",
            "|---|---|---|---|",
            f"| one Gram x block product | {m['product_torch'] * 1000:.0f} ms | {m['product_scipy'] * 1000:.0f} ms | "
            f"{m['product_scipy'] / m['product_torch']:.2f}x |",
            f"| the whole solve (strength chosen, then all lines) | {m['solve_torch']:.2f} s | {m['solve_scipy']:.2f} s | "
            f"{m['solve_scipy'] / m['solve_torch']:.2f}x |",
            "",
            f"The grid that stops at the first strength scoring worse than the best: {m['solve_torch']:.2f} s; the whole "
            f"grid of five strengths (as before): {m['solve_whole_grid']:.2f} s "
            f"({m['solve_whole_grid'] / m['solve_torch']:.2f}x); strengths chosen: "
            + ", ".join(f"{k} {v:g}" for k, v in r["strengths"].items())
            + (" (the same)" if same else " (NOT the same)")
            + f". The tables of the two products differ by {r['torch_vs_scipy_table_rel_diff']:.1e} (relative Frobenius).",
            "",
            f"Ran on {r['machine']}, load average {min(r['load']):.1f} to {max(r['load']):.1f} (a shared machine). "
            f"Regenerate with `{COMMAND}`.",
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    r = run(args.repeats)
    text = render(r)
    print(text)
    if not args.no_write:
        write_json(RESULTS, portable(r))
        update_section("BENCHMARKS.md", "token-solve", text)


if __name__ == "__main__":
    main()
