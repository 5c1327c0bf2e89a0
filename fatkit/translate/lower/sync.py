"""Synchronisation: fences (fence, membar), the CTA barriers bar/barrier (sync, arrive, red), nanosleep, and
the no-ops griddepcontrol and setmaxnreg (their docstrings say why).

Fences are LLVM fences at the PTX scope's sync scope:

    membar.cta / .gl / .sys                 seq_cst at cta / gpu / sys (sm_70+: membar is fence.sc)
    fence.sc.scope / fence.acq_rel.scope    seq_cst / acq_rel at scope (fence.scope: acq_rel)
    fence.acquire/.release.sync_restrict::… acquire / release at scope: restricted to .shared, which the
                                            unrestricted fence covers
    fence.mbarrier_init.release.cluster     release at cluster scope (orders the mbarrier.init stores)
    fence.proxy.tensormap::generic.sem.scope [a], 128 — sem at scope over all memory (the range only narrows)
    fence.proxy.alias / membar.proxy.alias  acq_rel at gpu scope: every access here goes through the one
                                            generic path, and an agent-scope fence also reconciles caches
                                            that virtual aliases of one location could disagree in
    fence.proxy.async{.global,.shared::cta} acq_rel at cta scope: asynchronous-proxy operations lower to
                                            ordinary accesses, so ordering the thread's accesses suffices

Barriers: `bar.sync 0` / `barrier.sync 0` with no thread count is the target's block barrier, unless the
kernel (or a function it calls) uses any other barrier form; then every barrier instruction of it goes
through the named barriers: on targets with `named_barrier_calls` (host) a call, elsewhere (AMDGPU, one
hardware barrier) a counter and generation per barrier in shared memory (module.py allocates and zeroes
them): 16 bits of generation over 16 bits of arrivals in one word, so that the arrival that completes a
phase is known from the value its atomic add returns, and arrivals for the next phase that come before
the completing thread advances the generation are kept. Two predicate counters a barrier, by phase
parity, carry bar.red. Threads count one by one (PTX counts warps of 32; equal while a warp's threads
arrive together and none has exited), and a thread waits by polling, so the threads of one wave must
arrive at a barrier together (as `.aligned`, and `bar`, promise).
"""

from __future__ import annotations

from llvmlite import ir

from fatkit.translate.lower.atomic import SCOPES, Order, atomic_load, atomic_rmw, fence, memory_order
from fatkit.translate.lower.core import I1, I16, I32, Lowering, handles
from fatkit.translate.lower.cluster import checked_cluster
from fatkit.translate.lower.warp import bar_warp_sync
from fatkit.translate.ptx import ast
from fatkit.translate.targets.base import NAMED_BARRIER_OPERATIONS

_MEMBAR_SCOPES = {"cta": "cta", "gl": "gpu", "sys": "sys"}
BARRIER_STATE_WORDS = 3  # per barrier: generation << 16 | arrivals, then the predicate counters of even/odd phases
BARRIERS = 16


@handles("membar")
def membar(lw: Lowering, ins: ast.Instruction) -> None:
    if ins.has("proxy"):
        _proxy_fence(lw, ins)
        return
    levels = [m for m in ins.modifiers if m in _MEMBAR_SCOPES]
    lw.check_modifiers(ins, set(levels))
    if len(levels) != 1:
        raise lw.fail("membar needs one of .cta/.gl/.sys")
    lw.operands(ins, 0)
    fence(lw.builder, Order("seq_cst", lw.target.syncscope(_MEMBAR_SCOPES[levels[0]])))


@handles("fence")
def fence_(lw: Lowering, ins: ast.Instruction) -> None:
    if ins.has("proxy"):
        _proxy_fence(lw, ins)
        return
    restricted = [m for m in ins.modifiers if m.startswith("sync_restrict::") or m == "mbarrier_init"]
    lw.check_modifiers(ins, {*restricted, "sc", "acq_rel", "acquire", "release", *SCOPES})
    allowed = {"acquire", "release"} if restricted else {"sc", "acq_rel"}
    order = memory_order(lw, ins, allowed, None if restricted else "acq_rel", None)
    if order is None:
        raise lw.fail(f"{ins.name} needs .acquire or .release")
    lw.operands(ins, 0)
    fence(lw.builder, order)


def _proxy_fence(lw: Lowering, ins: ast.Instruction):
    kinds = [m for m in ins.modifiers if m not in ("proxy", *SCOPES, "acquire", "release")]
    order: Order | None
    if kinds == ["alias"]:
        order = Order("acq_rel", lw.target.syncscope("gpu"))
    elif kinds and kinds[0] == "async" and set(kinds[1:]) <= {"global", "shared::cta", "shared::cluster"}:
        if "shared::cluster" in kinds:  # the workgroup's LDS (lower/cluster.py)
            checked_cluster(lw)
        order = Order("acq_rel", lw.target.syncscope("cta"))
    elif kinds and kinds[0] in ("tensormap::generic", "async::generic") and ins.opcode == "fence":
        lw.check_modifiers(ins, {"proxy", *kinds, *SCOPES, "acquire", "release"})
        order = memory_order(lw, ins, {"acquire", "release"}, None, None)
        if order is None or set(kinds[1:]) - {"sync_restrict::shared::cta", "sync_restrict::shared::cluster"}:
            raise lw.fail("a uni-directional proxy fence needs .acquire or .release and a scope")
        lw.operands(ins, 2 if kinds[0] == "tensormap::generic" and order.ordering == "acquire" else 0)
        fence(lw.builder, order)
        return
    else:
        raise lw.fail(f"fence.proxy.{'.'.join(kinds)} is not a proxy fence of the ISA")
    lw.check_modifiers(ins, {"proxy", *kinds})
    lw.operands(ins, 0)
    fence(lw.builder, order)


@handles("griddepcontrol")
def griddepcontrol(lw: Lowering, ins: ast.Instruction) -> None:
    """Programmatic dependent launch, which AMD does not have: a kernel of a stream starts only once the one
    before it has completed, with its memory writes visible. So `.wait` (wait for the prerequisite grids to
    complete and their writes to be visible) has nothing left to wait for, and `.launch_dependents` (let
    the dependent grid be scheduled before this one completes) only allows an earlier start: both are
    no-ops."""
    if len([m for m in ins.modifiers if m in ("launch_dependents", "wait")]) != 1:
        raise lw.fail("griddepcontrol is .launch_dependents or .wait")
    lw.check_modifiers(ins, {"launch_dependents", "wait"})
    lw.operands(ins, 0)


@handles("setmaxnreg")
def setmaxnreg(lw: Lowering, ins: ast.Instruction) -> None:
    """setmaxnreg.inc/.dec.sync.aligned.u32 n hands physical registers between the warpgroups of a CTA. PTX
    registers are virtual, so no value a thread can see depends on it, and AMD allocates a kernel's
    registers once for its whole run: a no-op once the form is checked (n in 24-256, a multiple of 8)."""
    if len([m for m in ins.modifiers if m in ("inc", "dec")]) != 1 or not ins.has("sync", "aligned"):
        raise lw.fail("setmaxnreg is setmaxnreg.inc/.dec.sync.aligned.u32")
    lw.check_modifiers(ins, {"inc", "dec", "sync", "aligned"})
    if lw.types(ins, 1) != ["u32"]:
        raise lw.fail("setmaxnreg takes .u32")
    (count,) = lw.operands(ins, 1)
    if type(count) is not ast.IntImm or not 24 <= count.value <= 256 or count.value % 8:
        raise lw.fail("setmaxnreg's register count is an immediate in 24-256, a multiple of 8")


@handles("nanosleep")
def nanosleep(lw: Lowering, ins: ast.Instruction) -> None:
    """The ISA bounds the sleep to [0, 2t] ns: the target's short pause (about 64 cycles on AMDGPU, none on
    the host) where t is at least 64 ns, else no sleep at all."""
    lw.check_modifiers(ins, set())
    lw.types(ins, 1)
    (delay,) = lw.operands(ins, 1)
    long_enough = lw.builder.icmp_unsigned(">=", lw.read(delay, "u32"), ir.Constant(I32, 64))
    with lw.builder.if_then(long_enough):
        lw.target.pause(lw.builder)


def needs_named_barriers(instruction: ast.Instruction) -> bool:
    """Whether a bar/barrier instruction is more than the whole block's barrier 0 (`bar.sync 0`)."""
    whole_block = (instruction.has("sync") and len(instruction.operands) == 1
                   and type(instruction.operands[0]) is ast.IntImm and instruction.operands[0].value == 0)
    return instruction.opcode in ("bar", "barrier") and not instruction.has("warp") and not whole_block


@handles("bar", "barrier")
def bar(lw: Lowering, ins: ast.Instruction) -> None:
    """bar{.cta}.sync/arrive/red and barrier{.cta}.sync/arrive/red{.aligned}: barrier a (0–15), thread
    count b; red writes the popc (u32) or and/or (pred) of predicate c over the phase's threads."""
    if ins.has("warp"):  # bar.warp.sync: a warp collective, not a CTA barrier
        bar_warp_sync(lw, ins)
        return
    if ins.has("cluster"):
        cluster_barrier(lw, ins)
        return
    kinds = [m for m in ins.modifiers if m in ("sync", "arrive", "red")]
    reductions = [m for m in ins.modifiers if m in ("popc", "and", "or")]
    if len(kinds) != 1 or len(reductions) != (kinds[0] == "red"):
        raise lw.fail("a barrier is .sync, .arrive or .red.popc/.and/.or")
    kind = kinds[0]
    lw.check_modifiers(ins, {"cta", kind, *reductions} | ({"aligned"} if ins.opcode == "barrier" else set()))
    if lw.target.shared_address_space is None:
        raise lw.fail(f"the {lw.target.name} target runs threads one after another and cannot "
                      "wait at a barrier")
    operands = list(ins.operands)
    destination = operands.pop(0) if kind == "red" else None
    predicate = operands.pop() if kind == "red" else None
    if not 1 <= len(operands) <= 2 or (kind == "arrive" and len(operands) != 2):
        raise lw.fail("expected a barrier and a thread count (required for .arrive)")
    if kind == "red":
        (t,) = lw.types(ins, 1)
        if t != ("u32" if reductions[0] == "popc" else "pred"):
            raise lw.fail(f"bar.red.{reductions[0]} writes .{'u32' if reductions[0] == 'popc' else 'pred'}")
    else:
        lw.types(ins, 0)
    if not lw.callees.named_barriers:
        lw.target.barrier(lw.builder)  # the whole block at barrier 0, the kernel's only barrier form
        return
    barrier = lw.read(operands[0], "u32")
    expected = lw.read(operands[1], "u32") if len(operands) == 2 else ir.Constant(I32, 0)
    operation = NAMED_BARRIER_OPERATIONS[reductions[0] if reductions else kind]
    vote = _predicate(lw, predicate) if predicate is not None else ir.Constant(I1, 0)
    if lw.target.named_barrier_calls:
        result = lw.target.named_barrier(lw.builder, barrier, expected, operation, vote)
    else:
        result = _shared_memory_barrier(lw, barrier, expected, kind, vote)
        if reductions and reductions[0] != "popc":
            whole = expected if len(operands) == 2 else _block_size(lw)
            all_or_any = (lw.builder.icmp_unsigned("==", result, whole) if reductions[0] == "and"
                          else lw.builder.icmp_unsigned("!=", result, ir.Constant(I32, 0)))
            result = lw.builder.zext(all_or_any, I32)
    if destination is not None:
        if reductions[0] == "popc":
            lw.write(destination, result, "u32")
        else:
            lw.write(destination, lw.builder.icmp_unsigned("!=", result, ir.Constant(I32, 0)), "pred")


def cluster_barrier(lw, ins) -> None:
    """barrier.cluster.arrive{.release|.relaxed}{.aligned} / barrier.cluster.wait{.acquire}{.aligned}: a
    cluster is one workgroup (lower/cluster.py) and every thread of it arrives before it waits, so waiting
    for all arrivals is the workgroup's barrier at the wait, and the arrive only orders the thread's earlier
    accesses (release) before it."""
    checked_cluster(lw)
    kinds = [m for m in ins.modifiers if m in ("arrive", "wait")]
    if ins.opcode != "barrier" or len(kinds) != 1 or ins.operands:
        raise lw.fail("expected barrier.cluster.arrive or barrier.cluster.wait, without operands")
    lw.check_modifiers(ins, {"cluster", "aligned", *kinds} | ({"release", "relaxed"} if kinds == ["arrive"]
                                                               else {"acquire"}))
    if lw.target.shared_address_space is None:
        raise lw.fail(f"the {lw.target.name} target runs threads one after another and cannot "
                      "wait at a barrier")
    if kinds == ["wait"]:
        lw.target.barrier(lw.builder)
    elif not ins.has("relaxed"):
        fence(lw.builder, Order("release", lw.target.syncscope("cta")))


def _predicate(lw: Lowering, operand: ast.Operand) -> ir.Value:
    if type(operand) is ast.Negated:
        return lw.builder.not_(lw.read(operand.operand, "pred"))
    return lw.read(operand, "pred")


def _block_size(lw: Lowering) -> ir.Value:
    x, y, z = (lw.target.special_register(lw.builder, "%ntid", c) for c in "xyz")
    return lw.builder.mul(lw.builder.mul(x, y), z)


def _shared_memory_barrier(lw: Lowering, barrier: ir.Value, expected: ir.Value, kind: str, vote: ir.Value) -> ir.Value:
    """Arrive at (and unless `kind` is arrive, wait for) a barrier of the shared-memory state; returns the
    phase's number of true votes for red, else 0 (see the module docstring)."""
    builder, state, layout = lw.builder, lw.callees.barrier_state, lw.callees.cluster
    if layout is not None:  # each CTA of a cluster has its barriers in its own slice
        state = layout.own_static(lw, state)
    cta = lw.target.syncscope("cta")
    everyone = builder.icmp_unsigned("==", expected, ir.Constant(I32, 0))
    expected = builder.select(everyone, _block_size(lw), expected)
    base = builder.mul(barrier, ir.Constant(I32, BARRIER_STATE_WORDS))
    word = builder.gep(state, [base], source_etype=I32)

    def counter(generation: ir.Value) -> ir.Value:  # the predicate counter of a phase
        parity = builder.and_(generation, ir.Constant(I32, 1))
        return builder.gep(state, [builder.add(base, builder.add(parity, ir.Constant(I32, 1)))], source_etype=I32)

    sixteen = ir.Constant(I32, 16)
    if kind == "red":  # every thread of a red phase waits, so the generation it reads is its phase's
        current = builder.lshr(atomic_load(builder, word, I32, Order("monotonic", cta), 4), sixteen)
        atomic_rmw(builder, "add", counter(current), builder.zext(vote, I32), Order("monotonic", cta), 4)
    old = atomic_rmw(builder, "add", word, ir.Constant(I32, 1), Order("acq_rel", cta), 4)
    arrivals = builder.and_(old, ir.Constant(I32, 0xFFFF))
    # Arrivals past `expected` belong to the next phases, which the completing thread has not opened yet.
    phase = builder.add(builder.lshr(old, sixteen), builder.udiv(arrivals, expected))
    completes = builder.icmp_unsigned(
        "==", builder.urem(builder.add(arrivals, ir.Constant(I32, 1)), expected), ir.Constant(I32, 0))
    # Branch-free, so that no lane of a wave spins while another of it has yet to open the next phase:
    # the completing thread clears the next phase's counter and advances the generation, the others add 0.
    # Whatever the kind: a bar.sync phase between two bar.red ones of a barrier must clear the counter of
    # the phase after it, which the red phase two before left its votes in.
    keep = builder.select(completes, ir.Constant(I32, 0), ir.Constant(I32, -1))
    atomic_rmw(builder, "and", counter(builder.add(phase, ir.Constant(I32, 1))), keep, Order("monotonic", cta), 4)
    advance = builder.sub(ir.Constant(I32, 1 << 16), expected)
    atomic_rmw(builder, "add", word, builder.select(completes, advance, ir.Constant(I32, 0)), Order("release", cta), 4)
    if kind == "arrive":
        return ir.Constant(I32, 0)
    wait, done = lw.function.append_basic_block("barrier.wait"), lw.function.append_basic_block("barrier.done")
    builder.branch(wait)
    builder.position_at_end(wait)
    now = atomic_load(builder, word, I32, Order("acquire", cta), 4)
    ahead = builder.trunc(builder.sub(builder.lshr(now, sixteen), phase), I16)  # generations past ours, mod 2^16
    passed = builder.icmp_signed(">", ahead, ir.Constant(I16, 0))
    pause = lw.function.append_basic_block("barrier.pause")
    builder.cbranch(passed, done, pause)
    builder.position_at_end(pause)
    lw.target.pause(builder)
    builder.branch(wait)
    builder.position_at_end(done)
    if kind != "red":
        return ir.Constant(I32, 0)
    return atomic_load(builder, counter(phase), I32, Order("monotonic", cta), 4)
