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
another's would need the layout of .shared variables, which PTX leaves undefined). A register carried
around a loop (a phi) is followed when every value it receives is such an address or the phi itself plus
offsets: then it is a phi of pointers. Everything else stays an `inttoptr`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable

from llvmlite import ir

_FOLLOWED = 8  # add/sub/cast levels followed from an address down to its base pointer
_OFFSET_NODES = 48  # instructions looked at to see that an offset mentions no address (more: assumed it does)
_NESTED_PHIS = 16  # phis followed through one another from one address (a join of joins…)
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
    for its value until then), or into that pointer itself (no offset). Its uses stay as they are: only
    its own text changes, or it leaves its block and its uses name the pointer."""

    def __init__(self, parent: ir.Block, value: ir.Value, address_space: int, bits: int):
        super().__init__(parent, "inttoptr", value, ir.PointerType(addrspace=address_space))
        self.bits = bits
        self.based = False  # set by `finish`: operands are then the base pointer and the offset

    def get_reference(self) -> str:
        # the base pointer itself where the offset is 0 (`finish` then takes this out of its block)
        if self.based and _zero(self.operands[1]):
            return self.operands[0].get_reference()
        return super().get_reference()

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
    `resolve` gives the value a stand-in (a register's value on entry to a block) stands for."""
    folder = _Folder(resolve)
    bare: dict[ir.Block, set[int]] = {}  # block → ids of its pointers that are their base pointer as it is
    for pointer in pointers:
        found = folder.based(pointer.operands[0], pointer.type.addrspace, pointer.bits, _FOLLOWED)
        if found is None:
            folder.abandon()
            continue
        folder.commit()
        builder = ir.IRBuilder(pointer.parent)
        builder.position_before(pointer)
        pointer.operands = _built(builder, *found, pointer.bits)
        pointer.based = True
        if _zero(pointer.operands[1]):
            bare.setdefault(pointer.parent, set()).add(id(pointer))
    for block, dropped in bare.items():
        block.instructions = [i for i in block.instructions if id(i) not in dropped]


_Terms = list[tuple[bool, ir.Value]]  # (negated, term): the address is its base pointer ± each term


def _built(builder: ir.IRBuilder, base: ir.Value, terms: _Terms, bits: int) -> tuple[ir.Value, ir.Value]:
    """(pointer, offset) for `base` plus `terms`. From a variable (an address the link fixes) the terms are
    summed into one index: variable plus offset is what an LDS instruction takes, the variable's address
    going into its offset field, and two accesses at one offset from two variables then share it. From a
    pointer computed at run time (a kernel parameter) each term is one GEP, as the PTX took its steps, so
    that a pointer it computed once is computed once and a step of uniform values stays in scalar
    registers."""
    index = ir.IntType(bits)
    offset: ir.Value = ir.Constant(index, 0)
    if isinstance(base, (ir.GlobalValue, ir.Constant)):  # a variable, or a constant expression of one
        for position, (negated, term) in enumerate(terms):
            term = _resized(builder, term, index)
            if position == 0:
                offset = builder.neg(term) if negated else term
            else:
                offset = (builder.sub if negated else builder.add)(offset, term)
        return base, offset
    for negated, term in terms:
        term = _resized(builder, term, index)
        base = builder.gep(base, [builder.neg(term) if negated else term], source_etype=ir.IntType(8))
    return base, offset


class _Folder:
    """Finds the pointer an address was computed from. A register carried around a loop is a phi: when
    each of its incoming values is a pointer plus offsets, or the phi itself plus offsets (the step of a
    loop), the address is a phi of pointers beside it, each incoming pointer built at the end of its
    predecessor. Such phis are made while one address is looked at and kept only if it folds
    (`commit`), else dropped (`abandon`): none of them is in the function until then."""

    def __init__(self, resolve: Callable[[ir.Value], ir.Value]):
        self.resolve = resolve
        self.phis: dict[tuple[int, int, int], ir.PhiInstr | None] = {}  # (phi, space, bits) → pointer phi
        # (integer phi, pointer phi, pointer width, [((base, terms), predecessor)…]) to place on commit
        self.pending: list[tuple[ir.PhiInstr, ir.PhiInstr, int, list]] = []
        self.nested = 0  # phis being looked at inside one another
        # id(value) → (value, whether it mentions an address): an offset feeds many addresses, and its search
        # is the same each time (finish adds instructions but changes no integer one's operands)
        self.mentions: dict[int, tuple[ir.Value, bool]] = {}

    def _mentions_address(self, value: ir.Value) -> bool:
        known = self.mentions.get(id(value))
        if known is None:
            known = self.mentions[id(value)] = (value, _mentions_address(value, self.resolve))
        return known[1]

    def commit(self) -> None:
        for phi, pointer, bits, incomings in self.pending:
            made: dict[int, ir.Value] = {}  # predecessor → its pointer (a block with two edges here: one value)
            for (base, terms), block in incomings:
                if id(block) not in made:
                    builder = ir.IRBuilder(block)
                    builder.position_before(block.terminator)
                    built, offset = _built(builder, base, terms, bits)
                    made[id(block)] = built if _zero(offset) else builder.gep(built, [offset],
                                                                              source_etype=ir.IntType(8))
                pointer.add_incoming(made[id(block)], block)
            phi.parent.instructions.insert(0, pointer)
        self.pending = []

    def abandon(self) -> None:
        self._drop(0)

    def _drop(self, first: int) -> None:
        """Forget the pointer phis made since pending[first] (never to be used: marked failed)."""
        for phi, pointer, bits, _ in self.pending[first:]:
            self.phis[id(phi), pointer.type.addrspace, bits] = None
        del self.pending[first:]

    def based(self, value: ir.Value, address_space: int, bits: int, depth: int) -> tuple[ir.Value, _Terms] | None:
        """(pointer, terms) with value ≡ ptrtoint(pointer) + Σ ±term (mod 2^bits), the terms in the order
        the PTX added them; None where `value` is no such computation."""
        value = self.resolve(value)
        if not isinstance(value.type, ir.IntType) or value.type.width < bits or not isinstance(value, ir.Instruction):
            return None
        operation = value.opname
        if isinstance(value, ir.PhiInstr):
            pointer = self._pointer_phi(value, address_space, bits)
            return None if pointer is None else (pointer, [])
        if isinstance(value, ir.CastInstr):
            source = value.operands[0]
            if operation == "ptrtoint":
                return (source, []) if getattr(source.type, "addrspace", None) == address_space else None
            if operation in ("trunc", "zext", "sext") and depth:  # each keeps the low `bits` bits
                return self.based(source, address_space, bits, depth - 1)
            return None
        if operation not in ("add", "sub") or not depth or type(value) is not ir.Instruction:
            return None
        left, right = value.operands
        if not self._mentions_address(right):
            found = self.based(left, address_space, bits, depth - 1)
            if found is not None:
                return found[0], [*found[1], (operation == "sub", right)]
        if operation == "add" and not self._mentions_address(left):
            found = self.based(right, address_space, bits, depth - 1)
            if found is not None:
                return found[0], [*found[1], (False, left)]
        return None

    def _pointer_phi(self, phi: ir.PhiInstr, address_space: int, bits: int) -> ir.PhiInstr | None:
        key = (id(phi), address_space, bits)
        if key in self.phis:  # made already, failed already, or being made (a loop's step reaching back)
            return self.phis[key]
        if self.nested == _NESTED_PHIS:
            return None
        pointer = ir.PhiInstr(phi.parent, ir.PointerType(addrspace=address_space), "")
        self.phis[key] = pointer
        incomings, first = [], len(self.pending)
        self.nested += 1
        try:
            for value, block in phi.incomings:
                found = self.based(value, address_space, bits, _FOLLOWED)
                if found is None:  # then neither this phi nor those made for it since (they may use it)
                    self.phis[key] = None
                    self._drop(first)
                    return None
                incomings.append((found, block))
        finally:
            self.nested -= 1
        self.pending.append((phi, pointer, bits, incomings))
        return pointer


def _zero(value: ir.Value) -> bool:
    return isinstance(value, ir.Constant) and value.constant == 0


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
