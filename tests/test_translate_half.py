"""Half-precision arithmetic (f16, bf16, f16x2, bf16x2) on the host target against exact Python references:
add/sub/mul/fma with .ftz/.sat/.relu, neg/abs, min/max with .NaN/.xorsign.abs, setp/set, ex2/tanh .approx;
plus an AMDGPU compile check of every form.

Results are computed exactly with `Fraction` and rounded once by `reference_round` (tests/test_translate_cvt);
zero signs and infinities/NaN come from IEEE double arithmetic, which is exact for these operands.
"""

from __future__ import annotations

import math
import operator
import random
from fractions import Fraction

import pytest

from fatkit.translate.pipeline import Options, translate
from tests.amdrun import TARGETS
from tests.test_translate_cvt import BF16, F16, Fmt, is_nan, reference_round, run, table_kernel


@pytest.fixture(params=TARGETS)
def target(request) -> str:
    return request.param

FORMATS = {"f16": F16, "bf16": BF16}


def value(bits: int, fmt: Fmt) -> float:
    """The value of 16-bit `bits` as a Python float (exact), signed zeros kept."""
    v = fmt.value(bits)
    if isinstance(v, Fraction):
        return -0.0 if v == 0 and bits >> 15 else float(v)
    return v


def flush(bits: int, fmt: Fmt) -> int:
    return bits & 0x8000 if bits & 0x7FFF and not bits & (((1 << fmt.e) - 1) << fmt.m) else bits


def rounded(result, fmt: Fmt) -> int:
    """`result`: a Fraction, or a float for ±0, ±inf and NaN."""
    return reference_round(result, fmt, "rn")


def exact_binary(op, x: float, y: float):
    if not (math.isfinite(x) and math.isfinite(y)):
        return op(x, y)
    result = op(Fraction(x), Fraction(y))
    return op(x, y) if result == 0 else result  # the zero's sign as IEEE gives it


def exact_fma(x: float, y: float, z: float):
    if not all(math.isfinite(v) for v in (x, y, z)):
        return x * y + z
    result = Fraction(x) * Fraction(y) + Fraction(z)
    if result != 0:
        return result
    product_zero = x == 0 or y == 0
    negative = product_zero and z == 0 and math.copysign(1, x) * math.copysign(1, y) < 0 and math.copysign(1, z) < 0
    return -0.0 if negative else 0.0


def saturate(bits: int, fmt: Fmt) -> int:
    v = fmt.value(bits)
    if isinstance(v, float) and math.isnan(v) or bits & 0x8000:
        return 0
    return min(bits, 0x3C00 if fmt is F16 else 0x3F80)


def relu(bits: int, fmt: Fmt) -> int:
    if is_nan(bits, fmt):
        return fmt.nan
    return 0 if bits & 0x8000 else bits


def same(got: int, want: int, fmt: Fmt) -> bool:
    """Equal bits; any NaN matches a NaN (arithmetic NaN payloads are not specified)."""
    return (is_nan(got, fmt) and is_nan(want, fmt)) or got == want


def half_inputs(rng: random.Random, fmt: Fmt, n: int) -> list[int]:
    specials = [0x0000, 0x8000, 0x0001, 0x8001, 0x3C00 if fmt is F16 else 0x3F80, fmt.max_bits,
                fmt.max_bits | 0x8000, 0x7C00 if fmt is F16 else 0x7F80, 0xFC00 if fmt is F16 else 0xFF80,
                0x7E00 if fmt is F16 else 0x7FC0, 0x03FF if fmt is F16 else 0x007F]
    out = specials + [rng.getrandbits(16) for _ in range(n)]
    # values of similar size as well, so that sums cancel and round near the operands' last place
    out += [(rng.randint(0x3000, 0x4800) if fmt is F16 else rng.randint(0x3E00, 0x4200)) | rng.choice((0, 0x8000))
            for _ in range(n)]
    return out


def triples(rng: random.Random, fmt: Fmt, n: int = 300):
    values = half_inputs(rng, fmt, n)
    count = 512
    pick = [rng.choice(values) for _ in range(3 * count)]
    return pick[:count], pick[count:2 * count], pick[2 * count:]


# ---------------------------------------------------------------------------------------- add sub mul fma


@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_add_sub_mul_fma(t, target):
    fmt, rng = FORMATS[t], random.Random(29 if t == "f16" else 31)
    a, b, c = triples(rng, fmt)
    ops = [f"add.{t} %h10, %h1, %h2;", f"sub.rn.{t} %h10, %h1, %h2;", f"mul.{t} %h10, %h1, %h2;",
           f"fma.rn.{t} %h10, %h1, %h2, %h3;", f"fma.rn.relu.{t} %h10, %h1, %h2, %h3;"]
    if t == "f16":
        ops += ["add.ftz.f16 %h10, %h1, %h2;", "mul.rn.sat.f16 %h10, %h1, %h2;",
                "fma.rn.ftz.sat.f16 %h10, %h1, %h2, %h3;", "mov.b16 %x1, %h1;\nmov.b16 %x2, %h2;\n"
                "sub.f16 %x3, %x1, %x2;\nmov.b16 %h10, %x3;"]
    rows = run(f"arith_{t}", ops, a, b, c, target=target)
    for x, y, z, row in zip(a, b, c, rows):
        u, v, w = (value(bits, fmt) for bits in (x, y, z))
        expected = [rounded(exact_binary(operator.add, u, v), fmt), rounded(exact_binary(operator.sub, u, v), fmt),
                    rounded(exact_binary(operator.mul, u, v), fmt), rounded(exact_fma(u, v, w), fmt)]
        expected.append(relu(expected[3], fmt))
        if t == "f16":
            fu, fv, fw = (value(flush(bits, fmt), fmt) for bits in (x, y, z))
            expected += [flush(rounded(exact_binary(operator.add, fu, fv), fmt), fmt),
                         saturate(rounded(exact_binary(operator.mul, u, v), fmt), fmt),
                         saturate(flush(rounded(exact_fma(fu, fv, fw), fmt), fmt), fmt),
                         expected[1]]
        for k, (got, want) in enumerate(zip(row, expected)):
            assert same(got, want, fmt), (ops[k], hex(x), hex(y), hex(z), hex(got), hex(want))


def test_fma_rounds_once(target):
    """Products on a midpoint with a tiny addend: rounding a·b + c to f32 first would tie and go wrong."""
    cases = [("bf16", 0x40E0, 0x4214, 0x8D80),  # 7 · 37 = 259 (between 258 and 260), c = -2**-100 → 258
             ("bf16", 0xC0E0, 0x4214, 0x0D80),  # -259 + tiny → -258
             ("f16", 0x4200, 0x6156, 0x0001)]   # 3 · 683 = 2049 (between 2048 and 2050), c = 2**-24 → 2050
    for t, x, y, z in cases:
        fmt = FORMATS[t]
        [[got]] = run(f"fma_once_{t}", [f"fma.rn.{t} %h10, %h1, %h2, %h3;"], [x], [y], [z], target=target)
        want = rounded(exact_fma(value(x, fmt), value(y, fmt), value(z, fmt)), fmt)
        assert got == want, (t, hex(got), hex(want))
        single = float(Fraction(value(x, fmt)) * Fraction(value(y, fmt)))  # what a rounded f32 sum would tie on
        assert rounded(Fraction(single), fmt) != want  # the case does tell one rounding from two


def test_bf16_fma_at_the_subnormal_and_overflow_boundaries(target):
    """bf16 fma results about 2^-126 (subnormal, rounding up into the smallest normal), subnormal ties and
    sums just above or below them, and sums about the overflow midpoint (max finite + half an ulp): the
    places where lowering's f64 → bf16 rounding switches between its subnormal and normal paths and clamps."""
    rng = random.Random(43)
    sign = lambda: rng.choice((0, 0x8000))
    a, b, c = [], [], []
    for _ in range(256):  # products of 2^-140 … 2^-120 with addends as small, either sign
        a.append(sign() | rng.randrange(0x0001, 0x0200))
        b.append(sign() | rng.randrange(0x3E00, 0x4100))
        c.append(sign() | rng.choice((0, rng.randrange(0x0001, 0x0100), rng.randrange(0x0080, 0x0180))))
    for _ in range(249):  # near max finite, addends about half its ulp (2^119); 512 cases in all
        a.append(sign() | rng.randrange(0x7F70, 0x7F80))
        b.append(rng.choice((0x3F80, 0x3F81, 0x3F7F, 0xBF80, 0x4000)))  # (× 2: past ∞)
        c.append(sign() | rng.randrange(0x7A80, 0x7B80))
    a += [0x0003, 0x0003, 0x0003, 0x007F, 0x0080, 0x7F7F, 0x7F7F]
    b += [0x3FC0, 0x3FC0, 0x3FC0, 0x3F81, 0x3F00, 0x3F80, 0x3F80]
    c += [0x0000, 0x8001, 0x0001, 0x0000, 0x8000, 0x7B00, 0xFB00]  # 4.5 quanta, 3.5, 5.5; 2^-126 · 0.5; ties at ∞
    [got] = zip(*run("fma_bf16_edges", ["fma.rn.bf16 %h10, %h1, %h2, %h3;"], a, b, c, target=target))
    want = [rounded(exact_fma(*(value(bits, BF16) for bits in triple)), BF16) for triple in zip(a, b, c)]
    assert sum(1 for bits in want if bits & 0x7F80 == 0 and bits & 0x7F) > 50  # subnormal results
    assert {0x7F80, 0x7F7F} <= {bits & 0x7FFF for bits in want}  # both sides of the overflow midpoint
    for x, y, z, g, w in zip(a, b, c, got, want):
        assert same(g, w, BF16), (hex(x), hex(y), hex(z), hex(g), hex(w))


@pytest.mark.parametrize("t", ["f16x2", "bf16x2"])
def test_packed_pairs_lane_by_lane(t, target):
    lane = t[:-2]
    fmt, rng = FORMATS[lane], random.Random(37)
    a, b, c = triples(rng, fmt)
    pack = lambda values: [values[i] | values[(i * 7 + 3) % len(values)] << 16 for i in range(len(values))]
    a, b, c = pack(a), pack(b), pack(c)
    # lanes where min/max decide by the sign of zero or by NaN: ±0 against ∓0, a (signalling) NaN against
    # a number and against a NaN, in either order
    quiet, signalling, one = (0x7E00, 0x7D00, 0x3C00) if fmt is F16 else (0x7FC0, 0x7F81, 0x3F80)
    a[:4] = [0x8000_0000, quiet << 16 | signalling, one << 16 | quiet, 0x8000 << 16 | signalling]
    b[:4] = [0x0000_8000, one << 16 | one, quiet << 16 | signalling, 0x0000 << 16 | 0x8000]
    ops = [f"add.{t} %r10, %r4, %r5;", f"mul.rn.{t} %r10, %r4, %r5;", f"fma.rn.{t} %r10, %r4, %r5, %r6;",
           f"neg.{t} %r10, %r4;", f"abs.{t} %r10, %r4;", f"min.{t} %r10, %r4, %r5;", f"max.NaN.{t} %r10, %r4, %r5;",
           f"setp.lt.{t} %p2|%p3, %r4, %r5;\nselp.u32 %r11, 2, 0, %p3;\nselp.u32 %r12, 1, 0, %p2;\n"
           "or.b32 %r10, %r11, %r12;",
           f"set.gtu.{t}.{t} %r10, %r4, %r5;", f"set.gtu.u32.{t} %r10, %r4, %r5;"]
    rows = run(f"packed_{lane}", ops, a, b, c, target=target)
    one = 0x3C00 if fmt is F16 else 0x3F80
    for x, y, z, row in zip(a, b, c, rows):
        lanes = [(x >> s & 0xFFFF, y >> s & 0xFFFF, z >> s & 0xFFFF) for s in (0, 16)]
        expected = [[], [], [], [], [], [], [], 0, [], []]
        for i, (p, q, r) in enumerate(lanes):
            u, v, w = value(p, fmt), value(q, fmt), value(r, fmt)
            expected[0].append(rounded(exact_binary(operator.add, u, v), fmt))
            expected[1].append(rounded(exact_binary(operator.mul, u, v), fmt))
            expected[2].append(rounded(exact_fma(u, v, w), fmt))
            expected[3].append(fmt.nan if is_nan(p, fmt) else p ^ 0x8000)
            expected[4].append(fmt.nan if is_nan(p, fmt) else p & 0x7FFF)
            expected[5].append(reference_min_max(p, q, fmt, smaller=True))
            expected[6].append(reference_min_max(p, q, fmt, smaller=False, nan=True))
            expected[7] |= int(u < v) << i
            expected[8].append(one if not u <= v else 0)
            expected[9].append(0xFFFF if not u <= v else 0)
        for k, got in enumerate(row):
            if k == 7:
                assert got == expected[7], (hex(x), hex(y))
                continue
            for i in (0, 1):
                lane_bits = got >> (16 * i) & 0xFFFF
                if k in (5, 6):  # min/max NaNs are the canonical NaN, bit for bit
                    assert lane_bits == expected[k][i], (ops[k], hex(x), hex(y), hex(got))
                assert same(lane_bits, expected[k][i], fmt), (ops[k], hex(x), hex(y), hex(got))


def test_f16_registers_pack_and_unpack(target):
    """`mov.b32 {%h, %h}` packs with .f16 registers feed f16 arithmetic (lane 0 is the first, low half)."""
    ops = ["mov.b32 {%x1, %x2}, %r4;\nadd.f16 %x3, %x1, %x2;\nmov.b16 %h10, %x3;",
           "mov.b16 %x0, %h1;\nmov.b16 %x1, %h2;\nmov.b32 %y1, {%x0, %x1};\nmul.f16x2 %y2, %y1, %y1;\nmov.b32 %r10, %y2;"]
    [row] = run("packs", ops, [0x4000_3C00], [0xC200], target=target)
    assert row == [0x4200, 0x4880_3C00]  # 1 + 2 = 3; (1², (-3)²) in the (low, high) halves


# ---------------------------------------------------------------------------------------- neg abs min max


def reference_min_max(p: int, q: int, fmt: Fmt, smaller: bool, nan: bool = False, xorsign: bool = False) -> int:
    """PTX min/max on bits: NaN rules, -0 below +0, .xorsign.abs."""
    sign = (p ^ q) & 0x8000
    if xorsign:
        p, q = p & 0x7FFF, q & 0x7FFF
    p_nan, q_nan = is_nan(p, fmt), is_nan(q, fmt)
    if (p_nan and q_nan) or (nan and (p_nan or q_nan)):
        return fmt.nan
    if p_nan or q_nan:
        result = q if p_nan else p
    else:
        key = lambda bits: (value(bits, fmt), -(bits >> 15))  # equal values: -0 first
        result = min(p, q, key=key) if smaller else max(p, q, key=key)
    return result | sign if xorsign else result


@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_neg_abs_min_max(t, target):
    fmt, rng = FORMATS[t], random.Random(41)
    a, b, _ = triples(rng, fmt)
    a[:4], b[:4] = [0x0000, 0x8000, 0x7E00 if t == "f16" else 0x7FC1, 0x3C00], [0x8000, 0x0000, 0x4000, 0xFFFF]
    ops = [f"neg.{t} %h10, %h1;", f"abs.{t} %h10, %h1;", f"min.{t} %h10, %h1, %h2;", f"max.{t} %h10, %h1, %h2;",
           f"min.NaN.{t} %h10, %h1, %h2;", f"max.xorsign.abs.{t} %h10, %h1, %h2;",
           f"min.NaN.xorsign.abs.{t} %h10, %h1, %h2;"]
    if t == "f16":
        ops += ["neg.ftz.f16 %h10, %h1;", "min.ftz.f16 %h10, %h1, %h2;"]
    rows = run(f"minmax_{t}", ops, a, b, target=target)
    for x, y, row in zip(a, b, rows):
        nan = is_nan(x, fmt)  # neg/abs of a NaN: the canonical NaN
        expected = [fmt.nan if nan else x ^ 0x8000, fmt.nan if nan else x & 0x7FFF, reference_min_max(x, y, fmt, True), reference_min_max(x, y, fmt, False),
                    reference_min_max(x, y, fmt, True, nan=True),
                    reference_min_max(x, y, fmt, False, xorsign=True),
                    reference_min_max(x, y, fmt, True, nan=True, xorsign=True)]
        if t == "f16":
            expected += [fmt.nan if nan else flush(x, fmt) ^ 0x8000, flush(reference_min_max(flush(x, fmt), flush(y, fmt), fmt, True), fmt)]
        for k, (got, want) in enumerate(zip(row, expected)):
            assert got == want, (ops[k], hex(x), hex(y), hex(got), hex(want))


# ---------------------------------------------------------------------------------------- setp set


COMPARISONS = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
               "ge": operator.ge}


def compare(cmp: str, u: float, v: float) -> bool:
    unordered = math.isnan(u) or math.isnan(v)
    if cmp == "num":
        return not unordered
    if cmp == "nan":
        return unordered
    if cmp.endswith("u"):
        return unordered or COMPARISONS[cmp[:-1]](u, v)
    return not unordered and COMPARISONS[cmp](u, v)


@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_setp_and_set(t, target):
    fmt, rng = FORMATS[t], random.Random(43)
    a, b, c = triples(rng, fmt)
    b = [y if i % 3 else x for i, (x, y) in enumerate(zip(a, b))]  # equal operands too
    cmps = ["eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"]
    ops = [f"setp.{cmp}.{t} %p1, %h1, %h2;" for cmp in cmps]
    ops += [f"setp.ne.{t} %p3, %h3, %h3;\nsetp.lt.or.{t} %p1, %h1, %h2, !%p3;",
            f"setp.ne.{t} %p3, %h3, %h3;\nsetp.gtu.xor.{t} %p1, %h1, %h2, %p3;",
            f"set.le.{t}.{t} %h10, %h1, %h2;", f"set.nan.u32.{t} %r10, %h1, %h2;",
            f"set.ge.s16.{t} %h10, %h1, %h2;"]
    rows = run(f"setp_{t}", ops, a, b, c, target=target)
    one = 0x3C00 if fmt is F16 else 0x3F80
    for x, y, z, row in zip(a, b, c, rows):
        u, v, w = value(x, fmt), value(y, fmt), value(z, fmt)
        expected = [int(compare(cmp, u, v)) for cmp in cmps]
        c_pred = compare("ne", w, w)  # true only for NaN
        expected += [int(compare("lt", u, v) or not c_pred), int(compare("gtu", u, v) != c_pred),
                     one if compare("le", u, v) else 0, 0xFFFFFFFF if compare("nan", u, v) else 0,
                     0xFFFF if compare("ge", u, v) else 0]
        assert row == expected, (hex(x), hex(y), hex(z))


def test_setp_ftz_flushes_inputs(target):
    rows = run("setp_ftz", ["setp.eq.ftz.f16 %p1, %h1, %h2;", "setp.eq.f16 %p1, %h1, %h2;"],
               [0x0001] * 256, [0x8000] * 256, target=target)
    assert rows[0] == [1, 0]


# ---------------------------------------------------------------------------------------- ex2 tanh


@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_ex2_and_tanh_approx(t, target):
    """Within PTX's bounds (ex2.f16: 2**-9.9 relative; tanh.f16: 2**-10.987 absolute/relative), checked
    here at half of the lane's ulp more."""
    fmt, rng = FORMATS[t], random.Random(47)
    one = 0x3C00 if fmt is F16 else 0x3F80
    a = [rng.randint(one - 0x1800 if t == "f16" else one - 0x300, one + 0x0C00 if t == "f16" else one + 0x180)
         | rng.choice((0, 0x8000)) for _ in range(510)] + [0x7C00 if t == "f16" else 0x7F80, 0]
    ex2 = "ex2.approx.f16" if t == "f16" else "ex2.approx.ftz.bf16"
    rows = run(f"approx_{t}", [f"{ex2} %h10, %h1;", f"tanh.approx.{t} %h10, %h1;"], a, target=target)
    precision = 2.0 ** -(fmt.m + 1)
    for x, (got_ex2, got_tanh) in zip(a, rows):
        u = value(x, fmt)
        for got, want, bound in ((got_ex2, 2.0 ** u, 2.0 ** -9.9), (got_tanh, math.tanh(u), 2.0 ** -10.987)):
            result = value(got, fmt)
            if math.isinf(want) or want > 1e4:
                assert result == want or result > 1e4
                continue
            tolerance = abs(want) * (max(bound, precision) + precision) + 2.0 ** -24
            assert abs(result - want) <= tolerance, (hex(x), u, result, want)


def test_unsupported_half_forms_fail_precisely():
    from fatkit.errors import FatkitError
    for op, why in [("fma.rn.oob.f16 %h10, %h1, %h2, %h3;", ".oob"), ("add.ftz.bf16 %h10, %h1, %h2;", "no .ftz"),
                    ("min.xorsign.f16 %h10, %h1, %h2;", ".xorsign and .abs")]:
        with pytest.raises(FatkitError, match=why.replace(".", r"\.")):
            translate(table_kernel("bad", [op]), Options(target="host"))


# ---------------------------------------------------------------------------------------- AMDGPU


HALF_FORMS = [
    f"{op}.{t} {d}, {a}, {b};" for t, d, a, b in (("f16", "%h10", "%h1", "%h2"), ("bf16", "%h10", "%h1", "%h2"),
                                                  ("f16x2", "%r10", "%r4", "%r5"), ("bf16x2", "%r10", "%r4", "%r5"))
    for op in ("add", "sub.rn", "mul", "min.NaN", "max.xorsign.abs")
] + [
    "fma.rn.f16 %h10, %h1, %h2, %h3;", "fma.rn.bf16 %h10, %h1, %h2, %h3;", "fma.rn.relu.bf16x2 %r10, %r4, %r5, %r6;",
    "fma.rn.ftz.sat.f16x2 %r10, %r4, %r5, %r6;", "add.ftz.sat.f16 %h10, %h1, %h2;", "neg.bf16x2 %r10, %r4;",
    "abs.ftz.f16 %h10, %h1;", "ex2.approx.f16x2 %r10, %r4;", "ex2.approx.ftz.bf16 %h10, %h1;",
    "tanh.approx.bf16x2 %r10, %r4;", "tanh.approx.f16 %h10, %h1;", "setp.ltu.f16 %p1, %h1, %h2;",
    "set.eq.u32.f16x2 %r10, %r4, %r5;",
    "setp.ge.and.bf16x2 %p2|%p1, %r4, %r5, %p3;", "set.eq.f16x2.f16x2 %r10, %r4, %r5;",
    "mov.b16 %x1, %h1;\nmul.f16 %x2, %x1, %x1;\nmov.b16 %h10, %x2;",
]


@pytest.mark.parametrize("target", ["gfx942", "gfx1100"])
def test_half_forms_compile_for_amdgpu(target):
    result = translate(table_kernel("half_forms", HALF_FORMS), Options(target=target))
    assert result.product
