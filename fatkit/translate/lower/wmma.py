"""Warp-level matrix operations of the CUDA WMMA API: wmma.load.{a,b,c}, wmma.store.d and wmma.mma (.sync.aligned)
for m16n16k16, m32n8k16 and m8n32k16 of f16 (f16/f32 accumulators), bf16, s8 and u8, m16n16k8 of tf32,
m8n8k4 of f64, m8n8k32 of s4/u4 and m8n8k128 of b1 (.and/.xor.popc), from .global, .shared or generic
memory, row- or column-major (the sub-byte A row-major and B column-major, as the ISA has them), with or
without a stride (in elements).

The ISA leaves the fragments' layout to the implementation; code only relies on a fragment holding its
matrix's elements (loads, stores and mma agree), and on element-wise operations applying to each element
alike. The layout chosen here is built from the mma.sync fragments (lower/mma.py), as tiles:
A is the m16n8kK A fragment of each 16-row block (m8n32k16: its rows 0–7 only); B the mma B fragment of each
8-column block; C and D the m16n8 (m8n8 for m8n32k16 and m8n8k4) accumulator fragment of each 16×8 (8×8)
block, blocks in row-major order. The f16 A and B fragments of the API have more registers than a warp
needs for the matrix (Volta's layout duplicates elements): the slots past the matrix repeat it from the
start, and loads fill every slot. A sub-byte register holds consecutive elements of the contiguous
dimension and is loaded as one 32-bit word. wmma.mma is then the mma computation over the whole K with
these fragments, with the same arithmetic (f64: .rn only).
"""

from __future__ import annotations

from llvmlite import ir

from fatkit.translate.lower.core import I32, I64, Lowering, handles
from fatkit.translate.ptx import ast
from fatkit.translate.lower.mma import (
    Form, Fragment, _a_fragment, _b_fragment, _c_fragment, _dense_plan, _elements, _emit_lane, _lane_function,
    _read_fragment, _registers, _write_fragment, _write_words, product_words,
)
from fatkit.translate.lower.convert import host_half_runtime
from fatkit.translate.lower.warp import WARP, WarpPosition

_SHAPES = {"m16n16k16": (16, 16, 16), "m32n8k16": (32, 8, 16), "m8n32k16": (8, 32, 16), "m16n16k8": (16, 16, 8),
           "m8n8k4": (8, 8, 4), "m8n8k32": (8, 8, 32), "m8n8k128": (8, 8, 128)}
_SHAPE_TYPES = {"m16n16k16": {"f16", "bf16", "s8", "u8"}, "m32n8k16": {"f16", "bf16", "s8", "u8"},
                "m8n32k16": {"f16", "bf16", "s8", "u8"}, "m16n16k8": {"tf32"}, "m8n8k4": {"f64"},
                "m8n8k32": {"s4", "u4"}, "m8n8k128": {"b1"}}
_BITS = {"f16": 16, "bf16": 16, "s8": 8, "u8": 8, "s4": 4, "u4": 4, "b1": 1, "tf32": 32, "f64": 64, "f32": 32,
         "s32": 32}
_SPACES = {"global": "global", "shared": "shared", "shared::cta": "shared"}


def _tiled(base: Fragment, tiles: list[tuple[int, int]], registers: int, rows_below: int | None = None) -> Fragment:
    """`base`'s elements (those in rows below `rows_below`) in each tile, offset by the tile's (row, column);
    `registers` of them, slots past the tiles repeating them."""
    kept = [i for i in range(base.registers * base.per_register)
            if rows_below is None or base.place(0, i)[0] < rows_below]
    count = len(kept) * len(tiles)

    def place(lane, i):
        tile, j = divmod(i % count, len(kept))
        row, col = base.place(lane, kept[j])
        return row + tiles[tile][0], col + tiles[tile][1]
    return Fragment(registers, base.per_register, base.bits, base.register_bits, place)


def fragment(matrix: str, shape: str, ptx_type: str) -> Fragment:
    """The fragment of `matrix` ("a", "b", "c"/"d") of a wmma `shape` with elements of `ptx_type`."""
    m, n, k = _SHAPES[shape]
    bits = _BITS[ptx_type]
    if matrix == "a":
        if shape == "m8n8k4":
            return _a_fragment(8, 4, 64)
        base = _a_fragment(16, k, bits)
        registers = 8 if ptx_type == "f16" else m * k * bits // (32 * 32)
        return _tiled(base, [(16 * r, 0) for r in range(max(1, m // 16))], registers, rows_below=8 if m == 8 else None)
    if matrix == "b":
        base = _b_fragment(k, bits)
        registers = 8 if ptx_type == "f16" else k * n * bits // (32 * 32) if bits < 64 else 1
        return _tiled(base, [(0, 8 * c) for c in range(n // 8)], registers)
    base = _c_fragment(16 if m >= 16 else 8, ptx_type)
    tiles = [(16 * r, 8 * c) for r in range(max(1, m // 16)) for c in range(n // 8)]
    return _tiled(base, tiles, base.registers * len(tiles))


def _shape(lw: Lowering, ins: ast.Instruction) -> str:
    shapes = [m for m in ins.modifiers if m in _SHAPES]
    if len(shapes) != 1:
        raise lw.fail("wmma shapes lowered: " + ", ".join(f".{s}" for s in _SHAPES))
    return shapes[0]


def _check_sync(lw: Lowering, ins: ast.Instruction) -> None:
    if "sync" not in ins.modifiers or "aligned" not in ins.modifiers:
        raise lw.fail("wmma is .sync.aligned")


@handles("wmma")
def wmma(lw: Lowering, ins: ast.Instruction) -> None:
    _check_sync(lw, ins)
    operation = ins.modifiers[0]
    if operation in ("load", "store"):
        _memory(lw, ins, operation)
    elif operation == "mma":
        _mma(lw, ins)
    else:
        raise lw.fail(f"wmma.{operation} is not an operation (load, store, mma)")


def _memory(lw: Lowering, ins: ast.Instruction, operation: str) -> None:
    """wmma.load.{a,b,c} r, [p]{, stride} and wmma.store.d [p], r{, stride}: each lane moves its slots; the
    element at (row, column) sits stride·row + column elements past p (.row) or stride·column + row (.col),
    stride by default the leading dimension (columns for .row, rows for .col)."""
    matrix = ins.modifiers[1]
    if (operation, matrix) not in (("load", "a"), ("load", "b"), ("load", "c"), ("store", "d")):
        raise lw.fail(f"wmma.{operation}.{matrix} does not exist")
    shape = _shape(lw, ins)
    layouts = [m for m in ins.modifiers if m in ("row", "col")]
    types = [m for m in ins.modifiers if m in _BITS]
    spaces = [m for m in ins.modifiers if m in _SPACES]
    known = {operation, matrix, "sync", "aligned", shape, *layouts, *types, *spaces}
    if len(layouts) != 1 or len(types) != 1 or len(spaces) > 1 or set(ins.modifiers) - known:
        raise lw.fail(f"wmma.{operation} takes one layout, one type, an optional state space (.global, .shared)")
    ptx_type, space = types[0], _SPACES[spaces[0]] if spaces else "generic"
    if _BITS[ptx_type] < 8 and layouts != [{"a": "row", "b": "col"}.get(matrix)]:
        raise lw.fail(f"wmma.load.{matrix} of .{ptx_type} takes .{'row' if matrix == 'a' else 'col'} only")
    allowed = _SHAPE_TYPES[shape] if matrix in "ab" else {"m8n8k4": {"f64"}, "m16n16k8": {"f32"}}.get(
        shape, {"f16", "f32", "s32"})
    if ptx_type not in allowed:
        raise lw.fail(f"wmma.{operation}.{matrix}.{shape} does not take .{ptx_type}")
    if ptx_type == "f16":
        host_half_runtime(lw)
    m, n, k = _SHAPES[shape]
    rows, columns = {"a": (m, k), "b": (k, n)}.get(matrix, (m, n))
    frag = fragment(matrix, shape, ptx_type)
    if operation == "load":
        registers, address, *rest = ins.operands
    else:
        address, registers, *rest = ins.operands
    if len(rest) > 1:
        raise lw.fail("too many operands")
    b = lw.builder
    stride = lw.read(rest[0], "u32") if rest else ir.Constant(I32, columns if layouts[0] == "row" else rows)
    base = lw.address(address, space)
    warp = WarpPosition(lw)
    element_type = ir.IntType(frag.bits)
    size = max(1, frag.bits // 8)
    count = frag.registers * frag.per_register
    if operation == "store":
        values = _elements(lw, _read_fragment(lw, registers, frag, "D"), frag)

    def element_pointer(i: int) -> ir.Value:
        row, col = (_lane_value(lw, warp.lane, [frag.place(lane, i)[axis] for lane in range(WARP)]) for axis in (0, 1))
        major, minor = (row, col) if layouts[0] == "row" else (col, row)
        index = b.add(b.mul(b.zext(major, I64), b.zext(stride, I64)), b.zext(minor, I64))
        offset = b.lshr(b.mul(index, ir.Constant(I64, frag.bits)), ir.Constant(I64, 3))  # bits → bytes
        return b.gep(base, [offset], source_etype=ir.IntType(8))

    if frag.bits < 8:  # a register's elements lie together along the contiguous dimension: one word
        words = [b.load(element_pointer(r * frag.per_register), typ=I32, align=4) for r in range(frag.registers)]
        for item, word in zip(_registers(lw, registers, frag, matrix.upper()), words):
            lw.write(item, word, "b32")
        return
    loaded = []
    for i in range(count):
        pointer = element_pointer(i)
        if operation == "load":
            loaded.append(b.load(pointer, typ=element_type, align=size))
        else:
            b.store(values[i], pointer, align=size)
    if operation == "load":
        _write_fragment(lw, registers, frag, loaded)


def _lane_value(lw: Lowering, lane: ir.Value, table: list[int]) -> ir.Value:
    """The i32 value `table[lane]` takes, computed from the lane (the tables here are bit-affine in it)."""
    function = _lane_function(table)
    if function is None:
        raise lw.fail("internal: a wmma fragment position is not bit-affine in the lane")
    return _emit_lane(lw.builder, lane, function)


def _mma(lw: Lowering, ins: ast.Instruction) -> None:
    """wmma.mma.sync.aligned.alayout.blayout.shape.dtype.ctype (f16), .f32.atype.btype.f32 (bf16, tf32),
    .s32.atype.btype.s32{.satfinite} (s8/u8) and {.rn}.f64.f64.f64.f64: the layouts only say how the
    fragments were loaded, which they already hold."""
    shape = _shape(lw, ins)
    layouts = [m for m in ins.modifiers if m in ("row", "col")]
    types = [m for m in ins.modifiers if m in _BITS]
    flags = set(ins.modifiers) - {"mma", "sync", "aligned", shape, "row", "col", *types}
    if len(layouts) != 2:
        raise lw.fail("wmma.mma takes the layouts of A and B")
    if flags - {"satfinite", "rn", "and", "xor", "popc"}:
        raise lw.fail(f"wmma.mma modifier .{sorted(flags - {'satfinite', 'rn', 'and', 'xor', 'popc'})[0]} "
                      "is not supported")
    if len(types) == 2:
        d, c = types
        a = b_type = "f16"
    elif len(types) == 4:
        d, a, b_type, c = types
    else:
        raise lw.fail("wmma.mma takes .dtype.ctype (f16) or .dtype.atype.btype.ctype")
    integers = ({"s8", "u8"}, {"s4", "u4"})
    pair = any(a in family and b_type in family for family in integers)
    if a not in _SHAPE_TYPES[shape] or not (pair or b_type == a):
        raise lw.fail(f"wmma.mma.{shape} with .{a} and .{b_type} inputs does not exist")
    accumulators = {"f16": {"f16", "f32"}, "bf16": {"f32"}, "tf32": {"f32"}, "f64": {"f64"}}.get(a, {"s32"})
    bit_operation = next((f for f in ("and", "xor") if f in flags), None)
    if (a == "b1") != (bit_operation is not None and "popc" in flags):
        raise lw.fail(".b1 wmma.mma takes .and.popc or .xor.popc, other types neither")
    if d not in accumulators or c not in accumulators:
        raise lw.fail(f"wmma.mma with .{a} inputs accumulates in .{'/.'.join(sorted(accumulators))}")
    if "satfinite" in flags and d != "s32":
        raise lw.fail(".satfinite applies to the integer wmma.mma")
    if "f16" in (a, c, d):
        host_half_runtime(lw)
    m, n, k = _SHAPES[shape]
    form = Form(shape, m, k, d, a, b_type, c, "satfinite" in flags, bit_operation, False, wmma=True)
    frags = {name: fragment(name, shape, t) for name, t in (("a", a), ("b", b_type), ("c", c), ("d", d))}
    d_operand, a_operand, b_operand, c_operand = lw.operands(ins, 4)
    registers = {name: _read_fragment(lw, operand, frags[name], name.upper())
                 for name, operand in (("a", a_operand), ("b", b_operand), ("c", c_operand))}
    plans = _dense_plan(lw, k, frags["a"], frags["b"], frags["d"])
    name = ".".join(("fatkit", ins.opcode, *ins.modifiers, getattr(lw.callees, "mma_numerics", "sm90")))
    _write_words(lw, d_operand, frags["d"], product_words(lw, name, form, registers, plans, frags))
