"""`isotropy calibrate`: how exactly the stock folder reproduces isotropy, what MTEB says, what it costs.

    .venv/bin/python bench/calibrate.py              # writes docs/ECOSYSTEM.md, section "calibrate"
    .venv/bin/python bench/calibrate.py --no-write   # print only
    .venv/bin/python bench/calibrate.py --limit 2000 --no-write   # a smoke run

1. Parity. Default model (all-MiniLM-L6-v2), max_length 64, poolings cls and last-avg; every affine method of the
   registry fitted on the STS-B train sentences; each written as a stock folder and loaded by plain
   ``SentenceTransformer(path)`` in a fresh ``python -I`` process where isotropy is not importable; max |difference|
   to ``Encoder`` + the float64 transform on the 2,758 STS-B test sentences, beside the largest entry. For comparison,
   the same whitening through isotropy's own float64 module (``stock=False``, ``trust_remote_code``).
2. One ``isotropy calibrate`` run (Python API) on the STS-B train sentences, last-avg, Ledoit-Wolf whitening, ``--onnx
   --quantize int8 --eval STSBenchmark``: wall time of each phase, STS-B test Spearman x 100 of the base and the
   calibrated model (isotropy's harness), of MTEB's STS evaluator on the folder (a task defined from ../shared/data,
   no hub), and of the folder's int8 graph for sentence-transformers' ONNX backend run as that backend runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _render  # noqa: E402

from _report import DATA, ROOT, Section, machine, pair_spearman  # noqa: E402

SECTION = Section("ECOSYSTEM.md", "calibrate", _render.calibrate, ROOT / "bench" / "results" / "calibrate.json")

ISOLATED = r"""
import importlib.util, json, os, sys
src, jobs_file, out_file = sys.argv[1:4]
sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != os.path.realpath(src) and "__editable__" not in p]
assert importlib.util.find_spec("isotropy") is None
import numpy as np
from sentence_transformers import SentenceTransformer
jobs = json.load(open(jobs_file))
out = {k: SentenceTransformer(f, device="cpu").encode(jobs["sentences"], batch_size=64) for k, f in jobs["folders"].items()}
assert "isotropy" not in sys.modules
np.savez(out_file, **out)
"""


def encode_isolated(folders: dict[str, Path], sentences: list[str], tmp: Path):
    import numpy as np

    jobs = tmp / "jobs.json"
    jobs.write_text(json.dumps({"folders": {k: str(v) for k, v in folders.items()}, "sentences": sentences}))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    cmd = [sys.executable, "-I", "-c", ISOLATED, str(ROOT / "src"), str(jobs), str(tmp / "out.npz")]
    subprocess.run(cmd, cwd=tmp, env=env, check=True, capture_output=True)
    with np.load(tmp / "out.npz") as data:
        return {k: data[k] for k in data.files}


def parity(train: list[str], test: list[str], tmp: Path) -> list[str]:
    import numpy as np

    from isotropy.encoders import Encoder
    from isotropy.integrations import to_sentence_transformer
    from isotropy.transforms import PRESETS, TRANSFORMS, transform_class
    from isotropy.transforms.base import AffineTransform
    from isotropy.transforms.methods import parse_method

    methods = [k for k in TRANSFORMS if issubclass(transform_class(k), AffineTransform)]
    methods += [p for p, (k, _, _) in PRESETS.items() if issubclass(transform_class(k), AffineTransform)]
    rows = []
    enc = Encoder(max_length=64)
    vectors = enc.encode_multi(train, ["cls", "last-avg"])
    tests = enc.encode_multi(test, ["cls", "last-avg"])
    for pooling in ("cls", "last-avg"):
        penc = Encoder(pooling=pooling, max_length=64)
        folders, fitted = {}, {}
        for method in methods:
            fitted[method] = parse_method(method).build().fit(vectors[pooling])
            folders[method] = tmp / f"{pooling}-{method}"
            to_sentence_transformer(penc, fitted[method], folders[method], stock=True)
        got = encode_isolated(folders, test, tmp)
        for method, t in fitted.items():
            want = t.transform(tests[pooling].astype(np.float64))
            diff = float(np.abs(got[method] - want).max())
            rows.append(f"| {pooling} | {method} | stock Dense (float32) | {diff:.1e} | {float(np.abs(want).max()):.2f} |")
        custom = tmp / f"{pooling}-custom"
        to_sentence_transformer(penc, fitted["whitening"], custom, stock=False)
        from isotropy.integrations import load_sentence_transformer

        got = load_sentence_transformer(custom, device="cpu").encode(test, batch_size=64)
        want = fitted["whitening"].transform(tests[pooling].astype(np.float64))
        rows.append(
            f"| {pooling} | whitening | isotropy's module (float64) | {float(np.abs(got - want).max()):.1e} | "
            f"{float(np.abs(want).max()):.2f} |"
        )
    return rows


def mteb_spearman(folder: Path, pairs) -> float:
    from sentence_transformers import SentenceTransformer

    from isotropy.integrations.mteb import mteb_sts_spearman

    return mteb_sts_spearman(SentenceTransformer(str(folder), device="cpu"), pairs, "LocalSTSBenchmark")


def st_onnx_int8_spearman(folder: Path, pairs) -> float:
    """The folder's onnx/model_qint8_quantized.onnx as sentence-transformers' ONNX backend runs it (onnxruntime,
    then the folder's own Pooling and Dense modules in torch)."""
    import numpy as np
    import onnxruntime as ort
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu")
    session = ort.InferenceSession(str(folder / "onnx" / "model_qint8_quantized.onnx"), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    sents = list(dict.fromkeys(s for p in pairs for s in (p.s1, p.s2)))
    out = []
    for i in range(0, len(sents), 64):
        f = model.preprocess(sents[i : i + 64])
        feeds = {k: f[k].numpy() for k in names if k in f}
        if "token_type_ids" in names and "token_type_ids" not in feeds:
            feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
        feats = {"token_embeddings": torch.from_numpy(session.run(None, feeds)[0]), "attention_mask": f["attention_mask"]}
        with torch.no_grad():
            for m in list(model)[1:]:
                feats = m(feats)
        out.append(feats["sentence_embedding"].numpy())
    V = np.concatenate(out)
    row = {s: i for i, s in enumerate(sents)}
    return pair_spearman(V[[row[p.s1] for p in pairs]], V[[row[p.s2] for p in pairs]], [p.score for p in pairs])


def run_once(train: list[str], pairs, tmp: Path) -> dict:
    import resource

    from isotropy.calibration import run_calibration

    corpus = tmp / "train.txt"
    corpus.write_text("\n".join(train) + "\n", encoding="utf-8")
    t0 = time.perf_counter()
    c = run_calibration(
        corpus,
        tmp / "model",
        pooling="last-avg",
        max_length=64,
        shrinkage="auto",
        quantize="int8",
        eval_data=DATA / "sts" / "STSBenchmark",
    )
    total = time.perf_counter() - t0
    secs = c.info["fit"]["seconds"]
    ev = c.info["eval"]["tasks"]["STS-B"]
    t1 = time.perf_counter()
    m = mteb_spearman(c.path, pairs)
    t_mteb = time.perf_counter() - t1
    int8 = st_onnx_int8_spearman(c.path, pairs)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    r = {"train": len(train), "total_s": total, "encode_s": secs["encode_s"], "fit_s": secs["fit_s"], "peak_mib": peak}
    r.update(base=ev["base"], calibrated=ev["calibrated"], mteb=m, mteb_s=t_mteb, int8=int8, mteb_minus_eval=m - ev["calibrated"])
    return r


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--limit", type=int, default=None, help="only the first N train sentences (smoke runs)")
    args = ap.parse_args()
    if SECTION.rendered(args):
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from isotropy.evaluation import load_stsb

    task = load_stsb(DATA / "sts" / "STSBenchmark")
    train = list(dict.fromkeys(s for p in task.pairs(["train"]) for s in (p.s1, p.s2)))[: args.limit]
    pairs = task.pairs(["test"])
    test = list(dict.fromkeys(s for p in pairs for s in (p.s1, p.s2)))
    with tempfile.TemporaryDirectory() as tmp:
        rows = parity(train, test, Path(tmp))
    with tempfile.TemporaryDirectory() as tmp:
        run = run_once(train, pairs, Path(tmp))
    res = {"train": len(train), "test": len(test), "parity_rows": rows, "run": run, "machine": machine()}
    SECTION.publish(res, args)


if __name__ == "__main__":
    main()
