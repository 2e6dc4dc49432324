"""Vectors at scale without a hub, for bench/scale.py: sliding windows over real text, encoded with GloVe.

The words of ``corpus/wiki-sentences.txt`` and of Cranfield's documents (``.T`` and ``.W`` fields of
``retrieval/cranfield/cran.all.1400``) in ../shared/data, in file order, make one stream of about half a million
words. Window ``i`` starts at a seeded random word and runs for 5 to 30 words, so the texts are real English with real
anisotropy (overlapping windows are near neighbours of each other, as paraphrases and duplicates are in a real
corpus). The queries are 1,000 more windows drawn with another seed (held out: never indexed). Encoded with the
embedded static GloVe 6B 50d (``glove-6b-50d``, mean of word vectors), float32, cached under ``.cache/scale/``
(gitignored).
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import DATA, ROOT  # noqa: E402

CACHE = ROOT / ".cache" / "scale"
MIN_WORDS, MAX_WORDS = 5, 30
QUERIES = 1000
CHUNK = 200_000


def words() -> list[str]:
    out = (DATA / "corpus" / "wiki-sentences.txt").read_text(encoding="utf-8").split()
    keep, text = False, []
    for line in (DATA / "retrieval" / "cranfield" / "cran.all.1400").read_text(encoding="utf-8").splitlines():
        if line.startswith("."):
            keep = line[:2] in (".T", ".W")
            continue
        if keep:
            text.append(line)
    out += re.sub(r"\s+", " ", " ".join(text)).split()
    return out


def windows(stream: list[str], n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    lens = rng.integers(MIN_WORDS, MAX_WORDS + 1, n)
    starts = rng.integers(0, len(stream) - MAX_WORDS, n)
    return [" ".join(stream[s : s + m]) for s, m in zip(starts.tolist(), lens.tolist())]


def _larger(n: int) -> Path | None:
    """A cached file of more than ``n`` windows: its first ``n`` rows are the ``n``-window corpus
    (window chunks of CHUNK are seeded by their position, whatever the total; ``n`` a multiple of CHUNK)."""
    sizes = sorted(int(p.stem.rsplit("-", 1)[1]) for p in CACHE.glob("glove-windows-*.npy"))
    bigger = [m for m in sizes if m > n]
    return CACHE / f"glove-windows-{bigger[0]}.npy" if bigger else None


def tuning_queries() -> np.ndarray:
    """1,000 more held-out windows (another seed): the set ``nprobe`` is chosen on, never the reported one."""
    tf = CACHE / "glove-tuning-queries.npy"
    if not tf.exists():
        from isotropy.encoders import Encoder

        enc = Encoder("glove-6b-50d", batch_size=4096)
        np.save(tf, enc.encode(windows(words(), QUERIES, seed=2 * 10**6), show_progress=False).astype(np.float32))
    return np.load(tf)


def vectors(n: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """``(corpus (n, 50), queries (1000, 50), info)``, encoded once and cached (memory-mapped)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    xf, qf = CACHE / f"glove-windows-{n}.npy", CACHE / "glove-queries.npy"
    info = {"rows": n}
    if xf.exists() and qf.exists():
        return np.load(xf, mmap_mode="r"), np.load(qf), info
    big = _larger(n) if n % CHUNK == 0 else None  # a partial last chunk draws other windows
    if big is not None and qf.exists():
        return np.load(big, mmap_mode="r")[:n], np.load(qf), info
    from isotropy.encoders import Encoder

    enc = Encoder("glove-6b-50d", batch_size=4096)
    stream = words()
    t0 = time.perf_counter()
    X = np.lib.format.open_memmap(str(xf) + ".part", mode="w+", dtype=np.float32, shape=(n, enc.dim))
    for a in range(0, n, CHUNK):
        texts = windows(stream, min(CHUNK, n - a), seed=1 + a // CHUNK)
        X[a : a + len(texts)] = enc.encode(texts, show_progress=False)
    X.flush()
    del X
    Path(str(xf) + ".part").rename(xf)
    info["encode_s"] = time.perf_counter() - t0
    np.save(qf, enc.encode(windows(stream, QUERIES, seed=10**6), show_progress=False).astype(np.float32))
    return np.load(xf, mmap_mode="r"), np.load(qf), info


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    t = time.perf_counter()
    X, Q, info = vectors(n)
    print(X.shape, Q.shape, f"{time.perf_counter() - t:.1f} s", info)
