"""Translation time of fatkit (PTX → gfx942 code object) against ptxas -O3 (PTX → cubin), module by module.

    python benchmarks/translate_vs_ptxas.py [--target gfx942] [--limit N] [--markdown] [PATH...]

fatkit runs with `--jobs` processes (default: every core, like `fatkit translate`) and again with one;
ptxas uses one. Per module the table gives the PTX size, the LLVM IR lowering hands to codegen per PTX byte,
the seconds of each pipeline stage in the `--jobs` run, both fatkit runs against ptxas, and the seconds a
second target (`--extra-target`) adds to a run for both, against the first target's. (With `--jobs` > 1
codegen starts while the other kernels lower: the codegen column is what remained once lowering ended.)
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
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fatkit.errors import FatkitError  # noqa: E402
from fatkit.extract.scan import scan_paths  # noqa: E402
from fatkit.extract.select import ptx_modules  # noqa: E402
from fatkit.translate.pipeline import Options, run, run_from  # noqa: E402
from tests import oracles  # noqa: E402
from tests.corpus import corpus_files  # noqa: E402

OLDEST_PTXAS_ARCH = 75
_TARGET = re.compile(r"^\s*\.target\s+sm_(\d+)([a-z]?)", re.M)


def ptxas_arch(text: str) -> str:
    found = _TARGET.search(text)
    if not found:
        raise FatkitError("PTX without a .target directive")
    number, suffix = int(found.group(1)), found.group(2)
    return f"sm_{number}{suffix}" if number >= OLDEST_PTXAS_ARCH else f"sm_{OLDEST_PTXAS_ARCH}"


def two_targets(text: str, options: Options, extra: str) -> float:
    """Seconds the `extra` target adds to a run for options.target and it: parse and passes are shared."""
    prepared = run(text, options, until="passes")
    run_from("lower", prepared, options)
    started = time.perf_counter()
    try:
        run_from("lower", prepared, replace(options, target=extra))
    except FatkitError:
        pass
    return time.perf_counter() - started


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
    parser.add_argument("--extra-target", default="gfx1100",
                        help="a second target of the same run: its extra seconds (the module parsed and prepared "
                             "once for both), against the first's; '' to leave out")
    parser.add_argument("--ptxas", type=Path, default=None,
                        help="the ptxas to time (default: PATH's, else the nvidia-cuda-nvcc package's); an older "
                             "one refuses PTX of a newer .version, which the table then shows as 'failed'")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    found = args.ptxas or oracles.ptxas()
    if found is None:
        raise SystemExit("no ptxas: none on PATH and no nvidia-cuda-nvcc package (pip install nvidia-cuda-nvcc)")
    ptxas = str(found)
    print(f"ptxas: CUDA {oracles.cuda_release(found) or '?'} ({ptxas})", file=sys.stderr)
    paths = args.paths or [*corpus_files(), *sorted((ROOT / "tests" / "samples" / "ptx").glob("*.ptx"))]
    options = Options(target=args.target, jobs=args.jobs)
    one_job = Options(target=args.target, jobs=1)
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

            def run_fatkit(options: Options) -> None:
                stages: dict[str, float] = {}

                def seen(name: str, value, seconds: float) -> None:
                    stages[name] = seconds
                    if name == "lower":
                        outcome["ir_bytes"] = sum(len(k.llvm_ir) for k in value.kernels)

                try:
                    outcome["kernels"] = run(module.text, options, on_stage=seen).kernels
                except FatkitError as exc:
                    outcome["error"] = str(exc)
                if sum(stages.values()) < sum(outcome.get("stages", {}).values() or [float("inf")]):
                    outcome["stages"] = stages

            fatkit_s = best_of(args.repeat, lambda: run_fatkit(options))
            stages = outcome.pop("stages", {})
            one_s = best_of(args.repeat, lambda: run_fatkit(one_job)) if args.jobs > 1 else fatkit_s
            extra_s = best_of(args.repeat, lambda: two_targets(module.text, options, args.extra_target)) \
                if args.extra_target and "error" not in outcome else None
            kernels = outcome.get("kernels", ())
            ok = sum(k.status == "ok" for k in kernels)
            translated = bool(kernels) and "error" not in outcome
            ptx_bytes = len(module.text.encode())
            rows.append(Row(module.stem, arch, ok, len(kernels) or None, ptx_bytes,
                            outcome.get("ir_bytes", 0) / ptx_bytes, stages,
                            fatkit_s if translated else None, one_s if translated else None, ptxas_s,
                            extra_s if translated else None))
            print(f"{module.stem[:60]:60s} {arch:7s} {ok:4d}/{len(kernels) or '?':<4} "
                  f"fatkit {fatkit_s:7.2f}s  -j1 {one_s:7.2f}s  "
                  f"ptxas {ptxas_s if ptxas_s is not None else float('nan'):7.2f}s", file=sys.stderr)
    report(rows, args.markdown, args.jobs, args.extra_target)


STAGES = ("parse", "passes", "lower", "codegen", "validate")


@dataclass
class Row:
    stem: str
    arch: str
    ok: int
    total: int | None
    ptx_bytes: int
    ir_per_ptx: float  # bytes of LLVM IR text lowering produced per byte of PTX
    stages: dict[str, float]  # seconds per pipeline stage, in the --jobs run
    fatkit_s: float | None  # --jobs
    one_job_s: float | None  # -j 1
    ptxas_s: float | None
    extra_s: float | None = None  # the extra target's seconds in a run for both (--jobs)


def report(rows: list[Row], markdown: bool, jobs: int, extra: str) -> None:
    header = ["module", "arch", "ok/total", "PTX KB", "IR/PTX", *(f"{s} s" for s in STAGES),
              f"-j{jobs} s", "-j1 s", "ptxas s", f"-j{jobs} ratio", "-j1 ratio", f"+{extra} s", "+/first"]
    widths = [44, 7, 9, 7, 6, *([8] * len(STAGES)), 7, 7, 7, 9, 9, 10, 7]
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
    else:
        print(" ".join(f"{h:>{w}.{w}s}" if i else f"{h:{w}.{w}s}" for i, (h, w) in enumerate(zip(header, widths))))

    def ratio(fatkit_s: float | None, ptxas_s: float | None) -> str:
        return f"{fatkit_s / ptxas_s:.2f}" if fatkit_s is not None and ptxas_s else "-"

    def seconds(value: float | None) -> str:
        return f"{value:.2f}" if value is not None else "-"

    for row in rows:
        cells = [row.stem, row.arch, f"{row.ok}/{row.total or '?'}", f"{row.ptx_bytes / 1000:.1f}",
                 f"{row.ir_per_ptx:.1f}" if row.ir_per_ptx else "-",
                 *(seconds(row.stages.get(s)) for s in STAGES), seconds(row.fatkit_s), seconds(row.one_job_s),
                 seconds(row.ptxas_s) if row.ptxas_s is not None else "failed",
                 ratio(row.fatkit_s, row.ptxas_s), ratio(row.one_job_s, row.ptxas_s), seconds(row.extra_s),
                 ratio(row.extra_s, row.fatkit_s)]
        if markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            print(" ".join(f"{c:>{w}.{w}s}" if i else f"{c:{w}.{w}s}" for i, (c, w) in enumerate(zip(cells, widths))))
    timed = [r for r in rows if r.fatkit_s is not None and r.ptxas_s]
    if timed:
        print(f"\nmedian fatkit/ptxas over {len(timed)} modules with a code object: "
              f"-j{jobs} {statistics.median(r.fatkit_s / r.ptxas_s for r in timed):.2f}x "
              f"(geometric mean {statistics.geometric_mean(r.fatkit_s / r.ptxas_s for r in timed):.2f}x), "
              f"-j1 {statistics.median(r.one_job_s / r.ptxas_s for r in timed):.2f}x")
        large = [r for r in timed if r.ptx_bytes >= 100_000]
        if large:
            print(f"modules of at least 100 KB ({len(large)}): median -j{jobs} "
                  f"{statistics.median(r.fatkit_s / r.ptxas_s for r in large):.2f}x, "
                  f"-j1 {statistics.median(r.one_job_s / r.ptxas_s for r in large):.2f}x")
        small = [r for r in timed if r.ptx_bytes < 20_000]
        if small:
            print(f"modules under 20 KB ({len(small)}): fatkit -j{jobs} median "
                  f"{statistics.median(r.fatkit_s for r in small):.2f} s, max {max(r.fatkit_s for r in small):.2f} s")
        extra = [r.extra_s / r.fatkit_s for r in timed if r.extra_s is not None]
        if extra:
            print(f"the second target of a run against the first: median {statistics.median(extra):.2f}x")
        ir = [r.ir_per_ptx for r in rows if r.ir_per_ptx]
        if ir:
            print(f"LLVM IR per PTX byte: median {statistics.median(ir):.2f}")


if __name__ == "__main__":
    main()
