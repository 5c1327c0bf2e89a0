"""Portability hazards of PTX kernels (fatkit/translate/hazards.py): every kind on a hand-written snippet, the
call graph, shared memory against each target's LDS, target filtering, and spot checks on real PTX."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from fatkit.errors import UsageError
from fatkit.extract.scan import scan_paths
from fatkit.translate.hazards import (
    BOTH,
    ERROR,
    HAZARD_KINDS,
    INFO,
    SEVERITIES,
    WARNING,
    KernelHazards,
    analyse,
    lint_binary,
    lint_ptx,
    target_family,
    target_names,
)
from fatkit.translate.ptx import parse_ptx
from tests.corpus import corpus_file

SAMPLES = Path(__file__).parent / "samples"
W64 = ("wave64",)

DECLARATIONS = """\
.reg .pred %p<4>;
.reg .b16 %rs<4>;
.reg .b32 %r<16>;
.reg .b64 %rd<8>;
.reg .f32 %f<16>;
.reg .f64 %fd<4>;
"""


def module(body: str, *, before: str = "", header: str = "", address_size: int = 64) -> str:
    """A module with one kernel `k` whose body is `body` (registers declared); `before` goes at module scope."""
    return (f".version 9.0\n.target sm_100a\n.address_size {address_size}\n{before}\n"
            f".visible .entry k(\n.param .u64 k_param_0\n){header}\n{{\n{DECLARATIONS}{body}\nret;\n}}\n")


def line_of(text: str, needle: str, nth: int = 0) -> int:
    """The 1-based line of the nth line of `text` containing `needle`."""
    return [i for i, line in enumerate(text.splitlines(), 1) if needle in line][nth]


def only_kernel(text: str) -> KernelHazards:
    kernels = analyse(parse_ptx(text, source="t.ptx"))
    assert len(kernels) == 1
    return kernels[0]


def found(kernel: KernelHazards) -> list[tuple[str, str, int, tuple[str, ...]]]:
    return [(h.kind, h.severity, h.line, h.targets) for h in kernel.hazards]


# --------------------------------------------------------------------------------------------------
# every kind, one instruction at a time

INSTRUCTIONS = [
    ("wgmma", "wgmma.fence.sync.aligned;", WARNING, BOTH),
    ("wgmma", "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, 1, 1, 1, 0, 0;",
     WARNING, BOTH),
    ("tcgen05", "tcgen05.fence::before_thread_sync;", ERROR, BOTH),
    ("tcgen05", "tcgen05.ld.sync.aligned.32x32b.x2.b32 {%r1, %r2}, [%r3];", ERROR, BOTH),
    ("tensor-map", "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                   "[%r1], [%rd1, {%r2, %r3}], [%r4];", WARNING, BOTH),
    ("tensor-map", "cp.reduce.async.bulk.tensor.1d.global.shared::cta.add.tile.bulk_group [%rd1, {%r1}], [%r2];",
     WARNING, BOTH),
    # forms translate lowers (translate/coverage.py) are warnings, however hard
    ("tensor-map", "prefetch.tensormap [%rd1];", WARNING, BOTH),
    ("tensor-map", "tensormap.replace.tile.global_address.global.b1024.b64 [%rd1], %rd2;", WARNING, BOTH),
    ("tensor-map", "fence.proxy.tensormap::generic.acquire.gpu [%rd1], 128;", WARNING, BOTH),
    ("cluster", "mapa.u64 %rd2, %rd1, %r1;", WARNING, BOTH),  # as in a cluster of one CTA
    ("cluster", "getctarank.shared::cluster.u32 %r1, %r2;", WARNING, BOTH),
    ("cluster", "barrier.cluster.arrive;", WARNING, BOTH),
    ("cluster", "st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%r1], %r2, [%r3];", WARNING, BOTH),
    ("cluster-launch-control", "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 "
                               "[%r1], [%r2];", WARNING, BOTH),
    ("multimem", "multimem.ld_reduce.relaxed.sys.global.add.u32 %r1, [%rd1];", ERROR, BOTH),
    # image instructions: RDNA only (wave32); gfx942/gfx950 have none, gfx908/gfx90a's are not translated
    ("texture", "tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f5, %f6}];", ERROR, W64),
    ("texture", "txq.width.b32 %r1, [%rd1];", ERROR, W64),
    ("surface", "suld.b.2d.b32.trap {%r1}, [%rd1, {%r2, %r3}];", ERROR, W64),
    ("surface", "sust.b.1d.b32.zero [%rd1, {%r1}], {%r2};", ERROR, W64),
    ("warp-shuffle", "shfl.sync.bfly.b32 %r1, %r2, 1, 31, -1;", WARNING, W64),
    ("warp-shuffle", "shfl.sync.idx.b32 %r1|%p1, %r2, 0, 31, -1;", WARNING, W64),
    ("warp-vote", "vote.sync.ballot.b32 %r1, %p1, -1;", WARNING, W64),
    ("warp-vote", "vote.sync.any.pred %p2, %p1, -1;", WARNING, W64),
    ("warp-activemask", "activemask.b32 %r1;", WARNING, W64),
    ("warp-elect", "elect.sync %r1|%p1, -1;", WARNING, W64),
    ("warp-match", "match.any.sync.b32 %r1, %r2, -1;", WARNING, BOTH),
    ("warp-reduce", "redux.sync.add.u32 %r1, %r2, -1;", WARNING, BOTH),
    ("warp-sync", "bar.warp.sync -1;", WARNING, BOTH),
    ("laneid", "mov.u32 %r1, %laneid;", WARNING, W64),
    ("lanemask", "mov.u32 %r1, %lanemask_lt;", WARNING, W64),
    ("lanemask", "and.b32 %r1, %r2, %lanemask_ge;", WARNING, W64),
    ("mma", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, "
            "{%r5, %r6}, {%f5, %f6, %f7, %f8};", WARNING, BOTH),
    ("mma", "wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8}, [%rd1];",
     WARNING, BOTH),
    ("ldmatrix", "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r5];", WARNING, BOTH),
    ("stmatrix", "stmatrix.sync.aligned.m8n8.x2.shared.b16 [%r1], {%r2, %r3};", WARNING, BOTH),
    ("movmatrix", "movmatrix.sync.aligned.m8n8.trans.b16 %r1, %r2;", WARNING, BOTH),
    ("cp-async", "cp.async.ca.shared.global [%r1], [%rd1], 4;", WARNING, BOTH),
    ("cp-async", "cp.async.commit_group;", WARNING, BOTH),
    ("cp-async", "cp.async.wait_group 0;", WARNING, BOTH),
    ("cp-async-bulk", "cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r1], 256;", WARNING, BOTH),
    ("cp-async-bulk", "cp.async.bulk.wait_group.read 0;", WARNING, BOTH),
    ("mbarrier", "mbarrier.init.shared::cta.b64 [%r1], 1;", WARNING, BOTH),
    ("mbarrier", "mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], 0;", WARNING, BOTH),
    ("approx", "ex2.approx.ftz.f32 %f1, %f2;", WARNING, BOTH),
    ("approx", "rsqrt.approx.f64 %fd1, %fd2;", WARNING, BOTH),
    ("approx", "div.full.f32 %f1, %f2, %f3;", WARNING, BOTH),
    ("rounding-mode", "fma.rm.f32 %f1, %f2, %f3, %f4;", WARNING, BOTH),
    ("rounding-mode", "add.rz.f64 %fd1, %fd2, %fd3;", WARNING, BOTH),
    ("rounding-mode", "cvt.rz.f32.f64 %f1, %fd1;", WARNING, BOTH),
    ("cluster-register", "mov.u32 %r1, %cluster_ctarank;", WARNING, BOTH),
    ("cluster-register", "mov.u32 %r1, %clusterid.x;", WARNING, BOTH),
    ("grid-sync", "mov.u32 %r1, %envreg1;", WARNING, BOTH),
    ("grid-sync", "mov.u32 %r1, %envreg2;", WARNING, BOTH),
    ("proxy-fence", "fence.proxy.async.shared::cta;", INFO, BOTH),
    ("grid-dependency", "griddepcontrol.wait;", INFO, BOTH),
    ("register-realloc", "setmaxnreg.inc.sync.aligned.u32 232;", INFO, BOTH),
    ("trap", "trap;", INFO, BOTH),
    ("dynamic-stack", "alloca.u64 %rd1, %rd2, 16;", INFO, BOTH),
    ("hardware-id", "mov.u32 %r1, %smid;", INFO, BOTH),
    ("clock", "mov.u64 %rd1, %clock64;", INFO, BOTH),
    ("clock", "mov.u64 %rd1, %globaltimer;", INFO, BOTH),
]


@pytest.mark.parametrize("kind, instruction, severity, targets", INSTRUCTIONS,
                         ids=[f"{k}:{i.split()[0]}" for k, i, _, _ in INSTRUCTIONS])
def test_each_instruction_kind(kind, instruction, severity, targets):
    text = module(f"mov.u32 %r9, %tid.x;\n{instruction}\nadd.s32 %r9, %r9, 1;")
    kernel = only_kernel(text)
    assert found(kernel) == [(kind, severity, line_of(text, instruction), targets)]
    assert kernel.hazards[0].function is None
    # the message starts with what was found: the instruction or the special register
    assert kernel.hazards[0].message.split(":")[0].split()[0] in instruction


def test_a_refused_form_without_an_error_kind_is_not_translated(monkeypatch):
    """Every form the coverage table refuses today has an error kind of its own; a refused row whose kinds are
    only warnings (or none) must still be an error, naming the table's reason."""
    import fatkit.translate.hazards as hazards

    monkeypatch.setattr(hazards, "refusal",
                        lambda opcode, modifiers: "a test-only reason" if opcode == "nanosleep" else None)
    text = module("mov.u32 %r9, %tid.x;\nnanosleep.u32 %r9;\nadd.s32 %r9, %r9, 1;")
    kernel = only_kernel(text)
    assert ("not-translated", ERROR, line_of(text, "nanosleep.u32 %r9;"), BOTH) in found(kernel)
    assert any("a test-only reason" in h.message for h in kernel.hazards)


def test_every_kind_of_the_taxonomy_is_tested():
    tested = {k for k, *_ in INSTRUCTIONS} | {
        "printf", "assert", "device-heap", "extern-call", "dynamic-parallelism", "address-size-32", "ftz-mix",
        "shared-memory", "dynamic-shared-memory", "not-translated",
    }
    assert tested == set(HAZARD_KINDS)
    for kind in HAZARD_KINDS.values():
        assert kind.severity in SEVERITIES
        assert set(kind.targets) <= set(BOTH)


@pytest.mark.parametrize("instruction", [
    "cvt.rzi.s32.f32 %r1, %f1;",  # integer rounding needs no rounding mode
    "add.rn.f32 %f1, %f2, %f3;",  # round-to-nearest is AMD's default mode
    "cvt.rn.f16.f32 %rs1, %f1;",
    "mov.u32 %r1, %tid.x;",
    "bar.sync 0;",
    "barrier.sync.aligned 0;",
    "fence.acq_rel.gpu;",
    "atom.global.add.u32 %r1, [%rd1], 1;",
    "mul.wide.u32 %rd1, %r1, 4;",
    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], %r2, [%r3];",
])
def test_ordinary_instructions_raise_nothing_or_only_their_own_kind(instruction):
    kinds = [h.kind for h in only_kernel(module(instruction)).hazards]
    assert kinds == (["cp-async-bulk"] if instruction.startswith("cp.async.bulk") else [])


def test_multicast_bulk_copy_is_a_bulk_copy_and_a_cluster_operation():
    instruction = ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
                   "[%r1], [%rd1], %r2, [%r3], %rs1;")
    text = module(instruction)
    assert sorted(found(only_kernel(text))) == [("cluster", WARNING, line_of(text, "multicast"), BOTH),
                                               ("cp-async-bulk", WARNING, line_of(text, "multicast"), BOTH)]


def test_one_finding_per_kind_and_line():
    text = module("mov.u32 %r1, %laneid;\nadd.u32 %r2, %laneid, %laneid;")
    assert [(h.kind, h.line) for h in only_kernel(text).hazards] == [("laneid", line_of(text, "mov.u32 %r1")),
                                                                    ("laneid", line_of(text, "add.u32 %r2"))]


def test_cluster_directives_are_reported_at_the_kernel():
    """A shape the PTX fixes or the launch gives translates (as one workgroup): a warning."""
    for header, severity in (("\n.reqnctapercluster 2, 1, 1", WARNING), ("\n.explicitcluster", WARNING),
                             ("\n.maxclusterrank 4", WARNING)):
        text = module("", header=header)
        assert found(only_kernel(text)) == [("cluster", severity, line_of(text, ".entry k"), BOTH)]
        assert only_kernel(text).hazards[0].message.startswith(header.split()[0])


def test_address_size_32():
    text = module("mov.u32 %r1, %tid.x;", address_size=32)
    assert found(only_kernel(text)) == [("address-size-32", WARNING, line_of(text, ".entry k"), BOTH)]
    assert not only_kernel(module("mov.u32 %r1, %tid.x;")).hazards


# --------------------------------------------------------------------------------------------------
# called functions

EXTERNS = """\
.extern .func (.param .b32 func_retval0) vprintf(.param .b64 vprintf_param_0, .param .b64 vprintf_param_1);
.extern .func __assertfail(.param .b64 a0, .param .b64 a1, .param .b32 a2, .param .b64 a3, .param .b64 a4);
.extern .func (.param .b64 func_retval0) malloc(.param .b64 malloc_param_0);
.extern .func (.param .b64 func_retval0) cudaGetParameterBufferV2(.param .b64 p0, .param .align 4 .b8 p1[12],
    .param .align 4 .b8 p2[12], .param .b32 p3);
.extern .func helper_elsewhere(.param .b32 x);
"""


def test_calls_to_functions_the_module_only_declares():
    body = """\
{ .param .b64 param0; .param .b64 param1; .param .b32 retval0;
call.uni (retval0), vprintf, (param0, param1); }
{ .param .b64 a0; .param .b64 a1; .param .b32 a2; .param .b64 a3; .param .b64 a4;
call.uni __assertfail, (a0, a1, a2, a3, a4); }
{ .param .b64 param0; .param .b64 retval0;
call.uni (retval0), malloc, (param0); }
{ .param .b64 p0; .param .align 4 .b8 p1[12]; .param .align 4 .b8 p2[12]; .param .b32 p3; .param .b64 retval0;
call.uni (retval0), cudaGetParameterBufferV2, (p0, p1, p2, p3); }
{ .param .b32 x;
call.uni helper_elsewhere, (x); }"""
    text = module(body, before=EXTERNS)
    assert found(only_kernel(text)) == [
        ("printf", WARNING, line_of(text, "call.uni (retval0), vprintf"), BOTH),
        ("assert", WARNING, line_of(text, "call.uni __assertfail"), BOTH),
        ("device-heap", WARNING, line_of(text, "call.uni (retval0), malloc"), BOTH),
        ("dynamic-parallelism", ERROR, line_of(text, "call.uni (retval0), cudaGetParameterBufferV2"), BOTH),
        ("extern-call", WARNING, line_of(text, "call.uni helper_elsewhere"), BOTH),
    ]
    assert "helper_elsewhere" in only_kernel(text).hazards[-1].message


CALL_CHAIN = """\
.func leaf(.param .b32 leaf_param_0)
{
.reg .b32 %r<4>;
.shared .align 4 .b8 leaf_tile[1024];
mov.u32 %r1, %laneid;
shfl.sync.bfly.b32 %r2, %r1, 1, 31, -1;
mov.u32 %r3, leaf_tile;
ret;
}
.func middle()
{
{ .param .b32 p;
call.uni leaf, (p); }
ret;
}
.func unused()
{
tcgen05.fence::before_thread_sync;
ret;
}
"""


def test_functions_are_reached_transitively_and_only_those():
    text = module("{ call.uni middle, (); }", before=CALL_CHAIN)
    kernel = only_kernel(text)
    assert kernel.functions == ("middle", "leaf")
    assert found(kernel) == [("laneid", WARNING, line_of(text, "%laneid"), W64),
                             ("warp-shuffle", WARNING, line_of(text, "shfl.sync"), W64)]
    assert {h.function for h in kernel.hazards} == {"leaf"}
    assert kernel.static_shared_bytes == 1024  # the .shared of a called function counts
    assert not any(h.kind == "tcgen05" for h in kernel.hazards)


def test_indirect_calls_reach_every_function_whose_address_is_taken():
    before = CALL_CHAIN + ".global .align 8 .u64 table[1] = {middle};\n"
    body = """\
mov.u64 %rd1, table;
ld.global.u64 %rd2, [%rd1];
{ .param .b32 param0;
proto : .callprototype _ ();
call %rd2, (), proto; }"""
    kernel = only_kernel(module(body, before=before))
    assert kernel.functions == ("middle", "leaf")
    assert [h.kind for h in kernel.hazards] == ["laneid", "warp-shuffle"]


def test_indirect_calls_reach_their_calltargets():
    body = "ld.param.u64 %rd1, [k_param_0];\ncallees: .calltargets leaf;\n{ .param .b32 p;\ncall %rd1, (p), callees; }"
    kernel = only_kernel(module(body, before=CALL_CHAIN))
    assert kernel.functions == ("leaf",)
    assert [h.kind for h in kernel.hazards] == ["laneid", "warp-shuffle"]


def test_each_kernel_gets_the_findings_of_what_it_calls():
    text = (".version 9.0\n.target sm_90\n.address_size 64\n" + CALL_CHAIN +
            ".entry a()\n{\n{ call.uni middle, (); }\nret;\n}\n"
            ".entry b()\n{\nvote.sync.all.pred %p1, %p1, -1;\nret;\n}\n"
            ".entry c()\n{\n{ call.uni unused, (); }\nret;\n}\n")
    text = text.replace("vote.sync", ".reg .pred %p<2>;\nvote.sync")
    a, b, c = analyse(parse_ptx(text))
    assert (a.name, b.name, c.name) == ("a", "b", "c")
    assert [h.kind for h in a.hazards] == ["laneid", "warp-shuffle"]
    assert [h.kind for h in b.hazards] == ["warp-vote"]
    assert [h.kind for h in c.hazards] == ["tcgen05"] and c.worst == ERROR


# --------------------------------------------------------------------------------------------------
# floating-point modes


def test_mixed_ftz_is_reported_once_at_the_first_instruction_of_the_minority():
    body = ("add.ftz.f32 %f1, %f2, %f3;\nmul.ftz.f32 %f1, %f1, %f3;\nsetp.gt.ftz.f32 %p1, %f1, %f2;\n"
            "add.f32 %f4, %f1, %f2;\nsub.f32 %f5, %f1, %f2;\nfma.rn.ftz.f32 %f6, %f1, %f2, %f3;")
    text = module(body)
    (hazard,) = only_kernel(text).hazards
    assert (hazard.kind, hazard.severity, hazard.line) == ("ftz-mix", WARNING, line_of(text, "add.f32 %f4"))
    assert "4 vs 2" in hazard.message and "non-.ftz ones" in hazard.message
    assert hazard.message.startswith("add.f32:")


def test_uniform_ftz_and_approximations_do_not_count_as_a_mix():
    assert not only_kernel(module("add.ftz.f32 %f1, %f2, %f3;\nmul.ftz.f32 %f1, %f1, %f3;")).hazards
    assert not only_kernel(module("add.f32 %f1, %f2, %f3;\nadd.f64 %fd1, %fd2, %fd3;")).hazards
    # ex2.approx.ftz is what nvcc emits for expf even without fast math: it is an approximation, not a mix
    assert [h.kind for h in only_kernel(module("add.f32 %f1, %f2, %f3;\nex2.approx.ftz.f32 %f4, %f1;")).hazards] \
        == ["approx"]


def test_ftz_mix_counts_across_called_functions():
    before = ".func f()\n{\n.reg .f32 %f<4>;\nadd.ftz.f32 %f1, %f2, %f3;\nret;\n}\n"
    text = module("add.f32 %f1, %f2, %f3;\nsub.f32 %f4, %f1, %f2;\n{ call.uni f, (); }", before=before)
    (hazard,) = only_kernel(text).hazards
    assert (hazard.kind, hazard.line, hazard.function) == ("ftz-mix", line_of(text, "add.ftz.f32"), "f")


# --------------------------------------------------------------------------------------------------
# shared memory and LDS


def test_static_shared_sums_what_the_kernel_uses_with_alignment():
    before = (".shared .align 4 .b8 used_global[100];\n.shared .align 16 .b8 unused_global[50000];\n")
    body = (".shared .align 1 .b8 one[1];\n.shared .align 16 .v4 .f32 vec[2];\n"
            "mov.u32 %r1, used_global;\nmov.u32 %r2, one;\nmov.u32 %r3, vec;")
    kernel = only_kernel(module(body, before=before))
    # one (1) → vec at 16 (+32 = 48) → used_global at 48 (+100 = 148); unused_global is not referenced
    assert kernel.static_shared_bytes == 148
    assert kernel.dynamic_shared == () and not kernel.hazards


@pytest.mark.parametrize("kib, targets", [
    (48, None),
    (64, None),  # exactly the LDS fits
    (80, ("wave32", "gfx906", "gfx908", "gfx90a", "gfx942")),
    (160, ("wave32", "gfx906", "gfx908", "gfx90a", "gfx942")),
    (161, ("wave32", "wave64")),
])
def test_static_shared_against_each_targets_lds(kib, targets):
    text = module(f".shared .align 16 .b8 big[{kib * 1024}];\nmov.u32 %r1, big;")
    kernel = only_kernel(text)
    assert kernel.static_shared_bytes == kib * 1024
    if targets is None:
        assert not kernel.hazards
        return
    assert found(kernel) == [("shared-memory", ERROR, line_of(text, ".entry k"), targets)]
    by_target = {t: bool(kernel.for_target(t).hazards) for t in ("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201")}
    assert by_target == {"gfx90a": True, "gfx942": True, "gfx950": kib > 160, "gfx1100": True, "gfx1201": True}
    assert f"{kib * 1024} bytes" in kernel.hazards[0].message


def test_dynamic_shared_is_unknown_at_compile_time():
    before = ".extern .shared .align 16 .b8 dyn[];\n.extern .shared .align 16 .b8 other_dyn[];\n"
    text = module(".shared .align 4 .b8 fixed[1024];\nmov.u32 %r1, dyn;\nmov.u32 %r2, fixed;", before=before)
    kernel = only_kernel(text)
    assert kernel.static_shared_bytes == 1024 and kernel.dynamic_shared == ("dyn",)
    assert found(kernel) == [("dynamic-shared-memory", INFO, line_of(text, "dyn[]"), BOTH)]
    message = kernel.hazards[0].message
    assert "dyn" in message and "63 KiB on gfx906/gfx908/gfx90a/gfx942/RDNA" in message
    assert "159 KiB on gfx950" in message


# --------------------------------------------------------------------------------------------------
# targets


@pytest.mark.parametrize("target, family, wave, lds_kib", [
    ("gfx942", "gfx942", "wave64", 64),
    ("gfx942:sramecc+:xnack-", "gfx942", "wave64", 64),
    ("gfx90a:xnack+", "gfx90a", "wave64", 64),
    ("gfx950", "gfx950", "wave64", 160),
    ("gfx908", "gfx908", "wave64", 64),
    ("gfx906", "gfx906", "wave64", 64),
    ("gfx1030", "gfx10", "wave32", 64),
    ("gfx1100", "gfx11", "wave32", 64),
    ("gfx1151", "gfx11", "wave32", 64),
    ("gfx1201", "gfx12", "wave32", 64),
])
def test_target_families(target, family, wave, lds_kib):
    f = target_family(target)
    assert (f.name, f.wave, f.lds_bytes) == (family, wave, lds_kib * 1024)
    assert target_names(target) == {family, wave}


def test_unknown_targets_and_wave_classes():
    for bad in ("gfx900", "sm_90", "gfx13", ""):
        with pytest.raises(UsageError):
            target_family(bad)
    assert target_names("wave64") == {"wave64", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx950"}
    assert target_names("wave32") == {"wave32", "gfx10", "gfx11", "gfx12"}


def test_for_target_keeps_what_bites_there():
    text = module("shfl.sync.bfly.b32 %r1, %r2, 1, 31, -1;\nmatch.any.sync.b32 %r3, %r2, -1;\n"
                  "mov.u32 %r4, %laneid;\n.shared .align 16 .b8 big[81920];\nmov.u32 %r5, big;")
    kernel = only_kernel(text)
    kinds = lambda t: [h.kind for h in kernel.for_target(t).hazards]  # noqa: E731
    assert kinds("gfx942") == ["shared-memory", "warp-shuffle", "warp-match", "laneid"]
    assert kinds("gfx950") == ["warp-shuffle", "warp-match", "laneid"]
    assert kinds("gfx1100") == ["shared-memory", "warp-match"]
    assert kinds("wave64") == kinds("gfx942")
    assert kernel.for_target("gfx950").static_shared_bytes == 81920


# --------------------------------------------------------------------------------------------------
# modules


def test_a_module_that_does_not_parse_is_reported_not_raised():
    result = lint_ptx(".version 9.0\n.target sm_90\n.address_size 64\n.entry k()\n{\nfrobnicate %r1;\n}\n",
                      source="bad.ptx", arch="compute_90")
    assert (result.parsed, result.kernels, result.arch, result.worst) == (False, (), "compute_90", ERROR)
    assert "bad.ptx:6" in result.error and "frobnicate" in result.error
    assert result.to_json() == {"source": "bad.ptx", "arch": "compute_90", "parsed": False, "error": result.error,
                                "worst": ERROR, "kernels": []}


def test_declared_kernels_and_modules_without_kernels():
    assert analyse(parse_ptx(".version 9.0\n.target sm_90\n.address_size 64\n.extern .entry k();\n")) == []
    assert lint_ptx(".version 9.0\n.target sm_90\n.address_size 64\n").kernels == ()


def test_json_of_a_kernel():
    text = module("{ call.uni middle, (); }", before=CALL_CHAIN)
    data = lint_ptx(text, source="t.ptx").to_json()
    assert data["parsed"] is True and data["error"] is None and data["arch"] == "sm_100a"
    (kernel,) = data["kernels"]
    assert kernel["name"] == "k" and kernel["worst"] == WARNING and kernel["functions"] == ["middle", "leaf"]
    assert kernel["hazards"][0] == {"kind": "laneid", "severity": WARNING, "line": line_of(text, "%laneid"),
                                    "message": kernel["hazards"][0]["message"], "targets": ["wave64"],
                                    "function": "leaf"}


# --------------------------------------------------------------------------------------------------
# real PTX


def _kernel_named(kernels, fragment: str) -> KernelHazards:
    (kernel,) = [k for k in kernels if fragment in k.name]
    return kernel


def test_nv_kern_sample_has_no_hazards_and_counts_its_shared_tile():
    text = (SAMPLES / "nv_kern_sm90.ptx").read_text()
    kernels = analyse(parse_ptx(text))
    assert len(kernels) == 7
    assert all(not k.hazards for k in kernels)
    assert _kernel_named(kernels, "reduce_shared").static_shared_bytes == 512  # __shared__ float[128]
    assert sum(k.static_shared_bytes for k in kernels) == 512


def _sample_ptx(name: str) -> str:
    path = SAMPLES / "ptx" / name
    if not path.exists():
        pytest.skip(f"{path} not generated (tests/ptx_sources/build.sh)")
    return path.read_text()


def test_hopper_sample():
    text = _sample_ptx("hopper.sm_90a.ptx")
    kernels = analyse(parse_ptx(text))
    clustered = _kernel_named(kernels, "clustered")
    cluster_lines = {h.line for h in clustered.hazards if h.kind == "cluster"}
    assert cluster_lines == {line_of(text, "_Z9clusteredPi("), line_of(text, "barrier.cluster.arrive"),
                             line_of(text, "barrier.cluster.wait"), line_of(text, "barrier.cluster.arrive", 1),
                             line_of(text, "barrier.cluster.wait", 1), line_of(text, "mapa.u64"),
                             line_of(text, "getctarank.shared::cluster")}
    assert clustered.static_shared_bytes == 256
    bounds = _kernel_named(kernels, "cluster_bounds")
    assert [h.kind for h in bounds.hazards] == ["cluster", "cluster-register", "cluster-register"]
    tma = _kernel_named(kernels, "tma")
    assert {h.line for h in tma.hazards if h.kind == "tensor-map"} == {
        line_of(text, "cp.async.bulk.tensor.2d.shared::cluster"), line_of(text, "cp.async.bulk.tensor.2d.global"),
        line_of(text, "prefetch.tensormap")}
    assert tma.static_shared_bytes == 4096 + 8 and tma.worst == WARNING
    wgmma = _kernel_named(kernels, "wgmma_kernel")
    assert Counter(h.kind for h in wgmma.hazards) == {"wgmma": 4, "warp-elect": 1, "stmatrix": 1,
                                                      "register-realloc": 1}
    assert [h.targets for h in wgmma.hazards if h.kind == "warp-elect"] == [W64]
    bulk = _kernel_named(kernels, "bulk_copy")
    assert {h.kind for h in bulk.hazards} >= {"mbarrier", "cp-async-bulk"} and bulk.worst == WARNING
    assert [h.kind for h in _kernel_named(kernels, "dependent_launch").hazards] == ["grid-dependency"] * 2


def test_warp_sample_counts_match_the_text():
    text = _sample_ptx("warp.sm_86.ptx")
    kernels = analyse(parse_ptx(text))
    counts = Counter(h.kind for k in kernels for h in k.hazards)
    instructions = [line.split()[0] for line in text.splitlines()
                    if line.strip() and not line.lstrip().startswith("//")]
    assert counts["warp-shuffle"] == sum(i.startswith("shfl.") for i in instructions)
    assert counts["warp-vote"] == sum(i.startswith("vote.") for i in instructions)
    assert counts["warp-match"] == sum(i.startswith("match.") for i in instructions)
    assert counts["warp-reduce"] == sum(i.startswith("redux.") for i in instructions)
    assert counts["warp-activemask"] == sum(i.startswith("activemask") for i in instructions)
    assert counts["warp-sync"] == sum(i.startswith("bar.warp.sync") for i in instructions)
    assert counts["lanemask"] == text.count("%lanemask_") == 3  # two by hand, one in coalesced_threads()
    assert counts["laneid"] == sum(1 for line in text.splitlines() if "%laneid" in line)


def test_texture_and_blackwell_samples_are_errors():
    textures = analyse(parse_ptx(_sample_ptx("texsurf.sm_80.ptx")))
    assert {h.kind for k in textures for h in k.hazards} == {"texture", "surface"}
    blackwell = analyse(parse_ptx(_sample_ptx("blackwell.sm_100a.ptx")))
    assert any(h.kind == "tcgen05" for k in blackwell for h in k.hazards)


def test_basics_sample_calls_and_indirect_calls():
    text = _sample_ptx("basics.sm_80.ptx")
    kernels = analyse(parse_ptx(text))
    calls = _kernel_named(kernels, "calls")
    kinds = Counter(h.kind for h in calls.hazards)
    assert kinds["printf"] == 1 and kinds["assert"] == 1 and kinds["device-heap"] >= 2
    # `unary_table` holds twice/square: an indirect call reaches them, and the vtables' destructors (free)
    assert {"_Z5twicei", "_Z6squarei", "_Z3fibi"} <= set(calls.functions)
    lines = text.splitlines()
    free_calls = [h for h in calls.hazards if h.kind == "device-heap" and h.function is not None]
    # in the destructors: `call.uni` on the finding's line, the callee `free,` on the next
    assert free_calls and all(lines[h.line - 1].strip() == "call.uni" and lines[h.line].strip() == "free,"
                              and h.function.startswith("_ZN") for h in free_calls)
    dynamic = _kernel_named(kernels, "dynamic_shared")
    assert dynamic.dynamic_shared == ("dynamic_smem",) and dynamic.static_shared_bytes == 256


def test_lint_binary_names_each_ptx_entry():
    (binary,) = scan_paths([SAMPLES / "nv_mode_default"])
    (result,) = lint_binary(binary)
    assert result.source == f"{SAMPLES / 'nv_mode_default'}#c1.e2" and result.parsed and result.arch == "sm_90"
    (standalone,) = scan_paths([SAMPLES / "nv_kern_sm90.ptx"])
    assert [m.source for m in lint_binary(standalone)] == [str(SAMPLES / "nv_kern_sm90.ptx")]


def _corpus_modules(member: str, containers: set[int] | None = None) -> dict[str, list[KernelHazards]]:
    """The kernels of each PTX entry of a corpus file (of some containers only), by `c<container>.e<entry>`."""
    (binary,) = scan_paths([corpus_file(member)])
    if containers is not None:
        binary.containers = [c for c in binary.containers if c.index in containers]
    return {m.source.rpartition("#")[2]: list(m.kernels) for m in lint_binary(binary)}


@pytest.mark.corpus
def test_xformers_sparse_gemm_uses_tensor_cores_and_async_copies():
    modules = _corpus_modules("xformers/_C.so", {2, 6})
    gemms = modules["c2.e2"]
    assert len(gemms) == 8 and all("SparseGemm" in k.name for k in gemms)
    # counted by hand in the PTX of the first kernel: 64 mma.sp, 39 ldmatrix, 44 cp.async, one shfl.sync.idx
    first = Counter(h.kind for h in gemms[0].hazards)
    assert first == {"mma": 64, "ldmatrix": 39, "cp-async": 44, "warp-shuffle": 1, "dynamic-shared-memory": 1}
    assert all(h.message.startswith("mma.sp::ordered_metadata.sync.aligned.m16n8k32")
               for h in gemms[0].hazards if h.kind == "mma")
    assert gemms[0].dynamic_shared == ("_ZN7cutlass17SharedStorageBaseE",) and gemms[0].static_shared_bytes == 0
    assert all(k.worst == WARNING for k in gemms)
    # the sm90 CUTLASS kernel compiled for compute_80 is a stub that only prints an error
    (stub, *_) = modules["c6.e2"]
    assert "GemmUniversal" in stub.name and [h.kind for h in stub.hazards] == ["printf"]


@pytest.mark.corpus
def test_jax_prng_threefry_is_plain_integer_code():
    modules = _corpus_modules("jax_cuda12_plugin/_prng.so")
    ((kernels),) = modules.values()
    (threefry,) = kernels
    assert "ThreeFry2x32Kernel" in threefry.name
    assert threefry.hazards == () and threefry.static_shared_bytes == 0 and threefry.functions == ()


@pytest.mark.corpus
def test_torchao_mxfp8_uses_tensor_maps():
    modules = _corpus_modules("torchao/_C_mxfp8.cpython-310-x86_64-linux-gnu.so")
    kinds = Counter(h.kind for ks in modules.values() for k in ks for h in k.hazards)
    assert kinds["tensor-map"] > 0 and kinds["mbarrier"] > 0 and kinds["cp-async-bulk"] > 0
    for ks in modules.values():
        for k in ks:
            if any(h.kind == "tensor-map" for h in k.hazards):  # translatable: a warning, not an error
                assert k.worst == WARNING
    assert not any(re.match(r"wgmma|tcgen05", h.kind) for ks in modules.values() for k in ks for h in k.hazards)
