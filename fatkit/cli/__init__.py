"""The `fatkit` command: one module per command (options, one call, rendering), registered below in order.

Only the module of the command being run is imported, and each imports what is heavy (llvmlite, construct,
rich) where it is used, so `fatkit inspect small.so --json` costs little more than reading the file.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from fatkit.errors import FatkitError

EXIT_OK = 0
EXIT_INPUT = 1
EXIT_USAGE = 2
EXIT_GATE = 3
EXIT_PIPE = 141  # what a shell reports for a program a closed pipe stopped (128 + SIGPIPE), as `yes | head` shows
EXIT_CODES = ("exit codes: 0 ok; 1 an input or translation failure (a missing path, an input nothing could be read "
              "from, a failed translation); 2 usage; 3 a --require-ptx/--fail-on gate; 141 the reader of the "
              "output closed it (`| head`)")

# (name, module, summary) in the order `fatkit --help` lists them: a user's order, the `cache` group last.
# Each module has `add_arguments(parser)` and `run(args, parser) -> int` (the exit status).
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("inspect", "fatkit.cli.inspect", "Show the NVIDIA and AMD device code inside binaries and whether it can run "
                                      "on AMD GPUs."),
    ("extract", "fatkit.cli.extract", "Write device code entries (PTX, cubins, AMD code objects) as files."),
    ("translate", "fatkit.cli.translate", "Translate PTX to AMD code objects; unsupported kernels are reported "
                                          "and skipped."),
    ("lint", "fatkit.cli.lint", "Report what would be hard to port in every PTX kernel."),
    ("precompile", "fatkit.cli.precompile", "Translate every PTX module once per target into the cache a runtime "
                                            "shim loads."),
    ("repack", "fatkit.cli.repack", "Write copies of binaries that also carry AMD code objects translated from "
                                    "their PTX."),
    ("cache", "fatkit.cli.cache", "Query and maintain the translation cache."),
)


def parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser, with the arguments of the command `argv` names (the others' modules are not imported).

    When `argv` names a command, only that command's parser is made: the others would only be listed by
    `fatkit --help` or an unknown command's error, and each parser costs argparse a round of gettext look-ups
    (files searched on disk) at every start."""
    parser = argparse.ArgumentParser(prog="fatkit", description="Find, judge and translate the GPU code inside "
                                                                "CUDA binaries for AMD GPUs.",
                                     epilog=EXIT_CODES)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    asks_help = chosen is None or any(arg in ("-h", "--help") for arg in argv[:list(argv).index(chosen)])
    known = not asks_help and any(name == chosen for name, _, _ in COMMANDS)  # `fatkit -h inspect` lists all
    for name, module_name, summary in COMMANDS:
        if known and name != chosen:
            continue
        command = commands.add_parser(name, help=summary, description=summary, epilog=EXIT_CODES)
        if name == chosen:
            module = importlib.import_module(module_name)
            command.description = module.__doc__
            command.formatter_class = argparse.RawDescriptionHelpFormatter
            module.add_arguments(command)
            command.set_defaults(run=module.run, parser=command)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: FatkitError becomes one line on stderr and exit 1; never a traceback."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = parser_for(arguments)
    args = parser.parse_args(arguments)
    if args.command is None:
        parser.print_help()
        sys.exit(EXIT_USAGE)
    from fatkit.cli import output

    try:
        status = args.run(args)
    except FatkitError as exc:
        output.error(str(exc))
        sys.exit(EXIT_INPUT)
    except KeyboardInterrupt:
        output.error("interrupted")
        sys.exit(130)
    except BrokenPipeError:  # `fatkit inspect … | head`: the reader has gone, which is not an input failure
        # Python flushes stdout again at exit: point it at /dev/null so that flush cannot fail a second time
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_PIPE)
    except Exception as exc:  # a bug in fatkit: say so in one line (FATKIT_DEBUG=1 shows the traceback)
        if os.environ.get("FATKIT_DEBUG"):
            raise
        output.error(f"{type(exc).__name__}: {exc} (set FATKIT_DEBUG=1 for details)", label="internal error")
        sys.exit(EXIT_INPUT)
    sys.exit(status)
