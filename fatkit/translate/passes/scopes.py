"""Pass 1, identifiers and scopes: each function's body becomes one flat block of uniquely named declarations.

PTX scopes registers, labels, `.param` variables, prototypes and target lists by `{ }` block (nvcc's call
sequences and inline asm open one each, and may shadow or redeclare an outer name). A name declared in a
nested block that is already taken in the function is renamed (`%r1` → `%r1$0`) along with its uses in that
block; `%r<N>` is expanded to `%r0` … `%rN-1`; every identifier an instruction uses must then resolve to a
declaration in scope, a parameter, a module-level name or a special register, else the function fails with
the unknown name and its PTX line.
"""

from __future__ import annotations

import dataclasses

from fatkit.translate.passes.base import Prepared, Rewriter, each_function, fail
from fatkit.translate.ptx import ast

_SCOPED = (ast.Variable, ast.Label, ast.CallPrototype, ast.TargetList)


def run(prepared: Prepared) -> Prepared:
    module = prepared.module
    global_names = {item.name for item in module.items if type(item) in (ast.Function, ast.Variable, ast.Alias)}
    return each_function(prepared, lambda function, _: _flatten(function, global_names))


def _flatten(function: ast.Function, global_names: set[str]) -> ast.Function:
    rewriter = Rewriter(function)
    claimed = {p.name for p in (*function.params, *function.returns)}
    out: list[ast.Statement] = []
    _block(function, function.body, [{name: name for name in claimed}], rewriter, claimed, global_names, out,
           nested=False)
    flat = dataclasses.replace(function.body, statements=tuple(out))
    return dataclasses.replace(function, body=flat)


def _declared(statement) -> list[str]:
    if type(statement) is ast.Variable and statement.count is not None:
        return [f"{statement.name}{i}" for i in range(statement.count)]
    return [statement.name]


def _block(function, block: ast.Block, scopes: list[dict[str, str]], rewriter: Rewriter, claimed: set[str],
           global_names: set[str], out: list, nested: bool) -> None:
    """Declare the block's names first (labels may be used before they appear), then rewrite its statements;
    `claimed` holds the names the flat body already declares."""
    scope: dict[str, str] = {}
    for statement in block.statements:
        if type(statement) not in _SCOPED:
            continue
        for name in _declared(statement):
            if name in scope:
                raise fail(function, statement, f"{name} is declared twice in one scope")
            scope[name] = rewriter.fresh(name) if nested and name in claimed else name
            claimed.add(scope[name])
    scopes = [*scopes, scope]

    def resolve(name: str, statement) -> str:
        for level in reversed(scopes):
            if name in level:
                return level[name]
        if name in global_names or ast.is_special_register(name):
            return name
        raise fail(function, statement, f"unknown identifier {name}")

    for statement in block.statements:
        kind = type(statement)
        if kind is ast.Block:
            _block(function, statement, scopes, rewriter, claimed, global_names, out, nested=True)
        elif kind is ast.Variable:
            names = _declared(statement)
            if statement.count is not None:
                out.extend(dataclasses.replace(statement, name=scope[n], count=None) for n in names)
            else:
                out.append(_renamed(statement, scope[statement.name]))
        elif kind in (ast.Label, ast.CallPrototype):
            out.append(_renamed(statement, scope[statement.name]))
        elif kind is ast.TargetList:
            targets = tuple(resolve(t, statement) for t in statement.targets)
            out.append(dataclasses.replace(statement, name=scope[statement.name], targets=targets))
        elif kind is ast.Instruction:
            guard = statement.guard
            if guard is not None and resolve(guard.register, statement) != guard.register:
                guard = dataclasses.replace(guard, register=resolve(guard.register, statement))
            callee = _callee(statement)
            operands = tuple(_operand(op, lambda n: resolve(n, statement)) if i != callee
                             else _callee_name(function, statement, op, scopes, global_names)
                             for i, op in enumerate(statement.operands))
            if guard is not statement.guard or any(a is not b for a, b in zip(operands, statement.operands)):
                statement = dataclasses.replace(statement, guard=guard, operands=operands)
            out.append(statement)
        else:
            out.append(statement)


def _renamed(statement, name: str):
    return statement if statement.name == name else dataclasses.replace(statement, name=name)


def _callee(ins: ast.Instruction) -> int | None:
    """The index of a call's callee operand (after its return list, if any)."""
    if ins.opcode != "call" or not ins.operands:
        return None
    return 1 if type(ins.operands[0]) is ast.ArgList else 0


def _callee_name(function, ins, op, scopes, global_names) -> ast.Operand:
    """A called function, or a register holding one's address."""
    if type(op) is not ast.Name:
        return op
    for level in reversed(scopes):
        if op.name in level:
            return dataclasses.replace(op, name=level[op.name])
    if op.name not in global_names:
        raise fail(function, ins, f"{op.name} is not a .func defined in this module")
    return op


def _operand(op: ast.Operand, resolve) -> ast.Operand:
    """`op` with every identifier in it resolved (renamed where its declaration was)."""
    kind = type(op)
    if kind is ast.Name:
        name = resolve(op.name)
        return op if name == op.name else ast.Name(name, op.component)
    if kind is ast.Address:
        base = None if op.base is None else _operand(op.base, resolve)
        extra = tuple(_operand(e, resolve) for e in op.extra)
        return op if base is op.base and extra == op.extra else ast.Address(base, op.offset, extra)
    if kind in (ast.Vector, ast.ArgList):
        items = tuple(_operand(i, resolve) for i in op.items)
        return op if all(a is b for a, b in zip(items, op.items)) else kind(items)
    if kind is ast.Pair:
        return ast.Pair(_operand(op.first, resolve), _operand(op.second, resolve))
    if kind is ast.Negated:
        return ast.Negated(_operand(op.operand, resolve))
    if kind is ast.SymbolRef:
        return dataclasses.replace(op, name=resolve(op.name))
    return op
