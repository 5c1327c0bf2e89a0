"""`repack` of Windows images: the `.fatkit` section added to tests/samples/pe_kern.dll, to a `win_amd64` wheel
holding it, and (payload only, no translation) to the four corpus DLLs; read back by lief, by llvm-readobj-19
(`--coff-*`), by llvm-objcopy-22 + clang-offload-bundler-22 and by fatkit; signed files warned about or refused.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import lief
import pytest

from fatkit.cache import Cache
from fatkit.cache.key import ptx_hash
from fatkit.errors import FatkitError
from fatkit.extract.kernels import describe, kernel_names
from fatkit.extract.scan import scan_path
from fatkit.formats.fatkit_amd import Manifest, build_payload, read_payload
from fatkit.formats.pe import PeView
from fatkit.repack import PE_SECTION_NAME, repack_binary
from fatkit.repack.pe_patch import INTEGRITY_WARNING, UNSIGNED_WARNING, add_section
from fatkit.repack.wheel import repack_wheel
from tests.corpus import corpus_file
from tests.test_repack import check_bundler
from tests.test_repack_wheel import Item, build_wheel, record_problems

SAMPLE = Path(__file__).parent / "samples" / "pe_kern.dll"
READOBJ = Path("/usr/lib/llvm-19/bin/llvm-readobj")
READOBJ_OPTIONS = ("--file-headers", "--sections", "--coff-imports", "--coff-exports", "--coff-basereloc",
                   "--coff-load-config", "--coff-debug-directory", "--coff-tls-directory", "--coff-resources")
TARGET = "gfx942"
WHEEL_NAME = "demo_win-0.1-cp312-cp312-win_amd64.whl"


def fatkit(*args: str, check: int | None = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "fatkit", *args], capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).parent.parent)
    if check is not None:
        assert proc.returncode == check, proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr + proc.stdout
    return proc


@pytest.fixture(scope="module")
def repacked(tmp_path_factory):
    out = tmp_path_factory.mktemp("pe-repack")
    result = repack_binary(SAMPLE, out / SAMPLE.name, [TARGET], cache=out / "cache")
    return result, out / SAMPLE.name


def _header_fields(view: PeView) -> set[int]:
    """File offsets of the bytes repack may change: NumberOfSections, SizeOfImage, SizeOfInitializedData,
    CheckSum and the section header slot after the last original one."""
    ranges = [(view.coff_header_offset + 2, 2), (view.optional_offsets["size_of_image"], 4),
              (view.optional_offsets["size_of_initialized_data"], 4), (view.optional_offsets["checksum"], 4),
              (view.section_header_offset(len(view.sections)), 40)]
    return {offset for start, size in ranges for offset in range(start, start + size)}


def check_patch(original: Path, patched: Path, payload: bytes | None = None) -> lief.PE.Binary:
    """Every guarantee of pe_patch.py, read with lief (not fatkit's reader): returns lief's reading."""
    old, new = original.read_bytes(), patched.read_bytes()
    view = PeView(old)
    changed = {i for i in range(len(old)) if old[i] != new[i]}
    assert changed <= _header_fields(view)
    before, after = lief.PE.parse(str(original)), lief.PE.parse(str(patched))
    assert len(after.sections) == len(before.sections) + 1
    for a, b in zip(before.sections, after.sections):
        assert (a.name, a.virtual_address, a.virtual_size, a.pointerto_raw_data, a.sizeof_raw_data,
                a.characteristics, bytes(a.content)) == \
               (b.name, b.virtual_address, b.virtual_size, b.pointerto_raw_data, b.sizeof_raw_data,
                b.characteristics, bytes(b.content))
    added = after.sections[-1]
    assert added.name == PE_SECTION_NAME and added.characteristics == 0x40000040  # initialized, read-only
    last = before.sections[-1]
    alignment = before.optional_header.section_alignment
    assert added.virtual_address == -(-(last.virtual_address + last.virtual_size) // alignment) * alignment
    assert added.pointerto_raw_data >= len(old)
    assert added.pointerto_raw_data % before.optional_header.file_alignment == 0
    end = added.virtual_address + added.virtual_size
    assert after.optional_header.sizeof_image == -(-end // alignment) * alignment
    assert after.optional_header.sizeof_initialized_data == \
        before.optional_header.sizeof_initialized_data + added.sizeof_raw_data
    assert after.optional_header.sizeof_headers == before.optional_header.sizeof_headers
    content = new[added.pointerto_raw_data:added.pointerto_raw_data + added.virtual_size]
    if payload is not None:
        assert content == payload
    assert read_payload(content).to_json()["format"] == "fatkit-amd"
    assert [i.name for i in after.imports] == [i.name for i in before.imports]
    assert [(e.address, e.type) for r in after.relocations for e in r.entries] == \
           [(e.address, e.type) for r in before.relocations for e in r.entries]
    assert before.has_exports and [(e.name, e.address) for e in after.get_export().entries] == \
           [(e.name, e.address) for e in before.get_export().entries]
    if before.optional_header.checksum:
        assert after.optional_header.checksum == after.compute_checksum() != before.optional_header.checksum
    else:
        assert after.optional_header.checksum == 0
    return after


def check_readobj(patched: Path) -> None:
    if not READOBJ.exists():
        pytest.skip("llvm-readobj-19 is not installed (apt-get install llvm-19)")
    proc = subprocess.run([str(READOBJ), *READOBJ_OPTIONS, str(patched)], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "warning" not in proc.stdout.lower() and f"Name: {PE_SECTION_NAME} " in proc.stdout


def test_the_sample_is_repacked_and_keeps_every_guarantee(repacked, tmp_path):
    result, patched = repacked
    assert result.status == "repacked" and result.code_objects == 1 and result.problems == []
    assert result.to_json()["section"] == PE_SECTION_NAME
    check_patch(SAMPLE, patched, None)
    check_readobj(patched)
    manifest = check_bundler(patched, tmp_path, PE_SECTION_NAME)  # llvm-objcopy + clang-offload-bundler
    assert len(manifest.code_objects) == 1


def test_fatkit_reads_back_the_section_and_maps_it_to_the_ptx(repacked):
    _, patched = repacked
    (binary,) = scan_path(patched)
    assert binary.format == "pe-dll" and binary.errors == []
    nvidia, amd = binary.containers
    assert (nvidia.section, amd.section, amd.found_by) == (".nv_fatb", PE_SECTION_NAME, ["section"])
    ptx = next(e for e in nvidia.entries if e.kind == "ptx")
    (code_object,) = [e for e in amd.entries if e.kind == "hsaco"]
    assert code_object.arch == TARGET and code_object.translated_from["ptx_blake3"] == ptx_hash(ptx.payload)
    assert code_object.translated_from["sources"] == ["c0.e2"] and kernel_names(code_object)
    again = repack_binary(patched, patched.parent / "twice.dll", [TARGET])
    assert again.status == "error" and "already holds a .fatkit section" in again.reason


def test_repack_is_reproducible(repacked, tmp_path):
    _, patched = repacked
    again = repack_binary(SAMPLE, tmp_path / SAMPLE.name, [TARGET], cache=patched.parent / "cache")
    assert again.status == "repacked" and (tmp_path / SAMPLE.name).read_bytes() == patched.read_bytes()


def test_a_checksum_is_recomputed(tmp_path):
    """The sample with a correct CheckSum (lief computes it): the repacked file carries the new correct one."""
    data = bytearray(SAMPLE.read_bytes())
    struct.pack_into("<I", data, PeView(bytes(data)).optional_offsets["checksum"],
                     lief.PE.parse(str(SAMPLE)).compute_checksum())
    source = tmp_path / "checked.dll"
    source.write_bytes(bytes(data))
    assert lief.PE.parse(str(source)).optional_header.checksum == lief.PE.parse(str(source)).compute_checksum()
    payload = build_payload(Manifest("0", "0", (TARGET,), (), {}))
    assert add_section(source, tmp_path / "out.dll", PE_SECTION_NAME, payload) == []
    check_patch(source, tmp_path / "out.dll", payload)


def _signed(tmp_path: Path) -> Path:
    """The sample with a certificate table (a WIN_CERTIFICATE header and stand-in bytes) appended and named by
    data directory 4, as signtool leaves a signed file: enough for fatkit to see that the file is signed."""
    data = bytearray(SAMPLE.read_bytes())
    view = PeView(bytes(data))
    certificate = struct.pack("<IHH", 8 + 64, 0x0200, 0x0002) + bytes(range(64))
    struct.pack_into("<II", data, view.directories_offset + 4 * 8, len(data), len(certificate))
    path = tmp_path / "signed.dll"
    path.write_bytes(bytes(data) + certificate)
    return path


def test_a_signed_file_is_repacked_with_a_warning_or_refused(repacked, tmp_path):
    _, patched = repacked
    signed = _signed(tmp_path)
    cache = patched.parent / "cache"
    result = repack_binary(signed, tmp_path / "signed-out.dll", [TARGET], cache=cache)
    assert result.status == "repacked" and result.problems == [UNSIGNED_WARNING]
    after = check_patch(signed, tmp_path / "signed-out.dll")
    assert after.data_directories[4].size == 72  # the certificate table keeps its place, its bytes unchanged
    refused = repack_binary(signed, tmp_path / "refused.dll", [TARGET], cache=cache, keep_signature=True)
    assert refused.status == "error" and "--keep-signature" in refused.reason
    assert not (tmp_path / "refused.dll").exists()
    proc = fatkit("repack", str(signed), "--target", TARGET, "-o", str(tmp_path / "cli"), "--cache", str(cache))
    assert "signature no longer verifies" in proc.stderr
    proc = fatkit("repack", str(signed), "--target", TARGET, "-o", str(tmp_path / "cli2"), "--cache", str(cache),
                  "--keep-signature", check=1)
    assert "--keep-signature" in proc.stderr and not (tmp_path / "cli2" / "signed.dll").exists()


def test_an_image_without_room_for_a_section_header_is_refused(tmp_path):
    data = bytearray(SAMPLE.read_bytes())
    view = PeView(bytes(data))
    slot = view.section_header_offset(len(view.sections))
    data[slot:slot + 40] = b"\xee" * 40  # the slack is in use
    source = tmp_path / "full.dll"
    source.write_bytes(bytes(data))
    with pytest.raises(FatkitError, match="in use"):
        add_section(source, tmp_path / "out.dll", PE_SECTION_NAME, b"x")
    with pytest.raises(FatkitError, match="1 to 8 bytes"):
        add_section(SAMPLE, tmp_path / "out.dll", ".fatkit_amd", b"x")
    assert not (tmp_path / "out.dll").exists()


def test_a_win_amd64_wheel_is_repacked(repacked, tmp_path):
    """A wheel built here around the sample (as a DLL and as a `.pyd`): both members patched, RECORD right,
    the patched members read back by lief and fatkit, the rest copied."""
    _, patched = repacked
    dll = SAMPLE.read_bytes()
    items = [Item("demo_win/__init__.py", b"X = 1\n"), Item("demo_win/kern.dll", dll),
             Item("demo_win/_ext.cp312-win_amd64.pyd", dll),
             Item("demo_win-0.1.dist-info/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
                                                 b"Tag: cp312-cp312-win_amd64\n")]
    source = build_wheel(tmp_path / "in" / WHEEL_NAME, items, record_name="demo_win-0.1.dist-info/RECORD")
    result = repack_wheel(source, tmp_path / "out", [TARGET], cache=patched.parent / "cache")
    assert result.status == "repacked", result.to_json()
    assert result.patched == ["demo_win/kern.dll", "demo_win/_ext.cp312-win_amd64.pyd"]
    assert record_problems(result.destination) == []
    with zipfile.ZipFile(result.destination) as archive:
        for name in result.patched:
            member = tmp_path / Path(name).name
            member.write_bytes(archive.read(name))
            assert member.read_bytes() == patched.read_bytes()  # the same bytes repack_binary writes
            check_patch(SAMPLE, member)
            (binary,) = scan_path(member)
            assert [c.section for c in binary.containers] == [".nv_fatb", PE_SECTION_NAME]
        assert archive.read("demo_win/__init__.py") == b"X = 1\n"


def test_precompile_fills_the_cache_from_a_directory_of_dlls(tmp_path):
    tree = tmp_path / "bin"
    tree.mkdir()
    shutil.copy(SAMPLE, tree / "kern.dll")
    shutil.copy(SAMPLE, tree / "_ext.pyd")
    (tree / "readme.txt").write_text("not a binary")
    proc = fatkit("precompile", str(tree), "--target", TARGET, "--cache", str(tmp_path / "cache"), "--json")
    report = json.loads(proc.stdout)
    (binary,) = scan_path(SAMPLE)
    ptx = next(e for e in binary.entries if e.kind == "ptx")
    with Cache(tmp_path / "cache") as cache:
        stored = [e for e in cache.entries() if e.key.ptx_blake3 == ptx_hash(ptx.payload)]
    assert len(stored) == 1 and stored[0].code_object, report


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["libbitsandbytes_cuda121.dll", "libbitsandbytes_cuda130.dll",
                                  "libbitsandbytes_rocm72.dll", "libbitsandbytes_xpu2026.dll"])
def test_the_corpus_dlls_take_the_section(name, tmp_path):
    """The patcher on the real DLLs (up to 21 MB), with a manifest-only payload: no translation needed."""
    source = corpus_file(f"bitsandbytes/{name}")
    payload = build_payload(Manifest("0", "0", (TARGET,), (), {}))
    assert add_section(source, tmp_path / name, PE_SECTION_NAME, payload) == []
    check_patch(source, tmp_path / name, payload)
    check_readobj(tmp_path / name)
    (before,), (after,) = scan_path(source), scan_path(tmp_path / name)
    describe(before, kernels=False, hashes=True)
    describe(after, kernels=False, hashes=True)
    assert [c.to_json() for c in after.containers if c.section != PE_SECTION_NAME] == \
           [c.to_json() for c in before.containers]


def test_a_32_bit_image_is_repacked(repacked, tmp_path):
    _, patched = repacked
    source = SAMPLE.with_name("pe_kern32.dll")
    result = repack_binary(source, tmp_path / source.name, [TARGET], cache=patched.parent / "cache")
    assert result.status == "repacked" and result.code_objects == 1
    check_patch(source, tmp_path / source.name)
    check_readobj(tmp_path / source.name)


def test_the_cli_repacks_the_dlls_of_a_directory(repacked, tmp_path):
    _, patched = repacked
    tree = tmp_path / "bin"
    tree.mkdir()
    shutil.copy(SAMPLE, tree / "kern.dll")
    (tree / "notes.txt").write_text("MZ, but not an image")
    proc = fatkit("repack", str(tree), "--target", TARGET, "-o", str(tmp_path / "out"), "--cache",
                  str(patched.parent / "cache"), "--json")
    (binary,) = json.loads(proc.stdout)["binaries"]
    assert (binary["status"], binary["section"]) == ("repacked", PE_SECTION_NAME)
    assert (tmp_path / "out" / "bin" / "kern.dll").read_bytes() == patched.read_bytes()
    assert sorted(p.name for p in (tmp_path / "out" / "bin").iterdir()) == ["kern.dll"]


def test_the_section_holds_what_the_elf_section_holds_for_the_same_ptx(repacked, tmp_path):
    """tests/samples/nv_lib.so carries the same PTX (kern.cu, two_arch) in its second fatbin: its `.fatkit_amd`
    and the DLL's `.fatkit` hold the same code object and the same manifest but for where the PTX sits."""
    result, patched = repacked
    library = SAMPLE.with_name("nv_lib.so")
    elf = repack_binary(library, tmp_path / library.name, [TARGET], cache=patched.parent / "cache")
    assert elf.status == "repacked" and elf.section_name == ".fatkit_amd"
    (pe_binary,), (elf_binary,) = scan_path(patched), scan_path(tmp_path / library.name)
    ours = next(c for c in pe_binary.containers if c.section == PE_SECTION_NAME)
    theirs = next(c for c in elf_binary.containers if c.section == ".fatkit_amd")
    code = {e.bundle_id: e.payload for e in ours.entries if e.kind == "hsaco"}
    assert code == {e.bundle_id: e.payload for e in theirs.entries if e.kind == "hsaco"} and code
    (module,), (elf_module,) = ours.manifest["modules"], theirs.manifest["modules"]
    assert (module["sources"], elf_module["sources"]) == (["c0.e2"], ["c1.e2"])
    assert {**module, "sources": None} == {**elf_module, "sources": None}
    assert {**ours.manifest, "modules": None} == {**theirs.manifest, "modules": None}


def test_an_image_that_demands_a_signature_is_warned_about(tmp_path):
    data = bytearray(SAMPLE.read_bytes())
    at = PeView(bytes(data)).optional_offsets["dll_characteristics"]
    struct.pack_into("<H", data, at, struct.unpack_from("<H", data, at)[0] | 0x0080)  # FORCE_INTEGRITY
    source = tmp_path / "integrity.dll"
    source.write_bytes(bytes(data))
    payload = build_payload(Manifest("0", "0", (TARGET,), (), {}))
    assert add_section(source, tmp_path / "out.dll", PE_SECTION_NAME, payload) == [INTEGRITY_WARNING]
    assert add_section(SAMPLE, tmp_path / "plain.dll", PE_SECTION_NAME, payload) == []
