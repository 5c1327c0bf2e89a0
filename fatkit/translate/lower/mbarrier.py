"""mbarrier: the PTX ISA's transaction barrier objects, kept in their own 64-bit `.shared` word.

The ISA makes the object opaque (8 bytes, 8-aligned, in `.shared::cta`) and defines what it tracks: the
current phase, the pending arrival count of that phase, the expected arrival count of the next phases
and the tx-count (asynchronous transactions, bytes for the copies, still outstanding). Here the word
holds exactly those, and every operation is one compare-and-swap loop on it, so that each is atomic:

    bits  0–19  pending arrival count    0 … 2^20-1 (the ISA's range)
    bits 20–39  expected arrival count   1 … 2^20-1
    bits 40–60  tx-count                 -(2^20-1) … 2^20-1, two's complement in 21 bits
    bits 61–63  phase, modulo 8          (its low bit is the phase parity)

`init` stores phase 0, pending = expected = count, tx-count 0. An update applies its deltas (arrive-on:
pending -= count; expect-tx: tx-count += n; complete-tx: tx-count -= n; arrive_drop: expected -= count
as well) and, when pending and tx-count are then both zero, completes the phase in the same atomic step:
phase + 1, pending reset to the expected count. A state token (`mbarrier.arrive`'s result) is the word
as it was before the arrive-on: `mbarrier.pending_count` reads the pending count from it, which is the
ISA's "pending count prior to the arrive-on", and `test_wait`/`try_wait` with a token report its phase
complete once the word's phase differs from the token's (the ISA allows only tokens of the current or
the immediately preceding phase, which three phase bits tell apart). `.parity` waits compare parities.

Memory ordering: arrive-on operations are release (default) or relaxed RMWs of the word at the PTX
scope's sync scope; every later update is an RMW of the same word, so it continues their release
sequences, and a `test_wait`/`try_wait` (acquire by default) that reads a completed phase synchronises
with every release arrive of that phase. `expect_tx`/`complete_tx` are relaxed, as the ISA defines.
`try_wait` tests, and if the phase is not complete pauses once (the target's short sleep) and tests
again: the ISA lets it return false after a system-dependent time, so the suspend-time hint is only read.
`inval` lowers to nothing: afterwards the program may reuse the 8 bytes, which only needs program order.

Waiting is polling (the program's own loop around test_wait/try_wait), so as with the CTA barriers of
lower/sync.py a thread must not wait for wave-mates that can only arrive after its wait loop: the lanes
of an AMD wave (on gfx9 two PTX warps) run in lockstep, so a producer and a consumer of one mbarrier that
share a wave and diverge around the loop can hang there, which NVIDIA's independent thread scheduling
tolerates. Producer and consumer warps of different waves (warp-specialised kernels use warpgroups of
four warps) are fine. On the host target the threads of a block run together only when the kernel has a
`bar.sync` or a warp collective (module.py), as mbarrier programs do to make `init` visible to the other
threads; one that waits on an mbarrier without either would run its threads one by one there and spin.

Clusters (lower/cluster.py): a cluster of several CTAs runs as one workgroup whose LDS holds every CTA's
shared memory, so `.shared::cluster` addresses — an mbarrier of another CTA that `mapa` named among them —
are LDS addresses like `.shared::cta` ones, and `.cluster` scope is the agent's on AMDGPU, whether the PTX
fixes the cluster shape or the launch gives it.
"""

from __future__ import annotations

from llvmlite import ir

from fatkit.translate.lower.atomic import Order, atomic_load, atomic_store, compare_exchange, memory_order
from fatkit.translate.lower.core import I1, I32, I64, Lowering, handles
from fatkit.translate.lower.cluster import checked_cluster
from fatkit.translate.ptx import ast

COUNT_BITS, TX_BITS = 20, 21
_EXPECTED_SHIFT, _TX_SHIFT, _PHASE_SHIFT = 20, 40, 61
_COUNT_MASK, _TX_MASK = (1 << COUNT_BITS) - 1, (1 << TX_BITS) - 1
_SPACES = ("shared", "shared::cta", "shared::cluster")


def mbarrier_word(pending: int, expected: int, tx: int = 0, phase: int = 0) -> int:
    """The 64-bit word of an mbarrier in this layout (tests read the objects they run)."""
    return ((phase & 7) << _PHASE_SHIFT | (tx & _TX_MASK) << _TX_SHIFT
            | (expected & _COUNT_MASK) << _EXPECTED_SHIFT | pending & _COUNT_MASK)


def barrier_space(lw, ins) -> tuple[str, str | None]:
    """(address space, qualifier) of an mbarrier operand: .shared{::cta} and, in a cluster of one CTA,
    .shared::cluster are the CTA's shared memory; no qualifier is a generic address."""
    qualifiers = [m for m in ins.modifiers if m in _SPACES or m.startswith("shared::")]
    if len(qualifiers) > 1:
        raise lw.fail("more than one state space")
    if not qualifiers:
        return "generic", None
    if qualifiers[0] not in _SPACES:
        raise lw.fail(f".{qualifiers[0]} is not a state space of mbarrier objects")
    if qualifiers[0] == "shared::cluster":
        checked_cluster(lw)
    return "shared", qualifiers[0]


class _Fields:
    """The decoded word: i64 values, tx-count sign-extended."""

    def __init__(self, builder: ir.IRBuilder, word: ir.Value):
        mask = ir.Constant(I64, _COUNT_MASK)
        self.pending = builder.and_(word, mask)
        self.expected = builder.and_(builder.lshr(word, ir.Constant(I64, _EXPECTED_SHIFT)), mask)
        self.tx = builder.ashr(builder.shl(word, ir.Constant(I64, 64 - _PHASE_SHIFT)),
                               ir.Constant(I64, 64 - TX_BITS))
        self.phase = builder.lshr(word, ir.Constant(I64, _PHASE_SHIFT))


def _compose(builder: ir.IRBuilder, pending: ir.Value, expected: ir.Value, tx: ir.Value, phase: ir.Value) -> ir.Value:
    def field(value: ir.Value, mask: int, shift: int) -> ir.Value:
        return builder.shl(builder.and_(value, ir.Constant(I64, mask)), ir.Constant(I64, shift))

    return builder.or_(builder.or_(field(phase, 7, _PHASE_SHIFT), field(tx, _TX_MASK, _TX_SHIFT)),
                       builder.or_(field(expected, _COUNT_MASK, _EXPECTED_SHIFT), field(pending, _COUNT_MASK, 0)))


def update(lw: Lowering, pointer: ir.Value, order: Order, arrivals: ir.Value | None = None, tx: ir.Value | None = None,
           dropped: ir.Value | None = None) -> ir.Value:
    """One atomic transition of the mbarrier at `pointer`: `arrivals` arrive-ons (i64), `tx` added to the
    tx-count (i64, signed), `dropped` taken off the expected count; completes the phase when pending and
    tx-count reach zero. Returns the word before (the state token)."""
    builder, zero = lw.builder, ir.Constant(I64, 0)
    first = atomic_load(builder, pointer, I64, Order("monotonic", order.scope), 8)
    entry = builder.block
    retry = lw.function.append_basic_block("mbarrier.retry")
    done = lw.function.append_basic_block("mbarrier.done")
    builder.branch(retry)
    builder.position_at_end(retry)
    old = builder.phi(I64)
    old.add_incoming(first, entry)
    fields = _Fields(builder, old)
    pending = builder.sub(fields.pending, arrivals or zero)
    expected = builder.sub(fields.expected, dropped or zero)
    count = builder.add(fields.tx, tx or zero)
    complete = builder.and_(builder.icmp_signed("==", pending, zero), builder.icmp_signed("==", count, zero))
    following = _compose(builder, pending, expected, count, fields.phase)
    completed = _compose(builder, expected, expected, zero, builder.add(fields.phase, ir.Constant(I64, 1)))
    found = compare_exchange(builder, pointer, old, builder.select(complete, completed, following), order, 8)
    old.add_incoming(found, builder.block)
    builder.cbranch(builder.icmp_unsigned("==", found, old), done, retry)
    builder.position_at_end(done)
    return old


def phase_completed(lw: Lowering, pointer: ir.Value, order: Order, token: ir.Value | None, parity: ir.Value | None) -> ir.Value:
    """i1: whether the phase of state `token` (or of parity `parity`, i32) has completed."""
    builder = lw.builder
    phase = builder.lshr(atomic_load(builder, pointer, I64, order, 8), ir.Constant(I64, _PHASE_SHIFT))
    if token is not None:
        return builder.icmp_unsigned("!=", phase, builder.lshr(token, ir.Constant(I64, _PHASE_SHIFT)))
    current = builder.trunc(builder.and_(phase, ir.Constant(I64, 1)), I32)
    return builder.icmp_unsigned("!=", current, builder.and_(parity, ir.Constant(I32, 1)))


def _pointer(lw: Lowering, ins: ast.Instruction, operand: ast.Operand) -> ir.Value:
    space, _ = barrier_space(lw, ins)
    if type(operand) is not ast.Address:
        raise lw.fail("the mbarrier operand must be an [address]")
    return lw.address(operand, space)


def _order(lw: Lowering, ins: ast.Instruction, allowed: set[str], default: str) -> Order:
    """The `.sem.scope` pair (the ISA: given together, else `default` at .cta)."""
    if ins.has("cluster"):
        checked_cluster(lw)
    return memory_order(lw, ins, allowed, default, "cta")


def _count(lw: Lowering, operand: ast.Operand) -> ir.Value:
    return lw.builder.zext(lw.read(operand, "u32"), I64)


_SUBOPERATIONS = ("init", "inval", "arrive", "arrive_drop", "expect_tx", "complete_tx", "test_wait", "try_wait",
                  "pending_count")


@handles("mbarrier")
def mbarrier(lw: Lowering, ins: ast.Instruction) -> None:
    operations = [m for m in ins.modifiers if m in _SUBOPERATIONS]
    if not operations or operations[0] != ins.modifiers[0]:
        raise lw.fail("mbarrier needs one of ." + "/.".join(_SUBOPERATIONS))
    operation = operations[0]
    if "b64" not in ins.modifiers:
        raise lw.fail("mbarrier objects are .b64")
    spaces = {m for m in ins.modifiers if m.startswith("shared")}
    if operation in ("init", "inval"):
        lw.check_modifiers(ins, {operation, *spaces})
        d, *rest = lw.operands(ins, 2 if operation == "init" else 1)
        pointer = _pointer(lw, ins, d)
        if operation == "init":  # phase 0, pending = expected = count, tx-count 0
            count = lw.builder.and_(_count(lw, rest[0]), ir.Constant(I64, _COUNT_MASK))
            word = lw.builder.or_(lw.builder.shl(count, ir.Constant(I64, _EXPECTED_SHIFT)), count)
            _store_word(lw, pointer, word)
        return
    if operation == "pending_count":
        lw.check_modifiers(ins, {operation})
        d, state = lw.operands(ins, 2)
        lw.write(d, lw.builder.trunc(lw.builder.and_(lw.read(state, "b64"), ir.Constant(I64, _COUNT_MASK)), I32), "u32")
        return
    if operation in ("arrive", "arrive_drop"):
        _arrive(lw, ins, operation, spaces)
    elif operation in ("expect_tx", "complete_tx"):
        lw.check_modifiers(ins, {operation, *spaces, "relaxed", "cta", "cluster"})
        address, amount = lw.operands(ins, 2)
        tx = _count(lw, amount)
        update(lw, _pointer(lw, ins, address), _order(lw, ins, {"relaxed"}, "relaxed"),
               tx=tx if operation == "expect_tx" else lw.builder.neg(tx))
    else:
        _wait(lw, ins, operation, spaces)


def _store_word(lw: Lowering, pointer: ir.Value, word: ir.Value) -> None:
    atomic_store(lw.builder, word, pointer, Order("monotonic", lw.target.syncscope("cta")), 8)


def _arrive(lw: Lowering, ins: ast.Instruction, operation: str, spaces: set[str]) -> None:
    """arrive / arrive_drop {.expect_tx | .noComplete}{.sem.scope}: state, [addr] {, count | txCount}."""
    expect = ins.has("expect_tx")
    lw.check_modifiers(ins, {operation, *spaces, "expect_tx", "noComplete", "release", "relaxed", "cta", "cluster"})
    if expect and ins.has("noComplete"):
        raise lw.fail(".expect_tx and .noComplete do not go together")
    operands = ins.operands
    if len(operands) not in (2, 3) or ((expect or ins.has("noComplete")) and len(operands) != 3):
        raise lw.fail("expected state, [addr] and a count (required with .expect_tx and .noComplete)")
    state, address = operands[:2]
    _, qualifier = barrier_space(lw, ins)
    if qualifier == "shared::cluster" and type(state) is not ast.Sink:
        raise lw.fail("an arrive on a .shared::cluster mbarrier returns no state: its destination must be _")
    count = _count(lw, operands[2]) if len(operands) == 3 and not expect else ir.Constant(I64, 1)
    tx = _count(lw, operands[2]) if expect else None
    pointer = _pointer(lw, ins, address)
    token = update(lw, pointer, _order(lw, ins, {"release", "relaxed"}, "release"), arrivals=count, tx=tx,
                   dropped=count if operation == "arrive_drop" else None)
    if type(state) is not ast.Sink:
        lw.write(state, token, "b64")


def _wait(lw: Lowering, ins: ast.Instruction, operation: str, spaces: set[str]) -> None:
    """test_wait / try_wait {.parity}{.sem.scope}: waitComplete, [addr], state | phaseParity {, suspendTimeHint}."""
    parity = ins.has("parity")
    unsupported = [m for m in ins.modifiers if m.startswith(("phase_type::", "layout::"))]
    if unsupported:
        raise lw.fail(f".{unsupported[0]}: mbarrier phase types and layouts are not supported (sm_100 forms)")
    lw.check_modifiers(ins, {operation, *spaces, "parity", "acquire", "relaxed", "cta", "cluster"})
    operands = ins.operands
    hinted = operation == "try_wait" and len(operands) == 4
    if len(operands) != 3 + hinted:
        raise lw.fail("expected waitComplete, [addr], a state or parity" +
                      (" and an optional suspend-time hint" if operation == "try_wait" else ""))
    done, address, phase = operands[:3]
    if hinted:
        lw.read(operands[3], "u32")  # a time limit the ISA lets the wait ignore
    pointer = _pointer(lw, ins, address)
    order = _order(lw, ins, {"acquire", "relaxed"}, "acquire")
    token = None if parity else lw.read(phase, "b64")
    phase_parity = lw.read(phase, "u32") if parity else None
    complete = phase_completed(lw, pointer, order, token, phase_parity)
    if operation == "try_wait":  # not complete yet: pause once and look again
        builder = lw.builder
        first, pause = builder.block, lw.function.append_basic_block("try_wait.pause")
        after = lw.function.append_basic_block("try_wait.done")
        builder.cbranch(complete, after, pause)
        builder.position_at_end(pause)
        lw.target.pause(builder)
        again = phase_completed(lw, pointer, order, token, phase_parity)
        retested = builder.block
        builder.branch(after)
        builder.position_at_end(after)
        result = builder.phi(I1)
        result.add_incoming(ir.Constant(I1, 1), first)
        result.add_incoming(again, retested)
        complete = result
    lw.write(done, complete, "pred")
