"""What the code compiled from the pseudocode calls: bit, float and lane-mask helpers over lane vectors.

Integers are Python ints or numpy object arrays of them (exact at any width); floats numpy float16/32/64
scalars or arrays; conditions Python/numpy bools. Every helper takes a scalar or a lane vector.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np


_INF = math.inf
_NAN = math.nan
_PI = math.pi
_MAXF32 = float(np.finfo(np.float32).max)
_DENORM = "denorm"  # only compared against, through _isdenorm

_FLOAT = {16: np.float16, 32: np.float32, 64: np.float64}
_UINT = {16: np.uint16, 32: np.uint32, 64: np.uint64}
_MANT = {16: 10, 32: 23, 64: 52}
_ARR = np.ndarray


def _range(lo, hi):
    return range(int(lo), int(hi) + 1)


def _b(x: object) -> bool | np.ndarray:
    if isinstance(x, _ARR):
        return x if x.dtype == np.bool_ else x != 0
    return bool(x)


def _int(x):
    if isinstance(x, _ARR):
        return x.astype(object) if x.dtype != object else x
    return int(x)


def _mand(a, b):
    if a is True:
        return b
    if a is False:
        return False
    return a & b


def _mnot(x):
    if isinstance(x, _ARR):
        return ~x if x.dtype == np.bool_ else x == 0
    return not x


def _any(m) -> bool:
    return bool(m.any()) if isinstance(m, _ARR) else bool(m)


def _land(a, b):
    return _mand(_b(a), _b(b))


def _lor(a, b):
    a, b = _b(a), _b(b)
    if a is True or b is True:
        return True
    return a | b


def _sel(c, a, b):
    if isinstance(c, _ARR):
        out = np.where(c, a, b)
        return out.astype(object) if out.dtype.kind in "iub" and out.dtype != np.bool_ or out.dtype == np.bool_ \
            and not (isinstance(a, (bool, np.bool_, _ARR)) and isinstance(b, (bool, np.bool_, _ARR))) else out
    return a if c else b


def _asg(m, new, old):
    if isinstance(m, _ARR):
        out = np.where(m, new, old)
        return out.astype(object) if out.dtype.kind in "iu" else out
    return new if m else old


def _pack(bits: np.ndarray) -> int:
    """A lane vector of conditions as an integer mask (lane 0 = bit 0)."""
    return int.from_bytes(np.packbits(np.asarray(bits, dtype=bool), bitorder="little").tobytes(), "little")


def _setlanebit(x, m, v, lane):
    """x with the bit of each lane in m set to v: every lane of the wave when `lane` is the lane vector, one
    lane when it is that lane's number (a lane-by-lane call)."""
    if isinstance(lane, _ARR):
        n = len(lane)
        v_bits = _pack(np.broadcast_to(v, (n,)))
        m_bits = _pack(np.broadcast_to(m, (n,))) if isinstance(m, _ARR) else (1 << n) - 1 if m else 0
        return (int(x) & ~m_bits) | (v_bits & m_bits)
    if not m:
        return x
    return (int(x) & ~(1 << lane)) | (int(bool(v)) << lane)


LANES = [32, 0]  # (lanes of the wave, the lane a scalar call stands for): set by the executor


def _lanebit(x, i):
    return _shr(x, i) & 1


def _shr(a, b):
    return a >> b


def _shl(a, b):
    return a << b


def _setbits(x, off, width, v):
    mask = ((1 << width) - 1)
    return (x & ~(mask << off)) | ((_int(v) & mask) << off)


def _slice(x, hi, lo):
    return (x >> lo) & ((1 << (hi - lo + 1)) - 1)


def _reverse(x, width):
    def one(v):
        return int(format(int(v) & ((1 << width) - 1), f"0{width}b")[::-1], 2)
    return np.array([one(v) for v in x], dtype=object) if isinstance(x, _ARR) else one(x)


def _rev32(x):
    return _reverse(x, 32)


def _sext(x: int | np.ndarray, width: int) -> int | np.ndarray:
    sign = 1 << (width - 1)
    return ((x & ((1 << width) - 1)) ^ sign) - sign


def _vectorized(fn):
    ufunc = np.frompyfunc(fn, 2, 1)

    def call(a, b):
        if isinstance(a, _ARR) or isinstance(b, _ARR):
            return ufunc(a, b)
        return fn(a, b)
    return call


def _div_trunc(a, b):
    a, b = int(a), int(b)
    if b == 0:
        return 0xFFFFFFFF
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _mod_trunc(a, b):
    a, b = int(a), int(b)
    if b == 0:
        return a
    return a - b * _div_trunc(a, b)


_idiv = _vectorized(_div_trunc)
_imod = _vectorized(_mod_trunc)


def _popcount_one(v, _=None):
    return (int(v) & ((1 << 128) - 1)).bit_count()


def _popcount(x):
    return np.array([_popcount_one(v) for v in x], dtype=object) if isinstance(x, _ARR) else _popcount_one(x)


def _ff1(x):
    def one(v):
        v = int(v)
        return (v & -v).bit_length() - 1 if v else -1
    return np.array([one(v) for v in x], dtype=object) if isinstance(x, _ARR) else one(x)


# --- floats

def _width(x) -> int:
    if isinstance(x, (_ARR, np.floating)):
        return x.dtype.itemsize * 8
    return 64


def _asf(x: int | np.ndarray, width: int) -> np.floating | np.ndarray:
    """Bits as a float of that width."""
    if isinstance(x, _ARR):
        return (x & ((1 << width) - 1)).astype(_UINT[width]).view(_FLOAT[width])
    return _UINT[width](int(x) & ((1 << width) - 1)).view(_FLOAT[width])


def _bits(x: int | float | np.integer | np.floating | np.bool_ | np.ndarray, width: int | None) -> int | np.ndarray:
    """A float's bits (an integer passes through)."""
    if isinstance(x, _ARR):
        if x.dtype.kind == "f":
            return x.view(_UINT[x.dtype.itemsize * 8]).astype(object)
        if x.dtype == np.bool_:
            return x.astype(object)
        return x if x.dtype == object else x.astype(object)
    if isinstance(x, np.floating):
        return int(x.view(_UINT[x.dtype.itemsize * 8]))
    if isinstance(x, float):
        w = width or 64
        return int(_FLOAT[w](x).view(_UINT[w]))
    return int(x)


def _fcast(x, width):
    """Value conversion between float widths; NaNs keep sign and payload (a widening does not quiet them)."""
    target = _FLOAT[width]
    if isinstance(x, (_ARR, np.floating)) and x.dtype.kind == "f":
        source = x.dtype.itemsize * 8
        if source == width:
            return x
        out = np.asarray(x).astype(target)
        nan = np.isnan(x)
        if source < width and np.any(nan):
            raw = np.asarray(x).view(_UINT[source]).astype(np.uint64)
            sign = (raw >> np.uint64(source - 1)) & np.uint64(1)
            payload = raw & np.uint64((1 << _MANT[source]) - 1)
            wide = (sign << np.uint64(width - 1)) | np.uint64(((1 << (width - 1 - _MANT[width])) - 1)
                                                              << _MANT[width]) \
                | (payload << np.uint64(_MANT[width] - _MANT[source]))
            out = np.where(nan, wide.astype(_UINT[width]).view(target), out)
        return out if isinstance(x, _ARR) else target(out[()] if isinstance(out, _ARR) else out)
    if isinstance(x, _ARR) and x.dtype == object:
        return x.astype(np.float64).astype(target)
    return target(x)


def _fconst(v, width):
    return _FLOAT[width](v)


def _itof(x, width):
    if isinstance(x, _ARR):
        return x.astype(np.float64).astype(_FLOAT[width])
    return _FLOAT[width](float(x))


def _ftoi(x):
    return _f_to_int(x, -(1 << 63), (1 << 63) - 1)


def _fneg(x):
    return -x


def _fadd(a, b):
    return a + b


def _fsub(a, b):
    return a - b


def _fmul(a, b):
    return a * b


def _fdiv(a, b):
    return a / b


def _exp2(a, b):
    if isinstance(b, _ARR):
        return np.ldexp(np.broadcast_to(a, b.shape).astype(_FLOAT[_width(a)]), b.astype(np.int64))
    return _FLOAT[_width(a)](a) * _FLOAT[_width(a)](2.0) ** int(b) if abs(int(b)) < 1000 else \
        np.ldexp(_FLOAT[_width(a)](a), int(b))


def _raw(x):
    w = _width(x)
    return np.asarray(x, dtype=_FLOAT[w]).view(_UINT[w]), w


def _isnan(x):
    return np.isnan(x)


def _isqnan(x):
    raw, w = _raw(x)
    return np.isnan(x) & ((raw >> _UINT[w](_MANT[w] - 1)) & _UINT[w](1) == 1)


def _issnan(x):
    raw, w = _raw(x)
    return np.isnan(x) & ((raw >> _UINT[w](_MANT[w] - 1)) & _UINT[w](1) == 0)


def _quiet(x):
    raw, w = _raw(x)
    out = np.where(np.isnan(x), raw | _UINT[w](1 << (_MANT[w] - 1)), raw).astype(_UINT[w]).view(_FLOAT[w])
    return out if isinstance(x, _ARR) else out[()]


def _abs(x):
    if isinstance(x, (_ARR, np.floating, float)) and (not isinstance(x, _ARR) or x.dtype.kind == "f"):
        return np.abs(x)
    return abs(x) if not isinstance(x, _ARR) else np.array([abs(v) for v in x], dtype=object)


def _sign(x):
    if isinstance(x, (_ARR, np.floating, float)) and (not isinstance(x, _ARR) or x.dtype.kind == "f"):
        s = np.signbit(x)
        return s.astype(object) if isinstance(s, _ARR) else int(s)
    return _int(x < 0)


def _exponent(x):
    raw, w = _raw(x)
    e = (raw >> _UINT[w](_MANT[w])) & _UINT[w]((1 << (w - 1 - _MANT[w])) - 1)
    return e.astype(object) if isinstance(x, _ARR) else int(e)


def _mantissa(x):
    m, _ = np.frexp(x)
    return m.astype(x.dtype) if isinstance(x, _ARR) else type(x)(m) if isinstance(x, np.floating) else m


def _frexp_exp(x):
    e = np.frexp(np.where(np.isfinite(x), x, 0))[1]
    return e.astype(object) if isinstance(x, _ARR) else int(e)


def _isdenorm(x, width=None):
    """x lies in the denormal range of floats of `width` (of its own type when None)."""
    tiny = np.finfo(_FLOAT[width or _width(x)]).tiny
    return (x != 0) & (np.abs(x) < tiny) & ~np.isnan(x)


def _is_zero_signed(x, negative):
    return (x == 0) & (np.signbit(x) == negative)


def _fma_exact_f32(a, b, c, scale=0):
    """fma of float32s (times 2**scale, rounded once): the product is exact in float64, and where the float64
    sum landed exactly halfway between two float32s although the exact sum did not, the lost error picks
    the side."""
    a64, b64, c64 = (np.asarray(v, dtype=np.float64) for v in (a, b, c))
    p = a64 * b64
    s = p + c64
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)  # TwoSum: p + c == s + err exactly (finite values)
    if not isinstance(scale, int) or scale:
        s, err = np.ldexp(s, scale), np.ldexp(err, scale)  # exact: float32 ranges stay normal in float64
    r = s.astype(np.float32)
    other = np.nextafter(r, np.where(s > r.astype(np.float64), np.float32(np.inf), np.float32(-np.inf)))
    midpoint = (r.astype(np.float64) + other.astype(np.float64)) / 2 == s
    fix = midpoint & (err != 0) & np.isfinite(s) & (r.astype(np.float64) != s)
    if np.any(fix):
        toward_other = (err > 0) == (other.astype(np.float64) > r.astype(np.float64))
        r = np.where(fix & toward_other, other, r)
    return r if isinstance(a, _ARR) or isinstance(b, _ARR) or isinstance(c, _ARR) else r[()]


def _fma_exact_f64_one(a, b, c, scale=0):
    a, b, c = float(a), float(b), float(c)
    if math.isfinite(a) and math.isfinite(b) and not math.isfinite(c):
        # the exact product is finite, whatever its rounding would be; + 0.0 quiets a signaling NaN as the
        # hardware does (returning c itself kept its bits)
        return c + 0.0
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return a * b + c
    exact = (Fraction(a) * Fraction(b) + Fraction(c)) * Fraction(2) ** scale
    if exact == 0:
        return (a * b) + c  # sign of zero as IEEE says for the rounded sum
    try:
        return float(exact)  # Fraction → float rounds to nearest, ties to even
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def _fma_scaled(a, b, c, scale):
    """2**scale * fma(a, b, c) with one rounding (the scaled fma of v_div_fmas)."""
    if max(_width(a), _width(b), _width(c)) == 64:
        if not any(isinstance(v, _ARR) for v in (a, b, c, scale)):
            return np.float64(_fma_exact_f64_one(a, b, c, int(scale)))
        n = max(np.size(v) for v in (a, b, c, scale))
        a, b, c = (np.broadcast_to(np.asarray(v, dtype=np.float64), (n,)) for v in (a, b, c))
        scale = np.broadcast_to(np.asarray(scale, dtype=object), (n,))
        return np.array([_fma_exact_f64_one(x, y, z, int(k)) for x, y, z, k in zip(a, b, c, scale)],
                        dtype=np.float64)
    return _fma_exact_f32(a, b, c, np.asarray(scale, dtype=object).astype(np.int64))


def _fma(a, b, c):
    w = max(_width(a), _width(b), _width(c))
    if w == 64:
        if any(isinstance(v, _ARR) for v in (a, b, c)):
            n = max(np.size(v) for v in (a, b, c))
            a, b, c = (np.broadcast_to(np.asarray(v, dtype=np.float64), (n,)) for v in (a, b, c))
            return np.array([_fma_exact_f64_one(x, y, z) for x, y, z in zip(a, b, c)], dtype=np.float64)
        return np.float64(_fma_exact_f64_one(a, b, c))
    if w == 16:
        out = (np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)).astype(np.float16)
        return out if any(isinstance(v, _ARR) for v in (a, b, c)) else out[()]
    return _fma_exact_f32(a, b, c)


def _ldexp(x, e):
    e = np.clip(np.asarray(e, dtype=object).astype(np.int64), -2000, 2000)
    out = np.ldexp(x, e.astype(np.int32))
    return out


def _floor(x):
    return np.floor(x)


def _rint(x):
    return np.rint(x)


def _trunc(x):
    return np.trunc(x)


def _sqrt(x):
    return np.sqrt(x)


def _fract(x):
    return x - np.floor(x)


def _iseven(x):
    return np.asarray(x) % 2 == 0


def _log2(x):
    return np.log2(x)


def _pow(a, b):
    return np.power(a, b)


def _sin(x):
    return np.sin(x)


def _cos(x):
    return np.cos(x)


def _signext(x):
    return x


def _signext_from_bit(x, width):
    return _sext(x, width)


def _f_to_int(x, lo, hi):
    f = np.asarray(x, dtype=np.float64)
    t = np.where(np.isnan(f), 0.0, np.clip(np.trunc(f), lo, hi))
    if isinstance(x, _ARR):
        return np.array([int(v) for v in t], dtype=object)
    return int(t)


def _f_to_i32(x):
    return _f_to_int(x, -(1 << 31), (1 << 31) - 1)


def _f_to_u32(x):
    return _f_to_int(x, 0, (1 << 32) - 1)


def _f_to_i16(x):
    return _f_to_int(x, -(1 << 15), (1 << 15) - 1)


def _f_to_u16(x):
    return _f_to_int(x, 0, (1 << 16) - 1)


def _f_to_u8(x):
    return _f_to_int(x, 0, 255)


def _to_float(x, width):
    """A conversion instruction's value conversion: integers by value, floats rounded, NaNs made quiet
    (keeping sign and payload), as the hardware's v_cvt_* do."""
    if isinstance(x, _ARR) and x.dtype == object:
        return _itof(x, width)
    if isinstance(x, (int, bool)):
        return _FLOAT[width](float(x))
    if np.asarray(x).dtype.kind == "f":
        return _quiet(_fcast(x, width))
    return _FLOAT[width](x)


def _to_f32(x):
    return _to_float(x, 32)


def _to_f64(x):
    return _to_float(x, 64)


def _to_f16(x):
    return _to_float(x, 16)


def _bf16_to_f32(x):
    return _asf(_int(x) << 16, 32)


def _f32_to_bf16(x):
    bits = _bits(_fcast(x, 32), 32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return _sel(_isnan(x), (bits >> 16) | 0x40, rounded)


def _u8(x):
    return x & 0xFF


def _u16(x):
    return x & 0xFFFF


def _u4(x):
    return x & 0xF


def _i8(x):
    return _sext(x, 8)


def _i16(x):
    return _sext(x, 16)


def _i4(x):
    return _sext(x, 4)


def _minmax(a, b, less: bool):
    """IEEE minNum/maxNum as AMD does it: a NaN operand yields the other, -0 orders below +0."""
    a, b = np.asarray(a), np.asarray(b)
    both_zero = (a == 0) & (b == 0)
    pick_a = (a < b) if less else (a > b)
    zero_pick_a = np.signbit(a) if less else ~np.signbit(a)
    pick_a = np.where(both_zero, zero_pick_a, pick_a)
    out = np.where(pick_a, a, b)
    out = np.where(np.isnan(a), b, np.where(np.isnan(b), a, out))
    return out if out.ndim else out[()]


def _vmin(a, b):
    return _minmax(a, b, True)


def _vmax(a, b):
    return _minmax(a, b, False)


def _vminimum(a, b):
    out = _vmin(a, b)
    return np.where(np.isnan(a) | np.isnan(b), np.float32(np.nan), out)


def _vmaximum(a, b):
    out = _vmax(a, b)
    return np.where(np.isnan(a) | np.isnan(b), np.float32(np.nan), out)


def _absdiff(a, b):
    return _sel(_b(a > b), a - b, b - a)


def _sat8(x):
    return _sel(_b(x > 127), 127, _sel(_b(x < -128), -128, x))


HELPERS = {name: value for name, value in globals().items() if name.startswith("_") and not name.startswith("__")}
HELPERS["np"] = np
