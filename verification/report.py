"""Turns the runner's results.json into verification/REPORT.md and verification/results.json.

    python verification/report.py verification/build/results.json [--command "…"]

Per family: cases, passed, failed (with reasons), errors, not translated (with fatkit's reason); the
geometric mean of original / re-lowered kernel time over passing cases (above 1.0: fatkit's is faster).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
HOW = """Each case runs the original PTX and fatkit's re-lowered PTX (both JIT-compiled by the CUDA driver) on
the same fresh random inputs; table cases (one instruction form per kernel, 4096 threads) see every pair of
57 edge patterns first (integer boundaries, ±0, ±1, ±inf, NaNs with payloads, subnormals, extremes, ties,
f16/bf16 values). Outputs are poisoned with 0xA5 before each run and compared bit for bit; only `.approx`
forms have a bound: 1–4 f32 ulp per the PTX ISA's error tables, one unit in the last bit of the upper word
for `rcp.approx.ftz.f64`, and 4 f32 ulp for `float_libm` compiled with `--use_fast_math`. Warp-level cases
also run as `sm_90:wave64`, where two warps form an emulated 64-lane wave (the algorithm CDNA GPUs run),
with 256-, 160- and 96-thread blocks. Where the ISA leaves a result open or the H200 departs from it
(NaN payloads of abs/neg/min/max/cvt, bfe/bfi.64 operands, fns with offset INT_MIN, cvt.rna.tf32 of NaN,
ex2.approx.f16 rounding), fatkit follows the hardware; each such finding is a CPU regression test in
`tests/test_translate_gpu_regressions.py`. On the nvptx target the f32 `.approx` functions are the PTX
instructions themselves, so this run checks everything around them; their AMD forms are checked against the
ISA's error bounds on the CPU (`tests/test_translate_float.py`).

The [5/8] programs: `mma.cu` (every mma/mma.sp/wmma shape and type fatkit lowers, through inline PTX; float
inputs are small integers, so every partial sum is exact whatever order the tensor cores add in, and the
comparison stays bit for bit), `matrix.cu` (ldmatrix/stmatrix/movmatrix in every count and .trans), `asynccopy.cu`
(cp.async pipelines with zero fill and ignore-src, an mbarrier producer/consumer ring, bulk copies, stores and
reductions completing on an mbarrier). `runtime.cu` exercises fatkit's device heap (malloc/free per thread and per
block, reused across the 20 timed launches) and cooperative-groups grid.sync (a cooperative launch of 128 blocks)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    parser.add_argument("--command", default="python verification/runner.py verification/build")
    args = parser.parse_args()
    results = json.loads(args.results.read_text())
    cases = results["cases"]
    by_family: dict[str, list[dict]] = defaultdict(list)
    for case in cases:
        family = case["family"] + (" (wave64)" if case["name"].endswith("@wave64") else "")
        by_family[family].append(case)
    ratios = [c["original_ms"] / c["relowered_ms"] for c in cases
              if c["status"] == "pass" and c.get("relowered_ms") and c.get("original_ms")]
    lines = [
        "# Differential verification on an NVIDIA GPU",
        "",
        f"Original PTX against fatkit's re-lowered PTX (`--target {', '.join(results['manifest']['targets'])}`), run on "
        f"**{results['device']}**. Suite built {results['manifest']['built']} with "
        f"`{results['manifest']['command']}`; run with `{args.command}` (input seed {results['seed']}).",
        "",
        "| family | cases | pass | fail | error | not translated |",
        "|---|---|---|---|---|---|",
    ]
    totals = Counter()
    for family, members in sorted(by_family.items()):
        counts = Counter(c["status"] for c in members)
        totals.update(counts)
        lines.append(f"| {family} | {len(members)} | {counts['pass']} | {counts['fail']} | {counts['error']} | "
                     f"{counts['not-translated']} |")
    lines.append(f"| **all** | {len(cases)} | {totals['pass']} | {totals['fail']} | {totals['error']} | "
                 f"{totals['not-translated']} |")
    lines.append("")
    if ratios:
        lines.append(f"Speed: geometric mean of original / re-lowered kernel time over {len(ratios)} passing cases: "
                     f"**{statistics.geometric_mean(ratios):.3f}** (median of 20 timed launches each, CUDA events).")
        lines.append("")
    tolerant = sorted(f"`{c['name']}` ({c.get('detail')})" for c in cases if c["status"] == "pass" and c.get("detail"))
    lines += ["## How", "", HOW, ""]
    if tolerant:
        lines += ["Cases that passed within their documented .approx bound rather than bit for bit: "
                  + ", ".join(tolerant) + ".", ""]
    failed = [c for c in cases if c["status"] in ("fail", "error")]
    if failed:
        lines += ["## Failures", ""]
        lines += [f"- `{c['name']}` ({c['status']}): {c.get('detail', '')}" for c in failed]
        lines.append("")
    reasons = Counter(_short(c.get("reason") or "") for c in cases if c["status"] == "not-translated")
    if reasons:
        lines += ["## Not translated, by reason", ""]
        lines += [f"- {count} × {reason}" for reason, count in reasons.most_common()]
        lines.append("")
    (HERE / "REPORT.md").write_text("\n".join(lines))
    (HERE / "results.json").write_text(json.dumps(results, indent=1))
    print("\n".join(lines[:12 + len(by_family)]))


def _short(reason: str) -> str:
    """The reason without the kernel name and PTX line: "kernel: line N: what: why" → "what: why"."""
    parts = reason.split(": ", 2)
    return parts[2] if len(parts) == 3 and parts[1].startswith("line ") else reason


if __name__ == "__main__":
    main()
