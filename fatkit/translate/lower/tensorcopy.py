"""The tensor copies (TMA): cp.async.bulk.tensor loads and stores, cp.reduce.async.bulk.tensor, and the
device-side tensor-map instructions tensormap.replace and tensormap.cp_fenceproxy, over fatkit's tensor-map
layout (fatkit/runtime.py, docs/runtime.md): a CUDA-on-AMD shim builds the 128-byte maps with fatkit's
encoder in place of cuTensorMapEncode*, so the copy reads the shape, strides, box, traversal strides,
element type, swizzle and fill out of the map at run time and does the TMA unit's work itself.

The issuing thread does the whole copy where it issues it, as for the other bulk copies (lower/asynccopy.py
says why a synchronous copy is a correct asynchronous one, and how the complete-tx orders it). Programs
issue TMA from one thread (`elect.sync` or a thread-0 branch), so the other lanes of its warp are elsewhere.
A copy issued under `elect.sync` (the region passes/elected.py recognises) is moved to where the warp
rejoins and shared: the lanes take the units of the walk below in turn (16-byte chunks or elements of a
tile, pixels of an im2col column, the box's elements of a reduction; `asynccopy.elected_share`), wait for
each other, and the issuing lane alone completes the transaction bytes on the mbarrier (each destination
CTA's, for a multicast), so the count is the hardware's whatever the lanes. A thread-0 branch keeps the copy
the one thread's. The copy moves 16-byte chunks where a chunk lies wholly inside the tensor at an aligned
address, element by element elsewhere.

Semantics as the H200 measured them (docs/runtime.md, "What a copy does"):
- Tile mode, rank r (the instruction's .Nd): a box row is box[0] consecutive elements from coord[0] (dimension
  0's elementStride is not applied); along dimension i > 0 the box holds ceil(box[i] / elementStride[i])
  positions, box index k at tensor coordinate coord[i] + k·elementStride[i]. Shared memory receives the rows
  dimension 1 fastest, packed without a swizzle; with one each row starts at a multiple of the span (the
  bytes after a shorter row are not written). An element whose coordinate is outside [0, globalDim[i]) in
  any dimension (negative coordinates included) is not read: a load writes the fill (zero, or with the NaN
  fill on a floating-point type 0x7FF7 in every 16 bits), a store or reduction leaves global memory unwritten.
  Global address of an element: globalAddress + coord[0]·elementSize + Σ coord[i]·globalStride[i-1].
  A first coordinate whose byte offset coord[0]·elementSize is not a multiple of 16 traps (NVIDIA's copies
  fault there, loads, stores and im2col alike).
- Swizzle: the byte at linear shared address a (absolute, as the TMA unit sees it) goes to
  a XOR (((a >> 7) & (span/16 − 1)) << 4), span 32/64/128 bytes: 16-byte chunks permuted within each span
  by the 128-byte row they fall in. The other modes (96 B, 32/64-byte atoms, sm_100's) and the packed
  sub-byte element types are rejected by the encoder; a map changed on the device to hold them traps.
- Im2col mode, rank r of 3–5 (channels C, spatial W{, H{, D}}, batch N): the instruction's coordinates give
  the first channel and the starting pixel (w, h, d, n), its im2col offsets one per spatial dimension.
  Pixel positions walk the bounding box — per spatial dimension i from lowerCorner[i] to
  globalDim[i] − 1 + upperCorner[i] in steps of elementStride[i], W fastest, then H, D, then on to the next
  batch index, elementStride[N] on — from the starting pixel, pixelsPerColumn of them; each loads
  channelsPerPixel consecutive channels of the pixel at position + offsets, and a pixel outside the tensor
  is filled. Shared memory holds them pixel after pixel, a pixel a row (placed as tile rows are). Only loads
  have this mode here.
- complete-tx: a load completes the bytes it writes — rows × box[0] × element size (im2col: pixels ×
  channels × element size), out-of-bounds ones included, the padding after swizzled rows not.
- `.multicast::cluster`: the box is loaded into each CTA of the cluster whose bit of ctaMask is set, at the
  destination's CTA-relative offset, with the complete-tx on the mbarrier at its CTA-relative offset there
  (a cluster is one workgroup, lower/cluster.py; in a cluster of one only bit 0 counts).
- cp.reduce.async.bulk.tensor: each in-bounds element reduced into global memory by one relaxed atomic at
  .gpu scope, its type the map's element type (chosen at run time among the integer and f16/bf16/f32/f64
  types the ISA allows for the operation; a map of another type traps, as do min/max of f16/bf16, whose NaN
  and ±0 rules are not modelled).
- tensormap.replace writes one field of a map in shared or global memory, in the layout's own encoding
  (rank and element strides minus one); tensormap.cp_fenceproxy copies a map from shared to global memory
  and then releases it at its scope; `fence.proxy.tensormap::generic` (lower/sync.py) is the acquire.
"""

from __future__ import annotations

from llvmlite import ir

from fatkit.runtime import ELEMENT_TYPES, FIELDS, MODES
from fatkit.translate.lower.asynccopy import (
    TENSOR_FORMS,
    Share,
    _at,
    _complete_tx,
    _directions,
    counted_loop,
    elected_share,
)
from fatkit.translate.lower.atomic import (
    SCOPES,
    Order,
    _bfloat_add,
    _llvm_operation,
    atomic_rmw,
    fence,
    memory_order,
)
from fatkit.translate.lower.cluster import multicast_destinations
from fatkit.translate.lower.convert import host_half_runtime
from fatkit.translate.lower.core import F16, F32, F64, I1, I8, I16, I32, I64, Lowering, handles
from fatkit.translate.passes.elected import SPREAD
from fatkit.translate.ptx import ast

_RANKS = {f"{n}d": n for n in range(1, 6)}
_SIZES = {1: I8, 2: I16, 4: I32, 8: I64}
_COMPLETIONS = ("mbarrier::complete_tx::bytes", "bulk_group")
_HINTS = {"L2::cache_hint"}
# reduction → the element types (PTX names, ELEMENT_TYPES) the ISA allows into global memory
_TENSOR_REDUCTIONS = {
    "add": ("u32", "s32", "u64", "f32", "f64", "f16", "bf16"),
    "min": ("u32", "s32", "u64", "s64"), "max": ("u32", "s32", "u64", "s64"),  # (and f16/bf16: see _reduce_element)
    "inc": ("u32",), "dec": ("u32",),
    "and": ("u32", "s32", "u64", "s64"), "or": ("u32", "s32", "u64", "s64"), "xor": ("u32", "s32", "u64", "s64"),
}
_TYPE_CODES = {name: code for code, (name, _, _) in ELEMENT_TYPES.items()}
_ATOMIC_TYPES = {"u32": I32, "s32": I32, "u64": I64, "s64": I64, "f32": F32, "f64": F64, "f16": F16, "bf16": I16}


def _const(value: int) -> ir.Constant:
    return ir.Constant(I64, value)


class _Map:
    """A tensor map's fields, loaded from its generic address as i64 values (dimension i of rank r)."""

    def __init__(self, lw: Lowering, pointer: ir.Value, rank: int):
        self.lw, self.pointer, self.rank = lw, pointer, rank
        self.address = self.field("global_address")
        self.dims = [self.field("global_dim", i) for i in range(rank)]
        self.code = self.field("element_type")
        builder = lw.builder
        size = _const(4)
        for code, (_, bytes_, _) in ELEMENT_TYPES.items():
            if bytes_ != 4:
                size = builder.select(builder.icmp_unsigned("==", self.code, _const(code)), _const(bytes_), size)
        self.size = size
        self.strides = [size] + [self.field("global_stride", i - 1) for i in range(1, rank)]
        self.box = [self.field("box_dim", i) for i in range(rank)]
        # dimension 0's traversal stride is not applied (the H200 reads box[0] consecutive elements there)
        self.steps = [_const(1)] + [builder.add(self.field("element_stride_minus_one", i), _const(1))
                                    for i in range(1, rank)]
        self.swizzle = self.field("swizzle_mode")
        self.fill = self.field("fill_mode")
        self.mode = self.field("mode")

    def field(self, name: str, index: int = 0) -> ir.Value:
        offset, code, _ = FIELDS[name]
        width = {"Q": 8, "H": 2, "h": 2, "B": 1}[code]
        value = self.lw.builder.load(_at(self.lw, self.pointer, offset + index * width), typ=_SIZES[width],
                                     align=width)
        if width == 8:
            return value
        return (self.lw.builder.sext if code == "h" else self.lw.builder.zext)(value, I64)

    def check(self, mode: int, inner: ir.Value) -> None:
        """Trap unless the map is of `mode` and of the instruction's rank, with what the copies implement: a
        known element type, one of the 16-byte-atom swizzles (the encoder makes no other); and unless the
        first coordinate `inner` is on a 16-byte boundary (NVIDIA's copies fault there)."""
        builder = self.lw.builder
        bad = builder.or_(builder.icmp_unsigned(">", self.code, _const(max(ELEMENT_TYPES))),
                          builder.icmp_unsigned(">", self.swizzle, _const(3)))
        bad = builder.or_(bad, builder.icmp_unsigned("!=", self.field("swizzle_atomicity"), _const(0)))
        bad = builder.or_(bad, builder.icmp_unsigned("!=", self.mode, _const(mode)))
        bad = builder.or_(bad, builder.icmp_unsigned("!=", self.field("rank_minus_one"), _const(self.rank - 1)))
        unaligned = builder.and_(builder.mul(inner, self.size), _const(15))
        bad = builder.or_(bad, builder.icmp_unsigned("!=", unaligned, _const(0)))
        with builder.if_then(bad, likely=False):
            self.lw.target.trap(builder, None)
            self.lw.stop_thread()

    def filler(self) -> ir.Value:
        """The out-of-bounds value of a load (truncated to the element): 0, or with the NaN fill on a
        floating-point element type 0x7FF7 in every 16 bits, as the H200 fills f16, bf16, f32 and f64."""
        builder = self.lw.builder
        floating = builder.icmp_unsigned(">=", self.code, _const(6))
        nan = builder.and_(floating, builder.icmp_unsigned("==", self.fill, _const(1)))
        return builder.select(nan, _const(0x7FF7_7FF7_7FF7_7FF7), _const(0))

    def pitch(self, row: ir.Value) -> ir.Value:
        """Shared bytes from one box row of `row` bytes to the next: `row`, or with a swizzle `row` rounded up
        to the span (16 << mode bytes; the encoder keeps rows within it unless interleaved), the bytes after
        the row not written."""
        builder = self.lw.builder
        mask = builder.sub(builder.shl(_const(16), self.swizzle), _const(1))
        padded = builder.and_(builder.add(row, mask), builder.not_(mask))
        return builder.select(builder.icmp_unsigned("==", self.swizzle, _const(0)), row, padded)

    def inside(self, coordinates: list[ir.Value]) -> ir.Value:
        """i1: every coordinate (signed i64) within [0, dim) — one unsigned compare each."""
        builder = self.lw.builder
        result = ir.Constant(I1, 1)
        for coordinate, dim in zip(coordinates, self.dims):
            result = builder.and_(result, builder.icmp_unsigned("<", coordinate, dim))
        return result

    def element(self, coordinates: list[ir.Value]) -> ir.Value:
        """The global pointer of the element at `coordinates` (valid only where `inside`)."""
        builder = self.lw.builder
        offset = _const(0)
        for coordinate, stride in zip(coordinates, self.strides):
            offset = builder.add(offset, builder.mul(coordinate, stride))
        global_space = self.lw.address_space("global")
        base = builder.inttoptr(self.address, ir.PointerType(addrspace=global_space))
        return builder.gep(base, [offset], source_etype=I8)


class _Box:
    """The shared-memory box of a copy: its pointer and its shared address as the program sees it (the
    address the swizzle reads, which on the host is an offset in the block's shared window, not the
    pointer's value)."""

    def __init__(self, lw, operand: ast.Operand, shift: ir.Value | None = None):
        """`shift` (i32): bytes past the operand's address, to another CTA's of a multicast."""
        if type(operand) is not ast.Address or operand.extra or operand.base is None:
            raise lw.fail("the box must be a shared [address]")
        self.lw, self.pointer = lw, lw.address(operand, "shared")
        self.address = lw.builder.add(lw.builder.zext(lw.read(operand.base, "u32"), I64), _const(operand.offset))
        if shift is not None:
            self.pointer = lw.builder.gep(self.pointer, [shift], source_etype=I8)
            self.address = lw.builder.add(self.address, lw.builder.sext(shift, I64))

    def byte(self, linear: ir.Value, swizzle: ir.Value) -> ir.Value:
        """The pointer of byte `linear` of the box under swizzle mode `swizzle`: the byte at shared address a
        goes to a XOR (((a >> 7) & (2^mode − 1)) << 4)."""
        builder = self.lw.builder
        absolute = builder.add(self.address, linear)
        mask = builder.sub(builder.shl(_const(1), swizzle), _const(1))
        delta = builder.shl(builder.and_(builder.lshr(absolute, _const(7)), mask), _const(4))
        return builder.gep(self.pointer, [builder.sub(builder.xor(absolute, delta), self.address)], source_etype=I8)


def _by_size(lw: Lowering, size: ir.Value, action) -> None:
    """Run `action(llvm_type, bytes)` under a switch on the element size (1, 2, 4 or 8 bytes)."""
    builder = lw.builder
    after = lw.function.append_basic_block("element.done")
    switch = builder.switch(size, after)
    for bytes_, typ in _SIZES.items():
        block = lw.function.append_basic_block(f"element.{bytes_}")
        switch.add_case(ir.Constant(I64, bytes_), block)
        builder.position_at_end(block)
        action(typ, bytes_)
        builder.branch(after)
    builder.position_at_end(after)


def _loops(lw: Lowering, counts: list[ir.Value], body, share: Share | None = None) -> None:
    """Nested counted loops, the last count outermost: body(indices) with indices[0] fastest; with a
    `share`, the lane's units of the flattened index space (unit u: indices[0] = u mod counts[0], …)."""
    if share is not None:
        builder = lw.builder
        total = _const(1)
        for count in counts:
            total = builder.mul(total, count)

        def unit(linear: ir.Value) -> None:
            indices = []
            for count in counts:
                indices.append(builder.urem(linear, count))
                linear = builder.udiv(linear, count)
            body(indices)

        share.strided_loop(lw, total, unit)
        return

    def level(depth: int, outer: list[ir.Value]) -> None:
        if depth < 0:
            body(outer[::-1])
            return
        counted_loop(lw, counts[depth], lambda index: level(depth - 1, outer + [index]))

    level(len(counts) - 1, [])


def _ceil_div(builder: ir.IRBuilder, a: ir.Value, b: ir.Value) -> ir.Value:
    return builder.udiv(builder.add(a, builder.sub(b, _const(1))), b)


def _coordinates(lw: Lowering, operand: ast.Operand, rank: int) -> tuple[ir.Value, list[ir.Value]]:
    """(the map's generic pointer, the rank signed 32-bit coordinates as i64) of `[tensorMap, {c…}]`."""
    if type(operand) is not ast.Address or len(operand.extra) != 1 or type(operand.extra[0]) is not ast.Vector:
        raise lw.fail("expected [tensorMap, {coordinates}]")
    items = operand.extra[0].items
    if len(items) != rank:
        raise lw.fail(f"a .{rank}d tensor copy takes {rank} coordinates, not {len(items)}")
    bare = ast.Address(operand.base, operand.offset)
    name = operand.base.name if operand.base is not None else None
    # a map named directly is a kernel parameter or a .global/.const variable; a register holds a generic address
    space = "param" if name in lw.params else lw.variables[name][0] if name in lw.variables else "generic"
    pointer = lw.address(bare, space)
    if pointer.type.addrspace:
        pointer = lw.builder.addrspacecast(pointer, ir.PointerType())
    return pointer, [lw.builder.sext(lw.read(item, "s32"), I64) for item in items]


def _extents(lw: Lowering, tensor: _Map) -> list[ir.Value]:
    """Box elements per dimension: ceil(box / traversal stride) (box[0] along dimension 0, stride 1)."""
    return [_ceil_div(lw.builder, box, step) for box, step in zip(tensor.box, tensor.steps)]


def _linear(builder: ir.IRBuilder, indices: list[ir.Value], extents: list[ir.Value], tensor: _Map) -> ir.Value:
    """The linear box byte of the element at box `indices`: its row (dimensions 1 and up) times the row
    pitch, plus its place in the row."""
    row = _const(0)
    for index, extent in zip(reversed(indices[1:]), reversed(extents[1:])):
        row = builder.add(builder.mul(row, extent), index)
    pitch = tensor.pitch(builder.mul(extents[0], tensor.size))
    return builder.add(builder.mul(row, pitch), builder.mul(indices[0], tensor.size))


def _put(lw: Lowering, tensor: _Map, inside: ir.Value, source: ir.Value, destination: ir.Value, fill: ir.Value) -> None:
    """One element of a load: copied where `inside`, else the fill."""
    builder = lw.builder

    def move(typ: ir.Type, bytes_: int) -> None:
        with builder.if_else(inside) as (read, filled):
            with read:
                builder.store(builder.load(source, typ=typ, align=bytes_), destination, align=bytes_)
            with filled:
                builder.store(builder.trunc(fill, typ) if typ != I64 else fill, destination, align=bytes_)

    _by_size(lw, tensor.size, move)


# ------------------------------------------------------------------------------------------- cp.async.bulk.tensor

def tensor_copy(lw: Lowering, ins: ast.Instruction) -> None:
    """cp.async.bulk.tensor.Nd, loads (global → shared::cluster/cta on an mbarrier) and stores
    (shared::cta → global, bulk_group)."""
    ranks = [_RANKS[m] for m in ins.modifiers if m in _RANKS]
    completions = [m for m in ins.modifiers if m in _COMPLETIONS]
    if len(ranks) != 1 or len(completions) != 1:
        raise lw.fail("a tensor copy needs one .Nd and one completion mechanism")
    rank = ranks[0]
    modes = [m for m in ins.modifiers if m.startswith(("tile", "im2col"))]
    mode = modes[0] if modes else "tile"
    if len(modes) > 1 or mode not in ("tile", "im2col"):
        raise lw.fail(f".{mode}: the gather4/scatter4 and im2col::w modes (sm_100) are not implemented")
    to, of = _directions(lw, ins)
    multicast = ins.has("multicast::cluster")
    spread = ins.has(SPREAD)  # moved by passes/elected.py: its operands end with the issuing lane's flag
    hinted = ins.has("L2::cache_hint")  # (the elected pass drops the hint and its policy operand)
    allowed = {"async", "bulk", "tensor", f"{rank}d", to, of, completions[0], *modes, *_HINTS, SPREAD}
    if to in ("shared::cluster", "shared::cta") and of == "global" and completions[0] == _COMPLETIONS[0]:
        lw.check_modifiers(ins, allowed | {"multicast::cluster"})
        im2col = mode == "im2col"
        if im2col and not 3 <= rank <= 5:
            raise lw.fail("im2col copies are 3d to 5d")
        count = 3 + im2col + multicast + hinted + spread
        operands = lw.operands(ins, count)
        if spread:
            elected_share(lw, operands[:-1], operands[-1],
                          lambda share: _load(lw, operands[:-1], rank, im2col, multicast, share))
        else:
            finish = _load(lw, operands, rank, im2col, multicast, None)
            finish()
    elif to == "global" and of == "shared::cta" and completions[0] == "bulk_group":
        if mode != "tile":
            raise lw.fail("tensor stores are tile mode here (.im2col_no_offs is not implemented)")
        lw.check_modifiers(ins, allowed)
        operands = lw.operands(ins, 2 + hinted + spread)
        if spread:
            elected_share(lw, operands[:-1], operands[-1],
                          lambda share: _store(lw, operands[0], operands[1], rank, None, share))
        else:
            _store(lw, operands[0], operands[1], rank, None)
    else:
        raise lw.fail(f"no tensor copy from .{of} to .{to} completes by .{completions[0]}")


def _load(lw: Lowering, operands: tuple[ast.Operand, ...], rank: int, im2col: bool, multicast: bool,
          share: Share | None):
    """A load's data into each destination CTA (this lane's `share` of it, or all); returns its
    complete-tx, which runs after every lane's part is written."""
    destination, source, mbar = operands[:3]
    builder = lw.builder
    offsets = None
    if im2col:
        if type(operands[3]) is not ast.Vector or len(operands[3].items) != rank - 2:
            raise lw.fail(f"an im2col copy of rank {rank} takes {rank - 2} im2col offsets {{…}}")
        offsets = [builder.sext(lw.read(item, "s16"), I64) for item in operands[3].items]
    pointer, coordinates = _coordinates(lw, source, rank)
    tensor = _Map(lw, pointer, rank)
    if multicast:  # the box into each CTA whose bit of ctaMask is set (lower/cluster.py)
        destinations = multicast_destinations(lw, lw.read(operands[3 + im2col], "b16"), [destination, mbar])
    else:
        destinations = [(ir.Constant(I1, 1), [None, None])]
    tensor.check(MODES["im2col" if im2col else "tiled"], coordinates[0])
    if offsets is not None:  # the bytes the mbarrier is told: the whole box, filled elements included
        total = builder.mul(builder.mul(tensor.field("pixels_per_column"), tensor.field("channels_per_pixel")),
                            tensor.size)
    else:
        total = tensor.size
        for extent in _extents(lw, tensor):
            total = builder.mul(total, extent)
    fill = tensor.filler()
    for selected, (box_shift, _) in destinations:
        with builder.if_then(selected):
            shared = _Box(lw, destination, box_shift)
            if offsets is not None:
                _load_im2col(lw, tensor, shared, coordinates, offsets, fill, share)
            else:
                _load_tile(lw, tensor, shared, coordinates, fill, share)

    def finish() -> None:
        for selected, (_, mbar_shift) in destinations:
            with builder.if_then(selected):
                _complete_tx(lw, mbar, total, mbar_shift)

    return finish


def _load_tile(lw: Lowering, tensor: _Map, shared: _Box, coordinates: list[ir.Value], fill: ir.Value,
               share: Share | None) -> None:
    """The tile load (module docstring): the lane's `share` of it, or all of it."""
    builder = lw.builder
    extents = _extents(lw, tensor)

    def element(indices: list[ir.Value]) -> None:
        position = [builder.add(c, builder.mul(k, s)) for c, k, s in zip(coordinates, indices, tensor.steps)]
        target = shared.byte(_linear(builder, indices, extents, tensor), tensor.swizzle)
        _put(lw, tensor, tensor.inside(position), tensor.element(position), target, fill)

    def chunk(source: ir.Value, linear: ir.Value) -> None:
        builder.store(builder.load(source, typ=_CHUNK, align=16), shared.byte(linear, tensor.swizzle), align=16)

    _walk(lw, tensor, coordinates, extents, element, chunk, share)


_CHUNK = ir.VectorType(I32, 4)


def _walk(lw: Lowering, tensor: _Map, coordinates: list[ir.Value], extents: list[ir.Value], element, chunk,
          share: Share | None) -> None:
    """Every element of the box: `element(indices)`. Where a row is a multiple of 16 bytes, rows go by
    16-byte chunks, the swizzle's unit, and a chunk wholly inside the tensor
    whose global address is 16-byte aligned is `chunk(global pointer, linear byte offset in the box)`, one
    16-byte access each side (the ISA makes the box 128-byte aligned in shared memory); `chunk` None: every
    element one by one. With a `share`, the lane's chunks (or elements) of the walk, the others' left to them."""
    builder = lw.builder
    if chunk is None:
        _loops(lw, extents, element, share)
        return
    row_bytes = builder.mul(extents[0], tensor.size)
    by_chunks = builder.icmp_unsigned("==", builder.and_(row_bytes, _const(15)), _const(0))
    per_chunk = builder.udiv(_const(16), tensor.size)  # elements a chunk

    def one_chunk(indices: list[ir.Value]) -> None:
        first = builder.mul(indices[0], per_chunk)  # the chunk's first element in its row
        row = [first, *indices[1:]]
        position = [builder.add(c, builder.mul(k, s)) for c, k, s in zip(coordinates, row, tensor.steps)]
        last = builder.add(position[0], builder.sub(per_chunk, _const(1)))
        whole = builder.and_(tensor.inside(position), builder.icmp_unsigned("<", last, tensor.dims[0]))
        source = tensor.element(position)
        aligned = builder.icmp_unsigned("==", builder.and_(builder.ptrtoint(source, I64), _const(15)), _const(0))
        with builder.if_else(builder.and_(whole, aligned)) as (fast, slow):
            with fast:
                chunk(source, _linear(builder, row, extents, tensor))
            with slow:
                counted_loop(lw, per_chunk, lambda e: element([builder.add(first, e), *indices[1:]]))

    with builder.if_else(by_chunks) as (chunked, elementwise):
        with chunked:
            _loops(lw, [builder.udiv(row_bytes, _const(16)), *extents[1:]], one_chunk, share)
        with elementwise:
            _loops(lw, extents, element, share)


def _load_im2col(lw: Lowering, tensor: _Map, shared: _Box, coordinates: list[ir.Value], offsets: list[ir.Value],
                 fill: ir.Value, share: Share | None) -> None:
    """The im2col load (module docstring): with a `share`, the lane's pixels of the column."""
    builder, rank = lw.builder, tensor.rank
    spatial = range(1, rank - 1)
    lower = {i: tensor.field("lower_corner", i - 1) for i in spatial}
    # positions per spatial dimension: lower … dim-1+upper in traversal steps
    last = {i: builder.add(builder.sub(tensor.dims[i], _const(1)), tensor.field("upper_corner", i - 1)) for i in spatial}
    channels = tensor.field("channels_per_pixel")
    pixels = tensor.field("pixels_per_column")
    # the starting pixel, as a step index within the box of each spatial dimension
    counts = {i: builder.add(builder.sdiv(builder.sub(last[i], lower[i]), tensor.steps[i]), _const(1)) for i in spatial}
    # an empty bounding box (corners that cross) leaves the result undefined; one position keeps it from
    # dividing by zero below
    counts = {i: builder.select(builder.icmp_signed("<", count, _const(1)), _const(1), count)
              for i, count in counts.items()}
    start = {i: builder.sdiv(builder.sub(coordinates[i], lower[i]), tensor.steps[i]) for i in spatial}
    batch = rank - 1
    pitch = tensor.pitch(builder.mul(channels, tensor.size))  # a pixel's channels are a row of the box

    def pixel(index: ir.Value) -> None:
        # pixel `index` of the column: the start's linear step index + index, split W fastest, then N
        linear = _const(0)
        for i in reversed(spatial):
            linear = builder.add(builder.mul(linear, counts[i]), start[i])
        linear = builder.add(linear, index)
        position: dict[int, ir.Value] = {}
        for i in spatial:
            step = builder.srem(linear, counts[i])
            linear = builder.sdiv(linear, counts[i])
            position[i] = builder.add(builder.add(lower[i], builder.mul(step, tensor.steps[i])), offsets[i - 1])
        position[batch] = builder.add(coordinates[batch], builder.mul(linear, tensor.steps[batch]))

        def channel(c: ir.Value) -> None:
            where = [builder.add(coordinates[0], c)] + [position[i] for i in range(1, rank)]
            linear_byte = builder.add(builder.mul(index, pitch), builder.mul(c, tensor.size))
            target = shared.byte(linear_byte, tensor.swizzle)
            _put(lw, tensor, tensor.inside(where), tensor.element(where), target, fill)

        counted_loop(lw, channels, channel)

    if share is None:
        counted_loop(lw, pixels, pixel)
    else:
        share.strided_loop(lw, pixels, pixel)


def _store(lw: Lowering, target: ast.Operand, source: ast.Operand, rank: int, operation: str | None,
           share: Share | None = None) -> None:
    """A tile store (operation None) or reduction from the shared box at `source` into the tensor (the
    lane's `share` of it, or all)."""
    builder = lw.builder
    pointer, coordinates = _coordinates(lw, target, rank)
    tensor = _Map(lw, pointer, rank)
    tensor.check(MODES["tiled"], coordinates[0])
    shared = _Box(lw, source)
    extents = _extents(lw, tensor)

    def element(indices: list[ir.Value]) -> None:
        position = [builder.add(c, builder.mul(k, s)) for c, k, s in zip(coordinates, indices, tensor.steps)]
        box = shared.byte(_linear(builder, indices, extents, tensor), tensor.swizzle)
        with builder.if_then(tensor.inside(position)):
            destination = tensor.element(position)
            if operation is None:
                def move(typ: ir.Type, bytes_: int) -> None:
                    builder.store(builder.load(box, typ=typ, align=bytes_), destination, align=bytes_)
                _by_size(lw, tensor.size, move)
            else:
                _reduce_element(lw, tensor, operation, destination, box)

    def chunk(destination: ir.Value, linear: ir.Value) -> None:
        builder.store(builder.load(shared.byte(linear, tensor.swizzle), typ=_CHUNK, align=16), destination, align=16)

    _walk(lw, tensor, coordinates, extents, element, chunk if operation is None else None, share)


def _reduce_element(lw: Lowering, tensor: _Map, operation: str, destination: ir.Value, source: ir.Value) -> None:
    """One element reduced into global memory, switched on the map's element type."""
    builder = lw.builder
    order = Order("monotonic", lw.target.syncscope("gpu"))
    after = lw.function.append_basic_block("reduce.done")
    wrong = lw.function.append_basic_block("reduce.type")
    switch = builder.switch(tensor.code, wrong)
    for name in _TENSOR_REDUCTIONS[operation]:
        block = lw.function.append_basic_block(f"reduce.{name}")
        switch.add_case(ir.Constant(I64, _TYPE_CODES[name]), block)
        builder.position_at_end(block)
        typ, size = _ATOMIC_TYPES[name], ELEMENT_TYPES[_TYPE_CODES[name]][1]
        if name == "f16":
            host_half_runtime(lw)
        value = builder.load(source, typ=typ, align=size)
        if name == "bf16":
            _bfloat_add(lw, destination, value, order, size)
        else:
            atomic_rmw(builder, _llvm_operation(lw, operation, name), destination, value, order, size)
        builder.branch(after)
    # an element type the operation does not take (the ISA leaves it undefined), and min/max of f16/bf16,
    # whose NaN and ±0 rules are not modelled: the launch traps
    builder.position_at_end(wrong)
    lw.target.trap(builder, None)
    lw.stop_thread()
    builder.position_at_end(after)


def tensor_reduce(lw: Lowering, ins: ast.Instruction) -> None:
    """cp.reduce.async.bulk.tensor.Nd.global.shared::cta.op{.tile}.bulk_group{.L2::cache_hint}
    [tensorMap, {coordinates}], [srcMem] {, policy}."""
    ranks = [_RANKS[m] for m in ins.modifiers if m in _RANKS]
    operations = [m for m in ins.modifiers if m in _TENSOR_REDUCTIONS]
    if len(ranks) != 1 or len(operations) != 1:
        raise lw.fail("cp.reduce.async.bulk.tensor needs one .Nd and one operation")
    modes = [m for m in ins.modifiers if m.startswith(("tile", "im2col"))]
    if modes not in ([], ["tile"]):
        raise lw.fail(f".{modes[0]}: tensor reductions are tile mode here (.im2col_no_offs is not implemented)")
    to, of = _directions(lw, ins)
    if (to, of) != ("global", "shared::cta") or not ins.has("bulk_group"):
        raise lw.fail("tensor reductions go from .shared::cta to .global and complete by .bulk_group")
    hinted, spread = ins.has("L2::cache_hint"), ins.has(SPREAD)
    lw.check_modifiers(ins, {"reduce", "async", "bulk", "tensor", f"{ranks[0]}d", to, of, "bulk_group",
                             operations[0], *modes, *_HINTS, SPREAD})
    operands = lw.operands(ins, 2 + hinted + spread)
    if spread:
        elected_share(lw, operands[:-1], operands[-1],
                      lambda share: _store(lw, operands[0], operands[1], ranks[0], operations[0], share))
    else:
        _store(lw, operands[0], operands[1], ranks[0], operations[0])


# ------------------------------------------------------------------------------------------- tensormap

# tensormap.replace field → (layout field, operand is an ordinal, encoded = value - bias)
_REPLACEABLE = {
    "global_address": ("global_address", False, 0), "rank": ("rank_minus_one", False, 0),
    "box_dim": ("box_dim", True, 0), "global_dim": ("global_dim", True, 0),
    "global_stride": ("global_stride", True, 0), "element_stride": ("element_stride_minus_one", True, 1),
    "elemtype": ("element_type", False, 0), "interleave_layout": ("interleave", False, 0),
    "swizzle_mode": ("swizzle_mode", False, 0), "swizzle_atomicity": ("swizzle_atomicity", False, 0),
    "fill_mode": ("fill_mode", False, 0),
}
_FIELD_TYPES = {"Q": I64, "H": I16, "h": I16, "B": I8}


@handles("tensormap")
def tensormap(lw: Lowering, ins: ast.Instruction) -> None:
    if ins.modifiers[:1] == ("replace",):
        _replace(lw, ins)
    elif ins.modifiers[:1] == ("cp_fenceproxy",):
        _copy_fence(lw, ins)
    else:
        raise lw.fail("tensormap is tensormap.replace or tensormap.cp_fenceproxy")


def _map_space(lw: Lowering, ins: ast.Instruction) -> str:
    spaces = [m for m in ins.modifiers if m in ("global", "shared::cta", "shared")]
    if len(spaces) > 1:
        raise lw.fail("more than one state space")
    return {"global": "global", "shared::cta": "shared", "shared": "shared"}.get(spaces[0] if spaces else "", "generic")


def _replace(lw: Lowering, ins: ast.Instruction) -> None:
    """tensormap.replace.tile.field{.space}.b1024.type [map], {ordinal,} value: the field in the layout's
    encoding (rank as rank − 1, as PTX passes it; element strides as stride − 1)."""
    fields = [m for m in ins.modifiers if m in _REPLACEABLE]
    if ins.modifiers[1:2] != ("tile",) or len(fields) != 1 or not ins.has("b1024"):
        raise lw.fail("expected tensormap.replace.tile.<field>{.space}.b1024.<type>")
    name = fields[0]
    layout, ordered, bias = _REPLACEABLE[name]
    spaces = [m for m in ins.modifiers if m in ("global", "shared::cta")]
    types = [m for m in ins.modifiers if m in ("b32", "b64")]
    lw.check_modifiers(ins, {"replace", "tile", name, "b1024", *spaces, *types})
    if len(types) != 1:
        raise lw.fail("tensormap.replace takes .b32 or .b64")
    operands = lw.operands(ins, 3 if ordered else 2)
    address, value = operands[0], operands[-1]
    if type(address) is not ast.Address or address.extra:
        raise lw.fail("the tensor map operand must be an [address]")
    pointer = lw.address(address, _map_space(lw, ins))
    offset, code, count = FIELDS[layout]
    width = {"Q": 8, "H": 2, "h": 2, "B": 1}[code]
    if ordered:
        ordinal = operands[1]
        if type(ordinal) is not ast.IntImm:
            raise lw.fail("the ordinal of tensormap.replace is an immediate")
        index = ordinal.value - (1 if name == "global_stride" else 0)  # strides start at dimension 1
        if not 0 <= index < count:
            raise lw.fail(f"ordinal {ordinal.value} is out of range for .{name}")
        offset += index * width
    builder = lw.builder
    new = lw.read(value, types[0])
    new = builder.zext(new, I64) if new.type != I64 else new
    if bias:
        new = builder.sub(new, _const(bias))
    typ = _FIELD_TYPES[code]
    builder.store(builder.trunc(new, typ) if typ != I64 else new, _at(lw, pointer, offset), align=width)


def _copy_fence(lw: Lowering, ins: ast.Instruction) -> None:
    """tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.scope.sync.aligned [dst], [src],
    128: the map copied to global memory, then a release fence at the scope (the consumer's
    fence.proxy.tensormap::generic acquire pairs with it)."""
    scopes = [m for m in ins.modifiers if m in SCOPES]
    lw.check_modifiers(ins, {"cp_fenceproxy", "global", "shared::cta", "tensormap::generic", "release", "sync",
                             "aligned", *scopes})
    if not ins.has("global", "shared::cta", "tensormap::generic", "release", "sync", "aligned"):
        raise lw.fail("expected tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.scope"
                      ".sync.aligned")
    order = memory_order(lw, ins, {"release"}, None, None)
    if order is None or not scopes:
        raise lw.fail("tensormap.cp_fenceproxy needs .release and a scope")
    destination, source, size = lw.operands(ins, 3)
    if type(size) is not ast.IntImm or size.value != 128:
        raise lw.fail("tensormap.cp_fenceproxy copies the 128 bytes of a map")
    if any(type(a) is not ast.Address or a.extra for a in (destination, source)):
        raise lw.fail("expected [dst], [src] addresses")
    to, of = lw.address(destination, "global"), lw.address(source, "shared")
    vector = ir.VectorType(I32, 4)
    for chunk in range(0, 128, 16):
        lw.builder.store(lw.builder.load(_at(lw, of, chunk), typ=vector, align=16), _at(lw, to, chunk), align=16)
    fence(lw.builder, order)


TENSOR_FORMS.update(copy=tensor_copy, reduce=tensor_reduce)
