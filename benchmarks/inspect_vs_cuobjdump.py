"""Wall time and peak RSS of `fatkit inspect --json` against `cuobjdump -lelf -lptx -all`, per corpus file.

Both tools run in the same run on the same machine, interleaved, each `--repeat` times; the median wall
time and the largest peak RSS (the child's own ru_maxrss from wait4) are reported, with ratios.
cuobjdump 13.x is the anchor; where it fails on a file, cuobjdump 12.8 is used instead. Files holding
only AMD code have no cuobjdump anchor and are reported for fatkit alone.

    python benchmarks/inspect_vs_cuobjdump.py                    # every fetched corpus file, BIG included
    python benchmarks/inspect_vs_cuobjdump.py --files cublasLt --repeat 5
    python benchmarks/inspect_vs_cuobjdump.py --markdown         # a table for BENCHMARKS.md
    python benchmarks/inspect_vs_cuobjdump.py --max-size 1M --repeat 9 --bytecode --tree /tmp/old-checkout
                                                                 # small files; another checkout beside this one

`--tree DIR` measures DIR's fatkit as a second column in the same run (before/after a change); `--bytecode`
compiles each measured tree's modules first (`compileall`), as a pip install does: on a machine that sets
PYTHONDONTWRITEBYTECODE an editable checkout is otherwise compiled from source on every run.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from tests.corpus import corpus_files  # noqa: E402
from tests.oracles import Run, cuobjdump12, cuobjdump13  # noqa: E402

FETCH_SCRIPT = REPO_ROOT.parent / "shared" / "corpus" / "fetch.py"
NVIDIA_KINDS = {"ptx", "elf", "nvvm"}
READ_CHUNK = 16 << 20


@dataclass(frozen=True)
class Measured:
    """One command measured `repeat` times: median wall seconds, largest peak RSS in KiB, last exit status."""

    wall_s: float
    rss_kib: int
    returncode: int
    failure: str | None
    fastest_s: float | None = None  # the quickest run: what a busy machine's median hides
    cpu_s: float | None = None  # median user + system seconds


@dataclass(frozen=True)
class Row:
    path: Path
    size: int
    fatkit: Measured
    cuobjdump: Measured | None
    cuobjdump_label: str  # which cuobjdump was measured, or why none was
    cuobjdump_exits: str  # exit status of every cuobjdump tried, e.g. "13.5: 255 → 12.8: 0"
    other: Measured | None = None  # the --tree checkout's fatkit


# Linux keeps the parent's peak RSS in a child's ru_maxrss across exec (the exec'ing process inherits the
# forking process's high-water mark), so measuring from this process would report at least its own ~50 MiB.
# A bare interpreter (-I -S: no site, ~8 MiB) spawns each command, waits for it with wait4 and reports the
# command's wall time and ru_maxrss; that interpreter's own size is the floor of every RSS figure.
LAUNCHER = """
import os, sys, time
result, argv = sys.argv[1], sys.argv[2:]
start = time.perf_counter()
pid = os.posix_spawn(argv[0], argv, os.environ)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - start
with open(result, "w") as f:
    f.write(f"{wall!r} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)} {usage.ru_utime + usage.ru_stime!r}")
"""


CPU_SECONDS: list[float] = []  # of every _spawn, in order: user + system time of the command alone


def _spawn(argv: list[str], *, keep_output: bool) -> tuple[float, int, Run]:
    """Run argv once through the launcher. Returns its wall seconds, its own peak RSS (KiB) and what it
    printed (only with keep_output; otherwise stdout goes to /dev/null, as `> /dev/null`); its CPU seconds
    are appended to CPU_SECONDS (on a busy machine they move far less than the wall time)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r", suffix=".result") as result, open(os.devnull, "wb") as devnull:
        stdout = out if keep_output else devnull
        launcher = [sys.executable, "-I", "-S", "-c", LAUNCHER, result.name, *argv]
        pid = os.posix_spawn(launcher[0], launcher, os.environ,
                             file_actions=[(os.POSIX_SPAWN_DUP2, stdout.fileno(), 1),
                                           (os.POSIX_SPAWN_DUP2, err.fileno(), 2)])
        _, status, _ = os.wait4(pid, 0)
        if status != 0:
            err.seek(0)
            raise RuntimeError(f"the launcher failed on {argv}: {err.read().decode(errors='replace')}")
        wall, rss, returncode, cpu = result.read().split()
        CPU_SECONDS.append(float(cpu))
        out.seek(0)
        err.seek(0)
        run = Run(int(returncode), out.read().decode(errors="replace"), err.read().decode(errors="replace"))
    return float(wall), int(rss), run


def rss_floor() -> int:
    """Peak RSS (KiB) the launcher reports for /bin/true: no figure can be below it."""
    return _spawn(["/bin/true"], keep_output=False)[1]


OTHER_TREE: Path | None = None  # --tree: another checkout measured beside this one


def _fatkit_argv(path: Path, tree: Path = REPO_ROOT) -> list[str]:
    """`fatkit inspect --json PATH` run from `tree`'s sources (whichever fatkit is installed)."""
    start = (f"import sys; sys.path.insert(0, {str(tree)!r}); sys.argv[0] = 'fatkit'; "
             "from fatkit.cli import main; main()")
    return [sys.executable, "-c", start, "inspect", "--json", str(path)]


def _cuobjdump_argv(tool: Path, path: Path) -> list[str]:
    return [str(tool), "-lelf", "-lptx", "-all", str(path)]


def _release(tool: Path) -> str:
    done = subprocess.run([str(tool), "--version"], capture_output=True, text=True, timeout=60)
    found = re.search(r"release (\d+\.\d+)", done.stdout)
    return found.group(1) if found else "?"


def _warm_page_cache(path: Path) -> None:
    """Read the file once so neither tool pays for the disk on its first run."""
    with path.open("rb") as f:
        while f.read(READ_CHUNK):
            pass


def _fatkit_kinds(path: Path) -> tuple[set[str], Run]:
    """Entry kinds fatkit reports for the file (an untimed run whose JSON is read)."""
    _, _, run = _spawn(_fatkit_argv(path), keep_output=True)
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError:
        return set(), run
    kinds = {entry["kind"]
             for binary in report.get("binaries", ())
             for container in binary.get("containers", ())
             for entry in container.get("entries", ())}
    return kinds, run


def _measure_file(path: Path, repeat: int, tools: list[tuple[str, Path]]) -> Row:
    _warm_page_cache(path)
    kinds, probe = _fatkit_kinds(path)
    fatkit_walls, fatkit_rss, fatkit_status = [], [], probe.returncode
    fatkit_failure = None if probe.returncode == 0 else f"exit status {probe.returncode}: {probe.stderr.strip()[-300:]}"
    # Only the probe's JSON tells which files hold NVIDIA code; AMD-only files have no cuobjdump anchor.
    amd_only = "hsaco" in kinds and not kinds & NVIDIA_KINDS
    candidates = [] if amd_only else list(tools)
    exits: list[str] = []
    label = "— (AMD code only)" if amd_only else "— (no cuobjdump ran)"
    cuobjdump_walls: list[float] = []
    cuobjdump_rss: list[int] = []
    cuobjdump_status = 0
    cuobjdump_failure = None

    fatkit_cpu: list[float] = []
    other_cpu: list[float] = []
    other_walls: list[float] = []
    other_rss: list[int] = []
    other_status = 0
    for attempt in range(repeat):
        wall, rss, fatkit_run = _spawn(_fatkit_argv(path), keep_output=False)
        fatkit_cpu.append(CPU_SECONDS[-1])
        fatkit_status = fatkit_run.returncode
        fatkit_walls.append(wall)
        fatkit_rss.append(rss)
        if OTHER_TREE is not None:
            wall, rss, other_run = _spawn(_fatkit_argv(path, OTHER_TREE), keep_output=False)
            other_cpu.append(CPU_SECONDS[-1])
            other_walls.append(wall)
            other_rss.append(rss)
            other_status = other_run.returncode
        while candidates and len(cuobjdump_walls) <= attempt:
            release, tool = candidates[0]
            wall, rss, run = _spawn(_cuobjdump_argv(tool, path), keep_output=True)
            if not cuobjdump_walls:  # the first run of a tool decides whether it reads the file
                exits.append(f"{release}: {run.returncode}")
                if run.failure is not None and len(candidates) > 1:
                    candidates.pop(0)
                    continue
                label, cuobjdump_failure = release, run.failure
                candidates = candidates[:1]
            cuobjdump_walls.append(wall)
            cuobjdump_rss.append(rss)
            cuobjdump_status = run.returncode

    fatkit = Measured(statistics.median(fatkit_walls), max(fatkit_rss), fatkit_status, fatkit_failure,
                      min(fatkit_walls), statistics.median(fatkit_cpu))
    cuobjdump = (Measured(statistics.median(cuobjdump_walls), max(cuobjdump_rss), cuobjdump_status,
                          cuobjdump_failure) if cuobjdump_walls else None)
    if cuobjdump is not None and cuobjdump.failure is not None:
        label += " (failed)"
    other = (Measured(statistics.median(other_walls), max(other_rss), other_status,
                      None if other_status == 0 else f"exit status {other_status}", min(other_walls),
                      statistics.median(other_cpu))
             if other_walls else None)
    return Row(path, path.stat().st_size, fatkit, cuobjdump, label, " → ".join(exits) or "—", other)


def _corpus_paths() -> list[Path]:
    """Every corpus file present: fetch.py's full list (BIG rows included), else the index."""
    if FETCH_SCRIPT.exists():
        done = subprocess.run([sys.executable, str(FETCH_SCRIPT), "--big", "--list"],
                              capture_output=True, text=True, timeout=120)
        listed = [Path(line) for line in done.stdout.splitlines() if line.startswith("/")]
        if done.returncode == 0 and listed:
            return [p for p in listed if p.is_file()]
    return [p for p in corpus_files() if p.is_file()]


def _short_name(path: Path) -> str:
    """package-version/…/member → package/member, short enough for a table."""
    parts = path.parts
    for i, part in enumerate(parts):
        if part.endswith("fatkit-corpus") and i + 1 < len(parts):
            package = parts[i + 1].rsplit("-", 1)[0]
            return f"{package}/{parts[-1]}"
    return path.name


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError


def _wall(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds:.3f} s"


def _fastest(measured: Measured) -> str:
    """`(fastest 0.120 s, CPU 0.110 s)`: the quickest run and the median CPU time beside a median wall."""
    parts = [f"{label} {value:.3f} s" for label, value in (("fastest", measured.fastest_s), ("CPU", measured.cpu_s))
             if value is not None]
    return f" ({', '.join(parts)})" if parts else ""


def _rss(kib: int | None) -> str:
    return "—" if kib is None else f"{kib / 1024:.0f} MiB"


def _ratio(a: float, b: float | None) -> str:
    return "—" if not b else f"{a / b:.3f}×"


HEADERS = ["file", "size", "fatkit wall", "cuobjdump wall", "wall ratio", "fatkit RSS", "cuobjdump RSS",
           "RSS ratio", "cuobjdump", "cuobjdump exit"]


def _table_rows(rows: list[Row]) -> list[list[str]]:
    cells = []
    for row in rows:
        c = row.cuobjdump
        fatkit_note = "" if row.fatkit.failure is None else f" (fatkit exit {row.fatkit.returncode})"
        cells.append([
            _short_name(row.path) + fatkit_note, _size(row.size),
            _wall(row.fatkit.wall_s) + _fastest(row.fatkit), _wall(c and c.wall_s),
            _ratio(row.fatkit.wall_s, c and c.wall_s),
            _rss(row.fatkit.rss_kib), _rss(c and c.rss_kib), _ratio(row.fatkit.rss_kib, c and c.rss_kib),
            row.cuobjdump_label, row.cuobjdump_exits,
            *([_wall(row.other.wall_s) + _fastest(row.other), _ratio(row.fatkit.wall_s, row.other.wall_s)]
              if row.other else []),
        ])
    anchored = [r for r in rows if r.fatkit.failure is None and r.cuobjdump is not None
                and r.cuobjdump.failure is None]
    if anchored:
        fatkit_wall = sum(r.fatkit.wall_s for r in anchored)
        cuobjdump_wall = sum(r.cuobjdump.wall_s for r in anchored)
        fatkit_rss = max(r.fatkit.rss_kib for r in anchored)
        cuobjdump_rss = max(r.cuobjdump.rss_kib for r in anchored)
        cells.append([
            f"total ({len(anchored)} files with cuobjdump; RSS = max)", _size(sum(r.size for r in anchored)),
            _wall(fatkit_wall), _wall(cuobjdump_wall), _ratio(fatkit_wall, cuobjdump_wall),
            _rss(fatkit_rss), _rss(cuobjdump_rss), _ratio(fatkit_rss, cuobjdump_rss), "", "",
            *([""] * (len(HEADERS) - 10)),
        ])
    cells.append([
        f"total fatkit ({len(rows)} files)", _size(sum(r.size for r in rows)),
        _wall(sum(r.fatkit.wall_s for r in rows)), "", "", _rss(max(r.fatkit.rss_kib for r in rows)),
        "", "", "", "", *([""] * (len(HEADERS) - 10)),
    ])
    return cells


def _bytes(text: str) -> int:
    units = {"": 1, "K": 1000, "M": 1000**2, "G": 1000**3}
    number, unit = text.rstrip("KMGkmg"), text[len(text.rstrip("KMGkmg")):].upper()
    return int(float(number) * units[unit])


def _print_markdown(cells: list[list[str]]) -> None:
    right = {1, 2, 3, 4, 5, 6, 7}
    print("| " + " | ".join(HEADERS) + " |")
    print("|" + "|".join("---:" if i in right else "---" for i in range(len(HEADERS))) + "|")
    for row in cells:
        print("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")


def _print_plain(cells: list[list[str]]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(r[i]) for r in [HEADERS, *cells]) for i in range(len(HEADERS))]
        for row in [HEADERS, *cells]:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths)))
        return
    table = Table(title="fatkit inspect --json vs cuobjdump -lelf -lptx -all")
    for i, header in enumerate(HEADERS):
        table.add_column(header, justify="right" if 1 <= i <= 7 else "left")
    for row in cells:
        table.add_row(*row)
    Console(width=max(200, os.get_terminal_size().columns if sys.stdout.isatty() else 200)).print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path, metavar="FILE",
                        help="files to measure (default: every fetched corpus file)")
    parser.add_argument("--cuobjdump", type=Path, metavar="PATH",
                        help="the cuobjdump to measure against (default: 13.x and 12.8 from the test extras)")
    parser.add_argument("--files", metavar="PATTERN",
                        help="only corpus files whose path contains PATTERN (or matches it as a glob)")
    parser.add_argument("--repeat", type=int, default=3, metavar="N", help="runs per command (median wall)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--max-size", type=_bytes, metavar="SIZE", help="only files up to SIZE (e.g. 1M)")
    parser.add_argument("--tree", type=Path, metavar="DIR",
                        help="also measure the fatkit of another checkout (columns '--tree wall', 'this / --tree')")
    parser.add_argument("--bytecode", action="store_true",
                        help="compile the measured checkouts' modules first (python -m compileall), as an install does")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    global OTHER_TREE
    if args.tree is not None:
        OTHER_TREE = args.tree.resolve()
        HEADERS.extend(["--tree wall", "this / --tree"])
    if args.bytecode:
        for tree in (REPO_ROOT, OTHER_TREE):
            if tree is not None:
                subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "fatkit")], check=True,
                               stdout=subprocess.DEVNULL)

    paths = args.paths or _corpus_paths()
    if args.files:
        paths = [p for p in paths if args.files in str(p) or fnmatch.fnmatch(str(p), args.files)]
    if args.max_size is not None:
        paths = [p for p in paths if p.stat().st_size <= args.max_size]
    if not paths:
        print("no corpus files (run ../shared/corpus/fetch.py --big)", file=sys.stderr)
        return 1
    candidates = [args.cuobjdump] if args.cuobjdump else [cuobjdump13(), cuobjdump12()]
    tools = [(_release(tool), tool) for tool in candidates if tool is not None]
    if not tools:
        print("note: no cuobjdump found; fatkit is measured alone", file=sys.stderr)

    rows = []
    for path in paths:
        print(f"measuring {_short_name(path)} …", file=sys.stderr, flush=True)
        rows.append(_measure_file(path, args.repeat, tools))
        if rows[-1].fatkit.failure:
            print(f"  fatkit failed: {rows[-1].fatkit.failure}", file=sys.stderr)
        if rows[-1].cuobjdump and rows[-1].cuobjdump.failure:
            print(f"  cuobjdump failed: {rows[-1].cuobjdump.failure}", file=sys.stderr)

    cells = _table_rows(rows)
    (_print_markdown if args.markdown else _print_plain)(cells)
    interpreter = [_spawn([sys.executable, "-c", "pass"], keep_output=False)[0] for _ in range(args.repeat)]
    interpreter_cpu = CPU_SECONDS[-args.repeat:]
    print(f"\nThe interpreter alone (`python -c pass`, the same launcher, {args.repeat} runs): median "
          f"{_wall(statistics.median(interpreter))}, fastest {_wall(min(interpreter))}, CPU "
          f"{_wall(statistics.median(interpreter_cpu))}.")
    if OTHER_TREE is not None and any(r.other and r.other.failure for r in rows):
        print(f"note: the --tree fatkit failed on some files ({OTHER_TREE})", file=sys.stderr)
    print(f"\nWall: median of {args.repeat} runs; RSS: largest ru_maxrss of those runs. RSS floor of the "
          f"launcher: {_rss(rss_floor())} (a figure at the floor means at most that much).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
