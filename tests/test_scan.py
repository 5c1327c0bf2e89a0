"""The scanner on committed samples: every discovery path, every input kind, verdicts, bad input."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from fatkit.extract.kernels import describe, kernel_names
from fatkit.extract.report import judge
from fatkit.extract.scan import scan_path, scan_paths
from fatkit.formats import fatbin

SAMPLES = Path(__file__).parent / "samples"


def one(name: str):
    binaries = list(scan_path(SAMPLES / name))
    assert len(binaries) == 1
    return binaries[0]


def kinds(binary) -> set[tuple[str, str, str | None]]:
    return {(e.kind, e.arch, e.compression) for e in binary.entries}


@pytest.mark.parametrize("name, ptx_codec", [
    ("nv_mode_default", "zstd"), ("nv_mode_size", "zstd"), ("nv_mode_speed", "lz4-block"), ("nv_mode_none", None),
])
def test_compress_modes_found_through_wrappers(name, ptx_codec):
    b = one(name)
    assert b.format == "elf-pie"
    assert not b.errors
    # CUDA 13 always device-links: a version-2 wrapper for the nvlink image and a version-1 one for the TU
    versions = sorted(c.wrapper["version"] for c in b.containers if c.wrapper)
    assert versions == [1, 2]
    assert all(c.section == ".nv_fatbin" and "wrapper" in c.found_by for c in b.containers)
    assert ("ptx", "compute_90", ptx_codec) in kinds(b)
    assert {("elf", "sm_80"), ("elf", "sm_90")} <= {(k, a) for k, a, _ in kinds(b)}
    assert b.verdict.amd == "yes"
    assert b.verdict.ptx_archs == ("compute_90",)


def test_rdc_finds_relfatbin_ptx():
    b = one("nv_rdc")
    sections = {c.section for c in b.containers}
    assert {".nv_fatbin", "__nv_relfatbin"} <= sections
    rel = [c for c in b.containers if c.section == "__nv_relfatbin"]
    assert all(c.wrapper and c.wrapper["version"] == 1 for c in rel)
    assert any(e.kind == "ptx" for c in rel for e in c.entries)
    assert b.verdict.amd == "yes", b.verdict


def test_section_headers_removed_still_found_by_magic_scan():
    b = one("nv_noshdr")
    assert b.containers
    assert all(c.found_by == ["magic-scan"] and c.section is None for c in b.containers)
    stripped = one("nv_stripped")
    describe(b, kernels=False, hashes=True)
    describe(stripped, kernels=False, hashes=True)
    assert {e.hash for e in b.entries} == {e.hash for e in stripped.entries}


def test_bin2c_fatbin_in_rodata_has_no_wrapper():
    b = one("nv_bin2c")
    embedded = [c for c in b.containers if c.section == ".rodata"]
    assert embedded and all(c.found_by == ["magic-scan"] and c.wrapper is None for c in embedded)


@pytest.mark.parametrize("name", ["nv_lld", "nv_lld_relr", "nv_relr", "nv_nopie", "nv_lib.so", "nv_kern.o",
                                  "nv_dlink.o"])
def test_every_linker_style_resolves_wrappers(name):
    b = one(name)
    assert not b.errors
    assert b.containers and all("wrapper" in c.found_by for c in b.containers)


def test_static_archive_members_are_binaries():
    binaries = list(scan_path(SAMPLES / "nv_lib.a"))
    assert len(binaries) >= 2
    assert all(b.path.startswith(str(SAMPLES / "nv_lib.a") + "!") and b.path.endswith(".o") for b in binaries)
    assert all(b.format == "elf-rel" and b.containers for b in binaries)


def test_hip_two_translation_units():
    b = one("amd_hip_two_tu")
    bundles = [c for c in b.containers if c.section == ".hip_fatbin"]
    assert len(bundles) == 2
    assert all(c.wrapper and c.wrapper["vendor"] == "hip" for c in bundles)
    assert b.verdict.amd == "native"
    assert all(t.startswith("gfx") for t in b.verdict.amd_targets)


def test_hip_compressed_bundle():
    b = one("amd_hip_ccob.so")
    ccobs = [c for c in b.containers if c.format == "ccob"]
    assert ccobs and ccobs[0].ccob["version"] == 3
    code = [e for e in ccobs[0].entries if e.kind == "hsaco"]
    assert code and all(e.payload[:4] == b"\x7fELF" for e in code)


@pytest.mark.parametrize("name, fmt, kind", [
    ("nv_kern_sm90.cubin", "cubin", "elf"),
    ("nv_kern_sm90.ptx", "ptx", "ptx"),
    ("amd_gfx942_sramecc+_xnack-_v5.hsaco", "hsaco", "hsaco"),
    ("nv_kern.fatbin", "fatbin", None),
    ("amd_plain.bundle", "offload-bundle", None),
    ("amd_ccob_v2.bundle", "ccob", None),
])
def test_standalone_device_files(name, fmt, kind):
    b = one(name)
    assert b.format == fmt
    assert b.containers and b.containers[0].found_by == ["file"]
    if kind:
        assert b.entries[0].kind == kind


def test_standalone_code_object_target_id():
    b = one("amd_gfx942_sramecc+_xnack-_v5.hsaco")
    assert b.entries[0].arch == "gfx942:sramecc+:xnack-"
    assert b.verdict.amd == "native"


def test_cubin_only_fatbin_is_not_translatable(tmp_path):
    cubin_bytes = (SAMPLES / "nv_kern_sm90.cubin").read_bytes()
    path = tmp_path / "cubin_only.fatbin"
    path.write_bytes(fatbin.build_container([fatbin.EntrySpec(kind=fatbin.KIND_ELF, sm=90, payload=cubin_bytes)]))
    b = list(scan_path(path))[0]
    assert b.verdict.amd == "no"
    assert "sm_90" in b.verdict.reason
    assert judge(b, by_kernel=True).amd == "no"


def test_partial_when_a_module_lacks_ptx(tmp_path):
    """Two modules (fatbins), one with PTX and one cubin-only with kernels: partial, module by module."""
    cubin_bytes = (SAMPLES / "nv_kern_sm90.cubin").read_bytes()
    ptx = (SAMPLES / "nv_kern_sm90.ptx").read_bytes()
    path = tmp_path / "two_modules.bin"
    path.write_bytes(
        fatbin.build_container([fatbin.EntrySpec(kind=fatbin.KIND_ELF, sm=80, payload=cubin_bytes, compression="zstd")])
        + fatbin.build_container([fatbin.EntrySpec(kind=fatbin.KIND_PTX, sm=90, payload=ptx)]))
    b = list(scan_path(path))[0]
    assert [c.found_by for c in b.containers] == [["file"], ["magic-scan"]]
    assert b.verdict.amd == "partial"
    assert "1 of 2 modules" in b.verdict.reason and "sm_80" in b.verdict.reason
    assert judge(b, by_kernel=True).amd == "yes"  # the same kernels are in the PTX


def test_partial_names_what_modules_without_ptx_hold(tmp_path):
    """A module holding only NVVM IR (as warp.so's do) is named as such, never as "only cubins ()"."""
    ptx = (SAMPLES / "nv_kern_sm90.ptx").read_bytes()
    path = tmp_path / "nvvm_module.bin"
    path.write_bytes(
        fatbin.build_container([fatbin.EntrySpec(kind=fatbin.KIND_NVVM, sm=90, payload=b"\x42\x43\xc0\xde" * 8)])
        + fatbin.build_container([fatbin.EntrySpec(kind=fatbin.KIND_PTX, sm=90, payload=ptx)]))
    b = list(scan_path(path))[0]
    assert b.verdict.amd == "partial"
    assert "1 of 2 modules have no PTX, only NVVM/LTO IR (" in b.verdict.reason and "()" not in b.verdict.reason


def test_module_without_kernels_does_not_block(tmp_path):
    """nvcc's device-link stub: a cubin-only module with no kernels needs no PTX."""
    stub = one("nv_mode_default").containers[0]
    assert stub.wrapper["version"] == 2 and not any(e.kind == "ptx" for e in stub.entries)
    assert all(kernel_names(e) == () for e in stub.entries)


def test_partial_when_some_kernels_lack_ptx(tmp_path):
    """A cubin whose kernels are not all in the PTX makes the binary partial, naming the kernels."""
    cubin_bytes = (SAMPLES / "nv_kern_sm90.cubin").read_bytes()
    ptx = b".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry only_this_one()\n{\nret;\n}\n"
    path = tmp_path / "mixed.fatbin"
    path.write_bytes(fatbin.build_container([
        fatbin.EntrySpec(kind=fatbin.KIND_ELF, sm=90, payload=cubin_bytes),
        fatbin.EntrySpec(kind=fatbin.KIND_PTX, sm=90, payload=ptx, compression="zstd"),
    ]))
    b = list(scan_path(path))[0]
    assert b.verdict.amd == "yes"  # one module, and it has PTX
    verdict = judge(b, by_kernel=True)
    assert verdict.amd == "partial"
    assert verdict.ptx_archs == ("compute_90",)
    assert "only_this_one" not in verdict.kernels_without_ptx and verdict.kernels_without_ptx


@pytest.mark.parametrize("compression", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
def test_wheel_members_read_without_unpacking(tmp_path, compression):
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", compression) as z:
        z.write(SAMPLES / "nv_lib.so", "pkg/libkern.so")
        z.writestr("pkg/__init__.py", "print('hi')\n")
    binaries = list(scan_path(wheel))
    assert [b.path for b in binaries] == [f"{wheel}!pkg/libkern.so"]
    assert binaries[0].verdict.amd == "yes"
    assert not list(tmp_path.glob("pkg*/"))  # nothing unpacked next to it


def test_directory_walk_skips_files_that_cannot_hold_code(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "notes.txt").write_text("nothing here")
    (tmp_path / "sub" / "k.cubin").write_bytes((SAMPLES / "nv_kern_sm90.cubin").read_bytes())
    seen = []
    binaries = list(scan_paths([tmp_path], on_file=seen.append))
    assert [Path(b.path).name for b in binaries] == ["k.cubin"]
    assert len(seen) == 2


def test_identical_payloads_share_a_hash():
    b = one("nv_mode_none")
    describe(b, kernels=False, hashes=True)
    by_hash = {}
    for e in b.entries:
        by_hash.setdefault(e.hash, []).append(e)
    assert len(by_hash) <= len(b.entries)
    assert all(len(set(x.payload for x in group)) == 1 for group in by_hash.values())


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9, 0.999])
def test_truncated_binary_reports_errors_never_raises(tmp_path, cut):
    data = (SAMPLES / "nv_mode_default").read_bytes()
    path = tmp_path / "truncated"
    path.write_bytes(data[:int(len(data) * cut)])
    b = list(scan_path(path))[0]
    describe(b, kernels=True, hashes=True)  # reads every payload; must not raise
    judge(b, by_kernel=True)
    b.to_json()
    for err in b.errors:
        assert err.path == str(path)


def test_garbage_file_has_nothing(tmp_path):
    path = tmp_path / "garbage.bin"
    path.write_bytes(bytes(range(256)) * 64 + fatbin.FATBIN_MAGIC.to_bytes(4, "little") + b"\xff" * 40)
    b = list(scan_path(path))[0]
    assert b.containers == [] and b.errors == []
    assert b.verdict.amd == "none"
