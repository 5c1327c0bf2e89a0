"""The `nvptx` verification target: fatkit's lowered IR compiled back to PTX by LLVM's NVPTX backend.

Not a product: the re-lowered PTX runs on an NVIDIA GPU beside the original, and any difference in results
is a bug in parse, passes or lowering ([4/8]'s differential harness). Names: `sm_90` (or any `sm_XX` LLVM
knows). Kernels use the `ptx_kernel` calling convention with one `.param` per PTX parameter of the same
size and alignment, so the re-lowered kernel launches with the original's parameter buffer; an array
parameter (a by-value struct) is a `byval([N x i8]) align A` pointer, which NVPTX declares as
`.param .align A .b8 name[N]` exactly as nvcc does. Allocas live in the generic address space (NVPTX
moves them to .local itself), `.shared` variables in address space 3, `bar.sync 0` is the CTA barrier.

The hardware-lane interface of lower/warp.py is implemented twice. `sm_90`: natively, a wave is the 32-lane
warp (the wave32 algorithm). `sm_90:wave64`: an emulated 64-lane wave made of two consecutive warps of the
block, so that NVIDIA runs the wave64 algorithm AMD's CDNA GPUs run: the hardware lane is the thread's
linear index mod 64, wave masks are 64 bits, and exchanges go through a .shared buffer of 64 slots per wave
between two warp barriers over the member lanes (PTX's collectives never span warps, so the members of one
exchange are one warp's; a read of the other half, which would be a bug, reads that half's last values).
"""

from __future__ import annotations

import re
from functools import cached_property

from llvmlite import binding as llvm
from llvmlite import ir

from fatkit.errors import FatkitError, UsageError
from fatkit.translate.ptx import parse_ptx
from fatkit.translate.ptx.errors import PtxSyntaxError
from fatkit.translate.targets.base import (
    Compiled, LaneExchange, LoweredKernel, Target, Unavailable, kernel_function, linked_and_optimised,
)

TRIPLE = "nvptx64-nvidia-cuda"
PTX_FEATURE = "+ptx80"  # PTX ISA 8.0: what ptxas 12.0+ reads, enough for sm_90
_SREG = {"%tid": "tid", "%ntid": "ntid", "%ctaid": "ctaid", "%nctaid": "nctaid"}
# PTX scopes as NVPTX's LLVM sync scopes ("" is the system scope).
_SYNCSCOPES = {"cta": "block", "cluster": "cluster", "gpu": "device", "sys": ""}
# Named-barrier operations (NAMED_BARRIER_OPERATIONS' values) as PTX, $1 the barrier, $2 the thread count,
# $3 the predicate as 0/1; the reductions leave their result in $0.
_NAMED_BARRIERS = {
    0: "barrier.sync $1, $2;",
    1: "barrier.arrive $1, $2;",
    2: "{ .reg .pred p; setp.ne.u32 p, $3, 0; barrier.red.popc.u32 $0, $1, $2, p; }",
    3: "{ .reg .pred p, q; setp.ne.u32 p, $3, 0; barrier.red.and.pred q, $1, $2, p; selp.u32 $0, 1, 0, q; }",
    4: "{ .reg .pred p, q; setp.ne.u32 p, $3, 0; barrier.red.or.pred q, $1, $2, p; selp.u32 $0, 1, 0, q; }",
}
# Machine registers (`Target.machine_register`) and the widths NVVM reads them at.
_MACHINE_REGISTERS = {"%clock64": ("clock64", 64), "%globaltimer": ("globaltimer", 64), "%smid": ("smid", 32),
                      "%nsmid": ("nsmid", 32), "%gridid": ("gridid", 64)}


WAVE64_SUFFIX = ":wave64"
MAX_BLOCK_THREADS = 1024  # CUDA's limit: the emulated waves' exchange buffer is sized for it


def is_nvptx_target(name: str) -> bool:
    return re.fullmatch(r"sm_\d+[af]?(:wave64)?", name) is not None


class NvptxTarget(Target):
    triple = TRIPLE
    global_address_space = 1
    constant_address_space = 4
    shared_address_space = 3

    def __init__(self, name: str) -> None:
        if not is_nvptx_target(name):
            raise UsageError(f"unknown NVIDIA target {name!r} (expected sm_XX or sm_XX:wave64, e.g. sm_90)")
        self.name = name
        self.arch = name.removesuffix(WAVE64_SUFFIX)
        self.emulated_wave64 = name.endswith(WAVE64_SUFFIX)
        self.wave_size = 64 if self.emulated_wave64 else 32

    @cached_property
    def _machine(self) -> llvm.TargetMachine:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        return llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=self.arch, features=PTX_FEATURE, opt=2)

    def machine(self) -> llvm.TargetMachine:
        return self._machine

    @property
    def data_layout(self) -> str:
        return str(self._machine.target_data)

    def define_kernel(self, module, signature, param_types):
        return kernel_function(module, signature, param_types, "ptx_kernel", "byval", 0)

    def special_register(self, builder, register, component):
        return _sreg(builder, f"{_SREG[register]}.{component}", 32)

    def barrier(self, builder):
        # bar.sync 0 (LLVM upgrades the name to its current spelling)
        builder.call(_function(builder.module, "llvm.nvvm.barrier0", ir.VoidType(), ()), [])

    def approximate(self, builder, function, value):
        # The PTX instruction itself (inline assembly): the re-lowered kernel then computes exactly what
        # the original does, so the differential harness compares bit for bit.
        f32 = value.type
        instruction = ir.InlineAsm(ir.FunctionType(f32, [f32]), f"{function}.approx.f32 $0, $1;", "=f,f")
        return builder.call(instruction, [value])

    # The hardware-lane interface. Natively a wave is a 32-thread warp whose lanes may run apart (Volta's
    # independent scheduling), so exchanges and ballots are the .sync instructions over the members.
    def lane_id(self, builder):
        if self.emulated_wave64:
            return builder.urem(_linear_thread(builder, self), ir.Constant(ir.IntType(32), 64))
        return _sreg(builder, "laneid", 32)

    def exchange(self, builder, value, members):
        lanes = self._voting(builder, members)
        if self.emulated_wave64:
            return _EmulatedWaveExchange(builder, self, value, lanes)
        return _WarpExchange(value, lanes)

    def ballot(self, builder, predicate, members):
        if not self.emulated_wave64:
            return _vote_ballot(builder, members, predicate), self._voting(builder, members)
        base, warp_members = _warp_half(builder, self, members)
        votes = builder.shl(builder.zext(_vote_ballot(builder, warp_members, predicate), ir.IntType(64)), base)
        return votes, self._voting(builder, members)

    def _voting(self, builder, members):
        """The members that take part: those that have not exited (a warp's exited lanes still count in a
        membermask, and vote for nothing)."""
        if not self.emulated_wave64:
            return _vote_ballot(builder, members, ir.Constant(ir.IntType(1), 1))
        base, warp_members = _warp_half(builder, self, members)
        voting = _vote_ballot(builder, warp_members, ir.Constant(ir.IntType(1), 1))
        return builder.shl(builder.zext(voting, ir.IntType(64)), base)

    def active_lanes(self, builder):
        active = builder.call(_function(builder.module, "llvm.nvvm.activemask", ir.IntType(32), ()), [])
        if not self.emulated_wave64:
            return active
        base = builder.zext(builder.and_(self.lane_id(builder), ir.Constant(ir.IntType(32), 32)), ir.IntType(64))
        return builder.shl(builder.zext(active, ir.IntType(64)), base)

    def wave_barrier(self, builder, members):
        if self.emulated_wave64:
            members = _warp_half(builder, self, members)[1]
        _warp_sync(builder, members)

    def machine_register(self, builder, register):
        if register not in _MACHINE_REGISTERS:
            raise Unavailable(f"the {self.name} target does not provide {register}")
        return _sreg(builder, *_MACHINE_REGISTERS[register])

    def approximate_f64(self, builder, function, value):
        f64 = value.type
        instruction = ir.InlineAsm(ir.FunctionType(f64, [f64]), f"{function}.approx.ftz.f64 $0, $1;", "=d,d")
        return builder.call(instruction, [value])

    # Memory model and barriers: PTX's own, written back as PTX (inline assembly where NVVM has no intrinsic).
    named_barrier_calls = True

    def syncscope(self, scope):
        return _SYNCSCOPES[scope]

    def named_barrier(self, builder, barrier, expected, operation, predicate):
        i32 = ir.IntType(32)
        # expected 0 means every thread of the block: its thread count rounded up to whole warps
        ntid = [self.special_register(builder, "%ntid", c) for c in "xyz"]
        threads = builder.mul(builder.mul(ntid[0], ntid[1]), ntid[2])
        whole_warps = builder.and_(builder.add(threads, ir.Constant(i32, 31)), ir.Constant(i32, ~31))
        count = builder.select(builder.icmp_unsigned("==", expected, ir.Constant(i32, 0)), whole_warps, expected)
        code = _NAMED_BARRIERS[operation]
        assembly = ir.InlineAsm(ir.FunctionType(i32, [i32, i32, i32]), code, "=r,r,r,r,~{memory}", side_effect=True)
        return builder.call(assembly, [barrier, count, builder.zext(predicate, i32)])

    def pause(self, builder):
        builder.call(ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), "nanosleep.u32 32;", "~{memory}",
                                  side_effect=True), [])

    def dynamic_shared_size(self, builder):
        return builder.call(ir.InlineAsm(ir.FunctionType(ir.IntType(32), []), "mov.u32 $0, %dynamic_smem_size;",
                                         "=r"), [])

    def in_aperture(self, builder, space, address):
        i32 = ir.IntType(32)
        test = ir.InlineAsm(ir.FunctionType(i32, [address.type]),
                            f"{{ .reg .pred p; isspacep.{space} p, $1; selp.u32 $0, 1, 0, p; }}", "=r,l")
        return builder.trunc(builder.call(test, [address]), ir.IntType(1))

    def codegen(self, kernels: list[LoweredKernel], opt_level: int, jobs: int = 1) -> Compiled:
        """PTX text of all kernels. In this process: NVPTX codegen is mature and its fatal errors are a bug
        we want to see, and this target only runs in verification."""
        module = linked_and_optimised([k.llvm_ir for k in kernels], self._machine, opt_level)
        return Compiled(self._machine.emit_assembly(module).encode())

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
        return _by_words(builder, self.value, lambda word: builder.call(shuffle, [self.lanes, word, lane, every_lane]))


class _EmulatedWaveExchange(LaneExchange):
    """An emulated 64-lane wave's exchange: every member lane stores its value in its wave's slot of a .shared
    buffer, the members wait for each other (bar.warp.sync, which also orders their memory accesses), read
    the slots they ask for, and wait again so that the next exchange cannot overwrite a slot still read."""

    def __init__(self, builder: ir.IRBuilder, target: NvptxTarget, value: ir.Value, members: ir.Value):
        self.value, self.lanes, self.uniform_lanes = value, members, members
        self.target = target
        i32, i64 = ir.IntType(32), ir.IntType(64)
        slots = _exchange_buffer(builder.module)
        wave = builder.udiv(_linear_thread(builder, target), ir.Constant(i32, 64))
        self.row = builder.gep(slots, [ir.Constant(i32, 0), wave], source_etype=slots.value_type)
        self.warp_members = _warp_half(builder, target, members)[1]
        mine = builder.gep(self.row, [ir.Constant(i32, 0), target.lane_id(builder)],
                           source_etype=slots.value_type.element)
        builder.store(builder.zext(value, i64) if value.type.width == 32 else value, mine)
        _warp_sync(builder, self.warp_members)

    def read(self, builder, lane, uniform):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        slot = builder.gep(self.row, [ir.Constant(i32, 0), builder.and_(lane, ir.Constant(i32, 63))],
                           source_etype=_exchange_buffer(builder.module).value_type.element)
        value = builder.load(slot, typ=i64)
        _warp_sync(builder, self.warp_members)
        return builder.trunc(value, i32) if self.value.type.width == 32 else value


def _exchange_buffer(module: ir.Module) -> ir.GlobalVariable:
    """The .shared slots of the emulated waves: [waves of the largest block][64 lanes] × 64 bits."""
    name = "fatkit.wave64.exchange"
    if name in module.globals:
        return module.globals[name]
    row = ir.ArrayType(ir.IntType(64), 64)
    buffer = ir.GlobalVariable(module, ir.ArrayType(row, MAX_BLOCK_THREADS // 64), name, addrspace=3)
    buffer.type = ir.PointerType(addrspace=3)
    buffer.linkage = "internal"
    buffer.initializer = ir.Constant(buffer.value_type, ir.Undefined)
    buffer.align = 8
    return buffer


def _linear_thread(builder: ir.IRBuilder, target: NvptxTarget) -> ir.Value:
    """The thread's linear index in its block: x + ntid.x * (y + ntid.y * z), as warps are formed."""
    tid = [target.special_register(builder, "%tid", c) for c in "xyz"]
    ntid = [target.special_register(builder, "%ntid", c) for c in "xy"]
    return builder.add(tid[0], builder.mul(ntid[0], builder.add(tid[1], builder.mul(ntid[1], tid[2]))))


def _warp_half(builder: ir.IRBuilder, target: NvptxTarget, members: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(base, warp members): the i64 base lane of the thread's warp in its emulated wave, and the 32 bits of
    the wave mask `members` that are that warp's lanes."""
    i32, i64 = ir.IntType(32), ir.IntType(64)
    base = builder.zext(builder.and_(target.lane_id(builder), ir.Constant(i32, 32)), i64)
    return base, builder.trunc(builder.lshr(members, base), i32)


def _vote_ballot(builder: ir.IRBuilder, members: ir.Value, predicate: ir.Value) -> ir.Value:
    i32 = ir.IntType(32)
    ballot = _function(builder.module, "llvm.nvvm.vote.ballot.sync", i32, (i32, ir.IntType(1)))
    return builder.call(ballot, [members, predicate])


def _warp_sync(builder: ir.IRBuilder, members: ir.Value) -> None:
    i32 = ir.IntType(32)
    builder.call(_function(builder.module, "llvm.nvvm.bar.warp.sync", ir.VoidType(), (i32,)), [members])


def _by_words(builder: ir.IRBuilder, value: ir.Value, read32) -> ir.Value:
    """`read32` applied to a 32-bit value, or to each half of a 64-bit one."""
    if value.type.width == 32:
        return read32(value)
    i32, i64 = ir.IntType(32), value.type
    low = read32(builder.trunc(value, i32))
    high = read32(builder.trunc(builder.lshr(value, ir.Constant(i64, 32)), i32))
    return builder.or_(builder.zext(low, i64), builder.shl(builder.zext(high, i64), ir.Constant(i64, 32)))


def _sreg(builder: ir.IRBuilder, name: str, width: int) -> ir.Value:
    return builder.call(_function(builder.module, f"llvm.nvvm.read.ptx.sreg.{name}", ir.IntType(width), ()), [])


def _function(module: ir.Module, name: str, result: ir.Type, args: tuple[ir.Type, ...]) -> ir.Function:
    return module.globals.get(name) or ir.Function(module, ir.FunctionType(result, args), name)
