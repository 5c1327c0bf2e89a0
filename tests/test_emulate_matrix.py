"""fatkit.emulate's MFMA (gfx942) and WMMA (gfx1100, gfx1201) instructions: an LLVM IR kernel calls the intrinsic on
registers loaded per lane, and the result is checked against a model written here from the lane layouts of
AMD's matrix instruction calculator (independently of fatkit/emulate/semantics.py) with exact arithmetic."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from fatkit.emulate import launch
from fatkit.translate.targets.amdgpu import CODE_OBJECT_VERSION, link
from fatkit.translate.targets.amdgpu_child import target_machine

RNG = np.random.default_rng(20261202)

# intrinsic, processor, lanes, (A/B vector type, registers), (C/D type, registers)
INSTRUCTIONS = {
    "mfma.f32.4x4x4f16": ("gfx942", 64, ("<4 x half>", 2), ("<4 x float>", 4)),
    "mfma.f32.4x4x4bf16.1k": ("gfx942", 64, ("<4 x i16>", 2), ("<4 x float>", 4)),
    "mfma.i32.4x4x4i8": ("gfx942", 64, ("i32", 1), ("<4 x i32>", 4)),
    "mfma.f32.16x16x16f16": ("gfx942", 64, ("<4 x half>", 2), ("<4 x float>", 4)),
    "wmma.f32.16x16x16.f16": ("gfx1100", 32, ("<16 x half>", 8), ("<8 x float>", 8)),
    "wmma.f32.16x16x16.bf16": ("gfx1100", 32, ("<16 x i16>", 8), ("<8 x float>", 8)),
    "wmma.i32.16x16x16.iu8": ("gfx1100", 32, ("<4 x i32>", 4), ("<8 x i32>", 8)),
    "wmma.f32.16x16x16.f16@gfx12": ("gfx1201", 32, ("<8 x half>", 4), ("<8 x float>", 8)),
    "wmma.f32.16x16x16.bf16@gfx12": ("gfx1201", 32, ("<8 x i16>", 4), ("<8 x float>", 8)),
}


def _kernel_ir(name: str, signed: tuple[int, int] = (1, 1), broadcast: tuple[int, int] = (0, 0)) -> str:
    _, _, (ab, ab_regs), (cd, cd_regs) = INSTRUCTIONS[name]
    name, gfx12 = name.removesuffix("@gfx12"), name.endswith("@gfx12")
    words = f"<{ab_regs} x i32>" if ab_regs > 1 else "i32"
    c_words = f"<{cd_regs} x i32>"
    if name.startswith("mfma"):
        declaration = f"{cd} @llvm.amdgcn.{name}({ab}, {ab}, {cd}, i32, i32, i32)"
        call = (f"call {cd} @llvm.amdgcn.{name}({ab} %a, {ab} %b, {cd} %c, i32 {broadcast[0]}, i32 {broadcast[1]}, "
                "i32 0)")
    elif name.endswith("iu8"):
        declaration = f"{cd} @llvm.amdgcn.{name}.v8i32.v4i32(i1, {ab}, i1, {ab}, {cd}, i1)"
        call = (f"call {cd} @llvm.amdgcn.{name}.v8i32.v4i32(i1 {signed[0]}, {ab} %a, i1 {signed[1]}, {ab} %b, "
                f"{cd} %c, i1 0)")
    else:
        count = 8 if gfx12 else 16
        suffix = f".v8f32.v{count}" + ("f16" if "f16" in name.split(".")[-1] and "bf16" not in name else "i16")
        declaration = f"{cd} @llvm.amdgcn.{name}{suffix}({ab}, {ab}, {cd})"
        call = f"call {cd} @llvm.amdgcn.{name}{suffix}({ab} %a, {ab} %b, {cd} %c)"
    load = ("%{0}w = load {1}, ptr addrspace(1) %{0}p\n  %{0} = bitcast {1} %{0}w to {2}")
    return f"""target triple = "amdgcn-amd-amdhsa"
declare i32 @llvm.amdgcn.workitem.id.x()
declare {declaration}
define amdgpu_kernel void @k(ptr addrspace(1) %pa, ptr addrspace(1) %pb, ptr addrspace(1) %pc,
                             ptr addrspace(1) %pd) "amdgpu-agpr-alloc"="0" {{
  %lane = call i32 @llvm.amdgcn.workitem.id.x()
  %ap = getelementptr {words}, ptr addrspace(1) %pa, i32 %lane
  %bp = getelementptr {words}, ptr addrspace(1) %pb, i32 %lane
  %cp = getelementptr {c_words}, ptr addrspace(1) %pc, i32 %lane
  %dp = getelementptr {c_words}, ptr addrspace(1) %pd, i32 %lane
  {load.format("a", words, ab)}
  {load.format("b", words, ab)}
  {load.format("c", c_words, cd)}
  %d = {call}
  store {cd} %d, ptr addrspace(1) %dp
  ret void
}}
!llvm.module.flags = !{{!0}}
!0 = !{{i32 1, !"amdhsa_code_object_version", i32 {CODE_OBJECT_VERSION}}}
"""


def _run(name: str, a: np.ndarray, b: np.ndarray, c: np.ndarray, signed=(1, 1), broadcast=(0, 0)) -> np.ndarray:
    """a, b: uint32 [lane][register]; c: uint32 [lane][register]; returns D the same way."""
    from llvmlite import binding as llvm
    processor, lanes, _, (_, cd_regs) = INSTRUCTIONS[name]
    machine = target_machine(processor)
    module = llvm.parse_assembly(_kernel_ir(name, signed, broadcast))
    code_object = link([machine.emit_object(module)])
    d = np.zeros((lanes, cd_regs), dtype=np.uint32)
    launch(code_object, "k", (1, 1, 1), (lanes, 1, 1), [a.copy(), b.copy(), c.copy(), d], 0)
    return d


# ------------------------------------------------------------------------------------------------ the model
# Element placement per instruction, from the calculator's register layouts:
#   gfx9 4x4x4, 16 blocks:  A[i][k] of block b in lane 4b+i, B[k][j] in lane 4b+j, element k of the lane's
#                           registers; D[i][j] in lane 4b+j, register i.
#   gfx9 16x16x16, 1 block: A[i][k] in lane i+16(k div 4), element k mod 4; B[k][j] in lane j+16(k div 4);
#                           D[i][j] in lane j+16(i div 4), register i mod 4.
#   gfx11 WMMA 16x16x16:    A[i][k] in lanes i and i+16, element k; B[k][j] in lanes j and j+16;
#                           D[i][j] in lane j+16(i mod 2), register i div 2.
#   gfx12 WMMA 16x16x16:    A[i][k] in lane i for k 0-3 and 8-11 (elements 0-3, 4-7), lane i+16 for k 4-7
#                           and 12-15; B[k][j] alike in lanes j, j+16; D[i][j] in lane j+16(i div 8),
#                           register i mod 8.

def _places(name: str):
    """(blocks, m, k, a_place(block, i, k) → (lane, element), d_place(block, i, j) → (lane, register))."""
    if "4x4x4" in name:
        return 16, 4, 4, lambda bl, i, k: (4 * bl + i, k), lambda bl, i, j: (4 * bl + j, i)
    if name.startswith("mfma"):
        return 1, 16, 16, lambda bl, i, k: (i + 16 * (k // 4), k % 4), lambda bl, i, j: (j + 16 * (i // 4), i % 4)
    if name.endswith("@gfx12"):
        return (1, 16, 16, lambda bl, i, k: (i + 16 * (k // 4 % 2), k % 4 + 4 * (k // 8)),
                lambda bl, i, j: (j + 16 * (i // 8), i % 8))
    return 1, 16, 16, lambda bl, i, k: (i, k), lambda bl, i, j: (j + 16 * (i % 2), i // 2)


def _element(words: np.ndarray, lane: int, index: int, bits: int) -> int:
    per = 32 // bits
    return int(words[lane, index // per]) >> (bits * (index % per)) & ((1 << bits) - 1)


def _value(bits: int, kind: str, signed: bool = True):
    if kind == "f16":
        return Fraction(float(np.uint16(bits).view(np.float16)))
    if kind == "bf16":
        return Fraction(float(np.uint32(bits << 16).view(np.float32)))
    return bits - 256 if signed and bits >= 128 else bits


def _model(name: str, a, b, c, signed=(True, True), broadcast=(0, 0)) -> np.ndarray:
    blocks, m, k, a_place, d_place = _places(name)
    kind = "bf16" if "bf16" in name else "f16" if "f16" in name else "i8"
    bits = 8 if kind == "i8" else 16
    d = np.zeros_like(c)
    for block in range(blocks):
        for i in range(m):
            for j in range(m):
                total = 0
                for kk in range(k):
                    # CBSZ/ABID: the A of block ABID of the block's group of 2^CBSZ
                    group = 1 << broadcast[0]
                    a_lane, a_index = a_place(block - block % group + broadcast[1], i, kk)
                    b_lane, b_index = a_place(block, j, kk)
                    total += (_value(_element(a, a_lane, a_index, bits), kind, signed[0])
                              * _value(_element(b, b_lane, b_index, bits), kind, signed[1]))
                lane, register = d_place(block, i, j)
                if kind == "i8":
                    d[lane, register] = (int(c[lane, register].astype(np.int32)) + total) & 0xFFFFFFFF
                else:
                    exact = Fraction(float(c[lane, register:register + 1].view(np.float32)[0])) + total
                    d[lane, register] = np.float32(float(exact)).view(np.uint32)  # f64 is exact for these ranges
    return d


def _inputs(name: str):
    processor, lanes, (_, ab_regs), (_, cd_regs) = INSTRUCTIONS[name]
    if "i8" in name:
        a = RNG.integers(0, 1 << 32, (lanes, ab_regs), dtype=np.uint64).astype(np.uint32)
        b = RNG.integers(0, 1 << 32, (lanes, ab_regs), dtype=np.uint64).astype(np.uint32)
        c = RNG.integers(0, 1 << 32, (lanes, cd_regs), dtype=np.uint64).astype(np.uint32)
    else:
        def halves(shape):
            values = RNG.standard_normal(shape) * np.exp2(RNG.integers(-6, 6, shape))
            if "bf16" in name:
                return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint32)
            return values.astype(np.float16).view(np.uint16).astype(np.uint32)
        a = halves((lanes, ab_regs, 2))
        b = halves((lanes, ab_regs, 2))
        a, b = (x[..., 0] | x[..., 1] << 16 for x in (a, b))
        c = (RNG.standard_normal((lanes, cd_regs)) * 4).astype(np.float32).view(np.uint32)
    if name.startswith("wmma") and not name.endswith("@gfx12"):  # gfx11: A and B repeat in lanes 16-31
        a[16:], b[16:] = a[:16], b[:16]
    return a.astype(np.uint32), b.astype(np.uint32), c


@pytest.mark.parametrize("name", list(INSTRUCTIONS))
def test_matrix_instruction_against_the_layout_model(name):
    a, b, c = _inputs(name)
    got = _run(name, a, b, c)
    assert np.array_equal(got, _model(name, a, b, c))


@pytest.mark.parametrize("broadcast", [(1, 0), (1, 1), (2, 3)])
@pytest.mark.parametrize("name", ["mfma.f32.4x4x4f16", "mfma.i32.4x4x4i8"])
def test_mfma_broadcasts_a_block_of_a(name, broadcast):
    a, b, c = _inputs(name)
    assert np.array_equal(_run(name, a, b, c, broadcast=broadcast), _model(name, a, b, c, broadcast=broadcast))


@pytest.mark.parametrize("signed", [(0, 0), (0, 1), (1, 0)])
def test_wmma_iu8_signedness(signed):
    a, b, c = _inputs("wmma.i32.16x16x16.iu8")
    got = _run("wmma.i32.16x16x16.iu8", a, b, c, signed)
    assert np.array_equal(got, _model("wmma.i32.16x16x16.iu8", a, b, c, tuple(map(bool, signed))))


def test_wmma_refuses_operands_that_do_not_repeat():
    from fatkit.errors import FatkitError
    a, b, c = _inputs("wmma.f32.16x16x16.f16")
    a[20, 3] ^= 1
    with pytest.raises(FatkitError, match="lanes 16-31"):
        _run("wmma.f32.16x16x16.f16", a, b, c)
