"""Rows in ZLUDA's own compilation cache (`zluda2.db`) that ZLUDA serves without compiling (docs/zluda.md).

ZLUDA looks a module up by (BLAKE3 of the PTX text it chose, `builtin`, the git SHA of its build, the device's
gcnArchName, a JSON of its debug flag and the GPU clock), uses the blob only when it carries a `zluda` ELF
section, and hands it to hipModuleLoadData with no fallback to compiling when HIP rejects it. A row ZLUDA
cannot use is worse than none: without the section it is a miss whose UNIQUE key then blocks ZLUDA's own
insert (a recompile on every run); a blob HIP rejects fails the module for good. So a row is written only for
a PTX entry fatkit translated completely into a code object ZLUDA can use as it is, under key fields ZLUDA
itself wrote (or the user gave); everything else is left to ZLUDA's JIT, with the reason.

Plain functions returning data: the CLI (cli/precompile.py, cli/cache.py) only renders them.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import struct
import sys
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

import fatkit
from fatkit.cache.key import TRANSLATOR_ABI, CacheKey, normalize_target, ptx_hash, translator_fingerprint
from fatkit.cache.store import Cache
from fatkit.errors import FatkitError, FormatError, UsageError
from fatkit.formats.elf import ET_DYN, SHN_UNDEF, ElfView
from fatkit.formats.hsaco import parse_code_object, split_target_id
from fatkit.formats.elf_append import section_added
from fatkit.translate.lower.runtime import PRINTF, WORKSPACE
from fatkit.translate.ptx.parser import parse_ptx

MIGRATION = "20250804203347"  # the Diesel migration that creates ZLUDA's `modules` and `globals` tables
COMPILER_VERSION = "builtin"
MODULES_COLUMNS = ["id", "hash", "compiler_version", "zluda_version", "device", "backend_key", "binary",
                   "last_access"]
KEY_COLUMNS = ["hash", "compiler_version", "zluda_version", "device", "backend_key"]  # the UNIQUE index
ZLUDA_SECTION = "zluda"
SECTION_VERSION = 1  # the u64 ZLUDA requires at the start of its section
SECTION_ALIGN = 8
CODE_OBJECT_VERSION = 5  # ZLUDA's own; the one HIP is sure to take from a cache it did not fill
# A second non-alloc section naming the fatkit build that wrote the row: how `cache ls` (and the key seed,
# with SQL's instr()) tells fatkit's rows from ZLUDA's. Its JSON always starts with PROVENANCE_MARK.
PROVENANCE_SECTION = ".fatkit_zluda"
PROVENANCE_MARK = b'{"fatkit_zluda":1,'
BUSY_TIMEOUT_S = 30  # waiting for another writer's transaction (ZLUDA itself sets none)
_SHA = re.compile(r"[0-9a-f]{40}")
_SM = re.compile(r"sm_(\d+)[af]?$")
# .texref/.surfref are globals of HIP's textureReference, which fatkit lays out (lower/texture.py) and exports
# by name for hipModuleGetTexRef; HIP has no separate sampler objects, so a .samplerref has no counterpart.
_REFERENCE_TYPES = {"texref", "surfref"}
_UNSERVED_TEXTURE_TYPES = {"samplerref"}


class ZludaRefusal(FatkitError):
    """fatkit will not write to this database, or does not know the key ZLUDA would look rows up by."""


def default_database(environ: Mapping[str, str] | None = None, platform: str | None = None) -> Path:
    """ZLUDA's rule (`dirs::cache_dir()` + zluda/ComputeCache/zluda2.db): on Linux $XDG_CACHE_HOME only when it
    is an absolute path, else $HOME/.cache; %LOCALAPPDATA% on Windows; ~/Library/Caches on macOS."""
    env = os.environ if environ is None else environ
    platform = platform or sys.platform
    home = env.get("HOME") or str(Path.home())
    if platform == "win32":
        base = env.get("LOCALAPPDATA")
        if not base:
            raise UsageError("%LOCALAPPDATA% is not set, so ZLUDA keeps no cache; give --zluda-db FILE")
    elif platform == "darwin":
        base = f"{home}/Library/Caches"
    else:
        xdg = env.get("XDG_CACHE_HOME", "")
        base = xdg if xdg.startswith("/") else f"{home}/.cache"
    return Path(base) / "zluda" / "ComputeCache" / "zluda2.db"


def backend_key(clock_rate_khz: int, is_debug: bool = False) -> str:
    """ZLUDA's backend key, serialised as its serde struct is: field order, no spaces."""
    return json.dumps({"is_debug": is_debug, "clock_rate": clock_rate_khz}, separators=(",", ":"))


def zluda_section(sm_version: int) -> bytes:
    """The 12 bytes of ZLUDA's `zluda` section: u64 version 1, then the rkyv archive of {sm_version: u32}."""
    return struct.pack("<QI", SECTION_VERSION, sm_version)


# --- the key -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZludaKey:
    """The four key fields besides the hash, and where they came from."""

    zluda_version: str
    device: str  # gcnArchName, verbatim
    backend_key: str  # verbatim
    origin: str

    @property
    def target(self) -> str:
        """fatkit's target for the device: its processor and feature settings."""
        return normalize_target(self.device)

    @property
    def processor(self) -> str:
        return self.target.split(":")[0]

    def to_json(self) -> dict[str, str]:
        return {"compiler_version": COMPILER_VERSION, "zluda_version": self.zluda_version, "device": self.device,
                "backend_key": self.backend_key, "from": self.origin}


def _connect_read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)


def database_problems(path: Path, *, writable: bool = True) -> list[str]:
    """Why fatkit will not add rows to `path` ([] when it will): it must be a database ZLUDA created and
    migrated (fatkit never creates one: Diesel would re-run the migration on a copy it did not record), and,
    when `writable`, one this user can write."""
    if not path.is_file():
        return [f"{path} does not exist: run a CUDA program under ZLUDA once so that it creates its cache"]
    try:
        with closing(_connect_read_only(path)) as db:
            versions = {r[0] for r in db.execute("SELECT version FROM __diesel_schema_migrations")}
            columns = [r[1] for r in db.execute("PRAGMA table_info(modules)")]
            unique = [r[2] for r in db.execute("PRAGMA index_info(modules_index)")]
    except sqlite3.Error as exc:
        return [f"{path} is not ZLUDA's cache database: {exc}"]
    if MIGRATION not in versions or columns != MODULES_COLUMNS or unique != KEY_COLUMNS:
        return [(f"{path} has another schema (migrations {sorted(versions)}, modules columns {columns}, unique "
                f"key {unique}); fatkit writes only the schema of ZLUDA's migration {MIGRATION}")]
    if not writable:
        return []
    if not _writable(path, os.W_OK):
        return [(f"{path} is read-only for this user: ZLUDA's lookup is an UPDATE (it refreshes last_access), so "
                "on a read-only database every lookup misses and ZLUDA compiles as if there were no cache; make "
                "it writable for the user who runs the application, or run fatkit as that user")]
    if not _writable(path.parent, os.W_OK | os.X_OK):
        return [(f"{path.parent} is read-only for this user: the database is in WAL mode (ZLUDA sets it), whose "
                "-wal and -shm files SQLite creates beside it, for ZLUDA's lookups as for fatkit's writes")]
    return []


def _writable(path: Path, mode: int) -> bool:
    """Writable by this user and by somebody: root passes os.access on a file nobody may write, but the
    application's user could not."""
    return os.access(path, mode) and bool(path.stat().st_mode & 0o222)


def key_rows(path: Path) -> list[dict[str, Any]]:
    """The distinct keys of the rows ZLUDA wrote (not fatkit), most recently used first."""
    with closing(_connect_read_only(path)) as db:
        found = db.execute(
            "SELECT zluda_version, device, backend_key, MAX(last_access), COUNT(*) FROM modules "
            "WHERE compiler_version = ? AND instr(binary, ?) = 0 GROUP BY 1, 2, 3 ORDER BY 4 DESC",
            (COMPILER_VERSION, PROVENANCE_MARK)).fetchall()
    return [{"zluda_version": v, "device": d, "backend_key": b, "last_access": t, "rows": n}
            for v, d, b, t, n in found]


def resolve_key(path: Path, zluda_version: str | None = None, device: str | None = None,
                clock_rate: int | None = None) -> tuple[ZludaKey, list[dict[str, Any]]]:
    """The key to write under: each field given by its flag, the rest copied byte for byte from the most
    recently used key of ZLUDA's own rows. Returns it and the other keys ZLUDA's rows carry; ZludaRefusal
    when a field is unknown or malformed."""
    keys = key_rows(path)
    seed = keys[0] if keys else None
    missing = [flag for flag, value in (("--zluda-version", zluda_version), ("--device", device),
                                        ("--clock-rate", clock_rate)) if value is None]
    if seed is None and missing:
        raise ZludaRefusal(
            f"{path} holds no row ZLUDA wrote, so the key ZLUDA looks rows up by (its build's git SHA, the GPU's "
            "gcnArchName and clock rate) is unknown: run one CUDA program under this ZLUDA build on this GPU "
            f"first (fatkit copies the key of the row it writes), or give {', '.join(missing)}")
    problems = []
    if zluda_version is not None and not _SHA.fullmatch(zluda_version):
        problems.append(f"--zluda-version must be the full 40-digit lowercase git SHA of the ZLUDA build "
                        f"(ZLUDA keys rows on it verbatim), not {zluda_version!r}")
    if clock_rate is not None and not 0 < clock_rate < 1 << 32:
        problems.append(f"--clock-rate must be the GPU's clock in kHz (a u32), not {clock_rate}")
    copied: dict[str, Any] = seed or {}  # empty only when every flag is given
    version = zluda_version if zluda_version is not None else copied["zluda_version"]
    name = device if device is not None else copied["device"]
    if clock_rate is not None:
        key_text = backend_key(clock_rate, _is_debug(copied.get("backend_key", "")))
    else:
        key_text = copied["backend_key"]
    try:
        normalize_target(name)
    except UsageError as exc:
        problems.append(f"device {name!r} is not a gcnArchName fatkit translates for: {exc}")
    if problems:
        raise ZludaRefusal("; ".join(problems))
    given = [flag for flag in ("--zluda-version", "--device", "--clock-rate") if flag not in missing]
    origin = "; ".join(([f"copied from the most recently used key of ZLUDA's rows ({seed['rows']} row(s))"]
                        if seed and missing else []) + ([f"given by {' '.join(given)}"] if given else []))
    key = ZludaKey(version, name, key_text, origin)
    others = [k for k in keys if (k["zluda_version"], k["device"], k["backend_key"]) != (version, name, key_text)]
    return key, others


def _is_debug(text: str) -> bool:
    try:
        return json.loads(text).get("is_debug") is True
    except (ValueError, AttributeError):
        return False


# --- which rows --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PtxFacts:
    """What the row rules need from one PTX text, read with fatkit's parser."""

    address_size: int | None
    sm_version: int
    kernels: tuple[str, ...]
    variables: tuple[str, ...]  # .visible/.weak/.common .global/.const: the module's interface, exported by name
    textures: tuple[str, ...]  # .samplerref references: nothing in HIP serves them


def ptx_facts(text: str) -> PtxFacts:
    module = parse_ptx(text)
    match = _SM.match(module.arch or "")
    variables = module.variables
    return PtxFacts(
        module.address_size, int(match.group(1)) if match else 0, tuple(k.name for k in module.kernels),
        # Internal ones (no linkage directive) are left out: unused, LLVM drops them, as in ZLUDA's own objects.
        # A .texref/.surfref is looked up by name whatever its linkage (hipModuleGetTexRef).
        tuple(v.name for v in variables if v.state_space in ("global", "const", "tex")
              and (v.linkage in ("visible", "weak", "common") or v.type in _REFERENCE_TYPES or v.state_space == "tex")
              and v.type not in _UNSERVED_TEXTURE_TYPES),
        tuple(v.name for v in variables if v.type in _UNSERVED_TEXTURE_TYPES))


@dataclass
class ZludaRow:
    ptx_blake3: str
    sm_version: int
    source: str
    also_in: list[str]
    kernels: int
    cache_key: CacheKey  # fatkit's entry holding the code object
    size: int  # of the blob written: the code object plus the two sections
    status: str = "planned"  # written | present (a row with this key was there: kept) | would-write | planned

    def to_json(self) -> dict[str, Any]:
        return {"ptx_blake3": self.ptx_blake3, "sm_version": self.sm_version, "source": self.source,
                "also_in": self.also_in, "kernels": self.kernels, "size": self.size, "status": self.status}


@dataclass
class ZludaPlan:
    key: ZludaKey
    database: Path
    rows: list[ZludaRow] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)  # {ptx_blake3, source, reason}
    other_keys: list[dict[str, Any]] = field(default_factory=list)
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        count = {s: sum(r.status == s for r in self.rows) for s in ("written", "present", "would-write")}
        return {"database": str(self.database), "key": self.key.to_json(), "dry_run": self.dry_run,
                "rows_written": count["written"], "rows_present": count["present"],
                "rows_would_write": count["would-write"], "modules_skipped": len(self.skipped),
                "rows": [r.to_json() for r in self.rows], "skipped": self.skipped, "other_keys": self.other_keys}


def prepare(database: Path | None, zluda_version: str | None = None, device: str | None = None,
            clock_rate: int | None = None, *, dry_run: bool = False) -> ZludaPlan:
    """Everything checked before any translation (a refusal must not cost an hour of codegen): the
    database, and the key. ZludaRefusal with the reasons."""
    path = Path(database) if database is not None else default_database()
    problems = database_problems(path, writable=not dry_run)
    if problems:
        raise ZludaRefusal("cannot write ZLUDA rows: " + "; ".join(problems), path=str(path))
    key, others = resolve_key(path, zluda_version, device, clock_rate)
    return ZludaPlan(key, path, other_keys=others, dry_run=dry_run)


def plan_rows(plan: ZludaPlan, report: Any, cache: Cache, texts: Mapping[str, str]) -> ZludaPlan:
    """Fill `plan` from a precompile report run per PTX entry for the key's target: one row per entry
    translated completely whose code object ZLUDA can use; the others in `skipped` with the reason.
    `texts` maps each PTX hash of the report to its text."""
    seen: set[str] = set()
    for module in report.modules:
        if module["target"] != plan.key.target or module["ptx_blake3"] in seen:
            continue
        seen.add(module["ptx_blake3"])
        row, reason = _row(plan.key, module, cache, texts[module["ptx_blake3"]])
        if row is None:
            plan.skipped.append({"ptx_blake3": module["ptx_blake3"], "source": module["source"], "reason": reason})
        else:
            plan.rows.append(row)
    return plan


def _row(key: ZludaKey, module: dict[str, Any], cache: Cache, text: str) -> tuple[ZludaRow | None, str]:
    failed = [k for k in module["kernels"] if k["status"] != "ok"]
    if failed:
        first = failed[0]["reason"] or failed[0]["name"]  # the reason names the kernel and the PTX line
        return None, (f"{len(failed)} of {len(module['kernels'])} kernels not translated (first: {first}); ZLUDA "
                      "would miss them in the row")
    if module["status"] not in ("translated", "cached"):
        return None, f"not translated: {module['reason'] or module['status']}"
    if module.get("linked", False):
        return None, ("-rdc units linked into one module: ZLUDA hashes and serves one unit's PTX, never a "
                      "device link of several")
    if "\ufffd" in text:
        return None, "the PTX text is not valid UTF-8: ZLUDA skips such an entry"
    try:
        facts = ptx_facts(text)
    except FatkitError as exc:
        return None, f"the PTX does not parse: {exc}"
    if facts.address_size != 64:
        return None, (f".address_size {facts.address_size or 'missing (ZLUDA reads 32)'}: ZLUDA serves 32-bit PTX "
                      "with its own zluda32 metadata and hidden arguments, fatkit exports 64-bit PTX only")
    if facts.textures:
        return None, (f"sampler references ({', '.join(facts.textures[:3])}): HIP has no separate sampler "
                      "objects")
    cache_key = CacheKey(module["ptx_blake3"], module["stored_as"], TRANSLATOR_ABI, module["options"])
    entry = cache.get(cache_key)
    if entry is None or not entry.code_object:
        return None, "fatkit's cache holds no code object for it"
    problem = code_object_problem(entry.code_object, facts, key.device)
    if problem:
        return None, problem
    blob = row_binary(entry.code_object, module["ptx_blake3"], facts.sm_version)
    return ZludaRow(module["ptx_blake3"], facts.sm_version, module["source"], module["also_in"],
                    len(facts.kernels), cache_key, len(blob)), ""


def code_object_problem(code_object: bytes, facts: PtxFacts, device: str) -> str | None:
    """Why ZLUDA could not use this code object for this PTX on `device`, or None: HIP must load it (code
    object v5 for the device's processor, feature settings it accepts, nothing undefined), every kernel and
    global found by its PTX name, and no runtime service ZLUDA does not provide."""
    try:
        parsed = parse_code_object(code_object)
        elf = ElfView(code_object)
        dynsym = elf.section(".dynsym")
        symbols = elf.symbols(dynsym) if dynsym is not None else []
    except FormatError as exc:
        return f"the code object does not parse: {exc}"
    processor, settings = split_target_id(device)
    if parsed.processor != processor:
        return f"the code object is for {parsed.processor}, the device is {processor}"
    for feature, value in (("xnack", parsed.xnack), ("sramecc", parsed.sramecc)):
        wanted = {"+": "on", "-": "off"}.get(settings.get(feature, ""))
        if value not in (None, "any") and value != wanted:
            return f"the code object sets {feature} {value} and the device {device}: HIP would reject it"
    if parsed.code_object_version != CODE_OBJECT_VERSION or parsed.e_type != ET_DYN:
        return f"code object v{parsed.code_object_version}, type {parsed.e_type}: ZLUDA's are v5 shared objects"
    undefined = sorted(s.name for s in symbols if s.name and s.shndx == SHN_UNDEF)
    if undefined:
        return f"undefined symbols {undefined[:3]}: HIP would fail to load it"
    defined = {s.name for s in symbols if s.shndx != SHN_UNDEF}
    if WORKSPACE in defined:
        return ("cooperative launch: kernels sync the grid (%envreg1/%envreg2, fatkit's __fatkit_grid_workspace) "
                "and ZLUDA implements no cuLaunchCooperativeKernel")
    if PRINTF in defined:
        return ("printf: fatkit's vprintf writes into __fatkit_printf, which nothing drains under ZLUDA, so the "
                "output would be lost; ZLUDA's own JIT prints the format strings (without arguments)")
    kernels = {k.name: k.symbol for k in parsed.kernels}
    missing = [name for name in facts.kernels if kernels.get(name) != f"{name}.kd"]
    if missing:
        return f"kernels {missing[:3]} are not in the code object under their PTX names"
    absent = [name for name in facts.variables if name not in defined]
    if absent:
        return f"globals {absent[:3]} are not exported: cuModuleGetGlobal would fail for them"
    return None


def row_binary(code_object: bytes, ptx_blake3: str, sm_version: int) -> bytes:
    """The blob of a row: the code object plus ZLUDA's `zluda` section (8-aligned, flags 0) and fatkit's
    provenance section (which fatkit wrote it, from which PTX)."""
    provenance = PROVENANCE_MARK + json.dumps(
        {"fatkit_version": fatkit.__version__, "translator": translator_fingerprint(), "ptx_blake3": ptx_blake3},
        separators=(",", ":"))[1:].encode()
    tagged = section_added(code_object, ZLUDA_SECTION, zluda_section(sm_version), alignment=SECTION_ALIGN)
    return section_added(tagged, PROVENANCE_SECTION, provenance, alignment=SECTION_ALIGN)


# --- writing ------------------------------------------------------------------------------------------


def write_plan(plan: ZludaPlan, cache: Cache) -> ZludaPlan:
    """INSERT OR IGNORE every planned row in one BEGIN IMMEDIATE transaction (ZLUDA's triggers keep
    total_size; its rows, triggers and migration table are not touched); rows whose key is already there stay
    as they are. With `plan.dry_run` nothing is written: rows are marked would-write or present."""
    fields = (COMPILER_VERSION, plan.key.zluda_version, plan.key.device, plan.key.backend_key)
    if plan.dry_run:
        with closing(_connect_read_only(plan.database)) as db:
            for row in plan.rows:
                present = db.execute("SELECT 1 FROM modules WHERE hash = ? AND compiler_version = ? AND "
                                     "zluda_version = ? AND device = ? AND backend_key = ?",
                                     (row.ptx_blake3, *fields)).fetchone()
                row.status = "present" if present else "would-write"
        return plan
    stamp = time.time_ns() // 1_000_000
    try:
        with closing(sqlite3.connect(plan.database, timeout=BUSY_TIMEOUT_S, isolation_level=None)) as db:
            db.execute("BEGIN IMMEDIATE")
            for row in plan.rows:
                binary = _binary(cache, row)
                cursor = db.execute(
                    "INSERT OR IGNORE INTO modules (hash, compiler_version, zluda_version, device, backend_key, "
                    "binary, last_access) VALUES (?, ?, ?, ?, ?, ?, ?)", (row.ptx_blake3, *fields, binary, stamp))
                row.status = "written" if cursor.rowcount == 1 else "present"
            db.execute("COMMIT")
    except sqlite3.Error as exc:
        for row in plan.rows:
            row.status = "planned"
        if "readonly" in str(exc):
            raise ZludaRefusal(f"the database is read-only ({exc}); nothing was written", path=str(plan.database))
        raise FatkitError(f"cannot write ZLUDA's cache database, nothing was written: {exc}",
                          path=str(plan.database)) from None
    return plan


def _binary(cache: Cache, row: ZludaRow) -> bytes:
    """The row's blob, made again from fatkit's cache: the plan keeps no code object in memory."""
    entry = cache.get(row.cache_key, touch=False)
    if entry is None or not entry.code_object:
        raise FatkitError(f"the cache entry {row.cache_key} vanished while writing ZLUDA rows", path=str(cache.path))
    return row_binary(entry.code_object, row.ptx_blake3, row.sm_version)


# --- reading back ---------------------------------------------------------------------------------------


def read_zluda_section(binary: bytes) -> int | None:
    """What ZLUDA's `ModuleMetadataV1::read_object` accepts: the first section named `zluda` of an ELF64, at
    least 8 bytes, starting with version 1; returns the sm_version (its last 4 bytes), None for a miss."""
    try:
        elf = ElfView(binary)
        if elf.elf_class != 2:
            return None
        section = elf.section(ZLUDA_SECTION)
        data = elf.data(section) if section is not None else b""
    except FormatError:
        return None
    if len(data) < 8 or struct.unpack_from("<Q", data)[0] != SECTION_VERSION:
        return None
    return struct.unpack_from("<I", data, len(data) - 4)[0] if len(data) >= 12 else 0


def provenance(binary: bytes) -> dict[str, Any] | None:
    """fatkit's provenance section of a row's blob, or None (a row ZLUDA wrote)."""
    try:
        elf = ElfView(binary)
        section = elf.section(PROVENANCE_SECTION)
        data = elf.data(section) if section is not None else b""
        return json.loads(data) if data.startswith(PROVENANCE_MARK) else None
    except (FormatError, ValueError):
        return None


def row_verdict(binary: bytes, device: str) -> tuple[bool, str]:
    """(whether ZLUDA would load the blob on `device`, why): the `zluda` section check ZLUDA makes, then what
    hipModuleLoadData needs of the code object's target."""
    if read_zluda_section(binary) is None:
        return False, "miss: no valid `zluda` section: ZLUDA recompiles the module on every run"
    try:
        parsed = parse_code_object(binary)
        processor, settings = split_target_id(device)
    except FatkitError as exc:
        return False, f"fails: hipModuleLoadData would reject it ({exc}), and ZLUDA does not recompile"
    if parsed.processor != processor:
        return False, f"fails: code for {parsed.processor} on a {processor} device, and ZLUDA does not recompile"
    for feature, value in (("xnack", parsed.xnack), ("sramecc", parsed.sramecc)):
        wanted = {"+": "on", "-": "off"}.get(settings.get(feature, ""))
        if value not in (None, "any") and value != wanted:
            return False, f"fails: {feature} {value} on a {device} device, and ZLUDA does not recompile"
    return True, f"loads ({len(parsed.kernels)} kernels)"


def list_rows(path: Path) -> Iterator[dict[str, Any]]:
    """Every row of ZLUDA's database, oldest id first: its key, who wrote it (fatkit's provenance section),
    whether it would load, and whether its key is the one ZLUDA used last. Reads one blob at a time."""
    problems = database_problems(Path(path), writable=False)
    if problems:
        raise ZludaRefusal("; ".join(problems), path=str(path))
    keys = key_rows(Path(path))
    newest = (keys[0]["zluda_version"], keys[0]["device"], keys[0]["backend_key"]) if keys else None
    with closing(_connect_read_only(Path(path))) as db:
        cursor = db.execute("SELECT id, hash, compiler_version, zluda_version, device, backend_key, binary, "
                            "last_access FROM modules ORDER BY id")
        for row_id, ptx, compiler, version, device, key_text, binary, last_access in cursor:
            loads, why = row_verdict(binary, device)
            made_by = provenance(binary)
            yield {"id": row_id, "hash": ptx, "compiler_version": compiler, "zluda_version": version,
                   "device": device, "backend_key": key_text, "size": len(binary), "last_access_ms": last_access,
                   "by_fatkit": made_by is not None, "fatkit": made_by, "sm_version": read_zluda_section(binary),
                   "loads": loads, "verdict": why, "newest_key": (version, device, key_text) == newest}


def entry_texts(modules: Any) -> dict[str, str]:
    """PTX hash → text of the precompiled modules (the row rules read the text again)."""
    return {ptx_hash(m.text): m.text for m in modules}
