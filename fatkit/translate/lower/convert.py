"""Conversions: every `cvt` of sm_90 and below, and the exact rounding that they and lower/half.py share.

Integers of every width, f16, bf16, f32 and f64 convert into one another with the PTX rounding modes
(.rn/.rz/.rm/.rp to a float, .rni/.rzi/.rmi/.rpi to an integer or an integral float) and the .ftz, .sat,
.relu and .satfinite modifiers; f32 pairs pack into f16x2/bf16x2, e4m3x2/e5m2x2 (fp8) and, of sm_100a,
e2m3x2/e3m2x2 (fp6) and e2m1x2 (fp4); those pairs unpack into f16x2; f32 rounds to tf32. NaN results that
the ISA leaves open are those sm_90 hardware gives (checked on an H200). Where LLVM's own conversions
round exactly as PTX asks on every target
(fptrunc to nearest, fpext, sitofp to f32/f64) they are used; every other rounding goes through
`round_to_format`, which rounds a sign, an integer significand and an exponent to any binary format with
integer instructions only, and is therefore exact for every mode, subnormal and overflow.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from fatkit.translate.lower import rounding
from fatkit.translate.lower.core import F16, F32, F64, I1, I16, I32, I64, Lowering, handles, llvm_type
from fatkit.translate.lower.video import cvt_pack
from fatkit.translate.ptx import ast


@dataclass(frozen=True)
class Format:
    """A binary floating-point format: sign, `exponent_bits`, `mantissa_bits` (stored, no hidden bit)."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    infinity: bool  # has ±inf (all-ones exponent, zero mantissa) and NaNs above it, as IEEE 754
    nan: int | None  # the canonical NaN PTX produces, sign clear; None: the format has no NaN
    max_finite: int  # magnitude bits of the largest finite value
    shift: int = 0  # where the value sits in its register: tf32 keeps f32's layout, low 13 bits zero

    @property
    def bias(self) -> int:
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def width(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits + self.shift

    def one(self) -> int:
        return self.bias << self.mantissa_bits << self.shift


FORMATS = {
    "f16": Format("f16", 5, 10, True, 0x7FFF, 0x7BFF),
    "bf16": Format("bf16", 8, 7, True, 0x7FFF, 0x7F7F),
    "f32": Format("f32", 8, 23, True, 0x7FFFFFFF, 0x7F7FFFFF),
    "f64": Format("f64", 11, 52, True, 0x7FFFFFFFFFFFFFFF, 0x7FEFFFFFFFFFFFFF),
    "tf32": Format("tf32", 8, 10, True, 0x7FFFE000, 0x3FBFF, shift=13),  # f32's canonical NaN, low bits clear
    "e4m3": Format("e4m3", 4, 3, False, 0x7F, 0x7E),  # 448; S.1111.111 is its only NaN
    "e5m2": Format("e5m2", 5, 2, True, 0x7F, 0x7B),  # 57344
    # fp4/fp6 of sm_100a: no infinity, no NaN (a NaN converts to +max finite)
    "e2m1": Format("e2m1", 2, 1, False, None, 0x7),  # 6
    "e2m3": Format("e2m3", 2, 3, False, None, 0x1F),  # 7.5
    "e3m2": Format("e3m2", 3, 2, False, None, 0x1F),  # 28
}

FLOAT_ROUNDINGS = ("rn", "rz", "rm", "rp", "rna")
INTEGER_ROUNDINGS = {"rni": "llvm.roundeven", "rzi": "llvm.trunc", "rmi": "llvm.floor", "rpi": "llvm.ceil"}


def _const(ty: ir.IntType, value: int) -> ir.Constant:
    return ir.Constant(ty, value & ((1 << ty.width) - 1))


@dataclass
class Parts:
    """A value as sign × significand × 2**exponent (i1, i64, i32), and whether it is NaN or ±inf."""

    sign: ir.Value
    significand: ir.Value
    exponent: ir.Value
    nan: ir.Value
    infinite: ir.Value


def decompose(lw: Lowering, bits: ir.Value, fmt: Format) -> Parts:
    """The parts of a value held as the integer `bits` of `fmt` (without a layout shift)."""
    b, ty = lw.builder, bits.type
    wide = b.zext(bits, I64) if ty.width < 64 else bits
    m, e = fmt.mantissa_bits, fmt.exponent_bits
    sign = b.trunc(b.lshr(wide, _const(I64, fmt.width - 1)), I1)
    magnitude = b.and_(wide, _const(I64, (1 << (fmt.width - 1)) - 1))
    field = b.lshr(magnitude, _const(I64, m))
    fraction = b.and_(magnitude, _const(I64, (1 << m) - 1))
    subnormal = b.icmp_unsigned("==", field, _const(I64, 0))
    significand = b.select(subnormal, fraction, b.or_(fraction, _const(I64, 1 << m)))
    exponent = b.sub(b.trunc(b.select(subnormal, _const(I64, 1), field), I32), _const(I32, fmt.bias + m))
    if fmt.infinity:
        top = b.icmp_unsigned("==", field, _const(I64, (1 << e) - 1))
        zero_fraction = b.icmp_unsigned("==", fraction, _const(I64, 0))
        nan, infinite = b.and_(top, b.not_(zero_fraction)), b.and_(top, zero_fraction)
    else:
        nan = b.icmp_unsigned("==", magnitude, _const(I64, fmt.nan)) if fmt.nan is not None else ir.Constant(I1, 0)
        infinite = ir.Constant(I1, 0)
    return Parts(sign, significand, exponent, nan, infinite)


def integer_parts(lw: Lowering, value: ir.Value, signed: bool) -> Parts:
    """The parts of an integer of any width (exponent 0)."""
    b = lw.builder
    wide = (b.sext if signed else b.zext)(value, I64) if value.type.width < 64 else value
    sign = b.icmp_signed("<", wide, _const(I64, 0)) if signed else ir.Constant(I1, 0)
    magnitude = b.select(sign, b.neg(wide), wide)  # -(-2**63) is 2**63 as unsigned
    no = ir.Constant(I1, 0)
    return Parts(sign, magnitude, _const(I32, 0), no, no)


def float_parts(lw: Lowering, value: ir.Value, ptx_type: str) -> Parts:
    """The parts of a float operand of `ptx_type` (f16, bf16, f32, f64; held as LLVM floats or bits)."""
    b = lw.builder
    if isinstance(value.type, ir.IntType):  # bf16 and the other bit-held formats
        return decompose(lw, value, FORMATS[ptx_type])
    width = {F16: 16, F32: 32, F64: 64}[value.type]
    return decompose(lw, b.bitcast(value, ir.IntType(width)), FORMATS[ptx_type])


def round_to_format(lw: Lowering, parts: Parts, fmt: Format, mode: str, satfinite: bool = False) -> ir.Value:
    """The bits of `fmt` (in an integer of its register width) nearest `parts` under `mode`.

    The significand is shifted so that its lowest kept bit has the weight of the result's last place
    (the normal one, or the subnormal one below the format's smallest exponent); the dropped bits decide
    the rounding. Overflow gives ±inf or ±max finite as IEEE 754 says for `mode`, or ±max finite
    (`satfinite`); NaN gives the canonical NaN (+max finite in a format without NaN); ±inf stays ±inf
    (±max finite with `satfinite`)."""
    b, m = lw.builder, fmt.mantissa_bits
    emin_lsb = 1 - fmt.bias - m  # weight of the last place of subnormals and of the smallest normals
    significand, sign = parts.significand, parts.sign
    leading = b.trunc(lw.intrinsic("llvm.ctlz", [significand, ir.Constant(I1, 0)]), I32)
    top = b.add(parts.exponent, b.sub(_const(I32, 63), leading))  # weight of the leading one
    lsb = _smax(b, b.sub(top, _const(I32, m)), _const(I32, emin_lsb))
    shift = b.sub(lsb, parts.exponent)
    right = b.icmp_signed(">", shift, _const(I32, 0))
    # Shift amounts stay in [1, 63] (LLVM shifts by ≥ 64 are poison); a significand below 2**63 shifted
    # right by 63 leaves 0 kept and everything in the remainder, as a longer shift would.
    amount = b.zext(_smin(b, _smax(b, shift, _const(I32, 1)), _const(I32, 63)), I64)
    left = b.zext(_smin(b, b.neg(_smin(b, shift, _const(I32, 0))), _const(I32, 63)), I64)
    kept = b.select(right, b.lshr(significand, amount), b.shl(significand, left))
    dropped = b.select(right, b.and_(significand, b.sub(b.shl(_const(I64, 1), amount), _const(I64, 1))),
                       _const(I64, 0))
    half = b.shl(_const(I64, 1), b.sub(amount, _const(I64, 1)))
    inexact = b.icmp_unsigned("!=", dropped, _const(I64, 0))
    if mode == "rn":
        odd = b.trunc(kept, I1)
        up = b.or_(b.icmp_unsigned(">", dropped, half),
                   b.and_(b.icmp_unsigned("==", dropped, half), odd))
    elif mode == "rna":
        up = b.icmp_unsigned(">=", dropped, half)
    elif mode == "rz":
        up = ir.Constant(I1, 0)
    elif mode == "rp":
        up = b.and_(inexact, b.not_(sign))
    elif mode == "rm":
        up = b.and_(inexact, sign)
    else:
        raise ValueError(mode)
    kept = b.add(kept, b.zext(up, I64))
    # (biased exponent - 1) << m plus a significand with its hidden bit: a carry out of the significand
    # moves into the exponent, and subnormals (field 0, no hidden bit) come out right as well.
    field = b.zext(b.sub(lsb, _const(I32, emin_lsb)), I64)
    magnitude = b.add(b.shl(field, _const(I64, m)), kept)
    magnitude = b.select(b.icmp_unsigned("==", significand, _const(I64, 0)), _const(I64, 0), magnitude)

    infinity = ((1 << fmt.exponent_bits) - 1) << m if fmt.infinity else fmt.nan
    biggest = _const(I64, fmt.max_finite)
    if satfinite or not fmt.infinity and fmt.nan is None:
        overflow = biggest
        at_infinity = biggest
    elif not fmt.infinity:  # e4m3 without .satfinite: out of range is NaN
        overflow = at_infinity = _const(I64, fmt.nan)
    else:
        at_infinity = _const(I64, infinity)
        toward_infinity = {"rn": True, "rna": True, "rz": False,
                           "rp": b.not_(sign), "rm": sign}[mode]
        overflow = (b.select(toward_infinity, at_infinity, biggest) if isinstance(toward_infinity, ir.Value)
                    else at_infinity if toward_infinity else biggest)
    magnitude = b.select(b.icmp_unsigned(">", magnitude, biggest), overflow, magnitude)
    magnitude = b.select(parts.infinite, at_infinity, magnitude)
    result_type = ir.IntType(fmt.width)
    sign_bit = b.shl(b.zext(sign, I64), _const(I64, fmt.width - 1 - fmt.shift))
    signed = b.or_(sign_bit, magnitude)
    if fmt.shift:
        signed = b.shl(signed, _const(I64, fmt.shift))
    result = b.trunc(signed, result_type) if fmt.width < 64 else signed
    nan = fmt.max_finite if fmt.nan is None else fmt.nan
    return b.select(parts.nan, _const(result_type, nan), result)


def _smax(b, x, y):
    return b.select(b.icmp_signed(">", x, y), x, y)


def _smin(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


# ---------------------------------------------------------------------------------------- fast paths

def f32_to_bf16(lw: Lowering, value: ir.Value) -> ir.Value:
    """f32 → bf16 bits to nearest even: add half an ulp of bf16 (less one, plus the kept lowest bit)
    to the f32 bits and drop the low half; a carry moves into the exponent, up to infinity as it should."""
    b = lw.builder
    bits = b.bitcast(value, I32)
    odd = b.and_(b.lshr(bits, _const(I32, 16)), _const(I32, 1))
    rounded = b.trunc(b.lshr(b.add(bits, b.add(odd, _const(I32, 0x7FFF))), _const(I32, 16)), I16)
    nan = b.fcmp_unordered("uno", value, value)
    return b.select(nan, _const(I16, FORMATS["bf16"].nan), rounded)


def bf16_to_f32(lw: Lowering, bits: ir.Value) -> ir.Value:
    """bf16 bits → f32 (exact: bf16 is the upper half of an f32)."""
    b = lw.builder
    return b.bitcast(b.shl(b.zext(bits, I32), _const(I32, 16)), F32)


def f32_to_f16(lw: Lowering, value: ir.Value) -> ir.Value:
    """f32 → f16 bits to nearest even (LLVM's fptrunc), NaN as PTX's canonical NaN."""
    b = lw.builder
    rounded = b.bitcast(b.fptrunc(value, F16), I16)
    return b.select(b.fcmp_unordered("uno", value, value), _const(I16, FORMATS["f16"].nan), rounded)


def to_f32(lw: Lowering, value: ir.Value, ptx_type: str) -> ir.Value:
    """An f16/bf16/f32 value (as its register holds it) as f32, exactly."""
    if ptx_type == "bf16":
        return bf16_to_f32(lw, value)
    if ptx_type == "f16":
        return lw.builder.fpext(value, F32)
    return value


def to_f64(lw: Lowering, value: ir.Value, ptx_type: str) -> ir.Value:
    return value if ptx_type == "f64" else lw.builder.fpext(to_f32(lw, value, ptx_type), F64)


# ---------------------------------------------------------------------------------------- host runtime

# The CPU backend converts `half` through compiler-rt's routines, which the Python process does not have
# (AMDGPU has f16 instructions and calls none): the host target gets them defined in each module.
_HALF_RUNTIME = {"__extendhfsf2": (F16, F32), "__truncsfhf2": (F32, F16), "__truncdfhf2": (F64, F16)}


def host_half_runtime(lw: Lowering) -> None:
    """Define the half-precision conversions the host's CPU backend calls (once per module)."""
    module = lw.builder.module
    if lw.target.name != "host" or "__extendhfsf2" in module.globals:
        return
    functions, outer = [], lw.builder
    names = {F16: "f16", F32: "f32", F64: "f64"}
    try:
        for name, (source, result) in _HALF_RUNTIME.items():
            function = ir.Function(module, ir.FunctionType(result, [source]), name)
            function.linkage = "linkonce_odr"
            b = lw.builder = ir.IRBuilder(function.append_basic_block("entry"))
            width = {F16: 16, F32: 32, F64: 64}
            source_bits = b.bitcast(function.args[0], ir.IntType(width[source]))
            parts = decompose(lw, source_bits, FORMATS[names[source]])
            bits = round_to_format(lw, parts, FORMATS[names[result]], "rn")
            if result == F32:  # widening keeps a NaN's sign and payload, made quiet (as compiler-rt)
                wide = b.zext(source_bits, I32)
                sign = b.shl(b.and_(wide, _const(I32, 0x8000)), _const(I32, 16))
                fraction = b.shl(b.and_(wide, _const(I32, 0x3FF)), _const(I32, 13))
                bits = b.select(parts.nan, b.or_(b.or_(sign, fraction), _const(I32, 0x7FC00000)), bits)
            b.ret(b.bitcast(bits, result))
            functions.append(function)
    finally:
        lw.builder = outer
    # Calls to them appear only during code generation: keep the optimizer from dropping them.
    pointers = ir.ArrayType(ir.PointerType(), len(functions))
    used = ir.GlobalVariable(module, pointers, "llvm.used")
    used.linkage, used.section = "appending", "llvm.metadata"
    used.initializer = ir.Constant(pointers, functions)


# ---------------------------------------------------------------------------------------- modifiers on bits

def flush_subnormal(lw: Lowering, bits: ir.Value, fmt: Format) -> ir.Value:
    """.ftz: a subnormal becomes a zero of its sign."""
    b, ty = lw.builder, bits.type
    field_mask = ((1 << fmt.exponent_bits) - 1) << fmt.mantissa_bits << fmt.shift
    sign = _const(ty, 1 << (fmt.width - 1))
    subnormal = b.icmp_unsigned("==", b.and_(bits, _const(ty, field_mask)), _const(ty, 0))
    return b.select(subnormal, b.and_(bits, sign), bits)


def _is_nan_bits(lw: Lowering, bits: ir.Value, fmt: Format) -> ir.Value:
    b, ty = lw.builder, bits.type
    magnitude = b.and_(bits, _const(ty, (1 << (fmt.width - 1)) - 1))
    if fmt.infinity:
        infinity = ((1 << fmt.exponent_bits) - 1) << fmt.mantissa_bits << fmt.shift
        return b.icmp_unsigned(">", magnitude, _const(ty, infinity))
    if fmt.nan is None:
        return ir.Constant(I1, 0)
    return b.icmp_unsigned("==", magnitude, _const(ty, fmt.nan))


def relu(lw: Lowering, bits: ir.Value, fmt: Format) -> ir.Value:
    """.relu: negative values become +0, NaN the canonical NaN."""
    b, ty = lw.builder, bits.type
    negative = b.icmp_signed("<", bits, _const(ty, 0))
    clamped = b.select(negative, _const(ty, 0), bits)
    if fmt.nan is None:
        return clamped
    return b.select(_is_nan_bits(lw, bits, fmt), _const(ty, fmt.nan), clamped)


def saturate(lw: Lowering, bits: ir.Value, fmt: Format) -> ir.Value:
    """.sat: clamp to [+0.0, 1.0]; NaN becomes +0 (f32/f64: the float clamp of `rounding`, a v_max and a
    v_min on AMD)."""
    b, ty = lw.builder, bits.type
    if fmt.name in ("f32", "f64"):
        float_type = F32 if fmt.width == 32 else F64
        return b.bitcast(rounding.saturate(b, b.bitcast(bits, float_type)), ty)
    negative_or_nan = b.or_(b.icmp_signed("<", bits, _const(ty, 0)), _is_nan_bits(lw, bits, fmt))
    above_one = b.icmp_unsigned(">", bits, _const(ty, fmt.one()))
    return b.select(negative_or_nan, _const(ty, 0), b.select(above_one, _const(ty, fmt.one()), bits))


# ---------------------------------------------------------------------------------------- cvt

_FLOATS = ("f16", "bf16", "f32", "f64")
# Pairs of fp8/fp6/fp4 values: their element format and how many bits each occupies in the register
# (fp6 values sit in bytes whose two upper bits are zero).
_SMALL_PAIRS = {"e4m3x2": ("e4m3", 8), "e5m2x2": ("e5m2", 8), "e2m3x2": ("e2m3", 8), "e3m2x2": ("e3m2", 8),
                "e2m1x2": ("e2m1", 4)}
_UNSUPPORTED_FORMATS = ("ue8m0x2", "e2m1", "e2m3", "e3m2", "ue8m0", "ue4m3", "e4m3", "e5m2")


def _bits_type(fmt: Format) -> str:
    return f"b{fmt.width}"


@handles("cvt")
def cvt(lw: Lowering, ins: ast.Instruction) -> None:
    if "pack" in ins.modifiers:  # cvt.pack.sat: integer packing, with the video instructions
        cvt_pack(lw, ins)
        return
    types = [m for m in ins.modifiers if m in ast.TYPES]
    if len(types) != 2:
        raise lw.fail("cvt takes a destination and a source type")
    dst, src = types
    modifiers = [m for m in ins.modifiers if m not in ast.TYPES]
    roundings = [m for m in modifiers if m in FLOAT_ROUNDINGS or m in INTEGER_ROUNDINGS or m == "rs"]
    flags = set(modifiers) - set(roundings)
    unknown = flags - {"ftz", "sat", "relu", "satfinite"}
    if unknown or len(roundings) > 1:
        raise lw.fail(f"unknown cvt modifiers {sorted(unknown) or roundings}")
    mode = roundings[0] if roundings else None
    implied = lw.float_mode(ins)
    if implied is not None and implied.ftz and "f32" in (dst, src):  # sm_1x targets flush every f32
        flags.add("ftz")
    if "ftz" in flags and "f32" not in (dst, src):
        raise lw.fail(".ftz applies to cvt with an .f32 source or destination only")
    if "f16" in (dst, src) or "f16x2" in (dst, src):
        host_half_runtime(lw)
    if mode == "rs":
        raise lw.fail(".rs (stochastic rounding, sm_100a) is not supported")
    for t in (dst, src):
        if t in _UNSUPPORTED_FORMATS:
            raise lw.fail(f"cvt with .{t} is not supported (ue8m0 scale factors of sm_100, or a form "
                          "that does not exist)")
    if dst in ("f16x2", "bf16x2") or dst in _SMALL_PAIRS or src in _SMALL_PAIRS:
        _packed(lw, ins, dst, src, mode, flags)
    elif dst == "tf32":
        _tf32(lw, ins, src, mode, flags)
    elif src not in _FLOATS and dst not in _FLOATS:
        _integer_to_integer(lw, ins, dst, src, mode, flags)
    elif src not in _FLOATS:
        _integer_to_float(lw, ins, dst, src, mode, flags)
    elif dst not in _FLOATS:
        _float_to_integer(lw, ins, dst, src, mode, flags)
    else:
        _float_to_float(lw, ins, dst, src, mode, flags)


def _only(lw: Lowering, flags: set[str], allowed: set[str], what: str) -> None:
    if flags - allowed:
        raise lw.fail(f".{sorted(flags - allowed)[0]} is not defined for {what}")


def _integer_to_integer(lw: Lowering, ins: ast.Instruction, dst, src, mode, flags):
    _only(lw, flags, {"sat"}, "integer-to-integer cvt")
    if mode is not None:
        raise lw.fail("integer-to-integer cvt takes no rounding")
    d, a = lw.operands(ins, 2)
    value = lw.read(a, src)
    if "sat" in flags:  # clamp to the destination's range, compared in 65 bits so that u64/s64 both fit
        b, wide = lw.builder, ir.IntType(65)
        x = (b.sext if src[0] == "s" else b.zext)(value, wide)
        size = ast.TYPE_SIZES[dst] * 8
        low, high = (-(1 << (size - 1)), (1 << (size - 1)) - 1) if dst[0] == "s" else (0, (1 << size) - 1)
        x = _smax(b, x, _const(wide, low))
        x = _smin(b, x, _const(wide, high))
        value, src = b.trunc(x, llvm_type(dst)), dst
    lw.write(d, lw.convert(value, src, dst), dst)


def _integer_to_float(lw: Lowering, ins: ast.Instruction, dst, src, mode, flags):
    _only(lw, flags, {"sat", "ftz"}, "integer-to-float cvt")
    if mode not in FLOAT_ROUNDINGS[:4]:
        raise lw.fail("integer-to-float cvt needs a rounding: .rn/.rz/.rm/.rp")
    d, a = lw.operands(ins, 2)
    value, fmt, b = lw.read(a, src), FORMATS[dst], lw.builder
    if mode == "rn" and dst in ("f32", "f64"):
        convert = b.sitofp if src[0] == "s" else b.uitofp
        bits = b.bitcast(convert(value, llvm_type(dst)), ir.IntType(fmt.width))
    else:
        bits = round_to_format(lw, integer_parts(lw, value, src[0] == "s"), fmt, mode)
    if "sat" in flags:
        bits = saturate(lw, bits, fmt)
    lw.write(d, bits, _bits_type(fmt))  # integers are never subnormal: .ftz changes nothing


def _float_to_integer(lw: Lowering, ins: ast.Instruction, dst, src, mode, flags):
    _only(lw, flags, {"ftz", "sat"}, "float-to-integer cvt")  # .sat: the conversion saturates anyway
    if mode not in INTEGER_ROUNDINGS:
        raise lw.fail("float-to-integer cvt needs .rzi/.rni/.rmi/.rpi")
    d, a = lw.operands(ins, 2)
    value = _source(lw, a, src, flags)
    value = value if src == "f64" else to_f32(lw, value, src)  # f16/bf16 → f32 is exact
    rounded = lw.intrinsic(INTEGER_ROUNDINGS[mode], [value])
    name = "llvm.fptosi.sat" if dst[0] == "s" else "llvm.fptoui.sat"  # saturates, NaN → 0
    result, ty = lw.intrinsic(name, [rounded], result=llvm_type(dst)), llvm_type(dst)
    if src == "f64" or dst in ("s64", "u64"):  # the ISA's NaN result here is 1 << (width - 1), not 0
        b = lw.builder
        result = b.select(b.fcmp_unordered("uno", value, value), _const(ty, 1 << (ty.width - 1)), result)
    lw.write(d, result, dst)


def _source(lw: Lowering, operand: ast.Operand, src: str, flags: set[str], dst: str | None = None) -> ir.Value:
    """A float source operand; with .ftz an f32 subnormal reads as zero (only f32 operands flush), except
    into f16: an H200 rounds an f32 subnormal to f16 as it is under .ftz too (cvt.rp.ftz.f16.f32 of
    0x00000001 is 0x0001, cvt.rm.ftz.f16.f32 of 0x80000001 is 0x8001), with or without .sat."""
    value = lw.read(operand, src)
    if "ftz" in flags and src == "f32" and dst != "f16":
        b = lw.builder
        value = b.bitcast(flush_subnormal(lw, b.bitcast(value, I32), FORMATS["f32"]), F32)
    return value


def _float_to_float(lw: Lowering, ins: ast.Instruction, dst, src, mode, flags):
    d, a = lw.operands(ins, 2)
    fmt = FORMATS[dst]
    value = _source(lw, a, src, flags, dst)
    narrowing = ((FORMATS[src].mantissa_bits > fmt.mantissa_bits or FORMATS[src].exponent_bits > fmt.exponent_bits)
                 and src != dst)
    allowed = {"ftz", "sat"} | ({"relu", "satfinite"} if src == "f32" and dst in ("f16", "bf16") else set())
    _only(lw, flags, allowed, f"cvt.{dst}.{src}")
    if mode in INTEGER_ROUNDINGS:
        if src != dst:
            raise lw.fail("rounding to an integral value (.rni …) keeps the format: cvt.rni.f32.f32 and the like")
        # integral values of f16/bf16/f32 are exact in f32, and in their own format again
        wide = value if src == "f64" else to_f32(lw, value, src)
        bits = _exact(lw, lw.intrinsic(INTEGER_ROUNDINGS[mode], [wide]), "f64" if src == "f64" else "f32", dst)
    elif not narrowing:
        if mode not in (None, *FLOAT_ROUNDINGS[:4]):
            raise lw.fail(f".{mode} is not a rounding of cvt.{dst}.{src}")
        bits = _exact(lw, value, src, dst)
    else:
        if mode not in FLOAT_ROUNDINGS[:4] or (mode in ("rm", "rp") and src == "f32" and dst != "f32"
                                               and flags & {"relu", "satfinite"}):
            raise lw.fail(f"cvt.{dst}.{src} rounds with .rn/.rz/.rm/.rp (.rn/.rz with .relu/.satfinite)")
        bits = _narrow(lw, value, src, dst, mode, "satfinite" in flags)
    if "sat" not in flags:  # (.sat takes every NaN to +0, whatever its bits)
        bits = _nan_result(lw, value, src, dst, bits)
    if dst == "f64" and src == "f32" and "ftz" in flags:
        # cvt.ftz.f64.f32 of any NaN is f32's canonical NaN widened on an H200 (without .ftz the NaN's sign
        # and payload are kept)
        b = lw.builder
        bits = b.select(b.fcmp_unordered("uno", value, value), _const(I64, 0x7FFFFFFFE0000000), bits)
    if dst == "f32" and src == "bf16" and "ftz" in flags:
        # cvt.ftz.f32.bf16 of any NaN is f32's canonical NaN on an H200 (without .ftz the payload is kept)
        b = lw.builder
        bits = b.select(_is_nan_bits(lw, value, FORMATS["bf16"]), _const(I32, FORMATS["f32"].nan), bits)
    bits = finish(lw, bits, fmt, flags, flush=dst == "f32")
    lw.write(d, bits, _bits_type(fmt))


def _nan_result(lw: Lowering, value: ir.Value, src: str, dst: str, bits: ir.Value) -> ir.Value:
    """The NaN a float-to-float cvt gives, where the ISA leaves it open, as sm_90 hardware gives it: f64 → f32
    keeps the sign and the payload's top bits, made quiet; from f64 into narrower formats the sign and a
    quiet NaN without payload; into f16/bf16 and from f16/f32 into f32 the canonical
    NaN; bf16 → f32 and widening into f64 keep the payload (what fpext and the bf16 shift do). From f64
    into f32, f16 and bf16 alike: the sign and the payload's top bits, made quiet."""
    b, fmt = lw.builder, FORMATS[dst]
    if isinstance(value.type, ir.IntType):
        nan = _is_nan_bits(lw, value, FORMATS[src])
    else:
        nan = b.fcmp_unordered("uno", value, value)
    if src == "f64" and dst != "f64":  # sign and the top of the payload, made quiet (an H200's result)
        raw = b.bitcast(value, I64)
        width, m = fmt.width, fmt.mantissa_bits
        sign = b.and_(b.lshr(raw, _const(I64, 64 - width)), _const(I64, 1 << (width - 1)))
        payload = b.and_(b.lshr(raw, _const(I64, 52 - m)), _const(I64, (1 << m) - 1))
        quiet = ((1 << fmt.exponent_bits) - 1) << m | 1 << (m - 1)
        top = b.trunc(b.or_(b.or_(sign, payload), _const(I64, quiet)), bits.type)
        return b.select(nan, top, bits)
    if dst in ("f16", "bf16") or (dst == "f32" and src != "bf16"):
        return b.select(nan, _const(bits.type, fmt.nan), bits)
    return bits


def _exact(lw: Lowering, value: ir.Value, src: str, dst: str) -> ir.Value:
    """Bits of `dst` for a value of `src` that `dst` holds exactly (a widening, or an integral value)."""
    b, fmt = lw.builder, FORMATS[dst]
    if dst == "f64":
        return b.bitcast(to_f64(lw, value, src), I64)
    if dst == "f32" and src != "f64":
        return b.bitcast(to_f32(lw, value, src), I32)
    if src == dst and src in ("f16", "bf16"):
        return value if dst == "bf16" else b.bitcast(value, I16)
    # integral f32/f64 values back into a narrower format, or f16 ↔ bf16 pieces that fit: exact anyway
    return round_to_format(lw, float_parts(lw, value, src), fmt, "rn")


def finish(lw: Lowering, bits: ir.Value, fmt: Format, modifiers: set[str], flush: bool = True) -> ir.Value:
    """A result's .ftz (where `flush`: cvt flushes f32 results only), .relu and .sat, in that order."""
    if "ftz" in modifiers and flush:
        bits = flush_subnormal(lw, bits, fmt)
    if "relu" in modifiers:
        bits = relu(lw, bits, fmt)
    if "sat" in modifiers:
        bits = saturate(lw, bits, fmt)
    return bits


def _tf32(lw: Lowering, ins: ast.Instruction, src, mode, flags):
    if src != "f32":
        raise lw.fail("tf32 is converted from f32 only")
    if mode == "rna":
        _only(lw, flags, {"satfinite"}, "cvt.rna.tf32.f32")
    elif mode in ("rn", "rz"):
        _only(lw, flags, {"satfinite", "relu"}, f"cvt.{mode}.tf32.f32")
    else:
        raise lw.fail("cvt.tf32.f32 rounds with .rna, .rn or .rz")
    d, a = lw.operands(ins, 2)
    fmt, value = FORMATS["tf32"], lw.read(a, "f32")
    bits = round_to_format(lw, float_parts(lw, value, "f32"), fmt, mode, "satfinite" in flags)
    if mode == "rna":
        # An H200 clears a NaN's low 13 bits (0x7f800001 becomes +inf); with .satfinite it then takes one tf32
        # unit off, as it does to +inf (0x7fc58000 becomes 0x7fc56000, 0x7f800001 max finite 0x7f7fe000)
        b, raw = lw.builder, lw.builder.bitcast(value, I32)
        nan = b.and_(raw, _const(I32, 0xFFFFE000))
        if "satfinite" in flags:
            nan = b.sub(nan, _const(I32, 0x2000))
        bits = b.select(b.fcmp_unordered("uno", value, value), nan, bits)
    lw.write(d, finish(lw, bits, fmt, flags, flush=False), "b32")


def _packed(lw: Lowering, ins: ast.Instruction, dst, src, mode, flags):
    """f32 pairs → f16x2/bf16x2 and fp8/fp6/fp4 pairs (a in the upper half), f16x2 → fp8/fp6/fp4 pairs,
    fp8/fp6/fp4 pairs → f16x2."""
    b = lw.builder
    if dst in ("f16x2", "bf16x2") and src == "f32":
        d, a, c = lw.operands(ins, 3)
        half = dst[:-2]
        if mode not in ("rn", "rz"):
            raise lw.fail(f"cvt.{dst}.f32 rounds with .rn or .rz")
        _only(lw, flags, {"relu", "satfinite"}, f"cvt.{dst}.f32")
        halves = [finish(lw, _narrow(lw, lw.read(x, "f32"), "f32", half, mode, "satfinite" in flags), FORMATS[half],
                         flags, flush=False) for x in (a, c)]
        lw.write(d, _pack(lw, halves, 16), "b32")
    elif dst in _SMALL_PAIRS and src in ("f32", "f16x2"):
        if mode != "rn" or "satfinite" not in flags:
            raise lw.fail(f"cvt.{dst}.{src} needs .rn.satfinite")
        _only(lw, flags, {"relu", "satfinite"}, f"cvt.{dst}.{src}")
        element, lane = _SMALL_PAIRS[dst]
        fmt = FORMATS[element]
        if src == "f32":
            d, a, c = lw.operands(ins, 3)
            values = [(lw.read(x, "f32"), "f32") for x in (a, c)]
        else:
            d, a = lw.operands(ins, 2)
            pair = lw.read(a, "f16x2")
            values = [(b.extract_element(pair, _const(I32, i)), "f16") for i in (1, 0)]
        narrow = [finish(lw, round_to_format(lw, float_parts(lw, v, t), fmt, "rn", True), fmt, flags, flush=False)
                  for v, t in values]
        lw.write(d, _pack(lw, narrow, lane), f"b{2 * lane}")
    elif dst == "f16x2" and src in _SMALL_PAIRS:
        if mode != "rn":
            raise lw.fail(f"cvt.f16x2.{src} needs .rn")
        _only(lw, flags, {"relu"}, f"cvt.f16x2.{src}")
        d, a = lw.operands(ins, 2)
        element, lane = _SMALL_PAIRS[src]
        fmt, pair_type = FORMATS[element], ir.IntType(2 * lane)
        pair = lw.read(a, f"b{2 * lane}")
        halves = []
        for position in (lane, 0):
            value = b.and_(b.lshr(pair, _const(pair_type, position)), _const(pair_type, (1 << fmt.width) - 1))
            bits = round_to_format(lw, decompose(lw, value, fmt), FORMATS["f16"], "rn")  # exact: f16 holds all
            halves.append(finish(lw, bits, FORMATS["f16"], flags, flush=False))
        lw.write(d, _pack(lw, halves, 16), "b32")
    else:
        raise lw.fail(f"cvt.{dst}.{src} is not supported")


def _narrow(lw: Lowering, value: ir.Value, src: str, dst: str, mode: str, satfinite: bool) -> ir.Value:
    """`value` of `src` rounded to the bits of the narrower `dst`: LLVM's conversion where it rounds to
    nearest exactly (f32 → f16, f64 → f32) or the bf16 bit trick, else `round_to_format`."""
    if mode == "rn" and not satfinite:
        if (src, dst) == ("f32", "f16"):
            return f32_to_f16(lw, value)
        if (src, dst) == ("f32", "bf16"):
            return f32_to_bf16(lw, value)
        if (src, dst) == ("f64", "f32"):
            return lw.builder.bitcast(lw.builder.fptrunc(value, F32), I32)
    return round_to_format(lw, float_parts(lw, value, src), FORMATS[dst], mode, satfinite)


def _pack(lw: Lowering, parts: list[ir.Value], width: int) -> ir.Value:
    """Two `width`-bit values, the first in the upper half."""
    b, ty = lw.builder, ir.IntType(2 * width)
    high, low = (b.zext(p, ty) for p in parts)
    return b.or_(b.shl(high, _const(ty, width)), low)
