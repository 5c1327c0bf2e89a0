"""Addresses as GEPs from their base (lower/addresses.py): the merged wide accesses LLVM can then make, in the
IR and in the AMD code, and the same results as before on fatkit.emulate for every address form folded (an
offset from a variable, a 32-bit .shared address in a 64-bit register, a generic one from cvta, a negative
displacement, a 32-bit wrap-around, registers stepped around nested loops) and for the forms that must not
be (an offset made from another variable's address); uniform loads as scalar loads, and a .const variable the
host rewrites between launches. Expected values come from numpy on the inputs, not from fatkit.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from fatkit.translate import pipeline
from fatkit.translate.pipeline import Options, translate
from tests.amdrun import AMD_TARGETS, EmulatedProgram
from tests.ptxrun import HEADER
from tests.ptxframes import entry

OBJDUMP = Path("/usr/lib/llvm-22/bin/llvm-objdump")
THREADS = 64
SLOTS = 16  # output floats per thread

# One kernel reading the staged tile through every address form the lowering folds. Per thread t, with
# `shift` a launch argument (so that nothing about it is known when compiling):
#   slots 0-3   tile[(t & 63) * 4 + j]       a 16-byte aligned run of four scalar loads
#   slots 4-7   tile[((t + shift) & 127) + j] the same run at a start of unknown alignment
#   slots 8, 9  tile[t], tile[t + 3]          (tile + 4(t+2) + 64) - 64, displacements -8 and +4
#   slot 10     tile[t + 2]                   a .shared address zero-extended into a 64-bit register, +8
#   slot 11     tile[t + shift + 1]           cvta.shared to a generic address, + 4·shift, displacement +4
#   slot 12     tile[t]                       a 32-bit address + 0xfffffff0 (wraps), displacement +16
# written as 13 scalar stores from out + 4·shift + 64t: consecutive floats at an alignment of 4 only.
FORMS = HEADER + "\n" + entry("address_forms", "u64 in, u64 out, u32 shift",
                              ".b32 %r<24>, .b64 %rd<16>, .f32 %f<24>, .pred %p<2>", """
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
    ld.global.f32 %f2, [%rd4+256];
    ld.global.f32 %f3, [%rd4+512];
    ld.global.f32 %f4, [%rd4+768];
    mov.u32 %r3, tile;
    shl.b32 %r4, %r2, 2;
    add.s32 %r5, %r3, %r4;
    st.shared.f32 [%r5], %f1;
    st.shared.f32 [%r5+256], %f2;
    st.shared.f32 [%r5+512], %f3;
    st.shared.f32 [%r5+768], %f4;
    setp.ge.u32 %p1, %r2, 8;
    @%p1 bra STAGED;
    ld.global.f32 %f5, [%rd4+1024];
    st.shared.f32 [%r5+1024], %f5;
STAGED:
    bar.sync 0;
    and.b32 %r6, %r2, 63;
    shl.b32 %r7, %r6, 4;
    add.s32 %r8, %r3, %r7;
    ld.shared.f32 %f6, [%r8];
    ld.shared.f32 %f7, [%r8+4];
    ld.shared.f32 %f8, [%r8+8];
    ld.shared.f32 %f9, [%r8+12];
    add.s32 %r9, %r2, %r1;
    and.b32 %r10, %r9, 127;
    shl.b32 %r11, %r10, 2;
    add.s32 %r12, %r11, %r3;
    ld.shared.f32 %f10, [%r12];
    ld.shared.f32 %f11, [%r12+4];
    ld.shared.f32 %f12, [%r12+8];
    ld.shared.f32 %f13, [%r12+12];
    add.s32 %r13, %r5, 72;
    sub.s32 %r14, %r13, 64;
    ld.shared.f32 %f14, [%r14+-8];
    ld.shared.f32 %f15, [%r14+4];
    cvt.u64.u32 %rd5, %r5;
    add.s64 %rd6, %rd5, 8;
    ld.shared.f32 %f16, [%rd6];
    cvta.shared.u64 %rd7, %rd5;
    mul.wide.u32 %rd8, %r1, 4;
    add.s64 %rd9, %rd7, %rd8;
    ld.f32 %f17, [%rd9+4];
    add.s32 %r15, %r5, -16;
    ld.shared.f32 %f18, [%r15+16];
    add.s64 %rd10, %rd2, %rd8;
    mul.wide.u32 %rd11, %r2, 64;
    add.s64 %rd12, %rd10, %rd11;
    st.global.f32 [%rd12], %f6;
    st.global.f32 [%rd12+4], %f7;
    st.global.f32 [%rd12+8], %f8;
    st.global.f32 [%rd12+12], %f9;
    st.global.f32 [%rd12+16], %f10;
    st.global.f32 [%rd12+20], %f11;
    st.global.f32 [%rd12+24], %f12;
    st.global.f32 [%rd12+28], %f13;
    st.global.f32 [%rd12+32], %f14;
    st.global.f32 [%rd12+36], %f15;
    st.global.f32 [%rd12+40], %f16;
    st.global.f32 [%rd12+44], %f17;
    st.global.f32 [%rd12+48], %f18;
    ret;
""", declarations=".shared .align 4 .b8 tile[1056];", global_pointers=True)


def _expected_forms(values: np.ndarray, shift: int) -> np.ndarray:
    tile = values[:264]
    out = np.zeros(THREADS * SLOTS + 128, np.float32)
    for t in range(THREADS):
        a, b = (t & 63) * 4, (t + shift) & 127
        row = [*tile[a:a + 4], *tile[b:b + 4], tile[t], tile[t + 3], tile[t + 2], tile[t + shift + 1], tile[t]]
        out[shift + SLOTS * t: shift + SLOTS * t + len(row)] = row
    return out


def _bits(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random float32 bit patterns (NaNs, infinities, subnormals, ±0 among them): loads and stores move
    bits, so every pattern must come back as it went in."""
    return rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("target", AMD_TARGETS)
@pytest.mark.parametrize("shift", [0, 1, 3, 5, 64])
def test_every_folded_address_form_reads_what_it_read_before(target, shift):
    """Starts of every alignment (shift 1, 3, 5: not 16-byte aligned), stores at an alignment of 4 only."""
    program = EmulatedProgram(translate(FORMS, Options(target=target)).product)
    rng = np.random.default_rng(18 + shift)
    values = _bits(rng, 1056 // 4)
    out = np.zeros(THREADS * SLOTS + 128, np.float32)
    program.launch("address_forms", [values, out, shift], block=(THREADS, 1, 1))
    np.testing.assert_array_equal(out.view(np.uint32), _expected_forms(values, shift).view(np.uint32))


def _lowered_ir(ptx: str, target: str) -> dict[str, str]:
    options = Options(target=target)
    lowered = pipeline.lower(pipeline.passes(pipeline.parse(ptx, options), options), options)
    assert all(r.status == "ok" for r in lowered.reports), lowered.reports
    return {k.signature.name: k.llvm_ir for k in lowered.kernels}


def test_shared_and_global_addresses_are_geps_from_their_base():
    """Before LLVM optimises: every .shared access of the kernel is a GEP from `tile` (the cvta'd generic one
    an addrspacecast of one), the global ones GEPs from the parameter's pointer; no shared inttoptr is left,
    and `tile` (declared .align 4) is 16-byte aligned."""
    text = _lowered_ir(FORMS, "gfx942")["address_forms"]
    assert not re.search(r"inttoptr i(32|64) [^\n]* to ptr addrspace\(3\)", text), text
    assert re.search(r'@"?tile"? = internal addrspace\(3\) global \[1056 x i8\] undef, align 16', text)
    assert len(re.findall(r'getelementptr i8, ptr addrspace\(3\) @"?tile"?', text)) >= 6
    assert re.search(r"addrspacecast ptr addrspace\(3\) %[^\n]* to ptr\b", text)  # cvta.shared from a GEP
    assert len(re.findall(r"inttoptr i64 [^\n]* to ptr addrspace\(1\)", text)) == 0


CROSSED = HEADER + "\n" + entry("crossed", "u64 out", ".b32 %r<8>, .b64 %rd<4>, .f32 %f<4>", """
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, second;
    add.s32 %r4, %r3, %r2;
    cvt.rn.f32.u32 %f1, %r1;
    st.shared.f32 [%r4], %f1;
    bar.sync 0;
    mov.u32 %r5, first;
    sub.s32 %r6, %r3, %r5;
    add.s32 %r7, %r5, %r6;
    ld.shared.f32 %f2, [%r7+4];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.f32 [%rd3], %f2;
    ret;
""", declarations=".shared .align 4 .b8 first[64];\n.shared .align 4 .b8 second[64];")


@pytest.mark.parametrize("target", AMD_TARGETS)
def test_an_offset_made_from_another_variables_address_is_not_folded(target):
    """first + (second - first) is second's address: built from `first` it would be a pointer into `first`
    that LLVM may assume cannot reach `second`. It stays an inttoptr, and reads second[1]."""
    text = _lowered_ir(CROSSED, target)["crossed"]
    assert re.search(r"inttoptr i32 [^\n]* to ptr addrspace\(3\)", text)
    program = EmulatedProgram(translate(CROSSED, Options(target=target)).product)
    out = np.zeros(16, np.float32)
    program.launch("crossed", [out], block=(16, 1, 1))
    np.testing.assert_array_equal(out, np.full(16, 1.0, np.float32))


# A 16-aligned run of four .shared floats per thread (the shape of sgemm_tile's row reads), four consecutive
# global floats, uniform loads of read-only (.nc) and .const memory.
WIDE = HEADER + """
.const .align 4 .b8 coefficients[32] = {0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64,
                                        0, 0, 160, 64, 0, 0, 192, 64, 0, 0, 224, 64, 0, 0, 0, 65};
""" + entry("wide", "u64 in, u64 taps, u64 out", ".b32 %r<12>, .b64 %rd<12>, .f32 %f<24>", """
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.f32 %f1, [%rd5];
    ld.global.f32 %f9, [%rd5+256];
    ld.global.f32 %f10, [%rd5+512];
    ld.global.f32 %f11, [%rd5+768];
    mov.u32 %r2, rows;
    shl.b32 %r3, %r1, 2;
    add.s32 %r4, %r2, %r3;
    st.shared.f32 [%r4], %f1;
    st.shared.f32 [%r4+256], %f9;
    st.shared.f32 [%r4+512], %f10;
    st.shared.f32 [%r4+768], %f11;
    bar.sync 0;
    and.b32 %r5, %r1, 63;
    shl.b32 %r6, %r5, 4;
    add.s32 %r7, %r2, %r6;
    ld.shared.f32 %f2, [%r7];
    ld.shared.f32 %f3, [%r7+4];
    ld.shared.f32 %f4, [%r7+8];
    ld.shared.f32 %f5, [%r7+12];
    ld.global.nc.f32 %f6, [%rd2];
    ld.global.nc.f32 %f7, [%rd2+4];
    ld.const.f32 %f8, [coefficients+8];
    mul.f32 %f2, %f2, %f6;
    mul.f32 %f3, %f3, %f7;
    mul.f32 %f4, %f4, %f8;
    mul.wide.u32 %rd6, %r1, 16;
    add.s64 %rd7, %rd3, %rd6;
    st.global.f32 [%rd7], %f2;
    st.global.f32 [%rd7+4], %f3;
    st.global.f32 [%rd7+8], %f4;
    st.global.f32 [%rd7+12], %f5;
    ret;
""", declarations=".shared .align 4 .b8 rows[1024];", global_pointers=True)
# the merged forms' names on CDNA3 and RDNA3
WIDE_FORMS = {"gfx942": ("ds_read_b128", "global_store_dwordx4", "s_load_dwordx2", "s_load_dword "),
              "gfx1100": ("ds_load_b128", "global_store_b128", "s_load_b64", "s_load_b32")}
VECTOR_LOAD = {"gfx942": "global_load_dword", "gfx1100": "global_load_b32"}


@pytest.mark.skipif(not OBJDUMP.exists(), reason="needs LLVM 22's llvm-objdump (apt-get install llvm-22)")
@pytest.mark.parametrize("target", AMD_TARGETS)
def test_neighbouring_accesses_merge_and_uniform_loads_are_scalar(target, tmp_path):
    """The four .shared loads one ds_read_b128 (tile .align 4, its start 16-aligned by the lowering and the
    offset t·16), the four global stores one 128-bit store, the .nc and .const loads at uniform addresses
    scalar loads; and the results those merged instructions give are the per-element ones."""
    product = translate(WIDE, Options(target=target)).product
    path = tmp_path / "wide.hsaco"
    path.write_bytes(product)
    listing = subprocess.run([OBJDUMP, "-d", f"--mcpu={target}", path], capture_output=True, text=True,
                             check=True).stdout
    for form in WIDE_FORMS[target]:
        assert form in listing, (form, listing)
    assert "flat_" not in listing and listing.count(VECTOR_LOAD[target]) == 4  # only the staging loads are per lane
    rng = np.random.default_rng(7)
    values, taps = rng.uniform(-4, 4, 256).astype(np.float32), rng.uniform(-4, 4, 2).astype(np.float32)
    out = np.zeros(256, np.float32)
    EmulatedProgram(product).launch("wide", [values, taps, out], block=(THREADS, 1, 1))
    rows = values[:256].reshape(64, 4)[np.arange(THREADS) & 63]
    expected = rows * np.array([taps[0], taps[1], 3.0, 1.0], np.float32)
    np.testing.assert_array_equal(out.reshape(64, 4), expected)


CONSTANTS = HEADER + """
.const .align 4 .b8 scale[8] = {0, 0, 128, 63, 0, 0, 0, 64};
""" + entry("scaled", "u64 in, u64 out", ".b32 %r<2>, .b64 %rd<6>, .f32 %f<6>", """
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
    ld.const.f32 %f2, [scale];
    ld.const.f32 %f3, [scale+4];
    fma.rn.f32 %f4, %f1, %f2, %f3;
    add.s64 %rd5, %rd2, %rd3;
    st.global.f32 [%rd5], %f4;
    ret;
""")


@pytest.mark.parametrize("target", AMD_TARGETS)
def test_const_variables_read_what_the_host_wrote_there(target):
    """A .const variable's initializer is only its value until the host writes it (cudaMemcpyToSymbol):
    a second launch after a write must read the new bytes, not the initializer folded into the code."""
    program = EmulatedProgram(translate(CONSTANTS, Options(target=target)).product)
    values = np.random.default_rng(3).uniform(-8, 8, 32).astype(np.float32)
    out = np.zeros(32, np.float32)
    program.launch("scaled", [values, out], block=(32, 1, 1))
    np.testing.assert_array_equal(out, values * np.float32(1.0) + np.float32(2.0))
    program.write(program.address("scale"), np.array([-0.5, 3.25], np.float32).tobytes())
    program.launch("scaled", [values, out], block=(32, 1, 1))
    np.testing.assert_array_equal(out, values * np.float32(-0.5) + np.float32(3.25))


# Registers carried around loops: a .shared and a global pointer stepped by an inner loop nested in an outer
# one (the outer loop's phi receives the inner loop's last pointer), then a .shared pointer stepped down.
LOOPS = HEADER + "\n" + entry("loops", "u64 in, u64 out, u32 rows",
                              ".pred %p<4>, .b32 %r<12>, .b64 %rd<8>, .f32 %f<4>", """
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd4, %rd1, %rd3;
    mov.u32 %r3, buf;
    shl.b32 %r4, %r2, 2;
    add.s32 %r5, %r3, %r4;
    mov.u32 %r6, 0;
OUTER:
    mov.u32 %r7, 0;
INNER:
    ld.global.f32 %f1, [%rd4];
    st.shared.f32 [%r5], %f1;
    add.s64 %rd4, %rd4, 256;
    add.s32 %r5, %r5, 256;
    add.s32 %r7, %r7, 1;
    setp.lt.u32 %p1, %r7, 4;
    @%p1 bra INNER;
    add.s32 %r6, %r6, 1;
    setp.lt.u32 %p2, %r6, %r1;
    @%p2 bra OUTER;
    bar.sync 0;
    mov.f32 %f2, 0f00000000;
    shl.b32 %r8, %r1, 2;
    mov.u32 %r9, 0;
DOWN:
    sub.s32 %r5, %r5, 256;
    ld.shared.f32 %f3, [%r5];
    add.f32 %f2, %f2, %f3;
    add.s32 %r9, %r9, 1;
    setp.lt.u32 %p3, %r9, %r8;
    @%p3 bra DOWN;
    add.s64 %rd5, %rd2, %rd3;
    cvta.to.global.u64 %rd5, %rd5;
    st.global.f32 [%rd5], %f2;
    ret;
""", declarations=".shared .align 4 .b8 buf[4096];")


@pytest.mark.parametrize("target", AMD_TARGETS)
@pytest.mark.parametrize("rows", [1, 3, 4])
def test_pointers_carried_around_loops(target, rows):
    """The loops' address registers become phis of pointers (from `buf` and from the parameter), and the
    values are the same: each thread's column summed from the last row up (float32, in that order)."""
    text = _lowered_ir(LOOPS, target)["loops"]
    assert re.search(r"phi\s+ptr addrspace\(3\)", text) and re.search(r"phi\s+ptr addrspace\(1\)", text), text
    assert not re.search(r"inttoptr i(32|64) [^\n]* to ptr addrspace\((1|3)\)", text), text
    program = EmulatedProgram(translate(LOOPS, Options(target=target)).product)
    values = np.random.default_rng(rows).uniform(-100, 100, 1024).astype(np.float32)
    out = np.zeros(64, np.float32)
    program.launch("loops", [values, out, rows], block=(64, 1, 1))
    expected = np.zeros(64, np.float32)
    for row in reversed(range(4 * rows)):
        expected += values[row * 64: row * 64 + 64]
    np.testing.assert_array_equal(out, expected)


SHARED_VARIABLES = HEADER + """
.global .align 4 .u32 counter[4] = {1, 2, 3, 4};
.const .align 4 .u32 limits[2] = {7, 8};
""" + entry("writer", "u32 v", ".b32 %r<2>", """
    st.global.u32 [counter+4], %r1;
    ret;
""") + entry("reader", "u64 out", ".b32 %r<3>, .b64 %rd<2>", """
    ld.global.u32 %r1, [counter+4];
    ld.const.u32 %r2, [limits+4];
    st.global.u32 [%rd1], %r1;
    st.global.u32 [%rd1+4], %r2;
    ret;
""")


@pytest.mark.parametrize("target", AMD_TARGETS)
def test_kernels_compiled_apart_reach_one_copy_of_each_variable(target, monkeypatch):
    """Module variables are protected (reached pc-relative): kernels compiled in different groups, so in
    different objects, still reach the one copy the link keeps: what one kernel stores, the other reads."""
    from fatkit.translate.targets import amdgpu

    monkeypatch.setattr(amdgpu, "_GROUP_STATEMENTS", 1)  # every kernel its own group
    program = EmulatedProgram(translate(SHARED_VARIABLES, Options(target=target)).product)
    out = np.zeros(2, np.uint32)
    program.launch("reader", [out])
    assert list(out) == [2, 8]
    program.launch("writer", [12345])
    program.write(program.address("limits"), np.array([9, 10], np.uint32).tobytes())
    program.launch("reader", [out])
    assert list(out) == [12345, 10]
