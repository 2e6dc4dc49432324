"""The public calls: :func:`fit_moments`, :func:`fit_whitening` and :func:`encode` on a Dask cluster."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._checks import ENGINES
from ..errors import IsotropyError
from ..storage.artifacts import check_output, folder_digest
from ..storage.atomic import sweep_stale_temporaries
from .cluster import client_for, gather, raise_error_value, tree_reduce
from .spec import EncodeReport, EncoderSpec, ShardResult, expand_inputs, vector_width
from .tasks import encode_shard, fit_shard, merge_stats, shard_outputs

__all__ = ["fit_moments", "fit_whitening", "encode", "ENGINES", "SHARDS_KIND"]

SHARDS_KIND = "vector-shards"


def _whitening_params(whitening: Any) -> dict:
    from ..transforms.moments import parse_shrinkage
    from ..transforms.whitening import Whitening

    if whitening is None:
        params: dict = {}
    elif isinstance(whitening, Whitening):
        params = whitening.get_params()
    elif isinstance(whitening, dict):
        params = dict(whitening)
    else:
        raise IsotropyError(f"whitening must be a Whitening or a dict of its parameters, not {type(whitening).__name__}")
    if "shrinkage" in params:
        params["shrinkage"] = parse_shrinkage(params["shrinkage"])
    try:
        return Whitening(**params).get_params()
    except TypeError as exc:
        raise IsotropyError(f"bad whitening parameters: {exc}") from None


def fit_moments(
    inputs: str | os.PathLike | Sequence[str | os.PathLike],
    encoder: EncoderSpec | dict | str | None = None,
    *,
    address: Any = None,
    n_workers: int | None = None,
    retries: int = 2,
    show_progress: bool | None = None,
    skip_blank: bool = False,
    check: Any = None,
):
    """The :class:`~isotropy.transforms.moments.Moments` of every vector of the shards, computed on a Dask cluster.

    ``inputs`` and ``encoder`` as :func:`fit_whitening` takes them (text shards encoded on the
    workers, or ``.npy`` vector shards); ``skip_blank`` leaves blank lines of text shards out.
    ``check(width)`` runs on the client before the cluster starts (bad parameters fail there).
    Each shard's statistics are computed on a worker and reduced by a fixed tree of exact merges;
    any affine transform is then ``cls.from_moments(moments, **params)``. Shards with no rows give
    an error naming how many there were.
    """
    from ..transforms.moments import Moments

    files = expand_inputs(inputs)
    vectors = [f.suffix == ".npy" for f in files]
    if any(vectors) and not all(vectors):
        raise IsotropyError("input shards mix .npy vectors and text files; fit on one kind at a time")
    if all(vectors):
        width = vector_width(files)
        spec = None
    else:
        spec = EncoderSpec.coerce(encoder).resolve()
        width = spec.dim
    if check is not None:
        check(width)
    run = uuid.uuid4().hex[:12]  # every run's tasks are new tasks (no stale results reused)
    with client_for(address, n_workers) as client:
        shard_futs = [
            client.submit(fit_shard, str(f), spec, skip_blank, retries=retries, key=f"isotropy-fit-{run}-{i}")
            for i, f in enumerate(files)
        ]
        root = tree_reduce(
            shard_futs,
            lambda a, b, depth, i: client.submit(merge_stats, a, b, retries=retries, key=f"isotropy-merge-{run}-{depth}-{i}"),
        )
        # Only the root comes back to the client: per-shard statistics (d x d each) stay on the workers.
        gather(client, shard_futs, "fitting shards", files, show_progress, fetch=False)
        total = raise_error_value(root.result())
    if total is None:
        raise IsotropyError(f"the {len(files)} input shards hold no rows")
    return Moments.from_arrays(total)


def _spec_inputs(encoder: Any) -> list[Any]:
    """The local paths an encoder spec reads (its model folder): an output never replaces them."""
    model = encoder.get("model") if isinstance(encoder, dict) else getattr(encoder, "model", encoder)
    return [model] if isinstance(model, (str, os.PathLike)) else []


def fit_whitening(
    inputs: str | os.PathLike | Sequence[str | os.PathLike],
    encoder: EncoderSpec | dict | str | None = None,
    whitening: Any = None,
    *,
    output: str | os.PathLike | None = None,
    address: Any = None,
    n_workers: int | None = None,
    retries: int = 2,
    show_progress: bool | None = None,
    force: bool = False,
):
    """Fit a :class:`isotropy.transforms.whitening.Whitening` on sentence shards (or .npy vector shards) on a Dask cluster.

    ``inputs``: a glob (``'shards/*.txt'``), a file, or a list of them. Text shards hold
    one sentence a line and are encoded on the workers with ``encoder`` (an
    :class:`EncoderSpec`, a dict of its fields, or a model name); shards ending in
    ``.npy`` are taken as pre-computed vectors (no encoder). ``whitening``: a
    :class:`Whitening` (its parameters are used) or a dict of parameters.
    ``address``: a scheduler address (``tcp://host:8786``) or a ``distributed.Client``;
    ``None`` starts a local cluster with ``n_workers`` processes (default one per core).

    Each shard's statistics are computed on a worker and reduced by a tree of exact
    merges (:func:`fit_moments`); the result equals ``Whitening(**params).fit(all vectors)``
    to within 1e-9 relative. With ``output``, the fitted folder is written there (the same
    folder a single-machine fit writes).
    """
    from ..transforms.whitening import Whitening

    files = expand_inputs(inputs)
    if output is not None:
        check_output(output, "whitening", force=force, inputs=[*files, *_spec_inputs(encoder)])
    params = _whitening_params(whitening)
    moments = fit_moments(
        files,
        encoder,
        address=address,
        n_workers=n_workers,
        retries=retries,
        show_progress=show_progress,
        # bad n_components etc. fail before the cluster starts
        check=lambda width: Whitening(**params)._check_params(width),
    )
    # solved now: too few rows / a singular covariance surface as one clear error
    w = Whitening.from_moments(moments, **params)
    if output is not None:
        w.save(output, force=force)
    return w


def _check_stems(files: list[Path]) -> None:
    """Two inputs of the same stem would write the same output shard."""
    stems: dict[str, Path] = {}
    for f in files:
        if f.stem in stems:
            raise IsotropyError(
                f"input shards {stems[f.stem]} and {f} have the same name {f.stem!r}; their outputs would collide"
            )
        stems[f.stem] = f


def _transform_for(transform: str | os.PathLike | None, spec: EncoderSpec) -> tuple[str | None, str | None]:
    """The transform folder's resolved path and digest, validated here before the cluster starts."""
    if transform is None:
        return None, None
    from ..transforms import load_transform

    model = load_transform(transform)
    expected = getattr(model, "n_features_in_", None)
    if expected is not None and expected != spec.dim:
        raise IsotropyError(f"transform {transform} expects {expected}-dimensional vectors but the encoder makes {spec.dim}")
    return str(Path(transform).resolve()), folder_digest(transform)


def encode(
    inputs: str | os.PathLike | Sequence[str | os.PathLike],
    output_dir: str | os.PathLike,
    encoder: EncoderSpec | dict | str | None = None,
    *,
    transform: str | os.PathLike | None = None,
    address: Any = None,
    n_workers: int | None = None,
    retries: int = 2,
    show_progress: bool | None = None,
    force: bool = False,
) -> EncodeReport:
    """Encode text shards on a Dask cluster into one vector shard each, resumably.

    Shard ``shards/x.txt`` becomes ``output_dir/x.npy`` (float32, row i = line i + 1,
    with the fitted ``transform`` folder applied if given) and ``output_dir/x.json``
    (its verification record). A rerun skips shards whose output verifies and redoes
    the others (missing, interrupted, corrupted, or made from another source, backend,
    model, pooling, max_length or transform). ``output_dir`` then reads as a folder of
    shards (``isotropy fit whitening OUT``, ``isotropy.storage.vectors.load_vectors``).
    """
    files = expand_inputs(inputs)
    if any(f.suffix == ".npy" for f in files):
        raise IsotropyError("encode takes text shards (one sentence a line), not .npy vectors")
    out = check_output(output_dir, SHARDS_KIND, force=force, inputs=[*files, *_spec_inputs(encoder), transform])
    _check_stems(files)
    spec = EncoderSpec.coerce(encoder).resolve()
    tpath, tdigest = _transform_for(transform, spec)
    run = uuid.uuid4().hex[:12]
    created = False
    try:
        with client_for(address, n_workers) as client:
            # Made only once a cluster answers: a failed connection leaves nothing behind.
            created = not out.exists()
            out.mkdir(exist_ok=True)
            for f in files:  # temporaries of workers killed mid-write in an earlier run, on any host
                for path in shard_outputs(f, out):
                    sweep_stale_temporaries(path, any_process=True)
            futs = [
                client.submit(
                    encode_shard,
                    str(f),
                    str(out.resolve()),
                    spec,
                    tpath,
                    tdigest,
                    retries=retries,
                    key=f"isotropy-encode-{run}-{i}",
                )
                for i, f in enumerate(files)
            ]
            results = gather(client, futs, "encoding shards", files, show_progress)
    except BaseException:
        # A run that failed before any shard was written leaves no empty folder. Tried once the cluster is closed:
        # a shard still being written when another failed holds a temporary until its worker stops and removes it,
        # so an rmdir inside the block could find the folder busy and leave it empty afterwards.
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()
        raise
    shards = [
        ShardResult(str(f), str(shard_outputs(f, out)[0]), r["rows"], r["status"], r["reason"]) for f, r in zip(files, results)
    ]
    dims = {r["dim"] for r in results}
    return EncodeReport(shards, dims.pop() if len(dims) == 1 else -1, str(out))
