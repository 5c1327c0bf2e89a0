"""Pass 5, rounding: a `FloatMode` for every floating-point instruction, PTX's defaults written out.

The rules, from the PTX ISA:
- add/sub/mul without a rounding modifier round to nearest even (.rn) and may be contracted into fma;
  written with one they may not.
- fma needs a rounding modifier; so do mad (.f32 from sm_20 on, .f64 always) and, from PTX 1.4 on, div,
  rcp and sqrt (.rn/.rz/.rm/.rp, or .approx, or div's .full). PTX 1.0–1.3 modules default
  div/rcp/sqrt.f32 to .approx.ftz and .f64 to .rn.
- sin, cos, lg2, ex2, rsqrt and tanh are always approximations (.approx, implied before PTX 1.4).
- cvt needs a floating-point rounding (.rn …) for integer → float and narrowing float → float, an integer
  rounding (.rni …) for float → integer; widening float → float is exact.
- .ftz applies to .f32 (and half precision); .f64 keeps subnormals. On sm_1x targets every .f32
  arithmetic instruction flushes.
- atom/red .add.f32 round to nearest even and flush subnormals; .f16/.bf16 adds do with `.noftz`.
Instructions that only compare, select or move (setp, min, max, abs, neg …) get rounding None.
"""

from __future__ import annotations

import dataclasses

from fatkit.translate.passes.base import FloatMode, Prepared, bodies, fail
from fatkit.translate.ptx import ast

_IEEE = ("rn", "rz", "rm", "rp")
_INTEGRAL = ("rni", "rzi", "rmi", "rpi")
_ROUNDINGS = (*_IEEE, *_INTEGRAL, "rna", "rs")
_CONTRACTIBLE = {"add", "sub", "mul"}
_APPROXIMATE = {"sin", "cos", "lg2", "ex2", "rsqrt", "tanh"}
_ROUNDING_REQUIRED = {"fma", "mad", "div", "rcp", "sqrt"}
_UNROUNDED = {"setp", "set", "min", "max", "abs", "neg", "testp", "copysign", "fma.relu"}
# Floating-point formats: f16 … f64, bf16, tf32 and the fp8/fp6/fp4 ones (e4m3, e2m1x2, ue8m0 …).
_FLOAT_TYPES = {t for t in ast.TYPE_SIZES if t[0] in "fe" or t.startswith(("bf", "tf", "ue"))}


def run(prepared: Prepared) -> Prepared:
    modes = dict(prepared.float_modes)
    failures = dict(prepared.failures)
    version = prepared.module.version or (9, 0)
    arch = prepared.module.arch or "sm_90"
    for function in bodies(prepared):
        try:
            for ins in function.instructions():
                if (ins.opcode, ins.modifiers) not in modes:
                    mode = float_mode(ins, version, arch)
                    if mode is not None:
                        modes[ins.opcode, ins.modifiers] = mode
        except ValueError as why:
            failures[function.name] = fail(function, ins, str(why))
    return dataclasses.replace(prepared, float_modes=modes, failures=failures)


def float_mode(ins: ast.Instruction, version: tuple[int, int], arch: str) -> FloatMode | None:
    """The instruction's FloatMode, or None when it does no floating-point arithmetic; ValueError when it
    lacks a modifier the ISA requires."""
    types = [m for m in ins.modifiers if m in ast.TYPES]
    floats = [t for t in types if t in _FLOAT_TYPES]
    opcode = ins.opcode
    if not floats or opcode in ("mov", "ld", "st", "ldu", "selp", "slct", "shfl", "cvta", "prmt") or \
            (opcode in ("atom", "red") and not ins.has("add")):
        return None
    written = [m for m in ins.modifiers if m in _ROUNDINGS]
    rounding = written[0] if written else None
    approx = ins.has("approx") or ins.has("full")
    single = "f32" in floats
    ftz = ins.has("ftz") or (single and arch.startswith("sm_1") and len(arch) == 5)
    sat, old = ins.has("sat"), version < (1, 4)
    if opcode in ("atom", "red"):
        return FloatMode("rn", ftz=floats[0] == "f32" or (floats[0] != "f64" and not ins.has("noftz")))
    if opcode in _CONTRACTIBLE:
        return FloatMode(rounding or "rn", ftz=ftz, sat=sat, contractible=rounding is None)
    if opcode in _APPROXIMATE:
        if not approx and not old:
            raise ValueError(f"{opcode} needs .approx")
        return FloatMode(None, approx=True, ftz=ftz or (old and single), sat=sat)
    if opcode in _ROUNDING_REQUIRED:
        if rounding is None and not approx:
            if old and opcode in ("div", "rcp", "sqrt"):
                return FloatMode(None, approx=True, ftz=True) if single else FloatMode("rn")
            raise ValueError(f"{opcode}.{floats[0]} needs a rounding modifier")
        return FloatMode(rounding, approx=approx, ftz=ftz, sat=sat)
    if opcode == "cvt":
        return _conversion(types, rounding, ftz, sat)
    return FloatMode(rounding, approx=approx, ftz=ftz, sat=sat)


def _conversion(types: list[str], rounding: str | None, ftz: bool, sat: bool) -> FloatMode:
    if len(types) != 2:
        raise ValueError("cvt needs a destination and a source type")
    dst, src = types
    size = ast.TYPE_SIZES.get
    if src in _FLOAT_TYPES and dst not in _FLOAT_TYPES:
        needed = _INTEGRAL
    elif src not in _FLOAT_TYPES or (size(dst) or 0) < (size(src) or 0) or \
            (dst != src and size(dst) == size(src)):
        needed = (*_IEEE, "rna", "rs")
    elif dst == src:  # rounds to an integral value when asked (.rni …); without one it only applies .ftz
        needed = _INTEGRAL if rounding is not None else ()
    else:  # widening float → float: exact (the fp8 → f16x2 forms are written with .rn all the same)
        needed = ()
    if needed and rounding not in needed:
        raise ValueError(f"cvt.{dst}.{src} needs one of " + ", ".join("." + r for r in needed))
    return FloatMode(rounding, ftz=ftz, sat=sat)
