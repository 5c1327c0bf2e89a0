"""The `Target` interface: every target-specific choice lowering makes goes through one of these methods."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

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


class Target(ABC):
    """Where lowered IR is going: triple, address spaces, calling convention, special registers, codegen."""

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

    def finish_module(self, module: ir.Module) -> None:
        """Add module-level settings (flags, metadata) once every function is in."""

    @abstractmethod
    def codegen(self, kernels: list[LoweredKernel], opt_level: int) -> Any:
        """Turn the lowered kernels into the target's product (a code object, a JIT-compiled program)."""

    @abstractmethod
    def validate(self, product: Any, kernels: list[LoweredKernel]) -> Any:
        """Check the product against the kernels it should hold; return it, raising FatkitError if wrong."""
