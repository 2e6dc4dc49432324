"""Bad input and faults, one row each: every answer is one line, exit status 2, nothing lost.

Each row runs the command line in-process (``isotropy.cli.main``) in a fresh copy of a
workspace of inputs and artefacts, and asserts:

* the exit status (2 for bad input unless the row says otherwise);
* that stderr is exactly one line, ``error: ...``, naming what the row says it must
  (the file, the row or the option), and that no traceback is printed anywhere;
* that nothing in the workspace changed (a snapshot of every file, folder, mode and
  content digest, hidden temporaries included, taken before and after), except the
  paths a successful row is allowed to write.

The faults that need real processes (two writers at once, SIGTERM) are tested below the
table with real subprocesses and signals.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from helpers import run_cli, snapshot

CORPUS = [
    f"Sentence number {i} talks about {w} and {v}."
    for i, (w, v) in enumerate(
        (w, v)
        for w in ("cats", "trains", "music", "rain", "bread", "chess", "rivers", "code")
        for v in ("joy", "noise", "maps", "gold", "time")
    )
]


@pytest.fixture(scope="session")
def base(tmp_path_factory) -> Path:
    """The workspace every row starts from: inputs, broken inputs, fitted artefacts, a user's files."""
    from isotropy import Flow, Index, Whitening

    w = tmp_path_factory.mktemp("workspace")
    rng = np.random.default_rng(0)
    (w / "corpus.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    (w / "two.txt").write_text("A cat sleeps.\nA dog barks.\n", encoding="utf-8")
    (w / "empty.txt").write_bytes(b"")
    (w / "blank.txt").write_text("\n   \n\n", encoding="utf-8")
    (w / "nonutf8.txt").write_bytes(b"a fine line\ncaf\xe9 au lait\n")
    (w / "binary.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00")
    X = rng.standard_normal((600, 32)).astype(np.float32)
    np.save(w / "vecs.npy", X)
    np.save(w / "vecs16.npy", X[:, :16].copy())
    bad = X.copy()
    bad[3, 5] = np.nan
    np.save(w / "nan.npy", bad)
    bad[3, 5] = np.inf
    np.save(w / "inf.npy", bad)
    np.save(w / "complex.npy", X[:50].astype(np.complex64))
    np.save(w / "onedim.npy", X[0])
    raw = (w / "vecs.npy").read_bytes()
    (w / "truncated.npy").write_bytes(raw[: len(raw) // 2])
    (w / "text.npy").write_text("this is text, not vectors\n", encoding="utf-8")
    (w / "shards").mkdir()
    np.save(w / "shards" / "a.npy", X[:300])
    np.save(w / "shards" / "b.npy", X[300:, :16].copy())
    Whitening().fit(X).save(w / "white")
    Flow(levels=2, depth=1, hidden=8).fit(X).save(w / "flow")
    Index(None, None).add(CORPUS).save(w / "index")
    (w / "userdir").mkdir()
    (w / "userdir" / "notes.txt").write_text("my notes, not isotropy's\n", encoding="utf-8")
    (w / "notes.txt").write_text("a user's file\n", encoding="utf-8")
    (w / "notes.json").write_text('{"mine": true}\n', encoding="utf-8")
    (w / "emptydir").mkdir()
    (w / "pairs.tsv").write_text(
        "sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{i % 5}\n" for i, (a, b) in enumerate(zip(CORPUS, CORPUS[1:]))),
        encoding="utf-8",
    )
    return w


@dataclass(frozen=True)
class Case:
    """One bad input. ``{w}`` in ``args`` and ``mentions`` is the workspace folder."""

    name: str
    args: tuple[str, ...]
    mentions: tuple[str, ...] = ()
    code: int = 2
    setup: Callable[[Path], None] | None = None
    stdin: bytes | None = None
    may_change: tuple[str, ...] = ()  # workspace paths a successful row writes
    absent: tuple[str, ...] = ()  # words the line must not hold (a misleading hint)
    blocked: tuple[str, ...] = ()  # modules made unimportable for the row (a missing optional extra)


def _edit_json(rel: str, **changes) -> Callable[[Path], None]:
    def setup(w: Path) -> None:
        p = w / rel
        cfg = json.loads(p.read_text(encoding="utf-8"))
        cfg.update(changes)
        p.write_text(json.dumps(cfg), encoding="utf-8")

    return setup


def _remove(rel: str) -> Callable[[Path], None]:
    return lambda w: (w / rel).unlink()


def _truncate(rel: str) -> Callable[[Path], None]:
    def setup(w: Path) -> None:
        data = (w / rel).read_bytes()
        (w / rel).write_bytes(data[: len(data) // 2])

    return setup


def _flip(rel: str) -> Callable[[Path], None]:
    def setup(w: Path) -> None:
        data = bytearray((w / rel).read_bytes())
        data[len(data) // 2] ^= 0x01
        (w / rel).write_bytes(bytes(data))

    return setup


def _copy(src: str, dst: str) -> Callable[[Path], None]:
    return lambda w: shutil.copy(w / src, w / dst)


OUT = "{w}/out"

# --------------------------------------------------------------------------- outputs: never destroy what isotropy did not write
OUTPUT_CASES = [
    Case(
        "fit whitening over a user's folder",
        ("fit", "whitening", "{w}/vecs.npy", "-o", "{w}/userdir"),
        ("{w}/userdir", "--force", "notes.txt"),
    ),
    Case("fit flow over a user's folder", ("fit", "flow", "{w}/vecs.npy", "-o", "{w}/userdir"), ("{w}/userdir", "--force")),
    Case(
        "index build over a user's folder", ("index", "build", "{w}/corpus.txt", "-o", "{w}/userdir"), ("{w}/userdir", "--force")
    ),
    Case("analyze over a user's folder", ("analyze", "{w}/corpus.txt", "-o", "{w}/userdir"), ("{w}/userdir", "--force")),
    Case("export onnx over a user's folder", ("export", "onnx", "-o", "{w}/userdir"), ("{w}/userdir", "--force")),
    Case("demo over a user's folder", ("demo", "-o", "{w}/userdir"), ("{w}/userdir", "--force")),
    Case("fit whitening over a flow", ("fit", "whitening", "{w}/vecs.npy", "-o", "{w}/flow"), ("{w}/flow", "fitted whitening")),
    Case(
        "fit whitening over a file",
        ("fit", "whitening", "{w}/vecs.npy", "-o", "{w}/notes.txt"),
        ("{w}/notes.txt", "not a folder"),
    ),
    Case("encode over a user's text file", ("encode", "{w}/corpus.txt", "-o", "{w}/notes.txt"), ("{w}/notes.txt", "--force")),
    Case("encode into a folder", ("encode", "{w}/corpus.txt", "-o", "{w}/userdir"), ("{w}/userdir", "is a folder")),
    Case(
        "transform into a folder",
        ("transform", "{w}/white", "{w}/vecs.npy", "-o", "{w}/emptydir"),
        ("{w}/emptydir", "is a folder"),
    ),
    Case(
        "eval --output a folder",
        ("eval", "--data", "{w}/pairs.tsv", "--output", "{w}/userdir"),
        ("{w}/userdir", "is a folder", "--output"),
    ),
    Case("eval -o a user's JSON", ("eval", "--data", "{w}/pairs.tsv", "-o", "{w}/notes.json"), ("{w}/notes.json", "--force")),
    Case(
        "eval --output beside a user's .md",
        ("eval", "--data", "{w}/pairs.tsv", "--output", "{w}/res.json"),
        ("{w}/res.md",),
        setup=lambda w: (w / "res.md").write_text("# my page\n", encoding="utf-8"),
    ),
    Case("encode onto its own input", ("encode", "{w}/corpus.txt", "-o", "{w}/corpus.txt"), ("{w}/corpus.txt", "input")),
    Case("fit whitening onto its input", ("fit", "whitening", "{w}/vecs.npy", "-o", "{w}/vecs.npy"), ("{w}/vecs.npy", "input")),
    Case(
        "output inside the input folder", ("fit", "whitening", "{w}/shards", "-o", "{w}/shards/white"), ("{w}/shards", "inside")
    ),
    Case(
        "input inside the output folder",
        ("fit", "whitening", "{w}/userdir/vecs.npy", "-o", "{w}/userdir", "--force"),
        ("{w}/userdir", "input"),
        setup=_copy("vecs.npy", "userdir/vecs.npy"),
    ),
    Case("transform onto its input", ("transform", "{w}/white", "{w}/vecs.npy", "-o", "{w}/vecs.npy"), ("{w}/vecs.npy", "input")),
    Case(
        "analyze with the corpus in the report folder",
        ("analyze", "{w}/userdir/c.txt", "-o", "{w}/userdir", "--force"),
        ("{w}/userdir",),
        setup=_copy("corpus.txt", "userdir/c.txt"),
    ),
    Case("encode -o ''", ("encode", "{w}/corpus.txt", "-o", ""), ("--output", "empty")),
    Case("fit whitening -o ''", ("fit", "whitening", "{w}/vecs.npy", "-o", ""), ("--output", "empty")),
    Case("index build -o ''", ("index", "build", "{w}/corpus.txt", "-o", ""), ("--output", "empty")),
    Case("analyze -o ''", ("analyze", "{w}/corpus.txt", "-o", ""), ("--output", "empty")),
    Case("output folder missing", ("encode", "{w}/corpus.txt", "-o", "{w}/nowhere/v.npy"), ("{w}/nowhere", "does not exist")),
    # allowed: our own artefact of the same kind, an empty folder, or --force
    Case(
        "fit whitening over a whitening",
        ("fit", "whitening", "{w}/vecs.npy", "-o", "{w}/white", "-k", "8"),
        code=0,
        may_change=("white",),
    ),
    Case(
        "fit whitening into an empty folder",
        ("fit", "whitening", "{w}/vecs.npy", "-o", "{w}/emptydir"),
        code=0,
        may_change=("emptydir",),
    ),
    Case(
        "fit whitening over a user's folder with --force",
        ("fit", "whitening", "{w}/vecs.npy", "-o", "{w}/userdir", "--force"),
        code=0,
        may_change=("userdir",),
    ),
    Case(
        "transform over earlier vectors",
        ("transform", "{w}/white", "{w}/vecs.npy", "-o", "{w}/earlier.npy"),
        code=0,
        setup=lambda w: _own_vectors(w / "earlier.npy"),
        may_change=("earlier.npy", "earlier.json"),  # the vectors and their sidecar
    ),
    # L1-L8 of #22: an input inside the output (or the output itself) is refused, --force or not
    Case(
        "index build --model inside -o, forced",
        ("index", "build", "{w}/corpus.txt", "-o", "{w}/userdir", "--model", "{w}/userdir/mymodel", "--force"),
        ("{w}/userdir/mymodel", "inside the output"),
        setup=lambda w: _user_folder(w / "userdir" / "mymodel"),
    ),
    Case(
        "calibrate --model inside -o, forced",
        ("calibrate", "{w}/corpus.txt", "-o", "{w}/userdir", "--model", "{w}/userdir/mymodel", "--force"),
        ("{w}/userdir/mymodel", "inside the output"),
        setup=lambda w: _user_folder(w / "userdir" / "mymodel"),
    ),
    Case(
        "analyze --model inside -o, forced",
        ("analyze", "{w}/corpus.txt", "-o", "{w}/userdir", "--model", "{w}/userdir/mymodel", "--force"),
        ("{w}/userdir/mymodel", "inside the output"),
        setup=lambda w: _user_folder(w / "userdir" / "mymodel"),
    ),
    Case(
        "fit token-frequencies --model inside -o, forced",
        ("fit", "token-frequencies", "{w}/corpus.txt", "-o", "{w}/userdir", "--model", "{w}/userdir/m", "--force"),
        ("{w}/userdir/m", "inside the output"),
        setup=lambda w: _user_folder(w / "userdir" / "m"),
    ),
    Case(
        "calibrate --dev inside -o, forced",
        ("calibrate", "{w}/corpus.txt", "-o", "{w}/userdir", "--method", "auto", "--dev", "{w}/userdir/notes.txt", "--force"),
        ("{w}/userdir/notes.txt", "inside the output"),
    ),
    Case(
        "encode --pooling-stats is -o, forced",
        ("encode", "{w}/corpus.txt", "-o", "{w}/notes.txt", "-p", "sif", "--pooling-stats", "{w}/notes.txt", "--force"),
        ("{w}/notes.txt", "is the input"),
    ),
    Case(
        "eval --fit-on is --output, forced",
        ("eval", "--data", "{w}/pairs.tsv", "--fit-on", "{w}/notes.json", "--output", "{w}/notes.json", "--force"),
        ("{w}/notes.json", "is the input"),
    ),
    Case(
        "encode --model is -o, forced",
        ("encode", "{w}/corpus.txt", "-o", "{w}/userdir", "--model", "{w}/userdir", "--force"),
        ("{w}/userdir", "input"),
    ),
    # L9: a .npy isotropy did not write is the user's
    Case("encode over a user's own .npy", ("encode", "{w}/corpus.txt", "-o", "{w}/vecs16.npy"), ("{w}/vecs16.npy", "--force")),
    Case(
        "transform over a user's own .npy",
        ("transform", "{w}/white", "{w}/vecs.npy", "-o", "{w}/vecs16.npy"),
        ("{w}/vecs16.npy", "--force"),
    ),
    Case(
        "transform over isotropy vectors edited since",
        ("transform", "{w}/white", "{w}/vecs.npy", "-o", "{w}/earlier.npy"),
        ("{w}/earlier.npy", "--force"),
        setup=lambda w: (_own_vectors(w / "earlier.npy"), np.save(w / "earlier.npy", np.zeros((3, 4), np.float32))),
    ),
]


def _user_folder(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "mine"}\n', encoding="utf-8")


def _own_vectors(path: Path) -> None:
    from isotropy.storage.vectors import save_npy

    save_npy(path, np.ones((5, 32), np.float32), kind="vectors")


# --------------------------------------------------------------------------- inputs that were already answered well: kept so
INPUT_CASES = [
    Case("encode an empty file", ("encode", "{w}/empty.txt", "-o", OUT + ".npy"), ("{w}/empty.txt", "empty")),
    Case("encode non-UTF-8", ("encode", "{w}/nonutf8.txt", "-o", OUT + ".npy"), ("{w}/nonutf8.txt", "line 2")),
    Case("encode a binary file", ("encode", "{w}/binary.bin", "-o", OUT + ".npy"), ("{w}/binary.bin",)),
    Case("encode a missing file", ("encode", "{w}/missing.txt", "-o", OUT + ".npy"), ("{w}/missing.txt",)),
    Case("index build on blank lines", ("index", "build", "{w}/blank.txt", "-o", OUT), ("{w}/blank.txt",)),
    Case("analyze a binary file", ("analyze", "{w}/binary.bin", "-o", OUT), ("{w}/binary.bin",)),
    Case("index add non-UTF-8", ("index", "add", "{w}/index", "{w}/nonutf8.txt"), ("{w}/nonutf8.txt", "line 2")),
    Case("fit whitening NaN", ("fit", "whitening", "{w}/nan.npy", "-o", OUT), ("{w}/nan.npy", "row 3")),
    Case("fit whitening inf", ("fit", "whitening", "{w}/inf.npy", "-o", OUT), ("{w}/inf.npy", "row 3")),
    Case("fit whitening complex", ("fit", "whitening", "{w}/complex.npy", "-o", OUT), ("{w}/complex.npy", "complex")),
    Case("fit whitening 1-D", ("fit", "whitening", "{w}/onedim.npy", "-o", OUT), ("{w}/onedim.npy", "2-D")),
    Case("fit whitening truncated .npy", ("fit", "whitening", "{w}/truncated.npy", "-o", OUT), ("{w}/truncated.npy",)),
    Case(
        "fit whitening text as .npy",
        ("fit", "whitening", "{w}/text.npy", "-o", OUT),
        ("{w}/text.npy",),
        absent=("allow_pickle", "pickle"),
    ),
    Case("fit whitening mixed widths", ("fit", "whitening", "{w}/shards", "-o", OUT), ("b.npy",)),
    Case("fit flow truncated .npy", ("fit", "flow", "{w}/truncated.npy", "-o", OUT), ("{w}/truncated.npy",)),
    Case(
        "fit flow text as .npy", ("fit", "flow", "{w}/text.npy", "-o", OUT), ("{w}/text.npy",), absent=("allow_pickle", "pickle")
    ),
    Case("fit flow NaN", ("fit", "flow", "{w}/nan.npy", "-o", OUT), ("{w}/nan.npy", "row 3")),
    Case("fit flow mixed widths", ("fit", "flow", "{w}/shards", "-o", OUT), ("{w}/shards",)),
    Case("transform NaN", ("transform", "{w}/white", "{w}/nan.npy", "-o", OUT + ".npy"), ("{w}/nan.npy", "row 3")),
    Case("transform wrong width", ("transform", "{w}/white", "{w}/vecs16.npy", "-o", OUT + ".npy"), ("{w}/vecs16.npy", "16")),
    Case("transform a missing folder", ("transform", "{w}/nothere", "{w}/vecs.npy", "-o", OUT + ".npy"), ("{w}/nothere",)),
    Case("search an empty query file", ("search", "{w}/index", "--queries", "{w}/empty.txt"), ("{w}/empty.txt",)),
    Case(
        "offline unknown model",
        ("encode", "{w}/corpus.txt", "-o", OUT + ".npy", "-m", "someone/unknown-model"),
        ("someone/unknown-model", "unreachable"),
    ),
    Case("missing model folder", ("encode", "{w}/corpus.txt", "-o", OUT + ".npy", "-m", "{w}/no-model"), ("{w}/no-model",)),
    Case("model given as a file", ("encode", "{w}/corpus.txt", "-o", OUT + ".npy", "-m", "{w}/notes.txt"), ("{w}/notes.txt",)),
    Case("empty model folder", ("encode", "{w}/corpus.txt", "-o", OUT + ".npy", "-m", "{w}/emptydir"), ("{w}/emptydir",)),
]

# --------------------------------------------------------------------------- option values
OPTION_CASES = [
    Case("--max-length 0", ("encode", "{w}/corpus.txt", "-o", OUT + ".npy", "--max-length", "0"), ("max_length",)),
    Case("--max-length abc", ("encode", "{w}/corpus.txt", "-o", OUT + ".npy", "--max-length", "abc"), ("--max-length",)),
    Case("--max-length too long", ("encode", "{w}/corpus.txt", "-o", OUT + ".npy", "--max-length", "100000"), ("max_length",)),
    Case("--batch-size 0", ("encode", "{w}/corpus.txt", "-o", OUT + ".npy", "--batch-size", "0"), ("batch_size",)),
    Case("--pooling bogus", ("encode", "{w}/corpus.txt", "-o", OUT + ".npy", "--pooling", "bogus"), ("bogus",)),
    Case("--pooling layers-avg:99", ("encode", "{w}/corpus.txt", "-o", OUT + ".npy", "--pooling", "layers-avg:99"), ("99",)),
    Case("missing -o", ("encode", "{w}/corpus.txt"), ("--output",)),
    Case("unknown option", ("encode", "{w}/corpus.txt", "-o", OUT + ".npy", "--frobnicate"), ("--frobnicate",)),
    Case("fit whitening -k 0", ("fit", "whitening", "{w}/vecs.npy", "-o", OUT, "-k", "0"), ("n_components",)),
    Case("fit whitening -k too many", ("fit", "whitening", "{w}/vecs.npy", "-o", OUT, "-k", "33"), ("33",)),
    Case("fit whitening --power 2", ("fit", "whitening", "{w}/vecs.npy", "-o", OUT, "--power", "2"), ("power",)),
    Case("fit whitening --shrinkage x", ("fit", "whitening", "{w}/vecs.npy", "-o", OUT, "--shrinkage", "x"), ("shrinkage",)),
    Case("fit whitening --method bogus", ("fit", "whitening", "{w}/vecs.npy", "-o", OUT, "--method", "bogus"), ("bogus",)),
    Case("fit flow --levels 0", ("fit", "flow", "{w}/vecs.npy", "-o", OUT, "--levels", "0"), ("levels",)),
    Case("fit flow --lr -1", ("fit", "flow", "{w}/vecs.npy", "-o", OUT, "--lr", "-1"), ("lr",)),
    Case("fit flow --coupling bogus", ("fit", "flow", "{w}/vecs.npy", "-o", OUT, "--coupling", "bogus"), ("bogus",)),
    Case("analyze --seed -1", ("analyze", "{w}/corpus.txt", "-o", OUT, "--seed", "-1"), ("--seed",)),
    Case("analyze --pairs 0", ("analyze", "{w}/corpus.txt", "-o", OUT, "--pairs", "0"), ("pairs",)),
    Case("index build --kind bogus", ("index", "build", "{w}/corpus.txt", "-o", OUT, "--kind", "bogus"), ("bogus",)),
    Case("index build --whiten 0", ("index", "build", "{w}/corpus.txt", "-o", OUT, "--whiten", "0"), ("--whiten",)),
    Case(
        "index build --whiten beyond the corpus",
        ("index", "build", "{w}/two.txt", "-o", OUT, "--whiten", "8"),
        ("{w}/two.txt", "8"),
    ),
    Case(
        "index build two choices",
        ("index", "build", "{w}/corpus.txt", "-o", OUT, "--no-whiten", "--whiten", "8"),
        ("--no-whiten",),
    ),
    Case(
        "index build --bytes-per-vector on a flat index",
        ("index", "build", "{w}/corpus.txt", "-o", OUT, "--bytes-per-vector", "16"),
        ("--bytes-per-vector", "flat"),
    ),
    Case(
        "index build ivfpq: bytes not dividing the dimension",
        ("index", "build", "{w}/corpus.txt", "-o", OUT, "--model", "glove-6b-50d", "--no-whiten", "--kind", "ivfpq")
        + ("--bytes-per-vector", "16"),
        ("{w}/corpus.txt", "--bytes-per-vector 16", "(50 after the calibration)"),
    ),
    Case(
        "index build --engine dask without --input",
        ("index", "build", "{w}/corpus.txt", "-o", OUT, "--kind", "ivfpq", "--engine", "dask"),
        ("--input",),
    ),
    Case("search -n 0", ("search", "{w}/index", "a query", "-n", "0"), ("k",)),
    Case(
        "serve --rerank on an index without kept vectors", ("serve", "{w}/index", "--port", "0", "--rerank", "5"), ("--rerank",)
    ),
    Case("search without a query", ("search", "{w}/index"), ("query",)),
    Case("export onnx --quantize int4", ("export", "onnx", "-o", OUT, "--quantize", "int4"), ("int4",)),
    Case("eval --method bogus", ("eval", "--data", "{w}/pairs.tsv", "--method", "bogus"), ("bogus",)),
    Case("eval --task bogus", ("eval", "--data", "{w}/pairs.tsv", "--task", "bogus"), ("bogus",)),
    Case(
        "eval --fit-on a missing file", ("eval", "--data", "{w}/pairs.tsv", "--fit-on", "{w}/missing.txt"), ("{w}/missing.txt",)
    ),
    Case("eval --shrinkage x", ("eval", "--data", "{w}/pairs.tsv", "--shrinkage", "x"), ("shrinkage",)),
    Case("--engine ray", ("encode", "--engine", "ray", "--input", "{w}/*.txt", "-o", OUT), ("ray",)),
    Case("--input without --engine", ("encode", "--input", "{w}/*.txt", "-o", OUT), ("--engine",)),
]

# --------------------------------------------------------------------------- artefacts: missing, truncated, edited files
ARTEFACT_CASES = [
    Case(
        "whitening without its state",
        ("transform", "{w}/white", "{w}/vecs.npy", "-o", OUT + ".npy"),
        ("state.safetensors",),
        setup=_remove("white/state.safetensors"),
    ),
    Case(
        "whitening without its config",
        ("transform", "{w}/white", "{w}/vecs.npy", "-o", OUT + ".npy"),
        ("config.json",),
        setup=_remove("white/config.json"),
    ),
    Case(
        "whitening state truncated",
        ("transform", "{w}/white", "{w}/vecs.npy", "-o", OUT + ".npy"),
        ("state.safetensors",),
        setup=_truncate("white/state.safetensors"),
    ),
    Case(
        "whitening config not JSON",
        ("transform", "{w}/white", "{w}/vecs.npy", "-o", OUT + ".npy"),
        ("config.json",),
        setup=lambda w: (w / "white" / "config.json").write_text("{not json", encoding="utf-8"),
    ),
    Case(
        "whitening of a future format",
        ("transform", "{w}/white", "{w}/vecs.npy", "-o", OUT + ".npy"),
        ("format version",),
        setup=_edit_json("white/config.json", format_version=99),
    ),
    Case(
        "whitening relabelled as flow",
        ("transform", "{w}/white", "{w}/vecs.npy", "-o", OUT + ".npy"),
        ("{w}/white", "whitening"),
        setup=_edit_json("white/config.json", kind="flow"),
        absent=("loss_curve",),
    ),
    Case(
        "flow relabelled as whitening",
        ("transform", "{w}/flow", "{w}/vecs.npy", "-o", OUT + ".npy"),
        ("{w}/flow", "flow"),
        setup=_edit_json("flow/config.json", kind="whitening"),
    ),
    Case(
        "flow state truncated",
        ("transform", "{w}/flow", "{w}/vecs.npy", "-o", OUT + ".npy"),
        ("state.safetensors",),
        setup=_truncate("flow/state.safetensors"),
    ),
    Case(
        "index kind edited",
        ("search", "{w}/index", "a query"),
        ("{w}/index",),
        setup=_edit_json("index/config.json", kind="whitening"),
    ),
    Case(
        "index kind edited (add)",
        ("index", "add", "{w}/index", "{w}/two.txt"),
        ("{w}/index",),
        setup=_edit_json("index/config.json", kind="whitening"),
    ),
    Case(
        "index sentences corrupt",
        ("search", "{w}/index", "a query"),
        ("sentences.jsonl", "sha256"),
        setup=lambda w: (w / "index" / "sentences.jsonl").write_bytes(b'"ok"\nnot json\n'),
    ),
    Case(
        "index faiss byte flipped",
        ("search", "{w}/index", "a query"),
        ("index.faiss", "sha256"),
        setup=_flip("index/index.faiss"),
    ),
    Case(
        "index sentences_file outside its folder",
        ("search", "{w}/index", "a query"),
        ("sentences_file", "/etc/hostname", "outside"),
        setup=_edit_json("index/config.json", sentences_file="/etc/hostname"),
    ),
    Case(
        "transform state byte flipped",
        ("transform", "{w}/white", "{w}/vecs.npy", "-o", "{w}/out.npy"),
        ("white/state.safetensors", "sha256"),
        setup=_flip("white/state.safetensors"),
    ),
    Case("index faiss file missing", ("search", "{w}/index", "a query"), ("index.faiss",), setup=_remove("index/index.faiss")),
    Case(
        "index count edited", ("search", "{w}/index", "a query"), ("{w}/index",), setup=_edit_json("index/config.json", count=3)
    ),
    Case(
        "index pooling edited",
        ("search", "{w}/index", "a query"),
        ("{w}/index",),
        setup=_edit_json("index/config.json", encoding_key="0" * 32),
    ),
    Case("not an index", ("search", "{w}/userdir", "a query"), ("{w}/userdir",)),
    Case("add to a whitening", ("index", "add", "{w}/white", "{w}/two.txt"), ("{w}/white",)),
]


# --------------------------------------------------------------------------- verified on load (wrong output must become an error)
def _tiny_model(rel: str, edit: Callable[[Path], None] | None = None, *, mlm: bool = False) -> Callable[[Path], None]:
    """Setup: a tiny random model folder at ``rel`` (DistilBERT, or a BERT saved from its masked-LM
    class, which has no pooler), with the default model's tokenizer; then ``edit(folder)``."""

    def setup(w: Path) -> None:
        import torch
        from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, DistilBertConfig, DistilBertModel

        from isotropy.encoders import default_model_path

        folder = w / rel
        torch.manual_seed(0)
        if mlm:
            BertForMaskedLM(
                BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
            ).save_pretrained(folder)
        else:
            DistilBertModel(
                DistilBertConfig(vocab_size=30522, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=128)
            ).save_pretrained(folder)
        AutoTokenizer.from_pretrained(str(default_model_path())).save_pretrained(folder)
        if edit is not None:
            edit(folder)

    return setup


def _drop_tensors(prefix: str) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        from safetensors.torch import load_file, save_file

        state = load_file(folder / "model.safetensors")
        save_file(
            {k: v for k, v in state.items() if not k.startswith(prefix)}, folder / "model.safetensors", metadata={"format": "pt"}
        )

    return edit


def _edit_params(rel: str, **changes) -> Callable[[Path], None]:
    def setup(w: Path) -> None:
        p = w / rel
        cfg = json.loads(p.read_text(encoding="utf-8"))
        cfg["params"].update(changes)
        p.write_text(json.dumps(cfg), encoding="utf-8")

    return setup


def _save(rel: str, make: Callable[[], np.ndarray]) -> Callable[[Path], None]:
    return lambda w: np.save(w / rel, make())


def _write(rel: str, text: str) -> Callable[[Path], None]:
    return lambda w: (w / rel).write_text(text, encoding="utf-8")


def _small() -> np.ndarray:
    return np.random.default_rng(1).standard_normal((40, 64)).astype(np.float32)


def _const_column() -> np.ndarray:
    X = np.random.default_rng(2).standard_normal((100, 32)).astype(np.float32)
    X[:, 5] = 0.25
    return X


ENCODE_TINY = ("encode", "{w}/corpus.txt", "-o", OUT + ".npy", "-m", "{w}/tiny")
FLAT_PAIRS = "sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t3\n" for a, b in zip(CORPUS, CORPUS[1:]))

LOAD_CASES: list[Case] = [
    # model folders transformers would load with random or missing layers
    Case(
        "model weights lack tensors",
        ENCODE_TINY,
        ("{w}/tiny", "lack 16 tensors", "transformer.layer.1."),
        setup=_tiny_model("tiny", _drop_tensors("transformer.layer.1.")),
    ),
    Case(
        "model weights hold layers its config lacks",
        ENCODE_TINY,
        ("{w}/tiny", "config.json", "transformer.layer.1."),
        setup=_tiny_model("tiny", lambda f: _edit_json("config.json", n_layers=1)(f)),
    ),
    Case(
        "model weights truncated",
        ENCODE_TINY,
        ("{w}/tiny/model.safetensors", "truncated"),
        setup=_tiny_model("tiny", lambda f: _truncate("model.safetensors")(f)),
    ),
    Case(
        "model folder without tokenizer files",
        ENCODE_TINY,
        ("{w}/tiny", "tokenizer"),
        setup=_tiny_model("tiny", lambda f: [p.unlink() for p in f.iterdir() if p.name.startswith("tokenizer")]),
    ),
    Case(
        "model folder without config.json",
        ENCODE_TINY,
        ("{w}/tiny", "config.json"),
        setup=_tiny_model("tiny", lambda f: (f / "config.json").unlink()),
    ),
    Case(
        "pooling pooler without pooler weights",
        (*ENCODE_TINY, "--pooling", "pooler"),
        ("{w}/tiny", "pooler.dense.weight", "'cls'"),
        setup=_tiny_model("tiny", mlm=True),
    ),
    Case(
        "empty model folder says what it lacks",
        ("encode", "{w}/corpus.txt", "-o", OUT + ".npy", "-m", "{w}/emptydir"),
        ("{w}/emptydir", "is empty", "config.json"),
    ),
    # saved transforms whose config.json disagrees with their state
    Case(
        "whitening dim edited",
        ("transform", "{w}/white", "{w}/vecs.npy", "-o", OUT + ".npy"),
        ("{w}/white", "dim 31", "32-dimensional"),
        setup=_edit_json("white/config.json", dim=31),
    ),
    Case(
        "whitening n_samples_seen edited",
        ("transform", "{w}/white", "{w}/vecs.npy", "-o", OUT + ".npy"),
        ("{w}/white", "n_samples_seen 6", "600 rows"),
        setup=_edit_json("white/config.json", n_samples_seen=6),
    ),
    Case(
        "whitening n_components_ edited",
        ("transform", "{w}/white", "{w}/vecs.npy", "-o", OUT + ".npy"),
        ("{w}/white", "n_components_ 16", "32 output dimensions"),
        setup=_edit_json("white/config.json", n_components_=16),
    ),
    Case(
        "flow n_features_in edited",
        ("transform", "{w}/flow", "{w}/vecs.npy", "-o", OUT + ".npy"),
        ("{w}/flow", "n_features_in 33", "n_features_in 32"),
        setup=_edit_json("flow/config.json", n_features_in=33),
    ),
    Case(
        "flow depth edited",
        ("transform", "{w}/flow", "{w}/vecs.npy", "-o", OUT + ".npy"),
        ("{w}/flow", "depth 3", "depth 1"),
        setup=_edit_params("flow/config.json", depth=3),
    ),
    # fits that would serve absurd vectors
    Case(
        "fit flow on fewer rows than dimensions",
        ("fit", "flow", "{w}/small.npy", "-o", OUT),
        ("{w}/small.npy", "40 rows for 64 dimensions"),
        setup=_save("small.npy", _small),
    ),
    Case(
        "fit flow on identical rows",
        ("fit", "flow", "{w}/same.npy", "-o", OUT),
        ("{w}/same.npy", "identical"),
        absent=("lr",),
        setup=_save("same.npy", lambda: np.ones((100, 32), np.float32)),
    ),
    Case(
        "fit flow on a constant column",
        ("fit", "flow", "{w}/constcol.npy", "-o", OUT),
        ("{w}/constcol.npy", "column 5"),
        setup=_save("constcol.npy", _const_column),
    ),
    Case(
        "fit flow that diverges",
        ("fit", "flow", "{w}/vecs.npy", "-o", OUT, "--lr", "0.03", "--batch-size", "4"),
        ("{w}/vecs.npy", "diverged", "bits/dim", "lr"),
    ),
    # advice fits the command: --shrinkage only where the command has it
    Case(
        "fit whitening -k beyond the rank",
        ("fit", "whitening", "{w}/small.npy", "-o", OUT, "-k", "50"),
        ("{w}/small.npy", "--shrinkage auto", "--n-components <= 39"),  # the command line's own spelling
        setup=_save("small.npy", _small),
    ),
    Case(
        "index build --whiten on identical sentences",
        ("index", "build", "{w}/same.txt", "-o", OUT, "--whiten", "2"),
        (
            "{w}/same.txt",
            "same vector",
        ),
        absent=("--shrinkage", "set shrinkage"),
        setup=_write("same.txt", "the very same line\n" * 12),
    ),
    Case(
        "analyze identical sentences",
        ("analyze", "{w}/same.txt", "-o", OUT),
        ("{w}/same.txt", "same vector"),
        absent=("--shrinkage", "set shrinkage"),
        setup=_write("same.txt", "the very same line\n" * 12),
    ),
    Case(
        "eval flow on too few sentences",
        ("eval", "--data", "{w}/pairs.tsv", "--method", "flow"),
        ("task pairs", "more sentences than dimensions"),
        absent=("shrinkage",),
    ),
    Case(
        "eval whitening on too few sentences",
        ("eval", "--data", "{w}/pairs.tsv", "--method", "whitening"),
        ("task pairs", "--shrinkage"),
    ),
    # a gold column nothing can be correlated with
    Case(
        "eval on a constant gold column",
        ("eval", "--data", "{w}/flat.tsv"),
        ("{w}/flat.tsv", "gold scores", "3"),
        setup=_write("flat.tsv", FLAT_PAIRS),
    ),
]

# --------------------------------------------------------------------------- the toolbox (#14): transforms and eval settings
TOOLBOX_CASES = [
    Case(
        "fit abtt with D >= d",
        ("fit", "abtt", "{w}/vecs.npy", "-o", OUT, "--n-components", "32"),
        ("{w}/vecs.npy", "--n-components 32", "32 dimensions"),
    ),
    Case("fit abtt with D < 0", ("fit", "abtt", "{w}/vecs.npy", "-o", OUT, "--n-components", "-1"), ("n_components",)),
    Case("eval --method abtt-K beyond the model", ("eval", "--data", "{w}/pairs.tsv", "--method", "abtt-384"), ("abtt-384",)),
    Case("eval --aggregate bogus", ("eval", "--data", "{w}/pairs.tsv", "--aggregate", "median"), ("median", "aggregate")),
    Case(
        "eval --fit-on others on a single task",
        ("eval", "--data", "{w}/pairs.tsv", "--fit-on", "others"),
        ("others", "only one task", "pairs"),
    ),
    Case(
        "fit a preset over a user's folder", ("fit", "soft-0.5", "{w}/vecs.npy", "-o", "{w}/userdir"), ("{w}/userdir", "--force")
    ),
]


# --------------------------------------------------------------------------- the poolings of #14: sif, idf, prompt, ditto
def _nomask_model(rel: str) -> Callable[[Path], None]:
    """Setup: a tiny BERT whose own small tokenizer has no mask token."""
    from helpers import tiny_bert

    return lambda w: tiny_bert(w / rel, mask_token=False)


def _token_table(rel: str, model_rel: str | None = None) -> Callable[[Path], None]:
    """Setup: token frequencies of CORPUS at ``rel``, counted with the default model's tokenizer (or ``model_rel``'s)."""

    def setup(w: Path) -> None:
        from transformers import AutoTokenizer

        from isotropy.encoders import default_model_path
        from isotropy.encoders.token_stats import TokenFrequencies

        if model_rel is not None:
            _nomask_model(model_rel)(w)
        tok = AutoTokenizer.from_pretrained(str(w / model_rel if model_rel else default_model_path()))
        TokenFrequencies.fit(tok, CORPUS, model_name=model_rel or "default").save(w / rel)

    return setup


def _then(*setups: Callable[[Path], None]) -> Callable[[Path], None]:
    return lambda w: [s(w) for s in setups]


ENCODE = ("encode", "{w}/corpus.txt", "-o", OUT + ".npy")
ENCODE_OUT = ENCODE

POOLING_CASES = [
    Case("sif without a frequency table", (*ENCODE, "--pooling", "sif"), ("'sif'", "--pooling-stats")),
    Case(
        "eval idf without a frequency table",
        ("eval", "--data", "{w}/pairs.tsv", "--pooling", "idf", "--method", "raw"),
        ("'idf'", "--pooling-stats"),
    ),
    Case(
        "token frequencies of another tokenizer",
        (*ENCODE, "--pooling", "sif", "--pooling-stats", "{w}/tf-other"),
        ("{w}/tf-other", "tokenizer of", "fit them again"),
        setup=_token_table("tf-other", "nomask"),
    ),
    Case("pooling stats that do not exist", (*ENCODE, "-p", "sif", "--pooling-stats", "{w}/missing"), ("{w}/missing",)),
    Case(
        "pooling stats of another kind",
        (*ENCODE, "-p", "sif", "--pooling-stats", "{w}/white"),
        ("{w}/white", "'whitening'", "token-frequencies"),
    ),
    Case(
        "token frequencies edited",
        (*ENCODE, "-p", "idf", "--pooling-stats", "{w}/tf"),
        ("{w}/tf", "n_tokens"),
        setup=_then(_token_table("tf"), _edit_json("tf/config.json", n_tokens=5)),
    ),
    Case(
        "fit token-frequencies over a user's folder",
        ("fit", "token-frequencies", "{w}/corpus.txt", "-o", "{w}/userdir"),
        ("{w}/userdir", "--force"),
    ),
    Case(
        "fit token-frequencies on blank lines",
        ("fit", "token-frequencies", "{w}/blank.txt", "-o", OUT),
        ("blank.txt", "no sentence"),
    ),
    Case("prompt template without [X]", (*ENCODE, "--pooling", "prompt:This sentence means [MASK] ."), ("[X]", "template")),
    Case("prompt template without a mask", (*ENCODE, "--pooling", 'prompt:This sentence : "[X]" .'), ("[MASK]", "template")),
    Case(
        "prompt on a model without a mask token",
        (*ENCODE, "-m", "{w}/nomask", "--pooling", "prompt"),
        ("{w}/nomask", "no mask token"),
        setup=_nomask_model("nomask"),
    ),
    Case(
        "prompt template longer than max_length",
        (*ENCODE, "-p", "prompt-denoised", "--max-length", "10"),
        ("max_length 10", "no room"),
    ),
    Case("ditto head out of range", (*ENCODE, "--pooling", "ditto:layer=0,head=12"), ("head 12", "12 heads")),
    Case("ditto layer out of range", (*ENCODE, "--pooling", "ditto:layer=6"), ("layer 6", "6 transformer layers")),
]

# --------------------------------------------------------------------------- isotropy calibrate (#15)
CALIBRATE = ("calibrate", "{w}/corpus.txt", "-o", OUT)
CALIBRATE_CASES = [
    Case("calibrate an empty corpus", ("calibrate", "{w}/empty.txt", "-o", OUT), ("{w}/empty.txt", "no sentence")),
    Case("calibrate a blank-only corpus", ("calibrate", "{w}/blank.txt", "-o", OUT), ("{w}/blank.txt", "no sentence")),
    Case("calibrate an empty standard input", ("calibrate", "-", "-o", OUT), ("standard input", "no sentence"), stdin=b""),
    Case(
        "calibrate a corpus smaller than whitening needs",
        CALIBRATE,
        ("{w}/corpus.txt", "has 40 sentences", "needs at least 385", "--shrinkage auto"),
    ),
    Case(
        "calibrate --onnx without the onnx extra",
        (*CALIBRATE, "--method", "center", "--onnx"),
        ("--onnx", "onnx extra", "pip install 'isotropy[onnx]'", "onnxruntime"),
        blocked=("onnxruntime",),
    ),
    Case("calibrate over a user's folder", ("calibrate", "{w}/corpus.txt", "-o", "{w}/userdir"), ("{w}/userdir", "--force")),
    Case("calibrate over a fitted whitening", ("calibrate", "{w}/corpus.txt", "-o", "{w}/white"), ("{w}/white", "--force")),
    Case("calibrate onto its corpus", ("calibrate", "{w}/corpus.txt", "-o", "{w}/corpus.txt"), ("{w}/corpus.txt", "input")),
    Case(
        "calibrate --stock-only a flow",
        (*CALIBRATE, "--method", "flow", "--stock-only"),
        ("--stock-only", "flow", "trust_remote_code"),
    ),
    Case(
        "calibrate --stock-only a prompt pooling",
        (*CALIBRATE, "--method", "center", "--pooling", "prompt", "--stock-only"),
        ("--stock-only", "pooling 'prompt'"),
    ),
    Case("calibrate --method unknown", (*CALIBRATE, "--method", "whitenning"), ("whitenning", "transforms are")),
    Case("calibrate --n-components for center", (*CALIBRATE, "--method", "center", "-k", "8"), ("--n-components", "center")),
    Case("calibrate --quantize int4", (*CALIBRATE, "--quantize", "int4"), ("int4", "int8")),
    Case("calibrate a missing corpus", ("calibrate", "{w}/nothere.txt", "-o", OUT), ("{w}/nothere.txt", "does not exist")),
    Case("calibrate a glob matching nothing", ("calibrate", "{w}/none-*.txt", "-o", OUT), ("{w}/none-*.txt", "no file")),
    Case("calibrate a non-UTF-8 corpus", ("calibrate", "{w}/nonutf8.txt", "-o", OUT), ("{w}/nonutf8.txt", "line 2", "UTF-8")),
    Case("calibrate --eval of a missing file", (*CALIBRATE, "--eval", "{w}/nope.tsv"), ("{w}/nope.tsv",)),
    Case("calibrate --engine ray", (*CALIBRATE, "--engine", "ray"), ("ray", "dask")),
]

# --------------------------------------------------------------------------- --method auto (#16)


def _dev_file(rel: str, pairs: list[tuple[str, str, float]]) -> Callable[[Path], None]:
    def setup(w: Path) -> None:
        rows = "".join(f"{a}\t{b}\t{g}\n" for a, b, g in pairs)
        (w / rel).write_text("sentence1\tsentence2\tscore\n" + rows, encoding="utf-8")

    return setup


def _beir_unknown_doc(w: Path) -> None:
    """A BEIR folder whose second qrel names a document the corpus does not hold."""
    (w / "beir" / "qrels").mkdir(parents=True)
    (w / "beir" / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "title": "", "text": CORPUS[i]}) + "\n" for i in range(3)), encoding="utf-8"
    )
    (w / "beir" / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": CORPUS[i + 3]}) + "\n" for i in range(3)), encoding="utf-8"
    )
    (w / "beir" / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\nq1\td9\t1\n", encoding="utf-8")


AUTO = (*CALIBRATE, "--method", "auto")
AUTO_CASES = [
    Case(
        "auto --dev a folder that is neither search labels nor pairs",
        (*AUTO, "--dev", "{w}/emptydir"),
        ("--dev {w}/emptydir", "neither a retrieval folder", "nor scored pairs"),
    ),
    Case(
        "auto --dev a retrieval folder whose qrel names an unknown document",
        (*AUTO, "--dev", "{w}/beir"),
        ("{w}/beir/qrels/test.tsv line 3", "'d9'", "not among the 3 documents"),
        setup=_beir_unknown_doc,
    ),
    Case(
        "--pooling auto without --method auto",
        (*CALIBRATE, "--pooling", "auto"),
        ("--pooling auto", "--method auto only"),
    ),
    Case(
        "auto --dev with fewer than 20 pairs",
        (*AUTO, "--dev", "{w}/dev.tsv"),
        ("{w}/dev.tsv", "has 5 pairs", "at least 20"),
        setup=_dev_file("dev.tsv", [(CORPUS[i], CORPUS[i + 1], i) for i in range(5)]),
    ),
    Case(
        "auto --dev with constant gold scores",
        (*AUTO, "--dev", "{w}/dev.tsv"),
        ("{w}/dev.tsv", "every gold score is 3"),
        setup=_dev_file("dev.tsv", [(CORPUS[i], CORPUS[i + 1], 3) for i in range(30)]),
    ),
    Case(
        "auto --dev whose pairs are all identical sentences",
        (*AUTO, "--dev", "{w}/dev.tsv"),
        ("{w}/dev.tsv", "compares a sentence with itself"),
        setup=_dev_file("dev.tsv", [(CORPUS[i], CORPUS[i], i % 5) for i in range(30)]),
    ),
    Case(
        "auto --candidates naming an unknown method",
        (*AUTO, "--candidates", "raw,whitenning"),
        ("'whitenning'", "candidates are"),
    ),
    Case("auto --candidates flow", (*AUTO, "--candidates", "center,flow"), ("flow is not a candidate",)),
    Case("auto with --n-components", (*AUTO, "-k", "8"), ("--n-components", "'auto'")),
    Case("auto with --engine dask", (*AUTO, "--engine", "dask"), ("--method auto", "--engine")),
    Case("--candidates without auto", (*CALIBRATE, "--candidates", "raw,center"), ("--candidates", "--method auto")),
    Case(
        "auto on a corpus too small for every candidate",
        ("calibrate", "{w}/two.txt", "-o", OUT, "--method", "auto", "--candidates", "whitening"),
        ("{w}/two.txt", "too few for every candidate", "add sentences"),
    ),
    Case(
        "index build --method auto with an unknown candidate",
        ("index", "build", "{w}/corpus.txt", "-o", OUT, "--method", "auto", "--candidates", "abtt,whitenning"),
        ("'whitenning'",),
    ),
    Case(
        "index build --method auto and --whiten",
        ("index", "build", "{w}/corpus.txt", "-o", OUT, "--method", "auto", "--whiten", "8"),
        ("--method auto", "--whiten"),
    ),
    Case("eval --method with a misspelt auto", ("eval", "--data", "{w}/pairs.tsv", "--method", "autoo"), ("'autoo'",)),
]

# --------------------------------------------------------------------------- encoding precision (#17)
PRECISION_CASES = [
    Case("encode --precision fp16", ("encode", "{w}/corpus.txt", "-o", OUT + ".npy", "--precision", "fp16"), ("fp16", "bf16")),
    Case(
        "encode --precision bf16 with --engine",
        ("encode", "--engine", "dask", "--input", "{w}/*.txt", "-o", OUT, "--precision", "bf16"),
        ("--precision", "--engine"),
    ),
]


# --------------------------------------------------------------------------- hangs, tracebacks and silent options of #22
def _stsb(score: str) -> Callable[[Path], None]:
    def setup(w: Path) -> None:
        folder = w / "stsb"
        folder.mkdir()
        for split in ("train", "dev", "test"):
            rows = [
                f"main-news\tf\t2012\t{i}\t{score if i == 0 else '2.5'}\t{a}\t{b}"
                for i, (a, b) in enumerate(zip(CORPUS, CORPUS[1:]))
            ]
            (folder / f"sts-{split}.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")

    return setup


def _pickled_model(w: Path) -> None:
    folder = w / "pickled"
    _user_folder(folder)
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00}\x94.")


HOSTILE_CASES = [
    Case("fit flow --levels 50", ("fit", "flow", "{w}/vecs.npy", "-o", OUT, "--levels", "50"), ("levels", "at most 16")),
    Case("fit flow --hidden 10^9", ("fit", "flow", "{w}/vecs.npy", "-o", OUT, "--hidden", "1000000000"), ("hidden",)),
    Case("fit flow --depth 10^6", ("fit", "flow", "{w}/vecs.npy", "-o", OUT, "--depth", "1000000"), ("depth",)),
    Case("fit flow --epochs 10^9", ("fit", "flow", "{w}/vecs.npy", "-o", OUT, "--epochs", "1000000000"), ("epochs",)),
    Case("analyze --pairs 10^8", ("analyze", "{w}/corpus.txt", "-o", OUT, "--pairs", "100000000"), ("--pairs", "10,000,000")),
    Case("fit whitening --model", ("fit", "whitening", "{w}/vecs.npy", "-o", OUT, "--model", "x"), ("--model", "--engine")),
    Case("encode --address without --engine", (*ENCODE_OUT, "--address", "tcp://h:8786"), ("--address", "--engine")),
    Case("index add blank lines", ("index", "add", "{w}/index", "{w}/blank.txt"), ("{w}/blank.txt", "line 1", "blank")),
    Case(
        "STS-B score outside 0-5",
        ("eval", "--data", "{w}/stsb", "--method", "raw"),
        ("sts-train.csv line 1", "7.5", "STS-B", "[0, 5]"),
        setup=_stsb("7.5"),
    ),
    Case(
        "pickled pytorch_model.bin",
        ("encode", "{w}/corpus.txt", "-o", OUT + ".npy", "-m", "{w}/pickled"),
        ("{w}/pickled/pytorch_model.bin", "pickle"),
        setup=_pickled_model,
    ),
    Case(
        "encode --transform of another width",
        (*ENCODE_OUT, "--transform", "{w}/white"),
        ("--transform", "{w}/white", "32", "384"),
    ),
]


# --------------------------------------------------------------------------- static tables (#23)


def _bytes(rel: str, data: bytes) -> Callable[[Path], None]:
    return lambda w: (w / rel).write_bytes(data)


def _static(rel: str) -> tuple[str, ...]:
    return ("encode", "{w}/two.txt", "-o", OUT + ".npy", "--model", "{w}/" + rel)


STATIC_CASES = [
    Case(
        "static table with a ragged row",
        _static("ragged.txt"),
        ("{w}/ragged.txt line 3", "ragged"),
        setup=_write("ragged.txt", "the 0.1 0.2\ncat 0.3 0.4\ndog 0.5\n"),
    ),
    Case(
        "static table with a non-number",
        _static("nan.txt"),
        ("{w}/nan.txt line 2", "not a number"),
        setup=_write("nan.txt", "the 0.1 0.2\ncat 0.3 x\n"),
    ),
    Case(
        "static table whose header count disagrees",
        _static("hdr.vec"),
        ("{w}/hdr.vec line 1", "header says 3 words"),
        setup=_write("hdr.vec", "3 2\nthe 0.1 0.2\ncat 0.3 0.4\n"),
    ),
    Case(
        "static table with a duplicate word",
        _static("dup.txt"),
        ("{w}/dup.txt line 2", "duplicate word 'the'"),
        setup=_write("dup.txt", "the 0.1 0.2\nthe 0.3 0.4\n"),
    ),
    Case("static table that is empty", _static("empty.vec"), ("{w}/empty.vec", "empty"), setup=_write("empty.vec", "")),
    Case(
        "static binary table truncated",
        _static("trunc.bin"),
        ("{w}/trunc.bin", "truncated"),
        setup=_bytes("trunc.bin", b"2 2\nthe \x00\x00\x00\x00"),
    ),
    Case(
        "static model with a transformer pooling",
        ("encode", "{w}/two.txt", "-o", OUT + ".npy", "--model", "{w}/ok.txt", "--pooling", "cls"),
        ("'cls'", "static model pools by mean"),
        setup=_write("ok.txt", "the 0.1 0.2\ncat 0.3 0.4\n"),
    ),
]

# --------------------------------------------------------------------------- static models, round 4 (#31)


def _folder(kind: str, rel: str, edit: Callable[[Path], None] | None = None, *head_args) -> Callable[[Path], None]:
    """A tiny model2vec (``kind="m2v"``) or StaticEmbedding (``"st"``) folder at ``rel``, then ``edit`` applied to it."""

    def setup(w: Path) -> None:
        from helpers import tiny_model2vec, tiny_st_static

        folder = tiny_model2vec(w / rel) if kind == "m2v" else tiny_st_static(w / rel, *(f() for f in head_args))
        if edit is not None:
            edit(folder)

    return setup


def _truncate(name: str) -> Callable[[Path], None]:
    return lambda f: (f / name).write_bytes((f / name).read_bytes()[:100])


def _mapping(values) -> Callable[[Path], None]:
    def edit(f: Path) -> None:
        from safetensors.numpy import load_file, save_file

        tensors = load_file(str(f / "model.safetensors"))
        save_file({**tensors, "mapping": np.asarray(values, dtype=np.int64)}, str(f / "model.safetensors"))

    return edit


def _tanh_dense():
    from sentence_transformers.base.modules import Dense

    return Dense(6, 3)  # sentence-transformers' default activation: Tanh


def _another_module(f: Path) -> None:
    modules = json.loads((f / "modules.json").read_text())
    modules.append({"idx": 1, "name": "1", "path": "1_LayerNorm", "type": "sentence_transformers.models.LayerNorm"})
    (f / "modules.json").write_text(json.dumps(modules))


def _model(rel: str) -> tuple[str, ...]:
    return ("encode", "{w}/two.txt", "-o", OUT + ".npy", "--model", "{w}/" + rel)


_BIN_BODY = b"the " + b"\0" * 8 + b"\ncat " + b"\0" * 8 + b"\ndog " + b"\0" * 8 + b"\n"
STATIC_ROUND4_CASES = [
    Case(
        "static binary header announcing fewer words than the file holds",
        _static("fewer.bin"),
        ("{w}/fewer.bin line 1", "header says 2 words, the file holds 3"),
        setup=_bytes("fewer.bin", b"2 2\n" + _BIN_BODY),
    ),
    Case(
        "model2vec mapping longer than the vocabulary",
        _model("m2v"),
        ("{w}/m2v/model.safetensors", "mapping", "vocabulary of 11 tokens"),
        setup=_folder("m2v", "m2v", _mapping(np.arange(20) % 11)),
    ),
    Case(
        "model2vec mapping out of range",
        _model("m2v"),
        ("{w}/m2v/model.safetensors", "outside the 11 rows"),
        setup=_folder("m2v", "m2v", _mapping([*range(10), 99])),
    ),
    Case(
        "model2vec model.safetensors truncated",
        _model("m2v"),
        ("{w}/m2v/model.safetensors", "truncated"),
        setup=_folder("m2v", "m2v", _truncate("model.safetensors")),
    ),
    Case(
        "model2vec tokenizer.json empty",
        _model("m2v"),
        ("{w}/m2v/tokenizer.json", "not a tokenizer"),
        setup=_folder("m2v", "m2v", lambda f: (f / "tokenizer.json").write_text("")),
    ),
    Case(
        "model2vec config max_length -5",
        _model("m2v"),
        ("{w}/m2v/config.json", "max_length -5 must be a positive integer"),
        setup=_folder("m2v", "m2v", lambda f: (f / "config.json").write_text('{"max_length": -5, "normalize": false}')),
    ),
    Case(
        "StaticEmbedding model.safetensors truncated",
        _model("st"),
        ("{w}/st/model.safetensors", "truncated"),
        setup=_folder("st", "st", _truncate("model.safetensors")),
    ),
    Case(
        "StaticEmbedding tokenizer.json not JSON",
        _model("st"),
        ("{w}/st/tokenizer.json", "not a tokenizer"),
        setup=_folder("st", "st", lambda f: (f / "tokenizer.json").write_text("nope{")),
    ),
    Case(
        "StaticEmbedding followed by a Tanh Dense",
        _model("st"),
        ("{w}/st/1_Dense", "activation Tanh", "only a linear one"),
        setup=_folder("st", "st", None, _tanh_dense),
    ),
    Case(
        "StaticEmbedding followed by another module",
        _model("st"),
        ("{w}/st", "LayerNorm (1_LayerNorm)"),
        setup=_folder("st", "st", _another_module),
    ),
]

# --------------------------------------------------------------------------- round 4 (#31): outputs, temporaries, locks, qrels


def _user_files_in(rel: str) -> Callable[[Path], None]:
    """L1: a user's notes and folder put inside an isotropy output."""

    def setup(w: Path) -> None:
        (w / rel / "notes.txt").write_text("my notes\n", encoding="utf-8")
        (w / rel / "mine").mkdir()

    return setup


def _users_old_folder(w: Path) -> None:
    """L2: a user's folder named like a 0.1 temporary, three days old, holding x/ (what a parked folder holds)."""
    import os
    import time

    old = w / ".white.20240101.old"
    (old / "x").mkdir(parents=True)
    (old / "x" / "important.txt").write_text("keep\n", encoding="utf-8")
    os.utime(old, (time.time() - 3 * 86400,) * 2)


def _plain_qrels(gain: str) -> Callable[[Path], None]:
    """A plain retrieval folder whose first qrel has the gain ``gain``."""

    def setup(w: Path) -> None:
        (w / "ret").mkdir()
        (w / "ret" / "documents.txt").write_text("\n".join(CORPUS[:6]) + "\n", encoding="utf-8")
        (w / "ret" / "queries.txt").write_text(CORPUS[7] + "\n" + CORPUS[8] + "\n", encoding="utf-8")
        (w / "ret" / "qrels.tsv").write_text(f"0\t1\t{gain}\n1\t2\t1\n", encoding="utf-8")

    return setup


def _old_index_listing_its_lock(w: Path) -> None:
    """U44: an index written before lock files were kept out lists an empty .transform.lock, since deleted."""
    from isotropy.storage.integrity import EMPTY_SHA256

    cfg = json.loads((w / "index" / "config.json").read_text(encoding="utf-8"))
    cfg["sha256"]["transform/.transform.lock"] = EMPTY_SHA256
    (w / "index" / "config.json").write_text(json.dumps(cfg), encoding="utf-8")


ROUND4_CASES = [
    Case(
        "L1 fit whitening over a whitening holding a user's files",
        ("fit", "whitening", "{w}/vecs.npy", "-o", "{w}/white"),
        ("{w}/white", "2 entries", "'mine/'", "'notes.txt'", "move them out"),
        setup=_user_files_in("white"),
    ),
    Case(
        "L1 fit whitening over a whitening holding a user's files, forced",
        ("fit", "whitening", "{w}/vecs.npy", "-o", "{w}/white", "--force"),
        ("{w}/white", "'notes.txt'", "--force or not"),
        setup=_user_files_in("white"),
    ),
    Case(
        "L1 index build over an index holding a user's files",
        ("index", "build", "{w}/corpus.txt", "-o", "{w}/index"),
        ("{w}/index", "'notes.txt'"),
        setup=_user_files_in("index"),
    ),
    Case(
        "L1 calibrate over a whitening holding a user's files, forced",
        ("calibrate", "{w}/corpus.txt", "-o", "{w}/white", "--force"),
        ("{w}/white", "'notes.txt'"),
        setup=_user_files_in("white"),
    ),
    Case(
        "L2 a user's .old folder beside the output is neither swept nor moved onto it",
        ("fit", "whitening", "{w}/vecs.npy", "-o", "{w}/white"),
        code=0,
        setup=_users_old_folder,
        may_change=("white",),
    ),
    Case(
        "L2 a user's own .lock file beside the output survives",
        ("fit", "whitening", "{w}/vecs.npy", "-o", "{w}/white"),
        code=0,
        setup=_write(".white.lock", "mine\n"),
        may_change=("white",),
    ),
    Case(
        "U44 an old index listing its deleted empty .transform.lock still loads",
        ("search", "{w}/index", "cats and joy"),
        code=0,
        setup=_old_index_listing_its_lock,
    ),
    Case("U33 search an empty query", ("search", "{w}/index", "  "), ("query 1 of 1", "empty")),
    Case(
        "W10 eval --retrieval with a gain above 2^31",
        ("eval", "--retrieval", "{w}/ret", "--method", "raw"),
        ("{w}/ret/qrels.tsv line 1", "99999999999", "outside the integers"),
        setup=_plain_qrels("99999999999"),
    ),
    Case(
        "W10 eval --retrieval with a gain that is not an integer",
        ("eval", "--retrieval", "{w}/ret", "--method", "raw"),
        ("{w}/ret/qrels.tsv line 1", "'1.5'", "not an integer"),
        setup=_plain_qrels("1.5"),
    ),
    Case(
        "W11 index build --qrels with a gain below -2^31",
        (
            "index",
            "build",
            "{w}/ret/documents.txt",
            "-o",
            OUT,
            "--eval-queries",
            "{w}/ret/queries.txt",
            "--qrels",
            "{w}/ret/qrels.tsv",
        ),
        ("{w}/ret/qrels.tsv line 1", "-2147483649"),
        setup=_plain_qrels("-2147483649"),
    ),
    Case(
        "W12 calibrate --method auto --dev a retrieval folder with a gain above 2^31",
        (*CALIBRATE, "--method", "auto", "--dev", "{w}/ret"),
        ("{w}/ret/qrels.tsv line 1", "outside the integers"),
        setup=_plain_qrels("2147483648"),
    ),
]

# --------------------------------------------------------------------------- calibrate, round 4 (#31) and auto (#34)
_TABLE = "".join(
    f"{w} " + " ".join(f"{(7 * i + 3 * j) % 11 / 10 - 0.4:.2f}" for j in range(8)) + "\n"
    for i, w in enumerate(("sentence", "number", "talks", "about", "and", "cats", "trains", "music", "rain", "bread"))
)
AUTO_FIRST_CASES = [
    Case(
        "static calibrate --min-gain not reached: exit 3, nothing written",
        (*CALIBRATE, "--model", "{w}/tbl.txt", "--eval", "{w}/pairs.tsv", "--min-gain", "100"),
        ("--min-gain 100", "nothing was written"),
        code=3,
        setup=_write("tbl.txt", _TABLE),
    ),
    Case("auto --for an unknown use", (*AUTO, "--for", "retrieval"), ("--for", "retrieval")),
    Case("calibrate --for without --method auto", (*CALIBRATE, "--for", "search"), ("--for", "--method auto only")),
    Case("calibrate --evidence without --method auto", (*CALIBRATE, "--evidence"), ("--evidence", "--method auto only")),
    Case(
        "index build --for without --method auto",
        ("index", "build", "{w}/corpus.txt", "-o", OUT, "--for", "search"),
        ("--for", "--method auto only"),
    ),
]

DISTILL = ("distill", "-o", OUT)
DISTILL_CASES = [  # issue #31 W9/U26-U28 and issue #32: each refused before the minutes-long vocabulary pass
    Case("distill --dims wider than the model", (*DISTILL, "--dims", "385"), ("--dims 385", "384")),
    Case("distill --alpha nan", (*DISTILL, "--corpus", "{w}/corpus.txt", "--alpha", "nan"), ("--alpha", "finite")),
    Case("distill --alpha without --corpus", (*DISTILL, "--alpha", "1"), ("--alpha", "--corpus")),
    Case("distill --fit without --corpus", (*DISTILL, "--fit", "tokens"), ("--fit", "--corpus")),
    Case("distill --fit bogus", (*DISTILL, "--corpus", "{w}/corpus.txt", "--fit", "bogus"), ("--fit", "bogus")),
    Case("distill --lam 0", (*DISTILL, "--corpus", "{w}/corpus.txt", "--lam", "0"), ("--lam", "> 0")),
    Case("distill --lam with --fit map", (*DISTILL, "--corpus", "{w}/corpus.txt", "--fit", "map", "--lam", "1"), ("--lam",)),
    Case("distill on an empty corpus", (*DISTILL, "--corpus", "{w}/blank.txt"), ("{w}/blank.txt", "0 sentence")),
    Case(
        "distill --target-whitening 2",
        (*DISTILL, "--corpus", "{w}/corpus.txt", "--target-whitening", "2"),
        ("--target-whitening", "[0, 1]"),
    ),
    Case(
        "distill --target-whitening nan",
        (*DISTILL, "--corpus", "{w}/corpus.txt", "--target-whitening", "nan"),
        ("--target-whitening",),
    ),
    Case(
        "distill --target-whitening without --corpus", (*DISTILL, "--target-whitening", "0.5"), ("--target-whitening", "--corpus")
    ),
    Case("distill --teacher-onnx without --corpus", (*DISTILL, "--teacher-onnx", "{w}"), ("--teacher-onnx", "--corpus")),
    Case(
        "distill --teacher-onnx not a folder",
        (*DISTILL, "--corpus", "{w}/corpus.txt", "--teacher-onnx", "{w}/corpus.txt"),
        ("--teacher-onnx {w}/corpus.txt", "not a folder"),
    ),
    Case(
        "distill --spans with --fit map",
        (*DISTILL, "--corpus", "{w}/corpus.txt", "--fit", "map", "--spans", "halves"),
        ("--spans",),
    ),
    Case(
        "distill --spans of an unknown kind",
        (*DISTILL, "--corpus", "{w}/corpus.txt", "--spans", "halves,thirds"),
        ("'thirds'", "halves, drop, cut"),
    ),
    Case("distill --engine without --corpus", (*DISTILL, "--engine", "dask"), ("--engine", "--corpus")),
    Case(
        "distill --strength-by with --lam",
        (*DISTILL, "--corpus", "{w}/corpus.txt", "--lam", "3", "--strength-by", "mse"),
        ("--strength-by", "--lam"),
    ),
    Case(
        "distill on a corpus of one repeated line",
        (*DISTILL, "--corpus", "{w}/same.txt"),
        ("{w}/same.txt", "repeats one sentence"),
        setup=_write("same.txt", "the same line\n" * 50),
    ),
    Case("distill --words without --corpus", (*DISTILL, "--words", "100"), ("--words", "--corpus")),
    Case("distill --words -1", (*DISTILL, "--corpus", "{w}/corpus.txt", "--words", "-1"), ("--words", ">= 0")),
]

CASES = OUTPUT_CASES + INPUT_CASES + OPTION_CASES + ARTEFACT_CASES + LOAD_CASES + TOOLBOX_CASES + POOLING_CASES + CALIBRATE_CASES
CASES += PRECISION_CASES + AUTO_CASES + HOSTILE_CASES + STATIC_CASES + STATIC_ROUND4_CASES + ROUND4_CASES + AUTO_FIRST_CASES
CASES += DISTILL_CASES


def _expand(text: str, w: Path) -> str:
    return text.replace("{w}", str(w))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(case: Case, base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    w = tmp_path / "w"
    shutil.copytree(base, w, symlinks=True)
    if case.setup is not None:
        case.setup(w)
    for module in case.blocked:  # `import module` raises ImportError, as when the extra is not installed
        monkeypatch.setitem(sys.modules, module, None)
    before = snapshot(w)
    code, out, err = run_cli([_expand(a, w) for a in case.args], case.stdin)
    after = snapshot(w)
    assert "Traceback" not in out + err, err
    assert code == case.code, f"exit {code}, stderr: {err!r}"
    changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
    allowed = {p for p in changed if any(p == m or p.startswith(m + "/") for m in case.may_change)}
    if case.code == 0:
        assert changed - allowed == set(), f"changed outside the output: {sorted(changed - allowed)}"
        return
    assert changed == set(), f"a failed command changed the workspace: {sorted(changed)}"
    line = err.strip()
    assert line.startswith("error: ") and "\n" not in line, f"not one line: {err!r}"
    for m in case.mentions:
        assert _expand(m, w) in line, f"{_expand(m, w)!r} not named in: {line}"
    for word in case.absent:
        assert word not in line, f"misleading {word!r} in: {line}"
