"""Floating-point arithmetic: add/sub/mul, fma and mad on f32/f64 (round to nearest even)."""

from __future__ import annotations

from fatkit.translate.lower.core import handles


def _rounding(lw, ins, required: bool) -> None:
    lw.check_modifiers(ins, {"rn"})
    if required and "rn" not in ins.modifiers:
        raise lw.fail("only the .rn rounding is supported yet")


def _binary(lw, ins, op: str):
    (t,) = lw.types(ins, 1)
    _rounding(lw, ins, required=False)
    d, a, b = lw.operands(ins, 3)
    lw.write(d, getattr(lw.builder, op)(lw.read(a, t), lw.read(b, t)), t)


@handles("add", family="float")
def add(lw, ins):
    _binary(lw, ins, "fadd")


@handles("sub", family="float")
def sub(lw, ins):
    _binary(lw, ins, "fsub")


@handles("mul", family="float")
def mul(lw, ins):
    _binary(lw, ins, "fmul")


@handles("fma", "mad", family="float")
def fma(lw, ins):
    (t,) = lw.types(ins, 1)
    _rounding(lw, ins, required=True)
    d, a, b, c = lw.operands(ins, 4)
    lw.write(d, lw.intrinsic("llvm.fma", [lw.read(a, t), lw.read(b, t), lw.read(c, t)]), t)
