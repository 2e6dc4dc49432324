"""The model card (``README.md``) of a calibrated folder, with the YAML header sentence-transformers cards use."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["model_card", "base_model_id"]


def base_model_id(encoder: Any) -> str | None:
    """The base model's hub id (for ``base_model``), None for a local folder (its path is not published)."""
    from ..encoders.models import DEFAULT_MODEL_NAME

    name = str(encoder.model_name)
    if encoder.folder is None or name == DEFAULT_MODEL_NAME:
        return name
    return None


def _fmt(x: Any, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _header(info: dict[str, Any]) -> list[str]:
    method = "auto" if info.get("selection") else info["method"]
    tags = ["sentence-transformers", "sentence-similarity", "feature-extraction", "isotropy", method]
    lines = ["---", "library_name: sentence-transformers", "pipeline_tag: sentence-similarity", "tags:"]
    lines += [f"- {t}" for t in dict.fromkeys(tags)]
    if info.get("base_model"):
        lines.append(f"base_model: {info['base_model']}")
    return [*lines, "---", ""]


def _usage(info: dict[str, Any]) -> list[str]:
    name = info["name"]
    if info["stock"]:
        lines = [
            "## Use",
            "",
            "```python",
            "from sentence_transformers import SentenceTransformer",
            "",
            f"model = SentenceTransformer({name!r})",
            'embeddings = model.encode(["A man is playing a guitar.", "Someone plays an instrument."])',
            "print(model.similarity(embeddings, embeddings))",
            "```",
            "",
            "The folder holds sentence-transformers' own modules only ("
            + " -> ".join(info["modules"])
            + "): no `isotropy` and no `trust_remote_code` needed. "
            + (
                "`--method auto` kept the base model's vectors as they are: no `Dense` module."
                if info["kind"] == "raw"
                else "The calibration is the `Dense` modules after the pooling, `y = (x - mean) W` (identity activation): "
                "one subtracts the mean, the next multiplies by `W`."
            ),
        ]
    else:
        lines = [
            "## Use",
            "",
            f"This folder uses module classes of the Python package `isotropy` ({', '.join(info['custom'])} cannot be "
            "written with stock sentence-transformers modules): install it (`pip install isotropy`) and pass "
            "`trust_remote_code=True`, which lets sentence-transformers import the installed package's classes "
            "(no code is read from this folder).",
            "",
            "```python",
            "from sentence_transformers import SentenceTransformer",
            "",
            f"model = SentenceTransformer({name!r}, trust_remote_code=True)",
            'embeddings = model.encode(["A man is playing a guitar."])',
            "```",
        ]
    onnx = info.get("onnx") or {}
    if onnx:
        lines += ["", "### ONNX", ""]
        if onnx.get("st"):
            lines.append(
                f"- `{onnx['st'][0]}`: the transformer alone, for sentence-transformers' ONNX backend "
                f'(`SentenceTransformer({name!r}, backend="onnx")`, which needs `optimum-onnx`); the Pooling and '
                "Dense modules run after it."
                + (f' int8: `model_kwargs={{"file_name": "{onnx["st"][1]}"}}`.' if len(onnx["st"]) > 1 else "")
            )
        else:
            lines.append(
                f"- no graph for sentence-transformers' ONNX backend: pooling {info['pooling']!r} reads more than the last "
                "layer, which that backend does not return."
            )
        lines.append(
            f"- `{onnx['isotropy']}/`: pooling and calibration inside one graph{' (int8)' if onnx.get('quantize') else ''}, "
            f'for `isotropy.Encoder({name!r}, backend="onnx")` or onnxruntime directly (output `sentence_embedding`).'
        )
    return [*lines, ""]


def _calibration(info: dict[str, Any]) -> list[str]:
    fig = info["anisotropy"]
    fit = info["fit"]
    lines = [
        "## Calibration",
        "",
        f"- base model: {info['base_model'] or info['base_name']} with pooling `{info['pooling']}`, "
        f"max_length {info['max_length']}, {info['dim_in']} dimensions",
        f"- method: `{info['method']}` ({info['describe']}), output {info['dim_out']} dimensions",
        f"- fitted without labels on {fit['n_fit']:,} sentences of {info['corpus']}"
        + (f" (a seeded uniform sample of its {fit['n_sentences']:,})" if fit["n_fit"] != fit["n_sentences"] else ""),
        f"- written by isotropy {info['isotropy_version']}",
        "",
        "| | average cosine of random pairs | IsoScore |",
        "|---|---|---|",
        f"| before | {_fmt(fig['before']['average_cosine'])} | {_fmt(fig['before']['isoscore'])} |",
        f"| after | {_fmt(fig['after']['average_cosine'])} | {_fmt(fig['after']['isoscore'])} |",
        "",
        f"Average cosine: 10,000 random pairs of {fig['cosine_rows']['n']:,} corpus sentences (0 is isotropic); "
        f"IsoScore (Rudman et al., 2022) from the covariance of {fig['isoscore_rows']['n']:,} corpus vectors "
        "(1 is isotropic). Both are in-sample: measured on the corpus the calibration was fitted on.",
    ]
    gap = info.get("float32")
    if info["stock"] and gap:
        lines += [
            "",
            f"Precision: sentence-transformers runs the Dense modules in float32; on {gap['rows']:,} corpus sentences it "
            f"agrees with the float64 calibration to within {gap['max_abs_diff']:.2g} (largest entry "
            f"{gap['max_abs_value']:.3g}).",
        ]
    for note in info.get("warnings") or []:
        lines += ["", f"Note from the fit: {note}"]
    return [*lines, ""]


def _evaluation(info: dict[str, Any]) -> list[str]:
    ev = info.get("eval")
    if not ev:
        return []
    lines = [
        "## Evaluation",
        "",
        f"On {ev['data']}, the same pairs for both (`isotropy eval`'s scoring: cosine of each pair against the gold "
        "score; Spearman x 100, or ROC-AUC x 100 for 0/1 labels). The calibration was fitted on the corpus above, "
        "not on these pairs.",
        "",
        "| task | metric | pairs | base model | calibrated |",
        "|---|---|---|---|---|",
    ]
    for name, row in ev["tasks"].items():
        lines.append(f"| {name} | {row['metric']} | {row['pairs']:,} | {_fmt(row['base'], 2)} | {_fmt(row['calibrated'], 2)} |")
    return [*lines, ""]


def _selection(info: dict[str, Any]) -> list[str]:
    """``--method auto``: what was compared, what decided, and every candidate's evidence."""
    if not info.get("selection"):
        return []
    from ..selection import Selection

    sel = Selection.from_dict(info["selection"], "isotropy.json")
    return [
        "## Choice of calibration (`--method auto`)",
        "",
        f"Compared on {sel.settings.get('corpus_rows', '?'):,} sentences of the corpus. The evidence (docs/AUTO.md in "
        "isotropy says how reliable each criterion was on held-out tasks):",
        "",
        sel.markdown(),
        "",
    ]


def model_card(info: dict[str, Any]) -> str:
    """The README.md text for ``info`` (what :func:`isotropy.calibration.calibrate` records in isotropy.json)."""
    base = info["base_model"] or info["base_name"]
    title = [f"# {info['name']}", "", f"{base}, calibrated with {info['method']} by isotropy (no labels, no training).", ""]
    return "\n".join(_header(info) + title + _usage(info) + _calibration(info) + _selection(info) + _evaluation(info))
