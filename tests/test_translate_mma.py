"""mma.sync.aligned and mma.sp on the CPU (`host`, waves of 32 and of 64 lanes holding two warps) against a
Python model built from the PTX ISA's fragment tables (written out here form by form, independently of
lower/mma.py), with random and edge inputs; compiled for gfx942 and gfx1100; written back as PTX that
ptxas accepts."""

from __future__ import annotations

import ctypes
import math
import random
import struct
import subprocess
import zlib
from fractions import Fraction
from typing import Callable

import numpy as np
import pytest

from fatkit.formats.hsaco import parse_code_object
from fatkit.translate import pipeline
from fatkit.translate.pipeline import Options, translate
from tests import oracles, test_translate_warp
from tests.amdrun import program as amd_program
from tests.ptxrun import HEADER

RANDOM = random.Random(20261129)
WARP = 32


# the fixture: the host target with waves of 32 or 64 lanes, or the gfx1100/gfx942 code objects on fatkit.emulate;
# its value is the target to translate for
wave = test_translate_warp.wave


# ------------------------------------------------------------------------------------------------ the ISA's tables

def _g(lane):
    return lane >> 2


def _t(lane):
    return lane % 4


def a_place(shape: str, atype: str, lane: int, i: int) -> tuple[int, int]:
    """Row and column of element a_i in `lane`, as the ISA's "Matrix Fragments for mma.<shape>" give them."""
    g, t = _g(lane), _t(lane)
    if shape == "m8n8k4":  # .f64
        return g, t
    if shape in ("m8n8k16", "m8n8k32", "m8n8k128"):
        return g, t * {"m8n8k16": 4, "m8n8k32": 8, "m8n8k128": 32}[shape] + i
    if atype in ("tf32", "f64"):
        if shape == "m16n8k4":
            return (g if i == 0 else g + 8), t
        # m16n8k8 (a0..a3) and m16n8k16 .f64 (a0..a7): row alternates, column steps by 4 every two
        return (g if i % 2 == 0 else g + 8), t + 4 * (i // 2)
    if atype in ("f16", "bf16"):
        if shape == "m16n8k8":
            return (g if i < 2 else g + 8), t * 2 + (i & 1)
        return (g if i < 2 or 4 <= i < 6 else g + 8), t * 2 + (i & 1) + (8 if i >= 4 else 0)
    per = {"s8": 4, "u8": 4, "e4m3": 4, "e5m2": 4, "s4": 8, "u4": 8, "b1": 32}[atype]
    registers_per_row = {("m16n8k16", 4): 1, ("m16n8k32", 4): 2, ("m16n8k32", 8): 1, ("m16n8k64", 8): 2,
                         ("m16n8k128", 32): 1, ("m16n8k256", 32): 2}[shape, per]
    r, j = divmod(i, per)
    if registers_per_row == 1:
        return (g if r == 0 else g + 8), t * per + j
    return (g if r in (0, 2) else g + 8), t * per + j + (4 * per if r >= 2 else 0)


def b_place(shape: str, btype: str, lane: int, i: int) -> tuple[int, int]:
    g, t = _g(lane), _t(lane)
    if btype in ("tf32", "f64"):
        return t + 4 * i, g
    if btype in ("f16", "bf16"):
        return t * 2 + (i & 1) + 8 * (i // 2), g
    per = {"s8": 4, "u8": 4, "e4m3": 4, "e5m2": 4, "s4": 8, "u4": 8, "b1": 32}[btype]
    r, j = divmod(i, per)
    return t * per + j + 4 * per * r, g


def c_place(m: int, lane: int, i: int) -> tuple[int, int]:
    g, t = _g(lane), _t(lane)
    return (g if i < 2 else g + 8), t * 2 + (i & 1)


# ------------------------------------------------------------------------------------------------ element codecs

BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "f64": 64, "f32": 32, "s32": 32,
        "s8": 8, "u8": 8, "s4": 4, "u4": 4, "b1": 1}


def _minifloat(bits: int, exponent_bits: int, mantissa_bits: int, has_infinity: bool) -> float:
    sign = -1.0 if bits >> (exponent_bits + mantissa_bits) & 1 else 1.0
    field, fraction = bits >> mantissa_bits & ((1 << exponent_bits) - 1), bits & ((1 << mantissa_bits) - 1)
    bias = (1 << (exponent_bits - 1)) - 1
    if field == (1 << exponent_bits) - 1 and (has_infinity or fraction == (1 << mantissa_bits) - 1):
        return sign * math.inf if has_infinity and fraction == 0 else math.nan
    if field == 0:
        return sign * fraction * 2.0 ** (1 - bias - mantissa_bits)
    return sign * (fraction + (1 << mantissa_bits)) * 2.0 ** (field - bias - mantissa_bits)


def decode(ptx_type: str, bits: int):
    if ptx_type == "f16":
        return float(np.array([bits], dtype=np.uint16).view(np.float16)[0])
    if ptx_type == "bf16":
        return struct.unpack("<f", struct.pack("<I", bits << 16))[0]
    if ptx_type == "tf32":
        return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFE000))[0]
    if ptx_type == "f32":
        return struct.unpack("<f", struct.pack("<I", bits))[0]
    if ptx_type == "f64":
        return struct.unpack("<d", struct.pack("<Q", bits))[0]
    if ptx_type == "e4m3":
        return _minifloat(bits, 4, 3, False)
    if ptx_type == "e5m2":
        return _minifloat(bits, 5, 2, True)
    width = BITS[ptx_type]
    if ptx_type[0] == "s" and bits >> (width - 1):
        return bits - (1 << width)
    return bits


def _elements(words: list[int], ptx_type: str) -> list[int]:
    width = BITS[ptx_type]
    per = max(1, 32 // width)
    return [word >> (j * width) & ((1 << width) - 1) for word in words for j in range(per)]


# ------------------------------------------------------------------------------------------------ running

def mma_kernel(instruction: str, counts: tuple[int, int, int, int], widths: tuple[int, int, int, int],
               metadata: bool) -> str:
    """Thread i loads its A, B, C registers (and a metadata word) from arrays indexed by its global thread
    number, runs `instruction` on {%d…}, {%a…}, {%b…}, {%c…} and stores its D registers."""
    names = "abcd"
    declarations, loads, stores = [], [], []
    for name, count, width in zip(names, counts, widths):
        declarations.append(f".reg .b{width} %{name}<{count}>;")
    for slot, (name, count, width) in enumerate(zip(names[:3], counts[:3], widths[:3])):
        for r in range(count):
            loads.append(f"ld.global.b{width} %{name}{r}, [%p{slot}+{r * width // 8}];")
    for r in range(counts[3]):
        stores.append(f"st.global.b{widths[3]} [%p3+{r * widths[3] // 8}], %d{r};")
    operands = ", ".join("{" + ", ".join(f"%{name}{r}" for r in range(count)) + "}"
                         for name, count in zip("dabc", (counts[3], *counts[:3])))
    if metadata:
        loads.append("ld.global.b32 %e, [%p4];")
        operands += ", %e"
    address = []
    for slot, (count, width) in enumerate(zip((*counts[:3], counts[3], 1), (*widths[:3], widths[3], 32))):
        address.append(f"ld.param.u64 %q{slot}, [param{slot}];\nmul.wide.u32 %w, %i, {count * width // 8};\n"
                       f"add.s64 %p{slot}, %q{slot}, %w;")
    params = ", ".join(f".param .u64 param{slot}" for slot in range(5))
    return HEADER.replace("8.0", "8.5") + f"""
.visible .entry mma_test({params})
{{
    {chr(10).join(declarations)}
    .reg .b32 %e, %i, %n;
    .reg .b64 %q<5>, %p<5>, %w;
    mov.u32 %i, %tid.x;
    mov.u32 %n, %ntid.x;
    mov.u32 %e, %ctaid.x;
    mad.lo.u32 %i, %e, %n, %i;
    {chr(10).join(address)}
    {chr(10).join(loads)}
    {instruction} {operands};
    {chr(10).join(stores)}
    ret;
}}
"""


def run_mma(instruction: str, a: list[list[int]], b: list[list[int]], c: list[list[int]], d_count: int,
            widths: tuple[int, int, int, int], metadata: list[int] | None = None,
            target: str = "host", numerics: str = "exact", edit: Callable[[str], str] | None = None,
            ) -> list[list[int]]:
    """Run over len(a) threads (blocks of 32/64/96 threads) on `target`; returns each thread's D register words.
    `edit`: what to change in the kernel's text first."""
    threads = len(a)
    counts = (len(a[0]), len(b[0]), len(c[0]), d_count)
    text = mma_kernel(instruction, counts, widths, metadata is not None)
    text = edit(text) if edit is not None else text
    # by default the `exact` numerics, which `_dot` models (sm90's are checked against the H200 in
    # test_translate_h200_mma.py; native ones against a bound below)
    program = amd_program(text, target, mma_numerics=numerics)
    arrays = []
    for rows, width in zip((a, b, c), widths):
        kind = ctypes.c_uint32 if width == 32 else ctypes.c_uint64
        arrays.append((kind * (threads * len(rows[0])))(*[x for row in rows for x in row]))
    kind = ctypes.c_uint32 if widths[3] == 32 else ctypes.c_uint64
    out = (kind * (threads * d_count))()
    meta = (ctypes.c_uint32 * threads)(*(metadata or [0] * threads))
    block = 96 if threads % 96 == 0 else 64 if threads % 64 == 0 else 32
    program.launch("mma_test", [*arrays, out, meta], grid=(threads // block, 1, 1),
                   block=(block, 1, 1))
    return [list(out[i * d_count:(i + 1) * d_count]) for i in range(threads)]


def _declared(text: str, directive: str) -> str:
    """`mma_kernel`'s kernel declaring `directive` (such as "\n.maxntid 96, 1, 1") after its parameters."""
    declared = text.replace(".param .u64 param4)", ".param .u64 param4)" + directive, 1)
    assert declared != text or not directive
    return declared


# ------------------------------------------------------------------------------------------------ forms

SHAPES = {  # shape → (m, k)
    "m8n8k4": (8, 4), "m8n8k16": (8, 16), "m8n8k32": (8, 32), "m8n8k128": (8, 128), "m16n8k4": (16, 4),
    "m16n8k8": (16, 8), "m16n8k16": (16, 16), "m16n8k32": (16, 32), "m16n8k64": (16, 64),
    "m16n8k128": (16, 128), "m16n8k256": (16, 256),
}


def _register_count(m: int, k: int, ptx_type: str, matrix: str) -> int:
    per = max(1, 32 // BITS[ptx_type])
    return {"a": m * k, "b": k * 8}[matrix] // (32 * per)


def _word(ptx_type: str, rng: random.Random, special: bool) -> int:
    """A register's worth of random elements (whole words for the integer types)."""
    if ptx_type in ("f16", "bf16"):
        return _float_halves(ptx_type, rng, special)
    if ptx_type == "tf32":
        return _random_float(rng, special) | rng.getrandbits(13)  # low bits that must be ignored
    if ptx_type == "f64":
        return struct.unpack("<Q", struct.pack("<d", rng.choice(SPECIAL_DOUBLES) if special and rng.random() < .2
                                                 else rng.uniform(-4, 4)))[0]
    if ptx_type in ("e4m3", "e5m2"):
        return rng.getrandbits(32) & (0xFFFFFFFF if special else 0x3F3F3F3F)  # below ±2 unless special
    return rng.getrandbits(32)  # integer and b1 elements: any bits


SPECIAL_DOUBLES = [math.inf, -math.inf, math.nan, 0.0, -0.0, 5e-324, 1e300]


def _random_float(rng: random.Random, special: bool) -> int:
    if special and rng.random() < 0.25:
        return rng.choice([0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001, 0x80000000, 0x7F7FFFFF, 0x00800000])
    return struct.unpack("<I", struct.pack("<f", rng.uniform(-4, 4)))[0]


def _float_halves(ptx_type: str, rng: random.Random, special: bool) -> int:
    halves = []
    for _ in range(2):
        if special and rng.random() < 0.25:
            specials = ([0x7C00, 0xFC00, 0x7E00, 0x0001, 0x83FF, 0x7BFF, 0x8000] if ptx_type == "f16"
                        else [0x7F80, 0xFF80, 0x7FC0, 0x0001, 0x807F, 0x7F7F, 0x8000])
            halves.append(rng.choice(specials))
        elif ptx_type == "f16":
            halves.append(int(np.array([rng.uniform(-4, 4)], dtype=np.float16).view(np.uint16)[0]))
        else:
            halves.append(struct.unpack("<I", struct.pack("<f", rng.uniform(-4, 4)))[0] >> 16)
    return halves[0] | halves[1] << 16


def _accumulator_word(ptx_type: str, rng: random.Random, special: bool) -> int:
    if ptx_type == "f32":
        return _random_float(rng, special)
    if ptx_type == "f16":
        return _float_halves("f16", rng, special)
    if ptx_type == "f64":
        return _word("f64", rng, special)
    return rng.choice([0x7FFFFFF0, 0x80000010, rng.getrandbits(32)]) if special else rng.getrandbits(32)


def _reference(shape, dtype, atype, btype, ctype, a_words, b_words, c_words, extra: str,
               logical_a=None) -> list[list[int]]:
    """D registers of every lane of every warp, from the matrices the ISA's tables assemble."""
    m, k = SHAPES[shape]
    lanes = len(a_words)
    result = []
    for first in range(0, lanes, WARP):
        A, B, C = {}, {}, {}
        for lane in range(WARP):
            for i, value in enumerate(_elements(a_words[first + lane], atype) if logical_a is None else ()):
                A[a_place(shape, atype, lane, i)] = value
            for i, value in enumerate(_elements(b_words[first + lane], btype)):
                B[b_place(shape, btype, lane, i)] = value
            for i, value in enumerate(_elements(c_words[first + lane], ctype)):
                C[c_place(m, lane, i)] = value
        if logical_a is not None:
            A = logical_a(first)
        for lane in range(WARP):
            elements = []
            for i in range(len(_elements(c_words[first + lane], ctype))):
                row, col = c_place(m, lane, i)
                elements.append(_dot(dtype, atype, btype, ctype, [A[row, kk] for kk in range(k)],
                                     [B[kk, col] for kk in range(k)], C[row, col], extra))
            per = max(1, 32 // BITS[dtype])
            width = BITS[dtype]
            result.append([sum(elements[r * per + j] << (j * width) for j in range(per))
                           for r in range(len(elements) // per)])
    return result


def _dot(dtype, atype, btype, ctype, row, column, c, extra):
    if atype == "b1":
        operation = (lambda x, y: x & y) if "and" in extra else (lambda x, y: x ^ y)
        return (c + sum(operation(x, y) for x, y in zip(row, column))) & 0xFFFFFFFF
    if atype in ("s8", "u8", "s4", "u4"):
        total = decode("s32", c) + sum(decode(atype, x) * decode(btype, y) for x, y in zip(row, column))
        if "satfinite" in extra:
            total = max(-(1 << 31), min((1 << 31) - 1, total))
        return total & 0xFFFFFFFF
    if atype == "f64":
        total = decode("f64", c)
        for x, y in zip(row, column):
            total = _fma(decode("f64", x), decode("f64", y), total)
        return struct.unpack("<Q", struct.pack("<d", total))[0] if not math.isnan(total) else 0x7FF8000000000000
    total = np.float64(decode(ctype, c))
    with np.errstate(all="ignore"):
        for x, y in zip(row, column):
            total = total + np.float64(decode(atype, x)) * np.float64(decode(btype, y))
        if dtype == "f16":
            return 0x7FFF if np.isnan(total) else int(np.array([total], dtype=np.float16).view(np.uint16)[0])
        return 0x7FFFFFFF if np.isnan(total) else int(np.array([total], dtype=np.float32).view(np.uint32)[0])


def _fma(x: float, y: float, z: float) -> float:
    """IEEE fma of doubles (exact product and sum, one rounding), through fractions where all are finite."""
    if math.isfinite(x) and math.isfinite(y) and math.isinf(z):
        return z  # the exact product is finite (x * y in Python could overflow to an infinity)
    if not all(map(math.isfinite, (x, y, z))):
        return x * y + z
    exact = Fraction(x) * Fraction(y) + Fraction(z)
    if exact == 0:
        return x * y + z  # the sign of a zero sum
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def _same(dtype: str, got: int, want: int) -> bool:
    """Equal bits, any NaN matching any NaN (f64 NaNs are not canonicalised by the ISA)."""
    if dtype == "f64":
        return got == want or (math.isnan(decode("f64", got)) and math.isnan(decode("f64", want)))
    return got == want


def _check(instruction, shape, dtype, atype, btype, ctype, threads, special, extra="", seed=0, target="host"):
    m, k = SHAPES[shape]
    rng = random.Random(seed or RANDOM.getrandbits(32))
    a = [[_word(atype, rng, special) for _ in range(_register_count(m, k, atype, "a"))] for _ in range(threads)]
    b = [[_word(btype, rng, special) for _ in range(_register_count(m, k, btype, "b"))] for _ in range(threads)]
    c_count = m * 8 // 32 // (2 if ctype == "f16" else 1)
    c = [[_accumulator_word(ctype, rng, special) for _ in range(c_count)] for _ in range(threads)]
    d_count = m * 8 // 32 // (2 if dtype == "f16" else 1)
    wide = 64 if atype == "f64" else 32
    got = run_mma(instruction, a, b, c, d_count, (wide, wide, wide, wide), target=target)
    want = _reference(shape, dtype, atype, btype, ctype, a, b, c, extra)
    for lane, (g, w) in enumerate(zip(got, want)):
        for r, (x, y) in enumerate(zip(g, w)):
            assert _same(dtype, x, y), f"{instruction}: thread {lane} d{r}: {x:#x}, expected {y:#x}"


DENSE = [
    # (shape, dtype, atype, btype, ctype, extra)
    ("m16n8k16", "f32", "f16", "f16", "f32", ""),
    ("m16n8k16", "f32", "bf16", "bf16", "f32", ""),
    ("m16n8k16", "f16", "f16", "f16", "f16", ""),
    ("m16n8k8", "f32", "f16", "f16", "f32", ""),
    ("m16n8k8", "f32", "bf16", "bf16", "f32", ""),
    ("m16n8k8", "f16", "f16", "f16", "f16", ""),
    ("m16n8k8", "f32", "tf32", "tf32", "f32", ""),
    ("m16n8k4", "f32", "tf32", "tf32", "f32", ""),
    ("m16n8k32", "s32", "s8", "s8", "s32", ""),
    ("m16n8k32", "s32", "u8", "s8", "s32", "satfinite"),
    ("m16n8k16", "s32", "s8", "u8", "s32", "satfinite"),
    ("m16n8k16", "s32", "u8", "u8", "s32", ""),
    ("m8n8k16", "s32", "s8", "s8", "s32", "satfinite"),
    ("m16n8k64", "s32", "s4", "s4", "s32", ""),
    ("m16n8k32", "s32", "u4", "s4", "s32", "satfinite"),
    ("m8n8k32", "s32", "s4", "u4", "s32", ""),
    ("m8n8k128", "s32", "b1", "b1", "s32", "xor.popc"),
    ("m16n8k128", "s32", "b1", "b1", "s32", "and.popc"),
    ("m16n8k256", "s32", "b1", "b1", "s32", "xor.popc"),
    ("m16n8k32", "f32", "e4m3", "e4m3", "f32", ""),
    ("m16n8k32", "f32", "e5m2", "e4m3", "f32", ""),
    ("m16n8k32", "f16", "e4m3", "e5m2", "f16", ""),
    ("m16n8k16", "f32", "e4m3", "e4m3", "f32", ""),
    ("m8n8k4", "f64", "f64", "f64", "f64", ""),
    ("m16n8k4", "f64", "f64", "f64", "f64", ""),
    ("m16n8k8", "f64", "f64", "f64", "f64", ""),
    ("m16n8k16", "f64", "f64", "f64", "f64", ""),
]


def _instruction(shape, dtype, atype, btype, ctype, extra):
    bits = f".{extra}" if extra and extra != "satfinite" else ""
    satfinite = ".satfinite" if extra == "satfinite" else ""
    return f"mma.sync.aligned.{shape}.row.col{satfinite}.{dtype}.{atype}.{btype}.{ctype}{bits}"


@pytest.mark.parametrize("form", DENSE, ids=lambda f: "-".join(x for x in f if x))
def test_dense_mma_random(form, wave):
    shape, dtype, atype, btype, ctype, extra = form
    _check(_instruction(*form), shape, dtype, atype, btype, ctype, threads=64, special=False, extra=extra,
           target=wave)


EDGE = [f for f in DENSE if f[2] in ("f16", "bf16", "tf32", "e4m3", "f64") or "satfinite" in f[5]]


@pytest.mark.parametrize("form", EDGE, ids=lambda f: "-".join(x for x in f if x))
def test_dense_mma_edges(form, wave, request):
    """NaN, ±inf, subnormals, the largest finite values (f32 overflow), integer overflow and saturation;
    three warps (96 threads: at wave64 the last wave holds one warp)."""
    shape, dtype, atype, btype, ctype, extra = form
    if wave != "host" and form == ("m8n8k16", "s32", "s8", "s8", "s32", "satfinite"):
        request.applymarker(pytest.mark.xfail(strict=True, reason=(
            "fatkit bug: on gfx1100/gfx942 the code object accumulates c + sum(a*b) in a 32-bit v_dot4_i32_iu8 "
            "chain (c as its accumulator) and sign-extends it, so .satfinite clamps a wrapped sum (0x7fffc08c "
            "where INT_MIN is due); lower/mma.py's 64-bit sum is narrowed by LLVM's AMDGPU backend")))
    _check(_instruction(*form), shape, dtype, atype, btype, ctype, threads=96, special=True, extra=extra,
           target=wave)


def test_block_sums_round_toward_zero_to_f32():
    """The sm90 block sum's rounding toward zero (`mma._toward_zero_f32`, on the f64's bits) against the f32
    below the exact value (Fraction), for the magnitudes a block sum takes, [2^-277, 2^128), and zero: random
    bit patterns and exponent-spread values of both signs, f32's subnormal range and its edges."""
    from llvmlite import binding as llvm, ir

    from fatkit.translate.lower.core import F64, I32
    from fatkit.translate.lower.mma import _toward_zero_f32

    class Builder:  # what the function uses of a Lowering
        def __init__(self, builder):
            self.builder = builder

        def intrinsic(self, name, args):
            module = self.builder.module
            function = module.globals.get(name + ".f64") or ir.Function(
                module, ir.FunctionType(F64, [a.type for a in args]), name + ".f64")
            return self.builder.call(function, args)

    module = ir.Module("rz")
    function = ir.Function(module, ir.FunctionType(I32, [F64]), "rz")
    builder = ir.IRBuilder(function.append_basic_block())
    builder.ret(_toward_zero_f32(Builder(builder), function.args[0]))
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)),
                                        llvm.Target.from_default_triple().create_target_machine())
    engine.finalize_object()
    rz = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_double)(engine.get_function_address("rz"))

    def below(x: float) -> int:
        sign = 1 << 31 if math.copysign(1, x) < 0 else 0
        value = Fraction(abs(x))
        if value < Fraction(2) ** -126:  # subnormal: a multiple of 2^-149
            return sign | math.floor(value * 2 ** 149)
        exponent = math.frexp(abs(x))[1] - 1  # 2^exponent <= value < 2^(exponent + 1)
        return sign | (exponent + 127) << 23 | math.floor(value / Fraction(2) ** (exponent - 23)) - (1 << 23)

    rng = random.Random(RANDOM.getrandbits(32))
    values = [0.0, -0.0, 2.0 ** -126, -(2.0 ** -126), 2.0 ** -126 * (1 - 2 ** -53), 2.0 ** -149, 2.0 ** -150,
              -(2.0 ** -150), 2.0 ** -277, 2.0 ** 127 * (2 - 2 ** -52), (1 + 2 ** -23) * 2.0 ** -126]
    while len(values) < 20000:
        values.append(rng.choice((1, -1)) * (1 + rng.random()) * 2.0 ** rng.randint(-277, 127))
        x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(63)))[0]
        if 2.0 ** -277 <= x < 2.0 ** 128:
            values.append(rng.choice((1, -1)) * x)
    for x in values:
        assert rz(x) == below(x), f"{x.hex()}: {rz(x):#x}, expected {below(x):#x}"


def test_exact_sums_equal_the_exact_result():
    """Small-integer f16 inputs: every partial sum is exact, so the result is the exact one whatever the
    order — what the H200 comparison (verification/cuda/mma.cu) relies on."""
    rng = random.Random(7)
    def half_int(): return int(np.array([rng.randint(-8, 8) * 0.25], dtype=np.float16).view(np.uint16)[0])
    a = [[half_int() | half_int() << 16 for _ in range(4)] for _ in range(32)]
    b = [[half_int() | half_int() << 16 for _ in range(2)] for _ in range(32)]
    c = [[struct.unpack("<I", struct.pack("<f", rng.randint(-100, 100)))[0] for _ in range(4)] for _ in range(32)]
    got = run_mma("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", a, b, c, 4, (32, 32, 32, 32))
    A = {a_place("m16n8k16", "f16", lane, i): decode("f16", v) for lane in range(32)
         for i, v in enumerate(_elements(a[lane], "f16"))}
    B = {b_place("m16n8k16", "f16", lane, i): decode("f16", v) for lane in range(32)
         for i, v in enumerate(_elements(b[lane], "f16"))}
    for lane in range(32):
        for i in range(4):
            row, col = c_place(16, lane, i)
            exact = Fraction(decode("f32", c[lane][i])) + sum(Fraction(A[row, kk]) * Fraction(B[kk, col])
                                                              for kk in range(16))
            assert decode("f32", got[lane][i]) == float(exact)


# ------------------------------------------------------------------------------------------------ native

NATIVE = [
    ("m16n8k16", "f32", "f16", "f16", "f32", ""),
    ("m16n8k16", "f32", "bf16", "bf16", "f32", ""),
    ("m16n8k32", "s32", "s8", "s8", "s32", ""),
    ("m16n8k32", "s32", "s8", "s8", "s32", "satfinite"),
    ("m16n8k32", "s32", "u8", "s8", "s32", "satfinite"),
    ("m16n8k16", "s32", "s8", "u8", "s32", ""),
    ("m16n8k16", "s32", "u8", "u8", "s32", "satfinite"),
]
F32_MAX_ROUNDED = (2 - 2.0 ** -24) * 2.0 ** 127  # the least magnitude that rounds to an f32 infinity


def native_bound(k: int, c: Fraction, products: list[Fraction]) -> Fraction:
    """docs/numerics.md: a native f32 result lies within (K+1)·2^-24·(|c| + Σ|a·b|) of the exact c + Σ a·b,
    whatever order and f32 rounding the matrix core adds in (every product of f16/bf16 inputs is exact in f32)."""
    return Fraction(k + 1, 1 << 24) * (abs(c) + sum(abs(p) for p in products))


# gfx1201 runs its 8-bit forms on the portable path, which test_dense_mma_* check
NATIVE_CASES = [pytest.param(form, target, id="-".join([x for x in form if x] + [target]))
                for target in ("gfx942", "gfx1100", "gfx1201") for form in NATIVE
                if target != "gfx1201" or form[2] in ("f16", "bf16")]


@pytest.mark.parametrize("special", [False, True], ids=["random", "edges"])
@pytest.mark.parametrize("form,target", NATIVE_CASES)
def test_native_mma(form, target, special):
    """`native` numerics on the emulated MFMA/WMMA: integer forms bit for bit, f32 ones within the bound
    (NaN where IEEE arithmetic gives NaN, an infinity where it or an overflow does); two warps and a third
    one (at wave64 the second wave holds one warp). gfx942's MFMA multiplies signed bytes: its u8 forms add
    the top bits' products 256 times; gfx1201 runs its f16/bf16 forms natively."""
    shape, dtype, atype, btype, ctype, extra = form
    m, k = SHAPES[shape]
    rng = random.Random(zlib.crc32(repr((form, target, special)).encode()))
    threads = 96
    a = [[_word(atype, rng, special) for _ in range(_register_count(m, k, atype, "a"))] for _ in range(threads)]
    b = [[_word(btype, rng, special) for _ in range(_register_count(m, k, btype, "b"))] for _ in range(threads)]
    c = [[_accumulator_word(ctype, rng, special) for _ in range(4)] for _ in range(threads)]
    got = run_mma(_instruction(*form), a, b, c, 4, (32,) * 4, target=target, numerics="native")
    if dtype == "s32":
        assert got == _reference(shape, dtype, atype, btype, ctype, a, b, c, extra)
        return
    check_native_f32(form, a, b, c, got)


def check_native_f32(form, a, b, c, got) -> None:
    """D words `got` of an f32-accumulating native mma (every warp of the threads' A, B, C register words)
    against the exact sum within `native_bound`: NaN where IEEE arithmetic gives NaN, an infinity where it or
    an overflow does."""
    shape, dtype, atype, btype, ctype, extra = form
    m, k = SHAPES[shape]
    threads = len(a)
    ieee = _reference(shape, dtype, atype, btype, ctype, a, b, c, extra)  # f64 sums: NaN and inf as IEEE has them
    for first in range(0, threads, WARP):
        A = {a_place(shape, atype, lane, i): decode(atype, v) for lane in range(WARP)
             for i, v in enumerate(_elements(a[first + lane], atype))}
        B = {b_place(shape, btype, lane, i): decode(btype, v) for lane in range(WARP)
             for i, v in enumerate(_elements(b[first + lane], btype))}
        for lane in range(WARP):
            for i in range(4):
                row, col = c_place(m, lane, i)
                value, want = decode("f32", got[first + lane][i]), decode("f32", ieee[first + lane][i])
                where = f"thread {first + lane} d{i}: {value!r}, IEEE f64 sum {want!r}"
                if math.isnan(want):
                    assert math.isnan(value), where
                    continue
                finite = [(A[row, kk], B[kk, col]) for kk in range(k)
                          if math.isfinite(A[row, kk]) and math.isfinite(B[kk, col])]
                if len(finite) < k or not math.isfinite(decode("f32", c[first + lane][i])):
                    # an infinite input: its infinity, or NaN where the finite products can overflow an f32
                    # accumulator to the other infinity
                    overflow = sum(abs(Fraction(x) * Fraction(y)) for x, y in finite) >= F32_MAX_ROUNDED
                    assert value == want or (overflow and math.isnan(value)), where
                    continue
                terms = [Fraction(A[row, kk]) * Fraction(B[kk, col]) for kk in range(k)]
                c_value = Fraction(decode("f32", c[first + lane][i]))
                exact, bound = c_value + sum(terms), native_bound(k, c_value, terms)
                if math.isinf(value):
                    assert (exact if value > 0 else -exact) + bound >= F32_MAX_ROUNDED, where
                else:
                    assert abs(Fraction(value) - exact) <= bound, where


F16_MAX_ROUNDED = 65520  # the least magnitude that rounds to an f16 infinity


def _f16_half_ulp(value: float) -> Fraction:
    """Half an f16 ulp at `value` (subnormal spacing below 2^-14)."""
    exponent = max(math.frexp(abs(value))[1] - 1, -14) if value else -14
    return Fraction(2) ** (exponent - 11)


def _one_block(text: str) -> str:
    """The kernel declaring its block of 96 threads, each thread's number its %tid.x (one block launched),
    so that its A and B loads are proven lane-affine (lower/mma_direct.py)."""
    return _declared(text.replace("mad.lo.u32 %i, %e, %n, %i;", ""), "\n.maxntid 96, 1, 1")


@pytest.mark.parametrize("special", [False, True], ids=["random", "edges"])
@pytest.mark.parametrize("target,edit", [pytest.param(target, None, id=target)
                                         for target in ("gfx942", "gfx1100", "gfx1201")] +
                         [pytest.param("gfx1100", lambda text: _declared(text, "\n.maxntid 96, 1, 1"),
                                       id="gfx1100-maxntid"),
                          pytest.param("gfx1100", _one_block, id="gfx1100-loaded")])
def test_native_mma_f16_accumulator(target, edit, special):
    """m16n8k16 .f16.f16.f16.f16 under `native`: the matrix core's f32 sum of the products and c, rounded to
    f16 once, lies within docs/numerics.md's f32 bound plus half an f16 ulp of the exact c + Σ a·b; an f16
    overflow is an infinity, NaN where IEEE arithmetic gives one; three warps. gfx1100 with the block
    declared: the words move through LDS together, or, where A and B are loaded in the WMMA's layout, D
    alone does."""
    rng = random.Random(zlib.crc32(repr(("f16 accumulator", target, special)).encode()))
    threads, k = 96, 16
    a = [[_word("f16", rng, special) for _ in range(4)] for _ in range(threads)]
    b = [[_word("f16", rng, special) for _ in range(2)] for _ in range(threads)]
    c = [[_accumulator_word("f16", rng, special) for _ in range(2)] for _ in range(threads)]
    got = run_mma(_instruction("m16n8k16", "f16", "f16", "f16", "f16", ""), a, b, c, 2, (32,) * 4, target=target,
                  numerics="native", edit=edit)
    for first in range(0, threads, WARP):
        A = {a_place("m16n8k16", "f16", lane, i): decode("f16", v) for lane in range(WARP)
             for i, v in enumerate(_elements(a[first + lane], "f16"))}
        B = {b_place("m16n8k16", "f16", lane, i): decode("f16", v) for lane in range(WARP)
             for i, v in enumerate(_elements(b[first + lane], "f16"))}
        for lane in range(WARP):
            values = [decode("f16", v) for v in _elements(got[first + lane], "f16")]
            for i, c_bits in enumerate(_elements(c[first + lane], "f16")):
                row, col = c_place(16, lane, i)
                value, c_value = values[i], decode("f16", c_bits)
                where = f"thread {first + lane} d{i}: {value!r}"
                pairs = [(A[row, kk], B[kk, col]) for kk in range(k)]
                ieee = c_value + math.fsum(x * y for x, y in pairs) if all(
                    math.isfinite(x) and math.isfinite(y) for x, y in pairs) and math.isfinite(c_value) else \
                    c_value + sum(x * y for x, y in pairs)
                if math.isnan(ieee):
                    assert math.isnan(value), where
                    continue
                if math.isinf(ieee):  # an infinite input (finite products cannot reach an f32 infinity)
                    assert value == ieee, where
                    continue
                exact = Fraction(c_value) + sum(Fraction(x) * Fraction(y) for x, y in pairs)
                bound = native_bound(k, Fraction(c_value), [Fraction(x) * Fraction(y) for x, y in pairs])
                if math.isinf(value):
                    assert (exact if value > 0 else -exact) + bound >= F16_MAX_ROUNDED, where
                else:
                    assert abs(Fraction(value) - exact) <= bound + _f16_half_ulp(value), where


@pytest.mark.parametrize("target", ["gfx942", "gfx1100"])
@pytest.mark.parametrize("form", [("m16n8k8", "f32", "f16", "f16", "f32", ""),
                                  ("m16n8k8", "f16", "f16", "f16", "f16", ""),
                                  ("m16n8k8", "f32", "tf32", "tf32", "f32", "")],
                         ids=lambda f: "-".join(x for x in f if x))
def test_native_leaves_other_forms_to_sm90(form, target):
    """Forms without a native mapping compute sm90's bits under `native` (random edge inputs, one warp)."""
    shape, dtype, atype, btype, ctype, extra = form
    m, k = SHAPES[shape]
    rng = random.Random(zlib.crc32(repr((form, target)).encode()))
    a = [[_word(atype, rng, True) for _ in range(_register_count(m, k, atype, "a"))] for _ in range(WARP)]
    b = [[_word(btype, rng, True) for _ in range(_register_count(m, k, btype, "b"))] for _ in range(WARP)]
    count = m * 8 // 32 // (2 if ctype == "f16" else 1)
    c = [[_accumulator_word(ctype, rng, True) for _ in range(count)] for _ in range(WARP)]
    runs = [run_mma(_instruction(*form), a, b, c, count, (32,) * 4, target=target, numerics=numerics)
            for numerics in ("native", "sm90")]
    assert runs[0] == runs[1]


@pytest.mark.parametrize("target,instruction", [("gfx942", "v_mfma_f32_4x4x4_16b_f16"),
                                                ("gfx1100", "v_wmma_f32_16x16x16_f16"),
                                                ("gfx1201", "v_wmma_f32_16x16x16_f16")])
def test_native_mma_runs_on_the_matrix_core(target, instruction, tmp_path):
    text = mma_kernel("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", (4, 2, 4, 4), (32,) * 4, False)
    disassembly = _objdump(translate(text, Options(target=target, mma_numerics="native")).product, tmp_path)
    assert disassembly.count(instruction) == (4 if target == "gfx942" else 1)
    assert "v_fma" not in disassembly and "s_swappc" not in disassembly  # no portable sum, no subroutine call


@pytest.mark.parametrize("target,instruction,wait", [("gfx942", "v_mfma", "lgkmcnt"), ("gfx1100", "v_wmma", "lgkmcnt"),
                                                     ("gfx1201", "v_wmma", "s_wait_dscnt")])
def test_native_lane_moves_waited_for_once(target, instruction, wait, tmp_path):
    """The operands' lane moves (ds_bpermute) are waited for by one wait on the LDS counter before the matrix
    instruction (lower/mma_native.py `_fence`), not one wait per first use."""
    text = mma_kernel("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", (4, 2, 4, 4), (32,) * 4, False)
    lines = _objdump(translate(text, Options(target=target, mma_numerics="native")).product, tmp_path).splitlines()
    first_move = next(i for i, line in enumerate(lines) if "ds_bpermute" in line)
    first_product = next(i for i, line in enumerate(lines) if instruction in line)
    between = lines[first_move:first_product]
    assert sum(wait in line for line in between) == 1


def _in_function(text: str) -> str:
    """`mma_kernel`'s body as a .func that the kernel calls with its parameters."""
    params = ", ".join(f"q{slot}" for slot in range(5))
    moves = "\n".join(f"    ld.param.u64 %x{slot}, [param{slot}];\n    st.param.b64 [q{slot}], %x{slot};"
                      for slot in range(5))
    declared = "\n".join(f"    .param .b64 q{slot};" for slot in range(5))
    entry = text.index(".visible .entry mma_test(")
    head, signature = text[:entry], text[entry:].split("\n", 1)
    body = signature[1].lstrip()
    directives = "".join(line + "\n" for line in body.split("{", 1)[0].splitlines() if line.strip())
    function = ".func body(" + signature[0].split("(", 1)[1] + "\n{" + body.split("{", 1)[1]
    return (head + function.replace(".param .u64 param", ".param .b64 param") +
            f".visible .entry mma_test{signature[0][len('.visible .entry mma_test'):]}\n{directives}{{\n"
            f"    .reg .b64 %x<5>;\n    {{\n{declared}\n{moves}\n    call body, ({params});\n    }}\n    ret;\n}}\n")


@pytest.mark.parametrize("directive", ["", "\n.reqntid 16, 6, 1"], ids=["undeclared", "reqntid"])
@pytest.mark.parametrize("form", [NATIVE[0], NATIVE[4]], ids=["f16", "u8-s8-satfinite"])
@pytest.mark.parametrize("where", ["kernel", "function"])
def test_native_lds_moves_in_a_block_of_rows(form, directive, where):
    """gfx1100 moves the fragments through LDS (lower/mma_native.py `LdsGather`), a slice per warp found from
    the thread's linear index: in a block of 16 × 6 threads each warp is two rows of %tid.y, whose threads
    must find their own warp's slice (random inputs; integer results bit for bit, f32 within the bound),
    also from a .func the kernel calls (the kernel's declaration decides). Undeclared, the same block with
    the words moved by ds_bpermute (no buffer: `lane_buffer_fits`)."""
    shape, dtype, atype, btype, ctype, extra = form
    m, k = SHAPES[shape]
    rng = random.Random(zlib.crc32(repr(("rows", form)).encode()))
    threads = 192
    a = [[_word(atype, rng, False) for _ in range(_register_count(m, k, atype, "a"))] for _ in range(threads)]
    b = [[_word(btype, rng, False) for _ in range(_register_count(m, k, btype, "b"))] for _ in range(threads)]
    c = [[_accumulator_word(ctype, rng, False) for _ in range(4)] for _ in range(threads)]
    counts = (len(a[0]), len(b[0]), 4, 4)
    text = mma_kernel(_instruction(*form), counts, (32,) * 4, False)
    # the thread number: ctaid.x · 96 + tid.y · 16 + tid.x, the block's linear index, as AMD forms its waves
    text = _declared(text.replace("mov.u32 %n, %ntid.x;", "mov.u32 %n, %tid.y;\n    mad.lo.u32 %i, %n, 16, %i;\n"
                                  "    mov.u32 %n, 96;"), directive)
    text = _in_function(text) if where == "function" else text
    program = amd_program(text, "gfx1100", mma_numerics="native")
    arrays = [(ctypes.c_uint32 * (threads * len(rows[0])))(*[x for row in rows for x in row]) for rows in (a, b, c)]
    out = (ctypes.c_uint32 * (threads * 4))()
    program.launch("mma_test", [*arrays, out, (ctypes.c_uint32 * threads)()], grid=(2, 1, 1), block=(16, 6, 1))
    got = [list(out[i * 4:(i + 1) * 4]) for i in range(threads)]
    if dtype == "s32":
        assert got == _reference(shape, dtype, atype, btype, ctype, a, b, c, extra)
    else:
        check_native_f32(form, a, b, c, got)


@pytest.mark.parametrize("directive,size", [("", 0), ("\n.maxntid 80, 1, 1", 96 * 24),
                                            ("\n.reqntid 32, 2, 2", 128 * 24)])
def test_native_lds_sized_for_the_block(directive, size):
    """The LDS of the moves: six words a thread of the largest block the kernel declares (whole warps), and
    none where the block is undeclared, whose buffer would be 1024 threads' and cost small blocks their
    occupancy (the code object's group segment; the kernel has no .shared variable)."""
    text = mma_kernel("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", (4, 2, 4, 4), (32,) * 4, False)
    text = _declared(text, directive)
    product = translate(text, Options(target="gfx1100", mma_numerics="native")).product
    (kernel,) = parse_code_object(product).kernels
    assert kernel.group_segment_size == size


# ------------------------------------------------------------------------------------------------ m8n8k4 .f16

def _quad_pair_place(matrix: str, layout: str, ptx_type: str, lane: int, i: int) -> tuple[int, int]:
    """The ISA's m8n8k4 .f16 tables, within the lane's quad pair."""
    high = 4 if lane >= 16 else 0
    if matrix == "a":
        return (lane % 4 + high, i) if layout == "row" else (i % 4 + high, lane % 4)
    if matrix == "b":
        return (lane % 4, i + high) if layout == "row" else (i, lane % 4 + high)
    if ptx_type == "f16":
        return lane % 4 + high, i
    return (lane & 1) + (i & 2) + high, (i & 4) + (lane & 2) + (i & 1)


@pytest.mark.parametrize("layouts", [("row", "col"), ("row", "row"), ("col", "col"), ("col", "row")])
@pytest.mark.parametrize("dtype,ctype", [("f32", "f32"), ("f16", "f16"), ("f32", "f16"), ("f16", "f32")])
def test_quad_pair_m8n8k4_f16(layouts, dtype, ctype, wave):
    """Volta's m8n8k4 .f16: four independent 8×8×4 products, one per quad pair (lanes 4p–4p+3, 4p+16–4p+19)."""
    rng = random.Random(hash((layouts, dtype, ctype)) & 0xFFFF)
    threads = 64
    a = [[_word("f16", rng, False) for _ in range(2)] for _ in range(threads)]
    b = [[_word("f16", rng, False) for _ in range(2)] for _ in range(threads)]
    c_count, d_count = (4 if ctype == "f16" else 8), (4 if dtype == "f16" else 8)
    c = [[_accumulator_word(ctype, rng, False) for _ in range(c_count)] for _ in range(threads)]
    instruction = f"mma.sync.aligned.m8n8k4.{layouts[0]}.{layouts[1]}.{dtype}.f16.f16.{ctype}"
    got = run_mma(instruction, a, b, c, d_count, (32, 32, 32, 32), target=wave)
    for first in range(0, threads, WARP):
        for pair in range(4):
            lanes = [first + 4 * pair + q for q in range(4)] + [first + 16 + 4 * pair + q for q in range(4)]
            A, B, C = {}, {}, {}
            for lane in lanes:
                for i, value in enumerate(_elements(a[lane], "f16")):
                    A[_quad_pair_place("a", layouts[0], "f16", lane % 32, i)] = value
                for i, value in enumerate(_elements(b[lane], "f16")):
                    B[_quad_pair_place("b", layouts[1], "f16", lane % 32, i)] = value
                for i, value in enumerate(_elements(c[lane], ctype)):
                    C[_quad_pair_place("c", "", ctype, lane % 32, i)] = value
            for lane in lanes:
                elements = [_dot(dtype, "f16", "f16", ctype, [A[row, kk] for kk in range(4)],
                                 [B[kk, col] for kk in range(4)], C[row, col], "")
                            for row, col in (_quad_pair_place("c", "", dtype, lane % 32, i) for i in range(8))]
                per = 2 if dtype == "f16" else 1
                want = [sum(elements[r * per + j] << (16 * j) for j in range(per)) for r in range(8 // per)]
                assert got[lane] == want, f"{instruction}: thread {lane}"


# ------------------------------------------------------------------------------------------------ sparse

def _sparse_metadata(rng: random.Random, atype: str = "f16") -> int:
    """A metadata word: for each 4-column chunk two distinct indices, in ascending order; for tf32 (1:2 sparse,
    the ISA's only valid nibbles) 0b0100 (column 0 of a 2-column chunk kept) or 0b1110 (column 1)."""
    word = 0
    for chunk in range(8):
        first, second = rng.choice([(0, 1), (2, 3)]) if atype == "tf32" else sorted(rng.sample(range(4), 2))
        word |= (first | second << 2) << (4 * chunk)
    return word


def _metadata_owner(atype: str, selector: int, k: int, row: int, chunk: int, p: int) -> tuple[int, int]:
    """(lane in the group, bit) of the index of stored element p of 4-column chunk `chunk` in `row`: the
    ISA's figures for 16-bit types (as CUTLASS's CuTe ELayout of SM80_SPARSE_16x8x{16,32}), CuTe's
    ELayout of SM80_SPARSE_16x8x{32,64}_S32S8S8S32 for 8-bit ones and of SM80_SPARSE_16x8x{64,128}_S32S4S4S32 for
    4-bit ones, whose chunks are of four pairs of elements (a 32-bit register covers 64 columns of a row)."""
    if BITS[atype] == 16:
        return selector * (k // 16) + chunk // 4, 16 * (row // 8) + 4 * (chunk % 4) + 2 * p
    if atype == "tf32":  # the 16-bit layout of a K twice as wide, a 2-column chunk taking a 4-half one's field
        return selector * (k // 8) + chunk // 4, 16 * (row // 8) + 4 * (chunk % 4)
    return row // 8 + 2 * (selector + chunk // 8), 4 * (chunk % 8) + 2 * p


SPARSE = [  # shape, atype, btype, accumulator, selector, extra
    ("m16n8k32", "f16", "f16", "f32", 0, ""), ("m16n8k32", "bf16", "bf16", "f32", 1, ""),
    ("m16n8k16", "f16", "f16", "f32", 2, ""), ("m16n8k16", "bf16", "bf16", "f32", 3, ""),
    ("m16n8k32", "f16", "f16", "f16", 1, ""),
    ("m16n8k32", "s8", "u8", "s32", 1, "satfinite"), ("m16n8k32", "u8", "u8", "s32", 0, ""),
    ("m16n8k64", "s8", "s8", "s32", 0, ""), ("m16n8k64", "e4m3", "e5m2", "f32", 0, ""),
    ("m16n8k64", "s4", "s4", "s32", 0, ""), ("m16n8k64", "u4", "s4", "s32", 1, "satfinite"),
    ("m16n8k128", "u4", "u4", "s32", 0, ""), ("m16n8k128", "s4", "u4", "s32", 0, "satfinite"),
    ("m16n8k8", "tf32", "tf32", "f32", 0, ""), ("m16n8k8", "tf32", "tf32", "f32", 3, ""),
    ("m16n8k16", "tf32", "tf32", "f32", 1, ""),
]


@pytest.mark.parametrize("form", SPARSE, ids=lambda f: "-".join(map(str, f)))
def test_sparse_mma(form, wave):
    shape, atype, btype, accumulator, selector, extra = form
    m, k = SHAPES[shape]
    rng = random.Random(hash(form) & 0xFFFF)
    threads = 64
    bits = BITS[atype]
    dense_shape = f"m16n8k{k // 2}"
    a = [[_word(atype, rng, False) for _ in range(k * bits // 128)] for _ in range(threads)]
    b = [[_word(btype, rng, False) for _ in range(k * bits // 128)] for _ in range(threads)]
    c_count = 2 if accumulator == "f16" else 4
    c = [[_accumulator_word(accumulator, rng, extra == "satfinite") for _ in range(c_count)] for _ in range(threads)]
    metadata = [_sparse_metadata(rng, atype) for _ in range(threads)]
    satfinite = ".satfinite" if extra else ""
    instruction = (f"mma.sp::ordered_metadata.sync.aligned.{shape}.row.col{satfinite}.{accumulator}.{atype}.{btype}"
                   f".{accumulator}")
    got = run_mma_sparse(instruction, a, b, c, metadata, selector, wave)

    def logical_a(first):
        """The 16×K matrix: element j of stored unit p (u elements: 2 for 4-bit types, else 1) of chunk q of row
        r at column u·(4q + index(r, q, p)) + j; tf32: stored element q at column 2q + index(r, q, 0) / 2."""
        unit = 2 if bits == 4 else 1
        compressed = {}
        for lane in range(WARP):
            for i, value in enumerate(_elements(a[first + lane], atype)):
                compressed[a_place(dense_shape, atype, lane, i)] = value
        matrix = {(r, col): 0 for r in range(16) for col in range(k)}
        for r in range(16):
            for stored in range(k // 2):
                chunk, p = (stored, 0) if atype == "tf32" else divmod(stored // unit, 2)
                owner, bit = _metadata_owner(atype, selector, k, r, chunk, p)
                index = metadata[first + (r % 8) * 4 + owner] >> bit & 3
                column = 2 * chunk + index // 2 if atype == "tf32" else unit * (4 * chunk + index) + stored % unit
                matrix[r, column] = compressed[r, stored]
        return matrix

    want = _reference(shape, accumulator, atype, btype, accumulator, a, b, c, extra, logical_a=logical_a)
    assert got == want


def run_mma_sparse(instruction, a, b, c, metadata, selector, target="host"):
    counts = (len(a[0]), len(b[0]), len(c[0]), len(c[0]))
    kernel = mma_kernel(instruction, counts, (32, 32, 32, 32), True)
    kernel = kernel.replace(", %e;", f", %e, {selector};")
    program = amd_program(kernel, target, mma_numerics="exact")
    threads = len(a)
    arrays = [(ctypes.c_uint32 * (threads * len(rows[0])))(*[x for row in rows for x in row]) for rows in (a, b, c)]
    d_count = len(c[0])
    out = (ctypes.c_uint32 * (threads * d_count))()
    meta = (ctypes.c_uint32 * threads)(*metadata)
    program.launch("mma_test", [*arrays, out, meta], grid=(threads // 32, 1, 1),
                   block=(32, 1, 1))
    return [list(out[i * d_count:(i + 1) * d_count]) for i in range(threads)]


# ------------------------------------------------------------------------------------------------ rejections

@pytest.mark.parametrize("instruction,why", [
    ("mma.sync.aligned.m16n8k16.row.row.f32.f16.f16.f32", ".row.col"),
    ("mma.sync.aligned.m16n8k16.row.col.f32.f16.bf16.f32", "does not exist"),
    ("mma.sync.aligned.m8n8k4.row.row.f64.f64.f64.f64", ".row.col"),
    ("mma.sync.aligned.m16n8k16.row.col.satfinite.f32.f16.f16.f32", ".satfinite"),
])
def test_rejected_forms_name_the_reason(instruction, why):
    kernel = mma_kernel(instruction, (4, 2, 4, 4), (32, 32, 32, 32), False)
    options = Options(target="host")
    (report,) = pipeline.lower(pipeline.passes(pipeline.parse(kernel, options), options), options).reports
    assert report.status == "unsupported" and why in report.reason


# ------------------------------------------------------------------------------------------------ other targets

CODEGEN_FORMS = [f for f in DENSE if f[:3] in (("m16n8k16", "f32", "f16"), ("m16n8k16", "f32", "bf16"),
                                                ("m16n8k32", "s32", "s8"), ("m16n8k128", "s32", "b1"),
                                                ("m16n8k32", "f32", "e4m3"), ("m16n8k4", "f64", "f64"))]


def _objdump(code_object: bytes, tmp_path) -> str:
    path = tmp_path / "k.hsaco"
    path.write_bytes(code_object)
    tool = "/usr/lib/llvm-22/bin/llvm-objdump"
    return subprocess.run([tool, "-d", str(path)], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("target", ["gfx942", "gfx1100"])
@pytest.mark.parametrize("form", CODEGEN_FORMS, ids=lambda f: "-".join(x for x in f if x))
def test_amdgpu_codegen(form, target, tmp_path):
    shape, dtype, atype, btype, ctype, extra = form
    m, k = SHAPES[shape]
    wide = 64 if atype == "f64" else 32
    counts = (_register_count(m, k, atype, "a"), _register_count(m, k, btype, "b"),
              m * 8 // 32 // (2 if ctype == "f16" else 1), m * 8 // 32 // (2 if dtype == "f16" else 1))
    kernel = mma_kernel(_instruction(*form), counts, (wide,) * 4, False)
    result = translate(kernel, Options(target=target))
    assert [r.status for r in result.kernels] == ["ok"]
    disassembly = _objdump(result.product, tmp_path)
    assert "ds_bpermute_b32" in disassembly  # the fragments travel between lanes


def test_sparse_amdgpu_codegen(tmp_path):
    kernel = mma_kernel("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32",
                        (4, 4, 4, 4), (32,) * 4, True).replace(", %e;", ", %e, 0;")
    for target in ("gfx942", "gfx1100"):
        result = translate(kernel, Options(target=target))
        assert [r.status for r in result.kernels] == ["ok"]


@pytest.mark.parametrize("target", ["sm_90", "sm_90:wave64"])
def test_nvptx_output_assembles(target, tmp_path):
    for form in CODEGEN_FORMS:
        shape, dtype, atype, btype, ctype, extra = form
        m, k = SHAPES[shape]
        wide = 64 if atype == "f64" else 32
        counts = (_register_count(m, k, atype, "a"), _register_count(m, k, btype, "b"),
                  m * 8 // 32 // (2 if ctype == "f16" else 1), m * 8 // 32 // (2 if dtype == "f16" else 1))
        result = translate(mma_kernel(_instruction(*form), counts, (wide,) * 4, False), Options(target=target))
        oracles.assert_ptxas_accepts(result.product, tmp_path)


# ------------------------------------------------------------------------------------------------ wmma

WMMA_SHAPES = {"m16n16k16": (16, 16, 16), "m32n8k16": (32, 8, 16), "m8n32k16": (8, 32, 16), "m16n16k8": (16, 16, 8),
               "m8n8k4": (8, 8, 4)}
NUMPY = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "tf32": np.float32, "s8": np.int8,
         "u8": np.uint8, "s32": np.int32}
WMMA_REGISTERS = {  # (shape, type) → registers of A, B; accumulators: 8 (f32/s32), 4 (f16), 2 (f64)
    ("m16n16k16", "f16"): (8, 8), ("m32n8k16", "f16"): (8, 8), ("m8n32k16", "f16"): (8, 8),
    ("m16n16k16", "bf16"): (4, 4), ("m32n8k16", "bf16"): (8, 2), ("m8n32k16", "bf16"): (2, 8),
    ("m16n16k16", "s8"): (2, 2), ("m32n8k16", "s8"): (4, 1), ("m8n32k16", "u8"): (1, 4),
    ("m16n16k8", "tf32"): (4, 4), ("m8n8k4", "f64"): (1, 1),
}


def _matrix_bytes(values: np.ndarray, ptx_type: str, layout: str, stride: int) -> bytes:
    """A matrix laid out row- or column-major with `stride` elements between rows (columns)."""
    rows, columns = values.shape
    major = values if layout == "row" else values.T
    padded = np.zeros((major.shape[0], stride), dtype=np.float64 if ptx_type not in ("s8", "u8", "s32") else np.int64)
    padded[:, :major.shape[1]] = major
    if ptx_type == "bf16":
        return (np.asarray(padded, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    return np.asarray(padded, dtype=NUMPY[ptx_type]).tobytes()


def _wmma_kernel(shape, atype, ctype, dtype, layouts, strides, space):
    a_count, b_count = WMMA_REGISTERS[shape, atype]
    c_count = {"f16": 4, "f32": 8, "s32": 8, "f64": 2}
    wide = 64 if atype == "f64" else 32
    counts = (a_count, b_count, c_count[ctype], c_count[dtype])
    declarations = [f".reg .b{wide} %{name}<{count}>;" for name, count in zip("abcd", counts)]
    vector = {name: "{" + ", ".join(f"%{name}{r}" for r in range(count)) + "}" for name, count in zip("abcd", counts)}
    if atype == "f16":
        types = f"{dtype}.{ctype}"
    else:
        types = f"{dtype}.{atype}.{atype}.{ctype}"
    space_text = f".{space}" if space else ""
    stride = [f", {s}" if s else "" for s in strides]
    m, n, k = WMMA_SHAPES[shape]
    sizes = [m * k, k * n, m * n, m * n]
    element = {"f16": 2, "bf16": 2, "f32": 4, "s32": 4, "tf32": 4, "f64": 8, "s8": 1, "u8": 1}
    addresses = []
    for slot, t in enumerate((atype, atype, ctype, dtype)):
        span = max(sizes[slot], (strides[slot] or 0) * 32) * element[t]
        addresses.append(f"ld.param.u64 %q{slot}, [param{slot}];\nmul.wide.u32 %w, %warp, {span};\n"
                         f"add.s64 %q{slot}, %q{slot}, %w;" + ("\ncvta.to.global.u64 %q{0}, %q{0};".format(slot)
                                                              if space == "global" else ""))
    params = ", ".join(f".param .u64 param{slot}" for slot in range(4))
    operands = ", ".join(vector[name] for name in "dabc")
    return HEADER.replace("8.0", "8.5") + f"""
.visible .entry wmma_test({params})
{{
    {chr(10).join(declarations)}
    .reg .b32 %warp, %n, %e;
    .reg .b64 %q<4>, %w;
    mov.u32 %warp, %tid.x;
    mov.u32 %n, %ntid.x;
    mov.u32 %e, %ctaid.x;
    mad.lo.u32 %warp, %e, %n, %warp;
    shr.u32 %warp, %warp, 5;
    {chr(10).join(addresses)}
    wmma.load.a.sync.aligned.{layouts[0]}.{shape}{space_text}.{atype} {vector['a']}, [%q0]{stride[0]};
    wmma.load.b.sync.aligned.{layouts[1]}.{shape}{space_text}.{atype} {vector['b']}, [%q1]{stride[1]};
    wmma.load.c.sync.aligned.{layouts[2]}.{shape}{space_text}.{ctype} {vector['c']}, [%q2]{stride[2]};
    wmma.mma.sync.aligned.{layouts[0]}.{layouts[1]}.{shape}.{types} {operands};
    wmma.store.d.sync.aligned.{layouts[3]}.{shape}{space_text}.{dtype} [%q3], {vector['d']}{stride[3]};
    ret;
}}
"""


WMMA_FORMS = [  # shape, atype, ctype, dtype, layouts (a, b, c, d), strides (None: the default), space
    ("m16n16k16", "f16", "f32", "f32", ("row", "col", "row", "row"), (None, None, None, None), "global"),
    ("m16n16k16", "f16", "f16", "f16", ("col", "row", "col", "row"), (24, 20, 16, 32), ""),
    ("m32n8k16", "f16", "f32", "f16", ("row", "row", "row", "col"), (None, 12, None, 40), "global"),
    ("m8n32k16", "f16", "f16", "f32", ("col", "col", "row", "row"), (None, None, 36, None), ""),
    ("m16n16k16", "bf16", "f32", "f32", ("row", "col", "col", "row"), (None, None, None, 20), "global"),
    ("m32n8k16", "bf16", "f32", "f32", ("col", "row", "row", "row"), (None, None, None, None), ""),
    ("m8n32k16", "bf16", "f32", "f32", ("row", "col", "row", "col"), (20, None, None, None), "global"),
    ("m16n16k16", "s8", "s32", "s32", ("row", "col", "row", "row"), (None, 32, None, None), "global"),
    ("m32n8k16", "s8", "s32", "s32", ("row", "row", "col", "row"), (None, None, None, None), ""),
    ("m8n32k16", "u8", "s32", "s32", ("col", "col", "row", "row"), (None, None, None, None), "global"),
    ("m16n16k8", "tf32", "f32", "f32", ("row", "col", "row", "col"), (None, 12, None, None), "global"),
    ("m8n8k4", "f64", "f64", "f64", ("row", "col", "row", "row"), (None, None, 10, None), "global"),
]


def _small_values(rng, shape, ptx_type):
    if ptx_type == "s8":
        return rng.integers(-128, 128, size=shape)
    if ptx_type == "u8":
        return rng.integers(0, 256, size=shape)
    if ptx_type == "s32":
        return rng.integers(-(1 << 31), 1 << 31, size=shape)
    return rng.integers(-8, 9, size=shape).astype(np.float64) / (1 if ptx_type in ("f16", "bf16") else 4)


@pytest.mark.parametrize("form", WMMA_FORMS,
                         ids=lambda f: "-".join(map(str, f[:4])) + "-" + "".join(layout[0] for layout in f[4]))
def test_wmma_load_mma_store(form, wave):
    """Two warps each load A, B, C from their own matrices, multiply and store D: A·B + C exactly (small
    integers; integer forms wrap), whatever fragment layout holds them."""
    shape, atype, ctype, dtype, layouts, strides, space = form
    m, n, k = WMMA_SHAPES[shape]
    rng = np.random.default_rng(hash(form) & 0xFFFF)
    warps = 2
    element = {"f16": 2, "bf16": 2, "f32": 4, "s32": 4, "tf32": 4, "f64": 8, "s8": 1, "u8": 1}
    dims = [(m, k), (k, n), (m, n), (m, n)]
    buffers, matrices = [], []
    for slot, t in enumerate((atype, atype, ctype, dtype)):
        rows, columns = dims[slot]
        stride = strides[slot] or (columns if layouts[slot] == "row" else rows)
        span = max(rows * columns, (strides[slot] or 0) * 32) * element[t]
        chunks = []
        for _ in range(warps):
            values = _small_values(rng, dims[slot], t) if slot < 3 else np.zeros(dims[slot])
            matrices.append(values)
            data = _matrix_bytes(values, t, layouts[slot], stride)
            chunks.append(data + bytes(span - len(data)))
        buffers.append(ctypes.create_string_buffer(b"".join(chunks)))
    kernel = _wmma_kernel(shape, atype, ctype, dtype, layouts, strides, space)
    program = amd_program(kernel, wave)
    program.launch("wmma_test", buffers, block=(32 * warps, 1, 1))
    for warp in range(warps):
        a, b, c = (matrices[slot * warps + warp] for slot in range(3))
        rows, columns = m, n
        stride = strides[3] or (columns if layouts[3] == "row" else rows)
        span = max(rows * columns, (strides[3] or 0) * 32) * element[dtype]
        raw = buffers[3].raw[warp * span:(warp + 1) * span]
        if dtype in ("s32",):
            want = (a.astype(object) @ b.astype(object) + c.astype(object))
            want = np.array([[((int(x) + (1 << 31)) % (1 << 32)) - (1 << 31) for x in row] for row in want])
        else:
            want = a @ b + c
        expected = _matrix_bytes(want, dtype, layouts[3], stride)
        got = raw[:len(expected)]
        assert got == expected, f"warp {warp}"


@pytest.mark.parametrize("form", [WMMA_FORMS[0], WMMA_FORMS[7], WMMA_FORMS[11]], ids=lambda f: f[0] + "-" + f[1])
def test_wmma_codegen_amdgpu_and_nvptx(form, tmp_path):
    shape, atype, ctype, dtype, layouts, strides, space = form
    kernel = _wmma_kernel(shape, atype, ctype, dtype, layouts, strides, space)
    for target in ("gfx942", "gfx1100"):
        result = translate(kernel, Options(target=target))
        assert [r.status for r in result.kernels] == ["ok"]
        assert "ds_bpermute_b32" in _objdump(result.product, tmp_path)
    for target in ("sm_90", "sm_90:wave64"):
        oracles.assert_ptxas_accepts(translate(kernel, Options(target=target)).product, tmp_path)


def test_quad_pair_and_sparse_codegen(tmp_path):
    """m8n8k4 .f16 with a lane-chosen B register and an exchanged C, and mma.sp: gfx942, gfx1100 and PTX
    that ptxas accepts."""
    kernels = [mma_kernel("mma.sync.aligned.m8n8k4.row.row.f32.f16.f16.f16", (2, 2, 4, 8), (32,) * 4, False),
               mma_kernel("mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", (2, 2, 4, 4), (32,) * 4,
                          True).replace(", %e;", ", %e, 3;")]
    for kernel in kernels:
        for target in ("gfx942", "gfx1100"):
            result = translate(kernel, Options(target=target))
            assert [r.status for r in result.kernels] == ["ok"]
            assert "ds_bpermute_b32" in _objdump(result.product, tmp_path)
        for target in ("sm_90", "sm_90:wave64"):
            oracles.assert_ptxas_accepts(translate(kernel, Options(target=target)).product, tmp_path)


@pytest.mark.parametrize("atype,btype,operation", [("s4", "s4", ""), ("u4", "s4", ".satfinite"),
                                                   ("b1", "b1", ".xor.popc"), ("b1", "b1", ".and.popc")])
def test_wmma_sub_byte(atype, btype, operation, wave):
    """m8n8k32 s4/u4 and m8n8k128 b1: A row-major, B column-major (packed, element 0 in the low bits), strides
    past the row; D = A·B + C (wrapped or saturated), or C + popc(a op b)."""
    k = 32 if atype != "b1" else 128
    shape = f"m8n8k{k}"
    bits = 1 if atype == "b1" else 4
    rng = np.random.default_rng(k + len(operation))
    warps, stride = 2, 2 * k
    def packed(matrix):  # rows of `matrix` (row-major, contiguous dimension last) packed with `stride`
        data = bytearray(8 * stride * bits // 8)
        for r, row in enumerate(matrix):
            for c, value in enumerate(row):
                position = (r * stride + c) * bits
                data[position // 8] |= (int(value) & ((1 << bits) - 1)) << (position % 8)
        return bytes(data)
    low, high = {"s4": (-8, 8), "u4": (0, 16), "b1": (0, 2)}[atype], {"s4": (-8, 8), "b1": (0, 2)}[btype]
    mats = [(rng.integers(*low, size=(8, k)), rng.integers(*high, size=(k, 8)),
             rng.integers(-(1 << 31), 1 << 31, size=(8, 8))) for _ in range(warps)]
    if operation == ".satfinite":
        mats[1] = (mats[1][0], mats[1][1], np.full((8, 8), (1 << 31) - 100))
    span = 8 * stride * bits // 8
    a_buffer = ctypes.create_string_buffer(b"".join(packed(a) for a, _, _ in mats))
    b_buffer = ctypes.create_string_buffer(b"".join(packed(b.T) for _, b, _ in mats))  # column-major
    c_buffer = ctypes.create_string_buffer(b"".join(np.asarray(c, dtype=np.int32).tobytes() for _, _, c in mats))
    d_buffer = ctypes.create_string_buffer(warps * 256)
    satfinite = operation if operation == ".satfinite" else ""
    popc = operation if "popc" in operation else ""
    kernel = HEADER.replace("8.0", "8.5") + f"""
.visible .entry wmma_test(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd)
{{
    .reg .b32 %a, %b, %c<2>, %d<2>, %warp, %thread;
    .reg .b64 %q<4>, %w;
    mov.u32 %thread, %tid.x;
    shr.u32 %warp, %thread, 5;
    ld.param.u64 %q0, [pa];
    mul.wide.u32 %w, %warp, {span};
    add.s64 %q0, %q0, %w;
    ld.param.u64 %q1, [pb];
    add.s64 %q1, %q1, %w;
    ld.param.u64 %q2, [pc];
    mul.wide.u32 %w, %warp, 256;
    add.s64 %q2, %q2, %w;
    ld.param.u64 %q3, [pd];
    add.s64 %q3, %q3, %w;
    wmma.load.a.sync.aligned.row.{shape}.global.{atype} {{%a}}, [%q0], {stride};
    wmma.load.b.sync.aligned.col.{shape}.global.{btype} {{%b}}, [%q1], {stride};
    wmma.load.c.sync.aligned.row.{shape}.global.s32 {{%c0, %c1}}, [%q2];
    wmma.mma{popc}.sync.aligned.row.col.{shape}.s32.{atype}.{btype}.s32{satfinite} {{%d0, %d1}}, {{%a}}, {{%b}},
        {{%c0, %c1}};
    wmma.store.d.sync.aligned.row.{shape}.global.s32 [%q3], {{%d0, %d1}};
    ret;
}}
"""
    program = amd_program(kernel, wave)
    program.launch("wmma_test", [a_buffer, b_buffer, c_buffer, d_buffer],
                   block=(32 * warps, 1, 1))
    got = np.frombuffer(d_buffer.raw, dtype=np.int32).reshape(warps, 8, 8)
    for warp, (a, b, c) in enumerate(mats):
        if atype == "b1":
            combine = (lambda x, y: x & y) if "and" in operation else (lambda x, y: x ^ y)
            exact = c.astype(object) + np.array([[sum(combine(int(a[i, kk]), int(b[kk, j])) for kk in range(k))
                                                   for j in range(8)] for i in range(8)], dtype=object)
        else:
            exact = a.astype(object) @ b.astype(object) + c.astype(object)
        if satfinite:
            want = np.array([[max(-(1 << 31), min((1 << 31) - 1, int(x))) for x in row] for row in exact])
        else:
            want = np.array([[(int(x) + (1 << 31)) % (1 << 32) - (1 << 31) for x in row] for row in exact])
        assert (got[warp] == want).all(), f"warp {warp}"


def test_each_form_is_one_subroutine_per_module():
    """CUTLASS kernels repeat one mma form hundreds of times: its emulation is one internal function per form,
    called at each use (64 MB of LLVM IR for xformers' sparse-GEMM module when expanded in place)."""
    instruction = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    text = mma_kernel(instruction, (4, 2, 4, 4), (32,) * 4, False)
    use = next(line for line in text.splitlines() if instruction in line)
    twice = text.replace(use, use + "\n" + use)
    for target in ("host", "gfx942"):
        options = Options(target=target, mma_numerics="sm90")  # gfx942's default, native, calls no subroutine
        (kernel,) = pipeline.lower(pipeline.passes(pipeline.parse(twice, options), options), options).kernels
        name = "fatkit.mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32.sm90"  # the numerics end the name
        definitions = [line for line in kernel.llvm_ir.splitlines() if line.startswith("define internal")
                       and f'@"{name}"(' in line]
        assert len(definitions) == 1 and "convergent" in definitions[0]
        assert kernel.llvm_ir.count(f'call {{i32, i32, i32, i32}} @"{name}"(') == 2
