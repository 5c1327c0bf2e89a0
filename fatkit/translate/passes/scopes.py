"""Pass 1, identifiers and scopes: each function's body becomes one flat block of uniquely named declarations.

PTX scopes registers, labels, `.param` variables, prototypes and target lists by `{ }` block (nvcc's call
sequences and inline asm open one each, and may shadow or redeclare an outer name). A name declared in a
nested block that is already taken in the function is renamed (`%r1` → `%r1$0`) along with its uses in that
block; `%r<N>` is expanded to `%r0` … `%rN-1`; every identifier an instruction uses must then resolve to a
declaration in scope, a parameter, a module-level name or a special register, else the function fails with
the unknown name and its PTX line.

Two predefined and declared forms become plain operands here too: `WARP_SZ` is the constant 32 (the ISA's
warp size, which PTX code indexes lanes by, whatever the target's wave size), and a vector register
(`.reg .v4 .u32 %v`) becomes one scalar register per element (`%v_x$0` …): `%v.x` (or `.r`, …) names its
element and `%v` the `{…}` vector of all of them, which ld/st/mov take as any vector operand.
"""

from __future__ import annotations

import dataclasses

from fatkit.translate.passes.base import Prepared, Rewriter, each_function, fail
from fatkit.translate.ptx import ast

_SCOPED = (ast.Variable, ast.Label, ast.CallPrototype, ast.TargetList)
_VARIABLE_FIELDS = dataclasses.fields(ast.Variable)
_ELEMENTS = "xyzw"
_COLOUR_ELEMENTS = {"r": "x", "g": "y", "b": "z", "a": "w"}
WARP_SIZE = 32  # PTX's WARP_SZ


def run(prepared: Prepared) -> Prepared:
    module = prepared.module
    global_names = {item.name for item in module.items if type(item) in (ast.Function, ast.Variable, ast.Alias)}
    return each_function(prepared, lambda function, _: _flatten(function, global_names))


def _flatten(function: ast.Function, global_names: set[str]) -> ast.Function:
    rewriter = Rewriter(function)
    claimed = {p.name for p in (*function.params, *function.returns)}
    out: list[ast.Statement] = []
    vectors: dict[str, tuple[str, ...]] = {}
    _block(function, function.body, [{name: name for name in claimed}], rewriter, claimed, global_names, out,
           vectors, nested=False)
    flat = dataclasses.replace(function.body, statements=tuple(out))
    return dataclasses.replace(function, body=flat)


def _vector_register(function, statement: ast.Variable, name: str, rewriter: Rewriter,
                     vectors: dict[str, tuple[str, ...]]) -> list[ast.Variable]:
    """The scalar registers standing for the elements of vector register `name` (recorded in `vectors`)."""
    if statement.vector not in (2, 4) or statement.array or statement.type not in ast.TYPE_SIZES:
        raise fail(function, statement, f".reg .v{statement.vector} .{statement.type} {name}: vector registers "
                                        "are .v2 or .v4 of a sized type, not arrays")
    elements = tuple(rewriter.fresh(f"{name}_{c}") for c in _ELEMENTS[:statement.vector])
    vectors[name] = elements
    return [dataclasses.replace(statement, name=element, vector=None, count=None) for element in elements]


def _declared(statement) -> list[str]:
    if type(statement) is ast.Variable and statement.count is not None:
        return [f"{statement.name}{i}" for i in range(statement.count)]
    return [statement.name]


def _block(function, block: ast.Block, scopes: list[dict[str, str]], rewriter: Rewriter, claimed: set[str],
           global_names: set[str], out: list, vectors: dict[str, tuple[str, ...]], nested: bool) -> None:
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
            _block(function, statement, scopes, rewriter, claimed, global_names, out, vectors, nested=True)
        elif kind is ast.Variable:
            names = _declared(statement)
            if statement.vector and statement.state_space == "reg":
                for n in names:
                    out.extend(_vector_register(function, statement, scope[n], rewriter, vectors))
            elif statement.count is not None:  # (`%r<N>`: thousands of names; one replace's work, not N)
                fields = {f.name: getattr(statement, f.name) for f in _VARIABLE_FIELDS}
                fields["count"] = None
                del fields["name"]
                out.extend(ast.Variable(name=scope[n], **fields) for n in names)
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
            operands = tuple(_operand(function, statement, op, lambda n, s=statement: resolve(n, s), vectors)
                             if i != callee else _callee_name(function, statement, op, scopes, global_names)
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


def _operand(function, ins, op: ast.Operand, resolve, vectors: dict[str, tuple[str, ...]]) -> ast.Operand:
    """`op` with every identifier in it resolved (renamed where its declaration was), WARP_SZ as 32 and
    vector registers as their element registers."""
    kind = type(op)
    if kind is ast.Name:
        if op.name == "WARP_SZ" and op.component is None:
            return ast.IntImm(WARP_SIZE)
        name = resolve(op.name)
        if name in vectors:
            return _vector_element(function, ins, op, vectors[name])
        return op if name == op.name else ast.Name(name, op.component)

    def each(child: ast.Operand) -> ast.Operand:
        return _operand(function, ins, child, resolve, vectors)

    if kind is ast.Address:
        base = None if op.base is None else each(op.base)
        if base is not None and type(base) is not ast.Name:
            raise fail(function, ins, f"a vector register ({op.base.name}) cannot be an address")
        extra = tuple(each(e) for e in op.extra)
        return op if base is op.base and extra == op.extra else ast.Address(base, op.offset, extra)
    if kind in (ast.Vector, ast.ArgList):
        items = tuple(each(i) for i in op.items)
        return op if all(a is b for a, b in zip(items, op.items)) else kind(items)
    if kind is ast.Pair:
        return ast.Pair(each(op.first), each(op.second))
    if kind in (ast.Negated, ast.Minus):
        return kind(each(op.operand))
    if kind is ast.SymbolRef:
        return dataclasses.replace(op, name=resolve(op.name))
    return op


def _vector_element(function, ins, op: ast.Name, elements: tuple[str, ...]) -> ast.Operand:
    """`%v.y` → its element register; `%v` → the vector of all elements."""
    if op.component is None:
        return ast.Vector(tuple(ast.Name(e) for e in elements))
    index = _ELEMENTS.find(_COLOUR_ELEMENTS.get(op.component, op.component))
    if not 0 <= index < len(elements):
        raise fail(function, ins, f"{op.name}.{op.component}: no such element of a .v{len(elements)} register")
    return ast.Name(elements[index])
