"""Asynchronous copies (cp.async, cp.async.bulk, cp.reduce.async.bulk), their groups and waits, and
st.bulk: done by the issuing thread itself, at the point where it issues them.

Why a synchronous copy is a correct implementation of an asynchronous one: every ordering a program can
rely on is kept, and every outcome it can observe is one the ISA allows.

- cp.async (ca/cg). The copy is a weak write of the shared destination by the executing thread that
  the ISA leaves unordered with the thread's other accesses until `cp.async.wait_group N` /
  `cp.async.wait_all` (or the mbarrier arrive of `cp.async.mbarrier.arrive`) says it is complete.
  Copying at issue completes it before any wait, so after a wait the thread's own later reads see the
  data (program order), and other threads see it once they synchronise with the thread after the wait
  (`bar.sync`, an mbarrier: plain release/acquire of the thread's earlier stores). A program that reads
  the destination, or writes the source, before the wait races with the copy: any of its values is
  allowed, so is the one a completed copy gives. The groups therefore carry nothing:
  `commit_group` and `wait_group N` / `wait_all` lower to nothing, for any N (all groups are complete).
  `src-size` bytes are read (never more: out-of-bounds tiles pass src-size 0 with a source address
  that must not be read) and the rest of the cp-size bytes are zeros; an `ignore-src` predicate that is
  true writes zeros without reading the source. Cache operators, `.L2::cache_hint` with its policy
  operand and `.L2::64B/128B/256B` prefetch sizes are performance hints.
- `cp.async.mbarrier.arrive{.noinc}`: the arrive-on the system triggers when the thread's prior copies
  complete happens at once (they are complete); without `.noinc` the ISA first adds one pending arrival
  so that the net change is zero — one release RMW of the mbarrier with no change (it cannot complete
  the phase: pending stays at least one), which still orders the copies before the phase's completion.
- cp.async.bulk (global → shared with `.mbarrier::complete_tx::bytes`; shared → global with
  `.bulk_group`): PTX issues a bulk copy from one thread, so that thread copies the bytes (16-byte
  loads and stores; the ISA makes size and addresses multiples of 16) — except where one lane issued it
  under `elect.sync` in a region passes/elected.py recognises: there the copy is made where the warp
  rejoins, by all its lanes (`_spread_copy`) — then performs the complete-tx of
  `size` bytes on the mbarrier as a release at the `.cluster` scope — the ISA's own ordering of it — so
  a thread whose `try_wait`/`test_wait` (acquire) sees the phase complete sees the data. A complete-tx
  before the matching expect-tx is allowed (the tx-count goes negative, lower/mbarrier.py), so programs
  that issue the copy before `arrive.expect_tx` work too. `cp.async.bulk.commit_group` and
  `cp.async.bulk.wait_group{.read} N` then have nothing to wait for. `.multicast::cluster` copies into
  each CTA whose bit of ctaMask is set, at the destination's CTA-relative offset, and completes the tx on
  the mbarrier at the mbarrier's CTA-relative offset there (a cluster is one workgroup, lower/cluster.py;
  in a cluster of one, bit 0 alone counts). The shared::cta → shared::cluster form copies into the CTA
  the destination names. `.ignore_oob` leaves the up to 15 ignored bytes at either end unread and their
  destination as it was (the ISA makes them indeterminate); the complete-tx still counts `size`.
- Proxies: the ISA performs bulk copies in the async proxy and asks for `fence.proxy.async` between the
  generic-proxy accesses of a location and async-proxy ones. Here every copy is the issuing thread's own
  generic access, so the proxy fences (lower/sync.py) need order only that thread's accesses, which an
  ordinary fence does; cross-thread ordering still comes from the program's barriers.
- cp.reduce.async.bulk: each element reduced into the destination by one relaxed atomic at `.gpu` scope
  (the ISA's ordering of each reduction), then the complete-tx as for the copies.
- cp.async.bulk.prefetch{.tensor} and the `L2` prefetch forms only warm a cache: nothing.
- cp.async.bulk.tensor and cp.reduce.async.bulk.tensor read fatkit's own tensor-map layout, which the
  shim's cuTensorMapEncode* makes: lower/tensorcopy.py.
- st.bulk: weak stores of zeros, eight bytes at a time (size is a multiple of 8).
- wgmma, which reads the tiles these copies fill, is lower/wgmma.py; tcgen05 is refused by translate/coverage.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from llvmlite import ir

from fatkit.translate.lower.atomic import (
    Order, _bfloat_add, _BFLOAT_TYPES, _llvm_operation, _value_type, atomic_rmw,
)
from fatkit.translate.lower.core import I1, I8, I32, I64, Lowering, handles
from fatkit.translate.lower.cluster import checked_cluster, multicast_destinations
from fatkit.translate.lower.mbarrier import update
from fatkit.translate.lower.sync import _predicate
from fatkit.translate.lower.warp import WarpPosition
from fatkit.translate.passes.elected import SPREAD
from fatkit.translate.ptx import ast

_HINTS = {"L2::cache_hint", "L2::64B", "L2::128B", "L2::256B"}
_CHUNKS = {4: I32, 8: ir.VectorType(I32, 2), 16: ir.VectorType(I32, 4)}  # cp-size bytes as one value
_SPACES = ("global", "shared", "shared::cta", "shared::cluster")
# cp.reduce.async.bulk: operation → element types, per destination (the ISA's table).
_REDUCTIONS = {
    "shared::cluster": {"add": {"u32", "s32", "u64"}, "min": {"u32", "s32"}, "max": {"u32", "s32"},
                        "inc": {"u32"}, "dec": {"u32"}, "and": {"b32"}, "or": {"b32"}, "xor": {"b32"}},
    "global": {"add": {"u32", "s32", "u64", "f32", "f64", "f16", "bf16"},
               "min": {"u32", "s32", "u64", "s64", "f16", "bf16"}, "max": {"u32", "s32", "u64", "s64", "f16", "bf16"},
               "inc": {"u32"}, "dec": {"u32"}, "and": {"b32", "b64"}, "or": {"b32", "b64"}, "xor": {"b32", "b64"}},
}

# ------------------------------------------------------------------------------------------- helpers

def counted_loop(lw: Lowering, count: ir.Value, body: Callable[[ir.Value], None], unrolled: bool = True) -> None:
    """Run `body(index)` (index an i64) for index 0 … count-1; `body` builds at the builder's position.
    `unrolled=False` keeps LLVM from unrolling the loop (`_copy_chunks` says why)."""
    builder = lw.builder
    entry = builder.block
    header, step = lw.function.append_basic_block("loop.header"), lw.function.append_basic_block("loop.body")
    after = lw.function.append_basic_block("loop.exit")
    builder.branch(header)
    builder.position_at_end(header)
    index = builder.phi(I64)
    index.add_incoming(ir.Constant(I64, 0), entry)
    builder.cbranch(builder.icmp_unsigned("<", index, count), step, after)
    builder.position_at_end(step)
    body(index)
    following = builder.add(index, ir.Constant(I64, 1))
    index.add_incoming(following, builder.block)
    back = builder.branch(header)
    if not unrolled:
        back.set_metadata("llvm.loop", _not_unrolled(builder.module))
    builder.position_at_end(after)


def _not_unrolled(module: ir.Module) -> ir.MDValue:
    """A fresh loop ID (its own first operand, as LLVM's loop metadata is) with `llvm.loop.unroll.disable`;
    built without `add_metadata`, which would give every loop the same node."""
    option = module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.disable")])
    loop = ir.MDValue(module, [option], name=str(len(module.metadata)))
    loop.operands = (loop, option)
    return loop


def _at(lw: Lowering, pointer: ir.Value, offset: ir.Value | int) -> ir.Value:
    offset = ir.Constant(I64, offset) if isinstance(offset, int) else offset
    return lw.builder.gep(pointer, [offset], source_etype=I8)


def _copy_chunks(lw: Lowering, destination: ir.Value, source: ir.Value, chunks: ir.Value, size: int) -> None:
    """Copy `chunks` (i64) runs of `size` bytes (a `_CHUNKS` size, both pointers aligned to it)."""
    chunk = _CHUNKS[size]

    def copy(index: ir.Value) -> None:
        offset = lw.builder.mul(index, ir.Constant(I64, size))
        value = lw.builder.load(_at(lw, source, offset), typ=chunk, align=size)
        lw.builder.store(value, _at(lw, destination, offset), align=size)

    # Not unrolled: LLVM unrolls a loop of constant count in full, and the bulk copies of real kernels
    # have constant sizes (torchao's mxfp8 kernels: 54 copies of 512 bytes in one kernel became 1,736 LDS
    # reads and 1,728 global stores, half its instructions and of LLVM's time on it), for no time gained:
    # each chunk's store waited for its own load (`s_waitcnt lgkmcnt(0)` between every pair) all the same.
    counted_loop(lw, chunks, copy, unrolled=False)


def _copy_bytes(lw: Lowering, destination: ir.Value, source: ir.Value, count: ir.Value) -> None:
    def copy(index: ir.Value) -> None:
        lw.builder.store(lw.builder.load(_at(lw, source, index), typ=I8), _at(lw, destination, index))

    counted_loop(lw, count, copy)


def _size(lw: Lowering, operand: ast.Operand) -> ir.Value:
    """A 32-bit byte count as i64."""
    return lw.builder.zext(lw.read(operand, "u32"), I64)


def _is_predicate(lw: Lowering, operand: ast.Operand) -> bool:
    if type(operand) is ast.Negated:
        return True
    return type(operand) is ast.Name and operand.name in lw.registers and lw.registers[operand.name].ptx_type == "pred"


def _directions(lw: Lowering, ins: ast.Instruction) -> tuple[str, str]:
    """(destination, source) state spaces: the first and second space qualifiers, as the ISA writes them."""
    spaces = [m for m in ins.modifiers if m in _SPACES or m.startswith("shared::")]
    if len(spaces) != 2:
        raise lw.fail("expected a destination and a source state space")
    for space in spaces:
        if space not in _SPACES:
            raise lw.fail(f".{space} is not a state space of bulk copies")
    if "shared::cluster" in spaces:
        checked_cluster(lw)
    return spaces[0], spaces[1]


def _space(qualifier: str) -> str:
    return "global" if qualifier == "global" else "shared"


def _complete_tx(lw, mbar: ast.Operand, size: ir.Value, shift: ir.Value | None = None) -> None:
    """The complete-tx of `size` bytes on the mbarrier at `mbar` (a shared::cta/cluster address; `shift`
    bytes further, i32, for another CTA's of a multicast): release at .cluster scope, after the data it
    reports is written."""
    if type(mbar) is not ast.Address:
        raise lw.fail("the mbarrier operand must be an [address]")
    pointer = lw.address(mbar, "shared")
    if shift is not None:
        pointer = lw.builder.gep(pointer, [shift], source_etype=I8)
    update(lw, pointer, Order("release", lw.target.syncscope("cluster")), tx=lw.builder.neg(size))


def _address_operands(lw: Lowering, operands: tuple[ast.Operand, ...], count: int) -> tuple[ast.Operand, ...]:
    for operand in operands[:count]:
        if type(operand) is not ast.Address or operand.extra:
            raise lw.fail("expected [address] operands")
    return operands


# ------------------------------------------------------------------------------------------- cp

# The tensor-map forms of cp ("copy": cp.async.bulk.tensor, "reduce": cp.reduce.async.bulk.tensor), which
# lower/tensorcopy.py registers: it builds on this module's copies and complete-tx, so this one cannot import it.
TENSOR_FORMS: dict[str, Callable] = {}


@handles("cp")
def cp(lw: Lowering, ins: ast.Instruction) -> None:
    modifiers = ins.modifiers
    if modifiers[:1] == ("reduce",):
        if modifiers[1:3] != ("async", "bulk"):
            raise lw.fail("cp.reduce is cp.reduce.async.bulk")
        if "tensor" in modifiers:
            TENSOR_FORMS["reduce"](lw, ins)
            return
        _reduce(lw, ins)
        return
    if modifiers[:1] != ("async",) or len(modifiers) < 2:
        raise lw.fail("cp exists as cp.async and cp.reduce.async.bulk")
    kind = modifiers[1]
    if SPREAD in modifiers and "tensor" not in modifiers:  # (tensor copies are spread by lower/tensorcopy.py)
        _spread_copy(lw, ins)
    elif kind in ("ca", "cg"):
        _cp_async(lw, ins, kind)
    elif kind in ("commit_group", "wait_group", "wait_all"):
        _group(lw, ins, bulk=False)
    elif kind == "mbarrier":
        _cp_async_arrive(lw, ins)
    elif kind == "bulk" and "tensor" in modifiers:
        if "prefetch" in modifiers:  # only warms L2 with a tile: nothing to decode, nothing to do
            lw.check_modifiers(ins, {"async", "bulk", "prefetch", "tensor", "L2", "global", "L2::cache_hint",
                                     "tile", "im2col", "tile::gather4", "im2col::w", "im2col::w::128",
                                     *(f"{n}d" for n in range(1, 6))})
            return
        TENSOR_FORMS["copy"](lw, ins)
    elif kind == "bulk" and modifiers[2:3] in (("commit_group",), ("wait_group",)):
        _group(lw, ins, bulk=True)
    elif kind == "bulk" and "prefetch" in modifiers:
        lw.check_modifiers(ins, {"async", "bulk", "prefetch", "L2", "global", "L2::cache_hint"})
        _address_operands(lw, lw.operands(ins, 3 if ins.has("L2::cache_hint") else 2), 1)
    elif kind == "bulk":
        _bulk_copy(lw, ins)
    else:
        raise lw.fail(f"cp.async.{kind} is not an instruction of the ISA")


def _group(lw: Lowering, ins: ast.Instruction, bulk: bool) -> None:
    """commit_group / wait_group N / wait_all and the bulk ones (.read waits only for the source reads):
    every copy is complete when issued, so no group is ever pending."""
    form = ins.modifiers[2 if bulk else 1:]
    if form[0] == "wait_group":
        if form[1:] not in ((), ("read",)) or (form[1:] and not bulk):
            raise lw.fail(".read exists only on cp.async.bulk.wait_group")
        (count,) = lw.operands(ins, 1)
        if type(count) is not ast.IntImm or count.value < 0:
            raise lw.fail("wait_group takes an immediate group count")
    else:
        if form[1:]:
            raise lw.fail(f"modifier .{form[1]} not supported")
        lw.operands(ins, 0)


def _cp_async(lw: Lowering, ins: ast.Instruction, cache: str) -> None:
    """cp.async.ca/.cg.shared{::cta}.global{hints} [dst], [src], cp-size {, src-size | ignore-src}{, policy}."""
    spaces = [m for m in ins.modifiers if m in ("shared", "shared::cta", "global")]
    if ins.modifiers[2:4] != tuple(spaces) or len(spaces) != 2 or spaces[1] != "global":
        raise lw.fail("cp.async copies .global to .shared{::cta}")
    lw.check_modifiers(ins, {"async", cache, *spaces, *_HINTS})
    operands = list(ins.operands)
    if ins.has("L2::cache_hint"):
        if len(operands) < 4:
            raise lw.fail(".L2::cache_hint needs a cache-policy operand")
        operands.pop()  # the cache policy: an eviction hint
    if len(operands) not in (3, 4):
        raise lw.fail("expected [dst], [src], cp-size and an optional src-size or ignore-src")
    destination, source, size = _address_operands(lw, tuple(operands), 2)[:3]
    if type(size) is not ast.IntImm or size.value not in _CHUNKS:
        raise lw.fail("cp-size must be the immediate 4, 8 or 16")
    if cache == "cg" and size.value != 16:
        raise lw.fail("cp.async.cg copies 16 bytes")
    cp_size = size.value
    builder = lw.builder
    to, of = lw.address(destination, "shared"), lw.address(source, "global")
    zeros = ir.Constant(_CHUNKS[cp_size], None)

    def whole() -> None:
        builder.store(builder.load(of, typ=_CHUNKS[cp_size], align=cp_size), to, align=cp_size)

    def part(count: ir.Value) -> None:  # count < cp-size bytes, then zeros
        builder.store(zeros, to, align=cp_size)
        _copy_bytes(lw, to, of, count)

    if len(operands) == 3:
        whole()
        return
    extra = operands[3]
    if _is_predicate(lw, extra):  # ignore-src: zeros, the source unread
        with builder.if_else(_predicate(lw, extra)) as (ignored, read):
            with ignored:
                builder.store(zeros, to, align=cp_size)
            with read:
                whole()
        return
    if type(extra) is ast.IntImm:
        if not 0 <= extra.value <= cp_size:
            raise lw.fail("src-size must not exceed cp-size")
        if extra.value == cp_size:
            whole()
        else:
            part(ir.Constant(I64, extra.value))
        return
    count = lw.builder.zext(lw.read(extra, "u32"), I64)
    with builder.if_else(builder.icmp_unsigned(">=", count, ir.Constant(I64, cp_size))) as (full, partial):
        with full:
            whole()
        with partial:
            part(count)


def _cp_async_arrive(lw: Lowering, ins: ast.Instruction) -> None:
    """cp.async.mbarrier.arrive{.noinc}{.shared{::cta}}.b64 [addr]: the thread's copies are complete, so
    the arrive-on happens now; without .noinc it follows a +1 of the pending count (net no change)."""
    if ins.modifiers[2:3] != ("arrive",):
        raise lw.fail("cp.async.mbarrier is cp.async.mbarrier.arrive")
    spaces = [m for m in ins.modifiers if m.startswith("shared")]
    if spaces and spaces != ["shared"] and spaces != ["shared::cta"]:
        raise lw.fail("cp.async.mbarrier.arrive's mbarrier is in .shared{::cta}")
    lw.check_modifiers(ins, {"async", "mbarrier", "arrive", "noinc", *spaces})
    if "b64" not in ins.modifiers:
        raise lw.fail("mbarrier objects are .b64")
    (address,) = _address_operands(lw, lw.operands(ins, 1), 1)
    pointer = lw.address(address, "shared" if spaces else "generic")
    arrivals = ir.Constant(I64, 1 if ins.has("noinc") else 0)
    update(lw, pointer, Order("release", lw.target.syncscope("cta")), arrivals=arrivals)


def _bulk_copy(lw: Lowering, ins: ast.Instruction) -> None:
    """cp.async.bulk.dst.src.completion{.multicast}{.L2::cache_hint}{.cp_mask} (see the module docstring)."""
    to, of = _directions(lw, ins)
    completions = [m for m in ins.modifiers if m in ("mbarrier::complete_tx::bytes", "bulk_group")]
    if len(completions) != 1:
        raise lw.fail("a bulk copy completes by .mbarrier::complete_tx::bytes or .bulk_group")
    lw.check_modifiers(ins, {"async", "bulk", to, of, completions[0], "L2::cache_hint", "cp_mask",
                             "multicast::cluster", "ignore_oob"})
    hinted, masked = ins.has("L2::cache_hint"), ins.has("cp_mask")
    multicast, ignoring = ins.has("multicast::cluster"), ins.has("ignore_oob")
    by_group = completions[0] == "bulk_group"
    if multicast and (to, of) != ("shared::cluster", "global") or ignoring and (to, of) != ("shared::cta", "global"):
        raise lw.fail(".multicast::cluster copies global → shared::cluster, .ignore_oob global → shared::cta")
    if (to, of) == ("global", "shared::cta") and by_group:
        operands = lw.operands(ins, 3 + hinted + masked)
        mbar = None
    elif (to in ("shared::cta", "shared::cluster") and of == "global"
          or (to, of) == ("shared::cluster", "shared::cta")) and not by_group and not masked:
        # shared::cluster destinations (and mbarriers) are LDS addresses of the CTA they name (a cluster
        # is one workgroup, lower/cluster.py): shared::cta → shared::cluster copies into that CTA
        operands = lw.operands(ins, 4 + hinted + multicast + 2 * ignoring)
        mbar = operands[5 if ignoring else 3]
    else:
        raise lw.fail(f"no bulk copy from .{of} to .{to} completes by .{completions[0]}")
    destination, source, size = _address_operands(lw, operands, 2)[:3]
    to_pointer, of_pointer = lw.address(destination, _space(to)), lw.address(source, _space(of))
    count = _size(lw, size)
    chunks = lw.builder.lshr(count, ir.Constant(I64, 4))
    if masked:
        _copy_masked(lw, to_pointer, of_pointer, chunks, lw.read(operands[-1], "u32"))
    elif ignoring:
        _copy_ignoring(lw, to_pointer, of_pointer, count, lw.read(operands[3], "u32"), lw.read(operands[4], "u32"))
    elif multicast:
        for selected, (to_shift, mbar_shift) in multicast_destinations(lw, lw.read(operands[4], "b16"),
                                                                       [destination, operands[3]]):
            with lw.builder.if_then(selected):
                target = to_pointer if to_shift is None else lw.builder.gep(to_pointer, [to_shift], source_etype=I8)
                _copy_chunks(lw, target, of_pointer, chunks, 16)
                _complete_tx(lw, operands[3], count, mbar_shift)
        return
    else:
        _copy_chunks(lw, to_pointer, of_pointer, chunks, 16)
    if mbar is not None:
        _complete_tx(lw, mbar, count)


@dataclass(frozen=True)
class Share:
    """A lane's part of a copy the lanes of its warp share (`elected_share`): the units `rank`, `rank +
    lanes`, … (i64 values), and whether the lane is the one that issued the copy (i1)."""

    rank: ir.Value
    lanes: ir.Value
    issuing: ir.Value

    def strided_loop(self, lw: Lowering, count: ir.Value, body: Callable[[ir.Value], None]) -> None:
        """`body(unit)` for this lane's units among 0 … count-1 (i64)."""
        builder = lw.builder
        one = ir.Constant(I64, 1)
        mine = builder.select(builder.icmp_unsigned(">", count, self.rank),
                              builder.udiv(builder.add(builder.sub(count, self.rank), builder.sub(self.lanes, one)),
                                           self.lanes), ir.Constant(I64, 0))
        counted_loop(lw, mine, lambda index: body(builder.add(self.rank, builder.mul(index, self.lanes))))


def operand_registers(operands) -> list[ast.Name]:
    """The register names in operands: bare, an [address]'s base, a tensor copy's {coordinates} and a {vector}."""
    names: list[ast.Name] = []
    for operand in operands:
        items = [operand]
        if type(operand) is ast.Address:
            items = [operand.base, *(i for extra in operand.extra
                                     for i in (extra.items if type(extra) is ast.Vector else (extra,)))]
        elif type(operand) is ast.Vector:
            items = list(operand.items)
        names += [item for item in items if type(item) is ast.Name]
    return names


def elected_share(lw: Lowering, operands, flag: ast.Operand, work: Callable[[Share], Callable[[], None] | None]) -> None:
    """A copy the elected pass moved to where the warp rejoins (passes/elected.py), its operands those of the
    lane whose `flag` is set: every lane executing it takes the issuer's operand registers, `work(share)`
    does the lane's part, the lanes wait for each other, and the issuer runs what `work` returned (the
    complete-tx); a lane alone (no lane issued, or the issuer came by itself) does what it finds."""
    builder = lw.builder
    warp = WarpPosition(lw)
    members = warp.members(None)
    issued = builder.icmp_unsigned("!=", lw.read(flag, "u32"), ir.Constant(I32, 0))
    votes, _ = warp.lane_call(lambda target: target.ballot(builder, issued, members))
    with builder.if_then(builder.icmp_unsigned("!=", votes, ir.Constant(votes.type, 0))):
        issuer = builder.trunc(lw.intrinsic("llvm.cttz", [votes, ir.Constant(I1, 1)]), I32)  # its hardware lane
        for register in operand_registers(operands):  # every lane takes the issuer's (fresh) registers
            if register.name in lw.registers:
                ptx_type = "u64" if ast.TYPE_SIZES[lw.registers[register.name].ptx_type] == 8 else "u32"
                value = lw.read(register, ptx_type)  # (16-bit registers widened: exchanges take 32 or 64 bits)
                shared = warp.lane_call(lambda target: target.exchange(builder, value, members))
                # (not uniform: on wave64 the two warps of a wave read their own issuers)
                lw.write(register, shared.read(builder, issuer, False), ptx_type)
        # this lane's turn among the members: its rank below it, the members' number
        wave = votes.type
        lane = builder.zext(warp.hardware_lane, wave)
        below = builder.sub(builder.shl(ir.Constant(wave, 1), lane), ir.Constant(wave, 1))
        rank = builder.zext(lw.intrinsic("llvm.ctpop", [builder.and_(members, below)]), I64)
        lanes = builder.zext(lw.intrinsic("llvm.ctpop", [members]), I64)
        finish = work(Share(rank, lanes, builder.icmp_unsigned("==", warp.hardware_lane, issuer)))
        warp.lane_call(lambda target: target.wave_barrier(builder, members))  # every part written
        if finish is not None:
            with builder.if_then(builder.icmp_unsigned("==", warp.hardware_lane, issuer)):
                finish()
    lw.write(flag, ir.Constant(I32, 0), "u32")


def _spread_copy(lw, ins) -> None:
    """A plain bulk copy the elected pass moved (`elected_share`): `[dst], [src], size {, [mbar]}{, mask},
    flag`; the lanes take its 16-byte chunks in turn and the issuer completes the transaction bytes."""
    to, of = _directions(lw, ins)
    by_group = ins.has("bulk_group")
    masked = ins.has("cp_mask")
    lw.check_modifiers(ins, {"async", "bulk", to, of, "bulk_group" if by_group else "mbarrier::complete_tx::bytes",
                             "cp_mask", SPREAD})
    operands = lw.operands(ins, (4 + masked) if by_group else 5)
    destination, source, size = _address_operands(lw, operands, 2)[:3]
    builder = lw.builder

    def work(share: Share) -> Callable[[], None] | None:
        to_pointer, of_pointer = lw.address(destination, _space(to)), lw.address(source, _space(of))
        count = _size(lw, size)
        mask = lw.read(operands[3], "u32") if masked else None

        def copy(chunk: ir.Value) -> None:
            offset = builder.mul(chunk, ir.Constant(I64, 16))
            if mask is not None:  # .cp_mask: one chunk of the masked copy
                _copy_masked(lw, _at(lw, to_pointer, offset), _at(lw, of_pointer, offset), ir.Constant(I64, 1), mask)
                return
            value = builder.load(_at(lw, of_pointer, offset), typ=_CHUNKS[16], align=16)
            builder.store(value, _at(lw, to_pointer, offset), align=16)

        share.strided_loop(lw, builder.lshr(count, ir.Constant(I64, 4)), copy)
        return None if by_group else (lambda: _complete_tx(lw, operands[3], count))

    elected_share(lw, operands[:-1], operands[-1], work)


def _copy_ignoring(lw, destination: ir.Value, source: ir.Value, count: ir.Value, left: ir.Value,
                   right: ir.Value) -> None:
    """.ignore_oob: the first `left` and last `right` (0–15) bytes of the source may lie outside its
    allocation and their destination bytes are indeterminate: they are not read, and the destination keeps
    what it held. The whole chunks between are copied as chunks, the two edge chunks byte by byte."""
    builder = lw.builder
    sixteen = ir.Constant(I64, 16)
    left, right = builder.zext(left, I64), builder.zext(right, I64)
    end = builder.sub(count, right)  # one past the last byte read

    def copy_range(start: ir.Value, stop: ir.Value) -> None:  # bytes [start, stop), none where stop ≤ start
        length = builder.select(builder.icmp_unsigned(">", stop, start), builder.sub(stop, start), ir.Constant(I64, 0))
        _copy_bytes(lw, _at(lw, destination, start), _at(lw, source, start), length)

    head_end = builder.select(builder.icmp_unsigned("<", end, sixteen), end, sixteen)
    copy_range(left, head_end)
    chunks = builder.lshr(count, ir.Constant(I64, 4))
    two = ir.Constant(I64, 2)
    middle = builder.select(builder.icmp_unsigned(">", chunks, two), builder.sub(chunks, two), ir.Constant(I64, 0))
    _copy_chunks(lw, _at(lw, destination, 16), _at(lw, source, 16), middle, 16)
    tail_start = builder.select(builder.icmp_unsigned(">", count, sixteen), builder.sub(count, sixteen), count)
    copy_range(tail_start, end)


def _copy_masked(lw, destination: ir.Value, source: ir.Value, chunks: ir.Value, mask: ir.Value) -> None:
    """.cp_mask: byte i of each 16-byte chunk is copied where bit i of `mask` is set; the others are not
    written at all."""
    builder = lw.builder

    def copy(index: ir.Value) -> None:
        base = builder.mul(index, ir.Constant(I64, 16))
        for byte in range(16):
            selected = builder.trunc(builder.lshr(mask, ir.Constant(I32, byte)), I1)
            with builder.if_then(selected):
                offset = builder.add(base, ir.Constant(I64, byte))
                builder.store(builder.load(_at(lw, source, offset), typ=I8), _at(lw, destination, offset))

    counted_loop(lw, chunks, copy)


def _reduce(lw: Lowering, ins: ast.Instruction) -> None:
    """cp.reduce.async.bulk.dst.src.completion{.L2::cache_hint}.op{.noftz}.type [dst], [src], size {, [mbar]}
    {, policy}: element by element, each a relaxed .gpu atomic."""
    to, of = _directions(lw, ins)
    operations = [m for m in ins.modifiers if m in _REDUCTIONS["global"]]
    types = [m for m in ins.modifiers if m in ast.TYPES]
    completions = [m for m in ins.modifiers if m in ("mbarrier::complete_tx::bytes", "bulk_group")]
    if len(operations) != 1 or len(types) != 1 or len(completions) != 1:
        raise lw.fail("cp.reduce.async.bulk needs one completion mechanism, one operation and one type")
    operation, t = operations[0], types[0]
    expected = {"shared::cluster": "mbarrier::complete_tx::bytes", "global": "bulk_group"}.get(to)
    if of != "shared::cta" or completions[0] != expected:
        raise lw.fail(f"no cp.reduce.async.bulk from .{of} to .{to} completes by .{completions[0]}")
    if t not in _REDUCTIONS[to][operation]:
        raise lw.fail(f".{operation}.{t} is not a reduction into .{to}")
    halves = t in ("f16", "bf16")
    if halves and operation != "add":
        raise lw.fail(f".{operation} on .{t}: the NaN and ±0 rules of half-precision min/max are not modelled")
    if halves != ins.has("noftz"):
        raise lw.fail(".noftz goes with (and is required by) .add of .f16/.bf16")
    hinted = ins.has("L2::cache_hint")
    if hinted and to != "global":
        raise lw.fail(".L2::cache_hint needs a .global source or destination")
    lw.check_modifiers(ins, {"reduce", "async", "bulk", to, of, completions[0], operation, "noftz", "L2::cache_hint"})
    mbarrier = to == "shared::cluster"
    operands = lw.operands(ins, 3 + mbarrier + hinted)
    destination, source, size = _address_operands(lw, operands, 2)[:3]
    to_pointer, of_pointer = lw.address(destination, _space(to)), lw.address(source, "shared")
    value_type, _ = _value_type(lw, t)
    element = ast.TYPE_SIZES[t]
    order = Order("monotonic", lw.target.syncscope("gpu"))
    llvm_operation = _llvm_operation(lw, operation, t)
    count = _size(lw, size)
    builder = lw.builder

    def reduce(index: ir.Value) -> None:
        offset = builder.mul(index, ir.Constant(I64, element))
        value = builder.load(_at(lw, of_pointer, offset), typ=value_type, align=element)
        target = _at(lw, to_pointer, offset)
        if t in _BFLOAT_TYPES:
            _bfloat_add(lw, target, value, order, element)
        else:
            atomic_rmw(builder, llvm_operation, target, value, order, element)

    counted_loop(lw, builder.udiv(count, ir.Constant(I64, element)), reduce)
    if mbarrier:
        _complete_tx(lw, operands[3], count)



# ------------------------------------------------------------------------------------------- st.bulk

def st_bulk(lw: Lowering, ins: ast.Instruction) -> None:
    """st.bulk{.weak}{.shared::cta} [a], size, 0: `size` (32- or 64-bit, a multiple of 8) bytes of zeros."""
    spaces = [m for m in ins.modifiers if m.startswith("shared")]
    if spaces not in ([], ["shared::cta"]):
        raise lw.fail("st.bulk writes .shared::cta or a generic address of it")
    lw.check_modifiers(ins, {"bulk", "weak", *spaces})
    address, size, value = lw.operands(ins, 3)
    if type(value) is not ast.IntImm or value.value != 0:
        raise lw.fail("st.bulk's initial value must be the immediate 0")
    if type(address) is not ast.Address or address.extra:
        raise lw.fail("st.bulk needs an [address]")
    pointer = lw.address(address, "shared" if spaces else "generic")
    words = lw.builder.lshr(lw.read(size, "u64"), ir.Constant(I64, 3))
    counted_loop(lw, words, lambda index: lw.builder.store(
        ir.Constant(I64, 0), _at(lw, pointer, lw.builder.mul(index, ir.Constant(I64, 8))), align=8))
