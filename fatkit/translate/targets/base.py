"""The `Target` interface: every target-specific choice lowering makes goes through one of these methods."""

from __future__ import annotations

import hashlib

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from collections.abc import Hashable
from typing import Any

from llvmlite import binding as llvm
from llvmlite import ir

from fatkit.errors import FatkitError

# The special registers this interface answers, each a vector of .x/.y/.z.
DIM_REGISTERS = ("%tid", "%ntid", "%ctaid", "%nctaid")
# What a thread does at a named barrier (`Target.named_barrier`): wait, only arrive, or wait and reduce.
NAMED_BARRIER_OPERATIONS = {"sync": 0, "arrive": 1, "popc": 2, "and": 3, "or": 4}


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
    shared_padding: int = 0  # the most alignment padding a different order of the .shared variables adds
    cluster: tuple[int, int, int] | None = None  # the CTAs of a cluster that one workgroup runs (lower/cluster.py)
    launch_cluster: int = 0  # a cluster shape the launch gives (CLUSTER_SHAPE_PARAM): the most CTAs it may hold
    group: int = 0  # the codegen group compiling it with its neighbours of the same number (`Target.codegen_groups`)


@dataclass(frozen=True)
class Compiled:
    """What `Target.codegen` returns: the product, and the kernels left out of it because LLVM failed on each
    of them alone (kernel name → LLVM's message); the product holds every other kernel."""

    product: Any
    failed: dict[str, str] = field(default_factory=dict)


class PointerTo(ir.PointerType):
    """An opaque pointer that remembers what it points at, for the `byref(<type>)`/`byval(<type>)` attributes
    of array kernel parameters (llvmlite prints those attributes with the pointer's pointee)."""

    def __init__(self, pointee: ir.Type, addrspace: int = 0):
        super().__init__(addrspace=addrspace)
        self.pointee = pointee


_LOCAL_NAME_LIMIT = 128


def local_name(name: str) -> str:
    """`name` for an LLVM local value (argument, alloca, block). LLVM cuts local names at 1024 characters, so
    two long PTX parameter names that differ only at the end (C++ kernels' `<mangled>_param_0`, `_param_1`)
    would collide; a long name keeps its two ends around a digest of the whole."""
    if len(name) <= _LOCAL_NAME_LIMIT:
        return name
    return f"{name[:48]}.{hashlib.blake2b(name.encode(), digest_size=8).hexdigest()}.{name[-48:]}"


def kernel_function(module: ir.Module, signature: KernelSignature, param_types: list[ir.Type], calling_convention: str,
                    array_attribute: str, array_address_space: int) -> tuple[ir.Function, ir.IRBuilder, list[ir.Value]]:
    """A kernel with one argument per PTX parameter, array parameters as pointers carrying `array_attribute`
    (`byref`/`byval`) and their alignment, and a builder in its entry block (what `define_kernel` returns)."""
    types = [PointerTo(t, array_address_space) if isinstance(t, ir.ArrayType) else t for t in param_types]
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), types), signature.name)
    function.calling_convention = calling_convention
    for argument, param in zip(function.args, signature.params):
        argument.name = local_name(param.name)
        if param.array:
            argument.add_attribute(array_attribute)
            argument.attributes.align = param.align
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    return function, builder, list(function.args)


EMIT_KINDS = ("obj", "asm", "llvm")  # what `Target.emit` writes besides the product


def linked_and_optimised(texts: list[str], machine: llvm.TargetMachine, opt_level: int,
                         context: llvm.ContextRef | None = None,
                         loop_vectorization: bool = True) -> llvm.ModuleRef:
    """The kernels' LLVM modules linked into one, verified and optimised at `opt_level` for `machine`
    (`middle_end`), parsed into `context` (LLVM's global one if None). The module must not outlive the
    context: an execution engine that takes it over does not keep the context alive."""
    module = llvm.parse_assembly(texts[0], context)
    for text in texts[1:]:
        module.link_in(llvm.parse_assembly(text, context))
    module.verify()
    if opt_level:
        middle_end(module, machine, opt_level, loop_vectorization=loop_vectorization)
    return module


def middle_end(module: llvm.ModuleRef, machine: llvm.TargetMachine, opt_level: int,
               timing: bool = False, loop_vectorization: bool = True) -> llvm.PassBuilder:
    """LLVM's target-aware optimisation pipeline at `opt_level` (1–3) run over `module` (`default<O…>` with
    LLVM's default tuning, the loop vectorizer left out where `loop_vectorization` is off); the pass builder
    is returned, with its passes' times to read (`finish_pass_timing`) where `timing` is set."""
    tuning = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    tuning.loop_vectorization = loop_vectorization
    builder = llvm.create_pass_builder(machine, tuning)
    if timing:
        builder.start_pass_timing()
    builder.getModulePassManager().run(module, builder)
    return builder


class Codegen:
    """A codegen under way, used as a context manager: each codegen group (`Target.codegen_groups`) handed in
    as soon as its kernels are lowered (`add`), the product once lowering is done (`finish`, given every
    lowered kernel in module order, which alone decides the product). This one compiles everything at
    `finish` (`Target.codegen`); a target that compiles groups apart starts them in `add`."""

    def __init__(self, target: Target, opt_level: int, jobs: int):
        self.target, self.opt_level, self.jobs = target, opt_level, jobs

    def add(self, kernels: list[LoweredKernel]) -> None:
        """The lowered kernels of one group, in module order (fewer than the group's where some failed to lower)."""

    def finish(self, kernels: list[LoweredKernel]) -> Compiled:
        return self.target.codegen(kernels, self.opt_level, self.jobs)

    def __enter__(self) -> Codegen:
        return self

    def __exit__(self, *exception: object) -> None:
        """Whatever was started is waited for (or cancelled) when the run ends, finished or not."""


class LaneExchange(ABC):
    """A value the lanes of one wave published together (`Target.exchange`), readable at any of them.

    `lanes` is the wave mask (an integer of `Target.wave_size` bits) of the lanes that took part, whose
    values `read` returns; a lane outside it reads an unspecified value. `uniform_lanes` holds `lanes` and
    is the same in every lane of the wave: what a loop of uniform reads runs over."""

    lanes: ir.Value
    uniform_lanes: ir.Value

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

    def approximate(self, builder: ir.IRBuilder, function: str, value: ir.Value) -> ir.Value:
        """f32 `function` of `value`: "rcp", "rsqrt", "sqrt", "ex2", "lg2", "sin", "cos" (radians) or
        "tanh", as fast as the target allows within the PTX ISA's error bound for its .approx instruction,
        subnormal inputs and results kept (lowering flushes them for .ftz).

        This default (the host's) uses LLVM's generic intrinsics, which call the C library's functions,
        within an ulp or so, far inside the .approx bounds; rcp and rsqrt are IEEE divisions."""
        one = ir.Constant(value.type, 1.0)
        if function == "rcp":
            return builder.fdiv(one, value)
        name = {"rsqrt": "llvm.sqrt.f32", "sqrt": "llvm.sqrt.f32", "ex2": "llvm.exp2.f32",
                "lg2": "llvm.log2.f32", "sin": "llvm.sin.f32", "cos": "llvm.cos.f32", "tanh": "llvm.tanh.f32"}[function]
        intrinsic = builder.module.globals.get(name) or ir.Function(
            builder.module, ir.FunctionType(value.type, [value.type]), name)
        result = builder.call(intrinsic, [value])
        return builder.fdiv(one, result) if function == "rsqrt" else result

    def approximate_ftz(self, builder: ir.IRBuilder, function: str, value: ir.Value,
                        flushing: bool = False) -> ir.Value | None:
        """`function` .approx.ftz of f32 `value` (subnormal inputs read as zeros of their sign, subnormal results
        become them) as the target's own instructions, where these need fewer flushes (`flushing`: the
        function runs under the flushing mode, `flushing_mode`); None: lowering flushes the input and the
        result of `approximate` itself."""
        return None

    def median(self, builder: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value | None:
        """The median of three f32 numbers as one target instruction where it has one (the flushing mode's
        fma.ftz, lower/floating.py, gives it no NaN beside a number and no zeros of two signs); None: lowering
        selects instead."""
        return None

    def number_min_max(self, builder: ir.IRBuilder, smaller: bool, x: ir.Value, y: ir.Value) -> ir.Value | None:
        """PTX's f32 min (`smaller`) or max of `x` and `y` without .NaN (one NaN: the other operand; both: the
        canonical NaN; −0.0 below +0.0) as one target instruction where it has one; None: lowering builds it
        from llvm.minimumnum/maximumnum."""
        return None

    def approximate_f64(self, builder: ir.IRBuilder, function: str, value: ir.Value) -> ir.Value | None:
        """`rcp`/`rsqrt` .approx.ftz.f64 of `value` as the target's own instruction, where it has PTX's (the
        nvptx verification target); None: lowering computes it from the upper word as the ISA defines."""
        return None

    def flushing_mode(self) -> bool:
        """Whether a function may be compiled with f32 subnormals flushed by the hardware (the LLVM attribute
        "denormal-fp-math-f32"="preserve-sign,preserve-sign"), with the f32 arithmetic, min/max and
        llvm.canonicalize flushing inputs and results to zeros of their sign, as .ftz asks (lower/floating.py
        relies on exactly that); False: lowering flushes explicitly."""
        return False

    def directed(self, builder: ir.IRBuilder, operation: str, mode: str, values: list[ir.Value],
                 flushing: bool = False) -> ir.Value | None:
        """add/sub/mul/fma (`operation`) of f32/f64 `values` rounded as `mode` (rz/rm/rp) by switching the
        hardware's rounding mode around the one instruction, where the target can; None: lowering computes
        the rounding exactly in round-to-nearest arithmetic (`rounding`). `flushing`: the function runs
        under the flushing mode (`flushing_mode`), and the instruction must flush f32 subnormals."""
        return None

    # Hardware lanes of one wave (the lanes that run in lockstep and exchange values): 32 or 64.
    wave_size: int = 32

    def linear_thread(self, builder: ir.IRBuilder) -> ir.Value:
        """The thread's i32 index in its block, x fastest: the order in which warps are formed."""
        tid = [self.special_register(builder, "%tid", c) for c in "xyz"]
        ntid = [self.special_register(builder, "%ntid", c) for c in "xy"]
        return builder.add(tid[0], builder.mul(ntid[0], builder.add(tid[1], builder.mul(ntid[1], tid[2]))))

    # The lane interface below is optional: a target without it raises Unavailable and lowering reports
    # the warp instruction or special register that needs it.
    def lane_id(self, builder: ir.IRBuilder) -> ir.Value:
        """The i32 hardware lane of the executing thread in its wave."""
        raise self._no_lanes()

    def exchange(self, builder: ir.IRBuilder, value: ir.Value, members: ir.Value) -> LaneExchange:
        """Publish `value` (i32 or i64) among the lanes of wave mask `members` (the executing lane among
        them), which wait for each other where they do not run in lockstep."""
        raise self._no_lanes()

    def ballot(self, builder: ir.IRBuilder, predicate: ir.Value, members: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(votes, lanes): wave masks of the lanes of `members` that voted `predicate` (i1) true, and of
        all that voted."""
        raise self._no_lanes()

    def active_lanes(self, builder: ir.IRBuilder) -> ir.Value:
        """The wave mask of the lanes executing this point together with the executing one."""
        raise self._no_lanes()

    def wave_barrier(self, builder: ir.IRBuilder, members: ir.Value) -> None:
        """Wait for the lanes of wave mask `members`; their memory accesses before it are visible after."""
        raise self._no_lanes()

    def machine_register(self, builder: ir.IRBuilder, register: str) -> ir.Value:
        """`%clock64` and `%globaltimer` (i64), `%smid`, `%nsmid` (i32), `%gridid` (i64); raises
        `Unavailable` where the target has no meaningful value."""
        raise Unavailable(f"the {self.name} target does not provide {register} yet")

    def _no_lanes(self) -> Unavailable:
        return Unavailable(f"the {self.name} target has no warp-lane operations yet")

    # Memory model, named barriers and dynamic shared memory (lower/atomic.py, sync.py, memory.py).
    # Named barriers (ids, thread counts, bar.arrive, bar.red): True where the target provides them as a
    # call (`named_barrier`), False where lowering builds them from atomics on a state in .shared memory.
    named_barrier_calls: bool = False
    # Bytes a shared window reserves after the static variables for dynamic shared memory (`.extern .shared`).
    dynamic_shared_capacity: int = 0

    def syncscope(self, scope: str) -> str:
        """The LLVM sync scope of PTX scope `cta`/`cluster`/`gpu`/`sys`; "" is LLVM's system scope."""
        return ""

    def named_barrier(self, builder: ir.IRBuilder, barrier: ir.Value, expected: ir.Value, operation: int,
                      predicate: ir.Value) -> ir.Value:
        """Arrive at barrier `barrier` (i32 0–15) that completes after `expected` (i32; 0: every thread of
        the block that has not exited) arrivals; `operation` is one of NAMED_BARRIER_OPERATIONS' values.
        Returns i32: the block-wide reduction of `predicate` (i1) for the `red` operations, else 0."""
        raise Unavailable(f"the {self.name} target has no named barriers")

    def pause(self, builder: ir.IRBuilder) -> None:
        """A short pause in a polling loop (lets other waves run); nothing where the target has none."""

    def dynamic_shared_size(self, builder: ir.IRBuilder) -> ir.Value:
        """i32: the bytes of dynamic shared memory this launch gave each block."""
        raise Unavailable(f"the {self.name} target has no dynamic shared memory")

    def in_aperture(self, builder: ir.IRBuilder, space: str, address: ir.Value) -> ir.Value:
        """i1: whether generic address `address` (i64) lies in `space` ("shared" or "local") of the
        executing thread, decided from the address alone."""
        raise Unavailable(f"the {self.name} target cannot tell .{space} addresses apart")

    def trap(self, builder: ir.IRBuilder, assertion: tuple[ir.Value, ...] | None) -> None:
        """`trap`: abort the launch. `assertion` is a failed CUDA assert's (message, file, line, function):
        i64 generic addresses of C strings and an i32 line. Here `llvm.trap`, which does not return; a
        target whose trap returns (the host records it) has lowering end the thread after it."""
        module = builder.module
        function = module.globals.get("llvm.trap") or ir.Function(module, ir.FunctionType(ir.VoidType(), ()),
                                                                  "llvm.trap")
        builder.call(function, [])

    def breakpoint(self, builder: ir.IRBuilder) -> None:
        """`brkpt`: stop for an attached debugger; `llvm.debugtrap` (without a debugger, execution goes on)."""
        module = builder.module
        function = module.globals.get("llvm.debugtrap") or ir.Function(
            module, ir.FunctionType(ir.VoidType(), ()), "llvm.debugtrap")
        builder.call(function, [])

    def finish_module(self, module: ir.Module) -> None:
        """Add module-level settings (flags, metadata) once every function is in."""

    @abstractmethod
    def codegen(self, kernels: list[LoweredKernel], opt_level: int, jobs: int = 1) -> Compiled:
        """Turn the lowered kernels into the target's product (a code object, a JIT-compiled program), using
        up to `jobs` processes where the target can split the work; the product does not depend on `jobs`.
        A target that compiles apart from fatkit's process may leave out kernels LLVM fails on (`failed`)."""

    def lowering_key(self) -> Hashable | None:
        """Everything lowering reads of this target but its name: two targets of one key are lowered to the
        same IR, so the targets of a run share the kernels (`pipeline.lower`); the name appears only in the
        reasons of kernels that do not lower, which are lowered again for each target. None: lowered apart."""
        return None

    def codegen_groups(self, sizes: list[int]) -> list[int]:
        """The codegen group of each kernel of a module (`LoweredKernel.group`), nondecreasing in module order,
        given each kernel's size in PTX statements: the kernels of one group are compiled together, and a
        `Codegen` may start a group as soon as its kernels are lowered. Decided before lowering, from the
        module alone, so that the product depends neither on `jobs` nor on which kernel is lowered first.
        Here one group: `codegen` takes all the kernels at once."""
        return [0] * len(sizes)

    def start_codegen(self, opt_level: int, jobs: int = 1) -> Codegen:
        """A codegen that lowering hands each group of kernels as it is lowered (`Codegen.add`)."""
        return Codegen(self, opt_level, jobs)

    @abstractmethod
    def validate(self, product: Any, kernels: list[LoweredKernel]) -> Any:
        """Check the product against the kernels it should hold; return it, raising FatkitError if wrong."""

    def machine(self) -> llvm.TargetMachine:
        """The LLVM target machine `emit` compiles with."""
        raise FatkitError(f"target {self.name} has no LLVM target machine")

    def emit(self, kernels: list[LoweredKernel], opt_level: int, kind: str) -> bytes:
        """The kernels linked into one LLVM module and optimised, as `kind` (EMIT_KINDS): "obj" (a relocatable
        object), "asm" (the target's assembly) or "llvm" (the optimised IR)."""
        if kind not in EMIT_KINDS:
            raise FatkitError(f"cannot emit {kind!r}; one of {', '.join(EMIT_KINDS)}")
        machine = self.machine()
        module = linked_and_optimised([k.llvm_ir for k in kernels], machine, opt_level)
        if kind == "llvm":
            return str(module).encode()
        if kind == "asm":
            return machine.emit_assembly(module).encode()
        return bytes(machine.emit_object(module))
