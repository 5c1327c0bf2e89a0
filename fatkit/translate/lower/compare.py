"""Compare and select: setp (one or two predicate results, boolean combination with {!}c), set (integer
all-ones or f32 1.0 results), selp and slct; integer compares of every width, float compares ordered and
unordered, with .ftz flushing f32 subnormal operands first."""

from __future__ import annotations

from llvmlite import ir

from fatkit.translate.lower.core import F32, HANDLERS, Lowering, handles, llvm_type
from fatkit.translate.ptx import ast

# Compare operators: integer (signed, unsigned) and float predicates of LLVM.
_SIGNED_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_UNSIGNED_CMP = {**_SIGNED_CMP, "lo": "<", "ls": "<=", "hi": ">", "hs": ">="}
_FLOAT_CMP = {  # (ordered, llvmlite operator); "ne" is ordered in PTX, "neu" its unordered twin
    **{cmp: (True, op) for cmp, op in _SIGNED_CMP.items()},
    **{cmp + "u": (False, op) for cmp, op in _SIGNED_CMP.items()},
    "num": (True, "ord"), "nan": (False, "uno"),
}
_BOOL_OPS = {"and": "and_", "or": "or_", "xor": "xor"}
_COMPARE_TYPES = {f"{kind}{bits}" for kind in "bsu" for bits in (16, 32, 64)} | {"f32", "f64"}


def _compare(lw: Lowering, ins: ast.Instruction, t: str, a, b, extra: set[str]) -> tuple[ir.Value, str | None]:
    """The compare of a setp/set: (i1 result, BoolOp or None); `extra` are modifiers besides CmpOp/BoolOp."""
    if t not in _COMPARE_TYPES:
        raise lw.fail(f"compare of .{t} is not supported here")
    words = [m for m in ins.modifiers if m not in ast.TYPES and m not in extra]
    bool_ops = [w for w in words if w in _BOOL_OPS]
    compares = [w for w in words if w not in _BOOL_OPS]
    if len(compares) != 1 or len(bool_ops) > 1:
        raise lw.fail("expected one comparison and at most one boolean operator")
    cmp = compares[0]
    if "ftz" in ins.modifiers and t != "f32":
        raise lw.fail(".ftz applies to .f32 comparisons only")
    x, y = lw.read(a, t), lw.read(b, t)
    mode = lw.float_mode(ins)  # PTX's defaults written out: f32 compares flush on sm_1x too
    if "ftz" in ins.modifiers or (t == "f32" and mode is not None and mode.ftz):
        x, y = lw.flush(x), lw.flush(y)
    if t[0] == "f":
        if cmp not in _FLOAT_CMP:
            raise lw.fail(f"comparison .{cmp} is not defined for .{t}")
        ordered, op = _FLOAT_CMP[cmp]
        result = (lw.builder.fcmp_ordered if ordered else lw.builder.fcmp_unordered)(op, x, y)
    elif t[0] == "s" and cmp in _SIGNED_CMP:
        result = lw.builder.icmp_signed(_SIGNED_CMP[cmp], x, y)
    elif t[0] in "ub" and cmp in (_UNSIGNED_CMP if t[0] == "u" else ("eq", "ne")):
        result = lw.builder.icmp_unsigned(_UNSIGNED_CMP[cmp], x, y)
    else:
        raise lw.fail(f"comparison .{cmp} is not defined for .{t}")
    return result, bool_ops[0] if bool_ops else None


def _combine(lw: Lowering, bool_op: str | None, value: ir.Value, c) -> ir.Value:
    """BoolOp(value, {!}c), or value where there is no BoolOp."""
    if bool_op is None:
        return value
    negated = type(c) is ast.Negated
    predicate = lw.read(c.operand if negated else c, "pred")
    if negated:
        predicate = lw.builder.not_(predicate)
    return getattr(lw.builder, _BOOL_OPS[bool_op])(value, predicate)


def _sources(lw: Lowering, ins: ast.Instruction, bool_op: str | None) -> tuple:
    count = 4 if bool_op else 3
    if len(ins.operands) != count:
        raise lw.fail(f"expected {count} operands" + (" (a BoolOp takes {!}c)" if bool_op else ""))
    return ins.operands + ((None,) if not bool_op else ())


@handles("setp")
def setp(lw: Lowering, ins: ast.Instruction) -> None:
    (t,) = lw.types(ins, 1)
    lw.check_modifiers(ins, set(_UNSIGNED_CMP) | set(_FLOAT_CMP) | set(_BOOL_OPS) | {"ftz"})
    if not ins.operands:
        raise lw.fail("setp needs operands")
    bool_op = next((m for m in ins.modifiers if m in _BOOL_OPS), None)
    destination, a, b, c = _sources(lw, ins, bool_op)
    result, bool_op = _compare(lw, ins, t, a, b, {"ftz"})
    first, second = (destination.first, destination.second) if type(destination) is ast.Pair else (destination, None)
    if type(first) is not ast.Sink:
        lw.write(first, _combine(lw, bool_op, result, c), "pred")
    if second is not None and type(second) is not ast.Sink:  # q = BoolOp(!t, c)
        lw.write(second, _combine(lw, bool_op, lw.builder.not_(result), c), "pred")


@handles("set")
def set_(lw: Lowering, ins: ast.Instruction) -> None:
    dtype, stype = lw.types(ins, 2)
    half = HANDLERS.get(("set", "half"))
    if stype.startswith(("f16", "bf16")) and half is not None:
        half(lw, ins)  # set.CmpOp.u32.f16x2: an integer destination, a half-precision source (lower/half.py)
        return
    if dtype not in ("u32", "s32", "f32"):
        raise lw.fail(f"set writes .u32, .s32 or .f32, not .{dtype}")
    lw.check_modifiers(ins, set(_UNSIGNED_CMP) | set(_FLOAT_CMP) | set(_BOOL_OPS) | {"ftz"})
    bool_op = next((m for m in ins.modifiers if m in _BOOL_OPS), None)
    d, a, b, c = _sources(lw, ins, bool_op)
    result, bool_op = _compare(lw, ins, stype, a, b, {"ftz"})
    truth = _combine(lw, bool_op, result, c)
    if dtype == "f32":  # 1.0f or 0.0f
        value = lw.builder.select(truth, ir.Constant(F32, 1.0), ir.Constant(F32, 0.0))
    else:  # all ones or zero
        value = lw.builder.sext(truth, llvm_type(dtype))
    lw.write(d, value, dtype)


@handles("selp")
def selp(lw: Lowering, ins: ast.Instruction) -> None:
    (t,) = lw.types(ins, 1)
    lw.check_modifiers(ins, set())
    d, a, b, c = lw.operands(ins, 4)
    lw.write(d, lw.builder.select(lw.read(c, "pred"), lw.read(a, t), lw.read(b, t)), t)


@handles("slct")
def slct(lw: Lowering, ins: ast.Instruction) -> None:
    dtype, ctype = lw.types(ins, 2)
    if ctype not in ("s32", "f32"):
        raise lw.fail(f"slct selects by .s32 or .f32, not .{ctype}")
    lw.check_modifiers(ins, {"ftz"} if ctype == "f32" else set())
    d, a, b, c = lw.operands(ins, 4)
    selector = lw.read(c, ctype)
    if ctype == "f32":
        if "ftz" in ins.modifiers:  # a negative subnormal becomes −0, which selects a
            selector = lw.flush(selector)
        at_least_zero = lw.builder.fcmp_ordered(">=", selector, ir.Constant(F32, 0.0))  # NaN selects b
    else:
        at_least_zero = lw.builder.icmp_signed(">=", selector, ir.Constant(selector.type, 0))
    lw.write(d, lw.builder.select(at_least_zero, lw.read(a, dtype), lw.read(b, dtype)), dtype)
