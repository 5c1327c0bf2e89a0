"""A progress bar over input files, shown only when stderr is a terminal (rich is loaded only then)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Callable, Iterator


@contextlib.contextmanager
def file_progress(paths: list[Path], what: str) -> Iterator[Callable[[Path], None] | None]:
    if not sys.stderr.isatty() or all(not p.is_dir() for p in paths):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from fatkit.extract.scan import expand_inputs

    total = len(expand_inputs(paths))
    with Progress(TextColumn(f"{what} [dim]{{task.fields[name]}}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(what, total=total, name="")

        def advance(path: Path) -> None:
            progress.update(task, advance=1, name=path.name[:40])

        yield advance
