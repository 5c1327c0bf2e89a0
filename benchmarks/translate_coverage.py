"""How much of the public corpus (and the committed nvcc samples) the translator lowers, and what stops the rest.

    python benchmarks/translate_coverage.py [--target gfx942] [--top 40] [PATH...]

Runs parse → passes → lower (no codegen) on every PTX module found in PATHs (default: every fetched
corpus binary plus tests/samples/ptx; the -rdc units of a binary linked as translate links them) and prints
kernels ok / unsupported, how many of those stop at a form the coverage table (fatkit/translate/coverage.py)
refuses for a missing hardware or ABI, how many elsewhere (a kernel's own declarations, operands), then the
unsupported kernels grouped by instruction and reason, most frequent first.
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
from fatkit.translate.link import link_units  # noqa: E402
from fatkit.translate.coverage import FORMS, LOWERED  # noqa: E402
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
    by_status: Counter[str] = Counter()  # unsupported kernels by the status of the coverage row refusing them
    started = time.perf_counter()
    for module in ptx_modules(scan_paths(paths), on_error=lambda message: print("!", message, file=sys.stderr),
                              link_rdc=link_units):
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
                by_status[_status(report.reason or "")] += 1
    unsupported = sum(reasons.values()) - failed_modules
    print(f"{modules} modules ({failed_modules} failed whole), {ok} kernels ok, {unsupported} unsupported "
          f"for {args.target} in {time.perf_counter() - started:.1f} s")
    print("unsupported by the coverage table's status: "
          + ", ".join(f"{status} {by_status[status]}" for status in ("refused", "elsewhere")))
    for reason, count in reasons.most_common(args.top):
        print(f"{count:6d}  {reason}")


def _status(reason: str) -> str:
    """The status of the coverage row whose reason ends the kernel's, or "elsewhere" (no row refused it)."""
    return next((form.status for form in FORMS if form.status != LOWERED and reason.endswith(form.reason)),
                "elsewhere")

if __name__ == "__main__":
    main()
