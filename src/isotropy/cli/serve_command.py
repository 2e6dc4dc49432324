"""``isotropy serve``: an index and its model loaded once, searched over HTTP (the command line of :mod:`isotropy.search.serve`)."""

from __future__ import annotations

from pathlib import Path

import typer

from .options import Device, Rerank, check_device

__all__ = ["register_serve_command"]

# the defaults of isotropy.search.serve, spelled here so that --help does not import the server
MAX_BODY, MAX_QUERIES, MAX_QUERY_CHARS = 1 << 20, 1000, 10_000


def register_serve_command(app: typer.Typer) -> None:
    """Add ``serve`` to ``app``."""

    @app.command()
    def serve(
        index_dir: Path = typer.Argument(..., help="Index folder written by 'isotropy index build'."),
        host: str = typer.Option(
            "127.0.0.1",
            "--host",
            help="Address to listen on (127.0.0.1: this machine only; anything else is reachable by others, "
            "with no authentication: a warning says so).",
        ),
        port: int = typer.Option(8000, "--port", help="Port to listen on (0: any free one)."),
        allow_host: list[str] = typer.Option(
            [],
            "--allow-host",
            help="A Host: name to answer besides 127.0.0.1, localhost, [::1] and the bound host (repeatable; "
            "'*': any, which disables the check against DNS rebinding).",
        ),
        max_body: int = typer.Option(MAX_BODY, "--max-body", help="Largest request body, in bytes (larger: 413)."),
        max_queries: int = typer.Option(MAX_QUERIES, "--max-queries", help="Most queries in one POST (more: 413)."),
        max_query_chars: int = typer.Option(
            MAX_QUERY_CHARS, "--max-query-chars", help="Longest query, in characters (longer: 413)."
        ),
        device: Device = None,
        rerank: Rerank = None,
    ) -> None:
        """Load an index and its model once and answer searches over HTTP: GET /search?q=...&k=10[&rerank=N], POST /search, GET /health.

        The index folder is reloaded when it changes on disk (isotropy index add). SIGTERM, SIGHUP or Ctrl-C stops it (exit 0).
        """
        from ..search.serve import load_and_serve

        load_and_serve(
            index_dir,
            host,
            port,
            device=check_device(device),
            rerank=rerank,
            allow_hosts=allow_host,
            max_body=max_body,
            max_queries=max_queries,
            max_query_chars=max_query_chars,
            echo=lambda line: typer.echo(line, err=True),
        )
