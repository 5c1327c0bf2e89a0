"""Warp collectives: shfl (.sync and the deprecated form), vote (.sync and without), match.sync, redux.sync,
activemask, elect.sync and bar.warp.sync, as the PTX ISA defines them for a 32-lane warp, computed on the
target's hardware-lane interface (`Target.lane_id`, `exchange`, `ballot`, `active_lanes`, `wave_barrier`).

A 64-lane wave holds two warps: the PTX lane is the hardware lane mod 32 and a warp's lanes start at its
base hardware lane (0 or 32). A membermask names lanes of the executing thread's own warp, so it is shifted
to that base before it reaches the target, and wave masks coming back are shifted down again (vote takes the
whole wave's ballot and applies the membermask to the warp's 32 bits after). Forms without
.sync take part with the lanes executing together (`active_lanes`). Values read from a lane that is
inactive or outside the membermask are unspecified, as in PTX; those of the lanes taking part are exact.
"""

from __future__ import annotations

from llvmlite import ir

from fatkit.translate.lower.core import F32, I1, I32, Lowering, handles
from fatkit.translate.ptx import ast
from fatkit.translate.targets.base import Unavailable

WARP = 32
M32 = 0xFFFFFFFF
# Opcodes whose threads must run together where a target runs them one by one (bar.warp.sync is `bar`).
COLLECTIVES = frozenset({"shfl", "vote", "match", "redux", "activemask", "elect", "ldmatrix", "stmatrix",
                         "movmatrix", "mma", "wmma", "wgmma"})
CANONICAL_NAN = 0x7FFFFFFF  # PTX's canonical f32 NaN


class WarpPosition:
    """Where the executing thread is: its hardware lane, PTX lane and the base hardware lane of its warp."""

    def __init__(self, lw: Lowering):
        self.lw, self.builder, self.wave = lw, lw.builder, ir.IntType(lw.target.wave_size)
        self.hardware_lane = self.lane_call(lambda target: target.lane_id(self.builder))
        self.lane = self.builder.and_(self.hardware_lane, ir.Constant(I32, WARP - 1))
        self.base = self.builder.sub(self.hardware_lane, self.lane)

    def to_wave(self, mask: ir.Value) -> ir.Value:
        """A 32-bit mask of the warp's lanes as a wave mask."""
        if self.wave.width == WARP:
            return mask
        return self.builder.shl(self.builder.zext(mask, self.wave), self.builder.zext(self.base, self.wave))

    def to_warp(self, mask: ir.Value) -> ir.Value:
        """The 32 bits of a wave mask that belong to the executing thread's warp."""
        if self.wave.width == WARP:
            return mask
        return self.builder.trunc(self.builder.lshr(mask, self.builder.zext(self.base, self.wave)), I32)

    def members(self, operand: ast.Operand | None) -> ir.Value:
        """The wave mask of the lanes taking part: the membermask's, or those of the warp executing together."""
        if operand is None:
            active = self.lane_call(lambda target: target.active_lanes(self.builder))
            return self.builder.and_(active, self.to_wave(ir.Constant(I32, M32)))
        return self.to_wave(self.lw.read(operand, "b32"))

    def lane_call(self, call):
        """Call the target's lane interface, reporting a target without it at the instruction."""
        try:
            return call(self.lw.target)
        except Unavailable as error:
            raise self.lw.fail(str(error)) from error


def _split(lw: Lowering, ins: ast.Instruction, sync_count: int) -> tuple[tuple[ast.Operand, ...], ast.Operand | None]:
    """The operands before the membermask, and the membermask (None for a form without .sync)."""
    if "sync" in ins.modifiers:
        operands = lw.operands(ins, sync_count)
        return operands[:-1], operands[-1]
    return lw.operands(ins, sync_count - 1), None


def _mode(lw: Lowering, ins: ast.Instruction, modes: tuple[str, ...]) -> str:
    chosen = [m for m in ins.modifiers if m in modes]
    if len(chosen) != 1:
        raise lw.fail(f"expected one mode of {', '.join('.' + m for m in modes)}")
    return chosen[0]


def _destinations(lw: Lowering, operand: ast.Operand, predicate_allowed: bool) -> tuple[ast.Operand, ast.Operand | None]:
    """`d` or `d|p`: the value destination (maybe `_`) and the predicate destination (None if absent)."""
    if type(operand) is ast.Pair:
        if not predicate_allowed:
            raise lw.fail("this form has no predicate destination")
        return operand.first, None if type(operand.second) is ast.Sink else operand.second
    return operand, None


def _write(lw: Lowering, operand: ast.Operand | None, value: ir.Value, ptx_type: str) -> None:
    if operand is not None and type(operand) is not ast.Sink:
        lw.write(operand, value, ptx_type)


def _predicate(lw: Lowering, operand: ast.Operand) -> ir.Value:
    if type(operand) is ast.Negated:
        return lw.builder.not_(lw.read(operand.operand, "pred"))
    return lw.read(operand, "pred")


def _fold_lanes(lw: Lowering, warp: WarpPosition, exchange, initial: ir.Value, step) -> ir.Value:
    """Fold `step(acc, ptx_lane, value)` over the lanes of the exchange, lowest first: a loop over the
    wave-uniform `uniform_lanes` (uniform reads), skipping the lanes that did not take part."""
    builder, function = lw.builder, lw.function
    start = builder.block
    loop, body, done = (function.append_basic_block(name) for name in ("lanes", "lane", "lanes.done"))
    builder.branch(loop)
    builder.position_at_end(loop)
    remaining, acc = builder.phi(warp.wave), builder.phi(initial.type)
    remaining.add_incoming(exchange.uniform_lanes, start)
    acc.add_incoming(initial, start)
    builder.cbranch(builder.icmp_unsigned("==", remaining, ir.Constant(warp.wave, 0)), done, body)
    builder.position_at_end(body)
    lowest = lw.intrinsic("llvm.cttz", [remaining, ir.Constant(I1, 1)])
    hardware_lane = builder.trunc(lowest, I32) if warp.wave.width > 32 else lowest
    value = exchange.read(builder, hardware_lane, uniform=True)
    took_part = builder.trunc(builder.lshr(exchange.lanes, lowest), I1)
    ptx_lane = builder.and_(hardware_lane, ir.Constant(I32, WARP - 1))
    folded = builder.select(took_part, step(acc, ptx_lane, value), acc)
    remaining.add_incoming(builder.and_(remaining, builder.sub(remaining, ir.Constant(warp.wave, 1))), builder.block)
    acc.add_incoming(folded, builder.block)
    builder.branch(loop)
    builder.position_at_end(done)
    return acc


# ------------------------------------------------------------------------------------------------ shfl

@handles("shfl")
def shfl(lw: Lowering, ins: ast.Instruction) -> None:
    """PTX's pseudo-code: maxLane = (lane & segmask) | (c & ~segmask), minLane = lane & segmask; the
    source lane j by mode; out of range (pval false) a lane reads its own value."""
    lw.check_modifiers(ins, {"sync", "up", "down", "bfly", "idx"})
    mode = _mode(lw, ins, ("up", "down", "bfly", "idx"))
    if lw.types(ins, 1) != ["b32"]:
        raise lw.fail("shfl moves .b32 values")
    (destination, a, b, c), membermask = _split(lw, ins, 5)
    value_out, predicate_out = _destinations(lw, destination, predicate_allowed=True)
    builder = lw.builder
    warp = WarpPosition(lw)
    members = warp.members(membermask)
    lane_bits = ir.Constant(I32, WARP - 1)
    lane = warp.lane
    offset = builder.and_(lw.read(b, "b32"), lane_bits)
    clamp_word = lw.read(c, "b32")
    clamp = builder.and_(clamp_word, lane_bits)
    segmask = builder.and_(builder.lshr(clamp_word, ir.Constant(I32, 8)), lane_bits)
    outside = builder.xor(segmask, ir.Constant(I32, M32))
    max_lane = builder.or_(builder.and_(lane, segmask), builder.and_(clamp, outside))
    if mode == "up":
        j = builder.sub(lane, offset)  # may go below 0: compared signed
        in_range = builder.icmp_signed(">=", j, max_lane)
    else:
        if mode == "down":
            j = builder.add(lane, offset)
        elif mode == "bfly":
            j = builder.xor(lane, offset)
        else:
            j = builder.or_(builder.and_(lane, segmask), builder.and_(offset, outside))
        in_range = builder.icmp_unsigned("<=", j, max_lane)
    source = builder.add(warp.base, builder.select(in_range, j, lane))
    exchange = warp.lane_call(lambda target: target.exchange(builder, lw.read(a, "b32"), members))
    _write(lw, value_out, exchange.read(builder, source, uniform=False), "b32")
    _write(lw, predicate_out, in_range, "pred")


# ------------------------------------------------------------------------------------------------ vote

@handles("vote")
def vote(lw: Lowering, ins: ast.Instruction) -> None:
    lw.check_modifiers(ins, {"sync", "all", "any", "uni", "ballot"})
    mode = _mode(lw, ins, ("all", "any", "uni", "ballot"))
    if lw.types(ins, 1) != (["b32"] if mode == "ballot" else ["pred"]):
        raise lw.fail("vote.ballot takes .b32, vote.all/any/uni take .pred")
    (destination, source), membermask = _split(lw, ins, 3)
    builder = lw.builder
    warp = WarpPosition(lw)
    predicate = _predicate(lw, source)
    if membermask is None or warp.wave.width == WARP:
        members = warp.members(membermask)
        votes, lanes = warp.lane_call(lambda target: target.ballot(builder, predicate, members))
        votes, lanes = warp.to_warp(votes), warp.to_warp(lanes)
    else:  # a 64-lane wave: the whole wave's votes, the membermask applied to the warp's 32 bits after (the
        # same bits, without the membermask shifted to a wave mask and back)
        every_lane = ir.Constant(warp.wave, (1 << warp.wave.width) - 1)
        votes, lanes = warp.lane_call(lambda target: target.ballot(builder, predicate, every_lane))
        member_bits = lw.read(membermask, "b32")
        votes = builder.and_(warp.to_warp(votes), member_bits)
        lanes = builder.and_(warp.to_warp(lanes), member_bits)
    if mode == "ballot":
        lw.write(destination, votes, "b32")
        return
    every = builder.icmp_unsigned("==", votes, lanes)
    some = builder.icmp_unsigned("!=", votes, ir.Constant(I32, 0))
    result = {"all": every, "any": some, "uni": builder.or_(every, builder.not_(some))}[mode]
    lw.write(destination, result, "pred")


# ------------------------------------------------------------------------------------------------ match

@handles("match")
def match(lw: Lowering, ins: ast.Instruction) -> None:
    """.any: the lanes holding the executing lane's value; .all: the lanes taking part (the non-exited ones
    of the membermask; and p true) if they all hold the same value, else 0."""
    lw.check_modifiers(ins, {"sync", "any", "all"})
    mode = _mode(lw, ins, ("any", "all"))
    (ptx_type,) = lw.types(ins, 1)
    if ptx_type not in ("b32", "b64") or "sync" not in ins.modifiers:
        raise lw.fail("match is match.any/all.sync of .b32 or .b64")
    destination, a, membermask = lw.operands(ins, 3)
    value_out, predicate_out = _destinations(lw, destination, predicate_allowed=mode == "all")
    builder = lw.builder
    warp = WarpPosition(lw)
    mine = lw.read(a, ptx_type)
    exchange = warp.lane_call(lambda target: target.exchange(builder, mine, warp.members(membermask)))

    def same(acc, lane, value):
        return builder.or_(acc, builder.shl(builder.zext(builder.icmp_unsigned("==", value, mine), I32), lane))

    matching = _fold_lanes(lw, warp, exchange, ir.Constant(I32, 0), same)
    if mode == "any":
        _write(lw, value_out, matching, "b32")
        return
    taking_part = warp.to_warp(exchange.lanes)
    every = builder.icmp_unsigned("==", matching, taking_part)
    _write(lw, value_out, builder.select(every, taking_part, ir.Constant(I32, 0)), "b32")
    _write(lw, predicate_out, every, "pred")


# ------------------------------------------------------------------------------------------------ redux

_INTEGER_REDUCTIONS = {  # (op, type) → (identity, combine)
    ("add", "u32"): (0, lambda b, x, y: b.add(x, y)),
    ("add", "s32"): (0, lambda b, x, y: b.add(x, y)),
    ("min", "u32"): (M32, lambda b, x, y: b.select(b.icmp_unsigned("<", x, y), x, y)),
    ("max", "u32"): (0, lambda b, x, y: b.select(b.icmp_unsigned(">", x, y), x, y)),
    ("min", "s32"): (0x7FFFFFFF, lambda b, x, y: b.select(b.icmp_signed("<", x, y), x, y)),
    ("max", "s32"): (0x80000000, lambda b, x, y: b.select(b.icmp_signed(">", x, y), x, y)),
    ("and", "b32"): (M32, lambda b, x, y: b.and_(x, y)),
    ("or", "b32"): (0, lambda b, x, y: b.or_(x, y)),
    ("xor", "b32"): (0, lambda b, x, y: b.xor(x, y)),
}


@handles("redux")
def redux(lw, ins):
    """redux.sync over the lanes of the membermask. .f32 min/max order -0.0 below +0.0; without .NaN they
    skip NaNs (all NaN: the canonical NaN), with .NaN any NaN makes the canonical NaN; .abs takes |x|."""
    lw.check_modifiers(ins, {"sync", "add", "min", "max", "and", "or", "xor", "abs", "NaN"})
    op = _mode(lw, ins, ("add", "min", "max", "and", "or", "xor"))
    (ptx_type,) = lw.types(ins, 1)
    if "sync" not in ins.modifiers:
        raise lw.fail("redux needs .sync")
    if ptx_type != "f32" and ("abs" in ins.modifiers or "NaN" in ins.modifiers):
        raise lw.fail(".abs and .NaN apply to redux.sync.min/max.f32 only")
    if ptx_type != "f32" and (op, ptx_type) not in _INTEGER_REDUCTIONS:
        raise lw.fail(f"redux.sync.{op} does not take .{ptx_type}")
    if ptx_type == "f32" and op not in ("min", "max"):
        raise lw.fail("redux.sync.f32 is .min or .max")
    destination, source, membermask = lw.operands(ins, 3)
    builder = lw.builder
    warp = WarpPosition(lw)
    bits = lw.read(source, "b32")
    exchange = warp.lane_call(lambda target: target.exchange(builder, bits, warp.members(membermask)))
    if ptx_type != "f32":
        identity, combine = _INTEGER_REDUCTIONS[op, ptx_type]
        result = _fold_lanes(lw, warp, exchange, ir.Constant(I32, identity),
                             lambda acc, lane, value: combine(builder, acc, value))
        lw.write(destination, result, "b32")
        return
    propagate = "NaN" in ins.modifiers
    # llvm.minimum/maximum propagate NaN, llvm.minimumnum/maximumnum skip it; both order -0.0 < +0.0.
    name = f"llvm.{op}imum{'' if propagate else 'num'}"
    identity = ir.Constant(F32, float("nan") if not propagate else float("inf") if op == "min" else float("-inf"))

    def combine(acc, lane, value):
        number = builder.bitcast(value, F32)
        if "abs" in ins.modifiers:
            number = lw.intrinsic("llvm.fabs", [number])
        return lw.intrinsic(name, [acc, number])

    result = _fold_lanes(lw, warp, exchange, identity, combine)
    is_nan = builder.fcmp_unordered("uno", result, result)
    lw.write(destination, builder.select(is_nan, ir.Constant(I32, CANONICAL_NAN), builder.bitcast(result, I32)),
             "b32")


# ------------------------------------------------------------------------------------------------ the rest

@handles("activemask")
def activemask(lw: Lowering, ins: ast.Instruction) -> None:
    lw.check_modifiers(ins, set())
    if lw.types(ins, 1) != ["b32"]:
        raise lw.fail("activemask writes .b32")
    (destination,) = lw.operands(ins, 1)
    warp = WarpPosition(lw)
    lw.write(destination, warp.to_warp(warp.members(None)), "b32")


@handles("elect")
def elect(lw: Lowering, ins: ast.Instruction) -> None:
    """The leader is the lowest lane of the membermask taking part: the same one every time."""
    lw.check_modifiers(ins, {"sync"})
    if "sync" not in ins.modifiers:
        raise lw.fail("elect needs .sync")
    destination, membermask = lw.operands(ins, 2)
    if type(destination) is not ast.Pair or type(destination.second) is ast.Sink:
        raise lw.fail("elect.sync writes d|p, p a predicate register (d may be _)")
    builder = lw.builder
    warp = WarpPosition(lw)
    members = warp.members(membermask)
    _, lanes = warp.lane_call(lambda target: target.ballot(builder, ir.Constant(I1, 1), members))
    leader = lw.intrinsic("llvm.cttz", [warp.to_warp(lanes), ir.Constant(I1, 1)])
    _write(lw, destination.first, leader, "b32")
    _write(lw, destination.second, builder.icmp_unsigned("==", warp.lane, leader), "pred")


def bar_warp_sync(lw: Lowering, ins: ast.Instruction):
    """bar.warp.sync membermask (dispatched from `bar` in sync.py)."""
    lw.check_modifiers(ins, {"warp", "sync"})
    if ins.modifiers != ("warp", "sync"):
        raise lw.fail("expected bar.warp.sync")
    (membermask,) = lw.operands(ins, 1)
    warp = WarpPosition(lw)
    members = warp.members(membermask)
    warp.lane_call(lambda target: target.wave_barrier(lw.builder, members))
