"""Pass 6, FP-mode tracking: per function, whether its f32 arithmetic flushes subnormals (.ftz) or keeps them.

AMD GPUs set the f32 denormal mode per function (the "denormal-fp-math-f32" attribute), not per
instruction, so where a function — with every function it calls, across its whole call graph — uses one
mode only, the target can set that mode once; where modes are mixed, instructions have to flush or keep
subnormals themselves. The result is recorded in `Prepared.fp_modes` (FpMode), from pass 5's FloatModes;
instructions whose result no subnormal mode changes count for neither. Lowering runs a kernel whose mode
is uniformly "ftz" with the hardware flushing (lower/floating.py).
"""

from __future__ import annotations

import dataclasses

from fatkit.translate.passes.base import FpMode, Prepared, bodies, callees
from fatkit.translate.ptx import ast


def _reads_f32_mode(ins: ast.Instruction) -> bool:
    """f32 instructions, and bf16 ones: lowering computes those in f32, where a bf16 subnormal (bf16 has f32's
    exponent range) is an f32 one."""
    return any(m in ("f32", "bf16", "bf16x2") for m in ins.modifiers)


_INTEGERS = {"s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"}


def _mode_free(ins: ast.Instruction) -> bool:
    """f32 instructions whose result no subnormal mode changes: testp and copysign read and move bits; a
    conversion to f32 from an integer (never subnormal), from f16 (whose subnormals are normal in f32) or
    from bf16 (a shift of the bits); and one from f32 into a narrower float format, which lower/convert.py
    rounds on the bits (into f16 to nearest by v_cvt_f16_f32, where an f32 subnormal gives a zero of its
    sign flushed or not)."""
    if ins.opcode in ("testp", "copysign"):
        return True
    types = [m for m in ins.modifiers if m in ast.TYPES]
    if ins.opcode != "cvt" or len(types) != 2:
        return False
    dst, src = types
    if dst == "f32":
        return src in ("f16", "bf16") or src in _INTEGERS
    return src == "f32" and dst not in ("f32", "f64") and dst not in _INTEGERS


def instruction_mode(prepared: Prepared, ins: ast.Instruction) -> str | None:
    """"ftz" or "ieee": how an instruction that the f32 subnormal mode concerns treats subnormals (after pass
    5); None for one it does not concern."""
    mode = prepared.float_mode(ins)
    if mode is None or not _reads_f32_mode(ins) or _mode_free(ins):
        return None
    return "ftz" if mode.ftz else "ieee"


def run(prepared: Prepared) -> Prepared:
    functions = {f.name: f for f in bodies(prepared)}
    own: dict[str, tuple[int, int]] = {}
    for name, function in functions.items():
        ftz = ieee = 0
        for ins in function.instructions():
            mode = instruction_mode(prepared, ins)
            ftz, ieee = ftz + (mode == "ftz"), ieee + (mode == "ieee")
        own[name] = ftz, ieee
    modes = dict(prepared.fp_modes)
    for name in functions:
        reached, pending, used = {name}, [name], set()
        while pending:
            current = pending.pop()
            ftz, ieee = own[current]
            used |= {"ftz"} if ftz else set()
            used |= {"ieee"} if ieee else set()
            for called in callees(functions[current]) & functions.keys() - reached:
                reached.add(called)
                pending.append(called)
        modes[name] = FpMode(*own[name], uniform=used.pop() if len(used) == 1 else None)
    return dataclasses.replace(prepared, fp_modes=modes)
