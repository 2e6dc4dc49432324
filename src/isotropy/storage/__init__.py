"""Storage (layer 2): everything isotropy reads from and writes to disk.

* :mod:`.atomic` -- atomic files and folders, stale temporaries;
* :mod:`.signals` -- SIGTERM and SIGHUP as interrupts, held back during renames;
* :mod:`.locks` -- one writer per output, across processes;
* :mod:`.artifacts` -- the artefact header, the output guard, fitted state, digests;
* :mod:`.vectors` -- ``.npy`` vectors: read, stream, write;
* :mod:`.text` -- sentence files.

It imports only :mod:`isotropy.errors`; every feature above it stores through it.
"""
