"""`ast.Module` → PTX text that ptxas accepts and that parses back to an equal Module.

The layout follows nvcc's (tabs inside bodies, labels at the margin, one parameter per line); comments
are not part of the tree and are not printed.
"""

from __future__ import annotations

import math
from typing import Callable

from fatkit.translate.ptx.ast import (
    Address,
    Alias,
    ArgList,
    Block,
    CallPrototype,
    Expr,
    File,
    FloatImm,
    Function,
    InitList,
    Initializer,
    Instruction,
    IntImm,
    Label,
    Loc,
    Minus,
    Module,
    Name,
    Negated,
    Operand,
    Pair,
    Pragma,
    Section,
    SectionData,
    Sink,
    SymbolRef,
    TargetList,
    Variable,
    Vector,
)


def print_ptx(module: Module) -> str:
    """The PTX text of `module`."""
    out: list[str] = []
    if module.version is not None:
        out.append(f".version {module.version[0]}.{module.version[1]}")
    if module.target:
        out.append(".target " + ", ".join(module.target))
    if module.address_size is not None:
        out.append(f".address_size {module.address_size}")
    for item in module.items:
        kind = type(item)
        if kind is Function:
            out.append("")
            _function(item, out)
        elif kind is Variable:
            out.append(variable(item) + ";")
        elif kind is Section:
            _section(item, out)
        else:
            out.append(_STATEMENTS[kind](item))
    out.append("")
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------------
# operands


def operand(op: Operand) -> str:
    """The PTX spelling of one operand."""
    return _OPERANDS[type(op)](op)


def _name(op: Name) -> str:
    return op.name if op.component is None else f"{op.name}.{op.component}"


def _int_imm(op: IntImm) -> str:
    value = abs(op.value)
    digits = {16: "0x%X", 8: "0%o", 2: "0b{:b}"}.get(op.radix)
    if digits is None:
        text = str(value)
    elif op.radix == 2:
        text = digits.format(value)
    else:
        text = digits % value
    return ("-" if op.value < 0 else "") + text + ("U" if op.unsigned else "")


def _float_imm(op: FloatImm) -> str:
    if op.decimal and math.isfinite(op.value):
        return repr(op.value)
    return f"0f{op.bits:08X}" if op.width == 32 else f"0d{op.bits:016X}"


def _offset(value: int) -> str:
    # nvcc writes negative offsets as `+-8`; ptxas reads that form.
    return f"+{value}" if value else ""


def _address(op: Address) -> str:
    if op.base is None:
        inner = str(op.offset)
    else:
        inner = _name(op.base) + _offset(op.offset)
    if op.extra:
        inner += ", " + ", ".join(operand(e) for e in op.extra)
    return f"[{inner}]"


def _symbol_ref(op: SymbolRef) -> str:
    text = f"generic({op.name})" if op.generic else op.name
    if op.offset > 0:
        return f"{text}+{op.offset}"
    if op.offset < 0:
        return f"{text}-{-op.offset}"
    return text


_OPERANDS: dict[type, Callable] = {
    Name: _name,
    Sink: lambda op: "_",
    IntImm: _int_imm,
    FloatImm: _float_imm,
    Address: _address,
    Vector: lambda op: "{" + ", ".join(operand(i) for i in op.items) + "}",
    Pair: lambda op: f"{operand(op.first)}|{operand(op.second)}",
    Negated: lambda op: "!" + operand(op.operand),
    Minus: lambda op: "-" + operand(op.operand),
    ArgList: lambda op: "(" + ", ".join(operand(i) for i in op.items) + ")",
    SymbolRef: _symbol_ref,
    Expr: lambda op: op.text,
}

# ------------------------------------------------------------------------------------------------------
# statements


def instruction(ins: Instruction) -> str:
    """One instruction without indentation: `@!%p1 bra.uni $L__BB0_2;`."""
    text = ins.name
    if ins.operands:
        text += " " + ", ".join([_OPERANDS[type(op)](op) for op in ins.operands])
    if ins.guard is not None:
        text = ("@!" if ins.guard.negated else "@") + ins.guard.register + " " + text
    return text + ";"


def initializer(init: Initializer) -> str:
    if type(init) is InitList:
        return "{" + ", ".join(initializer(item) for item in init.items) + "}"
    return operand(init)


def variable(v: Variable) -> str:
    """A declaration without the `;`: `.shared .align 16 .b8 smem[4096]`, `.param .u64 .ptr .global p`."""
    parts = []
    if v.linkage is not None:
        parts.append("." + v.linkage)
    parts.append("." + v.state_space)
    parts.extend(f".attribute({a})" for a in v.attributes)
    if v.align is not None:
        parts.append(f".align {v.align}")
    if v.vector is not None:
        parts.append(f".v{v.vector}")
    parts.append("." + v.type)
    if v.ptr:
        parts.append(".ptr")
        if v.ptr_space is not None:
            parts.append("." + v.ptr_space)
        if v.ptr_align is not None:
            parts.append(f".align {v.ptr_align}")
    name = v.name
    if v.count is not None:
        name += f"<{v.count}>"
    name += "".join("[]" if dim is None else f"[{dim}]" for dim in v.array)
    parts.append(name)
    text = " ".join(parts)
    if v.initializer is not None:
        text += " = " + initializer(v.initializer)
    return text


def _loc(loc: Loc) -> str:
    text = f".loc\t{loc.file_index} {loc.source_line} {loc.source_column}"
    if loc.function_name is not None:
        text += f", function_name {loc.function_name}"
    if loc.inlined_at is not None:
        text += ", inlined_at {} {} {}".format(*loc.inlined_at)
    return text


def _params(params: tuple[Variable, ...]) -> str:
    return "(" + ", ".join(variable(p) for p in params) + ")"


def _callprototype(c: CallPrototype) -> str:
    returns = _params(c.returns) + " " if c.returns else ""
    return f"{c.name}: .callprototype {returns}_ {_params(c.params)}" + (" .noreturn" if c.noreturn else "") + ";"


def _file(f: File) -> str:
    text = f'.file\t{f.index} "{f.path}"'
    if f.timestamp is not None:
        text += f", {f.timestamp}, {f.size}"
    return text


_STATEMENTS: dict[type, Callable] = {
    Instruction: instruction,
    Variable: lambda v: variable(v) + ";",
    Loc: _loc,
    Pragma: lambda p: ".pragma " + ", ".join(f'"{s}"' for s in p.values) + ";",
    CallPrototype: _callprototype,
    TargetList: lambda t: f"{t.name}: .{t.directive} " + ", ".join(t.targets) + ";",
    File: _file,
    Alias: lambda a: f".alias {a.name}, {a.target};",
}


def _block(block: Block, depth: int, out: list[str]) -> None:
    indent = "\t" * depth
    out.append(indent[:-1] + "{")
    statements = _STATEMENTS
    for statement in block.statements:
        kind = type(statement)
        if kind is Instruction:
            out.append(indent + instruction(statement))
        elif kind is Label:
            out.append(statement.name + ":")
        elif kind is Block:
            _block(statement, depth + 1, out)
        else:
            out.append(indent + statements[kind](statement))
    out.append(indent[:-1] + "}")


def _function(f: Function, out: list[str]) -> None:
    head = f".{f.linkage} " if f.linkage is not None else ""
    head += f".{f.kind} "
    if f.returns:
        head += _params(f.returns) + " "
    head += f.name
    if f.params:
        out.append(head + "(")
        out.append(",\n".join("\t" + variable(p) for p in f.params))
        out.append(")")
    else:
        out.append(head + "()")
    for d in f.directives:
        out.append(f".{d.name}" + (" " + ", ".join(str(v) for v in d.values) if d.values else ""))
    if f.body is None:
        out.append(";")
    else:
        _block(f.body, 1, out)


def _section(s: Section, out: list[str]) -> None:
    out.append(f".section {s.name}")
    out.append("{")
    for entry in s.entries:
        if type(entry) is Label:
            out.append(entry.name + ":")
        else:
            out.append(_section_data(entry))
    out.append("}")


def _section_data(d: SectionData) -> str:
    return f".{d.type} " + ",".join(operand(v) for v in d.values)
