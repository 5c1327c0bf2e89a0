"""`fatkit lint` and `fatkit inspect --hazards` as a user runs them: JSON keys, --target, binaries, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli import fatkit

SAMPLES = Path(__file__).parent / "samples"
WARP = SAMPLES / "ptx" / "warp.sm_86.ptx"
HEADER = ".version 9.0\n.target sm_90\n.address_size 64\n"


def lint_json(*args: str, check: int = 0) -> dict:
    return json.loads(fatkit("lint", "--json", *args, check=check).stdout)


@pytest.fixture
def warp_ptx() -> Path:
    if not WARP.exists():
        pytest.skip(f"{WARP} not generated (tests/ptx_sources/build.sh)")
    return WARP


@pytest.fixture
def big_shared(tmp_path) -> Path:
    """A kernel with 80 KiB of static shared memory: over the LDS of gfx90a/gfx942/RDNA, under gfx950's."""
    path = tmp_path / "big_shared.ptx"
    path.write_text(HEADER + ".visible .entry big()\n{\n.reg .b32 %r<2>;\n.shared .align 16 .b8 tile[81920];\n"
                             "mov.u32 %r1, tile;\nret;\n}\n")
    return path


def kinds(report: dict) -> set[str]:
    return {h["kind"] for m in report["modules"] for k in m["kernels"] for h in k["hazards"]}


def test_json_keys_for_a_ptx_file_and_a_binary(warp_ptx):
    report = lint_json(str(warp_ptx), str(SAMPLES / "nv_mode_default"))
    assert report["target"] is None
    ptx, embedded = report["modules"]
    assert ptx["source"] == str(warp_ptx)
    assert embedded["source"] == f"{SAMPLES / 'nv_mode_default'}#c1.e2"  # container 1, entry 2 of `inspect`
    for module in report["modules"]:
        assert {"source", "parsed", "error", "kernels", "arch"} <= module.keys()
        assert module["parsed"] is True and module["error"] is None
        for kernel in module["kernels"]:
            assert {"name", "hazards", "static_shared_bytes", "dynamic_shared"} <= kernel.keys()
            for hazard in kernel["hazards"]:
                assert {"kind", "severity", "line", "message", "targets"} <= hazard.keys()
                assert hazard["severity"] in ("error", "warning", "info") and hazard["line"] > 0
    assert any(k["name"] == "_Z8shufflesPiPKiPfPd" for k in ptx["kernels"])
    assert {k["name"] for k in embedded["kernels"]} >= {"_Z5saxpyfPKfPfi", "_Z13reduce_sharedPKfPf"}
    assert all(not k["hazards"] for k in embedded["kernels"])
    summary = report["summary"]
    assert summary["modules"] == 2 and summary["unparsed"] == 0
    assert summary["by_kind"]["warp-shuffle"] == sum(
        h["kind"] == "warp-shuffle" for k in ptx["kernels"] for h in k["hazards"])


def test_target_filters_by_wave_size(warp_ptx):
    everything = kinds(lint_json(str(warp_ptx)))
    cdna = lint_json("--target", "gfx942", str(warp_ptx))
    rdna = lint_json("--target", "gfx1100", str(warp_ptx))
    assert cdna["target"] == "gfx942"
    assert kinds(cdna) == everything
    assert {"warp-shuffle", "warp-vote", "laneid", "lanemask"} <= everything - kinds(rdna)
    assert {"warp-match", "warp-reduce", "warp-sync"} <= kinds(rdna)
    assert all("wave32" in h["targets"] for m in rdna["modules"] for k in m["kernels"] for h in k["hazards"])


def test_target_filters_shared_memory_by_lds_size(big_shared):
    for target, over in (("gfx90a", True), ("gfx942:sramecc+:xnack-", True), ("gfx950", False),
                         ("gfx1201", True)):
        report = lint_json("--target", target, str(big_shared))
        (kernel,) = report["modules"][0]["kernels"]
        assert kernel["static_shared_bytes"] == 81920
        assert [h["kind"] for h in kernel["hazards"]] == (["shared-memory"] if over else []), target


def test_unknown_target_is_a_usage_error(big_shared):
    proc = fatkit("lint", "--target", "gfx800", str(big_shared), check=2)
    assert "gfx800" in proc.stderr


def test_a_module_that_does_not_parse(tmp_path, big_shared):
    bad = tmp_path / "bad.ptx"
    bad.write_text(HEADER + ".entry k()\n{\nfrobnicate %r1;\n}\n")
    report = lint_json(str(bad), str(big_shared))
    broken, fine = report["modules"]
    assert broken["parsed"] is False and "frobnicate" in broken["error"] and "bad.ptx:6:1:" in broken["error"]
    assert broken["kernels"] == [] and fine["parsed"] is True
    assert report["summary"]["unparsed"] == 1
    text = fatkit("lint", str(bad)).stdout
    assert "not parsed" in text and "frobnicate" in text


def test_fail_on_gate(tmp_path, big_shared):
    clean = tmp_path / "clean.ptx"
    clean.write_text(HEADER + ".visible .entry k()\n{\nret;\n}\n")
    fatkit("lint", "--fail-on", "info", str(clean))
    fatkit("lint", "--fail-on", "error", str(big_shared), check=3)
    fatkit("lint", "--fail-on", "error", "--target", "gfx950", str(big_shared))  # fits gfx950's LDS
    fatkit("lint", "--fail-on", "fatal", str(clean), check=2)


def test_human_output(warp_ptx, big_shared):
    text = fatkit("lint", str(warp_ptx), str(big_shared)).stdout
    assert "warp.sm_86.ptx" in text and "big_shared.ptx" in text
    for word in ("warp-shuffle", "warp-match", "laneid", "shared-memory", "wave64", "worst: error"):
        assert word in text, word
    assert "2 PTX modules" in text


def test_binaries_inside_directories(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "app").write_bytes((SAMPLES / "nv_mode_default").read_bytes())
    report = lint_json(str(tmp_path))
    assert [m["source"] for m in report["modules"]] == [f"{tmp_path / 'lib' / 'app'}#c1.e2"]
    assert "no PTX found" in fatkit("lint", str(SAMPLES / "nv_sm90a.fatbin")).stdout


def test_inspect_hazards(warp_ptx):
    out = json.loads(fatkit("inspect", "--json", "--hazards", str(warp_ptx), str(SAMPLES / "nv_mode_default")).stdout)
    warp, binary = out["binaries"]
    assert warp["hazards"]["modules"] == 1 and warp["hazards"]["worst"] == "warning"
    assert warp["hazards"]["by_severity"]["warning"] > 0 and warp["hazards"]["by_kind"]["warp-shuffle"] > 0
    assert binary["hazards"]["modules"] == 1 and binary["hazards"]["by_kind"] == {}
    plain = json.loads(fatkit("inspect", "--json", str(warp_ptx)).stdout)
    assert "hazards" not in plain["binaries"][0]
    text = fatkit("inspect", "--hazards", str(warp_ptx)).stdout
    assert "PTX hazards" in text and "warp-shuffle" in text
