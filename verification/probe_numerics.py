"""Measures what an NVIDIA GPU's tensor cores and conversions compute, for docs/numerics.md.

    python verification/probe_numerics.py build DIR        # here: PTX kernels + fatkit's re-lowered cvt kernels
    python3 probe_numerics.py run DIR OUT                   # on the GPU machine (numpy + cupy)

mma/mma.sp/wmma: one kernel per form; each lane loads its A, B, C (and metadata) registers from raw input words
(wmma: the warp's tiles from memory) and stores D. The inputs are drawn in several distributions (`DISTRIBUTIONS`)
and saved with the outputs (`mma_*.npz`), so that models can be fitted on the host (verification/mma_reference.py).
cvt: every f32 subnormal, random bit patterns and exponent-spread values through each form, the original PTX against
fatkit's re-lowered PTX (sm_90 target); per form and input class the count of differing outputs and a sample of
(input, NVIDIA, fatkit), in `cvt.json`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

# --------------------------------------------------------------------------------------------- element bits

FLOAT_FIELDS = {"f16": (5, 10), "bf16": (8, 7), "tf32": (8, 23), "f32": (8, 23), "e4m3": (4, 3), "e5m2": (5, 2),
                "f64": (11, 52)}
WIDTH = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "e4m3": 8, "e5m2": 8, "f64": 64, "s8": 8, "u8": 8, "s4": 4,
         "u4": 4, "b1": 1, "s32": 32}
DISTRIBUTIONS = ("normal", "wide", "bits", "subnormal", "overflow", "zeros", "cancel")


def float_bits(ptx_type: str, count: int, dist: str, rng: np.random.Generator, role: str = "ab") -> np.ndarray:
    """`count` bit patterns (uint64) of a float type in distribution `dist`:
    normal: exponents -4…3, wide: every exponent incl. subnormals with 10 % zeros and 1 % inf and NaN each,
    bits: any pattern, subnormal: subnormals and the smallest normals, overflow: the largest binades,
    zeros: 90 % ±0 (C: all ±0), cancel: ±1 (C: ±0), so that sums are often exactly zero."""
    e_bits, m_bits = FLOAT_FIELDS[ptx_type]
    bias, top = (1 << (e_bits - 1)) - 1, (1 << e_bits) - 1
    width = WIDTH[ptx_type]
    sign = rng.integers(0, 2, count, dtype=np.uint64) << np.uint64(width - 1)
    mantissa = rng.integers(0, 1 << m_bits, count, dtype=np.uint64)
    ieee_top = top - 1 if ptx_type != "e4m3" else top  # e4m3 has no infinities: its top binade is finite
    if dist == "bits":
        out = rng.integers(0, 1 << width, count, dtype=np.uint64) if width < 64 else \
            rng.integers(0, 1 << 63, count, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, count, dtype=np.uint64)
        return out
    if dist == "normal":
        exponent = bias + rng.integers(-4, 4, count)
    elif dist == "wide":
        exponent = rng.integers(0, ieee_top + 1, count)
    elif dist == "subnormal":
        exponent = rng.integers(0, 4, count)
    elif dist == "overflow":
        exponent = rng.integers(max(1, ieee_top - 3), ieee_top + 1, count)
    elif dist in ("zeros", "cancel"):
        exponent = np.full(count, bias)
        if dist == "cancel":
            mantissa[:] = 0
    else:
        raise ValueError(dist)
    if ptx_type == "e4m3":  # S.1111.111 is e4m3's NaN: keep it out of finite draws
        mantissa = np.where((exponent == top) & (mantissa == 7), 6, mantissa)
    out = sign | (exponent.astype(np.uint64) << np.uint64(m_bits)) | mantissa.astype(np.uint64)
    if dist == "wide":
        u = rng.random(count)
        out = np.where(u < 0.10, sign, out)
        if ptx_type != "e4m3":
            out = np.where((u >= 0.10) & (u < 0.11), sign | np.uint64(top << m_bits), out)
        nan = np.uint64(top << m_bits | 1) if ptx_type != "e4m3" else np.uint64(0x7F)
        out = np.where((u >= 0.11) & (u < 0.12), sign | nan, out)
    if dist == "zeros":
        keep = rng.random(count) < (0.0 if role == "c" else 0.1)
        out = np.where(keep, out, sign)
    if dist == "cancel" and role == "c":
        out = sign
    return out


def element_bits(ptx_type: str, count: int, dist: str, rng: np.random.Generator, role: str) -> np.ndarray:
    if ptx_type in FLOAT_FIELDS:
        bits = float_bits(ptx_type, count, dist, rng, role)
        if ptx_type == "tf32" and dist == "bits":
            return bits
        if ptx_type == "tf32":  # a tf32 value: 13 low bits clear except in "bits"
            return bits & np.uint64(0xFFFFE000)
        return bits
    width = WIDTH[ptx_type]
    if ptx_type == "s32":
        values = rng.integers(0, 1 << 32, count, dtype=np.uint64)
        if dist == "overflow":  # near the limits, for .satfinite
            offset = rng.integers(0, 1 << 20, count, dtype=np.uint64)
            values = np.where(rng.random(count) < 0.5, np.uint64(0x7FFFFFFF) - offset, np.uint64(0x80000000) + offset)
        return values
    return rng.integers(0, 1 << width, count, dtype=np.uint64)


def pack(elements: np.ndarray, bits: int, register_bits: int) -> np.ndarray:
    """Elements (lanes × n) into registers (lanes × n·bits/register_bits), element 0 in the low bits."""
    per = register_bits // bits
    lanes, n = elements.shape
    grouped = elements.reshape(lanes, n // per, per).astype(np.uint64)
    shifts = (np.arange(per, dtype=np.uint64) * np.uint64(bits))
    mask = np.uint64((1 << bits) - 1) if bits < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    return np.bitwise_or.reduce((grouped & mask) << shifts, axis=2)


# --------------------------------------------------------------------------------------------- mma forms

def _regs(elements: int, bits: int) -> tuple[int, int]:
    """(registers, register bits) of a fragment of `elements` per lane."""
    register_bits = max(32, bits)
    return elements * bits // register_bits, register_bits


def mma_forms() -> list[dict]:
    """Every mma/mma.sp form the probe runs: name, PTX opcode with modifiers, per-operand (type, elements/lane)."""
    forms = []

    def dense(shape: str, d: str, a: str, b: str, c: str, flags: str = "", layouts=("row", "col")) -> None:
        m, k = int(shape[1:shape.index("n")]), int(shape[shape.index("k") + 1:])
        n = 8
        lanes = 32
        name = "_".join(["mma", shape, *layouts, d, a, b, c] + ([flags.strip(".")] if flags else []))
        quad = shape == "m8n8k4" and a == "f16"
        if quad:
            counts = {"a": 4, "b": 4, "c": 8, "d": 8}
        else:
            counts = {"a": m * k // lanes, "b": k * n // lanes, "c": m * n // lanes, "d": m * n // lanes}
        opcode = f"mma.sync.aligned.{shape}.{layouts[0]}.{layouts[1]}{flags}.{d}.{a}.{b}.{c}"
        forms.append({"name": name, "opcode": opcode, "shape": shape, "sparse": False, "layouts": list(layouts),
                          "types": {"a": a, "b": b, "c": c, "d": d}, "counts": counts})

    def sparse(shape: str, d: str, a: str, c: str, selector: int, flags: str = "") -> None:
        m, k = 16, int(shape[shape.index("k") + 1:])
        counts = {"a": m * k // 2 // 32, "b": k * 8 // 32, "c": 4, "d": 4}
        name = "_".join(["mmasp", shape, d, a, c, f"sel{selector}"] + ([flags.strip(".")] if flags else []))
        opcode = f"mma.sp::ordered_metadata.sync.aligned.{shape}.row.col{flags}.{d}.{a}.{a}.{c}"
        forms.append({"name": name, "opcode": opcode, "shape": shape, "sparse": True, "selector": selector, "layouts": ["row", "col"],
                          "types": {"a": a, "b": a, "c": c, "d": d}, "counts": counts})

    for shape in ("m16n8k16", "m16n8k8"):
        for d, c in (("f32", "f32"), ("f16", "f16")):  # these shapes take .dtype = .ctype only
            dense(shape, d, "f16", "f16", c)
        dense(shape, "f32", "bf16", "bf16", "f32")
    dense("m16n8k8", "f32", "tf32", "tf32", "f32")
    dense("m16n8k4", "f32", "tf32", "tf32", "f32")
    for a, b in (("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2")):
        dense("m16n8k32", "f32", a, b, "f32")
    dense("m16n8k32", "f16", "e4m3", "e4m3", "f16")
    dense("m16n8k16", "f32", "e4m3", "e4m3", "f32")
    dense("m16n8k16", "f16", "e5m2", "e5m2", "f16")
    for shape in ("m8n8k4", "m16n8k4", "m16n8k8", "m16n8k16"):
        dense(shape, "f64", "f64", "f64", "f64")
    for layouts in (("row", "col"), ("col", "row"), ("row", "row"), ("col", "col")):
        dense("m8n8k4", "f32", "f16", "f16", "f32", layouts=layouts)
    dense("m8n8k4", "f16", "f16", "f16", "f16")
    dense("m8n8k4", "f32", "f16", "f16", "f16", layouts=("col", "row"))
    dense("m16n8k32", "s32", "s8", "s8", "s32")
    dense("m16n8k32", "s32", "u8", "s8", "s32", ".satfinite")
    dense("m8n8k16", "s32", "s8", "u8", "s32", ".satfinite")
    dense("m16n8k64", "s32", "s4", "s4", "s32", ".satfinite")
    for shape, k in (("m16n8k16", 16), ("m16n8k32", 32)):
        sparse(shape, "f32", "f16", "f32", 0)
        sparse(shape, "f32", "bf16", "f32", 1)
        sparse(shape, "f16", "f16", "f16", 1)
    sparse("m16n8k64", "f32", "e4m3", "f32", 0)
    sparse("m16n8k64", "f32", "e5m2", "f32", 0)
    sparse("m16n8k32", "s32", "s8", "s32", 1, ".satfinite")
    sparse("m16n8k64", "s32", "s4", "s32", 1)  # 4-bit: 2:4 sparse in pairs of elements
    sparse("m16n8k64", "s32", "u4", "s32", 0, ".satfinite")
    sparse("m16n8k128", "s32", "u4", "s32", 0)
    sparse("m16n8k128", "s32", "s4", "s32", 0, ".satfinite")
    sparse("m16n8k8", "f32", "tf32", "f32", 0)  # tf32: 1:2 sparse
    sparse("m16n8k8", "f32", "tf32", "f32", 3)
    sparse("m16n8k16", "f32", "tf32", "f32", 1)
    return forms


WMMA_FORMS = [  # (name, shape, a type, c type, d type)
    ("wmma_m16n16k16_f16_f32", "m16n16k16", "f16", "f32", "f32"),
    ("wmma_m16n16k16_f16_f16", "m16n16k16", "f16", "f16", "f16"),
    ("wmma_m32n8k16_f16_f32", "m32n8k16", "f16", "f32", "f32"),
    ("wmma_m8n32k16_bf16", "m8n32k16", "bf16", "f32", "f32"),
    ("wmma_m16n16k16_bf16", "m16n16k16", "bf16", "f32", "f32"),
    ("wmma_m16n16k8_tf32", "m16n16k8", "tf32", "f32", "f32"),
    ("wmma_m8n8k4_f64", "m8n8k4", "f64", "f64", "f64"),
]
WMMA_SHAPES = {"m16n16k16": (16, 16, 16), "m32n8k16": (32, 8, 16), "m8n32k16": (8, 32, 16), "m16n16k8": (16, 16, 8),
               "m8n8k4": (8, 8, 4)}


def _ptx_header() -> str:
    return ".version 8.7\n.target sm_90\n.address_size 64\n\n"


def guarded_prologue(predicates: int, guard: str) -> str:
    """The first lines of a probe kernel's body (here and in families.py): 30 registers of each kind but the
    `predicates`, %r7 = the thread's global index, and threads at or past the `n` parameter jump to DONE (the
    predicate `guard` tests it)."""
    registers = "".join(f"    .reg .{kind} %{prefix}<30>;\n"
                        for kind, prefix in (("b16", "h"), ("b32", "r"), ("f32", "f"), ("b64", "rd"), ("f64", "fd")))
    return f"""    .reg .pred %p<{predicates}>;
{registers}    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ntid.x;
    mov.u32 %r6, %tid.x;
    mad.lo.u32 %r7, %r4, %r5, %r6;
    ld.param.u32 %r8, [n];
    setp.ge.u32 {guard}, %r7, %r8;
    @{guard} bra DONE;
"""


def mma_kernel(form: dict) -> str:
    """The probe kernel of an mma form: lane record = A, B, C (, E) registers, 64-bit slots for f64 forms."""
    types, counts = form["types"], form["counts"]
    operands = ["a", "b", "c"] + (["e"] if form["sparse"] else [])
    regs = {}
    for x in ("a", "b", "c", "d"):
        regs[x] = _regs(counts[x], WIDTH[types[x]])
    regs["e"] = (1, 32)
    wide = types["a"] == "f64"
    slot = 8 if wide else 4
    n_in = sum(regs[x][0] for x in operands)
    n_out = regs["d"][0]
    lines = [f".visible .entry {form['name']}(.param .u64 pin, .param .u64 pout)", "{",
             "    .reg .b32 %r<300>;", "    .reg .b64 %rd<20>;", "    .reg .f64 %fd<300>;",
             "    mov.u32 %r0, %ctaid.x;", "    mov.u32 %r1, %ntid.x;", "    mov.u32 %r2, %tid.x;",
             "    mad.lo.u32 %r3, %r0, %r1, %r2;",
             "    ld.param.u64 %rd1, [pin];", "    ld.param.u64 %rd2, [pout];",
             f"    mul.wide.u32 %rd3, %r3, {n_in * slot};", "    add.u64 %rd1, %rd1, %rd3;",
             f"    mul.wide.u32 %rd3, %r3, {n_out * slot};", "    add.u64 %rd2, %rd2, %rd3;"]
    names: dict[str, list[str]] = {}
    index = 0
    next_reg = 10
    for x in operands:
        names[x] = []
        for _ in range(regs[x][0]):
            if wide and x != "e":
                reg = f"%fd{next_reg}"
                lines.append(f"    ld.global.f64 {reg}, [%rd1+{index * slot}];")
            else:
                reg = f"%r{next_reg}"
                lines.append(f"    ld.global.b32 {reg}, [%rd1+{index * slot}];")
            names[x].append(reg)
            index += 1
            next_reg += 1
    names["d"] = [(f"%fd{next_reg + i}" if wide else f"%r{next_reg + i}") for i in range(n_out)]

    def group(rs: list[str]) -> str:
        return "{" + ", ".join(rs) + "}"

    args = [group(names["d"]), group(names["a"]), group(names["b"]), group(names["c"])]
    if form["sparse"]:
        args += [names["e"][0], str(form["selector"])]
    lines.append(f"    {form['opcode']} {', '.join(args)};")
    for i, reg in enumerate(names["d"]):
        lines.append(f"    st.global.{'f64' if wide else 'b32'} [%rd2+{i * slot}], {reg};")
    lines += ["    ret;", "}", ""]
    return "\n".join(lines)


def wmma_kernel(name: str, shape: str, a: str, c: str, d: str) -> str:
    """One warp per tile set: A (m×k row-major), B (k×n row-major), C (m×n row-major) of the warp, D out."""
    m, n, k = WMMA_SHAPES[shape]
    size = {x: WIDTH[t] // 8 for x, t in (("a", a), ("c", c), ("d", d))}
    tiles = m * k * size["a"] + k * n * size["a"] + m * n * size["c"]
    a_regs = {("f16", 16): 8, ("bf16", 16): 4 if m == 16 else (8 if m == 32 else 2), ("tf32", 8): 4, ("f64", 4): 1}
    fragment = {
        "f16": (8, 8), "bf16": (None, None), "tf32": (4, 4), "f64": (1, 1),
    }
    if a == "bf16":
        a_count = {16: 4, 32: 8, 8: 2}[m]
        b_count = {16: 4, 8: 2, 32: 8}[n]
    else:
        a_count, b_count = fragment[a]
    del a_regs
    cd = {"f32": m * n // 32, "f16": m * n // 64, "f64": m * n // 32}
    wide = a == "f64"
    lines = [f".visible .entry {name}(.param .u64 pin, .param .u64 pout)", "{",
             "    .reg .b32 %r<100>;", "    .reg .b64 %rd<20>;", "    .reg .f64 %fd<100>;", "    .reg .f32 %f<100>;",
             "    mov.u32 %r0, %ctaid.x;", "    mov.u32 %r1, %ntid.x;", "    mov.u32 %r2, %tid.x;",
             "    mad.lo.u32 %r3, %r0, %r1, %r2;", "    shr.u32 %r3, %r3, 5;",
             "    ld.param.u64 %rd1, [pin];", "    ld.param.u64 %rd2, [pout];",
             f"    mul.wide.u32 %rd3, %r3, {tiles};", "    add.u64 %rd1, %rd1, %rd3;",
             f"    add.u64 %rd4, %rd1, {m * k * size['a']};", f"    add.u64 %rd5, %rd4, {k * n * size['a']};",
             f"    mul.wide.u32 %rd3, %r3, {m * n * size['d']};", "    add.u64 %rd2, %rd2, %rd3;"]
    def rs(prefix: str, start: int, count: int) -> str:
        return "{" + ", ".join(f"%{prefix}{start + i}" for i in range(count)) + "}"
    ab = "fd" if wide else "r"
    atype = a
    lines.append(f"    wmma.load.a.sync.aligned.row.{shape}.global.{atype} {rs(ab, 10, a_count)}, [%rd1];")
    lines.append(f"    wmma.load.b.sync.aligned.row.{shape}.global.{atype} {rs(ab, 30, b_count)}, [%rd4];")
    cp = "fd" if c == "f64" else "f" if c == "f32" else "r"
    dp = "fd" if d == "f64" else "f" if d == "f32" else "r"
    lines.append(f"    wmma.load.c.sync.aligned.row.{shape}.global.{c} {rs(cp, 50, cd[c])}, [%rd5];")
    types = f"{d}.{c}" if a == "f16" else f"{d}.{a}.{a}.{c}"
    lines.append(f"    wmma.mma.sync.aligned.row.row.{shape}.{types} {rs(dp, 70, cd[d])}, {rs(ab, 10, a_count)}, "
                 f"{rs(ab, 30, b_count)}, {rs(cp, 50, cd[c])};")
    lines.append(f"    wmma.store.d.sync.aligned.row.{shape}.global.{d} [%rd2], {rs(dp, 70, cd[d])};")
    lines += ["    ret;", "}", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- cvt forms

def cvt_forms() -> list[dict]:
    """(name, snippet, source kind, result width): the f32/f64 → f16/bf16/fp8/tf32/f32 conversions."""
    forms = []

    def add(name: str, snippet: str, source: str, result: int) -> None:
        forms.append({"name": name, "snippet": snippet, "source": source, "result": result})

    for mode in ("rn", "rz", "rm", "rp"):
        for ftz in ("", ".ftz"):
            for sat in ("", ".sat"):
                add(f"cvt_{mode}{ftz}{sat}_f16_f32".replace(".", "_"),
                    f"cvt.{mode}{ftz}{sat}.f16.f32 %h20, %f1;\n    mov.b32 %r20, {{%h20, %h0}};", "f32", 16)
        for relu in ("", ".relu"):
            for satf in ("", ".satfinite"):
                if mode in ("rn", "rz"):
                    add(f"cvt_{mode}{relu}{satf}_bf16_f32".replace(".", "_"),
                        f"cvt.{mode}{relu}{satf}.bf16.f32 %h20, %f1;\n    mov.b32 %r20, {{%h20, %h0}};", "f32", 16)
                    add(f"cvt_{mode}{relu}{satf}_f16x2_f32".replace(".", "_"),
                        f"cvt.{mode}{relu}{satf}.f16x2.f32 %r20, %f1, %f2;", "f32x2", 32)
                    add(f"cvt_{mode}{relu}{satf}_bf16x2_f32".replace(".", "_"),
                        f"cvt.{mode}{relu}{satf}.bf16x2.f32 %r20, %f1, %f2;", "f32x2", 32)
                    if satf == "":
                        add(f"cvt_{mode}{relu}_f16_f32_relu".replace(".", "_"),
                            f"cvt.{mode}{relu}.f16.f32 %h20, %f1;\n    mov.b32 %r20, {{%h20, %h0}};", "f32", 16)
        add(f"cvt_{mode}_bf16_f32_dir", f"cvt.{mode}.bf16.f32 %h20, %f1;\n    mov.b32 %r20, {{%h20, %h0}};", "f32", 16)
        add(f"cvt_{mode}_f16_f64", f"cvt.{mode}.f16.f64 %h20, %fd1;\n    mov.b32 %r20, {{%h20, %h0}};", "f64", 16)
        add(f"cvt_{mode}_bf16_f64", f"cvt.{mode}.bf16.f64 %h20, %fd1;\n    mov.b32 %r20, {{%h20, %h0}};", "f64", 16)
        for ftz in ("", ".ftz"):
            for sat in ("", ".sat"):
                add(f"cvt_{mode}{ftz}{sat}_f32_f64".replace(".", "_"),
                    f"cvt.{mode}{ftz}{sat}.f32.f64 %f20, %fd1;\n    mov.b32 %r20, %f20;", "f64", 32)
        for ftz in ("", ".ftz"):
            add(f"cvt_{mode}i{ftz}_f32_f32".replace(".", "_"),
                f"cvt.{mode}i{ftz}.f32.f32 %f20, %f1;\n    mov.b32 %r20, %f20;", "f32", 32)
    for fp8 in ("e4m3x2", "e5m2x2"):
        for relu in ("", ".relu"):
            add(f"cvt_rn_satfinite{relu}_{fp8}_f32".replace(".", "_"),
                f"cvt.rn.satfinite{relu}.{fp8}.f32 %h20, %f1, %f2;\n    mov.b32 %r20, {{%h20, %h0}};", "f32x2", 16)
            add(f"cvt_rn_satfinite{relu}_{fp8}_f16x2".replace(".", "_"),
                f"cvt.rn.satfinite{relu}.{fp8}.f16x2 %h20, %r1;\n    mov.b32 %r20, {{%h20, %h0}};", "f16x2", 16)
            add(f"cvt_rn{relu}_f16x2_{fp8}".replace(".", "_"),
                f"cvt.rn{relu}.f16x2.{fp8} %r20, %h1;", "b16", 32)
    for mode, flags in (("rna", ""), ("rna", ".satfinite"), ("rn", ""), ("rz", ""), ("rn", ".relu"),
                        ("rz", ".satfinite")):
        add(f"cvt_{mode}{flags}_tf32_f32".replace(".", "_"), f"cvt.{mode}{flags}.tf32.f32 %r20, %f1;", "f32", 32)
    for ftz in ("", ".ftz"):
        add(f"cvt{ftz}_f32_f16".replace(".", "_"), f"cvt{ftz}.f32.f16 %f20, %h1;\n    mov.b32 %r20, %f20;", "b16", 32)
        add(f"cvt{ftz}_f32_bf16".replace(".", "_"), f"cvt{ftz}.f32.bf16 %f20, %h1;\n    mov.b32 %r20, %f20;", "b16", 32)
        add(f"cvt{ftz}_sat_f32_f32".replace(".", "_"), f"cvt{ftz}.sat.f32.f32 %f20, %f1;\n    mov.b32 %r20, %f20;",
            "f32", 32)
    return forms


def cvt_kernel(form: dict) -> str:
    """Thread i converts in[i] (f32x2: and in2[i]; f64: the 64-bit in64[i]) and stores 32 result bits."""
    return f"""{_ptx_header()}.visible .entry {form['name']}(.param .u64 pin, .param .u64 pin2, .param .u64 pout,
    .param .u32 n)
{{
{guarded_prologue(4, "%p1")}    mov.b16 %h0, 0;
    ld.param.u64 %rd5, [pin];
    ld.param.u64 %rd6, [pin2];
    mul.wide.u32 %rd4, %r7, {8 if form['source'] == 'f64' else 4};
    add.u64 %rd5, %rd5, %rd4;
    add.u64 %rd6, %rd6, %rd4;
    {'ld.global.f64 %fd1, [%rd5];' if form['source'] == 'f64' else 'ld.global.b32 %r1, [%rd5];'}
    ld.global.b32 %r2, [%rd6];
    mov.b32 %f1, %r1;
    mov.b32 %f2, %r2;
    cvt.u16.u32 %h1, %r1;
    {form['snippet']}
    ld.param.u64 %rd5, [pout];
    mul.wide.u32 %rd4, %r7, 4;
    add.u64 %rd5, %rd5, %rd4;
    st.global.b32 [%rd5], %r20;
DONE:
    ret;
}}
"""


# --------------------------------------------------------------------------------------------- build (here)

def build(out: Path) -> None:
    import subprocess
    import tempfile

    sys.path.insert(0, str(HERE.parent))
    from fatkit.translate.pipeline import Options, translate

    out.mkdir(parents=True, exist_ok=True)
    manifest = {"mma": [], "wmma": [], "cvt": []}

    def compiles(text: str) -> str | None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "k.ptx"
            path.write_text(text)
            done = subprocess.run(["ptxas", "-arch=sm_90", str(path), "-o", str(Path(tmp) / "k.o")],
                                  capture_output=True, text=True)
            return None if done.returncode == 0 else done.stderr.strip()[:300]

    for form in mma_forms():
        text = _ptx_header() + mma_kernel(form)
        error = compiles(text)
        if error:
            print("ptxas refuses", form["name"], error)
            continue
        (out / f"{form['name']}.ptx").write_text(text)
        manifest["mma"].append(form)
    for name, shape, a, c, d in WMMA_FORMS:
        text = _ptx_header() + wmma_kernel(name, shape, a, c, d)
        error = compiles(text)
        if error:
            print("ptxas refuses", name, error)
            continue
        (out / f"{name}.ptx").write_text(text)
        manifest["wmma"].append({"name": name, "shape": shape, "a": a, "c": c, "d": d})
    for form in cvt_forms():
        text = cvt_kernel(form)
        error = compiles(text)
        if error:
            print("ptxas refuses", form["name"], error.splitlines()[0] if error else "")
            continue
        (out / f"{form['name']}.orig.ptx").write_text(text)
        try:
            product = translate(text, Options(target="sm_90")).product
            (out / f"{form['name']}.fatkit.ptx").write_bytes(product if isinstance(product, bytes) else product.encode())
            form = {**form, "fatkit": True}
        except Exception as exc:  # recorded: what fatkit cannot translate
            print("fatkit refuses", form["name"], str(exc)[:200])
            form = {**form, "fatkit": False, "reason": str(exc)[:300]}
        manifest["cvt"].append(form)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(len(manifest["mma"]), "mma,", len(manifest["wmma"]), "wmma,", len(manifest["cvt"]), "cvt forms")


# --------------------------------------------------------------------------------------------- run (GPU)

def _spread_f32(count: int, rng: np.random.Generator) -> np.ndarray:
    """f32 bit patterns with every exponent field equally likely (subnormals, ±0, ±inf, NaNs included),
    plus values at f16/bf16 rounding ties and near f16's overflow."""
    sign = rng.integers(0, 2, count, dtype=np.uint32) << np.uint32(31)
    exponent = rng.integers(0, 256, count, dtype=np.uint32)
    mantissa = rng.integers(0, 1 << 23, count, dtype=np.uint32)
    bits = sign | exponent << np.uint32(23) | mantissa
    quarter = count // 4
    # f16 range (exponents -25…16) with ties: low 13 bits 0x1000, or the f16 subnormal grid's half
    e16 = rng.integers(127 - 25, 127 + 17, quarter, dtype=np.uint32)
    tie = (mantissa[:quarter] & np.uint32(~0x1FFF & 0x7FFFFF)) | np.uint32(0x1000)
    bits[:quarter] = sign[:quarter] | e16 << np.uint32(23) | np.where(rng.random(quarter) < 0.5, tie, mantissa[:quarter])
    # bf16 ties: low 16 bits 0x8000
    bits[quarter:2 * quarter] = (bits[quarter:2 * quarter] & np.uint32(0xFFFF0000)) | np.uint32(0x8000)
    return bits


# a sparse metadata nibble (two 2-bit indices, the lower first): 2:4 forms take any ascending distinct pair;
# tf32 (1:2) only 0b0100 (the first column of a 2-column chunk kept) and 0b1110 (the second), the ISA's valid ones
SPARSE_NIBBLES = {False: (0x4, 0x8, 0xC, 0x9, 0xD, 0xE), True: (0x4, 0xE)}


def mma_record(form: dict, dist: str, rng: np.random.Generator, lanes: int) -> np.ndarray:
    """The lane records (lanes × registers: A, B, C, sparse metadata) of an mma probe kernel in distribution
    `dist`: uint32 words, uint64 for the f64 forms."""
    types, counts = form["types"], form["counts"]
    parts = []
    for x in ("a", "b", "c"):
        role = "c" if x == "c" else "ab"
        ptx_type = types[x]
        elements = element_bits(ptx_type, lanes * counts[x], dist, rng, role).reshape(lanes, counts[x])
        parts.append(pack(elements, WIDTH[ptx_type], max(32, WIDTH[ptx_type])))
    if form["sparse"]:
        pairs = np.array(SPARSE_NIBBLES[types["a"] == "tf32"], dtype=np.uint64)
        nibbles = pairs[rng.integers(0, len(pairs), (lanes, 8))]
        parts.append(np.bitwise_or.reduce(nibbles << (np.arange(8, dtype=np.uint64) * np.uint64(4)), axis=1)
                     .reshape(lanes, 1))
    record = np.concatenate(parts, axis=1)
    return record.astype(np.uint64 if types["a"] == "f64" else np.uint32)


def mma_output_shape(form: dict, lanes: int) -> tuple[tuple[int, int], type]:
    """The shape and dtype of an mma probe kernel's D registers."""
    d = form["types"]["d"]
    return (lanes, _regs(form["counts"]["d"], WIDTH[d])[0]), (np.uint64 if form["types"]["a"] == "f64" else np.uint32)


def wmma_record(form: dict, dist: str, rng: np.random.Generator, warps: int) -> np.ndarray:
    """The bytes (warps × A, B, C tiles, row-major) of a wmma probe kernel in distribution `dist`."""
    m, n, k = WMMA_SHAPES[form["shape"]]
    a = element_bits(form["a"], warps * (m * k + k * n), dist, rng, "ab")
    c = element_bits(form["c"], warps * m * n, dist, rng, "c")
    dtype = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
    ab = a.astype(dtype[WIDTH[form["a"]]]).reshape(warps, -1)
    cc = c.astype(dtype[WIDTH[form["c"]]]).reshape(warps, -1)
    return np.concatenate([ab.view(np.uint8), cc.view(np.uint8)], axis=1)


def wmma_output_shape(form: dict, warps: int) -> tuple[tuple[int, int], type]:
    m, n, _ = WMMA_SHAPES[form["shape"]]
    return (warps, m * n * WIDTH[form["d"]] // 8), np.uint8


def run(build_dir: Path, out: Path) -> None:
    import cupy as cp

    manifest = json.loads((build_dir / "manifest.json").read_text())
    rng = np.random.default_rng(20261201)
    warps = 32
    saved = {}
    for form in manifest["mma"]:
        module = cp.RawModule(path=str(build_dir / f"{form['name']}.ptx"))
        kernel = module.get_function(form["name"])
        lanes = 32 * warps
        for dist in DISTRIBUTIONS:
            types, counts = form["types"], form["counts"]
            parts = []
            for x in ("a", "b", "c"):
                role = "c" if x == "c" else "ab"
                ptx_type = types[x]
                elements = element_bits(ptx_type, lanes * counts[x], dist, rng, role).reshape(lanes, counts[x])
                parts.append(pack(elements, WIDTH[ptx_type], max(32, WIDTH[ptx_type])))
            if form["sparse"]:
                pairs = np.array(SPARSE_NIBBLES[types["a"] == "tf32"], dtype=np.uint64)
                nibbles = pairs[rng.integers(0, len(pairs), (lanes, 8))]
                parts.append(np.bitwise_or.reduce(nibbles << (np.arange(8, dtype=np.uint64) * np.uint64(4)), axis=1)
                             .reshape(lanes, 1))
            record = np.concatenate(parts, axis=1)
            wide = types["a"] == "f64"
            host = record.astype(np.uint64 if wide else np.uint32)
            n_out = _regs(counts["d"], WIDTH[types["d"]])[0]
            device_in = cp.asarray(host)
            device_out = cp.full((lanes, n_out), 0xA5A5A5A5, dtype=cp.uint64 if wide else cp.uint32)
            kernel((warps, 1, 1), (32, 1, 1), (device_in, device_out))
            cp.cuda.runtime.deviceSynchronize()
            saved[f"{form['name']}:{dist}:in"] = host
            saved[f"{form['name']}:{dist}:out"] = cp.asnumpy(device_out)
    np.savez_compressed(out / "mma.npz", **saved)
    saved = {}
    for form in manifest["wmma"]:
        m, n, k = WMMA_SHAPES[form["shape"]]
        module = cp.RawModule(path=str(build_dir / f"{form['name']}.ptx"))
        kernel = module.get_function(form["name"])
        for dist in DISTRIBUTIONS:
            a = element_bits(form["a"], warps * (m * k + k * n), dist, rng, "ab")
            c = element_bits(form["c"], warps * m * n, dist, rng, "c")
            dtype = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
            ab = a.astype(dtype[WIDTH[form["a"]]]).reshape(warps, -1)
            cc = c.astype(dtype[WIDTH[form["c"]]]).reshape(warps, -1)
            host = np.concatenate([ab.view(np.uint8), cc.view(np.uint8)], axis=1)
            device_out = cp.zeros((warps, m * n * WIDTH[form["d"]] // 8), dtype=cp.uint8)
            kernel((warps, 1, 1), (32, 1, 1), (cp.asarray(host), device_out))
            cp.cuda.runtime.deviceSynchronize()
            saved[f"{form['name']}:{dist}:in"] = host
            saved[f"{form['name']}:{dist}:out"] = cp.asnumpy(device_out)
    np.savez_compressed(out / "wmma.npz", **saved)

    # cvt: all f32 subnormals, random bits, spread values; f64 sources: f64 values in f32's and f16's ranges too
    subnormals = np.concatenate([np.arange(1, 1 << 23, dtype=np.uint32),
                                 np.arange(1, 1 << 23, dtype=np.uint32) | np.uint32(0x80000000)])
    classes32 = {"subnormal": subnormals, "random": rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint32),
                 "spread": _spread_f32(1 << 20, rng)}
    f64_values = {
        "random": rng.integers(0, 1 << 63, 1 << 20, dtype=np.uint64) * np.uint64(2),
        "spread": ((rng.integers(0, 2, 1 << 20, dtype=np.uint64) << np.uint64(63))
                   | (rng.integers(1023 - 160, 1023 + 140, 1 << 20, dtype=np.uint64) << np.uint64(52))
                   | rng.integers(0, 1 << 52, 1 << 20, dtype=np.uint64)),
    }
    f64_values["subnormal"] = ((rng.integers(0, 2, 1 << 20, dtype=np.uint64) << np.uint64(63))
                               | (rng.integers(1023 - 152, 1023 - 125, 1 << 20, dtype=np.uint64) << np.uint64(52))
                               | rng.integers(0, 1 << 52, 1 << 20, dtype=np.uint64))
    results = {}
    for form in manifest["cvt"]:
        entry = {}
        if not form.get("fatkit"):
            results[form["name"]] = {"error": "fatkit: " + form.get("reason", "")}
            continue
        modules = [cp.RawModule(path=str(build_dir / f"{form['name']}.{which}.ptx")) for which in ("orig", "fatkit")]
        for cls in ("subnormal", "random", "spread"):
            if form["source"] == "f64":
                first = f64_values[cls]
            elif form["source"] in ("b16", "f16x2") and cls == "subnormal":
                first = np.arange(0, 1 << 16, dtype=np.uint32) | (np.arange(0, 1 << 16, dtype=np.uint32)[::-1] << 16)
            else:
                first = classes32[cls]
            second = first[::-1].astype(np.uint32) if form["source"] != "f64" else \
                classes32["spread"][: len(first)].copy()
            count = len(first)
            outputs = []
            for module in modules:
                device_out = cp.full(count, 0xA5A5A5A5, dtype=cp.uint32)
                module.get_function(form["name"])(((count + 255) // 256, 1, 1), (256, 1, 1),
                                                 (cp.asarray(first), cp.asarray(second), device_out, np.uint32(count)))
                cp.cuda.runtime.deviceSynchronize()
                outputs.append(cp.asnumpy(device_out))
            differ = np.nonzero(outputs[0] != outputs[1])[0]
            sample = np.concatenate([differ[:64], rng.integers(0, count, 32)])
            entry[cls] = {"count": int(count), "differ": len(differ),
                          "sample": [[hex(int(first[i])), hex(int(second[i])), hex(int(outputs[0][i])),
                                      hex(int(outputs[1][i]))] for i in sample]}
        results[form["name"]] = entry
        print(form["name"], {c: e["differ"] for c, e in entry.items()}, flush=True)
    (out / "cvt.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(Path(sys.argv[2]))
    elif sys.argv[1] == "run":
        run(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        raise SystemExit(__doc__)
