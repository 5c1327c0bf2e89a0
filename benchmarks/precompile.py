"""`fatkit precompile` on the public corpus: cold run, warm re-run, parallel efficiency, lookup latency.

    python benchmarks/precompile.py [--target gfx942,gfx1100] [--jobs 2] [--entries 10000] [PATH...]

1. cold: every PTX module of PATHs (default: the fetched corpus) translated with -j JOBS into an empty cache;
2. warm: the same run again on that cache (goal: at most 5% of cold);
3. -j1: the cold run with one worker into another empty cache; efficiency = T(-j1) / (JOBS × T(-jJOBS))
   (goal: at least 85% on 2 cores);
4. lookup: a cache of ENTRIES synthetic entries (code objects of the corpus's median size), p50/p99 of
   `find()` on an open cache (what a shim that keeps the database open pays, PTX hashing included) and of
   `lookup()` (opens the cache every call), hits and misses (goal: p50 at most 1 ms).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fatkit.cache import Cache, find, lookup, make_key, ptx_hash  # noqa: E402
from fatkit.cache.precompile import precompile  # noqa: E402
from fatkit.cache.store import checksum, now_ms  # noqa: E402
from fatkit.extract.scan import scan_paths  # noqa: E402
from fatkit.extract.select import ptx_modules  # noqa: E402
from fatkit.translate.link import link_units  # noqa: E402
from tests.corpus import corpus_files  # noqa: E402

SYNTHETIC_PTX = ".version 8.0\n.target sm_90\n.address_size 64\n// synthetic module {n}\n{body}"


def run(paths: list[Path], targets: list[str], directory: Path, jobs: int) -> dict:
    """One `fatkit precompile` as a user runs it: scan included in the wall time."""
    start = time.perf_counter()
    modules = ptx_modules(scan_paths(paths), on_error=lambda m: print("!", m, file=sys.stderr), link_rdc=link_units)
    with Cache(directory) as cache:
        report = precompile(modules, targets, cache, jobs=jobs).to_json()
    report["seconds"] = time.perf_counter() - start
    return report


def served(modules, report: dict, directory: Path) -> str:
    """How many of the modules the report calls translated a shim finds (raw PTX image, device's full id)."""
    texts = {ptx_hash(m.text): m.text for m in modules}
    translated = [m for m in report["modules"] if m["status"] == "translated"]
    device = {"gfx942": "gfx942:sramecc+:xnack-"}
    with Cache(directory, read_only=True) as cache:
        found = sum(find(cache, texts[m["ptx_blake3"]].encode(), device.get(m["target"], m["target"])) is not None
                    for m in translated)
    return f"{found}/{len(translated)}"


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def lookup_latency(directory: Path, entries: int, code_size: int, ptx_size: int) -> dict[str, float]:
    """Fill a cache with `entries` synthetic entries, then time lookups of PTX images of `ptx_size` bytes."""
    body = "// " + "x" * max(0, ptx_size - 80) + "\n"
    texts = [SYNTHETIC_PTX.format(n=n, body=body) for n in range(entries)]
    code = os.urandom(code_size)
    with Cache(directory) as cache:
        cache._db.execute("BEGIN IMMEDIATE")  # one transaction for the fill: the fill is not what is measured
        for n, text in enumerate(texts):
            key = make_key(text, "gfx942")
            manifest = '{"kernels":[],"seconds":1.0}'
            cache._db.execute("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                              (key.ptx_blake3, key.target, key.abi, key.options, code, manifest,
                               checksum(manifest, code), len(code) + len(manifest), now_ms(), now_ms()))
        cache._db.execute("COMMIT")
    probes = [texts[(n * 7919) % entries].encode() for n in range(2000)]
    misses = [SYNTHETIC_PTX.format(n=-n - 1, body=body).encode() for n in range(500)]
    result = {}
    with Cache(directory) as cache:
        for name, images in (("find hit", probes), ("find miss", misses)):
            samples = []
            for image in images:
                start = time.perf_counter()
                entry = find(cache, image, "gfx942:sramecc+:xnack-")
                samples.append(time.perf_counter() - start)
                assert (entry is not None) == (name == "find hit")
            result[name] = samples
    samples = []
    for image in probes[:500]:
        start = time.perf_counter()
        assert lookup(image, "gfx942", directory) is not None
        samples.append(time.perf_counter() - start)
    result["lookup() hit, opening the cache"] = samples
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--target", default="gfx942,gfx1100")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--skip-j1", action="store_true", help="Leave out the -j1 cold run (no efficiency).")
    parser.add_argument("--keep", type=Path, help="Fill this cache directory (kept) instead of a temporary one.")
    args = parser.parse_args()
    paths = args.paths or corpus_files()
    if not paths:
        sys.exit("no corpus fetched (../shared/corpus/fetch.py) and no PATH given")
    targets = [t for t in args.target.split(",") if t]
    modules = list(ptx_modules(scan_paths(paths), on_error=lambda m: print("!", m, file=sys.stderr),
                               link_rdc=link_units))
    print(f"{len(paths)} files, {len(modules)} PTX modules ({sum(len(m.text) for m in modules) / 1e6:.1f} MB), "
          f"targets {', '.join(targets)}, {os.cpu_count()} CPUs", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="fatkit-bench-") as tmp:
        filled = args.keep or Path(tmp, "a")
        cold = run(paths, targets, filled, args.jobs)
        rows.append((f"cold -j{args.jobs}", cold))
        print(f"cold: {cold['seconds']:.1f} s", flush=True)
        hits = served(modules, cold, filled)
        warm = run(paths, targets, filled, args.jobs)
        rows.append((f"warm -j{args.jobs}", warm))
        serial = None
        if not args.skip_j1:
            serial = run(paths, targets, Path(tmp, "b"), 1)
            rows.append(("cold -j1", serial))
        with Cache(filled, read_only=True) as cache:
            sizes = sorted(e.size for e in cache.entries() if e.code_object)
        code_size = sizes[len(sizes) // 2] if sizes else 20_000
        ptx_size = int(statistics.median(len(m.text) for m in modules))
        latency = lookup_latency(Path(tmp, "c"), args.entries, code_size, ptx_size)

    print()
    print(f"{'run':<12} {'wall s':>8} {'modules':>8} {'translated':>10} {'cached':>7} {'failed':>7} "
          f"{'kernels ok':>10} {'kernels failed':>14} {'compile s saved':>15}")
    for name, r in rows:
        print(f"{name:<12} {r['seconds']:>8.2f} {r['modules_total']:>8} {r['modules_translated']:>10} "
              f"{r['modules_cached']:>7} {r['modules_failed']:>7} {r['kernels_ok']:>10} {r['kernels_failed']:>14} "
              f"{r['compile_seconds_saved']:>15.1f}")
    print()
    print(f"lookups that return a code object, of the modules reported translated: {hits}")
    reasons = Counter(re.sub(r"^.*?: line \d+: ", "", k["reason"] or m["reason"] or "")[:110]
                      for m in cold["modules"] for k in m["kernels"] or [{"status": "failed", "reason": None}]
                      if k["status"] != "ok")
    for reason, count in reasons.most_common(8):
        print(f"  {count:5d} kernels/modules failed: {reason}")
    print(f"warm / cold: {100 * warm['seconds'] / cold['seconds']:.1f}% (goal ≤ 5%)")
    if serial is not None:
        efficiency = serial["seconds"] / (args.jobs * cold["seconds"])
        print(f"parallel efficiency -j1 → -j{args.jobs}: speed-up {serial['seconds'] / cold['seconds']:.2f}×, "
              f"efficiency {100 * efficiency:.0f}% (goal ≥ 85%)")
    print(f"lookup latency, {args.entries} entries, code objects {code_size} B, PTX images {ptx_size} B:")
    for name, samples in latency.items():
        p50, p99 = (1e3 * percentile(samples, q) for q in (0.5, 0.99))
        print(f"  {name:<32} p50 {p50:.3f} ms   p99 {p99:.3f} ms")


if __name__ == "__main__":
    main()
