"""The `nvptx` verification target: fatkit's lowered IR compiled back to PTX by LLVM's NVPTX backend.

Not a product: the re-lowered PTX runs on an NVIDIA GPU beside the original, and any difference in results
is a bug in parse, passes or lowering ([4/8]'s differential harness). Names: `sm_90` (or any `sm_XX` LLVM
knows). Kernels use the `ptx_kernel` calling convention with one `.param` per PTX parameter of the same
size and alignment, so the re-lowered kernel launches with the original's parameter buffer; an array
parameter (a by-value struct) is a `byval([N x i8]) align A` pointer, which NVPTX declares as
`.param .align A .b8 name[N]` exactly as nvcc does. Allocas live in the generic address space (NVPTX
moves them to .local itself), `.shared` variables in address space 3, `bar.sync 0` is the CTA barrier.
"""

from __future__ import annotations

import re
from functools import cached_property

from llvmlite import binding as llvm
from llvmlite import ir

from fatkit.errors import FatkitError, UsageError
from fatkit.translate.ptx import parse_ptx
from fatkit.translate.ptx.errors import PtxSyntaxError
from fatkit.translate.targets.base import LaneExchange, LoweredKernel, PointerTo, Target, Unavailable

TRIPLE = "nvptx64-nvidia-cuda"
PTX_FEATURE = "+ptx80"  # PTX ISA 8.0: what ptxas 12.0+ reads, enough for sm_90
_SREG = {"%tid": "tid", "%ntid": "ntid", "%ctaid": "ctaid", "%nctaid": "nctaid"}
# Machine registers (`Target.machine_register`) and the widths NVVM reads them at.
_MACHINE_REGISTERS = {"%clock64": ("clock64", 64), "%globaltimer": ("globaltimer", 64), "%smid": ("smid", 32),
                      "%nsmid": ("nsmid", 32), "%gridid": ("gridid", 64)}


def is_nvptx_target(name: str) -> bool:
    return re.fullmatch(r"sm_\d+[af]?", name) is not None


class NvptxTarget(Target):
    triple = TRIPLE
    global_address_space = 1
    constant_address_space = 4
    shared_address_space = 3

    def __init__(self, arch: str) -> None:
        if not is_nvptx_target(arch):
            raise UsageError(f"unknown NVIDIA target {arch!r} (expected sm_XX, e.g. sm_90)")
        self.arch = self.name = arch

    @cached_property
    def _machine(self) -> llvm.TargetMachine:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        return llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=self.arch, features=PTX_FEATURE, opt=2)

    @property
    def data_layout(self) -> str:
        return str(self._machine.target_data)

    def define_kernel(self, module, signature, param_types):
        types = [PointerTo(t) if isinstance(t, ir.ArrayType) else t for t in param_types]
        function = ir.Function(module, ir.FunctionType(ir.VoidType(), types), signature.name)
        function.calling_convention = "ptx_kernel"
        for argument, param in zip(function.args, signature.params):
            argument.name = param.name
            if param.array:
                argument.add_attribute("byval")
                argument.attributes.align = param.align
        builder = ir.IRBuilder(function.append_basic_block("entry"))
        return function, builder, list(function.args)

    def special_register(self, builder, register, component):
        name = f"llvm.nvvm.read.ptx.sreg.{_SREG[register]}.{component}"
        return builder.call(_function(builder.module, name, ir.IntType(32), ()), [])

    def barrier(self, builder):
        # bar.sync 0 (LLVM upgrades the name to its current spelling)
        builder.call(_function(builder.module, "llvm.nvvm.barrier0", ir.VoidType(), ()), [])

    def approximate(self, builder, function, value):
        # The PTX instruction itself (inline assembly): the re-lowered kernel then computes exactly what
        # the original does, so the differential harness compares bit for bit.
        f32 = value.type
        instruction = ir.InlineAsm(ir.FunctionType(f32, [f32]), f"{function}.approx.f32 $0, $1;", "=f,f")
        return builder.call(instruction, [value])

    # The hardware-lane interface, natively: a wave is a 32-thread warp whose lanes may run apart (Volta's
    # independent scheduling), so exchanges and ballots are the .sync instructions over the members.
    wave_size = 32

    def lane_id(self, builder):
        return builder.call(_function(builder.module, "llvm.nvvm.read.ptx.sreg.laneid", ir.IntType(32), ()), [])

    def exchange(self, builder, value, members):
        return _WarpExchange(value, members)

    def ballot(self, builder, predicate, members):
        i32 = ir.IntType(32)
        ballot = _function(builder.module, "llvm.nvvm.vote.ballot.sync", i32, (i32, ir.IntType(1)))
        return builder.call(ballot, [members, predicate]), members

    def active_lanes(self, builder):
        return builder.call(_function(builder.module, "llvm.nvvm.activemask", ir.IntType(32), ()), [])

    def wave_barrier(self, builder, members):
        i32 = ir.IntType(32)
        builder.call(_function(builder.module, "llvm.nvvm.bar.warp.sync", ir.VoidType(), (i32,)), [members])

    def machine_register(self, builder, register):
        if register not in _MACHINE_REGISTERS:
            raise Unavailable(f"the {self.name} target does not provide {register}")
        name, width = _MACHINE_REGISTERS[register]
        return builder.call(_function(builder.module, f"llvm.nvvm.read.ptx.sreg.{name}", ir.IntType(width), ()), [])

    def codegen(self, kernels: list[LoweredKernel], opt_level: int) -> bytes:
        """PTX text of all kernels. In this process: NVPTX codegen is mature and its fatal errors are a bug
        we want to see, and this target only runs in verification."""
        module = llvm.parse_assembly(kernels[0].llvm_ir)
        for kernel in kernels[1:]:
            module.link_in(llvm.parse_assembly(kernel.llvm_ir))
        module.verify()
        if opt_level:
            tuning = llvm.create_pipeline_tuning_options(speed_level=opt_level)
            builder = llvm.create_pass_builder(self._machine, tuning)
            builder.getModulePassManager().run(module, builder)
        return self._machine.emit_assembly(module).encode()

    def validate(self, product: bytes, kernels: list[LoweredKernel]):
        """Re-read the PTX: every kernel present as an .entry with CUDA's parameter sizes and alignments."""
        try:
            module = parse_ptx(product.decode())
        except PtxSyntaxError as error:
            raise FatkitError(f"the produced PTX does not parse: {error}") from error
        entries = {f.name: f for f in module.kernels}
        for kernel in kernels:
            signature = kernel.signature
            entry = entries.get(signature.name)
            if entry is None:
                raise FatkitError(f"the produced PTX lacks kernel {signature.name}")
            produced = [(p.size_bytes, p.align or p.element_size) for p in entry.params]
            expected = [(p.size, p.align) for p in signature.params]
            if produced != expected:
                raise FatkitError(f"{signature.name}: parameters {produced} differ from CUDA's layout {expected}")
        return module


class _WarpExchange(LaneExchange):
    """A value read across the warp with shfl.sync.idx over the members (64-bit values as two halves)."""

    def __init__(self, value: ir.Value, members: ir.Value):
        self.value, self.lanes, self.uniform_lanes = value, members, members

    def read(self, builder, lane, uniform):
        i32 = ir.IntType(32)
        shuffle = _function(builder.module, "llvm.nvvm.shfl.sync.idx.i32", i32, (i32, i32, i32, i32))
        every_lane = ir.Constant(i32, 0x1F)  # c operand: clamp at lane 31, one 32-lane segment

        def read32(word: ir.Value) -> ir.Value:
            return builder.call(shuffle, [self.lanes, word, lane, every_lane])

        if self.value.type.width == 32:
            return read32(self.value)
        i64 = self.value.type
        low = read32(builder.trunc(self.value, i32))
        high = read32(builder.trunc(builder.lshr(self.value, ir.Constant(i64, 32)), i32))
        return builder.or_(builder.zext(low, i64), builder.shl(builder.zext(high, i64), ir.Constant(i64, 32)))


def _function(module: ir.Module, name: str, result: ir.Type, args: tuple[ir.Type, ...]) -> ir.Function:
    return module.globals.get(name) or ir.Function(module, ir.FunctionType(result, args), name)
