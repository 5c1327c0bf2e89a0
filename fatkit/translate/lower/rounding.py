"""Exact IEEE 754 rounding of f32/f64 arithmetic for PTX: directed modes (.rz/.rm/.rp), .ftz and .sat.

LLVM's arithmetic rounds to nearest even, and a run-time rounding mode would need strictfp functions with
every floating-point operation constrained. Instead a directed operation is computed as r = the
round-to-nearest result and then moved by at most one ulp, after finding the sign of (exact − r) exactly:

- sums: TwoSum gives the rounding error of a + b exactly (it is always representable);
- products, quotients, square roots: the operands are scaled by powers of two (frexp/ldexp) to mantissas
  near 1 and r likewise, so the residual a·b − r, a − r·b or a − r·r computed by one fma cannot underflow
  and has the sign of the error (round-to-nearest keeps the sign of a non-underflowing value);
- f32 fma: a·b is exact in f64, TwoSum in f64 adds c, and the pair is rounded to f32 by its sign;
- f64 fma: ErrFma (Boldo–Muller) gives the error as a sum of two doubles, after scaling a tiny product.

Where the target switches the hardware rounding mode around one instruction (`Target.directed`: AMD),
add/sub/mul/fma with .rz/.rm/.rp and no .ftz are that instead.

Moving by one ulp is integer arithmetic on the bit pattern (magnitude ± 1), which also turns an overflow
to infinity into the largest finite value where the mode asks for it. .ftz flushes a result whose exact
value is below the smallest normal, as NVIDIA GPUs do (tininess before rounding; checked on an H200).
"""

from __future__ import annotations

from llvmlite import ir

from fatkit.translate.lower.types import F32, F64, I1, I32, I64

ROUNDINGS = ("rn", "rz", "rm", "rp")
_BITS = {F32: I32, F64: I64}
_SIGN = {F32: 1 << 31, F64: 1 << 63}
_EXPONENT = {F32: 0x7F800000, F64: 0x7FF0000000000000}
_CANONICAL_NAN = {F32: 0x7FFFFFFF, F64: 0x7FFFFFFFFFFFFFFF}
_MANGLED = {F32: "f32", F64: "f64"}


def canonical_nan(ty: ir.Type) -> ir.Value:
    """PTX's canonical NaN (all exponent and mantissa bits set, sign clear)."""
    return ir.Constant(_BITS[ty], _CANONICAL_NAN[ty]).bitcast(ty)


def _int(value: int) -> ir.Constant:
    return ir.Constant(I32, value)


def _zero(ty: ir.Type) -> ir.Constant:
    return ir.Constant(ty, 0.0)


def _declare(builder: ir.IRBuilder, name: str, result: ir.Type, args: list[ir.Type]) -> ir.Function:
    module = builder.module
    return module.globals.get(name) or ir.Function(module, ir.FunctionType(result, args), name)


def frexp(builder: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """x = mantissa · 2^exponent, |mantissa| in [0.5, 1) (0, inf and NaN come back as themselves)."""
    function = _declare(builder, f"llvm.frexp.{_MANGLED[x.type]}.i32", ir.LiteralStructType([x.type, I32]),
                        [x.type])
    pair = builder.call(function, [x])
    return builder.extract_value(pair, 0), builder.extract_value(pair, 1)


def ldexp(builder: ir.IRBuilder, x: ir.Value, exponent: ir.Value) -> ir.Value:
    function = _declare(builder, f"llvm.ldexp.{_MANGLED[x.type]}.i32", x.type, [x.type, I32])
    return builder.call(function, [x, exponent])


def fma(builder: ir.IRBuilder, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
    function = _declare(builder, f"llvm.fma.{_MANGLED[a.type]}", a.type, [a.type] * 3)
    return builder.call(function, [a, b, c])


def bits(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return builder.bitcast(x, _BITS[x.type])


def is_finite(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    exponent = builder.and_(bits(builder, x), ir.Constant(_BITS[x.type], _EXPONENT[x.type]))
    return builder.icmp_unsigned("!=", exponent, ir.Constant(_BITS[x.type], _EXPONENT[x.type]))


def is_nan(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return builder.fcmp_unordered("uno", x, x)


def is_positive_zero(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return builder.icmp_unsigned("==", bits(builder, x), ir.Constant(_BITS[x.type], 0))


_SUBNORMAL_CLASSES = 0x90  # llvm.is.fpclass: negative (bit 4) and positive (bit 7) subnormals


def in_classes(builder: ir.IRBuilder, x: ir.Value, classes: int) -> ir.Value:
    """llvm.is.fpclass: whether x is of one of the `classes` (its bit mask), read off the bits as they are."""
    function = _declare(builder, f"llvm.is.fpclass.{_MANGLED[x.type]}", I1, [x.type, I32])
    return builder.call(function, [x, _int(classes)])


def flush(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """.ftz: a subnormal becomes a zero of its sign. The class test (v_cmp_class on AMD) reads the bits as
    they are, whatever denormal mode the function is compiled for, so nothing folds it away."""
    ity = _BITS[x.type]
    subnormal = in_classes(builder, x, _SUBNORMAL_CLASSES)
    signed_zero = builder.bitcast(builder.and_(bits(builder, x), ir.Constant(ity, _SIGN[x.type])), x.type)
    return builder.select(subnormal, signed_zero, x)


def saturate(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """.sat: clamp to [0.0, 1.0]; NaN and −0.0 become +0.0. LLVM makes minnum(maxnum(x + 0.0, +0.0), 1.0)
    the clamp output modifier (folded into an arithmetic instruction before it, where there is one), which
    AMD GPUs run with DX10_CLAMP set: NaN becomes +0. Adding +0.0 first turns −0.0 into +0.0 (IEEE 754,
    round to nearest), so the result does not depend on what the clamp does with −0.0; it also makes a NaN
    an arithmetic result, quiet, of which maxnum gives the other operand (as maximumnum would: AMDGPU folds
    only maxnum into the clamp when MODE.IEEE is off)."""
    name = _MANGLED[x.type]
    positive_zero = builder.fadd(x, _zero(x.type))
    low = builder.call(_declare(builder, f"llvm.maxnum.{name}", x.type, [x.type] * 2),
                       [positive_zero, _zero(x.type)])
    return builder.call(_declare(builder, f"llvm.minnum.{name}", x.type, [x.type] * 2),
                        [low, ir.Constant(x.type, 1.0)])


def _step(builder: ir.IRBuilder, nearest: ir.Value, above: ir.Value, below: ir.Value, mode: str) -> ir.Value:
    """`nearest` moved one ulp the way `mode` rounds, given whether the exact result lies above or below it."""
    ity = _BITS[nearest.type]
    pattern = bits(builder, nearest)
    negative = builder.icmp_signed("<", pattern, ir.Constant(ity, 0))
    positive = builder.not_(negative)
    if mode == "rz":  # towards zero: shrink the magnitude when the exact value is smaller
        grow, shrink = ir.Constant(I1, 0), builder.select(negative, above, below)
    elif mode == "rp":
        grow, shrink = builder.and_(above, positive), builder.and_(above, negative)
    elif mode == "rm":
        grow, shrink = builder.and_(below, negative), builder.and_(below, positive)
    else:
        raise ValueError(mode)
    delta = builder.sub(builder.zext(grow, ity), builder.zext(shrink, ity))
    return builder.bitcast(builder.add(pattern, delta), nearest.type)


def _overflowed(builder: ir.IRBuilder, nearest: ir.Value, finite_exact: ir.Value,
                above: ir.Value, below: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Where round-to-nearest overflowed to ±inf from a finite exact value, that value lies towards zero."""
    overflow = builder.and_(finite_exact, builder.not_(is_finite(builder, nearest)))
    negative = builder.fcmp_ordered("<", nearest, _zero(nearest.type))
    return (builder.or_(above, builder.and_(overflow, negative)),
            builder.or_(below, builder.and_(overflow, builder.not_(negative))))


def _by_sign(builder: ir.IRBuilder, residual: ir.Value) -> tuple[ir.Value, ir.Value]:
    zero = _zero(residual.type)
    return builder.fcmp_ordered(">", residual, zero), builder.fcmp_ordered("<", residual, zero)


def _sign_of_sum(builder: ir.IRBuilder, major: ir.Value, minor: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(above, below): the sign of major + minor where a non-zero `major` outweighs `minor`."""
    m_up, m_down = _by_sign(builder, major)
    n_up, n_down = _by_sign(builder, minor)
    major_zero = builder.fcmp_ordered("==", major, _zero(major.type))
    return builder.or_(m_up, builder.and_(major_zero, n_up)), builder.or_(m_down, builder.and_(major_zero, n_down))


def _all_finite(builder: ir.IRBuilder, *values: ir.Value) -> ir.Value:
    result = ir.Constant(I1, 1)
    for value in values:
        result = builder.and_(result, is_finite(builder, value))
    return result


def two_sum(builder: ir.IRBuilder, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
    """s = RN(a + b) and its error e, a + b = s + e exactly (Knuth; no overflow)."""
    s = builder.fadd(a, b)
    b_virtual = builder.fsub(s, a)
    a_virtual = builder.fsub(s, b_virtual)
    e = builder.fadd(builder.fsub(a, a_virtual), builder.fsub(b, b_virtual))
    return s, e


def _negative_zero_sum(builder: ir.IRBuilder, result: ir.Value, above: ir.Value, below: ir.Value,
                       both_positive_zero: ir.Value) -> ir.Value:
    """IEEE 754: an exact zero sum of operands that are not both +0 is −0 when rounding towards −inf
    (a rounded tiny sum keeps its own sign)."""
    minus_zero = ir.Constant(_BITS[result.type], _SIGN[result.type]).bitcast(result.type)
    exact = builder.not_(builder.or_(above, below))
    turn = builder.and_(builder.and_(is_positive_zero(builder, result), exact), builder.not_(both_positive_zero))
    return builder.select(turn, minus_zero, result)


def _flush_tiny(builder: ir.IRBuilder, result: ir.Value, nearest: ir.Value, directions) -> ir.Value:
    """.ftz as NVIDIA GPUs do it: a result is flushed to a zero of its sign when the exact value is below
    the smallest normal in magnitude (tininess before rounding), even where it rounds up to that normal.
    Only where round-to-nearest gave exactly ±2^-126 does that need the error's sign: `directions()`
    (above, below) is computed there, on a branch that is rarely taken."""
    smallest_normal = ir.Constant(I32, 0x00800000)
    magnitude = builder.and_(bits(builder, nearest), ir.Constant(I32, 0x7FFFFFFF))
    entry = builder.block
    with builder.if_then(builder.icmp_unsigned("==", magnitude, smallest_normal), likely=False):
        above, below = directions()
        towards_zero = builder.select(builder.icmp_signed("<", bits(builder, nearest), ir.Constant(I32, 0)),
                                      above, below)
        boundary = builder.block
    rounded_up = builder.phi(I1)
    rounded_up.add_incoming(ir.Constant(I1, 0), entry)
    rounded_up.add_incoming(towards_zero, boundary)
    tiny = builder.or_(builder.icmp_unsigned("<", magnitude, smallest_normal), rounded_up)
    signed_zero = builder.bitcast(builder.and_(bits(builder, result), ir.Constant(I32, 1 << 31)), F32)
    return builder.select(tiny, signed_zero, result)


def _rounded(builder: ir.IRBuilder, mode: str, nearest: ir.Value, directions, ftz: bool = False,
             zero_sum_of=None) -> ir.Value:
    """`nearest` rounded as `mode` asks, then flushed for .ftz. `directions()` gives (above, below): whether
    the exact value lies above or below `nearest`; it is only built where needed. For sums, `zero_sum_of()`
    says whether the terms are both +0 (see `_negative_zero_sum`)."""
    if mode == "rn":
        return _flush_tiny(builder, nearest, nearest, directions) if ftz else nearest
    above, below = directions()
    result = _step(builder, nearest, above, below, mode)
    if mode == "rm" and zero_sum_of is not None:
        result = _negative_zero_sum(builder, result, above, below, zero_sum_of())
    return _flush_tiny(builder, result, nearest, lambda: (above, below)) if ftz else result


def add(builder: ir.IRBuilder, mode: str, a: ir.Value, b: ir.Value, ftz: bool = False) -> ir.Value:
    # .ftz needs no tininess test: a sum below the smallest normal is exact (and flushed afterwards)
    nearest, error = two_sum(builder, a, b)
    return _rounded(
        builder, mode, nearest,
        lambda: _overflowed(builder, nearest, _all_finite(builder, a, b), *_by_sign(builder, error)),
        zero_sum_of=lambda: builder.and_(is_positive_zero(builder, a), is_positive_zero(builder, b)))


def mul(builder: ir.IRBuilder, mode: str, a: ir.Value, b: ir.Value, ftz: bool = False) -> ir.Value:
    nearest = builder.fmul(a, b)

    def directions():
        (ma, ea), (mb, eb) = frexp(builder, a), frexp(builder, b)
        scaled = ldexp(builder, nearest, builder.neg(builder.add(ea, eb)))
        residual = fma(builder, ma, mb, builder.fneg(scaled))  # ≈ a·b − nearest, scaled to near 1
        return _overflowed(builder, nearest, _all_finite(builder, a, b), *_by_sign(builder, residual))

    if ftz and a.type == F32:
        # the tininess of the exact product from the product in f64, which is exact (48 bits, exponents
        # from −252 to 256): cheaper than the error's sign at ±2^-126, and without a branch
        result = _rounded(builder, mode, nearest, directions)
        exact = builder.fmul(builder.fpext(a, F64), builder.fpext(b, F64))
        magnitude = builder.call(_declare(builder, "llvm.fabs.f64", F64, [F64]), [exact])
        tiny = builder.fcmp_ordered("<", magnitude, ir.Constant(F64, 2.0 ** -126))
        signed_zero = builder.bitcast(builder.and_(bits(builder, result), ir.Constant(I32, 1 << 31)), F32)
        return builder.select(tiny, signed_zero, result)
    return _rounded(builder, mode, nearest, directions, ftz)


def div(builder: ir.IRBuilder, mode: str, a: ir.Value, b: ir.Value, ftz: bool = False) -> ir.Value:
    nearest = builder.fdiv(a, b)

    def directions():
        (ma, ea), (mb, eb) = frexp(builder, a), frexp(builder, b)
        scaled = ldexp(builder, nearest, builder.sub(eb, ea))
        residual = fma(builder, builder.fneg(scaled), mb, ma)  # (a/b − nearest)·b, scaled
        up, down = _by_sign(builder, residual)
        divisor_positive = builder.fcmp_ordered(">", mb, _zero(mb.type))
        above, below = builder.select(divisor_positive, up, down), builder.select(divisor_positive, down, up)
        finite = builder.and_(_all_finite(builder, a, b), builder.fcmp_ordered("!=", b, _zero(b.type)))
        return _overflowed(builder, nearest, finite, above, below)

    return _rounded(builder, mode, nearest, directions, ftz)


def sqrt(builder: ir.IRBuilder, mode: str, a: ir.Value) -> ir.Value:
    # (.ftz needs no tininess test: the root of a normal number is far above the smallest normal)
    nearest = builder.call(_declare(builder, f"llvm.sqrt.{_MANGLED[a.type]}", a.type, [a.type]), [a])

    def directions():
        mantissa, exponent = frexp(builder, a)
        odd = builder.trunc(exponent, I1)
        mantissa = builder.select(odd, builder.fmul(mantissa, ir.Constant(a.type, 2.0)), mantissa)
        half = builder.ashr(builder.sub(exponent, builder.zext(odd, I32)), _int(1))
        scaled = ldexp(builder, nearest, builder.neg(half))
        residual = fma(builder, builder.fneg(scaled), scaled, mantissa)  # a − nearest², scaled
        return _by_sign(builder, residual)

    return _rounded(builder, mode, nearest, directions)


def fma_f32(builder: ir.IRBuilder, mode: str, a: ir.Value, b: ir.Value, c: ir.Value, ftz: bool = False) -> ir.Value:
    nearest = fma(builder, a, b, c)

    def directions():
        product = builder.fmul(builder.fpext(a, F64), builder.fpext(b, F64))  # exact: 48 bits, wide range
        high, low = two_sum(builder, product, builder.fpext(c, F64))  # a·b + c = high + low exactly
        # high − nearest is exact (Sterbenz, or nearest = 0), a multiple of high's ulp or ±inf on overflow;
        # |low| is at most half that ulp, so the error's sign is that difference's, or low's where it is 0.
        return _sign_of_sum(builder, builder.fsub(high, builder.fpext(nearest, F64)), low)

    return _rounded(builder, mode, nearest, directions, ftz,
                    zero_sum_of=lambda: _product_and_addend_positive_zero(builder, a, b, c))


def _product_and_addend_positive_zero(builder: ir.IRBuilder, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
    zero = _zero(a.type)
    product_zero = builder.or_(builder.fcmp_ordered("==", a, zero), builder.fcmp_ordered("==", b, zero))
    same_sign = builder.icmp_signed(">=", builder.xor(bits(builder, a), bits(builder, b)),
                                    ir.Constant(_BITS[a.type], 0))
    return builder.and_(builder.and_(product_zero, same_sign), is_positive_zero(builder, c))


def fma_f64(builder: ir.IRBuilder, mode: str, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
    nearest = fma(builder, a, b, c)

    def directions():
        (_, ea), (_, eb), (_, ec) = frexp(builder, a), frexp(builder, b), frexp(builder, c)
        product_exponent = builder.add(ea, eb)
        # ErrFma needs a·b's rounding error representable: a tiny product is scaled up (its smaller factor
        # and c), a huge one down (its larger factor and c) by 2^shift; nearest is scaled alike (exactly).
        tiny = builder.icmp_signed("<", product_exponent, _int(-968))
        huge = builder.icmp_signed(">", product_exponent, _int(960))
        shift = builder.select(tiny, builder.sub(_int(-500), product_exponent),
                               builder.select(huge, builder.sub(_int(960), product_exponent), _int(0)))
        scale_a = builder.select(tiny, builder.icmp_signed("<=", ea, eb), builder.icmp_signed(">", ea, eb))
        a_scaled = builder.select(scale_a, ldexp(builder, a, shift), a)
        b_scaled = builder.select(scale_a, b, ldexp(builder, b, shift))
        c_scaled = ldexp(builder, c, shift)
        # c scaled down below the smallest subnormal is negligible beside the product; only its sign counts.
        smallest = ir.Constant(I64, 1).bitcast(F64)
        lost = builder.and_(builder.fcmp_ordered("==", c_scaled, _zero(F64)),
                            builder.fcmp_ordered("!=", c, _zero(F64)))
        copysign = _declare(builder, "llvm.copysign.f64", F64, [F64, F64])
        c_scaled = builder.select(lost, builder.call(copysign, [smallest, c]), c_scaled)
        target = ldexp(builder, nearest, shift)
        # ErrFma (Boldo–Muller): a·b + c = r1 + error exactly, error's sign that of RN(γ + α2).
        r1 = fma(builder, a_scaled, b_scaled, c_scaled)
        u1 = builder.fmul(a_scaled, b_scaled)
        u2 = fma(builder, a_scaled, b_scaled, builder.fneg(u1))
        alpha1, alpha2 = two_sum(builder, c_scaled, u2)
        beta1, beta2 = two_sum(builder, u1, alpha1)
        gamma = builder.fadd(builder.fsub(beta1, r1), beta2)
        error = builder.fadd(gamma, alpha2)
        # r1 − target is exact; non-zero, it is at least an ulp of r1 and outweighs the error.
        above, below = _sign_of_sum(builder, builder.fsub(r1, target), error)
        # A tiny product beside a c more than 110 binades larger: nearest is c, the error is the product.
        far_above = builder.icmp_signed(">", ec, builder.add(product_exponent, _int(110)))
        dominant = builder.and_(builder.and_(tiny, far_above), builder.fcmp_ordered("!=", c, _zero(F64)))
        p_up, p_down = _by_sign(builder, builder.fmul(a_scaled, b_scaled))
        above, below = builder.select(dominant, p_up, above), builder.select(dominant, p_down, below)
        # Otherwise exact: ±inf or NaN; or a zero product, when the result is c (whose scaling above, by a
        # product exponent frexp makes up for 0, could lose it).
        exact = builder.or_(builder.not_(_all_finite(builder, a, b, c)),
                            builder.or_(builder.fcmp_ordered("==", a, _zero(F64)), builder.fcmp_ordered("==", b, _zero(F64))))
        inexact = builder.not_(exact)
        return _overflowed(builder, nearest, inexact, builder.and_(above, inexact), builder.and_(below, inexact))

    return _rounded(builder, mode, nearest, directions,
                    zero_sum_of=lambda: _product_and_addend_positive_zero(builder, a, b, c))
