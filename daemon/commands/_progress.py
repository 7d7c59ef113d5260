"""The progress bar of a foreground sweep (`memoryd ingest`, `memoryd index`): on stderr, only
when it is a terminal, one line per phase with its rate in the phase's own unit (messages/s,
chunks/s). Elsewhere (a pipe, --json) nothing is drawn and the sweep gets no callback.
Imported by the commands when they run (rich costs the CLI's start-up otherwise)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from memoryd.ops.op import ProgressFn


class RateColumn(ProgressColumn):
    """Counts per second in the phase's unit."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f} {task.fields.get('unit', 'items')}/s" if speed else "")


@contextmanager
def progress_bar(units: Mapping[str, str], *, quiet: bool = False) -> Iterator[ProgressFn | None]:
    """`units`: phase -> what its counts count. A phase reported with total 0 has no known end."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, transient=True, console=Console(stderr=True)) as bar:
        tasks: dict[str, TaskID] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                unit = units.get(phase, "items")
                tasks[phase] = bar.add_task(phase, total=total or None, unit=unit)
            bar.update(tasks[phase], completed=done, total=total or None)

        yield progress
