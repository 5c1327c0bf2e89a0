"""`fatkit translate`: PTX files, or the PTX inside binaries, to AMD code objects, one per module and target."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.console import Console
from rich.table import Table

from fatkit.cli import EXIT_INPUT, app
from fatkit.cli.progress import file_progress
from fatkit.cli.render import console, grouped_reasons, short_path
from fatkit.errors import FatkitError, InputError
from fatkit.extract.scan import scan_paths
from fatkit.extract.select import PtxModule, ptx_modules
from fatkit.translate.passes import PASS_NAMES, describe, run_passes
from fatkit.translate.pipeline import MMA_NUMERICS, STAGES, Lowered, Options, Prepared, Translation
from fatkit.translate.ptx import ast
from fatkit.translate.ptx.printer import print_ptx
from fatkit.translate.targets.nvptx import is_nvptx_target

STAGE_NAMES = tuple(name for name, _ in STAGES)
DUMP_POINTS = STAGE_NAMES + PASS_NAMES  # a stage, or one pass of the passes stage
EMIT_SUFFIX = {"hsaco": "hsaco", "obj": "o", "asm": "s", "llvm": "ll"}  # --emit kind → file suffix
MMA_NUMERICS_HELP = ("Tensor-core arithmetic of mma/wmma (docs/numerics.md): sm90 (H100/H200 bit for bit, the "
                     "default) or exact (exact sum, one rounding; the most accurate).")


def checked_mma_numerics(value: str) -> str:
    """--mma-numerics: one of MMA_NUMERICS (Options refuses "native" with its reason)."""
    if value not in MMA_NUMERICS:
        reserved = " ('native' is reserved for AMD matrix instructions, not available yet)" if value == "native" else ""
        raise typer.BadParameter(f"one of {', '.join(MMA_NUMERICS)}, not {value!r}{reserved}",
                                 param_hint="--mma-numerics")
    return value


@app.command()
def translate(
    paths: List[Path] = typer.Argument(..., help=".ptx files, or binaries/directories/archives holding PTX."),
    target: str = typer.Option(..., "--target",
                               help="AMD processors, comma-separated: gfx942,gfx1100. An NVIDIA sm_XX (sm_90) "
                                    "writes fatkit's re-lowered PTX instead: a verification target."),
    output: Optional[Path] = typer.Option(None, "-o", "--output",
                                          help="Directory for the code objects (created if missing)."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when any kernel is unsupported."),
    dump_after: Optional[str] = typer.Option(None, "--dump-after", metavar="STAGE",
                                             help=f"Print this stage's output per module and stop: "
                                                  f"{', '.join(STAGE_NAMES)}, or one pass: "
                                                  f"{', '.join(PASS_NAMES)}."),
    emit: str = typer.Option("hsaco", "--emit", metavar="KIND",
                             help="What to write per module and target: hsaco (linked, validated code object), "
                                  "obj (relocatable object), asm (AMDGPU assembly) or llvm (optimised LLVM IR)."),
    as_json: bool = typer.Option(False, "--json", help="Print the per-module, per-kernel report as JSON."),
    jobs: int = typer.Option(os.cpu_count() or 1, "-j", "--jobs", min=1,
                             help="Processes lowering and compiling a module's kernels at once (the output is "
                                  "the same for any number)."),
    mma_numerics: str = typer.Option("sm90", "--mma-numerics", metavar="MODEL", callback=checked_mma_numerics,
                                     help=MMA_NUMERICS_HELP),
) -> None:
    """Translate PTX to AMD code objects (`<name>.<target>.hsaco`); unsupported kernels are reported and skipped.

    Every PTX entry of a binary is a module, named after the binary, container and entry as `fatkit extract` does.
    """
    targets = _targets(target)
    if emit not in EMIT_SUFFIX:
        raise typer.BadParameter(f"one of {', '.join(EMIT_SUFFIX)}, not {emit!r}", param_hint="--emit")
    if emit != "hsaco" and any(is_nvptx_target(t) for t in targets):
        raise typer.BadParameter("obj/asm/llvm are for AMD targets; an sm_XX target writes PTX", param_hint="--emit")
    if dump_after is not None and dump_after not in DUMP_POINTS:
        raise typer.BadParameter(f"one of {', '.join(DUMP_POINTS)}, not {dump_after!r}", param_hint="--dump-after")
    if dump_after is None and output is None:
        raise typer.BadParameter("an output directory is needed (or --dump-after)", param_hint="-o")
    with file_progress(paths, "translating") as on_file:
        modules = list(ptx_modules(scan_paths(paths, on_file=on_file), on_error=_warn))
    if dump_after is not None:
        for module in modules:
            _dump(module, targets, dump_after, mma_numerics)
        return
    outdir = _output_dir(output)
    reports = [_translate_module(module, name, outdir, emit, jobs, mma_numerics)
               for module in modules for name in targets]
    if as_json:
        sys.stdout.write(json.dumps({"modules": reports}, indent=2) + "\n")
    else:
        _render(reports, outdir)
    kernels = [k for r in reports for k in r["kernels"]]
    if any(r["error"] for r in reports) or any(k["status"] == "error" for k in kernels):
        raise typer.Exit(EXIT_INPUT)
    if strict and any(k["status"] == "unsupported" for k in kernels):
        if not as_json:
            unsupported = [k for k in kernels if k["status"] == "unsupported"]
            console().print(f"[bold red]--strict:[/] {len(unsupported)} unsupported kernel(s), first: "
                            f"{unsupported[0]['reason']}", highlight=False)
        raise typer.Exit(EXIT_INPUT)


def _targets(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in names if not re.fullmatch(r"gfx[0-9a-f]+", t) and not is_nvptx_target(t)]
    if not names or bad:
        raise typer.BadParameter(f"AMD processors like gfx942,gfx1100 (or sm_90 for verification), not {text!r}",
                                 param_hint="--target")
    return list(dict.fromkeys(names))


def _warn(message: str) -> None:
    Console(stderr=True).print(f"[yellow]! {message}[/]", highlight=False)


def _output_dir(output: Path) -> Path:
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create output directory: {exc.strerror}", path=str(output)) from None
    return output.resolve()


def _stage(name: str):
    return dict(STAGES)[name]


def _translate_module(module: PtxModule, target: str, outdir: Path, emit: str, jobs: int,
                      mma_numerics: str = "sm90") -> dict[str, Any]:
    """Run the stages for one target; write the code object (or what --emit asks for) when any kernel lowered."""
    options = Options(target=target, jobs=jobs, mma_numerics=mma_numerics)
    report: dict[str, Any] = {
        "source": module.source, "container": module.container, "entry": module.entry,
        "ptx_sha256": hashlib.sha256(module.text.encode()).hexdigest(), "target": target,
        "output": None, "kernels": [], "error": None,
    }
    try:
        lowered: Lowered = _stage("lower")(_stage("passes")(_stage("parse")(module.text, options), options), options)
    except FatkitError as exc:
        report["error"] = str(exc)
        return report
    report["kernels"] = [{"name": k.name, "status": k.status, "reason": k.reason, "line": k.line}
                         for k in lowered.reports]
    if not lowered.kernels:
        return report
    try:
        if emit == "hsaco":
            translation: Translation = _stage("validate")(_stage("codegen")(lowered, options), options)
            product = translation.product
        else:
            product = lowered.target.emit(list(lowered.kernels), options.opt_level, emit)
    except FatkitError as exc:
        for kernel in report["kernels"]:
            if kernel["status"] == "ok":
                kernel.update(status="error", reason=str(exc))
        return report
    suffix = "ptx" if is_nvptx_target(target) else EMIT_SUFFIX[emit]
    path = outdir / f"{module.stem}.{target.replace(':', '-')}.{suffix}"  # sm_90:wave64 → sm_90-wave64
    path.write_bytes(product)
    report["output"] = str(path)
    return report


def _dump(module: PtxModule, targets: list[str], stage: str, mma_numerics: str = "sm90") -> None:
    """Print what `stage` (or one pass) produced for the module: once for target-independent stages, else per
    target."""
    index = STAGE_NAMES.index("passes" if stage in PASS_NAMES else stage)
    for target in targets[:1] if index < STAGE_NAMES.index("lower") else targets:
        options = Options(target=target, mma_numerics=mma_numerics)
        sys.stdout.write(f"; ==== {module.stem} ({module.source}) after {stage}"
                         + (f" for {target}" if index >= STAGE_NAMES.index("lower") else "")
                         + " ====\n")
        value: Any = module.text
        try:
            for name, function in STAGES:
                value = run_passes(value, until=stage) if stage in PASS_NAMES and name == "passes" else \
                    function(value, options)
                if name == stage or (stage in PASS_NAMES and name == "passes"):
                    break
        except FatkitError as exc:
            sys.stdout.write(f"; error: {exc}\n")
            continue
        sys.stdout.write(_dump_text(stage, value))


def _dump_text(stage: str, value: Any) -> str:
    if stage == "parse":
        assert isinstance(value, ast.Module)
        return print_ptx(value)
    if stage == "passes" or stage in PASS_NAMES:
        assert isinstance(value, Prepared)
        return describe(value)
    if stage == "lower":
        assert isinstance(value, Lowered)
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
    out = console()
    if not reports:
        out.print("no PTX found", highlight=False)
        return
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("module", "target", "ok", "unsupported", "output"):
        table.add_column(col, justify="right" if col in ("ok", "unsupported") else "left", overflow="fold")
    for r in reports:
        counts = {s: sum(k["status"] == s for k in r["kernels"]) for s in ("ok", "unsupported", "error")}
        where = short_path(r["source"]) + ("" if r["container"] is None else f" c{r['container']}.e{r['entry']}")
        if r["error"] or counts["error"]:
            written = "[bold red]error[/]"
        else:
            written = Path(r["output"]).name if r["output"] else "[yellow]none[/]"
        table.add_row(where, r["target"], str(counts["ok"]), str(counts["unsupported"]), written)
    out.print(table)
    reasons = [k["reason"] for r in reports for k in r["kernels"] if k["status"] == "unsupported"]
    for reason, count in grouped_reasons(reasons):
        out.print(f"[yellow]unsupported[/] ({count} kernel{'s' if count > 1 else ''}): {reason}", highlight=False)
    errors = {r["error"] for r in reports if r["error"]} | {
        k["reason"] for r in reports for k in r["kernels"] if k["status"] == "error"}
    for error in sorted(errors):
        out.print(f"[bold red]error:[/] {error}", highlight=False)
    out.print(f"written to {outdir}", highlight=False)
