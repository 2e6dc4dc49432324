"""The token solve's product on every core (issue #43: a rerun's cost is the solve): ``(U + U^T + diag) X``, the
CG's one costly step, with its transposed half ``U^T X`` on one thread (scipy.sparse's CSC product, as before) and
on one thread per core (``gram_blocks._transposed_product``: row ranges of ``U`` as views), in the same run.

    nice -n 5 .venv/bin/python bench/token_product.py           # writes docs/BENCHMARKS.md (token-product) + results
    .venv/bin/python bench/token_product.py --lines 12000 --no-write
    .venv/bin/python bench/token_product.py --render            # the section again from the saved results

The system is the real one's shape: the token sums of evenly spaced lines of ``wiki-1m.txt`` (default 99,999: every
10th, the factory curve's 100k point) tokenised by potion-base-8M's tokenizer (BERT's uncased vocabulary, as the
distill's table), with seeded random targets (the product's cost depends on the pairs, not on the values). Each
setting's product of the seen tokens' ``X`` (``--dims`` columns) takes turns with the other's, ``--repeats`` times;
the table gives medians, the ratio to one thread and the largest relative difference between the two results.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _render import f2, md, table  # noqa: E402

from _report import DATA, POTION, Section  # noqa: E402


def system(lines: int, dims: int):
    """The strict upper triangle and diagonal of the token Gram of ``lines`` evenly spaced wiki lines (module docs)."""
    from tokenizers import Tokenizer

    from isotropy.transforms.gram_blocks import strict_upper
    from isotropy.transforms.token_regression import TokenRegression

    with (DATA / "corpus" / "wiki-1m.txt").open(encoding="utf-8") as fh:
        text = [line.strip() for line in fh]
    step = max(1, len(text) // lines)
    text = text[::step][:lines]
    tok = Tokenizer.from_file(str(POTION / "tokenizer.json"))
    reg, rng = TokenRegression(tok.get_vocab_size(), dims), np.random.default_rng(0)
    for a in range(0, len(text), 8192):
        ids = [e.ids for e in tok.encode_batch(text[a : a + 8192], add_special_tokens=False)]
        flat = np.fromiter((i for row in ids for i in row), dtype=np.int64)
        reg.partial_fit(flat, np.array([len(r) for r in ids]), rng.standard_normal((len(ids), dims)).astype(np.float32))
    upper, diag = strict_upper(reg._blocks(), reg.seen, np.float32)
    return upper, diag, len(text)


def measure(lines: int, dims: int, repeats: int) -> dict:
    from isotropy.transforms.gram_blocks import symmetric_product
    from isotropy.transforms.token_regression import _by_columns, sparse_product

    upper, diag, n = system(lines, dims)
    cores = len(os.sched_getaffinity(0))
    settings = {"1 thread": 1, f"{cores} threads": cores}
    products = {k: symmetric_product(upper, diag, np.float32, sparse_product, _by_columns, parts=p) for k, p in settings.items()}
    X = np.random.default_rng(1).standard_normal((upper.shape[0], dims)).astype(np.float32)
    times: dict[str, list[float]] = {k: [] for k in settings}
    out = {k: f(X) for k, f in products.items()}  # a first call of each, untimed (threads started, pages touched)
    load = os.getloadavg()[0]
    for _ in range(repeats):
        for k, f in products.items():
            t0 = time.perf_counter()
            f(X)
            times[k].append(time.perf_counter() - t0)
    ref, other = out.values()
    return {
        "lines": n,
        "tokens": int(upper.shape[0]),
        "pairs": int(upper.nnz),
        "dims": dims,
        "repeats": repeats,
        "cores": cores,
        "load": [round(load, 2), round(os.getloadavg()[0], 2)],
        "seconds": {k: statistics.median(v) for k, v in times.items()},
        "max_rel_diff": float(np.abs(other - ref).max() / np.abs(ref).max()),
    }


def render(r: dict) -> str:
    one = r["seconds"]["1 thread"]
    rows = [[k, f2(v, 3), f"{one / v:.2f}x"] for k, v in r["seconds"].items()]
    return md(
        "## The token solve's product (`bench/token_product.py`, issue #43)",
        "Regenerate: `nice -n 5 .venv/bin/python bench/token_product.py`. `(U + U^T + diag) X` on the token Gram of "
        f"{r['lines']:,} evenly spaced `wiki-1m.txt` lines (potion-base-8M's tokenizer): {r['tokens']:,} seen tokens, "
        f"{r['pairs']:,} off-diagonal pairs, X of {r['dims']} columns. `U X` is torch's threaded CSR product in both "
        "rows; the rows differ in `U^T X`, scipy.sparse's CSC product on one thread or on row ranges of `U` (views, no "
        f"copy), one thread per core. Medians of {r['repeats']} products each, taking turns ({r['cores']} cores, load "
        f"average {r['load'][0]} -> {r['load'][1]}); the results differ by {r['max_rel_diff']:.1e} of their largest entry "
        "(float32 sums in another order).",
        table(["U^T X on", "product s", "vs 1 thread"], rows, "r"),
    )


SECTION = Section("BENCHMARKS.md", "token-product", render, HERE / "results" / "token_product.json")


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--lines", type=int, default=99_999)
    ap.add_argument("--dims", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    if not SECTION.rendered(args):
        SECTION.publish(measure(args.lines, args.dims, args.repeats), args)


if __name__ == "__main__":
    main()
