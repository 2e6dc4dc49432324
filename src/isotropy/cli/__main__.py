"""``python -m isotropy.cli``: the ``isotropy`` command."""

from . import main

main()
