"""Rows in ZLUDA's cache database (fatkit/cache/zluda.py, docs/zluda.md).

The database is made the way ZLUDA makes it (Diesel's migration table, then ZLUDA's migration SQL,
tests/samples/zluda/up.sql) and holds one row ZLUDA wrote. The rows fatkit adds are checked against a reader
written here from ZLUDA's lookup code, independently of fatkit: the PTX texts of the image as ZLUDA gathers
them (fatbin walk, zstd, trailing NULs stripped), BLAKE3 of each, ZLUDA's UPDATE … RETURNING on the five key
columns, and ZLUDA's `zluda` section check (first section of that name, u64 version 1, sm_version last).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import blake3
import pytest
import zstandard

from fatkit.cache import Cache, make_key
from fatkit.cache import zluda
from fatkit.cache.precompile import precompile
from fatkit.extract.scan import scan_paths
from fatkit.extract.select import ptx_modules
from fatkit.formats.fatbin import KIND_PTX, EntrySpec, build_container
from tests.helpers import SAMPLES, sample
from tests.test_cli import fatkit
from tests.test_translate_runtime import DECLARATIONS, GRID_SYNC, _string, _vprintf

SHA = "8a7931be87d758835776f54ea2e33d30621c74ce"
BACKEND_KEY = '{"is_debug":false,"clock_rate":2482000}'
DIESEL_TABLE = ("CREATE TABLE IF NOT EXISTS __diesel_schema_migrations (version VARCHAR(50) PRIMARY KEY NOT NULL, "
                "run_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)")
ZLUDA_PTX = b".version 8.0\n.target sm_89\n.address_size 64\n// the module ZLUDA compiled itself\n"

BODY = """
.visible .global .align 4 .u32 {name}_count = 3;
.visible .entry {name}(.param .u64 out)
{{
    .reg .b32 %r<3>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r2, [{name}_count];
    st.global.u32 [%rd4], %r2;
    ret;
}}
"""
PTX_80 = ".version 8.0\n.target sm_80\n.address_size 64\n" + BODY.format(name="fill80")
PTX_90A = ".version 8.0\n.target sm_90a\n.address_size 64\n" + BODY.format(name="fill90")
PTX_REFUSED = ".version 8.0\n.target sm_86\n.address_size 64\n" + """
.visible .entry launch_value(.param .u64 out)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %envreg3;
    st.global.u32 [%rd2], %r1;
    ret;
}
"""
PTX_NO_ADDRESS_SIZE = ".version 8.0\n.target sm_75\n" + BODY.format(name="fill75")
PRINT_FORMAT = b"hello %d\n"
PTX_PRINTF = ".version 8.0\n.target sm_70\n.address_size 64\n" + DECLARATIONS + f"""
.global .align 1 .b8 fmt[{len(PRINT_FORMAT) + 1}] = {{{_string(PRINT_FORMAT)}}};
.visible .entry hello()
{{
    .local .align 8 .b8 depot[8];
    .reg .b32 %r<2>;
    .reg .b32 %r_count;
    .reg .b64 %rd<5>;
    mov.u64 %rd1, depot;
    cvta.local.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    st.local.u32 [%rd1], %r1;
    mov.u64 %rd3, fmt;
    cvta.global.u64 %rd4, %rd3;
    {_vprintf("%rd4", "%rd2")}
    ret;
}}
"""
# entry → (text, whether fatkit writes a row, the reason it does not)
ENTRIES = {
    "sm_80": (PTX_80, True, None),
    "sm_90a": (PTX_90A, True, None),
    "envreg": (PTX_REFUSED, False, "kernels not translated"),
    "no_address_size": (PTX_NO_ADDRESS_SIZE, False, ".address_size missing"),
    "printf": (PTX_PRINTF, False, "printf"),
    "grid_sync": (GRID_SYNC, False, "cooperative launch"),
}


def sm_of(text: str) -> int:
    target = next(line for line in text.splitlines() if line.startswith(".target"))
    return int(target.split("sm_")[1].rstrip("af;\n"))


@contextmanager
def opened(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection committed and closed on exit (an open one would keep the WAL from being checkpointed)."""
    db = sqlite3.connect(path)
    try:
        yield db
        db.commit()
    finally:
        db.close()


def make_zluda_database(path: Path, *, seed: bool = True) -> Path:
    """A database as ZLUDA leaves it after its first module: migrated, WAL, one row of its own."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with opened(path) as db:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute(DIESEL_TABLE)
        db.executescript((SAMPLES / "zluda" / "up.sql").read_text())
        db.execute("INSERT INTO __diesel_schema_migrations (version) VALUES ('20250804203347')")
        if seed:
            insert_row(db, blake3.blake3(ZLUDA_PTX).hexdigest(), with_zluda_section(
                sample("amd_gfx1100_v4.hsaco").read_bytes(), 89), last_access=int(time.time() * 1000) - 60_000)
    return path


def insert_row(db: sqlite3.Connection, ptx: str, binary: bytes, *, version: str = SHA, device: str = "gfx1100",
               key: str = BACKEND_KEY, last_access: int) -> None:
    """ZLUDA's insert_module."""
    db.execute("INSERT INTO modules (hash, compiler_version, zluda_version, device, backend_key, binary, "
               "last_access) VALUES (?, 'builtin', ?, ?, ?, ?, ?)", (ptx, version, device, key, binary, last_access))


def with_zluda_section(code_object: bytes, sm_version: int) -> bytes:
    """What ZLUDA links into its own objects, appended here by hand: a `zluda` section (u64 1, u32 sm_version)."""
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


# --- a reader that follows ZLUDA's lookup (zluda/src/impl/module.rs, as docs/zluda.md describes it) ---


def zluda_ptx_texts(image: bytes) -> list[bytes]:
    """Every PTX text ZLUDA gathers from a fatbin image: kind 1, version 0x101, zstd/LZ4-block decompressed,
    trailing NULs stripped, valid UTF-8; in container order (ZLUDA walks them in reverse and parses)."""
    magic, version, header_size, fat_size = struct.unpack_from("<IHHQ", image, 0)
    assert (magic, version, header_size) == (0xBA55ED50, 1, 16)
    texts, pos, end = [], 16, 16 + fat_size
    while pos < end:
        kind, entry_version, entry_header, padded = struct.unpack_from("<HHIQ", image, pos)
        compressed, = struct.unpack_from("<I", image, pos + 16)
        flags, _, uncompressed = struct.unpack_from("<QQQ", image, pos + 40)
        payload = image[pos + entry_header: pos + entry_header + (compressed or padded)]
        if kind == 1 and entry_version == 0x101:
            if flags & 0x8000:
                payload = zstandard.ZstdDecompressor().decompress(payload, max_output_size=uncompressed)
            assert not flags & 0x2000, "no LZ4 entries in these samples"
            text = payload.rstrip(b"\0")
            try:
                text.decode("utf-8")
                texts.append(text)
            except UnicodeDecodeError:
                pass
        pos += entry_header + padded
    return texts


def first_zluda_section(binary: bytes) -> tuple[int, bytes, int, int] | None:
    """(sh_flags, bytes, sh_addralign, sh_offset) of the first section named `zluda`, read from the raw ELF64."""
    shoff, = struct.unpack_from("<Q", binary, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", binary, 0x3A)
    header = struct.Struct("<IIQQQQIIQQ")
    names = header.unpack_from(binary, shoff + shstrndx * shentsize)
    strings = binary[names[4]:names[4] + names[5]]
    for i in range(shnum):
        name, _, flags, _, offset, size, _, _, align, _ = header.unpack_from(binary, shoff + i * shentsize)
        if strings[name:strings.index(b"\0", name)] == b"zluda":
            return flags, binary[offset:offset + size], align, offset
    return None


def zluda_lookup(database: Path, text: bytes, version: str, device: str, key: str) -> bytes | None:
    """ZLUDA's load_cached_binary: the UPDATE … RETURNING lookup, then the `zluda` section check."""
    with opened(database) as db:
        row = db.execute("UPDATE modules SET last_access = ? WHERE hash = ? AND compiler_version = ? AND "
                         "zluda_version = ? AND device = ? AND backend_key = ? RETURNING binary",
                         (int(time.time() * 1000), blake3.blake3(text).hexdigest(), "builtin", version, device,
                          key)).fetchone()
    if row is None:
        return None
    section = first_zluda_section(row[0])
    if section is None or len(section[1]) < 8 or struct.unpack_from("<Q", section[1])[0] != 1:
        return None
    return row[0]


def fatbin_images(path: Path) -> list[bytes]:
    """The fatbin headers a CUDA program hands ZLUDA (what __cudaRegisterFatBinary's wrapper points at)."""
    data = path.read_bytes()
    images, start = [], data.find(b"\x50\xed\x55\xba\x01\x00\x10\x00")
    while start >= 0:
        fat_size, = struct.unpack_from("<Q", data, start + 8)
        images.append(data[start:start + 16 + fat_size])
        start = data.find(b"\x50\xed\x55\xba\x01\x00\x10\x00", start + 16 + fat_size)
    return images


# --- the run every test looks at ---------------------------------------------------------------------------


def fatbin_file(directory: Path) -> Path:
    path = directory / "six.fatbin"
    specs = [EntrySpec(KIND_PTX, sm_of(text), text.encode(), compression="zstd" if i % 2 else None)
             for i, (text, _, _) in enumerate(ENTRIES.values())]
    path.write_bytes(build_container(specs))
    return path


def snapshot(database: Path) -> dict:
    with opened(database) as db:
        return {"schema": db.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall(),
                "migrations": db.execute("SELECT * FROM __diesel_schema_migrations").fetchall(),
                "rows": db.execute("SELECT * FROM modules ORDER BY id").fetchall(),
                "total": db.execute("SELECT value FROM globals WHERE key = 'total_size'").fetchone()[0],
                "sum": db.execute("SELECT COALESCE(SUM(length(binary)), 0) FROM modules").fetchone()[0]}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """precompile --format zluda of a six-entry fatbin and nv_lib.so into a fresh ZLUDA database."""
    directory = tmp_path_factory.mktemp("zluda")
    database = make_zluda_database(directory / "zluda2.db")
    before = snapshot(database)
    inputs = [fatbin_file(directory), sample("nv_lib.so")]
    proc = fatkit("precompile", *map(str, inputs), "--format", "zluda", "--zluda-db", str(database), "--cache",
                  str(directory / "cache"), "-j", "1", "--json")
    return {"dir": directory, "db": database, "inputs": inputs, "before": before, "after": snapshot(database),
            "out": json.loads(proc.stdout)["zluda"]}


def copy_database(run, tmp_path: Path) -> Path:
    shutil.copy(run["db"], tmp_path / "zluda2.db")
    return tmp_path / "zluda2.db"


def test_one_row_per_complete_64bit_entry_under_zludas_key(run):
    out, before, after = run["out"], run["before"], run["after"]
    lib_text = zluda_ptx_texts(fatbin_images(run["inputs"][1])[1])[0]
    expected = {blake3.blake3(text.encode()).hexdigest(): sm_of(text) for text, row, _ in ENTRIES.values() if row}
    expected[blake3.blake3(lib_text).hexdigest()] = 90
    assert out["rows_written"] == 3 and out["key"]["from"].startswith("copied from")
    assert {r["ptx_blake3"]: r["sm_version"] for r in out["rows"]} == expected
    new = after["rows"][len(before["rows"]):]
    assert after["rows"][:len(before["rows"])] == before["rows"]  # ZLUDA's own row untouched
    assert {r[1] for r in new} == set(expected)
    for _, ptx, compiler, version, device, key, binary, last_access in new:
        assert (compiler, version, device, key) == ("builtin", SHA, "gfx1100", BACKEND_KEY)  # copied verbatim
        flags, data, align, offset = first_zluda_section(binary)
        assert (flags, align, offset % 8, data) == (0, 8, 0, struct.pack("<QI", 1, expected[ptx]))
        assert abs(last_access - time.time() * 1000) < 600_000
    assert after["schema"] == before["schema"] and after["migrations"] == before["migrations"]
    assert after["total"] == after["sum"]  # ZLUDA's insert trigger ran for each row
    assert os.access(run["db"], os.W_OK) and os.stat(run["db"]).st_mode & 0o200


def test_each_skipped_entry_names_its_reason(run):
    reasons = {s["ptx_blake3"]: s["reason"] for s in run["out"]["skipped"]}
    for text, row, reason in ENTRIES.values():
        ptx = blake3.blake3(text.encode()).hexdigest()
        assert (ptx in reasons) == (not row)
        if not row:
            assert reason in reasons[ptx], reasons[ptx]


def test_the_row_is_the_translated_code_object_plus_the_section(run):
    with Cache(run["dir"] / "cache") as cache:
        code_object = cache.get(make_key(PTX_80, "gfx1100")).code_object
    ptx = blake3.blake3(PTX_80.encode()).hexdigest()
    binary = next(r[6] for r in run["after"]["rows"] if r[1] == ptx)
    # Only e_shoff and e_shnum of the original bytes change; the sections are appended after them.
    assert binary[:0x28] == code_object[:0x28] and binary[0x30:0x3C] == code_object[0x30:0x3C]
    assert binary[0x40:len(code_object)] == code_object[0x40:]
    readelf = Path("/usr/lib/llvm-22/bin/llvm-readelf")
    if readelf.exists():
        path = run["dir"] / "row.so"
        path.write_bytes(binary)
        proc = subprocess.run([readelf, "-S", "--dyn-syms", path], capture_output=True, text=True, check=True)
        assert "warning" not in proc.stderr.lower() and " zluda " in proc.stdout and "fill80_count" in proc.stdout


def test_a_reader_following_zludas_lookup_finds_every_translated_module(run, tmp_path):
    database = copy_database(run, tmp_path)
    found = {}
    for path in run["inputs"]:
        for image in fatbin_images(path):
            for text in zluda_ptx_texts(image):
                found[text] = zluda_lookup(database, text, SHA, "gfx1100", BACKEND_KEY)
    written = {text.encode() for text, row, _ in ENTRIES.values() if row}
    written |= {text for image in fatbin_images(run["inputs"][1]) for text in zluda_ptx_texts(image)}
    assert len(written) == 3 and written <= set(found) and len(found) == 7
    for text, binary in found.items():
        assert (binary is not None) == (text in written), text[:80]
        if binary is not None:
            assert first_zluda_section(binary)[1][8:] == struct.pack("<I", sm_of(text.decode()))
    # Another clock rate or ZLUDA build is another key: no hit.
    assert zluda_lookup(database, PTX_80.encode(), SHA, "gfx1100", BACKEND_KEY.replace("2482000", "2500000")) is None
    assert zluda_lookup(database, PTX_80.encode(), "0" * 40, "gfx1100", BACKEND_KEY) is None


def test_a_rerun_adds_nothing_and_changes_nothing(run, tmp_path):
    database = copy_database(run, tmp_path)
    before = snapshot(database)
    proc = fatkit("precompile", *map(str, run["inputs"]), "--format", "zluda", "--zluda-db", str(database),
                  "--cache", str(run["dir"] / "cache"), "-j", "1", "--json")
    out = json.loads(proc.stdout)
    assert out["modules_translated"] == 0  # fatkit's cache served every entry
    assert (out["zluda"]["rows_written"], out["zluda"]["rows_present"]) == (0, 3)
    assert snapshot(database) == before


def test_dry_run_lists_the_rows_and_writes_nothing(run, tmp_path):
    database = make_zluda_database(tmp_path / "zluda2.db")
    before = snapshot(database)
    proc = fatkit("precompile", str(run["inputs"][0]), "--format", "zluda", "--zluda-db", str(database),
                  "--cache", str(run["dir"] / "cache"), "--dry-run")
    text = " ".join(proc.stdout.split())
    assert "would write 2 row(s)" in text and "would-write" in text and "printf" in text
    assert snapshot(database) == before


def test_cache_ls_tells_fatkits_rows_from_zludas_and_which_would_load(run, tmp_path):
    database = copy_database(run, tmp_path)
    with opened(database) as db:  # a row without the section, and code for another GPU
        insert_row(db, "c" * 64, sample("amd_gfx1100_v4.hsaco").read_bytes(), last_access=1)
        insert_row(db, "d" * 64, with_zluda_section(sample("amd_gfx942_v6.hsaco").read_bytes(), 90), last_access=1)
    rows = json.loads(fatkit("cache", "ls", "--zluda-db", str(database), "--json").stdout)["rows"]
    by_hash = {r["hash"]: r for r in rows}
    for r in run["out"]["rows"]:
        row = by_hash[r["ptx_blake3"]]
        assert row["by_fatkit"] and row["loads"] and row["fatkit"]["ptx_blake3"] == r["ptx_blake3"]
    seed = by_hash[blake3.blake3(ZLUDA_PTX).hexdigest()]
    assert not seed["by_fatkit"] and seed["loads"] and seed["sm_version"] == 89
    assert not by_hash["c" * 64]["loads"] and "recompiles the module on every run" in by_hash["c" * 64]["verdict"]
    assert not by_hash["d" * 64]["loads"] and "gfx942 on a gfx1100" in by_hash["d" * 64]["verdict"]
    assert fatkit("cache", "ls", "--zluda-db", str(database)).stdout.count("fatkit  gfx1100") == 3


def test_the_documented_delete_removes_fatkits_rows_only(run, tmp_path):
    """docs/zluda.md's statement for replacing fatkit's rows after a fatkit update."""
    database = copy_database(run, tmp_path)
    with opened(database) as db:
        db.execute("""DELETE FROM modules WHERE instr(binary, CAST('{"fatkit_zluda":1,' AS BLOB)) > 0""")
    after = snapshot(database)
    assert after["rows"] == run["before"]["rows"] and after["total"] == after["sum"]


def test_a_concurrent_writer_is_waited_for(run, tmp_path):
    """A second process (ZLUDA inserting its own row) holds the write lock while fatkit writes: fatkit waits
    for its commit, and both rows are there, with total_size right."""
    database = make_zluda_database(tmp_path / "zluda2.db")
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sqlite3, sys, time
        db = sqlite3.connect({str(database)!r}, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO modules (hash, compiler_version, zluda_version, device, backend_key, binary, "
                   "last_access) VALUES ('e' || hex(randomblob(31)), 'builtin', 'x', 'gfx1100', 'k', x'00', 1)")
        print("locked", flush=True)
        time.sleep(2)
        db.execute("COMMIT")
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        modules = list(ptx_modules(scan_paths([run["inputs"][0]]), on_error=print))
        plan = zluda.prepare(database)
        with Cache(run["dir"] / "cache") as cache:
            report = precompile(modules, [plan.key.target], cache, per_entry=True)
            zluda.write_plan(zluda.plan_rows(plan, report, cache, zluda.entry_texts(modules)), cache)
    finally:
        assert holder.wait(timeout=60) == 0
    after = snapshot(database)
    assert [r.status for r in plan.rows] == ["written", "written"]
    assert len(after["rows"]) == 4 and after["total"] == after["sum"]


def test_a_read_only_database_is_refused_before_translating(run, tmp_path):
    database = copy_database(run, tmp_path)
    before = snapshot(database)
    os.chmod(database, 0o444)
    try:
        proc = fatkit("precompile", str(run["inputs"][0]), "--format", "zluda", "--zluda-db", str(database),
                      "--cache", str(tmp_path / "empty-cache"), check=1)
    finally:
        os.chmod(database, 0o644)
    message = " ".join(proc.stderr.split())
    assert "read-only" in message and "every lookup misses" in message
    assert not (tmp_path / "empty-cache").exists()  # refused before any translation
    assert snapshot(database) == before
    os.chmod(tmp_path, 0o555)
    try:
        with pytest.raises(zluda.ZludaRefusal, match="WAL mode"):
            zluda.prepare(database)
    finally:
        os.chmod(tmp_path, 0o755)


def test_no_row_and_no_flags_is_refused_with_the_instruction(tmp_path):
    database = make_zluda_database(tmp_path / "zluda2.db", seed=False)
    with pytest.raises(zluda.ZludaRefusal, match="run one CUDA program under this ZLUDA build"):
        zluda.prepare(database)
    with pytest.raises(zluda.ZludaRefusal, match="give --clock-rate$"):
        zluda.prepare(database, SHA, "gfx1100")
    plan = zluda.prepare(database, SHA, "gfx90a:sramecc+:xnack-", 1_700_000)
    assert plan.key.to_json() == {"compiler_version": "builtin", "zluda_version": SHA, "backend_key":
                                  '{"is_debug":false,"clock_rate":1700000}', "device": "gfx90a:sramecc+:xnack-",
                                  "from": "given by --zluda-version --device --clock-rate"}
    assert plan.key.target == "gfx90a:sramecc+:xnack-" and plan.key.processor == "gfx90a"


@pytest.mark.parametrize("version, device, clock, reason", [
    ("8a7931b", None, None, "full 40-digit lowercase git SHA"),
    (SHA.upper(), None, None, "full 40-digit lowercase git SHA"),
    (None, "sm_90", None, "not a gcnArchName"),
    (None, None, 0, "clock in kHz"),
])
def test_malformed_key_flags_are_refused(tmp_path, version, device, clock, reason):
    database = make_zluda_database(tmp_path / "zluda2.db")
    with pytest.raises(zluda.ZludaRefusal, match=reason):
        zluda.prepare(database, version, device, clock)


def test_the_key_is_the_most_recently_used_zluda_key_and_flags_override_fields(tmp_path):
    database = make_zluda_database(tmp_path / "zluda2.db")
    other = "1" * 40
    fatkit_blob = zluda.row_binary(sample("amd_gfx1100_v4.hsaco").read_bytes(), "f" * 64, 89)
    with opened(database) as db:
        insert_row(db, "a" * 64, b"older", version="2" * 40, last_access=5)
        insert_row(db, "b" * 64, b"debug", version=other, device="gfx1201", key='{"is_debug":true,"clock_rate":7}',
                   last_access=int(time.time() * 1000))
        # fatkit's rows never seed the key, however recent
        insert_row(db, "f" * 64, fatkit_blob, version="3" * 40, last_access=int(time.time() * 1000) + 10_000)
    plan = zluda.prepare(database)
    assert (plan.key.zluda_version, plan.key.device, plan.key.backend_key) == (
        other, "gfx1201", '{"is_debug":true,"clock_rate":7}')
    assert sorted(k["zluda_version"] for k in plan.other_keys) == ["2" * 40, SHA]
    plan = zluda.prepare(database, clock_rate=2_100_000)
    assert plan.key.backend_key == '{"is_debug":true,"clock_rate":2100000}' and plan.key.device == "gfx1201"


def test_only_a_database_zluda_created_is_written(tmp_path):
    with pytest.raises(zluda.ZludaRefusal, match="does not exist: run a CUDA program under ZLUDA"):
        zluda.prepare(tmp_path / "missing.db", SHA, "gfx1100", 1)
    other = tmp_path / "other.db"
    with opened(other) as db:
        db.execute(DIESEL_TABLE)
        db.execute("CREATE TABLE modules (hash TEXT)")
    with pytest.raises(zluda.ZludaRefusal, match="another schema"):
        zluda.prepare(other, SHA, "gfx1100", 1)
    (tmp_path / "text.db").write_text("not sqlite")
    with pytest.raises(zluda.ZludaRefusal, match="not ZLUDA's cache database"):
        zluda.prepare(tmp_path / "text.db", SHA, "gfx1100", 1)


def test_default_location_follows_dirs_cache_dir():
    tail = Path("zluda/ComputeCache/zluda2.db")
    assert zluda.default_database({"HOME": "/h", "XDG_CACHE_HOME": "/x"}, "linux") == Path("/x") / tail
    assert zluda.default_database({"HOME": "/h", "XDG_CACHE_HOME": "rel"}, "linux") == Path("/h/.cache") / tail
    assert zluda.default_database({"HOME": "/h"}, "darwin") == Path("/h/Library/Caches") / tail
    assert zluda.default_database({"LOCALAPPDATA": "C:/L"}, "win32") == Path("C:/L") / tail


def test_code_objects_are_checked_against_the_device():
    """Wave64 CDNA code is fine (ZLUDA checks no wave size, fatkit's gfx9 lowering keeps 32-lane warps); the
    processor, the feature settings, the code object version and the PTX names are checked."""
    facts = zluda.PtxFacts(64, 90, ("saxpy", "with_struct"), (), ())
    gfx90a = sample("amd_gfx90a_v5.hsaco").read_bytes()
    assert zluda.code_object_problem(gfx90a, facts, "gfx90a:sramecc+:xnack-") is None
    missing = zluda.PtxFacts(64, 90, ("saxpy", "_Z5saxpyfPKfPfi"), ("table",), ())
    assert "kernels ['_Z5saxpyfPKfPfi'] are not in the code object" in zluda.code_object_problem(
        gfx90a, missing, "gfx90a")
    assert "globals ['table'] are not exported" in zluda.code_object_problem(
        gfx90a, zluda.PtxFacts(64, 90, ("saxpy",), ("table",), ()), "gfx90a")
    assert "is for gfx90a, the device is gfx1100" in zluda.code_object_problem(gfx90a, facts, "gfx1100")
    xnack_on = sample("amd_gfx90a_xnack+_v4.hsaco").read_bytes()
    assert "sets xnack on" in zluda.code_object_problem(xnack_on, facts, "gfx90a:xnack-")
    assert "v4" in zluda.code_object_problem(xnack_on, facts, "gfx90a:xnack+")
    assert zluda.read_zluda_section(gfx90a) is None
    assert zluda.read_zluda_section(with_zluda_section(gfx90a, 86)) == 86


def test_ptx_facts_read_the_interface_zluda_looks_up():
    facts = zluda.ptx_facts(".version 8.0\n.target sm_90a\n.address_size 64\n"
                            ".visible .global .align 4 .u32 shown;\n.global .align 1 .b8 internal[1];\n"
                            ".extern .global .align 4 .u32 elsewhere;\n.weak .const .align 4 .u32 weak_const = 1;\n"
                            ".global .texref tex;\n.global .samplerref smp;\n" + BODY.format(name="k"))
    # a .texref is HIP's textureReference, exported by name; a separate sampler has no HIP counterpart
    assert facts == zluda.PtxFacts(64, 90, ("k",), ("shown", "weak_const", "tex", "k_count"), ("smp",))
    assert zluda.ptx_facts(PTX_NO_ADDRESS_SIZE).address_size is None
