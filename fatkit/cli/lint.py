"""Report what would be hard to port in every PTX kernel (warps, tensor cores, async copies, LDS, ...).

Looks at wave32 vs wave64 semantics, lane masks, tensor-core and async-copy instructions, shared memory
against each target's LDS, textures, FP modes, printf and clusters.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterable

from fatkit.cli import EXIT_GATE, EXIT_OK, options
from fatkit.cli.output import console
from fatkit.cli.render import short_path
from fatkit.errors import FatkitError, UsageError
from fatkit.translate.hazards import SEVERITIES, ModuleHazards, target_family

if TYPE_CHECKING:
    from rich.console import Console

    from fatkit.extract.model import Binary

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan", None: "green"}
LINES_SHOWN = 6  # first PTX lines listed per kind
WAVE_CLASSES = ("wave32", "wave64")


def lint_target(text: str) -> str:
    """`--target`: an AMD target id lint knows the family of (its canonical spelling), or wave32/wave64."""
    if text.strip() in WAVE_CLASSES:
        return text.strip()
    try:
        target_family(options.one_target(text))
    except UsageError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None
    return str(options.one_target(text))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_paths(parser, "PTX files, binaries, directories (recursive, links followed), archives, wheels.")
    options.add_json(parser, "Print every finding as JSON.")
    parser.add_argument("--target", type=lint_target, metavar="TARGET",
                        help="Only findings that affect this AMD target: gfx906, gfx90a, gfx942, gfx950, gfx1100, "
                             "…, or wave32/wave64.")
    parser.add_argument("--fail-on", metavar="SEVERITY",
                        help="Exit 3 when a finding is this severe or worse (error, warning, info); a module that "
                             "does not parse counts as an error.")


def run(args: argparse.Namespace) -> int:
    if args.fail_on is not None:
        options.choice(args.parser, "--fail-on", args.fail_on, SEVERITIES)
    from fatkit.cli.progress import file_progress
    from fatkit.extract.scan import scan_paths
    from fatkit.translate.hazards import lint_binary, summarize

    target = args.target
    modules: list[ModuleHazards] = []
    scan_errors: list[dict[str, Any]] = []
    unreadable: list[FatkitError] = []
    with file_progress(args.paths, "linting") as on_file:
        for binary in scan_paths(args.paths, on_file=on_file, unreadable=unreadable):
            found = [m.for_target(target) if target else m for m in lint_binary(binary)]
            modules.extend(found)
            scan_errors.extend({"path": binary.path, "message": str(e)} for e in binary.errors)
    summary = summarize(modules)
    if args.as_json:
        from fatkit.cli.output import print_json

        print_json({"target": target, "modules": [m.to_json() for m in modules], "summary": summary,
                    "errors": scan_errors})
    else:
        render_lint(modules, summary, scan_errors, target=target)
    if unreadable:
        from fatkit.cli.output import unreadable_inputs

        return unreadable_inputs(unreadable)
    if args.fail_on is not None and summary["worst"] is not None \
            and SEVERITIES.index(summary["worst"]) <= SEVERITIES.index(args.fail_on):
        return EXIT_GATE
    return EXIT_OK


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
    from fatkit.translate.hazards import BOTH, HAZARD_KINDS

    by_kind: dict[str, list] = defaultdict(list)
    kernels_by_kind: dict[str, set[str]] = defaultdict(set)
    for kernel in module.kernels:
        for hazard in kernel.hazards:
            by_kind[hazard.kind].append(hazard)
            kernels_by_kind[hazard.kind].add(kernel.name)
    from rich.table import Table

    rows = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("kind", "severity", "targets", "count", "kernels", "lines", "first finding"):
        rows.add_column(col, justify="right" if col in ("count", "kernels") else "left",
                        overflow="fold" if col == "first finding" else "ellipsis",
                        ratio=1 if col == "first finding" else None)
    order = sorted(by_kind, key=lambda k: (SEVERITIES.index(HAZARD_KINDS[k].severity), -len(by_kind[k]), k))
    for kind in order:
        found = by_kind[kind]
        lines = sorted({h.line for h in found})
        shown = ", ".join(map(str, lines[:LINES_SHOWN])) + (" …" if len(lines) > LINES_SHOWN else "")
        first = min(found, key=lambda h: h.line)
        targets = sorted({t for h in found for t in h.targets})
        rows.add_row(kind, _severity(found[0].severity), "all" if targets == list(BOTH) else " ".join(targets),
                     str(len(found)), str(len(kernels_by_kind[kind])), shown, first.message)
    out.print(rows)
    out.print()


# --------------------------------------------------------------------------------------------------
# `fatkit inspect --hazards`


def hazard_summary(binary: Binary) -> dict[str, Any]:
    """What `inspect --hazards` adds to a binary's JSON: counts by severity and kind over its PTX."""
    from fatkit.translate.hazards import lint_binary, summarize

    return summarize(lint_binary(binary))


def render_hazard_summary(binaries: Iterable[dict[str, Any]]) -> None:
    """One row per binary with PTX: modules, kernels, findings by severity, the commonest kinds."""
    from fatkit.cli.output import table

    out = console()
    rows = table(("binary", "PTX", "kernels", "worst", "errors", "warnings", "info", "kinds"),
                 right=("PTX", "kernels", "errors", "warnings", "info"), fold=True, title="PTX hazards",
                 title_justify="left", title_style="bold")
    for b in binaries:
        h = b.get("hazards")
        if not h or not h["modules"]:
            continue
        shown = ", ".join(f"{k} {n}" for k, n in list(h["by_kind"].items())[:4])
        more = len(h["by_kind"]) - 4
        modules = str(h["modules"]) + (f" ({h['unparsed']} unparsed)" if h["unparsed"] else "")
        rows.add_row(short_path(b["path"]), modules, str(h["kernels"]), _severity(h["worst"]),
                     *(str(h["by_severity"][s]) for s in SEVERITIES), shown + (f" … +{more}" if more > 0 else ""))
    if rows.row_count:
        out.print(rows)
    else:
        out.print("PTX hazards: no PTX found", highlight=False)
