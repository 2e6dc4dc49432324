"""How long `isotropy calibrate --method auto` takes against `isotropy encode` of the same corpus (issue #34).

The corpus: every distinct sentence of STS-B (train, dev and test, both sides of each pair: 15,487 lines). The two
commands run as a user runs them (the project's CLI in a new process each, default model, default options, a fresh
empty vector cache each), alternately, ``--rounds`` times; the ratio is auto's wall time over encode's in the same
round. Label-free auto on a transformer decides by the encoder's kind before reading the corpus, so it encodes a
seeded sample of at most 1,000 sentences for the signals it reports and writes the base model as it is. The folder it
writes is then checked: ``SentenceTransformer(folder)`` against ``SentenceTransformer(base model)`` on 200 of the
sentences and one longer than the model's window (the largest absolute difference, and the norms).

    nice -n 5 .venv/bin/python bench/auto_speed.py [--rounds 1]

Raw numbers to bench/results/auto_speed.json, the table to docs/BENCHMARKS.md (section ``auto-speed``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _render  # noqa: E402
from _encode_data import stsb_rows  # noqa: E402

from _report import ROOT, Section, machine  # noqa: E402

SECTION = Section("BENCHMARKS.md", "auto-speed", _render.auto_speed, ROOT / "bench" / "results" / "auto_speed.json")
ISOTROPY = [sys.executable, "-m", "isotropy.cli"]


def corpus() -> list[str]:
    """The distinct sentences of STS-B's three splits, in first-seen order."""
    seen: dict[str, None] = {}
    for split in ("train", "dev", "test"):
        for a, b, _ in stsb_rows(split):
            seen.setdefault(a, None)
            seen.setdefault(b, None)
    return [s for s in seen if s.strip()]


def _timed(args: list[str], cache: Path) -> float:
    env = {**os.environ, "ISOTROPY_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    t0 = time.perf_counter()
    subprocess.run([*ISOTROPY, *args], check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def same_vectors(folder: Path, sentences: list[str]) -> dict:
    """The written folder against the base model, both through sentence-transformers."""
    from sentence_transformers import SentenceTransformer

    from isotropy.encoders import Encoder

    probe = sentences[:200] + [" ".join(sentences[:60])]  # the last one is longer than the model's window
    base = SentenceTransformer(str(Encoder(None).folder), device="cpu").encode(probe)
    ours = SentenceTransformer(str(folder), device="cpu").encode(probe)
    norms = np.linalg.norm(ours, axis=1)
    return {"max_abs_diff": float(np.abs(base - ours).max()), "norm_min": float(norms.min()), "norm_max": float(norms.max())}


def run(rounds: int) -> dict:
    sentences = corpus()
    load = [os.getloadavg()]
    rows = []
    with tempfile.TemporaryDirectory(prefix="auto-speed-") as tmp:
        tmp = Path(tmp)
        text = tmp / "stsb-unique.txt"
        text.write_text("\n".join(sentences) + "\n", encoding="utf-8")
        for r in range(rounds):
            enc = _timed(["encode", str(text), "-o", str(tmp / f"v{r}.npy")], tmp / f"cache-e{r}")
            cal = _timed(["calibrate", str(text), "-o", str(tmp / f"cal{r}"), "--method", "auto"], tmp / f"cache-a{r}")
            rows.append({"encode_s": enc, "auto_s": cal, "ratio": cal / enc})
            load.append(os.getloadavg())
        info = json.loads((tmp / "cal0" / "isotropy.json").read_text(encoding="utf-8"))["calibration"]
        check = same_vectors(tmp / "cal0", sentences)
    return {
        "sentences": len(sentences),
        "rounds": rows,
        "choice": info["selection"]["choice"],
        "signal_rows": info["fit"]["n_fit"],
        "modules": info["modules"],
        "same_vectors": check,
        "loadavg": [list(x) for x in load],
        "machine": machine(),
    }


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--rounds", type=int, default=1, help="encode / auto pairs, alternately")
    args = ap.parse_args()
    if not SECTION.rendered(args):
        SECTION.publish(run(args.rounds), args)


if __name__ == "__main__":
    main()
