"""Special registers: `%tid`, `%ntid`, `%ctaid`, `%nctaid` (per .x/.y/.z) through the target; the warp's
`%laneid`, `%lanemask_*`, `%warpid`, `%nwarpid`; the machine's `%clock`/`%clock64`/`%clock_hi`,
`%globaltimer` (and its _lo/_hi), `%smid`, `%nsmid`, `%gridid` through `Target.machine_register`.
`%envreg1`/`%envreg2` (the grid workspace of cooperative groups) are lower/runtime.py's; the other `%envregN`
are refused: only the CUDA driver gives them values. The cluster registers are lower/cluster.py's."""

from __future__ import annotations

from llvmlite import ir

from fatkit.translate.lower.core import I32, Lowering, reads_special
from fatkit.translate.lower.warp import WARP, WarpPosition
from fatkit.translate.targets.base import DIM_REGISTERS, Unavailable
from fatkit.translate.ptx import ast

MAX_BLOCK_THREADS = 1024  # CUDA's (and AMD's) limit on a block's threads


@reads_special(*DIM_REGISTERS)
def dimension(lw: Lowering, operand: ast.Name):
    if operand.component not in ("x", "y", "z"):
        raise lw.fail(f"special register {operand.name} needs .x/.y/.z")
    return lw.target.special_register(lw.builder, operand.name, operand.component), "u32"


# ------------------------------------------------------------------------------------------------ warps

@reads_special("%laneid")
def laneid(lw: Lowering, operand: ast.Name):
    return WarpPosition(lw).lane, "u32"


@reads_special("%lanemask_eq", "%lanemask_le", "%lanemask_lt", "%lanemask_ge", "%lanemask_gt")
def lanemask(lw: Lowering, operand: ast.Name):
    builder = lw.builder
    below = builder.sub(builder.shl(ir.Constant(I32, 1), WarpPosition(lw).lane), ir.Constant(I32, 1))  # lanes < mine
    mine = builder.add(below, ir.Constant(I32, 1))
    up_to = builder.or_(below, mine)  # lanes <= mine
    masks = {"eq": mine, "lt": below, "le": up_to, "ge": builder.not_(below), "gt": builder.not_(up_to)}
    return masks[operand.name.rpartition("_")[2]], "u32"


@reads_special("%warpid")
def warpid(lw: Lowering, operand: ast.Name):
    """The warp's index in its block: the linear thread index (x fastest, as warps are formed) / 32. PTX
    only promises an identifier below %nwarpid that may change over time; this one does not."""
    return lw.builder.lshr(lw.target.linear_thread(lw.builder), ir.Constant(I32, 5)), "u32"


@reads_special("%nwarpid")
def nwarpid(lw: Lowering, operand: ast.Name):
    return ir.Constant(I32, MAX_BLOCK_THREADS // WARP), "u32"  # every %warpid above is below this


# ------------------------------------------------------------------------------------------------ machine

def _machine(lw: Lowering, register: str) -> ir.Value:
    try:
        return lw.target.machine_register(lw.builder, register)
    except Unavailable as error:
        raise lw.fail(str(error)) from error


@reads_special("%clock64", "%globaltimer", "%gridid")
def counter64(lw: Lowering, operand: ast.Name):
    return _machine(lw, operand.name), "u64"


@reads_special("%clock", "%clock_hi", "%globaltimer_lo", "%globaltimer_hi")
def counter_half(lw: Lowering, operand: ast.Name):
    """The low or high 32 bits of %clock64 / %globaltimer."""
    whole, _, half = operand.name.partition("_")
    value = _machine(lw, "%clock64" if whole == "%clock" else whole)
    if half == "hi":
        value = lw.builder.lshr(value, ir.Constant(value.type, 32))
    return lw.builder.trunc(value, I32), "u32"


@reads_special("%smid", "%nsmid")
def processor(lw: Lowering, operand: ast.Name):
    return _machine(lw, operand.name), "u32"


@reads_special(*(f"%envreg{i}" for i in range(32) if i not in (1, 2)))
def envreg(lw: Lowering, operand: ast.Name):
    raise lw.fail(f"{operand.name} holds a value the CUDA driver sets for the launch, which fatkit does not "
                  "define (only %envreg1/%envreg2, the grid workspace of cooperative groups)")
