"""Static cost of one mma.sync on AMD targets: the instructions one mma adds to a kernel, with `--mma-numerics
native` (gfx942 MFMA, gfx1100 and gfx1201 WMMA) against `sm90` (the portable path, the anchor), measured in
the same run.

Each form runs in a kernel where every thread loads its A, B, C registers, runs the mma and stores D; the
same kernel with the mma replaced by `mov`s of C to D is the baseline. The count is that of the disassembly
(llvm-objdump) from the entry to s_endpgm, so it includes every instruction the mma brings: lane moves,
address arithmetic, waits, s_nop/s_delay_alu, the matrix instructions. The sm90 path calls one subroutine per
form, whose body is counted too. "A second mma": what a second, independent mma of the form adds to a
kernel holding one already (both kernels against their own baseline): the lane-id arithmetic and masks the
two share are counted once, as in a kernel running many mmas.

    python benchmarks/mma_instructions.py [--objdump PATH] [--markdown]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fatkit.translate.pipeline import Options, translate  # noqa: E402

FORMS = [  # (instruction, registers of A, B, C/D)
    ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", (4, 2, 4)),
    ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", (4, 2, 4)),
    ("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", (4, 2, 2)),
    ("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", (4, 2, 4)),
    ("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.s8.s32", (4, 2, 4)),
    ("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32", (2, 1, 4)),
]
TARGETS = ("gfx942", "gfx1100", "gfx1201")


def kernel(instruction: str | None, counts: tuple[int, int, int], copies: int = 1, directive: str = "") -> str:
    """The kernel of one form; `copies` 2: two independent mmas (their fragments 64 bytes apart in each array);
    `directive`: the kernel's block shape (`.maxntid 64, 1, 1` makes %tid.x mod 32 the lane, so that fatkit may
    load A, B and C and store D in the matrix instruction's own layout, lower/mma_direct.py)."""
    a, b, c = counts
    loads, body, stores = [], [], []
    for copy in range(copies):
        loads += [f"ld.global.b32 %{name}{copy}_{r}, [%p{slot}+{64 * copy + 4 * r}];"
                  for slot, (name, n) in enumerate(zip("abc", counts)) for r in range(n)]
        if instruction is None:
            body += [f"mov.b32 %d{copy}_{r}, %c{copy}_{r};" for r in range(c)]
        else:
            operands = ", ".join("{" + ", ".join(f"%{name}{copy}_{r}" for r in range(n)) + "}"
                                 for name, n in zip("dabc", (c, a, b, c)))
            body.append(f"{instruction} {operands};")
        stores += [f"st.global.b32 [%p3+{64 * copy + 4 * r}], %d{copy}_{r};" for r in range(c)]
    registers = ", ".join(f"%{name}{copy}_<{n}>" for copy in range(copies) for name, n in zip("abcd", (a, b, c, c)))
    addresses = "\n".join(f"ld.param.u64 %q{s}, [param{s}];\nmul.wide.u32 %w, %i, {4 * n};\nadd.s64 %p{s}, %q{s}, %w;"
                          for s, n in enumerate((a, b, c, c)))
    params = ", ".join(f".param .u64 param{s}" for s in range(4))
    return f""".version 8.5
.target sm_90
.address_size 64
.visible .entry k({params}){directive}
{{
    .reg .b32 {registers}, %i;
    .reg .b64 %q<4>, %p<4>, %w;
    mov.u32 %i, %tid.x;
    {addresses}
    {chr(10).join(loads)}
    {chr(10).join(body)}
    {chr(10).join(stores)}
    ret;
}}
"""


def instructions(text: str, target: str, numerics: str, objdump: str) -> int:
    product = translate(text, Options(target=target, mma_numerics=numerics)).product
    with tempfile.NamedTemporaryFile(suffix=".hsaco") as file:
        file.write(product)
        file.flush()
        listing = subprocess.run([objdump, "-d", file.name], capture_output=True, text=True, check=True).stdout
    count = 0
    for line in listing.splitlines():
        if "//" in line and not line.lstrip().startswith(";"):
            count += 1
            if "s_endpgm" in line:
                break
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objdump", default="/usr/lib/llvm-22/bin/llvm-objdump")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    rows = []
    for instruction, counts in FORMS:
        for target in TARGETS:
            def cost(numerics: str, copies: int, directive: str = "") -> int:
                return (instructions(kernel(instruction, counts, copies, directive), target, numerics, args.objdump)
                        - instructions(kernel(None, counts, copies, directive), target, numerics, args.objdump))
            sm90, native = cost("sm90", 1), cost("native", 1)
            second = cost("native", 2) - native  # what a second, independent mma adds to the same kernel
            loaded = cost("native", 1, "\n.maxntid 64, 1, 1")
            rows.append((instruction.removeprefix("mma.sync.aligned."), target, sm90, native, native / sm90, second,
                         loaded))
    if args.markdown:
        print("| form | target | sm90 | native | native/sm90 | native, a second mma | native, .maxntid 64, 1, 1 |\n"
              "|---|---|---:|---:|---:|---:|---:|")
        for form, target, sm90, native, ratio, second, loaded in rows:
            print(f"| {form} | {target} | {sm90} | {native} | {ratio:.3f} | {second} | {loaded} |")
    else:
        for form, target, sm90, native, ratio, second, loaded in rows:
            print(f"{form:48s} {target:8s} sm90 {sm90:5d}  native {native:5d}  ratio {ratio:.3f}  second {second:5d}"
                  f"  loaded {loaded:5d}")


if __name__ == "__main__":
    main()
