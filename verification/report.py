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
