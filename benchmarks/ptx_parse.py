"""Parse speed of fatkit's PTX front-end, in MB/s, on every PTX module of the public corpus.

Every PTX entry of every corpus file is extracted with fatkit's scanner (identical payloads once), decoded,
and parsed `--repeat` times with `parse_ptx`; the best run counts, timed as CPU time of this process (the
parse is single-threaded, and CPU time is what other jobs on a shared machine disturb least). Reported:
each module's size, instruction count, best time and MB/s; overall MB/s (all bytes / all best times); the
smallest and the largest module; and a linearity check — distinct modules concatenated into one text
(header once) of about 1, 2, 4, 8 … MB, whose MB/s stays flat if parse time grows linearly with size.

    python benchmarks/ptx_parse.py                  # every PTX module of the fetched corpus (index.tsv)
    python benchmarks/ptx_parse.py --big            # also libcublasLt (BIG: 288 PTX entries, ~230 MB)
    python benchmarks/ptx_parse.py PATH...          # .ptx files, directories of .ptx files, or binaries
    python benchmarks/ptx_parse.py --markdown       # tables for BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from fatkit.translate.ptx import parse_ptx  # noqa: E402
from tests.corpus import CORPUS_DIR, corpus_files  # noqa: E402

MB = 1e6
HEADER_LINE = re.compile(r"^[ \t]*\.(?:version|target|address_size)\b[^\n]*\n", re.M)


@dataclass(frozen=True)
class Module:
    name: str
    text: str

    @property
    def size(self) -> int:
        return len(self.text.encode("utf-8"))


@dataclass(frozen=True)
class Timing:
    name: str
    size: int
    instructions: int
    seconds: float

    @property
    def mb_per_s(self) -> float:
        return self.size / MB / self.seconds


def _decode(payload: bytes) -> str:
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        return payload.decode("latin-1")


def collect(paths: list[Path]) -> list[Module]:
    """Every distinct PTX module in `paths`: .ptx files as they are, binaries through fatkit's scanner."""
    modules, seen = [], set()
    for path in paths:
        files = sorted(path.rglob("*.ptx")) if path.is_dir() else [path]
        for file in files:
            if file.suffix == ".ptx":
                found = [(file.stem, file.read_bytes())]
            else:
                from fatkit.extract.scan import scan_path

                found = [
                    (f"{file.name}@{entry.offset:#x}:{entry.arch}", entry.payload)
                    for binary in scan_path(file)
                    for entry in binary.entries
                    if entry.kind == "ptx"
                ]
            for name, payload in found:
                digest = hashlib.sha256(payload).digest()
                if digest not in seen:
                    seen.add(digest)
                    modules.append(Module(name, _decode(payload)))
    return modules


def best_time(text: str, repeat: int) -> tuple[float, int]:
    """Best CPU seconds of `repeat` parses of `text`, and the module's instruction count."""
    best, module = float("inf"), None
    for _ in range(repeat):
        start = time.process_time()
        module = parse_ptx(text)
        best = min(best, time.process_time() - start)
    instructions = sum(1 for f in module.functions for _ in f.instructions())
    return best, instructions


def measure(modules: list[Module], repeat: int) -> list[Timing]:
    timings = []
    for module in modules:
        seconds, instructions = best_time(module.text, repeat)
        timings.append(Timing(module.name, module.size, instructions, seconds))
    return sorted(timings, key=lambda t: t.size)


def linearity(modules: list[Module], repeat: int) -> list[Timing]:
    """Texts of about 1, 2, 4, 8, 16 … MB made by concatenating distinct modules (header directives kept
    once), up to all of them: parse time should grow in proportion to size."""
    ordered = sorted(modules, key=lambda m: m.name)
    timings, text, target, used = [], "", MB, 0
    for module in ordered:
        text += module.text.rstrip("\0") if not text else HEADER_LINE.sub("", module.text.rstrip("\0"))
        used += 1
        if len(text) >= target or used == len(ordered):
            seconds, instructions = best_time(text, repeat)
            timings.append(Timing(f"{used} modules concatenated", len(text.encode("utf-8")), instructions, seconds))
            while target <= len(text):
                target *= 2
    return timings


def _size(n: int) -> str:
    return f"{n / MB:.2f} MB" if n >= MB else f"{n / 1e3:.1f} KB"


def report(timings: list[Timing], linear: list[Timing], markdown: bool) -> str:
    total_bytes = sum(t.size for t in timings)
    total_seconds = sum(t.seconds for t in timings)
    lines = []
    if markdown:
        lines += ["| module | size | instructions | best CPU time | MB/s |", "|---|---:|---:|---:|---:|"]
        row = "| {} | {} | {} | {:.4f} s | {:.1f} |"
    else:
        row = "{:<64} {:>10} {:>12} {:>10.4f}s {:>8.1f} MB/s"
    for t in timings:
        lines.append(row.format(t.name, _size(t.size), t.instructions, t.seconds, t.mb_per_s))
    summary = [
        ("overall", f"{len(timings)} modules, {_size(total_bytes)} in {total_seconds:.3f} s: "
                    f"{total_bytes / MB / total_seconds:.1f} MB/s"),
        ("smallest", f"{timings[0].name} ({_size(timings[0].size)}): {timings[0].mb_per_s:.1f} MB/s"),
        ("largest", f"{timings[-1].name} ({_size(timings[-1].size)}): {timings[-1].mb_per_s:.1f} MB/s"),
    ]
    lines.append("")
    lines += [f"- {k}: {v}" if markdown else f"{k:>9}: {v}" for k, v in summary]
    lines.append("")
    if markdown:
        lines += ["| linearity | size | best CPU time | MB/s |", "|---|---:|---:|---:|"]
        lines += [f"| {t.name} | {_size(t.size)} | {t.seconds:.4f} s | {t.mb_per_s:.1f} |" for t in linear]
    else:
        lines += [f"{t.name:<64} {_size(t.size):>10} {t.seconds:>10.4f}s {t.mb_per_s:>8.1f} MB/s" for t in linear]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help=".ptx files, directories of them, or binaries")
    parser.add_argument("--big", action="store_true", help="also libcublasLt from the corpus directory")
    parser.add_argument("--repeat", type=int, default=3, help="parses per module; the best counts")
    parser.add_argument("--markdown", action="store_true", help="print tables for BENCHMARKS.md")
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON")
    args = parser.parse_args()

    paths = args.paths or corpus_files()
    if args.big:
        paths += sorted(CORPUS_DIR.glob("*/nvidia/cu13/lib/libcublasLt.so.*"))
    modules = collect(paths)
    if not modules:
        print("no PTX found (fetch the corpus with ../shared/corpus/fetch.py, or name .ptx files)", file=sys.stderr)
        return 1
    timings = measure(modules, args.repeat)
    linear = linearity(modules, args.repeat)
    if args.json:
        print(json.dumps({
            "python": platform.python_version(),
            "modules": [t.__dict__ | {"mb_per_s": t.mb_per_s} for t in timings],
            "linearity": [t.__dict__ | {"mb_per_s": t.mb_per_s} for t in linear],
        }, indent=2))
    else:
        print(report(timings, linear, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
