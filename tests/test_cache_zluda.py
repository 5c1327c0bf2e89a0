"""Export into ZLUDA's cache database: a database made the way ZLUDA makes it, rows checked, refusals checked."""

from __future__ import annotations

import sqlite3
import struct
from pathlib import Path

import pytest

from fatkit.cache import Cache, make_key, ptx_hash
from fatkit.cache.precompile import Report
from fatkit.cache.zluda import MIGRATION, ZludaExport, ZludaRefusal, backend_key, code_object_problem
from fatkit.formats.elf import ElfView
from fatkit.formats.hsaco import parse_code_object
from tests.helpers import sample

SHA = "2f7c3b9a41d0e6c58b1f2a3d4e5f60718293a4b5"
PTX = ".version 8.0\n.target sm_89\n.address_size 64\n// module {n}\n"

# ZLUDA's migration 2025-08-04-203347 (zluda_cache/migrations/…/up.sql), as Diesel applies it, plus the table in
# which Diesel records applied migrations.
ZLUDA_SCHEMA = """
CREATE TABLE __diesel_schema_migrations (version VARCHAR(50) PRIMARY KEY NOT NULL,
                                         run_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE modules (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, hash TEXT NOT NULL, compiler_version TEXT NOT NULL,
    zluda_version TEXT NOT NULL, device TEXT NOT NULL, backend_key TEXT NOT NULL, binary BLOB NOT NULL,
    last_access BIGINT NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS modules_index ON modules (hash, compiler_version, zluda_version, device, backend_key);
CREATE TABLE IF NOT EXISTS globals (key TEXT PRIMARY KEY, value BIGINT NOT NULL) WITHOUT ROWID;
INSERT OR IGNORE INTO globals (key, value) VALUES ('total_size', 0);
CREATE TRIGGER IF NOT EXISTS update_size_on_delete AFTER DELETE ON modules FOR EACH ROW BEGIN
    UPDATE globals SET value = value - length(OLD.binary) WHERE key = 'total_size'; END;
CREATE TRIGGER IF NOT EXISTS update_size_on_insert AFTER INSERT ON modules FOR EACH ROW BEGIN
    UPDATE globals SET value = value + length(NEW.binary) WHERE key = 'total_size'; END;
"""


def zluda_database(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = WAL")
    db.executescript(ZLUDA_SCHEMA)
    db.execute("INSERT INTO __diesel_schema_migrations (version) VALUES (?)", (MIGRATION,))
    db.commit()
    db.close()
    return path


def with_zluda_section(code_object: bytes, sm_version: int = 89) -> bytes:
    """The code object with one more section, `zluda` (u64 1, u32 sm_version), appended after its bytes."""
    data = bytearray(code_object)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [bytearray(data[shoff + i * shentsize: shoff + (i + 1) * shentsize]) for i in range(shnum)]
    names_offset, names_size = struct.unpack_from("<QQ", headers[shstrndx], 0x18)
    names = bytes(data[names_offset:names_offset + names_size]) + b"zluda\0"
    data += b"\0" * (-len(data) % 8)
    section_offset = len(data)
    payload = struct.pack("<QI", 1, sm_version)
    data += payload
    new_names_offset = len(data)
    data += names + b"\0" * (-(len(data) + len(names)) % 8)
    struct.pack_into("<QQ", headers[shstrndx], 0x18, new_names_offset, len(names))
    headers.append(bytearray(struct.pack("<IIQQQQIIQQ", names_size, 1, 0, 0, section_offset, len(payload), 0, 0,
                                         8, 0)))
    struct.pack_into("<Q", data, 0x28, len(data))
    struct.pack_into("<H", data, 0x3C, shnum + 1)
    data += b"".join(headers)
    return bytes(data)


def cached_report(cache: Cache, code_objects: dict[int, bytes], *, unsupported: set[int] = frozenset(),
                  candidates: dict[int, int] | None = None) -> Report:
    """What precompile reports after translating module n to code_objects[n] for gfx1100."""
    report = Report(["gfx1100"], str(cache.directory))
    for n, code_object in code_objects.items():
        kernels = [{"name": k.name, "status": "ok", "reason": None, "line": None}
                   for k in parse_code_object(code_object).kernels]
        if n in unsupported:
            kernels.append({"name": "tensor_kernel", "status": "unsupported", "reason": "wgmma", "line": 9})
        key = make_key(PTX.format(n=n), "gfx1100")
        cache.put(key, code_object, {"kernels": kernels})
        report.modules.append({"status": "translated", "cached": False, "target": "gfx1100", "stored_as": "gfx1100",
                               "ptx_blake3": key.ptx_blake3, "source": f"module{n}.ptx", "kernels": kernels,
                               "candidates": (candidates or {}).get(n, 1), "options": key.options, "reason": None})
    return report


def test_rows_written_as_zluda_writes_them(tmp_path):
    database = zluda_database(tmp_path / "zluda" / "ComputeCache" / "zluda2.db")
    base = sample("amd_gfx1100_v4.hsaco").read_bytes()
    tagged = with_zluda_section(base)
    assert ElfView(tagged).section("zluda") is not None and parse_code_object(tagged).kernels
    export = ZludaExport.checked(SHA, "gfx1100", 2_482_000, ["gfx1100"], database)
    with Cache(tmp_path / "cache") as cache:
        report = cached_report(cache, {1: tagged, 2: tagged, 3: tagged, 4: tagged}, unsupported={3},
                               candidates={4: 2})
        result = export.write(cache, report)
        assert result["rows_written"] == 2 and result["modules_skipped"] == 2
        again = export.write(cache, report)  # INSERT OR IGNORE: the same key twice stays one row
        assert again["rows_written"] == 0
    db = sqlite3.connect(database)
    rows = db.execute("SELECT hash, compiler_version, zluda_version, device, backend_key, binary, last_access "
                      "FROM modules ORDER BY id").fetchall()
    total = db.execute("SELECT value FROM globals WHERE key = 'total_size'").fetchone()[0]
    db.close()
    assert [r[0] for r in rows] == [ptx_hash(PTX.format(n=1)), ptx_hash(PTX.format(n=2))]
    for _, compiler, version, device, key, binary, last_access in rows:
        assert (compiler, version, device, binary) == ("builtin", SHA, "gfx1100", tagged)
        assert key == '{"is_debug":false,"clock_rate":2482000}' == backend_key(2_482_000)
        assert last_access > 1_700_000_000_000  # milliseconds
    assert total == 2 * len(tagged)


def test_code_objects_without_zluda_section_are_refused_and_nothing_written(tmp_path):
    database = zluda_database(tmp_path / "zluda2.db")
    plain = sample("amd_gfx1100_v4.hsaco").read_bytes()
    assert "no `zluda` section" in code_object_problem(plain, ["saxpy"])
    export = ZludaExport.checked(SHA, "gfx1100", 2_482_000, ["gfx1100"], database)
    with Cache(tmp_path / "cache") as cache:
        report = cached_report(cache, {1: with_zluda_section(plain), 2: plain})
        with pytest.raises(ZludaRefusal, match="no row written.*recompiles the module on every run"):
            export.write(cache, report)
    db = sqlite3.connect(database)
    assert db.execute("SELECT COUNT(*) FROM modules").fetchone()[0] == 0
    db.close()


def test_wave64_code_and_missing_kernel_names_are_refused():
    gfx90a = with_zluda_section(sample("amd_gfx90a_v5.hsaco").read_bytes())
    assert "wave64" in code_object_problem(gfx90a, [])
    tagged = with_zluda_section(sample("amd_gfx1100_v4.hsaco").read_bytes())
    assert code_object_problem(tagged, ["saxpy"]) is None
    assert "not in the code object" in code_object_problem(tagged, ["saxpy", "_Z5saxpyfPKfPfi"])


@pytest.mark.parametrize("device, clock, version, targets, reason", [
    ("gfx942", 2_100_000, SHA, ["gfx942"], "wave64"),
    ("gfx90a:sramecc-:xnack-", 1_700_000, SHA, ["gfx90a"], "decimal gfx names"),
    ("gfx1100", None, SHA, ["gfx1100"], "--clock-rate"),
    ("gfx1100", 2_482_000, "v6", ["gfx1100"], "git SHA"),
    ("gfx1100", 2_482_000, SHA, ["gfx942"], "--target must include"),
    (None, 2_482_000, SHA, ["gfx1100"], "--device is needed"),
])
def test_options_that_break_a_convention_are_refused_before_translating(tmp_path, device, clock, version, targets,
                                                                          reason):
    database = zluda_database(tmp_path / "zluda2.db")
    with pytest.raises(ZludaRefusal, match=reason):
        ZludaExport.checked(version, device, clock, targets, database)


def test_only_a_database_zluda_created_is_written(tmp_path):
    with pytest.raises(ZludaRefusal, match="does not exist"):
        ZludaExport.checked(SHA, "gfx1100", 1, ["gfx1100"], tmp_path / "missing.db")
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE modules (hash TEXT)").connection.close()
    with pytest.raises(ZludaRefusal, match="not ZLUDA's cache database|another schema"):
        ZludaExport.checked(SHA, "gfx1100", 1, ["gfx1100"], other)


def test_precompile_format_zluda_refuses_fatkit_code_objects_and_keeps_its_own_cache(tmp_path):
    from tests.test_cli import fatkit

    database = zluda_database(tmp_path / "zluda2.db")
    proc = fatkit("precompile", str(sample("nv_kern_sm90.ptx")), "--target", "gfx1100", "--cache", str(tmp_path),
                  "--format", "zluda", "--zluda-version", SHA, "--device", "gfx1100", "--clock-rate", "2482000",
                  "--zluda-db", str(database), check=1)
    assert "no row written" in " ".join(proc.stderr.split()) and "`zluda` section" in " ".join(proc.stderr.split())
    db = sqlite3.connect(database)
    assert db.execute("SELECT COUNT(*) FROM modules").fetchone()[0] == 0
    db.close()
    text = sample("nv_kern_sm90.ptx").read_bytes()
    with Cache(tmp_path) as cache:
        assert cache.get(make_key(text, "gfx1100")).code_object  # the translation is kept for fatkit's own shim
