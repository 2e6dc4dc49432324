"""The progress bar every long step shows (layer 1): rich on a terminal, silent in logs."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["ProgressBar"]


class ProgressBar:
    """A rich progress bar on a terminal (or when asked), silent in non-interactive logs.

    ``show=None`` shows it only when stderr is a terminal and there are at least
    ``min_total`` steps. With ``unit`` (e.g. ``"sentences"``) the bar counts in that unit
    and shows the rate (``1,234 sentences/s``) beside the time left. Use as a context
    manager or call :meth:`close`.
    """

    def __init__(self, total: int, show: bool | None, label: str, min_total: int = 4, unit: str | None = None) -> None:
        if show is None:
            show = sys.stderr.isatty() and total >= min_total
        self._bar = None
        if show:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TimeRemainingColumn
            from rich.text import Text

            class Rate(ProgressColumn):
                def render(self, task: Any) -> Text:
                    return Text(f"{task.speed:,.0f} {unit}/s" if task.speed else "", style="progress.data.speed")

            columns: list[Any] = ["[bold]{task.description}", BarColumn(), MofNCompleteColumn()]
            if unit:
                columns.append(Rate())
            columns.append(TimeRemainingColumn())
            self._bar = Progress(*columns, transient=True, console=Console(stderr=True))
            self._task = self._bar.add_task(label, total=total)
            self._bar.start()

    def advance(self, steps: int = 1, description: str | None = None) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=steps, **({"description": description} if description else {}))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
