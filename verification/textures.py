"""Texturing as an H200 does it: the PTX kernels tests/test_translate_texture.py runs on the emulated gfx1100,
run on NVIDIA's texture units with CUDA texture and surface objects, against the model both use.

    python verification/textures.py [-o OUT.json]    # on the GPU machine: numpy and cupy only (+ OUT.npz)

The model (`ptx_sample`, `gather_order`) is the PTX ISA's texturing: the nearest texel, or bilinear filtering
of the four texels around (x - 0.5, y - 0.5) with weights of `weight_bits` fractional bits, under the
clamp/wrap/mirror/border addressing modes; tld4 returns one component of those four texels in the order
(-u +v), (+u +v), (+u -v), (-u -v). `nvidia_sample` (float textures) and `nvidia_sample_unorm8` are how an
H200 filters, fitted to the bit to every filtered lane of the 2026-12-02 run (fractions in 256ths, ties up;
only αβ rounded, the other weights by difference; one rounding of the sum, ties away from zero; UNORM8 to a
16-bit UNORM value); `nvidia_filter` carries the rule to 1-D and 3-D (`nvidia_weights_3d`, refitted to the
fourth run: slices by z, split by x, then by y) and to every normalised format (`normalised_blend`, 16-bit
blends); the translated kernels filter that way. Cases check, each printing what it measured:

- bilinear tex.2d under each addressing mode, at coordinates whose weights are exact in 8 bits (the values the
  emulator tests use), and at coordinates whose weights are not, to find NVIDIA's weight precision;
- tld4.g's texel order;
- tex1Dfetch of a one-channel float linear texture (what the channels it lacks read, and an index past it);
- suld .clamp past the edge and sust .zero past it;
- the bilinear weights themselves (a 2 × 2 texture whose texels make the result the weights) at 1024 x
  positions (every fourth a tie of the 8-bit rounding), against NVIDIA's rule;
- what the channels a one- or two-channel array texture lacks read (fatkit: 0); bilinear filtering of a
  normalised uchar4 texture; tex.3d's filter (at the fitted coordinates and at 64 the fit did not see);
- sust.p into float1, uchar4 and char4 surfaces (x in samples; integers past 8 bits saturate: uchar4 as .u32,
  measured; char4 as .s32, fatkit's guess);
- sured.b 64-bit add/min/max on a uint2 surface; sured.p min/max/add on int1 and uint1 surfaces, per lane
  (addresses ptxas cannot prove uniform) and at constant addresses (ptxas's unsigned warp REDUX first);
- tex.cube, tex.acube and tld4.cube against CUDA's face rule; tex.2d and tld4.g with texel offsets;
- txq/suq channel_data_type, channel_order and txq.num_samples, one kernel each (fatkit answers OpenCL's
  codes).
- (the fourth run, first) the 1-D and 3-D weights themselves (a 2-texel line; two 2 × 2 × 2 textures whose
  lookups give all eight 3-D weights, `weights_from_sweep_3d`); linear float tex.1d (clamp, wrap, border),
  tex.3d of two shapes (clamp, wrap), unnormalised tex.2d, half4 and tex.a2d; point sampling beside texel
  borders; every value of SNORM8, UNORM16, SNORM16 and UNORM8 point-fetched as normalised floats; and linear
  filtering of those four formats in 1-D, 2-D and 3-D under clamp and wrap; 512 lookups a case at random
  coordinates, 8-bit ties, the 8-bit grid's neighbours, texel centres and borders (`axis_coords`), texels of
  random bits with each format's extremes. Their raw arrays (texels, coords, measured, model) go to OUT.npz.
  The fourth run's records: textures_h200_run4.json and .npz (the raw arrays, less the models and the
  conversions' coordinates).
- (the fifth run, first) blend sweeps: two-texel 1-D textures of SNORM8, half4, SNORM16 and UNORM16 looked up
  at every weight α/256 (64 texel pairs each); the refitted 3-D rule at fresh texels and coordinates (float
  under clamp, wrap and border; the four normalised formats).
Each new case records its error in place of its measurement if NVIDIA's API or hardware refuses it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np

def _sampling(entry: str, load: str, store: str) -> str:
    """A kernel ENTRY(tex, coords, out): each thread's `load` reads its coordinates, the caller's
    `{instruction}` samples them into %f4-%f7, and `store` points %rd7 at the thread's 16-byte result."""
    return """.version 8.0
.target sm_80
.address_size 64
.visible .entry {entry}(.param .u64 tex, .param .u64 coords, .param .u64 out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<12>;
    ld.param.u64 %rd1, [tex];
    ld.param.u64 %rd2, [coords];
    ld.param.u64 %rd3, [out];
    mov.u32 %r1, %tid.x;
    {load}
    {instruction}
    {store}
    st.global.v4.f32 [%rd7], {%f4, %f5, %f6, %f7};
    ret;
}
""".replace("{entry}", entry).replace("{load}", load).replace("{store}", store)


SAMPLING = _sampling("sample", "mul.wide.u32 %rd4, %r1, 8;\n    add.s64 %rd5, %rd2, %rd4;\n"
                     "    ld.global.v2.f32 {%f1, %f2}, [%rd5];",
                     "mul.wide.u32 %rd6, %r1, 16;\n    add.s64 %rd7, %rd3, %rd6;")
TEX_2D = "tex.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2}];"
TLD4_G = "tld4.g.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2}];"
FETCH_1D = "mov.b32 %r2, %f1;\n    tex.1d.v4.f32.s32 {%f4, %f5, %f6, %f7}, [%rd1, {%r2}];"

SURFACE = """.version 8.0
.target sm_80
.address_size 64
.visible .entry surface(.param .u64 surf, .param .u64 out)
{
    .reg .b16 %rs<8>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [surf];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    {body}
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r5;
    ret;
}
"""
CLAMP_AND_ZERO = ("suld.b.2d.b32.clamp {%r3}, [%rd1, {%r2, %r1}];\n    "  # x in bytes: element tid, row tid
                  "add.u32 %r4, %r3, 1000;\n    "
                  "sust.b.2d.b32.zero [%rd1, {%r2, 1}], {%r4};\n    "  # row 1 rewritten; x past the edge dropped
                  "suld.b.2d.b32.zero {%r5}, [%rd1, {%r2, 1}];")

ADDRESS_MODES = ("clamp", "wrap", "mirror", "border")
# the bilinear cases: a 4 x 8 float4 texture, x = u*8 - 0.5 and y = v*4 - 0.5 with weights of 1/4 and 1/2,
# inside and past both edges
BILINEAR_U = [0.0625 + k * 0.03125 * 5 for k in range(8)] + [-0.25, 1.125, 0.53125, 1.0]
BILINEAR_V = [0.125 + k * 0.0625 * 3 for k in range(8)] + [-0.125, 0.3125, 1.25, 0.0]


def bilinear_texels() -> np.ndarray:
    texels = np.random.default_rng(17).uniform(-4, 4, size=(4, 8, 4)).astype(np.float32)
    texels[0, 0] = [3e38, -0.0, 0.0, -3e38]  # a corner beyond which the addressing modes differ
    return texels


def texel_at(texels: np.ndarray, i: int, j: int, address: str) -> np.ndarray:
    """Texel (column i, row j) of a (H, W, C) texture under an addressing mode (border: zeros)."""
    height, width = texels.shape[:2]
    if address == "clamp":
        i, j = min(max(i, 0), width - 1), min(max(j, 0), height - 1)
    elif address == "wrap":
        i, j = i % width, j % height
    elif address == "mirror":
        i, j = i % (2 * width), j % (2 * height)
        i, j = (i if i < width else 2 * width - 1 - i), (j if j < height else 2 * height - 1 - j)
    elif not (0 <= i < width and 0 <= j < height):
        return np.zeros(texels.shape[2])
    return texels[j, i].astype(np.float64)


def ptx_sample(texels: np.ndarray, u: float, v: float, address: str, weight_bits: int | None = 8,
               rounding=round) -> np.ndarray:
    """PTX's bilinear tex.2d of a (H, W, C) float texture at normalised (u, v); weights taken to `weight_bits`
    fractional bits by `rounding` (None: exact)."""
    height, width = texels.shape[:2]
    x, y = u * width - 0.5, v * height - 0.5
    i, j = int(np.floor(x)), int(np.floor(y))
    a, b = x - i, y - j
    if weight_bits is not None:
        scale = 1 << weight_bits
        a, b = rounding(a * scale) / scale, rounding(b * scale) / scale
    return ((1 - a) * (1 - b) * texel_at(texels, i, j, address) + a * (1 - b) * texel_at(texels, i + 1, j, address)
            + (1 - a) * b * texel_at(texels, i, j + 1, address) + a * b * texel_at(texels, i + 1, j + 1, address))


def f32_ties_away(value: Fraction) -> np.float32:
    """An exact value rounded to the nearest f32, ties away from zero (f32's normal range and zero)."""
    if value == 0:
        return np.float32(0.0)
    magnitude = abs(value)
    exponent = math.floor(math.log2(magnitude))
    while Fraction(2) ** exponent > magnitude:
        exponent -= 1
    while Fraction(2) ** (exponent + 1) <= magnitude:
        exponent += 1
    unit = Fraction(2) ** (max(exponent, -126) - 23)
    steps = math.floor(magnitude / unit + Fraction(1, 2))
    return np.float32(math.copysign(float(steps * unit), value))


def nvidia_fraction(position: float) -> tuple[int, int]:
    """A filter position's texel below and its fraction in 256ths, rounded to nearest with ties up (the
    H200: every fourth x of the 1024-position sweep is a tie, and all went up)."""
    low = math.floor(position)
    return low, math.floor((position - low) * 256 + 0.5)


def nvidia_weights(alpha: int, beta: int) -> list[int]:
    """NVIDIA's four bilinear weights in 256ths, of texels (i, j), (i+1, j), (i, j+1), (i+1, j+1), from the
    fractions α, β in 256ths: only αβ is rounded (to nearest, ties up); the others are what keeps each
    axis's pair summing to its fraction: α − w11, β − w11, 256 − α − β + w11 (fitted: all 1024 lanes of the
    H200's weight sweep, whose texels make the result the weights themselves)."""
    corner = math.floor(alpha * beta / 256 + 0.5)
    return [256 - alpha - beta + corner, alpha - corner, beta - corner, corner]


def nvidia_blend(weights: list[int], values: list[float]) -> np.float32:
    """Σ weight/256 · texel rounded once to f32, ties away from zero; texels of weight 0 take no part (an
    H200 returns -0 for a -0 texel of weight 1 beside +0 texels of weight 0)."""
    terms = [(w, v) for w, v in zip(weights, values) if w]
    total = sum(Fraction(w, 256) * Fraction(float(v)) for w, v in terms)
    if total == 0:
        return np.float32(-0.0 if all(math.copysign(1.0, float(v)) < 0 for _w, v in terms) else 0.0)
    return f32_ties_away(total)


def nvidia_sample(texels: np.ndarray, u: float, v: float, address: str) -> np.ndarray:
    """Bilinear tex.2d of a (H, W, C) float texture at normalised (u, v) as NVIDIA's texture unit computes it
    (every float lookup of textures_h200.json, 1 124 lanes: the four addressing modes, coordinates off the
    8-bit grid, texel offsets, the weight sweep): the fractions of x = u·W − 0.5 and y = v·H − 0.5 to 8 bits
    (`nvidia_fraction`), the weights of `nvidia_weights`, and `nvidia_blend`'s one rounding of the sum."""
    height, width = texels.shape[:2]
    i, alpha = nvidia_fraction(float(np.float32(u)) * width - 0.5)
    j, beta = nvidia_fraction(float(np.float32(v)) * height - 0.5)
    weights = nvidia_weights(alpha, beta)
    corners = [texel_at(texels, i + di, j + dj, address) for dj in (0, 1) for di in (0, 1)]
    return np.array([nvidia_blend(weights, [t[c] for t in corners]) for c in range(texels.shape[2])],
                    dtype=np.float32)


def nvidia_sample_unorm8(texels: np.ndarray, u: float, v: float, address: str) -> np.ndarray:
    """Bilinear tex.2d of an 8-bit UNORM texture (texels: the integers) read as normalised floats, as an H200
    does it (16 lanes × 4 channels of textures_h200.json): the weights of `nvidia_sample`, each texel taken
    as the 16-bit value 257·t, the weighted sum rounded to the nearest integer N (no tie was measured; ties up
    here), and the result N / 65535 in f32 (a 16-bit UNORM value, not the f32 sum of t / 255)."""
    height, width = texels.shape[:2]
    i, alpha = nvidia_fraction(float(np.float32(u)) * width - 0.5)
    j, beta = nvidia_fraction(float(np.float32(v)) * height - 0.5)
    weights = nvidia_weights(alpha, beta)
    corners = [texel_at(texels, i + di, j + dj, address) for dj in (0, 1) for di in (0, 1)]
    sums = [sum(Fraction(w * 257 * int(t[c]), 256) for w, t in zip(weights, corners)) for c in range(texels.shape[2])]
    return np.array([np.float32(math.floor(s + Fraction(1, 2)) / 65535) for s in sums], dtype=np.float32)


def nvidia_sample_3d(texels: np.ndarray, u: float, v: float, w: float) -> np.ndarray:
    """Trilinear tex.3d of a (D, H, W, C) float texture, clamp addressing, as an H200 filters:
    `nvidia_filter` with `nvidia_weights_3d` (refitted to the fourth run's 1 280-lane weight sweep) and
    `nvidia_blend`'s sum."""
    return nvidia_filter(texels, (u, v, w), "clamp", float_blend)


def gather_order(texels: np.ndarray, u: float, v: float, component: int) -> list[float]:
    """tld4's four values: `component` of texels (i, j+1), (i+1, j+1), (i+1, j), (i, j) (clamped)."""
    height, width = texels.shape[:2]
    i, j = int(np.floor(u * width - 0.5)), int(np.floor(v * height - 0.5))
    return [float(texel_at(texels, x, y, "clamp")[component]) for x, y in
            ((i, j + 1), (i + 1, j + 1), (i + 1, j), (i, j))]


# ------------------------------------------------------- the fourth run: normalised formats, 1-D and 3-D

# the normalised formats a lookup converts and filters: name → (bits, signed)
NORMALISED_FORMATS = {"snorm8": (8, True), "unorm16": (16, False), "snorm16": (16, True), "unorm8": (8, False)}


def normalised_dtype(bits: int, signed: bool) -> np.dtype:
    return np.dtype(f"{'i' if signed else 'u'}{bits // 8}")


def normalised_texels(bits: int, signed: bool, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Random bit patterns of a (…, C) texture of `bits`-bit integers, with each extreme (the most negative,
    its neighbour, the largest, 0, ±1, the middle) in one channel of the first texels, so that filters mix
    them with random neighbours."""
    dtype = normalised_dtype(bits, signed)
    limits = np.iinfo(dtype)
    texels = np.random.default_rng(seed).integers(limits.min, limits.max, shape, dtype=dtype, endpoint=True)
    extremes = ([limits.min, limits.min + 1, limits.max, 0, -1, 1] if signed
                else [0, limits.max, 1, limits.max - 1, limits.max // 2 + 1, 0])
    flat = texels.reshape(-1)
    flat[[5 * n % flat.size for n in range(len(extremes))]] = extremes
    return texels


def normalised_value(t: int, bits: int, signed: bool) -> float:
    """A UNORM/SNORM integer as the float it stands for (SNORM's most negative value reads −1), exactly."""
    top = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    return max(Fraction(int(t), top), Fraction(-1))


def axis_coords(size: int, count: int, seed: int) -> np.ndarray:
    """`count` normalised f32 coordinates of one axis of `size` texels that tell filter rules apart: a quarter
    random (past both edges too), a quarter at ties of an 8-bit fraction (x = i + (k + ½)/256), a quarter
    beside the 8-bit grid (k/256 ± 2⁻¹⁴ and ± 2⁻¹⁸ texels), and the rest at texel centres, at texel borders
    (a fraction of exactly ½: a tie of every two-texel blend whose sum is odd), at 0 and 1 and just past
    them; shuffled."""
    rng = np.random.default_rng(seed)
    quarter = count // 4
    low, high = -2, size + 1
    random = rng.uniform(-0.25, 1.25, quarter)
    ties = (rng.integers(low, high, quarter) + 0.5 + (rng.integers(0, 256, quarter) + 0.5) / 256) / size
    near = (rng.integers(low, high, quarter) + 0.5 + rng.integers(0, 256, quarter) / 256
            + rng.choice([-2.0 ** -14, 2.0 ** -14, -2.0 ** -18, 2.0 ** -18], quarter)) / size
    rest = count - 3 * quarter
    special = np.concatenate([(np.arange(-1, size + 1) + 0.5) / size, np.arange(-1, size + 2) / size,
                              [0.0, 1.0, -2.0 ** -20, 1 + 2.0 ** -20, 2.0 ** -20, 1 - 2.0 ** -20]])
    special = np.concatenate([special, rng.choice(special, max(rest - special.size, 0))])[:rest]
    coords = np.concatenate([random, ties, near, special]).astype(np.float32)
    return coords[rng.permutation(count)]


def filter_coords(sizes: tuple[int, ...], count: int, seed: int) -> np.ndarray:
    """(count, 4) f32 lookups: for each axis of `sizes` (x first) its own shuffle of `axis_coords`; the
    unused axes 0."""
    coords = np.zeros((count, 4), dtype=np.float32)
    for axis, size in enumerate(sizes):
        coords[:, axis] = axis_coords(size, count, seed + 101 * axis)
    return coords


def texel_nd(texels: np.ndarray, index: tuple[int, ...], address: str) -> np.ndarray | None:
    """Texel `index` (x first) of a texture whose array axes are (…, z, y, x, channel) under clamp or wrap
    addressing (border: None, the border colour 0)."""
    sizes = texels.shape[-2::-1]
    if address == "border" and not all(0 <= i < n for i, n in zip(index, sizes)):
        return None
    fixed = [min(max(i, 0), n - 1) if address == "clamp" else i % n for i, n in zip(index, sizes)]
    return texels[tuple(reversed(fixed))]


def nvidia_weights_1d(alpha: int) -> list[int]:
    """Linear tex.1d's two weights in 256ths of texels i, i+1 (the 2-D rule with β = 0)."""
    return [256 - alpha, alpha]


def nvidia_weights_3d(alpha: int, beta: int, gamma: int) -> list[int]:
    """tex.3d's eight weights in 256ths, of texels (i+di, j+dj, k+dk) in the order dk, dj, di (di fastest),
    fitted to the fourth H200 run's weight sweep (1 280 lanes, every weight exact; `weights_from_sweep_3d`):
    the z fraction splits the whole into slices 1 − γ, γ; each slice is split by α, its x = 1 share rounded
    to the nearest 256th, ties up; each of those four by β, the y = 1 share rounded to nearest with ties up
    where di = 1 and ties **down** where di = 0 (every one of 67 ties measured so); the other shares by
    difference. (No 2-D rule on two of the axes split by the third fits: the best, x and z split by y, misses
    51 lanes.)"""
    weights = [0] * 8
    for dk, slice_weight in ((0, 256 - gamma), (1, gamma)):
        right = math.floor(slice_weight * alpha / 256 + 0.5)
        for di, cell in ((0, slice_weight - right), (1, right)):
            share = Fraction(cell * beta, 256)
            upper = math.floor(share + Fraction(1, 2)) if di else math.ceil(share - Fraction(1, 2))
            weights[4 * dk + di], weights[4 * dk + 2 + di] = cell - upper, upper
    return weights


def nvidia_footprint(sizes: tuple[int, ...], coords, unnormalised: bool = False, address: str = "clamp"):
    """The lower texel index (x first) and the NVIDIA weights (`nvidia_weights_1d`, `nvidia_weights`,
    `nvidia_weights_3d`, ordered x fastest) of a linear lookup at `coords`. Under clamp addressing each
    position x − 0.5 is first clamped to [0, size − 1] (the fourth run: without it 3-D lookups past an edge
    miss 78 of 512 lanes, with it none; 1-D and 2-D give the same either way)."""
    positions = [float(np.float32(c)) * (1 if unnormalised else n) - 0.5 for c, n in zip(coords, sizes)]
    if address == "clamp":
        positions = [min(max(p, 0.0), n - 1.0) for p, n in zip(positions, sizes)]
    found = [nvidia_fraction(p) for p in positions]
    low = tuple(i for i, _f in found)
    fractions = [f for _i, f in found]
    weights = (nvidia_weights_1d, nvidia_weights, nvidia_weights_3d)[len(sizes) - 1](*fractions)
    return low, weights


def nvidia_filter(texels: np.ndarray, coords, address: str, blend, unnormalised: bool = False) -> np.ndarray:
    """A linear lookup of a 1-, 2- or 3-D texture (array axes (…, y, x, channel)) at `coords` (x first):
    NVIDIA's footprint and weights, then `blend(weights, values)` per channel (values: each corner's
    texel value, None for the border)."""
    sizes = texels.shape[-2::-1]
    low, weights = nvidia_footprint(sizes, coords, unnormalised, address)
    offsets = [tuple((n >> axis) & 1 for axis in range(len(sizes))) for n in range(1 << len(sizes))]
    corners = [texel_nd(texels, tuple(i + d for i, d in zip(low, offset)), address) for offset in offsets]
    return np.array([blend(weights, [None if t is None else t[c] for t in corners])
                     for c in range(texels.shape[-1])], dtype=np.float32)


def float_blend(weights: list[int], values: list) -> np.float32:
    """`nvidia_blend` with border texels as 0."""
    return nvidia_blend(weights, [0.0 if v is None else float(v) for v in values])


def snorm8_to_16(t: int) -> int:
    """An SNORM8 texel as the 16-bit SNORM value NVIDIA filters (the fourth run's lookups of weight 1): its
    7-bit magnitude m repeated into 15 bits, m·258 + (m >> 6), with the sign; −128 keeps magnitude 128."""
    magnitude = abs(int(t))
    wide = magnitude * 258 + (magnitude >> 6)
    return -wide if t < 0 else wide


def normalised_blend(bits: int, signed: bool):
    """NVIDIA's blend of a normalised texture (fitted to the fourth H200 run), a function of the weights and
    the texel integers (None: the border, 0): every format filters to a 16-bit value N, the weighted sum of
    the texels as 16-bit integers rounded to nearest, **ties up** (toward +∞), and returns N / 65535
    (unsigned) or max(N / 32767, −1) (signed) in f32. The texels as 16-bit integers: UNORM8 257·t; UNORM16 and
    SNORM16 t itself (−32768 too: it blends as −32768, reads −1 alone). SNORM8 is modelled as the 8-bit blend
    Σ w·t taken to 16 bits, N = Σ w·t · 32767/127 rounded (a texel of weight 1 reads `snorm8_to_16`); it misses
    5 % of the fifth run's sweep values by one step (the H200 rounds some values just past a half down)."""
    top = (1 << 16) - 1 if not signed else (1 << 15) - 1

    def wide(t) -> int:
        t = 0 if t is None else int(t)
        return 257 * t if bits == 8 and not signed else t

    def blend(weights: list[int], values: list) -> np.float32:
        total = sum(Fraction(w * wide(t), 256) for w, t in zip(weights, values))
        if bits == 8 and signed:  # the blended SNORM8 value, t / 127, to 16 bits
            total *= Fraction(32767, 127)
        steps = math.floor(total + Fraction(1, 2))
        return np.float32(max(Fraction(steps, top), Fraction(-1)))
    return blend


def point_coords(size: int, count: int, seed: int) -> np.ndarray:
    """Normalised f32 coordinates of one axis at and beside texel borders (u·size = i ± 2⁻ⁿ, n = 8 … 22; the
    8-bit grid of the filter would move these), half of `count`, and `axis_coords`' mix, shuffled."""
    rng = np.random.default_rng(seed)
    half = count // 2
    borders = (rng.integers(-1, size + 2, half) + rng.choice([-1, 1], half) * 2.0 ** -rng.integers(8, 23, half)) / size
    coords = np.concatenate([borders.astype(np.float32), axis_coords(size, count - half, seed + 1)])
    return coords[rng.permutation(count)]


def point_sample(texels: np.ndarray, coords, address: str) -> np.ndarray:
    """A point lookup (array axes (…, y, x, channel), coords x first): texel ⌊u·size⌋ of each axis, exactly."""
    index = tuple(math.floor(float(np.float32(c)) * n) for c, n in zip(coords, texels.shape[-2::-1]))
    texel = texel_nd(texels, index, address)
    return np.zeros(texels.shape[-1], np.float32) if texel is None else texel

def sweep_3d_texels() -> tuple[np.ndarray, np.ndarray]:
    """Two 2 × 2 × 2 float4 textures whose lookups give 7 sums of NVIDIA's eight 3-D weights (with Σ = 1 all
    eight, exactly): texel (i, j, k) holds (i, j, k, ijk) and (ij, jk, ik, 0)."""
    first, second = np.zeros((2, 2, 2, 4), np.float32), np.zeros((2, 2, 2, 4), np.float32)
    for k in range(2):
        for j in range(2):
            for i in range(2):
                first[k, j, i] = [i, j, k, i * j * k]
                second[k, j, i] = [i * j, j * k, i * k, 0]
    return first, second


def weights_from_sweep_3d(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The eight 3-D weights in 256ths (order dk, dj, di, di fastest) from a lookup of each `sweep_3d_texels`
    texture: w111 = ijk; w110 = ij − w111, w011 = jk − w111, w101 = ik − w111; w100 = i − w110 − w101 − w111
    (likewise w010, w001); w000 = 1 − the rest."""
    s = np.rint(np.concatenate([first, second]).astype(np.float64) * 256).astype(np.int64)
    i, j, k, ijk, ij, jk, ik = s[0], s[1], s[2], s[3], s[4], s[5], s[6]
    w110, w011, w101 = ij - ijk, jk - ijk, ik - ijk
    w100, w010, w001 = i - w110 - w101 - ijk, j - w110 - w011 - ijk, k - w011 - w101 - ijk
    w000 = 256 - (w100 + w010 + w001 + w110 + w011 + w101 + ijk)
    return np.array([w000, w100, w010, w110, w001, w101, w011, ijk])


def queries(names: tuple[str, str, str, str, str]) -> str:
    """A kernel k(t, out) writing the answers of five txq/suq queries (as "txq.channel_order") of the handle t
    to out[0:5], a u32 each."""
    body = "\n    ".join(f"{name}.b32 %r{i}, [%rd1];" for i, name in enumerate(names, 1))
    return """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 t, .param .u64 out)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [t];
    ld.param.u64 %rd2, [out];
    {queries}
    st.global.v4.u32 [%rd2], {%r1, %r2, %r3, %r4};
    st.global.u32 [%rd2+16], %r5;
    ret;
}
""".replace("{queries}", body)


QUERIES = queries(("txq.channel_data_type", "txq.channel_order", "txq.num_samples", "suq.channel_data_type",
                   "suq.channel_order"))

QUERY = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 t, .param .u64 out)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [t];
    ld.param.u64 %rd2, [out];
    {query}.b32 %r1, [%rd1];
    st.global.u32 [%rd2], %r1;
    ret;
}
"""

FORMATTED_STORE = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 surf, .param .u64 values)
{
    .reg .b32 %r<12>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [surf];
    ld.param.u64 %rd2, [values];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 16;
    add.s64 %rd2, %rd2, %rd3;
    ld.global.v4.b32 {%r2, %r3, %r4, %r5}, [%rd2];
    sust.p.2d.v4.b32.zero [%rd1, {%r1, 1}], {%r2, %r3, %r4, %r5};
    ret;
}
"""


# sust.p into 8-bit integer surfaces: values past 8 bits both ways (an H200 stores them into uchar4 as
# unsigned_saturated: 300 → 255, -5 → 255)
SATURATED_STORES = np.array([[300, -5, 255, 7], [1, 2, 3, 4], [0x1FF, 0x100, 0xFF, 0], [-1, 0, 128, 9]], np.int32)


def unsigned_saturated(values: np.ndarray, bits: int) -> list[int]:
    """The .b32 values as .u32, saturated to `bits` (NVIDIA's sust.p into an unsigned integer channel)."""
    return np.minimum(values.view(np.uint32), (1 << bits) - 1).reshape(-1).tolist()


REDUCE_64 = """.version 8.1
.target sm_80
.address_size 64
.visible .entry reduce(.param .u64 surf)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [surf];
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 3;
    shl.b32 %r3, %r2, 3;
    cvt.u64.u32 %rd2, %r1;
    mul.lo.u64 %rd3, %rd2, 0x0000000100000003;
    sub.s64 %rd4, 5, %rd3;
    sured.b.add.2d.u64.zero [%rd1, {%r3, 0}], %rd3;
    sured.b.min.2d.s64.zero [%rd1, {%r3, 1}], %rd4;
    sured.b.max.2d.u64.clamp [%rd1, {%r3, 9}], %rd4;
    ret;
}
"""


REDUCE_P = """.version 8.0
.target sm_80
.address_size 64
.visible .entry reduce(.param .u64 surf)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [surf];
    mov.u32 %r1, %tid.x;
    sub.s32 %r2, 3, %r1;
    sured.p.min.1d.b32.trap [%rd1, {1}], %r2;
    sured.p.max.1d.b32.trap [%rd1, {2}], %r2;
    sured.p.add.1d.b32.trap [%rd1, {3}], %r1;
    ret;
}
"""


# the same reductions at addresses ptxas cannot prove uniform (x = (tid >> 3) + 1 …: 1, 2, 3 for 8 lanes), so
# each lane's value reaches the surface (SURED per lane); at the constant addresses of REDUCE_P, ptxas 13
# first reduces the warp's values with REDUX.MIN/MAX, which compare unsigned, then issues one SURED.MIN/
# MAX.SD32 (nvdisasm of ptxas -arch=sm_90): the H200's [100, 0, 1, 38] on an int1 surface is that
# composition, not the surface's rule
REDUCE_P_LANES = REDUCE_P.replace(
    "    sured.p.min.1d.b32.trap [%rd1, {1}], %r2;\n    sured.p.max.1d.b32.trap [%rd1, {2}], %r2;\n"
    "    sured.p.add.1d.b32.trap [%rd1, {3}], %r1;",
    "    shr.u32 %r3, %r1, 3;\n    add.u32 %r4, %r3, 1;\n    add.u32 %r5, %r3, 2;\n    add.u32 %r6, %r3, 3;\n"
    "    sured.p.min.1d.b32.trap [%rd1, {%r4}], %r2;\n    sured.p.max.1d.b32.trap [%rd1, {%r5}], %r2;\n"
    "    sured.p.add.1d.b32.trap [%rd1, {%r6}], %r1;")
REDUCE_P_START = [100, 100, 1, 10]


def sured_p_model(signed: bool, aggregated: bool) -> list[int]:
    """Elements 0–3 after REDUCE_P (`aggregated`: ptxas's unsigned warp REDUX first) or REDUCE_P_LANES on 8
    lanes, the surface comparing signed or unsigned; as .u32 bit patterns."""
    values = [(3 - t) & 0xFFFFFFFF for t in range(8)]
    smallest, largest = ([min(values)], [max(values)]) if aggregated else (values, values)

    def key(v: int) -> int:
        return v - (1 << 32) if signed and v >> 31 else v

    return [REDUCE_P_START[0], min([REDUCE_P_START[1], *smallest], key=key),
            max([REDUCE_P_START[2], *largest], key=key), REDUCE_P_START[3] + sum(range(8))]


def cube_face(x: float, y: float, z: float) -> tuple[int, float, float]:
    """CUDA's cube-map rule (the programming guide's cubemap table): the major axis's face and that face's
    (s, t) in [0, 1]."""
    ax, ay, az = abs(x), abs(y), abs(z)
    if ax >= ay and ax >= az:
        face, sc, tc, ma = (0, -z, -y, ax) if x >= 0 else (1, z, -y, ax)
    elif ay >= az:
        face, sc, tc, ma = (2, x, z, ay) if y >= 0 else (3, x, -z, ay)
    else:
        face, sc, tc, ma = (4, x, -y, az) if z >= 0 else (5, -x, -y, az)
    return face, (sc / ma + 1) / 2, (tc / ma + 1) / 2


CUBE = _sampling("cube", "mul.wide.u32 %rd4, %r1, 16;\n    add.s64 %rd5, %rd2, %rd4;\n"
                 "    ld.global.v4.f32 {%f1, %f2, %f3, %f8}, [%rd5];\n    mov.b32 %r2, %f8;",
                 "add.s64 %rd7, %rd3, %rd4;")


# one lookup per thread of any number of blocks: coordinates (x, y, z, w) as 16 bytes each (w's bits are
# %r2, an array layer), results 16 bytes each
GRID = _sampling("grid", "mov.u32 %r2, %ctaid.x;\n    mov.u32 %r3, %ntid.x;\n    mad.lo.u32 %r1, %r2, %r3, %r1;\n"
                 "    mul.wide.u32 %rd4, %r1, 16;\n    add.s64 %rd5, %rd2, %rd4;\n"
                 "    ld.global.v4.f32 {%f1, %f2, %f3, %f8}, [%rd5];\n    mov.b32 %r2, %f8;",
                 "add.s64 %rd7, %rd3, %rd4;")
LOOKUPS = {1: "tex.1d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1}];",
           2: TEX_2D,
           3: "tex.3d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2, %f3, %f3}];",
           "a2d": "tex.a2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%r2, %f1, %f2, %f2}];",
           "fetch": "mov.b32 %r2, %f1;\n    tex.1d.v4.f32.s32 {%f4, %f5, %f6, %f7}, [%rd1, {%r2}];"}


def cube_directions(count: int, size: int, seed: int, gather: bool = False) -> list[tuple[float, float, float]]:
    """Random directions, none near a tie between axes, whose face coordinates × size lie 0.01 or more from a
    texel edge (`gather`: from a texel centre, the 2 × 2 footprint inside the face), so that rounding cannot
    move the answer."""
    rng, found = np.random.default_rng(seed), []
    while len(found) < count:
        x, y, z = (float(np.float32(c)) for c in rng.uniform(-2, 2, 3))
        magnitudes = sorted((abs(x), abs(y), abs(z)))
        _face, s, t = cube_face(x, y, z)
        positions = [c * size - (0.5 if gather else 0.0) for c in (s, t)]
        if magnitudes[2] - magnitudes[1] > 0.05 and all(
                abs(p - round(p)) > 0.01 and (not gather or 0 < p < size - 1) for p in positions):
            found.append((x, y, z))
    return found


# ------------------------------------------------------------------------------------------- on the GPU

# cudaMalloc3DArray's flags (CUDA's driver_types.h; cupy's runtime module names only cudaArraySurfaceLoadStore)
CUDA_ARRAY_LAYERED, CUDA_ARRAY_CUBEMAP, CUDA_ARRAY_TEXTURE_GATHER = 0x01, 0x04, 0x08

def _run(out_path: Path | None) -> int:
    import cupy as cp
    from cupy.cuda import runtime, texture

    work = Path(tempfile.mkdtemp())
    modes = {"wrap": runtime.cudaAddressModeWrap, "clamp": runtime.cudaAddressModeClamp,
             "mirror": runtime.cudaAddressModeMirror, "border": runtime.cudaAddressModeBorder}
    float4 = texture.ChannelFormatDescriptor(32, 32, 32, 32, runtime.cudaChannelFormatKindFloat)

    def module(text: str, name: str):
        path = work / f"{name}{len(list(work.iterdir()))}.ptx"  # a new name each: cupy caches modules by path
        path.write_text(text)
        return cp.RawModule(path=str(path))

    def array_texture(texels: np.ndarray, address: str, linear_filter: bool = True, gather: bool = False):
        height, width = texels.shape[:2]
        # tld4 (tex2Dgather) needs an array made for gathers (cudaArrayTextureGather)
        array = texture.CUDAarray(float4, width, height, flags=CUDA_ARRAY_TEXTURE_GATHER if gather else 0)
        array.copy_from(np.ascontiguousarray(texels).reshape(height, -1))  # rows of width x 4 values
        resource = texture.ResourceDescriptor(runtime.cudaResourceTypeArray, cuArr=array)
        description = texture.TextureDescriptor(
            (modes[address], modes[address]),
            runtime.cudaFilterModeLinear if linear_filter else runtime.cudaFilterModePoint,
            runtime.cudaReadModeElementType, normalizedCoords=1)
        return texture.TextureObject(resource, description), array

    def sample(instruction: str, handle, coords: list[tuple[float, float]]) -> np.ndarray:
        kernel = module(SAMPLING.replace("{instruction}", instruction), "sample").get_function("sample")
        flat = cp.asarray(np.array(coords, dtype=np.float32).reshape(-1))
        out = cp.full((len(coords), 4), np.nan, dtype=cp.float32)
        kernel((1,), (len(coords),), (np.uint64(handle), flat, out))
        return cp.asnumpy(out)

    records, failures = [], 0

    def record(case: str, agrees: bool, **facts) -> None:
        nonlocal failures
        failures += not agrees
        records.append({"case": case, "agrees": agrees, **facts})
        print(("ok  " if agrees else "DIFF") + f" {case}: {json.dumps(facts)[:300]}")

    texels = bilinear_texels()
    coords = list(zip(BILINEAR_U, BILINEAR_V))
    for address in ADDRESS_MODES:
        tex, _array = array_texture(texels, address)
        out = sample(TEX_2D, tex.ptr, coords)
        exact = np.array([nvidia_sample(texels, u, v, address) for u, v in coords])
        record(f"tex.2d bilinear {address} (NVIDIA's rule, to the bit)",
               bool(np.array_equal(out.view(np.uint32), exact.view(np.uint32))), measured=out.tolist())
        expected = np.array([ptx_sample(texels, u, v, address) for u, v in coords], dtype=np.float32)
        differing = [int(k) for k in np.nonzero(~np.all(out == expected, axis=1))[0]]
        ulps = np.abs(out.view(np.int32).astype(np.int64) - expected.view(np.int32).astype(np.int64))
        # NVIDIA filters in f32: the sum of the four weighted texels may round differently (1 ulp)
        record(f"tex.2d bilinear {address} (within 1 ulp)", int(ulps.max()) <= 1, ulps=int(ulps.max()),
               differing={k: {"measured": out[k].tolist(), "model": expected[k].tolist(),
                              "exact": ptx_sample(texels, *coords[k], address, None).tolist()} for k in differing})
    # weights not exact in 8 bits: which precision reproduces NVIDIA's result
    rough = [(0.2 + k * 0.0137, 0.3 + k * 0.0291) for k in range(16)]
    texels = bilinear_texels()
    texels[0, 0] = [1.0, 2.0, 3.0, 4.0]  # no huge corner: the differences are the weights'
    tex, _array = array_texture(texels, "clamp")
    out = sample(TEX_2D, tex.ptr, rough)
    precision = {}
    for bits in (None, 6, 7, 8, 9, 10, 12):
        for name, rounding in (("round", round), ("floor", np.floor)):
            model = np.array([ptx_sample(texels, u, v, "clamp", bits, rounding) for u, v in rough], dtype=np.float32)
            precision[f"{bits} {name}"] = float(np.max(np.abs(model - out)))
            if bits is None:
                break
    # no rounding of α and β alone fits (the table); NVIDIA's rule must, to the bit
    fitted = np.array([nvidia_sample(texels, u, v, "clamp") for u, v in rough])
    record("tex.2d bilinear weight precision (max |model - H200| per weight bits and rounding; NVIDIA's rule to "
           "the bit)", bool(np.array_equal(out.view(np.uint32), fitted.view(np.uint32))), max_difference=precision,
           coords=rough, measured=out.tolist())

    grid = np.arange(4 * 4 * 4, dtype=np.float32).reshape(4, 4, 4)
    tex, _array = array_texture(grid, "clamp", gather=True)
    points = [(0.375, 0.375), (0.625, 0.875), (0.0, 0.0)]
    out = sample(TLD4_G, tex.ptr, points)
    expected = np.array([gather_order(grid, u, v, 1) for u, v in points], dtype=np.float32)
    record("tld4.g order", bool(np.array_equal(out, expected)), measured=out.tolist(), model=expected.tolist())

    values = np.array([1.5, -2.0, np.inf, 7.25, 0.0, -0.0, 3.0, 1e-40], dtype=np.float32)
    device = cp.asarray(values)
    one = texture.ChannelFormatDescriptor(32, 0, 0, 0, runtime.cudaChannelFormatKindFloat)
    resource = texture.ResourceDescriptor(runtime.cudaResourceTypeLinear, arr=device, chDesc=one,
                                          sizeInBytes=values.nbytes)
    description = texture.TextureDescriptor((runtime.cudaAddressModeClamp,), runtime.cudaFilterModePoint,
                                            runtime.cudaReadModeElementType)
    linear = texture.TextureObject(resource, description)
    indices = [0, 1, 2, 3, 7, 8, 100, 5]
    out = sample(FETCH_1D, linear.ptr, [(np.array(i, np.int32).view(np.float32), 0.0) for i in indices])
    # a one-channel texture's other channels read 0, w too (measured); past the end all four read 0
    expected = np.array([[values[i], 0, 0, 0] if i < 8 else [0, 0, 0, 0] for i in indices], dtype=np.float32)
    record("tex1Dfetch of a float1 linear texture", bool(np.array_equal(out.view(np.uint32),
                                                                          expected.view(np.uint32))),
           measured_bits=[[hex(int(b)) for b in row] for row in out.view(np.uint32)])
    # the same texture read by CUDA C's tex1Dfetch (NVRTC), to tell the PTX from the texture object
    fetch = cp.RawKernel(r'''extern "C" __global__ void fetch(cudaTextureObject_t t, const int* at, float* o) {
        o[threadIdx.x] = tex1Dfetch<float>(t, at[threadIdx.x]); }''', "fetch")
    got = cp.zeros(len(indices), dtype=cp.float32)
    fetch((1,), (len(indices),), (np.uint64(linear.ptr), cp.asarray(np.array(indices, np.int32)), got))
    record("tex1Dfetch<float> (CUDA C) of the same texture", True, measured=cp.asnumpy(got).tolist())

    rows = np.arange(3 * 4, dtype=np.uint32).reshape(3, 4) * 10 + 1
    uint1 = texture.ChannelFormatDescriptor(32, 0, 0, 0, runtime.cudaChannelFormatKindUnsigned)
    array = texture.CUDAarray(uint1, 4, 3, flags=runtime.cudaArraySurfaceLoadStore)
    array.copy_from(rows)
    surface = texture.SurfaceObject(texture.ResourceDescriptor(runtime.cudaResourceTypeArray, cuArr=array))
    kernel = module(SURFACE.replace("{body}", CLAMP_AND_ZERO), "surface").get_function("surface")
    out = cp.zeros(6, dtype=cp.uint32)
    kernel((1,), (6,), (np.uint64(surface.ptr), out))
    measured = cp.asnumpy(out).tolist()
    clamped = [int(rows[min(t, 2), min(t, 3)]) for t in range(6)]
    expected = [clamped[t] + 1000 if t < 4 else 0 for t in range(6)]
    record("suld .clamp / sust .zero", measured == expected, measured=measured, model=expected)

    def attempt(case: str, body) -> None:
        """A case that may stop at an API NVIDIA refuses: the error is its record."""
        try:
            body()
        except Exception as exc:  # noqa: BLE001 (any failure is what the case measured)
            record(case, False, error=repr(exc)[:400])

    def surface_array(descriptor, width: int, height: int, data: np.ndarray):
        array = texture.CUDAarray(descriptor, width, height, flags=runtime.cudaArraySurfaceLoadStore)
        array.copy_from(data)
        return texture.SurfaceObject(texture.ResourceDescriptor(runtime.cudaResourceTypeArray, cuArr=array)), array

    def weight_sweep() -> None:
        """NVIDIA's bilinear weights themselves: texels (i, j, i·j, T) on a 2 × 2 texture give (w10 + w11,
        w01 + w11, w11, the blend of T) at x = 2u - 0.5 = k/1024 (a tie of the 8-bit rounding every fourth k)
        and y from a scrambled k; clamp addressing; against NVIDIA's rule (`nvidia_sample`, fitted to this
        case's 2026-12-02 run)."""
        grid = np.zeros((2, 2, 4), dtype=np.float32)
        for j in range(2):
            for i in range(2):
                grid[j, i] = [i, j, i * j, (1.0, 3.0, 7.0, 15.0)[2 * j + i]]
        tex, _array = array_texture(grid, "clamp")
        ks = range(1024)
        coords = [(0.25 + k / 2048, 0.25 + (k * 389 % 1024) / 2048) for k in ks]
        out = np.concatenate([sample(TEX_2D, tex.ptr, coords[n:n + 256]) for n in range(0, 1024, 256)])
        model = np.array([nvidia_sample(grid, u, v, "clamp") for u, v in coords])
        differing = int(np.count_nonzero(np.any(out != model, axis=1)))
        record("tex.2d bilinear weights at x = k/1024 (lanes differing from NVIDIA's rule)", differing == 0,
               differing=differing, coords=coords, measured=out.tolist())

    def normalized_bilinear() -> None:
        """Bilinear filtering of a uchar4 texture read as normalised floats, against `nvidia_sample_unorm8`
        (fitted to the 2026-12-02 run of this case: a 16-bit UNORM result)."""
        data = np.random.default_rng(31).integers(0, 256, (4, 8, 4), dtype=np.uint8)
        array = texture.CUDAarray(texture.ChannelFormatDescriptor(8, 8, 8, 8, runtime.cudaChannelFormatKindUnsigned),
                                  8, 4)
        array.copy_from(data.reshape(4, -1))
        tex = texture.TextureObject(
            texture.ResourceDescriptor(runtime.cudaResourceTypeArray, cuArr=array),
            texture.TextureDescriptor((modes["clamp"], modes["clamp"]), runtime.cudaFilterModeLinear,
                                      runtime.cudaReadModeNormalizedFloat, normalizedCoords=1))
        coords = [(0.2 + k * 0.0137, 0.3 + k * 0.0291) for k in range(16)]
        out = sample(TEX_2D, tex.ptr, coords)
        model = np.array([nvidia_sample_unorm8(data, u, v, "clamp") for u, v in coords])
        record("tex.2d bilinear of a normalised uchar4 texture (a 16-bit UNORM blend of 257·t)",
               bool(np.array_equal(out, model)), measured=out.tolist(), model=model.tolist())

    def trilinear() -> None:
        """tex.3d with a linear filter at coordinates off the 8-bit grid against NVIDIA's 3-D rule (fitted to
        this case's 2026-12-02 run); a second set of coordinates, past the edges as well, tests the fit."""
        texels = np.random.default_rng(37).uniform(-4, 4, (4, 4, 8, 4)).astype(np.float32)
        array = texture.CUDAarray(float4, 8, 4, 4)
        array.copy_from(texels.reshape(4, 4, -1))
        tex = texture.TextureObject(
            texture.ResourceDescriptor(runtime.cudaResourceTypeArray, cuArr=array),
            texture.TextureDescriptor((modes["clamp"],) * 3, runtime.cudaFilterModeLinear,
                                      runtime.cudaReadModeElementType, normalizedCoords=1))
        kernel = module(CUBE.replace("{instruction}",
                                     "tex.3d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2, %f3, %f3}];"),
                        "tex3d").get_function("cube")
        fitted = [[0.2 + k * 0.0137, 0.3 + k * 0.0291, 0.15 + k * 0.0413, 0] for k in range(16)]
        unseen = np.random.default_rng(41).uniform(-0.1, 1.1, (64, 3)).tolist()  # not used by the fit
        for name, points in (("", fitted), (", 64 coordinates the fit did not see", [[*c, 0] for c in unseen])):
            coords = np.array(points, dtype=np.float32)
            out = cp.full((len(coords), 4), np.nan, dtype=cp.float32)
            kernel((1,), (len(coords),), (np.uint64(tex.ptr), cp.asarray(coords), out))
            out = cp.asnumpy(out)
            model = np.array([nvidia_sample_3d(texels, *c[:3]) for c in coords])
            record(f"tex.3d bilinear (NVIDIA's 3-D rule, to the bit{name})",
                   bool(np.array_equal(out.view(np.uint32), model.view(np.uint32))), coords=coords.tolist(),
                   measured=out.tolist(), model=model.tolist())

    def narrow_formats() -> None:
        """What the channels a format lacks read through an array texture (point sampling, texel (1, 0))."""
        cases = {"float1": (texture.ChannelFormatDescriptor(32, 0, 0, 0, runtime.cudaChannelFormatKindFloat),
                            np.array([[1.5, -2.0], [3.0, 4.0]], np.float32), runtime.cudaReadModeElementType),
                 "float2": (texture.ChannelFormatDescriptor(32, 32, 0, 0, runtime.cudaChannelFormatKindFloat),
                            np.array([[1.5, -2.0, 5.0, 6.0], [3.0, 4.0, 7.0, 8.0]], np.float32),
                            runtime.cudaReadModeElementType),
                 "uchar1 normalised": (texture.ChannelFormatDescriptor(8, 0, 0, 0, runtime.cudaChannelFormatKindUnsigned),
                                       np.array([[51, 255], [0, 102]], np.uint8), runtime.cudaReadModeNormalizedFloat)}
        for name, (descriptor, data, read_mode) in cases.items():
            array = texture.CUDAarray(descriptor, 2, 2)
            array.copy_from(data)
            tex = texture.TextureObject(
                texture.ResourceDescriptor(runtime.cudaResourceTypeArray, cuArr=array),
                texture.TextureDescriptor((modes["clamp"], modes["clamp"]), runtime.cudaFilterModePoint, read_mode,
                                          normalizedCoords=1))
            out = sample(TEX_2D, tex.ptr, [(0.75, 0.25)])[0]
            channels = data.shape[1] // 2
            present = data[0].reshape(2, channels)[1].astype(np.float64) / (255 if data.dtype == np.uint8 else 1)
            model = np.array([*present, *[0.0] * (4 - channels)], dtype=np.float32)  # fatkit: absent reads 0
            record(f"tex.2d of a {name} array texture (absent channels read 0)",
                   bool(np.array_equal(out.view(np.uint32), model.view(np.uint32))), measured=out.tolist(),
                   model=model.tolist())

    def formatted_stores() -> None:
        float1 = texture.ChannelFormatDescriptor(32, 0, 0, 0, runtime.cudaChannelFormatKindFloat)
        uchar4 = texture.ChannelFormatDescriptor(8, 8, 8, 8, runtime.cudaChannelFormatKindUnsigned)
        kernel = module(FORMATTED_STORE, "formatted").get_function("k")
        values = np.array([[1.5, 2, 3, 4], [-0.0, 9, 9, 9], [np.inf, 0, 0, 0], [1e-40, 1, 1, 1]], np.float32)
        surface, array = surface_array(float1, 4, 2, np.zeros((2, 4), np.float32))
        kernel((1,), (4,), (np.uint64(surface.ptr), cp.asarray(values)))
        back = np.zeros((2, 4), np.float32)
        array.copy_to(back)
        record("sust.p into a float1 surface (x in samples; R kept, G/B/A dropped)",
               back[1].view(np.uint32).tolist() == values[:, 0].view(np.uint32).tolist(), measured=back.tolist())
        surface, array = surface_array(uchar4, 4, 2, np.zeros((2, 16), np.uint8))
        kernel((1,), (4,), (np.uint64(surface.ptr), cp.asarray(SATURATED_STORES)))
        back = np.zeros((2, 16), np.uint8)
        array.copy_to(back)
        record("sust.p into a uchar4 surface: .u32 values past 8 bits saturate (as .u32, to 255)",
               back[1].tolist() == unsigned_saturated(SATURATED_STORES, 8), measured=back[1].tolist())
        char4 = texture.ChannelFormatDescriptor(8, 8, 8, 8, runtime.cudaChannelFormatKindSigned)
        surface, array = surface_array(char4, 4, 2, np.zeros((2, 16), np.int8))
        kernel((1,), (4,), (np.uint64(surface.ptr), cp.asarray(SATURATED_STORES)))
        back = np.zeros((2, 16), np.int8)
        array.copy_to(back)
        model = np.clip(SATURATED_STORES, -128, 127).reshape(-1).tolist()  # fatkit: as .s32 to [-128, 127]
        record("sust.p into a char4 surface: .s32 values past 8 bits saturate (as .s32, to [-128, 127])",
               back[1].tolist() == model, measured=back[1].tolist(), model=model)

    def reductions() -> None:
        mask = (1 << 64) - 1
        start = [[1 << 40, 0, 5, mask], [0, (-1 << 50) & mask, 1 << 62, 3], [7, 0, 1 << 63, 9]]
        texels = np.array(start, dtype=np.uint64)
        uint2 = texture.ChannelFormatDescriptor(32, 32, 0, 0, runtime.cudaChannelFormatKindUnsigned)
        surface, array = surface_array(uint2, 4, 3, texels.view(np.uint32).reshape(3, 8))
        module(REDUCE_64, "reduce64").get_function("reduce")((1,), (32,), (np.uint64(surface.ptr),))
        back = np.zeros((3, 8), np.uint32)
        array.copy_to(back)
        after = back.view(np.uint64).reshape(3, 4)
        data = [(t * 0x0000000100000003) & mask for t in range(32)]
        signed = [(5 - d) & mask for d in data]

        def as_signed(v: int) -> int:
            return v - (1 << 64) if v >> 63 else v

        model = [[(start[0][i] + sum(data[t] for t in range(32) if t & 3 == i)) & mask for i in range(4)],
                 [min(as_signed(start[1][i]), *(as_signed(signed[t]) for t in range(32) if t & 3 == i)) & mask
                  for i in range(4)],
                 [max(start[2][i], *(signed[t] for t in range(32) if t & 3 == i)) for i in range(4)]]
        record("sured.b 64-bit add / signed min / unsigned max (.clamp) on a uint2 surface",
               [[int(v) for v in row] for row in after] == model, measured=[[hex(int(v)) for v in row] for row in after],
               model=[[hex(v) for v in row] for row in model])
        for kind, name in ((runtime.cudaChannelFormatKindSigned, "int1"),
                           (runtime.cudaChannelFormatKindUnsigned, "uint1")):
            for kernel_text, aggregated in ((REDUCE_P_LANES, False), (REDUCE_P, True)):
                start = np.array(REDUCE_P_START, dtype=np.int32 if name == "int1" else np.uint32)
                array = texture.CUDAarray(texture.ChannelFormatDescriptor(32, 0, 0, 0, kind), 4, 0,
                                          flags=runtime.cudaArraySurfaceLoadStore)
                array.copy_from(start)
                surface = texture.SurfaceObject(texture.ResourceDescriptor(runtime.cudaResourceTypeArray, cuArr=array))
                module(kernel_text, "reducep").get_function("reduce")((1,), (8,), (np.uint64(surface.ptr),))
                back = np.zeros(4, start.dtype)
                array.copy_to(back)
                measured = back.view(np.uint32).tolist()
                if aggregated:  # the explanation: ptxas's unsigned REDUX, then the surface's own comparison
                    record(f"sured.p min/max/add.b32 at uniform addresses on an {name} surface (ptxas's unsigned "
                           "warp REDUX, then the surface: signed, or as the format)",
                           measured in (sured_p_model(True, True), sured_p_model(name == "int1", True)),
                           measured=measured, signed=sured_p_model(True, True),
                           as_format=sured_p_model(name == "int1", True))
                else:  # fatkit's rule: the comparison the format's signedness says (ptxas emits .SD32 always)
                    record(f"sured.p min/max/add.b32 per lane on an {name} surface (signedness from the format)",
                           measured == sured_p_model(name == "int1", False), measured=measured,
                           model=sured_p_model(name == "int1", False), signed=sured_p_model(True, False))

    def cube_maps(instruction: str, layered: bool, gather: bool = False) -> None:
        size, cubes = (8, 1) if gather else (4, 2 if layered else 1)
        texels = np.zeros((6 * cubes, size, size, 4), dtype=np.float32)
        for layer in range(6 * cubes):
            for row in range(size):
                for column in range(size):
                    texels[layer, row, column] = [layer, column, row, 1]
        # no cudaArrayTextureGather: CUDA allows it on 2-D arrays only (tld4.cube is PTX's, CUDA C has no cube gather)
        flags = CUDA_ARRAY_CUBEMAP | (CUDA_ARRAY_LAYERED if layered else 0)
        array = texture.CUDAarray(float4, size, size, 6 * cubes, flags=flags)
        array.copy_from(texels.reshape(6 * cubes, size, -1))
        tex = texture.TextureObject(
            texture.ResourceDescriptor(runtime.cudaResourceTypeArray, cuArr=array),
            texture.TextureDescriptor((modes["clamp"],) * 3, runtime.cudaFilterModePoint,
                                      runtime.cudaReadModeElementType, normalizedCoords=1))
        directions = cube_directions(24, size, 3, gather=gather)
        cubes_of = [lane % cubes for lane in range(len(directions))]
        coords = np.array([[*d, np.uint32(c).view(np.float32)] for d, c in zip(directions, cubes_of)], np.float32)
        out = cp.full((len(directions), 4), np.nan, dtype=cp.float32)
        module(CUBE.replace("{instruction}", instruction), "cube").get_function("cube")(
            (1,), (len(directions),), (np.uint64(tex.ptr), cp.asarray(coords), out))
        out = cp.asnumpy(out)
        model = []
        for (x, y, z), cube in zip(directions, cubes_of):
            face, s, t = cube_face(x, y, z)
            if gather:  # the blue channel: the row of each of the four texels
                model.append(gather_order(texels[face], s, t, 2))
            else:
                model.append([cube * 6 + face, min(int(s * size), size - 1), min(int(t * size), size - 1), 1])
        record(f"{instruction.split()[0]} (CUDA's face rule{', layer × 6 + face' if layered else ''})",
               out.tolist() == model, directions=directions, measured=out.tolist(), model=model)

    def queries() -> None:
        """txq on a float4 array texture, suq on a uint1 surface, one query a kernel (the 2026-12-02 run's one
        kernel of all five failed to load: CUDA_ERROR_NOT_FOUND, named symbol not found; ptxas reads these
        queries from a driver table, `.nv.unified.texrefDescSize`); fatkit answers OpenCL's codes (CL_FLOAT
        0x10DE, CL_RGBA 0x10B5; CL_UNSIGNED_INT32 0x10DC, CL_R 0x10B0) and one sample."""
        tex, _tex_array = array_texture(bilinear_texels(), "clamp")
        uint1 = texture.ChannelFormatDescriptor(32, 0, 0, 0, runtime.cudaChannelFormatKindUnsigned)
        surface, _surface_array = surface_array(uint1, 4, 2, np.zeros((2, 4), np.uint32))
        expected = {"txq.channel_data_type": 0x10DE, "txq.channel_order": 0x10B5, "txq.num_samples": 1,
                    "suq.channel_data_type": 0x10DC, "suq.channel_order": 0x10B0}
        for query, value in expected.items():
            def one(query: str = query, value: int = value) -> None:
                text = QUERY.replace("{query}", query)
                handle = tex.ptr if query.startswith("txq") else surface.ptr
                out = cp.zeros(1, dtype=cp.uint32)
                module(text, "query").get_function("k")((1,), (1,), (np.uint64(handle), out))
                measured = int(cp.asnumpy(out)[0])
                record(f"{query} of a {'float4 array texture' if query.startswith('txq') else 'uint1 surface'}",
                       measured == value, measured=hex(measured), fatkit=hex(value))
            attempt(query, one)

    def offsets() -> None:
        """tex.2d and tld4.g with a texel offset: as sampling at (u + ox / width, v + oy / height)."""
        texels = bilinear_texels()
        tex, _array = array_texture(texels, "clamp", gather=True)
        coords = list(zip(BILINEAR_U, BILINEAR_V))
        for ox, oy in ((1, -1), (-3, 2), (7, -8)):
            moves = f"mov.u32 %r2, {ox};\n    mov.u32 %r3, {oy};\n    "
            for name, instruction in (("tex.2d", TEX_2D), ("tld4.g", TLD4_G)):
                out = sample(moves + instruction.replace("}];", "}], {%r2, %r3};"), tex.ptr, coords)
                shifted = [(u + ox / 8, v + oy / 4) for u, v in coords]
                model = np.array([nvidia_sample(texels, u, v, "clamp") if name == "tex.2d" else
                                  gather_order(texels, u, v, 1) for u, v in shifted], dtype=np.float32)
                record(f"{name} with offset ({ox}, {oy})", bool(np.array_equal(out, model)), measured=out.tolist())

    arrays: dict[str, np.ndarray] = {}  # the raw lookups of the fourth run's cases, saved next to the json

    def lookup(instruction: str, handle, coords: np.ndarray) -> np.ndarray:
        """GRID with `instruction`, one lookup per row of coords ((n, 4) f32), 256 threads a block."""
        kernel = module(GRID.replace("{instruction}", instruction), "grid").get_function("grid")
        blocks = -(-len(coords) // 256)
        padded = np.zeros((blocks * 256, 4), np.float32)
        padded[:len(coords)] = coords
        out = cp.full((blocks * 256, 4), np.nan, dtype=cp.float32)
        kernel((blocks,), (256,), (np.uint64(handle), cp.asarray(padded), out))
        return cp.asnumpy(out)[:len(coords)]

    def linear_texture(texels: np.ndarray, descriptor, address: str, read_mode, normalised: bool = True,
                       flags: int = 0, filter_mode: int | None = None):
        """A linear-filtered texture of a CUDA array holding texels ((…, y, x, channel); with `flags`
        CUDA_ARRAY_LAYERED the first axis is the layer)."""
        dims = texels.ndim - 1
        sizes = [texels.shape[-2], texels.shape[-3] if dims >= 2 else 0, texels.shape[-4] if dims >= 3 else 0]
        array = texture.CUDAarray(descriptor, *sizes, flags=flags)
        array.copy_from(np.ascontiguousarray(texels).reshape(*texels.shape[:-2], -1))
        tex = texture.TextureObject(
            texture.ResourceDescriptor(runtime.cudaResourceTypeArray, cuArr=array),
            texture.TextureDescriptor((modes[address],) * max(dims, 1),
                                      runtime.cudaFilterModeLinear if filter_mode is None else filter_mode, read_mode,
                                      normalizedCoords=1 if normalised else 0))
        return tex, array

    def compare(case: str, key: str, texels: np.ndarray, coords: np.ndarray, out: np.ndarray, model_of) -> None:
        """Saves the raw lookups under `key` first, then records the lanes that differ from model_of(row)."""
        arrays[f"{key}.texels"], arrays[f"{key}.coords"], arrays[f"{key}.measured"] = texels, coords, out
        model = np.array([model_of(row) for row in coords], dtype=np.float32)
        arrays[f"{key}.model"] = model
        differing = np.nonzero(np.any(out.view(np.uint32) != model.view(np.uint32), axis=1))[0]
        record(case, differing.size == 0, key=key, lanes=len(coords), differing=int(differing.size),
               examples=[{"coords": coords[k].tolist(), "measured": out[k].tolist(), "model": model[k].tolist()}
                         for k in differing[:6]])

    def normalised_filters(name: str, dims: int, address: str, fresh: int = 0) -> None:
        """Linear filtering of a normalised 4-channel texture (`NORMALISED_FORMATS`) read as floats, 512
        lookups (`filter_coords`), against NVIDIA's blend (`normalised_blend`); `fresh`: other texels and
        coordinates (the fifth run's check of the fourth's fit), keys ending ".fresh"."""
        bits, signed = NORMALISED_FORMATS[name]
        sizes = ((16,), (8, 4), (8, 4, 4))[dims - 1]
        texels = normalised_texels(bits, signed, (*reversed(sizes), 4), 53 + bits + dims + fresh)
        kind = runtime.cudaChannelFormatKindSigned if signed else runtime.cudaChannelFormatKindUnsigned
        tex, _array = linear_texture(texels, texture.ChannelFormatDescriptor(bits, bits, bits, bits, kind), address,
                                     runtime.cudaReadModeNormalizedFloat)
        coords = filter_coords(sizes, 512, 61 + dims + fresh)
        out = lookup(LOOKUPS[dims], tex.ptr, coords)
        blend = normalised_blend(bits, signed)
        compare(f"tex.{dims}d linear {name} {address} (NVIDIA's 16-bit blend{', fresh' if fresh else ''})",
                f"{name}.{dims}d.{address}{'.fresh' if fresh else ''}", texels, coords, out,
                lambda c: nvidia_filter(texels, c[:dims], address, blend))

    def conversions(name: str) -> None:
        """Every value of a one-channel normalised format, point-fetched (tex1Dfetch, a linear resource read
        as normalised floats): the conversion alone (model: t / (2^bits − 1) or max(t / (2^(bits−1) − 1), −1)
        rounded to nearest f32; the absent channels 0)."""
        bits, signed = NORMALISED_FORMATS[name]
        values = np.arange(-(1 << (bits - 1)) if signed else 0, (1 << (bits - 1)) if signed else 1 << bits)
        device = cp.asarray(values.astype(normalised_dtype(bits, signed)))
        kind = runtime.cudaChannelFormatKindSigned if signed else runtime.cudaChannelFormatKindUnsigned
        resource = texture.ResourceDescriptor(runtime.cudaResourceTypeLinear, arr=device,
                                              chDesc=texture.ChannelFormatDescriptor(bits, 0, 0, 0, kind),
                                              sizeInBytes=device.nbytes)
        tex = texture.TextureObject(resource, texture.TextureDescriptor(
            (runtime.cudaAddressModeClamp,), runtime.cudaFilterModePoint, runtime.cudaReadModeNormalizedFloat))
        coords = np.zeros((values.size, 4), np.float32)
        coords[:, 0] = np.arange(values.size, dtype=np.int32).view(np.float32)
        out = lookup(LOOKUPS["fetch"], tex.ptr, coords)
        compare(f"tex1Dfetch of every {name} value read as normalised floats (t / max, −1 at the most negative)",
                f"{name}.conversion", values.astype(normalised_dtype(bits, signed)), coords, out,
                lambda c: [np.float32(normalised_value(values[c.view(np.int32)[0]], bits, signed)), 0, 0, 0])

    def fresh_3d() -> None:
        """The refitted 3-D rule at new texels and coordinates: float 8 × 4 × 4 and 4 × 2 × 8 under clamp,
        wrap and border, 512 lookups each (keys ending ".fresh")."""
        rng = np.random.default_rng(211)
        for sizes in ((8, 4, 4), (4, 2, 8)):
            texels = rng.uniform(-4, 4, (*reversed(sizes), 4)).astype(np.float32)
            for address in ("clamp", "wrap", "border"):
                def one(texels=texels, sizes=sizes, address=address) -> None:
                    tex, _array = linear_texture(texels, float4, address, runtime.cudaReadModeElementType)
                    coords = filter_coords(sizes, 512, 223 + sizes[0])
                    out = lookup(LOOKUPS[3], tex.ptr, coords)
                    compare(f"tex.3d linear float {'×'.join(map(str, sizes))} {address} (NVIDIA's rule, fresh)",
                            f"float.3d.{'x'.join(map(str, sizes))}.{address}.fresh", texels, coords, out,
                            lambda c: nvidia_filter(texels, c[:3], address, float_blend))
                attempt(f"tex.3d float {sizes} {address} fresh", one)

    def blend_sweeps(name: str) -> None:
        """Every weight of a two-texel blend: 16 two-texel 1-D textures (4 channels: 64 texel pairs, random
        and the extremes) of a normalised format or half4, each looked up at x = α/256 for α = 0 … 256
        (clamp), against `normalised_blend` / `float_blend`: the raw arrays fit the blend's rounding."""
        half = name == "half"
        bits, signed = (16, False) if half else NORMALISED_FORMATS[name]
        rng = np.random.default_rng(227 + bits + signed)
        coords = np.zeros((257, 4), np.float32)
        coords[:, 0] = 0.25 + np.arange(257) / 512
        if half:
            texel_bits = rng.integers(0, 1 << 16, (16, 2, 4), dtype=np.uint16)
            texel_bits[(texel_bits & 0x7C00) == 0x7C00] ^= 0x4000  # finite halves only
            texel_bits.reshape(-1)[:8] = [0x0001, 0x8001, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF, 0x0400, 0x8000]
            pairs = texel_bits.view(np.float16)
            descriptor = texture.ChannelFormatDescriptor(16, 16, 16, 16, runtime.cudaChannelFormatKindFloat)
            read_mode, blend = runtime.cudaReadModeElementType, float_blend
        else:
            pairs = normalised_texels(bits, signed, (16, 2, 4), 229 + bits)
            kind = runtime.cudaChannelFormatKindSigned if signed else runtime.cudaChannelFormatKindUnsigned
            descriptor = texture.ChannelFormatDescriptor(bits, bits, bits, bits, kind)
            read_mode, blend = runtime.cudaReadModeNormalizedFloat, normalised_blend(bits, signed)
        for n, texels in enumerate(pairs):
            tex, _array = linear_texture(texels, descriptor, "clamp", read_mode)
            out = lookup(LOOKUPS[1], tex.ptr, coords)
            model_texels = texels.astype(np.float32) if half else texels
            compare(f"tex.1d linear {name} blend sweep {n} (every weight of two texels)",
                    f"blend.{name}.{n}", texels, coords, out,
                    lambda c, model_texels=model_texels: nvidia_filter(model_texels, c[:1], "clamp", blend))

    def fifth_run() -> None:
        for name in ("snorm8", "half", "snorm16", "unorm16"):
            attempt(f"blend sweep {name}", lambda name=name: blend_sweeps(name))
        fresh_3d()
        for name in NORMALISED_FORMATS:
            for address in ("clamp", "wrap"):
                attempt(f"tex.3d {name} {address} fresh",
                        lambda name=name, address=address: normalised_filters(name, 3, address, fresh=1000))

    def float_filters() -> None:
        """Linear float filtering beyond 2-D's fitted cases: tex.1d (16 texels; clamp, wrap, border), tex.3d of
        two shapes (clamp, wrap), 2-D with unnormalised coordinates, a half4 texture, tex.a2d; 512 lookups
        each (`filter_coords`), against `nvidia_filter` with `float_blend`."""
        rng = np.random.default_rng(71)
        for dims, sizes, addresses in ((1, (16,), ("clamp", "wrap", "border")), (3, (8, 4, 4), ("clamp", "wrap")),
                                       (3, (4, 2, 8), ("clamp", "wrap"))):
            texels = rng.uniform(-4, 4, (*reversed(sizes), 4)).astype(np.float32)
            for address in addresses:
                def one(texels=texels, dims=dims, sizes=sizes, address=address) -> None:
                    tex, _array = linear_texture(texels, float4, address, runtime.cudaReadModeElementType)
                    coords = filter_coords(sizes, 512, 73 + dims + sizes[0])
                    out = lookup(LOOKUPS[dims], tex.ptr, coords)
                    compare(f"tex.{dims}d linear float {'×'.join(map(str, sizes))} {address} (NVIDIA's rule)",
                            f"float.{dims}d.{'x'.join(map(str, sizes))}.{address}", texels, coords, out,
                            lambda c: nvidia_filter(texels, c[:dims], address, float_blend))
                attempt(f"tex.{dims}d float {sizes} {address}", one)

        def unnormalised() -> None:
            texels = rng.uniform(-4, 4, (4, 8, 4)).astype(np.float32)
            tex, _array = linear_texture(texels, float4, "clamp", runtime.cudaReadModeElementType, normalised=False)
            coords = filter_coords((8, 4), 512, 79) * np.array([8, 4, 0, 0], np.float32)
            out = lookup(TEX_2D, tex.ptr, coords)
            compare("tex.2d linear float, unnormalised coordinates (x = u − 0.5)", "float.2d.unnormalised", texels,
                    coords, out, lambda c: nvidia_filter(texels, c[:2], "clamp", float_blend, unnormalised=True))

        def half() -> None:
            bits = np.random.default_rng(83).integers(0, 1 << 16, (4, 8, 4), dtype=np.uint16)
            bits[(bits & 0x7C00) == 0x7C00] = 0x3C00  # no Inf/NaN: finite halves, subnormals and ±0 kept
            bits.reshape(-1)[:4] = [0x8000, 0x0001, 0x7BFF, 0xFBFF]
            texels = bits.view(np.float16)
            half4 = texture.ChannelFormatDescriptor(16, 16, 16, 16, runtime.cudaChannelFormatKindFloat)
            tex, _array = linear_texture(texels, half4, "clamp", runtime.cudaReadModeElementType)
            coords = filter_coords((8, 4), 512, 89)
            out = lookup(TEX_2D, tex.ptr, coords)
            compare("tex.2d linear half4 (NVIDIA's rule on the f16 texels)", "half.2d.clamp", texels, coords, out,
                    lambda c: nvidia_filter(texels.astype(np.float32), c[:2], "clamp", float_blend))

        def layered() -> None:
            texels = rng.uniform(-4, 4, (3, 4, 8, 4)).astype(np.float32)
            tex, _array = linear_texture(texels, float4, "clamp", runtime.cudaReadModeElementType,
                                         flags=CUDA_ARRAY_LAYERED)
            coords = filter_coords((8, 4), 256, 97)
            coords[:, 3] = (np.arange(256) % 3).astype(np.int32).view(np.float32)
            out = lookup(LOOKUPS["a2d"], tex.ptr, coords)
            compare("tex.a2d linear float (NVIDIA's 2-D rule in the layer)", "float.a2d.clamp", texels, coords, out,
                    lambda c: nvidia_filter(texels[c.view(np.int32)[3]], c[:2], "clamp", float_blend))

        attempt("tex.2d unnormalised", unnormalised)
        attempt("tex.2d half4", half)
        attempt("tex.a2d", layered)

    def weight_sweeps() -> None:
        """NVIDIA's 1-D and 3-D weights themselves: a 2-texel 1-D texture of (i, i, i, i) gives α; the two
        2 × 2 × 2 textures of `sweep_3d_texels` give all eight 3-D weights (`weights_from_sweep_3d`); every
        fraction k/1024 on each axis (independent shuffles), then 256 lookups at 8-bit ties on all three
        axes; clamp addressing, x = 2u − 0.5 inside [0, 1)."""
        fractions = np.arange(1024) / 1024
        rng = np.random.default_rng(103)
        line = np.array([[0.0] * 4, [1.0] * 4], np.float32)
        tex, _array = linear_texture(line, float4, "clamp", runtime.cudaReadModeElementType)
        coords = np.zeros((1024, 4), np.float32)
        coords[:, 0] = 0.25 + fractions / 2
        out = lookup(LOOKUPS[1], tex.ptr, coords)
        compare("tex.1d linear weights at x = k/1024 (NVIDIA's 1-D rule)", "sweep.1d", line, coords, out,
                lambda c: nvidia_filter(line, c[:1], "clamp", float_blend))
        ties = (rng.integers(0, 256, (256, 3)) + 0.5) / 256
        axes = np.concatenate([np.stack([rng.permutation(fractions) for _axis in range(3)], axis=1), ties])
        coords = np.zeros((len(axes), 4), np.float32)
        coords[:, :3] = 0.25 + axes / 2
        first, second = sweep_3d_texels()
        measured = []
        for n, texels in enumerate((first, second)):
            tex, _array = linear_texture(texels, float4, "clamp", runtime.cudaReadModeElementType)
            out = lookup(LOOKUPS[3], tex.ptr, coords)
            measured.append(out)
            compare(f"tex.3d linear weight sums, texture {n + 1} of 2 (NVIDIA's 3-D rule)", f"sweep.3d.{n + 1}",
                    texels, coords, out, lambda c, texels=texels: nvidia_filter(texels, c[:3], "clamp", float_blend))
        weights = np.array([weights_from_sweep_3d(a, b) for a, b in zip(*measured)])
        model = np.array([nvidia_footprint((2, 2, 2), c[:3])[1] for c in coords])
        arrays["sweep.3d.weights"] = weights
        differing = np.nonzero(np.any(weights != model, axis=1))[0]
        record("tex.3d weights from the two sweeps (in 256ths, order dk dj di) against NVIDIA's 3-D rule",
               differing.size == 0, lanes=len(coords), differing=int(differing.size),
               examples=[{"coords": coords[k].tolist(), "weights": weights[k].tolist(), "model": model[k].tolist()}
                         for k in differing[:6]])

    def point_sampling() -> None:
        """Point sampling at and beside texel borders (`point_coords`): tex.1d of 16 texels, tex.2d of 8 × 4,
        clamp and border, against the exact ⌊u·size⌋ (`point_sample`)."""
        rng = np.random.default_rng(107)
        for dims, sizes in ((1, (16,)), (2, (8, 4))):
            texels = rng.uniform(-4, 4, (*reversed(sizes), 4)).astype(np.float32)
            for address in ("clamp", "border"):
                def one(texels=texels, dims=dims, sizes=sizes, address=address) -> None:
                    tex, _array = linear_texture(texels, float4, address, runtime.cudaReadModeElementType,
                                                 filter_mode=runtime.cudaFilterModePoint)
                    coords = np.zeros((512, 4), np.float32)
                    for axis, size in enumerate(sizes):
                        coords[:, axis] = point_coords(size, 512, 109 + axis)
                    out = lookup(LOOKUPS[dims], tex.ptr, coords)
                    compare(f"tex.{dims}d point float {address} at texel borders (the exact floor of u·size)",
                            f"point.{dims}d.{address}", texels, coords, out,
                            lambda c: point_sample(texels, c[:dims], address))
                attempt(f"tex.{dims}d point {address}", one)

    def fourth_run() -> None:
        point_sampling()
        attempt("weight sweeps 1-D and 3-D", weight_sweeps)
        float_filters()
        for name in NORMALISED_FORMATS:
            attempt(f"conversion {name}", lambda name=name: conversions(name))
            for dims in (1, 2, 3):
                for address in ("clamp", "wrap"):
                    attempt(f"tex.{dims}d {name} {address}",
                            lambda name=name, dims=dims, address=address: normalised_filters(name, dims, address))

    # the cases most likely to fault the context (queries NVIDIA may not answer, tld4 of a cube map) last
    fifth_run()  # the cases the fifth run adds, then the fourth's, first: they are what the runs are for
    fourth_run()
    attempt("tex.2d bilinear weights", weight_sweep)
    attempt("offsets", offsets)
    attempt("normalised bilinear", normalized_bilinear)
    attempt("tex.3d bilinear", trilinear)
    attempt("narrow formats", narrow_formats)
    attempt("sust.p", formatted_stores)
    attempt("sured 64-bit and .p", reductions)
    attempt("tex.cube", lambda: cube_maps("tex.cube.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2, %f3, %f3}];",
                                          False))
    attempt("tex.acube", lambda: cube_maps(
        "tex.acube.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%r2, %f1, %f2, %f3}];", True))
    queries()
    attempt("tld4.cube", lambda: cube_maps("tld4.b.cube.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2, %f3, %f3}];",
                                           False, gather=True))

    if out_path is not None:
        out_path.write_text(json.dumps(records, indent=1))
        np.savez_compressed(out_path.with_suffix(".npz"), **arrays)
    return 1 if failures else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--out", type=Path)
    args = parser.parse_args()
    sys.exit(_run(args.out))


if __name__ == "__main__":
    main()
