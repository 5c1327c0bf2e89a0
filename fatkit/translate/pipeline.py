"""The translation pipeline: `parse → passes → lower → codegen → validate`, each a named stage function.

`translate(text, options)` runs them all. A kernel that uses PTX outside what lowering supports is
reported in `Translation.kernels` with status "unsupported" and its reason (instruction, PTX line) and
left out of the product; the module's other kernels still translate. Nothing is dropped silently.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any, Callable

from fatkit.errors import FatkitError, UsageError
from fatkit.translate.lower import Unsupported, lower_kernel
from fatkit.translate.passes import PassError, Prepared, run_passes
from fatkit.translate.ptx import ast, parse_ptx
from fatkit.translate.targets import Target, target_named
from fatkit.translate.targets.base import LoweredKernel


MMA_NUMERICS = ("sm90", "exact")  # what `Options.mma_numerics` takes ("native" is reserved)


@dataclass(frozen=True)
class Options:
    """What a translation is for; equal options give equal output (its hash is a cache key)."""

    target: str = "gfx942"  # "host" or an AMD processor
    opt_level: int = 2
    # processes lowering kernels and compiling groups of them at once; the output is the same for any value
    jobs: int = field(default=1, compare=False)
    # the arithmetic of mma/mma.sp/wmma (docs/numerics.md): "sm90" reproduces the H100/H200 tensor cores bit for
    # bit, "exact" sums exactly and rounds once; "native" (AMD matrix instructions) is reserved
    mma_numerics: str = "sm90"

    def __post_init__(self) -> None:
        if self.opt_level not in (0, 1, 2, 3):
            raise UsageError(f"opt level must be 0–3, not {self.opt_level}")
        if self.jobs < 1:
            raise UsageError(f"jobs must be at least 1, not {self.jobs}")
        if self.mma_numerics == "native":
            raise UsageError("mma numerics 'native' (AMD matrix instructions) is not available yet: "
                             "use 'sm90' or 'exact'")
        if self.mma_numerics not in MMA_NUMERICS:
            raise UsageError(f"mma numerics must be one of {', '.join(MMA_NUMERICS)}, not {self.mma_numerics!r}")


@dataclass(frozen=True)
class KernelReport:
    name: str
    status: str  # ok | unsupported
    reason: str | None = None
    line: int | None = None  # the PTX line of the unsupported instruction


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


def passes(module: ast.Module, options: Options) -> Prepared:
    """The normalisation passes of fatkit.translate.passes, in order (PASSES)."""
    return run_passes(module)


def lower(prepared: Prepared, options: Options) -> Lowered:
    """Lower each kernel on its own into an LLVM module; unsupported ones are reported, not lowered.

    With `options.jobs` > 1 the kernels are lowered in forked processes (lowering is Python, bound by the
    GIL), each inheriting the prepared module rather than receiving a pickled copy."""
    target = target_named(options.target)
    count = len(prepared.module.kernels)
    functions = {f.name: f for f in prepared.module.functions if f.kind == "func" and f.body is not None}
    if options.jobs > 1 and count > 1:
        with ProcessPoolExecutor(min(options.jobs, count), mp_context=get_context("fork"),
                                 initializer=_adopt, initargs=(prepared, target, functions,
                                                               options.mma_numerics)) as pool:
            outcomes = list(pool.map(_lower_adopted, range(count)))
    else:
        outcomes = [_lower_one(prepared, target, functions, options.mma_numerics, index) for index in range(count)]
    kernels = tuple(kernel for kernel, _ in outcomes if kernel is not None)
    return Lowered(target, kernels, tuple(report for _, report in outcomes))


def _lower_one(prepared: Prepared, target: Target, functions: dict[str, ast.Function], mma_numerics: str,
               index: int) -> tuple[LoweredKernel | None, KernelReport]:
    kernel = prepared.module.kernels[index]
    try:
        failure = prepared.failure(kernel.name)
        if failure is not None:
            raise failure
        registers = prepared.storage[kernel.name].registers
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


def codegen(lowered: Lowered, options: Options) -> tuple[Lowered, Any]:
    if not lowered.kernels:
        raise FatkitError("no kernel of the module could be lowered: "
                          + "; ".join(r.reason or r.name for r in lowered.reports) if lowered.reports
                          else "the module has no kernels")
    return lowered, lowered.target.codegen(list(lowered.kernels), options.opt_level, options.jobs)


def validate(generated: tuple[Lowered, Any], options: Options) -> Translation:
    lowered, product = generated
    validated = lowered.target.validate(product, list(lowered.kernels))
    return Translation(options, product, validated, lowered.reports)


STAGES: tuple[tuple[str, Callable[[Any, Options], Any]], ...] = (
    ("parse", parse),
    ("passes", passes),
    ("lower", lower),
    ("codegen", codegen),
    ("validate", validate),
)


def translate(text: str, options: Options = Options()) -> Translation:
    """PTX text → the target's product, through every stage in order."""
    value: Any = text
    for _, stage in STAGES:
        value = stage(value, options)
    return value
