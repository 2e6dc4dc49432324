"""The house keeps its shape: layers (docs/ARCHITECTURE.md), sizes, one protocol for every transform."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import ROOT

SRC = ROOT / "src" / "isotropy"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
LONG_OK = "# long:"  # a comment in a function's first lines that says why it cannot be split


def test_the_layer_contract_holds():
    """`lint-imports` checks pyproject.toml's contract; function-level imports count too."""
    exe = Path(sys.executable).with_name("lint-imports")
    cmd = [str(exe)] if exe.exists() else [shutil.which("lint-imports") or "lint-imports"]
    done = subprocess.run([*cmd, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " kept, 0 broken" in done.stdout


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
