"""The `host` target: lowered kernels JIT-compiled for this CPU and run as a loop over threads (tests).

A host kernel is `void name(ptr kernarg, ptr sregs)`: `kernarg` is CUDA's parameter buffer, from which the
kernel loads each parameter at its CUDA offset; `sregs` holds twelve i32 — %tid, %ntid, %ctaid, %nctaid,
each .x/.y/.z — that the launch loop sets per thread. Blocks run one after another, so a `.shared`
variable is a plain global: each block finds it as the previous block left it, which CUDA allows
(shared memory starts undefined). Kernels without barriers run thread after thread; kernels with
barriers run each thread of a block on its own OS thread (ctypes lets go of the GIL during the call), and
`bar.sync 0` calls back into a barrier that threads which have returned stop counting in.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from dataclasses import dataclass
from functools import cached_property
from itertools import product
from typing import Sequence

from llvmlite import binding as llvm
from llvmlite import ir

from fatkit.errors import FatkitError, UsageError
from fatkit.translate.targets.base import DIM_REGISTERS, KernelSignature, LoweredKernel, Target

_SREG_SLOTS = {(reg, c): 3 * i + j for i, reg in enumerate(DIM_REGISTERS) for j, c in enumerate("xyz")}
_PACK = {"u8": "B", "s8": "b", "b8": "B", "u16": "H", "s16": "h", "b16": "H", "u32": "I", "s32": "i",
         "b32": "I", "u64": "Q", "s64": "q", "b64": "Q", "f32": "f", "f64": "d"}
_KERNEL_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
BARRIER_SYMBOL = "fatkit_host_barrier"


class _BlockBarrier:
    """bar.sync 0 for one block's threads; a thread that has returned no longer counts."""

    def __init__(self, threads: int) -> None:
        self.live, self.arrived, self.generation = threads, 0, 0
        self.condition = threading.Condition()

    def wait(self) -> None:
        with self.condition:
            generation = self.generation
            self.arrived += 1
            if self.arrived == self.live:
                self._release()
            while generation == self.generation:
                self.condition.wait()

    def leave(self) -> None:
        with self.condition:
            self.live -= 1
            if self.arrived and self.arrived == self.live:
                self._release()

    def _release(self) -> None:
        self.arrived, self.generation = 0, self.generation + 1
        self.condition.notify_all()


_block = threading.local()  # the barrier of the block the calling thread belongs to


@ctypes.CFUNCTYPE(None)
def _barrier_callback() -> None:
    _block.barrier.wait()


def _initialise_llvm() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.add_symbol(BARRIER_SYMBOL, ctypes.cast(_barrier_callback, ctypes.c_void_p).value)


class HostTarget(Target):
    name = "host"
    context_arguments = 2  # kernarg, sregs
    shared_address_space = 0
    shared_window = True

    def __init__(self) -> None:
        _initialise_llvm()
        self.triple = llvm.get_process_triple()

    @cached_property
    def target_machine(self) -> llvm.TargetMachine:
        return llvm.Target.from_triple(self.triple).create_target_machine(jit=True)

    @property
    def data_layout(self) -> str:
        return str(self.target_machine.target_data)

    def define_kernel(self, module, signature, param_types):
        i8ptr = ir.PointerType()
        function = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8ptr, i8ptr]), signature.name)
        kernarg, sregs = function.args
        kernarg.name, sregs.name = "kernarg", "sregs"
        builder = ir.IRBuilder(function.append_basic_block("entry"))
        values = []
        for param, llvm_type in zip(signature.params, param_types):
            address = builder.gep(kernarg, [ir.Constant(ir.IntType(64), param.offset)],
                                  source_etype=ir.IntType(8))
            values.append(address if param.array else builder.load(address, typ=llvm_type, align=param.align))
        return function, builder, values

    def special_register(self, builder, register, component):
        sregs = builder.function.args[1]
        slot = builder.gep(sregs, [ir.Constant(ir.IntType(64), _SREG_SLOTS[register, component])],
                           source_etype=ir.IntType(32))
        return builder.load(slot, typ=ir.IntType(32), align=4)

    def barrier(self, builder):
        module = builder.module
        callback = module.globals.get(BARRIER_SYMBOL) or ir.Function(
            module, ir.FunctionType(ir.VoidType(), []), BARRIER_SYMBOL)
        builder.call(callback, [])

    def codegen(self, kernels: list[LoweredKernel], opt_level: int) -> "HostProgram":
        module = llvm.parse_assembly(kernels[0].llvm_ir)
        for kernel in kernels[1:]:
            module.link_in(llvm.parse_assembly(kernel.llvm_ir))
        module.verify()
        if opt_level:
            tuning = llvm.create_pipeline_tuning_options(speed_level=opt_level)
            builder = llvm.create_pass_builder(self.target_machine, tuning)
            builder.getModulePassManager().run(module, builder)
        engine = llvm.create_mcjit_compiler(module, self.target_machine)
        engine.finalize_object()
        return HostProgram(engine, module, {k.signature.name: k.signature for k in kernels},
                           frozenset(k.signature.name for k in kernels if k.barriers))

    def validate(self, product: "HostProgram", kernels: list[LoweredKernel]) -> "HostProgram":
        for kernel in kernels:
            if not product.engine.get_function_address(kernel.signature.name):
                raise FatkitError(f"host code lacks kernel {kernel.signature.name}")
        return product


@dataclass
class HostProgram:
    """JIT-compiled kernels; `launch` runs one over a grid, block after block (see the module docstring)."""

    engine: llvm.ExecutionEngine
    module: llvm.ModuleRef  # kept alive with the engine that owns its code
    signatures: dict[str, KernelSignature]
    with_barriers: frozenset[str] = frozenset()  # kernels whose block's threads must run together

    def pack(self, kernel: str, args: Sequence[int | float | bytes]) -> ctypes.Array:
        """CUDA's parameter buffer for `args` (pointers as integers, array parameters as their bytes),
        laid out per the kernel's signature."""
        signature = self.signatures[kernel]
        if len(args) != len(signature.params):
            raise UsageError(f"{kernel} takes {len(signature.params)} arguments, got {len(args)}")
        buffer = (ctypes.c_uint8 * max(signature.size, 1))()
        for param, value in zip(signature.params, args):
            if not param.array:
                struct.pack_into("<" + _PACK[param.type], buffer, param.offset, value)
            elif isinstance(value, (bytes, bytearray)) and len(value) == param.size:
                buffer[param.offset:param.offset + param.size] = value
            else:
                raise UsageError(f"{kernel}: parameter {param.name} takes {param.size} bytes")
        return buffer

    def launch(self, kernel: str, args: Sequence[int | float | bytes], grid: Sequence[int] = (1, 1, 1),
               block: Sequence[int] = (1, 1, 1)) -> None:
        if kernel not in self.signatures:
            raise UsageError(f"no kernel {kernel!r} in this program")
        function = _KERNEL_TYPE(self.engine.get_function_address(kernel))
        kernarg = self.pack(kernel, args)
        grid, block = (tuple(grid) + (1, 1))[:3], (tuple(block) + (1, 1))[:3]
        sregs = (ctypes.c_int32 * 12)()
        sregs[3:6], sregs[9:12] = block, grid
        for ctaid in product(*(range(n) for n in reversed(grid))):
            sregs[6:9] = ctaid[::-1]
            threads = list(product(*(range(n) for n in reversed(block))))
            if kernel in self.with_barriers:
                _run_block_together(function, kernarg, sregs, threads)
                continue
            for tid in threads:
                sregs[0:3] = tid[::-1]
                function(ctypes.addressof(kernarg), ctypes.addressof(sregs))


def _run_block_together(function, kernarg: ctypes.Array, sregs: ctypes.Array, threads: list[tuple]) -> None:
    """One OS thread per GPU thread of the block, each with its own special registers."""
    barrier = _BlockBarrier(len(threads))

    def run(tid: tuple) -> None:
        own = (ctypes.c_int32 * 12)(*sregs)
        own[0:3] = tid[::-1]
        _block.barrier = barrier
        try:
            function(ctypes.addressof(kernarg), ctypes.addressof(own))
        finally:
            barrier.leave()

    workers = [threading.Thread(target=run, args=(tid,)) for tid in threads]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
