"""Run the isotropy CLI with a deterministic pause, for the real-signal tests.

    python tests/pause_child.py MARKER POINT isotropy-args...

POINT is where the command stops to wait for the test's signal: ``write`` (inside the atomic
write of a vector file, after the first chunk reached the temporary file) or ``encode`` (after
the first batch went through the model). On reaching it the child creates MARKER and sleeps
until a signal arrives (at most 5 minutes, then exits 99). The test sends its signal only after
MARKER exists, so it can never race the work: the command is known to be mid-write or
mid-encode, and stays there. The signal handling under test is the real one, in a real process.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path


def _pause(marker: Path) -> None:
    if marker.exists():
        return
    marker.write_text("paused")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        time.sleep(0.01)  # a Python signal handler runs between these sleeps
    sys.exit(99)


def main() -> None:
    marker, point, args = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    # Start from the default SIGHUP disposition, as a plain shell gives: under `nohup pytest` the child would inherit
    # SIGHUP ignored, and isotropy rightly leaves an ignored signal ignored, so the SIGHUP case would wait forever.
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    # And SIGINT Python's own handler, as a shell's Ctrl-C meets it: a test worker process (pytest-xdist's) ignores
    # SIGINT, so its children inherit it ignored and the SIGINT case would wait until its timeout.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if point == "write":
        from isotropy.storage import vectors

        real = vectors.VectorWriter.write

        def write(self, chunk):
            real(self, chunk)
            self._fh.flush()
            _pause(marker)

        vectors.VectorWriter.write = write
    elif point == "encode":
        from isotropy.encoders import encoder

        real_batches = encoder.length_sorted_batches

        def batches(*a, **kw):
            meta, real = real_batches(*a, **kw)

            def paused():
                for batch in real:
                    yield batch
                    _pause(marker)  # asked for the next batch: the first one went through the model

            return meta, paused()

        encoder.length_sorted_batches = batches
    else:
        raise SystemExit(f"unknown pause point {point!r}")
    from isotropy.cli import main as cli

    cli(args)


if __name__ == "__main__":
    main()
