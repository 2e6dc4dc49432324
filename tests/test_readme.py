"""Every code block of README.md runs as pasted (on a small corpus, in a scratch folder).

The scratch folder sits beside a link named ``shared`` to the real ``../shared``, so the README's
``../shared/data`` paths work there as they do from the project root. The one block not run is
the set-up block (``make demo`` / ``make test``): CI runs ``make test`` itself, and the demo has
its own test (tests/test_cli.py). Shell blocks run in bash (each command a fresh ``isotropy`` process);
Python blocks run their exact text in the test's own process.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, data_dir

BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```", re.S | re.M)


def readme_blocks() -> list[tuple[str, str]]:
    return [(lang, code) for lang, code in BLOCK.findall((ROOT / "README.md").read_text(encoding="utf-8"))]


def test_the_readme_has_code_blocks_and_one_setup_block():
    blocks = readme_blocks()
    assert sum("make demo" in code for _, code in blocks) == 1
    assert any(lang == "python" for lang, _ in blocks) and any(lang == "sh" for lang, _ in blocks)


# Sentences of the scratch corpus: enough for every command the README shows (a 32-component whitening, auto's
# candidates); each sentence more is encoded again by auto's transformer (150 instead of 400: 9 s of CPU less).
README_CORPUS = 150


def _run_python_block(code: str, name: str, work: Path, monkeypatch) -> None:
    """A Python block, its text exactly as pasted, run in this process from the scratch folder: what the block
    does is under test, not a fresh interpreter's import of torch and sentence-transformers (the shell blocks
    start the CLI afresh, as a user does)."""
    monkeypatch.chdir(work)
    try:
        exec(compile(code, name, "exec"), {"__name__": "__main__"})
    except Exception as exc:  # a failing block is reported with its text, as a failing shell block is
        pytest.fail(f"{name} (python) failed:\n{code}\n--- {type(exc).__name__}: {exc}")


@pytest.mark.slow
def test_every_readme_block_runs_as_pasted(tmp_path, monkeypatch):
    from isotropy.demo import make_demo_data

    shared = data_dir().parent
    if not (shared / "data").is_dir():
        pytest.skip("no ../shared/data")
    (tmp_path / "shared").symlink_to(shared)
    work = tmp_path / "project"
    work.mkdir()
    (work / "corpus.txt").write_text("\n".join(make_demo_data(n_corpus=README_CORPUS).corpus) + "\n", encoding="utf-8")
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""), "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = str(ROOT / "src")
    ran = 0
    for i, (lang, code) in enumerate(readme_blocks()):
        if "make demo" in code:
            continue
        if lang == "python":
            _run_python_block(code, f"README block {i}", work, monkeypatch)
            ran += 1
            continue
        cmd = ["bash", "-euo", "pipefail", "-c", code]
        done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"README block {i} ({lang}) failed:\n{code}\n--- stderr:\n{done.stderr[-3000:]}"
        ran += 1
    assert ran >= 2
