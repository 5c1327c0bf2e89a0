"""Data movement and memory: mov, ld/st in every state space (scalar and .v2/.v4), cvta."""

from __future__ import annotations

from llvmlite import ir

from fatkit.translate.lower.core import I32, handles, llvm_type
from fatkit.translate.ptx import ast

_MEMORY_SPACES = ("global", "param", "shared", "local", "const")
_CACHE_HINTS = {"ca", "cg", "cs", "lu", "cv", "wb", "wt"}


@handles("mov")
def mov(lw, ins):
    lw.check_modifiers(ins, set())
    (t,) = lw.types(ins, 1)
    d, a = lw.operands(ins, 2)
    lw.write(d, lw.read(a, t), t)


def _access(lw, ins, stored: bool):
    """ld/st: state space, element type and vector width (1, 2, 4); cache hints are ignored."""
    spaces = [m for m in ins.modifiers if m in _MEMORY_SPACES]
    if len(spaces) > 1:
        raise lw.fail("more than one state space")
    space = spaces[0] if spaces else "generic"
    widths = [m for m in ins.modifiers if m in ("v2", "v4")]
    allowed = set(spaces) | set(widths) | _CACHE_HINTS | ({"nc"} if space == "global" else set())
    lw.check_modifiers(ins, allowed)
    (t,) = lw.types(ins, 1)
    if t == "pred":
        raise lw.fail("memory accesses of .pred do not exist")
    return space, t, int(widths[0][1]) if widths else 1


@handles("ld")
def ld(lw, ins):
    space, t, width = _access(lw, ins, stored=False)
    d, a = lw.operands(ins, 2)
    pointer, size = lw.address(a, space), ast.TYPE_SIZES[t]
    if width == 1:
        lw.write(d, lw.builder.load(pointer, typ=llvm_type(t), align=size), t)
        return
    vector = lw.builder.load(pointer, typ=ir.VectorType(llvm_type(t), width), align=size * width)
    for i, item in enumerate(_vector(lw, d, width)):
        if type(item) is not ast.Sink:
            lw.write(item, lw.builder.extract_element(vector, ir.Constant(I32, i)), t)


@handles("st")
def st(lw, ins):
    space, t, width = _access(lw, ins, stored=True)
    a, v = lw.operands(ins, 2)
    pointer, size = lw.address(a, space), ast.TYPE_SIZES[t]
    if width == 1:
        lw.builder.store(lw.read(v, t), pointer, align=size)
        return
    vector = ir.Constant(ir.VectorType(llvm_type(t), width), ir.Undefined)
    for i, item in enumerate(_vector(lw, v, width)):
        vector = lw.builder.insert_element(vector, lw.read(item, t), ir.Constant(I32, i))
    lw.builder.store(vector, pointer, align=size * width)


def _vector(lw, operand: ast.Operand, width: int) -> tuple[ast.Operand, ...]:
    if type(operand) is not ast.Vector or len(operand.items) != width:
        raise lw.fail(f"a .v{width} access needs a {{…}} operand of {width} registers")
    return operand.items


@handles("cvta")
def cvta(lw, ins):
    """Between a state space's addresses and generic ones: an addrspacecast where the target gives the
    space its own address space (AMDGPU .shared/.local: 32-bit offsets ↔ flat addresses), else the same
    number."""
    spaces = [m for m in ins.modifiers if m in ("global", "shared", "local", "const")]
    if len(spaces) != 1:
        raise lw.fail("cvta needs one of .global/.shared/.local/.const")
    lw.check_modifiers(ins, {"to", spaces[0]})
    (t,) = lw.types(ins, 1)
    d, a = lw.operands(ins, 2)
    space = lw.address_space(spaces[0])
    value = lw.read(a, t)
    window = lw.callees.window if spaces[0] == "shared" else None
    if window:  # host shared addresses are offsets into the window
        base = lw.builder.ptrtoint(window.base, value.type)
        value = (lw.builder.sub if "to" in ins.modifiers else lw.builder.add)(value, base)
    elif space != 0:
        source, target = (0, space) if "to" in ins.modifiers else (space, 0)
        pointer = lw.builder.inttoptr(value, ir.PointerType(addrspace=source))
        cast = lw.builder.addrspacecast(pointer, ir.PointerType(addrspace=target))
        value = lw.builder.ptrtoint(cast, value.type)
    lw.write(d, value, t)
