"""The `fatkit` command: a thin typer app; each command module parses options, calls one function, renders."""

from __future__ import annotations

import os
import sys

import typer
from rich.console import Console

from fatkit.errors import FatkitError

app = typer.Typer(
    name="fatkit",
    help="Find, judge and translate the GPU code inside CUDA binaries for AMD GPUs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

EXIT_INPUT = 1
EXIT_GATE = 3


# as `fatkit --help` lists them: a user's order (the `cache` group follows the commands)
COMMAND_ORDER = ("inspect", "extract", "translate", "lint", "precompile", "repack")


def _register() -> None:
    # commands register themselves on `app`
    from fatkit.cli import cache, extract, inspect, lint, precompile, repack, translate  # noqa: F401

    app.registered_commands.sort(key=lambda c: COMMAND_ORDER.index(c.callback.__name__))


def main() -> None:
    """Entry point: FatkitError becomes one line on stderr and exit 1; never a traceback."""
    _register()
    err = Console(stderr=True)
    try:
        app()
    except FatkitError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True)
        sys.exit(EXIT_INPUT)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except Exception as exc:  # a bug in fatkit: say so in one line (FATKIT_DEBUG=1 shows the traceback)
        if os.environ.get("FATKIT_DEBUG"):
            raise
        err.print(f"[bold red]internal error:[/] {type(exc).__name__}: {exc} (set FATKIT_DEBUG=1 for details)",
                  highlight=False)
        sys.exit(EXIT_INPUT)
