"""`fatkit precompile --format zluda`: what writing ZLUDA's rows costs next to translating, and what is written.

    python benchmarks/zluda_rows.py [--device gfx1100] [--jobs 2] [PATH...]

A database made with ZLUDA's migration (tests/samples/zluda/up.sql) and one row of ZLUDA's, in a temporary
directory; then:
1. cold: scan + translate every PTX entry of PATHs on its own (default: the precompile benchmark's corpus
   files) into an empty fatkit cache: the anchor;
2. rows: choosing the rows (parse each entry again, check each code object) and writing them in one
   transaction (goal: a small fraction of cold);
3. warm: the whole command again (fatkit's cache serves every entry, every row is already there);
4. check: the rows `fatkit cache ls --zluda-db` reports ZLUDA would load, and the skip reasons.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fatkit.cache import Cache, zluda  # noqa: E402
from fatkit.cache.precompile import precompile  # noqa: E402
from fatkit.extract.scan import scan_paths  # noqa: E402
from fatkit.extract.select import ptx_modules  # noqa: E402
from fatkit.cli.render import reason_without_place  # noqa: E402
from tests.corpus import CORPUS_DIR  # noqa: E402

DEFAULT = ["jax_cuda12_plugin-0.10.2/jax_cuda12_plugin/_prng.so",
           "jax_cuda12_plugin-0.10.2/jax_cuda12_plugin/_solver.so",
           "torchaudio-2.11.1/torchaudio/lib/libtorchaudio.so"]
SEED_PTX_HASH = "0" * 64


def database(path: Path, device: str) -> Path:
    with closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("CREATE TABLE __diesel_schema_migrations (version VARCHAR(50) PRIMARY KEY NOT NULL, "
                   "run_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)")
        db.executescript((ROOT / "tests/samples/zluda/up.sql").read_text())
        db.execute("INSERT INTO __diesel_schema_migrations (version) VALUES (?)", (zluda.MIGRATION,))
        db.execute("INSERT INTO modules (hash, compiler_version, zluda_version, device, backend_key, binary, "
                   "last_access) VALUES (?, 'builtin', ?, ?, ?, x'00', ?)",
                   (SEED_PTX_HASH, "8a7931be87d758835776f54ea2e33d30621c74ce", device, zluda.backend_key(2_482_000),
                    int(time.time() * 1000)))
        db.commit()
    return path


def command(paths: list[Path], db: Path, cache_dir: Path, jobs: int) -> tuple[zluda.ZludaPlan, float, float]:
    """What `fatkit precompile --format zluda` does; returns the plan, translation and row seconds."""
    start = time.perf_counter()
    plan = zluda.prepare(db)
    modules = list(ptx_modules(scan_paths(paths), on_error=lambda m: print("!", m, file=sys.stderr)))
    with Cache(cache_dir) as cache:
        report = precompile(modules, [plan.key.target], cache, jobs=jobs, per_entry=True)
        translated = time.perf_counter() - start
        zluda.write_plan(zluda.plan_rows(plan, report, cache, zluda.entry_texts(modules)), cache)
    return plan, translated, time.perf_counter() - start - translated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--device", default="gfx1100")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    paths = args.paths or [CORPUS_DIR / p for p in DEFAULT]
    with tempfile.TemporaryDirectory() as tmp:
        db = database(Path(tmp) / "zluda2.db", args.device)
        cold, cold_translate, cold_rows = command(paths, db, Path(tmp) / "cache", args.jobs)
        warm, warm_translate, warm_rows = command(paths, db, Path(tmp) / "cache", args.jobs)
        rows = [r for r in zluda.list_rows(db) if r["hash"] != SEED_PTX_HASH]
    print(f"{len(paths)} files, device {args.device}, -j {args.jobs}")
    print("| run | translate s | rows s | rows / translate | rows written | present | skipped |")
    print("|---|---|---|---|---|---|---|")
    for name, plan, t, r in (("cold", cold, cold_translate, cold_rows), ("warm", warm, warm_translate, warm_rows)):
        out = plan.to_json()
        print(f"| {name} | {t:.2f} | {r:.3f} | {r / cold_translate:.1%} | {out['rows_written']} | "
              f"{out['rows_present']} | {out['modules_skipped']} |")
    loads = sum(r["loads"] and r["by_fatkit"] for r in rows)
    print(f"rows in the database besides ZLUDA's: {len(rows)}, of which cache ls says ZLUDA loads {loads}; "
          f"total {sum(r['size'] for r in rows) / 1e6:.2f} MB")
    for reason, count in Counter(reason_without_place(s["reason"])[:110] for s in cold.skipped).most_common():
        print(f"  skipped {count}x: {reason}")


if __name__ == "__main__":
    main()
