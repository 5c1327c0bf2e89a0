"""Data movement and memory: mov, ld/ldu/st in every state space (scalar, .v2/.v4/.v8), their memory-model
qualifiers, cvta, isspacep, prefetch, and the shared-memory size registers.

ld/st orderings: `.weak` (the default) is a plain access; `.relaxed.scope`, `.acquire.scope` (ld) and
`.release.scope` (st) are LLVM atomic accesses of that ordering and sync scope; `.volatile` and
`.mmio.relaxed.sys` are volatile monotonic accesses at system scope (the ISA gives .volatile the
synchronisation of .relaxed.sys). A vector access is one memory operation per element, as in the ISA.

Accepted hints, which the ISA makes performance hints that change no result: the cache operators
(.ca/.cg/.cs/.lu/.cv, .wb/.wt), L1/L2 eviction priorities, `.L2::64B/128B/256B` prefetch sizes,
`.L2::cache_hint` with its cache-policy operand, `.nc` (the non-coherent read-only path) and `ldu`
(a load the warp makes uniformly). `prefetch`/`prefetchu` only warm caches: they lower to nothing.
"""

from __future__ import annotations

from llvmlite import ir

from fatkit.translate.lower.asynccopy import st_bulk
from fatkit.translate.lower.atomic import (
    SCOPES, STATE_SPACES, Order, atomic_load, atomic_store, memory_order, state_space,
)
from fatkit.translate.lower.core import I1, I32, I64, Lowering, handles, llvm_type, reads_special
from fatkit.translate.ptx import ast
from fatkit.translate.targets.base import Unavailable

_HINTS = {"ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc", "L2::cache_hint", "L2::64B", "L2::128B", "L2::256B",
          "L1::evict_normal", "L1::evict_unchanged", "L1::evict_first", "L1::evict_last", "L1::no_allocate",
          "L2::evict_normal", "L2::evict_first", "L2::evict_last", "L2::evict_unchanged"}
_ORDERED_SPACES = ("global", "shared", "generic")  # where .volatile/.relaxed/.acquire/.release may go


@handles("mov")
def mov(lw: Lowering, ins: ast.Instruction) -> None:
    lw.check_modifiers(ins, set())
    (t,) = lw.types(ins, 1)
    d, a = lw.operands(ins, 2)
    if type(a) is ast.Vector or type(d) is ast.Vector:  # mov.b128 (the operands pass expands the others)
        _vector_mov_128(lw, t, d, a)
        return
    lw.write(d, lw.read(a, t), t)


def _vector_mov_128(lw: Lowering, t: str, d: ast.Operand, a: ast.Operand) -> None:
    """`mov.b128 %q, {%lo, %hi}` packs (first element in the low bits), `mov.b128 {%lo, %hi}, %q` unpacks."""
    if t != "b128" or (type(a) is ast.Vector) == (type(d) is ast.Vector):
        raise lw.fail("a vector mov of this form is expanded before lowering; here only mov.b128 with one {…}")
    vector = a if type(a) is ast.Vector else d
    count = len(vector.items)
    if count not in (2, 4):
        raise lw.fail("mov.b128 splits into 2 (.b64) or 4 (.b32) elements")
    bits = 128 // count
    part, whole = f"b{bits}", ir.IntType(128)
    builder = lw.builder
    if type(a) is ast.Vector:
        packed = ir.Constant(whole, 0)
        for i, item in enumerate(a.items):
            if type(item) is ast.Sink:
                raise lw.fail("`_` cannot be a source element")
            element = builder.zext(lw.read(item, part), whole)
            if i:
                element = builder.shl(element, ir.Constant(whole, i * bits))
            packed = builder.or_(packed, element)
        lw.write(d, packed, t)
        return
    source = lw.read(a, t)
    for i, item in enumerate(d.items):
        if type(item) is not ast.Sink:
            shifted = builder.lshr(source, ir.Constant(whole, i * bits)) if i else source
            lw.write(item, builder.trunc(shifted, ir.IntType(bits)), part)


def _access(lw: Lowering, ins: ast.Instruction, stored: bool):
    """ld/ldu/st: (space, type, vector width, order or None, volatile, operands without the cache policy)."""
    space, qualifiers = state_space(lw, ins, ("global", "param", "shared", "local", "const", "generic"))
    widths = [m for m in ins.modifiers if m in ("v2", "v4", "v8")]
    volatile = "volatile" in ins.modifiers or "mmio" in ins.modifiers
    if volatile:
        if "mmio" in ins.modifiers and not ins.has("relaxed", "sys"):
            raise lw.fail(".mmio goes with .relaxed.sys")
        order = Order("monotonic", lw.target.syncscope("sys"))
    else:
        order = memory_order(lw, ins, {"relaxed", "release"} if stored else {"relaxed", "acquire"}, None, None)
    if (volatile or order) and space not in _ORDERED_SPACES:
        raise lw.fail(f"ordered or volatile accesses exist only for .global/.shared/generic, not .{space}")
    lw.check_modifiers(ins, {*qualifiers, *widths, *_HINTS, *SCOPES, "weak", "volatile", "mmio", "relaxed", "acquire",
                             "release"})
    (t,) = lw.types(ins, 1)
    if t == "pred":
        raise lw.fail("memory accesses of .pred do not exist")
    if t == "b128" and (order is not None or volatile):
        raise lw.fail("an ordered or volatile .b128 access is one 16-byte single-copy-atomic access, which AMD "
                      "GPUs do not have (their atomic accesses are at most 64 bits wide)")
    operands = lw.operands(ins, 3 if "L2::cache_hint" in ins.modifiers else 2)[:2]
    return space, t, int(widths[0][1]) if widths else 1, order, volatile, operands


def _vector(lw: Lowering, operand: ast.Operand, width: int) -> tuple[ast.Operand, ...]:
    if type(operand) is not ast.Vector or len(operand.items) != width:
        raise lw.fail(f"a .v{width} access needs a {{…}} operand of {width} registers")
    return operand.items


def _element(lw: Lowering, pointer: ir.Value, index: int, size: int) -> ir.Value:
    return pointer if index == 0 else lw.builder.gep(pointer, [ir.Constant(I64, index * size)],
                                                     source_etype=ir.IntType(8))


@handles("ld", "ldu")
def ld(lw: Lowering, ins: ast.Instruction) -> None:
    space, t, width, order, volatile, (d, a) = _access(lw, ins, stored=False)
    if ins.opcode == "ldu" and space not in ("global", "generic"):
        raise lw.fail("ldu reads .global memory")
    pointer, size, ty = lw.address(a, space), ast.TYPE_SIZES[t], llvm_type(t)
    items = (d,) if width == 1 else _vector(lw, d, width)
    if order is not None:
        for i, item in enumerate(items):
            value = atomic_load(lw.builder, _element(lw, pointer, i, size), ty, order, size, volatile)
            if type(item) is not ast.Sink:
                lw.write(item, value, t)
        return
    if width == 1:
        lw.write(d, lw.builder.load(pointer, typ=ty, align=size), t)
        return
    vector = lw.builder.load(pointer, typ=ir.VectorType(ty, width), align=size * width)
    for i, item in enumerate(items):
        if type(item) is not ast.Sink:
            lw.write(item, lw.builder.extract_element(vector, ir.Constant(I32, i)), t)


@handles("st")
def st(lw: Lowering, ins: ast.Instruction) -> None:
    if ins.has("bulk"):  # st.bulk: zeroing a range (lower/asynccopy.py)
        st_bulk(lw, ins)
        return
    space, t, width, order, volatile, (a, v) = _access(lw, ins, stored=True)
    pointer, size = lw.address(a, space), ast.TYPE_SIZES[t]
    items = (v,) if width == 1 else _vector(lw, v, width)
    if order is not None or any(type(item) is ast.Sink for item in items):
        for i, item in enumerate(items):  # one store an element; `_` leaves its element unwritten
            if type(item) is ast.Sink:
                continue
            element = _element(lw, pointer, i, size)
            if order is None:
                lw.builder.store(lw.read(item, t), element, align=size)
            else:
                atomic_store(lw.builder, lw.read(item, t), element, order, size, volatile)
        return
    if width == 1:
        lw.builder.store(lw.read(v, t), pointer, align=size)
        return
    vector = ir.Constant(ir.VectorType(llvm_type(t), width), ir.Undefined)
    for i, item in enumerate(items):
        vector = lw.builder.insert_element(vector, lw.read(item, t), ir.Constant(I32, i))
    lw.builder.store(vector, pointer, align=size * width)


@handles("prefetch", "prefetchu")
def prefetch(lw: Lowering, ins: ast.Instruction) -> None:
    """Only brings a line into a cache (or a tensor map into its cache): nothing a thread can observe, and
    it does not fault, so it lowers to nothing once its form is checked."""
    state_space(lw, ins, ("global", "local", "const", "param", "generic"))
    lw.check_modifiers(ins, {"global", "local", "const", "param", "L1", "L2", "tensormap",
                             "L2::evict_last", "L2::evict_normal"})
    (address,) = lw.operands(ins, 1)
    if type(address) is not ast.Address:
        raise lw.fail("prefetch needs an [address] operand")


@handles("cvta")
def cvta(lw: Lowering, ins: ast.Instruction) -> None:
    """Between a state space's addresses and generic ones: an addrspacecast where the target gives the
    space its own address space (AMDGPU .shared/.local: 32-bit offsets ↔ flat addresses), else the same
    number (.param addresses are generic already)."""
    spaces = [m for m in ins.modifiers if m in ("global", "shared", "shared::cta", "local", "const", "param")]
    if len(spaces) != 1:
        raise lw.fail("cvta needs one of .global/.shared/.local/.const/.param")
    lw.check_modifiers(ins, {"to", spaces[0]})
    space_name = STATE_SPACES[spaces[0]]
    (t,) = lw.types(ins, 1)
    d, a = lw.operands(ins, 2)
    space = lw.address_space(space_name)
    value = lw.read(a, t)
    window = lw.callees.window if space_name == "shared" else None
    if window:  # host shared addresses are offsets into the window
        base = lw.builder.ptrtoint(window.base, value.type)
        value = (lw.builder.sub if "to" in ins.modifiers else lw.builder.add)(value, base)
    elif space != 0:
        source, target = (0, space) if "to" in ins.modifiers else (space, 0)
        pointer = lw.pointer(value, source)  # from the variable the address was computed from, where it shows
        cast = lw.builder.addrspacecast(pointer, ir.PointerType(addrspace=target))
        value = lw.builder.ptrtoint(cast, value.type)
    lw.write(d, value, t)


@handles("isspacep")
def isspacep(lw: Lowering, ins: ast.Instruction) -> None:
    """Whether a generic address lies in .shared (the target's LDS aperture; the host's window), .local (the
    private aperture; the host thread's stack), .const (one of the module's .const variables) or .global
    (none of those: every other generic address is global memory)."""
    spaces = [m for m in ins.modifiers if m in ("global", "shared", "shared::cta", "local", "const")]
    if len(spaces) != 1:
        raise lw.fail("isspacep supports .global/.shared/.local/.const (generic .param addresses do not exist "
                      "here)")
    lw.check_modifiers(ins, set(spaces))
    p, a = lw.operands(ins, 2)
    address = lw.read(a, "u64")
    space = STATE_SPACES[spaces[0]]
    if space == "global":
        outside = [lw.builder.not_(_in_space(lw, other, address)) for other in ("shared", "local", "const")]
        lw.write(p, lw.builder.and_(lw.builder.and_(outside[0], outside[1]), outside[2]), "pred")
    else:
        lw.write(p, _in_space(lw, space, address), "pred")


def _in_space(lw: Lowering, space: str, address: ir.Value) -> ir.Value:
    builder = lw.builder
    if space == "const":
        inside = ir.Constant(I1, 0)
        for variable_space, pointer in lw.variables.values():
            if variable_space == "const":
                inside = builder.or_(inside, _in_range(lw, pointer, pointer.value_type.count, address))
        return inside
    window = lw.callees.window
    if space == "shared" and lw.target.shared_window:
        if window is None:
            return ir.Constant(I1, 0)  # the kernel has no shared memory
        return _in_range(lw, window.base, window.base.value_type.count, address)
    try:
        return lw.target.in_aperture(builder, space, address)
    except Unavailable as error:
        raise lw.fail(str(error)) from None


def _in_range(lw: Lowering, pointer: ir.Value, size: int, address: ir.Value) -> ir.Value:
    builder = lw.builder
    if pointer.type.addrspace != 0:
        pointer = builder.addrspacecast(pointer, ir.PointerType())
    start = builder.ptrtoint(pointer, I64)
    offset = builder.sub(address, start)
    return builder.icmp_unsigned("<", offset, ir.Constant(I64, size))


_SHARED_ALLOCATION_UNIT = 128  # %total_smem_size is a multiple of it (the ISA: 128 bytes on sm_8x)


@reads_special("%dynamic_smem_size", "%total_smem_size")
def shared_memory_size(lw: Lowering, operand: ast.Operand):
    """Dynamic shared memory of this launch; the total adds the kernel's static shared memory and rounds
    up to the allocation unit."""
    try:
        dynamic = lw.target.dynamic_shared_size(lw.builder)
    except Unavailable as error:
        raise lw.fail(str(error)) from None
    if operand.name == "%dynamic_smem_size":
        return dynamic, "u32"
    total = lw.builder.add(dynamic, ir.Constant(I32, lw.callees.static_shared_bytes + _SHARED_ALLOCATION_UNIT - 1))
    return lw.builder.and_(total, ir.Constant(I32, -_SHARED_ALLOCATION_UNIT)), "u32"


@handles("alloca")
def alloca(lw: Lowering, ins: ast.Instruction) -> None:
    """`alloca.u32/.u64 d, size{, align}`: size bytes of the thread's stack, kept until the function returns;
    d is their .local address (nvcc follows it with cvta.local). The alignment defaults to 8."""
    (t,) = lw.types(ins, 1)
    if t not in ("u32", "u64"):
        raise lw.fail("alloca takes .u32 or .u64")
    lw.check_modifiers(ins, set())
    if len(ins.operands) not in (2, 3):
        raise lw.fail("alloca takes d, size and an optional immediate alignment")
    d, size = ins.operands[:2]
    align = ins.operands[2] if len(ins.operands) == 3 else ast.IntImm(8)
    if type(align) is not ast.IntImm or align.value <= 0 or align.value & (align.value - 1):
        raise lw.fail("alloca's alignment must be an immediate power of two")
    pointer = lw.dynamic_alloca(lw.read(size, t), align.value)
    lw.write(d, lw.builder.ptrtoint(pointer, llvm_type(t)), t)


@handles("discard", "applypriority")
def cache_line_hint(lw: Lowering, ins: ast.Instruction) -> None:
    """`discard.global.L2 [a], 128` lets the L2 line's contents become indeterminate, and `applypriority
    .global.L2::evict_normal [a], 128` changes its eviction priority: keeping the line as it is satisfies
    both, so they lower to nothing once their form is checked."""
    extra = {"L2"} if ins.opcode == "discard" else {"L2::evict_normal"}
    lw.check_modifiers(ins, {"global", *extra})
    address, size = lw.operands(ins, 2)
    if type(address) is not ast.Address or type(size) is not ast.IntImm or size.value != 128:
        raise lw.fail(f"{ins.opcode} takes [address], 128")


_POLICIES = {"fractional", "range", "cvt", "L2", "L2::evict_last", "L2::evict_normal", "L2::evict_first",
             "L2::evict_unchanged"}


@handles("createpolicy")
def createpolicy(lw: Lowering, ins: ast.Instruction) -> None:
    """A 64-bit L2 cache policy, opaque to the program, for the `.L2::cache_hint` operand of loads, stores
    and copies, which are hints this translation ignores: any policy value is as good, 0 it is."""
    lw.check_modifiers(ins, _POLICIES)
    if lw.types(ins, 1) != ["b64"]:
        raise lw.fail("createpolicy makes a .b64 policy")
    if len(ins.operands) not in (2, 3, 4):
        raise lw.fail("createpolicy takes the policy and its fraction, range or access property")
    for operand in ins.operands[1:]:
        if type(operand) is not ast.Address:
            lw.read(operand, "f32" if type(operand) is ast.FloatImm else "b64")
    lw.write(ins.operands[0], ir.Constant(I64, 0), "b64")


@handles("stacksave")
def stacksave(lw: Lowering, ins: ast.Instruction) -> None:
    """`stacksave.u32/.u64 d`: the stack pointer as a .local address, for a later stackrestore (which frees
    the `alloca`s since)."""
    (t,) = lw.types(ins, 1)
    if t not in ("u32", "u64"):
        raise lw.fail("stacksave takes .u32 or .u64")
    lw.check_modifiers(ins, set())
    (d,) = lw.operands(ins, 1)
    pointer_type = ir.PointerType(addrspace=lw.target.stack_address_space)
    pointer = lw.builder.call(_declared(lw, f"llvm.stacksave.p{lw.target.stack_address_space}", pointer_type, []), [])
    lw.write(d, lw.builder.ptrtoint(pointer, llvm_type(t)), t)


@handles("stackrestore")
def stackrestore(lw: Lowering, ins: ast.Instruction) -> None:
    """`stackrestore.u32/.u64 a`: the stack pointer back to what stacksave returned."""
    (t,) = lw.types(ins, 1)
    if t not in ("u32", "u64"):
        raise lw.fail("stackrestore takes .u32 or .u64")
    lw.check_modifiers(ins, set())
    (a,) = lw.operands(ins, 1)
    pointer_type = ir.PointerType(addrspace=lw.target.stack_address_space)
    pointer = lw.builder.inttoptr(lw.read(a, t), pointer_type)
    lw.builder.call(_declared(lw, f"llvm.stackrestore.p{lw.target.stack_address_space}", ir.VoidType(),
                              [pointer_type]), [pointer])


def _declared(lw: Lowering, name: str, result: ir.Type, args: list[ir.Type]) -> ir.Function:
    module = lw.builder.module
    return module.globals.get(name) or ir.Function(module, ir.FunctionType(result, args), name)
