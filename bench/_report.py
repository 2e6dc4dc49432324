"""Helpers shared by the benchmark scripts: each script owns one section of a docs file.

A section lives between ``<!-- BEGIN name -->`` and ``<!-- END name -->`` so that several scripts can regenerate their
own part of docs/BENCHMARKS.md (or RESULTS.md) without touching the others'.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DATA = Path(os.environ.get("ISOTROPY_DATA", ROOT.parent / "shared" / "data")).resolve()
POTION = DATA.parent / "models" / "potion-base-8M"  # model2vec's own static model: the static factory's reference


def update_section(doc: str | Path, name: str, markdown: str) -> Path:
    """Replace (or append) the section ``name`` of ``doc`` with ``markdown``; atomic write."""
    from isotropy.storage.atomic import atomic_file

    path = Path(doc) if Path(doc).is_absolute() else DOCS / doc
    path.parent.mkdir(parents=True, exist_ok=True)
    text = path.read_text(encoding="utf-8") if path.exists() else f"# {path.stem.title()}\n"
    block = f"<!-- BEGIN {name} -->\n{markdown.strip()}\n<!-- END {name} -->"
    pattern = re.compile(rf"<!-- BEGIN {re.escape(name)} -->.*?<!-- END {re.escape(name)} -->", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    with atomic_file(path, "w") as fh:
        fh.write(text)
    return path


def write_json(path: str | Path, obj, indent: int | None = 2, **options) -> Path:
    """Write a results file atomically (a run killed mid-write leaves the previous results, never half a file);
    ``options``: ``json.dumps``'s (``default``, ``sort_keys``)."""
    from isotropy.storage.atomic import atomic_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, "w") as fh:
        fh.write(json.dumps(obj, indent=indent, **options) + "\n")
    return path


def portable(obj):
    """``obj`` (JSON data) with every absolute path under the project's parent folder made relative to the
    project root (``../shared/data/...``, ``.cache/...``) and the home folder spelled ``~``: what a bench
    script records must not name this machine's folders."""
    if isinstance(obj, dict):
        return {portable(k): portable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [portable(v) for v in obj]
    if isinstance(obj, str) and obj.startswith("/"):
        home = str(Path.home())
        if obj.startswith(str(ROOT.parent) + "/"):
            return os.path.relpath(obj, ROOT)
        if obj == home or obj.startswith(home + "/"):
            return "~" + obj[len(home) :]
    if isinstance(obj, str):  # a path inside a longer text, e.g. "this code (/work/x/src)"; never a folder of the
        # same name further down another path ("~/.cache/x/work/y" stays as it is)
        for folder, spelled in ((ROOT, ""), (ROOT.parent, "../")):
            obj = re.sub(r"(?<![\w.~/-])" + re.escape(str(folder) + "/"), spelled, obj)
        return obj
    return obj


def machine() -> str:
    """One line describing where a benchmark ran."""
    import torch

    gpu = f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""
    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical cores{gpu}, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), Python {platform.python_version()}"
    )


def median_time(fn: Callable[[], object], repeats: int = 3) -> tuple[float, list[float]]:
    """Median wall time of ``repeats`` calls of ``fn`` (and all the times)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def load_json(path: str | Path):
    """A saved results file."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def pair_spearman(a, b, gold) -> float:
    """Spearman x 100 of the cosines of row pairs ``a[i]``, ``b[i]`` against ``gold`` (the library's metrics); a pair
    with an all-zero vector (a static model that knows none of its tokens) has cosine 0."""
    import numpy as np

    from isotropy.evaluation import cosine_rows, spearman

    return float(spearman(np.nan_to_num(cosine_rows(a, b), nan=0.0), gold))


class Section:
    """The docs section a script owns: its file, its name, how it is drawn from the results and where they are saved.

    Every script takes ``--no-write`` (print the section, write nothing) and ``--render`` (alias ``--render-only``:
    rewrite the section from the saved results, running nothing).
    """

    def __init__(self, doc: str, name: str, draw: Callable[[dict], str], out: Path):
        self.doc, self.name, self.draw, self.out = doc, name, draw, out

    def parser(self, doc: str) -> argparse.ArgumentParser:
        """The script's parser (described by its docstring's first line) with ``--no-write`` and ``--render``."""
        ap = argparse.ArgumentParser(description=doc.splitlines()[0])
        ap.add_argument("--no-write", action="store_true", help=f"print the section instead of writing docs/{self.doc}")
        said = f"rewrite the section from {self.out.relative_to(ROOT)}, running nothing"
        ap.add_argument("--render", "--render-only", action="store_true", help=said)
        return ap

    def rendered(self, args: argparse.Namespace) -> bool:
        """With ``--render``, rewrite the section from the saved results and answer True (the script stops there)."""
        if args.render:
            update_section(self.doc, self.name, self.draw(load_json(self.out)))
        return bool(args.render)

    def publish(self, res, args: argparse.Namespace, **json_options) -> str:
        """Print the section drawn from ``res``; unless ``--no-write``, save ``res`` and rewrite the section."""
        md = self.draw(res)
        print(md)
        if not args.no_write:
            write_json(self.out, portable(res), **json_options)
            print(f"wrote {self.out.relative_to(ROOT)} and {update_section(self.doc, self.name, md)}", file=sys.stderr)
        return md
