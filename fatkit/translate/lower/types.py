"""The LLVM IR types lowering builds with (a leaf module: lower/core.py and lower/rounding.py both use them,
and core uses rounding)."""

from __future__ import annotations

from llvmlite import ir

I1, I8, I16, I32, I64, I128 = (ir.IntType(n) for n in (1, 8, 16, 32, 64, 128))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
F16X2 = ir.VectorType(F16, 2)
