"""Warpgroup MMA (sm_90a): `wgmma.mma_async` computed at issue as mma.sync steps, and `wgmma.fence`,
`wgmma.commit_group`, `wgmma.wait_group` as the ordering they then need (none beyond program order).

A warpgroup is four consecutive warps whose first warp's rank (linear thread index / 32) is a multiple of 4;
`wgmma.mma_async.sync.aligned.m64nNkK` multiplies a 64×K A by a K×N B into a 64×N D spread over the four
warps: warp w (rank mod 4) holds rows 16w–16w+15, and within them a warp's D registers are, 8 columns at a
time, the D fragment of mma.sync m16n8kK (f32/s32 D: registers 4j–4j+3 are columns 8j–8j+7; f16 D, two to a
register: 2j and 2j+1). A given in registers has the A fragment of mma.sync m16n8kK (four 32-bit registers).
K is 32 bytes of elements: 16 f16/bf16, 8 tf32, 32 e4m3/e5m2/s8/u8, which mma.sync m16n8k16, m16n8k8 and
m16n8k32 take. So each warp computes its rows as N/8 mma.sync steps, one per block of 8 columns, through
lower/mma_native's handler (MFMA/WMMA under native numerics, else lower/mma.py's arithmetic): wgmma's
numerics are mma.sync's (docs/numerics.md). Running at issue is a valid schedule of the asynchronous
operation: a program may read D only after wgmma.wait_group, and the shared memory it reads must be written
before the wgmma is issued (fenced by the program's own barriers and fence.proxy.async).

Shared-memory operands come through a 64-bit matrix descriptor: bits 0–13 the start address >> 4, 16–29
the leading-dimension byte offset (LBO) >> 4, 32–45 the stride-dimension byte offset (SBO) >> 4, 62–63 the
swizzle mode (0 none, 1 128-byte, 2 64-byte, 3 32-byte). The matrix is built from core matrices of 8 rows
× 16 bytes; in the K-major layout (K contiguous in memory, the layout without .trans) row r (M or N) and
byte kb of its K elements lie at
- no swizzle: start + SBO·(r div 8) + LBO·(kb div 16) + 16·(r mod 8) + kb mod 16 (core matrices adjacent
  in K are LBO apart, in M/N SBO apart);
- swizzle of S bytes (128/64/32): start + SBO·(r div 8) + S·(r mod 8) + kb, then that address's 16-byte
  chunk bits 4.. (log2(S/16) of them) XORed with its bits 7.. (the pattern repeats every 8 rows of S bytes
  and follows the absolute address, so a start advanced by k within the swizzle row reads the next k slice
  of the same swizzled tile; LBO is not used: K's 32 bytes fit in S).
In the MN-major layout (imm-trans = 1, f16/bf16 only) a 16-byte row holds 8 consecutive M/N elements of one k:
element (mn, k) lies at start + 2·(mn mod 8) + 16·(c mod C) + G·(c div C) + P·(k mod 8) + H·(k div 8), c =
mn div 8 its chunk, C = S/16 chunks to a pattern row (1 unswizzled), P = S (16 unswizzled); unswizzled, G =
SBO (chunks adjacent in MN) and H = LBO (8-k groups); swizzled, G = LBO (pattern columns adjacent in MN) and
H = SBO; then the same XOR. A fragment word's two k are then two 16-bit loads.
Each lane gathers the 32-bit words of its mma fragments by this arithmetic: B word r of column g (lane / 4)
of block j at (r = 8j + g, kb = 4·(lane mod 4) + 16r), and for a descriptor A, word r at (row 16w + g +
8(r mod 2), kb = 4·(lane mod 4) + 16(r div 2)); the two (four, eight) elements of a word are consecutive k.

Built: every type pair of the ISA (f16, bf16 → f16/f32; tf32 → f32; e4m3/e5m2 → f16/f32; s8/u8 → s32 with
.satfinite), N a multiple of 8 up to 256, A from registers or a descriptor, the four swizzle modes,
scale-d (D = A·B + D, or A·B where false), imm-scale-a/b (±1: the operand's elements negated) and
imm-trans-a/b (the MN-major layout above).
Sparse A (`wgmma.mma_async.sp`, operands d, a, b-desc, sp-meta, sp-sel, scale-d, then the immediates): a
64×K A, 2:4 sparse, stored compressed as 64×K/2 (the dense form's 32 bytes a row, so the A registers and A
descriptor words are the dense form's), K twice the dense K (32 f16/bf16, 64 fp8/s8/u8); B's K-major rows are
then 64 bytes, four fragment words a lane (kb = 4·(lane mod 4) + 16r, r < 4). Each warp's sp-meta describes
its own 16 rows in the layout of mma.sp m16n8k32 (16-bit types; sp-sel 0/1 picks the lane pair of a group)
or m16n8k64 (8-bit; sp-sel 0), so each warp computes its rows as N/8 mma.sp steps with that metadata
register and selector (lower/mma.py's sparse arithmetic); .tf32 A (m64nNk16, 1:2 sparse) as mma.sp m16n8k16
.tf32, sp-sel 0/1. A 32-byte-swizzled sparse B (64 K bytes a row, more than the pattern's 32) is read by the
formula above unverified.
The descriptor's matrix base offset (bits 49–51, swizzled modes only) is the phase of a swizzle pattern that
does not start at its alignment (1024 bytes for 128-byte swizzle, 512 for 64, 256 for 32): the ISA sets it to
(pattern start >> 7) & 7, so the pattern row whose chunks the XOR uses is the address's bits 7.. less the base
offset (zero for an aligned pattern, where bits 7.. are the row). Not yet measured: the ISA says no more;
verification's wgmma_desc `*.base*` cases (patterns 1, 3, 5 rows past their alignment) ask the H200.
"""

from __future__ import annotations

from llvmlite import ir

from fatkit.translate.lower import mma_native
from fatkit.translate.lower.mma import sparse_selectors as mma_sparse_selectors
from fatkit.translate.lower.core import I1, I32, I64, Lowering, _Register, handles, llvm_type
from fatkit.translate.lower.warp import WarpPosition
from fatkit.translate.ptx import ast

# A/B type → (the mma.sync shape whose k is 32 bytes of it, the wgmma k, the sign bits of a 32-bit word)
_INPUTS = {"f16": ("m16n8k16", 16, 0x80008000), "bf16": ("m16n8k16", 16, 0x80008000),
           "tf32": ("m16n8k8", 8, 0x80000000), "e4m3": ("m16n8k32", 32, 0x80808080),
           "e5m2": ("m16n8k32", 32, 0x80808080), "s8": ("m16n8k32", 32, None), "u8": ("m16n8k32", 32, None)}
_ACCUMULATORS = {"f16": {"f16", "f32"}, "bf16": {"f32"}, "tf32": {"f32"}, "e4m3": {"f16", "f32"},
                 "e5m2": {"f16", "f32"}, "s8": {"s32"}, "u8": {"s32"}}
_TYPES = set(_INPUTS) | {"f32", "s32"}


@handles("wgmma")
def wgmma(lw: Lowering, ins: ast.Instruction) -> None:
    operation, *rest = ins.modifiers
    sparse = operation == "mma_async" and rest[:1] == ["sp"]
    if sparse:
        rest = rest[1:]
    if rest[:2] != ["sync", "aligned"]:
        raise lw.fail(f"wgmma.{operation} is .sync.aligned")
    if operation in ("fence", "commit_group", "wait_group"):
        # the multiplications ran when issued (module docstring): nothing is in flight to order or wait for
        return
    if operation == "mma_async":
        _mma_async(lw, ins, rest[2:], sparse)
        return
    raise lw.fail(f"wgmma.{operation} is not a wgmma operation (fence, mma_async, commit_group, wait_group)")


def _temporary(lw: Lowering, value: ir.Value, ptx_type: str) -> ast.Name:
    """A register of the lowering holding `value`, for the mma steps' operands (defined before any read)."""
    name = f"%wgmma.{len(lw.registers)}"
    lw.registers[name] = _Register(name, llvm_type(ptx_type), ptx_type)
    operand = ast.Name(name)
    lw.write(operand, value, ptx_type)
    return operand


def _immediate(lw: Lowering, operand: ast.Operand, what: str, allowed: tuple[int, ...]) -> int:
    if type(operand) is not ast.IntImm or operand.value not in allowed:
        raise lw.fail(f"{what} of wgmma.mma_async is an integer constant in {set(allowed)}")
    return operand.value


def _mma_async(lw: Lowering, ins: ast.Instruction, modifiers: list[str], sparse: bool) -> None:
    shape = modifiers[0] if modifiers else ""
    types = [m for m in modifiers[1:] if m in _TYPES]
    flags = [m for m in modifiers[1:] if m not in _TYPES]
    if len(types) != 3:
        raise lw.fail("wgmma.mma_async takes .shape.dtype.atype.btype")
    d_type, a_type, b_type = types
    if a_type not in _INPUTS or b_type not in _INPUTS:
        raise lw.fail(f"wgmma.mma_async with .{a_type} A and .{b_type} B does not exist")
    mma_shape, k, sign = _INPUTS[a_type]
    if sparse:
        # the same 32 bytes of (compressed) A per row; K and B's rows twice the dense form's
        k, mma_shape = 2 * k, f"m16n8k{2 * int(mma_shape[len('m16n8k'):])}"
    name = "wgmma.mma_async.sp" if sparse else "wgmma.mma_async"
    same_family = (a_type == b_type or (a_type[0] == "e" and b_type[0] == "e")
                   or (a_type in ("s8", "u8") and b_type in ("s8", "u8")))
    if not same_family:
        raise lw.fail(f"wgmma.mma_async with .{a_type} A and .{b_type} B does not exist")
    if d_type not in _ACCUMULATORS[a_type]:
        raise lw.fail(f"wgmma.mma_async with .{a_type} inputs accumulates in "
                      f".{'/.'.join(sorted(_ACCUMULATORS[a_type]))}")
    integer = a_type in ("s8", "u8")
    if set(flags) - ({"satfinite"} if integer else set()):
        raise lw.fail(f"modifier .{sorted(set(flags) - {'satfinite'})[0]} of wgmma.mma_async not supported")
    n = int(shape[len("m64n"):shape.index("k")]) if shape.startswith("m64n") and "k" in shape else 0
    if shape != f"m64n{n}k{k}" or not 8 <= n <= 256 or n % 8:
        raise lw.fail(f"{name} of .{a_type} has shapes m64nNk{k}, N a multiple of 8 up to 256, "
                      f"not .{shape}")

    transposable = a_type in ("f16", "bf16")
    operands = ins.operands
    d, a, b_descriptor = operands[:3]
    a_in_registers = type(a) is ast.Vector
    count = (4 if integer else 6 if not transposable else 7 if a_in_registers else 8) + 2 * sparse
    if len(operands) != count:
        raise lw.fail(f"this {name} takes {count} operands, not {len(operands)}")
    if sparse:  # the metadata register and the sparsity selector, as mma.sp takes them
        metadata, selector = operands[3:5]
        selectors = mma_sparse_selectors(mma_shape, a_type)
        if type(selector) is not ast.IntImm or not 0 <= selector.value < selectors:
            raise lw.fail(f"the sparsity selector of {name} with .{a_type} A is an integer constant in "
                          f"[0, {selectors - 1}]")
    scale_d, *immediates = operands[3 + 2 * sparse:]
    # integer forms have no imm-scale operands
    scales = [_immediate(lw, x, f"imm-scale-{m}", (1, -1)) for x, m in zip(immediates[:2], "ab")] or [1, 1]
    transposed = {m: _immediate(lw, x, f"imm-trans-{m}", (0, 1)) == 1
                  for x, m in zip(immediates[2:], ("b",) if a_in_registers else ("a", "b"))}
    per_block = 2 if d_type == "f16" else 4
    d_items = list(d.items) if type(d) is ast.Vector else [d]
    if len(d_items) != n // 8 * per_block:
        raise lw.fail(f"the D of wgmma.mma_async.{shape}.{d_type} holds {n // 8 * per_block} registers, "
                      f"not {len(d_items)}")
    if a_in_registers and len(a.items) != 4:
        raise lw.fail(f"an A of wgmma.mma_async.{shape} in registers holds 4 registers, not {len(a.items)}")

    b = lw.builder
    warp = WarpPosition(lw)
    group, quarter = b.lshr(warp.lane, ir.Constant(I32, 2)), b.and_(warp.lane, ir.Constant(I32, 3))
    column_byte = b.shl(quarter, ir.Constant(I32, 2))  # 4·(lane mod 4): the word's first k byte
    rank = _warp_rank(lw)

    def flipped(word: ir.Value, scale: int) -> ir.Value:
        return b.xor(word, ir.Constant(I32, sign)) if scale == -1 else word

    b_layout = _Descriptor(lw, lw.read(b_descriptor, "u64"))
    if a_in_registers:
        a_operands = list(a.items)
        if scales[0] == -1:
            a_operands = [_temporary(lw, flipped(lw.read(item, "b32"), -1), "b32") for item in a_operands]
    else:
        a_layout = _Descriptor(lw, lw.read(a, "u64"))
        rows = b.add(b.shl(rank, ir.Constant(I32, 4)), group)
        a_operands = []
        for r in range(4):
            row = b.add(rows, ir.Constant(I32, 8 * (r & 1)))
            kb = b.add(column_byte, ir.Constant(I32, 16 * (r >> 1)))
            word = a_layout.word(row, kb, transposed.get("a", False))
            a_operands.append(_temporary(lw, flipped(word, scales[0]), "b32"))

    if type(scale_d) is ast.IntImm:
        accumulate = ir.Constant(I1, scale_d.value != 0)
    else:
        accumulate = lw.read(scale_d, "pred")
    mma_modifiers = (*(("sp",) if sparse else ()), "sync", "aligned", mma_shape, "row", "col", d_type, a_type, b_type, d_type,
                     *(("satfinite",) if "satfinite" in flags else ()))
    for j in range(n // 8):
        d_block = d_items[per_block * j:per_block * (j + 1)]
        if type(scale_d) is ast.IntImm and scale_d.value:
            c_block = d_block
        else:
            zero = ir.Constant(I32, 0)
            c_block = [_temporary(lw, b.select(accumulate, lw.read(item, "b32"), zero), "b32") for item in d_block]
        column = b.add(group, ir.Constant(I32, 8 * j))
        b_words = [b_layout.word(column, b.add(column_byte, ir.Constant(I32, 16 * r)), transposed.get("b", False))
                   for r in range(4 if sparse else 2)]
        b_operands = [_temporary(lw, flipped(word, scales[1]), "b32") for word in b_words]
        step_operands = (ast.Vector(tuple(d_block)), ast.Vector(tuple(a_operands)), ast.Vector(tuple(b_operands)),
                         ast.Vector(tuple(c_block)), *((metadata, selector) if sparse else ()))
        step = ast.Instruction("mma", mma_modifiers, step_operands, line=ins.line, column=ins.column)
        mma_native.mma(lw, step)


def _warp_rank(lw: Lowering) -> ir.Value:
    """The executing warp's rank in its warpgroup: (linear thread index / 32) mod 4."""
    b = lw.builder
    tid = [lw.read(ast.Name("%tid", axis), "u32") for axis in "xyz"]
    ntid = [lw.read(ast.Name("%ntid", axis), "u32") for axis in "xy"]
    linear = b.add(tid[0], b.mul(ntid[0], b.add(tid[1], b.mul(ntid[1], tid[2]))))
    return b.and_(b.lshr(linear, ir.Constant(I32, 5)), ir.Constant(I32, 3))


class _Descriptor:
    """A wgmma matrix descriptor's fields (module docstring), and the K-major tile's words it addresses."""

    def __init__(self, lw: Lowering, descriptor: ir.Value):
        self.lw, self.shared = lw, lw.address_space("shared")
        b = lw.builder

        def field(shift: int) -> ir.Value:
            bits = b.and_(b.lshr(descriptor, ir.Constant(I64, shift)), ir.Constant(I64, 0x3FFF))
            return b.shl(b.trunc(bits, I32), ir.Constant(I32, 4))
        self.start, self.leading, self.stride = field(0), field(16), field(32)
        # matrix base offset (bits 49–51): the swizzle pattern's phase, (pattern start >> 7) & 7
        self.base = b.trunc(b.and_(b.lshr(descriptor, ir.Constant(I64, 49)), ir.Constant(I64, 7)), I32)
        mode = b.trunc(b.lshr(descriptor, ir.Constant(I64, 62)), I32)
        self.plain = b.icmp_unsigned("==", mode, ir.Constant(I32, 0))
        # swizzle of S = 256 >> mode bytes (mode 1–3): rows S apart, chunk bits XORed with log2(S/16) bits
        self.pitch = b.select(self.plain, ir.Constant(I32, 16), b.lshr(ir.Constant(I32, 256), mode))
        self.mask = b.select(self.plain, ir.Constant(I32, 0),
                             b.sub(b.lshr(ir.Constant(I32, 16), mode), ir.Constant(I32, 1)))

    def word(self, row: ir.Value, kb: ir.Value, transposed: bool) -> ir.Value:
        """The 32-bit fragment word of row `row` (M or N) at K byte `kb` (both i32): one load from a K-major
        tile; two 16-bit loads (k and k + 1) from an MN-major one."""
        if not transposed:
            return self._load(self._k_major(row, kb), I32, 4)
        b = self.lw.builder
        k = b.lshr(kb, ir.Constant(I32, 1))
        low, high = (self._load(self._mn_major(row, b.add(k, ir.Constant(I32, j))), ir.IntType(16), 2) for j in (0, 1))
        return b.or_(b.zext(low, I32), b.shl(b.zext(high, I32), ir.Constant(I32, 16)))

    def _k_major(self, row: ir.Value, kb: ir.Value) -> ir.Value:
        b = self.lw.builder
        three, four, seven = (ir.Constant(I32, x) for x in (3, 4, 7))
        base = b.add(self.start, b.mul(b.lshr(row, three), self.stride))
        base = b.add(base, b.mul(b.and_(row, seven), self.pitch))
        k_part = b.select(self.plain, b.add(b.mul(b.lshr(kb, four), self.leading), b.and_(kb, ir.Constant(I32, 15))),
                          kb)
        return b.add(base, k_part)

    def _mn_major(self, mn: ir.Value, k: ir.Value) -> ir.Value:
        """The linear address of 16-bit element (mn, k) of an MN-major tile (module docstring)."""
        b = self.lw.builder
        three, seven = ir.Constant(I32, 3), ir.Constant(I32, 7)
        chunk = b.lshr(mn, three)  # the 16-byte chunk of 8 MN elements
        chunks = b.add(self.mask, ir.Constant(I32, 1))  # chunks in a row of the pattern: S/16 (1 unswizzled)
        mn_groups, k_groups = b.select(self.plain, self.stride, self.leading), b.select(self.plain, self.leading,
                                                                                        self.stride)
        address = b.add(self.start, b.shl(b.and_(mn, seven), ir.Constant(I32, 1)))
        address = b.add(address, b.shl(b.and_(chunk, self.mask), ir.Constant(I32, 4)))
        address = b.add(address, b.mul(b.udiv(chunk, chunks), mn_groups))
        address = b.add(address, b.mul(b.and_(k, seven), self.pitch))
        return b.add(address, b.mul(b.lshr(k, three), k_groups))

    def _load(self, linear: ir.Value, ty: ir.IntType, align: int) -> ir.Value:
        """The value at `linear` after the swizzle: its 16-byte chunk bits XORed with the row of the pattern,
        bits 7.. less the descriptor's base offset."""
        b = self.lw.builder
        four, seven = ir.Constant(I32, 4), ir.Constant(I32, 7)
        row = b.sub(b.lshr(linear, seven), self.base)
        address = b.xor(linear, b.shl(b.and_(row, self.mask), four))
        window = self.lw.callees.window
        if window:  # shared addresses are offsets into the block's window (the host target)
            pointer = b.gep(window.base, [address], source_etype=ir.IntType(8))
        else:
            pointer = self.lw.pointer(address, self.shared)
        return b.load(pointer, typ=ty, align=align)
