"""How much of the public corpus (and the committed nvcc samples) the translator lowers, and what stops the rest.

    python benchmarks/translate_coverage.py [--target gfx942] [--top 40] [PATH...]

Runs parse → passes → lower (no codegen) on every PTX module found in PATHs (default: every fetched
corpus binary plus tests/samples/ptx) and prints kernels ok / unsupported, then the unsupported kernels
grouped by instruction and reason, most frequent first.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fatkit.cli.render import reason_without_place  # noqa: E402
from fatkit.errors import FatkitError  # noqa: E402
from fatkit.extract.scan import scan_paths  # noqa: E402
from fatkit.extract.select import ptx_modules  # noqa: E402
from fatkit.translate.pipeline import Options, run  # noqa: E402
from tests.corpus import corpus_files  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--target", default="gfx942")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    paths = args.paths or [*corpus_files(), *sorted((ROOT / "tests" / "samples" / "ptx").glob("*.ptx"))]
    options = Options(target=args.target)
    modules = ok = failed_modules = 0
    reasons: Counter[str] = Counter()
    started = time.perf_counter()
    for module in ptx_modules(scan_paths(paths), on_error=lambda message: print("!", message, file=sys.stderr)):
        modules += 1
        try:
            lowered = run(module.text, options, until="lower")
        except FatkitError as exc:
            failed_modules += 1
            reasons[f"module: {exc}"[:160]] += 1
            continue
        for report in lowered.reports:
            if report.status == "ok":
                ok += 1
            else:
                reasons[reason_without_place(report.reason or "")[:160]] += 1
    unsupported = sum(reasons.values()) - failed_modules
    print(f"{modules} modules ({failed_modules} failed whole), {ok} kernels ok, {unsupported} unsupported "
          f"for {args.target} in {time.perf_counter() - started:.1f} s")
    for reason, count in reasons.most_common(args.top):
        print(f"{count:6d}  {reason}")


if __name__ == "__main__":
    main()
