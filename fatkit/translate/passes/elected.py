"""Pass 4, elected copies: a bulk copy that one lane of a warp issues under `elect.sync` is done by every
lane of the warp, each a share of its 16-byte chunks, where the warp is back together.

PTX issues `cp.async.bulk` from one thread; compilers elect it with `elect.sync` and branch the other lanes
around the issue (CUB, as warp-lang ships it):

    elect.sync _|%p, %r1;  selp.b32 %r2, 1, 0, %p;  setp.eq.b32 %q, %r2, 0;
    @%q bra $skip;  (address arithmetic)  cp.async.bulk… [dst], [src], size, [mbar];  $skip:

(and the guards pass makes `@%p cp.async.bulk…` the same shape). Where the region between the branch and
its label is straight-line — ALU instructions and mbarrier arrivals before the copy, ALU after it, one
plain bulk copy (global → shared with an mbarrier, shared::cta → global by bulk_group, with or without a
byte mask; not multicast, not ignoring bytes) or one or more tensor copies (cp.async.bulk.tensor loads and
stores, tile and im2col, multicast too, and cp.reduce.async.bulk.tensor) whose operand registers nothing
after them changes, `cp.async.bulk.commit_group` and `cp.async.bulk.wait_group{.read}` — the copy is moved
to the label:

    (at entry: mov.u32 %flag, 0;)  @%q bra $skip;  …  mov.u32 %flag, 1;  mov %d, dst; …;  $skip:
    cp.async.bulk….fatkit::spread [%d], [%s], %size, [%m], %flag;

The elected lane's registers (a tensor copy's map address, coordinates and im2col offsets among them; a
map named directly is the same for every lane) are copied into fresh ones at the issue, an
`.L2::cache_hint` and its policy dropped, and lowering (lower/asynccopy.py, lower/tensorcopy.py) reads them
from the lane whose %flag is set, splits the work over the lanes there, and has that lane complete the
transaction bytes. A wait_group in the region waits for nothing of the region's before the label (the
region reads and writes no memory), so the copy may pass it too. Moving an asynchronous copy later within
its thread is one of the schedules the ISA allows: nothing may read the destination or write the source
before the completion mechanism says the copy is done, and the region between issue and label waits on
nothing of its own.
"""

from __future__ import annotations

import dataclasses

from fatkit.translate.passes.base import Prepared, Rewriter, each_function, instruction
from fatkit.translate.ptx import ast

SPREAD = "fatkit::spread"  # the modifier of a copy the warp's lanes share (lowered by lower/asynccopy.py)

# Instructions a region may hold besides the copy: arithmetic on registers, no memory, no control.
_ALU = frozenset({"mov", "add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor", "not", "cvt", "cvta",
                  "setp", "selp", "min", "max", "neg", "abs", "rem", "div", "prmt", "bfe", "bfi"})


def run(prepared: Prepared) -> Prepared:
    return each_function(prepared, lambda function, _: _spread(function))


def _written(statement: ast.Instruction) -> set[str]:
    """Registers an instruction may write: its first operand (both halves of a d|p pair)."""
    if not statement.operands or statement.opcode in ("st", "bar", "barrier", "bra", "ret", "exit"):
        return set()
    first = statement.operands[0]
    items = (first.first, first.second) if type(first) is ast.Pair else (first,)
    return {item.name for item in items if type(item) is ast.Name}


def _registers(operands) -> set[str]:
    names = set()
    for operand in operands:
        if type(operand) is ast.Name:
            names.add(operand.name)
        elif type(operand) is ast.Address and operand.base is not None:
            names.add(operand.base.name)
    return names


_FORMS = {("shared::cta", "global", "mbarrier::complete_tx::bytes"),
          ("shared::cluster", "global", "mbarrier::complete_tx::bytes"), ("global", "shared::cta", "bulk_group"),
          ("global", "shared::cta", "bulk_group", "cp_mask")}


def _is_tensor(copy: ast.Instruction) -> bool:
    """A tensor copy or reduction (cp{.reduce}.async.bulk.tensor), not a prefetch."""
    return copy.opcode == "cp" and "tensor" in copy.modifiers and copy.modifiers[:1] in (("async",), ("reduce",))


def _spreadable(copy: ast.Instruction) -> bool:
    """A plain bulk copy of the directions the lowering spreads, or a tensor copy (lower/tensorcopy.py
    spreads each of its forms, and refuses at the copy the ones it does not implement)."""
    if copy.opcode != "cp" or copy.guard is not None:
        return False
    if _is_tensor(copy):
        return "prefetch" not in copy.modifiers and copy.modifiers[1:3] in (("bulk", "tensor"), ("async", "bulk"))
    if copy.modifiers[:2] != ("async", "bulk"):
        return False
    return tuple(m for m in copy.modifiers[2:] if m != "L2::cache_hint") in _FORMS


def _region(statements: list, start: int, label: str) -> tuple[list[int], int] | None:
    """(indices of the copies, index of the label) when statements[start:] up to `label` is a region this
    pass rewrites (module docstring), else None."""
    copies: list[int] = []
    for index in range(start, len(statements)):
        statement = statements[index]
        if type(statement) is ast.Label:
            return (copies, index) if statement.name == label and copies else None
        if type(statement) is not ast.Instruction or statement.guard is not None:
            return None
        if _spreadable(statement) and (not copies or _is_tensor(statement) and _is_tensor(statements[copies[0]])):
            copies.append(index)  # (several tensor copies: torchao stores two boxes a region)
        elif statement.opcode in _ALU:
            if any(_written(statement) & _registers(statements[copy].operands) for copy in copies):
                return None
        elif statement.opcode == "mbarrier" and statement.modifiers[:1] == ("arrive",) and not copies:
            continue
        elif statement.opcode == "cp" and statement.modifiers[:3] in (("async", "bulk", "commit_group"),
                                                                      ("async", "bulk", "wait_group")):
            # the bulk groups carry nothing here (lower/asynccopy.py): the copy may leave its group, and a
            # wait in the region has nothing of the region's to wait for before the label
            continue
        else:
            return None
    return None


def _spread(function: ast.Function) -> ast.Function:
    statements = list(function.body.statements)
    if not any(type(s) is ast.Instruction and s.opcode == "elect" for s in statements):
        return function  # (what is rewritten starts at an elect.sync: most functions have none)
    types = {}  # register (a %r<N> declaration's each) or parameter → its PTX type
    for variable in function.statements():
        if type(variable) is ast.Variable and variable.state_space == "reg":
            names = [f"{variable.name}{i}" for i in range(variable.count)] if variable.count else [variable.name]
            types.update(dict.fromkeys(names, variable.type))
    registers = set(types)
    types.update({p.name: p.type for p in function.params})
    rewriter = Rewriter(function)
    elected: dict[str, bool] = {}  # predicate register → whether it is true in the elected lane only (else false)
    chosen: dict[str, bool] = {}  # integer register → whether it is non-zero in the elected lane only
    rewrites: dict[int, list[ast.Statement]] = {}  # statement index → what replaces it
    flags: list[ast.Name] = []  # one a rewritten copy: set by the lane that issued it
    for index, statement in enumerate(statements):
        if type(statement) is not ast.Instruction:
            continue
        for name in _written(statement):
            elected.pop(name, None)
            chosen.pop(name, None)
        operands = statement.operands
        if statement.opcode == "elect" and type(operands[0]) is ast.Pair and type(operands[0].second) is ast.Name:
            elected[operands[0].second.name] = True
        elif (statement.opcode == "selp" and len(operands) == 4 and type(operands[3]) is ast.Name
              and operands[3].name in elected and type(operands[0]) is ast.Name
              and {type(operands[1]), type(operands[2])} == {ast.IntImm}
              and {operands[1].value, operands[2].value} == {0, 1}):
            chosen[operands[0].name] = elected[operands[3].name] == (operands[1].value == 1)
        elif (statement.opcode == "setp" and statement.modifiers[:1] in (("eq",), ("ne",)) and len(operands) == 3
              and type(operands[0]) is ast.Name and type(operands[1]) is ast.Name and operands[1].name in chosen
              and type(operands[2]) is ast.IntImm and operands[2].value == 0):
            chosen_nonzero = chosen[operands[1].name]
            elected[operands[0].name] = chosen_nonzero == (statement.modifiers[0] == "ne")
        elif (statement.opcode == "bra" and statement.guard is not None and statement.guard.register in elected
              and elected[statement.guard.register] == statement.guard.negated  # taken by the other lanes
              and len(operands) == 1 and type(operands[0]) is ast.Name):
            found = _region(statements, index + 1, operands[0].name)
            if found is not None and not any(copy in rewrites for copy in found[0]):
                for copy in found[0]:
                    _rewrite(rewriter, statements, copy, found[1], types, registers, rewrites, flags)
    # Every lane's flag is 0 from the start: lanes may reach the label by other paths (lowering clears it
    # again after each copy, for the next time round a loop).
    out = [instruction("mov", ("u32",), (flag, ast.IntImm(0)), function.line) for flag in flags]
    for index, statement in enumerate(statements):
        out.extend(rewrites.get(index, [statement]))
    return rewriter.body(out) if rewrites else function


def _rewrite(rewriter: Rewriter, statements: list, copy_index: int, label: int, types: dict[str, str],
             registers: set[str], rewrites: dict[int, list[ast.Statement]], flags: list[ast.Name]) -> None:
    copy = statements[copy_index]
    line = copy.line
    flag = rewriter.register("u32", "%elected", line)
    flags.append(flag)
    issue: list[ast.Statement] = [instruction("mov", ("u32",), (flag, ast.IntImm(1)), line)]
    kept = list(copy.operands)
    if copy.has("L2::cache_hint"):  # the cache policy is a hint: dropped (it precedes a byte mask)
        del kept[-1 if _is_tensor(copy) else 3 if copy.has("bulk_group") else 4]

    def fresh(name: ast.Name, ptx_type: str) -> ast.Name:
        """A register holding what `name` holds at the issue."""
        register = rewriter.register(_bits(ptx_type), "%issued", line)
        issue.append(instruction("mov", (_bits(ptx_type),), (register, name), line))
        return register

    def fresh_items(vector: ast.Vector) -> ast.Vector:
        return dataclasses.replace(vector, items=tuple(
            fresh(item, types.get(item.name, "u32")) if type(item) is ast.Name and item.name in registers else item
            for item in vector.items))

    moved = []
    for operand in kept:
        if type(operand) is ast.Address and operand.base is not None and operand.extra:
            # a tensor map and its {coordinates}: a map named directly is the same for every lane
            base = fresh(operand.base, types[operand.base.name]) if operand.base.name in registers else operand.base
            extra = tuple(fresh_items(e) if type(e) is ast.Vector else e for e in operand.extra)
            moved.append(dataclasses.replace(operand, base=base, extra=extra))
        elif type(operand) is ast.Address and operand.base is not None:
            ptx_type = types.get(operand.base.name) or ("u32" if _is_shared(copy, operand) else "u64")
            moved.append(dataclasses.replace(operand, base=fresh(operand.base, ptx_type)))
        elif type(operand) is ast.Name:
            moved.append(fresh(operand, types.get(operand.name, "u32")))
        elif type(operand) is ast.Vector:  # im2col offsets
            moved.append(fresh_items(operand))
        else:
            moved.append(operand)
    modifiers = tuple(m for m in copy.modifiers if m != "L2::cache_hint") + (SPREAD,)
    rewrites[copy_index] = issue
    rewrites.setdefault(label, [statements[label]]).append(instruction("cp", modifiers, (*moved, flag), line))


def _is_shared(copy: ast.Instruction, operand: ast.Address) -> bool:
    """Whether an address operand of the copy is a shared one: the destination of a copy into shared
    memory, the source of one out of it, and the mbarrier."""
    position = copy.operands.index(operand)
    into_shared = copy.modifiers[2] != "global"
    return position >= 3 or (position == 0) == into_shared


def _bits(ptx_type: str) -> str:
    return {2: "b16", 4: "b32", 8: "b64"}.get(ast.TYPE_SIZES.get(ptx_type, 4), "b32")
