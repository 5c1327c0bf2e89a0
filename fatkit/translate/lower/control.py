"""Control flow: bra, brx.idx, call (direct, indirect, of external functions), ret, exit, trap, brkpt.

Every lowered `.func` has one shape (module._Callees): the target's context arguments, one pointer per
return and parameter value to bytes the caller owns, and a pointer to the caller's stop flag. So an
indirect call through a function's address (`mov.u64 %rd, f`, a vtable slot) is an LLVM indirect call of
that shape. A thread that ends inside a call (`exit`, or a trap on a target where a trap returns) sets the
flag, and every caller up to the kernel returns at once after the call.
"""

from __future__ import annotations

from llvmlite import ir

from fatkit.translate.lower.core import I8, I32, Lowering, handles, llvm_type
from fatkit.translate.lower.runtime import RUNTIME_FUNCTIONS, call_argument
from fatkit.translate.ptx import ast

_ASSERT_PARAMETERS = ("b64", "b64", "b32", "b64", "b64")  # message, file, line, function, char size


@handles("bra")
def bra(lw: Lowering, ins: ast.Instruction) -> None:
    lw.check_modifiers(ins, {"uni"})
    (target,) = lw.operands(ins, 1)
    lw.builder.branch(lw.label(target))


@handles("brx")
def brx(lw: Lowering, ins: ast.Instruction) -> None:
    """`brx.idx index, tlist`: a jump to label `index` of a `.branchtargets` list; an index outside the list
    is undefined in PTX (unreachable here)."""
    lw.check_modifiers(ins, {"idx", "uni"})
    if not ins.has("idx"):
        raise lw.fail("brx needs .idx")
    index, targets = lw.operands(ins, 2)
    listing = _declaration(lw, targets, ast.TargetList)
    if listing.directive != "branchtargets":
        raise lw.fail(f"{listing.name} is a .{listing.directive} list, not .branchtargets")
    value = lw.read(index, "u32")
    nowhere = lw.function.append_basic_block("brx.out_of_range")
    switch = lw.builder.switch(value, nowhere)
    for i, label in enumerate(listing.targets):
        switch.add_case(ir.Constant(I32, i), lw.label(ast.Name(label)))
    lw.builder.position_at_end(nowhere)
    lw.builder.unreachable()


@handles("call")
def call(lw: Lowering, ins: ast.Instruction) -> None:
    """`call{.uni} (r…), f, (a…)` or `call (r…), %rd, (a…), prototype|calltargets`."""
    lw.check_modifiers(ins, {"uni"})
    operands = list(ins.operands)
    returns = operands.pop(0).items if operands and type(operands[0]) is ast.ArgList else ()
    if not operands or type(operands[0]) is not ast.Name:
        raise lw.fail("a call needs a function or a register holding a function's address")
    callee = operands.pop(0)
    arguments = operands.pop(0).items if operands and type(operands[0]) is ast.ArgList else ()
    signature = operands.pop(0) if operands else None
    if operands:
        raise lw.fail(f"unexpected call operands {operands}")
    if callee.name in lw.registers:
        function, returns_declared, params_declared, noreturn = _indirect(lw, callee, signature)
    else:
        if signature is not None:
            raise lw.fail("a direct call takes no prototype or target list")
        function, returns_declared, params_declared, noreturn = _direct(lw, callee.name, returns, arguments)
        if function is None:
            return
    if len(returns) != len(returns_declared) or len(arguments) != len(params_declared):
        raise lw.fail(f"{callee.name} takes {len(returns_declared)} return and {len(params_declared)} "
                      f"parameter value(s)")
    values = [_pass(lw, item, declared, result=True) for item, declared in zip(returns, returns_declared)]
    values += [_pass(lw, item, declared, result=False) for item, declared in zip(arguments, params_declared)]
    context = list(lw.function.args[:lw.target.context_arguments])
    lw.builder.call(function, context + [pointer for pointer, _ in values] + [lw.stop_flag])
    stopped = lw.builder.icmp_unsigned("!=", lw.builder.load(lw.stop_flag, typ=I8), ir.Constant(I8, 0))
    ending, following = (lw.function.append_basic_block(n) for n in ("call.stopped", "call.returned"))
    lw.builder.cbranch(stopped, ending, following)
    lw.builder.position_at_end(ending)
    lw.stop_thread()
    lw.builder.position_at_end(following)
    if noreturn:
        lw.builder.unreachable()
        return
    for item, (pointer, declared) in zip(returns, values):  # register results: read back from the bytes
        if type(item) is ast.Name and item.name in lw.registers:
            lw.write(item, lw.builder.load(pointer, typ=llvm_type(declared.type)), declared.type)


def _direct(lw: Lowering, name: str, returns, arguments):
    """A `.func` of the module, or one of CUDA's external functions (then handled here: function None)."""
    callee = lw.callees.get(name)
    if callee is not None:
        function, declaration = callee
        return function, declaration.returns, declaration.params, declaration.directive("noreturn") is not None
    if name == "__assertfail":
        _assert_fail(lw, returns, arguments)
        return None, (), (), True
    if name in RUNTIME_FUNCTIONS:  # malloc, free, vprintf: lower/runtime.py
        RUNTIME_FUNCTIONS[name](lw, returns, arguments)
        return None, (), (), False
    prepared = lw.callees.prepared
    if prepared is not None and prepared.module.function(name) is not None:
        raise lw.fail(f"{name} is declared .extern and no PTX module linked with this one defines it (fatkit "
                      "links the -rdc units of one binary, fatkit/translate/link.py)")
    raise lw.fail(f"{name} is not a .func defined in this module")


def _indirect(lw: Lowering, register: ast.Name, signature):
    """A call through a function address: checked against its `.callprototype` or `.calltargets`."""
    if signature is None:
        raise lw.fail("an indirect call needs a .callprototype or a .calltargets list")
    declaration = _declaration(lw, signature, (ast.CallPrototype, ast.TargetList))
    if type(declaration) is ast.CallPrototype:
        returns, params, noreturn = declaration.returns, declaration.params, declaration.noreturn
    else:
        if declaration.directive != "calltargets":
            raise lw.fail(f"{declaration.name} is a .{declaration.directive} list, not .calltargets")
        shapes = set()
        for target in declaration.targets:
            callee = lw.callees.get(target)
            if callee is None:
                raise lw.fail(f"call target {target} is not a .func defined in this module")
            shapes.add((callee[1].returns, callee[1].params))
        if len({(len(r), len(p)) for r, p in shapes}) != 1:
            raise lw.fail(f"the targets of {declaration.name} take different numbers of values")
        returns, params = next(iter(shapes))
        noreturn = False
    pointer = lw.builder.inttoptr(lw.read(register, "u64"), ir.PointerType())
    pointer.__class__ = _FunctionPointer
    pointer.function_type = lw.callees.function_type(len(returns) + len(params))
    return pointer, returns, params, noreturn


class _FunctionPointer(ir.instructions.CastInstr):
    """An address cast to a pointer that `IRBuilder.call` can call: with opaque pointers it has to be told
    the function type (llvmlite reads it from the callee's `function_type`)."""

    function_type = None


def _declaration(lw: Lowering, operand: ast.Operand, kinds):
    if type(operand) is ast.Name:
        for statement in lw.kernel.statements():
            if isinstance(statement, kinds) and statement.name == operand.name:
                return statement
    names = "/".join(k.__name__ for k in (kinds if isinstance(kinds, tuple) else (kinds,)))
    raise lw.fail(f"{operand} is not a {names} of this function")


def _pass(lw: Lowering, item: ast.Operand, declared: ast.Variable, result: bool) -> tuple[ir.Value, ast.Variable]:
    """The pointer a call passes for one value: a `.param` variable's bytes, else a stack slot of the
    declared type: holding the argument (a register or an immediate), or receiving the result (a register)."""
    if type(item) is ast.Name and lw.variables.get(item.name, ("",))[0] == "param":
        return lw.variables[item.name][1], declared
    ty = llvm_type(declared.type)
    if ty is None or declared.array or declared.vector or (result and (type(item) is not ast.Name or item.name not in lw.registers)):
        raise lw.fail(f"call operand {item} is neither a .param variable nor a register of a scalar value")
    slot = lw.slot(f"call.{lw.ins.line}.{lw.ins.column}.{declared.name}", ty)
    if not result:
        lw.builder.store(lw.read(item, declared.type), slot)
    return slot, declared


def _assert_fail(lw: Lowering, returns, arguments) -> None:
    """`__assertfail(message, file, line, function, charSize)`: CUDA's failed `assert`, a trap that reports
    the message, file, line and function where the target can."""
    if returns or len(arguments) != len(_ASSERT_PARAMETERS):
        raise lw.fail("__assertfail takes (message, file, line, function, char size)")
    message, file, line, function = (call_argument(lw, item, ptx_type)
                                     for item, ptx_type in zip(arguments[:4], _ASSERT_PARAMETERS))
    lw.target.trap(lw.builder, (message, file, line, function))
    lw.stop_thread()


@handles("ret")
def ret(lw: Lowering, ins: ast.Instruction) -> None:
    lw.check_modifiers(ins, {"uni"})
    lw.operands(ins, 0)
    lw.return_()


@handles("exit")
def exit_(lw: Lowering, ins: ast.Instruction) -> None:
    """The thread ends (from a `.func` too); it no longer takes part in barriers."""
    lw.operands(ins, 0)
    lw.check_modifiers(ins, set())
    lw.stop_thread()


@handles("trap")
def trap(lw: Lowering, ins: ast.Instruction) -> None:
    """Aborts the launch: the target's trap (the host records it, and the launch raises)."""
    lw.operands(ins, 0)
    lw.check_modifiers(ins, set())
    lw.target.trap(lw.builder, None)
    lw.stop_thread()


@handles("pmevent")
def pmevent(lw: Lowering, ins: ast.Instruction) -> None:
    """`pmevent a` / `pmevent.mask m` signal events to NVIDIA's performance monitors; nothing a thread can
    observe depends on them, so they lower to nothing once their form is checked."""
    lw.check_modifiers(ins, {"mask"})
    (event,) = lw.operands(ins, 1)
    limit = 0xFFFF if ins.has("mask") else 15
    if type(event) is not ast.IntImm or not 0 <= event.value <= limit:
        raise lw.fail(f"pmevent takes an immediate 0–{limit}")


@handles("brkpt")
def brkpt(lw: Lowering, ins: ast.Instruction) -> None:
    """Suspends execution for a debugger: the target's breakpoint (none attached: execution goes on)."""
    lw.operands(ins, 0)
    lw.check_modifiers(ins, set())
    lw.target.breakpoint(lw.builder)
