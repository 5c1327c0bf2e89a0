"""Turns the runner's results.json into verification/REPORT.md and verification/results.json.

    python verification/report.py verification/build/results.json [--exact DIR/mma_exact.npz] [--command "…"]

Per family: cases, passed, failed (with reasons), errors, not translated (with fatkit's reason), and the cases by
input kind (random bit patterns or values, exponent-spread values, edge lists, small integers); a case whose only
inputs are small integers (every float result exact) is listed but not counted as a pass. `--exact` judges the
`mma:exact` cases: fatkit's outputs the run kept, against verification/mma_reference.py's host model. Also the
geometric mean of original / re-lowered kernel time over passing cases (above 1.0: fatkit's is faster).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
KINDS = ("random", "spread", "edge", "integer")


def judge_exact(cases: list[dict], path: Path) -> None:
    """Sets each `mma:exact` case's status: fatkit's D elements against the reference model of `exact`."""
    from verification import mma_reference

    with np.load(path) as data:
        for case in cases:
            if case["status"] != "pending-reference":
                continue
            form = case["form"]
            record, out = data[f"{case['name']}:in"], data[f"{case['name']}:out"]
            a, b, c, _ = mma_reference.mma_terms(form, record)
            expected = mma_reference.f64_sum_model(a, b, c, form["types"])
            got = mma_reference.d_elements(form, out)
            bad = np.nonzero(expected != got)[0]
            case["status"] = "pass" if len(bad) == 0 else "fail"
            case["detail"] = "" if len(bad) == 0 else f"{len(bad)} of {len(got)} D elements differ from the reference: " + \
                "; ".join(f"[{i}] reference {int(expected[i]):#x} fatkit {int(got[i]):#x}" for i in bad[:4])
            case["compared_with"] = "host reference (mma_reference.f64_sum_model)"


def counts_toward_pass(case: dict) -> bool:
    """A case counts unless its only inputs are small integers (every float result exact whatever the model)."""
    return set(case.get("inputs") or ["random"]) != {"integer"}
HOW = """Each case runs the original PTX and fatkit's re-lowered PTX (both JIT-compiled by the CUDA driver) on
the same fresh inputs, outputs poisoned with 0xA5 before each run and compared bit for bit; only `.approx`
forms have a bound: 1–4 f32 ulp per the PTX ISA's error tables, one unit in the last bit of the upper word
for `rcp.approx.ftz.f64`, 4 f32 ulp for `float_libm` compiled with `--use_fast_math`, and 2 ulp for
`div.full{.ftz}.f32`, which the ISA makes approximate (an H200 differs from the correctly rounded quotient
fatkit gives in about 22 % of random inputs; both are conformant).

Inputs. Table cases (one instruction form per kernel, 16384 threads) see every pair of 57 edge patterns
(integer boundaries, ±0, ±1, ±inf, NaNs with payloads, subnormals, extremes, ties, f16/bf16 values), then a
quarter of exponent-spread values (f64 patterns, f32 patterns in the low word, f16/bf16 pairs with every
exponent field, ties and near-overflow values), then random bit patterns. Program cases with float inputs run
twice: with their random values and again with exponent-spread bit patterns (`.spread`), except those built
with `--use_fast_math`: the .approx functions nvcc puts there have error bounds only on restricted domains (an
absolute error within ±π for sin/cos…), so exponent-spread arguments have no result the ISA defines, and each
.approx form meets spread inputs in its own table case, judged by its bound. The `mma` cases
(verification/probe_numerics.py) load every register straight from random inputs in seven distributions
(random normals, raw bit patterns, every exponent with subnormals/inf/NaN, subnormals, the largest binades,
mostly zeros, cancelling ±1): `mma:sm90` cases compare fatkit's `--mma-numerics sm90` translation with the
H200 bit for bit (also as `sm_90:wave64`), `mma:exact` cases compare fatkit's `exact` translation with the host
reference of verification/mma_reference.py (docs/numerics.md). `program:mma` (mma.cu) keeps its small-integer
float inputs for its nvcc-compiled variants: those cases are listed as exact-only, not counted.

Warp-level cases also run as `sm_90:wave64`, where two warps form an emulated 64-lane wave (the algorithm
CDNA GPUs run), with 256-, 160- and 96-thread blocks. Where the ISA leaves a result open or the H200 departs
from it, fatkit follows the hardware; each such finding is a CPU regression test
(`tests/test_translate_gpu_regressions.py`, `tests/test_translate_h200_cvt.py`, `tests/test_translate_h200_mma.py`).
On the nvptx target the f32 `.approx` functions are the PTX instructions themselves, so this run checks
everything around them; their AMD forms are checked against the ISA's error bounds on the CPU
(`tests/test_translate_float.py`).

f64 results compare as NaNs where both are NaN: a NaN's sign and payload are open (which input NaN
propagates, or the canonical one), and an H200's DMMA and fatkit's fma chain, or a reduction summing in another
order, pick differently; such cases are listed below as passing "NaN bits". The video forms that failed two
runs ago (a `.h1` merge destination; `.min`/`.max` with c on .u32, where fatkit had followed the ISA text) follow
the hardware since (lower/video.py) and pass. `mma.m8n8k4` .f16 with an f16 D differed from the H200 in one f16 of 4,096 words in three earlier runs: the model first summed an f16 D as one fma chain from c, then added ptxas's two FMUL+FFMA pairs to c in the wrong order; ptxas's code adds the k0·k1 pair first (docs/numerics.md), and following it the form agrees in this run. The 84 cases of four mma forms with .f16 and .f32 mixed between C and D
in m16n8k8/k16 (which the ISA forbids and ptxas refuses) were dropped from the suite after this run.

Module-level forms (issue 17): `program:memory`'s `address_tables` reads `__device__` and `__constant__`
tables of addresses of `__device__` arrays, which nvcc initialises as `generic(var)+offset`, and
`program:address_init` (hand-written PTX, verification/ptx/) reads through `.global` tables holding both
`generic(var)+offset` and own-space `var+offset` addresses; `program:shared_unsized`
is hand-written PTX (verification/ptx/) with NCCL's unsized non-`.extern` `.shared` array beside an `.extern`
one, at two dynamic sizes: ptxas 13.0 refuses the non-`.extern` form ("incomplete type"), so the original the
H200 runs is the same text with `.extern` added (the meaning fatkit gives it: the launch's dynamic shared
memory), and fatkit translates the text as written; `program:rdc` is two units compiled by `nvcc -rdc=true`,
the kernel's calling functions and reading variables of the other: fatkit links their PTX
(fatkit/translate/link.py) and re-lowers it as one module, and the original is their relocatable sm_90 cubins
(`ptxas -c`) linked by nvlink, loaded by the driver as they are.

The run also records, for the AMD replay (verification/replay.py), every table case on its first 256 threads
and every native `mma:sm90` case on 4 warps: inputs and the original PTX's outputs, in verification/replay/."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    parser.add_argument("--command", default="python verification/runner.py verification/build")
    parser.add_argument("--exact", type=Path, default=None, help="the run's mma_exact.npz")
    args = parser.parse_args()
    results = json.loads(args.results.read_text())
    cases = results["cases"]
    if args.exact:
        judge_exact(cases, args.exact)
    for case in cases:
        if case["status"] == "pending-reference":
            case.update(status="error", detail="not judged: the run recorded no mma_exact.npz (--replay-out)")
    by_family: dict[str, list[dict]] = defaultdict(list)
    for case in cases:
        family = case["family"] + (" (wave64)" if "@wave64" in case["name"] else "")
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
        "Inputs: *random* bit patterns or random values, *spread* exponent-spread values (every binade, subnormals, ±0,",
        "±inf, NaNs, near overflow, rounding ties), *edge* lists (and mma's mostly-zero / cancelling sums), *integer*",
        "small integers. A case run only on small integers (mma.cu's float forms: every partial sum exact) is not",
        "counted as a pass: `pass` counts the others, `exact-only` lists those.",
        "",
        "| family | cases | random | spread | edge | integer | pass | exact-only | fail | error | not translated |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    totals = Counter()
    kind_totals = Counter()
    for family, members in sorted(by_family.items()):
        counts = Counter(c["status"] for c in members if counts_toward_pass(c) or c["status"] != "pass")
        exact_only = sum(c["status"] == "pass" and not counts_toward_pass(c) for c in members)
        kinds = Counter(kind for c in members for kind in (c.get("inputs") or ["random"]))
        totals.update(counts)
        totals["exact-only"] += exact_only
        kind_totals.update(kinds)
        lines.append(f"| {family} | {len(members)} | " + " | ".join(str(kinds[k]) for k in KINDS)
                     + f" | {counts['pass']} | {exact_only} | {counts['fail']} | {counts['error']} | "
                     f"{counts['not-translated']} |")
    lines.append(f"| **all** | {len(cases)} | " + " | ".join(str(kind_totals[k]) for k in KINDS)
                 + f" | {totals['pass']} | {totals['exact-only']} | {totals['fail']} | {totals['error']} | "
                 f"{totals['not-translated']} |")
    lines.append("")
    if ratios:
        lines.append(f"Speed: geometric mean of original / re-lowered kernel time over {len(ratios)} passing cases: "
                     f"**{statistics.geometric_mean(ratios):.3f}** (median of the runner's `--repeat` timed launches each, CUDA events).")
        lines.append("")
    tolerant = sorted(f"`{c['name']}` ({c.get('detail')})" for c in cases if c["status"] == "pass" and c.get("detail"))
    lines += ["## How", "", HOW, ""]
    if tolerant:
        lines += ["Cases that passed rather than bit for bit, within their documented .approx bound or with f64 NaN "
                  "results of another sign or payload (which the ISA leaves open): "
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
    lines += amd_replay_section()
    (HERE / "REPORT.md").write_text("\n".join(lines))
    (HERE / "results.json").write_text(json.dumps(results, indent=1))
    print("\n".join(lines[:12 + len(by_family)]))


def amd_replay_section() -> list[str]:
    """REPORT.md's "AMD replay" section from verification/replay_results.json (written by
    `python verification/replay.py --results verification/replay_results.json`); nothing when it is absent."""
    path = HERE / "replay_results.json"
    if not path.exists():
        return []
    from verification.replay import summary_table

    replayed = json.loads(path.read_text())
    results = replayed["results"]
    lines = ["## AMD replay", "",
             "The recorded subset (verification/replay/: every table case on its first 256 threads, every `mma:sm90` case",
             "on 4 warps, with the H200's inputs and outputs) translated for each AMD target and run on the CPU by",
             "`fatkit.emulate`, compared with the H200 bit for bit; the PTX ISA leaves NaN signs and payloads of",
             "arithmetic open (an H200 gives the canonical NaN), and `.approx` results are judged against the ISA's error",
             f"bounds (verification/replay.py). Run with `{replayed['command']}` ({replayed['seconds']} s). Passed / run:", "",
             summary_table(results), ""]
    loose = Counter((r["target"], r["family"]) for r in results if r["status"] == "pass" and r["detail"])
    if loose:
        lines += ["Passes that are not bit for bit (NaN bits, or within an .approx bound), by target and family: "
                  + ", ".join(f"{target} {family}: {n}" for (target, family), n in sorted(loose.items())) + ".", ""]
    failed = [r for r in results if r["status"] != "pass"]
    if failed:
        lines += ["Known departures and failures:", ""]
        lines += [f"- `{r['name']}` on {r['target']} ({r['status']}): {r['detail']}" for r in failed]
        lines.append("")
    return lines


def _short(reason: str) -> str:
    """The reason without the kernel name and PTX line: "kernel: line N: what: why" → "what: why"."""
    parts = reason.split(": ", 2)
    return parts[2] if len(parts) == 3 and parts[1].startswith("line ") else reason


if __name__ == "__main__":
    main()
