"""Operand and declaration forms the passes rewrite before lowering, run on the host against Python:
guarded vector movs, `.b128` registers (mov pack/unpack, ld/st), vector registers (`.reg .v4 .u32 %v`,
`%v.x`), `WARP_SZ`, loads and stores through registers wider than the instruction type, `.local` variables
through generic addresses, and `.global` initialisers holding addresses (with their AMD relocations).

Expected values are computed here from the ISA's rules (the element order of a vector mov is first element in
the low bits; a destination register wider than the instruction type is sign-extended for .s types and
zero-extended otherwise; WARP_SZ is 32). Every kernel is also compiled for gfx942 and gfx1100.
"""

from __future__ import annotations

import ctypes
import itertools
import random
import subprocess
from pathlib import Path

import pytest

from fatkit.translate.pipeline import Options, translate
from tests.amdrun import TARGETS
from tests.amdrun import program as loaded_program
from tests.ptxrun import HEADER, M32, M64, run_table, table_kernel
from tests.ptxframes import entry

READELF = Path("/usr/lib/llvm-22/bin/llvm-readelf")

EDGES = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x3F800000,
         0x807F01FE]
_rng = random.Random(2_17)
A = EDGES + [_rng.getrandbits(32) for _ in range(64 - len(EDGES))]
B = list(reversed(EDGES)) + [_rng.getrandbits(32) for _ in range(64 - len(EDGES))]


def sx(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


# Each op: PTX leaving its result in %rd10 (or %r10), and the model of it from a, b (the thread's inputs in
# %r2, %r3; %rd5 and %rd6 point to them in global memory).
OPS: list[tuple[str, object]] = [
    ("mov.u64 %rd10, 7;\nsetp.lt.u32 %p1, %r2, %r3;\n@%p1 mov.b64 %rd10, {%r2, %r3};",
     lambda a, b: (a | b << 32) if a < b else 7),
    (("mov.b64 %rd11, {%r3, %r2};\nmov.u32 %r10, 5;\nmov.u32 %r11, 6;\nsetp.ge.u32 %p1, %r2, %r3;\n"
     "@%p1 mov.b64 {%r10, %r11}, %rd11;\nmov.b64 %rd10, {%r11, %r10};"),
     lambda a, b: (b << 32 | a) if a >= b else (6 | 5 << 32)),
    (("setp.lt.u32 %p1, %r2, %r3;\nmov.b32 %r10, 0x01020304;\n@!%p1 mov.b32 {_, %rs1}, %r2;\n"
     "@!%p1 cvt.u32.u16 %r10, %rs1;"), lambda a, b: 0x01020304 if a < b else a >> 16),
    (("{\n.reg .b128 %q<3>;\ncvt.u64.u32 %rd11, %r2;\nmov.b64 %rd12, {%r3, %r2};\nmov.b128 %q1, {%rd11, %rd12};\n"
     "mov.b128 %q2, %q1;\nmov.b128 {%rd13, %rd10}, %q2;\nxor.b64 %rd10, %rd10, %rd13;\n}"),
     lambda a, b: (b | a << 32) ^ a),
    (("{\n.reg .b128 %q;\n.local .align 16 .b8 s[32];\nmov.b64 %rd11, {%r2, %r3};\nmov.b64 %rd12, {%r3, %r2};\n"
     "mov.b128 %q, {%rd11, %rd12};\nst.local.b128 [s+16], %q;\nld.local.u32 %r10, [s+20];\nld.local.b128 %q, [s+16];\n"
     "mov.b128 {_, %rd12}, %q;\nsetp.eq.u64 %p1, %rd12, %rd11;\n@%p1 add.u32 %r10, %r10, 1;\n}"),
     lambda a, b: (b + (1 if (b | a << 32) == (a | b << 32) else 0)) & M32),
    (("{\n.reg .b128 %q;\nmov.b128 %q, {%r2, %r3, %r2, %r3};\nmov.b128 {%r10, _, _, %r11}, %q;\n"
     "mov.b64 %rd10, {%r11, %r10};\n}"), lambda a, b: b | a << 32),
    (("{\n.reg .v4 .u32 %v;\n.reg .v2 .f32 %w;\nmov.u32 %v.x, %r2;\nmov.u32 %v.y, %r3;\nadd.u32 %v.z, %v.x, %v.y;\n"
     "sub.u32 %v.w, %v.x, %v.y;\nmov.b32 %w.x, %v.z;\nmov.b32 %w.g, %v.a;\n"
     ".local .align 16 .b8 s[16];\nst.local.v4.u32 [s], %v;\nld.local.v2.f32 %w, [s+8];\n"
     "mov.b64 %rd10, %w;\n}"), lambda a, b: ((a + b) & M32) | ((a - b) & M32) << 32),
    ("{\n.reg .v2 .b32 %v<2>;\nmov.b64 {%v1.x, %v1.y}, %rd5;\nmov.b64 %rd10, %v1;\n}", None),  # %rd5: an address
    ("rem.u32 %r11, %r2, WARP_SZ;\nmad.lo.u32 %r10, %r3, WARP_SZ, %r11;", lambda a, b: (b * 32 + a % 32) & M32),
    ("ld.global.f32 %rd10, [%rd5];", lambda a, b: a),
    ("mov.u64 %rd10, -1;\nld.global.f32 %rd10, [%rd5];\nst.global.f32 [%rd6], %rd10;\nld.global.u32 %r10, [%rd6];",
     lambda a, b: a),
    ("ld.global.s8 %r10, [%rd5+1];", lambda a, b: sx(a >> 8, 8) & M32),
    ("ld.global.u8 %r10, [%rd5+3];", lambda a, b: a >> 24),
    ("ld.global.s16 %rd10, [%rd5+2];", lambda a, b: sx(a >> 16, 16) & M64),
    ("ld.global.b16 %rd10, [%rd5];", lambda a, b: a & 0xFFFF),
    (("{\n.local .align 8 .b8 buf[16];\nmov.u64 %rd11, buf;\ncvta.local.u64 %rd12, %rd11;\nst.u32 [%rd12+4], %r2;\n"
     "st.u32 [%rd12+8], %r3;\nld.local.u32 %r11, [buf+8];\nld.u32 %r12, [%rd12+4];\ncvta.to.local.u64 %rd13, %rd12;\n"
     "ld.local.u32 %r13, [%rd13+8];\nsub.u32 %r10, %r12, %r11;\nadd.u32 %r10, %r10, %r13;\n}"), lambda a, b: a),
]


@pytest.mark.parametrize("target", TARGETS)
def test_rewritten_operand_forms_compute_what_ptx_says(target):
    rows = run_table("operands", [op for op, _ in OPS], A, B, target)
    for i, (a, b) in enumerate(zip(A, B)):
        for k, (op, model) in enumerate(OPS):
            if model is not None:
                assert rows[i][k] == model(a, b) & M64, (op, hex(a), hex(b), hex(rows[i][k]))
    # the vector register round trip of an address: the same 64 bits back
    addresses = [row[7] for row in rows]
    assert len(set(addresses)) == len(A) and all(y - x == 4 for x, y in itertools.pairwise(addresses))


GLOBAL_ADDRESSES = HEADER + """
.global .align 4 .u32 g[4] = {11, 22, 33, 44};
.const .align 4 .u32 cg[2] = {55, 66};
.global .align 8 .u64 p[5] = {generic(g), g+8, generic(g)+4, generic(cg)+4, cg};
""" + entry("through_addresses", "u64 out", ".b32 %r<4>, .b64 %rd<8>", """
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 8;
    mov.u64 %rd3, p;
    add.s64 %rd3, %rd3, %rd2;
    ld.global.u64 %rd4, [%rd3];
    ld.u32 %r2, [%rd4];
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd1, %rd5;
    st.global.u32 [%rd6], %r2;
    ret;
""")


@pytest.mark.parametrize("target", TARGETS)
def test_initialisers_holding_addresses_point_where_ptx_says(target):
    program = loaded_program(GLOBAL_ADDRESSES, target)
    out = (ctypes.c_uint32 * 5)()
    program.launch("through_addresses", [out], block=(5, 1, 1))
    assert list(out) == [11, 33, 22, 66, 55]


@pytest.mark.skipif(not READELF.exists(), reason="llvm-readelf 22 not installed")
@pytest.mark.parametrize("processor", ["gfx942", "gfx1100"])
def test_initialisers_holding_addresses_get_dynamic_relocations(processor, tmp_path):
    """The loader fills the table in: one R_AMDGPU_RELATIVE64 per address of `p`'s five (the variables are
    protected, so the link resolves them: the load address plus the variable's offset in the object, plus the
    offset PTX adds), in order."""
    code = translate(GLOBAL_ADDRESSES, Options(target=processor)).product
    path = tmp_path / "p.hsaco"
    path.write_bytes(code)
    listing = subprocess.run([str(READELF), "-r", "-W", "--dyn-syms", str(path)], capture_output=True, text=True,
                             check=True).stdout
    symbols = {fields[-1]: int(fields[1], 16) for fields in map(str.split, listing.splitlines())
               if len(fields) >= 8 and fields[3] == "OBJECT"}
    entries = sorted((int(offset, 16), int(addend, 16)) for offset, _, kind, addend in
                     (line.split() for line in listing.splitlines() if "R_AMDGPU_RELATIVE64" in line))
    g, cg, table = symbols["g"], symbols["cg"], symbols["p"]
    assert entries == [(table + 8 * i, target) for i, target in enumerate([g, g + 8, g + 4, cg + 4, cg])]


@pytest.mark.parametrize("processor", ["gfx942", "gfx1100"])
def test_operand_forms_compile_for_amd(processor):
    module = table_kernel("operands", [op for op, _ in OPS])
    translation = translate(module, Options(target=processor))
    assert [k.status for k in translation.kernels] == ["ok"], translation.kernels
    assert translation.product[:4] == b"\x7fELF"


@pytest.mark.parametrize("instruction, why", [
    ("atom.global.cas.b128 %q1, [%rd5], %q1, %q2;", "the widest atomic AMD GPUs have is 64 bits"),
    ("atom.global.exch.b128 %q1, [%rd5], %q2;", "has no AMD instruction"),
    ("ld.relaxed.gpu.global.b128 %q1, [%rd5];", "16-byte single-copy-atomic access"),
    ("mov.u32 %r10, %v.z;", "no such element of a .v2 register"),
    ("ld.global.f32 %r10, [%v];", "cannot be an address"),
    ("ld.global.f32 %fd1, [%rd5];", "not the size of its .f32"),  # only .bN registers may be wider
])
def test_refused_forms_say_why(instruction, why):
    op = "{\n.reg .b128 %q<3>;\n.reg .v2 .u32 %v;\n" + instruction + "\n}"
    module = table_kernel("bad", [op]) + ".visible .entry ok()\n{\n    ret;\n}\n"
    report = translate(module, Options(target="host")).kernels[0]
    assert report.status == "unsupported" and why in report.reason, report.reason


WIDE_PARAMETERS = """.version 8.3
.target sm_90
.address_size 64
.func (.reg .b128 r) swap_add(.reg .b128 x)
{
    .reg .b64 %l<3>;
    mov.b128 {%l1, %l2}, x;
    add.s64 %l1, %l1, %l2;
    mov.b128 r, {%l2, %l1};
    ret;
}
.visible .entry wide_parameters(.param .u64 pout, .param .u32 flag, .param .b128 pq)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .reg .b128 %q<4>;
    ld.param.u64 %rd1, [pout];
    ld.param.u32 %r1, [flag];
    ld.param.b128 %q1, [pq];
    setp.ne.u32 %p1, %r1, 0;
    {
    .param .b128 param0;
    st.param.b128 [param0], %q1;
    .param .b128 retval0;
    call.uni (retval0), swap_add, (param0);
    ld.param.b128 %q2, [retval0];
    }
    st.global.b128 [%rd1], %q2;
    mov.u32 %r2, 0;
    mov.u32 %r3, 0;
    mov.u32 %r4, 0;
    mov.u32 %r5, 0;
    @%p1 ld.global.v4.u32 {%r2, %r3, %r4, %r5}, [%rd1];
    @!%p1 ld.global.nc.b128 %q3, [%rd1];
    @!%p1 mov.b128 {%rd2, %rd3}, %q3;
    @!%p1 mov.b64 {%r2, %r3}, %rd3;
    @%p1 st.global.v4.u32 [%rd1+16], {%r5, %r4, %r3, %r2};
    @!%p1 st.global.v2.u32 [%rd1+16], {%r2, %r3};
    ret;
}
"""


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("flag", [0, 1])
def test_b128_parameters_calls_and_guarded_vector_accesses(flag: int, target: str):
    program = loaded_program(WIDE_PARAMETERS, target)
    low, high = 0x0123456789ABCDEF, 0xF0E1D2C3B4A59687
    out = (ctypes.c_uint32 * 8)(*([0xA5A5A5A5] * 8))
    program.launch("wide_parameters", [out, flag, (low | high << 64).to_bytes(16, "little")])
    swapped = high | ((low + high) & M64) << 64  # swap_add: (lo, hi) → (hi, lo + hi)
    words = [(swapped >> (32 * k)) & M32 for k in range(4)]
    assert list(out[:4]) == words
    if flag:
        assert list(out[4:]) == words[::-1]
    else:
        assert list(out[4:]) == [words[2], words[3], 0xA5A5A5A5, 0xA5A5A5A5]


@pytest.mark.parametrize("processor", ["gfx942", "gfx1100"])
def test_b128_parameters_compile_for_amd(processor: str):
    translation = translate(WIDE_PARAMETERS, Options(target=processor))
    assert [k.status for k in translation.kernels] == ["ok"], translation.kernels
