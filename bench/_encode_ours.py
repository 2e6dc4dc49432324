"""bench/encode.py's backends in the project process: isotropy's encoders and sentence-transformers torch.

Every backend is a callable ``encode(texts, max_length)``; ``_encode_data.time_rounds`` runs them interleaved (every
round runs every workload on every backend in turn) and keeps wall and process CPU time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from _encode_data import st_runner

from _report import pair_spearman

TOKEN_BUDGET = 2048  # padded tokens a batch for the token-budget rows (see docs/BENCHMARKS.md)


def onnx_exports(work: Path, poolings=("last-avg", "cls")) -> dict[tuple[str, str], Path]:
    """isotropy's ONNX exports (fp32 and dynamic int8) of the default model, one per pooling (made once)."""
    from isotropy.integrations.onnx_export import export_onnx

    out = {}
    for pooling in poolings:
        for q in ("fp32", "int8"):
            folder = work / f"onnx-{pooling}-{q}"
            if not (folder / "isotropy_onnx.json").exists():
                export_onnx(folder, pooling=pooling, quantize=None if q == "fp32" else "int8", force=True)
            out[(pooling, q)] = folder
    return out


def our_encoders(exports: dict, threads: int, batch_size: int, pooling: str = "last-avg") -> dict[str, dict]:
    """name -> {kind, make(max_length) -> Encoder}; kind is the matching peak (fp32, bf16, int8)."""
    from isotropy.encoders import Encoder

    def torch_enc(precision: str, tokens: int | None = None):
        return lambda ml: Encoder(pooling=pooling, max_length=ml, batch_size=batch_size, precision=precision, batch_tokens=tokens)

    def onnx_enc(q: str, tokens: int | None = None):
        return lambda ml: Encoder(
            exports[(pooling, q)], backend="onnx", max_length=ml, batch_size=batch_size, threads=threads, batch_tokens=tokens
        )

    return {
        "ours torch fp32": {"kind": "fp32", "make": torch_enc("fp32")},
        f"ours torch fp32, {TOKEN_BUDGET}-token batches": {"kind": "fp32", "make": torch_enc("fp32", TOKEN_BUDGET)},
        "ours torch bf16": {"kind": "bf16", "make": torch_enc("bf16")},
        f"ours torch bf16, {TOKEN_BUDGET}-token batches": {"kind": "bf16", "make": torch_enc("bf16", TOKEN_BUDGET)},
        "ours onnx fp32": {"kind": "fp32", "make": onnx_enc("fp32")},
        "ours onnx int8": {"kind": "int8", "make": onnx_enc("int8")},
        f"ours onnx int8, {TOKEN_BUDGET}-token batches": {"kind": "int8", "make": onnx_enc("int8", TOKEN_BUDGET)},
    }


def st_torch(batch_size: int):
    """sentence-transformers' default torch backend on the same model folder (as loaded: mean pooling + normalize)."""
    from sentence_transformers import SentenceTransformer

    from isotropy.encoders import default_model_path

    return SentenceTransformer(str(default_model_path()), device="cpu")


def make_runners(encoders: dict, st, batch_size: int, max_lengths) -> dict[str, Callable]:
    """Encoders built once per max_length (outside the timing), then called on the texts."""
    built = {name: {ml: spec["make"](ml) for ml in max_lengths} for name, spec in encoders.items()}
    runners: dict[str, Callable] = {"ST torch fp32": st_runner(st, batch_size)}
    for name, per_ml in built.items():
        runners[name] = lambda texts, ml, per_ml=per_ml: per_ml[ml].encode(texts, show_progress=False)
    return runners


def _sides(v):  # the sentence pairs laid out as rows 0, 1 / 2, 3 / ...
    return v[0::2], v[1::2]


def accuracy(exports: dict, st, sentences: list[str], gold: np.ndarray, max_length: int) -> dict[str, dict[str, float]]:
    """STS-B test Spearman x 100 of cls and last-avg per backend (isotropy's evaluation metrics)."""
    from isotropy.encoders import Encoder

    out = {}
    for precision in ("fp32", "bf16"):
        enc = Encoder(pooling="last-avg", max_length=max_length, precision=precision)
        vecs = enc.encode_multi(sentences, ["cls", "last-avg"], show_progress=False)
        out[f"ours torch {precision}"] = {p: pair_spearman(*_sides(v), gold) for p, v in vecs.items()}
    for q in ("fp32", "int8"):
        out[f"ours onnx {q}"] = {
            p: pair_spearman(*_sides(Encoder(exports[(p, q)], backend="onnx", max_length=max_length).encode(sentences)), gold)
            for p in ("cls", "last-avg")
        }
    st.max_seq_length = max_length
    toks = st.encode(sentences, batch_size=64, output_value="token_embeddings", show_progress_bar=False)
    cls = np.stack([t[0].float().numpy() for t in toks])
    mean = np.stack([t.float().mean(0).numpy() for t in toks])
    out["ST torch fp32"] = {"cls": pair_spearman(*_sides(cls), gold), "last-avg": pair_spearman(*_sides(mean), gold)}
    return out
