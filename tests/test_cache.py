"""The cache store and key: synthetic entries (translation is not the point here), real processes and files."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import blake3

import pytest

from fatkit.cache import (Cache, CacheError, compatible_targets, find, lookup, make_key, normalize_target, ptx_hash,
                          ptx_texts)
from fatkit.cache.store import DB_NAME, TOUCH_AFTER_MS
from fatkit.errors import UsageError
from fatkit.translate import toolchain
from fatkit.translate.pipeline import CHANGES_CODE
from fatkit.extract.scan import scan_path
from fatkit.formats.fatbin import KIND_PTX, EntrySpec, build_container
from tests.helpers import sample

PTX = "//\n.version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k{n}() {{ ret; }}\n"


def ptx(n: int) -> str:
    return PTX.format(n=n)


def blob(n: int, size: int = 256) -> bytes:
    """Content derived from n alone: every writer of key n writes the same bytes, and a reader can check them."""
    seed = blake3.blake3(str(n).encode()).digest(length=size)
    return seed


def manifest(n: int) -> dict:
    return {"kernels": [{"name": f"k{n}", "status": "ok", "reason": None, "line": None}], "seconds": 0.5,
            "source": f"synthetic {n}"}


def fill(directory: Path, numbers, size: int = 256, target: str = "gfx942") -> None:
    with Cache(directory) as cache:
        for n in numbers:
            cache.put(make_key(ptx(n), target), blob(n, size), manifest(n))


# --- keys -------------------------------------------------------------------------------------------------


def test_ptx_hash_strips_trailing_nuls_only():
    text = ptx(1).encode()
    assert ptx_hash(text) == ptx_hash(text + b"\0\0\0") == blake3.blake3(text).hexdigest()
    assert ptx_hash(text) == ptx_hash(text.decode())
    assert ptx_hash(b"\0" + text) != ptx_hash(text)


def test_target_ids_are_normalised_and_checked():
    assert normalize_target("gfx942") == "gfx942"
    assert normalize_target("gfx942:xnack-:sramecc+") == "gfx942:sramecc+:xnack-"
    assert normalize_target("amdgcn-amd-amdhsa--gfx90a:xnack+") == "gfx90a:xnack+"
    for bad in ("gfx942:xnack", "gfx942:xnack+:xnack-", "gfx942:wavefrontsize64+", "sm_90", "host", ""):
        with pytest.raises(UsageError):
            normalize_target(bad)


def test_compatible_targets_drop_features_most_specific_first():
    assert compatible_targets("gfx942:sramecc+:xnack-") == [
        "gfx942:sramecc+:xnack-", "gfx942:xnack-", "gfx942:sramecc+", "gfx942"]
    assert compatible_targets("gfx1100") == ["gfx1100"]


def test_key_fields_separate_targets_abi_and_options():
    from fatkit.translate.pipeline import Options

    base = make_key(ptx(1), "gfx942")
    assert base != make_key(ptx(1), "gfx942:sramecc+")
    assert base != make_key(ptx(1), Options(target="gfx942", opt_level=3))
    assert base.abi >= 1
    assert base == make_key(ptx(1), Options(target="gfx942", jobs=8))  # jobs cannot change the code
    llvm, lld = (f"{name}={version}" for name, version in toolchain.versions())
    assert base.options == f"opt_level=2;emit=hsaco;mma_numerics=default;{llvm};{lld}"
    exact = make_key(ptx(1), Options(target="gfx942", mma_numerics="exact"))
    assert exact != base and "mma_numerics=exact" in exact.options


def test_a_new_options_field_is_in_the_key_without_an_edit():
    from fatkit.translate.pipeline import Options

    # what another change adds to Options: a field with a default is in every key, spelled by name
    Rounding = dataclasses.make_dataclass("Rounding", [("fp_rounding", str, dataclasses.field(default="sm90"))],
                                          bases=(Options,), frozen=True)
    default, other = Rounding(target="gfx942"), Rounding(target="gfx942", fp_rounding="exact")
    assert "fp_rounding=sm90" in make_key(ptx(1), default).options
    assert make_key(ptx(1), default) != make_key(ptx(1), other)
    assert make_key(ptx(1), default) != make_key(ptx(1), Options(target="gfx942"))
    assert make_key(ptx(1), dataclasses.replace(other, fp_rounding="sm90")) == make_key(ptx(1), default)

    @dataclasses.dataclass(frozen=True)
    class Workers(Options):  # a field marked as unable to change code stays out of the key
        threads: int = dataclasses.field(default=4, compare=False, metadata={CHANGES_CODE: False})

    assert make_key(ptx(1), Workers(target="gfx942", threads=9)) == make_key(ptx(1), "gfx942")


def test_the_key_changes_with_the_toolchain(monkeypatch):
    base = make_key(ptx(1), "gfx942")
    monkeypatch.setattr(toolchain, "llvm_version", lambda: "23.0.0git")
    newer_llvm = make_key(ptx(1), "gfx942")
    assert newer_llvm != base and "llvm=23.0.0git" in newer_llvm.options
    monkeypatch.setattr(toolchain, "lld_version", lambda: "ziglang-0.99.0")
    assert make_key(ptx(1), "gfx942") not in (base, newer_llvm)


def test_ptx_texts_of_fatbin_raw_ptx_and_cubin():
    texts = [ptx(1).encode(), ptx(2).encode()]
    fatbin = build_container([EntrySpec(kind=KIND_PTX, sm=80, payload=texts[0]),
                              EntrySpec(kind=KIND_PTX, sm=90, payload=texts[1])])
    assert ptx_texts(fatbin) == [texts[1], texts[0]]  # newest first, NUL padding gone
    assert ptx_texts(texts[0] + b"\0garbage after the terminator") == [texts[0]]
    assert ptx_texts(sample("nv_kern_sm90.cubin").read_bytes()) == []
    [from_sample] = ptx_texts(sample("nv_kern.fatbin").read_bytes())  # zstd-compressed entry
    [scanned] = [e for c in scan_path(sample("nv_kern.fatbin")).__next__().containers for e in c.entries
                 if e.kind == "ptx"]
    assert from_sample == scanned.payload and ptx_hash(from_sample) == blake3.blake3(scanned.payload).hexdigest()
    assert b".entry _Z5saxpyfPKfPfi" in from_sample and not from_sample.endswith(b"\0")


# --- store ------------------------------------------------------------------------------------------------


def test_put_get_roundtrip_and_lookup_from_image(tmp_path):
    fill(tmp_path, [1, 2])
    with Cache(tmp_path) as cache:
        entry = cache.get(make_key(ptx(1), "gfx942"))
        assert entry.code_object == blob(1) and entry.manifest == manifest(1)
        assert cache.get(make_key(ptx(3), "gfx942")) is None
        fatbin = build_container([EntrySpec(kind=KIND_PTX, sm=90, payload=ptx(2).encode())])
        assert find(cache, fatbin, "gfx942:sramecc+:xnack-").code_object == blob(2)
        assert find(cache, fatbin, "gfx1100") is None
    assert lookup(ptx(1).encode() + b"\0", "gfx942", tmp_path).code_object == blob(1)
    assert lookup(ptx(1).encode(), "gfx942", tmp_path / "nowhere") is None


def test_negative_entries_are_not_served_as_code(tmp_path):
    with Cache(tmp_path) as cache:
        cache.put(make_key(ptx(1), "gfx942"), None, {"kernels": [], "error": "no kernel lowered"})
        assert cache.get(make_key(ptx(1), "gfx942")).code_object is None
        assert find(cache, ptx(1).encode(), "gfx942") is None


def _writer(directory: str, numbers: list[int]) -> None:
    fill(Path(directory), numbers, size=4096)


def test_four_concurrent_writer_processes_with_overlapping_keys(tmp_path):
    ranges = [range(0, 40), range(20, 60), range(40, 80), range(0, 80, 3)]
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_writer, args=(str(tmp_path), list(r))) for r in ranges]
    for w in writers:
        w.start()
    for w in writers:
        w.join(60)
        assert w.exitcode == 0
    with Cache(tmp_path) as cache:
        assert cache.integrity() == []
        entries = list(cache.entries())
        assert not cache.problems
        assert len(entries) == 80
        for n in range(80):
            assert cache.get(make_key(ptx(n), "gfx942")).code_object == blob(n, 4096)


_KILLED_WRITER = """
import sys
from fatkit.cache import Cache, make_key
cache = Cache(sys.argv[1])
n = 0
print("ready", flush=True)
while True:
    text = f"// {n}\\n.version 8.0\\n"
    cache.put(make_key(text, "gfx942"), bytes([n % 256]) * 200_000, {"kernels": [], "n": n})
    n += 1
"""


def test_kill_9_during_writes_leaves_a_valid_cache(tmp_path):
    for delay in (0.3, 0.55, 0.8):
        child = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(tmp_path)], stdout=subprocess.PIPE)
        assert child.stdout.readline().strip() == b"ready"
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait()
        with Cache(tmp_path) as cache:
            assert cache.integrity() == []
            entries = list(cache.entries())
            assert entries and not cache.problems
            for entry in entries:
                assert entry.code_object == bytes([entry.manifest["n"] % 256]) * 200_000


def sql(directory: Path, statement: str, *args) -> None:
    """Change the database behind the cache's back (as a bit flip or another program would)."""
    db = sqlite3.connect(directory / DB_NAME)
    db.execute(statement, args)
    db.commit()
    db.close()


def test_corrupted_entries_are_detected_ignored_reported_and_collected(tmp_path):
    fill(tmp_path, range(4))
    flipped = bytearray(blob(1))
    flipped[100] ^= 0x01
    sql(tmp_path, "UPDATE entries SET code_object = ? WHERE ptx_blake3 = ?", bytes(flipped),
             ptx_hash(ptx(1)))
    sql(tmp_path, "UPDATE entries SET manifest = replace(manifest, 'synthetic', 'Synthetic') "
                       "WHERE ptx_blake3 = ?", ptx_hash(ptx(2)))
    sql(tmp_path, "UPDATE entries SET code_object = substr(code_object, 1, 10) WHERE ptx_blake3 = ?",
             ptx_hash(ptx(3)))
    with Cache(tmp_path) as cache:
        assert cache.get(make_key(ptx(0), "gfx942")).code_object == blob(0)
        for n in (1, 2, 3):
            assert cache.get(make_key(ptx(n), "gfx942")) is None
        assert [p.key.ptx_blake3 for p in cache.problems] == [ptx_hash(ptx(n)) for n in (1, 2, 3)]
        assert all("checksum" in p.reason for p in cache.problems)
    assert lookup(ptx(1).encode(), "gfx942", tmp_path) is None
    with Cache(tmp_path) as cache:
        removed, evicted = cache.gc()
        assert sorted(k.ptx_blake3 for k in removed) == sorted(ptx_hash(ptx(n)) for n in (1, 2, 3))
        assert [e.key.ptx_blake3 for e in cache.entries()] == [ptx_hash(ptx(0))] and not evicted


def test_gc_removes_rows_of_a_stale_key_scheme_and_keeps_other_toolchains(tmp_path):
    """Rows keyed `O2` (the options column before it was derived from Options) or without a field added to
    Options since are never served and are collected; a row of another LLVM (a shim may serve it) stays."""
    fill(tmp_path, range(5))
    current = make_key(ptx(0), "gfx942").options
    llvm = next(part for part in current.split(";") if part.startswith("llvm="))
    stale = {1: "O2",  # the hand-kept key: f"O{opt_level}"
             # written before mma_numerics was an Options field
             2: ";".join(part for part in current.split(";") if not part.startswith("mma_numerics=")),
             3: current + ";fp_mode=sm90"}  # by a fatkit whose Options has a field this one lacks
    for n, options in stale.items():
        sql(tmp_path, "UPDATE entries SET options = ? WHERE ptx_blake3 = ?", options, ptx_hash(ptx(n)))
    other_llvm = current.replace(llvm, "llvm=19.1.7")
    sql(tmp_path, "UPDATE entries SET options = ? WHERE ptx_blake3 = ?", other_llvm, ptx_hash(ptx(4)))
    with Cache(tmp_path) as cache:
        for n in stale:
            assert cache.get(make_key(ptx(n), "gfx942")) is None  # never served
        removed, evicted = cache.gc()
        assert sorted((k.ptx_blake3, k.options) for k in removed) == sorted(
            (ptx_hash(ptx(n)), options) for n, options in stale.items())
        assert not evicted and not cache.problems
        kept = {(e.key.ptx_blake3, e.key.options) for e in cache.entries()}
    assert kept == {(ptx_hash(ptx(0)), current), (ptx_hash(ptx(4)), other_llvm)}
    out = subprocess.run([sys.executable, "-m", "fatkit", "cache", "gc", "--cache", str(tmp_path), "--json"],
                         capture_output=True, text=True, check=True).stdout
    assert '"removed": []' in out  # a second collection finds nothing more


def test_a_database_file_that_is_not_sqlite_is_a_clear_error(tmp_path):
    (tmp_path / DB_NAME).write_bytes(b"this is not a database" * 100)
    with pytest.raises(CacheError, match="move the file aside"):
        Cache(tmp_path)


def test_lru_eviction_keeps_recently_used_entries(tmp_path):
    with Cache(tmp_path) as cache:
        cache.set_max_size(10 * 1120)  # room for 10 entries of ~1107 bytes
        for n in range(8):
            cache.put(make_key(ptx(n), "gfx942"), blob(n, 1000), manifest(n))
            time.sleep(0.002)
        # an old read refreshes last use: make entry 0 look stale, then read it
        sql(tmp_path, "UPDATE entries SET last_access = last_access - ? WHERE ptx_blake3 = ?",
                 TOUCH_AFTER_MS + 1, ptx_hash(ptx(1)))
        sql(tmp_path, "UPDATE entries SET last_access = 0 WHERE ptx_blake3 = ?", ptx_hash(ptx(0)))
        assert cache.get(make_key(ptx(0), "gfx942")) is not None  # touched: now the most recent
        for n in range(8, 12):
            cache.put(make_key(ptx(n), "gfx942"), blob(n, 1000), manifest(n))
            time.sleep(0.002)
        kept = {e.key.ptx_blake3 for e in cache.entries()}
        assert cache.total_size() <= 10 * 1120 and len(kept) == 10
        assert ptx_hash(ptx(0)) in kept and ptx_hash(ptx(11)) in kept
        assert ptx_hash(ptx(1)) not in kept and ptx_hash(ptx(2)) not in kept
        evicted = cache.set_max_size(3 * 1120)
        assert len(list(cache.entries())) == 3 and len(evicted) == len(kept) - 3


def test_a_copied_cache_directory_still_works(tmp_path):
    fill(tmp_path / "a", range(5))
    shutil.copytree(tmp_path / "a", tmp_path / "elsewhere" / "b")
    shutil.rmtree(tmp_path / "a")
    with Cache(tmp_path / "elsewhere" / "b") as cache:
        assert cache.integrity() == [] and len(list(cache.entries())) == 5
    assert lookup(ptx(4).encode(), "gfx942", tmp_path / "elsewhere" / "b").code_object == blob(4)


_READ_ONLY_CHILD = """
import os, sys
from fatkit.cache import Cache, CacheError, lookup, make_key
from fatkit.translate import toolchain
toolchain.versions()  # loads llvmlite and reads ziglang's metadata now: nobody cannot read root's home
if os.geteuid() == 0:
    os.setgid(65534); os.setuid(65534)  # root ignores permissions: drop to nobody
directory, text, expected = sys.argv[1:]
assert lookup(text.encode(), "gfx942", directory).code_object == bytes.fromhex(expected)
try:
    Cache(directory).put(make_key("x", "gfx942"), b"x", {})
except CacheError as exc:
    print("refused:", exc)
"""


def test_read_only_cache_serves_lookups_and_refuses_writes_clearly():
    base = Path(tempfile.mkdtemp())  # not under pytest's 0700 tmp dir: the unprivileged child must reach it
    directory = base / "ro"
    try:
        fill(directory, [1])
        os.chmod(directory / DB_NAME, 0o444)
        os.chmod(directory, 0o555)
        os.chmod(base, 0o755)
        checkout = str(Path(__file__).resolve().parent.parent)  # this checkout's fatkit, not an installed one
        result = subprocess.run([sys.executable, "-c", _READ_ONLY_CHILD, str(directory), ptx(1), blob(1).hex()],
                                capture_output=True, text=True, timeout=60, cwd="/",
                                env={**os.environ, "PYTHONPATH": checkout})
        assert result.returncode == 0, result.stderr
        assert "refused:" in result.stdout and "cannot open the cache for writing" in result.stdout
        assert not (directory / f"{DB_NAME}-wal").exists()
    finally:
        os.chmod(directory, 0o755)
        shutil.rmtree(base)


def test_disk_full_stores_nothing_and_keeps_what_was_there(tmp_path):
    fill(tmp_path, range(3))
    with Cache(tmp_path) as cache:
        pages = cache._db.execute("PRAGMA page_count").fetchone()[0]
        cache._db.execute(f"PRAGMA max_page_count = {pages + 2}")  # SQLite's own SQLITE_FULL path
        with pytest.raises(CacheError, match="nothing was stored"):
            cache.put(make_key(ptx(9), "gfx942"), blob(9, 200_000), manifest(9))
        assert cache.get(make_key(ptx(9), "gfx942")) is None
        assert [cache.get(make_key(ptx(n), "gfx942")).code_object for n in range(3)] == [blob(n) for n in range(3)]
    with Cache(tmp_path) as cache:
        assert cache.integrity() == [] and len(list(cache.entries())) == 3
        cache.put(make_key(ptx(9), "gfx942"), blob(9, 200_000), manifest(9))  # space again: recovered
        assert cache.get(make_key(ptx(9), "gfx942")).code_object == blob(9, 200_000)
