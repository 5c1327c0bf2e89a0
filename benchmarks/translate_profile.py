"""Where fatkit's translation of one PTX module spends its time, stage by stage, in one process and one job.

    python benchmarks/translate_profile.py [--target gfx942] [--top 12] [--python-profile] [--python-only] PTX...

For each PTX file: parse, passes and lowering (Python; `--python-profile` adds cProfile's functions with the
most time of their own during lowering), then per codegen group (`grouped`, as the codegen children
get them) the native side, each timed on its own: IR text → LLVM modules (parse_assembly), linking a group's
modules, verification, the middle-end (the new pass manager's O`opt_level` pipeline, with its passes' own
times), and code generation (`emit_object`: LLVM's codegen passes, instruction selection among them, with
their times), then ld.lld and the validation of the code object. CPU seconds of this process, which other
work on the machine distorts less than wall time (ld.lld's are its wall seconds). With `FATKIT_LIBLLVM` set
(fatkit/translate/targets/libllvm.py) the native side is that library's, timed step by step.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llvmlite import binding as llvm  # noqa: E402

from fatkit.translate.pipeline import Options, run, run_from  # noqa: E402
from fatkit.translate.targets.amdgpu import grouped, link, with_one_metadata_note  # noqa: E402
from fatkit.translate.targets import libllvm  # noqa: E402
from fatkit.translate.targets.amdgpu_child import LOOP_VECTORIZATION, TRIPLE, target_machine  # noqa: E402
from fatkit.translate.targets.base import middle_end  # noqa: E402

# a row of LLVM's timing report: user, system, user+system, wall (each "seconds (percent)"), name
_SECONDS = r"[\d.]+ \(\s*[\d.]+%\)\s+"
_TIMING_ROW = re.compile(rf"^\s*{_SECONDS}{_SECONDS}([\d.]+) \(\s*[\d.]+%\)\s+{_SECONDS}(.+?)\s*$")


def report_passes(report: str, into: dict[str, float]) -> None:
    """Add the CPU seconds (user + system) of each pass, summed over its instances, in LLVM's timing `report`
    to `into`."""
    for line in report.splitlines():
        row = _TIMING_ROW.match(line)
        if row and row.group(2) != "Total":
            into[re.sub(r" #\d+$", "", row.group(2))] += float(row.group(1))


def profile(path: Path, target: str, top: int, python_profile: bool, python_only: bool) -> None:
    text = path.read_text()
    options = Options(target=target, jobs=1)
    seconds: dict[str, float] = {}
    clock = [time.process_time()]  # when the stage that ends next began, in CPU seconds

    def timed(name: str, value, elapsed: float) -> None:
        seconds[name] = time.process_time() - clock[0]
        clock[0] = time.process_time()

    prepared = run(text, options, until="passes", on_stage=timed)
    profiler = cProfile.Profile() if python_profile else None
    if profiler:
        profiler.enable()
    clock[0] = time.process_time()
    lowered = run_from("lower", prepared, options, until="lower", on_stage=timed)
    if profiler:
        profiler.disable()
    kernels = list(lowered.kernels)
    if python_only:
        ir_bytes = sum(len(k.llvm_ir) for k in kernels)
        print(f"{path.name}: " + ", ".join(f"{name} {seconds[name]:.2f}" for name in ("parse", "passes", "lower"))
              + f" s; {ir_bytes / 1000:.0f} KB of LLVM IR")
        return
    library = libllvm.library_path()
    if library is not None:
        native_profile(path, text, kernels, lowered.target.processor, options.opt_level, library, seconds)
        return
    machine = target_machine(lowered.target.processor, options.opt_level)
    middle: dict[str, float] = defaultdict(float)
    codegen: dict[str, float] = defaultdict(float)
    native: dict[str, float] = defaultdict(float)
    objects = []
    for group in grouped(kernels):
        context = llvm.create_context()
        clock = time.process_time()
        modules = [llvm.parse_assembly(k.llvm_ir, context) for k in group]
        native["IR text → LLVM (parse_assembly)"] += time.process_time() - clock
        clock = time.process_time()
        module = modules[0]
        for other in modules[1:]:
            module.link_in(other)
        native["link the group's modules"] += time.process_time() - clock
        clock = time.process_time()
        module.verify()
        native["verify"] += time.process_time() - clock
        clock = time.process_time()
        builder = middle_end(module, machine, options.opt_level, timing=True, loop_vectorization=LOOP_VECTORIZATION)
        native[f"middle-end (O{options.opt_level})"] += time.process_time() - clock
        report_passes(builder.finish_pass_timing(), middle)
        llvm.set_time_passes(True)  # (finishing the middle-end's timing turned LLVM's timers off)
        clock = time.process_time()
        if any("asm sideeffect" in k.llvm_ir for k in group):
            machine.emit_assembly(module)  # such groups are assembled by clang's assembler afterwards
            native["codegen (emit_assembly; the assembler not timed)"] += time.process_time() - clock
        else:
            objects.append(machine.emit_object(module))
            native["codegen (emit_object)"] += time.process_time() - clock
        report_passes(llvm.report_and_reset_timings(), codegen)
    llvm.set_time_passes(False)
    link_and_print_stages(path, text, kernels, objects, target, seconds, native)
    for title, passes in (("middle-end", middle), ("codegen", codegen)):
        spent = sum(passes.values())
        print(f"{title} passes with the most time (of {spent:.2f} s timed): " + ", ".join(
            f"{name} {value:.2f}" for name, value in sorted(passes.items(), key=lambda p: -p[1])[:top]) + "\n")
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
        print("```\n" + "\n".join(line for line in out.getvalue().splitlines()
                                   if line.strip() and not line.startswith("   Ordered")) + "\n```\n")


def native_profile(path: Path, text: str, kernels: list, processor: str, opt_level: int, library: str,
                   seconds: dict[str, float]) -> None:
    """The native side through the libLLVM `FATKIT_LIBLLVM` names (targets/libllvm.py), as the codegen children
    then run it: its steps' CPU seconds (LLVM's pass timers are its own, not llvmlite's, so none are read)."""
    compiler = libllvm.LibraryCompiler(library, TRIPLE, processor, opt_level, LOOP_VECTORIZATION)
    native: dict[str, float] = {}
    objects = []
    for group in grouped(kernels):
        kind = "asm" if any("asm sideeffect" in k.llvm_ir for k in group) else "obj"
        product = compiler.compile([k.llvm_ir for k in group], kind, native)
        if kind == "obj":
            objects.append(product)
    link_and_print_stages(path, text, kernels, objects, f"{processor}, LLVM {libllvm.version(library)} from {library}",
                          seconds, native)


def link_and_print_stages(path: Path, text: str, kernels: list, objects: list, where: str,
                          seconds: dict[str, float], native: dict[str, float]) -> None:
    """Link the objects (timed as `ld.lld (wall)`), then print the module's line and the table of stages."""
    clock = time.perf_counter()
    if objects:
        link(objects if len(objects) == 1 else with_one_metadata_note(objects))
    native["ld.lld (wall)"] = time.perf_counter() - clock
    ir_bytes = sum(len(k.llvm_ir) for k in kernels)
    print(f"## {path.name}: {len(text) / 1000:.0f} KB of PTX, {len(kernels)} kernels, "
          f"{ir_bytes / 1000:.0f} KB of LLVM IR ({ir_bytes / len(text):.2f} per PTX byte), "
          f"{len(grouped(kernels))} codegen groups, {where}\n")
    rows = [(f"{name} (Python)", seconds[name]) for name in ("parse", "passes", "lower")] + list(native.items())
    total = sum(s for _, s in rows)
    print("| stage | s | share |\n|---|---|---|")
    for name, value in rows:
        print(f"| {name} | {value:.2f} | {100 * value / total:.0f} % |")
    print(f"| total | {total:.2f} | |\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--target", default="gfx942")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--python-profile", action="store_true", help="cProfile of the lowering stage")
    parser.add_argument("--python-only", action="store_true",
                        help="only the Python stages: their CPU seconds and the IR's size, on one line")
    args = parser.parse_args()
    for path in args.paths:
        profile(path, args.target, args.top, args.python_profile, args.python_only)


if __name__ == "__main__":
    main()
