"""sentence-transformers' CPU backends, timed on bench/encode.py's workloads; run in a separate venv.

sentence-transformers' ``backend="onnx"`` cannot be installed beside sentence-transformers >= 6 (the project's pin:
optimum-onnx needs transformers < 4.58), and ``backend="openvino"`` pulls an unpinned torchvision that breaks the
project venv; so the peers run here, in a venv made from bench/peers/requirements-st5.txt (see that file), and write
JSON that bench/encode.py reads. sentence-transformers' own torch backend is timed in the same process as the common
reference: every backend is reported as a ratio to it.

    PEERS/bin/python bench/encode_peers.py --model MODEL_DIR --out peers.json [--threads 1] [--rounds 3] [--quick]

Backends: ST torch; ST onnx fp32 and its ``export_dynamic_quantized_onnx_model`` int8 (``avx512_vnni``); ST openvino
fp32 (``INFERENCE_PRECISION_HINT=f32``), its default (bf16 where the CPU has AMX/avx512_bf16) and
``export_static_quantized_openvino_model`` int8 calibrated on STS-B *train* sentences from a local csv. Exports go to
``--work`` (reused). Accuracy: STS-B test Spearman x 100 of cls and mean pooling, computed from each backend's token
embeddings with scipy.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore")
HERE = Path(__file__).resolve().parent
# a bench script named like a package would shadow it: the bench folder goes last on the path, not first
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]
from _encode_data import calibration_sentences, long_passages, short_sentences, st_runner, stsb_rows, time_rounds  # noqa: E402

ONNX_INT8 = "onnx/model_qint8_avx512_vnni.onnx"
OV_INT8 = "openvino/openvino_model_qint8_quantized.xml"


def prepare(model: Path, work: Path, calib_n: int) -> Path:
    """A copy of the model folder holding ST's ONNX and OpenVINO exports (made once, reused)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.backend import export_dynamic_quantized_onnx_model, export_static_quantized_openvino_model

    folder = work / "model"
    if not folder.exists():
        shutil.copytree(model, folder)  # save_pretrained rewrites the folder: never the installed one
    if not (folder / "onnx" / "model.onnx").exists():
        m = SentenceTransformer(str(folder), backend="onnx", device="cpu")
        m.save_pretrained(str(folder))
    if not (folder / ONNX_INT8).exists():
        m = SentenceTransformer(str(folder), backend="onnx", device="cpu")
        export_dynamic_quantized_onnx_model(m, "avx512_vnni", str(folder))
    if not (folder / "openvino" / "openvino_model.xml").exists():
        m = SentenceTransformer(str(folder), backend="openvino", device="cpu")
        m.save_pretrained(str(folder))
    if not (folder / OV_INT8).exists():
        from optimum.intel import OVQuantizationConfig

        calib = work / "calib"
        calib.mkdir(exist_ok=True)
        with open(calib / "train.csv", "w", encoding="utf-8", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["sentence"])
            w.writerows([s] for s in calibration_sentences(calib_n))
        m = SentenceTransformer(str(folder), backend="openvino", device="cpu")
        export_static_quantized_openvino_model(
            m,
            OVQuantizationConfig(num_samples=calib_n),
            str(folder),
            dataset_name=str(calib),
            dataset_config_name="default",
            dataset_split="train",
            column_name="sentence",
        )
    return folder


def load_models(folder: Path, threads: int) -> dict:
    import onnxruntime as ort
    from sentence_transformers import SentenceTransformer

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    ov = {"INFERENCE_NUM_THREADS": str(threads), "PERFORMANCE_HINT": "LATENCY"}
    specs = {
        "ST torch fp32": ("torch", None),
        "ST onnx fp32": ("onnx", {"file_name": "onnx/model.onnx", "session_options": so}),
        "ST onnx int8 (dynamic, avx512_vnni)": ("onnx", {"file_name": ONNX_INT8, "session_options": so}),
        "ST openvino fp32 (f32 hint)": ("openvino", {"ov_config": dict(ov, INFERENCE_PRECISION_HINT="f32")}),
        "ST openvino default (bf16 on AMX)": ("openvino", {"ov_config": dict(ov)}),
        "ST openvino int8 (static, STS-B train)": ("openvino", {"file_name": OV_INT8, "ov_config": dict(ov)}),
    }
    return {name: SentenceTransformer(str(folder), backend=be, device="cpu", model_kwargs=kw) for name, (be, kw) in specs.items()}


def accuracy(models: dict, rows, max_length: int) -> dict:
    """STS-B test Spearman x 100 of cls and mean pooling (token embeddings -> pooled here, scipy)."""
    import numpy as np

    from _report import pair_spearman

    sents = short_sentences(rows)
    gold = np.array([r[2] for r in rows])
    out = {}
    for name, m in models.items():
        m.max_seq_length = max_length
        toks = m.encode(sents, batch_size=64, output_value="token_embeddings", show_progress_bar=False)
        res = {}
        for pooling, f in (("cls", lambda t: t[0]), ("last-avg", lambda t: t.mean(0))):
            v = np.stack([np.asarray(f(t.float() if hasattr(t, "float") else t), dtype=np.float64) for t in toks])
            res[pooling] = pair_spearman(v[0::2], v[1::2], gold)
        out[name] = res
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, type=Path, help="the default model's folder (bench/encode.py passes it)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--work", type=Path, default=Path("/tmp/isotropy-bench-encode/peers"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-lengths", default="64,256")
    ap.add_argument("--calibration", type=int, default=100, help="STS-B train sentences for OpenVINO static int8")
    ap.add_argument("--quick", action="store_true", help="a few hundred sentences, one round (smoke test)")
    ap.add_argument("--no-accuracy", action="store_true")
    args = ap.parse_args()

    import sentence_transformers
    import torch

    torch.set_num_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    folder = prepare(args.model, args.work, args.calibration)
    export_s = time.perf_counter() - t0
    models = load_models(folder, args.threads)
    tok = models["ST torch fp32"].tokenizer
    rows = stsb_rows("test")
    short = short_sentences(rows)
    long = long_passages(short, lambda t: len(tok(t)["input_ids"]))
    if args.quick:
        short, long, args.rounds = short[:256], long[:16], 1
    lengths = [int(x) for x in args.max_lengths.split(",")]
    workloads = {(wl, ml): texts for wl, texts in (("short", short), ("long", long)) for ml in lengths}
    for m in models.values():  # warm-up (first-call graph compilation)
        m.encode(short[:64], batch_size=args.batch_size, show_progress_bar=False)
    times = time_rounds({n: st_runner(m, args.batch_size) for n, m in models.items()}, workloads, args.rounds)
    acc = {} if args.no_accuracy else accuracy(models, rows[:128] if args.quick else rows, max(lengths))
    import onnxruntime
    import openvino

    result = {
        "versions": {
            "sentence_transformers": sentence_transformers.__version__,
            "torch": torch.__version__,
            "onnxruntime": onnxruntime.__version__,
            "openvino": openvino.__version__,
            "python": sys.version.split()[0],
        },
        "threads": args.threads,
        "rounds": args.rounds,
        "batch_size": args.batch_size,
        "export_seconds": export_s,
        "calibration_sentences": args.calibration,
        "counts": {"short": len(short), "long": len(long)},
        "reference": "ST torch fp32",
        "times": times,
        "accuracy": acc,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
