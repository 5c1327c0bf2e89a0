"""The instruction-family cases of the differential suite: one small PTX kernel per instruction form.

Every case is a snippet dropped into `table_module`'s kernel, where thread i has its inputs a[i], b[i],
c[i] (64 bits each) in %rd1..%rd3, their low 32 bits in %r1..%r3, as f32 in %f1..%f3, as f64 in
%fd1..%fd3, their low 16 bits in %h1..%h3 and `a < b` (unsigned) in %p1; the snippet leaves its result in
%rd20 (64 bits, stored as is) or %r20 (32 bits, stored zero-extended). Temporaries: %r21–%r29, %rd21–%rd29,
%f21–%f29, %fd21–%fd29, %h21–%h29, %p2–%p9. The GPU runs the original PTX and fatkit's re-lowered PTX on
the same inputs; the outputs must agree bit for bit, or within `ulp` for `.approx` forms.
"""

from __future__ import annotations

from dataclasses import dataclass

from probe_numerics import guarded_prologue  # the kernels' shared first lines (verification/ is on sys.path)


@dataclass(frozen=True)
class Case:
    family: str
    name: str  # also the kernel's name
    snippet: str
    ulp: int = 0  # allowed distance in units in the last place (.approx forms only), 0 = bit-exact
    ulp_type: str = "f32"  # what the ulps count: the result's low word as f32, or the whole word as f64


def table_module(case: Case, target: str = "sm_90") -> str:
    """The whole PTX module of one case."""
    store = "" if "%rd20," in case.snippet else "cvt.u64.u32 %rd20, %r20;\n    "
    version = "8.3" if ".b128" in case.snippet else "8.0"  # .b128 registers came with PTX 8.3
    return f""".version {version}
.target {target}
.address_size 64

.visible .entry {case.name}(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pout, .param .u32 n)
{{
{guarded_prologue(10, "%p9")}    mul.wide.u32 %rd4, %r7, 8;
    ld.param.u64 %rd5, [pa];
    add.u64 %rd5, %rd5, %rd4;
    ld.global.u64 %rd1, [%rd5];
    ld.param.u64 %rd5, [pb];
    add.u64 %rd5, %rd5, %rd4;
    ld.global.u64 %rd2, [%rd5];
    ld.param.u64 %rd5, [pc];
    add.u64 %rd5, %rd5, %rd4;
    ld.global.u64 %rd3, [%rd5];
    cvt.u32.u64 %r1, %rd1;
    cvt.u32.u64 %r2, %rd2;
    cvt.u32.u64 %r3, %rd3;
    mov.b32 %f1, %r1;
    mov.b32 %f2, %r2;
    mov.b32 %f3, %r3;
    mov.b64 %fd1, %rd1;
    mov.b64 %fd2, %rd2;
    mov.b64 %fd3, %rd3;
    cvt.u16.u32 %h1, %r1;
    cvt.u16.u32 %h2, %r2;
    cvt.u16.u32 %h3, %r3;
    setp.lo.u32 %p1, %r1, %r2;
    mov.u64 %rd20, 0;
    mov.u32 %r20, 0;
    {case.snippet}
    {store}ld.param.u64 %rd5, [pout];
    add.u64 %rd5, %rd5, %rd4;
    st.global.u64 [%rd5], %rd20;
DONE:
    ret;
}}
"""


def _name(*parts: str) -> str:
    return "_".join(p.replace(".", "_").replace("::", "_") for p in parts if p)


def integer_cases() -> list[Case]:
    cases = []

    def add(form: str, snippet: str) -> None:
        cases.append(Case("integer", _name("int", form), snippet))

    for t, r, a, b, c in (("32", "%r20", "%r1", "%r2", "%r3"), ("64", "%rd20", "%rd1", "%rd2", "%rd3")):
        for sign in ("s", "u"):
            ty = f"{sign}{t}"
            add(f"add.{ty}", f"add.{ty} {r}, {a}, {b};")
            add(f"sub.{ty}", f"sub.{ty} {r}, {a}, {b};")
            add(f"mul.lo.{ty}", f"mul.lo.{ty} {r}, {a}, {b};")
            add(f"mul.hi.{ty}", f"mul.hi.{ty} {r}, {a}, {b};")
            add(f"mad.lo.{ty}", f"mad.lo.{ty} {r}, {a}, {b}, {c};")
            add(f"mad.hi.{ty}", f"mad.hi.{ty} {r}, {a}, {b}, {c};")
            add(f"min.{ty}", f"min.{ty} {r}, {a}, {b};")
            add(f"max.{ty}", f"max.{ty} {r}, {a}, {b};")
            add(f"div.{ty}", f"div.{ty} {r}, {a}, {b};")
            add(f"rem.{ty}", f"rem.{ty} {r}, {a}, {b};")
            add(f"shr.{ty}", f"shr.{ty} {r}, {a}, %r2;")
            add(f"setp.lt.{ty}", f"setp.{'lt' if sign == 's' else 'lo'}.{ty} %p2, {a}, {b};\nselp.b32 %r20, 1, 0, %p2;")
        add(f"abs.s{t}", f"abs.s{t} {r}, {a};")
        add(f"neg.s{t}", f"neg.s{t} {r}, {a};")
        for op in ("and", "or", "xor"):
            add(f"{op}.b{t}", f"{op}.b{t} {r}, {a}, {b};")
        add(f"not.b{t}", f"not.b{t} {r}, {a};")
        add(f"cnot.b{t}", f"cnot.b{t} {r}, {a};")
        add(f"shl.b{t}", f"shl.b{t} {r}, {a}, %r2;")
        add(f"popc.b{t}", f"popc.b{t} %r20, {a};")
        add(f"clz.b{t}", f"clz.b{t} %r20, {a};")
        add(f"brev.b{t}", f"brev.b{t} {r}, {a};")
        add(f"bfind.u{t}", f"bfind.u{t} %r20, {a};")
        add(f"bfind.s{t}", f"bfind.s{t} %r20, {a};")
        add(f"bfind.shiftamt.u{t}", f"bfind.shiftamt.u{t} %r20, {a};")
        add(f"bfe.u{t}", f"bfe.u{t} {r}, {a}, %r2, %r3;")
        add(f"bfe.s{t}", f"bfe.s{t} {r}, {a}, %r2, %r3;")
        add(f"bfi.b{t}", f"bfi.b{t} {r}, {a}, {b}, %r3, %r2;")
    add("mul.wide.s32", "mul.wide.s32 %rd20, %r1, %r2;")
    add("mul.wide.u32", "mul.wide.u32 %rd20, %r1, %r2;")
    add("mad.wide.s32", "mad.wide.s32 %rd20, %r1, %r2, %rd3;")
    add("mul24.lo.s32", "mul24.lo.s32 %r20, %r1, %r2;")
    add("mul24.hi.u32", "mul24.hi.u32 %r20, %r1, %r2;")
    add("mad24.lo.u32", "mad24.lo.u32 %r20, %r1, %r2, %r3;")
    add("sad.u32", "sad.u32 %r20, %r1, %r2, %r3;")
    add("sad.s32", "sad.s32 %r20, %r1, %r2, %r3;")
    add("add.sat.s32", "add.sat.s32 %r20, %r1, %r2;")
    add("sub.sat.s32", "sub.sat.s32 %r20, %r1, %r2;")
    add("max.relu.s32", "max.relu.s32 %r20, %r1, %r2;")
    add("min.u16x2", "min.u16x2 %r20, %r1, %r2;")
    add("max.s16x2", "max.s16x2 %r20, %r1, %r2;")
    add("add.s16", "add.s16 %h20, %h1, %h2;\ncvt.u32.u16 %r20, %h20;")
    add("mul.wide.u16", "mul.wide.u16 %r20, %h1, %h2;")
    add("shf.l.wrap", "shf.l.wrap.b32 %r20, %r1, %r2, %r3;")
    add("shf.r.clamp", "shf.r.clamp.b32 %r20, %r1, %r2, %r3;")
    add("shf.r.wrap", "shf.r.wrap.b32 %r20, %r1, %r2, %r3;")
    add("fns.b32", "and.b32 %r21, %r2, 31;\nfns.b32 %r20, %r1, %r21, %r3;")  # base > 31 is undefined
    add("bmsk.clamp", "bmsk.clamp.b32 %r20, %r1, %r2;")
    add("bmsk.wrap", "bmsk.wrap.b32 %r20, %r1, %r2;")
    add("szext.clamp.s32", "szext.clamp.s32 %r20, %r1, %r2;")
    add("szext.wrap.u32", "szext.wrap.u32 %r20, %r1, %r2;")
    for mode in ("", ".f4e", ".b4e", ".rc8", ".ecl", ".ecr", ".rc16"):
        add(f"prmt{mode}", f"prmt.b32{mode} %r20, %r1, %r2, %r3;")
    for lut in (0x96, 0xE8, 0xCA, 0x01, 0xFE):
        add(f"lop3_{lut:02x}", f"lop3.b32 %r20, %r1, %r2, %r3, {lut};")
    for mode in ("lo", "hi"):
        add(f"dp2a.{mode}.s32.u32", f"dp2a.{mode}.s32.u32 %r20, %r1, %r2, %r3;")
    for a_sign in ("s", "u"):
        for b_sign in ("s", "u"):
            add(f"dp4a.{a_sign}32.{b_sign}32", f"dp4a.{a_sign}32.{b_sign}32 %r20, %r1, %r2, %r3;")
    add("add.cc.addc", "add.cc.u32 %r21, %r1, %r2;\naddc.cc.u32 %r22, %r3, %r1;\naddc.u32 %r23, 0, 0;\n"
        "xor.b32 %r20, %r21, %r22;\nadd.u32 %r20, %r20, %r23;")
    add("sub.cc.subc", "sub.cc.u32 %r21, %r1, %r2;\nsubc.cc.u32 %r22, %r3, %r1;\nsubc.u32 %r23, 0, 0;\n"
        "xor.b32 %r20, %r21, %r22;\nadd.u32 %r20, %r20, %r23;")
    add("mad.cc.madc", "mad.lo.cc.u32 %r21, %r1, %r2, %r3;\nmadc.hi.u32 %r22, %r1, %r2, 0;\n"
        "xor.b32 %r20, %r21, %r22;")
    add("add.cc.u64", "add.cc.u64 %rd21, %rd1, %rd2;\naddc.u64 %rd20, %rd3, 0;\nxor.b64 %rd20, %rd20, %rd21;")
    return cases


def float_cases() -> list[Case]:
    cases = []

    def add(form: str, snippet: str, ulp: int = 0) -> None:
        cases.append(Case("float", _name("fp", form), snippet, ulp))

    for t, d, a, b, c in (("f32", "%f20", "%f1", "%f2", "%f3"), ("f64", "%fd20", "%fd1", "%fd2", "%fd3")):
        out = "mov.b32 %r20, %f20;" if t == "f32" else "mov.b64 %rd20, %fd20;"
        for rnd in ("rn", "rz", "rm", "rp"):
            for op in ("add", "sub", "mul"):
                add(f"{op}.{rnd}.{t}", f"{op}.{rnd}.{t} {d}, {a}, {b};\n{out}")
            add(f"fma.{rnd}.{t}", f"fma.{rnd}.{t} {d}, {a}, {b}, {c};\n{out}")
            add(f"div.{rnd}.{t}", f"div.{rnd}.{t} {d}, {a}, {b};\n{out}")
            add(f"sqrt.{rnd}.{t}", f"sqrt.{rnd}.{t} {d}, {a};\n{out}")
            add(f"rcp.{rnd}.{t}", f"rcp.{rnd}.{t} {d}, {a};\n{out}")
        for op in ("min", "max"):
            add(f"{op}.{t}", f"{op}.{t} {d}, {a}, {b};\n{out}")
        add(f"abs.{t}", f"abs.{t} {d}, {a};\n{out}")
        add(f"neg.{t}", f"neg.{t} {d}, {a};\n{out}")
        add(f"copysign.{t}", f"copysign.{t} {d}, {a}, {b};\n{out}")
        for cmp in ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"):
            add(f"setp.{cmp}.{t}", f"setp.{cmp}.{t} %p2, {a}, {b};\nselp.b32 %r20, 1, 0, %p2;")
        for test in ("finite", "infinite", "number", "notanumber", "normal", "subnormal"):
            add(f"testp.{test}.{t}", f"testp.{test}.{t} %p2, {a};\nselp.b32 %r20, 1, 0, %p2;")
    for ftz in ("", ".ftz"):
        add(f"add{ftz}.f32", f"add{ftz}.f32 %f20, %f1, %f2;\nmov.b32 %r20, %f20;")
        add(f"mul{ftz}.f32", f"mul{ftz}.f32 %f20, %f1, %f2;\nmov.b32 %r20, %f20;")
        add(f"fma.rn{ftz}.sat.f32", f"fma.rn{ftz}.sat.f32 %f20, %f1, %f2, %f3;\nmov.b32 %r20, %f20;")
        add(f"min{ftz}.NaN.f32", f"min{ftz}.NaN.f32 %f20, %f1, %f2;\nmov.b32 %r20, %f20;")
        add(f"max{ftz}.xorsign.abs.f32", f"max{ftz}.xorsign.abs.f32 %f20, %f1, %f2;\nmov.b32 %r20, %f20;")
        add(f"div.full{ftz}.f32", f"div.full{ftz}.f32 %f20, %f1, %f2;\nmov.b32 %r20, %f20;", ulp=2)
        add(f"div.approx{ftz}.f32", f"div.approx{ftz}.f32 %f20, %f1, %f2;\nmov.b32 %r20, %f20;", ulp=2)
        for fn, ulp in (("rcp", 1), ("sqrt", 1), ("rsqrt", 2), ("ex2", 2), ("lg2", 2), ("sin", 2), ("cos", 2)):
            add(f"{fn}.approx{ftz}.f32", f"{fn}.approx{ftz}.f32 %f20, %f1;\nmov.b32 %r20, %f20;", ulp=ulp)
    add("setp.lt.ftz.f32", "setp.lt.ftz.f32 %p2, %f1, %f2;\nselp.b32 %r20, 1, 0, %p2;")
    add("tanh.approx.f32", "tanh.approx.f32 %f20, %f1;\nmov.b32 %r20, %f20;", ulp=4)
    # 1 in the last bit of the upper word the ISA computes this from
    cases.append(Case("float", "fp_rcp_approx_ftz_f64", "rcp.approx.ftz.f64 %fd20, %fd1;\nmov.b64 %rd20, %fd20;",
                      ulp=1 << 32, ulp_type="f64"))
    add("set.lt.u32.f32", "set.lt.u32.f32 %r20, %f1, %f2;")
    add("set.gtu.f32.f32", "set.gtu.f32.f32 %f20, %f1, %f2;\nmov.b32 %r20, %f20;")
    add("slct.f32.s32", "slct.f32.s32 %f20, %f1, %f2, %r3;\nmov.b32 %r20, %f20;")
    add("setp.and", "setp.lt.and.f32 %p2|%p3, %f1, %f2, %p1;\nselp.b32 %r21, 1, 0, %p2;\nselp.b32 %r22, 2, 0, %p3;\n"
        "or.b32 %r20, %r21, %r22;")
    return cases


def conversion_cases() -> list[Case]:
    cases = []

    def add(form: str, snippet: str) -> None:
        cases.append(Case("convert", _name("cvt", form), snippet))

    ints = ("s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64")
    source = {"s8": "%r1", "u8": "%r1", "s16": "%h1", "u16": "%h1", "s32": "%r1", "u32": "%r1",
              "s64": "%rd1", "u64": "%rd1"}
    for i in ints:
        for f, reg, out in (("f32", "%f20", "mov.b32 %r20, %f20;"), ("f64", "%fd20", "mov.b64 %rd20, %fd20;")):
            for rnd in ("rn", "rz", "rm", "rp"):
                src = source[i]
                if i in ("s8", "u8"):
                    src = "%h1"
                add(f"{rnd}.{f}.{i}", f"cvt.{rnd}.{f}.{i} {reg}, {src};\n{out}")
            for rnd in ("rni", "rzi", "rmi", "rpi"):
                dst = "%rd20" if i in ("s64", "u64") else "%r20"
                add(f"{rnd}.{i}.{f}", f"cvt.{rnd}.{i}.{f} {dst}, {'%f1' if f == 'f32' else '%fd1'};"
                    if i not in ("s8", "u8", "s16", "u16")
                    else f"cvt.{rnd}.{i}.{f} %h20, {'%f1' if f == 'f32' else '%fd1'};\ncvt.u32.u16 %r20, %h20;")
    for rnd in ("rn", "rz", "rm", "rp"):
        add(f"{rnd}.f32.f64", f"cvt.{rnd}.f32.f64 %f20, %fd1;\nmov.b32 %r20, %f20;")
        add(f"{rnd}.f16.f32", f"cvt.{rnd}.f16.f32 %h20, %f1;\ncvt.u32.u16 %r20, %h20;")
    add("f64.f32", "cvt.f64.f32 %fd20, %f1;\nmov.b64 %rd20, %fd20;")
    add("ftz.f64.f32", "cvt.ftz.f64.f32 %fd20, %f1;\nmov.b64 %rd20, %fd20;")
    add("f32.f16", "cvt.f32.f16 %f20, %h1;\nmov.b32 %r20, %f20;")
    add("f32.bf16", "cvt.f32.bf16 %f20, %h1;\nmov.b32 %r20, %f20;")
    add("rn.bf16.f32", "cvt.rn.bf16.f32 %h20, %f1;\ncvt.u32.u16 %r20, %h20;")
    add("rz.bf16.f32", "cvt.rz.bf16.f32 %h20, %f1;\ncvt.u32.u16 %r20, %h20;")
    add("sat.f32.f32", "cvt.sat.f32.f32 %f20, %f1;\nmov.b32 %r20, %f20;")
    add("rzi.sat.f32.f32", "cvt.rzi.sat.f32.f32 %f20, %f1;\nmov.b32 %r20, %f20;")
    add("rni.f32.f32", "cvt.rni.f32.f32 %f20, %f1;\nmov.b32 %r20, %f20;")
    add("rzi.ftz.f32.f32", "cvt.rzi.ftz.f32.f32 %f20, %f1;\nmov.b32 %r20, %f20;")
    add("rn.f16x2.f32", "cvt.rn.f16x2.f32 %r20, %f1, %f2;")
    add("rn.relu.f16x2.f32", "cvt.rn.relu.f16x2.f32 %r20, %f1, %f2;")
    add("rn.bf16x2.f32", "cvt.rn.bf16x2.f32 %r20, %f1, %f2;")
    add("rna.tf32.f32", "cvt.rna.tf32.f32 %r20, %f1;")
    add("rn.satfinite.e4m3x2.f32", "cvt.rn.satfinite.e4m3x2.f32 %h20, %f1, %f2;\ncvt.u32.u16 %r20, %h20;")
    add("rn.satfinite.e5m2x2.f32", "cvt.rn.satfinite.e5m2x2.f32 %h20, %f1, %f2;\ncvt.u32.u16 %r20, %h20;")
    add("rn.f16x2.e4m3x2", "cvt.rn.f16x2.e4m3x2 %r20, %h1;")
    add("rn.f16x2.e5m2x2", "cvt.rn.f16x2.e5m2x2 %r20, %h1;")
    add("sat.s8.s32", "cvt.sat.s8.s32 %r20, %r1;")
    add("u16.s64", "cvt.u16.s64 %h20, %rd1;\ncvt.u32.u16 %r20, %h20;")
    return cases


def half_cases() -> list[Case]:
    cases = []

    def add(form: str, snippet: str, ulp: int = 0) -> None:
        cases.append(Case("half", _name("h", form), snippet, ulp))

    for t, reg, a, b, c, out in (("f16", "%h20", "%h1", "%h2", "%h3", "cvt.u32.u16 %r20, %h20;"),
                                 ("bf16", "%h20", "%h1", "%h2", "%h3", "cvt.u32.u16 %r20, %h20;"),
                                 ("f16x2", "%r20", "%r1", "%r2", "%r3", ""),
                                 ("bf16x2", "%r20", "%r1", "%r2", "%r3", "")):
        for op in ("add", "sub", "mul"):
            add(f"{op}.rn.{t}", f"{op}.rn.{t} {reg}, {a}, {b};\n{out}")
        add(f"fma.rn.{t}", f"fma.rn.{t} {reg}, {a}, {b}, {c};\n{out}")
        add(f"fma.rn.relu.{t}", f"fma.rn.relu.{t} {reg}, {a}, {b}, {c};\n{out}")
        add(f"neg.{t}", f"neg.{t} {reg}, {a};\n{out}")
        add(f"abs.{t}", f"abs.{t} {reg}, {a};\n{out}")
        add(f"min.{t}", f"min.{t} {reg}, {a}, {b};\n{out}")
        add(f"max.NaN.{t}", f"max.NaN.{t} {reg}, {a}, {b};\n{out}")
        if t in ("f16", "f16x2"):
            add(f"add.rn.ftz.sat.{t}", f"add.rn.ftz.sat.{t} {reg}, {a}, {b};\n{out}")
            add(f"fma.rn.sat.{t}", f"fma.rn.sat.{t} {reg}, {a}, {b}, {c};\n{out}")
            add(f"ex2.approx.{t}", f"ex2.approx.{t} {reg}, {a};\n{out}", ulp=0)
    add("setp.lt.f16", "setp.lt.f16 %p2, %h1, %h2;\nselp.b32 %r20, 1, 0, %p2;")
    add("setp.gtu.bf16", "setp.gtu.bf16 %p2, %h1, %h2;\nselp.b32 %r20, 1, 0, %p2;")
    add("set.eq.f16x2.f16x2", "set.eq.f16x2.f16x2 %r20, %r1, %r2;")
    return cases


def video_cases() -> list[Case]:
    """The video instructions (scalar, vmad, 2-/4-way SIMD: selectors, masks, .sat, secondary operations),
    cvt.pack.sat, and the data-movement forms fatkit's passes rewrite: guarded and .b128 vector movs, vector
    registers, WARP_SZ, float-typed loads into wider bit registers.

    Left out: the scalar forms where ptxas's sm_90 code (read from its SASS) departs from the ISA text that
    fatkit follows, so that NVIDIA's results are not the ISA's: an unsigned word `.sat` result above U32_MAX
    wraps instead of clamping (vadd/vabsdiff of whole words into .u32), a sub-word `.sat` merge (`d.b2`)
    saturates negative results to the maximum, a .min/.max with c compares the result wrapped to 32 bits
    and sign-extended (the ISA: the exact 33/34-bit one), and vmad with a .u32 source multiplies as signed
    when its 64-bit intermediate is shifted (.shr7/.shr15) or saturated. So whole-word sources take .sat only
    where no word overflow is possible, and .min/.max only byte/half-word sources."""
    cases = []

    def add(form: str, snippet: str) -> None:
        cases.append(Case("video", _name("v", form), snippet))

    for op in ("vadd", "vsub", "vabsdiff", "vmin", "vmax"):
        for types in ("u32.u32.u32", "s32.s32.s32", "s32.u32.s32", "u32.s32.u32"):
            add(f"{op}.{types}", f"{op}.{types} %r20, %r1, %r2;")
            wraps = types.startswith("u32") and (op == "vadd" or (op == "vabsdiff" and "s32" in types))
            if not wraps:  # (a .u32 word result can exceed U32_MAX: see the docstring)
                add(f"{op}.{types}.sat", f"{op}.{types}.sat %r20, %r1, %r2;")
            add(f"{op}.{types}.sat.b1.h1", f"{op}.{types}.sat %r20, %r1.b1, %r2.h1;")
            add(f"{op}.{types}.add.b3.b0", f"{op}.{types}.add %r20, %r1.b3, %r2.b0, %r3;")
        for types in ("u32.u32.u32", "s32.s32.s32"):
            add(f"{op}.{types}.min.h0.b2", f"{op}.{types}.min %r20, %r1.h0, %r2.b2, %r3;")
            add(f"{op}.{types}.max.h1.h0", f"{op}.{types}.max %r20, %r1.h1, %r2.h0, %r3;")
            add(f"{op}.{types}.sat.add", f"{op}.{types}.sat.add %r20, %r1.h1, %r2.h0, %r3;")
            add(f"{op}.{types}.merge.b2", f"{op}.{types} %r20.b2, %r1.b0, %r2.b3, %r3;")
            add(f"{op}.{types}.merge.h1", f"{op}.{types} %r20.h1, %r1, %r2.h1, %r3;")
    for op in ("vshl", "vshr"):
        for types in ("u32.u32.u32", "s32.s32.u32", "s32.u32.u32", "u32.s32.u32"):
            for mode in ("clamp", "wrap"):
                add(f"{op}.{types}.{mode}", f"{op}.{types}.{mode} %r20, %r1, %r2.b0;")
                add(f"{op}.{types}.{mode}.sat", f"{op}.{types}.sat.{mode} %r20, %r1.h0, %r2.b0;")
                add(f"{op}.{types}.{mode}.add", f"{op}.{types}.{mode}.add %r20, %r1.b1, %r2, %r3;")
        add(f"{op}.u32.u32.u32.clamp.merge.b1", f"{op}.u32.u32.u32.clamp %r20.b1, %r1, %r2.b2, %r3;")
    for cmp in ("eq", "ne", "lt", "le", "gt", "ge"):
        for types in ("u32.u32", "s32.s32", "s32.u32", "u32.s32"):
            add(f"vset.{types}.{cmp}", f"vset.{types}.{cmp} %r20, %r1.b0, %r2.b1;")
        add(f"vset.s32.s32.{cmp}.add", f"vset.s32.s32.{cmp}.add %r20, %r1.h1, %r2.h0, %r3;")
        add(f"vset.u32.s32.{cmp}.max", f"vset.u32.s32.{cmp}.max %r20, %r1, %r2, %r3;")
        add(f"vset.u32.u32.{cmp}.merge.h1", f"vset.u32.u32.{cmp} %r20.h1, %r1.b2, %r2.b2, %r3;")
    for types in ("u32.u32.u32", "s32.s32.s32", "s32.u32.s32", "u32.s32.u32"):
        add(f"vmad.{types}", f"vmad.{types} %r20, %r1, %r2, %r3;")
        add(f"vmad.{types}.po", f"vmad.{types}.po %r20, %r1.b1, %r2.h0, %r3;")
        add(f"vmad.{types}.neg", f"vmad.{types} %r20, -%r1, %r2.b2, %r3;")
        add(f"vmad.{types}.neg.c", f"vmad.{types} %r20, %r1.h1, %r2, -%r3;")
    add("vmad.s32.s32.s32.sat", "vmad.s32.s32.s32.sat %r20, %r1, %r2, %r3;")
    add("vmad.s32.s32.s32.shr15.sat", "vmad.s32.s32.s32.sat.shr15 %r20, %r1.h0, %r2.h1, -%r3;")
    add("vmad.s32.s32.s32.po.shr7", "vmad.s32.s32.s32.po.shr7 %r20, %r1.b1, %r2, %r3;")
    for n, masks, selectors in ((2, ("h0", "h1"), ("h01", "h23", "h30", "h12")),
                                (4, ("b0", "b31", "b210", "b3"), ("b0123", "b7654", "b4567", "b3120", "b6600"))):
        for op in ("vadd", "vsub", "vavrg", "vabsdiff", "vmin", "vmax"):
            for types in ("u32.u32.u32", "s32.s32.s32", "s32.u32.s32", "u32.s32.u32"):
                add(f"{op}{n}.{types}", f"{op}{n}.{types} %r20, %r1, %r2, %r3;")
                add(f"{op}{n}.{types}.sat", f"{op}{n}.{types}.sat %r20, %r1, %r2, %r3;")
                add(f"{op}{n}.{types}.add", f"{op}{n}.{types}.add %r20, %r1, %r2, %r3;")
            for k, mask in enumerate(masks):
                sa, sb = selectors[k % len(selectors)], selectors[(k + 1) % len(selectors)]
                add(f"{op}{n}.s32.s32.s32.sat.{mask}.{sa}.{sb}",
                    f"{op}{n}.s32.s32.s32.sat %r20.{mask}, %r1.{sa}, %r2.{sb}, %r3;")
                add(f"{op}{n}.u32.u32.u32.add.{mask}.{sb}",
                    f"{op}{n}.u32.u32.u32.add %r20.{mask}, %r1, %r2.{sb}, %r3;")
        for cmp in ("eq", "ne", "lt", "le", "gt", "ge"):
            add(f"vset{n}.s32.u32.{cmp}", f"vset{n}.s32.u32.{cmp} %r20, %r1, %r2, %r3;")
            add(f"vset{n}.u32.u32.{cmp}.add.{masks[1]}",
                f"vset{n}.u32.u32.{cmp}.add %r20.{masks[1]}, %r1.{selectors[2]}, %r2, %r3;")
            add(f"vset{n}.s32.s32.{cmp}.{masks[0]}", f"vset{n}.s32.s32.{cmp} %r20.{masks[0]}, %r1, %r2, %r3;")
    for kind in ("u16", "s16"):
        add(f"cvt.pack.sat.{kind}", f"cvt.pack.sat.{kind}.s32 %r20, %r1, %r2;")
        add(f"cvt.pack.sat.{kind}.small", f"shr.s32 %r21, %r1, 15;\nshr.s32 %r22, %r2, 17;\n"
                                          f"cvt.pack.sat.{kind}.s32 %r20, %r21, %r22;")
    for kind in ("u8", "s8", "u4", "s4", "u2", "s2"):
        add(f"cvt.pack.sat.{kind}", f"cvt.pack.sat.{kind}.s32.b32 %r20, %r1, %r2, %r3;")
        add(f"cvt.pack.sat.{kind}.small", f"shr.s32 %r21, %r1, 26;\nshr.s32 %r22, %r2, 28;\n"
                                          f"cvt.pack.sat.{kind}.s32.b32 %r20, %r21, %r22, %r3;")
    add("mov.b64.guarded.pack", "mov.u64 %rd20, %rd3;\n@%p1 mov.b64 %rd20, {%r1, %r2};")
    add("mov.b64.guarded.unpack", "mov.b64 {%r21, %r22}, %rd3;\n@!%p1 mov.b64 {%r21, %r22}, %rd1;\n"
                                  "mov.b64 %rd20, {%r22, %r21};")
    scratch = ".local .align 16 .b8 scratch[32];\n"
    add("mov.b128", "{\n.reg .b128 %q<3>;\nmov.b128 %q1, {%rd1, %rd2};\nmov.b128 {%rd21, %rd22}, %q1;\n"
                    "xor.b64 %rd20, %rd21, %rd22;\n@%p1 mov.b128 {_, %rd20}, %q1;\n}")
    add("ld.b128", "{\n.reg .b128 %q<3>;\n" + scratch + "mov.b128 %q1, {%rd1, %rd2};\nst.local.b128 [scratch], %q1;\n"
                   "ld.local.b128 %q2, [scratch];\nmov.b128 {%rd21, %rd22}, %q2;\nsub.u64 %rd20, %rd21, %rd22;\n}")
    add("reg.v4", "{\n.reg .v4 .u32 %v;\n" + scratch + "mov.u32 %v.x, %r1;\nmov.u32 %v.y, %r2;\n"
                  "mov.u32 %v.z, %r3;\nadd.u32 %v.w, %v.x, %v.z;\nst.local.v4.u32 [scratch], %v;\n"
                  "ld.local.v4.u32 %v, [scratch];\nxor.b32 %r20, %v.r, %v.g;\nsub.u32 %r20, %r20, %v.a;\n}")
    add("WARP_SZ", "rem.u32 %r21, %r1, WARP_SZ;\nmad.lo.u32 %r20, %r2, WARP_SZ, %r21;")
    add("ld.f32.into.b64", "{\n" + scratch + "st.local.u32 [scratch], %r1;\nld.local.f32 %rd20, [scratch];\n}")
    add("ld.s8.into.b32", "{\n" + scratch + "st.local.u32 [scratch], %r1;\nld.local.s8 %r21, [scratch+1];\n"
                          "ld.local.u16 %r22, [scratch+2];\nxor.b32 %r20, %r21, %r22;\n}")
    add("local.generic", "{\n" + scratch + "mov.u64 %rd21, scratch;\ncvta.local.u64 %rd22, %rd21;\n"
                         "st.u32 [%rd22+4], %r1;\nst.u32 [%rd22], %r2;\nld.local.u32 %r21, [scratch+4];\n"
                         "ld.u32 %r22, [%rd22];\nsub.u32 %r20, %r21, %r22;\n}")
    return cases


def cluster_of_one_cases() -> list[Case]:
    """mapa and getctarank in the implicit cluster of one CTA of a plain launch: rank 0 is the executing CTA
    (fatkit: mapa returns its address operand, getctarank 0); the address is one of a .shared array."""
    address = ".shared .align 4 .b8 cluster_tile[256];\nmov.u32 %r21, cluster_tile;\nand.b32 %r22, %r1, 252;\n" \
              "add.u32 %r21, %r21, %r22;\n"
    return [Case("cluster", "cl_mapa_shared_cluster_u32", address + "mapa.shared::cluster.u32 %r20, %r21, 0;"),
            Case("cluster", "cl_mapa_shared_cluster_u32_offset",
                 address + "mapa.shared::cluster.u32 %r23, %r21, 0;\nsub.u32 %r20, %r23, %r21;"),
            Case("cluster", "cl_getctarank_shared_cluster_u32", address + "getctarank.shared::cluster.u32 %r20, %r21;")]


ALL_FAMILIES = (integer_cases, float_cases, conversion_cases, half_cases, video_cases, cluster_of_one_cases)


def all_cases() -> list[Case]:
    cases = [case for family in ALL_FAMILIES for case in family()]
    names = [c.name for c in cases]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ValueError(f"duplicate case names: {sorted(duplicates)}")
    return cases
