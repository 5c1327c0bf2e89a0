"""The translation pipeline: `parse → passes → lower → codegen → validate`, each a named stage function.

`run(text, options)` is the one way in: every command and benchmark translates through it, `until` stops
after a stage (or one pass of the passes stage: `--dump-after`), `on_stage` sees each stage's result.
A kernel that uses PTX outside what lowering supports is reported in `Translation.kernels` with status
"unsupported" and its reason (instruction, PTX line) and left out of the product; the module's other
kernels still translate. Nothing is dropped silently.
"""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Hashable, Iterator
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from multiprocessing import get_context
from typing import Any, Callable, Literal

from fatkit.errors import FatkitError, UsageError
from fatkit.translate.lower import Unsupported, lower_kernel
from fatkit.translate.passes import PASS_NAMES, PassError, Prepared, run_passes
from fatkit.translate.ptx import ast, parse_ptx
from fatkit.translate.targets import target_named
from fatkit.translate.targets.base import Codegen, LoweredKernel, Target
from fatkit.translate.targets.ids import TargetId

# Field metadata: `{CHANGES_CODE: False}` marks an Options field that cannot change the output (the cache
# key leaves it out); every other field is part of the key (fatkit.cache.key.options_key).
CHANGES_CODE = "changes_code"
EMIT_KINDS = ("hsaco", "obj", "asm", "llvm")  # the linked, validated product; or what a target can emit
Status = Literal["ok", "unsupported"]


MMA_NUMERICS = ("sm90", "exact", "native")  # what `Options.mma_numerics` takes, besides DEFAULT_MMA_NUMERICS
DEFAULT_MMA_NUMERICS = "default"  # the target's choice: `Options.mma_model`


@dataclass(frozen=True)
class Options:
    """What a translation is for; equal options give equal output. The cache key is derived from every field
    (fatkit.cache.key.options_key), so a new field needs no edit there."""

    # "host", an AMD target id or an NVIDIA sm_XX; a spelling is parsed (TargetId.parse). AMD code is compiled
    # with xnack and sramecc unset (the bare processor), which loads whatever the device's settings are.
    target: TargetId = TargetId("amd", "gfx942")
    opt_level: int = 2
    # "hsaco": the target's product (a linked code object; PTX for sm_XX; a JIT program for host), validated;
    # "obj" / "asm" / "llvm": what the target emits before linking, not validated
    emit: str = "hsaco"
    # processes lowering kernels and compiling groups of them at once; the output is the same for any value
    jobs: int = field(default=1, compare=False, metadata={CHANGES_CODE: False})
    # the arithmetic of mma/mma.sp/wmma (docs/numerics.md): "sm90" reproduces the H100/H200 tensor cores bit for
    # bit, "exact" sums exactly and rounds once, "native" runs the forms it can on the AMD target's MFMA/WMMA
    # (their rounding, within the bound docs/numerics.md states) and the rest as "sm90". "default": the
    # target's (`mma_model`), left unresolved so that commands that set the target afterwards (a copy per
    # target) and the runtime's lookups agree on the cache key
    mma_numerics: str = DEFAULT_MMA_NUMERICS

    def __post_init__(self) -> None:
        if isinstance(self.target, str):
            object.__setattr__(self, "target", TargetId.parse(self.target))
        if self.opt_level not in (0, 1, 2, 3):
            raise UsageError(f"opt level must be 0–3, not {self.opt_level}")
        if self.emit not in EMIT_KINDS:
            raise UsageError(f"emit one of {', '.join(EMIT_KINDS)}, not {self.emit!r}")
        if self.jobs < 1:
            raise UsageError(f"jobs must be at least 1, not {self.jobs}")
        if self.mma_numerics != DEFAULT_MMA_NUMERICS and self.mma_numerics not in MMA_NUMERICS:
            raise UsageError(f"mma numerics must be one of {', '.join(MMA_NUMERICS)}, not {self.mma_numerics!r}")


    @property
    def mma_model(self) -> str:
        """The mma arithmetic this translation uses: `mma_numerics`, or for "default" "native" on a target
        with matrix instructions (gfx90a, gfx942, gfx950, gfx11, gfx12: TargetId.matrix_cores) and "sm90"
        elsewhere."""
        if self.mma_numerics != DEFAULT_MMA_NUMERICS:
            return self.mma_numerics
        return "native" if self.target.matrix_cores else "sm90"


@dataclass(frozen=True)
class KernelReport:
    name: str
    status: Status
    reason: str | None = None
    line: int | None = None  # the PTX line of the unsupported instruction

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "reason": self.reason, "line": self.line}


@dataclass(frozen=True)
class Lowered:
    target: Target
    kernels: tuple[LoweredKernel, ...]
    reports: tuple[KernelReport, ...]


@dataclass(frozen=True)
class Translation:
    """The result: `product` (code object bytes for amdgpu, a HostProgram for host) and a report per kernel.

    `validated` is what the validate stage returned (the re-read CodeObject for amdgpu).
    """

    options: Options
    product: Any
    validated: Any
    kernels: tuple[KernelReport, ...]


def parse(text: str, options: Options) -> ast.Module:
    return parse_ptx(text)


def passes(module: ast.Module, options: Options, until: str | None = None) -> Prepared:
    """The normalisation passes of fatkit.translate.passes, in order (PASSES), or up to the pass `until`."""
    return run_passes(module, until=until)


# PTX statements of a module's kernels below which they are lowered in this process whatever `jobs` says: at
# ~50 µs a statement, what a second process would save there is less than starting the processes costs
_FORKED_STATEMENTS = 2000


def lower(prepared: Prepared, options: Options) -> Lowered:
    """Lower each kernel on its own into an LLVM module; unsupported ones are reported, not lowered.

    With `options.jobs` > 1 the kernels of a module that is not small are lowered in forked processes
    (lowering is Python, bound by the GIL), each inheriting the prepared module rather than receiving a
    pickled copy."""
    return _lowered(prepared, options, target_named(options.target), None)


def _lowered(prepared: Prepared, options: Options, target: Target, started: Codegen | None) -> Lowered:
    """`lower` for `target`, the largest kernels first; each codegen group (`Target.codegen_groups`) handed
    to `started` as soon as its last kernel is lowered. A kernel already lowered from `prepared` for a target
    of the same `Target.lowering_key` and mma model is taken as it is (a run for gfx1100 and gfx1101 lowers
    once); one that failed to lower is lowered again, its report naming this target."""
    kernels = prepared.module.kernels
    count = len(kernels)
    functions = {f.name: f for f in prepared.module.functions if f.kind == "func" and f.body is not None}
    sizes = [sum(1 for _ in kernel.statements()) for kernel in kernels]
    groups = target.codegen_groups(sizes)
    waiting = Counter(groups)  # kernels not lowered yet, by group
    outcomes: list[tuple[LoweredKernel | None, KernelReport]] = [(None, KernelReport(k.name, "ok")) for k in kernels]
    key = target.lowering_key()
    shared = _shared_lowerings(prepared).setdefault((key, options.mma_model), {}) if key is not None else {}
    # the largest group first, and in a group the largest kernel first: a large kernel started last would
    # leave the other processes idle, the longest codegen starts earliest, and each group is ready (all its
    # kernels lowered) as early as it can be
    group_sizes = Counter[int]()
    for index, size in enumerate(sizes):
        group_sizes[groups[index]] += size
    order = sorted(range(count), key=lambda i: (-group_sizes[groups[i]], groups[i], -sizes[i]))

    def done(index: int, outcome: tuple[LoweredKernel | None, KernelReport]) -> None:
        kernel, report = outcome
        if kernel is not None:
            shared[index] = kernel
        outcomes[index] = (replace(kernel, group=groups[index]) if kernel is not None else None), report
        waiting[groups[index]] -= 1
        if started is not None and not waiting[groups[index]]:
            started.add([k for i, (k, _) in enumerate(outcomes) if groups[i] == groups[index] and k is not None])

    for index in order:
        if index in shared:
            done(index, (shared[index], KernelReport(kernels[index].name, "ok")))
    order = [index for index in order if index not in shared]
    if options.jobs > 1 and len(order) > 1 and sum(sizes[i] for i in order) >= _FORKED_STATEMENTS:
        with ProcessPoolExecutor(min(options.jobs, len(order)), mp_context=get_context("fork"),
                                 initializer=_adopt, initargs=(prepared, target, functions,
                                                               options.mma_model)) as pool:
            futures = {pool.submit(_lower_adopted, index): index for index in order}
            for future in as_completed(futures):
                done(futures[future], future.result())
    else:
        for index in order:
            done(index, _lower_one(prepared, target, functions, options.mma_model, index))
    return Lowered(target, tuple(kernel for kernel, _ in outcomes if kernel is not None),
                   tuple(report for _, report in outcomes))


# The kernels lowered from each live Prepared (by id), by (lowering key, mma model) and kernel index: what
# the targets of one run share. An entry goes when its Prepared does.
_SHARED: dict[int, dict[tuple[Hashable, str], dict[int, LoweredKernel]]] = {}


def _shared_lowerings(prepared: Prepared) -> dict[tuple[Hashable, str], dict[int, LoweredKernel]]:
    shared = _SHARED.get(id(prepared))
    if shared is None:
        shared = _SHARED[id(prepared)] = {}
        weakref.finalize(prepared, _SHARED.pop, id(prepared), None)
    return shared


def _lower_one(prepared: Prepared, target: Target, functions: dict[str, ast.Function], mma_numerics: str,
               index: int) -> tuple[LoweredKernel | None, KernelReport]:
    kernel = prepared.module.kernels[index]
    try:
        # (where no function failed there is nothing to look for: the look walks every operand of the kernel)
        failure = prepared.failure(kernel.name) if prepared.failures else None
        if failure is not None:
            raise failure
        registers = prepared.storage[kernel.name].registers
        with _collected_after():
            lowered = lower_kernel(kernel, registers, target, prepared.module.variables, functions, prepared,
                                   mma_numerics)
    except (Unsupported, PassError) as unsupported:
        return None, KernelReport(kernel.name, "unsupported", str(unsupported), unsupported.line)
    return lowered, KernelReport(kernel.name, "ok")


_adopted: tuple[Prepared, Target, dict[str, ast.Function], str] | None = None  # what a forked process lowers


def _adopt(prepared: Prepared, target: Target, functions: dict[str, ast.Function], mma_numerics: str) -> None:
    global _adopted
    _adopted = (prepared, target, functions, mma_numerics)


def _lower_adopted(index: int) -> tuple[LoweredKernel | None, KernelReport]:
    assert _adopted is not None
    return _lower_one(*_adopted, index)


def codegen(lowered: Lowered, options: Options, started: Codegen | None = None) -> tuple[Lowered, Any]:
    """The linked product (`emit` "hsaco"), or what the target emits of the kernels (obj, asm, llvm). A kernel
    LLVM fails on while linking a product (the amdgpu target isolates it, targets/amdgpu.py) is reported
    "unsupported" with LLVM's message and is not in the product; the Lowered returned holds the kernels that are.
    `started`: the codegen that lowering handed the groups to as they were lowered (`_run_from`)."""
    if not lowered.kernels:
        raise FatkitError("no kernel of the module could be lowered: "
                          + "; ".join(r.reason or r.name for r in lowered.reports) if lowered.reports
                          else "the module has no kernels")
    kernels = list(lowered.kernels)
    if options.emit != "hsaco":
        return lowered, lowered.target.emit(kernels, options.opt_level, options.emit)
    compiled = (started.finish(kernels) if started is not None
                else lowered.target.codegen(kernels, options.opt_level, options.jobs))
    if not compiled.failed:
        return lowered, compiled.product
    kept = tuple(k for k in lowered.kernels if k.signature.name not in compiled.failed)
    reports = tuple(KernelReport(r.name, "unsupported", f"LLVM codegen failed: {compiled.failed[r.name]}")
                    if r.name in compiled.failed else r for r in lowered.reports)
    return Lowered(lowered.target, kept, reports), compiled.product


def validate(generated: tuple[Lowered, Any], options: Options) -> Translation:
    """Re-read the product and check it against the kernels; emitted intermediates are passed through."""
    lowered, product = generated
    validated = lowered.target.validate(product, list(lowered.kernels)) if options.emit == "hsaco" else None
    return Translation(options, product, validated, lowered.reports)


STAGES: tuple[tuple[str, Callable[[Any, Options], Any]], ...] = (
    ("parse", parse),
    ("passes", passes),
    ("lower", lower),
    ("codegen", codegen),
    ("validate", validate),
)


STAGE_NAMES = tuple(name for name, _ in STAGES)
DUMP_POINTS = STAGE_NAMES + PASS_NAMES  # where a run may stop: a stage, or one pass of the passes stage
OnStage = Callable[[str, Any, float], None]  # (stage name, its result, seconds it took)


def run(text: str, options: Options = Options(), until: str | None = None,
        on_stage: OnStage | None = None) -> Any:
    """PTX text through the stages in order: the Translation, or with `until` the result of that stage (a
    pass name stops the passes stage after that pass). FatkitError for what does not translate at all."""
    if until is not None and until not in DUMP_POINTS:
        raise UsageError(f"no stage or pass {until!r}: one of {', '.join(DUMP_POINTS)}")
    return _run_from(0, text, options, until, on_stage)


def run_from(stage: str, value: Any, options: Options, until: str | None = None,
             on_stage: OnStage | None = None) -> Any:
    """The stages from `stage` on, given what the stage before it returned. Parse and the passes do not depend
    on the target: a run for several targets makes the Prepared once (`run(text, options, until="passes")`)
    and lowers it for each (`run_from("lower", prepared, options_for_target, ...)`)."""
    if stage not in STAGE_NAMES:
        raise UsageError(f"no stage {stage!r}: one of {', '.join(STAGE_NAMES)}")
    if until is not None and until not in STAGE_NAMES[STAGE_NAMES.index(stage):]:
        raise UsageError(f"a run from {stage} cannot stop at {until!r}")
    return _run_from(STAGE_NAMES.index(stage), value, options, until, on_stage)


def finish(lowered: Lowered, options: Options, on_stage: OnStage | None = None) -> Translation:
    """The rest of a run stopped after "lower" (precompile lowers several PTX candidates, then finishes one)."""
    result: Translation = _run_from(STAGE_NAMES.index("codegen"), lowered, options, None, on_stage)
    return result


@contextmanager
def _collected_after() -> Iterator[None]:
    """Python's cycle collector held off while the block runs, and its young objects collected after.

    Parsing, the passes and lowering build large object graphs that stay alive until the stage ends (the AST;
    a kernel's llvmlite module). Each collection the collector starts meanwhile traverses all of them again
    and frees nothing: that was 40 % of lowering's time on the large corpus modules. One collection at the
    end frees a kernel's module (its cycles: parents and uses) before the next is built."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(0)


def _run_from(first: int, value: Any, options: Options, until: str | None, on_stage: OnStage | None) -> Any:
    """The stages from the `first` on. A run through lowering and codegen to the product starts a group's codegen
    while the module's other kernels lower (`Target.start_codegen`): the codegen stage's seconds are then
    those after lowering ended."""
    one_pass = until if until in PASS_NAMES else None
    with ExitStack() as stack:
        started: Codegen | None = None
        for name, stage in STAGES[first:]:
            start = time.perf_counter()
            if name in ("parse", "passes"):
                with _collected_after():
                    value = passes(value, options, one_pass) if name == "passes" else stage(value, options)
            elif name == "lower" and until != "lower" and options.emit == "hsaco":
                target = target_named(options.target)
                started = stack.enter_context(target.start_codegen(options.opt_level, options.jobs))
                value = _lowered(value, options, target, started)
            elif name == "codegen":
                value = codegen(value, options, started)
            else:
                value = stage(value, options)
            if on_stage is not None:
                on_stage(name, value, time.perf_counter() - start)
            if name == until or (one_pass and name == "passes"):
                break
    return value


def translate(text: str, options: Options = Options()) -> Translation:
    """PTX text → the target's product: `run` without stopping."""
    result: Translation = run(text, options)
    return result
