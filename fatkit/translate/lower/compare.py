"""Compare and select: setp (integer and float, unordered compares included) and selp."""

from __future__ import annotations

from fatkit.translate.lower.core import handles
from fatkit.translate.ptx import ast

# Compare operators: integer (signed, unsigned) and float predicates of LLVM.
_SIGNED_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_UNSIGNED_CMP = {**_SIGNED_CMP, "lo": "<", "ls": "<=", "hi": ">", "hs": ">="}
_FLOAT_CMP = {  # (ordered, llvmlite operator); "ne" is ordered in PTX, "neu" its unordered twin
    **{cmp: (True, op) for cmp, op in _SIGNED_CMP.items()},
    **{cmp + "u": (False, op) for cmp, op in _SIGNED_CMP.items()},
    "num": (True, "ord"), "nan": (True, "uno"),
}


@handles("setp")
def setp(lw, ins):
    (t,) = lw.types(ins, 1)
    comparisons = [m for m in ins.modifiers if m not in ast.TYPES]
    if len(comparisons) != 1:
        raise lw.fail("only setp.CmpOp.type (no .ftz, no boolean combination) is supported yet")
    cmp = comparisons[0]
    d, a, b = lw.operands(ins, 3)
    x, y = lw.read(a, t), lw.read(b, t)
    if t[0] == "f":
        if cmp not in _FLOAT_CMP:
            raise lw.fail(f"unknown float comparison .{cmp}")
        ordered, op = _FLOAT_CMP[cmp]
        result = (lw.builder.fcmp_ordered if ordered else lw.builder.fcmp_unordered)(op, x, y)
    elif t[0] == "s" and cmp in _SIGNED_CMP:
        result = lw.builder.icmp_signed(_SIGNED_CMP[cmp], x, y)
    elif t[0] in "ub" and cmp in (_UNSIGNED_CMP if t[0] == "u" else ("eq", "ne")):
        result = lw.builder.icmp_unsigned(_UNSIGNED_CMP[cmp], x, y)
    else:
        raise lw.fail(f"comparison .{cmp} is not defined for .{t}")
    lw.write(d, result, "pred")


@handles("selp")
def selp(lw, ins):
    (t,) = lw.types(ins, 1)
    lw.check_modifiers(ins, set())
    d, a, b, c = lw.operands(ins, 4)
    lw.write(d, lw.builder.select(lw.read(c, "pred"), lw.read(a, t), lw.read(b, t)), t)
