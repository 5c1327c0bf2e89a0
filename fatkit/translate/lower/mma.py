"""Warp-level matrix multiply-accumulate: `mma.sync.aligned` (dense) and `mma.sp` / `mma.sp::ordered_metadata`
(2:4 sparse A), computed lane by lane on the target's hardware-lane interface, as the PTX ISA defines them.

The fragments are the ISA's: with groupID g = lane >> 2 and threadID_in_group t = lane % 4, and e elements
of A/B in a register (2 for f16/bf16, 1 for tf32/f64, 4 for 8-bit, 8 for 4-bit, 32 for b1), register r of
A holds row g + 8·(r & 1) (row g for m8), columns t·e + j + 4e·(r >> 1); register r of B holds rows
t·e + j + 4e·r of column g; C and D element i sits at row g + 8·(i >> 1), column 2t + (i & 1). A sparse
A has the layout of the dense A of half its K; metadata registers hold two 2-bit indices per 4-column
chunk (of 4 pairs of columns for 4-bit types; tf32 is 1:2 sparse: `sparse_position`), the first non-zero element's in the lower bits, in the lanes of a group of four the sparsity
selector picks (`_metadata_field`). m8n8k4 .f16 (Volta's form, any layouts) is four independent
products, one per quad pair: `_quad_pair_fragment`.

Every lane computes its own D elements: the A row and B column elements they need come through
`Target.exchange` (shuffles; ds_bpermute on AMDGPU), one exchange per source register and one read per
(register, source lane) — the source lane is a bit-affine function of the executing lane, found and
checked for all 32 lanes at translation time (where the register too depends on the lane, each candidate
is read and one selected: `Choice`). A 64-lane wave holds two warps; reads stay in the executing thread's
half. Nothing here uses MFMA/WMMA yet.

Arithmetic. Integer forms are exact: c + Σ a·b in 64 bits, wrapped to 32 (or clamped with .satfinite);
b1 forms add popc(a AND/XOR b) per 32-bit word. Products of f16, bf16, tf32 (the ISA expects .tf32
values; the 13 bits below their mantissa are ignored, as NVIDIA's tensor cores truncate them, which the
H200 case mma_m16n8k8_tf32_low_bits_set checks) and fp8 inputs are exact in f64; they are added to c in
f64 in ascending k order and the sum is rounded once to f32/f16 to nearest even. The ISA leaves the order
and rounding of the accumulation to the hardware (NVIDIA's tensor cores sum a block of products with c in
a wide fixed-point adder and truncate once); an exact-as-possible sum with one rounding is the nearest
deterministic model:
the result is the correctly rounded c + Σ a·b whenever the terms span at most 53 bits of exponent
(always for f16/fp8 products with an f16 c), otherwise within one f32 ulp plus K·2⁻⁵³·Σ|terms|; hardware
differs from it by at most the truncation of its adder (about one ulp of the result). NaN results are
the canonical NaN. f64 forms are an IEEE fma chain in ascending k order, starting from c.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

from llvmlite import ir

from fatkit.translate.lower.convert import (
    FORMATS, bf16_to_f32, decompose, float_parts, host_half_runtime, round_to_format,
)
from fatkit.translate.lower.core import F16, F32, F64, I32, I64, Lowering
from fatkit.translate.lower.warp import M32, WARP, WarpPosition
from fatkit.translate.ptx import ast

# Element types of A and B: their width in bits.
_INPUT_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "f64": 64,
               "s8": 8, "u8": 8, "s4": 4, "u4": 4, "b1": 1}
_ACCUMULATORS = {"f16", "f32", "f64", "s32"}
_FLOAT_INPUTS = {"f16", "bf16", "tf32", "e4m3", "e5m2"}
_INTEGER_INPUTS = {"s8", "u8", "s4", "u4"}

# Dense shapes of sm_80–sm_90 and the A/B types each takes (m8n8k4 of f16 is Volta's quad-pair form).
_DENSE_SHAPES = {
    "m8n8k4": {"f64"},
    "m8n8k16": {"s8", "u8"},
    "m8n8k32": {"s4", "u4"},
    "m8n8k128": {"b1"},
    "m16n8k4": {"tf32", "f64"},
    "m16n8k8": {"f16", "bf16", "tf32", "f64"},
    "m16n8k16": {"f16", "bf16", "s8", "u8", "f64", "e4m3", "e5m2"},
    "m16n8k32": {"s8", "u8", "s4", "u4", "e4m3", "e5m2"},
    "m16n8k64": {"s4", "u4"},
    "m16n8k128": {"b1"},
    "m16n8k256": {"b1"},
}
# Sparse shapes lowered here: (shape, A type) → the sparsity selectors the ISA allows.
_SPARSE_SHAPES = {("m16n8k16", "f16"): 4, ("m16n8k16", "bf16"): 4,
                  ("m16n8k32", "f16"): 2, ("m16n8k32", "bf16"): 2,
                  ("m16n8k32", "s8"): 2, ("m16n8k32", "u8"): 2,
                  ("m16n8k64", "s8"): 1, ("m16n8k64", "u8"): 1, ("m16n8k64", "e4m3"): 1, ("m16n8k64", "e5m2"): 1,
                  ("m16n8k64", "s4"): 2, ("m16n8k64", "u4"): 2, ("m16n8k128", "s4"): 1, ("m16n8k128", "u4"): 1,
                  ("m16n8k8", "tf32"): 4, ("m16n8k16", "tf32"): 2}


def sparse_position(a_type: str, stored: int) -> tuple[int, int, tuple[int, ...]]:
    """(chunk, p, rows) of stored A column `stored` of a row: its metadata index is index p of chunk `chunk`
    (`_metadata_field`), and with index value v it multiplies B's row rows[v]. 16/8-bit A: 2:4 sparse, p-th
    kept element of 4-column chunk q; 4-bit A: 2:4 sparse in pairs of adjacent elements (a 32-bit metadata
    register covers 64 columns of a row); tf32: 1:2 sparse, the kept element of 2-column chunk q, its metadata
    the 16-bit types' with each tf32 element as two halves (0b0100: column 2q, 0b1110: column 2q + 1, the only
    valid values), so the first index, v >> 1, names the column. Both layouts agree with an H200 on random
    metadata (verification/mmasp_wgmma_h200.json)."""
    if a_type == "tf32":
        return stored, 0, tuple(2 * stored + (v >> 1) for v in range(4))
    unit = 2 if _INPUT_BITS[a_type] == 4 else 1
    (chunk, p), j = divmod(stored // unit, 2), stored % unit
    return chunk, p, tuple(unit * (4 * chunk + v) + j for v in range(4))


def sparse_selectors(shape: str, a_type: str) -> int:
    """How many sparsity selectors mma.sp.`shape` with .`a_type` A takes (its metadata's lane groups)."""
    return _SPARSE_SHAPES[shape, a_type]

Place = Callable[[int, int], tuple[int, int]]


@dataclass(frozen=True)
class Fragment:
    """One matrix of an mma form as each lane holds it: `registers` registers of `register_bits`, each with
    `per_register` elements of `bits` (element 0 in the low bits); `place(lane, i)` is the (row, column)
    of the lane's element i."""

    registers: int
    per_register: int
    bits: int
    register_bits: int
    place: Place

    def locate(self) -> dict[tuple[int, int], tuple[int, int, int]]:
        """(row, column) → (lane, register, position) over the whole warp."""
        where = {}
        for lane in range(WARP):
            for i in range(self.registers * self.per_register):
                where[self.place(lane, i)] = (lane, *divmod(i, self.per_register))
        return where


def _a_fragment(m: int, k: int, bits: int) -> Fragment:
    """A (m×k) of the m16n8k*/m8n8k* forms (module docstring)."""
    per, register_bits = max(1, 32 // bits), max(32, bits)
    chunk = 4 * per

    def place(lane, i):
        g, t = lane >> 2, lane & 3
        r, j = divmod(i, per)
        if m == 8:
            return g, t * per + j
        return g + 8 * (r & 1), t * per + j + chunk * (r >> 1)
    return Fragment(m * k // (32 * per), per, bits, register_bits, place)


def _b_fragment(k: int, bits: int) -> Fragment:
    """B (k×8) of the m16n8k*/m8n8k* forms."""
    per, register_bits = max(1, 32 // bits), max(32, bits)

    def place(lane, i):
        r, j = divmod(i, per)
        return (lane & 3) * per + j + 4 * per * r, lane >> 2
    return Fragment(8 * k // (32 * per), per, bits, register_bits, place)


def _c_fragment(m: int, ptx_type: str) -> Fragment:
    """C/D (m×8) of the m16n8k*/m8n8k* forms; f16 elements two to a register."""
    bits = 16 if ptx_type == "f16" else 32 if ptx_type in ("f32", "s32") else 64
    per = 2 if bits == 16 else 1

    def place(lane, i):
        return (lane >> 2) + 8 * (i >> 1), 2 * (lane & 3) + (i & 1)
    return Fragment(m * 8 // 32 // per, per, bits, max(32, bits), place)


def _quad_pair_fragment(matrix: str, layout: str, ptx_type: str) -> Fragment:
    """mma.m8n8k4 .f16 (Volta's form): the quad pair p = (lane >> 2) & 3 (lanes 4p–4p+3 and 4p+16–4p+19)
    computes its own 8×8×4 product; with q = lane % 4 and h = lane >= 16 the ISA places a_i at (q + 4h, i)
    (.row) or (i + 4h, q) (.col), b_i at (q, i + 4h) (.row) or (i, q + 4h) (.col), f16 c_i at (q + 4h, i)
    and f32 c_i at ((lane & 1) + (i & 2) + 4h, (i & 4) + (lane & 2) + (i & 1)). Here the four products are
    the diagonal blocks of one 32×16·16×32 product: quad pair p's rows and columns offset by 8p, k by 4p."""
    def place(lane, i):
        q, high, pair = lane % 4, 4 * (lane >= 16), (lane >> 2) & 3
        if matrix == "a":
            row, col = (q + high, i) if layout == "row" else (i + high, q)
            return 8 * pair + row, 4 * pair + col
        if matrix == "b":
            row, col = (q, i + high) if layout == "row" else (i, q + high)
            return 4 * pair + row, 8 * pair + col
        if ptx_type == "f16":
            return 8 * pair + q + high, 8 * pair + i
        return 8 * pair + (lane & 1) + (i & 2) + high, 8 * pair + (i & 4) + (lane & 2) + (i & 1)
    if matrix in "ab":
        return Fragment(2, 2, 16, 32, place)
    return Fragment(4, 2, 16, 32, place) if ptx_type == "f16" else Fragment(8, 1, 32, 32, place)


@dataclass(frozen=True)
class Form:
    """An mma instruction's shape, types and options, from its modifiers."""

    shape: str
    m: int
    k: int
    d: str
    a: str
    b: str
    c: str
    satfinite: bool
    bit_operation: str | None  # "and"/"xor" for b1
    sparse: bool
    layouts: tuple[str, str] = ("row", "col")  # of A and B: only m8n8k4 .f16 takes others
    wmma: bool = False  # a wmma.mma (its tf32 form runs as two k4 instructions on sm_90)


def _form(lw: Lowering, ins: ast.Instruction) -> Form:
    modifiers = ins.modifiers
    sparse = modifiers[0] in ("sp", "sp::ordered_metadata")
    rest = list(modifiers[1:] if sparse else modifiers)
    if rest[:2] != ["sync", "aligned"]:
        raise lw.fail("mma is mma{.sp}.sync.aligned")
    rest = rest[2:]
    shape = rest.pop(0) if rest else ""
    if not shape.startswith("m"):
        raise lw.fail(f"expected a shape after mma.sync.aligned, found .{shape}")
    layouts = [m for m in rest if m in ("row", "col")]
    types = [m for m in rest if m in _INPUT_BITS or m in _ACCUMULATORS]
    flags = [m for m in rest if m not in ("row", "col") and m not in types]
    if len(types) != 4:
        raise lw.fail("mma takes four types: .dtype.atype.btype.ctype")
    d, a, b, c = types
    unknown = set(flags) - {"satfinite", "and", "xor", "popc"}
    if unknown:
        raise lw.fail(f"modifier .{sorted(unknown)[0]} of mma not supported")
    quad_pairs = shape == "m8n8k4" and a == "f16"
    allowed = _DENSE_SHAPES.get(shape, set()) | ({"f16"} if quad_pairs else set())
    if sparse and (shape, a) not in _SPARSE_SHAPES:
        raise lw.fail(f"mma.sp.{shape} with .{a} is not supported yet (sparse f16/bf16 m16n8k16/k32, s8/u8 "
                      "m16n8k32/k64, s4/u4 m16n8k64/k128, tf32 m16n8k8/k16 and fp8 m16n8k64 are)")
    if not sparse and a not in allowed:
        raise lw.fail(f"mma.{shape} with .{a} inputs does not exist or is not supported")
    if len(layouts) != 2 or (layouts != ["row", "col"] and not quad_pairs):
        raise lw.fail(f"mma.{shape} takes .row.col layouts")
    if _INPUT_BITS[b] != _INPUT_BITS[a] or (a in _FLOAT_INPUTS and a[0] != "e" and b != a):
        raise lw.fail(f"mma with .{a} A and .{b} B inputs does not exist")
    accumulators = ({"s32"} if a in _INTEGER_INPUTS or a == "b1" else {"f64"} if a == "f64"
                    else {"f16", "f32"} if a in ("f16", "e4m3", "e5m2") else {"f32"})
    if d not in accumulators or c not in accumulators:
        raise lw.fail(f"mma with .{a} inputs accumulates in .{'/.'.join(sorted(accumulators))}")
    bit_operation = next((f for f in flags if f in ("and", "xor")), None)
    if (a == "b1") != (bit_operation is not None and "popc" in flags):
        raise lw.fail(".b1 mma takes .and.popc or .xor.popc, other types neither")
    satfinite = "satfinite" in flags
    if satfinite and d != "s32":
        raise lw.fail(".satfinite applies to integer mma")
    m, k = (int(x) for x in shape[1:].replace("n8k", " ").split())
    return Form(shape, m, k, d, a, b, c, satfinite, bit_operation, sparse, tuple(layouts))


# ------------------------------------------------------------------------------------------------ lanes

def _lane_function(table: list[int]) -> tuple[int, tuple[int, ...]] | None:
    """`table` (32 lanes → source lane) as c XOR (lane bits · v_i), or None if it is not bit-affine."""
    constant = table[0]
    vectors = tuple(table[1 << i] ^ constant for i in range(5))
    for lane in range(WARP):
        value = constant
        for i, vector in enumerate(vectors):
            if lane >> i & 1:
                value ^= vector
        if value != table[lane]:
            return None
    return constant, vectors


def _emit_lane(builder: ir.IRBuilder, lane: ir.Value, function: tuple[int, tuple[int, ...]], scale: int = 0) -> ir.Value:
    """The source lane of `function` for PTX lane `lane` (i32): bits moved by shifts, grouped by distance. The
    constant's bits that no lane bit reaches are added last, so that functions differing only there share
    one computation (and the target can fold the constant into an address offset). `scale`: the bits are
    moved `scale` further up and the result shifted down at the end, which a target that addresses lanes
    by lane << `scale` (ds_bpermute: 2) folds away, each bit then moved once."""
    constant, vectors = function
    reached = 0
    for vector in vectors:
        reached |= vector
    shifts: dict[int, int] = {}
    terms = []
    for i, vector in enumerate(vectors):
        if not vector:
            continue
        if vector & (vector - 1):  # a lane bit feeding several source bits
            bit = builder.and_(builder.lshr(lane, ir.Constant(I32, i)), ir.Constant(I32, 1))
            terms.append(builder.mul(bit, ir.Constant(I32, vector)))
            continue
        distance = vector.bit_length() - 1 - i + scale
        shifts[distance] = shifts.get(distance, 0) | 1 << i
    for distance, mask in sorted(shifts.items()):
        if distance > 0:
            bits = builder.and_(builder.shl(lane, ir.Constant(I32, distance)), ir.Constant(I32, mask << distance))
        elif distance < 0:
            bits = builder.lshr(builder.and_(lane, ir.Constant(I32, mask)), ir.Constant(I32, -distance))
        else:
            bits = builder.and_(lane, ir.Constant(I32, mask))
        terms.append(bits)
    if not terms:
        return ir.Constant(I32, constant)
    result = terms[0]
    for term in terms[1:]:
        result = builder.xor(result, term)
    flipped, apart = constant & reached, constant & ~reached
    if flipped:
        result = builder.xor(result, ir.Constant(I32, flipped << scale))
    if scale:
        result = builder.lshr(result, ir.Constant(I32, scale))
    return builder.add(result, ir.Constant(I32, apart)) if apart else result


LaneFunction = tuple[int, tuple[int, ...]]


def _apply(function: LaneFunction, lane: int) -> int:
    """`function`'s value at PTX lane `lane`."""
    constant, vectors = function
    for i, vector in enumerate(vectors):
        if lane >> i & 1:
            constant ^= vector
    return constant


def _selects(function: LaneFunction, index: int, lane: int) -> bool:
    """Whether `function` gives `index` at PTX lane `lane`."""
    return _apply(function, lane) == index


@dataclass(frozen=True)
class Source:
    """Where an element a lane needs lives: `register` of operand `operand` ("a", "b" or "e", the sparse
    metadata), at element `position`, in the lane `function` gives."""

    operand: str
    function: LaneFunction
    register: int
    position: int


@dataclass(frozen=True)
class Choice:
    """An element whose register depends on the executing lane (m8n8k4 .f16 with row-major B): each of
    `sources` read, and the one `selector` (a lane function giving the index) names taken."""

    sources: tuple[Source, ...]
    selector: LaneFunction


class Gather:
    """The warp's registers of the operands, read at other lanes. A target's exchange stays readable only
    until the next one (the host and the emulated wave64 reuse one buffer), so every read a register
    needs is made right after its exchange: `fetch` is given all sources first."""

    def __init__(self, lw: Lowering, warp: WarpPosition, registers: dict[str, list[ir.Value]],
                 lanes: Callable[[Callable[[int], bool]], ir.Value] | None = None):
        """`lanes`, where given, makes the predicate of a PTX-lane test (true in the lanes it holds for) more
        cheaply than comparing the lane's index."""
        self.lw, self.warp, self.registers, self.lanes = lw, warp, registers, lanes
        self.words: dict[tuple[str, int, LaneFunction], ir.Value] = {}

    def fetch(self, sources) -> None:
        builder, warp = self.lw.builder, self.warp
        wanted: dict[tuple[str, int], list[LaneFunction]] = {}
        for source in _expand(sources):
            functions = wanted.setdefault((source.operand, source.register), [])
            if source.function not in functions:
                functions.append(source.function)
        members = warp.to_wave(ir.Constant(I32, M32))
        for (operand, register), functions in wanted.items():
            value = self.registers[operand][register]
            exchange = warp.lane_call(lambda target: target.exchange(builder, value, members))
            for function in functions:
                # from the hardware lane, its warp bit (wave64) kept in place: one mask with the lane bits
                # that stay, where adding the warp's base lane afterwards would cost two operations
                constant, vectors = function
                in_wave = (constant, vectors + (WARP,)) if warp.wave.width > WARP else function
                lane = _emit_lane(builder, warp.hardware_lane, in_wave, scale=2)
                self.words[operand, register, function] = exchange.read(builder, lane, uniform=False)

    def element(self, source: Source | Choice, bits: int) -> ir.Value:
        if type(source) is Choice:
            b = self.lw.builder
            index = _emit_lane(b, self.warp.lane, source.selector)
            values = [self.element(alternative, bits) for alternative in source.sources]
            value = values[-1]
            for n in range(len(values) - 2, -1, -1):
                if self.lanes is not None:
                    chosen = self.lanes(partial(_selects, source.selector, n))
                else:
                    chosen = b.icmp_unsigned("==", index, ir.Constant(I32, n))
                value = b.select(chosen, values[n], value)
            return value
        word = self.words[source.operand, source.register, source.function]
        return _element(self.lw, word, source.position, bits)


def _source(lw: Lowering, operand: str, where: dict, place: Callable[[int], tuple[int, int]]) -> Source | Choice:
    """The element at `place(lane)` (row, column) for every lane: in a lane that is a bit-affine function of
    the executing one, at one register and position, or at one of a few chosen by a bit-affine index."""
    found = [where[place(lane)] for lane in range(WARP)]
    function = _lane_function([lane for lane, _, _ in found])
    slots = sorted({(register, position) for _, register, position in found})
    selector = _lane_function([slots.index((register, position)) for _, register, position in found])
    if function is None or selector is None:
        raise lw.fail("internal: an mma fragment element is not in a bit-affine lane")
    if len(slots) == 1:
        return Source(operand, function, *slots[0])
    return Choice(tuple(Source(operand, function, *slot) for slot in slots), selector)


def _expand(sources):
    """The plain sources among `sources` and the Choices' alternatives."""
    for source in sources:
        yield from source.sources if type(source) is Choice else (source,)


# ------------------------------------------------------------------------------------------------ values

def _element(lw: Lowering, word: ir.Value, position: int, bits: int) -> ir.Value:
    """Element `position` of a register (low bits first), as an integer of `bits`."""
    b = lw.builder
    if bits == word.type.width:
        return word
    shifted = b.lshr(word, ir.Constant(word.type, position * bits)) if position else word
    return b.trunc(shifted, ir.IntType(bits))


def _to_f64(lw: Lowering, bits: ir.Value, ptx_type: str) -> ir.Value:
    """An input or accumulator element (its bits) as f64, exactly."""
    b = lw.builder
    if ptx_type == "f64":
        return b.bitcast(bits, F64)
    if ptx_type == "f16":
        return b.fpext(b.fpext(b.bitcast(bits, F16), F32), F64)
    if ptx_type == "bf16":
        return b.fpext(bf16_to_f32(lw, bits), F64)
    if ptx_type == "tf32":  # the tensor core reads the upper 19 bits
        return b.fpext(b.bitcast(b.and_(bits, ir.Constant(I32, 0xFFFFE000)), F32), F64)
    if ptx_type == "f32":
        return b.fpext(b.bitcast(bits, F32), F64)
    # fp8: exact in f32 (round_to_format only re-encodes; NaN becomes f32's NaN)
    wide = round_to_format(lw, decompose(lw, bits, FORMATS[ptx_type]), FORMATS["f32"], "rn")
    return b.fpext(b.bitcast(wide, F32), F64)


def _to_i64(lw: Lowering, bits: ir.Value, ptx_type: str) -> ir.Value:
    return (lw.builder.sext if ptx_type[0] == "s" else lw.builder.zext)(bits, I64)


def _round_result(lw: Lowering, total: ir.Value, ptx_type: str) -> ir.Value:
    """The f64 sum as the bits of an f32/f16 D element, rounded to nearest even, NaN canonical."""
    b = lw.builder
    if ptx_type == "f64":
        return b.bitcast(total, I64)
    nan = b.fcmp_unordered("uno", total, total)
    if ptx_type == "f16":
        return b.select(nan, ir.Constant(ir.IntType(16), FORMATS["f16"].nan),
                        round_to_format(lw, float_parts(lw, total, "f64"), FORMATS["f16"], "rn"))
    return b.select(nan, ir.Constant(I32, FORMATS["f32"].nan), b.bitcast(b.fptrunc(total, F32), I32))


def _integer_result(lw: Lowering, total: ir.Value, satfinite: bool) -> ir.Value:
    b = lw.builder
    if satfinite:
        low, high = ir.Constant(I64, -(1 << 31)), ir.Constant(I64, (1 << 31) - 1)
        total = b.select(b.icmp_signed("<", total, low), low, total)
        total = b.select(b.icmp_signed(">", total, high), high, total)
    return b.trunc(total, I32)


# ------------------------------------------------------------------------------------------------ operands

def _registers(lw: Lowering, operand: ast.Operand, fragment: Fragment, what: str) -> list[ast.Operand]:
    items = operand.items if type(operand) is ast.Vector else (operand,)
    if len(items) != fragment.registers:
        raise lw.fail(f"the {what} operand of this mma holds {fragment.registers} register(s), not {len(items)}")
    return list(items)


def _read_fragment(lw: Lowering, operand: ast.Operand, fragment: Fragment, what: str) -> list[ir.Value]:
    return [lw.read(item, f"b{fragment.register_bits}") for item in _registers(lw, operand, fragment, what)]


def _elements(lw: Lowering, words: list[ir.Value], fragment: Fragment) -> list[ir.Value]:
    return [_element(lw, words[i // fragment.per_register], i % fragment.per_register, fragment.bits)
            for i in range(fragment.registers * fragment.per_register)]


def _words(lw: Lowering, fragment: Fragment, elements: list[ir.Value]) -> list[ir.Value]:
    """The fragment's register words holding `elements` (element 0 in the low bits)."""
    b = lw.builder
    per, width = fragment.per_register, fragment.register_bits
    word_type = ir.IntType(width)
    words = []
    for r in range(fragment.registers):
        word = None
        for j in range(per):
            part = elements[r * per + j]
            part = b.zext(part, word_type) if part.type.width < width else part
            part = b.shl(part, ir.Constant(word_type, j * fragment.bits)) if j else part
            word = part if word is None else b.or_(word, part)
        words.append(word)
    return words


def _write_words(lw: Lowering, operand: ast.Operand, fragment: Fragment, words: list[ir.Value]) -> None:
    for item, word in zip(_registers(lw, operand, fragment, "D"), words):
        lw.write(item, word, f"b{fragment.register_bits}")


def _write_fragment(lw: Lowering, operand: ast.Operand, fragment: Fragment, elements: list[ir.Value]) -> None:
    _write_words(lw, operand, fragment, _words(lw, fragment, elements))


# ------------------------------------------------------------------------------------------------ mma

def portable_model(lw) -> str:
    """The arithmetic computed here: the module's mma numerics, "sm90" for what `native` leaves to this path."""
    numerics = getattr(lw.callees, "mma_numerics", "sm90")
    return "sm90" if numerics == "native" else numerics


def mma(lw: Lowering, ins: ast.Instruction) -> None:
    """mma/mma.sp computed lane by lane (module docstring); lower/mma_native.py's handler calls it for what it
    does not run on matrix instructions."""
    form = _form(lw, ins)
    if form.a == "f16" or form.c == "f16" or form.d == "f16":
        host_half_runtime(lw)
    a_k = form.k // 2 if form.sparse else form.k
    a_fragment, b_fragment = _a_fragment(form.m, a_k, _INPUT_BITS[form.a]), _b_fragment(form.k, _INPUT_BITS[form.b])
    c_fragment, d_fragment = _c_fragment(form.m, form.c), _c_fragment(form.m, form.d)
    k_base = None
    if form.shape == "m8n8k4" and form.a == "f16":
        a_fragment, b_fragment = (_quad_pair_fragment(x, layout, "f16") for x, layout in zip("ab", form.layouts))
        c_fragment, d_fragment = (_quad_pair_fragment("c", "row", t) for t in (form.c, form.d))
        k_base = lambda lane: 4 * ((lane >> 2) & 3)  # noqa: E731 (the quad pair's block of k)
    if form.sparse:
        d, a, b, c, metadata, selector = lw.operands(ins, 6)
        selectors = _SPARSE_SHAPES[form.shape, form.a]
        if type(selector) is not ast.IntImm or not 0 <= selector.value < selectors:
            raise lw.fail(f"the sparsity selector of mma.sp.{form.shape}.{form.a} is an integer constant in "
                          f"[0, {selectors - 1}]")
    else:
        d, a, b, c = lw.operands(ins, 4)
    registers = {"a": _read_fragment(lw, a, a_fragment, "A"), "b": _read_fragment(lw, b, b_fragment, "B")}
    if form.sparse:
        registers["e"] = [lw.read(metadata, "b32")]
    registers["c"] = _read_fragment(lw, c, c_fragment, "C")
    if form.sparse:
        plans = _sparse_plan(lw, form, a_fragment, b_fragment, selector.value)
    else:
        plans = _dense_plan(lw, form.k, a_fragment, b_fragment, d_fragment, k_base)
    fragments = {"a": a_fragment, "b": b_fragment, "c": c_fragment, "d": d_fragment}
    name = (".".join(("fatkit", ins.opcode, *ins.modifiers)) + (f".selector{selector.value}" if form.sparse else "")
            + f".{portable_model(lw)}")
    _write_words(lw, d, d_fragment, product_words(lw, name, form, registers, plans, fragments))


def product_words(lw: Lowering, name: str, form: Form, registers: dict[str, list[ir.Value]], plans: list[list[Term]],
                  fragments: dict[str, Fragment]) -> list[ir.Value]:
    """D's register words, computed by `multiply` in the subroutine `name` (one per form and module: the
    name must say everything `plans` and `fragments` depend on)."""
    order = [(operand, len(registers[operand])) for operand in ("a", "b", "e", "c") if operand in registers]
    d_fragment = fragments["d"]

    def body(arguments: list[ir.Value]) -> list[ir.Value]:
        values = iter(arguments)
        received = {operand: [next(values) for _ in range(count)] for operand, count in order}
        return _words(lw, d_fragment, multiply(lw, form, received, plans, fragments))

    return lw.subroutine(name, [value for operand, _ in order for value in registers[operand]],
                         [ir.IntType(d_fragment.register_bits)] * d_fragment.registers, body)


def multiply(lw: Lowering, form: Form, registers: dict[str, list[ir.Value]], plans: list[list[Term]],
             fragments: dict[str, Fragment]) -> list[ir.Value]:
    """The lane's D elements: the operands' registers exchanged and read as `plans` need, then summed. C is
    the lane's own where its layout is D's; else (m8n8k4 .f16 with f16 C and f32 D) exchanged as well."""
    c_fragment, d_fragment = fragments["c"], fragments["d"]
    count = d_fragment.registers * d_fragment.per_register
    same = all(c_fragment.place(lane, i) == d_fragment.place(lane, i) for lane in range(WARP) for i in range(count))
    c_sources = [] if same else [_source(lw, "c", c_fragment.locate(), lambda lane: d_fragment.place(lane, i))
                                 for i in range(count)]
    gather = Gather(lw, WarpPosition(lw), registers)
    gather.fetch([source for plan in plans for term in plan for item in term for source in item] + c_sources)
    if same:
        c_elements = _elements(lw, registers["c"], c_fragment)
    else:
        c_elements = [gather.element(source, c_fragment.bits) for source in c_sources]
    bits = {"a": fragments["a"].bits, "b": fragments["b"].bits}
    values = _Values(lw, gather)
    return [_compute(lw, form, values, bits, plan, c) for plan, c in zip(plans, c_elements)]


class _Values:
    """The lane's A and B elements, and what the arithmetic derives from each (its f64 or i64 value, its
    exponent), each made once for all the D elements of a `multiply`. An element is a term of every D element
    of its row or column (an A element of 2–4 of them, a B element of 2–8); made at each use, they were most
    of the subroutine's IR (asm_mma's wmma.mma: 6,340 lines), which LLVM's CSE reduces to this anyway, but
    only after parsing it and running the passes before CSE over all of it. `multiply` makes its values in
    one straight line of code (no value inside a branch of its own), so a value made for an earlier D element
    dominates every later use."""

    def __init__(self, lw: Lowering, gather: Gather):
        self.lw, self.gather = lw, gather
        # (kind, key) → (what the key's ir.Value was, the value made from it): the ir.Value is kept with its
        # result, so that the id in the key cannot be reused by another value while this lives
        self._made: dict[tuple, tuple[object, ir.Value]] = {}

    def _once(self, key: tuple, kept: object, make: Callable[[], ir.Value]) -> ir.Value:
        made = self._made.get(key)
        if made is None:
            made = self._made[key] = (kept, make())
        return made[1]

    def element(self, source: Source | Choice, bits: int) -> ir.Value:
        return self._once(("element", source, bits), None, lambda: self.gather.element(source, bits))

    def f64(self, bits: ir.Value, ptx_type: str) -> ir.Value:
        return self._once(("f64", id(bits), ptx_type), bits, lambda: _to_f64(self.lw, bits, ptx_type))

    def i64(self, bits: ir.Value, ptx_type: str) -> ir.Value:
        return self._once(("i64", id(bits), ptx_type), bits, lambda: _to_i64(self.lw, bits, ptx_type))

    def exponent(self, value: ir.Value, ptx_type: str) -> ir.Value:
        """The unbiased exponent of the f64 `value` as i32, that of a value subnormal in its own format
        (`ptx_type`) being the format's smallest normal exponent."""
        smallest = 1 - FORMATS["f16" if ptx_type in ("e4m3", "e5m2") else ptx_type].bias

        def make() -> ir.Value:
            b = self.lw.builder
            field = b.trunc(b.lshr(b.bitcast(value, I64), ir.Constant(I64, 52)), I32)
            true = b.sub(b.and_(field, ir.Constant(I32, 0x7FF)), ir.Constant(I32, 1023))
            return self.lw.intrinsic("llvm.smax", [true, ir.Constant(I32, smallest)])
        return self._once(("exponent", id(value), smallest), value, make)


# A plan: per D element of the lane, its terms in k order; a term is (A sources, B sources): one of each for
# a dense term; for a sparse one (the A source, the metadata field) and the four B rows of its chunk.
Term = tuple[tuple["Source | Choice", ...], tuple["Source | Choice", ...]]


def _dense_plan(lw: Lowering, k: int, a_fragment: Fragment, b_fragment: Fragment, d_fragment: Fragment,
                k_base: Callable[[int], int] | None = None) -> list[list[Term]]:
    """Per element of the lane's D fragment: the A and B sources of c + Σ_k A[row][k]·B[k][col], k ascending
    from `k_base(lane)` (0 by default)."""
    a_where, b_where, place = a_fragment.locate(), b_fragment.locate(), d_fragment.place
    base = k_base or (lambda lane: 0)
    plans = []
    for i in range(d_fragment.registers * d_fragment.per_register):
        plans.append([((_source(lw, "a", a_where, lambda lane: (place(lane, i)[0], base(lane) + kk)),),
                       (_source(lw, "b", b_where, lambda lane: (base(lane) + kk, place(lane, i)[1])),))
                      for kk in range(k)])
    return plans


def _metadata_field(form: Form, selector: int, half: int, chunk: int, p: int) -> tuple[int, int]:
    """(lane in the group of four, 2-bit field of its register) holding index p of chunk `chunk`
    (`sparse_position`) in row g + 8·half. 16-bit types: lane selector·(K/16) + chunk div 4 holds 4 chunks
    (16 columns) of rows g (bits 15..0) and g + 8 (bits 31..16), tf32 alike with K counted in halves (2K);
    8- and 4-bit types: lane half + 2·(selector + chunk div 8) holds 8 chunks (32 or 64 columns) of one row
    (CUTLASS's CuTe traits of SM80_SPARSE_* say the same)."""
    if _INPUT_BITS[form.a] >= 16:
        halves = form.k * _INPUT_BITS[form.a] // 16
        return selector * (halves // 16) + chunk // 4, 8 * half + 2 * (chunk % 4) + p
    return half + 2 * (selector + chunk // 8), 2 * (chunk % 8) + p


def _sparse_plan(lw: Lowering, form: Form, a_fragment, b_fragment, selector: int) -> list[list[Term]]:
    """Stored column s of a row multiplies B's row rows[index] (`sparse_position`), the index from the
    metadata (`_metadata_field`) of a lane of the row's group."""
    a_where, b_where, place = a_fragment.locate(), b_fragment.locate(), _c_fragment(form.m, "f32").place
    plans = []
    for i in range(4):
        terms = []
        for stored in range(form.k // 2):
            chunk, p, b_rows = sparse_position(form.a, stored)
            owner, field = _metadata_field(form, selector, i >> 1, chunk, p)
            metadata = Source("e", _lane_function([(lane & ~3) | owner for lane in range(WARP)]), 0, field)
            x = _source(lw, "a", a_where, lambda lane: (place(lane, i)[0], stored))
            rows = tuple(_source(lw, "b", b_where, lambda lane: (row, place(lane, i)[1])) for row in b_rows)
            terms.append(((x, metadata), rows))
        plans.append(terms)
    return plans


def _compute(lw: Lowering, form: Form, values: _Values, bits: dict[str, int], plan: list[Term],
             c: ir.Value) -> ir.Value:
    """The D element of `plan` from C element `c`."""
    b = lw.builder
    if form.a == "b1":
        return _bit_dot(lw, form, values.gather, plan, c)
    products = []
    for a_sources, b_sources in plan:
        x = values.element(a_sources[0], bits["a"])
        if len(b_sources) == 1:
            y = values.element(b_sources[0], bits["b"])
        else:  # sparse: the B row the metadata's 2-bit index names
            index = values.element(a_sources[1], 2)
            candidates = [values.element(source, bits["b"]) for source in b_sources]
            y = candidates[3]
            for offset in (2, 1, 0):
                y = b.select(b.icmp_unsigned("==", index, ir.Constant(index.type, offset)), candidates[offset], y)
        products.append((x, y))
    return _accumulate(lw, form, values, c, products)


def _accumulate(lw: Lowering, form: Form, values: _Values, c: ir.Value,
                products: list[tuple[ir.Value, ir.Value]]) -> ir.Value:
    """c + Σ x·y in the form's arithmetic (module docstring), as the bits of a D element."""
    b = lw.builder
    if form.a in _INTEGER_INPUTS:
        total = b.sext(c, I64)
        for x, y in products:
            total = b.add(total, b.mul(values.i64(x, form.a), values.i64(y, form.b)))
        return _integer_result(lw, total, form.satfinite)
    if form.a != "f64" and portable_model(lw) == "sm90":
        return _sm90(lw, form, values, c, products)
    total = _to_f64(lw, c, form.c)
    for x, y in products:
        if form.a == "f64":
            total = lw.intrinsic("llvm.fma", [values.f64(x, "f64"), values.f64(y, "f64"), total])
        else:  # an exact product
            total = b.fadd(total, b.fmul(values.f64(x, form.a), values.f64(y, form.b)))
    return _round_result(lw, total, form.d)


# ------------------------------------------------------------------------------------------------ sm90

_WINDOW = 26  # the block sum keeps each term's bits down to 2^(R-26) (R: the largest term's leading bit + 1)
_NO_TERM = -4096  # the leading-bit position of a zero term: below every real one


def _sm90(lw: Lowering, form: Form, values: _Values, c: ir.Value,
          products: list[tuple[ir.Value, ir.Value]]) -> ir.Value:
    """The D element as an H100/H200 computes it (module docstring, docs/numerics.md): tensor-core blocks for
    f16/bf16/tf32, two f16 blocks and an f32/f16 addition for fp8, an f32 fma chain for m8n8k4 .f16."""
    b = lw.builder
    pairs = [(values.f64(x, form.a), values.f64(y, form.b)) for x, y in products]
    c_value = _to_f64(lw, c, form.c)
    if form.shape == "m8n8k4" and form.a == "f16":
        # Volta's form, as ptxas lowers it (HADD2.F32 conversions; products exact in f64): an f32 D is an FFMA
        # chain from +0 over k, then c added by an FADD; an f16 D is two pairs, FMUL then FFMA each (k0·k1 and
        # k2·k3), added to c by two FADDs, k0·k1's first, then F2FP to f16
        if form.d == "f16":
            total = c_value
            for (x0, y0), (x1, y1) in (pairs[0:2], pairs[2:4]):
                first = _round_f64(lw, b.fmul(x0, y0), "f32")
                pair = _round_f64(lw, b.fadd(b.fmul(x1, y1), first), "f32")
                total = _round_f64(lw, b.fadd(total, pair), "f32")
            return _round_result(lw, total, form.d)
        chain = ir.Constant(F64, 0.0)
        for x, y in pairs:
            chain = _round_f64(lw, b.fadd(b.fmul(x, y), chain), "f32")  # the f16 product is exact in f32
        return _round_result(lw, _round_f64(lw, b.fadd(c_value, chain), "f32"), form.d)
    if form.a in ("e4m3", "e5m2"):  # converted to f16: the registers' low halves (k ≡ 0, 1 mod 4), then the high
        total = ir.Constant(F64, 0.0)
        for part in (0, 1):
            chosen = [pair for k, pair in enumerate(pairs) if (k % 4 < 2) == (part == 0)]
            total = _block(lw, values, chosen, total, form.d, ("f16", "f16", form.d))
        return _round_result(lw, _round_f64(lw, b.fadd(c_value, total), form.d), form.d)
    block = 4 if form.wmma and form.a == "tf32" else len(pairs)  # wmma m16n16k8 tf32: two k4 instructions
    total = c_value
    for start in range(0, len(pairs), block):
        total = _block(lw, values, pairs[start:start + block], total, form.d,
                       (form.a, form.b, form.c if start == 0 else form.d))
    return _round_result(lw, total, form.d)


def _block(lw: Lowering, values: _Values, pairs: list[tuple[ir.Value, ir.Value]], c: ir.Value, d_type: str,
           types: tuple[str, str, str]) -> ir.Value:
    """One tensor-core instruction's c + Σ x·y (f64 values, products exact in f64; `types` those of x, y and c):
    R is the largest of ex(x)+ex(y)+1 over the non-zero products and ex(c)+1, ex of a subnormal being its
    format's smallest normal exponent; every term is truncated toward zero to a multiple of 2^(R-26) (scaled to
    an integer, exact in f64, `llvm.trunc`); the exact sum is rounded toward zero to f32 (an f16 D: to nearest
    even f16). NaN and ±inf come out as IEEE addition gives them; a zero (exact, or rounded to zero) is +0.
    The result is returned as the f64 of the D value."""
    b = lw.builder
    terms = [b.fmul(x, y) for x, y in pairs] + [c]
    x_type, y_type, c_type = types
    leads = [_lead(lw, values, x, y, term, (x_type, y_type)) for (x, y), term in zip(pairs, terms)]
    leads.append(_lead(lw, values, c, None, c, (c_type,)))
    top = leads[0]
    for lead in leads[1:]:
        top = lw.intrinsic("llvm.smax", [lead, top])
    top = b.select(b.icmp_signed("==", top, ir.Constant(I32, _NO_TERM)), ir.Constant(I32, 0), top)
    scale, unscale = _power_of_two(lw, b.sub(ir.Constant(I32, _WINDOW), top)), _power_of_two(
        lw, b.sub(top, ir.Constant(I32, _WINDOW)))
    total = None
    ieee = None
    for term in terms:
        truncated = lw.intrinsic("llvm.trunc", [b.fmul(term, scale)])
        total = truncated if total is None else b.fadd(total, truncated)
        ieee = term if ieee is None else b.fadd(ieee, term)
    value = b.fmul(total, unscale)
    if d_type == "f16":
        bits = round_to_format(lw, float_parts(lw, value, "f64"), FORMATS["f16"], "rn")
        value = _to_f64(lw, bits, "f16")
        value = b.select(b.fcmp_ordered("==", value, ir.Constant(F64, 0.0)), ir.Constant(F64, 0.0), value)
    else:
        rounded = b.fpext(b.bitcast(_toward_zero_f32(lw, value), F32), F64)
        rounded = b.select(b.fcmp_ordered("==", rounded, ir.Constant(F64, 0.0)), ir.Constant(F64, 0.0), rounded)
        # toward zero, yet an H200's block sum overflows to ±inf
        overflow = b.fcmp_ordered(">=", lw.intrinsic("llvm.fabs", [value]), ir.Constant(F64, 2.0 ** 128))
        infinity = lw.intrinsic("llvm.copysign", [ir.Constant(F64, float("inf")), value])
        value = b.select(overflow, infinity, rounded)
    finite = b.fcmp_ordered("one", lw.intrinsic("llvm.fabs", [ieee]), ir.Constant(F64, float("inf")))
    return b.select(finite, value, ieee)  # a NaN or ±inf input decides the result as in IEEE addition


def _toward_zero_f32(lw: Lowering, value: ir.Value) -> ir.Value:
    """The bits of the f32 that a block sum `value` (a finite f64 of magnitude in [2^-277, 2^128) or zero:
    an integer times 2^(R-26)) rounds to toward zero. round_to_format would handle every f64, in ~60
    operations a D element; this takes the f64's bits apart directly: a normal f32's are the f64's with the
    exponent rebiased and the low 29 bits cut off, a subnormal f32's the magnitude times 2^149 truncated to an
    integer (exact: below 2^23). Magnitudes from 2^128 up give meaningless bits, which the caller replaces
    with ±inf."""
    b = lw.builder
    bits = b.bitcast(value, I64)
    magnitude = b.and_(bits, ir.Constant(I64, (1 << 63) - 1))
    normal = b.icmp_unsigned(">=", magnitude, ir.Constant(I64, (1023 - 126) << 52))
    rebiased = b.sub(b.trunc(b.lshr(magnitude, ir.Constant(I64, 29)), I32), ir.Constant(I32, (1023 - 127) << 23))
    subnormal = b.fptoui(b.fmul(lw.intrinsic("llvm.fabs", [value]), ir.Constant(F64, 2.0 ** 149)), I32)
    sign = b.and_(b.trunc(b.lshr(bits, ir.Constant(I64, 32)), I32), ir.Constant(I32, 1 << 31))
    return b.or_(sign, b.select(normal, rebiased, subnormal))


def _lead(lw: Lowering, values: _Values, x: ir.Value, y: ir.Value | None, term: ir.Value,
          types: tuple[str, ...]) -> ir.Value:
    """ex(x)+ex(y)+1 (ex(c)+1 without y) as i32, or _NO_TERM for a zero term; the f64 inputs are normal numbers,
    ex of a value subnormal in its own format (`types`) is that format's smallest normal exponent."""
    b = lw.builder
    exponent = values.exponent
    lead = exponent(x, types[0]) if y is None else b.add(exponent(x, types[0]), exponent(y, types[1]))
    lead = b.add(lead, ir.Constant(I32, 1))
    return b.select(b.fcmp_ordered("==", term, ir.Constant(F64, 0.0)), ir.Constant(I32, _NO_TERM), lead)


def _power_of_two(lw: Lowering, exponent: ir.Value) -> ir.Value:
    """2^exponent as f64, for an i32 exponent in the normal range."""
    b = lw.builder
    field = b.zext(b.add(exponent, ir.Constant(I32, 1023)), I64)
    return b.bitcast(b.shl(field, ir.Constant(I64, 52)), F64)


def _round_f64(lw: Lowering, value: ir.Value, ptx_type: str) -> ir.Value:
    """An f64 rounded to nearest even f32 or f16 and widened back (f32 + f32 in f64 rounds correctly once)."""
    b = lw.builder
    if ptx_type == "f16":
        return _to_f64(lw, round_to_format(lw, float_parts(lw, value, "f64"), FORMATS["f16"], "rn"), "f16")
    return b.fpext(b.fptrunc(value, F32), F64)


def _bit_dot(lw: Lowering, form: Form, gather: Gather, plan: list[Term], c: ir.Value) -> ir.Value:
    """b1: c + Σ popc(a op b) over 32-bit words, which hold the same 32 k of A's row and B's column."""
    b = lw.builder
    total = c
    for word in range(0, form.k, 32):
        group = plan[word:word + 32]
        (x,), (y,) = group[0]
        aligned = all(t[0][0] == Source("a", x.function, x.register, j)
                      and t[1][0] == Source("b", y.function, y.register, j) for j, t in enumerate(group))
        if not aligned:
            raise lw.fail("internal: the b1 mma words of A and B do not align")
        a_word = gather.words["a", x.register, x.function]
        b_word = gather.words["b", y.register, y.function]
        combined = b.and_(a_word, b_word) if form.bit_operation == "and" else b.xor(a_word, b_word)
        total = b.add(total, lw.intrinsic("llvm.ctpop", [combined]))
    return total
