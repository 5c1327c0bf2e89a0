"""`--mma-numerics native`: mma.sync on the target's matrix instructions (MFMA on gfx90a/gfx942/gfx950, WMMA on
gfx11 and gfx12), with the lane movement derived from the two sides' fragment layouts.

Each native operand word names the element of the PTX fragments it starts with (a placement: lane → (row,
column)); lower/mma.py's `_source` turns that into the PTX lane (a bit-affine function of the executing lane)
and register it is read from, and `Gather` moves it (ds_bpermute). A native word holds consecutive k (2
f16/bf16, 4 8-bit) exactly as a PTX word does, which `_word` checks. C is added afterwards in the PTX layout
(f32: one rounding; f16: c widened, the f32 sum rounded to f16 once; s32: wrapped or saturated with
`.satfinite`): moving it into the native layout would cost more than the additions (measured). Lane predicates of the selects are constant wave masks at wave32 (one
s_mov, `_lanes`). The lane moves of the operands, and those of D, are waited for once (`_fence`).

MFMA, wave64 (two warps to a wave). The 4x4x4 16-block instructions keep the warps apart: block b is
hardware lanes 4b–4b+3, so warp w's data only meet in its own blocks 8w–8w+7, and a warp whose partner is
inactive or elsewhere computes the same. Lane j of a block supplies row j of the block's A (4 k) and column j
of its B, and receives column j of D (register i: row i). D is computed as it is (not transposed), laid out
so that no lane movement but one DPP row shift is left: in the warp's block b = 4·b2 + 2·b1 + b0 (lane bits
4, 3, 2), column j is PTX column 2j + b0 and row i is PTX row 4·b2 + 2·b1 + (i div 2) + 8·(i mod 2). So PTX D
register (h, p) of thread (g, t) is in the lane whose bit 2 is p, i.e. its own lane where g's bit 0 is p and
else the lane 4 away in its row of 16: one `v_mov_b32_dpp` row_shl/row_shr:4 whose bank mask enables only
the lanes whose bit 2 is not p, the others keeping their own register (`update.dpp`'s old value). Blocks b
and b ^ 1 have the same rows, so each instruction broadcasts the A of one block of the pair (CBSZ 1, ABID):
k unit u = 2β + e + 4w (a unit: one PTX word of k, u mod 4 its thread column) sits in block β's A word (e,
w), so 4 reads give the 8 A words. A row's halves g and g + 8 are two registers of one PTX lane, which two
lanes of a block want in one read: with A's registers of rows g and g + 8 swapped in the odd thread columns
(`_swapped`) the words (0, w) and (1, w) take the same two reads, a select by the row half sorting them
(`_paired`). B's 8 words come through 8 reads from one address (the unit in the offset).

WMMA, wave32 (one warp). The 16x16x16 instruction wants A's row L%16 and B's column L%16 with all 16 k in
lane L (lanes 16–31 repeating 0–15) and gives D[2i + L/16][L%16] in register i. Computed transposed: the
WMMA A's row r is the PTX B column π(r mod 8), π(x) = 2(x mod 4) + x div 4, its B's column c the PTX A row
c; the half of the result with r ≥ 8 repeats the other. π places columns 2t and 2t+1 of every thread t in
two result registers chosen by t div 2, which is the fewest a layout with one column per lane allows; the
result goes back through the reads the `result` table names. gfx12's WMMA gives each half of the wave half
the k (lanes 0–15: k 0–3 and 8–11, lanes 16–31: 4–7 and 12–15) without repeating, and D[8·(L/16) + i][L%16]
in register i: the same plan with rows 8h + i (i < 4) for the rows 2i + h above, PTX B column `_row12(h, i)`
(chosen for the fewest operations in B's read address), half the words to read.

gfx11 moves the words through LDS instead of ds_bpermute where the kernel declares its block and the buffer
fits (`LdsGather`, `lane_buffer_fits`, docs/numerics.md): A then needs no swap and no select, k is ordered by
B's words in LDS, and the WMMA row x (mod 8) is PTX B column x with bits 0 and 1 exchanged
(`_paired_columns`), so that a thread's D words lie in two 64-bit pairs. Measured, a kernel's only m16n8k16
f16 with the block declared and the operands not loaded directly: 66 → 42 instructions. Without a declared
block the buffer would have to hold 1024 threads' words (16 KiB: 53 instructions, a second mma 24 instead of
51), which costs small blocks their occupancy: that kernel keeps ds_bpermute. gfx12 keeps the lane moves
(through LDS: one instruction more, its WMMA reading half the words).

Arithmetic: the products are exact and the hardware adds them in its own order and precision (the bound is
in docs/numerics.md); integer forms are exact, as the PTX ISA defines them (gfx9's MFMA reads signed bytes:
a u8 operand adds its bytes' top bits times 256, `_mfma_products`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

from llvmlite import ir

from fatkit.errors import FatkitError
from fatkit.translate.lower import mma as portable
from fatkit.translate.lower.core import F16, F32, I1, I16, I32, handles
from fatkit.translate.lower.mma import Choice, Form, Gather, Source, _apply, _lane_function, _source
from fatkit.translate.lower.mma_direct import (DirectGather, LaneOffsets, _cached_kernel, direct_gather,
                                                fragment_loads, linear, result_stores)
from fatkit.translate.lower.warp import WARP, WarpPosition
from fatkit.translate.ptx import ast

# (row, column) of a PTX element, or None: a word of zeros
Placement = Callable[[int], "tuple[int, int] | None"]


@dataclass(frozen=True)
class Plan:
    """The WMMA instructions of one mma form."""

    # (builder, step, first operand's words, second's, accumulator) → the instruction's result
    call: Callable[[ir.IRBuilder, int, list[ir.Value], list[ir.Value], ir.Value], ir.Value]
    accumulator: ir.Type  # the native result's vector type
    steps: list[tuple[list[tuple[str, Placement]], list[tuple[str, Placement]]]]  # per instruction, its words
    result: dict[tuple[int, int], tuple[int, int]]  # PTX D (row, column) → (PTX lane, native result register)
    initial: ir.Constant  # the first instruction's accumulator: zero where the result is read, else undef


def native_form(form: Form, matrix_cores: str | None) -> bool:
    """Whether `form` runs on `matrix_cores` (TargetId.matrix_cores) here."""
    if form.sparse or form.d not in ("f32", "f16", "s32") or form.c != form.d or \
            matrix_cores not in ("mfma", "wmma11", "wmma12"):
        return False
    if form.a in ("f16", "bf16"):  # f16 accumulators: the f32 product and sum, rounded to f16 once
        return form.shape == "m16n8k16" and form.b == form.a
    if matrix_cores == "wmma12":  # its 8-bit operand layout is not modelled by fatkit.emulate yet
        return False
    if form.a in ("s8", "u8") and form.b in ("s8", "u8"):
        return form.shape in ("m16n8k16", "m16n8k32")
    return False


def _pi(x: int) -> int:
    return 2 * (x % 4) + x // 4


def _paired_columns(x: int) -> int:
    """Through LDS, gfx11's WMMA row x (mod 8) is PTX B column x with bits 0 and 1 exchanged: registers 2m and
    2m + 1 of lane 16h + g then hold D[g][2t] and D[g][2t + 1] of thread t = 2m + h, one 64-bit LDS word."""
    return (x & 4) | (x & 1) << 1 | (x >> 1 & 1)


def _mfma_products(lw, form: Form, registers: dict, where: dict, warp: WarpPosition,
                   gathering: Callable[[list], Gather | DirectGather], direct: DirectResult) -> list[ir.Value] | None:
    """The PTX D words of A·B on the 4x4x4 16-block MFMA (module docstring): the native result's lanes moved
    by DPP row shifts; None where `direct` stored the native result, C (f32, or s32 without .satfinite: exact
    sums wrap alike) the first instruction's accumulator."""
    eight_bit = form.a in ("s8", "u8")
    per = 4 if eight_bit else 2  # elements of a k unit: one PTX register word
    units = form.k // per

    def row(lane):  # the PTX A row of block row lane % 4 (and D register lane % 4) in lane's block
        return 4 * (lane >> 4 & 1) + 2 * (lane >> 3 & 1) + (lane >> 1 & 1) + 8 * (lane & 1)

    def column(lane):  # the PTX B column of block column lane % 4
        return 2 * (lane & 3) + (lane >> 2 & 1)

    # unit u = 2β + e + 4w: the block pair's A rows for k unit u sit in block β of the pair, in its A word (e, w)
    tiers = range(units // 4)
    a_keys = [(e, w) for w in tiers for e in (0, 1)]
    a_places = [lambda lane, e=e, w=w: (row(lane), per * (2 * (lane >> 2 & 1) + e + 4 * w)) for e, w in a_keys]
    a_words = _paired([_word(lw, "p", where["p"], place) for place in a_places], where["p"], a_places, "p")
    b_keys = [(beta, e, w) for w in tiers for beta in (0, 1) for e in (0, 1)]
    def b_place(unit: int, lane: int) -> tuple[int, int]:
        return per * unit, column(lane)
    b_words = [_word(lw, "b", where["b"], partial(b_place, 2 * beta + e + 4 * w)) for beta, e, w in b_keys]
    gather = gathering(a_words + b_words)
    gather.fetch(a_words + b_words)
    _fence(lw, gather)
    a_values = dict(zip(a_keys, (gather.element(word, 32) for word in a_words)))
    b_values = dict(zip(b_keys, (gather.element(word, 32) for word in b_words)))
    module, b = lw.builder.module, lw.builder
    if eight_bit:
        accumulator, operand, name = ir.VectorType(I32, 4), I32, "llvm.amdgcn.mfma.i32.4x4x4i8"
    elif form.a == "f16":
        accumulator, operand, name = ir.VectorType(F32, 4), ir.VectorType(F16, 4), "llvm.amdgcn.mfma.f32.4x4x4f16"
    else:
        accumulator, operand, name = ir.VectorType(F32, 4), ir.VectorType(I16, 4), "llvm.amdgcn.mfma.f32.4x4x4bf16.1k"
    function = _declare(module, name, accumulator, [operand, operand, accumulator, I32, I32, I32])
    # an instruction takes 4 k: two units of 2 (w = 0, 1) or one of 4
    instructions = ([(beta, e, (0, 1)) for beta in (0, 1) for e in (0, 1)] if not eight_bit else
                    [(beta, e, (w,)) for w in tiers for beta in (0, 1) for e in (0, 1)])
    # the MFMA multiplies signed bytes: a u8 byte x is its s8 reading + 256·(x ≥ 128), so with the bytes'
    # top bits as 0/1 bytes (`_tops`) A·B = Σ over the products of s8 readings and top bits, each weighted 256
    # per top operand, summed by Horner's rule through the accumulator (exact: |A·B| < 2^21)
    tops = {"a": form.a == "u8", "b": form.b == "u8"}
    a_tops = {key: _tops(b, value) for key, value in a_values.items()} if tops["a"] else {}
    b_tops = {key: _tops(b, value) for key, value in b_values.items()} if tops["b"] else {}
    chains = [[(a_tops, b_tops)] if tops["a"] and tops["b"] else [],
              [(a_tops, b_values)] * tops["a"] + [(a_values, b_tops)] * tops["b"],
              [(a_values, b_values)]]
    zero = ir.Constant(accumulator, [ir.Constant(accumulator.element, 0)] * 4)
    total = zero
    # native register i of lane L holds PTX D (row of block row i in L's block, column of L's block column)
    stored = not eight_bit and direct.prepare(gather, lambda lane, i: (row(lane & ~3 | i), column(lane)))
    if stored:
        total = _pack_accumulator(b, direct.c_words(), accumulator)
    started = False
    for chain in chains:
        if not chain:
            continue
        if started:
            total = b.shl(total, ir.Constant(accumulator, [ir.Constant(I32, 8)] * 4))
        for first_values, second_values in chain:
            for beta, e, ws in instructions:
                first = _pack(b, [first_values[e, w] for w in ws], operand)
                second = _pack(b, [second_values[beta, e, w] for w in ws], operand)
                total = b.call(function, [first, second, total, ir.Constant(I32, 1), ir.Constant(I32, beta),
                                          ir.Constant(I32, 0)])
                started = True
    native = [b.bitcast(b.extract_element(total, ir.Constant(I32, i)), I32) for i in range(4)]
    if stored:
        direct.store(native, None)
        return None
    # PTX D register (h, p) = D[g + 8h][2t + p] sits in the lane whose bit 2 is p (block column parity), in the
    # register whose block row holds g + 8h: this lane's where g0 = p, else the lane 4 away in the same row of
    # 16, which a DPP row shift fetches into the banks (lanes 4–7 and 12–15 of a row, or 0–3 and 8–11) whose
    # g0 is not p, the others keeping their own
    dpp = _declare(module, "llvm.amdgcn.update.dpp.i32", I32, [I32, I32, I32, I32, I32, I1])
    register = {row(i): i for i in range(4)}  # block row → register, for the rows g0 + 8h of lanes 0–3
    words = []
    for r in range(4):
        h, p = r >> 1, r & 1
        own, other = native[register[p + 8 * h]], native[register[1 - p + 8 * h]]
        control, banks = (_ROW_SHL_4, _BANKS_LOW) if p else (_ROW_SHR_4, _BANKS_HIGH)
        words.append(b.call(dpp, [own, other, ir.Constant(I32, control), ir.Constant(I32, 15),
                                  ir.Constant(I32, banks), ir.Constant(I1, 1)]))
    return words


# s_waitcnt's immediate waiting for the LDS counter alone (lgkmcnt 0, the others at their maximum): gfx9
# keeps vmcnt in bits 0–3 and 14–15, expcnt in 4–6, lgkmcnt in 8–11; gfx11 expcnt in 0–2, lgkmcnt in 4–9,
# vmcnt in 10–15
_LDS_WAIT = {"mfma": 0xC07F, "wmma11": 0xFC07}


def _fence(lw, gather: Gather | DirectGather | LdsGather) -> None:
    """Where `gather` moved words between lanes: all the moves waited for at once, the scheduler kept from
    moving instructions across, as the target's wait insertion otherwise waits before each first use, one
    s_waitcnt per use (measured, a kernel's only m16n8k16 f16: gfx942 −3, gfx1100 −1, gfx1201 −4). The
    moves' latency then overlaps among them, not with their uses nor with another mma's matrix instructions
    (a second mma: −7 to +16 by form and target, about even in all; BENCHMARKS.md). Where words are only
    loaded (lower/mma_direct.py) the loads keep overlapping their uses (a fence there costs gfx1100 2)."""
    if not (gather.moved if isinstance(gather, DirectGather) else gather).words:
        return
    b = lw.builder
    barrier = _declare(b.module, "llvm.amdgcn.sched.barrier", ir.VoidType(), [I32])
    b.call(barrier, [ir.Constant(I32, 0)])  # 0: nothing crosses
    cores = getattr(lw.target, "id").matrix_cores
    if cores in _LDS_WAIT:
        b.call(_declare(b.module, "llvm.amdgcn.s.waitcnt", ir.VoidType(), [I32]), [ir.Constant(I32, _LDS_WAIT[cores])])
    else:  # gfx12: a counter of its own for LDS
        b.call(_declare(b.module, "llvm.amdgcn.s.wait.dscnt", ir.VoidType(), [I16]), [ir.Constant(I16, 0)])
    b.call(barrier, [ir.Constant(I32, 0)])


class LdsGather:
    """Gather's interface (fetch, element) through LDS, for WMMA (wave32: a wave is a warp): each lane
    stores its registers of an operand next to each other in its warp's slice of one buffer (ds_store_b128
    for four), in the row-major order of the elements they hold in lane 0 (`_row_major`: A's rows g, then
    g + 8), and loads each native word where its source lane and register put it. A Choice's register is
    part of the address, so no select sorts the words, and words at consecutive addresses merge into wide
    loads. Only where the kernel declares its block (`lane_buffer_fits`): the operands are stored together,
    six words a thread, a region each. Wave barriers order
    each store after the loads before it and before its own loads: no instruction (a wave's LDS accesses
    run in order), they keep LLVM from moving the accesses, which it would take for a thread's own."""

    def __init__(self, lw, warp: WarpPosition, registers: dict[str, list[ir.Value]], where: dict[str, dict]):
        self.lw, self.warp, self.registers = lw, warp, registers
        self.words: dict[Source | Choice, ir.Value] = {}
        b = lw.builder
        buffer, threads = lane_buffer(lw)
        self.thread = _linear_thread(lw)
        warp_first = b.and_(self.thread, ir.Constant(I32, ~(WARP - 1) & 0xFFFFFFFF))
        # the lane from the same linear index, not the hardware's: LLVM then merges the slice and lane parts
        # of the addresses (measured, a kernel's only m16n8k16 f16 without a declared block: −5)
        self.offsets = LaneOffsets(lw, warp, b.and_(self.thread, ir.Constant(I32, WARP - 1)))
        # operand → (its region, its warp's slice, registers a lane, the registers in their order there)
        self.regions: dict[str, tuple[ir.Value, ir.Value, int, list[int]]] = {}
        start = 0
        for operand, values in registers.items():
            count = len(values)
            region = b.gep(buffer, [ir.Constant(I32, start)], source_etype=ir.IntType(8))
            slice_ = b.gep(region, [b.mul(warp_first, ir.Constant(I32, 4 * count))], source_etype=ir.IntType(8))
            self.regions[operand] = (region, slice_, count, _row_major(where[operand], count))
            start += 4 * count * threads

    def table(self, source: Source | Choice) -> list[int]:
        """The byte offset of `source`'s word in its operand's slice, at each lane."""
        alternatives = source.sources if type(source) is Choice else (source,)
        if any(a.position for a in alternatives):
            raise FatkitError("internal: an LDS-moved mma word is not a whole register")
        *_, count, order = self.regions[alternatives[0].operand]
        chosen = [alternatives[_apply(source.selector, lane)] if type(source) is Choice else source
                  for lane in range(WARP)]
        return [4 * (count * _apply(c.function, lane) + order.index(c.register)) for lane, c in enumerate(chosen)]

    def fetch(self, sources) -> None:
        b = self.lw.builder
        self._barrier()
        for operand in self.registers:
            region, _, count, order = self.regions[operand]
            mine = b.gep(region, [b.mul(self.thread, ir.Constant(I32, 4 * count))], source_etype=ir.IntType(8))
            vector = ir.Constant(ir.VectorType(I32, count), ir.Undefined)
            for index, register in enumerate(order):
                vector = b.insert_element(vector, self.registers[operand][register], ir.Constant(I32, index))
            b.store(vector, mine, align=4 * count if count in (1, 2, 4) else 4)
        self._barrier()
        for source in sources:
            if source in self.words:
                continue
            operand = (source.sources[0] if type(source) is Choice else source).operand
            form = linear(32, self.table(source))
            if form is None:
                raise FatkitError("internal: an LDS-moved mma word's address is not linear in the lane")
            pointer = b.gep(self.regions[operand][1], [self.offsets.offset(32, *form)], source_etype=ir.IntType(8))
            self.words[source] = b.load(pointer, typ=I32, align=4)

    def element(self, source: Source | Choice, bits: int) -> ir.Value:
        return self.words[source]

    def _barrier(self) -> None:
        self.warp.lane_call(lambda target: target.wave_barrier(self.lw.builder, ir.Constant(self.warp.wave, -1)))


def _row_major(where: dict, count: int) -> list[int]:
    """Registers 0 to count - 1 in the row-major order of the first element each holds in lane 0."""
    first = {}
    for place, (lane, register, _) in sorted(where.items()):
        if lane == 0:
            first.setdefault(register, place)
    return sorted(range(count), key=lambda register: first[register])


def _declared_threads(lw) -> int | None:
    """The most threads the kernel's declared block shape (.reqntid/.maxntid) allows, or None: the entry's,
    also in a function it calls, so that all the module's uses agree on the buffer's layout."""
    return lw.callees.block_threads


def lane_buffer(lw) -> tuple[ir.GlobalVariable, int]:
    """The module's LDS buffer of LdsGather and the threads it holds words for."""
    size, threads = _lane_buffer_size(lw)
    module = lw.builder.module
    buffer = module.globals.get(_LANE_BUFFER)
    if buffer is None:
        buffer = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(8), size), _LANE_BUFFER,
                                   addrspace=lw.target.shared_address_space)
        buffer.type = ir.PointerType(addrspace=lw.target.shared_address_space)
        buffer.linkage = "internal"
        buffer.initializer = ir.Constant(buffer.value_type, ir.Undefined)
        buffer.align = 16
        lw.callees.lane_buffer_bytes = size
    return buffer, threads


def lane_buffer_fits(lw) -> bool:
    """Whether LdsGather may take LDS: the kernel declares its block (without, the buffer would be sized for
    the 1024 threads a block may have, 16 KiB, which limits a gfx11 WGP to 8 blocks whatever their size: a
    block of one warp would run at 2 waves a SIMD instead of 16), the buffer leaves the kernel within the
    smallest AMD LDS (64 KiB), and the kernel has no dynamic shared memory, whose size the launch gives on
    top of it (and might then not fit)."""
    if _declared_threads(lw) is None:
        return False
    module, space = lw.builder.module, lw.target.shared_address_space
    if any(isinstance(g, ir.GlobalVariable) and g.addrspace == space and g.linkage == "external"
           for g in module.global_values):
        return False
    return lw.callees.static_shared_bytes + _lane_buffer_size(lw)[0] <= _SMALLEST_LDS


def _lane_buffer_size(lw) -> tuple[int, int]:
    """(bytes, threads): six words a thread of the declared block, in whole warps."""
    declared = _declared_threads(lw)
    assert declared is not None  # lane_buffer_fits
    threads = -(-declared // WARP) * WARP
    return 6 * 4 * threads, threads


_LANE_BUFFER = "fatkit.mma.lanes"
_SMALLEST_LDS = 64 * 1024  # LDS bytes a workgroup may use on gfx11


def _linear_thread(lw) -> ir.Value:
    """The thread's index in its block (x fastest, as AMD forms waves): %tid.x where the block is declared
    one thread high and deep."""
    if _cached_kernel(lw).flat == {"y", "z"}:
        return lw.read(ast.Name("%tid", "x"), "u32")
    return lw.target.linear_thread(lw.builder)


def _pack_accumulator(b: ir.IRBuilder, words: list[ir.Value], accumulator: ir.VectorType) -> ir.Value:
    vector = ir.Constant(accumulator, ir.Undefined)
    for i, word in enumerate(words):
        vector = b.insert_element(vector, b.bitcast(word, accumulator.element), ir.Constant(I32, i))
    return vector


def _tops(b: ir.IRBuilder, word: ir.Value) -> ir.Value:
    """The top bit of each byte of `word` as a byte 0 or 1."""
    return b.and_(b.lshr(word, ir.Constant(I32, 7)), ir.Constant(I32, 0x01010101))


# DPP controls: lane i of a row of 16 reads lane i + 4 (row_shl:4) or i − 4 (row_shr:4); bank masks: the
# lanes of a row whose bit 2 is 0 (banks 0 and 2) or 1 (banks 1 and 3)
_ROW_SHL_4, _ROW_SHR_4 = 0x104, 0x114
_BANKS_LOW, _BANKS_HIGH = 0b0101, 0b1010


def _row12(half: int, i: int) -> int:
    """gfx12: the PTX B column in WMMA row 8·half + i (i < 4; rows i ≥ 4 repeat i − 4): columns 2t and 2t + 1
    of thread t in the half t div 2, registers 2·(t mod 2) and the next (the fewest moves for B's words)."""
    return 4 * half + 2 * (i >> 1) + (i & 1)


def _wmma_plan(lw, form: Form, gfx12: bool, through_lds: bool, paired: bool) -> Plan:
    eight_bit = form.a in ("s8", "u8")
    a, column = "a" if through_lds else "p", _paired_columns if paired else _pi
    per = 4 if eight_bit else 2
    steps = []
    if gfx12:  # one instruction; a lane's word q holds k 4·(lane / 16) + 2·(q mod 2) + 8·(q div 2) and the next
        def k12(lane, q):
            return 4 * (lane >> 4) + 2 * (q & 1) + 8 * (q >> 1)
        first = [("b", lambda lane, q=q: (k12(lane, q), _row12(lane >> 3 & 1, lane & 3))) for q in range(4)]
        second = [(a, lambda lane, q=q: (lane & 15, k12(lane, q))) for q in range(4)]
        steps.append((first, second))
    for base in range(0, form.k if not gfx12 else 0, 16):
        first = [("b", lambda lane, k=base + per * w: (k, column(lane & 7))) for w in range(16 // per)]
        second = [(a, lambda lane, k=base + per * w: (lane & 15, k)) for w in range(16 // per)]
        steps.append((first, second))
    result = {}
    for lane in range(WARP):
        # gfx11: rows 2i + h < 8 of the transposed result (the rest repeat them); gfx12: rows 8h + i, i < 4,
        # laid out alike: row 8h + i is column π(2i + h)
        for i in range(4):
            result[lane & 15, _row12(lane >> 4, i) if gfx12 else column(2 * i + (lane >> 4))] = (lane, i)
    module = lw.builder.module
    if eight_bit:
        accumulator, operand = ir.VectorType(I32, 8), ir.VectorType(I32, 4)
        name = "llvm.amdgcn.wmma.i32.16x16x16.iu8.v8i32.v4i32"
        function = _declare(module, name, accumulator, [I1, operand, I1, operand, accumulator, I1])
        # the WMMA's A is PTX B and its B is PTX A
        signs = [ir.Constant(I1, int(form.b == "s8")), ir.Constant(I1, int(form.a == "s8"))]

        def integer_call(b, step, first, second, acc):
            return b.call(function, [signs[0], _pack(b, first, operand), signs[1], _pack(b, second, operand), acc,
                                     ir.Constant(I1, 0)])
        return Plan(integer_call, accumulator, steps, result, _half_zero(accumulator))
    half = F16 if form.a == "f16" else I16
    count = 8 if gfx12 else 16
    operand, accumulator = ir.VectorType(half, count), ir.VectorType(F32, 8)
    name = f"llvm.amdgcn.wmma.f32.16x16x16.{form.a}.v8f32.v{count}{'f16' if form.a == 'f16' else 'i16'}"
    function = _declare(module, name, accumulator, [operand, operand, accumulator])

    def call(b, step, first, second, acc):
        return b.call(function, [_pack(b, first, operand), _pack(b, second, operand), acc])
    return Plan(call, accumulator, steps, result, _half_zero(accumulator))


def _element_place(place: Callable[[int, int], tuple[int, int]], i: int, lane: int) -> tuple[int, int]:
    """`place(lane, i)`: element i of a fragment in `lane`."""
    return place(lane, i)


def _half_zero(accumulator: ir.VectorType) -> ir.Constant:
    """Registers 0–3 zero, 4–7 undef: the rows r ≥ 8 of the transposed WMMA result repeat the others and are
    never read."""
    element = accumulator.element
    return ir.Constant(accumulator, [ir.Constant(element, 0)] * 4 + [ir.Constant(element, ir.Undefined)] * 4)


def _lanes(lw, warp: WarpPosition) -> Callable[[Callable[[int], bool]], ir.Value] | None:
    """The predicate of a PTX-lane test as a constant wave mask (llvm.amdgcn.inverse.ballot: lane i takes bit i),
    one scalar move where comparing the lane id costs two vector operations; None at wave64, where a 64-bit
    constant takes two moves (measured: two instructions more per mma)."""
    wave = warp.wave.width
    if wave != WARP:
        return None
    function = _declare(lw.builder.module, f"llvm.amdgcn.inverse.ballot.i{wave}", I1, [warp.wave])

    def lanes(test: Callable[[int], bool]) -> ir.Value:
        mask = sum(1 << lane for lane in range(wave) if test(lane % WARP))
        # a mask and its complement as one (lane 0 outside it), so that selects on either share VCC and pair up
        # as dual-issued v_dual_cndmask
        flipped = mask & 1
        predicate = lw.builder.call(function, [ir.Constant(warp.wave, mask ^ ((1 << wave) - 1) if flipped else mask)])
        return lw.builder.not_(predicate) if flipped else predicate
    return lanes


def _swapped(lw, warp: WarpPosition, words: list[ir.Value], where: dict) -> tuple[list[ir.Value], dict]:
    """A's registers with those of rows g and g+8 (registers 2m and 2m+1) exchanged in the odd thread columns,
    and where each element is then: in thread column t, register r holds the row half (r mod 2) XOR (t mod 2)."""
    b = lw.builder
    lanes = _lanes(lw, warp)
    if lanes is not None:
        even = lanes(lambda lane: lane & 1 == 0)
    else:  # as `Gather.element` compares the thread column's parity (lane & 1 == 0): one mask for both
        even = b.icmp_unsigned("==", b.and_(warp.lane, ir.Constant(I32, 1)), ir.Constant(I32, 0))
    swapped = [b.select(even, words[r], words[r ^ 1]) for r in range(len(words))]
    return swapped, {place: (lane, register ^ (lane & 1), position)
                     for place, (lane, register, position) in where.items()}


class DirectResult:
    """D in the native layout where C comes from loads and D only goes to stores (lower/mma_direct.py): each
    lane loads the C words of its native result registers and stores its results where the PTX stores would
    have put them, the moves into the PTX layout and those stores left out."""

    def __init__(self, lw, ins, form: Form, c: ast.Operand, d: ast.Operand, c_fragment):
        self.lw, self.ins, self.form, self.c, self.d, self.c_fragment = lw, ins, form, c, d, c_fragment
        self.tables: list[tuple[list[int], list[int]]] = []

    def prepare(self, gather: Gather | DirectGather, held: Callable[[int, int], tuple[int, int]]) -> bool:
        """Whether the conditions hold; `held(lane, i)`: the PTX D (row, column) of native register i."""
        lw, form = self.lw, self.form
        if form.d not in ("f32", "s32") or not isinstance(gather, DirectGather):
            return False
        c_words = fragment_loads(lw, self.ins, portable._registers(lw, self.c, self.c_fragment, "C"))
        stores = result_stores(lw, self.ins, portable._registers(lw, self.d, self.c_fragment, "D"))
        if c_words is None or stores is None:
            return False
        located = self.c_fragment.locate()  # PTX (row, column) → (lane, register, 0)
        for i in range(4):
            c_table, d_table = [], []
            for lane in range(WARP):
                source, register, _ = located[held(lane, i)]
                c_table.append(c_words[register].address.table[source])
                d_table.append(stores.words[register].address.table[source])
            if linear(c_words[0].address.width, c_table) is None or \
                    linear(stores.words[0].address.width, d_table) is None:
                return False
            self.tables.append((c_table, d_table))
        self.gather, self.c_word, self.stores = gather, c_words[0], stores
        return True

    def c_words(self) -> list[ir.Value]:
        """The C word of each native result register."""
        return [self.gather.load(self.c_word, c_table) for c_table, _ in self.tables]

    def store(self, native: list[ir.Value], c_words: list[ir.Value] | None) -> None:
        """The native results stored, `c_words` added first where given (the addition `mma` makes: f32 one
        rounding, s32 wrapping or saturating)."""
        b = self.lw.builder
        for i, (_, d_table) in enumerate(self.tables):
            total = native[i]
            if c_words is not None and self.form.d == "f32":
                total = b.bitcast(b.fadd(b.bitcast(total, F32), b.bitcast(c_words[i], F32)), I32)
            elif c_words is not None and self.form.satfinite:
                total = self.lw.intrinsic("llvm.sadd.sat", [total, c_words[i]])
            elif c_words is not None:
                total = b.add(total, c_words[i])
            b.store(total, self.gather.pointer(self.stores.words[0], d_table), align=4)
        self.lw.replaced.update(id(statement) for statement in self.stores.statements)


def _loaded_register(operand: str, lane: int, register: int) -> tuple[str, int]:
    """The fragment register that register `register` of operand `operand` is at PTX lane `lane`: the swapped
    A ("p", `_swapped`) holds A's register r ^ (lane & 1)."""
    return ("a", register ^ (lane & 1)) if operand == "p" else (operand, register)


def _declare(module: ir.Module, name: str, result: ir.Type, arguments: list[ir.Type]) -> ir.Function:
    function = module.globals.get(name)
    if function is None:
        function = ir.Function(module, ir.FunctionType(result, arguments), name)
        function.attributes.add("convergent")
    return function


def _pack(b: ir.IRBuilder, words: list[ir.Value], operand: ir.Type) -> ir.Value:
    """i32 words as the intrinsic's operand type (a vector of halves or of i32, or one i32)."""
    if operand == I32:
        (word,) = words
        return word
    vector = ir.Constant(ir.VectorType(I32, len(words)), ir.Undefined)
    for index, word in enumerate(words):
        vector = b.insert_element(vector, word, ir.Constant(I32, index))
    return b.bitcast(vector, operand)


def _word(lw, operand: str, where: dict, place: Placement) -> Source | Choice:
    """The PTX register word holding the consecutive-k elements that start at `place(lane)`."""
    source = _source(lw, operand, where, place)
    alternatives = source.sources if type(source) is Choice else (source,)
    if any(alternative.position for alternative in alternatives):
        raise lw.fail("internal: a native matrix word does not start a PTX register")
    return source


def _paired(words: list[Source | Choice], where: dict, places: list[Placement], operand: str) -> list:
    """`words` with each Choice between two registers replaced, where possible, by one that shares its reads
    with another word's: the lanes that take register r of word j read it at the lanes word j' needs for
    its own register-r lanes (j' a word whose other lanes take r), one bit-affine function for both; the
    two words' selects then take the same two reads (gfx11: A's rows g and g+8 share a thread's registers)."""
    located = [[where[place(lane)] for lane in range(WARP)] for place in places]
    paired = list(words)
    for j, word in enumerate(words):
        if type(word) is not Choice or len(word.sources) != 2:
            continue
        alternatives = []
        for source in word.sources:
            mine = [lane for lane in range(WARP) if located[j][lane][1] == source.register]
            for partner in sorted(range(len(words)), key=lambda other: other != j ^ 1):  # j ^ 1 first: mutual
                others = [lane for lane in range(WARP) if lane not in mine]
                if partner == j or any(located[partner][lane][1] != source.register for lane in others):
                    continue
                table = [located[j if lane in mine else partner][lane][0] for lane in range(WARP)]
                function = _lane_function(table)
                if function is not None:
                    alternatives.append(Source(operand, function, source.register, 0))
                    break
        if len(alternatives) == 2:
            paired[j] = Choice(tuple(alternatives), word.selector)
    return paired


def _wmma_words(lw, form: Form, gfx12: bool, where: dict, through_lds: bool,
                paired: bool) -> tuple[Plan, list, list]:
    """The plan, each instruction's operand words and all of them."""
    plan = _wmma_plan(lw, form, gfx12, through_lds, paired)
    steps = []
    for step in plan.steps:
        operands = []
        for words in step:
            sources = [_word(lw, operand, where[operand], place) for operand, place in words]
            operand = words[0][0]
            if not through_lds and all(o == operand for o, _ in words):  # (through LDS a Choice costs nothing)
                sources = _paired(sources, where[operand], [place for _, place in words], operand)
            operands.append(sources)
        steps.append(operands)
    return plan, steps, [source for step in steps for words in step for source in words]


def _wmma_products(lw, form: Form, registers: dict, where: dict, warp: WarpPosition, c_fragment,
                   gathering: Callable[[list], Gather | DirectGather],
                   direct: DirectResult) -> list[ir.Value] | None:
    """The PTX D words of A·B on the 16x16x16 WMMA (module docstring); None where `direct` stored the native
    result (f32: C the accumulator; s32: C added after, wrapping or saturating)."""
    gfx12 = getattr(lw.target, "id").matrix_cores == "wmma12"
    # moves through LDS on gfx11 only: on gfx12, whose WMMA reads half the words, the lane moves cost one
    # instruction less (measured)
    lds = not gfx12 and lw.callees.cluster is None and lane_buffer_fits(lw)
    plan, steps, sources = _wmma_words(lw, form, gfx12, where, False, False)
    gather: Gather | DirectGather | LdsGather = gathering(sources)
    if lds and type(gather) is DirectGather and form.d == "f16":
        # A and B loaded, D moving all the same (f16 is never stored directly): its rows paired for D's LDS
        # loads (measured, `.maxntid` m16n8k16 f16 accumulators 66 → 56; the paired B columns cost the
        # forms whose D is stored directly 2–3 in their loads' addresses, so only here)
        plan, steps, sources = _wmma_words(lw, form, gfx12, where, False, True)
        gather = gathering(sources)
    through_lds = lds and type(gather) is Gather
    if through_lds:  # A unswapped: its register is part of the LDS address
        plan, steps, sources = _wmma_words(lw, form, gfx12, where, True, True)
        gather = LdsGather(lw, warp, {"a": registers["a"], "b": registers["b"]}, where)
        # k in the order of the first operand's words in LDS, the same for both (a WMMA sums over its k in
        # any order): its loads then fill the operand's registers in order (B's row: two ds_load_b128)
        for pair in steps:
            ranks = sorted(range(len(pair[0])), key=lambda w: gather.table(pair[0][w])[0])
            pair[:] = [[words[w] for w in ranks] for words in pair]
    gather.fetch(sources)
    _fence(lw, gather)
    builder = lw.builder
    accumulator = plan.initial
    held = {(lane, i): place for place, (lane, i) in plan.result.items()}  # native (lane, register) → PTX
    stored = direct.prepare(gather, lambda lane, i: held[lane, i])
    c_words = direct.c_words() if stored else None
    if stored and form.d == "f32":  # C the accumulator of registers 0–3 (4–7 are never read)
        for i, word in enumerate(c_words):
            accumulator = builder.insert_element(accumulator, builder.bitcast(word, F32), ir.Constant(I32, i))
    for step, (first, second) in enumerate(steps):
        accumulator = plan.call(builder, step, [gather.element(s, 32) for s in first],
                                [gather.element(s, 32) for s in second], accumulator)
    count = plan.accumulator.count
    native = [builder.bitcast(builder.extract_element(accumulator, ir.Constant(I32, i)), I32) for i in range(count)]
    if stored:
        direct.store(native, None if form.d == "f32" else c_words)
        return None
    where_result = {place: (lane, register, 0) for place, (lane, register) in plan.result.items()}
    result_sources = [_source(lw, "n", where_result, partial(_element_place, c_fragment.place, i))
                      for i in range(c_fragment.registers)]
    out = (LdsGather(lw, warp, {"n": native[:4]}, {"n": where_result}) if lds else
           Gather(lw, warp, {"n": native}, _lanes(lw, warp)))
    out.fetch(result_sources)
    _fence(lw, out)
    return [out.element(source, 32) for source in result_sources]


@handles("mma")
def mma(lw, ins):
    """Native where the target and form allow it (module docstring), else lower/mma.py's arithmetic (sm90's
    model under `native`)."""
    form = portable._form(lw, ins)
    cores = getattr(lw.target, "id", None)
    cores = cores.matrix_cores if cores is not None else None
    if getattr(lw.callees, "mma_numerics", "sm90") != "native" or not native_form(form, cores):
        return portable.mma(lw, ins)
    d, a, b, c = lw.operands(ins, 4)
    bits = portable._INPUT_BITS[form.a]
    a_fragment, b_fragment = portable._a_fragment(form.m, form.k, bits), portable._b_fragment(form.k, bits)
    c_fragment = portable._c_fragment(form.m, form.c)
    elements = portable._c_fragment(form.m, "f32")  # one word per D element, in the order of C's elements
    registers = {"a": portable._read_fragment(lw, a, a_fragment, "A"),
                 "b": portable._read_fragment(lw, b, b_fragment, "B")}
    warp = WarpPosition(lw)
    where = {"a": a_fragment.locate(), "b": b_fragment.locate()}
    registers["p"], where["p"] = _swapped(lw, warp, registers["a"], where["a"])
    fragments = {"a": portable._registers(lw, a, a_fragment, "A"), "b": portable._registers(lw, b, b_fragment, "B")}

    def gathering(sources: list) -> Gather | DirectGather:
        # A and B loaded in the native layout where they come straight from loads (lower/mma_direct.py)
        return direct_gather(lw, ins, warp, registers, _lanes(lw, warp), fragments, _loaded_register, sources)
    builder = lw.builder
    direct = DirectResult(lw, ins, form, c, d, c_fragment)
    if cores == "mfma":
        products = _mfma_products(lw, form, registers, where, warp, gathering, direct)
    else:
        products = _wmma_products(lw, form, registers, where, warp, elements, gathering, direct)
    if products is None:
        return
    c_words = portable._read_fragment(lw, c, c_fragment, "C")
    if form.d == "f16":
        halves = [builder.bitcast(portable._element(lw, word, j, 16), F16) for word in c_words for j in (0, 1)]
        sums = [builder.fptrunc(builder.fadd(builder.bitcast(product, F32), builder.fpext(half, F32)), F16)
                for product, half in zip(products, halves)]
        bits = [builder.zext(builder.bitcast(value, I16), I32) for value in sums]
        portable._write_words(lw, d, c_fragment, [builder.or_(bits[2 * r], builder.shl(bits[2 * r + 1],
                                                                                       ir.Constant(I32, 16)))
                                                  for r in range(c_fragment.registers)])
        return
    d_words = []
    for product, c_word in zip(products, c_words):
        if form.d == "f32":
            total = builder.fadd(builder.bitcast(product, F32), builder.bitcast(c_word, F32))
            d_words.append(builder.bitcast(total, I32))
        elif form.satfinite:
            d_words.append(lw.intrinsic("llvm.sadd.sat", [product, c_word]))
        else:
            d_words.append(builder.add(product, c_word))
    portable._write_words(lw, d, c_fragment, d_words)
