"""Integer arithmetic, logic and shifts: add/sub, mul/mad .lo/.hi/.wide, and/or/xor/not, shl/shr."""

from __future__ import annotations

from llvmlite import ir

from fatkit.translate.lower.core import I32, handles
from fatkit.translate.ptx import ast


def _binary(lw, ins, op: str):
    (t,) = lw.types(ins, 1)
    lw.check_modifiers(ins, set())
    d, a, b = lw.operands(ins, 3)
    lw.write(d, getattr(lw.builder, op)(lw.read(a, t), lw.read(b, t)), t)


@handles("add", family="int")
def add(lw, ins):
    _binary(lw, ins, "add")


@handles("sub", family="int")
def sub(lw, ins):
    _binary(lw, ins, "sub")


def _product(lw, ins, t: str, a, b) -> tuple[ir.Value, str]:
    """a*b per .lo/.hi/.wide: the value and the PTX type it has."""
    mode = [m for m in ("lo", "hi", "wide") if m in ins.modifiers]
    if len(mode) != 1:
        raise lw.fail("integer multiply needs exactly one of .lo/.hi/.wide")
    lw.check_modifiers(ins, set(mode))
    x, y = lw.read(a, t), lw.read(b, t)
    if mode[0] == "lo":
        return lw.builder.mul(x, y), t
    bits = ast.TYPE_SIZES[t] * 8
    if bits == 64 and mode[0] == "wide":
        raise lw.fail("mul.wide of 64-bit operands does not exist")
    wide, extend = ir.IntType(2 * bits), lw.builder.sext if t[0] == "s" else lw.builder.zext
    full = lw.builder.mul(extend(x, wide), extend(y, wide))
    if mode[0] == "wide":
        return full, f"{t[0]}{2 * bits}"
    return lw.builder.trunc(lw.builder.lshr(full, ir.Constant(wide, bits)), x.type), t


@handles("mul", family="int")
def mul(lw, ins):
    (t,) = lw.types(ins, 1)
    d, a, b = lw.operands(ins, 3)
    value, result_type = _product(lw, ins, t, a, b)
    lw.write(d, value, result_type)


@handles("mad", family="int")
def mad(lw, ins):
    (t,) = lw.types(ins, 1)
    d, a, b, c = lw.operands(ins, 4)
    value, result_type = _product(lw, ins, t, a, b)
    lw.write(d, lw.builder.add(value, lw.read(c, result_type)), result_type)


def _logic_type(lw, ins) -> str:
    (t,) = lw.types(ins, 1)
    lw.check_modifiers(ins, set())
    if t != "pred" and t[0] != "b":
        raise lw.fail("logic instructions take .pred or .bN types")
    return t


def _logic(lw, ins, op: str):
    t = _logic_type(lw, ins)
    d, a, b = lw.operands(ins, 3)
    lw.write(d, getattr(lw.builder, op)(lw.read(a, t), lw.read(b, t)), t)


@handles("and")
def and_(lw, ins):
    _logic(lw, ins, "and_")


@handles("or")
def or_(lw, ins):
    _logic(lw, ins, "or_")


@handles("xor")
def xor(lw, ins):
    _logic(lw, ins, "xor")


@handles("not")
def not_(lw, ins):
    t = _logic_type(lw, ins)
    d, a = lw.operands(ins, 2)
    lw.write(d, lw.builder.not_(lw.read(a, t)), t)


def _shift(lw, ins, arithmetic: bool):
    (t,) = lw.types(ins, 1)
    lw.check_modifiers(ins, set())
    d, a, b = lw.operands(ins, 3)
    value, amount = lw.read(a, t), lw.read(b, "u32")
    ty, bits = value.type, ast.TYPE_SIZES[t] * 8
    # PTX clamps shift amounts above the width; LLVM leaves them undefined.
    too_far = lw.builder.icmp_unsigned(">=", amount, ir.Constant(I32, bits))
    if arithmetic:
        clamped = lw.builder.select(too_far, ir.Constant(I32, bits - 1), amount)
        lw.write(d, lw.builder.ashr(value, lw.convert(clamped, "u32", f"u{bits}")), t)
        return
    shifted = (lw.builder.shl if ins.opcode == "shl" else lw.builder.lshr)(
        value, lw.convert(lw.builder.select(too_far, ir.Constant(I32, 0), amount), "u32", f"u{bits}"))
    lw.write(d, lw.builder.select(too_far, ir.Constant(ty, 0), shifted), t)


@handles("shl")
def shl(lw, ins):
    _shift(lw, ins, arithmetic=False)


@handles("shr")
def shr(lw, ins):
    (t,) = lw.types(ins, 1)
    _shift(lw, ins, arithmetic=t[0] == "s")
