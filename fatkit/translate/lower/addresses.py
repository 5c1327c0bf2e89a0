"""Addresses as pointers from their base: what `Lowering.address` and `cvta` build a PTX address with.

PTX computes addresses as integers: `mov.u32 %r1, tile; add.s32 %r2, %r1, %r3; ld.shared.f32 %f1, [%r2+4]`.
Turned back into a pointer with `inttoptr`, such an address tells LLVM neither which object it lies in nor
its alignment, so LLVM cannot merge neighbouring accesses into one wide one (`ds_read_b128`,
`global_load_dwordx4`) or tell apart accesses to different variables. Where the integer is visibly a
pointer's address plus an offset (`ptrtoint P` through add, sub, trunc, zext and sext), the address is
built as `getelementptr i8, P, offset` instead: P's variable, with its alignment, is then the access's base.

Only what is the same address is folded. The pointer's address space and width are the access's, and the
arithmetic is modulo 2^bits of that pointer, which add, sub, trunc (to at least that width), zext and sext
all keep; a GEP without `inbounds` computes its address modulo the same width. The offset must not itself
mention an address (no `ptrtoint` among the terms it is computed from): then the address is the base
variable's plus an integer, as in the code PTX's compilers emit (an address into one variable made from
another's would need the layout of .shared variables, which PTX leaves undefined). Everything else, a
register carried around a loop (a phi, here an unresolved value) included, stays an `inttoptr`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable

from llvmlite import ir

_FOLLOWED = 8  # add/sub/cast levels followed from an address down to its base pointer
_OFFSET_NODES = 48  # instructions looked at to see that an offset mentions no address (more: assumed it does)
_THROUGH = ("add", "sub", "mul", "shl", "lshr", "ashr", "and", "or", "xor", "trunc", "zext", "sext", "select")


@lru_cache(maxsize=16)
def _pointer_widths(data_layout: str) -> dict[int, int]:
    widths = {0: 64}
    for space, bits in re.findall(r"(?:^|-)p(\d*):(\d+)", data_layout):
        widths[int(space or 0)] = int(bits)
    return widths


def pointer_bits(data_layout: str, address_space: int) -> int:
    """The width of a pointer of `address_space` in `data_layout` (LLVM's default for unlisted spaces)."""
    widths = _pointer_widths(data_layout)
    return widths.get(address_space, widths[0])


class PointerAt(ir.instructions.CastInstr):
    """`inttoptr` of an address, which `finish` turns into a GEP from the pointer the address was computed
    from once the function's values are all known (a register read in another block is only a stand-in
    for its value until then). Its uses stay as they are: only its own text changes."""

    def __init__(self, parent: ir.Block, value: ir.Value, address_space: int, bits: int):
        super().__init__(parent, "inttoptr", value, ir.PointerType(addrspace=address_space))
        self.bits = bits
        self.based = False  # set by `finish`: operands are then the base pointer and the offset

    def descr(self, buf):
        if not self.based:
            super().descr(buf)
            return
        base, offset = self.operands
        buf.append(f"getelementptr i8, {base.type} {base.get_reference()}, {offset.type} {offset.get_reference()}"
                   f"{self._stringify_metadata(leading_comma=True)}\n")


def pointer_at(builder: ir.IRBuilder, value: ir.Value, address_space: int, bits: int) -> PointerAt:
    """A pointer of `address_space` (`bits` wide) to the address the integer `value` holds (an inttoptr,
    which truncates or zero-extends `value` to the pointer's width, until `finish`)."""
    pointer = PointerAt(builder.block, value, address_space, bits)
    builder._insert(pointer)
    return pointer


def finish(pointers: list[PointerAt], resolve: Callable[[ir.Value], ir.Value]) -> None:
    """Each of `pointers` a GEP from the pointer its address was computed from, where that shows;
    `resolve` gives the value a stand-in (a register's value on entry to a block) stands for.

    From a variable (an address the link fixes) the offsets are summed into one index: variable plus
    offset is what an LDS instruction takes, the variable's address going into its offset field, and two
    accesses at one offset from two variables then share it. From a pointer computed at run time (a
    kernel parameter) each add is one GEP, as the PTX took its steps, so that a pointer it computed once
    is computed once and a step of uniform values stays in scalar registers."""
    for pointer in pointers:
        found = _based(pointer.operands[0], pointer.type.addrspace, pointer.bits, resolve, _FOLLOWED)
        if found is None:
            continue
        base, terms = found
        builder = ir.IRBuilder(pointer.parent)
        builder.position_before(pointer)
        index = ir.IntType(pointer.bits)
        offset = ir.Constant(index, 0)
        if isinstance(base, (ir.GlobalValue, ir.Constant)):  # a variable, or a constant expression of one
            for position, (negated, term) in enumerate(terms):
                term = _resized(builder, term, index)
                if position == 0:
                    offset = builder.neg(term) if negated else term
                else:
                    offset = (builder.sub if negated else builder.add)(offset, term)
        else:
            for negated, term in terms:
                term = _resized(builder, term, index)
                base = builder.gep(base, [builder.neg(term) if negated else term], source_etype=ir.IntType(8))
        pointer.operands = (base, offset)
        pointer.based = True


def _based(value: ir.Value, address_space: int, bits: int, resolve: Callable[[ir.Value], ir.Value],
           depth: int) -> tuple[ir.Value, list[tuple[bool, ir.Value]]] | None:
    """(pointer, [(negated, term)…]) with value ≡ ptrtoint(pointer) ± term ± … (mod 2^bits), the terms in
    the order the PTX added them; None where `value` is no such computation."""
    value = resolve(value)
    if not isinstance(value.type, ir.IntType) or value.type.width < bits or not isinstance(value, ir.Instruction):
        return None
    operation = value.opname
    if isinstance(value, ir.CastInstr):
        source = value.operands[0]
        if operation == "ptrtoint":
            return (source, []) if getattr(source.type, "addrspace", None) == address_space else None
        if operation in ("trunc", "zext", "sext") and depth:  # each keeps the low `bits` bits
            return _based(source, address_space, bits, resolve, depth - 1)
        return None
    if operation not in ("add", "sub") or not depth or type(value) is not ir.Instruction:
        return None
    left, right = value.operands
    if not _mentions_address(right, resolve):
        found = _based(left, address_space, bits, resolve, depth - 1)
        if found is not None:
            return found[0], [*found[1], (operation == "sub", right)]
    if operation == "add" and not _mentions_address(left, resolve):
        found = _based(right, address_space, bits, resolve, depth - 1)
        if found is not None:
            return found[0], [*found[1], (False, left)]
    return None


def _resized(builder: ir.IRBuilder, value: ir.Value, to: ir.IntType) -> ir.Value:
    """`value` modulo 2^to.width (every term is at least that wide)."""
    if value.type.width == to.width:
        return value
    if isinstance(value, ir.Constant):
        return ir.Constant(to, value.constant & ((1 << to.width) - 1))
    return builder.trunc(value, to)


def _mentions_address(value: ir.Value, resolve: Callable[[ir.Value], ir.Value]) -> bool:
    """Whether the integer `value` may be computed from an address: a `ptrtoint` or a pointer among the
    arithmetic it comes from (loads, calls, constants, arguments and block inputs end the search), or more
    of that arithmetic than is looked at."""
    pending, seen = [value], 0
    while pending:
        item = resolve(pending.pop())
        if isinstance(item.type, ir.PointerType) or isinstance(item, ir.FormattedConstant):
            return True  # (a constant in LLVM's own text may be an address: a `ptrtoint` expression)
        if not isinstance(item, ir.Instruction) or item.opname not in _THROUGH and item.opname != "ptrtoint":
            continue
        if item.opname == "ptrtoint":
            return True
        seen += 1
        if seen > _OFFSET_NODES:
            return True
        pending.extend(item.operands)
    return False
