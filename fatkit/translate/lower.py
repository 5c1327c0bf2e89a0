"""Lowering: one PTX kernel → an LLVM module (llvmlite IR) for a `Target`.

Every PTX register and every scalar kernel parameter is an alloca (LLVM's SROA/mem2reg makes SSA of them);
labels start basic blocks; a guard `@p`/`@!p` becomes a conditional branch around its instruction.
Supported: mov; add/sub/mul(.lo/.hi/.wide)/mad(.lo/.hi/.wide) on integers; and/or/xor/not/shl/shr;
setp (integer and float compares, unordered ones included); selp; cvt between integer widths and between
integers and f32/f64 (.rn, .rzi/.rni/.rmi/.rpi); add/sub/mul/fma/mad .rn on f32 and f64; bra; ret;
%tid/%ntid/%ctaid/%nctaid.
Memory: ld/st in the .global/.param/.shared/.local/.const and generic spaces, scalar or .v2/.v4, every
integer type and f32/f64 (narrow loads extend into wider registers by the type's sign); cvta and
cvta.to for .global/.shared/.local/.const; `.local` and `.shared` variables of a kernel; module-level
.global/.const variables with integer/float initializers (and .shared ones). Kernel parameters may be
scalars or byte arrays (by-value structs, read with `ld.param [p+offset]`). `.shared` memory and
bar.sync 0 / barrier.sync 0 go through the target (LDS and s_barrier on amdgpu, a shared window and a
thread per GPU thread on the host).
Calls: direct `call (ret…), f, (arg…)` of the module's `.func` functions, recursion included.
Anything else raises `Unsupported` naming the instruction and its PTX line.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from llvmlite import ir

from fatkit.errors import FatkitError
from fatkit.translate.ptx import ast
from fatkit.translate.targets.base import DIM_REGISTERS, KernelParam, KernelSignature, LoweredKernel, Target


class Unsupported(FatkitError):
    """A kernel uses PTX outside what lowering handles; `kernel`, `instruction` and `line` say where."""

    def __init__(self, kernel: str, what: str, line: int, why: str):
        super().__init__(f"{kernel}: line {line}: {what}: {why}")
        self.kernel, self.instruction, self.line, self.why = kernel, what, line, why


I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F32, F64 = ir.FloatType(), ir.DoubleType()
_INT_TYPES = {8: I8, 16: I16, 32: I32, 64: I64}
_FLOAT_TYPES = {32: F32, 64: F64}

# Compare operators: integer (signed, unsigned) and float predicates of LLVM.
_SIGNED_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_UNSIGNED_CMP = {**_SIGNED_CMP, "lo": "<", "ls": "<=", "hi": ">", "hs": ">="}
_FLOAT_CMP = {  # (ordered, llvmlite operator); "ne" is ordered in PTX, "neu" its unordered twin
    **{cmp: (True, op) for cmp, op in _SIGNED_CMP.items()},
    **{cmp + "u": (False, op) for cmp, op in _SIGNED_CMP.items()},
    "num": (True, "ord"), "nan": (True, "uno"),
}
_FLOAT_TO_INT_ROUNDING = {"rzi": None, "rni": "llvm.roundeven", "rmi": "llvm.floor", "rpi": "llvm.ceil"}
_MEMORY_SPACES = ("global", "param", "shared", "local", "const")
_CACHE_HINTS = {"ca", "cg", "cs", "lu", "cv", "wb", "wt"}
_MANGLED = {I8: "i8", I16: "i16", I32: "i32", I64: "i64", F32: "f32", F64: "f64"}


def llvm_type(ptx_type: str) -> ir.Type | None:
    """The LLVM type a PTX register or value of `ptx_type` lives in; None for types outside this slice."""
    if ptx_type == "pred":
        return I1
    kind, bits = ptx_type[0], ptx_type[1:]
    if not bits.isdigit():
        return None
    if kind in "bsu":
        return _INT_TYPES.get(int(bits))
    if kind == "f":
        return _FLOAT_TYPES.get(int(bits))
    return None


def _align(offset: int, alignment: int) -> int:
    return (offset + alignment - 1) // alignment * alignment


def _array_size(variable: ast.Variable, element: int) -> int | None:
    """Bytes of an array variable with every dimension given; None for `[]`."""
    size = element
    for dimension in variable.array:
        if dimension is None:
            return None
        size *= dimension
    return size


def kernel_signature(kernel: ast.Function) -> KernelSignature:
    """CUDA's parameter-buffer layout: each parameter at the next multiple of its alignment."""
    params, offset = [], 0
    for param in kernel.params:
        element = ast.TYPE_SIZES.get(param.type)
        size = element if element is None or not param.array else _array_size(param, element)
        if param.vector or size is None or llvm_type(param.type) is None:
            raise Unsupported(kernel.name, f"parameter {param.name}", param.line or kernel.line,
                              "only scalar integer/floating-point and sized array parameters are supported")
        align = param.align or element
        offset = _align(offset, align)
        params.append(KernelParam(param.name, param.type, offset, size, align, array=bool(param.array)))
        offset += size
    return KernelSignature(kernel.name, tuple(params), offset)


def register_types(kernel: ast.Function) -> dict[str, str]:
    """PTX type of every register the kernel declares, `%r<4>` expanded to `%r0` … `%r3`."""
    registers: dict[str, str] = {}
    for variable in kernel.variables():
        if variable.state_space in ("shared", "local", "param"):
            continue  # memory, lowered with the kernel
        if variable.state_space != "reg":
            raise Unsupported(kernel.name, f".{variable.state_space} {variable.name}", variable.line,
                              f"variables in .{variable.state_space} are not supported yet")
        if variable.vector or variable.array or llvm_type(variable.type) is None:
            raise Unsupported(kernel.name, f".reg .{variable.type} {variable.name}", variable.line,
                              "only scalar predicate, integer and f32/f64 registers are supported")
        if variable.count is not None:
            for i in range(variable.count):
                registers[f"{variable.name}{i}"] = variable.type
        else:
            registers[variable.name] = variable.type
    return registers


class _StackAlloca(ir.instructions.AllocaInstr):
    """`alloca` in the target's stack address space (5 on AMDGPU), which llvmlite's builder cannot express."""

    def __init__(self, parent, allocated: ir.Type, address_space: int, name: str):
        super().__init__(parent, allocated, None, name)
        self.type = ir.PointerType(addrspace=address_space)
        self.address_space = address_space

    def descr(self, buf):
        super().descr(buf)
        if self.address_space:
            buf.append(f", addrspace({self.address_space})")


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
    _KernelLowering(kernel, signature.params, registers, target, function, builder, values, memory, callees).run()
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
                 memory: dict[str, tuple[str, ir.Value]], window: _SharedWindow | None):
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
        _KernelLowering(function, params, register_types(function), self.target, lowered, builder, values,
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
                      module_level: list[ast.Variable]) -> tuple[dict[str, ir.Value], int, "_SharedWindow | None"]:
    """The kernel's `.shared` variables as globals in the target's shared address space (undefined at
    start, as in CUDA) and their bytes: each at its alignment, in declaration order, as LLVM lays out LDS.

    Where the target wants a shared window (host), the variables are instead slices of one global and a
    shared address is an offset into it, so that it fits the 32-bit registers PTX keeps it in."""
    shared, total, offsets = {}, 0, {}
    for variable in [*module_level, *(v for v in kernel.variables() if v.state_space == "shared")]:
        element = ast.TYPE_SIZES.get(variable.type)
        size = None if element is None else _array_size(variable, element) if variable.array else element
        if target.shared_address_space is None:
            raise Unsupported(kernel.name, f".shared {variable.name}", variable.line,
                              f"the {target.name} target runs threads one after another and has no "
                              ".shared memory")
        if size is None or variable.vector:
            raise Unsupported(kernel.name, f".shared {variable.name}", variable.line,
                              "only sized scalar or array .shared variables are supported")
        align = variable.align or element
        offsets[variable.name] = _align(total, align)
        total = _align(total, align) + size
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
    return shared, total, _SharedWindow(window, offsets)


@dataclass(frozen=True)
class _SharedWindow:
    """The host's shared memory: one global; a variable's shared address is its offset in it."""

    base: ir.GlobalVariable
    offsets: dict[str, int]


@dataclass
class _Slot:
    pointer: ir.Value
    type: ir.Type
    ptx_type: str


class _KernelLowering:
    """Lowers the body of a kernel or of a `.func` (then its parameters are all pointers, `array`)."""

    def __init__(self, kernel, params, registers, target, function, builder, values, memory, callees):
        self.kernel, self.target, self.function, self.builder = kernel, target, function, builder
        self.callees: _Callees = callees
        self.entry = builder.block
        # The kernel's memory variables: name → (state space, pointer).
        self.variables: dict[str, tuple[str, ir.Value]] = dict(memory)
        for variable in kernel.variables():
            if variable.state_space == "local":
                self.variables[variable.name] = ("local", self._local(variable))
        self._call_parameters(kernel)
        self.registers: dict[str, _Slot] = {}
        for name, ptx_type in registers.items():
            self.registers[name] = _Slot(self._alloca(llvm_type(ptx_type), name), llvm_type(ptx_type), ptx_type)
        self.params: dict[str, _Slot] = {}
        for param, value in zip(params, values):
            if param.array:  # already a pointer to the parameter's bytes
                self.params[param.name] = _Slot(value, value.type, param.type)
                continue
            slot = self._alloca(value.type, param.name)
            builder.store(value, slot, align=param.align)
            self.params[param.name] = _Slot(slot, value.type, param.type)
        self.labels = {s.name: function.append_basic_block(s.name.lstrip("$"))
                       for s in kernel.statements() if type(s) is ast.Label}
        self.ins: ast.Instruction | None = None

    def _alloca(self, llvm_ty: ir.Type, name: str) -> ir.Value:
        instruction = _StackAlloca(self.builder.block, llvm_ty, self.target.stack_address_space, name)
        self.builder._insert(instruction)
        return instruction

    def _local(self, variable: ast.Variable) -> ir.Value:
        """A `.local` variable: per-thread stack bytes at its alignment."""
        if variable.size_bytes is None:
            raise Unsupported(self.kernel.name, f".local {variable.name}", variable.line,
                              "only sized .local variables are supported")
        storage = self._alloca(ir.ArrayType(I8, variable.size_bytes), variable.name)
        storage.align = variable.align or variable.element_size
        return storage

    def _call_parameters(self, kernel: ast.Function) -> None:
        """`.param` variables of call blocks: stack bytes. nvcc reuses names (`param0`) in block after
        block with other types, so each name gets one buffer of its largest size and alignment."""
        sizes: dict[str, tuple[int, int]] = {}
        for variable in kernel.variables():
            if variable.state_space != "param":
                continue
            if variable.size_bytes is None:
                raise Unsupported(kernel.name, f".param {variable.name}", variable.line,
                                  "only sized .param variables are supported")
            size, align = sizes.get(variable.name, (0, 1))
            sizes[variable.name] = (max(size, variable.size_bytes),
                                    max(align, variable.align or variable.element_size))
        for name, (size, align) in sizes.items():
            storage = self._alloca(ir.ArrayType(I8, size), name)
            storage.align = align
            self.variables[name] = ("param", storage)

    # ---------------------------------------------------------------------------------------- driver

    def run(self) -> None:
        for statement in self.kernel.statements():
            kind = type(statement)
            if kind is ast.Label:
                self._start(self.labels[statement.name])
            elif kind is ast.Instruction:
                self.ins = statement
                self._instruction(statement)
            elif kind in (ast.Pragma, ast.Loc, ast.Block, ast.Variable):
                continue  # hints, debug lines, scopes and (already declared) registers
            else:
                raise Unsupported(self.kernel.name, kind.__name__, getattr(statement, "line", 0),
                                  "statement not supported yet")
        if not self.builder.block.is_terminated:
            self.builder.ret_void()

    def _start(self, block: ir.Block) -> None:
        """Continue in `block`, falling through into it from the current block."""
        if not self.builder.block.is_terminated:
            self.builder.branch(block)
        self.builder.position_at_end(block)

    def fail(self, why: str) -> Unsupported:
        return Unsupported(self.kernel.name, self.ins.name, self.ins.line, why)

    def _instruction(self, ins: ast.Instruction) -> None:
        handler = getattr(self, "op_" + ins.opcode, None)
        if handler is None:
            raise self.fail("instruction not supported yet")
        if self.builder.block.is_terminated:  # code after bra/ret without a label: unreachable
            self.builder.position_at_end(self.function.append_basic_block("dead"))
        if ins.guard is None:
            handler(ins)
            return
        predicate = self._load_register(ins.guard.register, "pred")
        if ins.guard.negated:
            predicate = self.builder.not_(predicate)
        if ins.opcode == "bra":
            following = self.function.append_basic_block("next")
            self.builder.cbranch(predicate, self._label(ins.operands[0]), following)
            self.builder.position_at_end(following)
            return
        guarded = self.function.append_basic_block("guarded")
        following = self.function.append_basic_block("next")
        self.builder.cbranch(predicate, guarded, following)
        self.builder.position_at_end(guarded)
        handler(ins)
        self._start(following)

    # ---------------------------------------------------------------------------------------- operands

    def _types(self, ins: ast.Instruction, count: int) -> list[str]:
        types = [m for m in ins.modifiers if m in ast.TYPES]
        if len(types) != count:
            raise self.fail(f"expected {count} type modifier(s)")
        for t in types:
            if llvm_type(t) is None:
                raise self.fail(f"type .{t} not supported yet")
        return types

    def _check_modifiers(self, ins: ast.Instruction, allowed: set[str]) -> None:
        extra = [m for m in ins.modifiers if m not in allowed and m not in ast.TYPES]
        if extra:
            raise self.fail(f"modifier .{extra[0]} not supported yet")

    def _operands(self, ins: ast.Instruction, count: int) -> tuple[ast.Operand, ...]:
        if len(ins.operands) != count:
            raise self.fail(f"expected {count} operands, found {len(ins.operands)}")
        return ins.operands

    def _register(self, operand: ast.Operand) -> _Slot:
        if type(operand) is not ast.Name or operand.component is not None or operand.name not in self.registers:
            raise self.fail(f"operand {operand} is not a declared scalar register")
        return self.registers[operand.name]

    def _load_register(self, name: str, ptx_type: str) -> ir.Value:
        if name not in self.registers:
            raise self.fail(f"{name} is not a declared register")
        slot = self.registers[name]
        return self._convert(self.builder.load(slot.pointer, typ=slot.type), slot.ptx_type, ptx_type)

    def _convert(self, value: ir.Value, have: str, want: str) -> ir.Value:
        """A register of PTX type `have` read or written as `want`: same size → bits; else resize by sign."""
        source, target = llvm_type(have), llvm_type(want)
        if source == target:
            return value
        if (source == I1) != (target == I1):
            raise self.fail(f"a .{have} register used as .{want}")
        if ast.TYPE_SIZES[have] == ast.TYPE_SIZES[want]:
            return self.builder.bitcast(value, target)
        if have[0] == "f" or want[0] == "f":
            raise self.fail(f"a .{have} register used as .{want}")
        if ast.TYPE_SIZES[have] > ast.TYPE_SIZES[want]:
            return self.builder.trunc(value, target)
        return (self.builder.sext if have[0] == "s" else self.builder.zext)(value, target)

    def read(self, operand: ast.Operand, ptx_type: str) -> ir.Value:
        """A source operand as a value of `ptx_type`."""
        ty, kind = llvm_type(ptx_type), type(operand)
        if kind is ast.IntImm and ty != I1:
            if isinstance(ty, ir.IntType):
                return ir.Constant(ty, operand.value & ((1 << ty.width) - 1))
            return ir.Constant(ty, float(operand.value))
        if kind is ast.FloatImm:
            if ty in (F32, F64):
                value = ast.FloatImm(operand.bits, operand.width).value
                return ir.Constant(ty, value)
            if isinstance(ty, ir.IntType) and ty.width == operand.width:
                return ir.Constant(ty, operand.bits)
            raise self.fail(f"a {operand.width}-bit float literal used as .{ptx_type}")
        if kind is ast.Name and operand.name in DIM_REGISTERS:
            if operand.component not in ("x", "y", "z"):
                raise self.fail(f"special register {operand.name} needs .x/.y/.z")
            value = self.target.special_register(self.builder, operand.name, operand.component)
            return self._convert(value, "u32", ptx_type)
        window = self.callees.window
        if kind is ast.Name and operand.component is None and window and operand.name in window.offsets:
            return ir.Constant(ty, window.offsets[operand.name])  # its shared address: an offset
        if kind is ast.Name and operand.component is None and operand.name in self.variables:
            return self.builder.ptrtoint(self.variables[operand.name][1], ty)  # its address in its space
        if kind is ast.Name and operand.is_special_register:
            raise self.fail(f"special register {operand.name} not supported yet")
        if kind is ast.Name and operand.component is None and operand.name in self.registers:
            return self._load_register(operand.name, ptx_type)
        raise self.fail(f"operand {operand} not supported yet")

    def write(self, operand: ast.Operand, value: ir.Value, ptx_type: str) -> None:
        slot = self._register(operand)
        self.builder.store(self._convert(value, ptx_type, slot.ptx_type), slot.pointer)

    def intrinsic(self, name: str, args: list[ir.Value], result: ir.Type | None = None) -> ir.Value:
        """Call an overloaded LLVM intrinsic; the overload is the result type (if it differs) and the
        first argument's type, as for llvm.fma/floor/fptosi.sat."""
        overloads = ([result] if result is not None else []) + [args[0].type]
        full = name + "".join("." + _MANGLED[t] for t in overloads)
        module = self.builder.module
        function = module.globals.get(full) or ir.Function(
            module, ir.FunctionType(result or args[0].type, [a.type for a in args]), full)
        return self.builder.call(function, args)

    def _label(self, operand: ast.Operand) -> ir.Block:
        if type(operand) is not ast.Name or operand.name not in self.labels:
            raise self.fail(f"branch target {operand} is not a label of this kernel")
        return self.labels[operand.name]

    def _address_space(self, space: str) -> int:
        spaces = {"global": self.target.global_address_space, "shared": self.target.shared_address_space,
                  "local": self.target.stack_address_space, "const": self.target.constant_address_space,
                  "generic": 0}
        if spaces[space] is None:
            raise self.fail(f"the {self.target.name} target has no .{space} memory")
        return spaces[space]

    def _address(self, operand: ast.Operand, space: str) -> ir.Value:
        """A pointer for `[base+offset]`: base a parameter, a variable of this kernel or a register holding
        an address of `space` (32-bit offsets for .shared/.local on AMDGPU, inttoptr truncates to them)."""
        if type(operand) is not ast.Address or operand.base is None or operand.extra:
            raise self.fail("address operand must be [base] or [base+offset]")
        base, offset = operand.base, ir.Constant(I64, operand.offset)
        if space == "param" and base.name in self.params:
            pointer = self.params[base.name].pointer
        elif base.name in self.variables:
            variable_space, pointer = self.variables[base.name]
            if variable_space != space:
                raise self.fail(f"{base.name} is a .{variable_space} variable, accessed as .{space}")
        elif space == "shared" and self.callees.window:
            pointer = self.builder.gep(self.callees.window.base, [self.read(base, "u32")], source_etype=I8)
        else:
            integer = self.read(base, "u64")
            pointer = self.builder.inttoptr(integer, ir.PointerType(addrspace=self._address_space(space)))
        return self.builder.gep(pointer, [offset], source_etype=I8)

    # ---------------------------------------------------------------------------------------- data movement

    def op_mov(self, ins):
        self._check_modifiers(ins, set())
        (t,) = self._types(ins, 1)
        d, a = self._operands(ins, 2)
        self.write(d, self.read(a, t), t)

    def _access(self, ins, stored: bool):
        """ld/st: state space, element type and vector width (1, 2, 4); cache hints are ignored."""
        spaces = [m for m in ins.modifiers if m in _MEMORY_SPACES]
        if len(spaces) > 1:
            raise self.fail("more than one state space")
        space = spaces[0] if spaces else "generic"
        widths = [m for m in ins.modifiers if m in ("v2", "v4")]
        allowed = set(spaces) | set(widths) | _CACHE_HINTS | ({"nc"} if space == "global" else set())
        self._check_modifiers(ins, allowed)
        (t,) = self._types(ins, 1)
        if t == "pred":
            raise self.fail("memory accesses of .pred do not exist")
        return space, t, int(widths[0][1]) if widths else 1

    def op_ld(self, ins):
        space, t, width = self._access(ins, stored=False)
        d, a = self._operands(ins, 2)
        pointer, size = self._address(a, space), ast.TYPE_SIZES[t]
        if width == 1:
            self.write(d, self.builder.load(pointer, typ=llvm_type(t), align=size), t)
            return
        vector = self.builder.load(pointer, typ=ir.VectorType(llvm_type(t), width), align=size * width)
        for i, item in enumerate(self._vector(d, width)):
            if type(item) is not ast.Sink:
                self.write(item, self.builder.extract_element(vector, ir.Constant(I32, i)), t)

    def op_st(self, ins):
        space, t, width = self._access(ins, stored=True)
        a, v = self._operands(ins, 2)
        pointer, size = self._address(a, space), ast.TYPE_SIZES[t]
        if width == 1:
            self.builder.store(self.read(v, t), pointer, align=size)
            return
        vector = ir.Constant(ir.VectorType(llvm_type(t), width), ir.Undefined)
        for i, item in enumerate(self._vector(v, width)):
            vector = self.builder.insert_element(vector, self.read(item, t), ir.Constant(I32, i))
        self.builder.store(vector, pointer, align=size * width)

    def _vector(self, operand: ast.Operand, width: int) -> tuple[ast.Operand, ...]:
        if type(operand) is not ast.Vector or len(operand.items) != width:
            raise self.fail(f"a .v{width} access needs a {{…}} operand of {width} registers")
        return operand.items

    def op_cvta(self, ins):
        """Between a state space's addresses and generic ones: an addrspacecast where the target gives the
        space its own address space (AMDGPU .shared/.local: 32-bit offsets ↔ flat addresses), else the same
        number."""
        spaces = [m for m in ins.modifiers if m in ("global", "shared", "local", "const")]
        if len(spaces) != 1:
            raise self.fail("cvta needs one of .global/.shared/.local/.const")
        self._check_modifiers(ins, {"to", spaces[0]})
        (t,) = self._types(ins, 1)
        d, a = self._operands(ins, 2)
        space = self._address_space(spaces[0])
        value = self.read(a, t)
        window = self.callees.window if spaces[0] == "shared" else None
        if window:  # host shared addresses are offsets into the window
            base = self.builder.ptrtoint(window.base, value.type)
            value = (self.builder.sub if "to" in ins.modifiers else self.builder.add)(value, base)
        elif space != 0:
            source, target = (0, space) if "to" in ins.modifiers else (space, 0)
            pointer = self.builder.inttoptr(value, ir.PointerType(addrspace=source))
            cast = self.builder.addrspacecast(pointer, ir.PointerType(addrspace=target))
            value = self.builder.ptrtoint(cast, value.type)
        self.write(d, value, t)

    # ---------------------------------------------------------------------------------------- arithmetic

    def _float_rounding(self, ins, t: str, required: bool) -> None:
        allowed = {"rn"} if t[0] == "f" else set()
        self._check_modifiers(ins, allowed)
        if t[0] == "f" and required and "rn" not in ins.modifiers:
            raise self.fail("only the .rn rounding is supported yet")

    def _binary(self, ins, integer_op: str, float_op: str):
        (t,) = self._types(ins, 1)
        self._float_rounding(ins, t, required=False)
        d, a, b = self._operands(ins, 3)
        op = float_op if t[0] == "f" else integer_op
        self.write(d, getattr(self.builder, op)(self.read(a, t), self.read(b, t)), t)

    def op_add(self, ins):
        self._binary(ins, "add", "fadd")

    def op_sub(self, ins):
        self._binary(ins, "sub", "fsub")

    def _product(self, ins, t: str, a, b) -> tuple[ir.Value, str]:
        """a*b per .lo/.hi/.wide: the value and the PTX type it has."""
        mode = [m for m in ("lo", "hi", "wide") if m in ins.modifiers]
        if len(mode) != 1:
            raise self.fail("integer multiply needs exactly one of .lo/.hi/.wide")
        self._check_modifiers(ins, set(mode))
        x, y = self.read(a, t), self.read(b, t)
        if mode[0] == "lo":
            return self.builder.mul(x, y), t
        bits = ast.TYPE_SIZES[t] * 8
        if bits == 64 and mode[0] == "wide":
            raise self.fail("mul.wide of 64-bit operands does not exist")
        wide, extend = ir.IntType(2 * bits), self.builder.sext if t[0] == "s" else self.builder.zext
        full = self.builder.mul(extend(x, wide), extend(y, wide))
        if mode[0] == "wide":
            return full, f"{t[0]}{2 * bits}"
        return self.builder.trunc(self.builder.lshr(full, ir.Constant(wide, bits)), x.type), t

    def op_mul(self, ins):
        (t,) = self._types(ins, 1)
        if t[0] == "f":
            self._binary(ins, "mul", "fmul")
            return
        d, a, b = self._operands(ins, 3)
        value, result_type = self._product(ins, t, a, b)
        self.write(d, value, result_type)

    def op_mad(self, ins):
        (t,) = self._types(ins, 1)
        if t[0] == "f":
            self._fma(ins, t)
            return
        d, a, b, c = self._operands(ins, 4)
        value, result_type = self._product(ins, t, a, b)
        self.write(d, self.builder.add(value, self.read(c, result_type)), result_type)

    def op_fma(self, ins):
        (t,) = self._types(ins, 1)
        if t[0] != "f":
            raise self.fail("fma is a floating-point instruction")
        self._fma(ins, t)

    def _fma(self, ins, t: str):
        self._float_rounding(ins, t, required=True)
        d, a, b, c = self._operands(ins, 4)
        self.write(d, self.intrinsic("llvm.fma", [self.read(a, t), self.read(b, t), self.read(c, t)]), t)

    # ---------------------------------------------------------------------------------------- logic and shifts

    def _logic_type(self, ins) -> str:
        (t,) = self._types(ins, 1)
        self._check_modifiers(ins, set())
        if t != "pred" and t[0] != "b":
            raise self.fail("logic instructions take .pred or .bN types")
        return t

    def _logic(self, ins, op: str):
        t = self._logic_type(ins)
        d, a, b = self._operands(ins, 3)
        self.write(d, getattr(self.builder, op)(self.read(a, t), self.read(b, t)), t)

    def op_and(self, ins):
        self._logic(ins, "and_")

    def op_or(self, ins):
        self._logic(ins, "or_")

    def op_xor(self, ins):
        self._logic(ins, "xor")

    def op_not(self, ins):
        t = self._logic_type(ins)
        d, a = self._operands(ins, 2)
        self.write(d, self.builder.not_(self.read(a, t)), t)

    def _shift(self, ins, arithmetic: bool):
        (t,) = self._types(ins, 1)
        self._check_modifiers(ins, set())
        d, a, b = self._operands(ins, 3)
        value, amount = self.read(a, t), self.read(b, "u32")
        ty, bits = value.type, ast.TYPE_SIZES[t] * 8
        # PTX clamps shift amounts above the width; LLVM leaves them undefined.
        too_far = self.builder.icmp_unsigned(">=", amount, ir.Constant(I32, bits))
        if arithmetic:
            clamped = self.builder.select(too_far, ir.Constant(I32, bits - 1), amount)
            self.write(d, self.builder.ashr(value, self._convert(clamped, "u32", f"u{bits}")), t)
            return
        shifted = (self.builder.shl if ins.opcode == "shl" else self.builder.lshr)(
            value, self._convert(self.builder.select(too_far, ir.Constant(I32, 0), amount), "u32", f"u{bits}"))
        self.write(d, self.builder.select(too_far, ir.Constant(ty, 0), shifted), t)

    def op_shl(self, ins):
        self._shift(ins, arithmetic=False)

    def op_shr(self, ins):
        (t,) = self._types(ins, 1)
        self._shift(ins, arithmetic=t[0] == "s")

    # ---------------------------------------------------------------------------------------- compare and select

    def op_setp(self, ins):
        (t,) = self._types(ins, 1)
        comparisons = [m for m in ins.modifiers if m not in ast.TYPES]
        if len(comparisons) != 1:
            raise self.fail("only setp.CmpOp.type (no .ftz, no boolean combination) is supported yet")
        cmp = comparisons[0]
        d, a, b = self._operands(ins, 3)
        x, y = self.read(a, t), self.read(b, t)
        if t[0] == "f":
            if cmp not in _FLOAT_CMP:
                raise self.fail(f"unknown float comparison .{cmp}")
            ordered, op = _FLOAT_CMP[cmp]
            result = (self.builder.fcmp_ordered if ordered else self.builder.fcmp_unordered)(op, x, y)
        elif t[0] == "s" and cmp in _SIGNED_CMP:
            result = self.builder.icmp_signed(_SIGNED_CMP[cmp], x, y)
        elif t[0] in "ub" and cmp in (_UNSIGNED_CMP if t[0] == "u" else ("eq", "ne")):
            result = self.builder.icmp_unsigned(_UNSIGNED_CMP[cmp], x, y)
        else:
            raise self.fail(f"comparison .{cmp} is not defined for .{t}")
        self.write(d, result, "pred")

    def op_selp(self, ins):
        (t,) = self._types(ins, 1)
        self._check_modifiers(ins, set())
        d, a, b, c = self._operands(ins, 4)
        self.write(d, self.builder.select(self.read(c, "pred"), self.read(a, t), self.read(b, t)), t)

    # ---------------------------------------------------------------------------------------- conversions

    def op_cvt(self, ins):
        dst, src = self._types(ins, 2)
        d, a = self._operands(ins, 2)
        rounding = [m for m in ins.modifiers if m not in ast.TYPES]
        if len(rounding) > 1 or (rounding and rounding[0] not in ("rn", *_FLOAT_TO_INT_ROUNDING)):
            raise self.fail("only one of .rn/.rzi/.rni/.rmi/.rpi is supported yet (no .ftz/.sat)")
        mode = rounding[0] if rounding else None
        value, source, target = self.read(a, src), llvm_type(src), llvm_type(dst)
        if src[0] != "f" and dst[0] != "f":
            if mode is not None:
                raise self.fail("integer-to-integer cvt takes no rounding")
            self.write(d, self._convert(value, src, dst), dst)
        elif src[0] != "f":  # integer → float: LLVM's conversion rounds to nearest even, as .rn
            if mode != "rn":
                raise self.fail("integer-to-float cvt supports .rn only yet")
            convert = self.builder.sitofp if src[0] == "s" else self.builder.uitofp
            self.write(d, convert(value, target), dst)
        elif dst[0] != "f":  # float → integer: round as asked, then saturate (NaN → 0) as PTX does
            if mode not in _FLOAT_TO_INT_ROUNDING:
                raise self.fail("float-to-integer cvt needs .rzi/.rni/.rmi/.rpi")
            if _FLOAT_TO_INT_ROUNDING[mode]:
                value = self.intrinsic(_FLOAT_TO_INT_ROUNDING[mode], [value])
            name = "llvm.fptosi.sat" if dst[0] == "s" else "llvm.fptoui.sat"
            self.write(d, self.intrinsic(name, [value], result=target), dst)
        elif source == target:  # cvt.rXi.f32.f32: round to an integral value
            if mode not in _FLOAT_TO_INT_ROUNDING:
                raise self.fail("float-to-same-float cvt needs .rzi/.rni/.rmi/.rpi")
            name = _FLOAT_TO_INT_ROUNDING[mode] or "llvm.trunc"
            self.write(d, self.intrinsic(name, [value]), dst)
        elif target == F64:
            if mode is not None:
                raise self.fail("f32-to-f64 cvt is exact and takes no rounding")
            self.write(d, self.builder.fpext(value, target), dst)
        else:
            if mode != "rn":
                raise self.fail("f64-to-f32 cvt supports .rn only yet")
            self.write(d, self.builder.fptrunc(value, target), dst)

    # ---------------------------------------------------------------------------------------- control flow

    def op_bra(self, ins):
        self._check_modifiers(ins, {"uni"})
        (target,) = self._operands(ins, 1)
        self.builder.branch(self._label(target))

    def op_bar(self, ins):
        # bar.sync 0 / barrier.sync 0: the whole block at barrier 0; named barriers and counts are not.
        self._check_modifiers(ins, {"sync", "aligned"} if ins.opcode == "barrier" else {"sync"})
        if "sync" not in ins.modifiers:
            raise self.fail("only bar.sync / barrier.sync are supported yet")
        (barrier,) = self._operands(ins, 1)
        if type(barrier) is not ast.IntImm or barrier.value != 0:
            raise self.fail("only barrier 0 without a thread count is supported yet")
        if self.target.shared_address_space is None:
            raise self.fail(f"the {self.target.name} target runs threads one after another and cannot "
                            "wait at a barrier")
        self.target.barrier(self.builder)

    op_barrier = op_bar

    def op_call(self, ins):
        """`call (r…), f, (a…)`: a direct call; the operands name `.param` variables, passed by pointer."""
        self._check_modifiers(ins, {"uni"})
        operands = list(ins.operands)
        returns = operands.pop(0).items if operands and type(operands[0]) is ast.ArgList else ()
        if not operands or type(operands[0]) is not ast.Name:
            raise self.fail("only direct calls of a function by name are supported")
        name = operands.pop(0).name
        arguments = operands.pop(0).items if operands and type(operands[0]) is ast.ArgList else ()
        if operands:
            raise self.fail("indirect calls (with a prototype or a target list) are not supported yet")
        callee = self.callees.get(name)
        if callee is None:
            raise self.fail(f"{name} is not a .func defined in this module")
        function, declaration = callee
        if len(returns) != len(declaration.returns) or len(arguments) != len(declaration.params):
            raise self.fail(f"{name} takes {len(declaration.returns)} return and {len(declaration.params)} "
                            f"parameter value(s)")
        pointers = []
        for item in (*returns, *arguments):
            if type(item) is not ast.Name or self.variables.get(item.name, ("",))[0] != "param":
                raise self.fail(f"call operand {item} is not a .param variable")
            pointers.append(self.variables[item.name][1])
        context = list(self.function.args[:self.target.context_arguments])
        self.builder.call(function, context + pointers)

    def op_ret(self, ins):
        self._check_modifiers(ins, {"uni"})
        self._operands(ins, 0)
        self.builder.ret_void()
