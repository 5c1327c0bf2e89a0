"""fatkit's PE reader (fatkit.formats.pe over an mmap) against lief.PE.parse, per Windows corpus DLL.

Each reading runs in a fresh interpreter that imports its library first, then reads the headers, the section
table, the imports and the base relocations (and, for fatkit, resolves the registration wrappers); it prints
the wall time of that reading and how much its peak RSS (ru_maxrss) grew over the imported interpreter's. lief
is the anchor: the ratio is fatkit / lief, measured in the same run, the two interleaved.

    python benchmarks/pe_reader.py --repeat 5 --markdown
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from tests.corpus import corpus_files  # noqa: E402

_COMMON = """
import json, resource, sys, time
path = sys.argv[1]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
"""
_END = """
wall = time.perf_counter() - start
print(json.dumps({"wall": wall, "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before,
                  "sections": sections, "imports": imports, "relocations": relocations}))
"""
READERS = {
    "fatkit": "import mmap\nfrom fatkit.formats.pe import PeView\nfrom fatkit.formats.wrappers import read_wrappers\n"
              + _COMMON + """
with open(path, "rb") as f:
    view = PeView(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
    sections, imports, relocations = len(view.sections), len(view.imports), len(view.relocations)
    read_wrappers(view)
""" + _END,
    "lief": "import lief\n" + _COMMON + """
image = lief.PE.parse(path)
sections, imports = len(image.sections), len(image.imports) + len(image.delay_imports)
relocations = sum(1 for block in image.relocations for entry in block.entries if entry.type.value != 0)
""" + _END,
}


def measure(reader: str, path: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", READERS[reader], str(path)], capture_output=True, text=True,
                          check=True, cwd=REPO_ROOT)
    return json.loads(proc.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    files = corpus_files("index-windows.tsv")
    if not files:
        print("no Windows corpus: python ../shared/corpus/fetch.py --tsv ../shared/corpus/windows.tsv")
        return 1
    rows = []
    for path in files:
        path.read_bytes()  # warm page cache
        runs: dict[str, list[dict]] = {"fatkit": [], "lief": []}
        for _ in range(args.repeat):
            for reader in runs:
                runs[reader].append(measure(reader, path))
        ours, theirs = runs["fatkit"], runs["lief"]
        assert [(r["sections"], r["imports"], r["relocations"]) for r in ours][0] == \
               [(r["sections"], r["imports"], r["relocations"]) for r in theirs][0], path
        wall = [statistics.median(r["wall"] for r in rs) for rs in (ours, theirs)]
        rss = [max(r["rss_kib"] for r in rs) for rs in (ours, theirs)]
        rows.append((path.name, path.stat().st_size, *wall, *rss))
    header = ("file", "size", "fatkit wall", "lief wall", "wall ratio", "fatkit +RSS", "lief +RSS")
    lines = []
    for name, size, ours_wall, lief_wall, ours_rss, lief_rss in rows:
        lines.append((name, f"{size / 1e6:.1f} MB", f"{ours_wall * 1e3:.2f} ms", f"{lief_wall * 1e3:.2f} ms",
                      f"{ours_wall / lief_wall:.3f}×", f"{ours_rss / 1024:.1f} MiB", f"{lief_rss / 1024:.1f} MiB"))
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|---|" + "---:|" * (len(header) - 1))
        for line in lines:
            print("| " + " | ".join(line) + " |")
    else:
        widths = [max(len(str(x)) for x in col) for col in zip(header, *lines)]
        for line in (header, *lines):
            print("  ".join(str(x).rjust(w) for x, w in zip(line, widths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
