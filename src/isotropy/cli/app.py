"""The ``isotropy`` commands (layer 8), assembled: each module registers its commands on :mod:`.root`'s typer objects.

Every command parses, makes one call into the library (:mod:`isotropy.files`, the file-level
jobs, or a feature's entry point) and prints; :func:`isotropy.cli.main` turns errors into one line.
The shared options (one definition each, one meaning per short flag) live in :mod:`.options`;
``docs/CLI.md`` is generated from this app (``python bench/cli_doc.py``).
"""

from __future__ import annotations

from .analyze_command import register_analyze_command
from .calibrate_command import register_calibrate_command
from .distill_command import register_distill_command
from .encode_commands import register_demo_command, register_encode_commands, register_export_commands
from .eval_command import register_eval_command
from .fit_commands import register_fit_commands
from .index_commands import register_index_commands, register_search_command
from .pooling_commands import register_pooling_commands
from .root import app, export_app, fit_app, index_app
from .serve_command import register_serve_command

__all__ = ["app"]

register_encode_commands(app)  # encode, transform
register_calibrate_command(app)  # a corpus in, a calibrated model folder out
register_distill_command(app)  # a static model2vec folder from a transformer
register_demo_command(app)
register_fit_commands(fit_app)  # fit whitening, fit flow, and one per registered transform and preset
register_pooling_commands(fit_app)  # fit token-frequencies (the sif and idf poolings' statistics)
register_eval_command(app)
register_index_commands(index_app)  # index build, index add
register_search_command(app)
register_serve_command(app)
register_analyze_command(app)
register_export_commands(export_app)  # export onnx
