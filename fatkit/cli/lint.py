"""`fatkit lint`: what in each PTX kernel will be hard to run on AMD GPUs; and `inspect --hazards`' summary."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, List, Optional

import typer
from rich.console import Console
from rich.table import Table

import fatkit
from fatkit.cli import EXIT_GATE, app
from fatkit.cli.progress import file_progress
from fatkit.cli.render import console, short_path
from fatkit.errors import UsageError
from fatkit.extract.model import Binary
from fatkit.extract.scan import scan_paths
from fatkit.translate.hazards import (
    BOTH,
    HAZARD_KINDS,
    SEVERITIES,
    ModuleHazards,
    lint_binary,
    summarize,
    target_names,
)

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan", None: "green"}
LINES_SHOWN = 6  # first PTX lines listed per kind


@app.command()
def lint(
    paths: List[Path] = typer.Argument(..., help="PTX files, binaries, directories (recursive), archives, wheels."),
    as_json: bool = typer.Option(False, "--json", help="Print every finding as JSON."),
    target: Optional[str] = typer.Option(None, "--target",
                                         help="Only findings that affect this AMD target: gfx90a, gfx942, gfx950, "
                                              "gfx1100, …, or wave32/wave64."),
    fail_on: Optional[str] = typer.Option(None, "--fail-on", metavar="SEVERITY",
                                          help="Exit 3 when a finding is this severe or worse (error, warning, "
                                               "info); a module that does not parse counts as an error."),
) -> None:
    """Report what would be hard to port in every PTX kernel (warps, tensor cores, async copies, LDS, ...).

    Looks at wave32 vs wave64 semantics, lane masks, tensor-core and async-copy instructions, shared memory
    against each target's LDS, textures, FP modes, printf and clusters.
    """
    if target is not None:
        try:
            target_names(target)  # an unknown target is a usage error (exit 2) before any file is read
        except UsageError as exc:
            raise typer.BadParameter(exc.message, param_hint="--target") from None
    if fail_on is not None and fail_on not in SEVERITIES:
        raise typer.BadParameter(f"one of {', '.join(SEVERITIES)}, not {fail_on!r}", param_hint="--fail-on")
    modules: list[ModuleHazards] = []
    scan_errors: list[dict[str, Any]] = []
    with file_progress(paths, "linting") as on_file:
        for binary in scan_paths(paths, on_file=on_file):
            found = [m.for_target(target) if target else m for m in lint_binary(binary)]
            modules.extend(found)
            scan_errors.extend({"path": binary.path, "message": str(e)} for e in binary.errors)
    summary = summarize(modules)
    if as_json:
        report = {"fatkit_version": fatkit.__version__, "target": target, "modules": [m.to_json() for m in modules],
                  "summary": summary, "errors": scan_errors}
        sys.stdout.write(json.dumps(report, indent=2 if sys.stdout.isatty() else None) + "\n")
    else:
        render_lint(modules, summary, scan_errors, target=target)
    if fail_on is not None and summary["worst"] is not None \
            and SEVERITIES.index(summary["worst"]) <= SEVERITIES.index(fail_on):
        raise typer.Exit(EXIT_GATE)


# --------------------------------------------------------------------------------------------------
# human output


def _severity(severity: str | None) -> str:
    return f"[{SEVERITY_STYLE[severity]}]{severity or 'none'}[/]"


def render_lint(modules: list[ModuleHazards], summary: dict[str, Any], scan_errors: list[dict[str, Any]],
                *, target: str | None) -> None:
    out = console()
    if not modules:
        out.print("no PTX found", highlight=False)
    for module in modules:
        _render_module(out, module)
    for err in scan_errors:
        out.print(f"[yellow]! {err['message']}[/]", highlight=False)
    if len(modules) > 1:
        counts = ", ".join(f"{summary['by_severity'][s]} {s}" for s in SEVERITIES)
        failed = f", {summary['unparsed']} not parsed" if summary["unparsed"] else ""
        out.print(f"[bold]{summary['modules']} PTX modules[/], {summary['kernels']} kernels{failed} — "
                  f"worst: {_severity(summary['worst'])} ({counts})"
                  + (f" for {target}" if target else ""), highlight=False)


def _render_module(out: Console, module: ModuleHazards) -> None:
    head = f"[bold]{short_path(module.source)}[/]  [dim]{module.arch or '?'}[/]"
    if not module.parsed:
        out.print(f"{head}  {_severity('error')}: not parsed: {module.error}", highlight=False)
        out.print()
        return
    hazards = list(module.hazards)
    count = len(module.kernels)
    out.print(f"{head}  {count} kernel{'' if count == 1 else 's'}, worst: {_severity(module.worst)}",
              highlight=False)
    if not hazards:
        out.print("  no hazards" if module.kernels else "  no kernels", highlight=False)
        out.print()
        return
    by_kind: dict[str, list] = defaultdict(list)
    kernels_by_kind: dict[str, set[str]] = defaultdict(set)
    for kernel in module.kernels:
        for hazard in kernel.hazards:
            by_kind[hazard.kind].append(hazard)
            kernels_by_kind[hazard.kind].add(kernel.name)
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("kind", "severity", "targets", "count", "kernels", "lines", "first finding"):
        table.add_column(col, justify="right" if col in ("count", "kernels") else "left",
                         overflow="fold" if col == "first finding" else "ellipsis",
                         ratio=1 if col == "first finding" else None)
    order = sorted(by_kind, key=lambda k: (SEVERITIES.index(HAZARD_KINDS[k].severity), -len(by_kind[k]), k))
    for kind in order:
        found = by_kind[kind]
        lines = sorted({h.line for h in found})
        shown = ", ".join(map(str, lines[:LINES_SHOWN])) + (" …" if len(lines) > LINES_SHOWN else "")
        first = min(found, key=lambda h: h.line)
        targets = sorted({t for h in found for t in h.targets})
        table.add_row(kind, _severity(found[0].severity), "all" if targets == list(BOTH) else " ".join(targets),
                      str(len(found)),
                      str(len(kernels_by_kind[kind])), shown, first.message)
    out.print(table)
    out.print()


# --------------------------------------------------------------------------------------------------
# `fatkit inspect --hazards`


def hazard_summary(binary: Binary) -> dict[str, Any]:
    """What `inspect --hazards` adds to a binary's JSON: counts by severity and kind over its PTX."""
    return summarize(lint_binary(binary))


def render_hazard_summary(binaries: Iterable[dict[str, Any]]) -> None:
    """One row per binary with PTX: modules, kernels, findings by severity, the commonest kinds."""
    out = console()
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold", title="PTX hazards",
                  title_justify="left", title_style="bold")
    for col in ("binary", "PTX", "kernels", "worst", "errors", "warnings", "info", "kinds"):
        table.add_column(col, justify="right" if col in ("PTX", "kernels", "errors", "warnings", "info") else "left",
                         overflow="fold")
    for b in binaries:
        h = b.get("hazards")
        if not h or not h["modules"]:
            continue
        shown = ", ".join(f"{k} {n}" for k, n in list(h["by_kind"].items())[:4])
        more = len(h["by_kind"]) - 4
        modules = str(h["modules"]) + (f" ({h['unparsed']} unparsed)" if h["unparsed"] else "")
        table.add_row(short_path(b["path"]), modules, str(h["kernels"]), _severity(h["worst"]),
                      *(str(h["by_severity"][s]) for s in SEVERITIES),
                      shown + (f" … +{more}" if more > 0 else ""))
    if table.row_count:
        out.print(table)
    else:
        out.print("PTX hazards: no PTX found", highlight=False)
