"""How many corpus kernels run in the flushing mode (kernel-wide .ftz, docs/numerics.md), and what keeps the rest.

    python benchmarks/fp_modes.py [--top 15] [PATH...]

Runs parse → passes on every PTX module found in PATHs (default: every fetched corpus binary plus
tests/samples/ptx), each distinct module text once, and counts its kernels by pass 6's mode (FpMode.uniform
with the kernel's call graph): "ftz" (compiled with the hardware flushing f32 subnormals), "ieee" (keeps them
throughout), mixed, or without f32 instructions; then the f32 instruction forms that keep subnormals in the
mixed kernels, by how many kernels have them.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fatkit.errors import FatkitError  # noqa: E402
from fatkit.extract.scan import scan_paths  # noqa: E402
from fatkit.extract.select import ptx_modules  # noqa: E402
from fatkit.translate.passes.fp_mode import instruction_mode  # noqa: E402
from fatkit.translate.pipeline import Options, run  # noqa: E402
from tests.corpus import corpus_files  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    paths = args.paths or [*corpus_files(), *sorted((ROOT / "tests" / "samples" / "ptx").glob("*.ptx"))]
    modes: Counter[str] = Counter()
    keeping: Counter[str] = Counter()  # forms keeping subnormals in mixed kernels, one count per kernel
    seen: set[str] = set()
    started = time.perf_counter()
    for module in ptx_modules(scan_paths(paths), on_error=lambda message: print("!", message, file=sys.stderr)):
        if module.text in seen:
            continue
        seen.add(module.text)
        try:
            prepared = run(module.text, Options(), until="passes")
        except FatkitError:
            modes["module not prepared"] += 1
            continue
        for function in prepared.module.functions:
            mode = prepared.fp_modes.get(function.name)
            if not function.is_kernel or mode is None:
                continue
            modes[mode.uniform or ("mixed" if mode.ftz or mode.ieee else "no f32")] += 1
            if mode.uniform is None and mode.ftz:
                keeping.update({".".join((i.opcode, *i.modifiers)) for i in function.instructions()
                                if instruction_mode(prepared, i) == "ieee"})
    kernels = sum(v for k, v in modes.items() if k != "module not prepared")
    print(f"{len(seen)} distinct PTX modules, {kernels} kernels, {time.perf_counter() - started:.0f} s")
    for name in ("ftz", "ieee", "mixed", "no f32", "module not prepared"):
        print(f"  {name:>20}: {modes[name]}" + (f" ({100 * modes[name] / kernels:.0f} %)" if kernels and
                                                  name != "module not prepared" else ""))
    print("f32 forms keeping subnormals in mixed kernels (kernels):")
    for form, count in keeping.most_common(args.top):
        print(f"  {count:6}  {form}")


if __name__ == "__main__":
    main()
