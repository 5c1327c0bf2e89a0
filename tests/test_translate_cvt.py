"""cvt on the host target against Python: every rounding mode between integers, f16, bf16, f32, f64, the
packed f16x2/bf16x2/fp8 forms and tf32, with .ftz/.sat/.relu/.satfinite; plus an AMDGPU compile check.

Expected values come from `reference_round`, which rounds an exact `Fraction` to a binary format by scaling
it to an integer significand (no bit tricks), and from `struct`'s 'e' format and numpy for f16.
"""

from __future__ import annotations

import ctypes
import math
import random
import struct
from fractions import Fraction
from typing import Iterator

import numpy as np
import pytest

from fatkit.errors import FatkitError
from fatkit.translate.pipeline import Options, translate
from tests.amdrun import TARGETS
from tests.amdrun import program as amd_program
from tests.ptxrun import HEADER
from tests.ptxframes import entry


@pytest.fixture(params=TARGETS)
def target(request) -> str:
    return request.param

# ---------------------------------------------------------------------------------------- reference


class Fmt:
    """A binary format: exponent and mantissa bits, whether it has inf, its canonical NaN, its largest finite."""

    def __init__(self, exponent_bits, mantissa_bits, infinity=True, nan=None, max_bits=None, shift=0):
        self.e, self.m, self.infinity, self.shift = exponent_bits, mantissa_bits, infinity, shift
        self.bias = (1 << (exponent_bits - 1)) - 1
        self.width = 1 + exponent_bits + mantissa_bits
        self.nan = nan
        self.max_bits = max_bits if max_bits is not None else (((1 << exponent_bits) - 2) << mantissa_bits) | (
            (1 << mantissa_bits) - 1)

    def value(self, bits: int):
        """The value of `bits` (unshifted): a Fraction, ±inf or nan."""
        sign = -1 if bits >> (self.width - 1) & 1 else 1
        field, fraction = bits >> self.m & ((1 << self.e) - 1), bits & ((1 << self.m) - 1)
        magnitude = bits & ((1 << (self.width - 1)) - 1)
        if self.infinity and field == (1 << self.e) - 1:
            return sign * math.inf if fraction == 0 else math.nan
        if not self.infinity and self.nan is not None and magnitude == self.nan:
            return math.nan
        if field == 0:
            return sign * Fraction(fraction) * Fraction(2) ** (1 - self.bias - self.m)
        return sign * Fraction(fraction + (1 << self.m)) * Fraction(2) ** (field - self.bias - self.m)

    @property
    def max_value(self) -> Fraction:
        return self.value(self.max_bits)


F16, BF16, F32, F64 = Fmt(5, 10, nan=0x7FFF), Fmt(8, 7, nan=0x7FFF), Fmt(8, 23, nan=0x7FFFFFFF), Fmt(11, 52)
E4M3 = Fmt(4, 3, infinity=False, nan=0x7F, max_bits=0x7E)
E5M2 = Fmt(5, 2, nan=0x7F)
E2M1, E2M3, E3M2 = (Fmt(e, m, infinity=False, max_bits=bits) for e, m, bits in ((2, 1, 0x7), (2, 3, 0x1F), (3, 2, 0x1F)))
TF32 = Fmt(8, 10, nan=0x7FFFE000, shift=13)  # f32's canonical NaN with the low 13 bits clear


def reference_round(x, fmt: Fmt, mode: str, satfinite: bool = False) -> int:
    """Bits of `fmt` for the real `x` (a Fraction, or a float for ±inf/nan) rounded with `mode`."""
    if isinstance(x, float) and math.isnan(x):
        return fmt.max_bits if fmt.nan is None else fmt.nan  # formats without NaN: +max finite
    negative = math.copysign(1.0, x) < 0 if isinstance(x, float) else x < 0
    sign = int(negative) << (fmt.width - 1)
    if isinstance(x, float) and math.isinf(x):
        if satfinite or not fmt.infinity:
            magnitude = fmt.max_bits if satfinite else fmt.nan
        else:
            magnitude = ((1 << fmt.e) - 1) << fmt.m
        return (sign | magnitude) << fmt.shift
    a = abs(Fraction(x))
    if a == 0:
        return sign << fmt.shift
    exponent = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** exponent > a:
        exponent -= 1
    exponent = max(exponent, 1 - fmt.bias)
    scaled = a / Fraction(2) ** (exponent - fmt.m)
    n, rest = divmod(scaled.numerator, scaled.denominator)
    rest = Fraction(rest, scaled.denominator)
    up = {"rn": rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2 == 1),
          "rna": rest >= Fraction(1, 2), "rz": False,
          "rp": rest > 0 and not negative, "rm": rest > 0 and negative}[mode]
    n += up
    rounded = n * Fraction(2) ** (exponent - fmt.m)
    if rounded > fmt.max_value:
        toward_infinity = {"rn": True, "rna": True, "rz": False, "rp": not negative, "rm": negative}[mode]
        if satfinite:
            magnitude = fmt.max_bits
        elif not fmt.infinity:
            magnitude = fmt.nan
        else:
            magnitude = ((1 << fmt.e) - 1) << fmt.m if toward_infinity else fmt.max_bits
        return (sign | magnitude) << fmt.shift
    if n >= 1 << (fmt.m + 1):
        n, exponent = n >> 1, exponent + 1
    field = exponent + fmt.bias if n >= 1 << fmt.m else 0
    return (sign | field << fmt.m | (n & ((1 << fmt.m) - 1))) << fmt.shift


def is_nan(bits: int, fmt: Fmt) -> bool:
    value = fmt.value(bits >> fmt.shift)
    return isinstance(value, float) and math.isnan(value)


def f16_bits(x: float) -> int:
    return struct.unpack("<H", struct.pack("<e", x))[0]


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f64_bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def f32_value(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def f64_value(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def test_reference_agrees_with_struct_and_numpy():
    """The reference itself, against the platform's one-step f64 → f16 rounding (nearest even)."""
    rng = random.Random(1)
    for _ in range(3000):
        x = f64_value(rng.getrandbits(64)) if rng.random() < 0.3 else rng.uniform(-70000, 70000) * 2.0 ** rng.randint(-30, 0)
        if math.isnan(x):
            continue
        with np.errstate(over="ignore"):
            expected = int(np.array([x]).astype(np.float16).view(np.uint16)[0])
        assert reference_round(x, F16, "rn") == expected, x
        if abs(x) < 65504:
            assert reference_round(Fraction(x), F16, "rn") == f16_bits(x)


# ---------------------------------------------------------------------------------------- kernel


def table_kernel(name: str, ops: list[str]) -> str:
    """Thread i reads three 64-bit inputs a, b, c (also as their low 32 and 16 bits: %r4..%r6, %h1..%h3,
    %f1..%f3, %fd1..%fd3) and writes one 64-bit word per op; each op leaves its result in %rd10, %r10,
    %h10 or %p1."""
    body = []
    for k, op in enumerate(ops):
        body.append(op)
        if "%rd10," in op:
            pass
        elif "%r10," in op:
            body.append("cvt.u64.u32 %rd10, %r10;")
        elif "%h10," in op:
            body.append("cvt.u64.u16 %rd10, %h10;")
        elif "%p1" in op:
            body.append("selp.u64 %rd10, 1, 0, %p1;")
        else:
            raise ValueError(op)
        body.append(f"st.global.u64 [%rd9+{8 * k}], %rd10;")
    return HEADER + "\n" + entry(name, "u64 pin, u64 pout",
                                 ".pred %p<4>, .b16 %h<16>, .f16 %x<4>, .b32 %r<16>, .f16x2 %y<4>, .f32 %f<8>, .b64 %rd<16>, .f64 %fd<8>", f"""
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.u32 %r3, %r1, %r2, %r3;
    mul.wide.u32 %rd3, %r3, 24;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u64 %rd5, [%rd4];
    ld.global.u64 %rd6, [%rd4+8];
    ld.global.u64 %rd7, [%rd4+16];
    cvt.u32.u64 %r4, %rd5;
    cvt.u32.u64 %r5, %rd6;
    cvt.u32.u64 %r6, %rd7;
    cvt.u16.u32 %h1, %r4;
    cvt.u16.u32 %h2, %r5;
    cvt.u16.u32 %h3, %r6;
    mov.b32 %f1, %r4;
    mov.b32 %f2, %r5;
    mov.b32 %f3, %r6;
    mov.b64 %fd1, %rd5;
    mov.b64 %fd2, %rd6;
    mov.b64 %fd3, %rd7;
    mul.wide.u32 %rd8, %r3, {8 * len(ops)};
    add.s64 %rd9, %rd2, %rd8;
    {chr(10).join(body)}
    ret;
""")


def run(name: str, ops: list[str], a: list[int], b: list[int] | None = None, c: list[int] | None = None,
        target: str = "host"):
    """Results of `ops` per input row on `target` (the host JIT, or the AMD code object on fatkit.emulate):
    out[i][k]."""
    n = len(a)
    b, c = b or [0] * n, c or [0] * n
    program = amd_program(table_kernel(name, ops), target)
    inputs = (ctypes.c_uint64 * (3 * n))()
    for i in range(n):
        inputs[3 * i:3 * i + 3] = [a[i] & (2**64 - 1), b[i] & (2**64 - 1), c[i] & (2**64 - 1)]
    out = (ctypes.c_uint64 * (n * len(ops)))()
    block = min(n, 256)
    assert n % block == 0
    program.launch(name, [inputs, out], grid=(n // block, 1, 1), block=(block, 1, 1))
    return [list(out[i * len(ops):(i + 1) * len(ops)]) for i in range(n)]


def pad(values: list[int], multiple: int = 256) -> list[int]:
    return values + [values[0]] * (-len(values) % multiple)


# ---------------------------------------------------------------------------------------- f16/bf16 ↔ f32 exhaustive


ALL16 = list(range(65536))
# The AMD targets (fatkit.emulate) take every 7th pattern and all of the first and last 256 (zeros,
# subnormals, the largest values, infinities and NaNs of both signs sit there)
AMD16 = sorted(set(range(0, 65536, 7)) | set(range(256)) | set(range(0x7B00, 0x8100)) | set(range(65280, 65536)))
AMD16 += [AMD16[0]] * (-len(AMD16) % 256)


def test_f16_and_bf16_to_f32_and_f64_exhaustive(target):
    ops = ["cvt.f32.f16 %f4, %h1;\nmov.b32 %r10, %f4;",
           "cvt.f32.bf16 %f4, %h1;\nmov.b32 %r10, %f4;",
           "cvt.f64.f16 %fd4, %h1;\nmov.b64 %rd10, %fd4;",
           "cvt.rn.f16.f32 %h4, %f1;\ncvt.f32.f16 %f4, %h4;\ncvt.rn.f16.f32 %h10, %f4;"]  # f16 round trip
    # thread i converts the f16/bf16 pattern i, and also its f32 widening back and forth
    patterns = ALL16 if target == "host" else AMD16
    rows = run("widen", ops, patterns, patterns, patterns, target=target)
    for h, (f16_to_f32, bf16_to_f32, f16_to_f64, _) in zip(patterns, rows):
        value = struct.unpack("<e", struct.pack("<H", h))[0]
        if math.isnan(value):  # f32: the canonical NaN; f64: sign and payload kept, made quiet
            assert f16_to_f32 == 0x7FFFFFFF, hex(h)
            assert f16_to_f64 == (h & 0x8000) << 48 | 0x7FF8000000000000 | (h & 0x3FF) << 42, hex(h)
        else:
            assert f16_to_f32 == f32_bits(value), hex(h)
            assert f16_to_f64 == f64_bits(value), hex(h)
        assert bf16_to_f32 == h << 16  # exactly the upper half, NaN payloads included
    # the f16 round trip from every f32 pattern whose low 16 bits are h is checked below; here
    # the round trip of f16 → f32 → f16 is the identity (NaN: canonical)
    rows = run("roundtrip", ["cvt.f32.f16 %f4, %h1;\ncvt.rn.f16.f32 %h10, %f4;"], patterns, target=target)
    for h, (back,) in zip(patterns, rows):
        assert back == (0x7FFF if is_nan(h, F16) else h), hex(h)


def _boundaries(fmt: Fmt, step: int) -> Iterator[float]:
    """f32 values at and around the upper rounding boundary (midpoint ± 1 f32 ulp) of every `step`-th
    `fmt` value, of each of the smallest and of the largest 40."""
    top = fmt.max_bits + 1
    for h in sorted(set(range(0, top, step)) | set(range(40)) | set(range(top - 40, top))):
        low, high = fmt.value(h), fmt.value(h + 1)
        if not isinstance(high, Fraction):
            high = low + (low - fmt.value(h - 1))  # the midpoint to the first value past max finite
        middle = f32_value(f32_bits(float((low + high) / 2)))
        yield from [float(low), middle, math.nextafter(middle, math.inf), math.nextafter(middle, -math.inf)]


@pytest.mark.parametrize("name, fmt, step", [("f16", F16, 41), ("bf16", BF16, 53)])
def test_f32_to_half_every_mode(name, fmt, step, target):
    """f32 → f16/bf16 with .rn/.rz/.rm/.rp, .relu and .satfinite at every rounding boundary (both signs),
    overflow, subnormals, ±inf and NaN."""
    specials = [math.inf, -math.inf, math.nan, 0.0, -0.0, 3.4028234663852886e38, 1e-45, -1e-45]
    values = list(_boundaries(fmt, step))
    values = values + [-v for v in values] + specials
    a = pad([f32_bits(v) for v in values])
    modes = ["rn", "rz", "rm", "rp"]
    ops = [f"cvt.{m}.{name}.f32 %h10, %f1;" for m in modes]
    ops += [f"cvt.rn.relu.{name}.f32 %h10, %f1;", f"cvt.rz.satfinite.{name}.f32 %h10, %f1;",
            f"cvt.rn.relu.satfinite.{name}.f32 %h10, %f1;"]
    rows = run(f"narrow_{name}", ops, a, target=target)
    for bits, row in zip(a, rows):
        x = f32_value(bits)
        expected = [reference_round(x, fmt, m) for m in modes]
        expected.append(_relu(reference_round(x, fmt, "rn"), fmt))
        expected.append(reference_round(x, fmt, "rz", satfinite=True))
        expected.append(_relu(reference_round(x, fmt, "rn", satfinite=True), fmt))
        assert row == expected, (x, [hex(r) for r in row], [hex(e) for e in expected])


def _relu(bits: int, fmt: Fmt) -> int:
    if fmt.nan is not None and is_nan(bits, fmt):
        return fmt.nan
    return 0 if bits >> (fmt.width - 1 + fmt.shift) else bits


def random_f64(rng: random.Random, low: int, high: int) -> float:
    """A random f64 with an exponent in [low, high], random sign and significand."""
    return rng.choice((-1, 1)) * (1 + rng.getrandbits(52) / 2**52) * 2.0 ** rng.randint(low, high)


def test_f64_to_narrow_every_mode(target):
    rng = random.Random(7)
    values = [random_f64(rng, -160, 140) for _ in range(700)] + [random_f64(rng, -30, 20) for _ in range(300)]
    values += [math.inf, -math.inf, math.nan, 0.0, -0.0, 5e-324, 1.7976931348623157e308, 65520.0, 65519.99,
               2.0**-25, 2.0**-25 * 1.0000001, 2.0**-149 / 2, 3.4028235677973366e38]
    a = pad([f64_bits(v) for v in values] + [0xFFF0000000000123, 0x7FF0000000000001])
    ops, expectations = [], []
    for name, fmt in (("f16", F16), ("bf16", BF16), ("f32", F32)):
        register = "%h10" if fmt.width == 16 else "%r10"
        for mode in ("rn", "rz", "rm", "rp"):
            if fmt is F32:
                ops.append(f"cvt.{mode}.f32.f64 %f4, %fd1;\nmov.b32 %r10, %f4;")
            else:
                ops.append(f"cvt.{mode}.{name}.f64 {register}, %fd1;")
            expectations.append((fmt, mode))
    rows = run("from_f64", ops, a, target=target)
    for bits, row in zip(a, rows):
        x = f64_value(bits)
        for (fmt, mode), got in zip(expectations, row):
            if math.isnan(x):  # from f64: the sign and a quiet NaN without payload
                quiet = ((1 << fmt.e) - 1) << fmt.m | 1 << (fmt.m - 1)
                assert got == (bits >> 63) << (fmt.width - 1) | quiet, (hex(bits), hex(got))
            else:
                assert got == reference_round(x, fmt, mode), (x, mode, hex(got))


INTEGER_TYPES = {"u8": (8, False), "s8": (8, True), "u16": (16, False), "s16": (16, True),
                 "u32": (32, False), "s32": (32, True), "u64": (64, False), "s64": (64, True)}


def _integer_inputs(rng: random.Random) -> list[int]:
    values = [0, 1, -1, 2**24 + 1, 2**53 + 1, 2**63 - 1, -2**63, 2**64 - 1, 65519, 65520, 65535, 2049, 2051,
              -2049, 2**31 - 1, -2**31, 0x7FFFFF80, 0x7FFFFFC0]
    values += [rng.getrandbits(rng.choice((8, 16, 24, 32, 40, 64))) * rng.choice((1, -1)) for _ in range(230)]
    return pad(values)


def _as_integer(raw: int, type_name: str) -> int:
    bits, is_signed = INTEGER_TYPES[type_name]
    value = raw & ((1 << bits) - 1)
    return value - (1 << bits) if is_signed and value >> (bits - 1) else value


def test_integer_to_float_every_mode(target):
    rng = random.Random(3)
    a = _integer_inputs(rng)
    ops, expectations = [], []
    for type_name in ("u8", "s16", "u32", "s32", "u64", "s64"):
        bits, _ = INTEGER_TYPES[type_name]
        source = {8: "%h1", 16: "%h1", 32: "%r4", 64: "%rd5"}[bits]
        for name, fmt in (("f16", F16), ("bf16", BF16), ("f32", F32), ("f64", F64)):
            for mode in ("rn", "rz", "rm", "rp"):
                if fmt is F64:
                    ops.append(f"cvt.{mode}.f64.{type_name} %fd4, {source};\nmov.b64 %rd10, %fd4;")
                elif fmt is F32:
                    ops.append(f"cvt.{mode}.f32.{type_name} %f4, {source};\nmov.b32 %r10, %f4;")
                else:
                    ops.append(f"cvt.{mode}.{name}.{type_name} %h10, {source};")
                expectations.append((type_name, fmt, mode))
    rows = run("from_int", ops, a, target=target)
    for raw, row in zip(a, rows):
        for (type_name, fmt, mode), got in zip(expectations, row):
            value = _as_integer(raw, type_name)
            assert got == reference_round(Fraction(value), fmt, mode), (type_name, value, mode, hex(got))


def _float_to_int(value, type_name: str, mode: str, source: str) -> int:
    bits, is_signed = INTEGER_TYPES[type_name]
    if isinstance(value, float) and math.isnan(value):  # 0, but 1 << (bits - 1) from f64 or into 64 bits
        return 1 << (bits - 1) if source == "f64" or bits == 64 else 0
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if is_signed else (0, (1 << bits) - 1)
    if isinstance(value, float):  # ±inf
        return (high if value > 0 else low) & ((1 << bits) - 1)
    integral = {"rzi": math.trunc, "rmi": math.floor, "rpi": math.ceil, "rni": round}[mode](value)
    return min(max(integral, low), high) & ((1 << bits) - 1)


def test_float_to_integer_every_mode(target):
    rng = random.Random(5)
    halves = [rng.getrandbits(16) for _ in range(240)] + [0x7C00, 0xFC00, 0x7E00, 0x3800, 0x3E00, 0xB800,
                                                           0x4100, 0xC100, 0x7BFF, 0x0001, 0x8001, 0x3C00]
    doubles = [random_f64(rng, -3, 70) for _ in range(240)] + [2.5, -2.5, 0.5, -0.5, 1.5, math.nan,
                                                               math.inf, -math.inf, 2.0**63, -2.0**63 - 2048,
                                                               2.0**64, 255.5, -128.5, 4294967295.5]
    a = pad([h | h << 16 for h in halves])
    b = pad([f64_bits(d) for d in doubles])
    c = pad([f32_bits(f32_value(f32_bits(d))) for d in doubles])  # the same values as f32
    ops, expectations = [], []
    for type_name, (bits, _) in INTEGER_TYPES.items():
        destination = {8: "%h10", 16: "%h10", 32: "%r10", 64: "%rd10"}[bits]
        for mode in ("rni", "rzi", "rmi", "rpi"):
            for source, register in (("f16", "%h1"), ("bf16", "%h1"), ("f64", "%fd2"), ("f32", "%f3")):
                ops.append(f"cvt.{mode}.{type_name}.{source} {destination}, {register};")
                expectations.append((type_name, mode, source))
    rows = run("to_int", ops, a, b, c, target=target)
    for ra, rb, rc, row in zip(a, b, c, rows):
        inputs = {"f16": F16.value(ra & 0xFFFF), "bf16": BF16.value(ra & 0xFFFF),
                  "f64": f64_value(rb), "f32": f32_value(rc & 0xFFFFFFFF)}
        for (type_name, mode, source), got in zip(expectations, row):
            value = inputs[source]
            value = Fraction(value) if isinstance(value, float) and math.isfinite(value) else value
            bits = INTEGER_TYPES[type_name][0]
            assert got & ((1 << bits) - 1) == _float_to_int(value, type_name, mode, source), (type_name, mode, source, value)


def test_integer_saturation_and_integral_rounding(target):
    rng = random.Random(11)
    a = _integer_inputs(rng)
    ops = ["cvt.sat.s8.s32 %r10, %r4;", "cvt.sat.u8.s32 %r10, %r4;", "cvt.sat.u16.u64 %h10, %rd5;",
           "cvt.sat.s32.u64 %r10, %rd5;", "cvt.sat.u32.s64 %r10, %rd5;", "cvt.sat.s16.s64 %h10, %rd5;",
           "cvt.u8.s32 %r10, %r4;", "cvt.s64.s16 %rd10, %h1;"]
    rows = run("int_sat", ops, a, target=target)

    def clamp(value, bits, is_signed):
        low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if is_signed else (0, (1 << bits) - 1)
        return min(max(value, low), high)
    for raw, row in zip(a, rows):
        s32, u64, s64, s16 = (_as_integer(raw, t) for t in ("s32", "u64", "s64", "s16"))
        expected = [clamp(s32, 8, True) & 0xFFFFFFFF, clamp(s32, 8, False), clamp(u64, 16, False),
                    clamp(u64, 32, True) & 0xFFFFFFFF, clamp(s64, 32, False), clamp(s64, 16, True) & 0xFFFF,
                    raw & 0xFF, s16 & (2**64 - 1)]
        assert row == expected, raw


def test_float_to_float_modifiers(target):
    """.ftz and .sat on f32, integral rounding within a format, f16 ↔ bf16 with every mode."""
    rng = random.Random(13)
    singles = [f32_value(rng.getrandbits(32)) for _ in range(150)] + [1e-40, -1e-40, 1.5, -0.5, 0.9999999,
                                                                       1.0000001, 2.5, -2.5, math.nan]
    halves = [rng.getrandbits(16) for _ in range(150)] + [0x0001, 0x03FF, 0x8200, 0x7BFF, 0x3E00, 0xBE00]
    a = pad([f32_bits(x) for x in singles])
    b = pad(halves[:len(a)] + [0x3C00] * (len(a) - len(halves)))
    ops = ["cvt.ftz.f32.f32 %f4, %f1;\nmov.b32 %r10, %f4;",
           "cvt.sat.f32.f32 %f4, %f1;\nmov.b32 %r10, %f4;",
           "cvt.rni.ftz.f32.f32 %f4, %f1;\nmov.b32 %r10, %f4;",
           "cvt.ftz.f64.f32 %fd4, %f1;\nmov.b64 %rd10, %fd4;",
           "cvt.rn.sat.f16.f32 %h10, %f1;",
           "cvt.rni.f16.f16 %h10, %h2;", "cvt.rmi.bf16.bf16 %h10, %h2;"]
    ops += [f"cvt.{m}.bf16.f16 %h10, %h2;" for m in ("rn", "rz", "rm", "rp")]
    ops += [f"cvt.{m}.f16.bf16 %h10, %h2;" for m in ("rn", "rz", "rm", "rp")]
    rows = run("float_float", ops, a, b, target=target)
    for ra, rb, row in zip(a, b, rows):
        x, h = f32_value(ra), rb & 0xFFFF
        subnormal = x != 0 and abs(x) < 2.0**-126
        flushed = math.copysign(0.0, x) if subnormal else x
        expected = [  # NaN: the canonical f32 NaN; into f64 (.ftz) that NaN widened
            f32_bits(flushed) if not math.isnan(x) else 0x7FFFFFFF,
            f32_bits(min(max(x, 0.0), 1.0) + 0.0) if not math.isnan(x) else 0,  # -0 saturates to +0
            f32_bits(float(round(Fraction(flushed))) if math.isfinite(x) else x) if not math.isnan(x) else 0x7FFFFFFF,
            f64_bits(flushed) if not math.isnan(x) else 0x7FFFFFFFE0000000,  # .ftz: an H200's NaN
            _sat16(x),
            _integral(F16.value(h), F16, round), _integral(BF16.value(h), BF16, math.floor)]
        expected += [_convert(F16.value(h), BF16, m) for m in ("rn", "rz", "rm", "rp")]
        expected += [_convert(BF16.value(h), F16, m) for m in ("rn", "rz", "rm", "rp")]
        for k, (got, want) in enumerate(zip(row, expected)):
            if k == 2 and math.isfinite(x) and round(Fraction(flushed)) == 0 and math.copysign(1.0, flushed) < 0:
                want = f32_bits(-0.0)  # rounding keeps the sign of a negative value that rounds to zero
            assert got == want, (k, x, hex(h), hex(got), hex(want))


def _sat16(x: float) -> int:
    if math.isnan(x):
        return 0
    return reference_round(min(max(x, 0.0), 1.0) + 0.0, F16, "rn")


def _integral(value, fmt: Fmt, function) -> int:
    if isinstance(value, float):  # NaN, ±inf pass through
        return fmt.nan if math.isnan(value) else reference_round(value, fmt, "rn")
    integral = function(value)
    if integral == 0 and value < 0:
        return 1 << (fmt.width - 1)
    return reference_round(Fraction(integral), fmt, "rn")


def _convert(value, fmt: Fmt, mode: str) -> int:
    return reference_round(value, fmt, mode)


# ---------------------------------------------------------------------------------------- packed, fp8, tf32


def test_pack_f32_pairs_to_f16x2_bf16x2(target):
    rng = random.Random(17)
    singles = [f32_value(rng.getrandbits(32)) for _ in range(200)] + [65519.0, 65520.0, -1e30, math.inf, 1e-8]
    a = pad([f32_bits(x) for x in singles])
    b = pad([f32_bits(x) for x in reversed(singles)])
    ops = ["cvt.rn.f16x2.f32 %r10, %f1, %f2;", "cvt.rz.relu.f16x2.f32 %r10, %f1, %f2;",
           "cvt.rn.bf16x2.f32 %r10, %f1, %f2;", "cvt.rz.satfinite.bf16x2.f32 %r10, %f1, %f2;",
           "cvt.rn.f16x2.f32 %y1, %f1, %f2;\nmov.b32 %r10, %y1;"]
    rows = run("pack", ops, a, b, target=target)
    for ra, rb, row in zip(a, b, rows):
        x, y = (f32_value(v & 0xFFFFFFFF) for v in (ra, rb))
        def pair(fmt, mode, satfinite=False, relu=False):
            halves = []
            for v in (x, y):
                bits = reference_round(v, fmt, mode, satfinite)
                halves.append(_relu(bits, fmt) if relu else bits)
            return halves[0] << 16 | halves[1]  # a in the upper half
        expected = [pair(F16, "rn"), pair(F16, "rz", relu=True), pair(BF16, "rn"), pair(BF16, "rz", True),
                    pair(F16, "rn")]
        assert row == expected, (x, y)


def test_fp8_from_f32_and_f16x2_and_back(target):
    rng = random.Random(19)
    singles = [rng.uniform(-600, 600) * 2.0 ** rng.randint(-14, 6) for _ in range(200)]
    singles += [448.0, 464.0, 480.0, 57344.0, 61440.0, 2.0**-10, 2.0**-9 * 1.5, math.inf, -math.inf, math.nan,
                2.0**-17, 2.0**-16 * 0.75, -0.0]
    singles = [f32_value(f32_bits(v)) for v in singles]
    a = pad([f32_bits(v) for v in singles])
    b = pad([f32_bits(v) for v in reversed(singles)])
    ops = ["cvt.rn.satfinite.e4m3x2.f32 %h10, %f1, %f2;", "cvt.rn.satfinite.e5m2x2.f32 %h10, %f1, %f2;",
           "cvt.rn.satfinite.relu.e4m3x2.f32 %h10, %f1, %f2;",
           # f16x2 source: the pair (f16(a) upper, f16(b) lower), exact for these inputs where they fit
           "cvt.rn.f16x2.f32 %r11, %f1, %f2;\ncvt.rn.satfinite.e5m2x2.f16x2 %h10, %r11;",
           "cvt.rn.f16x2.f32 %r11, %f1, %f2;\ncvt.rn.satfinite.e4m3x2.f16x2 %h10, %r11;"]
    rows = run("fp8_pack", ops, a, b, target=target)
    for ra, rb, row in zip(a, b, rows):
        x, y = (f32_value(v & 0xFFFFFFFF) for v in (ra, rb))
        def pair(fmt, values, relu=False):
            out = []
            for v in values:
                bits = reference_round(v, fmt, "rn", satfinite=True)
                out.append(_relu(bits, fmt) if relu else bits)
            return out[0] << 8 | out[1]
        halves = [struct.unpack("<e", struct.pack("<H", reference_round(v, F16, "rn")))[0] for v in (x, y)]
        expected = [pair(E4M3, (x, y)), pair(E5M2, (x, y)), pair(E4M3, (x, y), relu=True),
                    pair(E5M2, halves), pair(E4M3, halves)]
        assert row == expected, (x, y, [hex(r) for r in row], [hex(e) for e in expected])



def test_fp6_fp4_pairs_of_sm100(target):
    """e2m3x2/e3m2x2/e2m1x2 from f32 (a NaN gives +max finite) and back to f16x2, every bit pattern."""
    rng = random.Random(21)
    singles = [rng.uniform(-40, 40) * 2.0 ** rng.randint(-6, 0) for _ in range(230)]
    singles += [6.0, 7.0, 7.5, 7.75, 8.0, 28.0, 30.0, 32.0, 0.25, 0.125, 0.0625 * 1.5, -0.0, math.inf, -math.inf,
                math.nan, 0.75, 1.25, 2.5, 3.5, 5.0, -5.0, 0.3, -0.3]
    singles = [f32_value(f32_bits(v)) for v in singles]
    a = pad([f32_bits(v) for v in singles])
    b = pad([f32_bits(v) for v in reversed(singles)])
    ops = ["cvt.rn.satfinite.e2m3x2.f32 %h10, %f1, %f2;", "cvt.rn.satfinite.relu.e3m2x2.f32 %h10, %f1, %f2;",
           "cvt.rn.satfinite.e2m1x2.f32 %h10, %f1, %f2;"]
    rows = run("fp6_pack", ops, a, b, target=target)
    for ra, rb, row in zip(a, b, rows):
        x, y = (f32_value(v & 0xFFFFFFFF) for v in (ra, rb))
        def pair(fmt, lane, relu=False):
            out = [reference_round(v, fmt, "rn", satfinite=True) for v in (x, y)]
            out = [_relu(v, fmt) if relu else v for v in out]
            return out[0] << lane | out[1]
        assert row == [pair(E2M3, 8), pair(E3M2, 8, relu=True), pair(E2M1, 4)], (x, y, [hex(r) for r in row])
    patterns = [i << 8 | (63 - i) for i in range(64)] + [i << 8 | i for i in range(64)] * 3
    rows = run("fp6_unpack", ["cvt.rn.f16x2.e2m3x2 %r10, %h1;", "cvt.rn.relu.f16x2.e3m2x2 %r10, %h1;",
                              "cvt.rn.f16x2.e2m1x2 %r10, %h1;"], patterns, target=target)
    for p, row in zip(patterns, rows):
        def unpack(fmt, lane, relu=False):
            out = []
            for element in (p >> lane & ((1 << fmt.width) - 1), p & ((1 << fmt.width) - 1)):
                bits = reference_round(fmt.value(element), F16, "rn")
                if element >> (fmt.width - 1):  # the sign of a negative zero too
                    bits |= 0x8000
                out.append(_relu(bits, F16) if relu else bits)
            return out[0] << 16 | out[1]
        assert row == [unpack(E2M3, 8), unpack(E3M2, 8, relu=True), unpack(E2M1, 4)], hex(p)


def test_fp8_pairs_to_f16x2(target):
    """Every byte in both positions (exact; NaN → canonical f16 NaN)."""
    pairs = [i << 8 | (255 - i) for i in range(256)]
    rows = run("fp8_unpack", ["cvt.rn.f16x2.e4m3x2 %r10, %h1;", "cvt.rn.f16x2.e5m2x2 %r10, %h1;",
                              "cvt.rn.relu.f16x2.e4m3x2 %r10, %h1;"], pairs, target=target)
    for p, row in zip(pairs, rows):
        def unpack(fmt, relu=False):
            out = []
            for byte in (p >> 8, p & 0xFF):
                bits = reference_round(fmt.value(byte), F16, "rn") | (byte & 0x80) << 8  # -0 keeps its sign
                bits = F16.nan if is_nan(byte, fmt) else bits
                out.append(_relu(bits, F16) if relu else bits)
            return out[0] << 16 | out[1]
        assert row == [unpack(E4M3), unpack(E5M2), unpack(E4M3, relu=True)], hex(p)


def test_tf32(target):
    rng = random.Random(23)
    singles = [f32_value(rng.getrandbits(32)) for _ in range(220)] + [1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11,
                                                                       3.4028234663852886e38, -math.inf, 1e-45]
    a = pad([f32_bits(v) for v in singles])
    ops = ["cvt.rna.tf32.f32 %r10, %f1;", "cvt.rna.satfinite.tf32.f32 %r10, %f1;", "cvt.rn.tf32.f32 %r10, %f1;",
           "cvt.rz.relu.tf32.f32 %r10, %f1;", "cvt.rn.satfinite.tf32.f32 %r10, %f1;"]
    rows = run("tf32", ops, a, target=target)
    for ra, row in zip(a, rows):
        x = f32_value(ra & 0xFFFFFFFF)
        source = x
        rna = (ra & 0xFFFFE000) if math.isnan(x) else reference_round(source, TF32, "rna")  # an H200's NaN
        # .satfinite: an H200 takes one tf32 unit off that NaN, as off +inf (measured, docs/numerics.md)
        rna_satfinite = (ra & 0xFFFFE000) - 0x2000 if math.isnan(x) else reference_round(source, TF32, "rna", True)
        expected = [rna, rna_satfinite,
                    reference_round(source, TF32, "rn"), _relu(reference_round(source, TF32, "rz"), TF32),
                    reference_round(source, TF32, "rn", True)]
        assert row == expected, (x, [hex(r) for r in row], [hex(e) for e in expected])


def test_unsupported_forms_fail_precisely():
    for op, why in [("cvt.rz.satfinite.ue8m0x2.f32 %h10, %f1, %f2;", "ue8m0x2"),
                    ("cvt.rs.f16x2.f32 %r10, %f1, %f2, %r4;", ".rs"),
                    ("cvt.rn.e4m3x2.f32 %h10, %f1, %f2;", ".rn.satfinite"),
                    ("cvt.rzi.ftz.s32.f64 %r10, %fd1;", ".ftz"),
                    ("cvt.rm.relu.f16.f32 %h10, %f1;", ".rn/.rz")]:
        with pytest.raises(FatkitError, match=why.replace(".", r"\.")):
            translate(table_kernel("bad", [op]), Options(target="host"))


# ---------------------------------------------------------------------------------------- AMDGPU


CVT_FORMS = [
    "cvt.f32.f16 %f4, %h1;\nmov.b32 %r10, %f4;", "cvt.rn.f16.f32 %h10, %f1;", "cvt.rz.f16.f32 %h10, %f1;",
    "cvt.rn.bf16.f32 %h10, %f1;", "cvt.rm.bf16.f64 %h10, %fd1;", "cvt.rp.f16.s64 %h10, %rd5;",
    "cvt.rzi.s8.f16 %h10, %h1;", "cvt.rni.u64.bf16 %rd10, %h1;", "cvt.rn.f16x2.f32 %r10, %f1, %f2;",
    "cvt.rn.satfinite.e4m3x2.f32 %h10, %f1, %f2;", "cvt.rn.f16x2.e5m2x2 %r10, %h1;",
    "cvt.rn.satfinite.e2m1x2.f32 %h10, %f1, %f2;", "cvt.rn.f16x2.e3m2x2 %r10, %h1;",
    "cvt.rna.tf32.f32 %r10, %f1;", "cvt.rn.relu.satfinite.bf16x2.f32 %r10, %f1, %f2;",
    "cvt.sat.u8.s32 %r10, %r4;", "cvt.rz.f32.f64 %f4, %fd1;\nmov.b32 %r10, %f4;",
    "cvt.rn.satfinite.e5m2x2.f16x2 %h10, %r4;", "cvt.f64.bf16 %fd4, %h1;\nmov.b64 %rd10, %fd4;",
]


@pytest.mark.parametrize("target", ["gfx942", "gfx1100"])
def test_cvt_forms_compile_for_amdgpu(target):
    result = translate(table_kernel("cvt_forms", CVT_FORMS), Options(target=target))
    assert result.product
