"""The `Target` interface: every target-specific choice lowering makes goes through one of these methods."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from fatkit.errors import FatkitError

# The special registers this interface answers, each a vector of .x/.y/.z.
DIM_REGISTERS = ("%tid", "%ntid", "%ctaid", "%nctaid")


@dataclass(frozen=True)
class KernelParam:
    """One PTX kernel parameter where CUDA's parameter buffer puts it."""

    name: str
    type: str  # the PTX type: u64, f32, …
    offset: int
    size: int
    align: int
    array: bool = False  # a `.b8 p[N]` aggregate (a by-value struct), passed as bytes


@dataclass(frozen=True)
class KernelSignature:
    """A kernel's name and CUDA parameter-buffer layout; `size` is the buffer's byte count."""

    name: str
    params: tuple[KernelParam, ...]
    size: int


@dataclass(frozen=True)
class LoweredKernel:
    """One kernel lowered on its own: its signature and a complete LLVM module (text) holding it."""

    signature: KernelSignature
    llvm_ir: str
    shared_bytes: int = 0  # static .shared memory of the kernel (LDS on AMDGPU)
    barriers: bool = False  # whether the kernel (or a function it calls) waits at bar.sync


class PointerTo(ir.PointerType):
    """An opaque pointer that remembers what it points at, for the `byref(<type>)`/`byval(<type>)` attributes
    of array kernel parameters (llvmlite prints those attributes with the pointer's pointee)."""

    def __init__(self, pointee: ir.Type, addrspace: int = 0):
        super().__init__(addrspace=addrspace)
        self.pointee = pointee


class LaneExchange(ABC):
    """A value the lanes of one wave published together (`Target.exchange`), readable at any of them.

    `lanes` is the wave mask (an integer of `Target.wave_size` bits) of the lanes that took part, whose
    values `read` returns; a lane outside it reads an unspecified value."""

    lanes: ir.Value

    @abstractmethod
    def read(self, builder: ir.IRBuilder, lane: ir.Value, uniform: bool) -> ir.Value:
        """The value hardware lane `lane` (i32) published; `uniform`: every lane asks for the same lane."""


class Unavailable(FatkitError):
    """A target has no meaningful value for a special register; the message says why."""


class Target(ABC):
    """Where lowered IR is going: triple, address spaces, calling convention, special registers, codegen.

    Warp collectives go through a small hardware-lane interface (`wave_size`, `lane_id`, `exchange`,
    `ballot`, `active_lanes`, `wave_barrier`): lanes are the hardware's, wave masks are `wave_size` bits
    wide, and a 64-lane wave holds two 32-lane PTX warps, whose PTX semantics `lower/warp.py` computes."""

    name: str
    triple: str
    stack_address_space: int = 0
    global_address_space: int = 0
    constant_address_space: int = 0
    # Leading arguments of every lowered function that calls pass on (what special registers read).
    context_arguments: int = 0
    # Where .shared variables live; None where the target cannot run a block's threads together.
    shared_address_space: int | None = None
    shared_window: bool = False  # .shared as offsets into one global (where pointers are wider than 32 bits)

    @property
    @abstractmethod
    def data_layout(self) -> str:
        """The LLVM data layout string of the target machine."""

    @abstractmethod
    def define_kernel(
        self, module: ir.Module, signature: KernelSignature, param_types: list[ir.Type]
    ) -> tuple[ir.Function, ir.IRBuilder, list[ir.Value]]:
        """Declare the kernel and return it, a builder in its entry block and one value per parameter.

        An array parameter comes as `[size x i8]`; its value is a pointer to its bytes in the kernarg segment.
        """

    @abstractmethod
    def special_register(self, builder: ir.IRBuilder, register: str, component: str) -> ir.Value:
        """The i32 value of `%tid`/`%ntid`/`%ctaid`/`%nctaid` component `x`/`y`/`z`."""

    @abstractmethod
    def barrier(self, builder: ir.IRBuilder) -> None:
        """`bar.sync 0`: wait for the block's threads, their shared-memory writes made visible."""

    # Hardware lanes of one wave (the lanes that run in lockstep and exchange values): 32 or 64.
    wave_size: int = 32

    @abstractmethod
    def lane_id(self, builder: ir.IRBuilder) -> ir.Value:
        """The i32 hardware lane of the executing thread in its wave."""

    @abstractmethod
    def exchange(self, builder: ir.IRBuilder, value: ir.Value, members: ir.Value) -> LaneExchange:
        """Publish `value` (i32 or i64) among the lanes of wave mask `members` (the executing lane among
        them), which wait for each other where they do not run in lockstep."""

    @abstractmethod
    def ballot(self, builder: ir.IRBuilder, predicate: ir.Value, members: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(votes, lanes): wave masks of the lanes of `members` that voted `predicate` (i1) true, and of
        all that voted."""

    @abstractmethod
    def active_lanes(self, builder: ir.IRBuilder) -> ir.Value:
        """The wave mask of the lanes executing this point together with the executing one."""

    @abstractmethod
    def wave_barrier(self, builder: ir.IRBuilder, members: ir.Value) -> None:
        """Wait for the lanes of wave mask `members`; their memory accesses before it are visible after."""

    @abstractmethod
    def machine_register(self, builder: ir.IRBuilder, register: str) -> ir.Value:
        """`%clock64` and `%globaltimer` (i64), `%smid`, `%nsmid` (i32), `%gridid` (i64); raises
        `Unavailable` where the target has no meaningful value."""

    def finish_module(self, module: ir.Module) -> None:
        """Add module-level settings (flags, metadata) once every function is in."""

    @abstractmethod
    def codegen(self, kernels: list[LoweredKernel], opt_level: int) -> Any:
        """Turn the lowered kernels into the target's product (a code object, a JIT-compiled program)."""

    @abstractmethod
    def validate(self, product: Any, kernels: list[LoweredKernel]) -> Any:
        """Check the product against the kernels it should hold; return it, raising FatkitError if wrong."""
