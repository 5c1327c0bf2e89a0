"""The MODE register's floating-point fields and the arithmetic that honours them.

MODE (hwreg 1, the same layout on gfx9, gfx10+ and gfx12 for these bits): FP_ROUND in bits 3:0 (1:0 for
f32, 3:2 for f16/f64; 0 round to nearest even, 1 towards +inf, 2 towards −inf, 3 towards zero), FP_DENORM in
bits 7:4 (5:4 for f32, 7:6 for f16/f64; in each pair bit 0 keeps input denormals, bit 1 output denormals, so
0 flushes both and 3 keeps both), DX10_CLAMP bit 8, IEEE bit 9. The kernel descriptor's rsrc1 carries the
entry values of FP_ROUND and FP_DENORM in bits 19:12 (the same two 4-bit fields, in the same order).

Outside round-to-nearest-even with denormals kept the executor takes a second path (`ModeStep`): float
sources are flushed where the mode flushes inputs, the table's semantics runs, a finite add/sub/mul/fma
result is replaced by the exactly rounded one in a directed mode (Python fractions, lane by lane), and a
subnormal result becomes a zero of its sign where the mode flushes outputs (tininess after rounding); the
packed V_PK_* operations flush each half of their operands and results by its format's field.
V_RCP, V_RSQ, V_SQRT, V_LOG and V_EXP_F32 flush their subnormal sources and results in every mode, the
default one included (`always_flushes`).
Operations whose result depends on the rounding mode and that are not among those are refused in a
directed mode rather than rounded to nearest.
"""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np

from fatkit.errors import FatkitError

HW_REG_MODE = 1
DEFAULT_FP = 0xF0  # FP_ROUND 0 (nearest even), FP_DENORM 3/3 (keep)
FP_FIELDS = 0xFF  # the bits setreg may change here (FP_ROUND, FP_DENORM)
ROUND_NEAREST, ROUND_UP, ROUND_DOWN, ROUND_ZERO = 0, 1, 2, 3


def entry_mode(rsrc1: int) -> int:
    """FP_ROUND | FP_DENORM << 4 at dispatch, from the descriptor's FLOAT_ROUND_MODE_32/16_64 and
    FLOAT_DENORM_MODE_32/16_64 (a wave keeps only these bits of MODE; DX10_CLAMP and IEEE are the launch's)."""
    return (rsrc1 >> 12) & FP_FIELDS


def hwreg_field(simm16: int) -> tuple[int, int, int]:
    """(register id, bit offset, size) of an s_setreg/s_getreg operand."""
    return simm16 & 0x3F, (simm16 >> 6) & 0x1F, ((simm16 >> 11) & 0x1F) + 1


def setreg(mode: int, rest: int, simm16: int, value: int, where: str) -> int:
    """The FP bits of MODE after s_setreg of `value` into the hwreg field `simm16` names; `rest` is MODE's
    other bits, which may not change here."""
    _, offset, size = hwreg_field(simm16)
    mask = (((1 << size) - 1) << offset) & 0xFFFFFFFF
    old = mode | rest
    new = (old & ~mask) | ((value << offset) & mask)
    if (new ^ old) & ~FP_FIELDS:
        raise FatkitError(f"{where}: s_setreg changes MODE bits 0x{(new ^ old) & ~FP_FIELDS:x}; only FP_ROUND "
                          "and FP_DENORM (bits 7:0) are modelled")
    return new & FP_FIELDS


def getreg(mode: int, rest: int, simm16: int) -> int:
    _, offset, size = hwreg_field(simm16)
    return ((mode | rest) >> offset) & ((1 << size) - 1)


def rounding_of(mode: int, width: int) -> int:
    return mode & 3 if width == 32 else (mode >> 2) & 3


def denorm_of(mode: int, width: int) -> int:
    return (mode >> 4) & 3 if width == 32 else (mode >> 6) & 3


# --- formats: (mantissa bits, exponent bits)
_FORMAT = {16: (10, 5), 32: (23, 8), 64: (52, 11)}


def _decode(bits: int, width: int) -> Fraction | None:
    """The value of finite bits (None for Inf/NaN); the sign of a zero is lost (callers keep it)."""
    mant, ebits = _FORMAT[width]
    exponent = (bits >> mant) & ((1 << ebits) - 1)
    fraction = bits & ((1 << mant) - 1)
    if exponent == (1 << ebits) - 1:
        return None
    bias = (1 << (ebits - 1)) - 1
    if exponent == 0:
        value = Fraction(fraction) * Fraction(2) ** (1 - bias - mant)
    else:
        value = Fraction(fraction | (1 << mant)) * Fraction(2) ** (exponent - bias - mant)
    return -value if bits >> (width - 1) & 1 else value


def round_exact(value: Fraction, width: int, rounding: int) -> int:
    """The bits of a non-zero exact value rounded to the format as `rounding` asks (subnormals kept)."""
    mant, ebits = _FORMAT[width]
    bias = (1 << (ebits - 1)) - 1
    emin, emax = 1 - bias, bias
    negative = value < 0
    a = -value if negative else value
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    quantum = max(e, emin) - mant
    scaled = a / Fraction(2) ** quantum
    n, rest = divmod(scaled.numerator, scaled.denominator)
    if rest:
        away = rounding == ROUND_UP and not negative or rounding == ROUND_DOWN and negative
        if rounding == ROUND_NEAREST:
            twice = 2 * rest
            away = twice > scaled.denominator or twice == scaled.denominator and bool(n & 1)
        n += int(away)
    if n >> (mant + 1):
        n, quantum = n >> 1, quantum + 1
    sign = int(negative) << (width - 1)
    infinite = ((1 << ebits) - 1) << mant
    largest = infinite - 1
    if n < 1 << mant:  # subnormal (or zero)
        return sign | n
    biased = quantum + mant + bias
    if quantum + mant > emax:
        to_infinity = rounding == ROUND_NEAREST or rounding == ROUND_UP and not negative or \
            rounding == ROUND_DOWN and negative
        return sign | (infinite if to_infinity else largest)
    return sign | (biased << mant) | (n - (1 << mant))


def _signed_zero(negative: bool, width: int) -> int:
    return int(negative) << (width - 1)


def exact(kind: str, width: int, operands: list[int], rounding: int) -> int | None:
    """The correctly rounded result bits of add/mul/fma on finite operands (None where one is Inf/NaN: the
    result does not depend on the rounding then)."""
    decoded = [_decode(b, width) for b in operands]
    values = [v for v in decoded if v is not None]
    if len(values) < len(decoded):
        return None
    signs = [bool(b >> (width - 1) & 1) for b in operands]
    if kind == "mul":
        product = values[0] * values[1]
        return round_exact(product, width, rounding) if product else _signed_zero(signs[0] != signs[1], width)
    if kind == "add":
        terms, term_signs = (values[0], values[1]), (signs[0], signs[1])
    else:
        terms, term_signs = (values[0] * values[1], values[2]), (signs[0] != signs[1], signs[2])
    total = terms[0] + terms[1]
    if total:
        return round_exact(total, width, rounding)
    # IEEE 754: a zero sum of two zeros of one sign has that sign; any other exact zero sum is +0, −0 when
    # rounding towards −inf
    if terms[0] == 0 and terms[1] == 0 and term_signs[0] == term_signs[1]:
        return _signed_zero(term_signs[0], width)
    return _signed_zero(rounding == ROUND_DOWN, width)


# plain opcode → (kind, the operand params in order, which one is negated)
_ARITHMETIC = {
    "ADD": ("add", ("S0", "S1"), None), "SUB": ("add", ("S0", "S1"), 1), "SUBREV": ("add", ("S1", "S0"), 1),
    "MUL": ("mul", ("S0", "S1"), None), "FMA": ("fma", ("S0", "S1", "S2"), None),
    "FMAC": ("fma", ("S0", "S1", "D0"), None), "FMAMK": ("fma", ("S0", "SIMM32", "S1"), None),
    "FMAAK": ("fma", ("S0", "S1", "SIMM32"), None),
}
_ARITHMETIC_NAME = re.compile(r"V_(ADD|SUB|SUBREV|MUL|FMA|FMAC|FMAMK|FMAAK)_F(32|64)(?:_E32|_E64)?$")
# float operations whose result does not depend on the rounding mode
_ROUNDING_FREE = re.compile(
    r"V_(CMP|CMPX)_|V_(MIN|MAX|MED3|MINIMUM|MAXIMUM|MIN3|MAX3|MINMAX|MAXMIN|MINIMUM3|MAXIMUM3)[0-9]*(_NUM)?_F|"
    r"V_(CNDMASK|MOV)|V_(TRUNC|FLOOR|CEIL|RNDNE|FRACT|FREXP_MANT|FREXP_EXP_I32)_F|"
    r"V_CVT_F64_F32|V_CVT_F32_F16|V_CVT_F32_BF16|V_CVT_(I|U)32_F(32|64)|V_CVT_(I|U)16_F16|V_CVT_FLR|V_CVT_RPI")
_NO_FLUSH = re.compile(r"V_CMPX?_CLASS_")  # the class test reads the bits as they are
# "1ULP accuracy, denormals are flushed" (CDNA3 and RDNA3 ISA, each of these five): subnormal inputs and
# results are zeros of their sign whatever MODE's FP_DENORM says (V_SIN/V_COS_F32 support denormals)
_ALWAYS_FLUSHED = re.compile(r"V_(RCP|RSQ|SQRT|LOG|EXP)_F32(?:_E32|_E64)?$")


def arithmetic(name: str) -> tuple[str, int, tuple[str, ...], int | None] | None:
    """(kind, width, operand params, negated operand) of an add/sub/mul/fma the directed path computes."""
    m = _ARITHMETIC_NAME.match(name)
    if m is None:
        return None
    kind, params, negated = _ARITHMETIC[m.group(1)]
    return kind, int(m.group(2)), params, negated


def flushes_inputs(name: str) -> bool:
    return _NO_FLUSH.match(name) is None


def always_flushes(name: str) -> bool:
    """Whether the f32 instruction flushes subnormal sources and results in every mode."""
    return _ALWAYS_FLUSHED.match(name) is not None


def rounding_free(name: str) -> bool:
    return _ROUNDING_FREE.match(name) is not None


def flush_bits(value, width: int):
    """Subnormal bit patterns of `width` (an int or an object array) as zeros of their sign."""
    mant, ebits = _FORMAT[width]
    exponent = (value >> mant) & ((1 << ebits) - 1)
    fraction = value & ((1 << mant) - 1)
    sign_only = value & ~((1 << (width - 1)) - 1)
    if isinstance(value, np.ndarray):
        return np.where((exponent == 0) & (fraction != 0), sign_only, value).astype(object)
    return sign_only if exponent == 0 and fraction else value


def flush_halves(value, half: int):
    """`flush_bits` of both `half`-bit halves of packed operands (V_PK_*: (high << half) | low)."""
    mask = (1 << half) - 1
    value = np.asarray(value, dtype=object)
    return (flush_bits((value >> half) & mask, half) << half) | flush_bits(value & mask, half)


def directed(kind: str, width: int, operands: list, negated: int | None, rounding: int, nearest, lanes: int):
    """`nearest` (the table's round-to-nearest results) with every lane whose operands are finite replaced
    by the exactly rounded result."""
    sign = 1 << (width - 1)
    columns = [np.broadcast_to(np.asarray(o, dtype=object), (lanes,)) for o in operands]
    out = np.array(np.broadcast_to(np.asarray(nearest, dtype=object), (lanes,)), dtype=object)
    for lane in range(lanes):
        bits = [int(c[lane]) & ((1 << width) - 1) for c in columns]
        if negated is not None:
            bits[negated] ^= sign
        result = exact(kind, width, bits, rounding)
        if result is not None:
            out[lane] = result
    return out


__all__ = ["DEFAULT_FP", "HW_REG_MODE", "always_flushes", "arithmetic", "directed", "entry_mode", "exact",
           "flush_bits", "flush_halves", "getreg", "round_exact", "setreg"]
