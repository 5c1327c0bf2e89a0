"""The `host` target: lowered kernels JIT-compiled for this CPU and run as a loop over threads (tests).

A host kernel is `void name(ptr kernarg, ptr sregs)`: `kernarg` is CUDA's parameter buffer, from which the
kernel loads each parameter at its CUDA offset; `sregs` holds twelve i32 — %tid, %ntid, %ctaid, %nctaid,
each .x/.y/.z — that the launch loop sets per thread. Blocks run one after another, so a `.shared`
variable is a plain global: each block finds it as the previous block left it, which CUDA allows
(shared memory starts undefined). Kernels without barriers run thread after thread; kernels with
barriers or warp collectives run each thread of a block on its own OS thread (ctypes lets go of the GIL
during the call), and `bar.sync 0` calls back into a barrier that threads which have returned stop counting
in. A warp is 32 threads in linear thread order (the last one of a block may be partial); its collectives
call back into a rendezvous (`_Warp`) where the threads a membermask names publish a value and read the
others'. `HostTarget(wave_size=64)` groups 64 threads a wave, two warps, as gfx9 does. Two more i32 slots after
the twelve hold %gridid, the launch's number.
Named barriers (ids, thread counts, bar.arrive, bar.red) call back into `_NamedBarriers`. Dynamic shared
memory (`launch(..., shared_bytes=N)`) lies in the shared window after the static variables, which
reserves DYNAMIC_SHARED_CAPACITY bytes for it; %dynamic_smem_size reads a global the launch sets. A
generic address is .local where it lies on the calling thread's stack.
"""

from __future__ import annotations

import ctypes
import itertools
import struct
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from itertools import product
from typing import Sequence

from llvmlite import binding as llvm
from llvmlite import ir

from fatkit.errors import FatkitError, UsageError
from fatkit.translate.targets.base import (
    DIM_REGISTERS, NAMED_BARRIER_OPERATIONS, Compiled, KernelSignature, LaneExchange, LoweredKernel, Target,
    linked_and_optimised,
)

_SREG_SLOTS = {(reg, c): 3 * i + j for i, reg in enumerate(DIM_REGISTERS) for j, c in enumerate("xyz")}
_PACK = {"u8": "B", "s8": "b", "b8": "B", "u16": "H", "s16": "h", "b16": "H", "u32": "I", "s32": "i",
         "b32": "I", "u64": "Q", "s64": "q", "b64": "Q", "f32": "f", "f64": "d"}
_KERNEL_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
BARRIER_SYMBOL = "fatkit_host_barrier"
_SREG_COUNT, _GRIDID_SLOT = 14, 12  # the dimension registers, then %gridid as an i64
WARP = 32
_DEADLOCK_S = 30.0  # a rendezvous still waiting after this long never completes (mismatched membermasks)
_launches = itertools.count(1)
DYNAMIC_SHARED_CAPACITY = 227 * 1024  # the most dynamic shared memory a CUDA block may have (sm_90)
# Named barrier ids of a block: a CTA's 16, for each of the up to 16 CTAs of a cluster that runs as one block
# (lower/cluster.py gives barrier b of CTA r the id 1 + b·k + r).
NAMED_BARRIER_IDS = 16 * 16 + 1


def dynamic_shared_symbol(kernel: str) -> str:
    return f"fatkit.dynamic_shared.{kernel}"


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


class _Meeting:
    """One rendezvous of a warp's threads: the lanes that arrived, their values, whether it is over."""

    def __init__(self, width: int) -> None:
        self.lanes, self.values, self.done = 0, [0] * width, False

    def join(self, lane: int, value: int) -> None:
        self.lanes |= 1 << lane
        self.values[lane] = value


class _Warp:
    """The threads of one warp meeting for warp collectives.

    A thread meets the others its membermask names at a collective of the same kind and mask and waits
    until every one of them that has not returned arrived. `activemask` has no mask to wait for: once every
    thread of the warp waits somewhere (a meeting, `bar.sync`, an `activemask`) or has returned, the threads
    waiting at the same `activemask` instruction are the ones executing it together. Misuse (a thread
    outside its own membermask, a meeting that never completes) is recorded in `errors`, and the launch
    raises it."""

    def __init__(self, threads: int, width: int, errors: list[str]) -> None:
        self.width = width  # lanes of a full warp (of a wave, where the target makes waves of 64)
        self.live = (1 << threads) - 1  # lanes that have not returned
        self.parked = 0  # lanes waiting and not yet released
        self.meetings: dict[tuple[str, int], _Meeting] = {}
        self.sites: dict[int, _Meeting] = {}  # activemask groups forming, by instruction
        self.condition = threading.Condition()
        self.errors = errors

    def meet(self, lane: int, kind: str, members: int, value: int) -> _Meeting:
        with self.condition:
            if not members >> lane & 1:
                self.errors.append(f"lane {lane} executed a warp {kind} whose membermask {members:#010x} "
                                   "leaves it out (undefined in PTX)")
                alone = _Meeting(self.width)
                alone.join(lane, value)
                return alone
            meeting = self.meetings.setdefault((kind, members), _Meeting(self.width))
            return self._wait_in(meeting, lane, value, f"{kind} with membermask {members:#010x}")

    def active(self, lane: int, site: int) -> int:
        with self.condition:
            return self._wait_in(self.sites.setdefault(site, _Meeting(self.width)), lane, 0, "activemask").lanes

    @contextmanager
    def waiting_elsewhere(self):
        """Count the calling thread as waiting (at a block or named barrier) while the block runs on."""
        with self.condition:
            self.parked += 1
            self._settle()
        try:
            yield
        finally:
            with self.condition:
                self.parked -= 1

    def leave(self, lane: int) -> None:
        with self.condition:
            self.live &= ~(1 << lane)
            self._settle()

    def _wait_in(self, meeting: _Meeting, lane: int, value: int, what: str) -> _Meeting:
        meeting.join(lane, value)
        self.parked += 1
        self._settle()
        if not self.condition.wait_for(lambda: meeting.done, timeout=_DEADLOCK_S):
            self.errors.append(f"lanes {meeting.lanes:#010x} waited {_DEADLOCK_S:g} s at a {what} for lanes "
                               "that never came")
            self._finish(meeting)
            for group in (self.meetings, self.sites):
                for key in [k for k, v in group.items() if v is meeting]:
                    del group[key]
        return meeting

    def _settle(self) -> None:
        """Finish the meetings every live member reached; group activemask once the whole warp waits."""
        for key, meeting in list(self.meetings.items()):
            if key[1] & self.live & ~meeting.lanes == 0:
                del self.meetings[key]
                self._finish(meeting)
        if self.sites and self.parked == self.live.bit_count():
            for meeting in self.sites.values():
                self._finish(meeting)
            self.sites.clear()

    def _finish(self, meeting: _Meeting) -> None:
        meeting.done = True
        self.parked -= meeting.lanes.bit_count()
        self.condition.notify_all()


class _NamedBarriers:
    """bar/barrier 0–15 of one block: a barrier completes once `expected` threads arrived (0: every thread
    of the block that has not returned), counting each thread; `arrive` goes on at once, `sync` and the
    reductions wait for completion, and a reduction returns the popc/and/or of the phase's predicates.
    A phase that never completes (a count no thread set can reach) is recorded in `errors`."""

    def __init__(self, threads: int, errors: list[str]) -> None:
        self.live, self.errors = threads, errors
        ids = NAMED_BARRIER_IDS
        self.arrived, self.votes, self.expected = [0] * ids, [0] * ids, [0] * ids
        self.generation = [0] * ids
        self.results: dict[tuple[int, int], tuple[int, int]] = {}  # (barrier, generation) → (votes, arrivals)
        self.condition = threading.Condition()

    def arrive(self, barrier: int, expected: int, operation: int, predicate: int) -> int:
        if barrier >= NAMED_BARRIER_IDS:
            self.errors.append(f"barrier {barrier} does not exist (0–{NAMED_BARRIER_IDS - 1})")
            return 0
        with self.condition:
            generation = self.generation[barrier]
            self.arrived[barrier] += 1
            self.votes[barrier] += bool(predicate)
            self.expected[barrier] = expected
            self._complete(barrier)
            if operation == NAMED_BARRIER_OPERATIONS["arrive"]:
                return 0
            if not self.condition.wait_for(lambda: self.generation[barrier] != generation, timeout=_DEADLOCK_S):
                self.errors.append(f"barrier {barrier} waited {_DEADLOCK_S:.0f} s for {expected or self.live} "
                                   f"threads, {self.arrived[barrier]} came")
                return 0
            votes, arrivals = self.results[barrier, generation]
        return {NAMED_BARRIER_OPERATIONS["popc"]: votes, NAMED_BARRIER_OPERATIONS["and"]: int(votes == arrivals),
                NAMED_BARRIER_OPERATIONS["or"]: int(votes > 0)}.get(operation, 0)

    def leave(self) -> None:
        with self.condition:
            self.live -= 1
            for barrier in range(NAMED_BARRIER_IDS):
                self._complete(barrier)

    def _complete(self, barrier: int) -> None:
        arrived = self.arrived[barrier]
        if arrived and arrived >= (self.expected[barrier] or self.live):
            generation = self.generation[barrier]
            self.results[barrier, generation] = self.votes[barrier], arrived
            self.results.pop((barrier, generation - 2), None)  # every waiter of that phase has read it
            self.arrived[barrier] = self.votes[barrier] = 0
            self.generation[barrier] = generation + 1
            self.condition.notify_all()


class _StackBounds(ctypes.Structure):
    _fields_ = [("attributes", ctypes.c_byte * 128), ("start", ctypes.c_void_p), ("size", ctypes.c_size_t)]


def _thread_stack() -> tuple[int, int]:
    """[start, end) of the calling OS thread's stack, where a host kernel's .local memory lives (glibc)."""
    bounds = getattr(_block, "stack", None)
    if bounds is None:
        libc, own = ctypes.CDLL(None), _StackBounds()
        libc.pthread_self.restype = ctypes.c_void_p
        if libc.pthread_getattr_np(ctypes.c_void_p(libc.pthread_self()), own.attributes):
            raise FatkitError("pthread_getattr_np failed: the stack of a host thread is unknown")
        libc.pthread_attr_getstack(own.attributes, ctypes.byref(own, _StackBounds.start.offset),
                                   ctypes.byref(own, _StackBounds.size.offset))
        libc.pthread_attr_destroy(own.attributes)
        bounds = _block.stack = (own.start, own.start + own.size)
    return bounds


_block = threading.local()  # the calling thread's block barrier, warp, lane and exchange buffer


@ctypes.CFUNCTYPE(None)
def _barrier_callback() -> None:
    with _block.warp.waiting_elsewhere():
        _block.barrier.wait()


# Lane masks pass as i64 whatever the wave size. The callbacks answer in the thread's own buffers, read
# right after the call.
@ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64)
def _exchange_callback(members: int, value: int) -> int:
    """The lanes' values then the mask of the lanes that took part."""
    meeting = _block.warp.meet(_block.lane, "exchange", members, value)
    buffer, width = _block.buffer, _block.warp.width
    buffer[:width] = meeting.values
    buffer[width] = meeting.lanes
    return ctypes.addressof(buffer)


@ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32)
def _ballot_callback(members: int, predicate: int) -> int:
    """The mask of the lanes voting true, then that of all that voted."""
    meeting = _block.warp.meet(_block.lane, "ballot", members, predicate)
    votes = sum(1 << lane for lane, vote in enumerate(meeting.values) if vote and meeting.lanes >> lane & 1)
    _block.ballot[:] = votes, meeting.lanes
    return ctypes.addressof(_block.ballot)


@ctypes.CFUNCTYPE(None, ctypes.c_uint64)
def _sync_callback(members: int) -> None:
    _block.warp.meet(_block.lane, "bar.warp.sync", members, 0)


@ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint32)
def _active_callback(site: int) -> int:
    return _block.warp.active(_block.lane, site)


@ctypes.CFUNCTYPE(ctypes.c_uint64)
def _globaltimer_callback() -> int:
    return time.time_ns()


@ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32)
def _named_barrier_callback(barrier: int, expected: int, operation: int, predicate: int) -> int:
    with _block.warp.waiting_elsewhere():
        return _block.named.arrive(barrier, expected, operation, predicate)


@ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_uint64)
def _on_stack_callback(address: int) -> int:
    start, end = _thread_stack()
    return int(start <= address < end)


_traps: list[str] = []  # what trapping threads reported; a launch raises the first (list.append is atomic)


def _c_string(address: int) -> str:
    return ctypes.string_at(address).decode(errors="replace") if address else "?"


@ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint64)
def _trap_callback(message: int, file: int, line: int, function: int) -> None:
    """A thread trapped (lowering then ends it); a failed assert passes its strings' addresses, `trap` 0s."""
    if message:
        _traps.append(f"assertion `{_c_string(message)}` failed at {_c_string(file)}:{line} "
                      f"in {_c_string(function)}")
    else:
        _traps.append("trap")


_CALLBACKS = {  # symbol → (callback, LLVM result type, LLVM argument types)
    "fatkit_host_trap": (_trap_callback, ir.VoidType(), (ir.IntType(64), ir.IntType(64), ir.IntType(32),
                                                         ir.IntType(64))),
    BARRIER_SYMBOL: (_barrier_callback, ir.VoidType(), ()),
    "fatkit_host_warp_exchange": (_exchange_callback, ir.PointerType(), (ir.IntType(64), ir.IntType(64))),
    "fatkit_host_warp_ballot": (_ballot_callback, ir.PointerType(), (ir.IntType(64), ir.IntType(32))),
    "fatkit_host_warp_sync": (_sync_callback, ir.VoidType(), (ir.IntType(64),)),
    "fatkit_host_warp_active": (_active_callback, ir.IntType(64), (ir.IntType(32),)),
    "fatkit_host_globaltimer": (_globaltimer_callback, ir.IntType(64), ()),
    "fatkit_host_named_barrier": (_named_barrier_callback, ir.IntType(32), (ir.IntType(32),) * 4),
    "fatkit_host_on_stack": (_on_stack_callback, ir.IntType(32), (ir.IntType(64),)),
}


def _call_back(builder: ir.IRBuilder, symbol: str, args: list[ir.Value]) -> ir.Value:
    _, result, arg_types = _CALLBACKS[symbol]
    module = builder.module
    function = module.globals.get(symbol) or ir.Function(module, ir.FunctionType(result, arg_types), symbol)
    return builder.call(function, args)


def _load_mask(builder: ir.IRBuilder, buffer: ir.Value, index: int, wave: int) -> ir.Value:
    slot = builder.gep(buffer, [ir.Constant(ir.IntType(64), index)], source_etype=ir.IntType(64))
    mask = builder.load(slot, typ=ir.IntType(64))
    return mask if wave == 64 else builder.trunc(mask, ir.IntType(wave))


class _HostExchange(LaneExchange):
    """The buffer `_exchange_callback` filled: a value (as i64) per lane of the wave, then the lanes that
    took part."""

    def __init__(self, builder: ir.IRBuilder, buffer: ir.Value, value_type: ir.IntType, wave: int):
        self.buffer, self.value_type = buffer, value_type
        self.lanes = self.uniform_lanes = _load_mask(builder, buffer, wave, wave)

    def read(self, builder, lane, uniform):
        slot = builder.gep(self.buffer, [lane], source_etype=ir.IntType(64))
        value = builder.load(slot, typ=ir.IntType(64))
        return value if self.value_type.width == 64 else builder.trunc(value, self.value_type)


def _initialise_llvm() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    for symbol, (callback, _, _) in _CALLBACKS.items():
        llvm.add_symbol(symbol, ctypes.cast(callback, ctypes.c_void_p).value)


class HostTarget(Target):
    name = "host"
    context_arguments = 2  # kernarg, sregs
    shared_address_space = 0
    shared_window = True
    named_barrier_calls = True
    dynamic_shared_capacity = DYNAMIC_SHARED_CAPACITY

    def __init__(self, wave_size: int = WARP) -> None:
        """`wave_size` 64 runs two warps a wave, as AMD's gfx9 does: what checks that logic on the CPU."""
        _initialise_llvm()
        self.triple = llvm.get_process_triple()
        self.wave_size = wave_size
        self._activemask_sites = itertools.count()

    @cached_property
    def target_machine(self) -> llvm.TargetMachine:
        return llvm.Target.from_triple(self.triple).create_target_machine(jit=True)

    def machine(self) -> llvm.TargetMachine:
        return self.target_machine

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
        _call_back(builder, BARRIER_SYMBOL, [])

    def named_barrier(self, builder, barrier, expected, operation, predicate):
        i32 = ir.IntType(32)
        return _call_back(builder, "fatkit_host_named_barrier",
                          [barrier, expected, ir.Constant(i32, operation), builder.zext(predicate, i32)])

    def dynamic_shared_size(self, builder):
        # A global of the kernel's module (named after the kernel) that `HostProgram.launch` sets.
        module, name = builder.module, dynamic_shared_symbol(builder.module.name)
        size = module.globals.get(name)
        if size is None:
            size = ir.GlobalVariable(module, ir.IntType(32), name)
            size.initializer = ir.Constant(ir.IntType(32), 0)
        return builder.load(size, typ=ir.IntType(32), align=4)

    def in_aperture(self, builder, space, address):
        if space != "local":  # .shared is the lowering's window
            return super().in_aperture(builder, space, address)
        on_stack = _call_back(builder, "fatkit_host_on_stack", [address])
        return builder.trunc(on_stack, ir.IntType(1))

    def lane_id(self, builder):
        return builder.and_(self.linear_thread(builder), ir.Constant(ir.IntType(32), self.wave_size - 1))

    def _mask64(self, builder, mask):
        return mask if self.wave_size == 64 else builder.zext(mask, ir.IntType(64))

    def exchange(self, builder, value, members):
        wide = value if value.type.width == 64 else builder.zext(value, ir.IntType(64))
        buffer = _call_back(builder, "fatkit_host_warp_exchange", [self._mask64(builder, members), wide])
        return _HostExchange(builder, buffer, value.type, self.wave_size)

    def ballot(self, builder, predicate, members):
        vote = builder.zext(predicate, ir.IntType(32))
        buffer = _call_back(builder, "fatkit_host_warp_ballot", [self._mask64(builder, members), vote])
        return _load_mask(builder, buffer, 0, self.wave_size), _load_mask(builder, buffer, 1, self.wave_size)

    def active_lanes(self, builder):
        site = ir.Constant(ir.IntType(32), next(self._activemask_sites))
        mask = _call_back(builder, "fatkit_host_warp_active", [site])
        return mask if self.wave_size == 64 else builder.trunc(mask, ir.IntType(32))

    def wave_barrier(self, builder, members):
        _call_back(builder, "fatkit_host_warp_sync", [self._mask64(builder, members)])

    def machine_register(self, builder, register):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        if register == "%clock64":
            function = builder.module.globals.get("llvm.readcyclecounter") or ir.Function(
                builder.module, ir.FunctionType(i64, ()), "llvm.readcyclecounter")
            return builder.call(function, [])
        if register == "%globaltimer":
            return _call_back(builder, "fatkit_host_globaltimer", [])
        if register == "%gridid":
            slot = builder.gep(builder.function.args[1], [ir.Constant(i64, _GRIDID_SLOT)], source_etype=i32)
            return builder.load(slot, typ=i64, align=4)
        return ir.Constant(i32, {"%smid": 0, "%nsmid": 1}[register])  # one CPU "SM"

    def trap(self, builder, assertion):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        _call_back(builder, "fatkit_host_trap", list(assertion) if assertion else
                   [ir.Constant(i64, 0), ir.Constant(i64, 0), ir.Constant(i32, 0), ir.Constant(i64, 0)])

    def breakpoint(self, builder):
        """No debugger drives host threads: execution goes on (llvm.debugtrap would stop the process)."""

    def codegen(self, kernels: list[LoweredKernel], opt_level: int, jobs: int = 1) -> Compiled:
        module = linked_and_optimised([k.llvm_ir for k in kernels], self.target_machine, opt_level)
        engine = llvm.create_mcjit_compiler(module, self.target_machine)
        engine.finalize_object()
        return Compiled(HostProgram(engine, module, {k.signature.name: k.signature for k in kernels},
                                    frozenset(k.signature.name for k in kernels if k.barriers), self.wave_size))

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
    wave_size: int = WARP  # threads a warp rendezvous groups

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
               block: Sequence[int] = (1, 1, 1), shared_bytes: int = 0) -> None:
        """Run `kernel` over `grid`; `shared_bytes` of dynamic shared memory per block (`.extern .shared`)."""
        if kernel not in self.signatures:
            raise UsageError(f"no kernel {kernel!r} in this program")
        if not 0 <= shared_bytes <= DYNAMIC_SHARED_CAPACITY:
            raise UsageError(f"{shared_bytes} bytes of dynamic shared memory: the host allows 0–"
                             f"{DYNAMIC_SHARED_CAPACITY}")
        size = self.engine.get_global_value_address(dynamic_shared_symbol(kernel))
        if size:  # the kernel reads %dynamic_smem_size or %total_smem_size
            ctypes.c_uint32.from_address(size).value = shared_bytes
        function = _KERNEL_TYPE(self.engine.get_function_address(kernel))
        kernarg = self.pack(kernel, args)
        grid, block = (tuple(grid) + (1, 1))[:3], (tuple(block) + (1, 1))[:3]
        sregs = (ctypes.c_int32 * _SREG_COUNT)()
        sregs[3:6], sregs[9:12] = block, grid
        gridid = next(_launches)
        sregs[_GRIDID_SLOT:_GRIDID_SLOT + 2] = gridid & 0xFFFFFFFF, gridid >> 32
        trapped = len(_traps)
        for ctaid in product(*(range(n) for n in reversed(grid))):
            sregs[6:9] = ctaid[::-1]
            threads = list(product(*(range(n) for n in reversed(block))))
            if kernel in self.with_barriers:
                _run_block_together(function, kernarg, sregs, threads, self.wave_size)
            else:
                for tid in threads:
                    sregs[0:3] = tid[::-1]
                    function(ctypes.addressof(kernarg), ctypes.addressof(sregs))
                    if len(_traps) > trapped:
                        break
            if len(_traps) > trapped:  # a trap aborts the whole launch
                raise FatkitError(f"kernel trapped in block {tuple(ctaid[::-1])}: {_traps[trapped]}")


def _run_block_together(function, kernarg: ctypes.Array, sregs: ctypes.Array, threads: list[tuple],
                        wave: int = WARP) -> None:
    """One OS thread per GPU thread of the block (in linear order, x fastest), each with its own special
    registers; raises what the warps' rendezvous recorded as misuse."""
    barrier, errors = _BlockBarrier(len(threads)), []
    named = _NamedBarriers(len(threads), errors)
    warps = [_Warp(min(wave, len(threads) - first), wave, errors) for first in range(0, len(threads), wave)]

    def run(index: int, tid: tuple) -> None:
        own = (ctypes.c_int32 * _SREG_COUNT)(*sregs)
        own[0:3] = tid[::-1]
        _block.barrier, _block.warp, _block.lane = barrier, warps[index // wave], index % wave
        _block.buffer, _block.ballot = (ctypes.c_uint64 * (wave + 1))(), (ctypes.c_uint64 * 2)()
        _block.named = named
        try:
            function(ctypes.addressof(kernarg), ctypes.addressof(own))
        finally:
            barrier.leave()
            named.leave()
            _block.warp.leave(_block.lane)

    workers = [threading.Thread(target=run, args=item) for item in enumerate(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if errors:
        raise FatkitError(f"block {tuple(sregs[6:9])}: {errors[0]}")
