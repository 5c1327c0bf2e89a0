"""Static cost of one mma.sync on AMD targets: the instructions one mma adds to a kernel, with `--mma-numerics
native` (MFMA/WMMA) against `sm90` (the portable path, the anchor), measured in the same run.

Each form runs in a kernel where every thread loads its A, B, C registers, runs the mma and stores D; the
same kernel with the mma replaced by `mov`s of C to D is the baseline. The count is that of the disassembly
(llvm-objdump) from the entry to s_endpgm, so it includes every instruction the mma brings: lane moves,
address arithmetic, waits, s_nop/s_delay_alu, the matrix instructions. The sm90 path calls one subroutine per
form, whose body is counted too.

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
    ("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", (4, 2, 4)),
    ("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.s8.s32", (4, 2, 4)),
    ("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32", (2, 1, 4)),
]
TARGETS = ("gfx942", "gfx1100")


def kernel(instruction: str | None, counts: tuple[int, int, int]) -> str:
    a, b, c = counts
    loads = [f"ld.global.b32 %{name}{r}, [%p{slot}+{4 * r}];" for slot, (name, n) in enumerate(zip("abc", counts))
             for r in range(n)]
    if instruction is None:
        body = "\n".join(f"mov.b32 %d{r}, %c{r};" for r in range(c))
    else:
        operands = ", ".join("{" + ", ".join(f"%{name}{r}" for r in range(n)) + "}"
                             for name, n in zip("dabc", (c, a, b, c)))
        body = f"{instruction} {operands};"
    stores = "\n".join(f"st.global.b32 [%p3+{4 * r}], %d{r};" for r in range(c))
    addresses = "\n".join(f"ld.param.u64 %q{s}, [param{s}];\nmul.wide.u32 %w, %i, {4 * n};\nadd.s64 %p{s}, %q{s}, %w;"
                          for s, n in enumerate((a, b, c, c)))
    params = ", ".join(f".param .u64 param{s}" for s in range(4))
    return f""".version 8.5
.target sm_90
.address_size 64
.visible .entry k({params})
{{
    .reg .b32 %a<{a}>, %b<{b}>, %c<{c}>, %d<{c}>, %i;
    .reg .b64 %q<4>, %p<4>, %w;
    mov.u32 %i, %tid.x;
    {addresses}
    {chr(10).join(loads)}
    {body}
    {stores}
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
            with_mma, without = kernel(instruction, counts), kernel(None, counts)
            cost = {numerics: instructions(with_mma, target, numerics, args.objdump)
                    - instructions(without, target, numerics, args.objdump) for numerics in ("sm90", "native")}
            rows.append((instruction.removeprefix("mma.sync.aligned."), target, cost["sm90"], cost["native"],
                         cost["native"] / cost["sm90"]))
    if args.markdown:
        print("| form | target | sm90 | native | native/sm90 |\n|---|---|---:|---:|---:|")
        for form, target, sm90, native, ratio in rows:
            print(f"| {form} | {target} | {sm90} | {native} | {ratio:.3f} |")
    else:
        for form, target, sm90, native, ratio in rows:
            print(f"{form:48s} {target:8s} sm90 {sm90:5d}  native {native:5d}  ratio {ratio:.3f}")


if __name__ == "__main__":
    main()
