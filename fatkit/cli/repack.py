"""Write a copy of each binary with a `.fatkit_amd` section: its PTX translated for the targets (docs/repack.md).

Inputs are only read; copies keep their file names under OUTPUT (a directory's files keep their paths under
the directory's name; links are followed, each real file once). A binary without PTX is copied unchanged
(status no-ptx). Exit 1 when a binary could not be repacked or none of its kernels translated. Windows DLLs,
EXEs and `.pyd`s get a `.fatkit` section (PE names hold 8 bytes) with the same content; a signed one is written
with a warning that its signature no longer verifies, or refused with --keep-signature.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Iterator

from fatkit.cli import EXIT_INPUT, EXIT_OK, options
from fatkit.errors import FatkitError

if TYPE_CHECKING:
    from fatkit.repack import BinaryRepack
    from fatkit.repack.wheel import WheelRepack

FAILING = ("failed", "error")  # statuses that make the command exit 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_paths(parser, "Executables, shared libraries and wheels, or directories of them.")
    options.add_targets(parser)
    options.add_output(parser, required=True, help="Directory the copies are written to.")
    options.add_cache(parser, "Code-object cache to reuse and fill (default: a temporary one).")
    options.add_jobs(parser)
    parser.add_argument("--keep-signature", action="store_true",
                        help="Refuse signed (Authenticode) PE files instead of writing copies whose signature no "
                             "longer verifies.")
    options.add_json(parser)


def run(args: argparse.Namespace) -> int:
    from fatkit.repack import STATUSES

    targets = sorted(str(t) for t in args.targets)
    output: Path = args.output
    inputs = list(_inputs(args.paths))  # a missing path or an empty directory is refused before anything is made
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FatkitError(f"cannot create the output directory: {exc.strerror}", path=str(output)) from None
    results: list[BinaryRepack | WheelRepack] = []
    written: dict[Path, Path] = {}
    with _cache(args.cache_dir) as cache:
        for source, relative in inputs:
            results.append(_repack_one(source, relative, output, targets, cache, args.jobs, written,
                                       args.keep_signature))
    if args.as_json:
        from fatkit.cli.output import print_json

        print_json({"targets": targets, "output": str(output),
                    "summary": {s: sum(r.status == s for r in results) for s in STATUSES},
                    "binaries": [r.to_json() for r in results]})
    else:
        _render(results)
    return EXIT_INPUT if any(r.status in FAILING for r in results) else EXIT_OK


def _inputs(paths: list[Path]) -> Iterator[tuple[Path, PurePosixPath]]:
    """(file, name under OUTPUT): a file by its own name, a directory's ELF and PE files and wheels under the
    directory's name."""
    from fatkit.cli.output import warn
    from fatkit.extract.scan import BrokenLink, expand_inputs
    from fatkit.formats.magic import ELF_MAGIC
    from fatkit.formats.pe import is_pe

    for path in paths:
        if path.is_dir():
            skipped: list[FatkitError] = []
            for file in expand_inputs([path], skipped):
                with open(file, "rb") as f:
                    head = f.read(4096)  # a PE image's signature follows its DOS stub
                    if head.startswith(ELF_MAGIC) or is_pe(head) or file.suffix == ".whl":
                        yield file, PurePosixPath(path.resolve().name, *file.relative_to(path).parts)
            for problem in skipped:  # a directory not listed may have held binaries: the tree is incomplete
                if not isinstance(problem, BrokenLink):
                    warn(f"skipped {problem}")
        else:
            expand_inputs([path])  # a missing path: the same error as every other command's, before any output
            yield path, PurePosixPath(path.name)


def _repack_one(source: Path, relative: PurePosixPath, output: Path, targets: list[str], cache: Path, jobs: int,
                written: dict[Path, Path], keep_signature: bool) -> BinaryRepack | WheelRepack:
    """One input, by kind (a new kind of input gets its branch here)."""
    from fatkit.repack import BinaryRepack, output_path, repack_binary

    try:
        destination = output_path(output, relative)
    except FatkitError as exc:
        return BinaryRepack(source, None, "error", reason=str(exc))
    if destination in written:
        return BinaryRepack(source, None, "error", reason=f"{written[destination]} is already written to {destination}")
    written[destination] = source
    destination.parent.mkdir(parents=True, exist_ok=True)
    if source.suffix == ".whl":  # a new wheel of the same name whose ELF members are repacked
        from fatkit.repack.wheel import repack_wheel_or_error

        return repack_wheel_or_error(source, destination.parent, targets, cache, jobs, keep_signature)
    return repack_binary(source, destination, targets, cache, jobs, keep_signature)


@contextlib.contextmanager
def _cache(directory: Path | None) -> Iterator[Path]:
    """The cache given, or one temporary cache shared by every binary of the run (identical modules once)."""
    if directory is not None:
        yield directory
        return
    with tempfile.TemporaryDirectory(prefix="fatkit-repack-") as temporary:
        yield Path(temporary)


def _render(results: list[BinaryRepack | WheelRepack]) -> None:
    from fatkit.cli.output import console, error, table, warn
    from fatkit.cli.render import grouped_reasons
    from fatkit.repack import STATUSES

    out = console()
    rows = table(("binary", "status", "code objects", "kernels ok", "failed", "output"),
                 right=("code objects", "kernels ok", "failed"), fold=True)
    style = {"repacked": "green", "partial": "yellow", "failed": "bold red", "no-ptx": "dim", "error": "bold red"}
    for r in results:
        rows.add_row(str(r.source), f"[{style[r.status]}]{r.status}[/]", str(r.code_objects), str(r.kernels_ok),
                     str(r.kernels_failed), "-" if r.destination is None else str(r.destination))
    out.print(rows)
    reasons = [k.reason or k.status for r in results for m in r.modules for k in m.kernels if k.status != "ok"]
    reasons += [m.reason for r in results for m in r.modules if m.status == "failed" and m.reason]
    for reason, count in grouped_reasons(reasons):
        out.print(f"[yellow]not translated[/] ({count}×): {reason}", highlight=False)
    for r in results:
        if r.status == "error":
            error(str(r.reason))
        for problem in r.problems:
            warn(f"{r.source}: {problem}")
    counts = {s: sum(r.status == s for r in results) for s in STATUSES}
    out.print(", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no inputs", highlight=False)
