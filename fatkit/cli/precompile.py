"""`fatkit precompile`: translate every PTX module under some paths once, in parallel, into the cache."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from fatkit.cache import Cache, default_cache_dir, normalize_target
from fatkit.cache.precompile import Report, precompile as run_precompile
from fatkit.cache.zluda import ZludaExport
from fatkit.cli import EXIT_INPUT, app
from fatkit.cli.progress import file_progress
from fatkit.cli.render import console, grouped_reasons, short_path
from fatkit.cli.translate import MMA_NUMERICS_HELP, checked_mma_numerics
from fatkit.extract.scan import scan_paths
from fatkit.extract.select import ptx_modules


@app.command()
def precompile(
    paths: List[Path] = typer.Argument(..., help=".ptx files, binaries, directories, wheels or .a archives."),
    target: str = typer.Option(..., "--target", help="AMD target ids, comma-separated: gfx942,gfx1100 "
                                                     "(features allowed: gfx942:sramecc+:xnack-)."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache", metavar="DIR",
                                             help="Cache directory (default $FATKIT_CACHE_DIR, else "
                                                  "$XDG_CACHE_HOME/fatkit, else ~/.cache/fatkit)."),
    jobs: int = typer.Option(os.cpu_count() or 1, "-j", "--jobs", min=1, help="Translations run in parallel."),
    output_format: str = typer.Option("cache", "--format", help="cache (fatkit's cache) or zluda "
                                                                 "(rows in ZLUDA's cache database)."),
    zluda_version: Optional[str] = typer.Option(None, "--zluda-version", metavar="SHA",
                                                help="--format zluda: the git SHA of the ZLUDA build."),
    device: Optional[str] = typer.Option(None, "--device", help="--format zluda: HIP gcnArchName of the GPU."),
    clock_rate: Optional[int] = typer.Option(None, "--clock-rate", metavar="KHZ",
                                             help="--format zluda: the GPU's clock rate in kHz (ZLUDA keys on it)."),
    zluda_db: Optional[Path] = typer.Option(None, "--zluda-db", metavar="FILE",
                                            help="--format zluda: the database (default "
                                                 "$XDG_CACHE_HOME/zluda/ComputeCache/zluda2.db)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    mma_numerics: str = typer.Option("sm90", "--mma-numerics", metavar="MODEL", callback=checked_mma_numerics,
                                     help=MMA_NUMERICS_HELP),
) -> None:
    """Translate every PTX module once per target into the cache a runtime shim loads (docs/cache.md).

    Identical modules are translated once, what the cache holds is skipped, and the report says what was
    translated, what was already cached, what failed and why, and the compile time a shim no longer pays.
    """
    targets = [normalize_target(t) for t in target.split(",") if t.strip()]
    if not targets:
        raise typer.BadParameter("at least one target, like gfx942", param_hint="--target")
    export = None
    if output_format == "zluda":
        # Checked before any translation: a refusal must not cost an hour of codegen.
        export = ZludaExport.checked(zluda_version, device, clock_rate, targets, zluda_db)
    elif output_format != "cache":
        raise typer.BadParameter(f"cache or zluda, not {output_format!r}", param_hint="--format")
    with file_progress(paths, "scanning") as on_file:
        modules = list(ptx_modules(scan_paths(paths, on_file=on_file), on_error=_warn))
    with Cache(cache_dir or default_cache_dir()) as cache, _translation_progress() as (on_planned, on_done):
        report = run_precompile(modules, targets, cache, jobs=jobs, mma_numerics=mma_numerics,
                                on_planned=on_planned, on_done=on_done)
        exported = export.write(cache, report) if export else None
    for problem in report.problems:
        _warn(f"ignored a corrupt cache entry: {problem}")
    if as_json:
        out = report.to_json()
        if exported is not None:
            out["zluda"] = exported
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        _render(report, exported)
    if any(m["status"] == "failed" and m["stored_as"] is None for m in report.modules):
        raise typer.Exit(EXIT_INPUT)  # codegen, validation or the translator itself failed: not a settled answer


def _warn(message: str) -> None:
    Console(stderr=True).print(f"[yellow]! {message}[/]", highlight=False)


@contextlib.contextmanager
def _translation_progress() -> Iterator[tuple[Callable[[int], None] | None, Callable[[dict], None] | None]]:
    err = Console(stderr=True)
    if not err.is_terminal:
        yield None, None
        return
    with Progress(TextColumn("translating [dim]{task.fields[name]}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True) as progress:
        task = progress.add_task("translating", total=None, name="")

        def planned(total: int) -> None:
            progress.update(task, total=total)

        def done(record: dict[str, Any]) -> None:
            progress.update(task, advance=1, name=f"{short_path(record['source'])[:50]} {record['target']}")

        yield planned, done


def _render(report: Report, exported: dict[str, Any] | None) -> None:
    out = console()
    summary = report.summary()
    if not report.modules:
        out.print("no PTX found", highlight=False)
        return
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("module", "target", "status", "ok", "failed", "seconds"):
        table.add_column(col, justify="right" if col in ("ok", "failed", "seconds") else "left", overflow="fold")
    style = {"translated": "green", "cached": "cyan", "failed": "bold red", "no-kernels": "dim"}
    for m in sorted(report.modules, key=lambda m: (m["source"], m["target"])):
        ok = sum(k["status"] == "ok" for k in m["kernels"])
        status = m["status"] + (" (cached)" if m["status"] == "failed" and m["cached"] else "")
        extra = f" [dim](+{len(m['also_in'])} identical)[/]" if m["also_in"] else ""
        table.add_row(short_path(m["source"]) + extra, m["target"], f"[{style[m['status']]}]{status}[/]", str(ok),
                      str(len(m["kernels"]) - ok), f"{m['compile_seconds']:.2f}")
    out.print(table)
    reasons = [k["reason"] for m in report.modules for k in m["kernels"] if k["status"] != "ok"]
    reasons += [m["reason"] for m in report.modules if m["reason"] and m["status"] == "failed"]
    for reason, count in grouped_reasons(reasons):
        out.print(f"[yellow]failed[/] ({count}×): {reason}", highlight=False)
    out.print(f"modules: {summary['modules_total']} ({summary['modules_translated']} translated, "
              f"{summary['modules_cached']} cached, {summary['modules_failed']} failed, "
              f"{summary['modules_without_kernels']} without kernels, "
              f"{summary['modules_duplicate']} duplicates skipped); kernels: {summary['kernels_ok']} ok, "
              f"{summary['kernels_failed']} failed", highlight=False)
    out.print(f"wall time {summary['seconds']:.2f} s; compile time a shim no longer pays: "
              f"{summary['compile_seconds_saved']:.2f} s; cache: {report.cache}", highlight=False)
    if exported is not None:
        out.print(f"ZLUDA: {exported['rows_written']} row(s) written to {exported['database']}, "
                  f"{exported['modules_skipped']} module(s) left to ZLUDA's own JIT", highlight=False)
