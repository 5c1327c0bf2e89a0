"""Control flow: bra, ret and direct calls of `.func` functions."""

from __future__ import annotations

from fatkit.translate.lower.core import handles
from fatkit.translate.ptx import ast


@handles("bra")
def bra(lw, ins):
    lw.check_modifiers(ins, {"uni"})
    (target,) = lw.operands(ins, 1)
    lw.builder.branch(lw.label(target))


@handles("call")
def call(lw, ins):
    """`call (r…), f, (a…)`: a direct call; the operands name `.param` variables, passed by pointer."""
    lw.check_modifiers(ins, {"uni"})
    operands = list(ins.operands)
    returns = operands.pop(0).items if operands and type(operands[0]) is ast.ArgList else ()
    if not operands or type(operands[0]) is not ast.Name:
        raise lw.fail("only direct calls of a function by name are supported")
    name = operands.pop(0).name
    arguments = operands.pop(0).items if operands and type(operands[0]) is ast.ArgList else ()
    if operands:
        raise lw.fail("indirect calls (with a prototype or a target list) are not supported yet")
    callee = lw.callees.get(name)
    if callee is None:
        raise lw.fail(f"{name} is not a .func defined in this module")
    function, declaration = callee
    if len(returns) != len(declaration.returns) or len(arguments) != len(declaration.params):
        raise lw.fail(f"{name} takes {len(declaration.returns)} return and {len(declaration.params)} "
                        f"parameter value(s)")
    pointers = []
    for item in (*returns, *arguments):
        if type(item) is not ast.Name or lw.variables.get(item.name, ("",))[0] != "param":
            raise lw.fail(f"call operand {item} is not a .param variable")
        pointers.append(lw.variables[item.name][1])
    context = list(lw.function.args[:lw.target.context_arguments])
    lw.builder.call(function, context + pointers)


@handles("ret")
def ret(lw, ins):
    lw.check_modifiers(ins, {"uni"})
    lw.operands(ins, 0)
    lw.builder.ret_void()
