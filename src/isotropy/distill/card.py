"""The model card's section on how isotropy made a distilled model (the distill package: text only, from the record
``isotropy.json`` keeps)."""

from __future__ import annotations

from typing import Any

__all__ = ["card_section"]


def card_section(info: dict[str, Any]) -> str:
    lines = [
        "",
        "## How isotropy made this model",
        "",
        f"Distilled from `{info['teacher']}` by model2vec, {info['dims']} dimensions.",
    ]
    fit = info.get("corpus_fit")
    if fit is None:
        lines.append("No corpus fit: the distilled table as model2vec made it.")
    else:
        lines.append(f"Fitted on {fit['sentences']} sentences of {fit['corpus']} against the teacher's L2-normalised vectors:")
        lines.append("the sentence-level least-squares map from the static vectors to the teacher's, folded into the table.")
        if "teacher_projection" in fit:
            lines.append(f"Targets: {fit['teacher_projection']}.")
        tok = fit.get("tokens")
        if tok is not None:
            lines.append(
                f"Then every token the corpus holds ({tok['seen']}) got the row that makes sentence means match the teacher, "
                f"regularised toward the mapped row (strength {tok['lambda']:g}, "
                f"{ {'held-out (mse)': 'chosen by the squared error on held-out corpus sentences', 'held-out (cosine)': 'chosen by the agreement of cosines on held-out corpus sentences', 'given': 'as given'}.get(tok['chosen'], tok['chosen']) })."
            )
        if "spans" in fit:
            lines.append(f"Spans: {fit['spans']}.")
        if "words" in info:
            lines.append(
                f"Whole-word rows: {info['words_added']} of the corpus's most frequent words the tokenizer splits "
                f"(--words {info['words']}) became tokens of their own, each fitted as any other token."
            )
        if "target_scale" in fit:
            lines.append(f"Token-fit targets: {fit['target_scale']}; cosines, which ignore the norm, are unchanged by it.")
        if fit.get("teacher_cache", "off") != "off":
            lines.append(f"Teacher vectors: {fit['teacher_cache']} (read back verified: the exact vectors the teacher gave).")
    lines.append(
        "Sentence vectors are the plain mean of token rows (not normalised), in model2vec and sentence-transformers alike."
    )
    lines.append(
        "It loads with `model2vec.StaticModel.from_pretrained(folder)` and, in `sentence-transformers/`, with `SentenceTransformer`."
    )
    return "\n".join(lines) + "\n"
