"""The options of a cluster run (``--engine``, ``--input`` and those that only apply with them), checked."""

from __future__ import annotations

from typing import Any

from ..errors import IsotropyError

__all__ = ["check_engine", "only_with_engine"]


def only_with_engine(why: str, **given: Any) -> None:
    """Options that describe a cluster run (``--model`` of ``fit whitening``, ``--address``), given without
    ``--engine``: one line, rather than silently ignoring them."""
    named = [f"--{k.replace('_', '-')}" for k, v in given.items() if v is not None]
    if named:
        raise IsotropyError(
            f"{', '.join(named)} applies only with --engine (a cluster run); {why}: drop {'it' if len(named) == 1 else 'them'}"
        )


def check_engine(engine: str | None, inputs: str | None, positional: Any) -> None:
    """``--engine``/``--input`` go together, name a known engine, and replace the positional input."""
    if engine is None:
        raise IsotropyError("--input needs --engine (dask)")
    from ..distributed import ENGINES

    if engine.lower() not in ENGINES:
        raise IsotropyError(f"unknown engine {engine!r}; the supported engine is dask (docs/DISTRIBUTED.md says why not Ray)")
    if not inputs:
        raise IsotropyError("--engine needs --input, a glob of shards such as 'shards/*.txt'")
    if positional is not None:
        raise IsotropyError(f"give either {positional} or --input {inputs}, not both")
