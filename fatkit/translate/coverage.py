"""What the translator does with every opcode and form of the PTX ISA 9.x: the table lint and lowering share.

Each `Form` is an opcode (ptx/opcodes.py) and the modifiers that single the form out (none: every form of
the opcode no other row names), with its status:

- `LOWERED`: lowering translates it (a handler of lower/ takes it; it may still refuse an operand or a
  modifier combination the ISA does not allow, naming it);
- `REFUSED`: it cannot be translated, and the reason names the hardware or ABI that is missing (a form
  that could be translated and is not yet has no place here: it is lowered).

`Lowering` refuses a REFUSED form with the row's reason before any handler sees it, and lint
(hazards.py) reports the same rows with the same reasons, so the two cannot disagree. Each row carries a
one-instruction `example` (in the registers `EXAMPLE_KERNEL` declares) that tests/test_translate_coverage.py
lowers, so a row's status is checked against what lowering does.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

LOWERED, REFUSED = "lowered", "refused"


@dataclass(frozen=True)
class Form:
    opcode: str
    modifiers: tuple[str, ...]  # all present in an instruction → this form (the most modifiers win)
    status: str
    example: str | None  # one instruction (or a few) in EXAMPLE_KERNEL's registers; None: none stands alone
    reason: str = ""  # REFUSED: why


# The kernel every example is lowered in: registers of each kind, a shared and a global buffer, a label
# and a function to call. `{example}` is replaced; %rd1 holds a global address, %r1 a shared one.
EXAMPLE_KERNEL = """.version 8.7
.target sm_100a
.address_size 64
.global .align 16 .b8 gmem[256];
.shared .align 16 .b8 smem[256];
.func noop()
{
    ret;
}
.visible .entry example(.param .u64 out)
{
    .reg .pred %p<8>;
    .reg .b16 %h<16>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    .reg .f32 %f<32>;
    .reg .f64 %fd<8>;
    .reg .b128 %q<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, smem;
    mov.f32 %f1, 0f3F800000;
    setp.ne.u32 %p1, %r1, 0;
    {example}
    ret;
}
"""

FORMS: tuple[Form, ...] = (
    # 9.7.1 integer arithmetic (the floating-point forms of add/sub/mul/mad/div/abs/neg/min/max too)
    Form("add", (), LOWERED, "add.s32 %r2, %r3, %r4;"),
    Form("sub", (), LOWERED, "sub.f32 %f2, %f3, %f4;"),
    Form("mul", (), LOWERED, "mul.wide.s32 %rd2, %r3, %r4;"),
    Form("mad", (), LOWERED, "mad.lo.s32 %r2, %r3, %r4, %r5;"),
    Form("mul24", (), LOWERED, "mul24.lo.s32 %r2, %r3, %r4;"),
    Form("mad24", (), LOWERED, "mad24.lo.u32 %r2, %r3, %r4, %r5;"),
    Form("sad", (), LOWERED, "sad.u32 %r2, %r3, %r4, %r5;"),
    Form("div", (), LOWERED, "div.s32 %r2, %r3, %r4;"),
    Form("rem", (), LOWERED, "rem.u32 %r2, %r3, %r4;"),
    Form("abs", (), LOWERED, "abs.s32 %r2, %r3;"),
    Form("neg", (), LOWERED, "neg.f64 %fd2, %fd3;"),
    Form("min", (), LOWERED, "min.s32 %r2, %r3, %r4;"),
    Form("max", (), LOWERED, "max.u64 %rd2, %rd3, %rd4;"),
    Form("popc", (), LOWERED, "popc.b32 %r2, %r3;"),
    Form("clz", (), LOWERED, "clz.b64 %r2, %rd3;"),
    Form("bfind", (), LOWERED, "bfind.u32 %r2, %r3;"),
    Form("fns", (), LOWERED, "fns.b32 %r2, %r3, %r4, %r5;"),
    Form("brev", (), LOWERED, "brev.b32 %r2, %r3;"),
    Form("bfe", (), LOWERED, "bfe.s32 %r2, %r3, %r4, %r5;"),
    Form("bfi", (), LOWERED, "bfi.b32 %r2, %r3, %r4, %r5, %r6;"),
    Form("szext", (), LOWERED, "szext.wrap.s32 %r2, %r3, %r4;"),
    Form("bmsk", (), LOWERED, "bmsk.clamp.b32 %r2, %r3, %r4;"),
    Form("dp4a", (), LOWERED, "dp4a.s32.u32 %r2, %r3, %r4, %r5;"),
    Form("dp2a", (), LOWERED, "dp2a.lo.u32.s32 %r2, %r3, %r4, %r5;"),
    # 9.7.2 extended precision
    Form("addc", (), LOWERED, "add.cc.u32 %r2, %r3, %r4;\n    addc.u32 %r5, %r3, %r4;"),
    Form("subc", (), LOWERED, "sub.cc.u32 %r2, %r3, %r4;\n    subc.u32 %r5, %r3, %r4;"),
    Form("madc", (), LOWERED, "mad.lo.cc.u32 %r2, %r3, %r4, %r5;\n    madc.hi.u32 %r6, %r3, %r4, %r5;"),
    # 9.7.3 / 9.7.4 floating point and half precision
    Form("testp", (), LOWERED, "testp.finite.f32 %p2, %f2;"),
    Form("copysign", (), LOWERED, "copysign.f32 %f2, %f3, %f4;"),
    Form("fma", (), LOWERED, "fma.rn.f32 %f2, %f3, %f4, %f5;"),
    Form("rcp", (), LOWERED, "rcp.rn.f64 %fd2, %fd3;"),
    Form("sqrt", (), LOWERED, "sqrt.rn.f32 %f2, %f3;"),
    Form("rsqrt", (), LOWERED, "rsqrt.approx.f32 %f2, %f3;"),
    Form("sin", (), LOWERED, "sin.approx.f32 %f2, %f3;"),
    Form("cos", (), LOWERED, "cos.approx.ftz.f32 %f2, %f3;"),
    Form("lg2", (), LOWERED, "lg2.approx.f32 %f2, %f3;"),
    Form("ex2", (), LOWERED, "ex2.approx.f32 %f2, %f3;"),
    Form("tanh", (), LOWERED, "tanh.approx.f32 %f2, %f3;"),
    # 9.7.5 / 9.7.6 comparison and selection
    Form("set", (), LOWERED, "set.lt.u32.s32 %r2, %r3, %r4;"),
    Form("setp", (), LOWERED, "setp.lt.s32 %p2, %r3, %r4;"),
    Form("selp", (), LOWERED, "selp.b32 %r2, %r3, %r4, %p1;"),
    Form("slct", (), LOWERED, "slct.s32.s32 %r2, %r3, %r4, %r5;"),
    # 9.7.7 logic and shift
    Form("and", (), LOWERED, "and.b32 %r2, %r3, %r4;"),
    Form("or", (), LOWERED, "or.pred %p2, %p1, %p1;"),
    Form("xor", (), LOWERED, "xor.b64 %rd2, %rd3, %rd4;"),
    Form("not", (), LOWERED, "not.b32 %r2, %r3;"),
    Form("cnot", (), LOWERED, "cnot.b32 %r2, %r3;"),
    Form("lop3", (), LOWERED, "lop3.b32 %r2, %r3, %r4, %r5, 0x96;"),
    Form("shf", (), LOWERED, "shf.l.wrap.b32 %r2, %r3, %r4, %r5;"),
    Form("shl", (), LOWERED, "shl.b32 %r2, %r3, %r4;"),
    Form("shr", (), LOWERED, "shr.s32 %r2, %r3, %r4;"),
    # 9.7.9 data movement and conversion
    Form("mov", (), LOWERED, "mov.u32 %r2, %r3;"),
    Form("shfl", (), LOWERED, "shfl.sync.idx.b32 %r2, %r3, %r4, 31, -1;"),
    Form("prmt", (), LOWERED, "prmt.b32 %r2, %r3, %r4, %r5;"),
    Form("ld", (), LOWERED, "ld.global.nc.v2.u32 {%r2, %r3}, [%rd1+8];"),
    Form("ldu", (), LOWERED, "ldu.global.u32 %r2, [%rd1];"),
    Form("st", (), LOWERED, "st.shared.u32 [%r1+4], %r2;"),
    Form("multimem", (), REFUSED, "multimem.ld_reduce.relaxed.sys.global.add.u32 %r2, [%rd1];",
         "addresses an NVLink multicast object (one address backed on several GPUs, reduced in the NVSwitch); "
         "AMD GPUs have no multicast memory"),
    Form("prefetch", (), LOWERED, "prefetch.global.L2 [%rd1];"),
    Form("prefetchu", (), LOWERED, "prefetchu.L1 [%rd1];"),
    Form("applypriority", (), LOWERED, "applypriority.global.L2::evict_normal [%rd1], 128;"),
    Form("discard", (), LOWERED, "discard.global.L2 [%rd1], 128;"),
    Form("createpolicy", (), LOWERED, "createpolicy.fractional.L2::evict_last.b64 %rd2, 0f3F800000;"),
    Form("isspacep", (), LOWERED, "isspacep.global %p2, %rd1;"),
    Form("cvta", (), LOWERED, "cvta.to.global.u64 %rd2, %rd1;"),
    Form("cvt", (), LOWERED, "cvt.rn.f32.s32 %f2, %r3;"),
    Form("mapa", (), LOWERED, "mapa.shared::cluster.u32 %r2, %r1, 0;"),
    Form("getctarank", (), LOWERED, "getctarank.shared::cluster.u32 %r2, %r1;"),
    Form("cp", (), LOWERED, "cp.async.ca.shared.global [%r1], [%rd1], 4;\n    cp.async.wait_all;"),
    Form("cp", ("bulk", "tensor"), LOWERED,
         "mbarrier.init.shared.b64 [smem], 1;\n"
         "    cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1+64], "
         "[%rd1, {%r2}], "
         "[smem];"),
    Form("cp", ("reduce", "bulk", "tensor"), LOWERED,
         "cp.reduce.async.bulk.tensor.1d.global.shared::cta.add.tile.bulk_group [%rd1, {%r2}], [%r1];"),
    Form("cp", ("multicast::cluster",), LOWERED,
         "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%r1], [%rd1], 16, "
         "[%r3], %h1;"),
    Form("cp", ("bulk", "prefetch", "tensor"), LOWERED, "cp.async.bulk.prefetch.tensor.1d.L2.global [%rd1, {%r2}];"),
    Form("tensormap", (), LOWERED, "tensormap.replace.tile.global_address.global.b1024.b64 [%rd1], %rd2;"),
    # 9.7.10 texture, 9.7.11 surface
    Form("tex", (), LOWERED, "tex.2d.v4.f32.f32 {%f2, %f3, %f4, %f5}, [%rd1, {%f6, %f7}];"),
    Form("tex", ("acube",), LOWERED, "tex.acube.v4.f32.f32 {%f2, %f3, %f4, %f5}, [%rd1, {%r2, %f6, %f7, %f8}];"),
    Form("tex", ("2dms",), LOWERED, "tex.2dms.v4.s32.s32 {%r2, %r3, %r4, %r5}, [%rd1, {%r6, %r7, %r8, %r9}];"),
    Form("tex", ("a2dms",), LOWERED, "tex.a2dms.v4.u32.s32 {%r2, %r3, %r4, %r5}, [%rd1, {%r6, %r7, %r8, %r9}];"),
    Form("tex", ("f16x2",), LOWERED, "tex.2d.v2.f16x2.f32 {%r2, %r3}, [%rd1, {%f6, %f7}], {%r4, %r5};"),
    Form("tex", ("f16",), LOWERED, "tex.level.a1d.v4.f16.f32 {%h2, %h3, %h4, %h5}, [%rd1, {%r2, %f6}], %f7;"),
    Form("tex", ("grad", "cube"), LOWERED, "tex.grad.cube.v4.f32.f32 {%f2, %f3, %f4, %f5}, "
         "[%rd1, {%f6, %f7, %f8, %f9}], {%f10, %f11, %f12, %f13}, {%f14, %f15, %f16, %f17};"),
    Form("tld4", (), LOWERED, "tld4.r.2d.v4.f32.f32 {%f2, %f3, %f4, %f5}, [%rd1, {%f6, %f7}];"),
    Form("tld4", ("cube",), LOWERED, "tld4.b.cube.v4.f32.f32 {%f2, %f3, %f4, %f5}, [%rd1, {%f6, %f7, %f8, %f9}];"),
    Form("tld4", ("acube",), LOWERED, "tld4.a.acube.v4.u32.f32 {%r2, %r3, %r4, %r5}, [%rd1, {%r6, %f7, %f8, %f9}];"),
    Form("txq", (), LOWERED, "txq.width.b32 %r2, [%rd1];"),
    Form("txq", ("channel_data_type",), LOWERED, "txq.channel_data_type.b32 %r2, [%rd1];"),
    Form("txq", ("channel_order",), LOWERED, "txq.channel_order.b32 %r2, [%rd1];"),
    Form("txq", ("num_samples",), LOWERED, "txq.num_samples.b32 %r2, [%rd1];"),
    Form("istypep", (), REFUSED, "istypep.texref %p2, %rd1;",
         "a HIP texture, sampler or surface object is a bare address of its descriptors, tagged with no type: "
         "nothing in it tells the three apart"),
    Form("suld", (), LOWERED, "suld.b.1d.b32.trap {%r2}, [%rd1, {%r3}];"),
    Form("sust", (), LOWERED, "sust.b.1d.b32.trap [%rd1, {%r3}], {%r2};"),
    Form("sust", ("p",), LOWERED, "sust.p.1d.v4.b32.trap [%rd1, {%r3}], {%r2, %r3, %r4, %r5};"),
    Form("sured", (), LOWERED, "sured.b.add.1d.u32.trap [%rd1, {%r3}], %r2;"),
    Form("sured", ("u64",), LOWERED, "sured.b.max.2d.u64.clamp [%rd1, {%r3, %r4}], %rd2;"),
    Form("sured", ("s64",), LOWERED, "sured.b.min.1d.s64.zero [%rd1, {%r3}], %rd2;"),
    Form("sured", ("p",), LOWERED, "sured.p.min.1d.b32.trap [%rd1, {%r3}], %r2;"),
    Form("sured", ("p", "b64"), LOWERED, "sured.p.max.3d.b64.zero [%rd1, {%r3, %r4, %r5, %r6}], %rd2;"),
    Form("suq", (), LOWERED, "suq.width.b32 %r2, [%rd1];"),
    Form("suq", ("channel_data_type",), LOWERED, "suq.channel_data_type.b32 %r2, [%rd1];"),
    Form("suq", ("channel_order",), LOWERED, "suq.channel_order.b32 %r2, [%rd1];"),
    # 9.7.12 control flow
    Form("bra", (), LOWERED, "@%p1 bra DONE;\n    add.u32 %r2, %r2, 1;\nDONE:"),
    Form("brx", (), LOWERED, "TARGETS: .branchtargets ONE, TWO;\n    brx.idx %r2, TARGETS;\nONE:\nTWO:"),
    Form("call", (), LOWERED, "call noop, ();"),
    Form("ret", (), LOWERED, "@%p1 ret;"),
    Form("exit", (), LOWERED, "@%p1 exit;"),
    # 9.7.13 parallel synchronization and communication
    Form("bar", (), LOWERED, "bar.sync 0;"),
    Form("barrier", (), LOWERED, "barrier.cluster.arrive;\n    barrier.cluster.wait;"),
    Form("membar", (), LOWERED, "membar.gl;"),
    Form("fence", (), LOWERED, "fence.acq_rel.gpu;"),
    Form("atom", (), LOWERED, "atom.global.add.u32 %r2, [%rd1], %r3;"),
    Form("atom", ("b128",), REFUSED, "atom.global.cas.b128 %q1, [%rd1], %q2, %q3;",
         "a 128-bit atomic (atom.cas/.exch.b128, one 16-byte read-modify-write) has no AMD instruction: the "
         "widest atomic AMD GPUs have is 64 bits (cmpswap_x2), and a lock taken by these atomics would not make "
         "them atomic against other threads' 128-bit .relaxed loads and stores (single accesses on NVIDIA), "
         "other code objects or the host"),
    Form("red", (), LOWERED, "red.shared.add.u32 [%r1], %r3;"),
    Form("vote", (), LOWERED, "vote.sync.ballot.b32 %r2, %p1, -1;"),
    Form("match", (), LOWERED, "match.any.sync.b32 %r2, %r3, -1;"),
    Form("activemask", (), LOWERED, "activemask.b32 %r2;"),
    Form("redux", (), LOWERED, "redux.sync.add.u32 %r2, %r3, -1;"),
    Form("griddepcontrol", (), LOWERED, "griddepcontrol.wait;"),
    Form("elect", (), LOWERED, "elect.sync %r2|%p2, -1;"),
    Form("mbarrier", (), LOWERED, "mbarrier.init.shared.b64 [smem], 1;"),
    Form("clusterlaunchcontrol", (), LOWERED,
         "mbarrier.init.shared.b64 [smem], 1;\n"
         "    clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [smem+16], [smem];"),
    # 9.7.14 warp-level matrix
    Form("wmma", (), LOWERED, "wmma.load.a.sync.aligned.row.m16n16k16.global.f16 "
         "{%r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9}, [%rd1];"),
    Form("mma", (), LOWERED, "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%f2, %f3, %f4, %f5}, {%r2, %r3}, "
         "{%r4}, {%f6, %f7, %f8, %f9};"),
    Form("ldmatrix", (), LOWERED, "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r2}, [%r1];"),
    Form("stmatrix", (), LOWERED, "stmatrix.sync.aligned.m8n8.x1.shared.b16 [%r1], {%r2};"),
    Form("movmatrix", (), LOWERED, "movmatrix.sync.aligned.m8n8.trans.b16 %r2, %r3;"),
    # 9.7.15 warpgroup-level matrix multiply-accumulate
    Form("wgmma", (), LOWERED, "wgmma.fence.sync.aligned;\n    wgmma.commit_group.sync.aligned;\n"
         "    wgmma.wait_group.sync.aligned 0;"),
    # 9.7.16 TensorCore 5th generation
    Form("tcgen05", (), REFUSED, "tcgen05.fence::before_thread_sync;",
         "fifth-generation tensor-core instructions (sm_100a) compute in Tensor Memory, 256 KiB per SM "
         "(128 lanes × 512 columns of 32 bits) allocated by tcgen05.alloc; AMD GPUs have no such memory, and "
         "a workgroup's LDS holds 64 KiB (160 KiB on gfx950)"),
    # 9.7.17 stack manipulation
    Form("stacksave", (), LOWERED, "stacksave.u64 %rd2;"),
    Form("stackrestore", (), LOWERED, "stacksave.u64 %rd2;\n    stackrestore.u64 %rd2;"),
    Form("alloca", (), LOWERED, "alloca.u64 %rd2, 16;"),
    # 9.7.18 / 9.7.19 video
    Form("vadd", (), LOWERED, "vadd.u32.u32.u32 %r2, %r3, %r4;"),
    Form("vsub", (), LOWERED, "vsub.s32.s32.s32.sat %r2, %r3, %r4;"),
    Form("vabsdiff", (), LOWERED, "vabsdiff.u32.u32.u32 %r2, %r3, %r4;"),
    Form("vmin", (), LOWERED, "vmin.s32.s32.s32 %r2, %r3, %r4;"),
    Form("vmax", (), LOWERED, "vmax.u32.u32.u32 %r2, %r3, %r4;"),
    Form("vshl", (), LOWERED, "vshl.u32.u32.u32.clamp %r2, %r3, %r4;"),
    Form("vshr", (), LOWERED, "vshr.u32.u32.u32.wrap %r2, %r3, %r4;"),
    Form("vmad", (), LOWERED, "vmad.u32.u32.u32 %r2, %r3, %r4, %r5;"),
    Form("vset", (), LOWERED, "vset.u32.u32.lt %r2, %r3, %r4;"),
    Form("vadd2", (), LOWERED, "vadd2.u32.u32.u32 %r2, %r3, %r4, %r5;"),
    Form("vsub2", (), LOWERED, "vsub2.s32.s32.s32.sat %r2, %r3, %r4, %r5;"),
    Form("vavrg2", (), LOWERED, "vavrg2.u32.u32.u32 %r2, %r3, %r4, %r5;"),
    Form("vabsdiff2", (), LOWERED, "vabsdiff2.s32.s32.s32 %r2, %r3, %r4, %r5;"),
    Form("vmin2", (), LOWERED, "vmin2.u32.u32.u32 %r2, %r3, %r4, %r5;"),
    Form("vmax2", (), LOWERED, "vmax2.s32.s32.s32 %r2, %r3, %r4, %r5;"),
    Form("vset2", (), LOWERED, "vset2.u32.u32.lt %r2, %r3, %r4, %r5;"),
    Form("vadd4", (), LOWERED, "vadd4.u32.u32.u32 %r2, %r3, %r4, %r5;"),
    Form("vsub4", (), LOWERED, "vsub4.s32.s32.s32.sat %r2, %r3, %r4, %r5;"),
    Form("vavrg4", (), LOWERED, "vavrg4.u32.u32.u32 %r2, %r3, %r4, %r5;"),
    Form("vabsdiff4", (), LOWERED, "vabsdiff4.u32.u32.u32 %r2, %r3, %r4, %r5;"),
    Form("vmin4", (), LOWERED, "vmin4.s32.s32.s32 %r2, %r3, %r4, %r5;"),
    Form("vmax4", (), LOWERED, "vmax4.u32.u32.u32 %r2, %r3, %r4, %r5;"),
    Form("vset4", (), LOWERED, "vset4.u32.u32.lt %r2, %r3, %r4, %r5;"),
    # 9.7.20 miscellaneous
    Form("brkpt", (), LOWERED, "@%p1 brkpt;"),
    Form("nanosleep", (), LOWERED, "nanosleep.u32 %r2;"),
    Form("pmevent", (), LOWERED, "pmevent 1;"),
    Form("trap", (), LOWERED, "@%p1 trap;"),
    Form("setmaxnreg", (), LOWERED, "setmaxnreg.inc.sync.aligned.u32 64;"),
)

_BY_OPCODE: dict[str, tuple[Form, ...]] = {}
for _form in FORMS:
    _BY_OPCODE[_form.opcode] = (*_BY_OPCODE.get(_form.opcode, ()), _form)


@lru_cache(maxsize=4096)
def form_of(opcode: str, modifiers: tuple[str, ...]) -> Form | None:
    """The table's row for an instruction: of its opcode's rows whose modifiers it all has, the one with
    the most; None for an opcode the table does not know (the parser refuses those)."""
    present = set(modifiers)
    rows = [f for f in _BY_OPCODE.get(opcode, ()) if present.issuperset(f.modifiers)]
    return max(rows, key=lambda f: len(f.modifiers)) if rows else None


def refusal(opcode: str, modifiers: tuple[str, ...]) -> str | None:
    """Why the translator does not translate this instruction form (a REFUSED row), else None."""
    form = form_of(opcode, modifiers)
    return form.reason if form is not None and form.status != LOWERED else None
