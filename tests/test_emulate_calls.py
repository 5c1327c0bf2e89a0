"""Opcodes whose pseudocode calls other opcodes' functions (gfx12's v_med3_num_f32 calls v_min3_num_f32 and
v_max_num_f32): each compiled by fatkit.emulate against a model written here from the ISA text, over
random bit patterns mixed with NaNs (quiet and signalling), ±0, ±Inf, subnormals and ties.

The models: v_min_num/v_max_num are IEEE 754-2019 minimumNumber/maximumNumber (a NaN operand gives the other
operand, two NaNs the first one quieted, -0 below +0); v_minimum/v_maximum are minimum/maximum (a NaN operand
gives a NaN: a signalling one quieted first, else the first quiet one); the 3-operand forms chain two of them as
the ISA text says; v_med3 is, with any NaN operand, the min3 of the three, and otherwise the max of the two
operands left when the first operand that equals the max3 (in the order S0, S1, S2) is taken out.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from fatkit.emulate.semantics import Semantics

LANES = 512
_QUIET = {32: 1 << 22, 16: 1 << 9}
_MASK = {32: 0xFFFFFFFF, 16: 0xFFFF}


class _Ctx:
    wave32, mode = True, None

    def __init__(self, ieee: bool) -> None:
        self.ieee = ieee


def _value(bits: int, width: int) -> float:
    return struct.unpack("<f" if width == 32 else "<e", struct.pack("<I" if width == 32 else "<H", bits))[0]


def _is_nan(bits: int, width: int) -> bool:
    return math.isnan(_value(bits, width))


def _less(a: int, b: int, width: int) -> bool:
    """a < b with -0 below +0 (neither a NaN)."""
    x, y = _value(a, width), _value(b, width)
    return x < y or x == y == 0 and math.copysign(1, x) < math.copysign(1, y)


def minimum_number(a: int, b: int, width: int, larger: bool = False) -> int:
    if _is_nan(a, width) and _is_nan(b, width):
        return a | _QUIET[width]
    if _is_nan(a, width):
        return b
    if _is_nan(b, width):
        return a
    return (b if _less(a, b, width) else a) if larger else (a if _less(a, b, width) else b)


def minimum(a: int, b: int, width: int, larger: bool = False) -> int:
    for x in (a, b):  # a signalling NaN first, the ISA text's order
        if _is_nan(x, width) and not x & _QUIET[width]:
            return x | _QUIET[width]
    for x in (a, b):
        if _is_nan(x, width):
            return x
    return minimum_number(a, b, width, larger)


def median3(a: int, b: int, c: int, width: int) -> int:
    if any(_is_nan(x, width) for x in (a, b, c)):
        return minimum_number(minimum_number(a, b, width), c, width)
    top = _value(minimum_number(minimum_number(a, b, width, True), c, width, True), width)
    if top == _value(a, width):
        return minimum_number(b, c, width, True)
    if top == _value(b, width):
        return minimum_number(a, c, width, True)
    return minimum_number(a, b, width, True)


def _specials(width: int) -> list[int]:
    if width == 32:
        return [0x7FC00000, 0xFFC00001, 0x7F800001, 0xFFA00000, 0x7F800000, 0xFF800000, 0, 0x80000000,
                0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x3F800000, 0xBF800000, 0x7F7FFFFF, 0xFF7FFFFF]
    return [0x7E00, 0xFE01, 0x7C01, 0xFD00, 0x7C00, 0xFC00, 0, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF,
            0x3C00, 0xBC00, 0x7BFF, 0xFBFF]


def _operands(width: int, count: int, seed: int) -> list[np.ndarray]:
    """`count` lane vectors: each lane a special, a random pattern, or (a tie) another operand's value."""
    rng = np.random.default_rng(seed)
    specials = np.array(_specials(width), dtype=object)
    columns = []
    for i in range(count):
        random = rng.integers(0, 1 << width, LANES, dtype=np.uint64).astype(object)
        exponent_spread = np.array([int(x) for x in rng.integers(0, 1 << width, LANES, dtype=np.uint64)],
                                   dtype=object) & (0x807FFFFF if width == 32 else 0x83FF)
        exponent_spread = exponent_spread | (rng.integers(100, 150, LANES) << 23 if width == 32
                                             else rng.integers(10, 20, LANES) << 10).astype(object)
        choice = rng.integers(0, 4, LANES)
        column = np.where(choice == 0, specials[rng.integers(0, len(specials), LANES)],
                          np.where(choice == 1, random, exponent_spread))
        if i:
            column = np.where(choice == 3, columns[rng.integers(0, i)], column)
        columns.append(column)
    return columns


def _run(arch: str, name: str, operands: list[np.ndarray], width: int = 32, ieee: bool = True) -> np.ndarray:
    fn = Semantics(arch).get(name, vector=True, widths={"D0": width})
    sources = dict(zip(("S0", "S1", "S2"), operands))
    args = [sources.get(p, np.zeros(LANES, dtype=object)) for p in fn.params]
    out = fn.code(_Ctx(ieee), np.ones(LANES, dtype=bool), np.arange(LANES), *args)
    return np.asarray(out[fn.outputs.index("D0")], dtype=object)


def _check(got, expected, operands, width: int, name: str) -> None:
    bad = [i for i in range(LANES) if int(got[i]) & _MASK[width] != expected[i]]
    assert not bad, [(name, *(hex(int(o[i])) for o in operands), hex(int(got[i])), hex(expected[i]))
                     for i in bad[:5]]


def _two(model, larger: bool):
    return lambda a, b, w: model(a, b, w, larger)


def _three(first, second):
    return lambda a, b, c, w: second(first(a, b, w), c, w)


_MIN, _MAX = _two(minimum_number, False), _two(minimum_number, True)
_MINIMUM, _MAXIMUM = _two(minimum, False), _two(minimum, True)
FLOAT_FORMS = {  # gfx12 opcode (without the width) -> model
    "V_MIN_NUM": _MIN, "V_MAX_NUM": _MAX,
    "V_MIN3_NUM": _three(_MIN, _MIN), "V_MAX3_NUM": _three(_MAX, _MAX),
    "V_MINMAX_NUM": _three(_MIN, _MAX), "V_MAXMIN_NUM": _three(_MAX, _MIN),
    "V_MED3_NUM": median3,
    "V_MINIMUM3": _three(_MINIMUM, _MINIMUM), "V_MAXIMUM3": _three(_MAXIMUM, _MAXIMUM),
    "V_MINIMUMMAXIMUM": _three(_MINIMUM, _MAXIMUM), "V_MAXIMUMMINIMUM": _three(_MAXIMUM, _MINIMUM),
}


@pytest.mark.parametrize("width", [32, 16])
@pytest.mark.parametrize("form", sorted(FLOAT_FORMS))
def test_gfx12_float_min_max_median_calls(form, width):
    model = FLOAT_FORMS[form]
    name = f"{form}_F{width}" + ("_E64" if form in ("V_MIN_NUM", "V_MAX_NUM") else "")
    count = model.__code__.co_argcount - 1
    operands = _operands(width, count, hash(name) & 0xFFFF)
    expected = [model(*(int(o[i]) for o in operands), width) for i in range(LANES)]
    _check(_run("rdna4", name, operands), expected, operands, width, name)


@pytest.mark.parametrize("form", ["V_PK_MIN_NUM_F16", "V_PK_MAX_NUM_F16", "V_PK_MINIMUM_F16", "V_PK_MAXIMUM_F16"])
def test_gfx12_packed_half_min_max_calls(form):
    model = {"V_PK_MIN_NUM_F16": _MIN, "V_PK_MAX_NUM_F16": _MAX, "V_PK_MINIMUM_F16": _MINIMUM,
             "V_PK_MAXIMUM_F16": _MAXIMUM}[form]
    lo, hi = _operands(16, 2, 1), _operands(16, 2, 2)
    operands = [(h << 16) | low for low, h in zip(lo, hi)]
    expected = [(model(int(hi[0][i]), int(hi[1][i]), 16) << 16) | model(int(lo[0][i]), int(lo[1][i]), 16)
                for i in range(LANES)]
    _check(_run("rdna4", form, operands), expected, operands, 32, form)


def _signed(bits: int, width: int) -> int:
    return bits - (1 << width) if bits >> (width - 1) else bits


@pytest.mark.parametrize("arch", ["rdna4", "rdna3", "cdna"])
@pytest.mark.parametrize("form", ["I32", "U32", "I16", "U16"])
def test_integer_min3_max3_median_calls(arch, form):
    width, signed = int(form[1:]), form[0] == "I"
    rng = np.random.default_rng(width + signed)
    # small values make ties and equal operands common; large ones reach the sign bit
    operands = [np.where(rng.integers(0, 2, LANES) == 0, rng.integers(0, 4, LANES),
                         rng.integers(0, 1 << width, LANES, dtype=np.int64)).astype(object) for _ in range(3)]
    suffix = "_E64" if arch == "cdna" else ""
    for op, pick in (("MED3", lambda v: sorted(v)[1]), ("MAX3", max), ("MIN3", min)):
        value = [pick([_signed(int(o[i]), width) if signed else int(o[i]) for o in operands]) for i in range(LANES)]
        expected = [v & ((1 << width) - 1) for v in value]
        name = f"V_{op}_{form}{suffix}"
        got = _run(arch, name, operands)
        _check(np.array([int(g) & ((1 << width) - 1) for g in got], dtype=object), expected, operands, 32, name)


@pytest.mark.parametrize("ieee", [True, False], ids=["ieee", "no-ieee"])
@pytest.mark.parametrize("width", [32, 16])
@pytest.mark.parametrize("arch", ["rdna3", "cdna"])
def test_median_with_nan_before_gfx12(arch, width, ieee):
    """gfx9–gfx11's v_med3_f32/f16 call v_min3/v_max3, whose v_min/v_max quiet a signalling NaN (S0's first)
    in IEEE mode and otherwise give the operand that is not a NaN; of two NaNs CDNA's give S1, RDNA3's S0
    (their pseudocode tests S0, S1 for NaN in that order, RDNA3's S1 first). fatkit's kernels run with IEEE
    off."""
    operands = _operands(width, 3, 7 + width)

    def num(a, b, larger=False):
        if ieee:
            for x in (a, b):
                if _is_nan(x, width) and not x & _QUIET[width]:
                    return x | _QUIET[width]
        if _is_nan(a, width) and _is_nan(b, width):
            return b if arch == "cdna" else a
        return minimum_number(a, b, width, larger)
    expected = []
    for i in range(LANES):
        a, b, c = (int(o[i]) for o in operands)
        if any(_is_nan(x, width) for x in (a, b, c)):
            expected.append(num(num(a, b), c))
            continue
        top = _value(num(num(a, b, True), c, True), width)
        expected.append(num(b, c, True) if top == _value(a, width) else num(a, c, True)
                        if top == _value(b, width) else num(a, b, True))
    name = f"V_MED3_F{width}" + ("_E64" if arch == "cdna" else "")
    _check(_run(arch, name, operands, ieee=ieee), expected, operands, width, name)

def _sad(a: int, b: int, accumulator: int, masked: bool) -> int:
    """The ISA text's v_sad_u8 / v_msad_u8: the accumulator plus |a - b| over the 4 bytes (v_msad_u8 skips the
    bytes where b is 0), modulo 2**32."""
    total = accumulator
    for k in range(4):
        x, y = a >> 8 * k & 0xFF, b >> 8 * k & 0xFF
        total += 0 if masked and y == 0 else abs(x - y)
    return total & 0xFFFFFFFF


@pytest.mark.parametrize("name", ["V_SAD_HI_U8", "V_QSAD_PK_U16_U8", "V_MQSAD_PK_U16_U8"])
def test_sums_of_absolute_differences_through_v_sad_u8(name):
    rng = np.random.default_rng(len(name))
    # bytes of 0 (the masked form skips them), equal bytes and random ones
    def words(count: int) -> np.ndarray:
        raw = rng.integers(0, 256, (LANES, count))
        raw = np.where(rng.integers(0, 4, (LANES, count)) == 0, 0, raw)
        return np.array([sum(int(v) << 8 * k for k, v in enumerate(row)) for row in raw], dtype=object)
    s0, s1 = words(8), words(4)
    s1 = np.where(rng.integers(0, 4, LANES) == 0, s0 & 0xFFFFFFFF, s1)
    s2 = np.array([int(x) | int(y) << 32 for x, y in zip(words(4), words(4))], dtype=object)
    expected = []
    for a, b, c in zip(s0, s1, s2):
        a, b, c = int(a), int(b), int(c)
        if name == "V_SAD_HI_U8":
            expected.append(((_sad(a, b, 0, False) << 16) + c) & 0xFFFFFFFF)
            continue
        expected.append(sum((_sad(a >> 8 * k, b, c >> 16 * k & 0xFFFF, name.startswith("V_MQ")) & 0xFFFF) << 16 * k
                            for k in range(4)))
    width = 32 if name == "V_SAD_HI_U8" else 64
    got = _run("rdna4", name, [s0, s1, s2], width)
    bad = [i for i in range(LANES) if int(got[i]) & ((1 << width) - 1) != expected[i]]
    assert not bad, [(hex(int(s0[i])), hex(int(s1[i])), hex(int(s2[i])), hex(int(got[i])), hex(expected[i]))
                     for i in bad[:5]]
