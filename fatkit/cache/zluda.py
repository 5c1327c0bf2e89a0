"""Export into ZLUDA's own compilation cache (`zluda2.db`), or a refusal naming the convention not met.

A row ZLUDA looks up but cannot use counts as a miss, and because its UNIQUE index then blocks ZLUDA's own
insert, the module would be recompiled on every run: worse than writing nothing. So every convention is
checked first and any that fatkit cannot meet stops the export with the reason (docs/cache.md, "ZLUDA's cache").
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fatkit.cache.key import TRANSLATOR_ABI, CacheKey, normalize_target
from fatkit.cache.store import Cache
from fatkit.errors import FatkitError, FormatError
from fatkit.formats.elf import ElfView
from fatkit.formats.hsaco import parse_code_object
from fatkit.translate.targets.amdgpu import wavefront_size

MIGRATION = "20250804203347"  # the Diesel migration that creates ZLUDA's `modules` and `globals` tables
COMPILER_VERSION = "builtin"
ZLUDA_SECTION = "zluda"


class ZludaRefusal(FatkitError):
    """fatkit cannot produce rows ZLUDA would use; the message lists every convention not met."""


def default_database() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "zluda" / "ComputeCache" / "zluda2.db"


def backend_key(clock_rate_khz: int) -> str:
    """ZLUDA's backend key, serialised as its serde struct is: field order, no spaces."""
    return json.dumps({"is_debug": False, "clock_rate": clock_rate_khz}, separators=(",", ":"))


@dataclass(frozen=True)
class ZludaExport:
    version: str
    device: str
    clock_rate: int
    database: Path

    @classmethod
    def checked(cls, version: str | None, device: str | None, clock_rate: int | None, targets: list[str],
                database: Path | None) -> "ZludaExport":
        """The export, or ZludaRefusal listing every convention the options already break."""
        reasons = []
        if not version or not re.fullmatch(r"[0-9a-f]{7,40}", version):
            reasons.append(f"--zluda-version must be the git SHA of the ZLUDA build (rows are keyed on it), "
                           f"not {version!r}")
        if clock_rate is None or clock_rate <= 0:
            reasons.append("--clock-rate KHZ is needed: ZLUDA keys rows on the GPU's clock rate "
                           "(backend_key {\"is_debug\":false,\"clock_rate\":<kHz>})")
        processor = None
        if not device:
            reasons.append("--device is needed: the HIP gcnArchName of the GPU (e.g. gfx1100)")
        else:
            processor = normalize_target(device).split(":")[0]
            if not re.fullmatch(r"gfx\d+", processor):
                reasons.append(f"ZLUDA parses only decimal gfx names; {processor} is rejected before any lookup")
            elif wavefront_size(processor) != 32:
                reasons.append(f"ZLUDA runs only on wave32 GPUs (RDNA, gfx10 and later); {processor} is wave64")
            if processor not in {normalize_target(t).split(":")[0] for t in targets}:
                reasons.append(f"--target must include the device's processor {processor}")
        path = database or default_database()
        reasons += _database_problems(path)
        if reasons:
            raise ZludaRefusal("cannot export to ZLUDA: " + "; ".join(reasons))
        return cls(version, device, clock_rate, path)

    def write(self, cache: Cache, report: Any) -> dict[str, Any]:
        """Rows for the modules translated for the device; modules ZLUDA would not look up by this PTX,
        or with kernels fatkit could not translate, are left to ZLUDA's own JIT. Nothing is written when any
        code object breaks a convention."""
        processor = normalize_target(self.device).split(":")[0]
        rows, skipped, reasons = [], 0, []
        for module in report.modules:
            if module["target"].split(":")[0] != processor:
                continue
            complete = module["status"] != "failed" and all(k["status"] == "ok" for k in module["kernels"])
            # ZLUDA picks among several PTX entries with its own parser: fatkit cannot know which it hashes.
            if not complete or module["candidates"] != 1:
                skipped += 1
                continue
            entry = cache.get(_key(module))
            if entry is None or entry.code_object is None:
                skipped += 1
                continue
            problem = code_object_problem(entry.code_object, [k["name"] for k in module["kernels"]])
            if problem:
                reasons.append(f"{module['source']}: {problem}")
                continue
            rows.append((module["ptx_blake3"], entry.code_object))
        if reasons:
            raise ZludaRefusal("cannot export to ZLUDA, no row written: " + "; ".join(sorted(set(reasons))[:5]))
        written = write_rows(self.database, rows, self.version, self.device, self.clock_rate)
        return {"database": str(self.database), "rows_written": written, "modules_skipped": skipped,
                "device": self.device, "zluda_version": self.version}


def _key(module: dict[str, Any]) -> CacheKey:
    return CacheKey(module["ptx_blake3"], module["stored_as"], TRANSLATOR_ABI, module["options"])


def code_object_problem(code_object: bytes, kernel_names: list[str]) -> str | None:
    """Why ZLUDA would not use this code object, or None: it needs its `zluda` metadata section, wave32
    kernels, and the PTX entry names (it looks kernels up by those)."""
    try:
        elf = ElfView(code_object)
        parsed = parse_code_object(code_object)
    except FormatError as exc:
        return f"the code object does not parse: {exc}"
    if elf.section(ZLUDA_SECTION) is None:
        return ("fatkit's code objects carry no `zluda` section (u64 version 1, then ZLUDA's archived "
                "sm_version); ZLUDA treats such a row as a miss and recompiles the module on every run")
    if any(not d.wavefront32 for d in parsed.descriptors):
        return "kernels are wave64; ZLUDA launches wave32 kernels only"
    missing = sorted(set(kernel_names) - {k.name for k in parsed.kernels})
    if missing:
        return f"kernels {missing} are not in the code object under their PTX names"
    return None


def _database_problems(path: Path) -> list[str]:
    """ZLUDA creates and migrates its database itself; fatkit only adds rows to one it created."""
    if not path.exists():
        return [f"{path} does not exist: run a CUDA program under ZLUDA once so that it creates its cache"]
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            versions = {r[0] for r in db.execute("SELECT version FROM __diesel_schema_migrations")}
            columns = [r[1] for r in db.execute("PRAGMA table_info(modules)")]
        finally:
            db.close()
    except sqlite3.Error as exc:
        return [f"{path} is not ZLUDA's cache database: {exc}"]
    expected = ["id", "hash", "compiler_version", "zluda_version", "device", "backend_key", "binary", "last_access"]
    if MIGRATION not in versions or columns != expected:
        return [f"{path} has another schema (migrations {sorted(versions)}, modules columns {columns}); fatkit "
                f"writes only the schema of migration {MIGRATION}"]
    return []


def write_rows(path: Path, rows: list[tuple[str, bytes]], version: str, device: str, clock_rate: int) -> int:
    """INSERT OR IGNORE each (PTX hash, code object) as ZLUDA would; ZLUDA's triggers keep total_size.
    Returns the rows added (an existing row for the same key is left as it is, as ZLUDA does)."""
    stamp = time.time_ns() // 1_000_000
    try:
        db = sqlite3.connect(path, timeout=60, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("BEGIN IMMEDIATE")
            before = db.execute("SELECT COUNT(*) FROM modules").fetchone()[0]
            db.executemany(
                "INSERT OR IGNORE INTO modules (hash, compiler_version, zluda_version, device, backend_key, binary, "
                "last_access) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(ptx, COMPILER_VERSION, version, device, backend_key(clock_rate), blob, stamp) for ptx, blob in rows])
            added = db.execute("SELECT COUNT(*) FROM modules").fetchone()[0] - before
            db.execute("COMMIT")
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise FatkitError(f"cannot write ZLUDA's cache database: {exc}", path=str(path)) from None
    return added
