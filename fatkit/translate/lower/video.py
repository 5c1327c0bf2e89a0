"""The video instructions and cvt.pack: integer arithmetic on bytes and half-words of 32-bit registers.

Scalar (vadd vsub vabsdiff vmin vmax vshl vshr vset, and vmad): each source is the whole word or the byte
(`.b0`–`.b3`) or half-word (`.h0`/`.h1`) its selector names, zero- or sign-extended by its type (`.u32` or
`.s32`) to 33 bits; the operation is exact (computed here in 64 bits, 128 for the shifts and vmad), except that
vshl keeps the ISA's .s34 intermediate: the low 34 bits of the shifted value, sign-extended. `.sat`
clamps the result to the destination type's range, of the byte or half-word a merge writes (`d.b1`) or else
of the word. Then either a secondary operation with c (`.add`, `.min`, `.max`; c extended by the
destination type, unsigned for vset), or a merge: the result's low byte replaces that byte of c (`d.b2`),
and for the half-words the result's half-word at the same place (`d.h1` takes the result's bits 16–31, as an
H200 does, not its low half as the ISA text reads). `.min`/`.max` compare, as an H200 does, the result
wrapped to 32 bits and sign-extended with c extended by the destination type, as signed or unsigned 64-bit
values by that type. The low 32 bits are written.

SIMD (vadd2 vsub2 vavrg2 vabsdiff2 vmin2 vmax2 vset2, and the 4-way forms on bytes): element i of each
source is the half-word (byte) its selector digit names among the four half-words (eight bytes) of the
pair {a in the low word, b in the high}: `.hxy` puts half-word x in element 1 and y in element 0 (defaults
`.h10` for a, `.h32` for b; `.bxyzw`, defaults `.b3210`/`.b7654`), extended by the source's type. Each lane
computes exactly (vavrg: the sum halved, rounded half away from zero); `.sat` clamps to the destination
element's range. Then the destination mask (`d.h0`, `d.b20`, default all lanes) chooses, per element: a
merge writes the masked elements' low bits and keeps c's elsewhere; `.add` adds the masked elements' exact
values to c (mod 2^32). vset lanes are 1 or 0.

NVIDIA's own lowering (ptxas for sm_90, which has no video units: read from the SASS it emits) departs from
the ISA text in corner cases. Where the H200 verification run showed the departure (the `.h1` merge and
`.min`/`.max` with c, above), this module follows the hardware, since the programs it translates were written
against it; elsewhere it follows the ISA: a .u32 word `.sat` result above U32_MAX wraps
there instead of clamping; a sub-word `.sat` merge saturates negative results to the sub-word's maximum;
vmad multiplies .u32 sources as signed 32-bit values in a 64-bit intermediate (visible with .sat
and .shr7/.shr15). The SIMD forms' saturation and accumulation agree with the ISA there.

cvt.pack.sat.{u16,s16}.s32 d, a, b: a and b (signed) clamped to the type's range, a in the high half and b
in the low one; cvt.pack.sat.{u8,s8,u4,s4,u2,s2}.s32.b32 d, a, b, c: the same in the low 2·n bits, and c's
low bits above them.
"""

from __future__ import annotations

from llvmlite import ir

from fatkit.translate.lower.core import I32, I64, I128, Lowering, handles
from fatkit.translate.ptx import ast

_SCALAR = ("vadd", "vsub", "vabsdiff", "vmin", "vmax")
_SHIFTS = ("vshl", "vshr")
_SIMD = ("add", "sub", "avrg", "absdiff", "min", "max")
_COMPARISONS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_PARTS = {**{f"b{i}": (8 * i, 8) for i in range(4)}, "h0": (0, 16), "h1": (16, 16)}
_SECONDARY = ("add", "min", "max")


def _const(ty: ir.IntType, value: int) -> ir.Constant:
    return ir.Constant(ty, value & ((1 << ty.width) - 1))


def _video_types(lw: Lowering, ins: ast.Instruction, count: int) -> list[bool]:
    """Whether each of the `count` type modifiers (.u32/.s32) is signed."""
    types = [m for m in ins.modifiers if m in ast.TYPES]
    if len(types) != count or any(t not in ("u32", "s32") for t in types):
        raise lw.fail(f"{ins.opcode} takes {count} types, each .u32 or .s32")
    return [t == "s32" for t in types]


def _one(lw: Lowering, ins: ast.Instruction, choices, what: str) -> str | None:
    found = [m for m in ins.modifiers if m in choices]
    if len(found) > 1:
        raise lw.fail(f"more than one {what}")
    return found[0] if found else None


def _plain(lw: Lowering, operand: ast.Operand) -> tuple[ast.Operand, str | None]:
    """An operand and its selector (`%r1.b2` → %r1, "b2")."""
    if type(operand) is ast.Minus:
        raise lw.fail(f"-{operand.operand}: only vmad negates its operands")
    if type(operand) is ast.Name and operand.component is not None:
        return ast.Name(operand.name), operand.component
    return operand, None


def _word(lw: Lowering, operand: ast.Operand) -> ir.Value:
    return lw.read(operand, "u32")


def _extend(lw: Lowering, value: ir.Value, signed: bool, ty: ir.IntType) -> ir.Value:
    return (lw.builder.sext if signed else lw.builder.zext)(value, ty)


def _part(lw: Lowering, word: ir.Value, selector: str | None, signed: bool, ty: ir.IntType) -> ir.Value:
    """The selected byte/half-word (or the whole word) of `word`, extended to `ty`."""
    if selector is None:
        return _extend(lw, word, signed, ty)
    if selector not in _PARTS:
        raise lw.fail(f"selector .{selector}: scalar video operands select .b0–.b3 or .h0/.h1")
    shift, width = _PARTS[selector]
    piece = lw.builder.trunc(lw.builder.lshr(word, ir.Constant(I32, shift)), ir.IntType(width))
    return _extend(lw, piece, signed, ty)


def _clamp(lw: Lowering, value: ir.Value, low: int, high: int, signed: bool = True) -> ir.Value:
    builder, ty = lw.builder, value.type
    compare = builder.icmp_signed if signed else builder.icmp_unsigned
    value = builder.select(compare("<", value, _const(ty, low)), _const(ty, low), value)
    return builder.select(compare(">", value, _const(ty, high)), _const(ty, high), value)


def _range(bits: int, signed: bool) -> tuple[int, int]:
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def _minmax(lw: Lowering, x: ir.Value, y: ir.Value, maximum: bool) -> ir.Value:
    return lw.builder.select(lw.builder.icmp_signed(">" if maximum else "<", x, y), x, y)


def _absolute(lw: Lowering, x: ir.Value) -> ir.Value:
    negative = lw.builder.icmp_signed("<", x, ir.Constant(x.type, 0))
    return lw.builder.select(negative, lw.builder.neg(x), x)


# ------------------------------------------------------------------------------------------------- scalar

def _finish_scalar(lw: Lowering, ins: ast.Instruction, tmp: ir.Value, d: ast.Operand, rest: tuple, dtype_signed: bool, sat: bool,
                   secondary: str | None) -> None:
    """Saturate, then the secondary operation or the merge with c, and write the low 32 bits to d."""
    builder, ty = lw.builder, tmp.type
    d, dsel = _plain(lw, d)
    if dsel is not None and dsel not in _PARTS:
        raise lw.fail(f"destination selector .{dsel}: a scalar merge writes .b0–.b3 or .h0/.h1")
    if (dsel is not None or secondary is not None) != bool(rest):
        raise lw.fail("c is given exactly when there is a secondary operation or a merge (d.bN/d.hN)")
    if dsel is not None and secondary is not None:
        raise lw.fail("a merge (d.bN/d.hN) and a secondary operation exclude each other")
    if sat:
        bits = _PARTS[dsel][1] if dsel is not None else 32
        tmp = _clamp(lw, tmp, *_range(bits, dtype_signed))
    if rest:
        c, c_selector = _plain(lw, rest[0])
        if c_selector is not None:
            raise lw.fail("c takes no selector")
        c_word = _word(lw, c)
        if dsel is not None:
            shift, width = _PARTS[dsel]
            mask = ((1 << width) - 1) << shift
            low = builder.trunc(tmp, I32)
            # an H200 merges .h1 from the result's own upper half (ptxas: PRMT 0x3254), a byte from its low byte
            moved = low if dsel == "h1" else builder.shl(low, ir.Constant(I32, shift))
            placed = builder.and_(moved, ir.Constant(I32, mask))
            lw.write(d, builder.or_(placed, builder.and_(c_word, _const(I32, ~mask))), "u32")
            return
        c_value = _extend(lw, c_word, dtype_signed, ty)
        if secondary == "add":
            tmp = builder.add(tmp, c_value)
        else:  # as an H200 does: the result wrapped to 32 bits, sign-extended, compared by the type's sign
            wrapped = builder.sext(builder.trunc(tmp, I32), ty)
            maximum = secondary == "max"
            if dtype_signed:
                tmp = _minmax(lw, wrapped, c_value, maximum)
            else:
                below = builder.icmp_unsigned(">" if maximum else "<", wrapped, c_value)
                tmp = builder.select(below, wrapped, c_value)
    lw.write(d, builder.trunc(tmp, I32), "u32")


@handles(*_SCALAR, *_SHIFTS, "vset")
def scalar_video(lw, ins):
    """vadd vsub vabsdiff vmin vmax vshl vshr vset (the scalar forms; see the module docstring)."""
    op, builder = ins.opcode, lw.builder
    comparison = _one(lw, ins, _COMPARISONS, "comparison") if op == "vset" else None
    mode = _one(lw, ins, ("clamp", "wrap"), "shift mode") if op in _SHIFTS else None
    secondary = _one(lw, ins, _SECONDARY, "secondary operation")
    sat = "sat" in ins.modifiers
    if op == "vset":
        if comparison is None or sat:
            raise lw.fail("vset takes a comparison and no .sat")
        a_signed, b_signed = _video_types(lw, ins, 2)
        dtype_signed = False  # the comparison's 0/1 (and so c) are unsigned
    else:
        dtype_signed, a_signed, b_signed = _video_types(lw, ins, 3)
    if op in _SHIFTS and (mode is None or b_signed):
        raise lw.fail(f"{op} takes .clamp or .wrap and an unsigned (.u32) shift amount")
    lw.check_modifiers(ins, {*_SECONDARY, *(_COMPARISONS if op == "vset" else ("sat",)),
                             *(("clamp", "wrap") if op in _SHIFTS else ())})
    if len(ins.operands) not in (3, 4):
        raise lw.fail(f"{op} takes d, a, b and an optional c")
    d, a, b, *rest = ins.operands
    (a, asel), (b, bsel) = _plain(lw, a), _plain(lw, b)
    ty = I128 if op in _SHIFTS else I64
    ta = _part(lw, _word(lw, a), asel, a_signed, ty)
    tb = _part(lw, _word(lw, b), bsel, b_signed, ty)
    if op == "vadd":
        tmp = builder.add(ta, tb)
    elif op == "vsub":
        tmp = builder.sub(ta, tb)
    elif op == "vabsdiff":
        tmp = _absolute(lw, builder.sub(ta, tb))
    elif op in ("vmin", "vmax"):
        tmp = _minmax(lw, ta, tb, maximum=op == "vmax")
    elif op == "vset":
        tmp = builder.zext(builder.icmp_signed(_COMPARISONS[comparison], ta, tb), ty)
    else:
        if mode == "clamp":
            amount = _clamp(lw, tb, 0, 32)
        else:
            amount = builder.and_(tb, ir.Constant(ty, 31))
        tmp = builder.shl(ta, amount) if op == "vshl" else builder.ashr(ta, amount)
        if op == "vshl":  # the ISA's .s34 intermediate: a left shift keeps its low 34 bits, sign-extended
            tmp = builder.sext(builder.trunc(tmp, ir.IntType(34)), ty)
    _finish_scalar(lw, ins, tmp, d, tuple(rest), dtype_signed, sat, secondary)


@handles("vmad")
def vmad(lw: Lowering, ins: ast.Instruction) -> None:
    """d = ±(a·b) ± c [+ 1 with .po] [>> 7 or 15], exact in 128 bits. The result is signed when a or b is or
    either term is negated (then c is read as signed; a negated c as -c of its signed value); .sat clamps to
    the 32-bit range of that signedness. The ISA negates the product or c, not both, and nothing with .po."""
    builder = lw.builder
    _, a_signed, b_signed = _video_types(lw, ins, 3)
    scale = _one(lw, ins, ("shr7", "shr15"), "scale")
    lw.check_modifiers(ins, {"sat", "po", "shr7", "shr15"})
    d, *sources = lw.operands(ins, 4)
    negated = [type(x) is ast.Minus for x in sources]
    (a, asel), (b, bsel), (c, csel) = (_plain(lw, x.operand if type(x) is ast.Minus else x) for x in sources)
    if csel is not None or (type(d) is ast.Name and d.component is not None):
        raise lw.fail("vmad's c and d take no selector")
    negate_product, negate_c = negated[0] != negated[1], negated[2]
    if (negate_product and negate_c) or (any(negated) and "po" in ins.modifiers):
        raise lw.fail("vmad negates the product or c, not both, and no operand with .po")
    signed = a_signed or b_signed or negate_product or negate_c
    product = builder.mul(_part(lw, _word(lw, a), asel, a_signed, I128),
                          _part(lw, _word(lw, b), bsel, b_signed, I128))
    if negate_product:
        product = builder.neg(product)
    addend = _extend(lw, _word(lw, c), signed, I128)
    total = builder.sub(product, addend) if negate_c else builder.add(product, addend)
    if "po" in ins.modifiers:
        total = builder.add(total, ir.Constant(I128, 1))
    if scale is not None:
        total = builder.ashr(total, ir.Constant(I128, 7 if scale == "shr7" else 15))
    if "sat" in ins.modifiers:
        total = _clamp(lw, total, *_range(32, signed))
    lw.write(d, builder.trunc(total, I32), "u32")


# ------------------------------------------------------------------------------------------------- SIMD

def _simd_selector(lw: Lowering, selector: str | None, default: str, lanes: int) -> list[int]:
    """The source element index of each lane (lane 0 first) for `.hxy`/`.bxyzw`."""
    selector = selector or default
    kind, digits = ("h", 4) if lanes == 2 else ("b", 8)
    if selector[0] != kind or len(selector) != lanes + 1 or any(int(x) >= digits for x in selector[1:]):
        raise lw.fail(f"selector .{selector}: a {lanes}-way source selects .{kind} and {lanes} digits "
                      f"below {digits}")
    return [int(x) for x in reversed(selector[1:])]


def _simd_mask(lw: Lowering, selector: str | None, lanes: int) -> list[bool]:
    kind = "h" if lanes == 2 else "b"
    if selector is None:
        return [True] * lanes
    if selector[0] != kind or not selector[1:] or any(int(x) >= lanes for x in selector[1:]) \
            or len(set(selector[1:])) != len(selector[1:]):
        raise lw.fail(f"mask .{selector}: a {lanes}-way destination mask is .{kind} and distinct lanes")
    return [str(i) in selector[1:] for i in range(lanes)]


@handles(*(f"v{op}{n}" for op in _SIMD for n in (2, 4)), "vset2", "vset4")
def simd_video(lw, ins):
    """The 2- and 4-way SIMD video forms (see the module docstring)."""
    builder = lw.builder
    lanes = int(ins.opcode[-1])
    op = ins.opcode[1:-1]
    width = 32 // lanes
    accumulate = "add" in ins.modifiers
    sat = "sat" in ins.modifiers
    if op == "set":
        comparison = _one(lw, ins, _COMPARISONS, "comparison")
        if comparison is None or sat:
            raise lw.fail(f"{ins.opcode} takes a comparison and no .sat")
        a_signed, b_signed = _video_types(lw, ins, 2)
        dtype_signed = False
    else:
        comparison = None
        dtype_signed, a_signed, b_signed = _video_types(lw, ins, 3)
    if sat and accumulate:
        raise lw.fail(".sat cannot be used with the secondary .add")
    lw.check_modifiers(ins, {"add", *(_COMPARISONS if op == "set" else ("sat",))})
    d, a, b, c = lw.operands(ins, 4)
    (d, dsel), (a, asel), (b, bsel), (c, csel) = (_plain(lw, x) for x in (d, a, b, c))
    if csel is not None:
        raise lw.fail("c takes no selector")
    defaults = ("h10", "h32") if lanes == 2 else ("b3210", "b7654")
    a_lanes = _simd_selector(lw, asel, defaults[0], lanes)
    b_lanes = _simd_selector(lw, bsel, defaults[1], lanes)
    mask = _simd_mask(lw, dsel, lanes)
    a_word, b_word, c_word = _word(lw, a), _word(lw, b), _word(lw, c)
    pair = builder.or_(builder.zext(a_word, I64), builder.shl(builder.zext(b_word, I64), ir.Constant(I64, 32)))
    element = ir.IntType(width)

    def source(index: int, signed: bool) -> ir.Value:
        piece = builder.trunc(builder.lshr(pair, ir.Constant(I64, index * width)), element)
        return _extend(lw, piece, signed, I32)

    results = []
    for lane in range(lanes):
        x, y = source(a_lanes[lane], a_signed), source(b_lanes[lane], b_signed)
        if op == "add":
            t = builder.add(x, y)
        elif op == "sub":
            t = builder.sub(x, y)
        elif op == "avrg":
            total = builder.add(x, y)
            up = builder.zext(builder.icmp_signed(">=", total, ir.Constant(I32, 0)), I32)
            t = builder.ashr(builder.add(total, up), ir.Constant(I32, 1))
        elif op == "absdiff":
            t = _absolute(lw, builder.sub(x, y))
        elif op in ("min", "max"):
            t = _minmax(lw, x, y, maximum=op == "max")
        else:
            t = builder.zext(builder.icmp_signed(_COMPARISONS[comparison], x, y), I32)
        if sat:
            t = _clamp(lw, t, *_range(width, dtype_signed))
        results.append(t)
    if accumulate:
        value = c_word
        for lane, t in enumerate(results):
            if mask[lane]:
                value = builder.add(value, t)
    else:
        kept = sum(((1 << width) - 1) << (lane * width) for lane in range(lanes) if not mask[lane])
        value = builder.and_(c_word, ir.Constant(I32, kept))
        for lane, t in enumerate(results):
            if mask[lane]:
                low = builder.and_(t, ir.Constant(I32, (1 << width) - 1))
                value = builder.or_(value, builder.shl(low, ir.Constant(I32, lane * width)))
    lw.write(d, value, "u32")


# ------------------------------------------------------------------------------------------------- cvt.pack

_PACK_WIDTHS = {"u16": 16, "s16": 16, "u8": 8, "s8": 8, "u4": 4, "s4": 4, "u2": 2, "s2": 2}


def cvt_pack(lw: Lowering, ins: ast.Instruction) -> None:
    """cvt.pack.sat (see the module docstring); lower/convert.py's cvt hands it over."""
    builder = lw.builder
    kinds = [m for m in ins.modifiers if m in _PACK_WIDTHS]
    rest = [m for m in ins.modifiers if m not in _PACK_WIDTHS and m not in ("pack", "sat")]
    if len(kinds) != 1 or "sat" not in ins.modifiers or rest[:1] != ["s32"]:
        raise lw.fail("cvt.pack is cvt.pack.sat.{u16,s16}.s32 or cvt.pack.sat.{u8,s8,u4,s4,u2,s2}.s32.b32")
    kind = kinds[0]
    bits = _PACK_WIDTHS[kind]
    wide = bits == 16
    if rest != (["s32"] if wide else ["s32", "b32"]):
        raise lw.fail(f"cvt.pack.sat.{kind} takes .s32 sources" + ("" if wide else " and a .b32 c"))
    d, a, b, *c = lw.operands(ins, 3 if wide else 4)
    low, high = _range(bits, kind[0] == "s")
    mask = (1 << bits) - 1

    def saturated(operand: ast.Operand) -> ir.Value:
        return builder.and_(_clamp(lw, lw.read(operand, "s32"), low, high), ir.Constant(I32, mask))

    packed = builder.or_(builder.shl(saturated(a), ir.Constant(I32, bits)), saturated(b))
    if not wide:
        packed = builder.or_(packed, builder.shl(lw.read(c[0], "b32"), ir.Constant(I32, 2 * bits)))
    lw.write(d, packed, "u32")

