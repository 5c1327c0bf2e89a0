"""fatkit's AMD code against clang's for the same kernels: static metrics per kernel and target, and dynamic
instruction counts on fatkit.emulate.

    python benchmarks/codegen_vs_hip.py [--targets gfx942,gfx1100] [--no-dynamic] [--markdown] [KERNEL...]

The kernels are written twice, in benchmarks/codegen_vs_hip/: kernels.cu (CUDA; `nvcc -arch=sm_90 -ptx -O3`
gives the PTX fatkit translates) and kernels.hip (HIP, compiled by Debian's clang-22 for the same target with
`-x hip -nogpulib -nogpuinc --cuda-device-only -O3` and builtins.h, a header of clang builtins), whose .ftz
arithmetic kernels are in kernels_ftz.hip, compiled with `-fgpu-flush-denormals-to-zero` too (HIP flushes
f32 subnormals only file-wide). The anchor is clang's code objects, built in the same run. Per kernel and
target:

- instructions: the kernel symbol's instructions (`llvm-objdump -d` over the symbol's st_value..+st_size, so
  the s_code_end padding after it is not counted; functions the kernel calls are not counted either);
- VGPRs (+AGPRs on gfx942), SGPRs, scratch bytes per lane and LDS bytes, from the code object metadata
  (fatkit.formats.hsaco.parse_code_object);
- occupancy: waves per SIMD the registers and LDS allow for the launch's block (constants below);
- dynamic: wave-instructions one launch executes on fatkit.emulate (LaunchStats), for both code objects, where
  both launch ("—" where the emulator refuses one: the reason is listed under the table);
- outputs: the same launch proves the two sides compute the same function: both get the same random inputs
  and every array they may write is compared after it. Integer arrays (packed halves included) must be
  equal bit for bit, and so must floating-point ones, except in the kernels whose two compilers round
  differently by right (Launch.tolerance: a fused multiply-add against a multiply and an add, two expf
  implementations, a matrix core's order of additions). There the bound is an error analysis of both
  sides: each side's error against the exact result, added, in units of u = 2^-24 relative to the output
  (the inputs make every summed term positive, so the bounds on Σ|term| are bounds relative to the result).
  The cell gives "equal", the largest difference seen in u, or "DIFFER"; a divergence also fails the run.

Ratios are fatkit/clang; the geometric means are over the kernels both compilers built. The one-op kernels
(op_*) give the per-operation price: the whole kernel's instruction count, its load/store frame included, with
the difference fatkit − clang next to the ratio.

The .ftz kernels (op_add_ftz, op_mul_ftz, op_fma_ftz) run on inputs about the tininess boundary
(`_ftz_boundary`): NVIDIA GPUs flush a result whose exact value is below 2^-126 (tininess before rounding)
where AMD's flushing mode keeps the ±2^-126 it rounds to, so their HIP side computes PTX's function
(kernels_ftz.hip says how) and the outputs compare both there. The plain operations under AMD's flush,
op_mul_ftz_amd and op_fma_ftz_amd (HIP only, outside the means), are the second table per target, "the price
of NVIDIA's tininess": their instructions against both sides' .ftz kernels, and in how many elements their
outputs differ from PTX's (none would mean the inputs miss the boundary, which fails the run).
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fatkit.errors import FatkitError  # noqa: E402
from fatkit.formats.elf import ElfView  # noqa: E402
from fatkit.formats.hsaco import parse_code_object  # noqa: E402
from fatkit.translate.pipeline import Options, translate  # noqa: E402

SOURCES = ROOT / "benchmarks" / "codegen_vs_hip"
LLVM = Path("/usr/lib/llvm-22/bin")
SHT_SYMTAB = 2


@dataclass(frozen=True)
class Occupancy:
    """Per-SIMD resources (AMD's ISA guides; LLVM's AMDGPU register-allocation granules)."""

    wave: int  # lanes
    max_waves: int  # waves one SIMD holds at most
    vgprs: int  # VGPRs per lane in one SIMD's register file
    vgpr_granule: int
    sgprs: int | None  # SGPRs per SIMD, where they limit occupancy (gfx9); None: they do not (gfx10+)
    lds_bytes: int  # LDS shared by the workgroups of one CU (gfx9) or WGP (gfx10+, WGP mode)
    simds: int  # SIMDs sharing that LDS


OCCUPANCY = {
    # CDNA3: 512 VGPRs per lane (arch + AGPRs, unified), granule 8, 8 waves per SIMD, 800 SGPRs (granule 16),
    # 64 KiB LDS per CU of 4 SIMDs
    "gfx942": Occupancy(64, 8, 512, 8, 800, 64 * 1024, 4),
    # RDNA3 (gfx1100/1101): 1536 VGPRs per lane in wave32, granule 24, 16 waves per SIMD, 128 KiB LDS per WGP
    # of 4 SIMDs
    "gfx1100": Occupancy(32, 16, 1536, 24, None, 128 * 1024, 4),
}


def _round_up(value: int, granule: int) -> int:
    return -(-value // granule) * granule


def occupancy(target: str, vgprs: int, agprs: int, sgprs: int, lds: int, block_threads: int) -> int:
    limits = OCCUPANCY[target]
    total = _round_up(vgprs, 4) + agprs if agprs else vgprs
    waves = min(limits.max_waves, limits.vgprs // max(_round_up(max(total, 1), limits.vgpr_granule), 1))
    if limits.sgprs is not None:
        waves = min(waves, limits.sgprs // _round_up(max(sgprs, 1), 16))
    if lds:
        groups = limits.lds_bytes // lds
        waves = min(waves, groups * -(-block_threads // limits.wave) // limits.simds)
    return waves


# ---- launches: (grid, block, arguments) for fatkit.emulate, the same for both code objects ----

Args = Callable[[np.random.Generator], list]


def _floats(rng: np.random.Generator, n: int, low: float = 0.5, high: float = 2.0) -> np.ndarray:
    return rng.uniform(low, high, n).astype(np.float32)


def _halves(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(0.5, 2.0, 2 * n).astype(np.float16).view(np.uint32)


def _one_op(rng: np.random.Generator) -> list:
    return [_floats(rng, 64), _floats(rng, 64), _floats(rng, 64), np.zeros(64, np.float32)]


# ---- the tininess boundary: inputs for the .ftz one-op kernels ----

SMALLEST_NORMAL = Fraction(1, 2 ** 126)
# exact values in [2^-126·(1 − 2^-25), 2^-126) round to 2^-126 whether rounding keeps the exponent unbounded
# or stops at the subnormals' spacing 2^-149; NVIDIA flushes them (tininess before rounding), AMD's
# flushing mode keeps the 2^-126 it rounds to
ROUNDS_UP = (SMALLEST_NORMAL * (1 - Fraction(1, 2 ** 25)), SMALLEST_NORMAL)
JUST_BELOW = (SMALLEST_NORMAL * (1 - Fraction(1, 2 ** 24)), ROUNDS_UP[0])  # 2^-126 only on the subnormal grid
JUST_ABOVE = (SMALLEST_NORMAL, SMALLEST_NORMAL * (1 + Fraction(1, 2 ** 24)))  # rounds to 2^-126, not tiny


def _exact(x: float | np.float32) -> Fraction:
    return Fraction(float(x))


def _neighbours(x: float) -> list[np.float32]:
    """The float nearest x and the four around it."""
    bits = np.array([x], np.float32).view(np.int32)[0]
    return [np.array([bits + k], np.int32).view(np.float32)[0] for k in range(-2, 3)]


def _in(value: Fraction, window: tuple[Fraction, Fraction]) -> bool:
    return window[0] <= value < window[1] and value != SMALLEST_NORMAL  # 2^-126 itself has rows of its own


def _product_in(rng: np.random.Generator, window: tuple[Fraction, Fraction]) -> tuple[float, float]:
    """Normal a, b whose exact product lies in `window` (near 2^-126): a in [2^-60, 2^-59), b near 2^-66."""
    target = float((window[0] + window[1]) / 2)
    while True:
        a = np.float32(rng.uniform(1.0, 2.0) * 2.0 ** -60)
        for b in _neighbours(target / float(a)):
            if _in(_exact(a) * _exact(b), window):
                return float(a), float(b)


def _sum_in(rng: np.random.Generator, window: tuple[Fraction, Fraction]) -> tuple[float, float, float]:
    """Normal a, b, c, the product in [2^-125, 2^-124) and c ≈ 2^-126 − a·b, whose exact a·b + c lies in
    `window`: the sum is near 2^-126 while neither term is."""
    while True:
        a, b = np.float32(rng.uniform(1.0, 2.0) * 2.0 ** -60), np.float32(rng.uniform(1.0, 1.4) * 2.0 ** -65)
        product = _exact(a) * _exact(b)
        for c in _neighbours(float(SMALLEST_NORMAL - product)):
            if abs(c) >= 2.0 ** -126 and _in(product + _exact(c), window):
                return float(a), float(b), float(c)


def _ftz_boundary(rng: np.random.Generator) -> list:
    """a, b, c for y = a·b (+ c) .ftz: 25 rows about the tininess boundary, each with its negation
    (−a, b, −c: the exact value negated), then ordinary values of both signs. Products and sums in
    ROUNDS_UP, JUST_BELOW and JUST_ABOVE, exactly 2^-126, far below it; subnormal inputs whose
    product or sum would be normal if they were not flushed; ±0; cancellations c = −a·b (exact: a zero;
    rounded: the rounding error alone, tiny for a product near 2^-103, normal near 1); ±inf, NaN."""
    rows: list[tuple[float, float, float]] = []
    for window in (ROUNDS_UP, ROUNDS_UP, JUST_BELOW, JUST_ABOVE):
        rows.append((*_product_in(rng, window), 0.0))
        rows.append(_sum_in(rng, window))
    sub = float(np.array([3 << 20], np.uint32).view(np.float32)[0])  # a subnormal: 1.5·2^-128
    for _ in range(2):
        p, q = (float(np.float32(rng.uniform(1.0, 2.0) * 2.0 ** e)) for e in (-60, -43))
        rows.append((p, q, -float(np.float32(p * q))))  # a·b near 2^-103, exact in f64: its rounding error, tiny
    x = float(np.float32(rng.uniform(1.0, 2.0)))
    y = float(np.float32(rng.uniform(1.0, 2.0)))
    rows += [
        (2.0 ** -60, 2.0 ** -66, 0.0),  # exactly 2^-126
        (2.0 ** -60, 2.0 ** -65, -2.0 ** -126),  # 2^-125 − 2^-126: exactly 2^-126
        (3 * 2.0 ** -60, 2.0 ** -70, 0.0),  # 3·2^-130: far below, a subnormal when rounded
        (sub, 2.0 ** 30, 0.0),  # a subnormal input: flushed, else 1.5·2^-98
        (2.0 ** 40, sub, 2.0 ** -100),  # flushed, else the product dominates the sum
        (1.0, 2.0 ** -126, -sub),  # c subnormal: flushed, else 2^-126 − 1.5·2^-128 is tiny
        (1.0, 1.0, sub),  # c subnormal beside 1
        (-0.0, x, 0.0), (0.0, y, -0.0), (-0.0, x, -0.0),  # zero products: (−0) + (+0) = +0, (−0) + (−0) = −0
        (x, y, -x * y),  # exact in f64 but not in f32: c is −a·b rounded, the result the rounding error
        (2.0, 0.75, -1.5),  # an exact cancellation: +0
        (float("inf"), x, 1.0), (float("nan"), y, 1.0), (x, y, float("nan")),
    ]
    a, b, c = (np.array(column, np.float64).astype(np.float32) for column in zip(*rows))
    ordinary = 64 - 2 * len(rows)
    signs = rng.choice(np.array([-1.0, 1.0], np.float32), (2, ordinary))
    return [np.concatenate([a, -a, signs[0] * _floats(rng, ordinary)]),
            np.concatenate([b, b, _floats(rng, ordinary)]),
            np.concatenate([c, -c, signs[1] * _floats(rng, ordinary)]), np.zeros(64, np.float32)]


def _half_op(rng: np.random.Generator) -> list:
    return [_halves(rng, 64), _halves(rng, 64), _halves(rng, 64), np.zeros(64, np.uint32)]


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: Args
    # the largest difference allowed between the two sides' floating-point outputs, in u = 2^-24 relative to
    # the output; 0: bit for bit
    tolerance: int = 0


LAUNCHES: dict[str, Launch] = {
    "saxpy": Launch((2, 1, 1), (128, 1, 1),
                    lambda r: [np.float32(2.5), _floats(r, 256), _floats(r, 256), np.int32(256)]),
    "stencil": Launch((1, 8, 1), (32, 1, 1),
                      lambda r: [_floats(r, 256), np.zeros(256, np.float32), np.int32(32), np.int32(8)]),
    "reduction": Launch((2, 1, 1), (256, 1, 1), lambda r: [_floats(r, 512), np.zeros(2, np.float32)]),
    # 32 products summed in order: nvcc fuses each into an fma (32 roundings, ≤ 32u), clang's gfx942 code
    # multiplies pairs with v_pk_mul_f32 and adds them (64 roundings, ≤ 64u)
    "sgemm_tile": Launch((2, 2, 1), (16, 16, 1), lambda r: [_floats(r, 1024), _floats(r, 1024),
                                                            np.zeros(1024, np.float32), np.int32(32)], 96),
    "histogram": Launch((2, 1, 1), (128, 1, 1), lambda r: [r.integers(0, 256, 1024, dtype=np.uint8),
                                                           np.zeros(64, np.uint32), np.int32(1024)]),
    # expf: nvcc's ≤ 2 ulp (4u), clang's llvm.exp.f32 ≤ 1 ulp (2u); the same tree sum of 256 (8 roundings a
    # side, 16u, and the e's 6u carried through), one correctly rounded division a side (2u): 30u
    "softmax_row": Launch((2, 1, 1), (256, 1, 1),
                          lambda r: [_floats(r, 512, -4.0, 4.0), np.zeros(512, np.float32)], 30),
    "half2_axpy": Launch((2, 1, 1), (128, 1, 1),
                         lambda r: [_halves(r, 256), _halves(r, 256), _halves(r, 1)[0], np.int32(256)]),
    "warp_collectives": Launch((1, 1, 1), (128, 1, 1), lambda r: [_floats(r, 128, -2.0, 2.0),
                                                                  np.zeros(128, np.float32), np.zeros(128, np.uint32)]),
    # one warp's m16n8k16 fragments in PTX order: A 4 words (8 halves) a lane, B 2, C and D 4 floats; the
    # matrix core's K + 1 = 17 additions in its own order, (K + 1)u a side (docs/numerics.md's bound)
    "mma_tile": Launch((1, 1, 1), (32, 1, 1), lambda r: [_halves(r, 128), _halves(r, 64), _floats(r, 128),
                                                         np.zeros(128, np.float32)], 34),
    # a 64×64 matrix of float4 rows (n4 = 16 float4 a row): 2×2 tiles of 32×32
    "transpose_tile": Launch((2, 2, 1), (8, 32, 1), lambda r: [_floats(r, 4096), np.zeros(4096, np.float32),
                                                              np.int32(16)]),
    "conv_rows": Launch((2, 1, 1), (256, 1, 1), lambda r: [_floats(r, 2048 + 8), _floats(r, 8, -1.0, 1.0),
                                                         np.zeros(2048, np.float32)]),
    "poly_const": Launch((2, 1, 1), (128, 1, 1), lambda r: [_floats(r, 256, -1.0, 1.0), np.zeros(256, np.float32),
                                                          np.int32(256)]),
}
ONE_OPS = ("op_fma_rm", "op_max", "op_min", "op_sat", "op_ex2", "op_rcp", "op_sqrt", "op_rsqrt", "op_lg2",
           "op_sin", "op_cos", "op_expf", "op_add_ftz", "op_mul_ftz", "op_fma_ftz")
for _name in ONE_OPS:
    LAUNCHES[_name] = Launch((1, 1, 1), (64, 1, 1), _one_op)
for _name in ("op_add_ftz", "op_mul_ftz", "op_fma_ftz"):
    LAUNCHES[_name] = Launch((1, 1, 1), (64, 1, 1), _ftz_boundary)
# HIP-only kernels: the plain operation under AMD's flush (kernels_ftz.hip), against PTX's .ftz form, whose
# inputs they share: what NVIDIA's tininess before rounding costs over the native flush, outside the means
AMD_FLUSH = {"op_mul_ftz_amd": "op_mul_ftz", "op_fma_ftz_amd": "op_fma_ftz"}
# nvcc's expf (≤ 2 ulp: 4u) against clang's llvm.exp.f32 (≤ 1 ulp: 2u)
LAUNCHES["op_expf"] = Launch((1, 1, 1), (64, 1, 1), _one_op, 6)
for _name in ("op_add_f16x2", "op_fma_f16x2"):
    LAUNCHES[_name] = Launch((1, 1, 1), (64, 1, 1), _half_op)


# ---- building ----

def build_ptx(tmp: Path) -> str:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise SystemExit("nvcc not on PATH (pip install nvidia-cuda-nvcc)")
    out = tmp / "kernels.ptx"
    subprocess.run([nvcc, "-arch=sm_90", "-ptx", "-O3", "-diag-suppress", "550", "-o", str(out),
                    str(SOURCES / "kernels.cu")], check=True, capture_output=True, text=True)
    return out.read_text()


# the HIP files and their flags: the .ftz kernels' file flushes f32 subnormals (HIP's -ftz, file-wide)
HIP_SOURCES = {"kernels.hip": (), "kernels_ftz.hip": ("-fgpu-flush-denormals-to-zero",)}


def build_hip(tmp: Path, target: str, source: str = "kernels.hip") -> bytes:
    out = tmp / f"{Path(source).stem}-{target}.hsaco"
    subprocess.run([str(LLVM / "clang"), "-x", "hip", f"--offload-arch={target}", "-nogpulib", "-nogpuinc",
                    "--cuda-device-only", "--no-gpu-bundle-output", "-O3", *HIP_SOURCES[source], "-include",
                    str(SOURCES / "builtins.h"), "-c", str(SOURCES / source), "-o", str(out)], check=True,
                   capture_output=True, text=True)
    return out.read_bytes()


def build_fatkit(ptx: str, target: str) -> tuple[bytes, dict[str, str]]:
    """The code object and, per kernel fatkit left out, its reason."""
    translation = translate(ptx, Options(target=target))
    left_out = {k.name: k.reason or "unsupported" for k in translation.kernels if k.status != "ok"}
    return translation.product, left_out


# ---- measuring ----

_INSTRUCTION = re.compile(r"//\s*([0-9A-Fa-f]+):")


def instruction_counts(code_object: bytes, tmp: Path, names: set[str]) -> dict[str, int]:
    """Instructions per kernel symbol: the disassembly lines whose address lies inside the symbol."""
    elf = ElfView(code_object)
    table = next(s for s in elf.sections if s.type == SHT_SYMTAB)
    ranges = {s.name: (s.value, s.value + s.size) for s in elf.symbols(table) if s.name in names and s.size}
    path = tmp / "object.hsaco"
    path.write_bytes(code_object)
    listing = subprocess.run([str(LLVM / "llvm-objdump"), "-d", str(path)], check=True, capture_output=True,
                             text=True).stdout
    addresses = [int(m.group(1), 16) for m in map(_INSTRUCTION.search, listing.splitlines()) if m]
    return {name: sum(start <= a < end for a in addresses) for name, (start, end) in ranges.items()}


@dataclass(frozen=True)
class Metrics:
    instructions: int
    vgprs: int
    agprs: int
    sgprs: int
    scratch: int
    lds: int
    occupancy: int
    dynamic: int | None
    dynamic_note: str = ""
    outputs: tuple[np.ndarray, ...] | None = None  # the launch's arrays after it (None: not launched)


def _threads(block: tuple[int, int, int]) -> int:
    return block[0] * block[1] * block[2]


def measure(code_object: bytes, target: str, names: list[str], tmp: Path, dynamic: bool) -> dict[str, Metrics]:
    from fatkit.emulate import launch

    parsed = {k.name: k for k in parse_code_object(code_object).kernels}
    counts = instruction_counts(code_object, tmp, set(names))
    result = {}
    for name in names:
        kernel = parsed.get(name)
        if kernel is None or name not in counts:
            continue
        spec = LAUNCHES[AMD_FLUSH.get(name, name)]
        steps, note, outputs = None, "", None
        if dynamic:
            args = spec.args(np.random.default_rng(18))  # the same seed on both sides: the same inputs
            try:
                steps = launch(code_object, name, spec.grid, spec.block, args, 0).wave_instructions
                outputs = tuple(arg for arg in args if isinstance(arg, np.ndarray))
            except FatkitError as exc:
                note = f"{name}: {str(exc).splitlines()[0]}"
        vgprs, agprs, sgprs = kernel.vgpr_count or 0, kernel.agpr_count or 0, kernel.sgpr_count or 0
        result[name] = Metrics(counts[name], vgprs, agprs, sgprs, kernel.private_segment_size,
                               kernel.group_segment_size,
                               occupancy(target, vgprs, agprs, sgprs, kernel.group_segment_size,
                                         _threads(spec.block)), steps, note, outputs)
    return result


# ---- comparing ----

U = 2.0 ** -24


def compare_outputs(fatkit: tuple[np.ndarray, ...], clang: tuple[np.ndarray, ...], tolerance: int) -> tuple[bool, str]:
    """Whether the two sides' arrays agree (Launch.tolerance), and the cell that says how far apart they are."""
    worst = 0.0
    for f, c in zip(fatkit, clang):
        if np.array_equal(f.view(np.uint8), c.view(np.uint8)):
            continue
        if f.dtype.kind != "f" or not tolerance:
            differing = (f.view(np.uint8) != c.view(np.uint8)).reshape(f.size, -1).any(axis=1)  # bits: NaN too
            return False, f"DIFFER: {np.count_nonzero(differing)} of {f.size} elements"
        if not np.array_equal(np.isnan(f), np.isnan(c)):
            return False, "DIFFER: NaN where the other side has a number"
        f64, c64 = f.astype(np.float64), c.astype(np.float64)
        numbers = ~np.isnan(f64)
        with np.errstate(invalid="ignore"):  # equal infinities: no gap; an infinity against anything else: ∞
            gap = np.where(f64 == c64, 0.0, np.abs(f64 - c64))[numbers]
        scale = np.maximum(np.abs(f64), np.abs(c64))[numbers]
        if not np.all(np.isfinite(gap)):
            return False, "DIFFER: an infinity where the other side has another value"
        worst = max(worst, float(np.max(gap / np.where(scale > 0, scale, 1.0))) / U)
    if worst > tolerance:
        return False, f"DIFFER: {worst:.1f}u > {tolerance}u"
    return True, f"{worst:.1f}u ≤ {tolerance}u" if worst else "equal"


# ---- reporting ----

def _registers(m: Metrics) -> str:
    return f"{m.vgprs}+{m.agprs}a" if m.agprs else str(m.vgprs)


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else "—"


def report(target: str, fatkit: dict[str, Metrics], clang: dict[str, Metrics], left_out: dict[str, str],
           names: list[str], markdown: bool) -> list[str]:
    """Print the table; the kernels whose two sides' outputs differ."""
    header = ["kernel", "instrs fatkit", "instrs clang", "ratio", "Δ", "VGPRs f/c", "SGPRs f/c", "scratch f/c",
              "LDS f/c", "waves/SIMD f/c", "dyn fatkit", "dyn clang", "dyn ratio", "outputs"]
    print(f"\n### {target}\n" if markdown else f"\n== {target} ==")
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|---|" + "---:|" * (len(header) - 1))
    else:
        print(" ".join(f"{h:>14s}" for h in header))
    ratios, dynamic_ratios, by_name, diverging = [], [], {}, []
    for name in names:
        f, c = fatkit.get(name), clang.get(name)
        if f is None or c is None:
            why = left_out.get(name, "not built")
            cells = [name, "—", str(c.instructions) if c else "—", "—", "—"] + ["—"] * 9
            cells[1] = f"left out: {why[:60]}" if f is None else str(f.instructions)
        else:
            ratios.append(f.instructions / c.instructions)
            by_name[name] = ratios[-1]
            if f.dynamic is not None and c.dynamic:
                dynamic_ratios.append(f.dynamic / c.dynamic)
            cells = [name, str(f.instructions), str(c.instructions), _ratio(f.instructions, c.instructions),
                     f"{f.instructions - c.instructions:+d}", f"{_registers(f)}/{_registers(c)}",
                     f"{f.sgprs}/{c.sgprs}", f"{f.scratch}/{c.scratch}", f"{f.lds}/{c.lds}",
                     f"{f.occupancy}/{c.occupancy}", str(f.dynamic) if f.dynamic is not None else "—",
                     str(c.dynamic) if c.dynamic is not None else "—", _ratio(f.dynamic, c.dynamic), "—"]
            if f.outputs is not None and c.outputs is not None:
                same, cells[-1] = compare_outputs(f.outputs, c.outputs, LAUNCHES[name].tolerance)
                if not same:
                    diverging.append(name)
        print(("| " + " | ".join(cells) + " |") if markdown else " ".join(f"{x:>14.14s}" for x in cells))
    if ratios:
        print(f"\n{target}: geometric mean fatkit/clang instructions {statistics.geometric_mean(ratios):.3f} over "
              f"{len(ratios)} kernels (max {max(ratios):.2f})"
              + (f"; dynamic {statistics.geometric_mean(dynamic_ratios):.3f} over {len(dynamic_ratios)}"
                 if dynamic_ratios else ""))
        for label, part in (("workload kernels", [r for n, r in by_name.items() if not n.startswith("op_")]),
                            ("one-op kernels", [r for n, r in by_name.items() if n.startswith("op_")])):
            if part:
                print(f"{target}: {label}: geometric mean {statistics.geometric_mean(part):.3f} over {len(part)}")
    for compiler, metrics in (("fatkit", fatkit), ("clang", clang)):
        for m in metrics.values():
            if m.dynamic_note:
                print(f"{'- ' if markdown else ''}{compiler}'s {m.dynamic_note}")
    return diverging


def report_tininess(target: str, fatkit: dict[str, Metrics], clang: dict[str, Metrics], markdown: bool) -> list[str]:
    """The price of NVIDIA's tininess: each .ftz kernel, fatkit's and HIP's (PTX's function), against HIP's plain
    operation under AMD's flush; the kernels whose AMD-flush outputs equal PTX's (then the inputs miss the
    boundary)."""
    header = ["kernel", "fatkit", "HIP", "HIP, AMD's flush", "fatkit − AMD's", "HIP − AMD's",
              "AMD's flush vs PTX's outputs"]
    rows, missed = [], []
    for amd, base in AMD_FLUSH.items():
        f, c, a = fatkit.get(base), clang.get(base), clang.get(amd)
        if f is None or c is None or a is None:
            continue
        outputs = "—"
        if f.outputs is not None and a.outputs is not None:
            y, y_amd = f.outputs[-1], a.outputs[-1]
            differing = np.count_nonzero(y.view(np.uint32) != y_amd.view(np.uint32))
            outputs = f"differ in {differing} of {y.size}"
            if not differing:
                missed.append(base)
        rows.append([f"{base} / {amd}", str(f.instructions), str(c.instructions), str(a.instructions),
                     f"{f.instructions - a.instructions:+d}", f"{c.instructions - a.instructions:+d}", outputs])
    if not rows:
        return missed
    print(f"\n#### {target}: the price of NVIDIA's tininess\n" if markdown
          else f"\n== {target}: the price of NVIDIA's tininess ==")
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|---|" + "---:|" * (len(header) - 1))
    for cells in rows:
        print(("| " + " | ".join(cells) + " |") if markdown else " ".join(f"{x:>16.16s}" for x in cells))
    return missed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kernels", nargs="*", help="only these kernels (default: all)")
    parser.add_argument("--targets", default="gfx942,gfx1100")
    parser.add_argument("--no-dynamic", action="store_true", help="skip the emulator launches")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    names = args.kernels or list(LAUNCHES)
    unknown = set(names) - LAUNCHES.keys()
    if unknown:
        raise SystemExit(f"unknown kernels: {', '.join(sorted(unknown))}")
    extras = [amd for amd, base in AMD_FLUSH.items() if base in names]
    diverging, missed = [], []
    with tempfile.TemporaryDirectory(prefix="fatkit-codegen-") as tmp_name:
        tmp = Path(tmp_name)
        ptx = build_ptx(tmp)
        for target in args.targets.split(","):
            product, left_out = build_fatkit(ptx, target)
            fatkit = measure(product, target, names, tmp, not args.no_dynamic)
            clang = {}
            for source in HIP_SOURCES:
                clang.update(measure(build_hip(tmp, target, source), target, names + extras, tmp,
                                     not args.no_dynamic))
            diverging += [f"{name} ({target})"
                          for name in report(target, fatkit, clang, left_out, names, args.markdown)]
            missed += [f"{name} ({target})" for name in report_tininess(target, fatkit, clang, args.markdown)]
    if diverging:
        raise SystemExit(f"the two sides compute different functions: {', '.join(diverging)}")
    if missed:
        raise SystemExit(f"AMD's flush gives PTX's outputs, the inputs miss the tininess boundary: {', '.join(missed)}")


if __name__ == "__main__":
    main()
