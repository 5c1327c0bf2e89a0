"""A kernel's LLVM module: its signature, the module variables and `.func` functions it uses, its body."""

from __future__ import annotations

import struct

from llvmlite import ir

from fatkit.translate.lower.core import (
    I8, Lowering, SharedWindow, Unsupported, align_up, array_size, kernel_signature, llvm_type, register_types,
)
from fatkit.translate.ptx import ast
from fatkit.translate.targets.base import KernelParam, LoweredKernel, Target


def lower_kernel(kernel: ast.Function, registers: dict[str, str], target: Target,
                 module_variables: tuple[ast.Variable, ...] = (),
                 functions: dict[str, ast.Function] | None = None) -> LoweredKernel:
    """Lower one kernel into its own LLVM module; raises Unsupported for PTX outside the slice.

    `module_variables` are the PTX module's own: the .global/.const/.shared ones the kernel (or a function
    it calls) names go into its LLVM module (.global/.const as linkonce_odr, so the kernels' modules link
    into one copy). `functions` are the module's `.func` definitions by name; those the kernel calls are
    lowered into its module as internal functions."""
    functions = functions or {}
    if kernel.body is None:
        raise Unsupported(kernel.name, ".entry", kernel.line, "a kernel declaration without a body")
    signature = kernel_signature(kernel)
    module = ir.Module(name=kernel.name)
    module.triple = target.triple
    module.data_layout = target.data_layout
    param_types = [ir.ArrayType(I8, p.size) if p.array else llvm_type(p.type) for p in signature.params]
    used = _names_used(kernel, functions)
    module_level = [v for v in module_variables if v.name in used and v.state_space in ("global", "const", "shared")]
    shared, shared_bytes, window = _shared_variables(kernel, module, target,
                                             [v for v in module_level if v.state_space == "shared"])
    memory = {name: ("shared", pointer) for name, pointer in shared.items()}
    for variable in module_level:
        if variable.state_space != "shared":
            memory[variable.name] = (variable.state_space, _module_variable(kernel, variable, module, target))
    function, builder, values = target.define_kernel(module, signature, param_types)
    callees = _Callees(module, target, functions, memory, window)
    Lowering(kernel, signature.params, registers, target, function, builder, values, memory, callees).run()
    target.finish_module(module)
    bodies = [kernel, *(declaration for _, declaration in callees.lowered.values())]
    barriers = any(i.opcode in ("bar", "barrier") for body in bodies for i in body.instructions())
    return LoweredKernel(signature, str(module), shared_bytes, barriers)


def _names_used(kernel: ast.Function, functions: dict[str, ast.Function]) -> set[str]:
    """Every name an instruction of the kernel, or of a function it calls (transitively), mentions."""
    names: set[str] = set()

    def visit(operand) -> None:
        kind = type(operand)
        if kind is ast.Name:
            names.add(operand.name)
        elif kind is ast.Address and operand.base is not None:
            names.add(operand.base.name)
        elif kind is ast.Vector:
            for item in operand.items:
                visit(item)

    pending, seen = [kernel], {kernel.name}
    while pending:
        for instruction in pending.pop().instructions():
            for operand in instruction.operands:
                visit(operand)
                if type(operand) is ast.ArgList:
                    for item in operand.items:
                        visit(item)
        for name in names - seen:
            if name in functions:
                seen.add(name)
                pending.append(functions[name])
    return names


class _Callees:
    """The `.func` functions a kernel calls, each lowered into the kernel's module on its first call.

    A function takes the target's context arguments (the host's kernarg and special-register pointers),
    then one pointer per return and parameter to the caller's `.param` bytes: by reference, so every
    PTX parameter type (scalars, `.b8` arrays) passes the same way and recursion just works."""

    def __init__(self, module: ir.Module, target: Target, functions: dict[str, ast.Function],
                 memory: dict[str, tuple[str, ir.Value]], window: SharedWindow | None):
        self.module, self.target, self.functions, self.memory = module, target, functions, memory
        self.window = window
        self.lowered: dict[str, tuple[ir.Function, ast.Function]] = {}

    def get(self, name: str) -> tuple[ir.Function, ast.Function] | None:
        if name in self.lowered:
            return self.lowered[name]
        function = self.functions.get(name)
        if function is None or function.body is None:
            return None
        stack = ir.PointerType(addrspace=self.target.stack_address_space)
        params = []
        for param in (*function.returns, *function.params):
            if param.size_bytes is None or llvm_type(param.type) is None:
                raise Unsupported(name, f"parameter {param.name}", param.line or function.line,
                                  "only sized integer/floating-point .param parameters are supported")
            params.append(KernelParam(param.name, param.type, 0, param.size_bytes,
                                      param.align or param.element_size, array=True))
        types = [ir.PointerType()] * self.target.context_arguments + [stack] * len(params)
        lowered = ir.Function(self.module, ir.FunctionType(ir.VoidType(), types), name)
        lowered.linkage = "internal"
        self.lowered[name] = lowered, function  # before its body, for recursive calls
        builder = ir.IRBuilder(lowered.append_basic_block("entry"))
        values = lowered.args[self.target.context_arguments:]
        Lowering(function, params, register_types(function), self.target, lowered, builder, values,
                        self.memory, self).run()
        return lowered, function


def _initializer_bytes(kernel: ast.Function, variable: ast.Variable, size: int) -> bytes:
    """The bytes a variable starts with: its initializer's elements packed little-endian, zeros after."""
    element, ptx_type = ast.TYPE_SIZES[variable.type], variable.type
    image = bytearray()

    def pack(item) -> None:
        kind = type(item)
        if kind is ast.InitList:
            for sub in item.items:
                pack(sub)
        elif kind is ast.IntImm and ptx_type[0] != "f":
            image.extend((item.value & ((1 << 8 * element) - 1)).to_bytes(element, "little"))
        elif kind in (ast.IntImm, ast.FloatImm) and ptx_type[0] == "f" and element in (4, 8):
            value = float(item.value) if kind is ast.IntImm else item.value
            image.extend(struct.pack("<f" if element == 4 else "<d", value))
        else:
            raise Unsupported(kernel.name, f".{variable.state_space} {variable.name}", variable.line,
                              f"initializer {item} not supported yet")

    if variable.initializer is not None:
        pack(variable.initializer)
    if len(image) > size:
        raise Unsupported(kernel.name, f".{variable.state_space} {variable.name}", variable.line,
                          "initializer larger than the variable")
    return bytes(image) + bytes(size - len(image))


def _module_variable(kernel: ast.Function, variable: ast.Variable, module: ir.Module,
                     target: Target) -> ir.GlobalVariable:
    """A module-level .global/.const variable, defined with its initial bytes."""
    size = variable.size_bytes
    if size is None or variable.linkage == "extern" or llvm_type(variable.type) is None:
        raise Unsupported(kernel.name, f".{variable.state_space} {variable.name}", variable.line,
                          "only defined, sized .global/.const variables of scalar types are supported")
    space = target.global_address_space if variable.state_space == "global" else target.constant_address_space
    storage = ir.GlobalVariable(module, ir.ArrayType(I8, size), variable.name, addrspace=space)
    storage.type = ir.PointerType(addrspace=space)
    storage.linkage = "linkonce_odr"
    storage.initializer = ir.Constant(storage.value_type, bytearray(_initializer_bytes(kernel, variable, size)))
    storage.align = variable.align or variable.element_size
    storage.global_constant = variable.state_space == "const"
    return storage


def _shared_variables(kernel: ast.Function, module: ir.Module, target: Target,
                      module_level: list[ast.Variable]) -> tuple[dict[str, ir.Value], int, "SharedWindow | None"]:
    """The kernel's `.shared` variables as globals in the target's shared address space (undefined at
    start, as in CUDA) and their bytes: each at its alignment, in declaration order, as LLVM lays out LDS.

    Where the target wants a shared window (host), the variables are instead slices of one global and a
    shared address is an offset into it, so that it fits the 32-bit registers PTX keeps it in."""
    shared, total, offsets = {}, 0, {}
    for variable in [*module_level, *(v for v in kernel.variables() if v.state_space == "shared")]:
        element = ast.TYPE_SIZES.get(variable.type)
        size = None if element is None else array_size(variable, element) if variable.array else element
        if target.shared_address_space is None:
            raise Unsupported(kernel.name, f".shared {variable.name}", variable.line,
                              f"the {target.name} target runs threads one after another and has no "
                              ".shared memory")
        if size is None or variable.vector:
            raise Unsupported(kernel.name, f".shared {variable.name}", variable.line,
                              "only sized scalar or array .shared variables are supported")
        align = variable.align or element
        offsets[variable.name] = align_up(total, align)
        total = align_up(total, align) + size
        if target.shared_window:
            continue
        storage = ir.GlobalVariable(module, ir.ArrayType(I8, size), variable.name,
                                    addrspace=target.shared_address_space)
        storage.type = ir.PointerType(addrspace=target.shared_address_space)  # opaque, as every pointer here
        storage.linkage = "internal"
        storage.initializer = ir.Constant(storage.value_type, ir.Undefined)
        storage.align = align
        shared[variable.name] = storage
    if not target.shared_window or not offsets:
        return shared, total, None
    window = ir.GlobalVariable(module, ir.ArrayType(I8, total), "fatkit.shared")
    window.type = ir.PointerType()
    window.linkage = "internal"
    window.initializer = ir.Constant(window.value_type, ir.Undefined)
    window.align = 16
    for name, offset in offsets.items():
        shared[name] = ir.FormattedConstant(
            ir.PointerType(), f'getelementptr inbounds (i8, ptr @"{window.name}", i64 {offset})')
    return shared, total, SharedWindow(window, offsets)
