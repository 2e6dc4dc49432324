"""What an artefact owns, proven on load: per-file sha256 digests, confined paths, encoder provenance (layer 2).

* :func:`seal` records, in an artefact folder's header JSON (``config.json``,
  ``isotropy.json``, ``isotropy_onnx.json``, ``report.json``), the sha256 of every other
  file of the folder under :data:`DIGESTS_KEY`; :func:`output_dir
  <isotropy.storage.artifacts.output_dir>` seals every folder it writes, just before the rename.
* :func:`verify_folder` checks them on load: a changed, missing or corrupted file is one
  line naming it. Artefacts written before digests were recorded carry none and are read
  as before. ``verify=False`` in Python, ``isotropy --no-verify`` (or
  ``ISOTROPY_NO_VERIFY=1``, ``true``, ``yes`` or ``on``) on the command line, skips the check
  (:func:`verification`); an ``isotropy.json`` that cannot be read as isotropy's record is reported, not skipped.
* :func:`member` resolves a path named inside an artefact's JSON and refuses one that
  leaves the artefact's folder (absolute, ``..``, a symlink pointing out).
* :func:`check_provenance` compares the encoder a transform was fitted on with the
  encoder (or vectors) it is applied to.

Hashing is streamed (1 MiB blocks) and done once per load; a folder's digests cost one
read of its files, the same order as loading them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .._spelling import spell
from ..errors import IsotropyError
from .atomic import MARKER

__all__ = [
    "DIGESTS_KEY",
    "EMPTY_SHA256",
    "is_lock_name",
    "owned_files",
    "foreign_entries",
    "NO_VERIFY_ENV",
    "sha256_file",
    "seal",
    "verify_folder",
    "verify_file",
    "verify_model_folder",
    "verifying",
    "verification",
    "set_default_verification",
    "member",
    "provenance_of_record",
    "describe_provenance",
    "check_provenance",
    "check_encoder_of",
]

DIGESTS_KEY = "sha256"  # header key: {relative posix path: hex sha256} of every other file of the folder
NO_VERIFY_ENV = "ISOTROPY_NO_VERIFY"
_HEADER_NAMES = ("config.json", "isotropy_onnx.json", "isotropy.json", "report.json")
_verify_default: list[bool] = [True]  # set by verification() (the CLI's --no-verify)
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def is_lock_name(name: str) -> bool:
    """``.NAME.lock``: the name of a lock file (:mod:`.locks`), which no artefact owns."""
    base = name.rsplit("/", 1)[-1]
    return base.startswith(".") and base.endswith(".lock") and len(base) > len("..lock")


def _leftover(path: Path, folder: Path) -> bool:
    """Not the artefact's content: our temporary's marker, or an empty lock file of a write inside it."""
    if path.name == MARKER:
        return True
    try:
        return is_lock_name(path.name) and path.stat().st_size == 0
    except OSError:
        return False


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 of one file, streamed in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --------------------------------------------------------------------------- the switch


def verifying(verify: bool | None = None) -> bool:
    """Whether to verify: ``verify`` when given, else the innermost :func:`verification` block's choice (an explicit
    ``Encoder(verify=...)``), else off under ``$ISOTROPY_NO_VERIFY`` or the CLI's ``--no-verify``, else on."""
    if verify is not None:
        return bool(verify)
    if len(_verify_default) > 1:  # an explicit choice in this block outranks the environment
        return _verify_default[-1]
    if not _verify_default[0]:  # the CLI's --no-verify
        return False
    return not _env_says_no_verify()


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def _env_says_no_verify() -> bool:
    """``$ISOTROPY_NO_VERIFY``: only an explicit yes (1, true, yes, on) turns verification off; an explicit no
    (unset, empty, 0, false, no, off) keeps it on; anything else is refused, naming the variable."""
    value = os.environ.get(NO_VERIFY_ENV, "")
    word = value.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise IsotropyError(
        f"{NO_VERIFY_ENV}={value!r} is neither yes (1, true, yes, on: verification off) nor no (0, false, no, off, "
        f"empty: verification on); set one of these or unset it"
    )


def set_default_verification(enabled: bool) -> None:
    """Set the default of every load in this process (the CLI's ``--no-verify``, set once per command)."""
    _verify_default[0] = bool(enabled)


@contextlib.contextmanager
def verification(enabled: bool) -> Iterator[None]:
    """Within this block, loads verify digests (``enabled``) or skip it (the CLI's ``--no-verify``)."""
    _verify_default.append(bool(enabled))
    try:
        yield
    finally:
        _verify_default.pop()


# --------------------------------------------------------------------------- sealing and verifying


def _header_file(folder: Path) -> Path | None:
    for name in _HEADER_NAMES:
        p = folder / name
        if p.is_file():
            try:
                meta = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(meta, dict) and meta.get("library") == "isotropy":
                return p
    return None


def seal(folder: str | os.PathLike) -> None:
    """Record the sha256 of every file of ``folder`` (but its header) in its header JSON; no header: nothing."""
    folder = Path(folder)
    head = _header_file(folder)
    if head is None:
        return
    meta = json.loads(head.read_text(encoding="utf-8"))
    meta[DIGESTS_KEY] = {
        p.relative_to(folder).as_posix(): sha256_file(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink() and p != head and not _leftover(p, folder)
    }
    head.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def owned_files(folder: str | os.PathLike) -> set[str] | None:
    """The files (relative posix paths) an artefact folder says it wrote: its header and what its
    sha256 record lists; None when it records none (written before digests were, or no header)."""
    folder = Path(folder)
    head = _header_file(folder)
    if head is None:
        return None
    try:
        digests = json.loads(head.read_text(encoding="utf-8")).get(DIGESTS_KEY)
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(digests, dict):
        return None
    return {head.name, *(n for n in digests if isinstance(n, str))}


def foreign_entries(folder: str | os.PathLike) -> list[str] | None:
    """What ``folder`` holds that its artefact did not write (files and folders its sha256 record does not
    name, relative posix paths, folders with a trailing ``/``); None when the artefact records no digests."""
    folder = Path(folder)
    owned = owned_files(folder)
    if owned is None:
        return None
    dirs = {"/".join(n.split("/")[:i]) for n in owned for i in range(1, n.count("/") + 1)}
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        base = Path(dirpath).relative_to(folder).as_posix()
        prefix = "" if base == "." else base + "/"
        keep = [d for d in sorted(dirnames) if prefix + d in dirs and not os.path.islink(os.path.join(dirpath, d))]
        found += [prefix + d + "/" for d in sorted(dirnames) if d not in keep]
        dirnames[:] = keep
        found += [prefix + f for f in filenames if prefix + f not in owned and not _leftover(Path(dirpath) / f, folder)]
    return sorted(found)


def verify_folder(folder: str | os.PathLike, meta: Mapping[str, Any], *, verify: bool | None = None) -> None:
    """Check every file ``meta`` (the folder's header) records a digest of; one line naming the first that differs.

    A header without digests (an artefact written before they were recorded) passes.
    """
    if not verifying(verify):
        return
    folder = Path(folder)
    digests = meta.get(DIGESTS_KEY)
    if digests is None:
        return
    if not isinstance(digests, dict):
        raise IsotropyError(f"{folder}: the {DIGESTS_KEY!r} record of its header is malformed; restore or rebuild it")
    for name, digest in digests.items():
        path = member(folder, name, DIGESTS_KEY)
        if digest == EMPTY_SHA256 and isinstance(name, str) and is_lock_name(name) and not path.exists():
            continue  # an empty lock file that older versions sealed in (an index's .transform.lock): nothing to check
        verify_file(path, digest, folder)


def verify_model_folder(folder: str | os.PathLike, *, verify: bool | None = None) -> None:
    """A model folder isotropy wrote (``calibrate``, ``distill``), used as a model: its files checked against the
    sha256 its ``isotropy.json`` records, before anything reads them (#31, W5/W13); one line names a changed file.

    ``folder`` may be the artefact itself (the calibrated folder, its model2vec root) or a sub-folder of one
    (``cal/sentence-transformers``: the files under it are checked against the parent's record). A folder no
    isotropy artefact holds (any Hugging Face model) passes: there is nothing recorded to check it against.
    """
    if not verifying(verify):
        return
    folder = Path(folder)
    _check_own_record(folder)
    head = _header_file(folder)
    if head is not None:
        verify_folder(folder, json.loads(head.read_text(encoding="utf-8")), verify=True)
        return
    parent = folder.resolve().parent
    if folder.resolve().name == "sentence-transformers":
        _check_own_record(parent)  # calibrate's twin (cal/sentence-transformers) of an artefact whose record is damaged
    head = _header_file(parent)
    if head is None:
        return
    digests = json.loads(head.read_text(encoding="utf-8")).get(DIGESTS_KEY)
    prefix = folder.resolve().name + "/"
    if isinstance(digests, dict):
        verify_folder(parent, {DIGESTS_KEY: {n: d for n, d in digests.items() if str(n).startswith(prefix)}}, verify=True)


_OWN_RECORDS = ("isotropy.json", "isotropy_onnx.json")  # names only isotropy writes (config.json is any model's)


def _check_own_record(folder: Path) -> None:
    """An isotropy record in ``folder`` that cannot be read as one (emptied, not JSON, not isotropy's) is reported:
    it must not turn the check of the files it records off (round 5, U39/U40)."""
    for name in _OWN_RECORDS:
        path = folder / name
        if not path.is_file():
            continue
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            why = "is empty" if path.stat().st_size == 0 else f"is not readable JSON ({type(exc).__name__})"
        else:
            if isinstance(meta, dict) and meta.get("library") == "isotropy":
                continue
            why = 'is not isotropy\'s record (no "library": "isotropy")'
        raise IsotropyError(
            f"{path} {why}: the files it records cannot be checked; restore it or rebuild the folder "
            f"(--no-verify / verify=False reads the folder anyway)"
        )


def verify_file(path: Path, digest: Any, owner: str | os.PathLike) -> None:
    """``path`` must exist and hash to ``digest`` (recorded by the artefact ``owner``)."""
    if not path.is_file():
        name = path.relative_to(owner).as_posix() if path.is_relative_to(owner) else path.name
        raise IsotropyError(f"{owner} is missing {name}; it is not a complete isotropy artefact: restore it or rebuild it")
    try:
        actual = sha256_file(path)
    except OSError as exc:
        raise IsotropyError(f"{path} cannot be read: {exc.strerror or exc}") from None
    if actual != digest:
        raise IsotropyError(
            f"{path} does not match the sha256 recorded in {owner}: the file was changed or corrupted; "
            f"restore it or rebuild the artefact (--no-verify / verify=False reads it anyway)"
        )


def member(folder: str | os.PathLike, name: Any, key: str) -> Path:
    """``folder / name`` for a path named in an artefact's JSON (under ``key``); it must stay inside ``folder``."""
    folder = Path(folder)
    if not isinstance(name, str) or not name or "\0" in name:
        raise IsotropyError(f"{folder}: {key} {name!r} in its JSON is not a file name; restore or rebuild the artefact")
    rel = Path(name)
    if rel.is_absolute() or ".." in rel.parts:
        raise IsotropyError(
            f"{folder}: {key} {name!r} in its JSON points outside the artefact's folder; restore or rebuild the artefact"
        )
    path = folder / rel
    if not path.resolve().is_relative_to(folder.resolve()):
        raise IsotropyError(
            f"{folder}: {key} {name!r} in its JSON leads outside the artefact's folder (a symlink); "
            f"restore or rebuild the artefact"
        )
    return path


# --------------------------------------------------------------------------- provenance

PROVENANCE_FIELDS = ("model", "fingerprint", "pooling", "max_length", "dim")
_COMPARED = ("fingerprint", "pooling", "max_length", "dim")  # the model's name may differ (a path, an id)


def provenance_of_record(record: Mapping[str, Any] | None, dim: int | None = None) -> dict[str, Any] | None:
    """The provenance of vectors from an encoder's ``record()`` (model, fingerprint, pooling, max length, dims)."""
    if not record:
        return None
    pooling = record.get("pooling")
    out = {
        "model": record.get("model_name") or record.get("model"),
        "fingerprint": record.get("fingerprint"),
        "pooling": pooling if isinstance(pooling, str) or pooling is None else json.dumps(pooling, sort_keys=True),
        "max_length": record.get("max_length"),
        "dim": dim if dim is not None else record.get("dim"),
    }
    return {k: v for k, v in out.items() if v is not None} or None


def describe_provenance(p: Mapping[str, Any]) -> str:
    fp = p.get("fingerprint")
    parts = [
        f"model {p['model']}" if p.get("model") else None,
        f"weights {str(fp)[:12]}" if fp else None,
        f"pooling {p['pooling']}" if p.get("pooling") else None,
        f"max_length {p['max_length']}" if p.get("max_length") is not None else None,
        f"{p['dim']} dims" if p.get("dim") is not None else None,
    ]
    return ", ".join(x for x in parts if x) or "an unknown encoder"


def check_provenance(
    fitted: Mapping[str, Any] | None,
    applied: Mapping[str, Any] | None,
    transform: str | os.PathLike,
    what: str,
    *,
    allow: bool = False,
) -> None:
    """Refuse to apply ``transform`` (fitted on vectors of ``fitted``) to ``what`` (of ``applied``) from another encoder.

    Only what both sides record is compared; either side unknown passes. ``allow`` (the
    CLI's ``--allow-other-encoder``) skips the check.
    """
    if allow or not fitted or not applied:
        return
    differ = [k for k in _COMPARED if fitted.get(k) is not None and applied.get(k) is not None and fitted[k] != applied[k]]
    if not differ:
        return
    diffs = "; ".join(
        f"{k}: {fitted[k]!s:.16} vs {applied[k]!s:.16}" if k == "fingerprint" else f"{k}: {fitted[k]} vs {applied[k]}"
        for k in differ
    )
    raise IsotropyError(
        f"{transform} was fitted on vectors of another encoder than {what} ({diffs}): its output would be "
        f"silently wrong; encode with the same settings, refit, or pass {spell('allow_other_encoder', True)} "
        f"to apply it anyway"
    )


def check_encoder_of(transform: Any, encoder: Any, name: str | os.PathLike, what: str, allow: bool = False) -> None:
    """:func:`check_provenance` of a fitted ``transform`` (its ``provenance``) against an ``Encoder`` (its ``record()``)."""
    fitted = getattr(transform, "provenance", None)
    if fitted and not allow:
        check_provenance(fitted, provenance_of_record(encoder.record(), encoder.dim), name, what)
