"""``isotropy serve``: an index and its model loaded once, searched over HTTP (the command line of :mod:`isotropy.search.serve`)."""

from __future__ import annotations

from pathlib import Path

import typer

from .options import Device, check_device

__all__ = ["register_serve_command"]


def register_serve_command(app: typer.Typer) -> None:
    """Add ``serve`` to ``app``."""

    @app.command()
    def serve(
        index_dir: Path = typer.Argument(..., help="Index folder written by 'isotropy index build'."),
        host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (127.0.0.1: this machine only)."),
        port: int = typer.Option(8000, "--port", help="Port to listen on (0: any free one)."),
        device: Device = None,
    ) -> None:
        """Load an index and its model once and answer searches over HTTP: GET /search?q=...&k=10, POST /search, GET /health."""
        from ..search.serve import load_and_serve

        load_and_serve(index_dir, host, port, device=check_device(device), echo=lambda line: typer.echo(line, err=True))
