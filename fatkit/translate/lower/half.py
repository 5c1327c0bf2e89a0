"""Half-precision arithmetic: f16, bf16 and their packed pairs f16x2/bf16x2 (family "half").

add/sub/mul/fma (.rn, .ftz, .sat, .relu), neg, abs, min/max (.NaN, .xorsign.abs), ex2.approx, tanh.approx,
setp and set. A pair computes lane by lane (lane 0 in the low 16 bits). f16 lanes compute in LLVM's `half`,
which AMDGPU executes natively and rounds once. bf16 lanes compute in f32 (LLVM 22 does the same with
`bfloat` on gfx942/gfx1100, which have no bf16 arithmetic) and round to nearest even once more, which gives
the singly rounded result for + - ×: among normals rounding twice (24 then 8 bits, 24 ≥ 2·8 + 2) is
innocuous for these operations; a subnormal sum is exact in f32 (both operands are multiples of 2**-133);
a product among f32's subnormals has at most 16 significant bits, too few to lie within half an f32 step
of a bf16 midpoint without lying on it (65535·2**-150 could, but 65535 = 3·5·17·257 is no product of two
8-bit significands). bf16 fma is not covered (a tiny addend may sit below f32's reach
beside a bf16 midpoint; LLVM's own bfloat fma rounds twice there), so it is computed exactly: `_fma_bf16`.
"""

from __future__ import annotations

from llvmlite import ir

from fatkit.translate.lower.compare import _FLOAT_CMP
from fatkit.translate.lower.convert import (
    FORMATS, bf16_to_f32, f32_to_bf16, finish, float_parts, flush_subnormal, host_half_runtime,
    round_to_format,
)
from fatkit.translate.lower.core import F16, F16X2, F32, F64, I16, I32, I64, Lowering, handles, llvm_type
from fatkit.translate.ptx import ast

_LANE = {"f16": "f16", "f16x2": "f16", "bf16": "bf16", "bf16x2": "bf16"}
_ONE = {"f16": 0x3C00, "bf16": 0x3F80}


def _half_type(lw: Lowering, ins: ast.Instruction) -> str:
    (t,) = lw.types(ins, 1)
    if t not in _LANE:
        raise lw.fail(f".{t} is not a half-precision type")
    host_half_runtime(lw)
    return t


def _lanes(lw: Lowering, operand: ast.Operand, t: str, ftz: bool = False) -> list[ir.Value]:
    """The operand's lanes as 16-bit patterns, lane 0 (the low half) first; .ftz flushes subnormals."""
    b = lw.builder
    if t in ("f16", "bf16"):
        lanes = [lw.read(operand, "b16")]
    else:
        bits = lw.read(operand, "b32")
        lanes = [b.trunc(bits, I16), b.trunc(b.lshr(bits, ir.Constant(I32, 16)), I16)]
    return [flush_subnormal(lw, x, FORMATS[_LANE[t]]) for x in lanes] if ftz else lanes


def _write_lanes(lw: Lowering, operand: ast.Operand, lanes: list[ir.Value], t: str) -> None:
    b = lw.builder
    if len(lanes) == 1:
        lw.write(operand, lanes[0], "b16")
        return
    low, high = (b.zext(x, I32) for x in lanes)
    lw.write(operand, b.or_(b.shl(high, ir.Constant(I32, 16)), low), "b32")


def _value(lw: Lowering, bits: ir.Value, lane: str) -> ir.Value:
    """A lane's bits as the value it computes with: `half` for f16, f32 for bf16."""
    return lw.builder.bitcast(bits, F16) if lane == "f16" else bf16_to_f32(lw, bits)


def _bits(lw: Lowering, value: ir.Value, lane: str) -> ir.Value:
    """A computed value back to the lane's bits (bf16: rounded to nearest even)."""
    return lw.builder.bitcast(value, I16) if lane == "f16" else f32_to_bf16(lw, value)


def _modifiers(lw: Lowering, ins: ast.Instruction, t: str, allowed: set[str]) -> set[str]:
    lw.check_modifiers(ins, allowed)
    modifiers = {m for m in ins.modifiers if m not in ast.TYPES}
    if _LANE[t] == "bf16" and "ftz" in modifiers and ins.opcode != "ex2":
        raise lw.fail(f"{ins.opcode}.{t} has no .ftz")
    if _LANE[t] == "bf16" and "sat" in modifiers:
        raise lw.fail(f"{ins.opcode}.{t} has no .sat")
    return modifiers


def _elementwise(lw: Lowering, ins: ast.Instruction, arity: int, allowed: set[str], compute) -> None:
    """Read `arity` sources, compute each lane with `compute(lane, *values)`, finish and write."""
    t = _half_type(lw, ins)
    modifiers, lane = _modifiers(lw, ins, t, allowed), _LANE[t]
    d, *sources = lw.operands(ins, arity + 1)
    columns = zip(*(_lanes(lw, s, t, "ftz" in modifiers) for s in sources))
    results = [finish(lw, compute(lane, *values), FORMATS[lane], modifiers) for values in columns]
    _write_lanes(lw, d, results, t)


def _packed(lw, ins, arity: int, allowed: set[str], compute, handled: frozenset = frozenset({"rn"})) -> bool:
    """An f16x2 operation without per-lane modifiers as one operation on <2 x half>, which LLVM makes a
    packed instruction (v_pk_* on gfx9 and gfx11; f16x2 in PTX): `compute(*pairs)`. False where the form
    needs the lanes apart (other types; modifiers beyond `handled`: .ftz, .sat, .relu)."""
    t = _half_type(lw, ins)
    if t != "f16x2" or _modifiers(lw, ins, t, allowed) - handled:
        return False
    b = lw.builder
    d, *sources = lw.operands(ins, arity + 1)
    pairs = [b.bitcast(lw.read(s, "b32"), F16X2) for s in sources]
    lw.write(d, b.bitcast(compute(*pairs), I32), "b32")
    return True


# ---------------------------------------------------------------------------------------- add sub mul fma

def _arithmetic(lw: Lowering, ins: ast.Instruction, operation: str) -> None:
    allowed = {"rn", "ftz", "sat"}
    if _packed(lw, ins, 2, allowed, getattr(lw.builder, operation)):
        return

    def compute(lane, x, y):
        result = getattr(lw.builder, operation)(_value(lw, x, lane), _value(lw, y, lane))
        return _bits(lw, result, lane)
    _elementwise(lw, ins, 2, allowed, compute)


@handles("add", family="half")
def add(lw: Lowering, ins: ast.Instruction) -> None:
    _arithmetic(lw, ins, "fadd")


@handles("sub", family="half")
def sub(lw: Lowering, ins: ast.Instruction) -> None:
    _arithmetic(lw, ins, "fsub")


@handles("mul", family="half")
def mul(lw: Lowering, ins: ast.Instruction) -> None:
    _arithmetic(lw, ins, "fmul")


@handles("fma", family="half")
def fma(lw: Lowering, ins: ast.Instruction) -> None:
    if "oob" in ins.modifiers:  # the OOB NaN's bit pattern is the tensor unit's, not given by the ISA
        raise lw.fail("fma .oob (zero for out-of-bounds NaN operands) is not supported")
    if "sat" in ins.modifiers and "relu" in ins.modifiers:
        raise lw.fail("fma takes .sat or .relu, not both")

    allowed = {"rn", "ftz", "sat", "relu"}
    if _packed(lw, ins, 3, allowed, lambda *pairs: lw.intrinsic("llvm.fma", list(pairs))):
        return

    def compute(lane, x, y, z):
        if lane == "bf16":
            return _fma_bf16(lw, x, y, z)
        return lw.builder.bitcast(lw.intrinsic("llvm.fma", [lw.builder.bitcast(v, F16) for v in (x, y, z)]), I16)
    _elementwise(lw, ins, 3, allowed, compute)


def _fma_bf16(lw: Lowering, x, y, z) -> ir.Value:
    """bf16 a·b + c rounded once. The product of two 8-bit significands is exact in f64 (16 bits, and
    f64's exponent range holds every product); the sum is rounded to odd (to nearest by the adder, then
    moved one place toward the exact sum when inexact and even — the error comes exactly from TwoSum).
    A value rounded to odd with 53 ≥ 8 + 2 bits rounds to bf16 as the exact sum would."""
    b = lw.builder
    a, c, addend = (b.fpext(bf16_to_f32(lw, v), F64) for v in (x, y, z))
    product = b.fmul(a, c)
    total = b.fadd(product, addend)
    # TwoSum: the exact error of `total` (no overflow: bf16 products stay far below f64's range).
    virtual = b.fsub(total, product)
    error = b.fadd(b.fsub(product, b.fsub(total, virtual)), b.fsub(addend, virtual))
    bits = b.bitcast(total, I64)
    even = b.icmp_unsigned("==", b.and_(bits, ir.Constant(I64, 1)), ir.Constant(I64, 0))
    inexact = b.fcmp_ordered("!=", error, ir.Constant(F64, 0.0))
    finite = b.fcmp_ordered("<", lw.intrinsic("llvm.fabs", [total]), ir.Constant(F64, float("inf")))
    # Toward the exact sum: away from zero when the error has the sum's sign, toward zero otherwise.
    away = b.icmp_unsigned("==", b.fcmp_ordered("<", error, ir.Constant(F64, 0.0)),
                           b.fcmp_ordered("<", total, ir.Constant(F64, 0.0)))
    step = b.select(away, ir.Constant(I64, 1), ir.Constant(I64, -1))
    odd = b.select(b.and_(b.and_(even, inexact), finite), b.add(bits, step), bits)
    return _f64_to_bf16(lw, odd, lw.builder.fcmp_unordered("uno", total, total))


def _f64_to_bf16(lw: Lowering, bits: ir.Value, nan: ir.Value) -> ir.Value:
    """The f64 `bits` (not NaN where `nan` is false) to the nearest bf16, ties to even; the canonical NaN.

    Written for the magnitudes a bf16 fma gives, in a dozen operations where the generic `round_to_format`
    takes ~50 (it made a bf16 fma ~4.5 KB of IR and most of LLVM's time on kernels full of them):
    a bf16 normal is the f64 with its exponent rebiased (1023 - 127 = 896) and 45 bits dropped to nearest
    even by adding just under half of the dropped place plus the kept lowest bit (a carry moves into the
    exponent, up to infinity, 0x7F80, where everything above is clamped: overflow and ±inf); below bf16's
    smallest normal (2**-126) the f64 adder rounds: |x| + 2**-81 lies in [2**-81, 2**-80), whose last place
    is bf16's subnormal one (2**-133), so its bits less those of 2**-81 are the bf16 subnormal's, or 0x0080
    when it rounds up to 2**-126. The sum is never an f64 subnormal (it is 2**-81 or more), and it rounds to
    nearest as the fma's own f64 additions already need."""
    b = lw.builder
    magnitude = b.and_(bits, ir.Constant(I64, 0x7FFF_FFFF_FFFF_FFFF))
    rebiased = b.sub(magnitude, ir.Constant(I64, 896 << 52))
    kept_odd = b.and_(b.lshr(rebiased, ir.Constant(I64, 45)), ir.Constant(I64, 1))
    normal = b.lshr(b.add(rebiased, b.add(kept_odd, ir.Constant(I64, (1 << 44) - 1))), ir.Constant(I64, 45))
    normal = b.select(b.icmp_unsigned(">", normal, ir.Constant(I64, 0x7F80)), ir.Constant(I64, 0x7F80), normal)
    offset = ir.Constant(I64, 0x3AE0_0000_0000_0000)  # 2**-81
    shifted = b.fadd(b.bitcast(magnitude, F64), b.bitcast(offset, F64))
    subnormal = b.sub(b.bitcast(shifted, I64), offset)
    tiny = b.icmp_unsigned("<", magnitude, ir.Constant(I64, 897 << 52))  # below 2**-126
    rounded = b.or_(b.select(tiny, subnormal, normal), b.and_(b.lshr(bits, ir.Constant(I64, 48)),
                                                            ir.Constant(I64, 0x8000)))
    return b.select(nan, ir.Constant(I16, FORMATS["bf16"].nan), b.trunc(rounded, I16))


# ---------------------------------------------------------------------------------------- neg abs min max

_SIGN = ir.Constant(I16, 0x8000)


def _sign_operation(lw: Lowering, ins: ast.Instruction, operation) -> None:
    """neg/abs on the sign bit; a NaN gives the canonical NaN (the ISA leaves it open; sm_90 does so)."""
    def compute(lane, x):
        nan = lw.builder.fcmp_unordered("uno", *[_value(lw, x, lane)] * 2)
        return lw.builder.select(nan, ir.Constant(I16, FORMATS[lane].nan), operation(x))
    _elementwise(lw, ins, 1, {"ftz"}, compute)


@handles("neg", family="half")
def neg(lw: Lowering, ins: ast.Instruction) -> None:
    _sign_operation(lw, ins, lambda x: lw.builder.xor(x, _SIGN))


@handles("abs", family="half")
def abs_(lw: Lowering, ins: ast.Instruction) -> None:
    _sign_operation(lw, ins, lambda x: lw.builder.and_(x, ir.Constant(I16, 0x7FFF)))


def _min_max(lw: Lowering, ins: ast.Instruction, smaller: bool) -> None:
    """min/max: a NaN operand yields the other one (both NaN: the canonical NaN; with .NaN any NaN
    operand does); -0 orders below +0; .xorsign.abs compares magnitudes and gives the result the
    exclusive or of the operands' signs."""
    xorsign = "xorsign" in ins.modifiers
    if xorsign != ("abs" in ins.modifiers):
        raise lw.fail(".xorsign and .abs come together")
    b = lw.builder
    allowed = {"ftz", "NaN", "xorsign", "abs"}
    canonical = ir.Constant(F16X2, [ir.Constant(I16, FORMATS["f16"].nan).bitcast(F16)] * 2)

    def pair(u, v):  # minimumNumber/maximumNumber (v_pk_min/max_f16), PTX's NaN results added
        core = lw.intrinsic("llvm.minimumnum" if smaller else "llvm.maximumnum", [u, v])
        nan = b.fcmp_unordered("uno", u, v) if "NaN" in ins.modifiers else b.fcmp_unordered("uno", core, core)
        return b.select(nan, canonical, core)
    if not xorsign and _packed(lw, ins, 2, allowed, pair, frozenset({"NaN"})):
        return

    def compute(lane, x, y):
        nan = ir.Constant(I16, FORMATS[lane].nan)
        if xorsign:
            sign = b.and_(b.xor(x, y), _SIGN)
            x, y = (b.and_(v, ir.Constant(I16, 0x7FFF)) for v in (x, y))
        u, v = _value(lw, x, lane), _value(lw, y, lane)
        x_nan, y_nan = b.fcmp_unordered("uno", u, u), b.fcmp_unordered("uno", v, v)
        first = b.fcmp_ordered("<" if smaller else ">", u, v)
        # equal (±0 against ∓0 is the only case with different bits): min takes the negative zero
        x_negative = b.icmp_signed("<", x, ir.Constant(I16, 0))
        tie = b.select(x_negative, x, y) if smaller else b.select(x_negative, y, x)
        pick = b.select(first, x, b.select(b.fcmp_ordered("==", u, v), tie, y))
        either, both = b.or_(x_nan, y_nan), b.and_(x_nan, y_nan)
        nan_result = either if "NaN" in ins.modifiers else both
        number = b.select(x_nan, y, b.select(y_nan, x, pick))
        if xorsign:  # not on a NaN result
            number = b.or_(number, sign)
        return b.select(nan_result, nan, number)
    _elementwise(lw, ins, 2, allowed, compute)


@handles("min", family="half")
def min_(lw: Lowering, ins: ast.Instruction) -> None:
    _min_max(lw, ins, smaller=True)


@handles("max", family="half")
def max_(lw: Lowering, ins: ast.Instruction) -> None:
    _min_max(lw, ins, smaller=False)


# ---------------------------------------------------------------------------------------- ex2 tanh

def _approx(lw: Lowering, ins: ast.Instruction, function) -> None:
    """An .approx function computed in f32 and rounded to the lane's format (more precise than PTX's bound)."""
    if "approx" not in ins.modifiers:
        raise lw.fail(f"{ins.opcode} on half types exists as .approx only")
    b = lw.builder

    def compute(lane, x):
        wide = b.fpext(_value(lw, x, lane), F32) if lane == "f16" else _value(lw, x, lane)
        result = function(wide)
        if lane != "f16":
            return f32_to_bf16(lw, result)
        # toward zero into f16, as an H200's ex2.approx.f16 rounds, but ±inf past f16's range (2^16), as
        # there too; NaN stays the canonical NaN
        rounded = round_to_format(lw, float_parts(lw, result, "f32"), FORMATS["f16"], "rz")
        beyond = b.fcmp_ordered(">=", lw.intrinsic("llvm.fabs", [result]), ir.Constant(F32, 2.0 ** 16))
        infinity = b.or_(b.and_(rounded, ir.Constant(I16, 0x8000)), ir.Constant(I16, 0x7C00))
        rounded = b.select(beyond, infinity, rounded)
        return b.select(b.fcmp_unordered("uno", result, result), ir.Constant(I16, FORMATS["f16"].nan), rounded)
    _elementwise(lw, ins, 1, {"approx", "ftz"}, compute)


@handles("ex2", family="half")
def ex2(lw: Lowering, ins: ast.Instruction) -> None:
    if _LANE.get(next((m for m in ins.modifiers if m in ast.TYPES), ""), "") == "bf16" and "ftz" not in ins.modifiers:
        raise lw.fail("ex2.approx on bf16 exists as .ftz only")
    _approx(lw, ins, lambda x: lw.target.approximate(lw.builder, "ex2", x))


@handles("tanh", family="half")
def tanh(lw: Lowering, ins: ast.Instruction) -> None:
    _approx(lw, ins, lambda x: _tanh_f32(lw, x))


def _tanh_f32(lw: Lowering, x: ir.Value) -> ir.Value:
    """tanh in f32 to about 2**-18 relative: sign(x)·(1 − e)/(1 + e) with e = 2**(−2|x|·log2 e), and
    x − x³/3 + 2x⁵/15 below |x| = 1/4 where 1 − e would cancel."""
    b = lw.builder
    magnitude = lw.intrinsic("llvm.fabs", [x])
    e = lw.intrinsic("llvm.exp2", [b.fmul(magnitude, ir.Constant(F32, -2.8853900817779268))])
    one = ir.Constant(F32, 1.0)
    far = lw.intrinsic("llvm.copysign", [b.fdiv(b.fsub(one, e), b.fadd(one, e)), x])
    square = b.fmul(x, x)
    series = b.fmul(x, b.fadd(one, b.fmul(square, b.fadd(ir.Constant(F32, -1 / 3),
                                                         b.fmul(square, ir.Constant(F32, 2 / 15))))))
    near = b.fcmp_ordered("<", magnitude, ir.Constant(F32, 0.25))
    return b.select(near, series, far)  # NaN: `far` is NaN


# ---------------------------------------------------------------------------------------- setp set

_BOOL_OPS = {"and": "and_", "or": "or_", "xor": "xor"}


def _comparisons(lw: Lowering, ins: ast.Instruction, t: str, a, b_operand) -> list[ir.Value]:
    comparison = [m for m in ins.modifiers if m in _FLOAT_CMP]
    if len(comparison) != 1:
        raise lw.fail("expected one comparison operator")
    ordered, op = _FLOAT_CMP[comparison[0]]
    lane, ftz, b = _LANE[t], "ftz" in ins.modifiers, lw.builder
    compare = b.fcmp_ordered if ordered else b.fcmp_unordered
    return [compare(op, _value(lw, x, lane), _value(lw, y, lane))
            for x, y in zip(_lanes(lw, a, t, ftz), _lanes(lw, b_operand, t, ftz))]


def _combine(lw: Lowering, ins: ast.Instruction, results: list[ir.Value], c) -> list[ir.Value]:
    """The optional .and/.or/.xor with a (possibly negated) predicate operand."""
    bool_ops = [m for m in ins.modifiers if m in _BOOL_OPS]
    if not bool_ops:
        if c is not None:
            raise lw.fail("a fourth operand needs .and/.or/.xor")
        return results
    if c is None:
        raise lw.fail(f".{bool_ops[0]} needs a predicate operand")
    negated = type(c) is ast.Negated
    predicate = lw.read(c.operand if negated else c, "pred")
    if negated:
        predicate = lw.builder.not_(predicate)
    return [getattr(lw.builder, _BOOL_OPS[bool_ops[0]])(r, predicate) for r in results]


def _allowed_compare(ins: ast.Instruction) -> set[str]:
    return {m for m in ins.modifiers if m in _FLOAT_CMP} | set(_BOOL_OPS) | {"ftz"}


@handles("setp", family="half")
def setp(lw: Lowering, ins: ast.Instruction) -> None:
    t = _half_type(lw, ins)
    _modifiers(lw, ins, t, _allowed_compare(ins))
    d, a, b_operand, *rest = ins.operands
    if len(rest) > 1:
        raise lw.fail("too many operands")
    results = _combine(lw, ins, _comparisons(lw, ins, t, a, b_operand), rest[0] if rest else None)
    if len(results) == 1:
        lw.write(d, results[0], "pred")
        return
    if type(d) is not ast.Pair:
        raise lw.fail(f"setp.{t} writes two predicates: p|q")
    lw.write(d.first, results[0], "pred")  # p: the lower halves, q: the upper
    lw.write(d.second, results[1], "pred")


@handles("set", family="half")
def set_(lw: Lowering, ins: ast.Instruction) -> None:
    """set.CmpOp.dtype.stype with a half-precision source (compare.py hands over those with an integer
    destination): 1.0 in each lane of a half destination, all ones in each lane of an integer one."""
    dtype, stype = lw.types(ins, 2)
    pairs = ("f16x2", "bf16x2")
    allowed = {stype, "u32", "s32"} if stype in pairs else {"f16", "bf16", "u16", "s16", "u32", "s32"}
    if stype not in _LANE or dtype not in allowed:
        raise lw.fail(f"set.{dtype}.{stype}: only half-precision sources are lowered here, into "
                      + "/".join(f".{t}" for t in sorted(allowed)))
    host_half_runtime(lw)
    _modifiers(lw, ins, stype, _allowed_compare(ins))
    d, a, b_operand, *rest = ins.operands
    if len(rest) > 1:
        raise lw.fail("too many operands")
    results = _combine(lw, ins, _comparisons(lw, ins, stype, a, b_operand), rest[0] if rest else None)
    b = lw.builder
    if dtype in _LANE:
        one, zero = ir.Constant(I16, _ONE[_LANE[dtype]]), ir.Constant(I16, 0)
        _write_lanes(lw, d, [b.select(r, one, zero) for r in results], dtype)
    elif stype in pairs:  # 0xFFFF in each half of a .u32/.s32
        _write_lanes(lw, d, [b.sext(r, I16) for r in results], stype)
    else:
        lw.write(d, b.sext(results[0], llvm_type(dtype)), dtype)
