"""Runtime services CUDA's driver and device runtime provide, built into every module that uses them.

Each service is a zero-initialised module global (one per loaded module; every kernel of a module shares it),
so a shim finds it with hipModuleGetGlobal and the loader's zero fill is all the set-up it needs. The ABI is
docs/runtime.md; in short:

- `%envreg1`/`%envreg2`, which CUDA's cooperative launch sets to the high and low halves of the grid
  workspace (`struct {u32 wsSize; u32 barrier;}`; cooperative groups' grid.sync() flips the top bit of
  `barrier` with atomic adds), read the generic address of `__fatkit_grid_workspace` (8 bytes).
- `malloc`/`free` use `__fatkit_heap`: a 512-byte header {u64 top, u64 reserved, u64 free-list heads[40]}
  and an 8 MiB arena (CUDA's default cudaLimitMallocHeapSize). A block is 32 << class bytes with a 16-byte
  header {u32 class, u32 state, u64 next free}; malloc pops its class's free list (a Treiber stack whose
  head carries a 32-bit tag against ABA: tag << 32 | block index + 1) or bumps `top` by compare-and-swap,
  and returns NULL when the arena is exhausted; free pushes the block back (NULL, foreign pointers and
  second frees are ignored). Blocks are 16-byte aligned.
- `vprintf(format, args)` appends a record to `__fatkit_printf` (layout: fatkit/translate/printf_buffer.py):
  the format must be a constant string of the module, whose conversions give at translation time how many
  bytes of CUDA's argument buffer the record copies.

The helpers are LLVM functions emitted once per LLVM module (linkonce_odr, like the globals, so that the
kernels' modules link into one copy of each).
"""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from fatkit.translate import printf_buffer
from fatkit.translate.lower.atomic import Order, atomic_load, atomic_rmw, atomic_store, compare_exchange
from fatkit.translate.lower.core import I1, I32, I64, I8, Lowering, llvm_type, reads_special
from fatkit.translate.ptx import ast

WORKSPACE = "__fatkit_grid_workspace"
WORKSPACE_BYTES = 8  # {u32 wsSize; u32 barrier}
HEAP = "__fatkit_heap"
HEAP_HEADER_BYTES = 512
HEAP_BYTES = 8 << 20  # the arena: CUDA's default cudaLimitMallocHeapSize
SIZE_CLASSES = 40  # block sizes 32 << 0 … 32 << 39
HEADS_OFFSET = 16  # the free-list heads in the heap header, after top and a reserved word
BLOCK_HEADER_BYTES = 16  # {u32 class, u32 state, u64 next free}
ALLOCATED, FREED = 0xFA7A110C, 0xFA7AF4EE  # a block header's state word
PRINTF = "__fatkit_printf"

_LOW_WORD = (1 << 32) - 1


def runtime_global(module: ir.Module, target, name: str, size: int) -> ir.GlobalVariable:
    """The module's zero-initialised runtime global `name` of `size` bytes in global memory (made once)."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    storage = ir.GlobalVariable(module, ir.ArrayType(I8, size), name, addrspace=target.global_address_space)
    storage.type = ir.PointerType(addrspace=target.global_address_space)
    storage.linkage = "linkonce_odr"
    storage.initializer = ir.Constant(storage.value_type, None)
    storage.align = 16
    return storage


def _generic(builder: ir.IRBuilder, pointer: ir.Value) -> ir.Value:
    """The i64 generic address of `pointer`."""
    if pointer.type.addrspace:
        pointer = builder.addrspacecast(pointer, ir.PointerType())
    return builder.ptrtoint(pointer, I64)


def _at(builder: ir.IRBuilder, pointer: ir.Value, offset: ir.Value | int) -> ir.Value:
    offset = ir.Constant(I64, offset) if isinstance(offset, int) else offset
    return builder.gep(pointer, [offset], source_etype=I8)


def _helper(module: ir.Module, name: str, result: ir.Type, args: tuple[ir.Type, ...],
            body: Callable[[ir.Function, ir.IRBuilder], None]) -> ir.Function:
    """Runtime helper `name` of the module, its body built by `body` on first use."""
    function = module.globals.get(name)
    if function is None:
        function = ir.Function(module, ir.FunctionType(result, args), name)
        function.linkage = "linkonce_odr"
        body(function, ir.IRBuilder(function.append_basic_block("entry")))
    return function


class _Blocks:
    """Named basic blocks of a helper, made on first mention."""

    def __init__(self, function: ir.Function):
        self.function = function
        self.blocks: dict[str, ir.Block] = {}

    def __getitem__(self, name: str) -> ir.Block:
        if name not in self.blocks:
            self.blocks[name] = self.function.append_basic_block(name)
        return self.blocks[name]


# ------------------------------------------------------------------------------------------ grid workspace

@reads_special("%envreg1", "%envreg2")
def grid_workspace(lw: Lowering, operand: ast.Name):
    """The high (%envreg1) or low (%envreg2) half of the grid workspace's generic address."""
    address = _generic(lw.builder, runtime_global(lw.builder.module, lw.target, WORKSPACE, WORKSPACE_BYTES))
    if operand.name == "%envreg1":
        address = lw.builder.lshr(address, ir.Constant(I64, 32))
    return lw.builder.trunc(address, I32), "u32"


# ------------------------------------------------------------------------------------------ device heap

def _heap(builder: ir.IRBuilder, target) -> tuple[ir.Value, ir.Value, str]:
    """(the heap global, its arena, the sync scope of its atomics: the GPU's)."""
    heap = runtime_global(builder.module, target, HEAP, HEAP_HEADER_BYTES + HEAP_BYTES)
    return heap, _at(builder, heap, HEAP_HEADER_BYTES), target.syncscope("gpu")


def _head_slot(builder: ir.IRBuilder, heap: ir.Value, size_class: ir.Value) -> ir.Value:
    """The free-list head of `size_class` (i64) in the heap header."""
    return _at(builder, heap, builder.add(ir.Constant(I64, HEADS_OFFSET), builder.shl(size_class, ir.Constant(I64, 3))))


def _next_tag(builder: ir.IRBuilder, head: ir.Value) -> ir.Value:
    """The tag a new head value carries: the old head's plus one, in the high word."""
    tag = builder.add(builder.lshr(head, ir.Constant(I64, 32)), ir.Constant(I64, 1))
    return builder.shl(tag, ir.Constant(I64, 32))


def _malloc_body(target):
    def body(function: ir.Function, builder: ir.IRBuilder) -> None:
        blocks = _Blocks(function)
        (size,) = function.args
        heap, arena, scope = _heap(builder, target)
        acquire, relaxed = Order("acquire", scope), Order("monotonic", scope)
        builder.cbranch(builder.icmp_unsigned(">", size, ir.Constant(I64, HEAP_BYTES - BLOCK_HEADER_BYTES)),
                        blocks["exhausted"], blocks["classify"])
        builder.position_at_end(blocks["classify"])
        # class c holds 32 << c bytes with the header: c = max(0, ceil(log2(size + 16)) - 5)
        leading = builder.ctlz(builder.add(size, ir.Constant(I64, BLOCK_HEADER_BYTES - 1)), ir.Constant(I1, 0))
        size_class = builder.select(builder.icmp_unsigned(">", leading, ir.Constant(I64, 59)), ir.Constant(I64, 0),
                                    builder.sub(ir.Constant(I64, 59), leading))
        head_slot = _head_slot(builder, heap, size_class)
        builder.branch(blocks["pop"])

        builder.position_at_end(blocks["pop"])  # a freed block of the class, if there is one
        head = atomic_load(builder, head_slot, I64, acquire, 8)
        link = builder.and_(head, ir.Constant(I64, _LOW_WORD))
        builder.cbranch(builder.icmp_unsigned("==", link, ir.Constant(I64, 0)), blocks["bump"], blocks["take"])
        builder.position_at_end(blocks["take"])
        taken = builder.shl(builder.sub(link, ir.Constant(I64, 1)), ir.Constant(I64, 4))
        following = atomic_load(builder, _at(builder, arena, builder.add(taken, ir.Constant(I64, 8))), I64, relaxed, 8)
        found = compare_exchange(builder, head_slot, head, builder.or_(_next_tag(builder, head), following),
                                 acquire, 8)
        took = builder.block
        builder.cbranch(builder.icmp_unsigned("==", found, head), blocks["claim"], blocks["pop"])

        builder.position_at_end(blocks["bump"])  # new memory at the top of the arena
        top = atomic_load(builder, heap, I64, relaxed, 8)
        end = builder.add(top, builder.shl(ir.Constant(I64, 32), size_class))
        builder.cbranch(builder.icmp_unsigned(">", end, ir.Constant(I64, HEAP_BYTES)), blocks["exhausted"],
                        blocks["reserve"])
        builder.position_at_end(blocks["reserve"])
        reserved = compare_exchange(builder, heap, top, end, relaxed, 8)
        builder.cbranch(builder.icmp_unsigned("==", reserved, top), blocks["claim"], blocks["bump"])

        builder.position_at_end(blocks["claim"])
        offset = builder.phi(I64)
        offset.add_incoming(taken, took)
        offset.add_incoming(top, blocks["reserve"])
        block = _at(builder, arena, offset)
        builder.store(builder.trunc(size_class, I32), block, align=16)
        atomic_store(builder, ir.Constant(I32, ALLOCATED), _at(builder, block, 4), relaxed, 4)
        builder.ret(builder.add(_generic(builder, block), ir.Constant(I64, BLOCK_HEADER_BYTES)))

        builder.position_at_end(blocks["exhausted"])
        builder.ret(ir.Constant(I64, 0))  # CUDA's malloc returns NULL when the heap is exhausted
    return body


def _free_body(target):
    def body(function: ir.Function, builder: ir.IRBuilder) -> None:
        blocks = _Blocks(function)
        (address,) = function.args
        heap, arena, scope = _heap(builder, target)
        release, relaxed = Order("release", scope), Order("monotonic", scope)
        offset = builder.sub(address, builder.add(_generic(builder, arena), ir.Constant(I64, BLOCK_HEADER_BYTES)))
        # NULL and pointers malloc did not return (outside the arena, misaligned) are ignored
        outside = builder.icmp_unsigned(">=", offset, ir.Constant(I64, HEAP_BYTES))
        misaligned = builder.icmp_unsigned("!=", builder.and_(offset, ir.Constant(I64, 15)), ir.Constant(I64, 0))
        builder.cbranch(builder.or_(outside, misaligned), blocks["ignore"], blocks["check"])
        builder.position_at_end(blocks["check"])
        block = _at(builder, arena, offset)
        size_class = builder.zext(builder.load(block, typ=I32, align=16), I64)
        # the state word goes from allocated to freed once: a second free of the block is ignored
        state = compare_exchange(builder, _at(builder, block, 4), ir.Constant(I32, ALLOCATED),
                                 ir.Constant(I32, FREED), relaxed, 4)
        owned = builder.and_(builder.icmp_unsigned("==", state, ir.Constant(I32, ALLOCATED)),
                             builder.icmp_unsigned("<", size_class, ir.Constant(I64, SIZE_CLASSES)))
        builder.cbranch(owned, blocks["push"], blocks["ignore"])
        builder.position_at_end(blocks["push"])
        head_slot = _head_slot(builder, heap, size_class)
        link = builder.add(builder.lshr(offset, ir.Constant(I64, 4)), ir.Constant(I64, 1))
        builder.branch(blocks["retry"])
        builder.position_at_end(blocks["retry"])
        head = atomic_load(builder, head_slot, I64, relaxed, 8)
        atomic_store(builder, builder.and_(head, ir.Constant(I64, _LOW_WORD)), _at(builder, block, 8), relaxed, 8)
        found = compare_exchange(builder, head_slot, head, builder.or_(_next_tag(builder, head), link), release, 8)
        builder.cbranch(builder.icmp_unsigned("==", found, head), blocks["ignore"], blocks["retry"])
        builder.position_at_end(blocks["ignore"])
        builder.ret_void()
    return body


def malloc(lw: Lowering, returns, arguments) -> None:
    """`malloc(size)`: a 16-byte aligned block of the module's heap, or NULL."""
    if len(returns) != 1 or len(arguments) != 1:
        raise lw.fail("malloc takes (size) and returns a pointer")
    helper = _helper(lw.builder.module, "__fatkit_malloc", I64, (I64,), _malloc_body(lw.target))
    set_result(lw, returns[0], lw.builder.call(helper, [call_argument(lw, arguments[0], "b64")]), "b64")


def free(lw: Lowering, returns, arguments) -> None:
    """`free(ptr)`: the block goes back to its size class's free list; NULL is ignored."""
    if returns or len(arguments) != 1:
        raise lw.fail("free takes (pointer) and returns nothing")
    helper = _helper(lw.builder.module, "__fatkit_free", ir.VoidType(), (I64,), _free_body(lw.target))
    lw.builder.call(helper, [call_argument(lw, arguments[0], "b64")])


# ------------------------------------------------------------------------------------------ printf

def _memcpy(builder: ir.IRBuilder, destination: ir.Value, source: ir.Value, length: ir.Value) -> None:
    spaces = f"p{destination.type.addrspace}.p{source.type.addrspace}"
    name = f"llvm.memcpy.{spaces}.i64"
    function = builder.module.globals.get(name) or ir.Function(
        builder.module, ir.FunctionType(ir.VoidType(), (destination.type, source.type, I64, I1)), name)
    builder.call(function, [destination, source, length, ir.Constant(I1, 0)])


def _record_body(target):
    def body(function: ir.Function, builder: ir.IRBuilder) -> None:
        blocks = _Blocks(function)
        fmt, arguments, count = function.args
        buffer = runtime_global(builder.module, target, PRINTF,
                                printf_buffer.HEADER_BYTES + printf_buffer.CAPACITY)
        relaxed = Order("monotonic", target.syncscope("gpu"))
        header = printf_buffer.RECORD_HEADER_BYTES
        size = builder.and_(builder.add(count, ir.Constant(I32, header + 7)), ir.Constant(I32, ~7))
        builder.branch(blocks["reserve"])
        builder.position_at_end(blocks["reserve"])  # bytes after `used`, taken only where the record fits
        used = atomic_load(builder, buffer, I32, relaxed, 4)
        end = builder.add(used, size)
        builder.cbranch(builder.icmp_unsigned(">", end, ir.Constant(I32, printf_buffer.CAPACITY)),
                        blocks["drop"], blocks["take"])
        builder.position_at_end(blocks["take"])
        found = compare_exchange(builder, buffer, used, end, relaxed, 4)
        builder.cbranch(builder.icmp_unsigned("==", found, used), blocks["write"], blocks["reserve"])
        builder.position_at_end(blocks["write"])
        start = builder.add(builder.zext(used, I64), ir.Constant(I64, printf_buffer.HEADER_BYTES))
        record = _at(builder, buffer, start)
        builder.store(size, record, align=8)
        builder.store(count, _at(builder, record, 4), align=4)
        builder.store(fmt, _at(builder, record, 8), align=8)
        _memcpy(builder, _at(builder, record, header), builder.inttoptr(arguments, ir.PointerType()),
                builder.zext(count, I64))
        builder.ret_void()
        builder.position_at_end(blocks["drop"])
        atomic_rmw(builder, "add", _at(builder, buffer, 4), ir.Constant(I32, 1), relaxed, 4)
        builder.ret_void()
    return body


def vprintf(lw: Lowering, returns, arguments) -> None:
    """`vprintf(format, args)`: a record of the format's address and the argument bytes its conversions
    read; returns the number of arguments, as CUDA's printf does."""
    if len(returns) > 1 or len(arguments) != 2:
        raise lw.fail("vprintf takes (format, arguments)")
    try:
        layout, size = printf_buffer.argument_layout(_format_string(lw, arguments[0]))
    except printf_buffer.FormatStringError as error:
        raise lw.fail(f"vprintf: {error}") from None
    helper = _helper(lw.builder.module, "__fatkit_printf_record", ir.VoidType(), (I64, I64, I32),
                     _record_body(lw.target))
    lw.builder.call(helper, [call_argument(lw, arguments[0], "b64"), call_argument(lw, arguments[1], "b64"),
                             ir.Constant(I32, size)])
    if returns:
        set_result(lw, returns[0], ir.Constant(I32, len(layout)), "b32")


def _format_string(lw: Lowering, operand: ast.Operand) -> bytes:
    """The bytes (up to the NUL) of the constant module string whose address `operand` holds."""
    name, offset = _constant_address(lw, operand, hops=16)
    pointer = lw.variables[name][1]
    initializer = getattr(pointer, "initializer", None)
    data = getattr(initializer, "constant", None)
    if not isinstance(data, (bytes, bytearray)):
        raise lw.fail(f"vprintf: the format {name} has no constant bytes")
    end = bytes(data).find(0, offset)
    if end < 0:
        raise lw.fail(f"vprintf: the format {name}+{offset} has no terminating NUL")
    return bytes(data[offset:end])


def _constant_address(lw: Lowering, operand: ast.Operand, hops: int) -> tuple[str, int]:
    """(variable, byte offset) when `operand` is, through .param stores, movs, cvta to generic and additions
    of constants, the address of a .global/.const variable with its value fixed at translation time."""
    not_constant = lw.fail("vprintf: the format is not a constant string of the module (its conversions give "
                           "the size of the argument buffer, read at translation time)")
    if hops == 0 or type(operand) is not ast.Name or operand.component is not None:
        raise not_constant
    space = lw.variables.get(operand.name, ("",))[0]
    if space in ("global", "const"):
        return operand.name, 0
    if space == "param":  # the value the last st.param before the call stored
        stores = [i for i in _before_call(lw) if i.opcode == "st" and "param" in i.modifiers
                  and type(i.operands[0]) is ast.Address and i.operands[0].base == operand
                  and i.operands[0].offset == 0]
        if not stores:
            raise not_constant
        return _constant_address(lw, stores[-1].operands[1], hops - 1)
    if operand.name not in lw.registers:
        raise not_constant
    definitions = [i for i in lw.kernel.instructions() if i.opcode not in ("st", "red", "call")
                   and i.operands and i.operands[0] == operand]
    if len(definitions) != 1:
        raise not_constant
    (definition,) = definitions
    if definition.opcode == "mov" or (definition.opcode == "cvta" and "to" not in definition.modifiers
                                      and ("global" in definition.modifiers or "const" in definition.modifiers)):
        return _constant_address(lw, definition.operands[1], hops - 1)
    if definition.opcode == "add" and len(definition.operands) == 3 and type(definition.operands[2]) is ast.IntImm:
        name, offset = _constant_address(lw, definition.operands[1], hops - 1)
        return name, offset + definition.operands[2].value
    raise not_constant


def _before_call(lw: Lowering) -> list[ast.Instruction]:
    """The instructions of the function up to the call being lowered."""
    found: list[ast.Instruction] = []
    for instruction in lw.kernel.instructions():
        if instruction is lw.ins:
            return found
        found.append(instruction)
    return found


# ------------------------------------------------------------------------------------------ call values

def call_argument(lw: Lowering, item: ast.Operand, ptx_type: str) -> ir.Value:
    """An argument of a call to a runtime function: a `.param` variable's value, a register or an immediate."""
    if type(item) is ast.Name and lw.variables.get(item.name, ("",))[0] == "param":
        return lw.builder.load(lw.variables[item.name][1], typ=llvm_type(ptx_type))
    return lw.read(item, ptx_type)


def set_result(lw: Lowering, item: ast.Operand, value: ir.Value, ptx_type: str) -> None:
    """Hand a runtime function's result to the caller's `.param` variable or register."""
    if type(item) is ast.Name and lw.variables.get(item.name, ("",))[0] == "param":
        lw.builder.store(value, lw.variables[item.name][1])
    else:
        lw.write(item, value, ptx_type)


# The external functions this module lowers: name → lowering(lw, returns, arguments).
RUNTIME_FUNCTIONS = {"malloc": malloc, "free": free, "vprintf": vprintf}
