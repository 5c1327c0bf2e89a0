"""What commands print: JSON documents (one shape, one indentation rule), rich tables, warnings and errors.

rich is imported only when something is drawn for a person: `--json` output and messages to a pipe are
plain text.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, Iterable

import fatkit
from fatkit.cli import EXIT_INPUT, EXIT_OK

if TYPE_CHECKING:
    from fatkit.errors import FatkitError
    from rich.console import Console
    from rich.table import Table

WIDE_PIPE = 160  # rich's 80 columns for pipes would wrap every table


def print_json(document: dict[str, Any]) -> None:
    """`document` with `fatkit_version` first; indented at a terminal, compact (and fast to write) in a pipe."""
    out = {"fatkit_version": fatkit.__version__, **document}
    sys.stdout.write(json.dumps(out, indent=2 if sys.stdout.isatty() else None) + "\n")


def console() -> Console:
    from rich.console import Console

    class PipedConsole(Console):
        def on_broken_pipe(self) -> None:  # rich would exit 1, an input failure's status: `cli.main` says 141
            self.quiet = True
            raise BrokenPipeError

    out = PipedConsole()
    return out if out.is_terminal else PipedConsole(width=WIDE_PIPE)


def table(columns: Iterable[str], *, right: Iterable[str] = (), fold: bool = False, **options: Any) -> Table:
    """A borderless table with bold headers; `right` names the columns aligned right (numbers)."""
    from rich.table import Table

    aligned = set(right)
    made = Table(show_edge=False, pad_edge=False, box=None, header_style="bold", **options)
    for column in columns:
        made.add_column(column, justify="right" if column in aligned else "left",
                        overflow="fold" if fold else "ellipsis")
    return made


def warn(message: str) -> None:
    """`! message` on stderr (yellow at a terminal)."""
    _stderr("[yellow]! {}[/]", f"! {message}", message)


def error(message: str, label: str = "error") -> None:
    """`error: message` on stderr (bold red at a terminal)."""
    _stderr(f"[bold red]{label}:[/] {{}}", f"{label}: {message}", message)


def _stderr(styled: str, plain: str, message: str) -> None:
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.markup import escape

        Console(stderr=True).print(styled.format(escape(message)), highlight=False)
    else:
        sys.stderr.write(plain + "\n")


def unreadable_inputs(failures: list[FatkitError]) -> int:
    """The exit status after a scan: 1 when some input held nothing readable (scan_paths' `unreadable`), with
    an `error:` line naming each (file, offset, why)."""
    for failure in failures:
        error(f"nothing read from {failure}")
    return EXIT_INPUT if failures else EXIT_OK
