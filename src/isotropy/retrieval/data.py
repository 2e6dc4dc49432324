"""Retrieval tasks (layer 5.5): documents, queries and graded relevance judgements (qrels).

Three folder layouts are read, recognised by their files:

* BEIR: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``, ``text``)
  and ``qrels/test.tsv`` (``query-id``, ``corpus-id``, ``score``; a header line is skipped);
* plain: ``documents.txt`` and ``queries.txt``, one a line (a document's or a query's id is its
  line number - 1, as in ``isotropy index build``), and ``qrels.tsv``: ``query document gain``
  (or TREC's four columns ``query 0 document gain``);
* SMART, starting with Cranfield: ``cran.all.1400`` (``.I``, ``.T`` title, ``.W`` abstract),
  ``cran.qry`` and ``cranqrel``. The queries' ``.I`` numbers are not the qrels' numbers: the
  qrels number the queries 1..225 in file order. Codes 1 (complete answer) .. 4 (minimum
  interest) become gains ``5 - code``; -1 ("of no interest") is not relevant.

A gain above 0 is relevant. Queries without any relevant document are not evaluated (BEIR's
``queries.jsonl`` lists every split's queries; the qrels of ``test`` pick them). Bad input is one
:class:`IsotropyError` naming the file and line: a qrel naming an unknown document or query, a
duplicate id, an empty query, a gain that is not an integer.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import IsotropyError
from ..storage.text import iter_json_objects, iter_sentences

__all__ = [
    "RetrievalTask",
    "load_retrieval",
    "load_beir",
    "load_plain",
    "load_cranfield",
    "read_qrels",
    "is_retrieval_folder",
    "find_retrieval_folder",
    "layout_names",
]


@dataclass
class RetrievalTask:
    """Documents, queries and qrels: ``qrels[query_id][doc_id] = gain`` (> 0: relevant)."""

    name: str
    doc_ids: list[str]
    docs: list[str]
    query_ids: list[str]  # only the queries with at least one relevant document
    queries: list[str]
    qrels: dict[str, dict[str, int]]
    source: str = ""
    dropped_queries: int = 0  # queries read but not evaluated (no relevant document)
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        judged = sum(sum(1 for g in d.values() if g > 0) for d in self.qrels.values())
        return f"{self.name}: {len(self.docs)} documents, {len(self.queries)} queries, {judged} relevant judgements"


def _unique(ids: list[tuple[str, str]], what: str) -> dict[str, int]:
    """``{id: row}``; a duplicate id is an error naming both places (``ids``: ``(id, where)``)."""
    seen: dict[str, int] = {}
    for row, (i, where) in enumerate(ids):
        if i in seen:
            raise IsotropyError(f"{where}: duplicate {what} id {i!r} (first at {ids[seen[i]][1]})")
        seen[i] = row
    return seen


def build_task(name, source, docs, queries, qrels_rows) -> RetrievalTask:
    """Check ids and qrels, keep the queries with a relevant document. ``docs``/``queries``:
    ``[(id, text, where)]``; ``qrels_rows``: ``[(query, doc, gain, where)]``."""
    doc_row = _unique([(i, w) for i, _, w in docs], "document")
    query_row = _unique([(i, w) for i, _, w in queries], "query")
    for i, text, where in queries:
        if not text.strip():
            raise IsotropyError(f"{where}: query {i!r} is empty")
    qrels: dict[str, dict[str, int]] = {}
    seen: dict[tuple[str, str], str] = {}
    for q, d, gain, where in qrels_rows:
        if q not in query_row:
            raise IsotropyError(f"{where}: qrel names query {q!r}, which is not among the {len(queries)} queries")
        if d not in doc_row:
            raise IsotropyError(f"{where}: qrel names document {d!r}, which is not among the {len(docs)} documents")
        if (q, d) in seen:
            raise IsotropyError(f"{where}: duplicate qrel for query {q!r} and document {d!r} (first at {seen[(q, d)]})")
        seen[(q, d)] = where
        qrels.setdefault(q, {})[d] = gain
    if not docs:
        raise IsotropyError(f"{source}: no document")
    kept = [(i, t) for i, t, _ in queries if any(g > 0 for g in qrels.get(i, {}).values())]
    if not kept:
        raise IsotropyError(f"{source}: no query has a relevant document (a qrel with a gain above 0): nothing to evaluate")
    return RetrievalTask(
        name=name,
        doc_ids=[i for i, _, _ in docs],
        docs=[t for _, t, _ in docs],
        query_ids=[i for i, _ in kept],
        queries=[t for _, t in kept],
        qrels={i: qrels[i] for i, _ in kept},
        source=source,
        dropped_queries=len(queries) - len(kept),
    )


GAIN_MIN, GAIN_MAX = -(2**31), 2**31 - 1  # trec_eval (pytrec_eval) keeps a gain in a C int: beyond, every metric is garbage


def _gain(text: str, where: str) -> int:
    """A relevance gain: a plain integer (Python's ``int()`` would also take ``1_000`` or other scripts' digits)
    that fits trec_eval's C int; anything else is one line naming the file and line (#31, W10-W12)."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise IsotropyError(f"{where}: relevance {text!r} is not an integer")
    gain = int(text)
    if not GAIN_MIN <= gain <= GAIN_MAX:
        raise IsotropyError(
            f"{where}: relevance {text} is outside the integers trec_eval can score ({GAIN_MIN} to {GAIN_MAX}); "
            f"use small graded gains (0, 1, 2, ...)"
        )
    return gain


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_qrels(path: str | os.PathLike) -> list[tuple[str, str, int, str]]:
    """``[(query, document, gain, where)]`` from a TSV of ``query document gain`` (or TREC's
    ``query 0 document gain``); a first line whose gain is not a number is a header."""
    rows = []
    for number, line in iter_sentences(path):
        where = f"{path} line {number}"
        parts = line.split("\t") if "\t" in line else line.split()
        if not line.strip():
            continue
        if len(parts) not in (3, 4):
            raise IsotropyError(f"{where}: expected 3 columns (query, document, gain) or TREC's 4, got {len(parts)}")
        q, d, g = (parts[0], parts[1], parts[2]) if len(parts) == 3 else (parts[0], parts[2], parts[3])
        if number == 1 and not _numeric(g):
            continue  # header (a first line whose gain is a number of any kind, 1.5 or 1e3, is a row: _gain names it)
        rows.append((q.strip(), d.strip(), _gain(g.strip(), where), where))
    return rows


def _jsonl(path: Path, keys: tuple[str, ...]) -> list[tuple[str, str, str]]:
    out = []
    for number, rec in iter_json_objects(path, "'_id' and 'text'"):
        where = f"{path} line {number}"
        if "_id" not in rec or "text" not in rec:
            raise IsotropyError(f"{where}: a record needs '_id' and 'text'")
        text = " ".join(str(rec.get(k) or "").strip() for k in keys if str(rec.get(k) or "").strip())
        out.append((str(rec["_id"]), text, where))
    return out


def load_beir(folder: str | os.PathLike, split: str = "test") -> RetrievalTask:
    """A BEIR folder: ``corpus.jsonl`` (title and text joined), ``queries.jsonl``, ``qrels/SPLIT.tsv``."""
    f = Path(folder)
    docs = _jsonl(f / "corpus.jsonl", ("title", "text"))
    queries = _jsonl(f / "queries.jsonl", ("text",))
    return build_task(f.name, str(f), docs, queries, read_qrels(f / "qrels" / f"{split}.tsv"))


def _lines(path: Path) -> list[tuple[str, str, str]]:
    return [(str(n - 1), text, f"{path} line {n}") for n, text in iter_sentences(path)]


def load_plain(folder: str | os.PathLike) -> RetrievalTask:
    """A plain folder: ``documents.txt`` and ``queries.txt`` (id = line number - 1), ``qrels.tsv``."""
    f = Path(folder)
    return build_task(f.name, str(f), _lines(f / "documents.txt"), _lines(f / "queries.txt"), read_qrels(f / "qrels.tsv"))


def _smart_records(path: Path) -> list[tuple[str, dict[str, str], str]]:
    """``[(.I id, {field letter: text}, where)]`` of a SMART file."""
    records: list[tuple[str, dict[str, list[str]], str]] = []
    current: list[str] | None = None
    for number, line in iter_sentences(path):
        m = re.match(r"^\.([A-Z])\b\s*(.*)$", line)
        if m and m.group(1) == "I":
            records.append((m.group(2).strip(), {}, f"{path} line {number}"))
            current = None
        elif m:
            if not records:
                raise IsotropyError(f"{path} line {number}: field .{m.group(1)} before the first .I record")
            current = records[-1][1].setdefault(m.group(1), [])
            if m.group(2).strip():
                current.append(m.group(2))
        elif current is not None:
            current.append(line)
        elif line.strip():
            raise IsotropyError(f"{path} line {number}: text outside a field (expected .I, .T, .A, .B or .W)")
    return [(i, {k: " ".join(" ".join(v).split()) for k, v in fields.items()}, w) for i, fields, w in records]


def load_cranfield(folder: str | os.PathLike) -> RetrievalTask:
    """Cranfield 1400 in its SMART files (see the module docs for its numbering and codes)."""
    f = Path(folder)
    docs = [
        (i, ". ".join(t for t in (r.get("T", ""), r.get("W", "")) if t), w) for i, r, w in _smart_records(f / "cran.all.1400")
    ]
    # the qrels number the queries 1..N in file order, not by their .I numbers
    queries = [(str(n), r.get("W", ""), w) for n, (_, r, w) in enumerate(_smart_records(f / "cran.qry"), start=1)]
    qrels = []
    for q, d, code, where in read_qrels(f / "cranqrel"):
        if code not in (-1, 1, 2, 3, 4):
            raise IsotropyError(f"{where}: Cranfield relevance code {code} is not one of -1, 1, 2, 3, 4")
        qrels.append((q, d, 0 if code == -1 else 5 - code, where))
    return build_task("cranfield", str(f), docs, queries, qrels)


LAYOUTS = {
    "beir": (("corpus.jsonl", "queries.jsonl"), load_beir),
    "plain": (("documents.txt", "queries.txt", "qrels.tsv"), load_plain),
    "smart": (("cran.all.1400", "cran.qry", "cranqrel"), load_cranfield),
}


def is_retrieval_folder(folder: str | os.PathLike) -> bool:
    f = Path(folder)
    return f.is_dir() and any(all((f / n).is_file() for n in names) for names, _ in LAYOUTS.values())


def find_retrieval_folder(folder: str | os.PathLike) -> Path | None:
    """The folder holding one of the layouts: ``folder`` itself, or its one subfolder that does
    (e.g. data/retrieval holding cranfield/); None when there is none."""
    f = Path(folder)
    if is_retrieval_folder(f):
        return f
    if not f.is_dir():
        return None
    subs = [p for p in sorted(f.iterdir()) if p.is_dir() and is_retrieval_folder(p)]
    return subs[0] if len(subs) == 1 else None


def load_retrieval(folder: str | os.PathLike, option: str = "--retrieval") -> RetrievalTask:
    """Read a retrieval folder in any of the three layouts (see the module docs); ``option`` names
    where the folder was given, in the messages."""
    f = Path(folder)
    if not f.is_dir():
        raise IsotropyError(f"{option} {folder}: not a folder")
    found = find_retrieval_folder(f)
    if found is not None:
        for names, loader in LAYOUTS.values():
            if all((found / n).is_file() for n in names):
                return loader(found)
    raise IsotropyError(f"{option} {folder}: no retrieval layout found (expected the files of one of {layout_names()})")


def layout_names() -> str:
    """The layouts and their files, for messages."""
    return "; ".join(f"{k}: {', '.join(v[0])}" for k, v in LAYOUTS.items())
