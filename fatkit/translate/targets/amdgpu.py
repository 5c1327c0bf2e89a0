"""The `amdgpu` target: `amdgcn-amd-amdhsa` code objects v5 for one processor, linked to ET_DYN with ld.lld.

Kernels use the `amdgpu_kernel` calling convention with one explicit argument per PTX parameter of the
same size and alignment, so the explicit kernarg segment is CUDA's parameter buffer byte for byte. An
array parameter (`.param .align 8 .b8 p[16]`, a by-value struct) is a `byref([16 x i8]) align 8` pointer
into the kernarg segment: LLVM lays it out with exactly that size and alignment (a plain `[16 x i8]`
argument would be aligned to 1), and `ld.param [p+8]` becomes a load at an offset from the pointer.
`.shared` variables are LDS (address space 3); `bar.sync 0` is s_barrier between workgroup fences
(named barriers are LDS counters, lower/sync.py). Dynamic shared memory (`.extern .shared x[]`) is a
zero-sized external LDS global, which LLVM places after the static LDS; its size is the code object v5
implicit argument hidden_dynamic_lds_size. PTX scopes are the sync scopes workgroup (cta), agent
(cluster, gpu) and system (sys).
%ntid and %nctaid come from the code object v5 implicit arguments (hidden_block_count_* at 0/4/8,
hidden_group_size_* at 12/14/16). LLVM fatal errors abort the process they happen in, so codegen runs in
child processes (amdgpu_child.py: the first forked from this one, `_Forked`) that stay up for the run, one
group of kernels per request; a group
whose child dies is halved until the kernels that fail alone are found, which are left out and reported with
LLVM's message (a fresh child takes the next request). ziglang's ld.lld (PyPI) links the relocatable objects
they return.
"""

from __future__ import annotations

import atexit
import gc
import math
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import IO

import msgpack

from llvmlite import binding as llvm
from llvmlite import ir

from fatkit.errors import FatkitError, FormatError
from fatkit.formats.common import align
from fatkit.formats.elf import SHT_NOTE, ElfView, Note, Section
from fatkit.formats.hsaco import NT_AMDGPU_METADATA, CodeObject, parse_code_object
from fatkit.runtime import CLUSTER_DIMS_KEY, CLUSTER_MAX_CTAS_KEY, CLUSTER_SHAPE_OFFSET_KEY
from fatkit.translate.targets import libllvm
from fatkit.translate.targets.amdgpu_child import ANSWER, TRIPLE, request, serve, target_machine
from fatkit.translate.targets.base import (
    Codegen, Compiled, EMIT_KINDS, LaneExchange, LoweredKernel, Target, Unavailable, kernel_function,
)
from fatkit.translate.targets.ids import TargetId

CODE_OBJECT_VERSION = 500  # module flag value for code object v5; LLVM 22 defaults to v6
_WORKITEM_ID = {c: f"llvm.amdgcn.workitem.id.{c}" for c in "xyz"}
_WORKGROUP_ID = {c: f"llvm.amdgcn.workgroup.id.{c}" for c in "xyz"}
_BLOCK_COUNT_OFFSET = {"x": 0, "y": 4, "z": 8}  # i32 hidden_block_count_*
_GROUP_SIZE_OFFSET = {"x": 12, "y": 14, "z": 16}  # i16 hidden_group_size_*
_DYNAMIC_LDS_SIZE_OFFSET = 120  # i32 hidden_dynamic_lds_size (AMDGPUUsage, code object v5 implicit arguments)
# PTX scopes as AMDGPU sync scopes; a cluster of CTAs runs on one agent at most, so .cluster is agent scope.
_SYNCSCOPES = {"cta": "workgroup", "cluster": "agent", "gpu": "agent", "sys": ""}
_CODEGEN_TIMEOUT_S = 300
# PTX statements per codegen request (~300 KB of LLVM IR, ~1 s of LLVM: lowering writes 60–70 bytes of IR a
# statement): the children stay up, so a group need not pay for a start; smaller groups spread a module over
# the jobs more evenly, larger ones compile shared functions fewer times. Statements, not IR bytes: they are
# known before lowering, so that a group's codegen can start while the module's other kernels lower.
_GROUP_STATEMENTS = 4500


def wavefront_size(processor: str) -> int:
    """The default wave size LLVM compiles for: 64 on GCN/CDNA (gfx6–gfx9), 32 on RDNA (gfx10 and later)."""
    return TargetId.parse_amd(processor).wave_size


class AmdgpuTarget(Target):
    triple = TRIPLE
    stack_address_space = 5
    global_address_space = 1
    constant_address_space = 4
    shared_address_space = 3

    def __init__(self, processor: str) -> None:
        self.id = TargetId.parse_amd(processor).bare
        self.processor = self.id.processor
        self.name = self.processor

    @cached_property
    def data_layout(self) -> str:
        return str(target_machine(self.processor).target_data)

    @property
    def wavefront_size(self) -> int:
        return self.id.wave_size

    def machine(self) -> llvm.TargetMachine:
        return target_machine(self.processor)

    def define_kernel(self, module, signature, param_types):
        # LLVM places a by-value kernel argument at its type's ABI alignment and honours an explicit alignment
        # only on a byref one; CUDA places a scalar at its `.align` (`.param .align 8 .u32 w`): such a scalar is
        # passed byref and loaded at entry, so the kernarg layout stays CUDA's
        over_aligned = [not p.array and p.align > p.size for p in signature.params]
        types = [ir.ArrayType(ir.IntType(8), p.size) if over else t
                 for p, t, over in zip(signature.params, param_types, over_aligned)]
        function, builder, values = kernel_function(module, signature, types, "amdgpu_kernel", "byref", 4)
        for index, (param, over) in enumerate(zip(signature.params, over_aligned)):
            if over:
                argument = function.args[index]
                argument.add_attribute("byref")
                argument.attributes.align = param.align
                values[index] = builder.load(argument, typ=param_types[index], align=param.align)
        return function, builder, values

    def flushing_mode(self):
        # MODE's FP_DENORM f32 field set to flush (the descriptor's FLOAT_DENORM_MODE_32 = 0): subnormal
        # inputs and results become zeros of their sign (sign respecting, AMDGPUUsage). v_min/v_max and so
        # llvm.canonicalize (v_max x, x) follow the mode from gfx9 on; before gfx9 they keep subnormals.
        return self.id.generation >= 9

    def directed(self, builder, operation, mode, values, flushing=False):
        """One inline-asm block: MODE's FP_ROUND (f32 and f16/f64 fields alike) set to `mode`, the VOP3
        instruction, FP_ROUND back to nearest even. Being one block, nothing LLVM schedules can land between
        the switches (LLVM's constrained intrinsics would not keep plain operations out: AMDGPU turns them
        into plain nodes), and every block, join and call sees the default mode. gfx9 has no s_round_mode:
        s_setreg of hwreg(HW_REG_MODE, 0, 4), with the wait states an s_setreg needs before the next one.

        Under the flushing mode LLVM's own f32 division opens a window with f32 subnormals kept
        (s_denorm_mode / s_setreg), and its scheduler may place the block inside it (the switches of the
        two are not ordered): there the block saves MODE's FP bits (s_getreg), sets rounding and f32 flushing
        together, and restores the saved bits after."""
        width = 64 if values[0].type == ir.DoubleType() else 32
        field = {"rz": 3, "rp": 1, "rm": 2}[mode]
        sources = ", ".join(f"${k + 1 + flushing}" for k in range(len(values)))
        negated = f"${2 + flushing}"
        instruction = {
            "add": f"v_add_f{width} $0, {sources}", "sub": f"v_add_f{width} $0, ${1 + flushing}, -{negated}",
            "mul": f"v_mul_f{width} $0, {sources}", "fma": f"v_fma_f{width} $0, {sources}"}[operation]
        wait = "s_nop 1\n" if self.id.generation < 10 else ""
        if flushing:  # FP_DENORM: f32 flushed (0), f16/f64 kept (3)
            text = (f"{wait}s_getreg_b32 $1, hwreg(HW_REG_MODE, 0, 8)\n"
                    f"s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 8), {0xC0 | field | field << 2:#x}\n{instruction}\n"
                    f"{wait.replace('1', '0')}s_setreg_b32 hwreg(HW_REG_MODE, 0, 8), $1")
        elif self.id.generation >= 10:
            text = f"s_round_mode {field | field << 2:#x}\n{instruction}\ns_round_mode 0x0"
        else:
            text = (f"s_nop 1\ns_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), {field | field << 2:#x}\n{instruction}\n"
                    "s_nop 0\ns_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), 0x0")
        ty = values[0].type
        outputs = ["=v", "=&s"] if flushing else ["=v"]
        result = ir.LiteralStructType([ty, ir.IntType(32)]) if flushing else ty
        asm = ir.InlineAsm(ir.FunctionType(result, [ty] * len(values)), text,
                           ",".join(outputs + ["v"] * len(values)), side_effect=True)
        value = builder.call(asm, values)
        return builder.extract_value(value, 0) if flushing else value

    def median(self, builder, x, y, z):
        # v_med3_f32 on gfx9–gfx11, v_med3_num_f32 on gfx12 (LLVM's choice for llvm.amdgcn.fmed3 there), by
        # the ISA's pseudocode: with a NaN operand the min3 of the three (a NaN where all three are: gfx12's
        # min_num of two NaNs is the first quieted), else the median, -0 below +0 (the max3-based choice)
        f32 = ir.FloatType()
        return builder.call(_intrinsic(builder.module, "llvm.amdgcn.fmed3.f32", f32, (f32, f32, f32)), [x, y, z])

    def number_min_max(self, builder, smaller, x, y):
        # v_max3_f32 with the canonical NaN and MODE.IEEE off (finish_module): by the ISA's pseudocode
        # v_max(x, y) gives the other operand for one NaN (signalling ones too), and for two NaNs the second
        # on gfx9 (CDNA tests S0 first) and the first on gfx11 (RDNA3 tests S1 first); gfx12's
        # v_max3_num_f32 (maximumNumber, no IEEE mode bit) gives the first quieted. So the canonical NaN goes
        # last on gfx9, where the max of it and a number is the number and of it and a NaN is it, and first
        # from gfx11 on, where max(NaN, x) is x for a number and that NaN for a NaN x, and its max with y is
        # PTX's result (v_min3 alike). One inline-asm instruction, as LLVM would fold a max with a NaN
        # constant away or reorder the operands. (gfx10: the order of gfx9, unchecked: no pseudocode table.)
        f32, i32 = ir.FloatType(), ir.IntType(32)
        generation = self.id.generation
        name = ("v_min3" if smaller else "v_max3") + ("_num" if generation >= 12 else "") + "_f32"
        if generation >= 10:  # VOP3 takes a literal from gfx10 on
            order = "0x7fffffff, $1, $2" if generation >= 11 else "$1, $2, 0x7fffffff"
            asm = ir.InlineAsm(ir.FunctionType(f32, [f32, f32]), f"{name} $0, {order}", "=v,v,v", side_effect=True)
            return builder.call(asm, [x, y])
        asm = ir.InlineAsm(ir.FunctionType(f32, [f32, f32, i32]), f"{name} $0, $1, $2, $3", "=v,v,v,s",
                           side_effect=True)
        return builder.call(asm, [x, y, ir.Constant(i32, 0x7FFFFFFF)])

    def special_register(self, builder, register, component):
        module, i32 = builder.module, ir.IntType(32)
        if register in ("%tid", "%ctaid"):
            name = (_WORKITEM_ID if register == "%tid" else _WORKGROUP_ID)[component]
            return builder.call(_intrinsic(module, name, i32, ()), [])
        implicit = builder.call(
            _intrinsic(module, "llvm.amdgcn.implicitarg.ptr", ir.PointerType(addrspace=4), ()), [])
        i8 = ir.IntType(8)
        if register == "%nctaid":
            slot = builder.gep(implicit, [ir.Constant(ir.IntType(64), _BLOCK_COUNT_OFFSET[component])],
                               source_etype=i8)
            return builder.load(slot, typ=i32, align=4)
        slot = builder.gep(implicit, [ir.Constant(ir.IntType(64), _GROUP_SIZE_OFFSET[component])],
                           source_etype=i8)
        return builder.zext(builder.load(slot, typ=ir.IntType(16), align=2), i32)

    def barrier(self, builder):
        builder.fence("release", "workgroup")
        builder.call(_intrinsic(builder.module, "llvm.amdgcn.s.barrier", ir.VoidType(), ()), [])
        builder.fence("acquire", "workgroup")

    def approximate(self, builder, function, value):
        f32, module = value.type, builder.module
        if function in ("sin", "cos"):
            # v_sin_f32/v_cos_f32 take revolutions, within ±256 of them: beyond PTX's ±100π radians, where
            # .approx promises nothing. (Reducing with v_fract would lose the sign of −0 and tiny angles.)
            turns = builder.fmul(value, ir.Constant(f32, 1 / (2 * math.pi)))
            return builder.call(_intrinsic(module, f"llvm.amdgcn.{function}.f32", f32, (f32,)), [turns])
        if function == "tanh":
            return tanh_from_exp2(builder, value, lambda x: self.approximate(builder, "ex2", x))
        # LLVM lowers exp2/log2.f32 to v_exp/v_log_f32 (1 ulp), and 1/x, sqrt and 1/sqrt allowed 1 ulp
        # (!fpmath) to v_rcp/v_sqrt/v_rsq_f32, adding the scaling that keeps subnormal inputs and results,
        # which the bare llvm.amdgcn.* instructions flush.
        if function in ("ex2", "lg2"):
            name = "llvm.exp2.f32" if function == "ex2" else "llvm.log2.f32"
            return builder.call(_intrinsic(module, name, f32, (f32,)), [value])
        one_ulp = module.add_metadata([ir.Constant(f32, 1.0)])
        if function != "rcp":
            value = builder.call(_intrinsic(module, "llvm.sqrt.f32", f32, (f32,)), [value], fastmath=("contract",))
            value.set_metadata("fpmath", one_ulp)
            if function == "sqrt":
                return value
        reciprocal = builder.fdiv(ir.Constant(f32, 1.0), value, flags=("contract",))
        reciprocal.set_metadata("fpmath", one_ulp)
        return reciprocal

    def approximate_ftz(self, builder, function, value, flushing=False):
        # The bare instructions (AMD: 1 ulp each, inside PTX's .approx bounds) are PTX's .ftz forms by
        # themselves: v_exp, v_log, v_rcp, v_rsq and v_sqrt_f32 flush subnormal inputs and results to zeros of
        # their sign in every mode ("denormals are flushed", CDNA3 and RDNA3 ISA; fatkit.emulate models
        # that), so ex2 of x < -126 is the zero its result flushes to, lg2 of a subnormal is -inf, rcp of a
        # subnormal ±inf and of |x| > 2^126 a zero of x's sign. v_sin/v_cos support denormals: their turns
        # x·1/2π is an f32 multiply, which the flushing mode flushes (a subnormal x or product becomes a zero
        # of its sign); with subnormals kept, sin of |x| < 2^-120 is x's signed zero (within .approx's
        # absolute error, where the turns would be subnormal) and cos of a subnormal is 1 anyway.
        f32, module = value.type, builder.module

        def bare(name: str, x: ir.Value) -> ir.Value:
            return builder.call(_intrinsic(module, f"llvm.amdgcn.{name}.f32", f32, (f32,)), [x])

        name = {"ex2": "exp2", "lg2": "log", "rcp": "rcp", "sqrt": "sqrt", "rsqrt": "rsq"}.get(function)
        if name is not None:
            return bare(name, value)
        if function not in ("sin", "cos"):
            return None
        result = bare(function, builder.fmul(value, ir.Constant(f32, 1 / (2 * math.pi))))
        if function == "cos" or flushing:
            return result
        i32 = ir.IntType(32)
        magnitude = builder.call(_intrinsic(module, "llvm.fabs.f32", f32, (f32,)), [value])
        tiny = builder.fcmp_ordered("<", magnitude, ir.Constant(f32, 2.0 ** -120))
        signed_zero = builder.bitcast(builder.and_(builder.bitcast(value, i32), ir.Constant(i32, 1 << 31)), f32)
        return builder.select(tiny, signed_zero, result)

    def syncscope(self, scope):
        return _SYNCSCOPES[scope]

    def pause(self, builder):
        i32 = ir.IntType(32)
        builder.call(_intrinsic(builder.module, "llvm.amdgcn.s.sleep", ir.VoidType(), (i32,)), [ir.Constant(i32, 1)])

    def dynamic_shared_size(self, builder):
        implicit = builder.call(
            _intrinsic(builder.module, "llvm.amdgcn.implicitarg.ptr", ir.PointerType(addrspace=4), ()), [])
        slot = builder.gep(implicit, [ir.Constant(ir.IntType(64), _DYNAMIC_LDS_SIZE_OFFSET)],
                           source_etype=ir.IntType(8))
        return builder.load(slot, typ=ir.IntType(32), align=4)

    def in_aperture(self, builder, space, address):
        # Flat addresses of LDS and scratch lie in the shared and private apertures the hardware reports.
        name = {"shared": "llvm.amdgcn.is.shared", "local": "llvm.amdgcn.is.private"}[space]
        pointer = builder.inttoptr(address, ir.PointerType())
        return builder.call(_intrinsic(builder.module, name, ir.IntType(1), (ir.PointerType(),)), [pointer])

    @property
    def wave_size(self) -> int:  # type: ignore[override]  # Target declares it a plain attribute; fixed here
        return self.wavefront_size

    def lane_id(self, builder):
        i32 = ir.IntType(32)
        every, zero = ir.Constant(i32, -1), ir.Constant(i32, 0)
        low = builder.call(_intrinsic(builder.module, "llvm.amdgcn.mbcnt.lo", i32, (i32, i32)), [every, zero])
        if self.wave_size == 32:
            return low
        return builder.call(_intrinsic(builder.module, "llvm.amdgcn.mbcnt.hi", i32, (i32, i32)), [every, low])

    def _ballot(self, builder, predicate):
        mask = ir.IntType(self.wave_size)
        function = _intrinsic(builder.module, f"llvm.amdgcn.ballot.i{self.wave_size}", mask, (ir.IntType(1),))
        return builder.call(function, [predicate])

    # A wave runs its lanes in lockstep: the lanes of `members` that execute an operation are the active
    # ones (EXEC), and one that is not active (diverged, exited) cannot be waited for, so `members` only
    # masks the result.
    def exchange(self, builder, value, members):
        active = self.active_lanes(builder)
        return _WaveExchange(value, builder.and_(active, members), active)

    def ballot(self, builder, predicate, members):
        return (builder.and_(self._ballot(builder, predicate), members),
                builder.and_(self.active_lanes(builder), members))

    def active_lanes(self, builder):
        return self._ballot(builder, ir.Constant(ir.IntType(1), 1))

    def wave_barrier(self, builder, members):
        # The lanes are already together; what remains is ordering their memory accesses.
        builder.fence("acq_rel", "wavefront")
        builder.call(_intrinsic(builder.module, "llvm.amdgcn.wave.barrier", ir.VoidType(), ()), [])

    def machine_register(self, builder, register):
        module, i32, i64 = builder.module, ir.IntType(32), ir.IntType(64)
        generation = self.id.generation
        if register == "%clock64":
            if generation == 11:
                # gfx11's cycle counter (SHADER_CYCLES, what llvm.readcyclecounter and HIP's clock64() read
                # there) has 20 bits and wraps within a millisecond; the 64-bit monotonic counter gfx11 has is
                # REALTIME (s_sendmsg_rtn_b64, HIP's wall_clock64()): a constant clock, not the shader's.
                return builder.call(_intrinsic(module, "llvm.readsteadycounter", i64, ()), [])
            return builder.call(_intrinsic(module, "llvm.readcyclecounter", i64, ()), [])  # s_memtime / SHADER_CYCLES
        if register == "%globaltimer":
            # s_memrealtime / MSG_RTN_GET_REALTIME: the 100 MHz constant clock, 10 ns a tick.
            ticks = builder.call(_intrinsic(module, "llvm.readsteadycounter", i64, ()), [])
            return builder.mul(ticks, ir.Constant(i64, 10))
        if register in ("%smid", "%nsmid"):
            # The compute unit's position in the HW_ID (gfx9) / HW_ID1 (gfx10+) register, contiguous bits:
            # gfx9 CU_ID[11:8] SH_ID[12] SE_ID[15:13]; gfx10+ WGP_ID[13:10] SA_ID[16] SE_ID[20:18].
            hardware_id, offset, size = (4, 8, 8) if generation < 10 else (23, 10, 11)
            if register == "%nsmid":
                return ir.Constant(i32, 1 << size)
            getreg = _intrinsic(module, "llvm.amdgcn.s.getreg", i32, (i32,))
            return builder.call(getreg, [ir.Constant(i32, (size - 1) << 11 | offset << 6 | hardware_id)])
        if register == "%gridid":
            # The dispatch packet's address: distinct among the grids running together, as PTX asks.
            packet = builder.call(_intrinsic(module, "llvm.amdgcn.dispatch.ptr", ir.PointerType(addrspace=4), ()), [])
            return builder.ptrtoint(packet, i64)
        raise Unavailable(f"{register} has no value on {self.processor}")

    def finish_module(self, module: ir.Module) -> None:
        i32 = ir.IntType(32)
        if any(name.startswith("llvm.amdgcn.mfma.") for name in module.globals):
            # MFMA accumulators in ArchVGPRs (gfx90a and later allow it): no AccVGPR copies around each
            # instruction. llvmlite's attribute set lists only LLVM's enumerated attributes, so the string
            # attribute is added past its check.
            for function in module.functions:
                if not function.is_declaration:
                    set.add(function.attributes, '"amdgpu-agpr-alloc"="0"')
        # MODE.IEEE off (the descriptor's ENABLE_IEEE_MODE): v_min/v_max then take a signalling NaN operand
        # as any NaN (the other operand is the result), so LLVM drops the quieting `v_max x, x` of each input
        # before them; IEEE mode changes nothing else the ISA's pseudocode computes (min/max only), and
        # arithmetic NaN results, which PTX leaves open, stay NaNs. Every module, so that the linkonce_odr
        # helpers shared between modules, and inlining, see one mode.
        for function in module.functions:
            if not function.is_declaration:
                set.add(function.attributes, '"amdgpu-ieee"="false"')
        module.add_named_metadata(
            "llvm.module.flags", [ir.Constant(i32, 1), "amdhsa_code_object_version",
                                  ir.Constant(i32, CODE_OBJECT_VERSION)])

    def lowering_key(self) -> Hashable:
        # what this class and lowering read of the processor: its generation (mode switches, min/max, special
        # registers, literals), wave size, matrix instructions (lower/mma_native.py), whether it has image
        # instructions (lower/texture.py), and the data layout
        from fatkit.translate.lower.texture import NO_IMAGES

        return ("amdgpu", self.id.generation, self.id.wave_size, self.id.matrix_cores,
                self.processor in NO_IMAGES, self.data_layout)

    def codegen_groups(self, sizes: list[int]) -> list[int]:
        """Consecutive kernels cut into groups of about _GROUP_STATEMENTS PTX statements, each compiled by one
        codegen child on its own."""
        groups: list[int] = []
        size = 0
        for kernel_size in sizes:
            cut = bool(groups) and size >= _GROUP_STATEMENTS
            groups.append(groups[-1] + cut if groups else 0)
            size = kernel_size if cut else size + kernel_size
        return groups

    def start_codegen(self, opt_level: int, jobs: int = 1) -> Codegen:
        return _GroupCodegen(self, opt_level, jobs)

    def codegen(self, kernels: list[LoweredKernel], opt_level: int, jobs: int = 1) -> Compiled:
        """Compile each codegen group of the kernels (`LoweredKernel.group`) in a child process to a relocatable
        object, up to `jobs` at once, the largest groups first, then link them into one ET_DYN code object
        with one metadata note (`_GroupCodegen`).

        A group whose child fails (an LLVM assertion or fatal error aborts it) is compiled again in halves,
        down to the kernels that fail alone: those are left out with LLVM's message, the rest still link."""
        with self.start_codegen(opt_level, jobs) as started:
            return started.finish(kernels)

    def _objects(self, group: list[LoweredKernel], opt_level: int, failed: dict[str, str]) -> list[bytes]:
        """Relocatable objects holding the kernels of `group` that LLVM compiles: one object when the whole
        group does, else those of its halves in turn; a single kernel that fails goes into `failed`.
        A kernel fails the same way wherever it is cut, so the objects depend on the module alone."""
        try:
            return [self.emit(group, opt_level, "obj")]
        except CodegenFailed as failure:
            if len(group) == 1:
                failed[group[0].signature.name] = failure.message
                return []
        half = len(group) // 2
        return self._objects(group[:half], opt_level, failed) + self._objects(group[half:], opt_level, failed)

    def emit(self, kernels: list[LoweredKernel], opt_level: int, kind: str) -> bytes:
        """As `Target.emit`, in a child process: LLVM's AMDGPU fatal errors abort the process they happen in;
        raises CodegenFailed where the child fails."""
        if kind not in EMIT_KINDS:
            raise FatkitError(f"cannot emit {kind!r}; one of {', '.join(EMIT_KINDS)}")
        irs = [k.llvm_ir for k in kernels]
        # llvmlite has no AMDGPU assembly parser, which LLVM needs for inline asm in an object (`directed`):
        # such modules become assembly, which clang's assembler (in ziglang) turns into the object
        switched = any("asm sideeffect" in ir_text for ir_text in irs) and kind in ("obj", "asm")
        worker = _WORKERS.take()
        try:
            product = worker.compile(request(self.processor, opt_level, "asm" if switched else kind, irs))
        except _ChildFailed as failed:
            if failed.timed_out:
                raise FatkitError(f"LLVM codegen for {self.processor} took longer than {_CODEGEN_TIMEOUT_S} s") \
                    from None
            message = llvm_message(failed.stderr, failed.returncode)
            raise CodegenFailed(f"LLVM codegen for {self.processor} failed: {message}", message) from None
        finally:
            _WORKERS.give(worker)
        if not switched:
            return product
        assembly = shared_switches(known_mode_blocks(product.decode(), self.id.generation)).encode()
        return assembled(assembly, self.processor) if kind == "obj" else assembly

    def validate(self, product: bytes, kernels: list[LoweredKernel]) -> CodeObject:
        """Re-read the code object: processor, v5, kernel names, explicit kernarg layout, LDS size, wave size."""
        try:
            code_object = parse_code_object(product)
        except FormatError as error:
            raise FatkitError(f"the produced code object does not parse: {error}") from error
        if code_object.processor != self.processor:
            raise FatkitError(f"code object is for {code_object.processor}, expected {self.processor}")
        if code_object.code_object_version != 5:
            raise FatkitError(f"code object version {code_object.code_object_version}, expected 5")
        produced = {k.name: k for k in code_object.kernels}
        expected = {k.signature.name: k for k in kernels}
        if set(produced) != set(expected):
            raise FatkitError(f"code object holds kernels {sorted(produced)}, expected {sorted(expected)}")
        for name, lowered in expected.items():
            _check_kernel(produced[name], lowered, self.wavefront_size)
        return code_object


class CodegenFailed(FatkitError):
    """A codegen child failed; `message` is LLVM's own account (the assertion or fatal error it printed)."""

    def __init__(self, text: str, message: str):
        super().__init__(text)
        self.message = message


class _ChildFailed(Exception):
    """A codegen child's request failed: what it wrote to stderr meanwhile and how it ended (exit status 1 for a
    Python error it reported; a negative signal number when LLVM aborted it)."""

    def __init__(self, stderr: str, returncode: int, timed_out: bool = False):
        self.stderr, self.returncode, self.timed_out = stderr, returncode, timed_out


class _CodegenChild:
    """One codegen process (`amdgpu_child.serve`), answering requests one at a time. Its stderr goes to a
    file: LLVM may write there at length, and a pipe nobody reads would stall it.

    `forked`: the child is this process forked (`_Forked`), which costs a few milliseconds where starting a
    Python that imports llvmlite and initialises its targets costs ~0.25 s of CPU, as much as LLVM spends on
    a small module; only a process with one thread may fork (`_CodegenChildren.prepare`): a lock another
    thread held would stay locked in the child. Else a fresh Python is started."""

    def __init__(self, forked: bool = False) -> None:
        # the LLVM the child compiles with (`FATKIT_LIBLLVM` when it started, which it inherits)
        self.library = libllvm.library_path()
        if self.library is not None:  # (a library that does not fit is the user's error, not a kernel's)
            libllvm.checked(self.library, llvm.llvm_version_info[0])
        self.log = tempfile.TemporaryFile()
        self.process: subprocess.Popen[bytes] | _Forked
        if forked:
            self.process, self.requests, self.answers = _Forked.serving(self.log)
            return
        # the child imports this fatkit, wherever it came from: another one on its path would speak another
        # protocol (or translate differently)
        environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [_PACKAGE_ROOT, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]))
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from fatkit.translate.targets.amdgpu_child import serve; serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=environment)
        assert self.process.stdin is not None and self.process.stdout is not None  # (both are pipes)
        self.requests, self.answers = self.process.stdin, self.process.stdout

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def compile(self, payload: bytes) -> bytes:
        """The child's answer to one request; _ChildFailed when it reports an error, dies or takes too long."""
        start = self.log.seek(0, os.SEEK_END)
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            self.process.kill()

        timer = threading.Timer(_CODEGEN_TIMEOUT_S, expire)
        timer.start()
        try:
            self.requests.write(payload)
            self.requests.flush()
            header = self.answers.read(ANSWER.size)
            status, length = ANSWER.unpack(header) if len(header) == ANSWER.size else (None, 0)
            answer = self.answers.read(length) if status is not None else b""
        except (BrokenPipeError, ConnectionResetError):
            status, answer = None, b""
        finally:
            timer.cancel()
        if status == 0 and len(answer) == length:
            return answer
        if status == 1:
            raise _ChildFailed(answer.decode(errors="replace"), 1)
        returncode = self.process.wait()
        self.log.seek(start)
        raise _ChildFailed(self.log.read().decode(errors="replace"), returncode, expired.is_set())

    def close(self) -> None:
        if self.alive:
            self.requests.close()
            self.process.wait()
        self.log.close()


class _Forked:
    """A codegen child forked from this process, with what `_CodegenChild` uses of subprocess.Popen: `poll`,
    `wait` and `kill`, and `returncode` as Popen gives it (a negative signal number when a signal ended it)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    @classmethod
    def serving(cls, log: IO[bytes]) -> tuple[_Forked, IO[bytes], IO[bytes]]:
        """This process forked into one running `amdgpu_child.serve` on the descriptors a started child has
        (0: the requests, 1: the answers, 2: `log`) and no others: a copy of another child's request pipe
        kept open in it would keep that child from seeing its end. Its objects are frozen out of the
        collector's sweeps (gc.freeze), which would otherwise copy every page it shares with this process.
        Returns the child and this side's ends of its request and answer pipes."""
        requests_read, requests_write = os.pipe()
        answers_read, answers_write = os.pipe()
        sys.stdout.flush()  # (what this process buffered is written once, by this process)
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                os.dup2(requests_read, 0)
                os.dup2(answers_write, 1)
                os.dup2(log.fileno(), 2)
                os.closerange(3, os.sysconf("SC_OPEN_MAX"))
                gc.freeze()
                gc.enable()  # (forked where lowering held it off: `pipeline._collected_after`)
                serve()
            except BaseException:  # as a started child's Python would end on an uncaught error
                traceback.print_exc()
                os._exit(1)
            os._exit(0)  # not this process's exit handlers: they belong to the parent
        os.close(requests_read)
        os.close(answers_write)
        return cls(pid), os.fdopen(requests_write, "wb"), os.fdopen(answers_read, "rb")

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)


class _CodegenChildren:
    """The idle codegen children of this process, reused by every codegen of the run; a child that died is
    replaced by a fresh one when next needed. Children end when this process does (their stdin closes)."""

    def __init__(self) -> None:
        self._idle: list[_CodegenChild] = []
        self._lock = threading.Lock()
        self._owner = os.getpid()

    def take(self) -> _CodegenChild:
        with self._lock:
            if self._owner != os.getpid():  # a forked process: the children are its parent's
                self._idle, self._owner = [], os.getpid()
            while self._idle:
                child = self._idle.pop()
                if child.alive and child.library == libllvm.library_path():
                    return child
                child.close()
        return _CodegenChild()

    def prepare(self) -> None:
        """An idle child ready for the next codegen, forked now if this process has one thread (the start of a
        codegen, before its threads: `_GroupCodegen`); with threads running, `take` starts one when needed."""
        if not hasattr(os, "fork") or threading.active_count() > 1:
            return
        with self._lock:
            if self._owner != os.getpid():
                self._idle, self._owner = [], os.getpid()
            if any(child.alive and child.library == libllvm.library_path() for child in self._idle):
                return
        self.give(_CodegenChild(forked=True))

    def give(self, child: _CodegenChild) -> None:
        with self._lock:
            if child.alive and self._owner == os.getpid():
                self._idle.append(child)
                return
        if self._owner == os.getpid():
            child.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        if self._owner == os.getpid():
            for child in idle:
                child.close()


_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])  # the directory holding this fatkit package
_WORKERS = _CodegenChildren()
atexit.register(_WORKERS.close)


_LLVM_LINE = re.compile(r"Assertion .* failed|LLVM ERROR:|error:|Error:")
_SOURCE_PATH = re.compile(r"\S*/([^/\s]+\.(?:h|cpp|inc)):(\d+)")


def llvm_message(stderr: str, returncode: int) -> str:
    """What LLVM said when a codegen child failed: its assertion or error line (source paths cut to the file
    name), else the last line of its output, and how the child ended (a signal, or its exit status)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = next((line for line in lines if _LLVM_LINE.search(line)), lines[-1] if lines else "no message")
    said = _SOURCE_PATH.sub(r"\1:\2", said)
    if returncode < 0:
        try:
            ending = signal.Signals(-returncode).name
        except ValueError:
            ending = f"signal {-returncode}"
    else:
        ending = f"exit {returncode}"
    return f"{said[:400]} ({ending})"


def _check_kernel(kernel, lowered: LoweredKernel, wave: int) -> None:
    signature = lowered.signature
    explicit = [(a.get(".offset"), a.get(".size")) for a in kernel.args
                if not str(a.get(".value_kind", "")).startswith("hidden_")]
    layout = [(p.offset, p.size) for p in signature.params]
    if explicit != layout:
        raise FatkitError(f"{signature.name}: kernel arguments {explicit} differ from CUDA's layout {layout}")
    if kernel.kernarg_size < signature.size:
        raise FatkitError(f"{signature.name}: kernarg segment of {kernel.kernarg_size} bytes is smaller than "
                          f"the {signature.size} bytes of PTX parameters")
    # fewer where LLVM removed an unused variable; more by padding where it ordered them otherwise
    if kernel.group_segment_size > lowered.shared_bytes + lowered.shared_padding:
        raise FatkitError(f"{signature.name}: {kernel.group_segment_size} bytes of LDS, more than the "
                          f"{lowered.shared_bytes} bytes of .shared variables (and {lowered.shared_padding} of "
                          "alignment padding)")
    if kernel.wavefront_size != wave:
        raise FatkitError(f"{signature.name}: wavefront size {kernel.wavefront_size}, expected {wave}")


class _WaveExchange(LaneExchange):
    """A value in a VGPR, read across lanes: v_readlane where every lane reads the same lane, else
    ds_bpermute (which takes the byte address lane*4 and moves 32 bits)."""

    def __init__(self, value: ir.Value, lanes: ir.Value, active: ir.Value):
        self.value, self.lanes, self.uniform_lanes = value, lanes, active

    def read(self, builder, lane, uniform):
        module, value, i32 = builder.module, self.value, ir.IntType(32)
        if uniform:
            name = f"llvm.amdgcn.readlane.i{value.type.width}"
            return builder.call(_intrinsic(module, name, value.type, (value.type, i32)), [value, lane])
        permute = _intrinsic(module, "llvm.amdgcn.ds.bpermute", i32, (i32, i32))
        address = builder.shl(lane, ir.Constant(i32, 2))
        if value.type.width == 32:
            return builder.call(permute, [address, value])
        i64 = ir.IntType(64)
        low = builder.call(permute, [address, builder.trunc(value, i32)])
        high = builder.call(permute, [address, builder.trunc(builder.lshr(value, ir.Constant(i64, 32)), i32)])
        return builder.or_(builder.zext(low, i64), builder.shl(builder.zext(high, i64), ir.Constant(i64, 32)))


def tanh_from_exp2(builder: ir.IRBuilder, x: ir.Value, exp2) -> ir.Value:
    """tanh of f32 `x` from an exp2 (AMDGPU has no tanh instruction), within 2^-11 relative error:
    1 − 2/(e^2|x| + 1) with the sign of x, or |x|(1 − x²/3) below 2^-6, where the subtraction would
    cancel (and subnormals pass through, as PTX's tanh.approx does)."""
    f32 = x.type
    fabs = _intrinsic(builder.module, "llvm.fabs.f32", f32, (f32,))
    copysign = _intrinsic(builder.module, "llvm.copysign.f32", f32, (f32, f32))
    magnitude = builder.call(fabs, [x])
    power = exp2(builder.fmul(magnitude, ir.Constant(f32, 2 / math.log(2))))
    large = builder.fsub(ir.Constant(f32, 1.0),
                         builder.fdiv(ir.Constant(f32, 2.0), builder.fadd(power, ir.Constant(f32, 1.0))))
    cubic = builder.fmul(magnitude, builder.fsub(
        ir.Constant(f32, 1.0), builder.fmul(builder.fmul(magnitude, magnitude), ir.Constant(f32, 1 / 3))))
    small = builder.fcmp_unordered("<", magnitude, ir.Constant(f32, 2.0 ** -6))  # NaN takes this way too
    return builder.call(copysign, [builder.select(small, cubic, large), x])


def _intrinsic(module: ir.Module, name: str, result: ir.Type, args: tuple[ir.Type, ...]) -> ir.Function:
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(result, args), name)


def grouped(kernels: list[LoweredKernel]) -> list[list[LoweredKernel]]:
    """The kernels (in module order) by codegen group (`LoweredKernel.group`), in group order."""
    groups: dict[int, list[LoweredKernel]] = {}
    for kernel in kernels:
        groups.setdefault(kernel.group, []).append(kernel)
    return list(groups.values())


class _GroupCodegen(Codegen):
    """The amdgpu codegen: each group compiled in a codegen child (`AmdgpuTarget._objects`) from a thread of
    its own, up to `jobs` at once; with `jobs` > 1 a group starts as soon as lowering hands it in (while the
    other kernels still lower), with one job only once lowering is done (one process at a time). The objects
    are linked in group order, so the product is the same whichever group finishes first."""

    target: AmdgpuTarget

    def __init__(self, target: AmdgpuTarget, opt_level: int, jobs: int):
        super().__init__(target, opt_level, jobs)
        _WORKERS.prepare()  # (before the pool's threads)
        self.pool = ThreadPoolExecutor(max_workers=jobs)
        self.started: dict[int, tuple[list[str], Future[list[bytes]]]] = {}
        self.failed: dict[str, str] = {}

    def add(self, kernels: list[LoweredKernel]) -> None:
        if self.jobs > 1 and kernels:
            self._start(kernels)

    def _start(self, kernels: list[LoweredKernel]) -> None:
        names = [k.signature.name for k in kernels]
        self.started[kernels[0].group] = names, self.pool.submit(self.target._objects, kernels, self.opt_level,
                                                                 self.failed)

    def finish(self, kernels: list[LoweredKernel]) -> Compiled:
        groups = grouped(kernels)
        for group in groups:
            started = self.started.get(group[0].group)
            if started is not None and started[0] != [k.signature.name for k in group]:
                raise FatkitError(f"codegen group {group[0].group} was started with other kernels than it holds")
        # the largest groups first, so that a big one last does not leave the other jobs idle
        for group in sorted((g for g in groups if g[0].group not in self.started),
                            key=lambda g: -sum(len(k.llvm_ir) for k in g)):
            self._start(group)
        objects = [o for group in groups for o in self.started[group[0].group][1].result()]
        failed = self.failed
        if not objects:
            raise FatkitError(f"LLVM codegen for {self.target.processor} failed on every kernel: "
                              + "; ".join(f"{name}: {failed[name]}" for name in sorted(failed)))
        clusters = {k.signature.name: cluster_metadata(k) for k in kernels if k.cluster or k.launch_cluster}
        if clusters:
            objects = [with_cluster_metadata(data, clusters) for data in objects]
        product = link(objects if len(objects) == 1 else with_one_metadata_note(objects))
        order = [k.signature.name for k in kernels]
        return Compiled(product, {name: failed[name] for name in order if name in failed})

    def __exit__(self, *exception: object) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def with_one_metadata_note(objects: list[bytes]) -> list[bytes]:
    """Relocatable objects compiled apart, changed so that linking them gives one NT_AMDGPU_METADATA note.

    Each object lists its own kernels in its own note, and ld.lld would concatenate the notes; a loader reads
    one. The first object's note section is rewritten (appended at the end of the file, its section header
    pointed there) to hold the merged metadata — every object's `amdhsa.kernels`, in order — and the other
    objects' metadata notes are removed from their note sections."""
    found = [_metadata_note_section(data) for data in objects]
    merged = dict(found[0][2])
    merged["amdhsa.kernels"] = [kernel for _, _, metadata, _ in found for kernel in metadata["amdhsa.kernels"]]
    return [_with_note_section(data, *found[index][:2], (merged if index == 0 else None), found[index][3])
            for index, data in enumerate(objects)]


def cluster_metadata(kernel: LoweredKernel) -> dict[str, object]:
    """The metadata entries that tell the shim a kernel's cluster launch geometry."""
    if kernel.cluster is not None:
        return {CLUSTER_DIMS_KEY: list(kernel.cluster)}
    return {CLUSTER_SHAPE_OFFSET_KEY: kernel.signature.params[-1].offset, CLUSTER_MAX_CTAS_KEY: kernel.launch_cluster}


def with_cluster_metadata(data: bytes, clusters: dict[str, dict[str, object]]) -> bytes:
    """A relocatable object whose metadata note gives each kernel of `clusters` (name → its entries,
    `cluster_metadata`) the launch geometry the shim owes it."""
    view, section, metadata, notes = _metadata_note_section(data)
    for kernel in metadata["amdhsa.kernels"]:
        if kernel.get(".name") in clusters:
            kernel.update(clusters[kernel[".name"]])
    return _with_note_section(data, view, section, metadata, notes)


def _metadata_note_section(data: bytes) -> tuple[ElfView, Section, dict, list[Note]]:
    """The object's note section holding its AMDGPU metadata note, that metadata, and the section's notes."""
    view = ElfView(data)
    for section in view.sections:
        if section.type != SHT_NOTE:
            continue
        notes = [n for n in view.notes() if section.offset <= n.offset < section.offset + section.size]
        for note in notes:
            if note.owner == "AMDGPU" and note.type == NT_AMDGPU_METADATA:
                return view, section, msgpack.unpackb(note.desc, raw=False), notes
    raise FatkitError("a relocatable object from LLVM has no AMDGPU metadata note")


def _with_note_section(data: bytes, view: ElfView, section: Section, metadata: dict | None,
                       notes: list[Note]) -> bytes:
    """`data` whose note section holds `notes` with the metadata note replaced by `metadata` (or left out)."""
    content = bytearray()
    for note in notes:
        desc = note.desc
        if note.owner == "AMDGPU" and note.type == NT_AMDGPU_METADATA:
            if metadata is None:
                continue
            desc = msgpack.packb(metadata, use_bin_type=True)
        name = note.owner.encode() + b"\0"
        content += struct.pack("<III", len(name), len(desc), note.type)
        content += name.ljust(align(len(name), 4), b"\0") + desc.ljust(align(len(desc), 4), b"\0")
    patched = bytearray(data)
    patched += bytes(align(len(patched), 4) - len(patched))
    start = len(patched)
    patched += content
    struct.pack_into("<Q", patched, view.section_header_field(section.index, "sh_offset"), start)
    struct.pack_into("<Q", patched, view.section_header_field(section.index, "sh_size"), len(content))
    return bytes(patched)


def link(relocatables: list[bytes]) -> bytes:
    """`ld.lld -shared --no-undefined` (ziglang's LLD) of relocatable objects into one code object."""
    with tempfile.TemporaryDirectory(prefix="fatkit-link-") as tmp:
        sources = [Path(tmp, f"kernels{index}.o") for index in range(len(relocatables))]
        for source, relocatable in zip(sources, relocatables):
            source.write_bytes(relocatable)
        output = Path(tmp, "kernels.hsaco")
        try:
            linker = subprocess.run(
                [_zig(), "ld.lld", "-shared", "--no-undefined", *map(str, sources), "-o", str(output)],
                capture_output=True, timeout=_CODEGEN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise FatkitError(f"ld.lld took longer than {_CODEGEN_TIMEOUT_S} s") from None
        if linker.returncode != 0:
            raise FatkitError("ld.lld failed: " + linker.stderr.decode(errors="replace").strip())
        return output.read_bytes()


_SWITCH = re.compile(r"^\s*(?:s_round_mode|s_setreg_imm32_b32 hwreg\(HW_REG_MODE, 0, 4\),) (0x[0-9a-f]+)\s*$")
# what may lie between two switches without being rounded: assembler comments, waits and hints, moves
_NEUTRAL = re.compile(r"^\s*(?:;.*|s_nop \d+|s_delay_alu .*|s_waitcnt\S* .*|s_mov_b(?:32|64) .*|v_mov_b32\S* .*|"
                      r"v_dual_mov_b32 [^:]*:: v_dual_mov_b32 .*)?$")


_LABEL = re.compile(r"^([A-Za-z_$][\w.$]*):")
_MODE_WRITE = re.compile(r"^\s*(?:s_setreg\S*|s_denorm_mode|s_round_mode)\s")
_SAVE = re.compile(r"^\s*s_getreg_b32 (s\d+), hwreg\(HW_REG_MODE, 0, 8\)\s*$")
_SET = re.compile(r"^\s*s_setreg_imm32_b32 hwreg\(HW_REG_MODE, 0, 8\), 0x([0-9a-f]+)\s*$")


def known_mode_blocks(assembly: str, generation: int) -> str:
    """The flushing form of `AmdgpuTarget.directed` (MODE saved, rounding and f32 flushing set, MODE
    restored) as the plain one (FP_ROUND set, then back to nearest even) in each kernel whose descriptor
    flushes f32 subnormals and whose code writes MODE nowhere else than in fatkit's blocks: no LLVM window
    with subnormals kept then (its f32 division), so the mode the block saves is the entry's, f32 flushed
    and rounding to nearest even, which the plain form keeps and restores. Plain switches also share
    (`shared_switches`)."""
    out: list[str] = []
    body: list[str] | None = None  # the current function's lines from its label on
    inside_asm = unknown = False
    for line in assembly.split("\n"):
        stripped = line.strip()
        if body is None:
            if _LABEL.match(line):
                body = [line]
            else:
                out.append(line)
            continue
        if stripped in (";;#ASMSTART", ";;#ASMEND"):
            inside_asm = stripped == ";;#ASMSTART"
        elif not inside_asm and _MODE_WRITE.match(line):
            unknown = True
        elif stripped.startswith(".Lfunc_end"):
            flushing = ".amdhsa_float_denorm_mode_32 0" in (s.strip() for s in body)
            out += _plain_blocks(body, generation) if flushing and not unknown else body
            body, unknown = None, False
            out.append(line)
            continue
        body.append(line)
    return "\n".join(out + (body or []))


def _plain_blocks(body: list[str], generation: int) -> list[str]:
    """`known_mode_blocks` in one kernel: each save (s_getreg) dropped, the set of rounding and flushing
    narrowed to the rounding, the restore from the saved register a switch back to nearest even."""
    out = list(body)
    dropped = set()
    for index, line in enumerate(body[:-1]):
        saved, mode = _SAVE.match(line), _SET.match(body[index + 1])
        if saved is None or mode is None:
            continue
        restore = f"s_setreg_b32 hwreg(HW_REG_MODE, 0, 8), {saved.group(1)}"
        end = next(k for k in range(index + 2, len(body)) if body[k].strip() == restore)
        rounding = int(mode.group(1), 16) & 0xF
        dropped.add(index)
        if generation >= 10:
            out[index + 1], out[end] = f"s_round_mode {rounding:#x}", "s_round_mode 0x0"
        else:
            out[index + 1] = f"s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), {rounding:#x}"
            out[end] = "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), 0x0"
    return [line for index, line in enumerate(out) if index not in dropped]


def shared_switches(assembly: str) -> str:
    """Consecutive directed operations (`AmdgpuTarget.directed`) share one switch: a switch back to round to
    nearest even followed by another switch, with only `_NEUTRAL` lines between, is dropped, and the second
    switch too where it sets the mode in effect before, each with the gfx9 `s_nop` it needed."""
    lines = assembly.split("\n")
    dropped: set[int] = set()
    mode = 0
    for index, line in enumerate(lines):
        m = _SWITCH.match(line)
        if m is None:
            continue
        value = int(m.group(1), 16)
        if value:
            mode = value
            continue
        following = index + 1
        while following < len(lines) and _NEUTRAL.match(lines[following]) and not _SWITCH.match(lines[following]):
            following += 1
        if following < len(lines) and (m := _SWITCH.match(lines[following])) and int(m.group(1), 16):
            dropped.update(_with_wait(lines, index))
            if int(m.group(1), 16) == mode:
                dropped.update(_with_wait(lines, following))
    return "\n".join(line for index, line in enumerate(lines) if index not in dropped)


def _with_wait(lines: list[str], index: int) -> list[int]:
    """The switch at `index` and the gfx9 `s_nop` of its block before it (the wait states it needed)."""
    return [index - 1, index] if index and re.fullmatch(r"\s*s_nop [01]", lines[index - 1]) else [index]


def assembled(assembly: bytes, processor: str) -> bytes:
    """AMDGPU assembly → a relocatable object, by `zig clang -cc1as` (clang's integrated assembler)."""
    with tempfile.TemporaryDirectory(prefix="fatkit-as-") as tmp:
        source, output = Path(tmp, "kernels.s"), Path(tmp, "kernels.o")
        source.write_bytes(assembly)
        try:
            assembler = subprocess.run(
                [_zig(), "clang", "-cc1as", "-triple", TRIPLE, "-target-cpu", processor, "-filetype", "obj",
                 "-mrelocation-model", "pic", str(source), "-o", str(output)],
                capture_output=True, timeout=_CODEGEN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise FatkitError(f"the assembler took longer than {_CODEGEN_TIMEOUT_S} s") from None
        if assembler.returncode != 0:
            message = assembler.stderr.decode(errors="replace").strip()
            raise CodegenFailed(f"assembling the {processor} code failed: {message}", message)
        return output.read_bytes()


def _zig() -> str:
    """The zig executable of the PyPI package ziglang, run directly: `python -m ziglang` would start a Python
    interpreter (~0.13 s) only to exec it."""
    import ziglang

    return str(Path(ziglang.__file__).parent / ("zig.exe" if os.name == "nt" else "zig"))
