"""wgmma.mma_async (lower/wgmma.py) on the AMD executor against a host model: the shared-memory tile image laid out
here from the ISA's descriptor rules (core matrices of 8 rows × 16 bytes, K-major, the three swizzles), D
checked against the exact f64 sum of the decoded operands within the native mma bound (docs/numerics.md)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from fatkit.errors import FatkitError
from tests.amdrun import AMD_TARGETS
from tests.amdrun import program as amd_program
from tests.test_translate_mma import native_bound

SHARED = 49152
SWIZZLE_BYTES = {0: 16, 1: 128, 2: 64, 3: 32}  # descriptor mode → bytes per row of the pattern


def _address(start: int, mode: int, lbo: int, sbo: int, row: int, kb: int) -> int:
    """Byte address of byte kb of row `row` of a K-major tile (the ISA's canonical layouts)."""
    if mode == 0:
        return start + sbo * (row // 8) + lbo * (kb // 16) + 16 * (row % 8) + kb % 16
    s = SWIZZLE_BYTES[mode]
    linear = start + sbo * (row // 8) + s * (row % 8) + kb
    chunks = s // 16 - 1
    return linear ^ (((linear >> 7) & chunks) << 4)


def _descriptor(start: int, mode: int, lbo: int, sbo: int) -> int:
    return ((start >> 4) & 0x3FFF) | (((lbo >> 4) & 0x3FFF) << 16) | (((sbo >> 4) & 0x3FFF) << 32) | (mode << 62)


def _kernel(n: int, a_registers: bool, scale_d: str, scale_a: int, scale_b: int) -> str:
    words = n // 2
    d = ", ".join(f"%f{i}" for i in range(words))
    loads = "\n".join(f"    ld.global.f32 %f{i}, [%rd9+{4 * i}];" for i in range(words))
    stores = "\n".join(f"    st.global.f32 [%rd10+{4 * i}], %f{i};" for i in range(words))
    if a_registers:
        a_operand = "{%r20, %r21, %r22, %r23}"
        a_load = "\n".join(f"    ld.global.b32 %r{20 + r}, [%rd11+{4 * r}];" for r in range(4))
        tail = f"{scale_a}, {scale_b}, 0"
    else:
        a_operand, a_load, tail = "%rd5", "", f"{scale_a}, {scale_b}, 0, 0"
    scale = {"1": "1", "0": "0", "pred": "%p2"}[scale_d]
    return f""".version 8.0
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


CASES = [  # n, A in registers, A mode, B mode, k offset (bytes into the swizzle row), scale-d, scale-a, scale-b
    pytest.param(16, False, 0, 0, 0, "1", 1, 1, id="n16-plain"),
    pytest.param(256, False, 0, 0, 0, "1", 1, 1, id="n256-plain"),
    pytest.param(64, False, 1, 1, 32, "1", 1, 1, id="n64-swizzle128-k32"),
    pytest.param(64, False, 2, 3, 0, "pred", -1, 1, id="n64-swizzle64-32-negA"),
    pytest.param(48, True, 0, 1, 64, "0", 1, -1, id="n48-regA-swizzle128-k64-negB-noacc"),
    pytest.param(64, True, 0, 2, 0, "pred", 1, 1, id="n64-regA-swizzle64-acc"),
]


@pytest.mark.parametrize("target", AMD_TARGETS)
@pytest.mark.parametrize("n,a_registers,a_mode,b_mode,k_offset,scale_d,scale_a,scale_b", CASES)
def test_wgmma_f16_f32(target, n, a_registers, a_mode, b_mode, k_offset, scale_d, scale_a, scale_b):
    rng = np.random.default_rng(n * 7 + a_mode * 3 + b_mode)
    a = _spread_f16(rng, (64, 16))
    bt = _spread_f16(rng, (n, 16))  # B transposed: N rows of K (the K-major tile)
    image = np.zeros(SHARED, np.uint8)

    def place(matrix: np.ndarray, start: int, mode: int) -> int:
        """Writes `matrix` (rows × 16 f16) at `start` in `mode`; returns the descriptor (start relative)."""
        pitch = SWIZZLE_BYTES[mode]
        lbo, sbo = (128, 256) if mode == 0 else (1, 8 * pitch)
        offset = k_offset if mode else 0
        raw = matrix.view(np.uint8).reshape(matrix.shape[0], 32)
        for row in range(matrix.shape[0]):
            for kb in range(32):
                image[_address(start, mode, lbo, sbo, row, kb + offset)] = raw[row, kb]
        return _descriptor(start + offset, mode, lbo, sbo)

    a_start, b_start = 0, 16384
    desc_a = place(a, a_start, a_mode) if not a_registers else 0
    desc_b = place(bt, b_start, b_mode)
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
    program = amd_program(_kernel(n, a_registers, scale_d, scale_a, scale_b), target)
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
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, 1, 1, 1, 1, 0;",
     "imm-trans-a = 1"),
    ("wgmma.mma_async.sync.aligned.m64n12k16.f32.f16.f16 {%f1, %f2, %f3, %f4, %f5, %f6}, %rd1, %rd2, 1, 1, 1, 0, 0;",
     "N a multiple of 8"),
])
def test_wgmma_refused_forms(form, why):
    ptx = (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n"
           "    .reg .f32 %f<8>;\n    .reg .b64 %rd<4>;\n    ld.param.u64 %rd1, [p];\n    mov.u64 %rd2, %rd1;\n"
           f"    {form}\n    ret;\n}}\n")
    with pytest.raises(FatkitError, match=why):
        amd_program(ptx, "gfx942")
