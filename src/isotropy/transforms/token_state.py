"""A token regression's sums as named arrays and back (layer 3, beside :mod:`.token_regression`), for a cache of
them (:mod:`isotropy.distill.sums_cache`): plain numeric arrays, so that they can be written without pickle.

:func:`sums_to_arrays` gives, under ``prefix``, what :class:`~.token_regression.TokenRegression` keeps (the Gram's
upper triangle block by block as CSR arrays, the kept rows of ``A^T Y`` and their token ids, ``Y^T Y``, the token
counts and the sentence counts) or, for :class:`~.held_out.HeldOutSums`, the held-out sentences' ids in place of the
triangle; :func:`sums_from_arrays` builds the same accumulator from them (the same sums, bit for bit).
"""

from __future__ import annotations

import numpy as np

from ..errors import IsotropyError
from .gram_blocks import UpperBlocks
from .held_out import HeldOutSums
from .token_regression import TokenRegression

__all__ = ["sums_to_arrays", "sums_from_arrays"]


def sums_to_arrays(acc: TokenRegression, prefix: str) -> dict[str, np.ndarray]:
    """``acc``'s sums as arrays named ``PREFIX.NAME`` (module docs); a spilled block is read back for this."""
    held = isinstance(acc, HeldOutSums)
    out = {
        "meta": np.array([acc.vocab_size, acc.dim, acc.n_, acc.skipped_, int(held)], dtype=np.int64),
        "ids": np.asarray(acc._ids, dtype=np.int64),
        "cross": np.ascontiguousarray(acc._kept()),
        "yy": acc.yy_,
        "counts": acc.counts_,
    }
    if held:
        parts = acc._sentences
        out["flat"] = np.concatenate([f for f, _ in parts]) if parts else np.zeros(0, np.int32)
        out["lengths"] = np.concatenate([n for _, n in parts]) if parts else np.zeros(0, np.int32)
    else:
        tri = acc._blocks()
        out["ranges"] = np.array([(a, b) for a, b, _ in tri.blocks], dtype=np.int64).reshape(-1, 2)
        for i, (a, b, _) in enumerate(tri.blocks):
            M = tri.rows(a, b)  # the block itself (read from its file if spilled)
            out.update({f"tri{i}.data": M.data, f"tri{i}.indices": M.indices, f"tri{i}.indptr": M.indptr})
    return {f"{prefix}.{name}": value for name, value in out.items()}


def sums_from_arrays(arrays: dict[str, np.ndarray], prefix: str) -> TokenRegression:
    """The accumulator :func:`sums_to_arrays` wrote under ``prefix``; IsotropyError when an array is missing or
    does not fit the others (a cache entry that verified but does not hold these sums)."""
    from scipy.sparse import csr_matrix

    def get(name: str) -> np.ndarray:
        try:
            return arrays[f"{prefix}.{name}"]
        except KeyError:
            raise IsotropyError(f"the sums' array {prefix}.{name} is missing") from None

    V, d, n, skipped, held = (int(x) for x in get("meta"))
    acc = HeldOutSums(V, d) if held else TokenRegression(V, d)
    ids, cross = get("ids"), get("cross")
    if cross.shape != (len(ids), d) or get("yy").shape != (d, d) or get("counts").shape != (V,):
        raise IsotropyError(f"the sums' arrays under {prefix} do not fit a {V} x {d} token regression")
    acc._ids, acc._buf = ids.astype(np.int64), cross.astype(np.float64)
    acc._slot[acc._ids] = np.arange(len(ids))
    acc.yy_, acc.counts_, acc.n_, acc.skipped_ = get("yy").astype(np.float64), get("counts").astype(np.int64), n, skipped
    if held:
        flat, lengths = get("flat"), get("lengths")
        acc._sentences = [(flat, lengths)] if len(lengths) else []
        return acc
    ranges = get("ranges").tolist()
    if not ranges or ranges[0][0] != 0 or ranges[-1][1] != V or any(b != c for (_, b), (c, _) in zip(ranges, ranges[1:])):
        raise IsotropyError(f"the sums' triangle under {prefix} does not cover the vocabulary in consecutive blocks")
    tri = UpperBlocks(V)
    tri.blocks = [
        (a, b, csr_matrix((get(f"tri{i}.data"), get(f"tri{i}.indices"), get(f"tri{i}.indptr")), shape=(b - a, V)))
        for i, (a, b) in enumerate(ranges)
    ]
    acc._tri = tri
    return acc
