"""The memory model and atomics: `.sem`/`.scope` qualifiers as LLVM orderings and sync scopes, the LLVM
atomic instructions that carry them (llvmlite's own print neither `syncscope` nor `volatile`), and atom/red.

PTX scopes become the target's sync scopes (`Target.syncscope`: workgroup/agent/system on AMDGPU). Sizes
and orderings map one to one: `.relaxed` is LLVM `monotonic`, `.acquire`/`.release`/`.acq_rel` their
namesakes, `.sc` (fences) `seq_cst`. atom/red default to `.relaxed.gpu`. Operations:

    add (integer)  add          add (f32/f64/f16/bf16, pairs)  fadd (round to nearest even)
    and/or/xor     and/or/xor   exch                            xchg
    min/max        min/max (.s) umin/umax (.u)                  cas   cmpxchg
    inc            uinc_wrap: (old >= b) ? 0 : old + 1
    dec            udec_wrap: (old == 0 || old > b) ? b : old - 1

atom takes .relaxed/.acquire/.release/.acq_rel, red .relaxed/.release. Vector atomics
(`atom.global.v4.f32.add`) are one atomic per element, as the ISA guarantees atomicity only element by
element. f16/bf16 values are read from and written to their bit registers (b16/b32); bf16 adds are a
compare-and-swap loop (the host's CPU backend has no bf16 arithmetic routines). f32 adds keep subnormals:
the ISA describes flushing them on global memory as what NVIDIA's current implementation does, and
shared memory keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import overload

from llvmlite import ir

from fatkit.translate.lower.convert import bf16_to_f32, f32_to_bf16, host_half_runtime
from fatkit.translate.lower.core import F16, I16, Lowering, handles, llvm_type
from fatkit.translate.lower.cluster import checked_cluster
from fatkit.translate.ptx import ast

SCOPES = ("cta", "cluster", "gpu", "sys")
ORDERINGS = {"relaxed": "monotonic", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel",
             "sc": "seq_cst"}
_FAILURE_ORDERING = {"monotonic": "monotonic", "acquire": "acquire", "release": "monotonic",
                     "acq_rel": "acquire", "seq_cst": "seq_cst"}


@dataclass(frozen=True)
class Order:
    """An LLVM ordering and sync scope ("" is the system scope, LLVM's default)."""

    ordering: str
    scope: str

    def __str__(self) -> str:
        return f'syncscope("{self.scope}") {self.ordering}' if self.scope else self.ordering


# State-space qualifiers of memory instructions and the space each names (`.shared` is `.shared::cta`).
STATE_SPACES = {"global": "global", "param": "param", "param::entry": "param", "param::func": "param",
                "shared": "shared", "shared::cta": "shared", "local": "local", "const": "const"}


def state_space(lw: Lowering, ins: ast.Instruction, allowed: tuple[str, ...]) -> tuple[str, list[str]]:
    """The space the instruction addresses ("generic" without a qualifier) and its qualifier, if any;
    raises for a space outside `allowed`. `.shared::cluster` addresses are the workgroup's LDS addresses, as
    .shared::cta ones (a cluster of several CTAs is one workgroup whose LDS holds every CTA's shared memory,
    lower/cluster.py; in a cluster of one they are the CTA's own)."""
    qualifiers = [m for m in ins.modifiers if m in STATE_SPACES or m.startswith(("shared::", "param::"))]
    if len(qualifiers) > 1:
        raise lw.fail("more than one state space")
    if qualifiers == ["shared::cluster"]:
        checked_cluster(lw)
        space = "shared"
    elif qualifiers and qualifiers[0] not in STATE_SPACES:
        raise lw.fail(f".{qualifiers[0]} is not a state space")
    else:
        space = STATE_SPACES[qualifiers[0]] if qualifiers else "generic"
    if space not in allowed:
        raise lw.fail(f"{ins.opcode} does not address .{space}")
    return space, qualifiers


@overload  # with a default ordering the result is always an Order
def memory_order(lw: Lowering, ins: ast.Instruction, allowed: set[str], default: str,
                 default_scope: str | None) -> Order: ...
@overload
def memory_order(lw: Lowering, ins: ast.Instruction, allowed: set[str], default: str | None,
                 default_scope: str | None) -> Order | None: ...
def memory_order(lw: Lowering, ins: ast.Instruction, allowed: set[str], default: str | None, default_scope: str | None) -> Order | None:
    """The instruction's `.sem` (one of `allowed`, else `default`) at its `.scope` (else `default_scope`);
    None for a weak access (no `.sem` and no default)."""
    semantics = [m for m in ins.modifiers if m in ORDERINGS]
    scopes = [m for m in ins.modifiers if m in SCOPES]
    if len(semantics) > 1 or len(scopes) > 1:
        raise lw.fail("more than one memory-ordering or scope qualifier")
    sem = semantics[0] if semantics else default
    if sem is None:
        if scopes:
            raise lw.fail(f".{scopes[0]} without .relaxed/.acquire/.release")
        return None
    if sem not in allowed:
        raise lw.fail(f".{sem} is not an ordering of {ins.opcode}")
    scope = scopes[0] if scopes else default_scope
    if scope is None:
        raise lw.fail(f".{sem} needs a scope (.cta/.cluster/.gpu/.sys)")
    return Order(ORDERINGS[sem], lw.target.syncscope(scope))


# ------------------------------------------------------------------------------------ LLVM instructions

class _AtomicLoad(ir.instructions.Instruction):
    def __init__(self, parent, pointer, typ, order: Order, align: int, volatile: bool):
        super().__init__(parent, typ, "load", [pointer])
        self.order, self.align, self.volatile = order, align, volatile

    def descr(self, buf):
        [pointer] = self.operands
        volatile = "volatile " if self.volatile else ""
        buf.append(f"load atomic {volatile}{self.type}, {pointer.type} {pointer.get_reference()} {self.order}, "
                   f"align {self.align}\n")


class _AtomicStore(ir.instructions.Instruction):
    def __init__(self, parent, value, pointer, order: Order, align: int, volatile: bool):
        super().__init__(parent, ir.VoidType(), "store", [value, pointer])
        self.order, self.align, self.volatile = order, align, volatile

    def descr(self, buf):
        value, pointer = self.operands
        volatile = "volatile " if self.volatile else ""
        buf.append(f"store atomic {volatile}{value.type} {value.get_reference()}, {pointer.type} "
                   f"{pointer.get_reference()} {self.order}, align {self.align}\n")


class _AtomicRMW(ir.instructions.Instruction):
    def __init__(self, parent, operation: str, pointer, value, order: Order, align: int):
        super().__init__(parent, value.type, "atomicrmw", [pointer, value])
        self.operation, self.order, self.align = operation, order, align

    def descr(self, buf):
        pointer, value = self.operands
        buf.append(f"atomicrmw {self.operation} {pointer.type} {pointer.get_reference()}, {value.type} "
                   f"{value.get_reference()} {self.order}, align {self.align}\n")


class _CmpXchg(ir.instructions.Instruction):
    def __init__(self, parent, pointer, expected, new, order: Order, align: int):
        super().__init__(parent, ir.LiteralStructType([new.type, ir.IntType(1)]), "cmpxchg",
                         [pointer, expected, new])
        self.order, self.align = order, align

    def descr(self, buf):
        pointer, expected, new = self.operands
        failure = Order(_FAILURE_ORDERING[self.order.ordering], self.order.scope)
        buf.append(f"cmpxchg {pointer.type} {pointer.get_reference()}, {expected.type} {expected.get_reference()}, "
                   f"{new.type} {new.get_reference()} {self.order} {failure.ordering}, align {self.align}\n")


def _insert(builder: ir.IRBuilder, instruction: ir.Instruction) -> ir.Instruction:
    builder._insert(instruction)  # the builder's own insertion point, as its methods use
    return instruction


def atomic_load(builder: ir.IRBuilder, pointer: ir.Value, typ: ir.Type, order: Order, align: int,
                volatile: bool = False) -> ir.Value:
    return _insert(builder, _AtomicLoad(builder.block, pointer, typ, order, align, volatile))


def atomic_store(builder: ir.IRBuilder, value: ir.Value, pointer: ir.Value, order: Order, align: int,
                 volatile: bool = False) -> None:
    _insert(builder, _AtomicStore(builder.block, value, pointer, order, align, volatile))


def atomic_rmw(builder: ir.IRBuilder, operation: str, pointer: ir.Value, value: ir.Value, order: Order,
               align: int) -> ir.Value:
    return _insert(builder, _AtomicRMW(builder.block, operation, pointer, value, order, align))


def compare_exchange(builder: ir.IRBuilder, pointer: ir.Value, expected: ir.Value, new: ir.Value,
                     order: Order, align: int) -> ir.Value:
    """The value found at `pointer` (`new` stored where it equalled `expected`)."""
    pair = _insert(builder, _CmpXchg(builder.block, pointer, expected, new, order, align))
    return builder.extract_value(pair, 0)


def fence(builder: ir.IRBuilder, order: Order) -> None:
    builder.fence(order.ordering, order.scope or None)


# ------------------------------------------------------------------------------------ atom / red

# f16 values as (LLVM type, bit-register type they are read and written as); bf16 stays in its bits.
_HALF_TYPES = {"f16": (F16, "b16"), "f16x2": (ir.VectorType(F16, 2), "b32")}
_BFLOAT_TYPES = {"bf16": "b16", "bf16x2": "b32"}
_BIT_OPERATIONS = {"and": "and", "or": "or", "xor": "xor", "exch": "xchg"}
_OPERATIONS = {"add", "and", "or", "xor", "exch", "inc", "dec", "min", "max", "cas"}
_REDUCTIONS = _OPERATIONS - {"exch", "cas"}


def _value_type(lw: Lowering, t: str) -> tuple[ir.Type, str]:
    """The LLVM type an atomic computes in and the PTX type its operands are read as."""
    if t in _HALF_TYPES:
        host_half_runtime(lw)  # the CPU backend converts half through library routines
        return _HALF_TYPES[t]
    if t in _BFLOAT_TYPES:
        return llvm_type(_BFLOAT_TYPES[t]), _BFLOAT_TYPES[t]
    if t not in ("b16", "b32", "b64", "u32", "u64", "s32", "s64", "f32", "f64"):
        raise lw.fail(f"atomics on .{t} are not supported")
    return llvm_type(t), t


def _llvm_operation(lw: Lowering, operation: str, t: str) -> str:
    floating = t[0] == "f" or t.startswith("bf")
    if operation == "add":
        return "fadd" if floating else "add"
    if floating:  # min/max on f16/bf16 vectors: their NaN and ±0 rules are not modelled
        raise lw.fail(f"atomic .{operation} on .{t} is not supported")
    if operation in _BIT_OPERATIONS:
        return _BIT_OPERATIONS[operation]
    if operation in ("inc", "dec"):
        if t != "u32":
            raise lw.fail(f".{operation} exists only for .u32")
        return "uinc_wrap" if operation == "inc" else "udec_wrap"
    if t[0] == "b":
        raise lw.fail(f".{operation} needs a signed (.s) or unsigned (.u) type")
    return ("" if t[0] == "s" else "u") + operation


def _atomic(lw: Lowering, ins: ast.Instruction, returns: bool) -> None:
    """atom (`returns`: d = old value) and red: [space] op type, optional .sem/.scope, hints, vectors."""
    operations = [m for m in ins.modifiers if m in (_OPERATIONS if returns else _REDUCTIONS)]
    space, spaces = state_space(lw, ins, ("global", "shared", "generic"))
    widths = [m for m in ins.modifiers if m in ("v2", "v4", "v8")]
    types = [m for m in ins.modifiers if m in ast.TYPES]
    if len(operations) != 1 or len(types) != 1 or len(widths) > 1:
        raise lw.fail(f"{ins.opcode} needs one operation and one type")
    operation, t = operations[0], types[0]
    order = memory_order(lw, ins, {"relaxed", "acquire", "release", "acq_rel"} if returns else {"relaxed", "release"},
                         "relaxed", "gpu")
    hinted = "L2::cache_hint" in ins.modifiers  # cache-policy operand: an eviction hint, results unchanged
    lw.check_modifiers(ins, {operation, *spaces, *widths, *ORDERINGS, *SCOPES, "noftz", "L2::cache_hint"})
    value_type, read_as = _value_type(lw, t)
    operands = list(lw.operands(ins, (3 if returns else 2) + (operation == "cas") + hinted))
    if hinted:
        operands.pop()
    destination = operands.pop(0) if returns else None
    address, *values = operands
    size, lanes = ast.TYPE_SIZES[t], int(widths[0][1]) if widths else 1
    if widths and (operation != "add" or space == "shared"):
        raise lw.fail("vector atomics exist only as .global/generic .add (min/max on halves not supported)")
    base = lw.address(address, space)
    if operation == "cas" and t[0] not in "bsu":
        raise lw.fail(f".cas compares bits: .{t} is not a bit-size type")
    llvm_operation = "cmpxchg" if operation == "cas" else _llvm_operation(lw, operation, t)
    results = []
    for i in range(lanes):
        pointer = base if i == 0 else lw.builder.gep(base, [ir.Constant(ir.IntType(64), i * size)],
                                                     source_etype=ir.IntType(8))
        args = [_cast(lw, lw.read(_items(lw, v, lanes)[i], read_as), value_type) for v in values]
        if operation == "cas":
            old = compare_exchange(lw.builder, pointer, args[0], args[1], order, size)
        elif t in _BFLOAT_TYPES:
            old = _bfloat_add(lw, pointer, args[0], order, size)
        else:
            old = atomic_rmw(lw.builder, llvm_operation, pointer, args[0], order, size)
        results.append(_cast(lw, old, llvm_type(read_as)))
    if destination is None:
        return
    for item, old in zip(_items(lw, destination, lanes), results):
        if type(item) is not ast.Sink:
            lw.write(item, old, read_as)


def _bfloat_add(lw: Lowering, pointer: ir.Value, addend: ir.Value, order: Order, size: int) -> ir.Value:
    """bf16/bf16x2 add (bits in i16/i32) as a compare-and-swap loop: each half added in f32 and rounded
    to nearest even, which is the correctly rounded bf16 sum (f32's 24 bits are more than 2·8+2)."""
    builder = lw.builder
    halves = size // 2

    def add(old: ir.Value) -> ir.Value:
        total = ir.Constant(old.type, 0)
        for i in range(halves):
            shift = ir.Constant(old.type, 16 * i)
            parts = [builder.trunc(builder.lshr(v, shift), I16) if halves > 1 else v for v in (old, addend)]
            rounded = f32_to_bf16(lw, builder.fadd(bf16_to_f32(lw, parts[0]), bf16_to_f32(lw, parts[1])))
            if halves > 1:
                rounded = builder.shl(builder.zext(rounded, old.type), shift)
            total = builder.or_(total, rounded)
        return total

    first = atomic_load(builder, pointer, addend.type, Order("monotonic", order.scope), size)
    entry = builder.block
    retry, done = lw.function.append_basic_block("bf16.retry"), lw.function.append_basic_block("bf16.done")
    builder.branch(retry)
    builder.position_at_end(retry)
    expected = builder.phi(addend.type)
    expected.add_incoming(first, entry)
    found = compare_exchange(builder, pointer, expected, add(expected), order, size)
    expected.add_incoming(found, retry)
    builder.cbranch(builder.icmp_unsigned("==", found, expected), done, retry)
    builder.position_at_end(done)
    return found


def _cast(lw: Lowering, value: ir.Value, typ: ir.Type) -> ir.Value:
    return value if value.type == typ else lw.builder.bitcast(value, typ)


def _items(lw: Lowering, operand: ast.Operand, lanes: int) -> tuple:
    if lanes == 1:
        return (operand,)
    if type(operand) is not ast.Vector or len(operand.items) != lanes:
        raise lw.fail(f"a .v{lanes} atomic needs {{…}} operands of {lanes} registers")
    return operand.items


@handles("atom")
def atom(lw: Lowering, ins: ast.Instruction) -> None:
    _atomic(lw, ins, returns=True)


@handles("red")
def red(lw: Lowering, ins: ast.Instruction) -> None:
    _atomic(lw, ins, returns=False)

