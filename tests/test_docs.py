"""Documents and recorded results name no file outside the repository (other than ../shared)."""

from __future__ import annotations

import re
import subprocess

from helpers import ROOT

# an absolute path of a machine's folders: /work/..., /tmp/..., /home/..., /root/...
MACHINE_PATH = re.compile(r"(?<![\w.~])/(work|root|home|tmp|mnt|opt|usr|var|srv)/")


def _tracked(*patterns: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if line]


def test_no_document_or_recorded_result_cites_a_machine_path():
    files = _tracked("README.md", "docs", "bench/results")
    assert files, "no tracked documents found"
    found = []
    for rel in files:
        text = (ROOT / rel).read_text(encoding="utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            m = MACHINE_PATH.search(line)
            if m:
                found.append(f"{rel}:{n}: {line[max(0, m.start() - 40) : m.end() + 40]}")
    assert not found, "\n".join(found)


def test_the_package_version_is_pyprojects():
    import tomllib

    import isotropy

    with open(ROOT / "pyproject.toml", "rb") as fh:
        assert isotropy.__version__ == tomllib.load(fh)["project"]["version"]
