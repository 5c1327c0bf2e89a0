"""Pass 3, guards to branches: `@p instr` (any instruction but `bra`) becomes `@!p bra skip; instr; skip:`.

A guarded-off thread does not execute the instruction at all (no memory access, no barrier arrival), which
a branch around it expresses exactly; lowering then only ever sees guards on `bra`.
"""

from __future__ import annotations

import dataclasses

from fatkit.translate.passes.base import Prepared, Rewriter, each_function, instruction
from fatkit.translate.ptx import ast


def run(prepared: Prepared) -> Prepared:
    return each_function(prepared, lambda function, _: _branches(function))


def _branches(function: ast.Function) -> ast.Function:
    rewriter = Rewriter(function)
    out: list[ast.Statement] = []
    for statement in function.body.statements:
        if type(statement) is not ast.Instruction or statement.guard is None or statement.opcode == "bra":
            out.append(statement)
            continue
        guard, skip = statement.guard, rewriter.fresh("$skip")
        branch = instruction("bra", (), (ast.Name(skip),), statement.line)
        out.append(dataclasses.replace(branch, guard=ast.Guard(guard.register, not guard.negated)))
        out.append(dataclasses.replace(statement, guard=None))
        out.append(ast.Label(skip, line=statement.line))
    return rewriter.body(out)
