"""Warp-level matrix data movement: ldmatrix, stmatrix and movmatrix with the fragment layouts of the PTX ISA,
computed on the target's hardware-lane interface (`Target.exchange`), so that the one algorithm runs on wave32,
on wave64 (two PTX warps a wave: lanes are PTX lanes of the executing thread's own warp, offset by its base
hardware lane), on the host and on the nvptx verification target.

A matrix is rows of 16 bytes in shared memory, each at the address one lane supplies: row r of matrix m at
lane R m + r (R = 8 rows of an m8n8 or m16n8 matrix, 16 of an m16n16 one). A lane's fragment is one 32-bit
register per matrix (two for m16n16), made of pieces: (row, byte in the row, width), `_pieces` below. So
ldmatrix exchanges the row addresses and each lane loads its own pieces; stmatrix stores them the same way
round; movmatrix reads each half of its result from the lane holding that element. With a = l % 4, b = l / 4
for PTX lane l:

    m8n8 .b16            row b, bytes 4a..4a+3: elements (b, 2a), (b, 2a+1), the lower column in the low half
    m8n8 .trans .b16     rows 2a and 2a+1, element b: the fragment of the transposed matrix
    m16n16 .trans .b8    register 2m + h, byte p: row 4a + 2h + p%2, byte b + 8 (p/2) of matrix m
    m16n8 .trans .b8     (stmatrix) register m, byte p: row 2a + p%2, byte b + 8 (p/2) of matrix m

the last two as NVIDIA's CUTLASS describes them (cute/atom/copy_traits_sm100.hpp: SM100_U8x8/U8x16_LDSM_T,
SM100_U8x4/8/16_STSM_T): in the transposed 16x16 matrix a lane holds 4 consecutive columns of 2 rows, b and
b + 8; in the 16x8 one the layout of an mma m16n8 accumulator. Like ld/st, ldmatrix and stmatrix are weak
accesses: ordering them against other lanes' accesses is the program's bar.warp.sync/bar.sync, as in PTX.
ldmatrix's decompressing forms (.b8x16 from .b6x16_p32/.b4x16_p64) are refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from fatkit.translate.lower.addresses import pointer_bits
from fatkit.translate.lower.atomic import state_space
from fatkit.translate.lower.core import I32, I64, Lowering, handles
from fatkit.translate.lower.warp import M32, WarpPosition
from fatkit.translate.ptx import ast

_COUNTS = {"x1": 1, "x2": 2, "x4": 4}


@dataclass(frozen=True)
class _Shape:
    rows: int  # rows of 16 bytes a matrix has, each at the address of one lane
    registers: int  # 32-bit registers of a lane's fragment of one matrix
    element: str  # the .type
    counts: tuple[int, ...]  # the matrix counts the ISA allows
    transposed: bool | None  # None: with or without .trans; True: .trans is mandatory


_SHAPES = {
    "ldmatrix": {"m8n8": _Shape(8, 1, "b16", (1, 2, 4), None), "m16n16": _Shape(16, 2, "b8", (1, 2), True)},
    "stmatrix": {"m8n8": _Shape(8, 1, "b16", (1, 2, 4), None), "m16n8": _Shape(8, 1, "b8", (1, 2, 4), True)},
}
_DECOMPRESSING = ("b8x16", "b6x16_p32", "b4x16_p64")


def _one(lw: Lowering, ins: ast.Instruction, choices, what: str) -> str:
    chosen = [m for m in ins.modifiers if m in choices]
    if len(chosen) != 1:
        raise lw.fail(f"expected one {what} of {', '.join('.' + c for c in choices)}")
    return chosen[0]


@dataclass(frozen=True)
class _Form:
    name: str  # the .shape
    shape: _Shape
    count: int
    trans: bool
    space: str


def _form(lw: Lowering, ins: ast.Instruction) -> _Form:
    """ldmatrix/stmatrix .sync.aligned.shape.num{.trans}{.shared{::cta}}.type, checked against the ISA."""
    if any(m in _DECOMPRESSING for m in ins.modifiers) or "m8n16" in ins.modifiers:
        raise lw.fail("the decompressing forms (.b8x16 from packed .b6x16_p32/.b4x16_p64 elements, sm_100) are "
                      "not lowered: where the ISA puts a 6- or 4-bit element in its byte is not implemented")
    shapes = _SHAPES[ins.opcode]
    name = _one(lw, ins, tuple(shapes), "shape")
    shape = shapes[name]
    if not ins.has("sync", "aligned"):
        raise lw.fail(f"{ins.opcode} needs .sync.aligned")
    count_name = _one(lw, ins, tuple(_COUNTS), "matrix count")
    space, qualifiers = state_space(lw, ins, ("shared", "generic"))
    if qualifiers == ["shared::cluster"]:
        raise lw.fail(f"{ins.opcode} addresses .shared{{::cta}}, not .shared::cluster (the ISA's forms)")
    lw.check_modifiers(ins, {"sync", "aligned", name, count_name, "trans", *qualifiers})
    if lw.types(ins, 1) != [shape.element]:
        raise lw.fail(f"{ins.opcode}.{name} moves .{shape.element} elements")
    count, trans = _COUNTS[count_name], "trans" in ins.modifiers
    if count not in shape.counts:
        raise lw.fail(f"{ins.opcode}.{name} takes {', '.join(f'.x{c}' for c in shape.counts)}")
    if shape.transposed and not trans:
        raise lw.fail(f"{ins.opcode}.{name} needs .trans")
    return _Form(name, shape, count, trans, space)


def _fragments(lw: Lowering, operand: ast.Operand, count: int) -> tuple[ast.Operand, ...]:
    """The {r0, …} operand of `count` 32-bit registers (a bare register for one)."""
    if type(operand) is ast.Vector and len(operand.items) == count:
        return operand.items
    if count == 1 and type(operand) is ast.Name:
        return (operand,)
    raise lw.fail(f"expected a {{…}} operand of {count} .b32 register(s)")


@dataclass(frozen=True)
class _Piece:
    """`width` bits at bit `shift` of a register: byte `byte` (i32) onwards of the row whose address PTX lane
    `row` (i32) supplied; `key` names the row, so that pieces of one row read its address once."""

    key: tuple
    row: ir.Value
    byte: ir.Value
    width: int
    shift: int


def _pieces(lw: Lowering, warp: WarpPosition, form: _Form, register: int) -> list[_Piece]:
    """The pieces of a lane's `register`-th fragment register, as the module docstring lays them out."""
    builder = lw.builder

    def const(value: int) -> ir.Value:
        return ir.Constant(I32, value)

    a = builder.and_(warp.lane, const(3))
    b = builder.lshr(warp.lane, const(2))
    matrix, half = divmod(register, form.shape.registers)
    first = matrix * form.shape.rows

    def row(key: tuple, value: ir.Value) -> tuple[tuple, ir.Value]:
        return (matrix, *key), builder.add(const(first), value)

    if form.name == "m8n8" and not form.trans:
        key, value = row(("b",), b)
        return [_Piece(key, value, builder.shl(a, const(2)), 32, 0)]
    if form.name == "m8n8":
        pieces = []
        for h in (0, 1):
            key, value = row(("2a+", h), builder.add(builder.shl(a, const(1)), const(h)))
            pieces.append(_Piece(key, value, builder.shl(b, const(1)), 16, 16 * h))
        return pieces
    # the 8-bit forms: byte p of the register from row base + p % 2, byte b + 8 (p / 2)
    base = builder.add(builder.shl(a, const(2)), const(2 * half)) if form.name == "m16n16" else builder.shl(a, const(1))
    pieces = []
    for p in range(4):
        key, value = row(("a", half, p % 2), builder.add(base, const(p % 2)))
        pieces.append(_Piece(key, value, builder.add(b, const(8 * (p // 2))), 8, 8 * p))
    return pieces


class _Rows:
    """The row addresses the warp's lanes supplied (`[p]` of each lane), read across lanes by row."""

    def __init__(self, lw: Lowering, warp: WarpPosition, operand: ast.Operand, space: str):
        self.lw, self.warp, builder = lw, warp, lw.builder
        pointer = lw.address(operand, space)
        self.pointer_type = pointer.type
        mine = builder.ptrtoint(pointer, ir.IntType(pointer_bits(lw.target.data_layout, pointer.type.addrspace)))
        whole_warp = warp.to_wave(ir.Constant(I32, M32))  # .aligned: every lane of the warp takes part
        self.exchange = warp.lane_call(lambda target: target.exchange(builder, mine, whole_warp))
        self.starts: dict[tuple, ir.Value] = {}

    def element(self, piece: _Piece) -> ir.Value:
        """A pointer to the piece's first byte."""
        builder = self.lw.builder
        if piece.key not in self.starts:
            lane = builder.add(self.warp.base, piece.row)
            self.starts[piece.key] = builder.inttoptr(self.exchange.read(builder, lane, uniform=False),
                                                      self.pointer_type)
        return builder.gep(self.starts[piece.key], [builder.zext(piece.byte, I64)], source_etype=ir.IntType(8))


@handles("ldmatrix")
def ldmatrix(lw: Lowering, ins: ast.Instruction) -> None:
    form = _form(lw, ins)
    destination, address = lw.operands(ins, 2)
    registers = _fragments(lw, destination, form.count * form.shape.registers)
    builder = lw.builder
    warp = WarpPosition(lw)
    rows = _Rows(lw, warp, address, form.space)
    loaded = []
    for index in range(len(registers)):
        value = ir.Constant(I32, 0)
        for piece in _pieces(lw, warp, form, index):
            part = builder.load(rows.element(piece), typ=ir.IntType(piece.width), align=piece.width // 8)
            part = builder.zext(part, I32) if piece.width < 32 else part
            value = builder.or_(value, builder.shl(part, ir.Constant(I32, piece.shift)) if piece.shift else part)
        loaded.append(value)
    for register, value in zip(registers, loaded):  # after every read of the exchange
        lw.write(register, value, "b32")


@handles("stmatrix")
def stmatrix(lw: Lowering, ins: ast.Instruction) -> None:
    form = _form(lw, ins)
    address, source = lw.operands(ins, 2)
    values = [lw.read(register, "b32") for register in _fragments(lw, source, form.count * form.shape.registers)]
    builder = lw.builder
    warp = WarpPosition(lw)
    rows = _Rows(lw, warp, address, form.space)
    for index, value in enumerate(values):
        for piece in _pieces(lw, warp, form, index):
            part = builder.lshr(value, ir.Constant(I32, piece.shift)) if piece.shift else value
            part = builder.trunc(part, ir.IntType(piece.width)) if piece.width < 32 else part
            builder.store(part, rows.element(piece), align=piece.width // 8)


@handles("movmatrix")
def movmatrix(lw: Lowering, ins: ast.Instruction) -> None:
    """d of lane l is the transposed fragment: elements (2(l%4), l/4) and (2(l%4)+1, l/4) of the matrix whose
    element (r, c) lane 4r + c/2 holds in half c%2 of a."""
    if not ins.has("sync", "aligned", "m8n8", "trans"):
        raise lw.fail("movmatrix is movmatrix.sync.aligned.m8n8.trans.b16")
    lw.check_modifiers(ins, {"sync", "aligned", "m8n8", "trans"})
    if lw.types(ins, 1) != ["b16"]:
        raise lw.fail("movmatrix.m8n8 moves .b16 elements")
    destination, source = lw.operands(ins, 2)
    builder = lw.builder
    warp = WarpPosition(lw)
    value = lw.read(source, "b32")
    exchange = warp.lane_call(lambda target: target.exchange(builder, value, warp.to_wave(ir.Constant(I32, M32))))
    quad = builder.and_(warp.lane, ir.Constant(I32, 3))
    column = builder.lshr(warp.lane, ir.Constant(I32, 2))
    shift = builder.shl(builder.and_(column, ir.Constant(I32, 1)), ir.Constant(I32, 4))  # half (l/4) % 2
    holder = builder.lshr(column, ir.Constant(I32, 1))  # lane 4r + (l/4)/2 holds column l/4 of row r
    halves = []
    for h in (0, 1):
        row = builder.add(builder.shl(quad, ir.Constant(I32, 1)), ir.Constant(I32, h))  # rows 2(l%4), 2(l%4)+1
        lane = builder.add(warp.base, builder.add(builder.shl(row, ir.Constant(I32, 2)), holder))
        word = exchange.read(builder, lane, uniform=False)
        halves.append(builder.and_(builder.lshr(word, shift), ir.Constant(I32, 0xFFFF)))
    lw.write(destination, builder.or_(halves[0], builder.shl(halves[1], ir.Constant(I32, 16))), "b32")
