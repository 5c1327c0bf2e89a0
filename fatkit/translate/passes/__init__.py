"""The passes between parsing and lowering, run in the order listed in PASSES; each takes and returns the
`Prepared` module (see base.py), so the module can be printed after any of them.

 1. scopes       nested `{ }` scopes flattened, shadowing names made unique, `%r<N>` expanded,
                 unknown identifiers reported
 2. operands     vector `mov` operands packed/unpacked into scalar instructions, `.pred` immediates 0/1
 3. guards       `@p instr` → a guarded `bra` around the instruction (only `bra` stays guarded)
 3b. elected     a bulk copy one lane issues under elect.sync moved to where the warp rejoins, to be shared
 4. special      special registers read by one `mov` (at entry for those constant per thread)
 5. rounding     each floating-point instruction's rounding, ftz, sat with PTX's defaults (FloatMode)
 6. fp_mode      per function (and its callees): which f32 subnormal mode its instructions agree on
 7. storage      registers and local/param buffers lowering allocates
 8. conversions  registers of another size than their operand: truncations/extensions made explicit
"""

from __future__ import annotations

from typing import Callable

from fatkit.translate.passes import (
    conversions, elected, fp_mode, guards, operands, rounding, scopes, special, storage,
)
from fatkit.translate.passes.base import Buffer, FloatMode, FpMode, PassError, Prepared, Storage
from fatkit.translate.ptx import ast
from fatkit.translate.ptx.printer import print_ptx

PASSES: tuple[tuple[str, Callable[[Prepared], Prepared]], ...] = (
    ("scopes", scopes.run),
    ("operands", operands.run),
    ("guards", guards.run),
    ("elected", elected.run),
    ("special", special.run),
    ("rounding", rounding.run),
    ("fp_mode", fp_mode.run),
    ("storage", storage.run),
    ("conversions", conversions.run),
)
PASS_NAMES = tuple(name for name, _ in PASSES)


def run_passes(module: ast.Module, until: str | None = None) -> Prepared:
    """The module after every pass, or after the pass named `until`."""
    prepared = Prepared(module)
    for name, run in PASSES:
        prepared = run(prepared)
        if name == until:
            break
    return prepared


__all__ = ["PASSES", "PASS_NAMES", "Buffer", "FloatMode", "FpMode", "PassError", "Prepared", "Storage",
           "describe", "run_passes"]


def describe(prepared: Prepared) -> str:
    """The prepared module as PTX text, then what the passes found, as `//` comments: failures, each
    function's FP mode and storage, the float mode of each floating-point instruction form."""
    lines = [print_ptx(prepared.module).rstrip("\n"), ""]
    for name, error in prepared.failures.items():
        lines.append(f"// {name}: not prepared: {error}")
    for name, mode in prepared.fp_modes.items():
        lines.append(f"// {name}: f32 instructions {mode.ftz} ftz, {mode.ieee} ieee; "
                     f"uniform mode with callees: {mode.uniform or 'none'}")
    for name, declared in prepared.storage.items():
        buffers = ", ".join(f".{b.space} {b.name}[{b.size}] align {b.align}" for b in declared.buffers)
        lines.append(f"// {name}: {len(declared.registers)} registers" + (f"; {buffers}" if buffers else ""))
    for (opcode, modifiers), mode in sorted(prepared.float_modes.items()):
        lines.append(f"// {'.'.join((opcode, *modifiers))}: {mode}")
    return "\n".join(lines) + "\n"
