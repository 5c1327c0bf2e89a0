"""The core of lowering: one PTX kernel or `.func` body → llvmlite IR for a `Target`.

The body comes out of the passes (fatkit/translate/passes): flat, uniquely named, only `bra` guarded.
PTX registers (as the `storage` pass lists them) are SSA values: nothing takes a register's address, so a
read is the value last written in the same LLVM block, or the value the block receives, which `finish_ssa`
resolves once the function's control flow is complete: a phi where predecessors bring different values (an
on-the-fly SSA construction in the manner of Braun et al., with every block sealed at the end). Scalar kernel
parameters, `.local`/`.param` buffers and handler scratch stay allocas (their addresses are used); labels
start basic blocks; `@p bra` becomes a conditional branch.
`Lowering` walks the body and hands each instruction to the handler registered for its opcode (and, where
integer and floating-point forms are lowered apart, its type family) by the family modules beside this one:
`@handles("add", family="int")`. Handlers read operands with `read`, write registers with `write` and report
what they cannot lower with `raise lw.fail(why)`, which names the instruction, its PTX line and the kernel.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Callable

from llvmlite import ir

from fatkit.errors import FatkitError
from fatkit.translate.coverage import refusal
from fatkit.translate.lower import addresses, rounding
from fatkit.translate.lower.types import F16, F16X2, F32, F64, I1, I8, I16, I32, I64, I128
from fatkit.translate.passes import Storage
from fatkit.translate.ptx import ast
from fatkit.translate.targets.base import KernelParam, KernelSignature, Target, local_name

if TYPE_CHECKING:
    from fatkit.translate.lower.module import _Callees


class Unsupported(FatkitError):
    """A kernel uses PTX outside what lowering handles; `kernel`, `instruction` and `line` say where."""

    def __init__(self, kernel: str, what: str, line: int, why: str):
        super().__init__(f"{kernel}: line {line}: {what}: {why}")
        self.kernel, self.instruction, self.line, self.why = kernel, what, line, why


_INT_TYPES = {8: I8, 16: I16, 32: I32, 64: I64, 128: I128}  # 128: .b128 (ld/st/mov/atom only)
_FLOAT_TYPES = {16: F16, 32: F32, 64: F64}
# Formats LLVM has no portable type for (llvmlite lacks bfloat) live as their bits; lower/half.py and
# lower/convert.py compute on them through f32.
_BIT_TYPES = {"bf16": I16, "bf16x2": I32, "f16x2": F16X2, "tf32": I32, "e4m3x2": I16, "e5m2x2": I16}

_MANGLED = {I8: "i8", I16: "i16", I32: "i32", I64: "i64", I128: "i128", F16: "f16", F32: "f32", F64: "f64",
            F16X2: "v2f16"}


@lru_cache(maxsize=None)  # asked for every operand of every instruction
def llvm_type(ptx_type: str) -> ir.Type | None:
    """The LLVM type a PTX register or value of `ptx_type` lives in; None for types outside this slice."""
    if ptx_type == "pred":
        return I1
    if ptx_type in _BIT_TYPES:
        return _BIT_TYPES[ptx_type]
    kind, bits = ptx_type[0], ptx_type[1:]
    if not bits.isdigit():
        return None
    if kind in "bsu":
        return _INT_TYPES.get(int(bits))
    if kind == "f":
        return _FLOAT_TYPES.get(int(bits))
    return None


def _is_integer(ptx_type: str) -> bool:
    return ptx_type[0] in "bsu" and ptx_type[1:].isdigit()


def constant_bits(value: ir.Value) -> int | None:
    """The bits of an integer constant as an unsigned number, or None for any other value (LLVM simplifies what
    is known at lowering time too, but its InstCombine runs were most of the middle-end's time, so the
    resizes and shifts that PTX immediates feed are folded here)."""
    if type(value) is not ir.Constant or not isinstance(value.type, ir.IntType) or type(value.constant) is not int:
        return None
    return value.constant & ((1 << value.type.width) - 1)


def int_resized(builder: ir.IRBuilder, value: ir.Value, ty: ir.IntType, signed: bool) -> ir.Value:
    """`value` (an integer) zero- or sign-extended or truncated to `ty`; a constant stays a constant."""
    width = value.type.width
    if width == ty.width:
        return value
    bits = constant_bits(value)
    if bits is not None:
        if signed and width < ty.width and bits >> (width - 1):
            bits -= 1 << width
        return ir.Constant(ty, bits & ((1 << ty.width) - 1))
    if width > ty.width:
        return builder.trunc(value, ty)
    return (builder.sext if signed else builder.zext)(value, ty)


def align_up(offset: int, alignment: int) -> int:
    return (offset + alignment - 1) // alignment * alignment


def array_size(variable: ast.Variable, element: int) -> int | None:
    """Bytes of an array variable with every dimension given; None for `[]`."""
    size = element
    for dimension in variable.array:
        if dimension is None:
            return None
        size *= dimension
    return size


# The hidden parameter after CUDA's parameter buffer of a kernel whose cluster shape the launch gives
# (lower/cluster.py, docs/runtime.md): four u32, the cluster's x, y, z CTAs and 1 where the launch gave them.
CLUSTER_SHAPE_PARAM = "__fatkit_cluster_shape"


def launch_given_cluster(kernel: ast.Function) -> bool:
    """Whether the kernel's clusters may hold several CTAs of a shape only the launch gives: `.explicitcluster`
    or `.maxclusterrank` above 1, without `.reqnctapercluster` (`.explicitcluster .maxclusterrank 1`: clusters of
    one CTA, explicit ones)."""
    declared = {d.name: tuple(d.values) for d in kernel.directives}
    if "reqnctapercluster" in declared:
        return False
    rank = declared.get("maxclusterrank")
    return rank[0] > 1 if rank else "explicitcluster" in declared


def kernel_signature(kernel: ast.Function) -> KernelSignature:
    """CUDA's parameter-buffer layout: each parameter at the next multiple of its alignment (then, for a
    launch-given cluster shape, CLUSTER_SHAPE_PARAM at the next multiple of 4)."""
    params, offset = [], 0
    for param in kernel.params:
        element = ast.TYPE_SIZES.get(param.type)
        size = element if element is None or not param.array else array_size(param, element)
        if param.vector or size is None or llvm_type(param.type) is None:
            raise Unsupported(kernel.name, f"parameter {param.name}", param.line or kernel.line,
                              "only scalar integer/floating-point and sized array parameters are supported")
        align = param.align or element
        offset = align_up(offset, align)
        # a .b128 scalar is passed like an array (by reference, 16-aligned): LLVM aligns i128 arguments to 8
        array = bool(param.array) or param.type == "b128"
        params.append(KernelParam(param.name, param.type, offset, size, align, array=array))
        offset += size
    if launch_given_cluster(kernel):
        offset = align_up(offset, 4)
        params.append(KernelParam(CLUSTER_SHAPE_PARAM, "b32", offset, 16, 4, array=True))
        offset += 16
    return KernelSignature(kernel.name, tuple(params), offset)


Handler = Callable[["Lowering", ast.Instruction], None]
# (opcode, family) → handler; family None serves every type, "int"/"float"/"half" split an opcode by type.
HANDLERS: dict[tuple[str, str | None], Handler] = {}


def handles(*opcodes: str, family: str | None = None) -> Callable[[Handler], Handler]:
    """Register the decorated function as the lowering of `opcodes` (of one type family, if given)."""
    def register(handler: Handler) -> Handler:
        for opcode in opcodes:
            if (opcode, family) in HANDLERS:
                raise RuntimeError(f"two lowerings of {opcode} ({family})")
            HANDLERS[opcode, family] = handler
        return handler
    return register


SpecialReader = Callable[["Lowering", ast.Name], tuple[ir.Value, str]]
# Special register name (`%tid`, `%laneid`, `%envreg3`) → its reader: the value and its PTX type (u32/u64).
SPECIAL_REGISTERS: dict[str, SpecialReader] = {}


def reads_special(*names: str) -> Callable[[SpecialReader], SpecialReader]:
    """Register the decorated function as the reader of the special registers `names`."""
    def register(reader: SpecialReader) -> SpecialReader:
        for name in names:
            if name in SPECIAL_REGISTERS:
                raise RuntimeError(f"two readers of {name}")
            SPECIAL_REGISTERS[name] = reader
        return reader
    return register


def type_family(ins: ast.Instruction) -> str:
    """The family of the instruction's first type: "half" (f16, bf16 and their x2 pairs), "float" (f32, f64)
    or "int" (everything else, and instructions without a type)."""
    for modifier in ins.modifiers:
        if modifier in ast.TYPES:
            if modifier.startswith(("f16", "bf16")):
                return "half"
            return "float" if modifier[0] == "f" else "int"
    return "int"


class _StackAlloca(ir.instructions.AllocaInstr):
    """`alloca` in the target's stack address space (5 on AMDGPU), which llvmlite's builder cannot express."""

    def __init__(self, parent, allocated: ir.Type, address_space: int, name: str, count: ir.Value | None = None):
        super().__init__(parent, allocated, count, name)
        self.type = ir.PointerType(addrspace=address_space)
        self.address_space = address_space

    def descr(self, buf):
        super().descr(buf)
        if self.address_space:
            buf.append(f", addrspace({self.address_space})")



@dataclass(frozen=True)
class SharedWindow:
    """The host's shared memory: one global; a variable's shared address is its offset in it."""

    base: ir.GlobalVariable
    offsets: dict[str, int]


@dataclass
class _Slot:
    pointer: ir.Value
    type: ir.Type
    ptx_type: str


@dataclass(frozen=True)
class _Register:
    """A PTX register: an SSA value of `type` in each block (`Lowering.load_register`/`write`)."""

    name: str
    type: ir.Type
    ptx_type: str


class _Incoming(ir.values.Value):
    """The value register `register` has on entry to `block`, before the function's control flow is known:
    `finish_ssa` points it at the predecessor's value, a phi, or undef. Its text is that of the value it
    stands for, so instructions that use it need no rewriting."""

    # (one per register live into each block, 129,375 in _linalg: no dict, and no list until a candidate)
    __slots__ = ("block", "register", "type", "value", "edges")

    def __init__(self, block: ir.Block, register: _Register):
        self.block, self.register, self.type = block, register, register.type
        self.value: ir.Value | None = None  # what it stands for, once known
        # while a phi candidate: a value per incoming edge
        self.edges: list[tuple[ir.Value, ir.Block]] | tuple[()] = ()

    def resolved(self) -> ir.Value:
        """The value at the end of the chain; an unresolved _Incoming (a phi candidate) while resolving."""
        value: ir.Value = self
        while type(value) is _Incoming and value.value is not None:
            value = value.value
        return value

    def get_reference(self) -> str:
        return self.resolved().get_reference()

    def __str__(self) -> str:
        return str(self.resolved())


class Lowering:
    """Lowers the body of a kernel or of a `.func` (then its parameters are all pointers, `array`, and its
    last argument points to the caller's stop flag: an i8 set when the thread ended inside the call by
    `exit` or `trap`). `storage` (the `storage` pass) lists its registers and local/param buffers."""

    def __init__(self, kernel: ast.Function, params: list[KernelParam], storage: Storage,
                 target: Target, function: ir.Function, builder: ir.IRBuilder, values: list[ir.Value],
                 memory: dict[str, tuple[str, ir.Value]], callees: _Callees):
        self.kernel, self.target, self.function, self.builder = kernel, target, function, builder
        self.callees = callees  # module._Callees: the called .func functions and the host's shared window
        self.entry = builder.block
        self.slots: dict[str, ir.Value] = {}
        self.leading_allocas = 0  # the allocas `alloca` has put at the start of the entry block
        # The kernel's memory variables: name → (state space, pointer).
        self.variables: dict[str, tuple[str, ir.Value]] = dict(memory)
        if callees.cluster is not None:  # a CTA of a cluster: its own slice of the .shared variables
            self.variables.update(callees.cluster.own_variables(self, memory))
        for buffer in storage.buffers:
            pointer = self.alloca(ir.ArrayType(I8, buffer.size), buffer.name)
            pointer.align = buffer.align
            self.variables[buffer.name] = (buffer.space, pointer)
        self.registers: dict[str, _Register] = {}
        for name, ptx_type in storage.registers.items():
            if llvm_type(ptx_type) is None:
                line = next((v.line for v in kernel.variables() if v.name == name), kernel.line)
                raise Unsupported(kernel.name, f".reg .{ptx_type} {name}", line,
                                  f"registers of type .{ptx_type} are not supported yet")
            self.registers[name] = _Register(name, llvm_type(ptx_type), ptx_type)
        # block → register name → its value at the current end of the block (what the block wrote last, or
        # the _Incoming that stands for what it received); the blocks of this function only
        self._values: dict[ir.Block, dict[str, ir.Value]] = {}
        self._incoming: list[_Incoming] = []  # made while lowering, resolved by finish_ssa
        self._pointers: list[addresses.PointerAt] = []  # addresses made pointers, GEPs where they can be
        if kernel.is_kernel:
            self.stop_flag = self.alloca(I8, "stopped")
            builder.store(ir.Constant(I8, 0), self.stop_flag)
        else:
            self.stop_flag = function.args[-1]
        self.params: dict[str, _Slot] = {}
        for param, value in zip(params, values):
            if param.array:  # already a pointer to the parameter's bytes
                self.params[param.name] = _Slot(value, value.type, param.type)
                continue
            slot = self.alloca(value.type, param.name)
            builder.store(value, slot, align=param.align)
            self.params[param.name] = _Slot(slot, value.type, param.type)
        self.labels = {s.name: function.append_basic_block(local_name(s.name.lstrip("$")))
                       for s in kernel.statements() if type(s) is ast.Label}
        self.ins: ast.Instruction | None = None
        # ids of instructions an earlier one has carried out (an mma storing its D itself: lower/mma_direct.py)
        self.replaced: set[int] = set()

    def alloca(self, llvm_ty: ir.Type, name: str) -> ir.Value:
        """Stack memory among the allocas that open the entry block (so that a loop does not grow the stack)."""
        instruction = _StackAlloca(self.entry, llvm_ty, self.target.stack_address_space, local_name(name))
        position = self.leading_allocas
        self.entry.instructions.insert(position, instruction)
        self.leading_allocas += 1
        if self.builder.block is self.entry and self.builder._anchor >= position:
            self.builder._anchor += 1  # the builder inserts at an index; keep it after the new alloca
        return instruction

    def dynamic_alloca(self, size: ir.Value, align: int) -> ir.Value:
        """`size` bytes of stack at the current point (PTX `alloca`), living until the function returns."""
        instruction = _StackAlloca(self.builder.block, I8, self.target.stack_address_space, "alloca", size)
        instruction.align = align
        self.builder._insert(instruction)
        return instruction

    def subroutine(self, name: str, arguments: list[ir.Value], results: list[ir.Type],
                   body: Callable[[list[ir.Value]], list[ir.Value]]) -> list[ir.Value]:
        """`body(arguments)` computed by a call of the internal function `name`, defined at its first use in
        the module: a large expansion that recurs (the mma emulation, hundreds of times in a CUTLASS kernel)
        is compiled once instead of at every use. Like a lowered .func, the function takes the target's
        context arguments first, so the lane interface and special registers work inside; it is convergent,
        since its lanes exchange values."""
        module = self.builder.module
        context = list(self.function.args[:self.target.context_arguments])
        function = module.globals.get(name)
        if function is None:
            result = ir.LiteralStructType(results)
            function = ir.Function(module, ir.FunctionType(result, [a.type for a in context + arguments]), name)
            function.linkage = "internal"
            function.attributes.add("convergent")
            caller = (self.function, self.builder, self.entry, self.leading_allocas, self.slots)
            self.function, self.builder = function, ir.IRBuilder(function.append_basic_block("entry"))
            self.entry, self.leading_allocas, self.slots = self.builder.block, 0, {}
            try:
                aggregate = ir.Constant(result, ir.Undefined)
                for index, value in enumerate(body(list(function.args[len(context):]))):
                    aggregate = self.builder.insert_value(aggregate, value, index)
                self.builder.ret(aggregate)
            finally:
                self.function, self.builder, self.entry, self.leading_allocas, self.slots = caller
        returned = self.builder.call(function, context + arguments)
        return [self.builder.extract_value(returned, index) for index in range(len(results))]

    def slot(self, key: str, llvm_ty: ir.Type) -> ir.Value:
        """A per-function stack slot made on first use (the carry flag of `.cc` chains, scratch buffers)."""
        if key not in self.slots:
            self.slots[key] = self.alloca(llvm_ty, key)
        return self.slots[key]

    # ---------------------------------------------------------------------------------------- driver

    def run(self) -> None:
        self._receive_register_params()
        for statement in self.kernel.statements():
            kind = type(statement)
            if kind is ast.Label:
                self.start(self.labels[statement.name])
            elif kind is ast.Instruction:
                if id(statement) in self.replaced:
                    continue  # carried out by an earlier instruction
                self.ins = statement
                self._instruction(statement)
            elif kind in (ast.Pragma, ast.Loc, ast.Block, ast.Variable, ast.CallPrototype, ast.TargetList):
                continue  # hints, debug lines, scopes and declarations (registers, call/branch signatures)
            else:
                raise Unsupported(self.kernel.name, kind.__name__, getattr(statement, "line", 0),
                                  "statement not supported yet")
        if not self.builder.block.is_terminated:
            self.return_()
        self.finish_ssa()
        addresses.finish(self._pointers, _resolved)

    def finish_ssa(self) -> None:
        """Resolve every block's incoming register values now that the control flow is complete: no
        predecessor (the entry, unreachable code): undef, as an unwritten register; one predecessor block:
        its value at the end; several: a phi of theirs (one entry per edge, as LLVM wants), unless all its
        entries are one value (or the phi itself, around a loop): then that value."""
        predecessors: dict[ir.Block, list[ir.Block]] = {block: [] for block in self.function.blocks}
        for block in self.function.blocks:
            for successor in _successors(block.terminator):
                predecessors[successor].append(block)
        # the one block every edge into a block comes from, where there is one
        sole = {block: edges[0] if edges and all(edge is edges[0] for edge in edges) else None
                for block, edges in predecessors.items()}
        undefined: dict[str, ir.Value] = {}
        candidates: list[_Incoming] = []
        read, self._incoming = self._incoming, []
        pending, values_of = list(read), self._values
        # (a register live through many blocks makes an _Incoming in each: this loop is lowering's hottest,
        # so what a helper would do is written out)
        while pending:
            incoming = pending.pop()
            register, block = incoming.register, incoming.block
            edges = predecessors.get(block)
            if edges is None:
                raise FatkitError(f"internal: {register.name} read in a block outside {self.function.name}")
            one = sole[block]
            if one is not None:
                values = values_of.get(one)
                if values is None:
                    values = values_of[one] = {}
                value = values.get(register.name)
                if value is None:
                    value = values[register.name] = _Incoming(one, register)
                    pending.append(value)
                incoming.value = value
            elif not edges:
                incoming.value = undefined.setdefault(register.name, ir.Constant(register.type, ir.Undefined))
            else:  # a value per edge: what the predecessor wrote last, or what it received (to resolve)
                name, merged = register.name, []
                for edge in edges:
                    values = values_of.get(edge)
                    if values is None:
                        values = values_of[edge] = {}
                    value = values.get(name)
                    if value is None:
                        value = values[name] = _Incoming(edge, register)
                        pending.append(value)
                    merged.append((value, edge))
                incoming.edges = merged
                candidates.append(incoming)
        changed = True
        while changed:  # a candidate merging one value is that value; each such may make others so
            changed, kept = False, []
            for incoming in candidates:
                merged = None
                for value, _ in incoming.edges:
                    resolved = value.resolved() if type(value) is _Incoming else value
                    if resolved is incoming or resolved is merged:
                        continue
                    if merged is not None:
                        kept.append(incoming)
                        break
                    merged = resolved
                else:
                    incoming.value = merged if merged is not None else undefined.setdefault(
                        incoming.register.name, ir.Constant(incoming.type, ir.Undefined))
                    incoming.edges = ()
                    changed = True
            candidates = kept
        phis: dict[ir.Block, list[ir.Instruction]] = {}
        for incoming in candidates:
            phi = ir.instructions.PhiInstr(incoming.block, incoming.type, "")
            phi.incomings = incoming.edges
            incoming.value, incoming.edges = phi, ()
            phis.setdefault(incoming.block, []).append(phi)
        for block, placed in phis.items():
            block.instructions[0:0] = placed
            for phi in placed:  # the values themselves, as the text writes them
                phi.incomings = [(value.resolved() if type(value) is _Incoming else value, edge)
                                 for value, edge in phi.incomings]
        for incoming in read:  # what instructions use: shorten the chains the text is written through
            incoming.value = incoming.resolved()

    def _receive_register_params(self) -> None:
        """`.reg` parameters of a `.func` arrive, like all, as pointers to the caller's bytes: copied in."""
        for param in self.kernel.params:
            if param.state_space == "reg":
                register = self.registers[param.name]
                self._define(register, self.builder.load(self.params[param.name].pointer, typ=register.type))

    def return_(self) -> None:
        """Return normally: a `.func` first copies its `.reg` return values out to the caller's bytes."""
        for result in self.kernel.returns:
            if result.state_space == "reg":
                self.builder.store(self._current(self.registers[result.name]), self.params[result.name].pointer)
        self.builder.ret_void()

    def stop_thread(self) -> None:
        """End the thread (`exit`, or after a trap): a `.func` sets its caller's stop flag, which every caller
        up to the kernel checks after the call."""
        if not self.kernel.is_kernel:
            self.builder.store(ir.Constant(I8, 1), self.stop_flag)
        self.builder.ret_void()

    def float_mode(self, ins: ast.Instruction):
        """The instruction's rounding, ftz and saturation with PTX's defaults (passes.FloatMode), or None
        when it does no floating-point arithmetic or the body did not go through the passes."""
        return self.callees.prepared.float_mode(ins) if self.callees.prepared is not None else None

    @property
    def flushing(self) -> bool:
        """The function runs with f32 subnormals flushed by the hardware (every f32 instruction its kernel
        reaches is .ftz, pass 6, and the target has the mode: Target.flushing_mode)."""
        return self.callees.flushing

    def flush(self, value: ir.Value) -> ir.Value:
        """.ftz of an f32 or f64 value: a subnormal becomes a zero of its sign. Under the flushing mode an
        f32's is llvm.canonicalize, which flushes there (v_max x, x) and which LLVM drops after an
        instruction that flushed already; it quiets a signalling NaN too, which no .ftz form keeps."""
        if self.flushing and value.type == F32:
            return self.intrinsic("llvm.canonicalize", [value])
        return rounding.flush(self.builder, value)

    def start(self, block: ir.Block) -> None:
        """Continue in `block`, falling through into it from the current block."""
        if not self.builder.block.is_terminated:
            self.builder.branch(block)
        self.builder.position_at_end(block)

    def fail(self, why: str) -> Unsupported:
        return Unsupported(self.kernel.name, self.ins.name, self.ins.line, why)

    def _instruction(self, ins: ast.Instruction) -> None:
        refused = refusal(ins.opcode, ins.modifiers)  # forms the coverage table does not translate, and why
        if refused is not None:
            raise self.fail(refused)
        handler = HANDLERS.get((ins.opcode, type_family(ins))) or HANDLERS.get((ins.opcode, None))
        if handler is None:
            raise self.fail("instruction not supported yet")
        if self.builder.block.is_terminated:  # code after bra/ret without a label: unreachable
            self.builder.position_at_end(self.function.append_basic_block("dead"))
        if ins.guard is None:
            handler(self, ins)
            return
        if ins.opcode != "bra":  # the guards pass turned every other guard into a branch
            raise self.fail("a guarded instruction other than bra (the body has not been through the passes)")
        predicate = self.load_register(ins.guard.register, "pred")
        if ins.guard.negated:
            predicate = self.builder.not_(predicate)
        following = self.function.append_basic_block("next")
        self.builder.cbranch(predicate, self.label(ins.operands[0]), following)
        self.builder.position_at_end(following)

    # ---------------------------------------------------------------------------------------- operands

    def types(self, ins: ast.Instruction, count: int) -> list[str]:
        types = [m for m in ins.modifiers if m in ast.TYPES]
        if len(types) != count:
            raise self.fail(f"expected {count} type modifier(s)")
        for t in types:
            if llvm_type(t) is None:
                raise self.fail(f"type .{t} not supported yet")
        return types

    def check_modifiers(self, ins: ast.Instruction, allowed: set[str]) -> None:
        extra = [m for m in ins.modifiers if m not in allowed and m not in ast.TYPES]
        if extra:
            raise self.fail(f"modifier .{extra[0]} not supported yet")

    def operands(self, ins: ast.Instruction, count: int) -> tuple[ast.Operand, ...]:
        if len(ins.operands) != count:
            raise self.fail(f"expected {count} operands, found {len(ins.operands)}")
        return ins.operands

    def register(self, operand: ast.Operand) -> _Register:
        if type(operand) is not ast.Name or operand.component is not None or operand.name not in self.registers:
            raise self.fail(f"operand {operand} is not a declared scalar register")
        return self.registers[operand.name]

    def load_register(self, name: str, ptx_type: str) -> ir.Value:
        if name not in self.registers:
            raise self.fail(f"{name} is not a declared register")
        register = self.registers[name]
        return self.convert(self._current(register), register.ptx_type, ptx_type)

    def _current(self, register: _Register) -> ir.Value:
        """The register's value at the builder's position: written earlier in this block, or received."""
        block = self.builder.block
        if block.parent is not self.function:
            raise FatkitError(f"internal: register {register.name} read outside the function being lowered")
        values = self._values.setdefault(block, {})
        value = values.get(register.name)
        if value is None:
            value = values[register.name] = _Incoming(block, register)
            self._incoming.append(value)
        return value

    def _define(self, register: _Register, value: ir.Value) -> None:
        block = self.builder.block
        if block.parent is not self.function:
            raise FatkitError(f"internal: register {register.name} written outside the function being lowered")
        self._values.setdefault(block, {})[register.name] = value

    def convert(self, value: ir.Value, have: str, want: str) -> ir.Value:
        """A register of PTX type `have` read or written as `want`: same size → bits; else resize by sign."""
        source, target = llvm_type(have), llvm_type(want)
        if source == target:
            return value
        if bool(source == I1) != bool(target == I1):  # (llvmlite's vector types answer None to ==)
            raise self.fail(f"a .{have} register used as .{want}")
        if ast.TYPE_SIZES[have] == ast.TYPE_SIZES[want]:
            return self.builder.bitcast(value, target)
        if not (_is_integer(have) and _is_integer(want)):
            raise self.fail(f"a .{have} register used as .{want}")
        return int_resized(self.builder, value, target, have[0] == "s")

    def read(self, operand: ast.Operand, ptx_type: str) -> ir.Value:
        """A source operand as a value of `ptx_type`."""
        ty, kind = llvm_type(ptx_type), type(operand)
        if kind is ast.IntImm and ty == I1:  # the operands pass made .pred immediates 0 or 1
            return ir.Constant(I1, operand.value != 0)
        if kind is ast.IntImm and ty != I1:
            if isinstance(ty, ir.IntType):
                return ir.Constant(ty, operand.value & ((1 << ty.width) - 1))
            return ir.Constant(ty, float(operand.value))
        if kind is ast.FloatImm:
            if ty in (F32, F64):
                value = ast.FloatImm(operand.bits, operand.width).value
                return ir.Constant(ty, value)
            if ty == F16:  # only literals that f16 holds exactly: PTX has no f16 literal to round
                value = ast.FloatImm(operand.bits, operand.width).value
                if math.isfinite(value) and abs(value) <= 65504 and struct.unpack("<e", struct.pack("<e", value))[0] == value:
                    return ir.Constant(ty, value)
                raise self.fail(f"float literal {value!r} used as .f16 is not exactly an f16 value")
            if isinstance(ty, ir.IntType) and ty.width == operand.width:
                return ir.Constant(ty, operand.bits)
            raise self.fail(f"a {operand.width}-bit float literal used as .{ptx_type}")
        if kind is ast.Name and operand.name in SPECIAL_REGISTERS:
            value, natural = SPECIAL_REGISTERS[operand.name](self, operand)
            return self.convert(value, natural, ptx_type)
        window = self.callees.window
        if kind is ast.Name and operand.component is None and window and operand.name in window.offsets:
            offset = ir.Constant(ty, window.offsets[operand.name])  # its shared address: an offset
            return offset if self.callees.cluster is None else self.callees.cluster.own_offset(self, operand.name, offset)
        if kind is ast.Name and operand.component is None and operand.name in self.variables:
            return self.builder.ptrtoint(self.variables[operand.name][1], ty)  # its address in its space
        if kind is ast.Name and operand.component is None and operand.name in self.params \
                and operand.name not in self.registers:  # (a .reg parameter of a .func is read as a register)
            # a parameter's address (`mov.u64 %rd, param`): generic here, so that ld.param through a register
            # and cvta.param need no space of their own
            pointer = self.params[operand.name].pointer
            if pointer.type.addrspace:
                pointer = self.builder.addrspacecast(pointer, ir.PointerType())
            return self.builder.ptrtoint(pointer, ty)
        if kind is ast.Name and operand.component is None and operand.name in self.callees.functions:
            return self.builder.ptrtoint(self.callees.get(operand.name)[0], ty)  # a function's address
        if kind is ast.Name and operand.is_special_register:
            raise self.fail(f"special register {operand.name} not supported yet")
        if kind is ast.Name and operand.component is None and operand.name in self.registers:
            return self.load_register(operand.name, ptx_type)
        raise self.fail(f"operand {operand} not supported yet")

    def write(self, operand: ast.Operand, value: ir.Value, ptx_type: str) -> None:
        register = self.register(operand)
        self._define(register, self.convert(value, ptx_type, register.ptx_type))

    def intrinsic(self, name: str, args: list[ir.Value], result: ir.Type | None = None) -> ir.Value:
        """Call an overloaded LLVM intrinsic; the overload is the result type (if it differs) and the
        first argument's type, as for llvm.fma/floor/fptosi.sat."""
        overloads = ([result] if result is not None else []) + [args[0].type]
        full = name + "".join("." + _MANGLED[t] for t in overloads)
        module = self.builder.module
        function = module.globals.get(full) or ir.Function(
            module, ir.FunctionType(result or args[0].type, [a.type for a in args]), full)
        return self.builder.call(function, args)

    def label(self, operand: ast.Operand) -> ir.Block:
        if type(operand) is not ast.Name or operand.name not in self.labels:
            raise self.fail(f"branch target {operand} is not a label of this kernel")
        return self.labels[operand.name]

    def address_space(self, space: str) -> int:
        spaces = {"global": self.target.global_address_space, "shared": self.target.shared_address_space,
                  "local": self.target.stack_address_space, "const": self.target.constant_address_space,
                  "generic": 0, "param": 0}  # parameter addresses in registers are generic (see `read`)
        if spaces[space] is None:
            raise self.fail(f"the {self.target.name} target has no .{space} memory")
        return spaces[space]

    def address(self, operand: ast.Operand, space: str) -> ir.Value:
        """A pointer for `[base+offset]`: base a parameter, a variable of this kernel or a register holding
        an address of `space` (32-bit offsets for .shared/.local on AMDGPU, inttoptr truncates to them)."""
        if type(operand) is not ast.Address or operand.base is None or operand.extra:
            raise self.fail("address operand must be [base] or [base+offset]")
        base = operand.base
        if space == "param" and base.name in self.params:
            pointer = self.params[base.name].pointer
        elif base.name in self.variables:
            variable_space, pointer = self.variables[base.name]
            if variable_space != space:
                raise self.fail(f"{base.name} is a .{variable_space} variable, accessed as .{space}")
        elif space == "shared" and self.callees.window:
            pointer = self.builder.gep(self.callees.window.base, [self.read(base, "u32")], source_etype=I8)
        else:
            pointer = self.pointer(self.read(base, "u64"), self.address_space(space))
        if not operand.offset:  # (LLVM folds a GEP by 0 away, after parsing and keeping it a while)
            return pointer
        return self.builder.gep(pointer, [ir.Constant(I64, operand.offset)], source_etype=I8)

    def pointer(self, integer: ir.Value, address_space: int) -> ir.Value:
        """A pointer of `address_space` to the address `integer` holds (truncated to the pointer's width):
        a GEP from the pointer it was computed from where that shows (lower/addresses.py), else inttoptr."""
        bits = addresses.pointer_bits(self.target.data_layout, address_space)
        if integer.type.width > bits and isinstance(integer, ir.CastInstr) and integer.opname in ("zext", "sext") \
                and integer.operands[0].type.width == bits:
            integer = integer.operands[0]  # a 32-bit address read as u64: the register itself
        pointer = addresses.pointer_at(self.builder, integer, address_space, bits)
        self._pointers.append(pointer)
        return pointer


def _resolved(value: ir.Value) -> ir.Value:
    return value.resolved() if type(value) is _Incoming else value


def _successors(terminator: ir.Instruction | None) -> list[ir.Block]:
    """The blocks a terminator may go to, one per edge (a block named twice is two edges)."""
    if terminator is None:
        return []
    kind = type(terminator)
    if kind is ir.instructions.SwitchInstr:
        return [terminator.default] + [block for _, block in terminator.cases]
    if kind is ir.instructions.IndirectBranch:
        return list(terminator.destinations)
    return [operand for operand in terminator.operands if isinstance(operand, ir.Block)]
