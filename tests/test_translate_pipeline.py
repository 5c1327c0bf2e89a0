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
from fatkit.translate.pipeline import STAGES, Options, translate
from fatkit.translate.ptx import parse_ptx
from fatkit.translate.targets import target_named

SAMPLE = Path(__file__).parent / "samples" / "nv_kern_sm90.ptx"
M32, M64 = (1 << 32) - 1, (1 << 64) - 1
HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"


def f32(x: float) -> float:
    return ctypes.c_float(x).value


def bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def from_bits(b: int) -> float:
    return struct.unpack("<f", struct.pack("<I", b))[0]


def signed(x: int) -> int:
    return x - (1 << 32) if x & 0x80000000 else x


def table_kernel(name: str, ops: list[str]) -> str:
    """A kernel where thread i reads a[i], b[i] (32 bits each) and op k writes out[i*len(ops)+k] (64 bits).

    Each op's PTX leaves its result in %rd10, or in %r10 (then zero-extended).
    """
    body = []
    for k, op in enumerate(ops):
        body.append(op.replace("@K", str(k)))
        if "%rd10," not in op:
            body.append("cvt.u64.u32 %rd10, %r10;")
        body.append(f"st.global.u64 [%rd8+{8 * k}], %rd10;")
    return HEADER + f"""
.visible .entry {name}(.param .u64 pa, .param .u64 pb, .param .u64 pout)
{{
    .reg .pred %p<4>;
    .reg .b16 %rs<2>;
    .reg .b32 %r<16>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<16>;
    .reg .f64 %fd<2>;
    ld.param.u64 %rd1, [pa];
    ld.param.u64 %rd2, [pb];
    ld.param.u64 %rd3, [pout];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.u32 %r2, [%rd5];
    add.s64 %rd6, %rd2, %rd4;
    ld.global.u32 %r3, [%rd6];
    mov.b32 %f2, %r2;
    mov.b32 %f3, %r3;
    mul.wide.u32 %rd7, %r1, {8 * len(ops)};
    add.s64 %rd8, %rd3, %rd7;
    {chr(10).join(body)}
    ret;
}}
"""


def run_table(name: str, ops: list[str], a: list[int], b: list[int]) -> list[list[int]]:
    program = translate(table_kernel(name, ops), Options(target="host")).product
    n = len(a)
    in_a, in_b = (ctypes.c_uint32 * n)(*a), (ctypes.c_uint32 * n)(*b)
    out = (ctypes.c_uint64 * (n * len(ops)))()
    program.launch(name, [ctypes.addressof(in_a), ctypes.addressof(in_b), ctypes.addressof(out)],
                   block=(n, 1, 1))
    return [list(out[i * len(ops):(i + 1) * len(ops)]) for i in range(n)]


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


def test_integer_instructions_on_host():
    results = run_table("ints", [op for op, _ in INT_OPS], INT_A, INT_B)
    for a, b, row in zip(INT_A, INT_B, results):
        for (op, expected), got in zip(INT_OPS, row):
            assert got == expected(a, b), f"{op!r} a={a:#x} b={b:#x}"


# --------------------------------------------------------------------------------------------------
# f32 instructions and conversions

NAN, INF = float("nan"), float("inf")
FLOAT_A = [1.5, -2.5, 2.5, 0.0, -0.0, NAN, INF, -INF, 3.0e9, -3.0e9, 1e-40, 16777217.0, 0.75, -0.5]
FLOAT_B = [0.25, 2.5, NAN, -0.0, 0.0, 1.0, INF, 5.0, 1.0, -1.0, 1e-40, 1.0, -0.75, 7.0]


def _saturate(x: float, low: int, high: int, rounding) -> int:
    if math.isnan(x):
        return 0
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


def test_f32_instructions_on_host():
    a_in, b_in = [f32(x) for x in FLOAT_A], [f32(x) for x in FLOAT_B]
    results = run_table("floats", [op for op, _ in FLOAT_OPS], [bits(x) for x in a_in], [bits(x) for x in b_in])
    for a, b, row in zip(a_in, b_in, results):
        for (op, expected), got in zip(FLOAT_OPS, row):
            want = expected(a, b)
            if op.endswith("mov.b32 %r10, %f4;") and math.isnan(from_bits(want)):
                assert math.isnan(from_bits(got)), f"{op!r} a={a} b={b}"
            else:
                assert got == want, f"{op!r} a={a} b={b}: {got:#x} != {want:#x}"


def test_fma_rounds_once():
    # (1+2^-12)^2 - (1+2^-11) is 2^-24 exactly; mul then add would round the product and give 0.
    a, c = from_bits(bits(1 + 2**-12)), f32(-(1 + 2**-11))
    ops = ["fma.rn.f32 %f4, %f2, %f2, %f3;\nmov.b32 %r10, %f4;",
           "mad.rn.f32 %f4, %f2, %f2, %f3;\nmov.b32 %r10, %f4;",
           "mul.f32 %f4, %f2, %f2;\nadd.f32 %f4, %f4, %f3;\nmov.b32 %r10, %f4;"]
    (row,) = run_table("fma", ops, [bits(a)], [bits(c)])
    exact = Fraction(a) * Fraction(a) + Fraction(c)
    assert exact == Fraction(1, 2**24)
    assert row == [bits(2**-24), bits(2**-24), 0]


# --------------------------------------------------------------------------------------------------
# saxpy on the host: nvcc's PTX and a hand-written one with a 2-D grid


def _saxpy(program, kernel: str, n: int, grid, block, a: float = 2.0):
    x = (ctypes.c_float * n)(*[i * 0.5 for i in range(n)])
    y = (ctypes.c_float * n)(*[100.0 - i for i in range(n)])
    program.launch(kernel, [a, ctypes.addressof(x), ctypes.addressof(y), n], grid=grid, block=block)
    return list(y), [f32(a * (i * 0.5) + (100.0 - i)) for i in range(n)]


def test_nvcc_saxpy_runs_on_host():
    program = translate(SAMPLE.read_text(), Options(target="host")).product
    got, expected = _saxpy(program, "_Z5saxpyfPKfPfi", 37, grid=(3,), block=(16,))
    assert got == expected  # 48 threads, the last 11 outside n and guarded off


def test_hand_written_2d_saxpy_on_host():
    ptx = HEADER + """
.visible .entry saxpy2d(.param .f32 a, .param .u64 x, .param .u64 y, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .f32 %f<5>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    ld.param.f32 %f1, [a];
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [y];
    ld.param.u32 %r1, [n];
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
}
"""
    program = translate(ptx, Options(target="host", opt_level=0)).product
    got, expected = _saxpy(program, "saxpy2d", 45, grid=(2, 2, 1), block=(4, 3, 1), a=-1.5)
    assert got == expected


def test_param_offsets_follow_cuda_layout():
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
    program = translate(ptx, Options(target="host")).product
    out = (ctypes.c_uint32 * 6)()
    program.launch("mixed", [200, -0.25, 0xBEEF, 0xCAFEF00D, ctypes.addressof(out)])
    assert list(out[:3]) == [200, 0xBEEF, 0xCAFEF00D]
    assert struct.pack("<II", out[4], out[5]) == struct.pack("<d", -0.25)


# --------------------------------------------------------------------------------------------------
# unsupported PTX: reported with its line, only its kernel skipped

TWO_KERNELS = HEADER + """
.visible .entry good(.param .u64 out)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    st.global.u32 [%rd1], %r1;
}
.visible .entry bad(.param .u64 out)
{
    .reg .b32 %r<3>;
    mov.u32 %r1, %tid.x;
    popc.b32 %r2, %r1;
    ret;
}
"""


def test_unsupported_instruction_names_instruction_and_line():
    module = parse_ptx(TWO_KERNELS)
    bad = module.kernels[1]
    with pytest.raises(FatkitError) as raised:
        lower_kernel(bad, register_types(bad), target_named("host"))
    assert isinstance(raised.value, Unsupported)
    assert raised.value.line == 17 and raised.value.instruction == "popc.b32"
    assert "popc.b32" in str(raised.value) and "line 17" in str(raised.value)


@pytest.mark.parametrize("target", ["host", "gfx942"])
def test_unsupported_kernel_is_skipped_and_reported(target):
    result = translate(TWO_KERNELS, Options(target=target))
    reports = {k.name: k for k in result.kernels}
    assert reports["good"].status == "ok"
    assert reports["bad"].status == "unsupported" and reports["bad"].line == 17
    assert "popc.b32" in reports["bad"].reason
    if target == "host":
        assert set(result.product.signatures) == {"good"}
    else:
        assert [k.name for k in parse_code_object(result.product).kernels] == ["good"]


def test_module_without_supported_kernels_is_an_error():
    only_bad = TWO_KERNELS[:TWO_KERNELS.index(".visible .entry good")] + \
        TWO_KERNELS[TWO_KERNELS.index(".visible .entry bad"):]
    with pytest.raises(FatkitError, match="popc.b32"):
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
    unsupported = {k.name for k in result.kernels if k.status == "unsupported"}
    assert unsupported == {"_Z13reduce_sharedPKfPf", "_Z11with_struct6ParamsPf"}
    module = parse_ptx(text)
    for kernel in code_object.kernels:
        signature = kernel_signature(module.function(kernel.name))
        explicit = [(a[".offset"], a[".size"]) for a in kernel.args if not a[".value_kind"].startswith("hidden_")]
        assert explicit == [(p.offset, p.size) for p in signature.params]
        assert kernel.kernarg_size >= signature.size
        assert kernel.wavefront_size == wave
    saxpy = next(k for k in code_object.kernels if k.name == "_Z5saxpyfPKfPfi")
    assert [a[".size"] for a in saxpy.args[:4]] == [4, 8, 8, 4]  # 28 bytes of PTX parameters


def test_validate_rejects_a_code_object_missing_a_kernel():
    lowered = STAGES[2][1](STAGES[1][1](parse_ptx(TWO_KERNELS), Options()), Options())
    target = lowered.target
    product = target.codegen(list(lowered.kernels), 2)
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
        translate(TWO_KERNELS, Options(target="sm_90"))
