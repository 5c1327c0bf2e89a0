"""`fatkit repack`: copies of CUDA binaries that also carry AMD code objects translated from their PTX."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path, PurePosixPath
from typing import Iterator, List, Optional

import typer
from rich.console import Console
from rich.table import Table

import fatkit
from fatkit.cache import normalize_target
from fatkit.cli import EXIT_INPUT, app
from fatkit.cli.render import console, grouped_reasons
from fatkit.errors import FatkitError
from fatkit.extract.scan import expand_inputs
from fatkit.formats.pe import is_pe
from fatkit.repack import STATUSES, BinaryRepack, output_path, repack_binary

FAILING = ("failed", "error")  # statuses that make the command exit 1


@app.command()
def repack(
    paths: List[Path] = typer.Argument(..., help="Executables, shared libraries and wheels, or directories of them."),
    target: str = typer.Option(..., "--target", help="AMD target ids, comma-separated: gfx942,gfx1100."),
    output: Path = typer.Option(..., "-o", "--output", help="Directory the copies are written to."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache", metavar="DIR",
                                             help="Code-object cache to reuse and fill (default: a temporary one)."),
    jobs: int = typer.Option(os.cpu_count() or 1, "-j", "--jobs", min=1, help="Translations run in parallel."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    keep_signature: bool = typer.Option(False, "--keep-signature",
                                        help="Refuse signed (Authenticode) PE files instead of writing copies "
                                             "whose signature no longer verifies."),
) -> None:
    """Write a copy of each binary with a `.fatkit_amd` section: its PTX translated for the targets (docs/repack.md).

    Inputs are only read; copies keep their file names under OUTPUT (a directory's files keep their paths
    under the directory's name). A binary without PTX is copied unchanged (status no-ptx). Exit 1 when a
    binary could not be repacked or none of its kernels translated. Windows DLLs, EXEs and `.pyd`s get a
    `.fatkit` section (PE names hold 8 bytes) with the same content; a signed one is written with a warning
    that its signature no longer verifies, or refused with --keep-signature.
    """
    targets = sorted({normalize_target(t) for t in target.split(",") if t.strip()})
    if not targets:
        raise typer.BadParameter("at least one target, like gfx942", param_hint="--target")
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FatkitError(f"cannot create the output directory: {exc.strerror}", path=str(output)) from None
    results: list[BinaryRepack] = []
    written: dict[Path, Path] = {}
    with _cache(cache_dir) as cache:
        for source, relative in _inputs(paths):
            results.append(_repack_one(source, relative, output, targets, cache, jobs, written, keep_signature))
    if as_json:
        report = {"fatkit_version": fatkit.__version__, "targets": targets, "output": str(output),
                  "summary": {s: sum(r.status == s for r in results) for s in STATUSES},
                  "binaries": [r.to_json() for r in results]}
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        _render(results)
    if any(r.status in FAILING for r in results):
        raise typer.Exit(EXIT_INPUT)


def _inputs(paths: list[Path]) -> Iterator[tuple[Path, PurePosixPath]]:
    """(file, name under OUTPUT): a file by its own name, a directory's ELF and PE files and wheels under the
    directory's name."""
    for path in paths:
        if path.is_dir():
            for file in expand_inputs([path]):
                with open(file, "rb") as f:
                    head = f.read(4096)  # a PE image's signature follows its DOS stub
                    if head.startswith(b"\x7fELF") or is_pe(head) or file.suffix == ".whl":
                        yield file, PurePosixPath(path.resolve().name, *file.relative_to(path).parts)
        else:
            yield path, PurePosixPath(path.name)


def _repack_one(source: Path, relative: PurePosixPath, output: Path, targets: list[str], cache: Path, jobs: int,
                written: dict[Path, Path], keep_signature: bool) -> BinaryRepack:
    """One input, by kind (a new kind of input gets its branch here)."""
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


def _render(results: list[BinaryRepack]) -> None:
    out = console()
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("binary", "status", "code objects", "kernels ok", "failed", "output"):
        table.add_column(col, justify="right" if col in ("code objects", "kernels ok", "failed") else "left",
                         overflow="fold")
    style = {"repacked": "green", "partial": "yellow", "failed": "bold red", "no-ptx": "dim", "error": "bold red"}
    for r in results:
        table.add_row(str(r.source), f"[{style[r.status]}]{r.status}[/]", str(r.code_objects), str(r.kernels_ok),
                      str(r.kernels_failed), "-" if r.destination is None else str(r.destination))
    out.print(table)
    reasons = [k.reason or k.status for r in results for m in r.modules for k in m.kernels if k.status != "ok"]
    reasons += [m.reason for r in results for m in r.modules if m.status == "failed" and m.reason]
    for reason, count in grouped_reasons(reasons):
        out.print(f"[yellow]not translated[/] ({count}×): {reason}", highlight=False)
    err = Console(stderr=True)
    for r in results:
        if r.status == "error":
            err.print(f"[bold red]error:[/] {r.reason}", highlight=False)
        for problem in r.problems:
            err.print(f"[yellow]! {r.source}: {problem}[/]", highlight=False)
    counts = {s: sum(r.status == s for r in results) for s in STATUSES}
    out.print(", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no inputs", highlight=False)
