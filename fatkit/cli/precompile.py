"""Translate every PTX module once per target into the cache a runtime shim loads (docs/cache.md).

Identical modules are translated once, what the cache holds is skipped, and the report says what was
translated, what was already cached, what failed and why, and the compile time a shim no longer pays.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from fatkit.cli import EXIT_INPUT, EXIT_OK, options

if TYPE_CHECKING:
    from fatkit.cache.precompile import Report
    from fatkit.errors import FatkitError

FORMATS = ("cache", "zluda")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_paths(parser, ".ptx files, binaries, directories (links followed), wheels or .a archives.")
    options.add_targets(parser, required=False,
                        help="AMD target ids, comma-separated: gfx942,gfx1100 (features allowed: "
                             "gfx942:sramecc+:xnack-); required, except with --format zluda (the device's).")
    options.add_cache(parser)
    options.add_mma_numerics(parser)
    options.add_jobs(parser)
    parser.add_argument("--format", dest="output_format", default="cache",
                        help="cache (fatkit's cache) or zluda (rows in ZLUDA's cache database, docs/zluda.md).")
    parser.add_argument("--zluda-version", metavar="SHA",
                        help="--format zluda: the 40-digit git SHA of the ZLUDA build (default: copied from the "
                             "newest row ZLUDA wrote).")
    parser.add_argument("--device", help="--format zluda: HIP gcnArchName of the GPU (default: copied from the "
                                         "newest row).")
    parser.add_argument("--clock-rate", type=int, metavar="KHZ",
                        help="--format zluda: the GPU's clock rate in kHz (default: copied from the newest row).")
    parser.add_argument("--zluda-db", type=Path, metavar="FILE",
                        help="--format zluda: the database (default ZLUDA's: $XDG_CACHE_HOME or ~/.cache, then "
                             "zluda/ComputeCache/zluda2.db).")
    parser.add_argument("--dry-run", action="store_true", help="--format zluda: list the rows, write none.")
    options.add_json(parser)


def run(args: argparse.Namespace) -> int:
    options.choice(args.parser, "--format", args.output_format, FORMATS)
    from fatkit.cache import Cache, default_cache_dir, zluda
    from fatkit.cache.precompile import precompile
    from fatkit.cli.output import warn
    from fatkit.cli.progress import file_progress
    from fatkit.extract.scan import scan_paths
    from fatkit.extract.select import ptx_modules
    from fatkit.translate.link import link_units
    from fatkit.translate.targets.ids import TargetId

    targets: list[TargetId] = args.targets or []
    plan = None
    if args.output_format == "zluda":
        # Checked before any translation: a refusal must not cost an hour of codegen.
        plan = zluda.prepare(args.zluda_db, args.zluda_version, args.device, args.clock_rate, dry_run=args.dry_run)
        device_target = TargetId.parse_amd(plan.key.target)
        targets = targets or [device_target]
        if device_target not in targets:
            args.parser.error(f"argument --target: the ZLUDA device is {plan.key.device}: its target "
                              f"{device_target} must be among them (or leave --target out)")
    elif args.dry_run:
        args.parser.error("argument --dry-run: only with --format zluda")
    elif not targets:
        args.parser.error("the following arguments are required: --target (or --format zluda)")
    unreadable: list[FatkitError] = []
    with file_progress(args.paths, "scanning") as on_file:
        modules = list(ptx_modules(scan_paths(args.paths, on_file=on_file, unreadable=unreadable), on_error=warn,
                                   link_rdc=link_units))
    with Cache(args.cache_dir or default_cache_dir()) as cache, _translation_progress() as (on_planned, on_done):
        # For ZLUDA every PTX entry gets its own translation: ZLUDA picks among them with its own parser.
        report = precompile(modules, targets, cache, jobs=args.jobs, options=options.translation_options(args),
                            on_planned=on_planned, on_done=on_done, per_entry=plan is not None)
        exported = None
        if plan is not None:
            zluda.plan_rows(plan, report, cache, zluda.entry_texts(modules))
            exported = zluda.write_plan(plan, cache).to_json()
    for problem in report.problems:
        warn(f"ignored a corrupt cache entry: {problem}")
    if args.as_json:
        from fatkit.cli.output import print_json

        out = report.to_json()
        if exported is not None:
            out["zluda"] = exported
        print_json(out)
    else:
        _render(report, exported)
    if unreadable:
        return EXIT_INPUT  # an input warned of above held nothing readable
    if any(m["status"] == "failed" and m["stored_as"] is None for m in report.modules):
        return EXIT_INPUT  # codegen, validation or the translator itself failed: not a settled answer
    return EXIT_OK


@contextlib.contextmanager
def _translation_progress() -> Iterator[tuple[Callable[[int], None] | None, Callable[[dict], None] | None]]:
    if not sys.stderr.isatty():
        yield None, None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from fatkit.cli.render import short_path

    err = Console(stderr=True)
    with Progress(TextColumn("translating [dim]{task.fields[name]}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True) as progress:
        task = progress.add_task("translating", total=None, name="")

        def planned(total: int) -> None:
            progress.update(task, total=total)

        def done(record: dict[str, Any]) -> None:
            progress.update(task, advance=1, name=f"{short_path(record['source'])[:50]} {record['target']}")

        yield planned, done


def _render(report: Report, exported: dict[str, Any] | None) -> None:
    from fatkit.cli.output import console, table
    from fatkit.cli.render import grouped_reasons, short_path

    out = console()
    summary = report.summary()
    if not report.modules:
        out.print("no PTX found", highlight=False)
        return
    rows = table(("module", "target", "status", "ok", "failed", "seconds"), right=("ok", "failed", "seconds"),
                 fold=True)
    style = {"translated": "green", "cached": "cyan", "failed": "bold red", "no-kernels": "dim"}
    for m in sorted(report.modules, key=lambda m: (m["source"], m["target"])):
        ok = sum(k["status"] == "ok" for k in m["kernels"])
        status = m["status"] + (" (cached)" if m["status"] == "failed" and m["cached"] else "")
        extra = f" [dim](+{len(m['also_in'])} identical)[/]" if m["also_in"] else ""
        rows.add_row(short_path(m["source"]) + extra, m["target"], f"[{style[m['status']]}]{status}[/]", str(ok),
                     str(len(m["kernels"]) - ok), f"{m['compile_seconds']:.2f}")
    out.print(rows)
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
        _render_zluda(exported)


def _render_zluda(exported: dict[str, Any]) -> None:
    from fatkit.cli.output import console, table
    from fatkit.cli.render import _size, grouped_reasons, short_path

    out = console()
    rows = table(("ptx", "sm", "kernels", "size", "row", "module"), right=("sm", "kernels", "size"), fold=True,
                 title="ZLUDA rows", title_justify="left")
    style = {"written": "green", "would-write": "green", "present": "cyan"}
    for row in exported["rows"]:
        rows.add_row(row["ptx_blake3"][:16], str(row["sm_version"]), str(row["kernels"]), _size(row["size"]),
                     f"[{style.get(row['status'], 'red')}]{row['status']}[/]", short_path(row["source"]))
    if exported["rows"]:
        out.print(rows)
    for reason, count in grouped_reasons([s["reason"] for s in exported["skipped"]]):
        out.print(f"[yellow]left to ZLUDA's JIT[/] ({count}×): {reason}", highlight=False)
    key = exported["key"]
    verb = "would write" if exported["dry_run"] else "wrote"
    done = exported["rows_would_write"] if exported["dry_run"] else exported["rows_written"]
    out.print(f"ZLUDA: {verb} {done} row(s) ({exported['rows_present']} already there) to {exported['database']}; "
              f"{exported['modules_skipped']} module(s) left to ZLUDA's own JIT", highlight=False)
    out.print(f"key: zluda_version {key['zluda_version']}, device {key['device']}, backend_key "
              f"{key['backend_key']} ({key['from']})", highlight=False)
    if exported["other_keys"]:
        out.print(f"[yellow]the database also holds ZLUDA rows under {len(exported['other_keys'])} other key(s) "
                  "(another ZLUDA build, GPU or clock): give --zluda-version/--device/--clock-rate for those[/]",
                  highlight=False)
