"""wgmma.mma_async (lower/wgmma.py) on the AMD executor (and the host target) against a host model: the
shared-memory tile image laid out here from the ISA's descriptor rules (core matrices of 8 rows × 16 bytes,
K-major and MN-major, the three swizzles), D checked against the exact sum of the decoded operands within
the native mma bound (docs/numerics.md); integer forms exactly."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from fatkit.errors import FatkitError
from fatkit.translate.pipeline import Options, translate
from tests.amdrun import AMD_TARGETS, TARGETS
from tests.amdrun import program as amd_program
from tests.test_translate_mma import _f16_half_ulp, decode, native_bound

SHARED = 49152
SWIZZLE_BYTES = {0: 16, 1: 128, 2: 64, 3: 32}  # descriptor mode → bytes per row of the pattern


def _address(start: int, mode: int, lbo: int, sbo: int, row: int, kb: int, base: int = 0) -> int:
    """Byte address of byte kb of row `row` of a K-major tile (the ISA's canonical layouts); `base`: the
    descriptor's matrix base offset, the swizzle pattern's start row ((pattern start >> 7) & 7)."""
    if mode == 0:
        return start + sbo * (row // 8) + lbo * (kb // 16) + 16 * (row % 8) + kb % 16
    s = SWIZZLE_BYTES[mode]
    linear = start + sbo * (row // 8) + s * (row % 8) + kb
    chunks = s // 16 - 1
    return linear ^ ((((linear >> 7) - base) & chunks) << 4)


def _mn_address(start: int, mode: int, lbo: int, sbo: int, mn: int, k: int, base: int = 0) -> int:
    """Byte address of 16-bit element (mn, k) of an MN-major tile: 8 MN elements to a 16-byte chunk, 8 k rows
    to a core matrix (unswizzled: chunks SBO apart along MN, 8-k groups LBO apart) or to a swizzle atom of S
    bytes a row (swizzled: atoms LBO apart along MN, 8-k groups SBO apart)."""
    s = SWIZZLE_BYTES[mode]
    chunk, chunks = mn // 8, s // 16
    along, across = (sbo, lbo) if mode == 0 else (lbo, sbo)
    linear = start + 2 * (mn % 8) + 16 * (chunk % chunks) + along * (chunk // chunks) + s * (k % 8) + across * (k // 8)
    return linear ^ ((((linear >> 7) - base) & (chunks - 1)) << 4) if mode else linear


def _descriptor(start: int, mode: int, lbo: int, sbo: int, base: int = 0) -> int:
    return ((start >> 4) & 0x3FFF) | (((lbo >> 4) & 0x3FFF) << 16) | (((sbo >> 4) & 0x3FFF) << 32) | \
        (base << 49) | (mode << 62)


def _kernel(n: int, a_registers: bool, scale_d: str, scale_a: int, scale_b: int, trans: str = "") -> str:
    words = n // 2
    d = ", ".join(f"%f{i}" for i in range(words))
    loads = "\n".join(f"    ld.global.f32 %f{i}, [%rd9+{4 * i}];" for i in range(words))
    stores = "\n".join(f"    st.global.f32 [%rd10+{4 * i}], %f{i};" for i in range(words))
    if a_registers:
        a_operand = "{%r20, %r21, %r22, %r23}"
        a_load = "\n".join(f"    ld.global.b32 %r{20 + r}, [%rd11+{4 * r}];" for r in range(4))
        tail = f"{scale_a}, {scale_b}, {int('b' in trans)}"
    else:
        a_operand, a_load, tail = "%rd5", "", f"{scale_a}, {scale_b}, {int('a' in trans)}, {int('b' in trans)}"
    scale = {"1": "1", "0": "0", "pred": "%p2"}[scale_d]
    return f""".version 8.4
.target sm_90a
.address_size 64
.visible .entry wg(.param .u64 image, .param .u64 c, .param .u64 out, .param .u64 fragments,
                   .param .u64 desc_a, .param .u64 desc_b, .param .u32 accumulate)
.maxntid 128, 1, 1
{{
    .reg .pred %p<4>;
    .reg .f32 %f<{words}>;
    .reg .b32 %r<30>;
    .reg .b64 %rd<20>;
    .shared .align 1024 .b8 tile[{SHARED}];
    ld.param.u64 %rd1, [image];
    ld.param.u64 %rd2, [c];
    ld.param.u64 %rd3, [out];
    ld.param.u64 %rd12, [fragments];
    ld.param.u64 %rd4, [desc_a];
    ld.param.u64 %rd6, [desc_b];
    ld.param.u32 %r9, [accumulate];
    setp.ne.u32 %p2, %r9, 0;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %r1;
LOOP:
    mul.wide.u32 %rd7, %r2, 4;
    add.u64 %rd8, %rd1, %rd7;
    ld.global.b32 %r3, [%rd8];
    mov.u32 %r4, tile;
    mad.lo.u32 %r5, %r2, 4, %r4;
    st.shared.b32 [%r5], %r3;
    add.u32 %r2, %r2, 128;
    setp.lt.u32 %p1, %r2, {SHARED // 4};
    @%p1 bra LOOP;
    bar.sync 0;
    cvt.u64.u32 %rd13, %r4;
    shr.u64 %rd13, %rd13, 4;
    add.u64 %rd5, %rd4, %rd13;
    add.u64 %rd6, %rd6, %rd13;
    mul.wide.u32 %rd14, %r1, {4 * words};
    add.u64 %rd9, %rd2, %rd14;
    add.u64 %rd10, %rd3, %rd14;
    mul.wide.u32 %rd15, %r1, 16;
    add.u64 %rd11, %rd12, %rd15;
{loads}
{a_load}
    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16 {{{d}}}, {a_operand}, %rd6, {scale}, {tail};
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;
{stores}
    ret;
}}
"""


def _spread_f16(rng, shape) -> np.ndarray:
    """f16 values with exponents from 2^-14 to 2^6, random signs and mantissas, some zeros."""
    values = rng.uniform(1, 2, shape) * np.exp2(rng.integers(-14, 7, shape)) * rng.choice([-1, 1], shape)
    values[rng.random(shape) < 0.05] = 0
    return values.astype(np.float16)


CASES = [  # n, A in registers, A mode, B mode, k offset (bytes into the swizzle row), scale-d, scale-a, scale-b,
    # the MN-major (transposed) operands
    pytest.param(16, False, 0, 0, 0, "1", 1, 1, "", id="n16-plain"),
    pytest.param(256, False, 0, 0, 0, "1", 1, 1, "", id="n256-plain"),
    pytest.param(64, False, 1, 1, 32, "1", 1, 1, "", id="n64-swizzle128-k32"),
    pytest.param(64, False, 2, 3, 0, "pred", -1, 1, "", id="n64-swizzle64-32-negA"),
    pytest.param(48, True, 0, 1, 64, "0", 1, -1, "", id="n48-regA-swizzle128-k64-negB-noacc"),
    pytest.param(64, True, 0, 2, 0, "pred", 1, 1, "", id="n64-regA-swizzle64-acc"),
    pytest.param(32, False, 0, 0, 0, "1", 1, 1, "ab", id="n32-transAB-plain"),
    pytest.param(256, False, 1, 2, 0, "1", -1, 1, "ab", id="n256-transAB-swizzle128-64-negA"),
    pytest.param(64, False, 3, 1, 0, "1", 1, 1, "a", id="n64-transA-swizzle32"),
    pytest.param(40, True, 0, 3, 0, "1", 1, 1, "b", id="n40-regA-transB-swizzle32"),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n,a_registers,a_mode,b_mode,k_offset,scale_d,scale_a,scale_b,trans", CASES)
def test_wgmma_f16_f32(target, n, a_registers, a_mode, b_mode, k_offset, scale_d, scale_a, scale_b, trans):
    _check_f16_f32(target, "default", n, a_registers, a_mode, b_mode, k_offset, scale_d, scale_a, scale_b, trans)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("a_mode,b_mode,trans,shift", [(1, 2, "", 3), (3, 1, "", 1), (2, 3, "ab", 5)])
def test_wgmma_base_offset(target, a_mode, b_mode, trans, shift):
    """Swizzle patterns that start `shift` 128-byte rows past their alignment, the descriptors' matrix base
    offset set to (pattern start >> 7) & 7 as the ISA says: the tiles read as the aligned ones."""
    _check_f16_f32(target, "default", 64, False, a_mode, b_mode, 0, "1", 1, 1, trans, shift)


@pytest.mark.parametrize("numerics", ["sm90", "exact"])
@pytest.mark.parametrize("target", AMD_TARGETS)
def test_wgmma_portable_numerics(target, numerics):
    """The mma steps on the portable path too (the default on these targets is native MFMA/WMMA)."""
    _check_f16_f32(target, numerics, 64, False, 1, 2, 0, "pred", -1, 1, "b")


def _check_f16_f32(target, numerics, n, a_registers, a_mode, b_mode, k_offset, scale_d, scale_a, scale_b, trans,
                   shift=0):
    rng = np.random.default_rng(n * 7 + a_mode * 3 + b_mode)
    a = _spread_f16(rng, (64, 16))
    bt = _spread_f16(rng, (n, 16))  # B transposed: N rows of K (the K-major tile)
    image = np.zeros(SHARED, np.uint8)

    def place(matrix: np.ndarray, start: int, mode: int, transposed: bool) -> int:
        """Writes `matrix` (rows × 16 f16) at `start` in `mode`; returns the descriptor (start relative)."""
        pitch = SWIZZLE_BYTES[mode]
        base = shift & 7 if mode else 0
        start += 128 * shift  # the pattern's start: `shift` rows past its alignment
        if transposed:
            lbo, sbo = (4096, 128) if mode == 0 else (8 * pitch, 8192)
            halves = matrix.view(np.uint16)
            for mn in range(matrix.shape[0]):
                for k in range(16):
                    address = _mn_address(start, mode, lbo, sbo, mn, k, base)
                    image[address:address + 2] = np.frombuffer(halves[mn, k].tobytes(), np.uint8)
            return _descriptor(start, mode, lbo, sbo, base)
        lbo, sbo = (128, 256) if mode == 0 else (1, 8 * pitch)
        offset = k_offset if mode else 0
        raw = matrix.view(np.uint8).reshape(matrix.shape[0], 32)
        for row in range(matrix.shape[0]):
            for kb in range(32):
                image[_address(start, mode, lbo, sbo, row, kb + offset, base)] = raw[row, kb]
        return _descriptor(start + offset, mode, lbo, sbo, base)

    a_start, b_start = 0, 16384
    desc_a = place(a, a_start, a_mode, "a" in trans) if not a_registers else 0
    desc_b = place(bt, b_start, b_mode, "b" in trans)
    accumulate = 1 if scale_d in ("1", "pred") else 0
    c = (rng.uniform(-4, 4, (128, n // 2)) * np.exp2(rng.integers(-6, 6, (128, n // 2)))).astype(np.float32)
    fragments = np.zeros((128, 4), np.uint32)
    a_bits = a.view(np.uint16)
    for thread in range(128):
        w, g, t = thread >> 5, (thread & 31) >> 2, thread & 3
        for r in range(4):
            row, k = 16 * w + g + 8 * (r & 1), 2 * t + 8 * (r >> 1)
            fragments[thread, r] = int(a_bits[row, k]) | int(a_bits[row, k + 1]) << 16
    out = np.zeros_like(c)
    program = amd_program(_kernel(n, a_registers, scale_d, scale_a, scale_b, trans), target, mma_numerics=numerics)
    program.launch("wg", [image.view(np.uint32).copy(), c, out, fragments, desc_a, desc_b, accumulate],
                   block=(128, 1, 1))
    af, bf = a.astype(np.float64) * scale_a, bt.astype(np.float64).T * scale_b
    for thread in range(128):
        w, g, t = thread >> 5, (thread & 31) >> 2, thread & 3
        for i in range(n // 2):
            row, col = 16 * w + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * t + (i & 1)
            terms = [Fraction(float(af[row, k])) * Fraction(float(bf[k, col])) for k in range(16)]
            c_value = Fraction(float(c[thread, i])) if accumulate else Fraction(0)
            exact = c_value + sum(terms)
            got = float(out[thread, i])
            assert math.isfinite(got)
            assert abs(Fraction(got) - exact) <= native_bound(16, c_value, terms), \
                f"thread {thread} d{i} (row {row}, col {col}): {got!r}, exact {float(exact)!r}"


@pytest.mark.parametrize("form,why", [
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, 1, 1, 1, 2, 0;",
     "imm-trans-a of wgmma.mma_async is an integer constant"),
    ("wgmma.mma_async.sp.sync.aligned.m64n8k16.f32.tf32.tf32 {%f1, %f2, %f3, %f4}, %rd1, %rd2, %r1, 2, 1, 1, 1;",
     "sparsity selector of wgmma.mma_async.sp with .tf32 A"),
    ("wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, %r1, 2, 1, 1, 1, 0, 0;",
     "sparsity selector of wgmma.mma_async.sp"),
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, 1, 1, 3, 0, 0;",
     "imm-scale-b"),
    ("wgmma.mma_async.sync.aligned.m64n12k16.f32.f16.f16 {%f1, %f2, %f3, %f4, %f5, %f6}, %rd1, %rd2, 1, 1, 1, 0, 0;",
     "N a multiple of 8"),
])
def test_wgmma_refused_forms(form, why):
    ptx = (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n"
           "    .reg .f32 %f<8>;\n    .reg .b32 %r<4>;\n    .reg .b64 %rd<4>;\n"
           "    ld.param.u64 %rd1, [p];\n    mov.u64 %rd2, %rd1;\n"
           f"    {form}\n    ret;\n}}\n")
    with pytest.raises(FatkitError, match=why) as refused:
        amd_program(ptx, "gfx942")
    assert "line 11: wgmma.mma_async" in str(refused.value)


BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8}


def _typed_kernel(n: int, d_type: str, a_type: str, b_type: str, a_registers: bool, satfinite: bool) -> str:
    """The kernel of `_kernel` for any type: D, C and A words as .b32 registers, no scaling or transposes."""
    words = n // 4 if d_type == "f16" else n // 2
    k = 256 // BITS[a_type]
    d = ", ".join(f"%r{100 + i}" for i in range(words))
    text = _kernel(n, a_registers, "1", 1, 1)
    text = text.replace(f".reg .f32 %f<{n // 2}>;", ".reg .b32 %r<400>;").replace(".reg .b32 %r<30>;", "")
    for i in range(n // 2):
        text = text.replace(f"ld.global.f32 %f{i}, [%rd9+{4 * i}];", f"ld.global.b32 %r{100 + i}, [%rd9+{4 * i}];"
                            if i < words else "")
        text = text.replace(f"st.global.f32 [%rd10+{4 * i}], %f{i};", f"st.global.b32 [%rd10+{4 * i}], %r{100 + i};"
                            if i < words else "")
    text = text.replace(f"mul.wide.u32 %rd14, %r1, {4 * (n // 2)};", f"mul.wide.u32 %rd14, %r1, {4 * words};")
    old = text[text.index("    wgmma.mma_async"):text.index("    wgmma.commit_group")]
    a_operand = "{%r20, %r21, %r22, %r23}" if a_registers else "%rd5"
    transposes = (", 0" if a_registers else ", 0, 0") if a_type in ("f16", "bf16") else ""
    tail = "" if a_type in ("s8", "u8") else ", 1, 1" + transposes
    flags = ".satfinite" if satfinite else ""
    return text.replace(old, f"    wgmma.mma_async.sync.aligned.m64n{n}k{k}.{d_type}.{a_type}.{b_type}{flags} {{{d}}}, "
                             f"{a_operand}, %rd6, 1{tail};\n")


def _elements_of(a_type: str, rng, shape) -> np.ndarray:
    """Random element bit patterns of `a_type` (finite floats with spread exponents)."""
    if a_type == "f16":
        return _spread_f16(rng, shape).view(np.uint16)
    if a_type in ("bf16", "tf32"):
        values = (rng.uniform(1, 2, shape) * np.exp2(rng.integers(-30, 20, shape))
                  * rng.choice([-1, 1], shape)).astype(np.float32).view(np.uint32)
        low_random = rng.integers(0, 1 << 13, shape, dtype=np.uint32)  # tf32: the ignored low bits
        return (values >> 16).astype(np.uint16) if a_type == "bf16" else (values & ~np.uint32(0x1FFF)) | low_random
    raw = rng.integers(0, 256, shape, dtype=np.uint8)
    if a_type == "e4m3":
        raw[(raw & 0x7F) == 0x7F] = 0x3F
    elif a_type == "e5m2":
        raw[(raw & 0x7C) == 0x7C] = 0x3C
    return raw


TYPED = [  # d, a, b, A in registers, A mode, B mode, satfinite, n
    pytest.param("f16", "f16", "f16", False, 1, 1, False, 32, id="f16.f16-desc-swizzle128"),
    pytest.param("f32", "bf16", "bf16", True, 0, 2, False, 24, id="f32.bf16-regA-swizzle64"),
    pytest.param("f32", "tf32", "tf32", False, 2, 0, False, 40, id="f32.tf32-desc-swizzle64-plain"),
    pytest.param("f32", "e4m3", "e5m2", False, 3, 1, False, 16, id="f32.e4m3.e5m2-desc"),
    pytest.param("f16", "e5m2", "e5m2", True, 0, 3, False, 16, id="f16.e5m2-regA"),
    pytest.param("s32", "s8", "u8", False, 0, 0, False, 24, id="s32.s8.u8-desc"),
    pytest.param("s32", "u8", "s8", True, 0, 1, True, 32, id="s32.u8.s8-regA-satfinite"),
]


@pytest.mark.parametrize("target", AMD_TARGETS)
@pytest.mark.parametrize("d_type,a_type,b_type,a_registers,a_mode,b_mode,satfinite,n", TYPED)
def test_wgmma_types(target, d_type, a_type, b_type, a_registers, a_mode, b_mode, satfinite, n):
    rng = np.random.default_rng(BITS[a_type] * 31 + n)
    k = 256 // BITS[a_type]
    a, bt = _elements_of(a_type, rng, (64, k)), _elements_of(b_type, rng, (n, k))
    if d_type == "f16" and a_type == "e5m2":  # magnitudes below 2 (exponent field < 16), so that f16 D stays finite
        a, bt = a & 0xBF, bt & 0xBF
    a_raw, b_raw = a.view(np.uint8).reshape(64, 32), bt.view(np.uint8).reshape(n, 32)
    image = np.zeros(SHARED, np.uint8)

    desc_a = 0 if a_registers else _place(image, a_raw, 0, a_mode)
    desc_b = _place(image, b_raw, 16384, b_mode)
    words = n // 4 if d_type == "f16" else n // 2
    if d_type == "s32":
        c = rng.integers(-(1 << 31), 1 << 31, (128, words), dtype=np.int64)
        c[::7] = (1 << 31) - 5  # near the top, where a positive sum wraps or saturates
        c = c.astype(np.int32).view(np.uint32)
    elif d_type == "f16":
        c = _spread_f16(rng, (128, 2 * words)).view(np.uint32)
    else:
        c = (rng.uniform(-4, 4, (128, words)) * np.exp2(rng.integers(-6, 6, (128, words)))).astype(np.float32)
        c = c.view(np.uint32)
    fragments = np.zeros((128, 4), np.uint32)
    for thread in range(128):
        w, g, t = thread >> 5, (thread & 31) >> 2, thread & 3
        for r in range(4):
            row, kb = 16 * w + g + 8 * (r & 1), 4 * t + 16 * (r >> 1)
            fragments[thread, r] = int(a_raw[row, kb:kb + 4].view(np.uint32)[0])
    out = np.zeros_like(c)
    program = amd_program(_typed_kernel(n, d_type, a_type, b_type, a_registers, satfinite), target)
    program.launch("wg", [image.view(np.uint32).copy(), c, out, fragments, desc_a, desc_b, 1], block=(128, 1, 1))
    _check_d(out, c, [[decode(a_type, int(x)) for x in row] for row in a],
             [[decode(b_type, int(x)) for x in row] for row in bt], k, d_type, a_type, words, satfinite)


def _place(image: np.ndarray, raw: np.ndarray, start: int, mode: int) -> int:
    """Write a K-major tile (rows × K bytes) into the shared-memory image at `start` in swizzle `mode`'s
    layout (unswizzled: core matrices 128 bytes apart along K, 8 rows of them apart along M/N); its descriptor."""
    width = raw.shape[1]
    lbo, sbo = (128, 8 * width) if mode == 0 else (1, 8 * SWIZZLE_BYTES[mode])
    for row in range(raw.shape[0]):
        for kb in range(width):
            image[_address(start, mode, lbo, sbo, row, kb)] = raw[row, kb]
    return _descriptor(start, mode, lbo, sbo)


def _check_d(out: np.ndarray, c: np.ndarray, A: list, B: list, k: int, d_type: str, a_type: str, words: int,
             satfinite: bool) -> None:
    """D of the 128 threads (mma.sync's fragment order per warp) against the exact c + Σ A·Bᵀ of A (64×K)
    and B transposed (N×K): s32 wrapped (or clamped, .satfinite) bit for bit; floats within the native bound,
    plus f16's rounding (fp8 under the sm90 model three times: docs/numerics.md: the two halves of k each a
    block rounded to f16, then c added), at most at Σ|terms| + |c|."""
    per = 2 if d_type == "f16" else 1
    for thread in range(128):
        w, g, t = thread >> 5, (thread & 31) >> 2, thread & 3
        for e in range(words * per):  # f16 D: word e // 2 holds elements e and e + 1 (low half first)
            row, col = 16 * w + g + 8 * ((e >> 1) & 1), 8 * (e >> 2) + 2 * t + (e & 1)
            where = f"thread {thread} element {e} (row {row}, col {col})"
            if d_type == "s32":
                exact = int(c.view(np.int32)[thread, e]) + sum(int(A[row][kk]) * int(B[col][kk]) for kk in range(k))
                want = max(-(1 << 31), min((1 << 31) - 1, exact)) if satfinite else \
                    (exact + (1 << 31)) % (1 << 32) - (1 << 31)
                assert int(out.view(np.int32)[thread, e]) == want, where
                continue
            terms = [Fraction(A[row][kk]) * Fraction(B[col][kk]) for kk in range(k) if A[row][kk]]
            view = np.float16 if d_type == "f16" else np.float32
            c_value, got = Fraction(float(c.view(view)[thread, e])), float(out.view(view)[thread, e])
            exact = c_value + sum(terms)
            bound = native_bound(k, c_value, terms)
            if d_type == "f16":
                roundings = 3 if a_type[0] == "e" else 1
                bound += roundings * _f16_half_ulp(float(max(abs(Fraction(got)), abs(c_value) + sum(map(abs, terms)))))
            assert math.isfinite(got) and abs(Fraction(got) - exact) <= bound, f"{where}: {got!r}, {float(exact)!r}"


@pytest.mark.parametrize("target", AMD_TARGETS)
def test_hopper_sample_wgmma_kernel_translates(target):
    """The committed Hopper sample's wgmma kernel (descriptors from the launch, m64n16k16) lowers."""
    text = (Path(__file__).parent / "samples" / "ptx" / "hopper.sm_90a.ptx").read_text()
    reports = {k.name: k for k in translate(text, Options(target=target)).kernels}
    assert reports["_Z12wgmma_kernelPfyy"].status == "ok", reports["_Z12wgmma_kernelPfyy"].reason


def _sparse_kernel(n: int, d_type: str, a_type: str, b_type: str, a_registers: bool, selector: int) -> str:
    """`_typed_kernel` as wgmma.mma_async.sp: each thread's metadata word is its fragments row's fifth word."""
    text = _typed_kernel(n, d_type, a_type, b_type, a_registers, False)
    text = text.replace("mul.wide.u32 %rd15, %r1, 16;", "mul.wide.u32 %rd15, %r1, 20;")
    fence = "    wgmma.fence.sync.aligned;"
    text = text.replace(fence, "    ld.global.b32 %r24, [%rd11+16];\n" + fence)
    k = 256 // BITS[a_type]
    text = text.replace(f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.",
                        f"wgmma.mma_async.sp.sync.aligned.m64n{n}k{2 * k}.")
    return text.replace(", %rd6, 1", f", %rd6, %r24, {selector}, 1")


SPARSE = [  # d, a, b, A in registers, A mode, B mode, sparsity selector, n
    pytest.param("f32", "f16", "f16", False, 1, 1, 0, 32, id="f32.f16-desc-swizzle128-sel0"),
    pytest.param("f32", "f16", "f16", True, 0, 2, 1, 24, id="f32.f16-regA-swizzle64-sel1"),
    pytest.param("f16", "f16", "f16", False, 0, 0, 1, 16, id="f16.f16-desc-plain-sel1"),
    pytest.param("f32", "bf16", "bf16", False, 2, 1, 0, 16, id="f32.bf16-desc-swizzle64"),
    pytest.param("f32", "e4m3", "e5m2", False, 1, 2, 0, 16, id="f32.e4m3.e5m2-desc"),
    pytest.param("s32", "s8", "u8", False, 0, 1, 0, 24, id="s32.s8.u8-desc"),
    pytest.param("s32", "u8", "u8", True, 0, 0, 0, 16, id="s32.u8-regA-plain"),
    pytest.param("f32", "tf32", "tf32", False, 1, 1, 1, 16, id="f32.tf32-desc-swizzle128-sel1"),
    pytest.param("f32", "tf32", "tf32", True, 0, 2, 0, 8, id="f32.tf32-regA-swizzle64-sel0"),
]


@pytest.mark.parametrize("target", AMD_TARGETS)
@pytest.mark.parametrize("d_type,a_type,b_type,a_registers,a_mode,b_mode,selector,n", SPARSE)
def test_wgmma_sparse(target, d_type, a_type, b_type, a_registers, a_mode, b_mode, selector, n):
    """wgmma.mma_async.sp: a 2:4-sparse 64×K A stored compressed (K/2 elements a row: the dense form's 32
    bytes), its metadata in mma.sp's layout per warp (the ISA: warp w describes rows 16w–16w+15), checked
    against the dense product of the expanded A; lanes that hold no metadata hold random words."""
    rng = np.random.default_rng(BITS[a_type] * 17 + n + selector)
    k = 512 // BITS[a_type]  # the sparse K: 32 f16/bf16, 64 8-bit elements
    compressed, bt = _elements_of(a_type, rng, (64, k // 2)), _elements_of(b_type, rng, (n, k))
    if d_type == "f16":
        compressed = _spread_f16(np.random.default_rng(5), (64, k // 2)).view(np.uint16) & 0xBFFF
    # per row and 4-column chunk, the two stored elements' (ascending) column indices; tf32 (1:2 sparse): per
    # 2-column chunk, the kept column, its metadata nibble 0b0100 (column 0) or 0b1110 (column 1), the ISA's
    # 16-bit layout with each tf32 element as two halves
    tf32 = a_type == "tf32"
    if tf32:
        kept = rng.integers(0, 2, (64, k // 2))
        indices = np.stack([2 * kept, 2 * kept + 1], axis=2)  # the two halves' indices in a 4-half chunk
    else:
        indices = np.array([[sorted(rng.choice(4, 2, replace=False)) for _ in range(k // 4)] for _ in range(64)])
    dense = np.zeros((64, k), compressed.dtype)
    for row in range(64):
        if tf32:
            for chunk in range(k // 2):
                dense[row, 2 * chunk + kept[row, chunk]] = compressed[row, chunk]
            continue
        for chunk in range(k // 4):
            for p in range(2):
                dense[row, 4 * chunk + indices[row, chunk, p]] = compressed[row, 2 * chunk + p]
    a_raw, b_raw = compressed.view(np.uint8).reshape(64, 32), bt.view(np.uint8).reshape(n, 64)
    image = np.zeros(SHARED, np.uint8)

    desc_a = 0 if a_registers else _place(image, a_raw, 0, a_mode)
    desc_b = _place(image, b_raw, 16384, b_mode)
    words = n // 4 if d_type == "f16" else n // 2
    if d_type == "s32":
        c = rng.integers(-(1 << 31), 1 << 31, (128, words), dtype=np.int64).astype(np.int32).view(np.uint32)
    elif d_type == "f16":
        c = _spread_f16(rng, (128, 2 * words)).view(np.uint32)
    else:
        c = (rng.uniform(-4, 4, (128, words)) * np.exp2(rng.integers(-6, 6, (128, words)))).astype(np.float32)
        c = c.view(np.uint32)
    fragments = np.zeros((128, 5), np.uint32)
    fragments[:, 4] = rng.integers(0, 1 << 32, 128, dtype=np.uint64)  # lanes that hold no metadata
    for thread in range(128):
        w, g, t = thread >> 5, (thread & 31) >> 2, thread & 3
        for r in range(4):
            row, kb = 16 * w + g + 8 * (r & 1), 4 * t + 16 * (r >> 1)
            fragments[thread, r] = int(a_raw[row, kb:kb + 4].view(np.uint32)[0])
        # the ISA's mma.sp metadata figures: 16-bit types, lanes 2·selector and 2·selector + 1 of a group
        # hold columns 0–15 and 16–31 of rows g (bits 0–15) and g + 8 (bits 16–31); 8-bit types, lane t
        # holds row g + 8·(t mod 2), columns 32·(t div 2) to +31; two 2-bit indices per 4-column chunk
        if BITS[a_type] >= 16:  # tf32: 2-column chunks, columns 0–7 and 8–15
            if t // 2 != selector:
                continue
            fields = [(half, 4 * (t % 2) + c, 8 * half + 2 * c) for half in (0, 1) for c in range(4)]
        else:
            fields = [(t % 2, 8 * (t // 2) + c, 2 * c) for c in range(8)]
        word = 0
        for half, chunk, field in fields:
            for p in range(2):
                word |= int(indices[16 * w + g + 8 * half, chunk, p]) << (2 * (field + p))
        fragments[thread, 4] = word
    out = np.zeros_like(c)
    program = amd_program(_sparse_kernel(n, d_type, a_type, b_type, a_registers, selector), target)
    program.launch("wg", [image.view(np.uint32).copy(), c, out, fragments, desc_a, desc_b, 1], block=(128, 1, 1))
    _check_d(out, c, [[decode(a_type, int(x)) for x in row] for row in dense],
             [[decode(b_type, int(x)) for x in row] for row in bt], k, d_type, a_type, words, False)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kernel,mode,shift,accumulate,rows", [
    ("wgmma_desc", 1, 32, 1, 0), ("wgmma_desc", 2, 32, 1, 1), ("wgmma_desc", 1, 0, 1, 3), ("wgmma_regs", 3, 0, 0, 0),
    ("wgmma_trans", 2, 0, 1, 0)])
def test_verification_wgmma_random_inputs(target, kernel, mode, shift, accumulate, rows):
    """verification/ptx/wgmma.ptx's random-input launches (param 5 = 1, the H200 cases `*.random`): the f16 and
    f32 patterns the kernel makes of random words, D against the exact sum within the native mma bound."""
    text = (Path(__file__).resolve().parent.parent / "verification" / "ptx" / "wgmma.ptx").read_text()
    words = np.random.default_rng(mode * 5 + shift).integers(0, 1 << 32, 6144, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(128 * 32, np.float32)
    rows_param = [rows] if kernel == "wgmma_desc" else []  # wgmma_desc: patterns past their alignment
    amd_program(text, target).launch(kernel, [words, out, mode, shift, accumulate, 1, *rows_param], block=(128, 1, 1))
    halves = (words & 0xBFFF).astype(np.uint16).view(np.float16).astype(np.float64)
    a, bt = halves[:1024].reshape(64, 16), halves[1024:2048].reshape(64, 16)
    c = (words[2048:] & 0xBFFFFFFF).view(np.float32).reshape(128, 32)
    scale_a = -1 if kernel == "wgmma_regs" else 1
    for thread in range(128):
        w, g, t = thread >> 5, (thread & 31) >> 2, thread & 3
        for i in range(32):
            row, col = 16 * w + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * t + (i & 1)
            terms = [Fraction(float(a[row, k])) * scale_a * Fraction(float(bt[col, k])) for k in range(16)]
            c_value = Fraction(float(c[thread, i])) if accumulate else Fraction(0)
            got, exact = float(out[thread * 32 + i]), c_value + sum(terms)
            assert math.isfinite(got) and abs(Fraction(got) - exact) <= native_bound(16, c_value, terms), \
                f"{kernel} thread {thread} d{i}: {got!r}, exact {float(exact)!r}"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("mode,selector,accumulate,random", [(0, 0, 1, 1), (1, 1, 1, 1), (2, 1, 0, 0)])
def test_verification_wgmma_sparse(target, mode, selector, accumulate, random):
    """verification/ptx/wgmma.ptx's wgmma_sparse (the H200 cases wgmma_sparse.*): the metadata the kernel makes
    of each thread's word (the six valid index pairs), expanded into the dense A here, D against the exact sum."""
    text = (Path(__file__).resolve().parent.parent / "verification" / "ptx" / "wgmma.ptx").read_text()
    rng = np.random.default_rng(mode * 3 + selector)
    words = rng.integers(0, 1 << 32, 8192, dtype=np.uint64).astype(np.uint32) if random else \
        rng.integers(-8, 9, 8192).astype(np.int32).view(np.uint32)
    out = np.zeros(128 * 32, np.float32)
    amd_program(text, target).launch("wgmma_sparse", [words, out, mode, selector, accumulate, random],
                                     block=(128, 1, 1))
    if random:
        halves = (words & 0xBFFF).astype(np.uint16).view(np.float16).astype(np.float64)
        c = (words[3072:7168] & 0xBFFFFFFF).view(np.float32).astype(np.float64).reshape(128, 32)
    else:
        halves = words.view(np.int32).astype(np.float64)
        c = words[3072:7168].view(np.int32).astype(np.float64).reshape(128, 32)
    compressed, bt = halves[:1024].reshape(64, 16), halves[1024:3072].reshape(64, 32)
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    a = np.zeros((64, 32))
    for thread in range(128):  # the ISA's mma.sp m16n8k32 metadata figure, lanes 2·selector and 2·selector + 1
        w, g, t = thread >> 5, (thread & 31) >> 2, thread & 3
        if t // 2 != selector:
            continue
        word = int(words[7168 + thread])
        for half in (0, 1):
            for chunk in range(4):
                field = (word >> (16 * half + 4 * chunk)) & 15
                row, column = 16 * w + g + 8 * half, 4 * (4 * (t % 2) + chunk)
                for p, index in enumerate(pairs[field % 6]):
                    a[row, column + index] = compressed[row, column // 2 + p]
    for thread in range(128):
        w, g, t = thread >> 5, (thread & 31) >> 2, thread & 3
        for i in range(32):
            row, col = 16 * w + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * t + (i & 1)
            terms = [Fraction(float(a[row, k])) * Fraction(float(bt[col, k])) for k in range(32) if a[row, k]]
            c_value = Fraction(float(c[thread, i])) if accumulate else Fraction(0)
            got, exact = float(out[thread * 32 + i]), c_value + sum(terms)
            assert math.isfinite(got) and abs(Fraction(got) - exact) <= native_bound(32, c_value, terms), \
                f"thread {thread} d{i}: {got!r}, exact {float(exact)!r}"
