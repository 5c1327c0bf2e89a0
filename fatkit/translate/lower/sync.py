"""Synchronisation: the block barrier bar.sync 0 / barrier.sync 0."""

from __future__ import annotations

from fatkit.translate.lower.core import handles
from fatkit.translate.ptx import ast


@handles("bar", "barrier")
def bar(lw, ins):
    # bar.sync 0 / barrier.sync 0: the whole block at barrier 0; named barriers and counts are not.
    lw.check_modifiers(ins, {"sync", "aligned"} if ins.opcode == "barrier" else {"sync"})
    if "sync" not in ins.modifiers:
        raise lw.fail("only bar.sync / barrier.sync are supported yet")
    (barrier,) = lw.operands(ins, 1)
    if type(barrier) is not ast.IntImm or barrier.value != 0:
        raise lw.fail("only barrier 0 without a thread count is supported yet")
    if lw.target.shared_address_space is None:
        raise lw.fail(f"the {lw.target.name} target runs threads one after another and cannot "
                        "wait at a barrier")
    lw.target.barrier(lw.builder)
