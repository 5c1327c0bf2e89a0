"""The translation pipeline: `parse → passes → lower → codegen → validate`, each a named stage function.

`translate(text, options)` runs them all. A kernel that uses PTX outside what lowering supports is
reported in `Translation.kernels` with status "unsupported" and its reason (instruction, PTX line) and
left out of the product; the module's other kernels still translate. Nothing is dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from fatkit.errors import FatkitError, UsageError
from fatkit.translate.lower import Unsupported, lower_kernel
from fatkit.translate.passes import PassError, Prepared, run_passes
from fatkit.translate.ptx import ast, parse_ptx
from fatkit.translate.targets import Target, target_named
from fatkit.translate.targets.base import LoweredKernel


@dataclass(frozen=True)
class Options:
    """What a translation is for; equal options give equal output (its hash is a cache key)."""

    target: str = "gfx942"  # "host" or an AMD processor
    opt_level: int = 2

    def __post_init__(self) -> None:
        if self.opt_level not in (0, 1, 2, 3):
            raise UsageError(f"opt level must be 0–3, not {self.opt_level}")


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
    """Lower each kernel on its own into an LLVM module; unsupported ones are reported, not lowered."""
    target = target_named(options.target)
    kernels, reports = [], []
    functions = {f.name: f for f in prepared.module.functions if f.kind == "func" and f.body is not None}
    for kernel in prepared.module.kernels:
        try:
            failure = prepared.failure(kernel.name)
            if failure is not None:
                raise failure
            registers = prepared.storage[kernel.name].registers
            kernels.append(lower_kernel(kernel, registers, target, prepared.module.variables, functions, prepared))
        except (Unsupported, PassError) as unsupported:
            reports.append(KernelReport(kernel.name, "unsupported", str(unsupported), unsupported.line))
        else:
            reports.append(KernelReport(kernel.name, "ok"))
    return Lowered(target, tuple(kernels), tuple(reports))


def codegen(lowered: Lowered, options: Options) -> tuple[Lowered, Any]:
    if not lowered.kernels:
        raise FatkitError("no kernel of the module could be lowered: "
                          + "; ".join(r.reason or r.name for r in lowered.reports) if lowered.reports
                          else "the module has no kernels")
    return lowered, lowered.target.codegen(list(lowered.kernels), options.opt_level)


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
