"""Pass 8, implicit conversions: a register whose size differs from its operand's type is converted explicitly.

PTX's relaxed type-checking (ISA "Operand Size Exceeding Instruction-Type Size"): a source register wider
than the instruction type is truncated to its low bits ("chopped"); a destination register wider than the
instruction type receives the result sign-extended for signed instruction types and zero-extended otherwise
(a floating-point register gets the zero-extended bits); a register narrower than its operand type, or of a
different size under a floating-point instruction type, is invalid — except that ld/st/cvt, which the ISA
lets move narrow values in regular-width registers, take a wider bit-size register (`.bN`) for a
floating-point type too: `ld.global.f32 %rd, [a]` zero-extends the loaded bits, `st.global.f32 [a], %rd`
stores the low 32 bits. This pass writes the truncations (`cvt.uN.uW` into a temporary) and extensions
(`cvt.sW.sN`/`cvt.uW.uN` after the instruction) out, so that lowering's operands have their types' sizes.
Same-size registers of another type (`.b32` used as `.f32`) are bit reinterpretations lowering does itself.
"""

from __future__ import annotations

import dataclasses

from fatkit.translate.passes.base import Prepared, Rewriter, bodies, each_function, fail, instruction, register_types
from fatkit.translate.ptx import ast

# Opcodes whose operands all have the instruction's (one) type.
_SAME = {"add", "sub", "mul", "mad", "div", "rem", "abs", "neg", "min", "max", "and", "or", "xor", "not",
         "cnot", "mov", "fma", "rcp", "sqrt", "rsqrt", "sin", "cos", "lg2", "ex2", "tanh", "copysign", "brev",
         "sad", "mul24", "mad24", "addc", "subc", "madc", "lop3", "shf", "prmt"}
_FLOAT = {"f16", "f16x2", "bf16", "bf16x2", "f32", "f64"}
_DATA_MOVEMENT = {"ld", "ldu", "st", "cvt"}  # where a bit-size register may be wider than a float type


def run(prepared: Prepared) -> Prepared:
    """The conversions, and the temporaries they add declared in each function's storage (pass 7)."""
    prepared = each_function(prepared, lambda function, _: _explicit(function))
    storage = {f.name: dataclasses.replace(prepared.storage[f.name], registers=register_types(f))
               for f in bodies(prepared) if f.name in prepared.storage}
    return dataclasses.replace(prepared, storage={**prepared.storage, **storage})


def operand_types(ins: ast.Instruction) -> list[str | None] | None:
    """The type of each operand of `ins` (None: not a typed value, e.g. an address or a predicate), or None
    for an instruction this pass does not know the operand types of."""
    types = [m for m in ins.modifiers if m in ast.TYPES]
    count, opcode = len(ins.operands), ins.opcode
    if opcode == "cvt" and len(types) == 2 and count == 2:
        return types
    if len(types) != 1 or types[0] == "pred" or types[0] not in ast.TYPE_SIZES:
        return None
    t = types[0]
    if opcode in ("mul", "mad") and ins.has("wide"):
        wide = ("s" if t[0] == "s" else "u") + str(2 * int(t[1:]))
        return [wide, t, t, wide][:count]
    if opcode == "mov" and any(type(op) is ast.Vector for op in ins.operands):
        return None  # mov.b128 {…}: 2 .b64 or 4 .b32 elements (lowering reads them so)
    if opcode in _SAME:
        return [t] * count
    if opcode in ("shl", "shr") and count == 3:
        return [t, t, "u32"]
    if opcode == "bfe" and count == 4:
        return [t, t, "u32", "u32"]
    if opcode == "bfi" and count == 5:
        return [t, t, t, "u32", "u32"]
    if opcode in ("popc", "clz", "bfind") and count == 2:
        return ["u32", t]
    if opcode in ("setp", "testp"):
        return [None, *[t] * (count - 1)][:count] if opcode == "setp" else [None, t]
    if opcode == "selp" and count == 4:
        return [t, t, t, None]
    if opcode in ("ld", "ldu") and count == 2:
        return [t, None]
    if opcode == "st" and count == 2:
        return [None, t]
    return None


def _explicit(function: ast.Function) -> ast.Function:
    rewriter = Rewriter(function)
    registers = register_types(function)
    out: list[ast.Statement] = []
    for statement in function.body.statements:
        types = operand_types(statement) if type(statement) is ast.Instruction else None
        if types is None:
            out.append(statement)
            continue
        if statement.opcode == "setp" and types[-1] is not None and len(statement.operands) == 4:
            types[-1] = None  # setp's optional fourth operand is a predicate
        if all(_unchanged(op, ptx_type, registers) for op, ptx_type in zip(statement.operands, types)):
            out.append(statement)
            continue
        before: list[ast.Instruction] = []
        after: list[ast.Instruction] = []
        operands = []
        for index, (op, ptx_type) in enumerate(zip(statement.operands, types)):
            destination = index == 0 and statement.opcode != "st"
            convert = _Converter(function, statement, rewriter, registers, ptx_type, destination, before, after)
            operands.append(convert(op))
        out.extend(before)
        out.append(statement if tuple(operands) == statement.operands else
                   dataclasses.replace(statement, operands=tuple(operands)))
        out.extend(after)
    return rewriter.body(out)


def _unchanged(op: ast.Operand, ptx_type: str | None, registers: dict[str, str]) -> bool:
    """Whether `_Converter` leaves `op` as it is: what almost every operand is, told without making one."""
    if ptx_type is None:
        return True
    kind = type(op)
    if kind is ast.Vector:
        return all(_unchanged(item, ptx_type, registers) for item in op.items)
    if kind is not ast.Name or op.component is not None:
        return True
    have = registers.get(op.name, "pred")
    return have == "pred" or ast.TYPE_SIZES[have] == ast.TYPE_SIZES[ptx_type]


class _Converter:
    """Converts one operand position of an instruction (vector elements one by one)."""

    def __init__(self, function, ins, rewriter, registers, ptx_type, destination, before, after):
        self.function, self.ins, self.rewriter, self.registers = function, ins, rewriter, registers
        self.ptx_type, self.destination, self.before, self.after = ptx_type, destination, before, after

    def __call__(self, op: ast.Operand) -> ast.Operand:
        if type(op) is ast.Vector:
            return ast.Vector(tuple(self(item) for item in op.items))
        if self.ptx_type is None or type(op) is not ast.Name or op.component is not None \
                or self.registers.get(op.name, "pred") == "pred":
            return op
        have, want = self.registers[op.name], self.ptx_type
        have_bits, want_bits = ast.TYPE_SIZES[have] * 8, ast.TYPE_SIZES[want] * 8
        if have_bits == want_bits:
            return op
        wide_bits = have[0] == "b" and self.ins.opcode in _DATA_MOVEMENT
        if have_bits < want_bits or (want in _FLOAT and not wide_bits):
            relation = "narrower than" if have_bits < want_bits else "not the size of"
            raise fail(self.function, self.ins, f"register {op.name} (.{have}) is {relation} its .{want} operand")
        line = self.ins.line

        def emit(into: list, opcode: str, modifiers: tuple[str, ...], *operands) -> None:
            into.append(instruction(opcode, modifiers, operands, line))

        bits = op
        if not self.destination:
            if have in _FLOAT:  # chop the register's bits
                bits = self.rewriter.register(f"b{have_bits}", line=line)
                emit(self.before, "mov", (f"b{have_bits}",), bits, op)
            chopped = self.rewriter.register(f"b{want_bits}", line=line)
            emit(self.before, "cvt", (f"u{want_bits}", f"u{have_bits}"), chopped, bits)
            return chopped
        result = self.rewriter.register(want, line=line)
        sign = "s" if want[0] == "s" else "u"
        if have in _FLOAT:  # zero-extended bits into the floating-point register
            wide = self.rewriter.register(f"b{have_bits}", line=line)
            emit(self.after, "cvt", (f"u{have_bits}", f"u{want_bits}"), wide, result)
            emit(self.after, "mov", (f"b{have_bits}",), op, wide)
        else:
            emit(self.after, "cvt", (f"{sign}{have_bits}", f"{sign}{want_bits}"), op, result)
        return result
