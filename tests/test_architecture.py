"""The house keeps its shape: layers (docs/ARCHITECTURE.md), sizes, one protocol for every transform."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import ROOT

SRC = ROOT / "src" / "isotropy"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
LONG_OK = "# long:"  # a comment in a function's first lines that says why it cannot be split


def test_the_layer_contract_holds():
    """`lint-imports` checks pyproject.toml's contract; function-level imports count too."""
    exe = Path(sys.executable).with_name("lint-imports")
    cmd = [str(exe)] if exe.exists() else [shutil.which("lint-imports") or "lint-imports"]
    done = subprocess.run([*cmd, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"Contracts: [1-9][0-9]* kept, 0 broken", done.stdout), done.stdout[-2000:]


# Import circles the lead has agreed to remove: each entry is one strongly connected set of modules.
# A circle not listed here fails; so does an entry whose circle is gone (delete the entry then).
KNOWN_CIRCLES: list[frozenset[str]] = []


def _import_circles() -> list[frozenset[str]]:
    """Every strongly connected set of two or more modules of isotropy's import graph.

    grimp (what lint-imports reads) parses every import statement, function-level ones included;
    scipy finds the components.
    """
    grimp = pytest.importorskip("grimp")
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    graph = grimp.build_graph("isotropy", cache_dir=None)
    names = sorted(graph.modules)
    index = {name: i for i, name in enumerate(names)}
    edges = [(index[a], index[b]) for a in names for b in graph.find_modules_directly_imported_by(a)]
    rows, cols = zip(*edges) if edges else ((), ())
    adjacency = coo_matrix((np.ones(len(edges)), (rows, cols)), shape=(len(names), len(names)))
    _, labels = connected_components(adjacency, directed=True, connection="strong")
    groups: dict[int, set[str]] = {}
    for name, label in zip(names, labels):
        groups.setdefault(int(label), set()).add(name)
    return [frozenset(g) for g in groups.values() if len(g) > 1]


def test_no_import_circle_anywhere():
    circles = _import_circles()
    new = [sorted(c) for c in circles if c not in KNOWN_CIRCLES]
    gone = [sorted(c) for c in KNOWN_CIRCLES if c not in circles]
    assert not new, f"import circles (function-level imports count): {new}"
    assert not gone, f"these circles are gone: remove them from KNOWN_CIRCLES: {gone}"


def test_the_circle_finder_sees_function_level_imports():
    """The finder is only as good as its graph: a cycle made of one function-level import is in it."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("isotropy", cache_dir=None)
    # distributed.api imports Whitening inside _whitening_params only
    assert graph.direct_import_exists(importer="isotropy.distributed.api", imported="isotropy.transforms.whitening")


def test_no_import_circle_in_the_benchmarks():
    """bench/ scripts import each other by file name (``sys.path``); function-level imports count (issue #34: auto.py
    and the zoo modules imported each other)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    files = {p.stem: p for p in (ROOT / "bench").glob("*.py")}
    names = sorted(files)
    edges = []
    for a in names:
        for node in ast.walk(ast.parse(files[a].read_text(encoding="utf-8"))):
            targets = [x.name for x in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module]
            edges += [(names.index(a), names.index(t.split(".")[0])) for t in targets if t.split(".")[0] in files]
    rows, cols = zip(*edges) if edges else ((), ())
    graph = coo_matrix((np.ones(len(edges)), (rows, cols)), shape=(len(names), len(names)))
    _, labels = connected_components(graph, directed=True, connection="strong")
    circles = [sorted(n for n, lab in zip(names, labels) if lab == k) for k in set(labels.tolist())]
    assert not [c for c in circles if len(c) > 1], circles


def _modules():
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def test_modules_and_functions_stay_small():
    too_long = []
    for path in _modules():
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        rel = path.relative_to(SRC.parent)
        if lines > MAX_MODULE_LINES:
            too_long.append(f"{rel}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                head = "\n".join(text.splitlines()[node.lineno - 1 : node.lineno + 6])
                if length > MAX_FUNCTION_LINES and LONG_OK not in head:
                    too_long.append(f"{rel}:{node.lineno} {node.name}: {length} lines")
    assert not too_long, "over the limits of docs/ARCHITECTURE.md:\n" + "\n".join(too_long)


@pytest.mark.parametrize("kind", sorted(__import__("isotropy.transforms", fromlist=["TRANSFORMS"]).TRANSFORMS))
def test_every_registered_transform_follows_the_protocol(kind, tmp_path):
    """Fit, transform, widths, fitted-ness, save/load, to_torch: what every module above relies on."""
    import torch

    from isotropy.errors import NotFittedError
    from isotropy.transforms import load_transform, transform_class
    from isotropy.transforms.base import Transform

    cls = transform_class(kind)
    assert issubclass(cls, Transform) and cls.kind == kind
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((600, 16)) @ rng.standard_normal((16, 16))).astype(np.float32)
    est = cls()
    assert not est.__sklearn_is_fitted__() and not hasattr(est, "n_features_in_")
    with pytest.raises(NotFittedError):
        est.transform(X)
    assert est.fit(X) is est and est.__sklearn_is_fitted__()
    Y = est.transform(X)
    assert est.n_features_in_ == 16 and Y.shape == (600, est.n_features_out_)
    est.save(tmp_path / kind)
    again = load_transform(tmp_path / kind)
    assert type(again) is cls and np.array_equal(again.transform(X), Y)
    module = est.to_torch()
    assert isinstance(module, torch.nn.Module)
    with torch.no_grad():
        np.testing.assert_allclose(module(torch.from_numpy(X)).numpy(), Y, rtol=1e-4, atol=1e-4)
    assert isinstance(est.describe(), str) and "\n" not in est.describe()
    assert cls(**est.get_params()).get_params() == est.get_params()
