"""Floating-point instructions on f32 and f64, as the PTX ISA defines them.

add/sub/mul/fma/mad/div/rcp/sqrt with IEEE rounding (.rn/.rz/.rm/.rp, exact: see `rounding`), .ftz
(f32: subnormal inputs, and results whose exact value is subnormal, become zeros of their sign) and .sat
(clamp to [0, 1], NaN → +0);
the .approx/.full functions (div, rcp, rsqrt, sqrt, ex2, lg2, sin, cos, tanh) through the target's
`approximate`; min/max with their NaN rules, .NaN and .xorsign.abs; abs, neg, copysign and testp.
"""

from __future__ import annotations

import weakref

from llvmlite import ir

from fatkit.translate.lower import rounding
from fatkit.translate.lower.core import F32, F64, I32, I64, Lowering, handles
from fatkit.translate.passes.base import operand_names
from fatkit.translate.ptx import ast

_ROUNDINGS = set(rounding.ROUNDINGS)


def _type(lw: Lowering, ins: ast.Instruction) -> str:
    (t,) = lw.types(ins, 1)
    if t not in ("f32", "f64"):
        raise lw.fail(f"type .{t} is not a floating-point type of this instruction")
    return t


def _one_rounding(lw: Lowering, ins: ast.Instruction) -> str | None:
    modes = [m for m in ins.modifiers if m in _ROUNDINGS]
    if len(modes) > 1:
        raise lw.fail("more than one rounding modifier")
    return modes[0] if modes else None


def _ftz(lw: Lowering, ins: ast.Instruction) -> bool:
    """.ftz as written, or implied: the rounding pass writes out PTX's defaults (f32 flushes on sm_1x)."""
    mode = lw.float_mode(ins)
    return "ftz" in ins.modifiers or bool(mode and mode.ftz)


def _kind(lw: Lowering, ins: ast.Instruction) -> tuple[str | None, str | None]:
    """div/rcp/sqrt: (rounding, "approx" | "full" | None) as written or, in PTX 1.0–1.3 modules, by default
    (.f32 .approx.ftz, .f64 .rn, as the rounding pass wrote them out)."""
    rounding = _one_rounding(lw, ins)
    kind = [m for m in ("approx", "full") if m in ins.modifiers]
    if len(kind) > 1 or (kind and rounding):
        raise lw.fail(f"{ins.opcode} takes one of .approx, .full or a rounding")
    mode = lw.float_mode(ins)
    if rounding is None and not kind and mode is not None:
        return mode.rounding, "approx" if mode.approx else None
    return rounding, kind[0] if kind else None


def _options(lw: Lowering, ins: ast.Instruction, t: str, allowed: set[str]) -> tuple[bool, bool]:
    """Check the modifiers against `allowed`; returns (.ftz, .sat), which only f32 may carry."""
    lw.check_modifiers(ins, allowed)
    if t == "f64" and ("ftz" in ins.modifiers or "sat" in ins.modifiers):
        raise lw.fail(".ftz and .sat are defined for .f32 only")
    return _ftz(lw, ins), "sat" in ins.modifiers


def _sources(lw: Lowering, ins: ast.Instruction, t: str, ftz: bool, count: int, flushed_by_op: bool = False) -> tuple:
    """The destination and the `count` sources, flushed for .ftz, except under the flushing mode where the
    operation (`flushed_by_op`: f32 add/sub/mul/fma/min/max) flushes its inputs itself."""
    d, *sources = lw.operands(ins, count + 1)
    values = [lw.read(s, t) for s in sources]
    if ftz and not (flushed_by_op and lw.flushing and t == "f32"):
        values = [lw.flush(v) for v in values]
    return d, values


def _finish(lw: Lowering, d, value: ir.Value, t: str, ftz: bool, sat: bool = False) -> None:
    if ftz:
        value = lw.flush(value)
    if sat:
        value = rounding.saturate(lw.builder, value)
    lw.write(d, value, t)


def _approximation(lw, ins, function: str, t: str, ftz: bool) -> None:
    """d = the .approx `function` of the one source: the target's own .ftz form where it has one, else its
    `approximate` between flushes of the source and the result."""
    d, a = lw.operands(ins, 2)
    b, x = lw.builder, lw.read(a, t)
    native = lw.target.approximate_ftz(b, function, x, lw.flushing) if ftz else None
    if native is not None:
        lw.write(d, native, t)
        return
    _finish(lw, d, lw.target.approximate(b, function, lw.flush(x) if ftz else x), t, ftz)


_PLAIN = {"add": "fadd", "sub": "fsub", "mul": "fmul"}
_SMALLEST_NORMAL = 2.0 ** -126


def _flushing_arithmetic(lw: Lowering, operation: str, mode: str, values: list[ir.Value]) -> ir.Value:
    """An .ftz f32 add/sub/mul/fma under the flushing mode: the one instruction (a mode switch around it
    for a directed rounding), which flushes subnormal inputs and results itself.

    What the mode does not give is PTX's tininess: NVIDIA GPUs flush a result whose exact value is below
    2^-126 (tininess before rounding), also where it rounds to ±2^-126, which a flush after rounding keeps.
    A sum that small is exact. For a product, fma(|a|, |b|, -2^-126) has the sign of |a·b| − 2^-126 (one
    rounding; a tiny difference flushes to a zero of its sign, an exact one is +0); for an fma, the result
    rounded towards zero is ±0 exactly when the exact value is tiny (or zero), and then it is the result but
    towards −inf (where an exact zero sum of terms of both signs is −0). Both hold whichever tininess the
    hardware's flush uses; rounded towards zero, the result is below 2^-126 exactly where the exact value
    is, so the flush after rounding is PTX's."""
    b = lw.builder
    if mode == "rn":
        if operation == "fma":
            value = rounding.fma(b, *values)
        else:
            value = getattr(b, _PLAIN[operation])(*values)
        value = lw.intrinsic("llvm.canonicalize", [value])  # where LLVM folded it away (x·1.0), the flush
    else:
        value = lw.target.directed(b, operation, mode, values, flushing=True)
        if value is None:
            raise lw.fail(f"{operation}.{mode}.ftz.f32 needs the target's rounding mode switch")
    if mode == "rz":  # a result rounded towards zero is below 2^-126 exactly when the exact value is
        return value
    if operation == "mul":
        # The difference is negative (−0 included) exactly when the product is tiny, and then `value` is
        # ±0 or ±2^-126: scaled by 2^(its bits as a negative integer, below −2^31 + 2^23) it is the zero of
        # its sign, and unchanged by 2^0 otherwise (NaN and ±inf results stay NaN and ±inf).
        magnitudes = [lw.intrinsic("llvm.fabs", [v]) for v in values]
        difference = rounding.fma(b, *magnitudes, ir.Constant(F32, -_SMALLEST_NORMAL))
        scale = lw.intrinsic("llvm.smin", [rounding.bits(b, difference), ir.Constant(I32, 0)])
        return rounding.ldexp(b, value, scale)
    if operation != "fma":
        return value
    towards_zero = lw.target.directed(b, "fma", "rz", values, flushing=True)
    if towards_zero is None:
        raise lw.fail("fma.ftz.f32 needs the target's rounding mode switch")
    if mode != "rm":  # then the zero rounded towards zero is the result: an exact zero sum of terms of both
        # signs is +0 in these modes, a tiny one keeps its sign. Not tiny, `value` lies between the result
        # towards zero and twice it (nearest and upwards are at most an ulp above it in magnitude, ±inf where
        # twice it is); tiny, twice it is the same zero: the median of the three is the result, one
        # instruction where the target has it (NaN: all three NaN), else a compare and a select
        median = lw.target.median(b, value, b.fmul(towards_zero, ir.Constant(F32, 2.0)), towards_zero)
        if median is not None:
            return median
    tiny = b.fcmp_ordered("==", towards_zero, ir.Constant(F32, 0.0))
    if mode != "rm":
        return b.select(tiny, towards_zero, value)
    signed_zero = b.bitcast(b.and_(rounding.bits(b, value), ir.Constant(I32, 1 << 31)), F32)
    return b.select(tiny, signed_zero, value)


def _arithmetic(lw, ins, count: int, compute, operation: str) -> None:
    """add/sub/mul/fma/mad: {.rnd}{.ftz}{.sat}, .rn where no rounding is given. A directed rounding without
    .ftz is a hardware mode switch where the target has one; with .ftz it is one under the flushing mode
    (`_flushing_arithmetic`), else the exact path: NVIDIA GPUs flush by the exact value's tininess."""
    t = _type(lw, ins)
    mode = _one_rounding(lw, ins) or "rn"
    ftz, sat = _options(lw, ins, t, _ROUNDINGS | {"ftz", "sat"})
    d, values = _sources(lw, ins, t, ftz, count, flushed_by_op=True)
    if ftz and lw.flushing and t == "f32":
        _finish(lw, d, _flushing_arithmetic(lw, operation, mode, values), t, False, sat)
        return
    value = lw.target.directed(lw.builder, operation, mode, values) if mode != "rn" and not ftz else None
    if value is None:
        value = compute(lw.builder, mode, *values, **({"ftz": True} if ftz else {}))
    # (mul and fma flush by the exact result's tininess themselves; a sum below 2^-126 is exact)
    _finish(lw, d, value, t, ftz and operation in ("add", "sub"), sat)


@handles("add", family="float")
def add(lw: Lowering, ins: ast.Instruction) -> None:
    _arithmetic(lw, ins, 2, rounding.add, "add")


@handles("sub", family="float")
def sub(lw: Lowering, ins: ast.Instruction) -> None:
    _arithmetic(lw, ins, 2, lambda b, mode, x, y, **ftz: rounding.add(b, mode, x, b.fneg(y), **ftz), "sub")


@handles("mul", family="float")
def mul(lw: Lowering, ins: ast.Instruction) -> None:
    _arithmetic(lw, ins, 2, rounding.mul, "mul")


@handles("fma", "mad", family="float")
def fma(lw: Lowering, ins: ast.Instruction) -> None:
    if _one_rounding(lw, ins) is None:  # (mad.f32 without one is sm_1x's, with a truncated product)
        raise lw.fail(f"{ins.opcode} needs a rounding modifier (.rn/.rz/.rm/.rp)")
    t = _type(lw, ins)
    _arithmetic(lw, ins, 3, rounding.fma_f32 if t == "f32" else rounding.fma_f64, "fma")


def _divide_approximately(lw: Lowering, a: ir.Value, b: ir.Value) -> ir.Value:
    """a·(1/b). A subnormal b is scaled by 2^24 first (and the quotient after), as NVIDIA GPUs do: its
    reciprocal would overflow, and 0/b would become NaN where an H200 gives 0."""
    builder, scale = lw.builder, ir.Constant(F32, 2.0 ** 24)
    subnormal = builder.fcmp_ordered("<", lw.intrinsic("llvm.fabs", [b]), ir.Constant(F32, 2.0 ** -126))
    divisor = builder.select(subnormal, builder.fmul(b, scale), b)
    quotient = builder.fmul(a, lw.flush(lw.target.approximate(builder, "rcp", divisor)))
    return builder.select(subnormal, builder.fmul(quotient, scale), quotient)


@handles("div", family="float")
def div(lw: Lowering, ins: ast.Instruction) -> None:
    t = _type(lw, ins)
    mode, kind = _kind(lw, ins)
    if mode is None and kind is None:
        raise lw.fail("div of floats needs one of .approx, .full or a rounding")
    ftz, _ = _options(lw, ins, t, _ROUNDINGS | {"approx", "full", "ftz"})
    if kind and t != "f32":
        raise lw.fail(f"div.{kind} is defined for .f32 only")
    d, (a, b) = _sources(lw, ins, t, ftz, 2)
    if mode is not None:
        value = rounding.div(lw.builder, mode, a, b, ftz)
    elif kind == "full":  # at most 2 ulp over the full range: an IEEE division is within that
        value = lw.builder.fdiv(a, b)
    else:  # a·(1/b), the reciprocal flushed: for 2^126 < |b| < 2^128 a zero of a's sign, or NaN for a = inf
        value = _divide_approximately(lw, a, b)
    _finish(lw, d, value, t, ftz)


def _upper_word(lw: Lowering, a: ir.Value, function: str, compute) -> ir.Value:
    """rcp/rsqrt.approx.ftz.f64: `compute` of a's upper 32 bits (1.11.20), the result truncated to its
    upper 32 bits, subnormals flushed and every NaN the canonical 0x7fffffff00000000 (or the target's own
    instruction, where it has one)."""
    b = lw.builder
    native = lw.target.approximate_f64(b, function, a)
    if native is not None:
        return native
    upper = ir.Constant(I64, 0xFFFFFFFF00000000)
    operand = rounding.flush(b, b.bitcast(b.and_(rounding.bits(b, a), upper), F64))
    result = rounding.flush(b, compute(operand))
    truncated = b.and_(rounding.bits(b, result), upper)
    nan = b.or_(rounding.is_nan(b, operand), rounding.is_nan(b, result))
    return b.bitcast(b.select(nan, ir.Constant(I64, 0x7FFFFFFF00000000), truncated), F64)


def _sqrt(b, value: ir.Value) -> ir.Value:
    return rounding.sqrt(b, "rn", value)


@handles("rcp", family="float")
def rcp(lw: Lowering, ins: ast.Instruction) -> None:
    t = _type(lw, ins)
    mode, kind = _kind(lw, ins)
    approx = kind == "approx"
    if approx == (mode is not None) or kind == "full":
        raise lw.fail("rcp needs one of .approx or a rounding")
    b, one = lw.builder, ir.Constant(F32 if t == "f32" else F64, 1.0)
    if t == "f64" and approx:
        lw.check_modifiers(ins, {"approx", "ftz"})
        if "ftz" not in ins.modifiers:
            raise lw.fail("rcp.approx.f64 exists only as rcp.approx.ftz.f64")
        d, a = lw.operands(ins, 2)
        lw.write(d, _upper_word(lw, lw.read(a, t), "rcp", lambda x: b.fdiv(one, x)), t)
        return
    ftz, _ = _options(lw, ins, t, _ROUNDINGS | {"approx", "ftz"})
    if approx:
        _approximation(lw, ins, "rcp", t, ftz)
        return
    d, (a,) = _sources(lw, ins, t, ftz, 1)
    _finish(lw, d, rounding.div(b, mode, one, a, ftz), t, ftz)


@handles("sqrt", family="float")
def sqrt(lw: Lowering, ins: ast.Instruction) -> None:
    t = _type(lw, ins)
    mode, kind = _kind(lw, ins)
    approx = kind == "approx"
    if approx == (mode is not None) or (approx and t != "f32") or kind == "full":
        raise lw.fail("sqrt needs one of .approx (f32) or a rounding")
    ftz, _ = _options(lw, ins, t, _ROUNDINGS | {"approx", "ftz"})
    if approx:
        _approximation(lw, ins, "sqrt", t, ftz)
        return
    d, (a,) = _sources(lw, ins, t, ftz, 1)
    _finish(lw, d, rounding.sqrt(lw.builder, mode, a), t, ftz)


@handles("rsqrt", family="float")
def rsqrt(lw: Lowering, ins: ast.Instruction) -> None:
    t = _type(lw, ins)
    if _kind(lw, ins)[1] != "approx":
        raise lw.fail("rsqrt needs .approx")
    lw.check_modifiers(ins, {"approx", "ftz"})
    b = lw.builder
    if t == "f64":
        d, a = lw.operands(ins, 2)
        one = ir.Constant(F64, 1.0)
        if "ftz" in ins.modifiers:
            value = _upper_word(lw, lw.read(a, t), "rsqrt", lambda x: b.fdiv(one, _sqrt(b, x)))
        else:  # rsqrt.approx.f64 is a software sequence; 1/sqrt in IEEE f64 is within anything it promises
            value = b.fdiv(one, _sqrt(b, lw.read(a, t)))
        lw.write(d, value, t)
        return
    _approximation(lw, ins, "rsqrt", t, _ftz(lw, ins))


@handles("ex2", "lg2", "sin", "cos", "tanh", family="float")
def transcendental(lw: Lowering, ins: ast.Instruction) -> None:
    """ex2/lg2/sin/cos.approx{.ftz}.f32 and tanh.approx.f32 (no .ftz: it keeps subnormals)."""
    t = _type(lw, ins)
    if t != "f32" or _kind(lw, ins)[1] != "approx":
        raise lw.fail(f"{ins.opcode} exists as {ins.opcode}.approx.f32 only")
    lw.check_modifiers(ins, {"approx"} if ins.opcode == "tanh" else {"approx", "ftz"})
    _approximation(lw, ins, ins.opcode, t, _ftz(lw, ins) and ins.opcode != "tanh")


def _unary(lw: Lowering, ins: ast.Instruction, compute) -> None:
    t = _type(lw, ins)
    ftz, _ = _options(lw, ins, t, {"ftz"})
    d, (a,) = _sources(lw, ins, t, ftz, 1)
    _finish(lw, d, compute(lw.builder, a), t, ftz)


# Instructions whose results do not depend on the bits of a NaN source, in their .f32 forms: they give a NaN
# whose bits PTX leaves open (arithmetic), the other operand or the canonical NaN (min/max), or a predicate
# (setp, testp).
_NAN_BITS_UNREAD = frozenset({"add", "sub", "mul", "fma", "mad", "div", "rcp", "sqrt", "rsqrt", "ex2", "lg2",
                              "sin", "cos", "tanh", "min", "max", "setp", "testp"})
_NAN_BITS_READERS: weakref.WeakKeyDictionary[Lowering, frozenset[str]] = weakref.WeakKeyDictionary()


def _nan_bits_read(lw: Lowering) -> frozenset[str]:
    """The registers of the function some instruction may read the bits of: everything mentioned anywhere
    but as the destination (operand 0) of an .f32 abs/neg or `_NAN_BITS_UNREAD`, or a plain source of the
    latter."""
    registers = _NAN_BITS_READERS.get(lw)
    if registers is None:
        read: set[str] = set()
        for ins in lw.kernel.instructions():
            f32 = "f32" in ins.modifiers
            for index, operand in enumerate(ins.operands):
                if f32 and index == 0 and ins.opcode in _NAN_BITS_UNREAD | {"abs", "neg"}:
                    continue
                if f32 and index and ins.opcode in _NAN_BITS_UNREAD and type(operand) is ast.Name:
                    continue
                read.update(operand_names(operand))
        registers = _NAN_BITS_READERS[lw] = frozenset(read)
    return registers


def _sign_op(lw: Lowering, ins: ast.Instruction, a: ir.Value, result: ir.Value) -> ir.Value:
    """abs/neg's result; an f32 NaN becomes the canonical NaN, as an H200 gives (f64 NaNs keep their bits
    but the sign, as there), unless no instruction reads the destination's bits (only `_NAN_BITS_UNREAD`
    read it: nvcc's expf negates a sum it then adds)."""
    destination = ins.operands[0]
    if a.type != F32 or (type(destination) is ast.Name and destination.name not in _nan_bits_read(lw)):
        return result
    b = lw.builder
    return b.select(rounding.is_nan(b, a), rounding.canonical_nan(F32), result)


@handles("abs", family="float")
def abs_(lw: Lowering, ins: ast.Instruction) -> None:
    _unary(lw, ins, lambda b, a: _sign_op(lw, ins, a, lw.intrinsic("llvm.fabs", [a])))


@handles("neg", family="float")
def neg(lw: Lowering, ins: ast.Instruction) -> None:
    _unary(lw, ins, lambda b, a: _sign_op(lw, ins, a, b.fneg(a)))


@handles("copysign", family="float")
def copysign(lw: Lowering, ins: ast.Instruction) -> None:
    t = _type(lw, ins)
    lw.check_modifiers(ins, set())
    d, a, b = lw.operands(ins, 3)
    # copysign d, a, b: b's value with a's sign.
    lw.write(d, lw.intrinsic("llvm.copysign", [lw.read(b, t), lw.read(a, t)]), t)


def _sign_bit(b, x: ir.Value) -> ir.Value:
    pattern = rounding.bits(b, x)
    return b.icmp_signed("<", pattern, ir.Constant(pattern.type, 0))


def _min_max_two(lw, smaller: bool, propagate_nan: bool, x: ir.Value, y: ir.Value) -> ir.Value:
    """PTX's min/max of two: IEEE 754-2019 minimumNumber/maximumNumber (one NaN: the other operand; −0.0
    below +0.0), which AMD's v_min/v_max are, with the NaN results PTX gives: .NaN, any NaN operand; without
    it, both: the canonical NaN (f32, the ISA), the second operand (f64, where the ISA says nothing and an
    H200 returns it)."""
    b = lw.builder
    # (with a constant operand, llvm.maximumnum alone is the rule: LLVM drops the NaN select, the constant
    # an inline operand, as in max(x, 0))
    constant = any(isinstance(v, ir.Constant) for v in (x, y))
    if x.type == F32 and not propagate_nan and not constant:
        native = lw.target.number_min_max(b, smaller, x, y)
        if native is not None:
            return native
    core = lw.intrinsic("llvm.minimumnum" if smaller else "llvm.maximumnum", [x, y])
    if propagate_nan:
        return b.select(b.fcmp_unordered("uno", x, y), rounding.canonical_nan(x.type), core)
    if x.type == F64:
        return b.select(rounding.is_nan(b, x), y, core)
    return b.select(rounding.is_nan(b, core), rounding.canonical_nan(x.type), core)


@handles("min", "max", family="float")
def min_max(lw: Lowering, ins: ast.Instruction) -> None:
    t = _type(lw, ins)
    b, count = lw.builder, len(ins.operands) - 1
    if count not in (2, 3):
        raise lw.fail(f"{ins.opcode} takes two or three sources")
    xorsign, absolute = "xorsign" in ins.modifiers, "abs" in ins.modifiers
    if t == "f64" and any(m not in ast.TYPES for m in ins.modifiers):
        raise lw.fail(f"{ins.opcode}.f64 takes no modifiers")
    if xorsign and (not absolute or count == 3):
        raise lw.fail(".xorsign needs .abs and exactly two sources")
    if absolute and not xorsign and count == 2:
        raise lw.fail(".abs without .xorsign needs three sources")
    ftz, _ = _options(lw, ins, t, {"ftz", "NaN", "xorsign", "abs"})
    d, values = _sources(lw, ins, t, ftz, count)
    # the sign .xorsign gives the result: of the sources before .abs
    sign = b.xor(_sign_bit(b, values[0]), _sign_bit(b, values[1])) if xorsign else None
    if absolute:
        values = [lw.intrinsic("llvm.fabs", [v]) for v in values]
    smaller, propagate = ins.opcode == "min", "NaN" in ins.modifiers
    result = values[0]
    for value in values[1:]:
        result = _min_max_two(lw, smaller, propagate, result, value)
    if xorsign:  # the sign of a xor b, unless the result is NaN
        negative = b.fneg(result)
        result = b.select(b.and_(sign, b.not_(rounding.is_nan(b, result))), negative, result)
    _finish(lw, d, result, t, ftz)


_TESTS = ("finite", "infinite", "number", "notanumber", "normal", "subnormal")


@handles("testp", family="float")
def testp(lw: Lowering, ins: ast.Instruction) -> None:
    t = _type(lw, ins)
    tests = [m for m in ins.modifiers if m in _TESTS]
    if len(tests) != 1:
        raise lw.fail(f"testp needs exactly one of {', '.join('.' + x for x in _TESTS)}")
    lw.check_modifiers(ins, set(tests))
    d, a = lw.operands(ins, 2)
    b, value = lw.builder, lw.read(a, t)
    width = 32 if t == "f32" else 64
    ity = ir.IntType(width)
    pattern = rounding.bits(b, value)
    exponent_mask = ((1 << (width - 1)) - 1) ^ ((1 << (23 if width == 32 else 52)) - 1)
    exponent = b.and_(pattern, ir.Constant(ity, exponent_mask))
    fraction = b.and_(pattern, ir.Constant(ity, (1 << (23 if width == 32 else 52)) - 1))
    exponent_full = b.icmp_unsigned("==", exponent, ir.Constant(ity, exponent_mask))
    exponent_zero = b.icmp_unsigned("==", exponent, ir.Constant(ity, 0))
    fraction_zero = b.icmp_unsigned("==", fraction, ir.Constant(ity, 0))
    nan = b.and_(exponent_full, b.not_(fraction_zero))
    result = {
        "finite": b.not_(exponent_full),
        "infinite": b.and_(exponent_full, fraction_zero),
        "number": b.not_(nan),
        "notanumber": nan,
        # ±0 count as normal numbers
        "normal": b.and_(b.not_(exponent_full), b.or_(b.not_(exponent_zero), fraction_zero)),
        "subnormal": b.and_(exponent_zero, b.not_(fraction_zero)),
    }[tests[0]]
    lw.write(d, result, "pred")
