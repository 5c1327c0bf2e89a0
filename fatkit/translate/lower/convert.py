"""Conversions: cvt between integer widths, integers and f32/f64, and f32/f64 (.rn and .rXi roundings)."""

from __future__ import annotations

from fatkit.translate.lower.core import F64, handles, llvm_type
from fatkit.translate.ptx import ast

_FLOAT_TO_INT_ROUNDING = {"rzi": None, "rni": "llvm.roundeven", "rmi": "llvm.floor", "rpi": "llvm.ceil"}


@handles("cvt")
def cvt(lw, ins):
    dst, src = lw.types(ins, 2)
    d, a = lw.operands(ins, 2)
    rounding = [m for m in ins.modifiers if m not in ast.TYPES]
    if len(rounding) > 1 or (rounding and rounding[0] not in ("rn", *_FLOAT_TO_INT_ROUNDING)):
        raise lw.fail("only one of .rn/.rzi/.rni/.rmi/.rpi is supported yet (no .ftz/.sat)")
    mode = rounding[0] if rounding else None
    value, source, target = lw.read(a, src), llvm_type(src), llvm_type(dst)
    if src[0] != "f" and dst[0] != "f":
        if mode is not None:
            raise lw.fail("integer-to-integer cvt takes no rounding")
        lw.write(d, lw.convert(value, src, dst), dst)
    elif src[0] != "f":  # integer → float: LLVM's conversion rounds to nearest even, as .rn
        if mode != "rn":
            raise lw.fail("integer-to-float cvt supports .rn only yet")
        convert = lw.builder.sitofp if src[0] == "s" else lw.builder.uitofp
        lw.write(d, convert(value, target), dst)
    elif dst[0] != "f":  # float → integer: round as asked, then saturate (NaN → 0) as PTX does
        if mode not in _FLOAT_TO_INT_ROUNDING:
            raise lw.fail("float-to-integer cvt needs .rzi/.rni/.rmi/.rpi")
        if _FLOAT_TO_INT_ROUNDING[mode]:
            value = lw.intrinsic(_FLOAT_TO_INT_ROUNDING[mode], [value])
        name = "llvm.fptosi.sat" if dst[0] == "s" else "llvm.fptoui.sat"
        lw.write(d, lw.intrinsic(name, [value], result=target), dst)
    elif source == target:  # cvt.rXi.f32.f32: round to an integral value
        if mode not in _FLOAT_TO_INT_ROUNDING:
            raise lw.fail("float-to-same-float cvt needs .rzi/.rni/.rmi/.rpi")
        name = _FLOAT_TO_INT_ROUNDING[mode] or "llvm.trunc"
        lw.write(d, lw.intrinsic(name, [value]), dst)
    elif target == F64:
        if mode is not None:
            raise lw.fail("f32-to-f64 cvt is exact and takes no rounding")
        lw.write(d, lw.builder.fpext(value, target), dst)
    else:
        if mode != "rn":
            raise lw.fail("f64-to-f32 cvt supports .rn only yet")
        lw.write(d, lw.builder.fptrunc(value, target), dst)
