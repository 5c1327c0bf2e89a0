"""The translation pipeline: PTX kernels run on the CPU (`host`) and AMD code objects for gfx942/gfx1100."""

from __future__ import annotations

import ctypes
import math
import struct
from fractions import Fraction
from pathlib import Path

import pytest

from fatkit.errors import FatkitError
from fatkit.formats.hsaco import parse_code_object
from fatkit.translate.lower import Unsupported, kernel_signature, lower_kernel, register_types
from fatkit.translate.pipeline import STAGES, Options, finish, run, run_from, translate
from fatkit.translate.ptx import parse_ptx
from fatkit.translate.targets import target_named
from tests.amdrun import TARGETS, EmulatedProgram, HostProgram
from tests.ptxrun import HEADER, M32, M64, bits, f32, from_bits, run_table, signed
from tests.ptxframes import entry

SAMPLE = Path(__file__).parent / "samples" / "nv_kern_sm90.ptx"


# --------------------------------------------------------------------------------------------------
# integer instructions

INT_A = [0, 1, 2, 7, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 0x12345678, 0xDEADBEEF, 100, 31, 0x80]
INT_B = [0, 3, 0xFFFFFFFF, 32, 1, 0x80000000, 5, 0x9ABCDEF0, 33, 100, 31, 17]


def _loop_sum(b: int) -> int:
    return sum(range(b & 7))


INT_OPS: list[tuple[str, object]] = [
    ("add.s32 %r10, %r2, %r3;", lambda a, b: (a + b) & M32),
    ("sub.s32 %r10, %r2, %r3;", lambda a, b: (a - b) & M32),
    ("add.u32 %r10, %r2, 0xFFFFFFFF;", lambda a, b: (a - 1) & M32),
    ("mul.lo.s32 %r10, %r2, %r3;", lambda a, b: (a * b) & M32),
    ("mul.hi.s32 %r10, %r2, %r3;", lambda a, b: ((signed(a) * signed(b)) >> 32) & M32),
    ("mul.hi.u32 %r10, %r2, %r3;", lambda a, b: (a * b) >> 32),
    ("mul.wide.s32 %rd10, %r2, %r3;", lambda a, b: (signed(a) * signed(b)) & M64),
    ("mul.wide.u32 %rd10, %r2, %r3;", lambda a, b: a * b),
    ("mad.lo.s32 %r10, %r2, %r3, 7;", lambda a, b: (a * b + 7) & M32),
    ("mad.hi.u32 %r10, %r2, %r3, %r3;", lambda a, b: ((a * b >> 32) + b) & M32),
    ("cvt.u64.u32 %rd11, %r2;\nmad.wide.u32 %rd10, %r2, %r3, %rd11;", lambda a, b: (a * b + a) & M64),
    ("cvt.s64.s32 %rd11, %r2;\nmad.lo.s64 %rd10, %rd11, %rd11, -1;", lambda a, b: (signed(a) ** 2 - 1) & M64),
    ("and.b32 %r10, %r2, %r3;", lambda a, b: a & b),
    ("or.b32 %r10, %r2, %r3;", lambda a, b: a | b),
    ("xor.b32 %r10, %r2, %r3;", lambda a, b: a ^ b),
    ("not.b32 %r10, %r2;", lambda a, b: ~a & M32),
    ("shl.b32 %r10, %r2, %r3;", lambda a, b: (a << b) & M32 if b < 32 else 0),
    ("shr.u32 %r10, %r2, %r3;", lambda a, b: a >> b if b < 32 else 0),
    ("shr.s32 %r10, %r2, %r3;", lambda a, b: (signed(a) >> min(b, 31)) & M32),
    ("cvt.u64.u32 %rd11, %r2;\nshl.b64 %rd10, %rd11, %r3;", lambda a, b: (a << b) & M64 if b < 64 else 0),
    ("cvt.s64.s32 %rd11, %r2;\nshr.s64 %rd10, %rd11, %r3;", lambda a, b: (signed(a) >> min(b, 63)) & M64),
    ("cvt.s64.s32 %rd10, %r2;", lambda a, b: signed(a) & M64),
    ("cvt.u16.u32 %rs1, %r2;\ncvt.u32.u16 %r10, %rs1;", lambda a, b: a & 0xFFFF),
    ("cvt.s16.s32 %rs1, %r2;\ncvt.s32.s16 %r10, %rs1;",
     lambda a, b: ((a & 0xFFFF) - (0x10000 if a & 0x8000 else 0)) & M32),
    ("cvt.s8.s32 %r10, %r2;", lambda a, b: ((a & 0xFF) - (0x100 if a & 0x80 else 0)) & M32),
    ("cvt.u32.u64 %r10, %rd8;\nsub.u32 %r10, %r10, %r10;", lambda a, b: 0),
    ("setp.ne.u32 %p0, %r2, 0;\nselp.b32 %r10, %r2, %r3, %p0;",
     lambda a, b: a if a != 0 else b),
    ("mov.u32 %r10, 5;\nsetp.lt.u32 %p1, %r2, %r3;\n@%p1 mov.u32 %r10, 9;", lambda a, b: 9 if a < b else 5),
    ("mov.u32 %r10, 5;\nsetp.lt.s32 %p1, %r2, %r3;\n@!%p1 add.s32 %r10, %r10, %r2;",
     lambda a, b: 5 if signed(a) < signed(b) else (5 + a) & M32),
    ("setp.lt.u32 %p1, %r2, %r3;\nsetp.eq.u32 %p2, %r2, 0;\nor.pred %p3, %p1, %p2;\nnot.pred %p3, %p3;\n"
     "xor.pred %p3, %p3, %p2;\nand.pred %p3, %p3, %p3;\nselp.u32 %r10, 1, 0, %p3;",
     lambda a, b: int((not (a < b or a == 0)) != (a == 0))),
    ("mov.u32 %r10, 0;\nand.b32 %r11, %r3, 7;\nmov.u32 %r12, 0;\nLOOP@K:\nsetp.ge.u32 %p1, %r12, %r11;\n"
     "@%p1 bra DONE@K;\nadd.u32 %r10, %r10, %r12;\nadd.u32 %r12, %r12, 1;\nbra.uni LOOP@K;\nDONE@K:",
     lambda a, b: _loop_sum(b)),
]
INT_COMPARES = {
    "s32": {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="},
    "u32": {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
            "lo": "<", "ls": "<=", "hi": ">", "hs": ">="},
}
for _type, _table in INT_COMPARES.items():
    for _cmp, _op in _table.items():
        _convert = signed if _type == "s32" else int
        INT_OPS.append((f"setp.{_cmp}.{_type} %p1, %r2, %r3;\nselp.u32 %r10, 1, 0, %p1;",
                        lambda a, b, op=_op, cv=_convert: int(eval(f"cv(a) {op} cv(b)"))))


def _on(ptx: str, target: str, **options):
    """The program on `target` (tests/amdrun.py: the host JIT, or fatkit.emulate), launched with ctypes arrays."""
    product = translate(ptx, Options(target=target, **options)).product
    return HostProgram(product) if target == "host" else EmulatedProgram(product)


@pytest.mark.parametrize("target", TARGETS)
def test_integer_instructions(target):
    results = run_table("ints", [op for op, _ in INT_OPS], INT_A, INT_B, target)
    for a, b, row in zip(INT_A, INT_B, results):
        for (op, expected), got in zip(INT_OPS, row):
            assert got == expected(a, b), f"{op!r} a={a:#x} b={b:#x}"


# --------------------------------------------------------------------------------------------------
# f32 instructions and conversions

NAN, INF = float("nan"), float("inf")
FLOAT_A = [1.5, -2.5, 2.5, 0.0, -0.0, NAN, INF, -INF, 3.0e9, -3.0e9, 1e-40, 16777217.0, 0.75, -0.5]
FLOAT_B = [0.25, 2.5, NAN, -0.0, 0.0, 1.0, INF, 5.0, 1.0, -1.0, 1e-40, 1.0, -0.75, 7.0]


def _saturate(x: float, low: int, high: int, rounding) -> int:
    if math.isnan(x):  # the ISA: NaN → 0, but 1 << 63 into a 64-bit integer (the H200 agrees)
        return 1 << 63 if high >= M32 + 1 else 0
    if math.isinf(x):
        return high if x > 0 else low
    return max(low, min(high, rounding(x)))


def _f(value: float) -> int:
    """What an op writing an f32 result into %r10 stores: its bits."""
    return bits(f32(value))


FLOAT_OPS: list[tuple[str, object]] = [
    ("add.f32 %f4, %f2, %f3;\nmov.b32 %r10, %f4;", lambda a, b: _f(a + b)),
    ("sub.rn.f32 %f4, %f2, %f3;\nmov.b32 %r10, %f4;", lambda a, b: _f(a - b)),
    ("mul.rn.f32 %f4, %f2, %f3;\nmov.b32 %r10, %f4;", lambda a, b: _f(a * b)),
    ("add.f32 %f4, %f2, 0f3F800000;\nmov.b32 %r10, %f4;", lambda a, b: _f(a + 1.0)),
    ("cvt.rzi.s32.f32 %r10, %f2;", lambda a, b: _saturate(a, -2**31, 2**31 - 1, math.trunc) & M32),
    ("cvt.rni.s32.f32 %r10, %f2;", lambda a, b: _saturate(a, -2**31, 2**31 - 1, round) & M32),
    ("cvt.rmi.s32.f32 %r10, %f2;", lambda a, b: _saturate(a, -2**31, 2**31 - 1, math.floor) & M32),
    ("cvt.rpi.s32.f32 %r10, %f2;", lambda a, b: _saturate(a, -2**31, 2**31 - 1, math.ceil) & M32),
    ("cvt.rzi.u32.f32 %r10, %f2;", lambda a, b: _saturate(a, 0, M32, math.trunc)),
    ("cvt.rzi.s64.f32 %rd10, %f2;", lambda a, b: _saturate(a, -2**63, 2**63 - 1, math.trunc) & M64),
    ("cvt.rn.f32.s32 %f4, %r3;\nmov.b32 %r10, %f4;", lambda a, b: _f(float(signed(bits(b))))),
    ("cvt.rn.f32.u32 %f4, %r3;\nmov.b32 %r10, %f4;", lambda a, b: _f(float(bits(b)))),
    ("cvt.rzi.f32.f32 %f4, %f2;\nmov.b32 %r10, %f4;",
     lambda a, b: _f(a if math.isnan(a) or math.isinf(a) else math.copysign(math.trunc(a), a))),
    ("cvt.f64.f32 %fd1, %f2;\nmov.b64 %rd10, %fd1;", lambda a, b: struct.unpack("<Q", struct.pack("<d", a))[0]),
    ("cvt.f64.f32 %fd1, %f2;\ncvt.rn.f32.f64 %f4, %fd1;\nmov.b32 %r10, %f4;", lambda a, b: _f(a)),
]
FLOAT_COMPARES = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b and not math.isnan(a) and not math.isnan(b),
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
    "num": lambda a, b: not math.isnan(a) and not math.isnan(b),
    "nan": lambda a, b: math.isnan(a) or math.isnan(b),
}
for _cmp, _test in list(FLOAT_COMPARES.items())[:6]:
    FLOAT_COMPARES[_cmp + "u"] = (lambda a, b, t=_test: t(a, b) or math.isnan(a) or math.isnan(b))
for _cmp, _test in FLOAT_COMPARES.items():
    FLOAT_OPS.append((f"setp.{_cmp}.f32 %p1, %f2, %f3;\nselp.u32 %r10, 1, 0, %p1;",
                      lambda a, b, t=_test: int(t(a, b))))


@pytest.mark.parametrize("target", TARGETS)
def test_f32_instructions(target):
    a_in, b_in = [f32(x) for x in FLOAT_A], [f32(x) for x in FLOAT_B]
    results = run_table("floats", [op for op, _ in FLOAT_OPS], [bits(x) for x in a_in], [bits(x) for x in b_in],
                        target)
    for a, b, row in zip(a_in, b_in, results):
        for (op, expected), got in zip(FLOAT_OPS, row):
            want = expected(a, b)
            if op.endswith("mov.b32 %r10, %f4;") and math.isnan(from_bits(want)):
                assert math.isnan(from_bits(got)), f"{op!r} a={a} b={b}"
            else:
                assert got == want, f"{op!r} a={a} b={b}: {got:#x} != {want:#x}"


@pytest.mark.parametrize("target", TARGETS)
def test_fma_rounds_once(target):
    # (1+2^-12)^2 - (1+2^-11) is 2^-24 exactly; mul then add would round the product and give 0.
    a, c = from_bits(bits(1 + 2**-12)), f32(-(1 + 2**-11))
    ops = ["fma.rn.f32 %f4, %f2, %f2, %f3;\nmov.b32 %r10, %f4;",
           "mad.rn.f32 %f4, %f2, %f2, %f3;\nmov.b32 %r10, %f4;",
           "mul.f32 %f4, %f2, %f2;\nadd.f32 %f4, %f4, %f3;\nmov.b32 %r10, %f4;"]
    (row,) = run_table("fma", ops, [bits(a)], [bits(c)], target)
    exact = Fraction(a) * Fraction(a) + Fraction(c)
    assert exact == Fraction(1, 2**24)
    assert row == [bits(2**-24), bits(2**-24), 0]


# --------------------------------------------------------------------------------------------------
# saxpy on the host: nvcc's PTX and a hand-written one with a 2-D grid


def _saxpy(program, kernel: str, n: int, grid, block, a: float = 2.0):
    x = (ctypes.c_float * n)(*[i * 0.5 for i in range(n)])
    y = (ctypes.c_float * n)(*[100.0 - i for i in range(n)])
    program.launch(kernel, [a, x, y, n], grid=grid, block=block)
    return list(y), [f32(a * (i * 0.5) + (100.0 - i)) for i in range(n)]


@pytest.mark.parametrize("target", TARGETS)
def test_nvcc_saxpy_runs(target):
    program = _on(SAMPLE.read_text(), target)
    got, expected = _saxpy(program, "_Z5saxpyfPKfPfi", 37, grid=(3,), block=(16,))
    assert got == expected  # 48 threads, the last 11 outside n and guarded off


@pytest.mark.parametrize("target", TARGETS)
def test_hand_written_2d_saxpy(target):
    ptx = HEADER + "\n" + entry("saxpy2d", "f32 a, u64 x, u64 y, u32 n",
                                ".pred %p<2>, .f32 %f<5>, .b32 %r<12>, .b64 %rd<8>", """
    mov.u32 %r2, %ctaid.y;
    mov.u32 %r3, %nctaid.x;
    mov.u32 %r4, %ctaid.x;
    mad.lo.u32 %r5, %r2, %r3, %r4;
    mov.u32 %r6, %ntid.x;
    mov.u32 %r7, %ntid.y;
    mul.lo.u32 %r8, %r6, %r7;
    mov.u32 %r9, %tid.y;
    mov.u32 %r10, %tid.x;
    mad.lo.u32 %r11, %r9, %r6, %r10;
    mad.lo.u32 %r11, %r5, %r8, %r11;
    setp.ge.u32 %p1, %r11, %r1;
    @%p1 ret;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r11, 4;
    add.s64 %rd6, %rd3, %rd5;
    add.s64 %rd7, %rd4, %rd5;
    ld.global.nc.f32 %f2, [%rd6];
    ld.global.f32 %f3, [%rd7+0];
    fma.rn.f32 %f4, %f1, %f2, %f3;
    st.global.f32 [%rd7], %f4;
""")
    program = _on(ptx, target, opt_level=0)
    got, expected = _saxpy(program, "saxpy2d", 45, grid=(2, 2, 1), block=(4, 3, 1), a=-1.5)
    assert got == expected


@pytest.mark.parametrize("target", TARGETS)
def test_param_offsets_follow_cuda_layout(target):
    ptx = HEADER + """
.visible .entry mixed(.param .u8 c, .param .f64 d, .param .u16 s, .param .align 8 .u32 w, .param .u64 out)
{
    .reg .b16 %rs<3>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .reg .f64 %fd<2>;
    ld.param.u8 %rs1, [c];
    ld.param.f64 %fd1, [d];
    ld.param.u16 %rs2, [s];
    ld.param.u32 %r1, [w];
    ld.param.u64 %rd1, [out];
    cvt.u32.u16 %r2, %rs1;
    st.global.u32 [%rd1], %r2;
    cvt.u32.u16 %r3, %rs2;
    st.global.u32 [%rd1+4], %r3;
    st.global.u32 [%rd1+8], %r1;
    mov.b64 %rd2, %fd1;
    st.global.u64 [%rd1+16], %rd2;
}
"""
    module = parse_ptx(ptx)
    signature = kernel_signature(module.kernels[0])
    assert [(p.offset, p.size) for p in signature.params] == [(0, 1), (8, 8), (16, 2), (24, 4), (32, 8)]
    assert signature.size == 40
    program = _on(ptx, target)
    out = (ctypes.c_uint32 * 6)()
    program.launch("mixed", [200, -0.25, 0xBEEF, 0xCAFEF00D, out])
    assert list(out[:3]) == [200, 0xBEEF, 0xCAFEF00D]
    assert struct.pack("<II", out[4], out[5]) == struct.pack("<d", -0.25)


# --------------------------------------------------------------------------------------------------
# by-value array parameters (structs) at CUDA's offsets

STRUCT_PARAMS = HEADER + """
.visible .entry structs(.param .u32 tag, .param .align 8 .b8 s[24], .param .u8 flag,
                        .param .align 4 .b8 t[6], .param .u64 out)
{
    .reg .b16 %rs<3>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    .reg .f64 %fd<2>;
    ld.param.u32 %r1, [tag];
    ld.param.u64 %rd1, [out];
    ld.param.f64 %fd1, [s];
    ld.param.u32 %r2, [s+12];
    ld.param.u64 %rd2, [s+16];
    ld.param.u8 %rs1, [flag];
    ld.param.u16 %rs2, [t+4];
    ld.param.u32 %r3, [t];
    st.global.u32 [%rd1], %r1;
    mov.b64 %rd3, %fd1;
    st.global.u64 [%rd1+8], %rd3;
    st.global.u32 [%rd1+16], %r2;
    st.global.u64 [%rd1+24], %rd2;
    cvt.u32.u16 %r4, %rs1;
    st.global.u32 [%rd1+32], %r4;
    cvt.u32.u16 %r5, %rs2;
    st.global.u32 [%rd1+36], %r5;
    st.global.u32 [%rd1+40], %r3;
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_array_params_keep_cuda_layout(target):
    signature = kernel_signature(parse_ptx(STRUCT_PARAMS).kernels[0])
    assert [(p.offset, p.size, p.array) for p in signature.params] == [
        (0, 4, False), (8, 24, True), (32, 1, False), (36, 6, True), (48, 8, False)]
    assert signature.size == 56
    program = _on(STRUCT_PARAMS, target)
    out = (ctypes.c_uint32 * 11)()
    s = struct.pack("<dIIQ", 0.375, 0, 0xA5A5A5A5, 0x0123456789ABCDEF)
    t = struct.pack("<IH", 0xDEADBEEF, 0x7777)
    program.launch("structs", [7, s, 9, t, out])
    assert out[0] == 7 and struct.pack("<II", out[2], out[3]) == struct.pack("<d", 0.375)
    assert out[4] == 0xA5A5A5A5 and (out[7] << 32 | out[6]) == 0x0123456789ABCDEF
    assert list(out[8:11]) == [9, 0x7777, 0xDEADBEEF]
    with pytest.raises(FatkitError, match="takes 24 bytes"):
        program.launch("structs", [7, s[:8], 9, t, out])


@pytest.mark.parametrize("target", TARGETS)
def test_nvcc_by_value_struct_runs(target):
    # struct Params { float scale; int n; float* in; } passed by value, as nvcc's `.b8 [16]`.
    program = _on(SAMPLE.read_text(), target)
    n = 13
    source = (ctypes.c_float * 16)(*[i - 4.5 for i in range(16)])
    out = (ctypes.c_float * 16)(*([-1.0] * 16))
    params = struct.pack("<fiQ", 0.5, n, ctypes.addressof(source))
    program.launch("_Z11with_struct6ParamsPf", [params, out], block=(16,), buffers=(source,))
    assert list(out) == [f32(0.5 * (i - 4.5)) for i in range(n)] + [-1.0] * 3


@pytest.mark.parametrize("processor", ["gfx942", "gfx1100"])
def test_array_params_keep_cuda_layout_on_amdgpu(processor):
    code_object = translate(STRUCT_PARAMS, Options(target=processor)).validated
    (kernel,) = code_object.kernels
    explicit = [(a[".offset"], a[".size"]) for a in kernel.args if not a[".value_kind"].startswith("hidden_")]
    assert explicit == [(0, 4), (8, 24), (32, 1), (36, 6), (48, 8)]


# --------------------------------------------------------------------------------------------------
# memory: state spaces, vector widths, narrow types, .local arrays, module variables, cvta

MEMORY = HEADER + """
.global .align 4 .u32 table[4] = {10, 20, 0xFFFFFFFF};
.const .align 8 .f64 weights[2] = {0d3FF8000000000000, 2};
.global .align 1 .b8 bytes[4] = {0x80, 0x7F, 0xFE};
""" + entry("memory", "u64 out, u64 in", ".b16 %rs<3>, .b32 %r<12>, .f32 %f<5>, .b64 %rd<12>, .f64 %fd<3>", """
    cvta.to.global.u64 %rd1, %rd1;
    ld.global.v4.f32 {%f1, _, %f2, %f3}, [%rd2];
    st.global.v4.f32 [%rd1], {%f3, %f2, %f1, 0f40000000};
    ld.global.v2.u32 {%r1, %r2}, [table+4];
    st.global.v2.u32 [%rd1+16], {%r2, %r1};
    ld.global.s8 %r3, [bytes];
    ld.global.u8 %r4, [bytes];
    ld.global.s8 %rs1, [bytes+2];
    cvt.s32.s16 %r5, %rs1;
    st.global.v2.u32 [%rd1+24], {%r3, %r4};
    st.global.u32 [%rd1+32], %r5;
    ld.const.f64 %fd1, [weights];
    ld.const.f64 %fd2, [weights+8];
    add.f64 %fd1, %fd1, %fd2;
    st.global.f64 [%rd1+40], %fd1;
    mov.u64 %rd3, scratch;
    st.local.v4.u32 [%rd3], {%r1, %r2, %r3, %r4};
    cvta.local.u64 %rd4, %rd3;
    ld.u32 %r6, [%rd4+8];
    st.u16 [%rd4+16], %r6;
    cvta.to.local.u64 %rd5, %rd4;
    ld.local.s16 %r7, [%rd5+16];
    st.global.u32 [%rd1+48], %r7;
    mov.u64 %rd6, table;
    cvta.global.u64 %rd7, %rd6;
    st.u32 [%rd7+12], %r7;
    ld.global.u32 %r8, [table+12];
    st.global.u8 [%rd1+52], %r8;
    st.global.b16 [%rd1+54], %r8;
""", declarations=".local .align 16 .b8 scratch[32];")


@pytest.mark.parametrize("target", TARGETS)
def test_memory_spaces_vectors_and_module_variables(target):
    program = _on(MEMORY, target)
    source = (ctypes.c_float * 4)(1.5, 99.0, -2.0, 0.25)
    out = (ctypes.c_uint8 * 56)()
    program.launch("memory", [out, source])
    raw = bytes(out)
    assert struct.unpack_from("<4f", raw, 0) == (0.25, -2.0, 1.5, 2.0)
    assert struct.unpack_from("<2I", raw, 16) == (0xFFFFFFFF, 20)
    assert struct.unpack_from("<3i", raw, 24) == (-128, 0x80, -2)
    assert struct.unpack_from("<d", raw, 40) == (3.5,)
    # the s8 -128 went through .local, generic and back: its low 16 bits, sign-extended
    assert struct.unpack_from("<i", raw, 48) == (-128,)
    assert raw[52] == 0x80 and struct.unpack_from("<H", raw, 54) == (0xFF80,)


@pytest.mark.parametrize("processor", ["gfx942", "gfx1100"])
def test_memory_spaces_compile_for_amdgpu(processor):
    result = translate(MEMORY, Options(target=processor, opt_level=0))  # -O2 would promote the .local array
    assert [k.status for k in result.kernels] == ["ok"]
    lowered = STAGES[2][1](STAGES[1][1](parse_ptx(MEMORY), result.options), result.options)
    ir_text = lowered.kernels[0].llvm_ir
    # .const in the constant space; not an LLVM constant, since the host writes it between launches
    assert '@"weights" = linkonce_odr protected addrspace(4) global' in ir_text
    assert "addrspacecast ptr addrspace(5)" in ir_text and "to ptr addrspace(5)" in ir_text  # cvta both ways
    (kernel,) = result.validated.kernels
    assert kernel.private_segment_size >= 32  # the .local array is on the stack


def test_unknown_initializer_is_reported():
    ptx = MEMORY.replace("{10, 20, 0xFFFFFFFF}", "{10, 20, generic(bytes)}")
    with pytest.raises(FatkitError, match=r"memory: line 5: .global table: initializer .*generic=True"):
        translate(ptx, Options(target="host"))


# --------------------------------------------------------------------------------------------------
# calls of .func functions with .param arguments and returns, recursion included

CALLS = HEADER + """
.func (.param .b64 fact_ret) fact(.param .b32 fact_n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<4>;
    ld.param.b32 %r1, [fact_n];
    setp.lt.u32 %p1, %r1, 2;
    mov.u64 %rd1, 1;
    @%p1 bra DONE;
    add.s32 %r2, %r1, -1;
    {
    .param .b32 param0;
    st.param.b32 [param0], %r2;
    .param .b64 retval0;
    call.uni (retval0), fact, (param0);
    ld.param.b64 %rd2, [retval0];
    }
    cvt.u64.u32 %rd3, %r1;
    mul.lo.s64 %rd1, %rd2, %rd3;
DONE:
    st.param.b64 [fact_ret], %rd1;
    ret;
}
.func (.param .align 4 .b8 pair_ret[8]) swap_scale(.param .align 4 .b8 pair[8], .param .f32 scale)
{
    .reg .f32 %f<4>;
    ld.param.f32 %f1, [pair];
    ld.param.f32 %f2, [pair+4];
    ld.param.f32 %f3, [scale];
    mul.f32 %f1, %f1, %f3;
    mul.f32 %f2, %f2, %f3;
    st.param.f32 [pair_ret], %f2;
    st.param.f32 [pair_ret+4], %f1;
}
.func bump(.param .b64 where)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;
    ld.param.b64 %rd1, [where];
    ld.global.u32 %r1, [%rd1];
    add.s32 %r1, %r1, %tid.x;
    st.global.u32 [%rd1], %r1;
}
""" + entry("calls", "u64 out", ".pred %p<2>, .b32 %r<3>, .f32 %f<3>, .b64 %rd<4>", """
    mov.u32 %r1, %tid.x;
    add.s32 %r2, %r1, 3;
    {
    .param .b32 param0;
    st.param.b32 [param0], %r2;
    .param .b64 retval0;
    call.uni (retval0), fact, (param0);
    ld.param.b64 %rd2, [retval0];
    }
    mul.wide.u32 %rd3, %r1, 8;
    add.s64 %rd3, %rd1, %rd3;
    st.global.u64 [%rd3], %rd2;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra END;
    {
    .param .align 4 .b8 param0[8];
    st.param.v2.f32 [param0], {0f3FC00000, 0fC0000000};
    .param .f32 param1;
    st.param.f32 [param1], 0f40800000;
    .param .align 4 .b8 retval0[8];
    call.uni (retval0), swap_scale, (param0, param1);
    ld.param.v2.f32 {%f1, %f2}, [retval0];
    }
    st.global.v2.f32 [%rd1+64], {%f1, %f2};
END:
    {
    .param .b64 param0;
    add.s64 %rd3, %rd1, 72;
    st.param.b64 [param0], %rd3;
    call.uni bump, (param0);
    }
""")


@pytest.mark.parametrize("target", TARGETS)
def test_calls_with_param_arguments_and_recursion(target):
    program = _on(CALLS, target)
    out = (ctypes.c_uint64 * 10)()
    program.launch("calls", [out], block=(8,))
    assert list(out[:8]) == [math.factorial(t + 3) for t in range(8)]
    assert struct.unpack("<2f", struct.pack("<Q", out[8])) == (-8.0, 6.0)
    # bump adds each thread's %tid.x (in a called function) with a plain load and store: the host runs the
    # threads one after another, so the adds pile up; the 8 lanes of one AMD wave load 0 together and the
    # highest lane's store lands last, as on a GPU
    assert out[9] == (sum(range(8)) if target == "host" else 7)


@pytest.mark.parametrize("processor", ["gfx942", "gfx1100"])
def test_calls_compile_for_amdgpu(processor):
    result = translate(CALLS, Options(target=processor))
    assert [k.status for k in result.kernels] == ["ok"]
    assert [k.name for k in result.validated.kernels] == ["calls"]
    lowered = STAGES[2][1](STAGES[1][1](parse_ptx(CALLS), result.options), result.options)
    assert 'define internal void @"fact"(ptr addrspace(5)' in lowered.kernels[0].llvm_ir


def test_call_of_an_undefined_function_is_reported():
    ptx = CALLS.replace("call.uni bump, (param0);", "call.uni nowhere, (param0);")
    with pytest.raises(FatkitError, match="line 84: call.uni: nowhere is not a .func defined in this module"):
        translate(ptx, Options(target="host"))


# --------------------------------------------------------------------------------------------------
# .shared memory and barriers: LDS on amdgpu; on the host a shared window and a thread per GPU thread

SHARED = HEADER + "\n" + entry("shared", "u64 out", ".b32 %r<6>, .f32 %f<3>, .b64 %rd<2>", """
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, tile;
    add.s32 %r4, %r3, %r2;
    st.shared.u32 [%r4], %r1;
    cvt.rn.f32.u32 %f1, %r1;
    st.shared.f32 [one], %f1;
    barrier.sync.aligned 0;
    ld.shared.u32 %r5, [%r4+4];
    ld.shared.f32 %f2, [one];
    st.shared.u32 [pair+8], %r5;
    bar.sync 0;
    ld.shared.u32 %r5, [pair+8];
    st.global.u32 [%rd1], %r5;
    st.global.f32 [%rd1+4], %f2;
""", declarations=".shared .align 16 .b8 tile[1000];\n.shared .align 4 .f32 one;\n.shared .align 8 .b8 pair[16];")


@pytest.mark.parametrize("processor", ["gfx942", "gfx1100"])
def test_shared_variables_are_lds_with_barriers(processor):
    # At -O0 LLVM keeps every variable; at -O2 it may drop one it proves unused, never add bytes.
    result = translate(SHARED, Options(target=processor, opt_level=0))
    assert [k.status for k in result.kernels] == ["ok"]
    (descriptor,) = result.validated.descriptors
    assert descriptor.group_segment_fixed_size == 1024  # tile 0–1000, one 1000–1004, pair 1008–1024
    (kernel,) = result.validated.kernels
    assert kernel.group_segment_size == descriptor.group_segment_fixed_size
    lowered = STAGES[2][1](STAGES[1][1](parse_ptx(SHARED), result.options), result.options)
    ir_text = lowered.kernels[0].llvm_ir
    assert "addrspace(3)" in ir_text and ir_text.count("call void @\"llvm.amdgcn.s.barrier\"()") == 2
    assert ir_text.count('fence syncscope("workgroup") release') == 2


@pytest.mark.parametrize("target", TARGETS)
def test_nvcc_shared_reduction_runs(target):
    # Without a barrier that holds each thread until the block arrives, thread 0 would add tile[64]
    # before thread 64 stored it.
    program = _on(SAMPLE.read_text(), target)
    if target == "host":
        assert program.product.with_barriers == {"_Z13reduce_sharedPKfPf"}
    values = [float((i * 7) % 23) - 5.0 for i in range(3 * 128)]
    source = (ctypes.c_float * len(values))(*values)
    out = (ctypes.c_float * 3)()
    program.launch("_Z13reduce_sharedPKfPf", [source, out], grid=(3,), block=(128,))
    assert list(out) == [sum(values[b * 128:(b + 1) * 128]) for b in range(3)]


@pytest.mark.parametrize("target", TARGETS)
def test_shared_addresses_and_barriers(target):
    # Each thread stores its id, waits, then reads its neighbour's slot through a 32-bit shared address,
    # a generic pointer (cvta.shared) and back (cvta.to.shared).
    ptx = HEADER + "\n" + entry("neighbours", "u64 out", ".pred %p<2>, .b32 %r<10>, .b64 %rd<6>", """
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ntid.x;
    shl.b32 %r3, %r1, 2;
    mov.u32 %r4, slots;
    add.s32 %r5, %r4, %r3;
    add.s32 %r9, %r1, 100;
    st.shared.u32 [%r5], %r9;
    barrier.sync.aligned 0;
    add.s32 %r6, %r1, 1;
    setp.eq.u32 %p1, %r6, %r2;
    @%p1 mov.u32 %r6, 0;
    shl.b32 %r6, %r6, 2;
    add.s32 %r7, %r4, %r6;
    cvt.u64.u32 %rd2, %r7;
    cvta.shared.u64 %rd3, %rd2;
    ld.u32 %r8, [%rd3];
    cvta.to.shared.u64 %rd4, %rd3;
    cvt.u32.u64 %r7, %rd4;
    ld.shared.u32 %r9, [%r7];
    add.s32 %r8, %r8, %r9;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd5, %rd1, %rd5;
    bar.sync 0;
    st.global.u32 [%rd5], %r8;
""", declarations=".shared .align 4 .b8 slots[64];")
    program = _on(ptx, target)
    out = (ctypes.c_uint32 * 16)()
    program.launch("neighbours", [out], block=(16,))  # one block: no leftovers to read
    assert list(out) == [2 * (100 + (t + 1) % 16) for t in range(16)]
    for processor in ("gfx942", "gfx1100"):
        assert translate(ptx, Options(target=processor)).validated.descriptors[0].group_segment_fixed_size == 64


# --------------------------------------------------------------------------------------------------
# unsupported PTX: reported with its line, only its kernel skipped

TWO_KERNELS = HEADER + "\n" + entry("good", "u64 out", ".b32 %r<2>, .b64 %rd<2>", """
    mov.u32 %r1, %tid.x;
    st.global.u32 [%rd1], %r1;
""") + """.visible .entry bad(.param .u64 out)
{
    .reg .b32 %r<3>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %envreg3;
    ret;
}
"""


def test_unsupported_instruction_names_instruction_and_line():
    module = parse_ptx(TWO_KERNELS)
    bad = module.kernels[1]
    with pytest.raises(FatkitError) as raised:
        lower_kernel(bad, register_types(bad), target_named("host"))
    assert isinstance(raised.value, Unsupported)
    assert raised.value.line == 17 and raised.value.instruction == "mov.u32"
    assert "%envreg3" in str(raised.value) and "line 17" in str(raised.value)


@pytest.mark.parametrize("target", ["host", "gfx942"])
def test_unsupported_kernel_is_skipped_and_reported(target):
    result = translate(TWO_KERNELS, Options(target=target))
    reports = {k.name: k for k in result.kernels}
    assert reports["good"].status == "ok"
    assert reports["bad"].status == "unsupported" and reports["bad"].line == 17
    assert "%envreg3" in reports["bad"].reason
    if target == "host":
        assert set(result.product.signatures) == {"good"}
    else:
        assert [k.name for k in parse_code_object(result.product).kernels] == ["good"]


def test_module_without_supported_kernels_is_an_error():
    only_bad = TWO_KERNELS[:TWO_KERNELS.index(".visible .entry good")] + \
        TWO_KERNELS[TWO_KERNELS.index(".visible .entry bad"):]
    with pytest.raises(FatkitError, match="%envreg3"):
        translate(only_bad, Options(target="host"))


# --------------------------------------------------------------------------------------------------
# AMD code objects


@pytest.mark.parametrize("processor, wave", [("gfx942", 64), ("gfx90a", 64), ("gfx1100", 32), ("gfx1201", 32)])
def test_amdgpu_code_object(processor, wave):
    text = SAMPLE.read_text()
    result = translate(text, Options(target=processor))
    code_object = parse_code_object(result.product)
    assert code_object.e_type == 3  # ET_DYN
    assert code_object.processor == processor and code_object.code_object_version == 5
    ok = [k.name for k in result.kernels if k.status == "ok"]
    assert "_Z5saxpyfPKfPfi" in ok
    assert sorted(k.name for k in code_object.kernels) == sorted(ok)
    assert all(k.status == "ok" for k in result.kernels)
    module = parse_ptx(text)
    for kernel in code_object.kernels:
        signature = kernel_signature(module.function(kernel.name))
        explicit = [(a[".offset"], a[".size"]) for a in kernel.args if not a[".value_kind"].startswith("hidden_")]
        assert explicit == [(p.offset, p.size) for p in signature.params]
        assert kernel.kernarg_size >= signature.size
        assert kernel.wavefront_size == wave
    saxpy = next(k for k in code_object.kernels if k.name == "_Z5saxpyfPKfPfi")
    assert [a[".size"] for a in saxpy.args[:4]] == [4, 8, 8, 4]  # 28 bytes of PTX parameters
    with_struct = next(k for k in code_object.kernels if k.name == "_Z11with_struct6ParamsPf")
    assert [(a[".offset"], a[".size"]) for a in with_struct.args[:2]] == [(0, 16), (16, 8)]
    lds = {d.name: d.group_segment_fixed_size for d in code_object.descriptors}
    assert lds["_Z13reduce_sharedPKfPf"] == 512 and lds["_Z5saxpyfPKfPfi"] == 0


def test_validate_rejects_a_code_object_missing_a_kernel():
    lowered = STAGES[2][1](STAGES[1][1](parse_ptx(TWO_KERNELS), Options()), Options())
    target = lowered.target
    product = target.codegen(list(lowered.kernels), 2).product
    target.validate(product, list(lowered.kernels))
    other = STAGES[2][1](STAGES[1][1](parse_ptx(SAMPLE.read_text()), Options()), Options())
    with pytest.raises(FatkitError, match="expected"):
        target.validate(product, list(other.kernels))


def test_stages_are_named_in_order():
    assert [name for name, _ in STAGES] == ["parse", "passes", "lower", "codegen", "validate"]
    assert hash(Options("gfx942", 2)) == hash(Options("gfx942", 2))
    with pytest.raises(FatkitError):
        Options("gfx942", 7)
    with pytest.raises(FatkitError):
        translate(TWO_KERNELS, Options(target="vulkan"))


@pytest.mark.parametrize("target", TARGETS)
def test_parameters_with_names_past_llvm_s_limit_stay_distinct(target):
    """C++ template kernels (xformers' CUTLASS ones) have parameter names over 1024 characters that differ only
    in their `_param_N` ends; LLVM cuts local names at 1024, so they must be shortened distinctly."""
    name = "_Z" + "x" * 1100
    text = f"""
.version 8.0
.target sm_80
.address_size 64
.func (.param .b32 {name}_ret) {name}_f(.param .b32 {name}_param_0, .param .b32 {name}_param_1)
{{
    .reg .b32 %r<3>;
    ld.param.u32 %r1, [{name}_param_0];
    ld.param.u32 %r2, [{name}_param_1];
    sub.s32 %r1, %r1, %r2;
    st.param.b32 [{name}_ret], %r1;
    ret;
}}
.visible .entry {name}(.param .u64 {name}_param_0, .param .u32 {name}_param_1, .param .u32 {name}_param_2)
{{
    .reg .b64 %rd<2>;
    .reg .b32 %r<4>;
    ld.param.u64 %rd1, [{name}_param_0];
    ld.param.u32 %r1, [{name}_param_1];
    ld.param.u32 %r2, [{name}_param_2];
    {{
    .param .b32 a;
    .param .b32 b;
    .param .b32 r;
    st.param.b32 [a], %r1;
    st.param.b32 [b], %r2;
    call.uni (r), {name}_f, (a, b);
    ld.param.b32 %r3, [r];
    }}
    st.global.u32 [%rd1], %r3;
    ret;
}}
"""
    assert [k.status for k in translate(text, Options(target=target)).kernels] == ["ok"]
    out = (ctypes.c_int32 * 1)()
    _on(text, target).launch(name, [out, 50, 8])
    assert out[0] == 42


@pytest.mark.parametrize("target, kind, expected", [
    ("host", "llvm", b"define void @_Z5saxpyfPKfPfi"),
    ("host", "asm", b"_Z5saxpyfPKfPfi:"),
    ("sm_90", "asm", b".entry _Z5saxpyfPKfPfi"),
    ("sm_90", "llvm", b"nvptx64-nvidia-cuda"),
    ("gfx1100", "asm", b"s_endpgm"),
    ("gfx1100", "llvm", b"amdgcn-amd-amdhsa"),
])
def test_every_target_emits_through_run(target, kind, expected):
    """`emit` is the Target interface's: the same run() gives each target's IR and assembly."""
    result = run(SAMPLE.read_text(), Options(target=target, emit=kind))
    assert expected in result.product and result.validated is None
    assert [k.status for k in result.kernels] == ["ok"] * 7


def test_run_stops_where_asked_and_reports_each_stage():
    seen: list[str] = []
    lowered = run(SAMPLE.read_text(), Options(target="gfx942"), until="lower",
                  on_stage=lambda name, value, seconds: seen.append(name))
    assert seen == ["parse", "passes", "lower"] and lowered.kernels[0].signature.name == "_Z5saxpyfPKfPfi"
    assert finish(lowered, Options(target="gfx942")).validated.target_id == "gfx942"
    one_pass = run(SAMPLE.read_text(), Options(), until="scopes", on_stage=lambda *stage: seen.append(stage[0]))
    assert seen[-2:] == ["parse", "passes"] and one_pass.module.kernels
    with pytest.raises(FatkitError, match="no stage or pass"):
        run(SAMPLE.read_text(), Options(), until="optimise")


def test_lowering_in_processes_keeps_the_module_order_and_the_collector_state(monkeypatch):
    """Kernels lowered in forked processes, largest first, come back in the module's order with the same IR
    as lowered here; a small module is lowered here whatever `jobs` says; the cycle collector a run holds off
    is on again after it (and stays off where the caller turned it off)."""
    import gc
    import multiprocessing

    from fatkit.translate import pipeline

    text = (Path(__file__).parent / "samples" / "ptx" / "basics.sm_80.ptx").read_text()
    prepared = run(text, Options(), until="passes")
    sizes = [sum(1 for _ in kernel.statements()) for kernel in prepared.module.kernels]
    assert sizes != sorted(sizes, reverse=True) and sum(sizes) >= pipeline._FORKED_STATEMENTS
    forks = []
    monkeypatch.setattr(pipeline, "get_context",
                        lambda method: forks.append(method) or multiprocessing.get_context(method))
    # (each run from a Prepared of its own: a second lowering of one Prepared for gfx942 takes the first's kernels)
    here = run_from("lower", prepared, Options(jobs=1), until="lower")
    forked = run_from("lower", run(text, Options(), until="passes"), Options(jobs=2), until="lower")
    assert forks == ["fork"]
    assert [k.llvm_ir for k in forked.kernels] == [k.llvm_ir for k in here.kernels]
    assert [r.name for r in forked.reports] == [k.name for k in prepared.module.kernels]
    monkeypatch.setattr(pipeline, "_FORKED_STATEMENTS", sum(sizes) + 1)
    assert [k.llvm_ir for k in run_from("lower", run(text, Options(), until="passes"), Options(jobs=2),
                                        until="lower").kernels] == [k.llvm_ir for k in here.kernels]
    assert forks == ["fork"]
    assert gc.isenabled()
    gc.disable()
    try:
        run(text, Options(), until="lower")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_one_prepared_module_lowers_for_every_target_as_a_run_of_its_own():
    """Parse and passes once, then lower and compile per target: the same code objects as separate runs,
    and the Prepared is left as it was (a second lowering for the first target gives the same bytes)."""
    text = (Path(__file__).parent / "samples" / "ptx" / "basics.sm_80.ptx").read_text()
    prepared = run(text, Options(), until="passes")
    products = {}
    for target in ("gfx942", "gfx1100", "gfx942"):
        options = Options(target=target)
        products.setdefault(target, []).append(run_from("lower", prepared, options).product)
    for target, made in products.items():
        assert all(product == translate(text, Options(target=target)).product for product in made)
    assert products["gfx942"][0] != products["gfx1100"][0]
    with pytest.raises(FatkitError, match="cannot stop at"):
        run_from("lower", prepared, Options(), until="passes")


SHARED_LOWERING_SAMPLES = ("basics.sm_80", "warp.sm_86", "asm_mma.sm_80", "hopper.sm_90a", "texsurf.sm_80")


@pytest.mark.parametrize("targets", [("gfx942", "gfx950"), ("gfx1100", "gfx1101", "gfx1102"), ("gfx1200", "gfx1201")])
def test_targets_of_one_lowering_key_share_the_lowered_kernels(targets, monkeypatch):
    """Targets with one `lowering_key` (generation, wave size, matrix instructions, images) lower every sample
    to the same IR each on its own, so a run for them lowers each kernel once; the kernels that do not lower
    are lowered again and reported naming each target. Targets of other keys (gfx90a has images, gfx1030 no
    WMMA) lower apart."""
    from fatkit.translate import pipeline

    assert len({target_named(t).lowering_key() for t in targets}) == 1
    assert len({target_named(t).lowering_key() for t in ("gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1200")}) == 5
    for stem in SHARED_LOWERING_SAMPLES:
        text = (Path(__file__).parent / "samples" / "ptx" / f"{stem}.ptx").read_text()
        apart = [run_from("lower", run(text, Options(), until="passes"), Options(target=t), until="lower")
                 for t in targets]
        for lowered in apart[1:]:
            assert [k.llvm_ir for k in lowered.kernels] == [k.llvm_ir for k in apart[0].kernels], stem
        prepared = run(text, Options(), until="passes")
        lowerings = []
        lower_one = pipeline._lower_one
        monkeypatch.setattr(pipeline, "_lower_one", lambda *args: lowerings.append(args[-1]) or lower_one(*args))
        together = [run_from("lower", prepared, Options(target=t), until="lower") for t in targets]
        failing = [i for i, r in enumerate(together[0].reports) if r.status != "ok"]
        assert sorted(lowerings) == sorted(list(range(len(prepared.module.kernels))) + failing * (len(targets) - 1))
        for target, lowered, alone in zip(targets, together, apart):
            assert [k.llvm_ir for k in lowered.kernels] == [k.llvm_ir for k in alone.kernels]
            assert lowered.reports == alone.reports and lowered.target.name == target
        monkeypatch.undo()
