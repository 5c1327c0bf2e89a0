"""clusterlaunchcontrol (sm_100+ work stealing): `try_cancel` asks the hardware to cancel the launch of a
cluster that has not started yet, so that a running CTA can do its work instead; `query_cancel` decodes the
16-byte response.

The ISA lets a request fail for any reason, and a failed request is an ordinary outcome a program must
handle (it then does its own work and the cancellable clusters launch as usual). fatkit's AMD launches run
every CTA, so every request fails: try_cancel writes the response fatkit defines for "not cancelled", 16
zero bytes, and completes 16 bytes of transactions on the mbarrier (the ISA's complete-tx of the response's
size), released at .cluster scope like the other asynchronous writes (lower/asynccopy.py); query_cancel's
`is_canceled` is then false, and `get_first_ctaid`, which the ISA leaves undefined after a failed request,
reads 0. Responses are only ever fatkit's own, so query_cancel does not need to read one.
"""

from __future__ import annotations

from llvmlite import ir

from fatkit.translate.lower.asynccopy import _complete_tx
from fatkit.translate.lower.core import I1, I32, Lowering, handles
from fatkit.translate.lower.cluster import checked_cluster
from fatkit.translate.ptx import ast

RESPONSE_BYTES = 16
_DIMENSIONS = ("get_first_ctaid::x", "get_first_ctaid::y", "get_first_ctaid::z")


@handles("clusterlaunchcontrol")
def clusterlaunchcontrol(lw: Lowering, ins: ast.Instruction) -> None:
    operation = ins.modifiers[:1]
    if operation == ("try_cancel",):
        _try_cancel(lw, ins)
    elif operation == ("query_cancel",):
        _query_cancel(lw, ins)
    else:
        raise lw.fail("clusterlaunchcontrol is .try_cancel or .query_cancel")


def _try_cancel(lw: Lowering, ins: ast.Instruction) -> None:
    """try_cancel.async{.shared::cta}.mbarrier::complete_tx::bytes{.multicast::cluster::all}.b128
    [response], [mbar]: the request fails (module docstring)."""
    if not ins.has("async", "mbarrier::complete_tx::bytes", "b128"):
        raise lw.fail("expected clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128")
    if ins.has("multicast::cluster::all"):  # every CTA of the cluster gets the response: here, the one CTA
        checked_cluster(lw)
    lw.check_modifiers(ins, {"try_cancel", "async", "shared::cta", "mbarrier::complete_tx::bytes",
                             "multicast::cluster::all", "b128"})
    response, mbar = lw.operands(ins, 2)
    if type(response) is not ast.Address or response.extra:
        raise lw.fail("the response operand must be a shared [address]")
    pointer = lw.address(response, "shared")
    lw.builder.store(ir.Constant(ir.VectorType(I32, 4), None), pointer, align=RESPONSE_BYTES)
    _complete_tx(lw, mbar, ir.Constant(ir.IntType(64), RESPONSE_BYTES))


def _query_cancel(lw: Lowering, ins: ast.Instruction) -> None:
    """query_cancel.is_canceled.pred.b128 p, response → false; query_cancel.get_first_ctaid{::x,::y,::z}
    (.v4).b32.b128 d, response → 0 (undefined after a failed request)."""
    queries = [m for m in ins.modifiers if m in ("is_canceled", "get_first_ctaid", *_DIMENSIONS)]
    if len(queries) != 1 or "b128" not in ins.modifiers:
        raise lw.fail("expected query_cancel.is_canceled or .get_first_ctaid, on a .b128 response")
    query = queries[0]
    destination, _ = lw.operands(ins, 2)  # the response: always one fatkit wrote (not cancelled)
    if query == "is_canceled":
        lw.check_modifiers(ins, {"query_cancel", "is_canceled"})
        lw.write(destination, ir.Constant(I1, 0), "pred")
        return
    lw.check_modifiers(ins, {"query_cancel", query, "v4"})
    if query == "get_first_ctaid" and ins.has("v4"):
        if type(destination) is not ast.Vector or len(destination.items) != 4:
            raise lw.fail("get_first_ctaid.v4 writes a {x, y, z, _} vector")
        targets = [item for item in destination.items if type(item) is not ast.Sink]
    elif query != "get_first_ctaid":
        targets = [destination]
    else:
        raise lw.fail("get_first_ctaid needs ::x/::y/::z or .v4")
    for target in targets:
        lw.write(target, ir.Constant(I32, 0), "b32")
