"""Special registers: `%tid`, `%ntid`, `%ctaid`, `%nctaid` (per .x/.y/.z) through the target; the warp's
`%laneid`, `%lanemask_*`, `%warpid`, `%nwarpid`; the machine's `%clock`/`%clock64`/`%clock_hi`,
`%globaltimer` (and its _lo/_hi), `%smid`, `%nsmid`, `%gridid` through `Target.machine_register`.
`%envreg1`/`%envreg2` (the grid workspace of cooperative groups) are lower/runtime.py's; the other `%envregN`
are refused: only the CUDA driver gives them values. The cluster registers are those of a cluster of one CTA,
the only kind AMD runs (see `cluster`)."""

from __future__ import annotations

import math

from llvmlite import ir

from fatkit.translate.lower.core import I1, I32, Lowering, handles, reads_special
from fatkit.translate.ptx import ast
from fatkit.translate.lower.warp import WARP, WarpPosition
from fatkit.translate.targets.base import DIM_REGISTERS, Unavailable

MAX_BLOCK_THREADS = 1024  # CUDA's (and AMD's) limit on a block's threads


@reads_special(*DIM_REGISTERS)
def dimension(lw: Lowering, operand: ast.Operand):
    if operand.component not in ("x", "y", "z"):
        raise lw.fail(f"special register {operand.name} needs .x/.y/.z")
    return lw.target.special_register(lw.builder, operand.name, operand.component), "u32"


# ------------------------------------------------------------------------------------------------ warps

@reads_special("%laneid")
def laneid(lw: Lowering, operand: ast.Operand):
    return WarpPosition(lw).lane, "u32"


@reads_special("%lanemask_eq", "%lanemask_le", "%lanemask_lt", "%lanemask_ge", "%lanemask_gt")
def lanemask(lw: Lowering, operand: ast.Operand):
    builder = lw.builder
    below = builder.sub(builder.shl(ir.Constant(I32, 1), WarpPosition(lw).lane), ir.Constant(I32, 1))  # lanes < mine
    mine = builder.add(below, ir.Constant(I32, 1))
    up_to = builder.or_(below, mine)  # lanes <= mine
    masks = {"eq": mine, "lt": below, "le": up_to, "ge": builder.not_(below), "gt": builder.not_(up_to)}
    return masks[operand.name.rpartition("_")[2]], "u32"


@reads_special("%warpid")
def warpid(lw: Lowering, operand: ast.Operand):
    """The warp's index in its block: the linear thread index (x fastest, as warps are formed) / 32. PTX
    only promises an identifier below %nwarpid that may change over time; this one does not."""
    return lw.builder.lshr(lw.target.linear_thread(lw.builder), ir.Constant(I32, 5)), "u32"


@reads_special("%nwarpid")
def nwarpid(lw: Lowering, operand: ast.Operand):
    return ir.Constant(I32, MAX_BLOCK_THREADS // WARP), "u32"  # every %warpid above is below this


# ------------------------------------------------------------------------------------------------ machine

def _machine(lw: Lowering, register: str) -> ir.Value:
    try:
        return lw.target.machine_register(lw.builder, register)
    except Unavailable as error:
        raise lw.fail(str(error)) from error


@reads_special("%clock64", "%globaltimer", "%gridid")
def counter64(lw: Lowering, operand: ast.Operand):
    return _machine(lw, operand.name), "u64"


@reads_special("%clock", "%clock_hi", "%globaltimer_lo", "%globaltimer_hi")
def counter_half(lw: Lowering, operand: ast.Operand):
    """The low or high 32 bits of %clock64 / %globaltimer."""
    whole, _, half = operand.name.partition("_")
    value = _machine(lw, "%clock64" if whole == "%clock" else whole)
    if half == "hi":
        value = lw.builder.lshr(value, ir.Constant(value.type, 32))
    return lw.builder.trunc(value, I32), "u32"


@reads_special("%smid", "%nsmid")
def processor(lw: Lowering, operand: ast.Operand):
    return _machine(lw, operand.name), "u32"


@reads_special(*(f"%envreg{i}" for i in range(32) if i not in (1, 2)))
def envreg(lw: Lowering, operand: ast.Operand):
    raise lw.fail(f"{operand.name} holds a value the CUDA driver sets for the launch, which fatkit does not "
                  "define (only %envreg1/%envreg2, the grid workspace of cooperative groups)")


# ------------------------------------------------------------------------------------------------ clusters

_CLUSTER_DIRECTIVES = ("reqnctapercluster", "explicitcluster", "maxclusterrank")


def _launching_kernel(lw: Lowering):
    """The kernel being lowered: the body itself, or, for a .func, the kernel whose LLVM module (named after
    it) the function is lowered into."""
    if lw.kernel.is_kernel:
        return lw.kernel
    prepared = lw.callees.prepared
    kernel = prepared.module.function(lw.builder.module.name) if prepared is not None else None
    if kernel is None or not kernel.is_kernel:
        raise lw.fail("a cluster register in a function lowered outside a known kernel")
    return kernel


def explicit_cluster_of_one(lw: Lowering) -> bool:
    """Whether the kernel's cluster of one CTA was declared (`.reqnctapercluster 1, 1, 1`) rather than
    implied by a launch without cluster dimensions; raises for a kernel whose clusters may hold more."""
    kernel = _launching_kernel(lw)
    declared = {d.name: d.values for d in kernel.directives if d.name in _CLUSTER_DIRECTIVES}
    shape = declared.get("reqnctapercluster")
    if shape is not None:
        ctas = math.prod(shape)
        if ctas != 1:
            raise lw.fail(f"{kernel.name} declares clusters of {ctas} CTAs (.reqnctapercluster "
                          f"{', '.join(map(str, shape))}): AMD has no thread-block clusters"
                          + _one_workgroup(lw, kernel, ctas))
        return True
    if "explicitcluster" in declared:
        raise lw.fail(f"{kernel.name} declares .explicitcluster: its cluster shape is given at launch, and AMD "
                      "has no thread-block clusters")
    rank = declared.get("maxclusterrank")
    if rank and rank[0] > 1:
        raise lw.fail(f"{kernel.name} allows clusters of up to {rank[0]} CTAs (.maxclusterrank): AMD has no "
                      "thread-block clusters")
    return False


_WORKGROUP_LDS = 64 * 1024  # LDS one AMD workgroup may use on gfx9 (gfx90a, gfx942) and RDNA


def _one_workgroup(lw: Lowering, kernel, ctas: int) -> str:
    """Whether a cluster of `ctas` CTAs could run as one AMD workgroup (k·blockDim ≤ 1024 threads, k times the
    static shared memory in one workgroup's LDS), as far as the kernel's directives tell."""
    threads = next((math.prod(d.values) for d in kernel.directives if d.name in ("reqntid", "maxntid")), None)
    shared = lw.callees.static_shared_bytes
    if threads is not None and ctas * threads > MAX_BLOCK_THREADS:
        return (f", and {ctas} CTAs of {threads} threads cannot run as one workgroup ({ctas * threads} > "
                f"{MAX_BLOCK_THREADS} threads)")
    if ctas * shared > _WORKGROUP_LDS:
        return (f", and {ctas} CTAs of {shared} bytes of shared memory cannot run as one workgroup ({ctas * shared} > "
                f"{_WORKGROUP_LDS} bytes of LDS)")
    size = f"{ctas} x {threads} threads" if threads is not None else f"{ctas} x blockDim threads (<= {MAX_BLOCK_THREADS})"
    return (f"; running the cluster as one workgroup ({size}, {ctas} x {shared} bytes of shared memory) is not "
            "implemented yet")


@reads_special("%clusterid", "%nclusterid", "%cluster_ctaid", "%cluster_nctaid", "%cluster_ctarank",
               "%cluster_nctarank", "%is_explicit_cluster")
def cluster(lw: Lowering, operand: ast.Operand):
    """A cluster of one CTA: the cluster is the CTA (%clusterid = %ctaid, %nclusterid = %nctaid), the CTA is
    rank 0 at (0, 0, 0) of a 1x1x1 cluster. AMD launches no clusters, so a kernel that does not require
    more than one CTA a cluster runs in clusters of one (CUDA's implicit 1x1x1 cluster)."""
    explicit = explicit_cluster_of_one(lw)
    if operand.name == "%is_explicit_cluster":
        return ir.Constant(I1, int(explicit)), "pred"
    if operand.name in ("%cluster_ctarank", "%cluster_nctarank"):
        return ir.Constant(I32, int(operand.name == "%cluster_nctarank")), "u32"
    if operand.component not in ("x", "y", "z"):
        raise lw.fail(f"special register {operand.name} needs .x/.y/.z")
    if operand.name in ("%clusterid", "%nclusterid"):
        grid = "%ctaid" if operand.name == "%clusterid" else "%nctaid"
        return lw.target.special_register(lw.builder, grid, operand.component), "u32"
    return ir.Constant(I32, int(operand.name == "%cluster_nctaid")), "u32"


@handles("mapa")
def mapa(lw: Lowering, ins: ast.Instruction) -> None:
    """`mapa{.shared::cluster}.u32/.u64 d, a, rank`: a's location in the shared memory of CTA `rank` of the
    cluster. In a cluster of one CTA the only rank is 0, the executing CTA (a larger rank is out of range,
    which the ISA leaves undefined), whose shared memory `a` already addresses: d = a."""
    explicit_cluster_of_one(lw)
    lw.check_modifiers(ins, {"shared::cluster"})
    (t,) = lw.types(ins, 1)
    if t not in ("u32", "u64"):
        raise lw.fail("mapa takes .u32 or .u64")
    d, address, rank = lw.operands(ins, 3)
    lw.read(rank, "u32")
    lw.write(d, lw.read(address, t), t)


@handles("getctarank")
def getctarank(lw: Lowering, ins: ast.Instruction) -> None:
    """`getctarank{.shared::cluster}.u32 d, a`: the rank of the CTA whose shared memory `a` addresses; in a
    cluster of one CTA, 0."""
    explicit_cluster_of_one(lw)
    lw.check_modifiers(ins, {"shared::cluster"})
    (t,) = lw.types(ins, 1)
    if t not in ("u32", "u64"):
        raise lw.fail("getctarank takes .u32 or .u64")
    d, address = lw.operands(ins, 2)
    lw.read(address, t)
    lw.write(d, ir.Constant(I32, 0), "u32")
