"""The normalisation passes (fatkit/translate/passes): each pass's rewrite or record checked on its own,
and the rewritten kernels run on the host target against Python."""

from __future__ import annotations

import ctypes
import random
import subprocess
import sys
from pathlib import Path

import pytest

from fatkit.translate.passes import PASS_NAMES, FloatMode, PassError, run_passes
from fatkit.translate.passes.rounding import float_mode
from fatkit.translate.pipeline import Options, translate
from fatkit.translate.ptx import ast, parse_ptx
from tests.amdrun import TARGETS
from tests.amdrun import program as loaded_program
from tests.ptxrun import HEADER, M32

SAMPLES = Path(__file__).parent / "samples" / "ptx"


def _body(prepared, name: str) -> list[ast.Statement]:
    return list(prepared.module.function(name).body.statements)


def _instructions(prepared, name: str) -> list[str]:
    return [f"{'@' + ('!' if s.guard.negated else '') + s.guard.register + ' ' if s.guard else ''}{s.name}"
            for s in _body(prepared, name) if type(s) is ast.Instruction]


def _run_words(ptx: str, kernel: str, inputs: list[int], words: int, target: str = "host") -> list[list[int]]:
    """Launch `kernel(in, out)` on `target` (tests/amdrun.py): thread i reads u32 in[i] and writes up to 8 u32
    at out[8i]; the first `words` of each thread's row."""
    program = loaded_program(ptx, target)
    n = len(inputs)
    source, out = (ctypes.c_uint32 * n)(*inputs), (ctypes.c_uint32 * (n * 8))()
    program.launch(kernel, [source, out], block=(n,))
    return [list(out[i * 8:i * 8 + words]) for i in range(n)]


def _kernel(name: str, body: str, registers: str = "") -> str:
    """A kernel where %r1 = in[tid] and %rd3 = &out[tid*8 words]; `body` stores results."""
    return HEADER + f"""
.visible .entry {name}(.param .u64 pin, .param .u64 pout)
{{
    .reg .pred %p<4>;
    .reg .b16 %rs<8>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<16>;
    {registers}
    ld.param.u64 %rd1, [pin];
    ld.param.u64 %rd2, [pout];
    mov.u32 %r9, %tid.x;
    mul.wide.u32 %rd4, %r9, 4;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.u32 %r1, [%rd5];
    mul.wide.u32 %rd6, %r9, 32;
    add.s64 %rd3, %rd2, %rd6;
    {body}
    ret;
}}
"""


RANDOM = random.Random(7)
VALUES = [0, 1, 0x7FFF, 0x8000, 0xFFFF, 0x12345678, 0x80000000, M32] + [RANDOM.getrandbits(32) for _ in range(8)]

# --------------------------------------------------------------------------------------------------
# 1. scopes


SCOPES = _kernel("scopes", """
    mov.u32 %r2, 5;
    {
    .reg .b32 %r2;
    .reg .b32 %t<2>;
    add.u32 %r2, %r1, 100;
    {
    .reg .b32 %r2;
    mul.lo.u32 %r2, %r1, 3;
    st.global.u32 [%rd3+8], %r2;
    }
    mov.u32 %t1, %r2;
    st.global.u32 [%rd3+4], %t1;
    }
    {
    .reg .b32 %r2;
    inner: .branchtargets L;
    add.u32 %r2, %r2, 0;
    bra.uni L;
    L:
    }
    st.global.u32 [%rd3], %r2;""")


@pytest.mark.parametrize("target", TARGETS)
def test_nested_scopes_are_renamed_apart_and_flattened(target):
    prepared = run_passes(parse_ptx(SCOPES), until="scopes")
    body = _body(prepared, "scopes")
    assert not any(type(s) is ast.Block for s in body)
    declared = [s.name for s in body if type(s) is ast.Variable]
    assert len(declared) == len(set(declared))  # every name declared once in the flat body
    assert {"%r2", "%r2$0", "%r2$1", "%r2$2", "%t0", "%t1", "%r0", "%r15"} <= set(declared)
    assert [s.name for s in body if type(s) is ast.Label] == ["L"]
    assert _run_words(SCOPES, "scopes", VALUES, 3, target) == [[5, (v + 100) & M32, (3 * v) & M32] for v in VALUES]


def test_unknown_identifiers_fail_their_function_with_the_line():
    ptx = SCOPES.replace("st.global.u32 [%rd3+8], %r2;", "st.global.u32 [%rd3+8], %nowhere;")
    line = next(i for i, text in enumerate(ptx.splitlines(), 1) if "%nowhere" in text)
    error = run_passes(parse_ptx(ptx)).failures["scopes"]
    assert isinstance(error, PassError) and error.line == line and "unknown identifier %nowhere" in str(error)
    # A name declared in a closed scope is unknown after it; the kernel is reported, not lowered.
    ptx = SCOPES.replace("st.global.u32 [%rd3], %r2;", "st.global.u32 [%rd3], %t1;")
    ptx += ".visible .entry other()\n{\n ret;\n}\n"
    report = translate(ptx, Options(target="host")).kernels[0]
    assert report.status == "unsupported" and "unknown identifier %t1" in report.reason

# --------------------------------------------------------------------------------------------------
# 2. operands


VECTORS = _kernel("vectors", """
    not.b32 %r2, %r1;
    mov.b64 %rd7, {%r1, %r2};
    st.global.u64 [%rd3], %rd7;
    mov.b64 {_, %r3}, %rd7;
    st.global.u32 [%rd3+8], %r3;
    mov.b32 {%rs1, %rs2}, %r1;
    mov.b32 %r4, {%rs2, %rs1};
    st.global.u32 [%rd3+12], %r4;
    mov.b64 {%rs3, %rs4, %rs5, %rs6}, %rd7;
    mov.b64 %rd8, {%rs6, %rs5, %rs4, %rs3};
    st.global.u64 [%rd3+16], %rd8;
    mov.pred %p1, 1;
    selp.u32 %r5, 7, 9, %p1;
    st.global.u32 [%rd3+24], %r5;""")


def _halves(x: int, bits: int, count: int) -> list[int]:
    return [(x >> (i * bits)) & ((1 << bits) - 1) for i in range(count)]


@pytest.mark.parametrize("target", TARGETS)
def test_vector_movs_become_scalar_instructions(target):
    prepared = run_passes(parse_ptx(VECTORS), until="operands")
    assert not any(type(op) is ast.Vector for s in _body(prepared, "vectors") if type(s) is ast.Instruction
                   for op in s.operands)
    for v, row in zip(VALUES, _run_words(VECTORS, "vectors", VALUES, 7, target)):
        packed = v | (v ^ M32) << 32
        rs = _halves(packed, 16, 4)
        swapped = sum(h << (16 * i) for i, h in enumerate(reversed(rs)))
        assert row == [v, v ^ M32, v ^ M32, (v >> 16) | (v & 0xFFFF) << 16, swapped & M32, swapped >> 32, 7]


def test_predicate_immediates_are_normalised():
    text = VECTORS.replace("mov.pred %p1, 1;", "mov.pred %p1, -1;")
    prepared = run_passes(parse_ptx(text), until="operands")
    movs = [s for s in _body(prepared, "vectors") if type(s) is ast.Instruction and s.name == "mov.pred"]
    assert movs[0].operands[1] == ast.IntImm(1)

# --------------------------------------------------------------------------------------------------
# 3. guards and 4. special registers


GUARDED = _kernel("guarded", """
    setp.lt.u32 %p1, %r1, 1000;
    mov.u32 %r2, 11;
    @%p1 mov.u32 %r2, 22;
    @!%p1 st.global.u32 [%rd3+4], %tid.x;
    @%p1 add.u32 %r3, %ntid.x, %tid.x;
    @%p1 st.global.u32 [%rd3+8], %r3;
    mov.u32 %r4, %clock;
    mov.u32 %r5, %clock;
    sub.u32 %r6, %r5, %r4;
    st.global.u32 [%rd3], %r2;""")


# gfx1100 refuses %clock (its SHADER_CYCLES counter wraps in 20 bits): the kernel runs on the host and gfx942
@pytest.mark.parametrize("target", [t for t in TARGETS if t != "gfx1100"])
def test_guards_become_branches_and_special_registers_single_reads(target):
    prepared = run_passes(parse_ptx(GUARDED), until="special")
    listing = _instructions(prepared, "guarded")
    guarded = [i for i in listing if i.startswith("@")]
    assert all(i.endswith(" bra") for i in guarded) and len(guarded) == 4
    body = _body(prepared, "guarded")
    reads = [s for s in body if type(s) is ast.Instruction
             for op in s.operands if type(op) is ast.Name and op.is_special_register]
    # %tid.x and %ntid.x once each, at entry; %clock where it is read, each time.
    assert [(s.opcode, s.operands[1].name, s.operands[1].component) for s in reads] == [
        ("mov", "%tid", "x"), ("mov", "%ntid", "x"), ("mov", "%clock", None), ("mov", "%clock", None)]
    assert body.index(reads[1]) < min(i for i, s in enumerate(body) if type(s) is ast.Instruction
                                      and s not in reads)
    threads = len(VALUES)
    expected = [[22 if v < 1000 else 11, 0 if v < 1000 else t, threads + t if v < 1000 else 0]
                for t, v in enumerate(VALUES)]
    assert _run_words(GUARDED, "guarded", VALUES, 3, target) == expected

# --------------------------------------------------------------------------------------------------
# 5. rounding and 6. FP modes


def _mode(text: str, version=(8, 0), arch="sm_90") -> FloatMode | None:
    opcode, *modifiers = text.split(".")
    return float_mode(ast.Instruction(opcode, tuple(modifiers), ()), version, arch)


@pytest.mark.parametrize("instruction, mode", [
    ("add.f32", FloatMode("rn", contractible=True)),
    ("mul.rz.ftz.sat.f32", FloatMode("rz", ftz=True, sat=True)),
    ("sub.f64", FloatMode("rn", contractible=True)),
    ("fma.rn.f64", FloatMode("rn")),
    ("div.full.f32", FloatMode(None, approx=True)),
    ("div.rn.ftz.f32", FloatMode("rn", ftz=True)),
    ("sqrt.approx.f32", FloatMode(None, approx=True)),
    ("sin.approx.ftz.f32", FloatMode(None, approx=True, ftz=True)),
    ("cvt.rzi.s32.f32", FloatMode("rzi")),
    ("cvt.rn.f32.s32", FloatMode("rn")),
    ("cvt.f64.f32", FloatMode(None)),
    ("cvt.ftz.f32.f32", FloatMode(None, ftz=True)),
    ("cvt.rn.satfinite.e4m3x2.f32", FloatMode("rn")),
    ("atom.global.add.f32", FloatMode("rn", ftz=True)),
    ("atom.global.add.noftz.f16", FloatMode("rn")),
    ("setp.lt.ftz.f32", FloatMode(None, ftz=True)),
    ("max.f64", FloatMode(None)),
    ("add.u32", None),
    ("ld.global.f32", None),
])
def test_float_modes_write_out_ptx_defaults(instruction, mode):
    assert _mode(instruction) == mode


def test_missing_required_rounding_depends_on_the_ptx_version():
    for required in ("div.f32", "sqrt.f64", "fma.f32", "sin.f32", "cvt.f32.s32", "cvt.s32.f32", "cvt.f32.f64"):
        with pytest.raises(ValueError, match="needs"):
            _mode(required)
    assert _mode("div.f32", version=(1, 3)) == FloatMode(None, approx=True, ftz=True)
    assert _mode("div.f64", version=(1, 3)) == FloatMode("rn")
    assert _mode("sin.f32", version=(1, 3)) == FloatMode(None, approx=True, ftz=True)
    assert _mode("add.f32", arch="sm_13") == FloatMode("rn", ftz=True, contractible=True)
    ptx = HEADER + ".visible .entry k()\n{\n .reg .f32 %f<2>;\n div.f32 %f1, %f1, %f1;\n ret;\n}\n"
    report = translate(ptx + ".visible .entry ok()\n{\n ret;\n}\n", Options(target="host")).kernels[0]
    assert report.status == "unsupported" and report.line == ptx.count("\n") - 2
    assert "div.f32 needs a rounding modifier" in report.reason


FP_MODES = HEADER + """
.func (.param .f32 r) keep(.param .f32 a)
{
    .reg .f32 %f<3>;
    ld.param.f32 %f1, [a];
    mul.f32 %f2, %f1, %f1;
    st.param.f32 [r], %f2;
    ret;
}
.visible .entry flushing(.param .u64 out)
{
    .reg .f32 %f<4>;
    add.ftz.f32 %f1, %f2, %f3;
    mul.rn.ftz.f32 %f1, %f1, %f1;
    add.f64 %fd1, %fd1, %fd1;
    ret;
}
.visible .entry mixed(.param .u64 out)
{
    .reg .f32 %f<4>;
    add.ftz.f32 %f1, %f2, %f3;
    {
    .param .f32 param0;
    st.param.f32 [param0], %f1;
    .param .f32 retval0;
    call.uni (retval0), keep, (param0);
    }
    ret;
}
""".replace(".reg .f32 %f<4>;\n    add.ftz.f32 %f1, %f2, %f3;\n    mul", ".reg .f32 %f<4>;\n    .reg .f64 %fd<2>;\n"
            "    add.ftz.f32 %f1, %f2, %f3;\n    mul")


def test_fp_modes_are_tracked_through_calls():
    modes = run_passes(parse_ptx(FP_MODES)).fp_modes
    assert (modes["flushing"].ftz, modes["flushing"].ieee, modes["flushing"].uniform) == (2, 0, "ftz")
    assert (modes["keep"].ftz, modes["keep"].ieee, modes["keep"].uniform) == (0, 1, "ieee")
    assert (modes["mixed"].ftz, modes["mixed"].ieee, modes["mixed"].uniform) == (1, 0, None)

# --------------------------------------------------------------------------------------------------
# 7. storage and 8. conversions


def test_storage_gives_each_call_sequence_its_own_buffers():
    text = (SAMPLES / "basics.sm_80.ptx").read_text()
    storage = run_passes(parse_ptx(text)).storage["_Z5callsPiiPKfS1_"]
    params = {b.name: (b.size, b.align) for b in storage.buffers if b.space == "param"}
    # nvcc names every call sequence's parameters param0, retval0 …: renamed apart, each sized exactly.
    assert params["param0"] == (4, 4) and params["param4"] == (8, 8)
    assert {params[n] for n in params if n.startswith("retval0$")} == {(4, 4), (8, 8)}
    assert {(b.space, b.size) for b in storage.buffers if b.space == "local"} == {("local", 32)}
    assert storage.registers["%rd57"] == "b64" and storage.registers["temp_param_reg"] == "b32"


CONVERSIONS = _kernel("conversions", """
    add.u16 %r2, %r1, 1;
    st.global.u32 [%rd3], %r2;
    add.s16 %r3, %r1, 1;
    st.global.u32 [%rd3+4], %r3;
    st.global.u8 [%rd3+8], %r1;
    ld.global.s8 %r4, [%rd5];
    st.global.u32 [%rd3+12], %r4;
    ld.global.u8 %rd9, [%rd5+1];
    st.global.u64 [%rd3+16], %rd9;
    shl.b32 %r5, %r1, %rd4;
    st.global.u32 [%rd3+24], %r5;""")


def _sign(x: int, bits: int) -> int:
    return x - (1 << bits) if x >> (bits - 1) & 1 else x


@pytest.mark.parametrize("target", TARGETS)
def test_relaxed_type_checking_made_explicit(target):
    prepared = run_passes(parse_ptx(CONVERSIONS))
    registers = prepared.storage["conversions"].registers
    for s in _body(prepared, "conversions"):  # every operand's register now has its type's size
        if type(s) is ast.Instruction and s.opcode in ("add", "ld", "st") and s.has("u16"):
            assert all(ast.TYPE_SIZES[registers[op.name]] == 2 for op in s.operands if type(op) is ast.Name)
    rows = _run_words(CONVERSIONS, "conversions", VALUES, 7, target)
    for i, (v, row) in enumerate(zip(VALUES, rows)):
        low = (v + 1) & 0xFFFF
        byte0, byte1 = v & 0xFF, v >> 8 & 0xFF
        # st.u8 wrote byte 8 of out; ld.s8/ld.u8 read bytes of in[i].
        assert row[0] == low and row[1] == _sign(low, 16) & M32
        assert row[2] == byte0
        assert row[3] == _sign(byte0, 8) & M32 and row[4] | row[5] << 32 == byte1
        amount = 4 * i  # the chopped low 32 bits of %rd4; shl clamps amounts of 32 and more
        assert row[6] == ((v << amount) & M32 if amount < 32 else 0)


def test_narrower_registers_are_invalid():
    ptx = CONVERSIONS.replace("add.u16 %r2, %r1, 1;", "add.u64 %r2, %r1, 1;")
    error = run_passes(parse_ptx(ptx)).failures["conversions"]
    assert error.instruction == "add.u64" and "narrower than" in error.why

# --------------------------------------------------------------------------------------------------
# the CLI


def test_dump_after_passes_and_each_pass():
    def dump(point: str) -> str:
        return subprocess.run([sys.executable, "-m", "fatkit", "translate", str(SAMPLES / "basics.sm_80.ptx"),
                               "--target", "gfx942", "--dump-after", point],
                              capture_output=True, text=True, check=True).stdout
    everything = dump("passes")
    assert "after passes ====" in everything and ".entry _Z5callsPiiPKfS1_" in everything
    assert "retval0$" in everything and "// fma.rn.f32: rn" in everything
    assert "// _Z5callsPiiPKfS1_: f32 instructions" in everything
    parsed = parse_ptx(everything.split("====\n", 1)[1].split("\n//")[0])  # the PTX part reads back
    assert parsed.function("_Z5callsPiiPKfS1_") is not None
    scopes = dump("scopes")
    assert "after scopes ====" in scopes and "retval0$" in scopes and "// fma.rn.f32" not in scopes
    assert set(PASS_NAMES) == {"scopes", "operands", "guards", "elected", "special", "rounding", "fp_mode",
                               "storage", "conversions"}
