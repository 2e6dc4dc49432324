"""The model card (``README.md``) of a calibrated folder, written through huggingface_hub's ``ModelCard``.

The metadata (``ModelCardData``) is what the hub and sentence-transformers read: ``base_model``,
the base model's ``license`` and ``language`` when its own card declares them, ``library_name:
sentence-transformers``, tags, and a ``model-index`` holding the ``--eval`` results (task,
split, metric, base model and calibrated value). The text says how the folder was calibrated
(method, corpus size, with or without labels), its limitations (a score the calibration lowered
among them) and the papers the method comes from.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

__all__ = ["model_card", "base_model_id", "base_card_data", "CITATIONS"]

# The papers each calibration (and the card's own figures) come from, by transform kind.
_SU = "Su, Cao, Liu, Ou (2021). Whitening Sentence Representations for Better Semantics and Faster Retrieval. arXiv:2103.15316"
_LI = "Li, Zhou, He, Wang, Yang, Li (2020). On the Sentence Embeddings from Pre-trained Language Models. EMNLP 2020, arXiv:2011.05864"
_MU = (
    "Mu, Viswanath (2018). All-but-the-Top: Simple and Effective Postprocessing for Word Representations. "
    "ICLR 2018, arXiv:1702.01417"
)
_ARORA = "Arora, Liang, Ma (2017). A Simple but Tough-to-Beat Baseline for Sentence Embeddings. ICLR 2017"
_LW = (
    "Ledoit, Wolf (2004). A well-conditioned estimator for large-dimensional covariance matrices. J. Multivariate Analysis 88(2)"
)
_ISO = "Rudman, Gillman, Rayne, Eickhoff (2022). IsoScore: Measuring the Uniformity of Embedding Space Utilization. Findings of ACL 2022"
CITATIONS: dict[str, list[str]] = {
    "whitening": [_SU],
    "flow": [_LI],
    "center": [_MU],
    "abtt": [_MU],
    "common-component": [_ARORA],
    "raw": [],
    "zipfian-whitening": [
        "Yokoi, Bao, Kurita, Shimodaira (2024). Zipfian Whitening. NeurIPS 2024, arXiv:2411.00680",
        _SU,
    ],
}


def base_model_id(encoder: Any) -> str | None:
    """The base model's hub id (for ``base_model``), None for a local folder (its path is not published)."""
    from ..encoders.models import DEFAULT_MODEL_NAME

    name = str(encoder.model_name)
    if encoder.folder is None or name == DEFAULT_MODEL_NAME:
        return name
    return None


def base_card_data(encoder: Any) -> dict[str, Any]:
    """The base model's ``license`` and ``language`` as its own README.md declares them (absent ones left out)."""
    from huggingface_hub import ModelCard

    folder = getattr(encoder, "folder", None)
    readme = Path(folder) / "README.md" if folder is not None else None
    if readme is None or not readme.is_file():
        return {}
    try:
        data = ModelCard.load(readme, ignore_metadata_errors=True).data
    except Exception:  # a base model's card is optional: a broken one must not stop the calibration
        return {}
    return {k: v for k, v in (("license", data.license), ("language", data.language)) if v}


def _fmt(x: Any, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _eval_results(info: dict[str, Any]) -> list[Any]:
    """The ``--eval`` scores as ``model-index`` entries: the calibrated value and the base model's, per task."""
    from huggingface_hub import EvalResult

    ev = info.get("eval") or {}
    out = []
    for name, row in (ev.get("tasks") or {}).items():
        for label, value in (("calibrated", row["calibrated"]), ("base model", row["base"])):
            if value is None or (isinstance(value, float) and math.isnan(value)):
                continue
            out.append(
                EvalResult(
                    task_type="sentence-similarity",
                    task_name="Semantic Textual Similarity",
                    dataset_type=str(name),
                    dataset_name=f"{name} ({ev.get('data', name)})",
                    dataset_split=row.get("split") or "test",
                    metric_type=str(row["metric"]),
                    metric_name=f"{row['metric']} x 100, {label}",
                    metric_value=round(float(value), 4),
                )
            )
    return out


def _card_data(info: dict[str, Any]) -> Any:
    from huggingface_hub import ModelCardData

    method = "auto" if info.get("selection") else info["method"]
    base = info.get("base_card") or {}
    results = _eval_results(info)
    return ModelCardData(
        language=base.get("language"),
        license=base.get("license"),
        library_name="model2vec" if info.get("static") else "sentence-transformers",
        pipeline_tag="sentence-similarity",
        tags=list(dict.fromkeys(["sentence-transformers", "sentence-similarity", "feature-extraction", "isotropy", method])),
        base_model=info.get("base_model") or None,
        model_name=info["name"] if results else None,
        eval_results=results or None,
    )


def _static_usage(info: dict[str, Any]) -> list[str]:
    name = info["name"]
    return [
        "## Use",
        "",
        "```python",
        "from model2vec import StaticModel",
        "",
        f"model = StaticModel.from_pretrained({name!r})",
        'embeddings = model.encode(["A man is playing a guitar.", "Someone plays an instrument."])',
        "```",
        "",
        f"or `SentenceTransformer({name + '/sentence-transformers'!r})` (one `StaticEmbedding` module; it averages "
        "an unknown token's row where model2vec and isotropy leave unknown tokens out). A static model: each sentence "
        "vector is the mean of its tokens' rows, and the calibration is folded into the rows "
        "(`mean_t(E[t]) A + b = mean_t(E[t] A + b)`), so the calibrated model has the raw one's size and speed.",
        "",
    ]


def _usage(info: dict[str, Any]) -> list[str]:
    name = info["name"]
    if info.get("static"):
        return _static_usage(info)
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
        f"- {'fitted' if info['kind'] != 'raw' else 'nothing fitted (raw kept); signals read'} {_labels(info)} on "
        f"{fit['n_fit']:,} sentences of {info['corpus']}"
        + (f" (a seeded uniform sample of its {fit['n_sentences']:,})" if fit["n_fit"] != fit["n_sentences"] else ""),
        *_static_lines(info),
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


def _static_lines(info: dict[str, Any]) -> list[str]:
    """A static model's lines: the fit corpus's out-of-vocabulary rate and, for a token-level method, what it was fitted on."""
    out = []
    cov = info.get("coverage")
    if cov:
        n_empty = cov.get("sentences_without_known_token") or 0
        empty = f"; {n_empty:,} sentences had no known token (zero vectors)" if n_empty else ""
        out.append(
            f"- out-of-vocabulary tokens in the fit corpus: {100 * cov['oov_rate']:.2f}% "
            f"({cov['unknown_tokens']:,} of {cov['tokens']:,}){empty}"
        )
    tok = info.get("token_fit")
    if tok:
        out.append(f"- token-level: fitted on the {tok['table_rows']:,} rows of the table, weighted by {tok['weights']}")
    return out


def _labels(info: dict[str, Any]) -> str:
    """With or without labels: ``--dev`` pairs (or dev queries' qrels) chose the calibration in the few-label mode of ``--method auto``."""
    settings = (info.get("selection") or {}).get("settings") or {}
    if (info.get("selection") or {}).get("mode") == "few-label":
        if "dev_queries" in settings:
            return (
                f"without labels, the method chosen by the {settings.get('metric', 'ndcg@10')} of {settings['dev_queries']} "
                "dev queries searching their documents (`--dev`, relevance judgements),"
            )
        return f"without labels, the method chosen with {settings.get('dev_pairs', '?')} scored dev pairs (`--dev`),"
    return "without labels"


def _limitations(info: dict[str, Any]) -> list[str]:
    lines = [
        "## Limitations",
        "",
        f"- The calibration is fitted to {info['corpus']}: on text of another kind it can help less, or hurt. "
        "The anisotropy figures above are measured on that same corpus.",
    ]
    for name, row in ((info.get("eval") or {}).get("tasks") or {}).items():
        base, cal = row.get("base"), row.get("calibrated")
        if base is not None and cal is not None and not (math.isnan(base) or math.isnan(cal)) and cal < base:
            lines.append(
                f"- On {name} the calibration lowered {row['metric']} x 100 from {base:.2f} to {cal:.2f} "
                f"({cal - base:+.2f}): the base model is better there."
            )
    selection = info.get("selection") or {}
    if selection.get("mode") == "label-free":
        kept = "kept the base model's vectors" if selection.get("choice") == "raw" else f"chose {selection.get('choice')}"
        lines.append(
            f"- `--method auto` {kept} without labels, by the encoder's kind (static tables gain from whitening on "
            "held-out STS tasks, transformers mostly lose); it is not checked on this corpus's own similarities, and on "
            "some held-out tasks it lost more than 0.5 points (docs/AUTO.md in isotropy). Scored pairs or search labels "
            "of your own (`--dev`) choose by your data."
        )
    if not info["stock"]:
        lines.append("- Loading needs the `isotropy` package and `trust_remote_code=True` (see Use).")
    return [*lines, ""]


def _citations(info: dict[str, Any]) -> list[str]:
    refs = list(CITATIONS.get(info["kind"], []))
    if (info.get("params") or {}).get("shrinkage") not in (None, 0, 0.0):
        refs.append(_LW)
    refs.append(_ISO)
    return ["## Citations", "", *[f"- {r}" for r in dict.fromkeys(refs)], ""]


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
    lines += ["", "The same figures are in the `model-index` of this card's metadata."]
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
    from huggingface_hub import ModelCard

    base = info["base_model"] or info["base_name"]
    how = _labels(info)
    how = "no labels" if how == "without labels" else ("a few dev queries' qrels" if "queries" in how else "a few scored pairs")
    how += "" if how == "no labels" else " chose the method"
    title = [f"# {info['name']}", "", f"{base}, calibrated with {info['method']} by isotropy ({how}, no training).", ""]
    body = _usage(info) + _calibration(info) + _selection(info) + _evaluation(info) + _limitations(info) + _citations(info)
    text = "\n".join(title + body)
    card = ModelCard(f"---\n{_card_data(info).to_yaml()}\n---\n\n{text}")  # parses and checks the metadata
    return str(card)
