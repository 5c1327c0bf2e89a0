"""Translation time of fatkit (PTX → gfx942 code object) against ptxas -O3 (PTX → cubin), module by module.

    python benchmarks/translate_vs_ptxas.py [--target gfx942] [--limit N] [--markdown] [PATH...]

fatkit runs with `--jobs` processes (default: every core, like `fatkit translate`); ptxas uses one.
For every distinct PTX module found in PATHs (default: every fetched corpus binary and tests/samples/ptx),
in the same run: fatkit's whole pipeline (parse, passes, lower, codegen in its child process, link,
validate) and `ptxas -O3` for the module's own `.target` (at least sm_75, the oldest ptxas 13 accepts), each
timed as wall-clock seconds, best of `--repeat`. The ratio is fatkit / ptxas (below 1.0: fatkit is faster).
fatkit translates only the kernels it supports (the others are reported and skipped), so the table also
gives kernels ok / total; the median ratio is over modules where fatkit produced a code object.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fatkit.errors import FatkitError  # noqa: E402
from fatkit.extract.scan import scan_paths  # noqa: E402
from fatkit.extract.select import ptx_modules  # noqa: E402
from fatkit.translate.pipeline import Options, run  # noqa: E402
from tests.corpus import corpus_files  # noqa: E402

OLDEST_PTXAS_ARCH = 75
_TARGET = re.compile(r"^\s*\.target\s+sm_(\d+)([a-z]?)", re.M)


def ptxas_arch(text: str) -> str:
    found = _TARGET.search(text)
    if not found:
        raise FatkitError("PTX without a .target directive")
    number, suffix = int(found.group(1)), found.group(2)
    return f"sm_{number}{suffix}" if number >= OLDEST_PTXAS_ARCH else f"sm_{OLDEST_PTXAS_ARCH}"


def best_of(repeat: int, call) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--target", default="gfx942")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--limit", type=int, default=None, help="stop after this many modules")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="fatkit's processes per module (its -j; default: every core, as the CLI)")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        raise SystemExit("ptxas not on PATH (CUDA toolkit)")
    paths = args.paths or [*corpus_files(), *sorted((ROOT / "tests" / "samples" / "ptx").glob("*.ptx"))]
    options = Options(target=args.target, jobs=args.jobs)
    rows, seen = [], set()
    with tempfile.TemporaryDirectory(prefix="fatkit-bench-") as tmp:
        for module in ptx_modules(scan_paths(paths), on_error=lambda m: print("!", m, file=sys.stderr)):
            digest = hashlib.sha256(module.text.encode()).digest()
            if digest in seen:
                continue
            seen.add(digest)
            if args.limit is not None and len(rows) >= args.limit:
                break
            source = Path(tmp, "module.ptx")
            source.write_text(module.text)
            arch = ptxas_arch(module.text)
            compiled = subprocess.run([ptxas, "-O3", f"--gpu-name={arch}", str(source), "-o",
                                       str(Path(tmp, "m.cubin"))],
                                      capture_output=True, text=True)
            ptxas_s = best_of(args.repeat, lambda: subprocess.run(
                [ptxas, "-O3", f"--gpu-name={arch}", str(source), "-o", str(Path(tmp, "m.cubin"))],
                capture_output=True)) if compiled.returncode == 0 else None
            outcome: dict = {}

            def run_fatkit() -> None:
                try:
                    outcome["kernels"] = run(module.text, options).kernels
                except FatkitError as exc:
                    outcome["error"] = str(exc)

            fatkit_s = best_of(args.repeat, run_fatkit)
            kernels = outcome.get("kernels", ())
            ok = sum(k.status == "ok" for k in kernels)
            rows.append((module.stem, arch, ok, len(kernels) or None, fatkit_s if kernels else None, ptxas_s))
            print(f"{module.stem[:60]:60s} {arch:7s} {ok:4d}/{len(kernels) or '?':<4} "
                  f"fatkit {fatkit_s:7.2f}s  ptxas {ptxas_s if ptxas_s is not None else float('nan'):7.2f}s",
                  file=sys.stderr)
    report(rows, args.markdown)


def report(rows, markdown: bool) -> None:
    ratios = [f / p for _, _, _, _, f, p in rows if f is not None and p]
    line = "| {} | {} | {} | {} | {} | {} |" if markdown else "{:60.60s} {:>7s} {:>9s} {:>9s} {:>9s} {:>7s}"
    print(line.format("module", "arch", "ok/total", "fatkit s", "ptxas s", "ratio"))
    if markdown:
        print("|---|---|---|---|---|---|")
    for stem, arch, ok, total, fatkit_s, ptxas_s in rows:
        ratio = f"{fatkit_s / ptxas_s:.2f}" if fatkit_s is not None and ptxas_s else "-"
        print(line.format(stem, arch, f"{ok}/{total or '?'}", f"{fatkit_s:.2f}" if fatkit_s is not None else "-",
                          f"{ptxas_s:.2f}" if ptxas_s is not None else "failed", ratio))
    if ratios:
        print(f"\nmedian fatkit/ptxas over {len(ratios)} modules with a code object: {statistics.median(ratios):.2f}x "
              f"(geometric mean {statistics.geometric_mean(ratios):.2f}x)")


if __name__ == "__main__":
    main()
