"""Re-render every docs section from the saved results, running no model: ``python bench/render.py [SECTION ...]``.

Each section is rewritten by its own script's render mode (listed here, one line each). After a render the docs are
unchanged unless the saved results changed: ``git diff --exit-code docs`` checks it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

RENDERS = {  # section: the command that rewrites it from the saved results
    "sts-default-model": ["results.py", "--render-only"],
    "retrieval": ["retrieval.py", "--render-only"],
    "sts-static": ["static.py", "--render-only"],
    "static-factory": ["static_factory.py", "--render"],
    "auto-zoo": ["auto.py", "--render"],
    "auto-search": ["auto_search.py", "--render-only"],
    "auto-speed": ["auto_speed.py", "--render-only"],
    "encode": ["encode.py", "--render", str(HERE / "results" / "encode.json")],
    "scale": ["scale.py", "--render"],
    "static-speed": ["static_speed.py", "--render"],
    "factory-memory": ["factory_memory.py", "--render"],
    "factory-curve": ["factory_curve.py", "--render"],
    "cli-start": ["cli_start.py", "--render"],
    "poolings": ["poolings.py", "--render"],
    "search": ["search.py", "--render"],
    "serve": ["serve.py", "--render"],
    "onnx": ["onnx_speed.py", "--render"],
    "flow": ["flow.py", "--render"],
    "whitening": ["whitening.py", "--render"],
    "distributed": ["distributed_fit.py", "--render"],
    "dask-start": ["dask_start.py", "--render"],
    "token-product": ["token_product.py", "--render"],
    "analysis": ["analysis.py", "--render"],
    "calibrate": ["calibrate.py", "--render"],
    "cli-doc": ["cli_doc.py"],
}


def main() -> None:
    if {"-h", "--help"} & set(sys.argv[1:]):
        print(__doc__ + "\nSections: " + ", ".join(list(RENDERS)))
        return
    for name in sys.argv[1:] or list(RENDERS):
        if name not in RENDERS:
            sys.exit(f"error: no section {name!r}; one of: {', '.join(RENDERS)}")
        subprocess.run([sys.executable, str(HERE / RENDERS[name][0]), *RENDERS[name][1:]], check=True)
        print(f"rendered {name}", file=sys.stderr)


if __name__ == "__main__":
    main()
