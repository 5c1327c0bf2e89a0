"""Pass 4, special registers: every use reads a register that one `mov` filled from the special register.

Registers that keep their value for the whole thread (%tid, %ntid, %ctaid, %laneid, %lanemask_*, …) are
read once, at the function's entry; those that change while it runs (%clock, %clock64, %globaltimer, %smid,
%warpid, the performance counters) are read right before each instruction that uses them. Lowering then
sees special registers only as the source of a `mov` of their own type.
"""

from __future__ import annotations

import re

from fatkit.translate.passes.base import Prepared, Rewriter, each_function, instruction
from fatkit.translate.ptx import ast

# The PTX type of each special register not of type .u32.
_TYPES = {"%clock64": "u64", "%globaltimer": "u64", "%gridid": "u64", "%current_graph_exec": "u64",
          "%is_explicit_cluster": "pred", **{f"%lanemask_{k}": "b32" for k in ("eq", "le", "lt", "ge", "gt")}}
_CHANGING = re.compile(r"%(clock|clock_hi|clock64|globaltimer|globaltimer_lo|globaltimer_hi|smid|warpid|"
                       r"pm\d+(_64)?)\Z")


def special_type(name: str) -> str:
    if re.fullmatch(r"%pm\d+_64", name):
        return "u64"
    if name.startswith("%envreg"):
        return "b32"
    return _TYPES.get(name, "u32")


def run(prepared: Prepared) -> Prepared:
    return each_function(prepared, lambda function, _: _normalise(function))


def _normalise(function: ast.Function) -> ast.Function:
    rewriter = Rewriter(function)
    entry: dict[tuple[str, str | None], ast.Name] = {}
    entry_reads: list[ast.Instruction] = []
    out: list[ast.Statement] = []

    def replace(op: ast.Operand, before: list, line: int) -> ast.Operand:
        kind = type(op)
        if kind is ast.Vector:
            items = tuple(replace(item, before, line) for item in op.items)
            return op if all(a is b for a, b in zip(items, op.items)) else ast.Vector(items)
        if kind in (ast.Negated, ast.Minus):
            inner = replace(op.operand, before, line)
            return op if inner is op.operand else kind(inner)
        if kind is not ast.Name or not op.is_special_register:
            return op
        ptx_type = special_type(op.name)
        if _CHANGING.match(op.name):
            register = rewriter.register(ptx_type, "%sreg", line)
            before.append(instruction("mov", (ptx_type,), (register, op), line))
            return register
        key = (op.name, op.component)
        if key not in entry:
            entry[key] = rewriter.register(ptx_type, "%sreg", line)
            entry_reads.append(instruction("mov", (ptx_type,), (entry[key], op), line))
        return entry[key]

    for statement in function.body.statements:
        if type(statement) is not ast.Instruction:
            out.append(statement)
            continue
        before: list[ast.Instruction] = []
        operands = tuple(replace(op, before, statement.line) for op in statement.operands)
        out.extend(before)
        out.append(statement if all(a is b for a, b in zip(operands, statement.operands)) else
                   ast.Instruction(statement.opcode, statement.modifiers, operands, statement.guard,
                                   statement.line, statement.column))
    first = next((i for i, s in enumerate(out) if type(s) in (ast.Instruction, ast.Label)), len(out))
    return rewriter.body([*out[:first], *entry_reads, *out[first:]])
