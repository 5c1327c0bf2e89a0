"""A kernel's LLVM module: its signature, the module variables and `.func` functions it uses, its body."""

from __future__ import annotations

import struct

from llvmlite import ir

from fatkit.translate.lower.cluster import (
    ClusterLayout, ClusterShape, ClusterTarget, check_shared_fits, cluster_target, static_cluster,
)
from fatkit.translate.lower.core import (
    I8, Lowering, SharedWindow, Unsupported, align_up, kernel_signature, llvm_type,
)
from fatkit.translate.passes import Prepared, Storage
from fatkit.translate.passes.storage import function_storage
from fatkit.translate.lower.sync import BARRIER_STATE_WORDS, BARRIERS, needs_named_barriers
from fatkit.translate.lower.warp import COLLECTIVES
from fatkit.translate.lower.texture import TEXTURE_TYPES, reference_global
from fatkit.translate.ptx import ast
from fatkit.translate.targets.base import KernelParam, LoweredKernel, Target


def lower_kernel(kernel: ast.Function, registers: dict[str, str], target: Target,
                 module_variables: tuple[ast.Variable, ...] = (),
                 functions: dict[str, ast.Function] | None = None, prepared: Prepared | None = None,
                 mma_numerics: str = "sm90") -> LoweredKernel:
    """Lower one kernel into its own LLVM module; raises Unsupported for PTX outside the slice.

    `module_variables` are the PTX module's own: the .global/.const/.shared ones the kernel (or a function
    it calls) names go into its LLVM module (.global/.const as linkonce_odr, so the kernels' modules link
    into one copy). `functions` are the module's `.func` definitions by name; those the kernel calls are
    lowered into its module as internal functions. `prepared` is what the passes found (each function's
    storage, its instructions' float modes); without it a body's buffers are read off its declarations."""
    functions = functions or {}
    if kernel.body is None:
        raise Unsupported(kernel.name, ".entry", kernel.line, "a kernel declaration without a body")
    signature = kernel_signature(kernel)
    cluster = static_cluster(kernel)  # a cluster of several CTAs runs as one workgroup (lower/cluster.py)
    target = cluster_target(target, cluster)
    module = ir.Module(name=kernel.name)
    module.triple = target.triple
    module.data_layout = target.data_layout
    param_types = [ir.ArrayType(I8, p.size) if p.array else llvm_type(p.type) for p in signature.params]
    used = _names_used(kernel, functions)
    while True:  # functions an initializer names (vtables) and what they use in turn
        more = _initializer_names(module_variables, used)
        more |= {n for name in more if name in functions for n in _names_used(functions[name], functions)}
        if more <= used:
            break
        used |= more
    reached = [kernel, *(functions[name] for name in used if name in functions)]
    # A cluster's CTAs share the workgroup's one hardware barrier: theirs are named barriers, one set a CTA.
    named_barriers = cluster is not None or any(needs_named_barriers(i) for body in reached for i in body.instructions())
    # A kernel's own variable hides a module variable of its name from the kernel, not from its callees.
    declared = {v.name for v in kernel.variables()}
    hidden = declared & {name for callee in reached[1:] for name in _names_used(callee, {})}
    if hidden & {v.name for v in module_variables}:
        raise Unsupported(kernel.name, sorted(hidden)[0], kernel.line,
                          "a kernel variable hides a module variable that a function it calls uses")
    module_level = [v for v in module_variables if v.name in used and v.name not in declared
                    and v.state_space in ("global", "const", "shared", "tex")]
    barrier_state = named_barriers and not target.named_barrier_calls
    shared, shared_bytes, window, layout = _shared_variables(
        kernel, module, target, [v for v in module_level if v.state_space == "shared"], barrier_state, cluster)
    if layout is not None and isinstance(target, ClusterTarget):  # (a launch-given bound lowered to what fits)
        cluster = target.cluster = layout.cluster
    state = shared.pop(_BARRIER_STATE, None)
    memory = {name: ("shared", pointer) for name, pointer in shared.items()}
    addresses: list[tuple[ast.Variable, ir.GlobalVariable, list]] = []  # initializers holding addresses
    for variable in module_level:
        if variable.type in TEXTURE_TYPES or variable.state_space == "tex":  # HIP's textureReference (texture.py)
            memory[variable.name] = ("texref", reference_global(module, variable, target.global_address_space))
        elif variable.state_space != "shared":
            memory[variable.name] = (variable.state_space,
                                     _module_variable(kernel, variable, module, target, addresses))
    function, builder, values = target.define_kernel(module, signature, param_types)
    if isinstance(target, ClusterTarget) and target.cluster.dims is None:  # the launch's shape, after CUDA's params
        target.bind(function, builder, values[-1])
    callees = _Callees(module, target, functions, memory, window, prepared)
    callees.cluster = layout
    if state is not None:  # shared memory starts undefined: zero the barriers before any thread uses them
        own = state if layout is None else builder.gep(state, [layout.entry_delta(builder, target)], source_etype=I8)
        builder.store(ir.Constant(ir.ArrayType(I8, _BARRIER_STATE_BYTES), None), own, align=4)
        target.barrier(builder)
    callees.named_barriers, callees.barrier_state, callees.static_shared_bytes = named_barriers, state, shared_bytes
    callees.mma_numerics = mma_numerics
    callees.block_threads = kernel.declared_threads()
    fp_mode = prepared.fp_modes.get(kernel.name) if prepared else None
    # every f32 instruction the kernel reaches flushes: the kernel runs with the hardware flushing (each
    # kernel has a module of its own, so its functions run in its mode alone)
    callees.flushing = fp_mode is not None and fp_mode.uniform == "ftz" and target.flushing_mode()
    storage = prepared.storage[kernel.name] if prepared else Storage(registers, function_storage(kernel).buffers)
    Lowering(kernel, signature.params, storage, target, function, builder, values, memory, callees).run()
    if callees.flushing:
        for defined in module.functions:
            # (llvmlite's attribute set lists only LLVM's enumerated attributes: the string one goes past its
            # check; the linkonce_odr runtime helpers, shared with other kernels' modules, do no f32 arithmetic)
            if not defined.is_declaration and defined.linkage != "linkonce_odr":
                set.add(defined.attributes, '"denormal-fp-math-f32"="preserve-sign,preserve-sign"')
    for variable, storage_global, slots in addresses:
        _place_addresses(kernel, variable, storage_global, slots, memory, callees)
    target.finish_module(module)
    bodies = [kernel, *(declaration for _, declaration in callees.lowered.values())]
    # Barriers and warp collectives need the block's threads running together on a target that runs
    # them one by one (host), as do mbarrier waits; bar.warp.sync is a `bar`.
    barriers = any(i.opcode in ("bar", "barrier", "mbarrier") or i.opcode in COLLECTIVES
                   for body in bodies for i in body.instructions())
    # LLVM may order the LDS variables otherwise than declared: padding before each stays under its alignment
    padding = sum(g.align - 1 for g in module.global_values if isinstance(g, ir.GlobalVariable)
                  and g.addrspace == target.shared_address_space and g.align)
    ctas = cluster.ctas if cluster is not None else 1  # the workgroup's LDS holds every CTA's
    return LoweredKernel(signature, str(module), shared_bytes * ctas + callees.lane_buffer_bytes, barriers, padding,
                         cluster.dims if cluster is not None else None,
                         cluster.max_ctas if cluster is not None and cluster.dims is None else 0)


def _names_used(kernel: ast.Function, functions: dict[str, ast.Function]) -> set[str]:
    """Every name an instruction of the kernel, or of a function it calls (transitively), mentions."""
    names: set[str] = set()

    def visit(operand: ast.Operand) -> None:
        kind = type(operand)
        if kind is ast.Name:
            names.add(operand.name)
        elif kind is ast.Address and operand.base is not None:
            names.add(operand.base.name)
        elif kind is ast.Vector:
            for item in operand.items:
                visit(item)

    pending, seen = [kernel], {kernel.name}
    while pending:
        for instruction in pending.pop().instructions():
            for operand in instruction.operands:
                visit(operand)
                if type(operand) is ast.ArgList:
                    for item in operand.items:
                        visit(item)
        for name in names - seen:
            if name in functions:
                seen.add(name)
                pending.append(functions[name])
    return names


class _Callees:
    """The `.func` functions a kernel calls, each lowered into the kernel's module on its first call.

    A function takes the target's context arguments (the host's kernarg and special-register pointers),
    then one pointer per return and parameter to the caller's `.param` bytes: by reference, so every
    PTX parameter type (scalars, `.b8` arrays) passes the same way and recursion just works; last, the
    pointer to the caller's stop flag (see Lowering). Every function has this one shape, so a function's
    address can be called whatever its parameters."""

    # What lower/sync.py and memory.py read: whether the kernel's barriers are named ones (lower/sync.py),
    # the shared-memory barrier state where the target has no calls for them, the static shared bytes.
    named_barriers: bool = False
    barrier_state: ir.Value | None = None
    static_shared_bytes: int = 0
    mma_numerics: str = "sm90"  # Options.mma_numerics, read by lower/mma.py
    cluster: ClusterLayout | None = None  # where each CTA's shared memory lies, in a cluster of several
    flushing: bool = False  # the kernel runs with f32 subnormals flushed by the hardware (Target.flushing_mode)
    lane_buffer_bytes: int = 0  # LDS that lower/mma_native.py's LdsGather added to the kernel's
    block_threads: int | None = None  # the most threads the kernel's .reqntid/.maxntid allow (None: undeclared)

    def __init__(self, module: ir.Module, target: Target, functions: dict[str, ast.Function],
                 memory: dict[str, tuple[str, ir.Value]], window: SharedWindow | None,
                 prepared: Prepared | None = None):
        self.module, self.target, self.functions, self.memory = module, target, functions, memory
        self.window, self.prepared = window, prepared
        self.lowered: dict[str, tuple[ir.Function, ast.Function]] = {}

    def get(self, name: str) -> tuple[ir.Function, ast.Function] | None:
        if name in self.lowered:
            return self.lowered[name]
        function = self.functions.get(name)
        if function is None or function.body is None:
            return None
        params = []
        for param in (*function.returns, *function.params):
            if param.size_bytes is None or llvm_type(param.type) is None:
                raise Unsupported(name, f"parameter {param.name}", param.line or function.line,
                                  "only sized integer/floating-point .param parameters are supported")
            params.append(KernelParam(param.name, param.type, 0, param.size_bytes,
                                      param.align or param.element_size, array=True))
        lowered = ir.Function(self.module, self.function_type(len(params)), name)
        lowered.linkage = "internal"
        self.lowered[name] = lowered, function  # before its body, for recursive calls
        builder = ir.IRBuilder(lowered.append_basic_block("entry"))
        values = lowered.args[self.target.context_arguments:-1]
        if self.prepared and name in self.prepared.failures:
            error = self.prepared.failures[name]
            raise Unsupported(name, error.instruction, error.line, error.why)
        storage = self.prepared.storage[name] if self.prepared else function_storage(function)
        Lowering(function, params, storage, self.target, lowered, builder, values, self.memory, self).run()
        return lowered, function

    def function_type(self, values: int) -> ir.FunctionType:
        """The LLVM type of a lowered `.func` with `values` returns and parameters together."""
        stack = ir.PointerType(addrspace=self.target.stack_address_space)
        return ir.FunctionType(ir.VoidType(), [ir.PointerType()] * self.target.context_arguments
                               + [stack] * (values + 1))


def _initializer_bytes(kernel: ast.Function, variable: ast.Variable, size: int,
                       addresses: list | None = None) -> bytes:
    """The bytes a variable starts with: its initializer's elements packed little-endian, zeros after.

    An address (`f`, `var`, `var+8`, `generic(var)`) in a 64-bit element is left as 8 zero bytes and listed
    in `addresses` as (byte offset, SymbolRef), for `_place_addresses`."""
    element, ptx_type = ast.TYPE_SIZES[variable.type], variable.type
    image = bytearray()

    def pack(item) -> None:
        kind = type(item)
        if kind is ast.InitList:
            for sub in item.items:
                pack(sub)
        elif kind in (ast.Name, ast.SymbolRef) and element == 8 and addresses is not None:
            addresses.append((len(image), ast.SymbolRef(item.name) if kind is ast.Name else item))
            image.extend(bytes(8))
        elif kind is ast.IntImm and ptx_type[0] != "f":
            image.extend((item.value & ((1 << 8 * element) - 1)).to_bytes(element, "little"))
        elif kind in (ast.IntImm, ast.FloatImm) and ptx_type[0] == "f" and element in (4, 8):
            value = float(item.value) if kind is ast.IntImm else item.value
            image.extend(struct.pack("<f" if element == 4 else "<d", value))
        else:
            raise Unsupported(kernel.name, f".{variable.state_space} {variable.name}", variable.line,
                              f"initializer {item} not supported yet")

    if variable.initializer is not None:
        pack(variable.initializer)
    if len(image) > size:
        raise Unsupported(kernel.name, f".{variable.state_space} {variable.name}", variable.line,
                          "initializer larger than the variable")
    return bytes(image) + bytes(size - len(image))


def _module_variable(kernel: ast.Function, variable: ast.Variable, module: ir.Module,
                     target: Target, addresses: list) -> ir.GlobalVariable:
    """A module-level .global/.const variable, defined with its initial bytes; one whose initializer holds
    addresses is appended to `addresses` with them, to be placed once the functions are lowered."""
    size = variable.size_bytes
    if variable.linkage == "extern":
        raise Unsupported(kernel.name, f".extern .{variable.state_space} {variable.name}", variable.line,
                          "no PTX module linked with this one defines it (fatkit links the -rdc units of one "
                          "binary, fatkit/translate/link.py)")
    if size is None or llvm_type(variable.type) is None:
        raise Unsupported(kernel.name, f".{variable.state_space} {variable.name}", variable.line,
                          "only defined, sized .global/.const variables of scalar types are supported")
    space = target.global_address_space if variable.state_space == "global" else target.constant_address_space
    storage = ir.GlobalVariable(module, ir.ArrayType(I8, size), variable.name, addrspace=space)
    storage.type = ir.PointerType(addrspace=space)
    storage.linkage = "linkonce_odr"
    # protected: still a symbol of the code object that the host finds, but one no other object can replace,
    # so that the kernel reaches it at a pc-relative address rather than through the GOT (a load more). (llvmlite
    # has no visibility field; its storage class is written where LLVM reads the visibility.)
    storage.storage_class = "protected"
    slots: list[tuple[int, ast.SymbolRef]] = []
    storage.initializer = ir.Constant(storage.value_type,
                                      bytearray(_initializer_bytes(kernel, variable, size, slots)))
    if slots:
        addresses.append((variable, storage, slots))
    storage.align = variable.align or variable.element_size
    # A .const variable is not an LLVM constant: the host writes it between launches (cudaMemcpyToSymbol,
    # cuModuleGetGlobal), so its initializer is only its first value and no load may be folded into it. In
    # the constant address space the kernel still reads it as read-only memory (scalar loads where uniform).
    return storage


def _initializer_names(variables: tuple[ast.Variable, ...], used: set[str]) -> set[str]:
    """The names the initializers of the used variables mention (transitively): vtables' functions,
    `generic(var)`'s variables."""
    by_name = {v.name: v for v in variables if v.initializer is not None}
    found, pending = set(), [name for name in used if name in by_name]

    def visit(item) -> None:
        kind = type(item)
        if kind is ast.InitList:
            for sub in item.items:
                visit(sub)
        elif kind in (ast.Name, ast.SymbolRef) and item.name not in found | used:
            found.add(item.name)
            if item.name in by_name:
                pending.append(item.name)

    while pending:
        visit(by_name[pending.pop()].initializer)
    return found


def _place_addresses(kernel: ast.Function, variable: ast.Variable, storage: ir.GlobalVariable,
                     slots: list[tuple[int, ast.SymbolRef]], memory: dict[str, tuple[str, ir.Value]],
                     callees: "_Callees") -> None:
    """Give `storage` an initializer of its bytes with the addresses in place: a packed struct of byte runs
    and 8-byte address constants (a function's, or a .global/.const variable's, plus an offset;
    `generic(var)` cast to the generic address space)."""
    image = bytes(storage.initializer.constant)
    fields, values, at = [], [], 0

    def problem(why: str) -> Unsupported:
        return Unsupported(kernel.name, f".{variable.state_space} {variable.name}", variable.line, why)

    for offset, symbol in slots:
        if offset > at:
            fields.append(ir.ArrayType(I8, offset - at))
            values.append(ir.Constant(fields[-1], bytearray(image[at:offset])))
        callee = callees.get(symbol.name) if symbol.name in callees.functions else None
        if callee is not None:
            pointer: ir.Value = callee[0]
        elif symbol.name in memory and memory[symbol.name][0] in ("global", "const"):
            pointer = memory[symbol.name][1]
        else:
            raise problem(f"initializer address of {symbol.name}: only .func functions and .global/.const "
                          "variables of this module are supported")
        if symbol.offset:
            pointer = ir.FormattedConstant(
                pointer.type, f"getelementptr (i8, {pointer.type} {pointer.get_reference()}, i64 {symbol.offset})")
        if symbol.generic and pointer.type.addrspace != 0:
            pointer = ir.FormattedConstant(ir.PointerType(),
                                           f"addrspacecast ({pointer.type} {pointer.get_reference()} to ptr)")
        fields.append(pointer.type)
        values.append(pointer)
        at = offset + 8
    if at < len(image):
        fields.append(ir.ArrayType(I8, len(image) - at))
        values.append(ir.Constant(fields[-1], bytearray(image[at:])))
    structure = ir.LiteralStructType(fields, packed=True)
    storage.value_type = structure
    storage.initializer = ir.Constant(structure, values)


_BARRIER_STATE = "fatkit.barriers"  # the named barriers' shared-memory state (lower/sync.py)
_BARRIER_STATE_BYTES = BARRIERS * BARRIER_STATE_WORDS * 4
_CLUSTER_BLOCK = "fatkit.cluster.shared"  # a cluster's static shared memory: one slice a CTA


def _shared_variables(kernel: ast.Function, module: ir.Module, target: Target, module_level: list[ast.Variable],
                      barrier_state: bool, cluster: ClusterShape | None = None,
                      ) -> tuple[dict[str, ir.Value], int, SharedWindow | None, ClusterLayout | None]:
    """The kernel's `.shared` variables as globals in the target's shared address space (undefined at
    start, as in CUDA) and their static bytes: each at its alignment, in declaration order, as LLVM lays
    out LDS; with `barrier_state`, the named barriers' state (`_BARRIER_STATE`) after them.

    `.shared` arrays without a size are dynamic shared memory: all of them start at one address after the
    static bytes, at their largest alignment (counted in the static bytes); on AMDGPU each is a zero-sized
    external LDS global, which LLVM places there and the launch sizes. That holds for `.extern .shared
    x[]`, CUDA's `extern __shared__`, and for the same array declared without `.extern` (LLVM's NVPTX
    backend prints a zero-length LDS array so; ptxas 13.0 refuses it as "incomplete type"): storage of its
    own it cannot have, and the one memory it can name is the launch's dynamic shared memory.

    Where the target wants a shared window (host), the variables are instead slices of one global and a
    shared address is an offset into it, so that it fits the 32-bit registers PTX keeps it in; dynamic
    shared memory makes the window `Target.dynamic_shared_capacity` bytes longer.

    In a `cluster` of k CTAs the static variables are instead slices of one block of k copies of them
    (`ClusterLayout`; the block opens the window on the host), and the static bytes are one CTA's."""
    shared, total, offsets, dynamic = {}, 0, {}, []
    placed: list[tuple[str, int, int]] = []  # (name, size, alignment)
    for variable in [*module_level, *(v for v in kernel.variables() if v.state_space == "shared")]:
        if target.shared_address_space is None:
            raise Unsupported(kernel.name, f".shared {variable.name}", variable.line,
                              f"the {target.name} target runs threads one after another and has no "
                              ".shared memory")
        if variable.array == (None,) and variable.element_size and variable.initializer is None:
            dynamic.append(variable)
        elif variable.linkage == "extern" or variable.size_bytes is None:
            raise Unsupported(kernel.name, f".shared {variable.name}", variable.line,
                              "a .shared variable is sized, or an unsized one-dimensional array (dynamic "
                              "shared memory); an .extern one of a size is defined in another module")
        else:
            placed.append((variable.name, variable.size_bytes, variable.align or variable.element_size))
    if barrier_state:
        placed.append((_BARRIER_STATE, _BARRIER_STATE_BYTES, 4))
    # Sized arrays of 16 bytes or more start at 16 (as clang aligns them), so that accesses from their start
    # that are 16 bytes apart merge into 128-bit ones (ds_read_b128); not where that padding (under 16 bytes
    # an array) could take a kernel past the smallest AMD LDS, which it fitted.
    declared_end = sum(align_up(size, align) + align for _, size, align in placed)
    widened = declared_end + _WIDE_ALIGNMENT * len(placed) <= _SMALLEST_LDS
    for name, size, align in placed:
        offsets[name] = align_up(total, align)
        total = align_up(total, align) + size
        if not target.shared_window and cluster is None:
            wide = widened and size >= _WIDE_ALIGNMENT
            shared[name] = _lds_global(module, target, name, size, max(align, _WIDE_ALIGNMENT) if wide else align)
    layout, static_end = None, total
    if cluster is not None:
        alignment = max([16, *(align for _, _, align in placed)])
        total = align_up(total, alignment)  # a CTA's slice
        cluster = check_shared_fits(kernel, cluster, total)  # (a launch-given bound lowered to what fits)
        layout = ClusterLayout(cluster, total, frozenset(v.name for v in dynamic), _CLUSTER_BLOCK)
        static_end = total * cluster.ctas
        if not target.shared_window and placed:
            block = _lds_global(module, target, _CLUSTER_BLOCK, static_end, alignment)
            for name, _, _ in placed:
                shared[name] = ir.FormattedConstant(
                    block.type, f'getelementptr inbounds (i8, ptr addrspace({target.shared_address_space}) '
                                f'@"{_CLUSTER_BLOCK}", i64 {offsets[name]})')
    if dynamic:
        align = max(v.align or v.element_size for v in dynamic)
        total, static_end = align_up(total, align), align_up(static_end, align)
        for variable in dynamic:
            offsets[variable.name] = static_end
            if not target.shared_window:
                shared[variable.name] = _lds_global(module, target, variable.name, 0, align)
    if not target.shared_window or not offsets:
        return shared, total, None, layout
    capacity = target.dynamic_shared_capacity if dynamic else 0
    window = ir.GlobalVariable(module, ir.ArrayType(I8, static_end + capacity), "fatkit.shared")
    window.type = ir.PointerType()
    window.linkage = "internal"
    window.initializer = ir.Constant(window.value_type, ir.Undefined)
    window.align = 16
    for name, offset in offsets.items():
        shared[name] = ir.FormattedConstant(
            ir.PointerType(), f'getelementptr inbounds (i8, ptr @"{window.name}", i64 {offset})')
    return shared, total, SharedWindow(window, offsets), layout


def _lds_global(module: ir.Module, target: Target, name: str, size: int, align: int) -> ir.GlobalVariable:
    """A variable in the target's shared address space; size 0: dynamic (external, sized by the launch)."""
    storage = ir.GlobalVariable(module, ir.ArrayType(I8, size), name, addrspace=target.shared_address_space)
    storage.type = ir.PointerType(addrspace=target.shared_address_space)  # opaque, as every pointer here
    if size:
        storage.linkage = "internal"
        storage.initializer = ir.Constant(storage.value_type, ir.Undefined)
    else:
        storage.linkage = "external"
    storage.align = align
    return storage


_WIDE_ALIGNMENT = 16  # (PTX's .align is a least alignment: a greater one is as good)
_SMALLEST_LDS = 64 * 1024  # LDS bytes a workgroup may use on gfx9/gfx10/gfx11 (gfx950: 160 KiB)
