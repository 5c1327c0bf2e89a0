"""Thread-block clusters of several CTAs, run as one AMD workgroup.

AMD GPUs before gfx1250 launch no clusters, but a cluster of k CTAs of blockDim threads fits one workgroup
when k·blockDim ≤ 1024 threads and k times a CTA's shared memory fits the workgroup's LDS. Such a kernel
(its cluster shape static: `.reqnctapercluster x, y, z`) is lowered for that launch (the shim's duty,
docs/runtime.md): workgroups of (ntid.x, ntid.y, ntid.z·k) threads, CTA rank r the r-th slab of ntid.z
layers along z (so each CTA's threads are consecutive in the workgroup's linear order and its warps are
whole waves or wave halves when blockDim is a multiple of 32), and a grid of (nctaid.x/cx, nctaid.y/cy,
nctaid.z/cz) workgroups, one a cluster.

- The special registers are synthesised from the workgroup's (`ClusterTarget`): %tid.z = tid.z mod ntid.z,
  %ntid.z = the workgroup's / k, r = tid.z div ntid.z, %cluster_ctaid = r's (x, y, z) in the cluster shape
  (x fastest, as %cluster_ctarank counts), %ctaid = workgroup id · shape + %cluster_ctaid, %nctaid = the
  workgroups · shape, %clusterid/%nclusterid = the workgroup id / count.
- Shared memory: the kernel's static .shared variables lie in one block of k slices of `stride` bytes (the
  CTA's static bytes rounded to their largest alignment); CTA r's variable is at slice r, its offset added
  where the variable's address is taken (`own_variables`). Dynamic shared memory: the launch gives k times a
  CTA's bytes, CTA r's are the r-th k-th part. A .shared::cta address is so also the workgroup's LDS
  address, which is what a .shared::cluster address is here: `mapa` moves an address by the slices between
  two ranks, `getctarank` divides by the slice, and ld/st/atom/mbarrier/bulk copies on .shared::cluster
  addresses are LDS accesses of the right CTA.
- Barriers: `bar`/`barrier` of a CTA wait for that CTA's threads only (a workgroup `s_barrier` would wait
  for all k CTAs and deadlock where they diverge): every barrier form goes through the named barriers
  (lower/sync.py), kept per CTA — the shared-memory state lies in the CTA's slice; the named-barrier calls
  of the host and of sm_90 (verification) get id 1 + b·k + r for barrier b of CTA r, within sm_90's 16
  hardware barriers for `bar.sync 0` of up to 15 CTAs and clear of the workgroup's barrier 0 — and a
  barrier without a thread count waits for the CTA's blockDim threads.
  `barrier.cluster.arrive/wait` is the workgroup's barrier. `.cluster` scope is the agent's on AMDGPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llvmlite import ir

from fatkit.translate.lower.core import (
    I1, I8, I32, I64, Unsupported, handles, launch_given_cluster, reads_special,
)
from fatkit.translate.lower.special import MAX_BLOCK_THREADS
from fatkit.translate.ptx import ast
from fatkit.translate.targets.base import Target

WORKGROUP_LDS = 64 * 1024  # LDS one AMD workgroup may use on gfx9 (gfx90a, gfx942) and RDNA
CLUSTER_DIRECTIVES = ("reqnctapercluster", "explicitcluster", "maxclusterrank")
PORTABLE_CLUSTER_CTAS = 8  # CUDA's largest portable cluster: a launch-given shape's bound without .maxclusterrank


@dataclass(frozen=True)
class ClusterShape:
    """A cluster shape of more than one CTA: static (`dims`), or given at launch (`dims` None) of at most
    `max_ctas` CTAs, the CTAs the kernel's LDS is laid out for."""

    dims: tuple[int, int, int] | None
    max_ctas: int = 0

    @property
    def ctas(self) -> int:
        """The CTAs whose shared memory the workgroup's LDS holds: the cluster's, or the most a launch gives."""
        return math.prod(self.dims) if self.dims is not None else self.max_ctas


def declared_cluster(kernel: ast.Function) -> dict[str, tuple[int, ...]]:
    """The kernel's cluster directives by name."""
    return {d.name: tuple(d.values) for d in kernel.directives if d.name in CLUSTER_DIRECTIVES}


def static_cluster(kernel: ast.Function) -> ClusterShape | None:
    """The cluster shape `.reqnctapercluster` fixes, when it holds more than one CTA, or a launch-given one
    (`launch_given_cluster`) of at most `.maxclusterrank` (else PORTABLE_CLUSTER_CTAS) CTAs and of no more
    than one workgroup's threads; raises Unsupported where k·(the threads `.reqntid`/`.maxntid` allow)
    cannot be one workgroup (for a launch-given shape: not even k = 2)."""
    threads = kernel.declared_threads()
    if launch_given_cluster(kernel):
        rank = declared_cluster(kernel).get("maxclusterrank")
        most = min(rank[0] if rank else PORTABLE_CLUSTER_CTAS, 16)
        if threads is not None:
            most = min(most, MAX_BLOCK_THREADS // threads)
        if most < 2:
            raise Unsupported(kernel.name, ".explicitcluster" if rank is None else ".maxclusterrank", kernel.line,
                              f"clusters (of a shape given at launch) of 2 CTAs of {threads} threads cannot run as "
                              f"one workgroup ({2 * threads} > {MAX_BLOCK_THREADS} threads), and AMD has no "
                              "thread-block clusters")
        return ClusterShape(None, most)
    shape = declared_cluster(kernel).get("reqnctapercluster")
    if shape is None or math.prod(shape) == 1:
        return None
    dims = (tuple(shape) + (1, 1))[:3]
    cluster = ClusterShape((dims[0], dims[1], dims[2]))
    if threads is not None and cluster.ctas * threads > MAX_BLOCK_THREADS:
        raise Unsupported(kernel.name, ".reqnctapercluster", kernel.line,
                          f"clusters of {cluster.ctas} CTAs of {threads} threads cannot run as one workgroup "
                          f"({cluster.ctas * threads} > {MAX_BLOCK_THREADS} threads), and AMD has no "
                          "thread-block clusters")
    return cluster


def check_shared_fits(kernel: ast.Function, cluster: ClusterShape, stride: int) -> ClusterShape:
    """The cluster, its launch-given bound lowered to the CTAs whose static shared memory (`stride` bytes
    each) fits one workgroup's LDS; refuses the kernel when k CTAs' (for a launch-given shape: 2 CTAs') do
    not fit."""
    if cluster.dims is None:
        most = min(cluster.max_ctas, WORKGROUP_LDS // stride) if stride else cluster.max_ctas
        if most < 2:
            raise Unsupported(kernel.name, ".explicitcluster", kernel.line,
                              f"clusters (of a shape given at launch) of 2 CTAs of {stride} bytes of shared memory "
                              f"cannot run as one workgroup ({2 * stride} > {WORKGROUP_LDS} bytes of LDS), and AMD "
                              "has no thread-block clusters")
        return ClusterShape(None, most)
    if cluster.ctas * stride > WORKGROUP_LDS:
        raise Unsupported(kernel.name, ".reqnctapercluster", kernel.line,
                          f"clusters of {cluster.ctas} CTAs of {stride} bytes of shared memory cannot run as "
                          f"one workgroup ({cluster.ctas * stride} > {WORKGROUP_LDS} bytes of LDS), and AMD "
                          "has no thread-block clusters")
    return cluster


def cluster_target(target: Target, cluster: ClusterShape | None) -> Target:
    """The target as the kernel's CTAs see it: `target` itself outside a cluster of several CTAs."""
    return target if cluster is None else ClusterTarget(target, cluster)


class ClusterTarget:
    """A target whose dimension registers are a CTA's of a cluster running as one workgroup (module
    docstring); everything else is the wrapped target's."""

    def __init__(self, hardware: Target, cluster: ClusterShape) -> None:
        self.hardware, self.cluster = hardware, cluster
        self.kernel: ir.Function | None = None  # a launch-given shape: the kernel whose entry loaded it
        self.given: list[ir.Value] = []  # … and the i32 values: x, y, z CTAs and whether the launch gave them

    def __getattr__(self, name: str):
        return getattr(self.hardware, name)

    def bind(self, kernel: ir.Function, builder: ir.IRBuilder, parameter: ir.Value) -> None:
        """Load a launch-given shape from the kernel's hidden parameter (core.CLUSTER_SHAPE_PARAM) at its entry."""
        self.kernel = kernel
        self.given = [builder.load(builder.gep(parameter, [ir.Constant(I64, 4 * i)], source_etype=I8), typ=I32,
                                   align=4) for i in range(4)]

    def dim(self, builder: ir.IRBuilder, index: int) -> ir.Value:
        """The cluster's CTAs along x, y or z (0, 1, 2), i32; 3: whether the launch gave the shape."""
        if self.cluster.dims is not None:
            return ir.Constant(I32, self.cluster.dims[index] if index < 3 else 1)
        if builder.function is not self.kernel:
            raise Unsupported(builder.function.name, "a cluster register", 0,
                              "a cluster shape given at launch is read by kernels, not yet by the functions they "
                              "call")
        return self.given[index]

    def cta_count(self, builder: ir.IRBuilder) -> ir.Value:
        """k, the cluster's CTAs (i32)."""
        if self.cluster.dims is not None:
            return ir.Constant(I32, self.cluster.ctas)
        return builder.mul(builder.mul(self.dim(builder, 0), self.dim(builder, 1)), self.dim(builder, 2))

    def cta_depth(self, builder: ir.IRBuilder) -> ir.Value:
        """The CTA's ntid.z: the workgroup's z size / k."""
        return builder.udiv(self.hardware.special_register(builder, "%ntid", "z"), self.cta_count(builder))

    def rank(self, builder: ir.IRBuilder) -> ir.Value:
        """%cluster_ctarank: which slab of the workgroup's z layers the thread is in."""
        return builder.udiv(self.hardware.special_register(builder, "%tid", "z"), self.cta_depth(builder))

    def cluster_ctaid(self, builder: ir.IRBuilder, component: str) -> ir.Value:
        x, y = self.dim(builder, 0), self.dim(builder, 1)
        rank = self.rank(builder)
        if component == "x":
            return builder.urem(rank, x)
        if component == "y":
            return builder.urem(builder.udiv(rank, x), y)
        return builder.udiv(rank, builder.mul(x, y))

    def special_register(self, builder: ir.IRBuilder, register: str, component: str) -> ir.Value:
        hardware = self.hardware.special_register
        size = self.dim(builder, "xyz".index(component))
        if register == "%tid":
            tid = hardware(builder, "%tid", component)
            return builder.urem(tid, self.cta_depth(builder)) if component == "z" else tid
        if register == "%ntid":
            return self.cta_depth(builder) if component == "z" else hardware(builder, "%ntid", component)
        if register == "%ctaid":
            first = builder.mul(hardware(builder, "%ctaid", component), size)
            return builder.add(first, self.cluster_ctaid(builder, component))
        return builder.mul(hardware(builder, "%nctaid", component), size)  # %nctaid

    def linear_thread(self, builder: ir.IRBuilder) -> ir.Value:
        return Target.linear_thread(self, builder)  # the CTA's, from its registers

    def dynamic_shared_size(self, builder: ir.IRBuilder) -> ir.Value:
        """A CTA's part of the launch's dynamic shared memory (the launch gives k parts)."""
        return builder.udiv(self.hardware.dynamic_shared_size(builder), self.cta_count(builder))

    def named_barrier(self, builder, barrier, expected, operation, predicate):
        """The target's named barriers (the host's, and sm_90's hardware ones on the verification target),
        barrier b of CTA r being 1 + b·k + r — so that `bar.sync 0` of up to 15 CTAs stays within the 16
        hardware barriers of an NVIDIA CTA, and barrier 0, the workgroup's (barrier.cluster), is none of
        theirs; a barrier without a count waits for the CTA."""
        everyone = builder.icmp_unsigned("==", expected, ir.Constant(I32, 0))
        ntid = [self.special_register(builder, "%ntid", c) for c in "xyz"]
        cta = builder.mul(builder.mul(ntid[0], ntid[1]), ntid[2])
        own = builder.add(builder.add(builder.mul(barrier, self.cta_count(builder)), self.rank(builder)),
                          ir.Constant(I32, 1))
        return self.hardware.named_barrier(builder, own, builder.select(everyone, cta, expected), operation,
                                           predicate)


@dataclass
class ClusterLayout:
    """Where each CTA's shared memory lies (module docstring): `stride` bytes a CTA of static variables, the
    `dynamic` variables' a k-th of the launch's dynamic bytes."""

    cluster: ClusterShape
    stride: int
    dynamic: frozenset[str]
    block_name: str  # the global (AMDGPU) or window offset (host) holding the static slices

    def entry_delta(self, builder: ir.IRBuilder, target: ClusterTarget) -> ir.Value:
        """The i32 byte offset of the executing CTA's static slice."""
        return builder.mul(target.rank(builder), ir.Constant(I32, self.stride))

    def deltas(self, lw) -> tuple[ir.Value, ir.Value | None]:
        """(static, dynamic) i32 byte offsets of the executing CTA's slices, computed once a function."""
        cached = lw.__dict__.get("_cluster_deltas")
        if cached is None:
            builder, target = lw.builder, lw.target
            cached = (self.entry_delta(builder, target),
                      builder.mul(target.rank(builder), target.dynamic_shared_size(builder)) if self.dynamic else None)
            lw._cluster_deltas = cached
        return cached

    def own_variables(self, lw, memory: dict[str, tuple[str, ir.Value]]) -> dict[str, tuple[str, ir.Value]]:
        """The executing CTA's copies of the .shared variables of `memory`; called where a function begins,
        which computes the CTA's offsets there, where every later use sees them."""
        static, dynamic = self.deltas(lw)
        return {name: (space, lw.builder.gep(pointer, [dynamic if name in self.dynamic else static],
                                             source_etype=ir.IntType(8)))
                for name, (space, pointer) in memory.items() if space == "shared"}

    def own_offset(self, lw, name: str, offset: ir.Constant) -> ir.Value:
        """A variable's shared address (a window offset, on the host) in the executing CTA's slice."""
        static, dynamic = self.deltas(lw)
        delta = dynamic if name in self.dynamic else static
        return lw.builder.add(offset, lw.convert(delta, "u32", _integer(offset.type)))

    def own_static(self, lw, pointer: ir.Value) -> ir.Value:
        """`pointer` (into CTA 0's static slice) moved to the executing CTA's."""
        return lw.builder.gep(pointer, [self.deltas(lw)[0]], source_etype=ir.IntType(8))


def _integer(ty: ir.IntType) -> str:
    return {32: "u32", 64: "u64"}[ty.width]


# ------------------------------------------------------------------------------------------------ lowering

def _launching_kernel(lw) -> ast.Function:
    """The kernel being lowered: the body itself, or, for a .func, the kernel whose LLVM module (named after
    it) the function is lowered into."""
    if lw.kernel.is_kernel:
        return lw.kernel
    prepared = lw.callees.prepared
    kernel = prepared.module.function(lw.builder.module.name) if prepared is not None else None
    if kernel is None or not kernel.is_kernel:
        raise lw.fail("a cluster form in a function lowered outside a known kernel")
    return kernel


def checked_cluster(lw) -> ClusterLayout | None:
    """The layout of the kernel's cluster of several CTAs (a static or launch-given shape: lower_kernel made
    it), None in a cluster of one CTA (a kernel without cluster directives, or `.reqnctapercluster 1, 1, 1`)."""
    return lw.callees.cluster


def explicit_cluster(lw) -> ir.Value:
    """%is_explicit_cluster (i1): whether the cluster shape is explicit — declared (`.reqnctapercluster`,
    `.explicitcluster`), or given by the launch of a kernel whose `.maxclusterrank` only bounds it (a launch
    without cluster dimensions implies clusters of one CTA)."""
    layout = checked_cluster(lw)
    declared = declared_cluster(_launching_kernel(lw))
    if layout is not None and layout.cluster.dims is None and "explicitcluster" not in declared:
        return lw.builder.icmp_unsigned("!=", lw.target.dim(lw.builder, 3), ir.Constant(I32, 0))
    return ir.Constant(I1, int("reqnctapercluster" in declared or "explicitcluster" in declared))


@reads_special("%clusterid", "%nclusterid", "%cluster_ctaid", "%cluster_nctaid", "%cluster_ctarank",
               "%cluster_nctarank", "%is_explicit_cluster")
def cluster_register(lw, operand):
    """In a cluster of several CTAs the registers ClusterTarget synthesises; in a cluster of one CTA the
    cluster is the CTA (%clusterid = %ctaid, %nclusterid = %nctaid), rank 0 at (0, 0, 0) of 1x1x1."""
    layout = checked_cluster(lw)
    if operand.name == "%is_explicit_cluster":
        return explicit_cluster(lw), "pred"
    target, builder = lw.target, lw.builder
    if operand.name == "%cluster_ctarank":
        return (target.rank(builder) if layout else ir.Constant(I32, 0)), "u32"
    if operand.name == "%cluster_nctarank":
        return (target.cta_count(builder) if layout else ir.Constant(I32, 1)), "u32"
    if operand.component not in ("x", "y", "z"):
        raise lw.fail(f"special register {operand.name} needs .x/.y/.z")
    if operand.name in ("%clusterid", "%nclusterid"):
        grid = "%ctaid" if operand.name == "%clusterid" else "%nctaid"
        hardware = target.hardware if layout else target  # a cluster is one workgroup
        return hardware.special_register(builder, grid, operand.component), "u32"
    if operand.name == "%cluster_ctaid":
        return (target.cluster_ctaid(builder, operand.component) if layout else ir.Constant(I32, 0)), "u32"
    if layout is None:
        return ir.Constant(I32, 1), "u32"  # %cluster_nctaid
    return target.dim(builder, "xyz".index(operand.component)), "u32"


def _shared_offset(lw, value: ir.Value, t: str) -> ir.Value:
    """The i32 shared address of `value`: itself for .u32, a generic address's place in .shared for .u64."""
    if t == "u32":
        return value
    window = lw.callees.window
    if window is not None:  # host: generic = the window's address + the offset
        return lw.builder.trunc(lw.builder.sub(value, lw.builder.ptrtoint(window.base, I64)), I32)
    generic = lw.builder.inttoptr(value, ir.PointerType())
    shared = lw.builder.addrspacecast(generic, ir.PointerType(addrspace=lw.target.shared_address_space))
    return lw.builder.ptrtoint(shared, I32)


def _region(lw, layout: ClusterLayout, offset: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(start of CTA 0's slice, slice bytes) of the region — static or dynamic shared memory — that shared
    address `offset` lies in."""
    builder = lw.builder
    if layout.dynamic and not layout.stride:  # no static shared memory (and no block of it): dynamic alone
        return _start(lw, min(layout.dynamic)), lw.target.dynamic_shared_size(builder)
    static_start = _start(lw, layout.block_name)
    if not layout.dynamic:
        return static_start, ir.Constant(I32, layout.stride)
    dynamic_start = _start(lw, min(layout.dynamic))
    dynamic = builder.icmp_unsigned(">=", offset, dynamic_start)
    return (builder.select(dynamic, dynamic_start, static_start),
            builder.select(dynamic, lw.target.dynamic_shared_size(builder), ir.Constant(I32, layout.stride)))


def _start(lw, name: str) -> ir.Value:
    """The shared address of CTA 0's copy of `name` (a variable, or the static block)."""
    window = lw.callees.window
    if window is not None:
        return ir.Constant(I32, window.offsets.get(name, 0))  # the static block opens the window
    pointer = lw.callees.module.globals[name]
    return lw.builder.ptrtoint(pointer, I32)


@handles("mapa")
def mapa(lw, ins):
    """`mapa{.shared::cluster}.u32/.u64 d, a, rank`: a's location in the shared memory of CTA `rank` of the
    cluster: a moved by the slices between the executing CTA and `rank` (a shared::cluster address is the
    workgroup's LDS address; .u64 takes and gives generic addresses). In a cluster of one CTA the only rank
    is 0, the executing CTA (a larger rank is out of range, which the ISA leaves undefined): d = a."""
    layout = checked_cluster(lw)
    lw.check_modifiers(ins, {"shared::cluster"})
    (t,) = lw.types(ins, 1)
    if t not in ("u32", "u64"):
        raise lw.fail("mapa takes .u32 or .u64")
    d, address, rank = lw.operands(ins, 3)
    value, peer = lw.read(address, t), lw.read(rank, "u32")
    if layout is None:
        lw.write(d, value, t)
        return
    builder = lw.builder
    _, stride = _region(lw, layout, _shared_offset(lw, value, t))
    delta = builder.mul(builder.sub(peer, lw.target.rank(builder)), stride)
    lw.write(d, builder.add(value, builder.sext(delta, value.type) if t == "u64" else delta), t)


@handles("getctarank")
def getctarank(lw, ins):
    """`getctarank{.shared::cluster}.u32 d, a`: the rank of the CTA whose shared memory `a` addresses: its
    slice; in a cluster of one CTA, 0."""
    layout = checked_cluster(lw)
    lw.check_modifiers(ins, {"shared::cluster"})
    (t,) = lw.types(ins, 1)
    if t not in ("u32", "u64"):
        raise lw.fail("getctarank takes .u32 or .u64")
    d, address = lw.operands(ins, 2)
    value = lw.read(address, t)
    if layout is None:
        lw.write(d, ir.Constant(I32, 0), "u32")
        return
    offset = _shared_offset(lw, value, t)
    start, stride = _region(lw, layout, offset)
    lw.write(d, lw.builder.udiv(lw.builder.sub(offset, start), stride), "u32")


def _shift_to(lw, layout: ClusterLayout, address: ir.Value, rank: int) -> ir.Value:
    """The i32 byte shift that moves shared::cluster address `address` to the same CTA-relative offset in
    the shared memory of CTA `rank`."""
    builder = lw.builder
    start, stride = _region(lw, layout, address)
    owner = builder.udiv(builder.sub(address, start), stride)
    return builder.mul(builder.sub(ir.Constant(I32, rank), owner), stride)


def multicast_destinations(lw, mask: ir.Value, addresses: list[ast.Operand]) -> list[tuple[ir.Value, list]]:
    """`.multicast::cluster` with 16-bit `ctaMask`: for each CTA rank of the cluster, whether its bit is set
    and, per [address] operand of `addresses` (shared::cluster addresses: the destination, the mbarrier),
    the i32 shift to the same CTA-relative offset in that CTA (None: no shift, in a cluster of one)."""
    layout = checked_cluster(lw)
    builder = lw.builder
    destinations = []
    for rank in range(layout.cluster.ctas if layout else 1):  # (a launch-given shape: the ranks it can have)
        selected = builder.trunc(builder.lshr(builder.zext(mask, I32), ir.Constant(I32, rank)), I1)
        if layout is not None and layout.cluster.dims is None:  # … below the launch's
            below = builder.icmp_unsigned("<", ir.Constant(I32, rank), lw.target.cta_count(builder))
            selected = builder.and_(selected, below)
        shifts = [None if layout is None else _shift_to(lw, layout, _address_value(lw, a), rank) for a in addresses]
        destinations.append((selected, shifts))
    return destinations


def _address_value(lw, operand: ast.Operand) -> ir.Value:
    """The i32 shared address an [address] operand names."""
    if type(operand) is not ast.Address or operand.base is None or operand.extra:
        raise lw.fail("expected a shared [address]")
    return lw.builder.add(lw.read(operand.base, "u32"), ir.Constant(I32, operand.offset & 0xFFFFFFFF))
