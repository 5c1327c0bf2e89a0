"""Pass 2, operand expansion: vector operands of `mov` become scalar instructions, predicate immediates 0/1.

`mov.b64 %rd, {%a, %b}` packs its elements, first in the low bits; `mov.b32 {%h0, %h1}, %r` unpacks
(an element `_` is skipped). Both become zero-extending cvt, shl/shr and or on bit-size temporaries, each
element moved through a `.bE` register so that any register type of that size (f16, f32 …) works. A
guarded vector mov (`@p mov.b64 %rd, {%a, %b}`) computes its temporaries unconditionally and keeps the
guard on the moves into its destinations, which are all it writes. `mov.b128` keeps its `{…}` operand
(PTX has no 128-bit shift or cvt to spell it with): lowering packs and unpacks the i128 itself. Vector
loads and stores keep their `{…}` operand: they are one memory access (alignment, atomicity of the whole),
which lowering keeps. Predicate-only instructions (mov/and/or/xor/not .pred) take the integer immediates
0 and 1 (ptxas reads any nonzero value as true); they are normalised to 0/1.
"""

from __future__ import annotations

import dataclasses

from fatkit.translate.passes.base import Prepared, Rewriter, each_function, fail, instruction
from fatkit.translate.ptx import ast

# `.pred` instructions whose operands are all predicates (vote.pred's membermask, say, is a b32).
_PREDICATE_ONLY = frozenset({"mov", "and", "or", "xor", "not"})


def run(prepared: Prepared) -> Prepared:
    return each_function(prepared, lambda function, _: _expand(function))


def _expand(function: ast.Function) -> ast.Function:
    rewriter = Rewriter(function)
    out: list[ast.Statement] = []
    for statement in function.body.statements:
        if type(statement) is not ast.Instruction:
            out.append(statement)
        elif statement.opcode == "mov" and any(type(op) is ast.Vector for op in statement.operands):
            out.extend(_vector_mov(function, statement, rewriter))
        elif "pred" in statement.modifiers and statement.opcode in _PREDICATE_ONLY:
            out.append(dataclasses.replace(statement, operands=tuple(_predicate(op) for op in statement.operands)))
        else:
            out.append(statement)
    return rewriter.body(out)


def _predicate(op: ast.Operand) -> ast.Operand:
    return ast.IntImm(int(op.value != 0)) if type(op) is ast.IntImm else op


def _vector_mov(function, ins: ast.Instruction, rewriter: Rewriter) -> list[ast.Instruction]:
    types = [m for m in ins.modifiers if m in ast.TYPES]
    if len(ins.operands) != 2 or len(types) != 1 or ast.TYPE_SIZES.get(types[0]) is None \
            or any(m.startswith("v") and m[1:].isdigit() for m in ins.modifiers):
        raise fail(function, ins, "a vector mov must be a scalar-typed `mov.bN` with one {…} operand")
    d, a = ins.operands
    packing = type(a) is ast.Vector
    vector = a if packing else d
    if type(d) is ast.Vector and type(a) is ast.Vector:
        raise fail(function, ins, "mov between two vector operands")
    size = ast.TYPE_SIZES[types[0]] * 8
    count = len(vector.items)
    if count not in (2, 4) or size % count:
        raise fail(function, ins, f"a {size}-bit mov cannot split into {count} elements")
    element, line = size // count, ins.line
    whole, part = f"b{size}", f"b{element}"
    if size == 128:
        return [ins]

    def emit(opcode, modifiers, *operands, guarded=False):
        out.append(dataclasses.replace(instruction(opcode, modifiers, operands, line),
                                       guard=ins.guard if guarded else None))

    out: list[ast.Instruction] = []
    if packing:
        accumulated = rewriter.register(whole, line=line)
        for i, item in enumerate(vector.items):
            if type(item) is ast.Sink:
                raise fail(function, ins, "`_` cannot be a source element")
            bits, wide = rewriter.register(part, line=line), rewriter.register(whole, line=line)
            emit("mov", (part,), bits, item)
            emit("cvt", (f"u{size}", f"u{element}"), wide, bits)
            if i == 0:
                emit("mov", (whole,), accumulated, wide)
                continue
            emit("shl", (whole,), wide, wide, ast.IntImm(i * element))
            emit("or", (whole,), accumulated, accumulated, wide)
        emit("mov", (whole,), d, accumulated, guarded=True)
        return out
    source = rewriter.register(whole, line=line)
    emit("mov", (whole,), source, a)
    for i, item in enumerate(vector.items):
        if type(item) is ast.Sink:
            continue
        shifted, bits = rewriter.register(whole, line=line), rewriter.register(part, line=line)
        emit("shr", (f"u{size}",), shifted, source, ast.IntImm(i * element))
        emit("cvt", (f"u{element}", f"u{size}"), bits, shifted)
        emit("mov", (part,), item, bits, guarded=True)
    return out
