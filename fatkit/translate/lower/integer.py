"""Integer arithmetic, bit manipulation, logic and shifts, as the PTX ISA defines them.

Arithmetic: add/sub (.sat.s32, .u16x2/.s16x2), the `.cc` carry chains (add.cc, addc, sub.cc, subc, mad.cc,
madc), mul/mad .lo/.hi/.wide (mad.hi.sat.s32), mul24/mad24, sad, abs, neg, min/max (.relu, 16x2), div, rem.
Bits: popc, clz, brev, bfind, fns, bfe, bfi, bmsk, szext, prmt, shf, lop3, dp2a, dp4a, cnot.
Logic and shifts: and/or/xor/not, shl/shr.

Wherever LLVM leaves undefined what PTX defines (shift counts of the full width or more, INT_MIN / -1) or
what NVIDIA GPUs do (division by zero, measured on an H200), the lowering selects that result explicitly,
so no LLVM poison or UB is reachable.
"""

from __future__ import annotations

from llvmlite import ir

from fatkit.translate.lower.core import I1, I8, I16, I32, I64, Lowering, constant_bits, handles, int_resized
from fatkit.translate.ptx import ast

_INTEGER = {"u16", "u32", "u64", "s16", "s32", "s64"}
_SIGNED = {"s16", "s32", "s64"}
_CARRY_TYPES = {"u32", "s32", "u64", "s64"}  # the types of the .cc instructions
_BITS = {"b32", "b64"}
_PACKED = ("u16x2", "s16x2")  # not fundamental types to the parser: they arrive as modifiers


def _const(ty: ir.IntType, value: int) -> ir.Constant:
    return ir.Constant(ty, value & ((1 << ty.width) - 1))


def _type(lw: Lowering, ins: ast.Instruction, allowed: set[str], what: str) -> str:
    (t,) = lw.types(ins, 1)
    if t not in allowed:
        raise lw.fail(f"{what} is not defined for .{t}")
    return t


def _one_of(lw: Lowering, ins: ast.Instruction, choices: tuple[str, ...], required: bool) -> str | None:
    """The one modifier of `choices` the instruction carries (a mode such as .lo/.hi or .clamp/.wrap)."""
    present = [m for m in ins.modifiers if m in choices]
    if len(present) > 1 or (required and not present):
        raise lw.fail(f"needs {'exactly' if required else 'at most'} one of " + "/".join("." + c for c in choices))
    return present[0] if present else None


def _resize(lw: Lowering, value: ir.Value, ty: ir.IntType) -> ir.Value:
    """An unsigned value as `ty`: zero-extended or truncated."""
    return int_resized(lw.builder, value, ty, signed=False)


def _shift_or_zero(lw: Lowering, op: str, value: ir.Value, amount: ir.Value) -> ir.Value:
    """`value` shifted by the unsigned i32 `amount` with op "shl" or "lshr"; 0 once amount ≥ the width
    (PTX's result; LLVM's shift is poison there). A constant amount (the operands pass's packing and
    unpacking, most shifts in PTX) needs no range test."""
    ty = value.type
    known = constant_bits(amount)
    if known is not None:
        bits = constant_bits(value)
        if known >= ty.width:
            return _const(ty, 0)
        if bits is not None:
            return _const(ty, bits << known if op == "shl" else bits >> known)
        return getattr(lw.builder, op)(value, _const(ty, known)) if known else value
    too_far = lw.builder.icmp_unsigned(">=", amount, _const(I32, ty.width))
    safe = _resize(lw, lw.builder.select(too_far, _const(I32, 0), amount), ty)
    return lw.builder.select(too_far, _const(ty, 0), getattr(lw.builder, op)(value, safe))


def _low_mask(lw: Lowering, ty: ir.IntType, count: ir.Value) -> ir.Value:
    """The `count` (i32) low bits of `ty` set; all of them once count ≥ the width."""
    return lw.builder.not_(_shift_or_zero(lw, "shl", _const(ty, -1), count))


def _lanes(lw: Lowering, value: ir.Value) -> list[ir.Value]:
    """The two 16-bit halves of a 32-bit value, low half first."""
    return [lw.builder.trunc(value, I16), lw.builder.trunc(lw.builder.lshr(value, _const(I32, 16)), I16)]


def _pack(lw: Lowering, low: ir.Value, high: ir.Value) -> ir.Value:
    return lw.builder.or_(lw.builder.zext(low, I32), lw.builder.shl(lw.builder.zext(high, I32), _const(I32, 16)))


def _packed_type(lw: Lowering, ins: ast.Instruction) -> str | None:
    """.u16x2/.s16x2 if the instruction operates on 16-bit pairs (then it has no other type)."""
    packed = _one_of(lw, ins, _PACKED, required=False)
    if packed and any(m in ast.TYPES for m in ins.modifiers):
        raise lw.fail(f".{packed} takes no second type")
    return packed


def _lanewise(lw: Lowering, ins: ast.Instruction, combine) -> None:
    """d = combine(a, b) on each 16-bit half of the .b32 operands a and b."""
    d, a, b = lw.operands(ins, 3)
    pairs = zip(_lanes(lw, lw.read(a, "b32")), _lanes(lw, lw.read(b, "b32")))
    lw.write(d, _pack(lw, *(combine(x, y) for x, y in pairs)), "b32")


def _minimum_or_maximum(lw: Lowering, x: ir.Value, y: ir.Value, signed: bool, maximum: bool) -> ir.Value:
    name = "llvm." + ("s" if signed else "u") + ("max" if maximum else "min")
    return lw.intrinsic(name, [x, y])


# ------------------------------------------------------------------------------------- carry flag

def _carry_slot(lw: Lowering) -> ir.Value:
    """CC.CF: one i1 slot per function body, cleared in the entry block so that no read sees undef."""
    fresh = "carry" not in lw.slots
    slot = lw.slot("carry", I1)
    if fresh:
        with lw.builder.goto_block(lw.entry):
            lw.builder.store(_const(I1, 0), slot)
    return slot


def _carry_in(lw: Lowering) -> ir.Value:
    return lw.builder.load(_carry_slot(lw), typ=I1)


def _add_with_carry(lw: Lowering, x: ir.Value, y: ir.Value, carry: ir.Value | None) -> tuple[ir.Value, ir.Value]:
    """x + y (+ carry): the sum and the unsigned carry out."""
    total = lw.builder.add(x, y)
    out = lw.builder.icmp_unsigned("<", total, x)
    if carry is not None:
        with_carry = lw.builder.add(total, lw.builder.zext(carry, x.type))
        out = lw.builder.or_(out, lw.builder.icmp_unsigned("<", with_carry, total))
        total = with_carry
    return total, out


def _extended_precision(lw: Lowering, ins: ast.Instruction, subtract: bool, carry_in: bool) -> None:
    """add.cc/addc/sub.cc/subc. CC.CF is a carry flag throughout: subtraction runs as a + ~b + 1 (sub.cc)
    or a + ~b + CC.CF (subc), so after a subtraction the flag is 1 when nothing was borrowed and subc takes
    a borrow of 1 - CC.CF. Chains of sub.cc/subc so compute the ISA's d = a - (b + borrow), and an addc
    reading the flag of a sub.cc adds NOT borrow, as NVIDIA GPUs do (measured on an H200)."""
    t = _type(lw, ins, _CARRY_TYPES, "extended-precision arithmetic")
    lw.check_modifiers(ins, {"cc"})
    d, a, b = lw.operands(ins, 3)
    x, y = lw.read(a, t), lw.read(b, t)
    if subtract:
        y = lw.builder.not_(y)
    carry = _carry_in(lw) if carry_in else (_const(I1, 1) if subtract else None)
    value, out = _add_with_carry(lw, x, y, carry)
    if "cc" in ins.modifiers:
        lw.builder.store(out, _carry_slot(lw))
    lw.write(d, value, t)


# ------------------------------------------------------------------------------------- add, sub

@handles("add", "sub", family="int")
def add_or_subtract(lw: Lowering, ins: ast.Instruction) -> None:
    subtract = ins.opcode == "sub"
    packed = _packed_type(lw, ins)
    if packed:  # add.u16x2/.s16x2: wrapping 16-bit lanes
        if subtract:
            raise lw.fail(f"sub has no .{packed} form")
        lw.check_modifiers(ins, {packed})
        _lanewise(lw, ins, lw.builder.add)
        return
    if "cc" in ins.modifiers:
        _extended_precision(lw, ins, subtract, carry_in=False)
        return
    t = _type(lw, ins, _INTEGER, "integer " + ins.opcode)
    lw.check_modifiers(ins, {"sat"} if t == "s32" else set())
    d, a, b = lw.operands(ins, 3)
    x, y = lw.read(a, t), lw.read(b, t)
    if "sat" in ins.modifiers:  # .sat.s32 clamps to [INT_MIN, INT_MAX]
        value = lw.intrinsic("llvm.ssub.sat" if subtract else "llvm.sadd.sat", [x, y])
    else:
        value = (lw.builder.sub if subtract else lw.builder.add)(x, y)
    lw.write(d, value, t)


@handles("addc", "subc", family="int")
def with_carry_in(lw: Lowering, ins: ast.Instruction) -> None:
    _extended_precision(lw, ins, subtract=ins.opcode == "subc", carry_in=True)


# ------------------------------------------------------------------------------------- multiply

def _product(lw: Lowering, ins: ast.Instruction, t: str, a, b, allowed: set[str]) -> tuple[ir.Value, str]:
    """a*b per .lo/.hi/.wide: the value and the PTX type it has."""
    mode = _one_of(lw, ins, ("lo", "hi", "wide"), required=True)
    lw.check_modifiers(ins, {mode} | allowed)
    x, y = lw.read(a, t), lw.read(b, t)
    if mode == "lo":
        return lw.builder.mul(x, y), t
    bits = ast.TYPE_SIZES[t] * 8
    if bits == 64 and mode == "wide":
        raise lw.fail("mul.wide of 64-bit operands does not exist")
    wide, extend = ir.IntType(2 * bits), lw.builder.sext if t[0] == "s" else lw.builder.zext
    full = lw.builder.mul(extend(x, wide), extend(y, wide))
    if mode == "wide":
        return full, f"{t[0]}{2 * bits}"
    return lw.builder.trunc(lw.builder.lshr(full, ir.Constant(wide, bits)), x.type), t


@handles("mul", family="int")
def mul(lw: Lowering, ins: ast.Instruction) -> None:
    t = _type(lw, ins, _INTEGER, "integer mul")
    d, a, b = lw.operands(ins, 3)
    value, result_type = _product(lw, ins, t, a, b, set())
    lw.write(d, value, result_type)


@handles("mad", "madc", family="int")
def multiply_add(lw: Lowering, ins: ast.Instruction) -> None:
    """mad (.hi.sat.s32, .cc) and madc: the product's chosen half plus c (plus CC.CF for madc)."""
    carry_in = ins.opcode == "madc"
    t = _type(lw, ins, _INTEGER, "integer " + ins.opcode)
    chained, saturate = carry_in or "cc" in ins.modifiers, "sat" in ins.modifiers
    if chained and (t not in _CARRY_TYPES or "wide" in ins.modifiers):
        raise lw.fail("mad.cc/madc take .lo/.hi and .u32/.s32/.u64/.s64")
    if saturate and (t != "s32" or "hi" not in ins.modifiers or chained):
        raise lw.fail(".sat applies to mad.hi.s32 only")
    d, a, b, c = lw.operands(ins, 4)
    value, result_type = _product(lw, ins, t, a, b, {"cc", "sat"})
    addend = lw.read(c, result_type)
    if saturate:
        value = lw.intrinsic("llvm.sadd.sat", [value, addend])
    elif chained:
        value, out = _add_with_carry(lw, value, addend, _carry_in(lw) if carry_in else None)
        if "cc" in ins.modifiers:
            lw.builder.store(out, _carry_slot(lw))
    else:
        value = lw.builder.add(value, addend)
    lw.write(d, value, result_type)


def _product24(lw: Lowering, ins: ast.Instruction, a, b, allowed: set[str]) -> tuple[ir.Value, str]:
    """mul24: the 48-bit product of the low 24 bits of a and b; .lo its bits 31..0, .hi its bits 47..16."""
    t = _type(lw, ins, {"u32", "s32"}, ins.opcode)
    mode = _one_of(lw, ins, ("lo", "hi"), required=True)
    lw.check_modifiers(ins, {mode} | allowed)

    def low24(operand: ast.Operand):
        value = lw.read(operand, t)
        if t == "s32":
            return lw.builder.sext(lw.builder.ashr(lw.builder.shl(value, _const(I32, 8)), _const(I32, 8)), I64)
        return lw.builder.zext(lw.builder.and_(value, _const(I32, 0xFFFFFF)), I64)

    full = lw.builder.mul(low24(a), low24(b))
    if mode == "hi":
        full = lw.builder.lshr(full, _const(I64, 16))
    return lw.builder.trunc(full, I32), mode


@handles("mul24", family="int")
def mul24(lw: Lowering, ins: ast.Instruction) -> None:
    d, a, b = lw.operands(ins, 3)
    lw.write(d, _product24(lw, ins, a, b, set())[0], "b32")


@handles("mad24", family="int")
def mad24(lw: Lowering, ins: ast.Instruction) -> None:
    d, a, b, c = lw.operands(ins, 4)
    value, mode = _product24(lw, ins, a, b, {"sat"})
    addend = lw.read(c, "b32")
    if "sat" in ins.modifiers:
        if mode != "hi" or "s32" not in ins.modifiers:
            raise lw.fail(".sat applies to mad24.hi.s32 only")
        lw.write(d, lw.intrinsic("llvm.sadd.sat", [value, addend]), "b32")
    else:
        lw.write(d, lw.builder.add(value, addend), "b32")


@handles("sad", family="int")
def sad(lw: Lowering, ins: ast.Instruction) -> None:
    t = _type(lw, ins, _INTEGER, "sad")
    lw.check_modifiers(ins, set())
    d, a, b, c = lw.operands(ins, 4)
    x, y = lw.read(a, t), lw.read(b, t)
    below = (lw.builder.icmp_signed if t in _SIGNED else lw.builder.icmp_unsigned)("<", x, y)
    difference = lw.builder.select(below, lw.builder.sub(y, x), lw.builder.sub(x, y))
    lw.write(d, lw.builder.add(lw.read(c, t), difference), t)


# ------------------------------------------------------------------------------------- abs, neg, min, max

@handles("abs", family="int")
def abs_(lw: Lowering, ins: ast.Instruction) -> None:
    t = _type(lw, ins, _SIGNED, "integer abs")
    lw.check_modifiers(ins, set())
    d, a = lw.operands(ins, 2)
    x = lw.read(a, t)
    negative = lw.builder.icmp_signed("<", x, _const(x.type, 0))
    lw.write(d, lw.builder.select(negative, lw.builder.neg(x), x), t)  # abs(INT_MIN) wraps to INT_MIN


@handles("neg", family="int")
def neg(lw: Lowering, ins: ast.Instruction) -> None:
    t = _type(lw, ins, _SIGNED, "integer neg")
    lw.check_modifiers(ins, set())
    d, a = lw.operands(ins, 2)
    lw.write(d, lw.builder.neg(lw.read(a, t)), t)


@handles("min", "max", family="int")
def min_or_max(lw: Lowering, ins: ast.Instruction) -> None:
    maximum = ins.opcode == "max"
    packed = _packed_type(lw, ins)
    relu = "relu" in ins.modifiers
    if packed:
        if relu and packed != "s16x2":
            raise lw.fail(".relu applies to .s16x2 and .s32 only")
        lw.check_modifiers(ins, {packed, "relu"})
        signed = packed == "s16x2"

        def lane(x, y):
            value = _minimum_or_maximum(lw, x, y, signed, maximum)
            return lw.intrinsic("llvm.smax", [value, _const(I16, 0)]) if relu else value

        _lanewise(lw, ins, lane)
        return
    t = _type(lw, ins, _INTEGER, f"integer {ins.opcode}")
    lw.check_modifiers(ins, {"relu"} if t == "s32" else set())
    d, a, b = lw.operands(ins, 3)
    value = _minimum_or_maximum(lw, lw.read(a, t), lw.read(b, t), t in _SIGNED, maximum)
    if relu:  # negative results become 0
        value = lw.intrinsic("llvm.smax", [value, _const(I32, 0)])
    lw.write(d, value, t)


# ------------------------------------------------------------------------------------- div, rem

@handles("div", "rem", family="int")
def divide(lw: Lowering, ins: ast.Instruction) -> None:
    """div/rem with NVIDIA's results where LLVM has UB, as measured on an H200 for every type: x/0 and x%0
    are all ones (signed too), INT_MIN / -1 wraps to INT_MIN with remainder 0."""
    t = _type(lw, ins, _INTEGER, f"integer {ins.opcode}")
    lw.check_modifiers(ins, set())
    d, a, b = lw.operands(ins, 3)
    x, y = lw.read(a, t), lw.read(b, t)
    ty, builder, remainder = x.type, lw.builder, ins.opcode == "rem"
    by_zero = builder.icmp_unsigned("==", y, _const(ty, 0))
    unsafe = by_zero
    if t in _SIGNED:  # INT_MIN / -1 divides by 1 instead: quotient INT_MIN, remainder 0
        unsafe = builder.or_(by_zero, builder.and_(builder.icmp_signed("==", x, _const(ty, 1 << (ty.width - 1))),
                                                   builder.icmp_signed("==", y, _const(ty, -1))))
        operation = builder.srem if remainder else builder.sdiv
    else:
        operation = builder.urem if remainder else builder.udiv
    value = operation(x, builder.select(unsafe, _const(ty, 1), y))
    lw.write(d, builder.select(by_zero, _const(ty, -1), value), t)


# ------------------------------------------------------------------------------------- bit counting

@handles("cnot", family="int")
def cnot(lw: Lowering, ins: ast.Instruction) -> None:
    t = _type(lw, ins, {"b16", "b32", "b64"}, "cnot")
    lw.check_modifiers(ins, set())
    d, a = lw.operands(ins, 2)
    x = lw.read(a, t)
    lw.write(d, lw.builder.zext(lw.builder.icmp_unsigned("==", x, _const(x.type, 0)), x.type), t)


@handles("popc", "clz", family="int")
def count_bits(lw: Lowering, ins: ast.Instruction) -> None:
    t = _type(lw, ins, _BITS, ins.opcode)
    lw.check_modifiers(ins, set())
    d, a = lw.operands(ins, 2)
    x = lw.read(a, t)
    if ins.opcode == "popc":
        count = lw.intrinsic("llvm.ctpop", [x])
    else:
        count = lw.intrinsic("llvm.ctlz", [x, _const(I1, 0)])  # clz(0) is the width, not poison
    lw.write(d, _resize(lw, count, I32), "u32")


@handles("brev", family="int")
def brev(lw: Lowering, ins: ast.Instruction) -> None:
    t = _type(lw, ins, _BITS, "brev")
    lw.check_modifiers(ins, set())
    d, a = lw.operands(ins, 2)
    lw.write(d, lw.intrinsic("llvm.bitreverse", [lw.read(a, t)]), t)


@handles("bfind", family="int")
def bfind(lw: Lowering, ins: ast.Instruction) -> None:
    """Position of the most significant non-sign bit (.shiftamt: its distance from the top); 0xffffffff if none."""
    t = _type(lw, ins, {"u32", "s32", "u64", "s64"}, "bfind")
    lw.check_modifiers(ins, {"shiftamt"})
    d, a = lw.operands(ins, 2)
    x = lw.read(a, t)
    if t in _SIGNED:
        x = lw.builder.select(lw.builder.icmp_signed("<", x, _const(x.type, 0)), lw.builder.not_(x), x)
    leading = _resize(lw, lw.intrinsic("llvm.ctlz", [x, _const(I1, 0)]), I32)
    if "shiftamt" in ins.modifiers:
        none = lw.builder.icmp_unsigned("==", x, _const(x.type, 0))
        value = lw.builder.select(none, _const(I32, -1), leading)
    else:  # width-1-ctlz, which is -1 = 0xffffffff for x = 0
        value = lw.builder.sub(_const(I32, x.type.width - 1), leading)
    lw.write(d, value, "u32")


@handles("fns", family="int")
def fns(lw: Lowering, ins: ast.Instruction) -> None:
    """The |offset|-th set bit of mask counting up (offset > 0) or down (< 0) from bit base (inclusive);
    offset 0 tests bit base alone; 0xffffffff if there is none. Base above 31 is undefined in PTX: taken
    modulo 32 here, which keeps LLVM free of poison. Offset INT_MIN gives 0, as an H200 does (the ISA's
    search, with |offset| = 2^31, would find nothing)."""
    _type(lw, ins, {"b32"}, "fns")
    lw.check_modifiers(ins, set())
    d, a, b, c = lw.operands(ins, 4)
    builder = lw.builder
    mask, offset = lw.read(a, "b32"), lw.read(c, "s32")
    base = builder.and_(lw.read(b, "u32"), _const(I32, 31))
    backward = builder.icmp_signed("<", offset, _const(I32, 0))
    wanted = builder.select(backward, builder.neg(offset), offset)  # |offset| as unsigned (INT_MIN too)
    upward = builder.and_(mask, builder.shl(_const(I32, -1), base))
    # Counting down from base is counting up in the bit-reversed mask, from bit 31-base.
    downward = lw.intrinsic("llvm.bitreverse", [
        builder.and_(mask, builder.lshr(_const(I32, -1), builder.sub(_const(I32, 31), base)))])
    bits = builder.select(backward, downward, upward)
    # Binary search for the highest position with fewer than `wanted` set bits below it: the wanted bit.
    position = _const(I32, 0)
    for step in (16, 8, 4, 2, 1):
        candidate = builder.add(position, _const(I32, step))
        below = lw.intrinsic("llvm.ctpop", [builder.and_(bits, builder.sub(builder.shl(_const(I32, 1), candidate),
                                                                         _const(I32, 1)))])
        position = builder.select(builder.icmp_unsigned("<", below, wanted), candidate, position)
    found = builder.icmp_unsigned(">=", lw.intrinsic("llvm.ctpop", [bits]), wanted)
    position = builder.select(backward, builder.sub(_const(I32, 31), position), position)
    counted = builder.select(found, position, _const(I32, -1))
    base_set = builder.trunc(builder.lshr(mask, base), I1)
    at_base = builder.select(base_set, base, _const(I32, -1))
    result = builder.select(builder.icmp_signed("==", offset, _const(I32, 0)), at_base, counted)
    # offset INT_MIN: 0 for every mask and base on an H200 (the ISA's search would find nothing)
    lw.write(d, builder.select(builder.icmp_signed("==", offset, _const(I32, -2**31)), _const(I32, 0), result), "b32")


# ------------------------------------------------------------------------------------- bit fields

def _field_operand(lw: Lowering, operand: ast.Operand, width: int) -> ir.Value:
    """A position or length operand of bfe/bfi. The ISA keeps its low 8 bits; NVIDIA GPUs do so in the
    32-bit forms but use the whole value in the 64-bit ones (measured on an H200: only values ≥ 256 tell
    the two apart), and fatkit computes what the GPU does, so that programs behave as they did there."""
    value = lw.read(operand, "u32")
    return value if width == 64 else lw.builder.and_(value, _const(I32, 0xFF))


@handles("bfe", family="int")
def bfe(lw: Lowering, ins: ast.Instruction) -> None:
    """Extract len bits from pos: zero-filled (.u) or filled with the field's last bit inside a (.s)."""
    t = _type(lw, ins, {"u32", "s32", "u64", "s64"}, "bfe")
    lw.check_modifiers(ins, set())
    d, a, b, c = lw.operands(ins, 4)
    builder, x = lw.builder, lw.read(a, t)
    ty, width = x.type, x.type.width
    position, length = _field_operand(lw, b, width), _field_operand(lw, c, width)
    outside = builder.icmp_unsigned(">=", position, _const(I32, width))
    room = builder.select(outside, _const(I32, 0), builder.sub(_const(I32, width), position))
    kept = lw.intrinsic("llvm.umin", [length, room])  # field bits that lie inside a
    field = builder.and_(_shift_or_zero(lw, "lshr", x, position), _low_mask(lw, ty, kept))
    if t in _SIGNED:
        # pos + len - 1 without wrapping (whole 32-bit operands in the 64-bit form), capped at the top bit
        end = builder.add(builder.zext(position, I64), builder.zext(length, I64))
        last = builder.trunc(lw.intrinsic("llvm.umin", [builder.sub(end, _const(I64, 1)), _const(I64, width - 1)]),
                             I32)
        sign = builder.trunc(builder.lshr(x, _resize(lw, last, ty)), I1)
        sign = builder.and_(sign, builder.icmp_unsigned("!=", length, _const(I32, 0)))
        field = builder.or_(field, builder.select(sign, builder.not_(_low_mask(lw, ty, kept)), _const(ty, 0)))
    lw.write(d, field, t)


@handles("bfi", family="int")
def bfi(lw: Lowering, ins: ast.Instruction) -> None:
    """Insert the low len bits of a into b at pos (bits past the top are dropped)."""
    t = _type(lw, ins, _BITS, "bfi")
    lw.check_modifiers(ins, set())
    f, a, b, c, d = lw.operands(ins, 5)
    builder = lw.builder
    source, target = lw.read(a, t), lw.read(b, t)
    ty = source.type
    position, length = _field_operand(lw, c, ty.width), _field_operand(lw, d, ty.width)
    field = _shift_or_zero(lw, "shl", _low_mask(lw, ty, length), position)
    inserted = builder.and_(_shift_or_zero(lw, "shl", source, position), field)
    lw.write(f, builder.or_(builder.and_(target, builder.not_(field)), inserted), t)


@handles("bmsk", family="int")
def bmsk(lw: Lowering, ins: ast.Instruction) -> None:
    """A mask of b bits from bit a; .wrap takes a and b modulo 32, .clamp saturates them at 32."""
    _type(lw, ins, {"b32"}, "bmsk")
    mode = _one_of(lw, ins, ("clamp", "wrap"), required=True)
    lw.check_modifiers(ins, {mode})
    d, a, b = lw.operands(ins, 3)
    builder, ones, zero = lw.builder, _const(I32, -1), _const(I32, 0)
    start, width = lw.read(a, "u32"), lw.read(b, "u32")
    start_low, width_low = builder.and_(start, _const(I32, 31)), builder.and_(width, _const(I32, 31))
    low = builder.shl(ones, start_low)
    end = builder.add(start_low, width_low)
    past_end = builder.icmp_unsigned(">=", end, _const(I32, 32))
    if mode == "clamp":
        start_over = builder.icmp_unsigned(">=", start, _const(I32, 32))
        width_over = builder.icmp_unsigned(">=", width, _const(I32, 32))
        low = builder.select(start_over, zero, low)
        past_end = builder.or_(past_end, builder.or_(start_over, width_over))
    high = builder.select(builder.icmp_unsigned("==", width_low, zero), ones,
                          builder.shl(ones, builder.select(past_end, zero, end)))
    high = builder.select(past_end, zero, high)
    lw.write(d, builder.and_(low, builder.not_(high)), "b32")


@handles("szext", family="int")
def szext(lw: Lowering, ins: ast.Instruction) -> None:
    """Sign- (.s32) or zero-extend (.u32) the low b bits of a; b = 0 gives 0, b ≥ 32 is .clamp'ed to a
    itself or .wrap'ped modulo 32."""
    t = _type(lw, ins, {"u32", "s32"}, "szext")
    mode = _one_of(lw, ins, ("clamp", "wrap"), required=True)
    lw.check_modifiers(ins, {mode})
    d, a, b = lw.operands(ins, 3)
    builder, zero = lw.builder, _const(I32, 0)
    x, count = lw.read(a, t), lw.read(b, "u32")
    count_low = builder.and_(count, _const(I32, 31))
    high = builder.shl(_const(I32, -1), count_low)
    too_large = builder.icmp_unsigned(">=", count, _const(I32, 32)) if mode == "clamp" else _const(I1, 0)
    high = builder.select(too_large, zero, high)
    value = builder.and_(x, builder.not_(high))
    if t == "s32":
        sign_position = builder.and_(builder.sub(count_low, _const(I32, 1)), _const(I32, 31))
        sign = builder.trunc(builder.lshr(x, sign_position), I1)
        extend = builder.and_(sign, builder.and_(builder.icmp_unsigned("!=", count_low, zero),
                                                 builder.not_(too_large)))
        value = builder.or_(value, builder.select(extend, high, zero))
    lw.write(d, value, t)


# ------------------------------------------------------------------------------------- permute, funnel shift

# prmt's modes: the source byte (0-3 of a, 4-7 of b) of each result byte i, given s = c & 3.
_PERMUTE_MODES = {
    "f4e": lambda lw, s, i: lw.builder.and_(lw.builder.add(s, _const(I32, i)), _const(I32, 7)),
    "b4e": lambda lw, s, i: lw.builder.and_(lw.builder.sub(s, _const(I32, i)), _const(I32, 7)),
    "rc8": lambda lw, s, i: s,
    "ecl": lambda lw, s, i: lw.intrinsic("llvm.umax", [s, _const(I32, i)]),
    "ecr": lambda lw, s, i: lw.intrinsic("llvm.umin", [s, _const(I32, i)]),
    "rc16": lambda lw, s, i: lw.builder.or_(lw.builder.shl(lw.builder.and_(s, _const(I32, 1)), _const(I32, 1)),
                                            _const(I32, i & 1)),
}


@handles("prmt", family="int")
def prmt(lw: Lowering, ins: ast.Instruction) -> None:
    """Pick each result byte from the eight bytes of {b, a}: by the nibbles of c (whose top bit replicates
    the picked byte's sign), or by a mode and the low two bits of c."""
    _type(lw, ins, {"b32"}, "prmt")
    mode = _one_of(lw, ins, tuple(_PERMUTE_MODES), required=False)
    lw.check_modifiers(ins, {mode} if mode else set())
    d, a, b, c = lw.operands(ins, 4)
    builder = lw.builder
    source = builder.or_(builder.zext(lw.read(a, "b32"), I64),
                         builder.shl(builder.zext(lw.read(b, "b32"), I64), _const(I64, 32)))
    selector = lw.read(c, "b32")
    result = _const(I32, 0)
    for i in range(4):
        if mode:
            index, replicate = _PERMUTE_MODES[mode](lw, builder.and_(selector, _const(I32, 3)), i), None
        else:
            nibble = builder.lshr(selector, _const(I32, 4 * i))
            index = builder.and_(nibble, _const(I32, 7))
            replicate = builder.trunc(builder.lshr(nibble, _const(I32, 3)), I1)
        byte = builder.trunc(builder.lshr(source, builder.zext(builder.shl(index, _const(I32, 3)), I64)), I8)
        if replicate is not None:
            sign = builder.ashr(byte, _const(I8, 7))
            byte = builder.select(replicate, sign, byte)
        result = builder.or_(result, builder.shl(builder.zext(byte, I32), _const(I32, 8 * i)))
    lw.write(d, result, "b32")


@handles("shf", family="int")
def shf(lw: Lowering, ins: ast.Instruction) -> None:
    """Funnel shift of {b, a} by c (.clamp: at most 32, .wrap: modulo 32); .l keeps the high word, .r the low."""
    _type(lw, ins, {"b32"}, "shf")
    direction = _one_of(lw, ins, ("l", "r"), required=True)
    mode = _one_of(lw, ins, ("clamp", "wrap"), required=True)
    lw.check_modifiers(ins, {direction, mode})
    d, a, b, c = lw.operands(ins, 4)
    builder = lw.builder
    amount = lw.read(c, "u32")
    if mode == "clamp":
        amount = lw.intrinsic("llvm.umin", [amount, _const(I32, 32)])
    else:
        amount = builder.and_(amount, _const(I32, 31))
    joined = builder.or_(builder.zext(lw.read(a, "b32"), I64),
                         builder.shl(builder.zext(lw.read(b, "b32"), I64), _const(I64, 32)))
    amount = builder.zext(amount, I64)
    if direction == "l":
        shifted = builder.lshr(builder.shl(joined, amount), _const(I64, 32))
    else:
        shifted = builder.lshr(joined, amount)
    lw.write(d, builder.trunc(shifted, I32), "b32")


# ------------------------------------------------------------------------------------- lop3, dot products

@handles("lop3", family="int")
def lop3(lw: Lowering, ins: ast.Instruction) -> None:
    """Any three-input boolean function, given as the truth table immLut = F(0xF0, 0xCC, 0xAA); the
    .or/.and form also writes p = (d != 0) BoolOp q."""
    _type(lw, ins, {"b32"}, "lop3")
    combine = _one_of(lw, ins, ("or", "and"), required=False)
    lw.check_modifiers(ins, {combine} if combine else set())
    if combine:
        result, a, b, c, table, q = lw.operands(ins, 6)
        if type(result) is not ast.Pair:
            raise lw.fail(f"lop3.{combine} writes d|p")
        d, p = result.first, result.second
    else:
        d, a, b, c, table = lw.operands(ins, 5)
    if type(table) is not ast.IntImm or not 0 <= table.value <= 0xFF:
        raise lw.fail("immLut must be an 8-bit integer literal")
    builder = lw.builder
    inputs = [lw.read(operand, "b32") for operand in (a, b, c)]
    value = _const(I32, 0)
    for row in range(8):  # one minterm per set bit of the table: row bits 2, 1, 0 are a, b, c
        if table.value >> row & 1:
            term = _const(I32, -1)
            for bit, x in zip((4, 2, 1), inputs):
                term = builder.and_(term, x if row & bit else builder.not_(x))
            value = builder.or_(value, term)
    if type(d) is not ast.Sink:
        lw.write(d, value, "b32")
    if combine:
        nonzero = builder.icmp_unsigned("!=", value, _const(I32, 0))
        flag = (builder.or_ if combine == "or" else builder.and_)(nonzero, lw.read(q, "pred"))
        if type(p) is not ast.Sink:
            lw.write(p, flag, "pred")


def _dot_types(lw: Lowering, ins: ast.Instruction) -> tuple[bool, bool]:
    types = lw.types(ins, 2)
    if any(t not in ("u32", "s32") for t in types):
        raise lw.fail(f"{ins.opcode} takes .u32/.s32 operand types")
    return types[0] == "s32", types[1] == "s32"


def _element(lw: Lowering, value: ir.Value, index: int, bits: int, signed: bool) -> ir.Value:
    """Element `index` of `bits` bits of a 32-bit value, extended to 32 bits."""
    piece = lw.builder.trunc(lw.builder.lshr(value, _const(I32, index * bits)), ir.IntType(bits))
    return (lw.builder.sext if signed else lw.builder.zext)(piece, I32)


def _dot(lw: Lowering, ins: ast.Instruction, pairs: list[tuple[int, int]], a_bits: int, extra: set[str]) -> None:
    """d = c + Σ a.element(i) · b.byte(j) over `pairs` (i, j), modulo 2^32."""
    a_signed, b_signed = _dot_types(lw, ins)
    lw.check_modifiers(ins, extra)
    d, a, b, c = lw.operands(ins, 4)
    x, y = lw.read(a, "b32"), lw.read(b, "b32")
    total = lw.read(c, "b32")
    for i, j in pairs:
        total = lw.builder.add(total, lw.builder.mul(_element(lw, x, i, a_bits, a_signed),
                                                     _element(lw, y, j, 8, b_signed)))
    lw.write(d, total, "b32")


@handles("dp4a", family="int")
def dp4a(lw: Lowering, ins: ast.Instruction) -> None:
    _dot(lw, ins, [(i, i) for i in range(4)], 8, set())


@handles("dp2a", family="int")
def dp2a(lw: Lowering, ins: ast.Instruction) -> None:
    """The two 16-bit halves of a times bytes 0-1 (.lo) or 2-3 (.hi) of b."""
    half = _one_of(lw, ins, ("lo", "hi"), required=True)
    first = 0 if half == "lo" else 2
    _dot(lw, ins, [(0, first), (1, first + 1)], 16, {half})


# ------------------------------------------------------------------------------------- logic, shifts

def _logic_type(lw: Lowering, ins: ast.Instruction) -> str:
    (t,) = lw.types(ins, 1)
    lw.check_modifiers(ins, set())
    if t != "pred" and t[0] != "b":
        raise lw.fail("logic instructions take .pred or .bN types")
    return t


_LOGIC = {"and": "and_", "or": "or_", "xor": "xor"}  # llvmlite's builder methods


@handles(*_LOGIC)
def logic(lw: Lowering, ins: ast.Instruction) -> None:
    t = _logic_type(lw, ins)
    d, a, b = lw.operands(ins, 3)
    lw.write(d, getattr(lw.builder, _LOGIC[ins.opcode])(lw.read(a, t), lw.read(b, t)), t)


@handles("not")
def not_(lw: Lowering, ins: ast.Instruction) -> None:
    t = _logic_type(lw, ins)
    d, a = lw.operands(ins, 2)
    lw.write(d, lw.builder.not_(lw.read(a, t)), t)


@handles("shl", "shr")
def shift(lw: Lowering, ins: ast.Instruction) -> None:
    t = _type(lw, ins, {"b16", "b32", "b64"} | (_INTEGER if ins.opcode == "shr" else set()), ins.opcode)
    lw.check_modifiers(ins, set())
    d, a, b = lw.operands(ins, 3)
    value, amount = lw.read(a, t), lw.read(b, "u32")
    if ins.opcode == "shr" and t[0] == "s":  # counts past the width fill with the sign, as width-1 does
        known = constant_bits(amount)
        clamped = lw.intrinsic("llvm.umin", [amount, _const(I32, value.type.width - 1)]) if known is None \
            else _const(I32, min(known, value.type.width - 1))
        lw.write(d, lw.builder.ashr(value, _resize(lw, clamped, value.type)), t)
        return
    lw.write(d, _shift_or_zero(lw, "shl" if ins.opcode == "shl" else "lshr", value, amount), t)
