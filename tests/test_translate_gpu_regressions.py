"""What the differential harness (verification/) found on an NVIDIA H200, kept as CPU regression tests.

Each case is an instruction on fixed inputs and the bits the H200 gave (verification/REPORT.md; the GPU
ran the original PTX, fatkit's re-lowered PTX was compared against it bit for bit). Where the PTX ISA leaves
a result open (NaN payloads) or the hardware departs from it (bfe.64 operands, fns offset INT_MIN), fatkit
follows the hardware, so that programs behave as they did on NVIDIA GPUs.
"""

from __future__ import annotations

import ctypes

import pytest

from fatkit.translate.pipeline import Options, translate
from tests.amdrun import TARGETS
from tests.amdrun import program as loaded_program
from tests.ptxrun import HEADER

# (PTX computing %rd9 from the immediates it names, the 64-bit result the H200 gave)
CASES = [
    # bfe/bfi .64 use the whole 32-bit position and length (the ISA: their low 8 bits)
    ("mov.b64 %rd1, 1; bfe.u64 %rd9, %rd1, 0x80000000, 5;", 0),
    ("mov.b64 %rd1, 1; bfe.s64 %rd9, %rd1, 0x100, 1;", 0),
    ("mov.b64 %rd1, 0; mov.b64 %rd2, 2; bfi.b64 %rd9, %rd1, %rd2, 0x100, 2;", 2),
    # fns with offset INT_MIN gives 0 for any mask and base (the ISA's search would find nothing)
    ("fns.b32 %r9, 0, 31, 0x80000000; cvt.u64.u32 %rd9, %r9;", 0),
    ("fns.b32 %r9, 0xffffffff, 3, 0x80000000; cvt.u64.u32 %rd9, %r9;", 0),
    # abs/neg .f32 of a NaN: the canonical NaN
    ("abs.f32 %f9, 0f7FC00000; mov.b32 %r9, %f9; cvt.u64.u32 %rd9, %r9;", 0x7FFFFFFF),
    ("neg.f32 %f9, 0f7FFFFFFF; mov.b32 %r9, %f9; cvt.u64.u32 %rd9, %r9;", 0x7FFFFFFF),
    # min/max .f64 of two NaNs: the second operand
    ("min.f64 %fd9, 0d7FFFFFFFFFFFFFFF, 0dFFFFFFFFFFFFFFFF; mov.b64 %rd9, %fd9;", 0xFFFFFFFFFFFFFFFF),
    ("max.f64 %fd9, 0dFFFFFFFFFFFFFFFF, 0d7FF8000000000000; mov.b64 %rd9, %fd9;", 0x7FF8000000000000),
    # cvt f64 → f32 of a NaN keeps the sign and the payload's top bits
    ("cvt.rn.f32.f64 %f9, 0d7FFFFFFFFFFFFFFF; mov.b32 %r9, %f9; cvt.u64.u32 %rd9, %r9;", 0x7FFFFFFF),
    ("cvt.rz.f32.f64 %f9, 0dFFFFFFFFFFFFFFFF; mov.b32 %r9, %f9; cvt.u64.u32 %rd9, %r9;", 0xFFFFFFFF),
    # cvt.ftz.f64.f32 of any NaN: f32's canonical NaN widened (without .ftz the NaN is kept)
    ("cvt.ftz.f64.f32 %fd9, 0f7FC00000; mov.b64 %rd9, %fd9;", 0x7FFFFFFFE0000000),
    ("cvt.ftz.f64.f32 %fd9, 0fFFFFFFFF; mov.b64 %rd9, %fd9;", 0x7FFFFFFFE0000000),
    ("cvt.f64.f32 %fd9, 0fFFFFFFFF; mov.b64 %rd9, %fd9;", 0xFFFFFFFFE0000000),
    # cvt.rna.tf32.f32 of a NaN clears its low 13 bits
    ("mov.b32 %f1, 0fFFFFFFFF; cvt.rna.tf32.f32 %r9, %f1; cvt.u64.u32 %rd9, %r9;", 0xFFFFE000),
    # div.approx.f32 by a subnormal: 0 / 2^-149 is 0 (not 0 · inf)
    ("div.approx.f32 %f9, 0f00000000, 0f00000001; mov.b32 %r9, %f9; cvt.u64.u32 %rd9, %r9;", 0),
    # fma.rp.f64 with a zero product is exactly c
    ("fma.rp.f64 %fd9, 0d0000000000000000, 0d7FEFFFFFFFFFFFFF, 0d000000000000FFFF; mov.b64 %rd9, %fd9;",
     0xFFFF),
    # ex2.approx.f16 beyond f16's range is +inf (its rounding is otherwise toward zero)
    ("mov.b16 %h1, 0x4C40; ex2.approx.f16 %h9, %h1; cvt.u64.u16 %rd9, %h9;", 0x7C00),
]


def _module() -> str:
    body = []
    for k, (snippet, _) in enumerate(CASES):
        body.append(snippet.replace("; ", ";\n    "))
        body.append(f"st.global.u64 [%rd8+{8 * k}], %rd9;")
    return HEADER + """
.visible .entry regressions(.param .u64 out)
{
    .reg .b16 %h<10>;
    .reg .b32 %r<10>;
    .reg .f32 %f<10>;
    .reg .b64 %rd<10>;
    .reg .f64 %fd<10>;
    ld.param.u64 %rd8, [out];
    """ + "\n    ".join(body) + """
    ret;
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_results_the_h200_gave(target):
    program = loaded_program(_module(), target)
    out = (ctypes.c_uint64 * len(CASES))()
    program.launch("regressions", [out])
    mismatches = [(snippet, hex(got), hex(want)) for (snippet, want), got in zip(CASES, out) if got != want]
    assert not mismatches


@pytest.mark.parametrize("target", ["gfx942", "gfx1100", "sm_90"])
def test_regression_module_translates(target):
    translation = translate(_module(), Options(target=target))
    assert [k.status for k in translation.kernels] == ["ok"]
