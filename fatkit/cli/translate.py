"""Translate PTX to AMD code objects (`<name>.<target>.hsaco`); unsupported kernels are reported and skipped.

PATHs are .ptx files, or binaries, directories and archives holding PTX: every PTX entry of a binary is a
module, named after the binary, container and entry as `fatkit extract` names it. An NVIDIA sm_XX target
(sm_90, sm_90:wave64) writes fatkit's re-lowered PTX instead: a verification target.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fatkit.cli import EXIT_INPUT, EXIT_OK, options
from fatkit.errors import FatkitError, InputError
from fatkit.translate.pipeline import DUMP_POINTS, EMIT_KINDS, STAGE_NAMES, Options
from fatkit.translate.targets.ids import TargetId

if TYPE_CHECKING:
    from fatkit.extract.select import PtxModule

EMIT_SUFFIX = {"hsaco": "hsaco", "obj": "o", "asm": "s", "llvm": "ll"}  # --emit kind → file suffix


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_paths(parser, ".ptx files, or binaries/directories/archives holding PTX.")
    options.add_targets(parser, vendors=("amd", "nvidia"),
                        help="AMD target ids, comma-separated: gfx942,gfx1100,gfx942:sramecc+:xnack- (compiled "
                             "with the features unset). An NVIDIA sm_XX (sm_90, sm_90:wave64) writes fatkit's "
                             "re-lowered PTX instead: a verification target.")
    options.add_output(parser, required=False, help="Directory for the code objects (created if missing).")
    parser.add_argument("--strict", action="store_true", help="Exit 1 when any kernel is unsupported.")
    parser.add_argument("--dump-after", metavar="STAGE",
                        help="Print this stage's output per module and stop: a stage "
                             f"({', '.join(STAGE_NAMES)}) or one pass ({', '.join(DUMP_POINTS[len(STAGE_NAMES):])}).")
    parser.add_argument("--emit", default="hsaco", metavar="KIND",
                        help="What to write per module and target: hsaco (linked, validated code object), obj "
                             "(relocatable object), asm (AMDGPU assembly) or llvm (optimised LLVM IR).")
    options.add_json(parser, "Print the per-module, per-kernel report as JSON.")
    options.add_mma_numerics(parser)
    options.add_jobs(parser, "Processes lowering and compiling a module's kernels at once (the output is the "
                             "same for any number).")


def run(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = args.parser
    targets: list[TargetId] = args.targets
    options.choice(parser, "--emit", args.emit, EMIT_KINDS)
    if args.emit != "hsaco" and any(t.vendor == "nvidia" for t in targets):
        parser.error("argument --emit: obj/asm/llvm are for AMD targets; an sm_XX target writes PTX")
    if args.dump_after is not None:
        options.choice(parser, "--dump-after", args.dump_after, DUMP_POINTS)
    elif args.output is None:
        parser.error("an output directory is needed (-o DIR), or --dump-after")
    from fatkit.cli.output import warn
    from fatkit.cli.progress import file_progress
    from fatkit.extract.scan import scan_paths
    from fatkit.extract.select import ptx_modules
    from fatkit.translate.link import link_units

    unreadable: list[FatkitError] = []
    with file_progress(args.paths, "translating") as on_file:
        modules = list(ptx_modules(scan_paths(args.paths, on_file=on_file, unreadable=unreadable), on_error=warn,
                                   link_rdc=link_units))
    if args.dump_after is not None:
        for module in modules:
            _dump(module, targets, args.dump_after)
        return EXIT_OK
    outdir = _output_dir(args.output)
    base = options.translation_options(args)
    reports = [report for module in modules for report in _translate_module(module, base, targets, outdir)]
    if args.as_json:
        from fatkit.cli.output import print_json

        print_json({"modules": reports})
    else:
        _render(reports, outdir)
    kernels = [k for r in reports for k in r["kernels"]]
    if unreadable or any(r["error"] for r in reports) or any(k["status"] == "error" for k in kernels):
        return EXIT_INPUT  # an input warned of above held nothing readable, or a translation failed
    if args.strict and any(k["status"] == "unsupported" for k in kernels):
        if not args.as_json:
            from fatkit.cli.output import console

            unsupported = [k for k in kernels if k["status"] == "unsupported"]
            console().print(f"[bold red]--strict:[/] {len(unsupported)} unsupported kernel(s), first: "
                            f"{unsupported[0]['reason']}", highlight=False)
        return EXIT_INPUT
    return EXIT_OK


def _output_dir(output: Path) -> Path:
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create output directory: {exc.strerror}", path=str(output)) from None
    return output.resolve()


def _translate_module(module: PtxModule, base: Options, targets: list[TargetId], outdir: Path) -> list[dict[str, Any]]:
    """Run the pipeline for each target, parsing and preparing the module once (the passes do not depend on
    the target); write each code object (or what --emit asks for) when any kernel lowered."""
    from fatkit.translate import pipeline

    reports: list[dict[str, Any]] = [{
        "source": module.source, "container": module.container, "entry": module.entry,
        "linked": list(module.linked),  # the -rdc units' containers, for a module linked from them
        "ptx_sha256": hashlib.sha256(module.text.encode()).hexdigest(), "target": str(target),
        "output": None, "kernels": [], "error": None,
    } for target in targets]
    try:
        prepared = pipeline.run(module.text, base, until="passes")
    except FatkitError as exc:
        for report in reports:
            report["error"] = str(exc)
        return reports
    for target, report in zip(targets, reports):
        options = replace(base, target=target)
        try:
            lowered: pipeline.Lowered = pipeline.run_from("lower", prepared, options, until="lower")
        except FatkitError as exc:
            report["error"] = str(exc)
            continue
        report["kernels"] = [k.to_json() for k in lowered.reports]
        if not lowered.kernels:
            continue
        try:
            translation = pipeline.finish(lowered, options)
            product = translation.product
            report["kernels"] = [k.to_json() for k in translation.kernels]  # with the kernels LLVM failed on
        except FatkitError as exc:
            for kernel in report["kernels"]:
                if kernel["status"] == "ok":
                    kernel.update(status="error", reason=str(exc))
            continue
        suffix = "ptx" if target.vendor == "nvidia" else EMIT_SUFFIX[options.emit]
        path = outdir / f"{module.stem}.{str(target).replace(':', '-')}.{suffix}"  # sm_90:wave64 → sm_90-wave64
        path.write_bytes(product)
        report["output"] = str(path)
    return reports


def _dump(module: PtxModule, targets: list[TargetId], stage: str) -> None:
    """Print what `stage` (or one pass) produced for the module: once for target-independent stages, else per
    target."""
    from fatkit.translate import pipeline

    index = STAGE_NAMES.index(stage if stage in STAGE_NAMES else "passes")
    for target in targets[:1] if index < STAGE_NAMES.index("lower") else targets:
        sys.stdout.write(f"; ==== {module.stem} ({module.source}) after {stage}"
                         + (f" for {target}" if index >= STAGE_NAMES.index("lower") else "")
                         + " ====\n")
        try:
            value = pipeline.run(module.text, Options(target=target), until=stage)
        except FatkitError as exc:
            sys.stdout.write(f"; error: {exc}\n")
            continue
        sys.stdout.write(_dump_text(stage, value))


def _dump_text(stage: str, value: Any) -> str:
    from fatkit.translate.passes import describe
    from fatkit.translate.ptx.printer import print_ptx

    if stage == "parse":
        return print_ptx(value)
    if stage == "passes" or stage not in STAGE_NAMES:  # the passes stage, or one pass of it
        return describe(value)
    if stage == "lower":
        unsupported = [f"; unsupported: {r.reason}\n" for r in value.reports if r.status != "ok"]
        return "".join(unsupported) + "".join(k.llvm_ir.rstrip("\n") + "\n" for k in value.kernels)
    if stage == "codegen":
        _, product = value
        return f"; code object: {len(product)} bytes, sha256 {hashlib.sha256(product).hexdigest()}\n"
    code_object = value.validated
    lines = [f"; code object v{code_object.code_object_version} for {code_object.target_id}"]
    lines.extend(f";   {k.name}: kernarg {k.kernarg_size} bytes, LDS {k.group_segment_size} bytes, "
                 f"wave{k.wavefront_size}, {k.vgpr_count} VGPRs, {k.sgpr_count} SGPRs" for k in code_object.kernels)
    return "\n".join(lines) + "\n"


def _render(reports: list[dict[str, Any]], outdir: Path) -> None:
    from fatkit.cli.output import console, table
    from fatkit.cli.render import grouped_reasons, short_path

    out = console()
    if not reports:
        out.print("no PTX found", highlight=False)
        return
    rows = table(("module", "target", "ok", "unsupported", "output"), right=("ok", "unsupported"), fold=True)
    for r in reports:
        counts = {s: sum(k["status"] == s for k in r["kernels"]) for s in ("ok", "unsupported", "error")}
        where = short_path(r["source"]) + ("" if r["container"] is None else f" c{r['container']}.e{r['entry']}")
        if r["error"] or counts["error"]:
            written = "[bold red]error[/]"
        else:
            written = Path(r["output"]).name if r["output"] else "[yellow]none[/]"
        rows.add_row(where, r["target"], str(counts["ok"]), str(counts["unsupported"]), written)
    out.print(rows)
    reasons = [k["reason"] for r in reports for k in r["kernels"] if k["status"] == "unsupported"]
    for reason, count in grouped_reasons(reasons):
        out.print(f"[yellow]unsupported[/] ({count} kernel{'s' if count > 1 else ''}): {reason}", highlight=False)
    errors = {r["error"] for r in reports if r["error"]} | {
        k["reason"] for r in reports for k in r["kernels"] if k["status"] == "error"}
    for error in sorted(errors):
        out.print(f"[bold red]error:[/] {error}", highlight=False)
    out.print(f"written to {outdir}", highlight=False)
