"""`fatkit precompile` and `fatkit cache`: selection, dedupe, incremental re-runs, pool, failures; few real codegens."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fatkit.cache import Cache, CacheError, lookup, make_key, ptx_hash
from fatkit.cache.key import translator_fingerprint
from fatkit.cache.precompile import arch_rank, plan, precompile, translate_job
from fatkit.translate.pipeline import Options
from fatkit.translate.targets.ids import TargetId
from fatkit.cache.store import DB_NAME
from fatkit.extract.scan import scan_paths
from fatkit.extract.select import PtxModule, ptx_modules
from fatkit.formats.hsaco import parse_code_object
from tests.helpers import sample
from tests.test_cache import sql
from tests.test_cli import fatkit
from tests.test_cli_translate import GOOD

HEADER = ".version 8.7\n.target sm_{sm}\n.address_size 64\n"
TENSOR = """
.visible .entry tc()
{
    tcgen05.fence::before_thread_sync;
    ret;
}
"""


def precompile_json(*args: str, check: int = 0) -> dict:
    return json.loads(fatkit("precompile", "--json", *args, check=check).stdout)


def module(text: str, arch: str | None, source: str = "lib.so", container: int | None = 0, entry: int = 0):
    return PtxModule(source, container, entry if container is not None else None, arch, f"m{entry}", text)


def scan(paths: list[Path]) -> list[PtxModule]:
    return list(ptx_modules(scan_paths(paths), on_error=pytest.fail))


def test_candidates_are_ordered_newest_first_and_identical_modules_deduped():
    assert sorted(["compute_90a", "compute_80", "compute_100", "compute_90", "compute_90f"], key=arch_rank) == [
        "compute_100", "compute_90", "compute_90f", "compute_90a", "compute_80"]
    old, new = HEADER.format(sm=80) + GOOD, HEADER.format(sm=90) + GOOD
    modules = [module(old, "compute_80", "a.so", 0, 0), module(new, "compute_90", "a.so", 0, 1),
               module(new, "compute_90", "b.so", 2, 0), module(old, "compute_80", "b.so", 2, 1),
               module(new, "compute_90", "c.so", 0, 0)]
    jobs, duplicates = plan(modules, [TargetId.parse("gfx942"), TargetId.parse("gfx1100")])
    assert duplicates == 1 and len(jobs) == 4  # {a.so c0, b.so c2} are one module; c.so's is another
    pair = jobs[0]
    assert [c.arch for c in pair.candidates] == ["compute_90", "compute_80"]
    assert pair.sources == ["a.so c0.e1 (compute_90)", "b.so c2.e0 (compute_90)"]
    assert {str(j.target) for j in jobs} == {"gfx942", "gfx1100"}


def test_selection_takes_the_newest_candidate_whose_every_kernel_lowers():
    newest_partial = HEADER.format(sm="100a") + TENSOR + GOOD
    older_complete = HEADER.format(sm=90) + GOOD
    outcome = translate_job([newest_partial, older_complete], Options(target="gfx1100"))
    assert outcome["index"] == 1 and outcome["error"] is None and outcome["store"]
    assert [k["status"] for k in outcome["kernels"]] == ["ok"]
    assert [k.name for k in parse_code_object(outcome["code_object"]).kernels] == ["good"]
    assert outcome["target_id"] == "gfx1100" and outcome["seconds"] > 0


def test_selection_without_a_lowerable_kernel_is_a_stored_negative_answer():
    outcome = translate_job([HEADER.format(sm="100a") + TENSOR, "this is not PTX"], Options(target="gfx942"))
    assert outcome["index"] == 0 and outcome["code_object"] is None and outcome["store"]
    assert outcome["kernels"][0]["status"] == "unsupported" and "tcgen05" in outcome["kernels"][0]["reason"]


def test_precompile_fills_the_cache_reruns_incrementally_and_shims_find_every_module(tmp_path):
    cache_dir = tmp_path / "cache"
    inputs = tmp_path / "in"
    inputs.mkdir()
    shutil.copy(sample("nv_kern_sm90.ptx"), inputs)
    shutil.copy(sample("nv_kern.fatbin"), inputs)
    partial = inputs / "partial.ptx"
    partial.write_text(HEADER.format(sm="100a") + TENSOR + GOOD)
    # in this process, so that one translator build (fingerprint) serves every run even while others edit it
    with Cache(cache_dir) as cache:
        cold = precompile(scan([inputs]), ["gfx1100"], cache, jobs=2).to_json()
        assert (cold["modules_total"], cold["modules_translated"], cold["modules_cached"]) == (3, 3, 0)
        assert cold["kernels_failed"] == 1
        assert cold["kernels_ok"] == 7 + 1 + len(_kernels(cold, "nv_kern.fatbin"))
        assert cold["compile_seconds_saved"] == pytest.approx(sum(m["compile_seconds"] for m in cold["modules"]),
                                                              abs=0.01)
        [tc] = [k for m in cold["modules"] for k in m["kernels"] if k["status"] != "ok"]
        assert tc["name"] == "tc" and "tcgen05" in tc["reason"]

        warm = precompile(scan([inputs]), ["gfx1100"], cache).to_json()
        assert (warm["modules_translated"], warm["modules_cached"]) == (0, 3)
        assert warm["compile_seconds_saved"] == pytest.approx(cold["compile_seconds_saved"], abs=0.01)
        assert warm["kernels_ok"] == cold["kernels_ok"] and warm["kernels_failed"] == 1

    # every module reported translated is what `fatkit cache lookup` returns
    for name in ("nv_kern_sm90.ptx", "nv_kern.fatbin", "partial.ptx"):
        out = tmp_path / f"{name}.hsaco"
        hit = json.loads(fatkit("cache", "lookup", "--json", "--ptx", str(inputs / name), "--target", "gfx1100",
                                "--cache", str(cache_dir), "-o", str(out)).stdout)
        assert hit["hit"] and {k.name for k in parse_code_object(out.read_bytes()).kernels} == {
            k["name"] for k in hit["entry"]["kernels"] if k["status"] == "ok"}

    # a new identical copy is a duplicate; a corrupted entry is reported and translated again; a stale one too
    shutil.copy(sample("nv_compress_all"), inputs)
    sql(cache_dir, "UPDATE entries SET code_object = zeroblob(length(code_object)) WHERE ptx_blake3 = ?",
         ptx_hash(sample("nv_kern_sm90.ptx").read_text()))
    sql(cache_dir, "UPDATE entries SET manifest = replace(manifest, ?, 'another-build') WHERE ptx_blake3 = ?",
         translator_fingerprint(), ptx_hash(partial.read_text()))
    with Cache(cache_dir) as cache:
        third = precompile(scan([inputs]), ["gfx1100"], cache).to_json()
    assert (third["modules_translated"], third["modules_cached"], third["modules_duplicate"]) == (2, 1, 1)
    assert len(third["problems"]) == 2  # the corrupted row, and the stale one whose checksum no longer matches
    assert json.loads(fatkit("cache", "verify", "--json", "--cache", str(cache_dir)).stdout)["corrupt"] == []
    listing = json.loads(fatkit("cache", "ls", "--json", "--cache", str(cache_dir)).stdout)
    assert len(listing["entries"]) == 3 and {e["translator"] for e in listing["entries"]} == {translator_fingerprint()}


def test_precompile_command_prints_the_documented_report(tmp_path):
    proc = fatkit("precompile", "--json", str(sample("nv_kern_sm90.ptx")), str(sample("nv_kern_sm90.ptx")),
                  "--target", "gfx1100", "--cache", str(tmp_path), "-j", "1")
    report = json.loads(proc.stdout)
    assert {"modules_total", "modules_translated", "modules_cached", "kernels_ok", "kernels_failed", "seconds",
            "compile_seconds_saved"} <= report.keys()
    assert report["modules_total"] == 1 and report["kernels_ok"] == 7 and report["kernels_failed"] == 0
    human = fatkit("precompile", str(sample("nv_kern_sm90.ptx")), "--target", "gfx1100", "--cache", str(tmp_path))
    assert "compile time a shim no longer pays" in human.stdout


def _kernels(report: dict, name: str) -> list:
    return [k for m in report["modules"] if m["source"].split("/")[-1].startswith(name) for k in m["kernels"]]


def test_stale_entries_of_another_translator_build_are_replaced(tmp_path):
    text = sample("nv_kern_sm90.ptx").read_text()
    with Cache(tmp_path) as cache:
        cache.put(make_key(text, "gfx1100"), b"old code", {"kernels": [], "translator": "another-build"})
        report = precompile([module(text, None, "k.ptx", None)], ["gfx1100"], cache)
        assert report.summary()["modules_translated"] == 1
        entry = cache.get(make_key(text, "gfx1100"))
        assert entry.manifest["translator"] == translator_fingerprint() and entry.code_object != b"old code"


def test_a_full_disk_stops_precompile_with_a_clear_error_and_a_valid_cache(tmp_path):
    text = sample("nv_kern_sm90.ptx").read_text()
    with Cache(tmp_path) as cache:
        cache.put(make_key("// kept\n", "gfx1100"), b"kept", {"kernels": []})
        pages = cache._db.execute("PRAGMA page_count").fetchone()[0]
        cache._db.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's SQLITE_FULL, as on a full disk
        with pytest.raises(CacheError, match="nothing was stored"):
            precompile([module(text, None, "k.ptx", None)], ["gfx1100"], cache)
    with Cache(tmp_path) as cache:
        assert cache.integrity() == [] and [e.code_object for e in cache.entries()] == [b"kept"]
    assert lookup(text.encode(), "gfx1100", tmp_path) is None


def test_cli_errors_are_one_line(tmp_path):
    proc = fatkit("precompile", str(sample("nv_kern_sm90.ptx")), "--target", "gfx942:xnack", "--cache",
                  str(tmp_path), check=2)  # a usage error, before any file is read
    assert "NAME+ or NAME-" in _one_line(proc.stderr)
    proc = fatkit("cache", "lookup", "--ptx", str(sample("nv_kern_sm90.ptx")), "--target", "gfx942", "--cache",
                  str(tmp_path / "none"), check=1)
    assert "no cache here" in _one_line(proc.stderr)
    proc = fatkit("precompile", str(sample("nv_kern_sm90.ptx")), "--target", "gfx942", "--format", "zluda",
                  "--device", "gfx942", "--zluda-version", "abc1234", "--clock-rate", "2100000", "--zluda-db",
                  str(tmp_path / "z.db"), check=1)
    assert "z.db does not exist: run a CUDA program under ZLUDA once" in _one_line(proc.stderr)
    assert not (tmp_path / DB_NAME).exists()  # refused before any translation


def _one_line(text: str) -> str:
    return " ".join(text.split())  # rich wraps long messages at the terminal width


def test_a_module_without_kernels_is_not_a_failure(tmp_path):
    """Device functions or data only (what nvcc's -rdc and library modules hold): nothing to translate."""
    text = HEADER.format(sm=90) + ".visible .func helper()\n{\n    ret;\n}\n"
    with Cache(tmp_path) as cache:
        for _ in range(2):  # translated, then served from the cache as the same settled answer
            report = precompile([module(text, None, "k.ptx", None)], ["gfx1100"], cache)
            summary = report.summary()
            assert summary["modules_failed"] == 0 and summary["modules_without_kernels"] == 1
            assert [m["status"] for m in report.modules] == ["no-kernels"]
