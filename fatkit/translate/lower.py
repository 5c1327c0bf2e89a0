"""Lowering: one PTX kernel → an LLVM module (llvmlite IR) for a `Target`.

Every PTX register and every kernel parameter is an alloca (LLVM's SROA/mem2reg makes SSA of them);
labels start basic blocks; a guard `@p`/`@!p` becomes a conditional branch around its instruction.
Supported: mov; add/sub/mul(.lo/.hi/.wide)/mad(.lo/.hi/.wide) on integers; and/or/xor/not/shl/shr;
setp (integer and float compares, unordered ones included); selp; cvt between integer widths and between
integers and f32/f64 (.rn, .rzi/.rni/.rmi/.rpi); cvta(.to).global; ld/st .global and ld .param (scalars,
`[base+offset]`); add/sub/mul/fma/mad .rn on f32 and f64; bra; ret; %tid/%ntid/%ctaid/%nctaid.
Anything else raises `Unsupported` naming the instruction and its PTX line.
"""

from __future__ import annotations

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


def kernel_signature(kernel: ast.Function) -> KernelSignature:
    """CUDA's parameter-buffer layout: each parameter at the next multiple of its alignment."""
    params, offset = [], 0
    for param in kernel.params:
        size = ast.TYPE_SIZES.get(param.type)
        if param.array or param.vector or size is None or llvm_type(param.type) is None:
            raise Unsupported(kernel.name, f"parameter {param.name}", param.line or kernel.line,
                              "only scalar integer and floating-point parameters are supported")
        align = param.align or size
        offset = _align(offset, align)
        params.append(KernelParam(param.name, param.type, offset, size, align))
        offset += size
    return KernelSignature(kernel.name, tuple(params), offset)


def register_types(kernel: ast.Function) -> dict[str, str]:
    """PTX type of every register the kernel declares, `%r<4>` expanded to `%r0` … `%r3`."""
    registers: dict[str, str] = {}
    for variable in kernel.variables():
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


def lower_kernel(kernel: ast.Function, registers: dict[str, str], target: Target) -> LoweredKernel:
    """Lower one kernel into its own LLVM module; raises Unsupported for PTX outside the slice."""
    if kernel.body is None:
        raise Unsupported(kernel.name, ".entry", kernel.line, "a kernel declaration without a body")
    signature = kernel_signature(kernel)
    module = ir.Module(name=kernel.name)
    module.triple = target.triple
    module.data_layout = target.data_layout
    param_types = [llvm_type(p.type) for p in signature.params]
    function, builder, values = target.define_kernel(module, signature, param_types)
    _KernelLowering(kernel, signature, registers, target, function, builder, values).run()
    target.finish_module(module)
    return LoweredKernel(signature, str(module))


@dataclass
class _Slot:
    pointer: ir.Value
    type: ir.Type
    ptx_type: str


class _KernelLowering:
    def __init__(self, kernel, signature, registers, target, function, builder, values):
        self.kernel, self.target, self.function, self.builder = kernel, target, function, builder
        self.entry = builder.block
        self.registers: dict[str, _Slot] = {}
        for name, ptx_type in registers.items():
            self.registers[name] = _Slot(self._alloca(llvm_type(ptx_type), name), llvm_type(ptx_type), ptx_type)
        self.params: dict[str, _Slot] = {}
        for param, value in zip(signature.params, values):
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

    def _address(self, operand: ast.Operand, space: str) -> ir.Value:
        if type(operand) is not ast.Address or operand.base is None or operand.extra:
            raise self.fail("address operand must be [base] or [base+offset]")
        base, offset = operand.base, ir.Constant(I64, operand.offset)
        if space == "param":
            if base.name not in self.params:
                raise self.fail(f"{base.name} is not a parameter of this kernel")
            pointer = self.params[base.name].pointer
        else:
            integer = self.read(base, "u64")
            pointer = self.builder.inttoptr(integer, ir.PointerType(addrspace=self.target.global_address_space))
        return self.builder.gep(pointer, [offset], source_etype=I8)

    # ---------------------------------------------------------------------------------------- data movement

    def op_mov(self, ins):
        self._check_modifiers(ins, set())
        (t,) = self._types(ins, 1)
        d, a = self._operands(ins, 2)
        self.write(d, self.read(a, t), t)

    def op_ld(self, ins):
        space = self._space(ins)
        self._check_modifiers(ins, {space, "nc"} if space == "global" else {space})
        (t,) = self._types(ins, 1)
        d, a = self._operands(ins, 2)
        loaded = self.builder.load(self._address(a, space), typ=llvm_type(t), align=ast.TYPE_SIZES[t])
        self.write(d, loaded, t)

    def op_st(self, ins):
        space = self._space(ins)
        if space != "global":
            raise self.fail(f"st.{space} not supported yet")
        self._check_modifiers(ins, {space})
        (t,) = self._types(ins, 1)
        a, v = self._operands(ins, 2)
        self.builder.store(self.read(v, t), self._address(a, space), align=ast.TYPE_SIZES[t])

    def _space(self, ins) -> str:
        spaces = [m for m in ins.modifiers if m in ("global", "param")]
        if len(spaces) != 1:
            raise self.fail("only .global and .param state spaces are supported yet")
        return spaces[0]

    def op_cvta(self, ins):
        # Global addresses are the same numbers in the generic space on every target here.
        if "global" not in ins.modifiers:
            raise self.fail("only cvta(.to).global is supported yet")
        self._check_modifiers(ins, {"to", "global"})
        (t,) = self._types(ins, 1)
        d, a = self._operands(ins, 2)
        self.write(d, self.read(a, t), t)

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

    def op_ret(self, ins):
        self._check_modifiers(ins, {"uni"})
        self._operands(ins, 0)
        self.builder.ret_void()
