"""The token fit's solve (issue #32): the sparse product by column blocks against all columns at once and against
scipy's, the solve against round 4's, and the strength grid that stops past its peak against the whole grid, on the
sums of a real corpus.

    nice -n 5 .venv/bin/python bench/token_solve.py             # writes docs/BENCHMARKS.md (token-solve) + results
    .venv/bin/python bench/token_solve.py --no-write --repeats 1

Sums: `isotropy distill --corpus`'s corpus pass on wiki + Cranfield's abstract sentences (bench/_factory_data.py's
cached teacher vectors, the product's spans: halves, drop, cut), from the full-width distill (bench/static.py's
``distilled_folder(384)``), targets on their 256 principal axes, as ``fit_on_corpus`` makes them. Then, in one process,
in turns within a round (load from other users hits all alike), median of ``--repeats`` rounds:

* one product of the seen tokens' Gram with a 256-column block: ``sparse_product`` (torch's CSR product on every
  intra-op thread, ``PRODUCT_COLUMNS`` columns at a time) against the same product on all columns at once (round 4)
  and scipy.sparse's ``@`` (single-threaded), the same float32 matrix;
* the whole solve (``solve_tokens``: the strength chosen on held-out lines, then all lines at that strength) with
  each product; round 4's solve (all columns at once, the CG's updates each a new array: ``_cg_before``, kept here);
  and the grid run to its end (every strength of ``LAMBDAS``, as before round 4) against the grid that stops at the
  first strength scoring worse than the best. The tables are compared (relative Frobenius difference) and the
  strengths chosen must agree.
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

    from isotropy.distill.corpus_fit import DEFAULT_SPANS, cosine_agreement, fit_corpus, principal_axes

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
    import isotropy.distill.corpus_fit as df
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

    def solve(product, whole_grid=False, before=False):
        """``solve_tokens`` with ``product``; ``before``: round 4's solve (whole-width products, a new array per CG
        update)."""
        tr.sparse_product = product  # this process only: what NormalEquations multiplies with
        if before:
            tr.PRODUCT_COLUMNS, tr._block_cg = 1 << 30, _cg_before
        try:
            if whole_grid:
                return _whole_grid(df, fit, held, prior, agree)
            return df.solve_tokens(fit, held, prior, None, False, agreement=agree)
        finally:
            tr.sparse_product, tr.PRODUCT_COLUMNS, tr._block_cg = threaded, columns, cg

    columns, cg = tr.PRODUCT_COLUMNS, tr._block_cg

    def at_once(P):
        tr.PRODUCT_COLUMNS = 1 << 30
        try:
            return torch_product(P)
        finally:
            tr.PRODUCT_COLUMNS = columns

    times: dict[str, list[float]] = {
        k: []
        for k in (
            "product_torch",
            "product_torch_at_once",
            "product_scipy",
            "solve_torch",
            "solve_before",
            "solve_scipy",
            "solve_whole_grid",
        )
    }
    solve(threaded)  # warm-up, untimed: the first solve of a process pays for torch's threads and the pages it touches
    load = [os.getloadavg()[0]]
    tables = {}
    for _ in range(repeats):
        for key, fn in (
            ("product_torch", lambda: torch_product(X)),
            ("product_torch_at_once", lambda: at_once(X)),
            ("product_scipy", lambda: G @ X),
        ):
            times[key].append(statistics.median(timed(fn)[0] for _ in range(5)))
        for key, fn in (
            ("solve_torch", lambda: solve(threaded)),
            ("solve_before", lambda: solve(threaded, before=True)),
            ("solve_scipy", lambda: solve(scipy_product)),
            ("solve_whole_grid", lambda: solve(threaded, whole_grid=True)),
        ):
            seconds, (E, info) = timed(fn)
            times[key].append(seconds)
            tables[key] = (E, info["lambda"])
        load.append(os.getloadavg()[0])

    def rel(a, b):
        return float(np.linalg.norm(tables[a][0] - tables[b][0]) / np.linalg.norm(tables[b][0]))

    return {
        "seen": int(seen.size),
        "nnz": int(G.nnz),
        "columns": int(X.shape[1]),
        "block_columns": int(columns),
        "median_s": {k: float(np.median(v)) for k, v in times.items()},
        "runs_s": times,
        "torch_vs_scipy_table_rel_diff": rel("solve_torch", "solve_scipy"),
        "now_vs_before_table_rel_diff": rel("solve_torch", "solve_before"),
        "strengths": {k: float(v[1]) for k, v in tables.items()},
        "machine": machine(),
        "load": load,
        "repeats": repeats,
    }


def _cg_before(apply, B, X, inv, rtol, maxiter, progress):
    """Round 4's conjugate gradients, kept here to time against: a new ``(V, d)`` array for every update."""
    bnorm = np.maximum(np.linalg.norm(B.astype(np.float64), axis=0), 1e-300)
    R = B - apply(X)
    Z = inv * R
    P = Z.copy()
    rz = np.einsum("ij,ij->j", R, Z, dtype=np.float64)
    worst = float(np.max(np.linalg.norm(R, axis=0) / bnorm))
    it = 0
    while worst > rtol and it < maxiter:
        Q = apply(P)
        pq = np.einsum("ij,ij->j", P, Q, dtype=np.float64)
        alpha = np.divide(rz, pq, out=np.zeros_like(rz), where=pq > 0)
        X += P * alpha.astype(X.dtype)
        R -= Q * alpha.astype(X.dtype)
        Z = inv * R
        rz_new = np.einsum("ij,ij->j", R, Z, dtype=np.float64)
        beta = np.divide(rz_new, rz, out=np.zeros_like(rz), where=rz > 0)
        P = Z + P * beta.astype(X.dtype)
        rz = rz_new
        it += 1
        worst = float(np.max(np.linalg.norm(R, axis=0) / bnorm))
    return it, worst


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
            "| one Gram x block product | ms | time against the product's |",
            "|---|---|---|",
            f"| torch's threaded CSR product, {r['block_columns']} columns at a time (the product) | "
            f"{m['product_torch'] * 1000:.0f} | 1.00x |",
            f"| torch's threaded CSR product, all {r['columns']} columns at once (round 4) | "
            f"{m['product_torch_at_once'] * 1000:.0f} | {m['product_torch_at_once'] / m['product_torch']:.2f}x |",
            f"| scipy.sparse's product, all at once (single-threaded) | {m['product_scipy'] * 1000:.0f} | "
            f"{m['product_scipy'] / m['product_torch']:.2f}x |",
            "",
            "| the whole solve (strength chosen on held-out lines, then all lines) | s | time against the product's |",
            "|---|---|---|",
            f"| the product: torch by blocks, CG updates in place, the grid stopped past its peak | {m['solve_torch']:.2f} | "
            f"1.00x |",
            f"| round 4's: torch all at once, a new array per CG update | {m['solve_before']:.2f} | "
            f"{m['solve_before'] / m['solve_torch']:.2f}x |",
            f"| scipy.sparse's product (by blocks) | {m['solve_scipy']:.2f} | {m['solve_scipy'] / m['solve_torch']:.2f}x |",
            f"| the whole grid of five strengths (before round 4) | {m['solve_whole_grid']:.2f} | "
            f"{m['solve_whole_grid'] / m['solve_torch']:.2f}x |",
            "",
            "Strengths chosen: "
            + ", ".join(f"{k} {v:g}" for k, v in r["strengths"].items())
            + (" (the same)" if same else " (NOT the same)")
            + f". The tables differ from the product's by {r['torch_vs_scipy_table_rel_diff']:.1e} (scipy's product) and "
            f"{r['now_vs_before_table_rel_diff']:.1e} (round 4's solve), relative Frobenius.",
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
