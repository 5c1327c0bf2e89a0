"""The PE/COFF reader (fatkit.formats.pe) and the scan of Windows images, on tests/samples/pe_kern.dll.

lief is the independent reader: every section, import, base relocation, RVA translation and checksum fatkit
reads is compared with what lief reads from the same bytes.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import lief
import pytest

from fatkit.errors import FatkitError, FormatError
from fatkit.extract.kernels import describe, kernel_names
from fatkit.extract.scan import Source, scan_buffer, scan_path, scan_paths, scan_source
from fatkit.formats import wrappers
from fatkit.formats.pe import IMAGE_FILE_DLL, PeView, is_pe, pe_checksum
from tests.fuzzing import pe_with_long_names

SAMPLE = Path(__file__).parent / "samples" / "pe_kern.dll"
FATBIN = Path(__file__).parent / "samples" / "nv_kern.fatbin"
READOBJ = Path("/usr/lib/llvm-19/bin/llvm-readobj")


@pytest.fixture(scope="module")
def data() -> bytes:
    return SAMPLE.read_bytes()


def _lief(data: bytes) -> lief.PE.Binary:
    """lief's reading of `data`; keep the result referenced while using its sections (lief frees them with it)."""
    parsed = lief.PE.parse(list(data))
    assert parsed is not None
    return parsed


def _coff(data: bytes) -> tuple[int, int, int]:
    """(e_lfanew, number of sections, section table offset), read with struct for the tests' own edits."""
    lfanew = struct.unpack_from("<I", data, 0x3C)[0]
    count = struct.unpack_from("<H", data, lfanew + 6)[0]
    return lfanew, count, lfanew + 24 + struct.unpack_from("<H", data, lfanew + 20)[0]


def _rename(data: bytes, old: bytes, new: bytes) -> bytes:
    lfanew, count, table = _coff(data)
    out = bytearray(data)
    for i in range(count):
        if out[table + 40 * i:table + 40 * i + 8].rstrip(b"\0") == old:
            out[table + 40 * i:table + 40 * i + 8] = new.ljust(8, b"\0")
            return bytes(out)
    raise AssertionError(f"no section {old!r}")


def test_headers_and_sections_agree_with_lief(data):
    view, ref = PeView(data), _lief(data)
    assert view.machine == ref.header.machine.value == 0x8664
    assert view.is_dll and view.format == "pe-dll" and view.pointer_size == 8
    assert view.image_base == ref.optional_header.imagebase
    assert (view.size_of_image, view.size_of_headers) == (ref.optional_header.sizeof_image,
                                                           ref.optional_header.sizeof_headers)
    assert [(s.name, s.virtual_address, s.virtual_size, s.raw_offset, s.raw_size, s.characteristics)
            for s in view.sections] == [
        (s.name, s.virtual_address, s.virtual_size, s.pointerto_raw_data, s.sizeof_raw_data, s.characteristics)
        for s in ref.sections]
    for section, theirs in zip(view.sections, ref.sections):
        assert view.data(section) == bytes(theirs.content)[:section.size]


def test_rva_and_offsets_agree_with_lief(data):
    view, ref = PeView(data), _lief(data)
    for section in view.sections:
        for rva in (section.virtual_address, section.virtual_address + section.size - 1):
            assert view.rva_to_offset(rva) == ref.rva_to_offset(rva)
            assert view.offset_to_rva(view.rva_to_offset(rva)) == rva
    assert view.rva_to_offset(0x40) == 0x40  # inside the headers
    assert view.rva_to_offset(view.size_of_image + 0x1000) is None
    last = view.sections[-1]
    assert view.rva_to_offset(last.virtual_address + last.raw_size) is None  # past the file bytes


def test_imports_relocations_and_checksum_agree_with_lief(data):
    view, ref = PeView(data), _lief(data)
    assert [i.dll for i in view.imports] == [i.name for i in ref.imports] == ["cudart64_12.dll"]
    assert view.relocations == {e.address: e.type.value for r in ref.relocations for e in r.entries
                                if e.type.value != 0}
    assert pe_checksum(open(SAMPLE, "rb"), view.optional_offsets["checksum"]) == ref.compute_checksum()


def test_the_wrapper_resolves_through_its_base_relocation_to_the_fatbin(data):
    view = PeView(data)
    fatbin_section = view.section(".nv_fatb")
    (record,) = wrappers.read_wrappers(view)
    assert (record.vendor, record.version, record.target) == ("nvidia", 1, fatbin_section.offset)
    wrapper = view.section(".nvFatBi")
    assert view.relocations[wrapper.virtual_address + 8] == 10  # IMAGE_REL_BASED_DIR64 on the data field
    assert data[record.target:record.target + len(FATBIN.read_bytes())] == FATBIN.read_bytes()


def test_a_pointer_the_relocation_table_does_not_list_resolves_to_nothing(data):
    """A DLL can be loaded anywhere: a field the loader would not move does not point where it says."""
    view = PeView(data)
    wrapper_rva = view.section(".nvFatBi").virtual_address + 8
    reloc = view.section(".reloc")
    out = bytearray(data)
    for at in range(reloc.offset + 8, reloc.offset + reloc.size, 2):  # entries of the (only) block
        entry = struct.unpack_from("<H", out, at)[0]
        if entry >> 12 == 10 and (entry & 0xFFF) == wrapper_rva & 0xFFF:
            struct.pack_into("<H", out, at, entry + 8)  # now it moves the record's next field instead
    (record,) = wrappers.read_wrappers(PeView(bytes(out)))
    assert record.target is None
    binary = scan_buffer(Source("unrelocated.dll", bytes(out)))
    assert any("points nowhere" in e.message for e in binary.errors)
    assert binary.containers[0].found_by == ["section"]


def test_scan_finds_the_fatbin_by_wrapper_and_section_and_maps_the_import(data):
    (binary,) = scan_source(Source("pe_kern.dll", data))  # judged, unlike scan_buffer's
    assert binary.format == "pe-dll" and binary.errors == []
    (container,) = binary.containers
    assert (container.section, container.found_by) == (".nv_fatb", ["wrapper", "section"])
    assert container.wrapper == {"vendor": "nvidia", "version": 1, "offset": PeView(data).section(".nvFatBi").offset}
    assert [(e.kind, e.arch) for e in container.entries] == [("elf", "sm_80"), ("elf", "sm_90"), ("ptx", "compute_90")]
    assert binary.needed == ["cudart64_12.dll"]
    assert [x["library"] for x in binary.verdict.libraries] == ["CUDA runtime"]
    assert "amdhip64" in binary.verdict.libraries[0]["amd"]
    assert binary.verdict.amd == "yes"


def test_entries_match_the_standalone_fatbin(data):
    ours, standalone = scan_buffer(Source("pe_kern.dll", data)), next(scan_path(FATBIN))
    describe(ours, kernels=False, hashes=True)
    describe(standalone, kernels=False, hashes=True)
    assert [e.hash for e in ours.entries] == [e.hash for e in standalone.entries]


def test_long_section_names_are_read_from_the_coff_string_table(data, tmp_path):
    renamed = pe_with_long_names(data)
    view = PeView(renamed)
    assert [s.name for s in view.sections] == [
        {".nv_fatb": ".nv_fatbin", ".nvFatBi": ".nvFatBinSegment"}.get(s.name, s.name) for s in PeView(data).sections]
    binary = scan_buffer(Source("long.dll", renamed))
    assert [(c.section, c.found_by) for c in binary.containers] == [(".nv_fatbin", ["wrapper", "section"])]
    if READOBJ.exists():  # LLVM reads the names from the table too (lief 1.0 shows them as "/50")
        (tmp_path / "long.dll").write_bytes(renamed)
        listing = subprocess.run([str(READOBJ), "--sections", str(tmp_path / "long.dll")], capture_output=True,
                                 text=True, check=True).stdout
        assert re.findall(r"Name: (\S+) \(2F", listing) == [s.name for s in view.sections]


def test_a_fatbin_outside_the_known_sections_is_found_by_the_magic_scan(data):
    renamed = _rename(_rename(data, b".nv_fatb", b".rdata2"), b".nvFatBi", b".data2")
    (container,) = scan_buffer(Source("hidden.dll", renamed)).containers
    assert (container.section, container.found_by) == (".rdata2", ["magic-scan"])


def test_exe_and_pyd(tmp_path, data):
    lfanew = _coff(data)[0]
    characteristics = struct.unpack_from("<H", data, lfanew + 22)[0]
    exe = bytearray(data)
    struct.pack_into("<H", exe, lfanew + 22, characteristics & ~IMAGE_FILE_DLL)
    assert scan_buffer(Source("x.exe", bytes(exe))).format == "pe-exe"
    shutil.copy(SAMPLE, tmp_path / "_ext.cp312-win_amd64.pyd")
    (binary,) = scan_paths([tmp_path])  # a directory walk reads PE files (MZ) as candidates
    assert binary.format == "pe-dll" and len(binary.containers) == 1


@pytest.mark.parametrize("edit, message", [
    (lambda d: d[:0x30], "DOS header"),
    (lambda d: d[:0x3C] + struct.pack("<I", 0x7FFFFFF0) + d[0x40:], "e_lfanew"),
    (lambda d: d.replace(b"PE\0\0", b"PX\0\0", 1), "no PE"),
    (lambda d: d[:_coff(d)[0] + 24] + b"\x0b\x03" + d[_coff(d)[0] + 26:], "optional header magic"),
    (lambda d: d[:_coff(d)[2] + 40], "section table"),
])
def test_malformed_headers_are_format_errors_with_offsets(data, edit, message):
    with pytest.raises(FormatError, match=message) as caught:
        PeView(edit(data))
    assert caught.value.offset is not None


def test_tables_past_the_file_are_format_errors(data):
    view = PeView(data)
    out = bytearray(data)
    struct.pack_into("<I", out, view.directories_offset + 8, 0x7FFF0000)  # import directory RVA
    with pytest.raises(FatkitError, match="import directory"):
        PeView(bytes(out)).imports
    binary = scan_buffer(Source("bad-imports.dll", bytes(out)))
    assert binary.containers and any("import" in e.message for e in binary.errors)


def test_is_pe_needs_the_signature_where_e_lfanew_points(data):
    assert is_pe(data)
    assert not is_pe(b"MZ" + bytes(100))
    assert not is_pe(b"MZ")


def test_inspect_names_the_format_sections_and_libraries():
    proc = subprocess.run([sys.executable, "-m", "fatkit", "inspect", str(SAMPLE)], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).parent.parent)
    assert proc.returncode == 0, proc.stderr
    assert "PE DLL (Windows)" in proc.stdout and ".nv_fatb" in proc.stdout
    assert "cudart64_12.dll (CUDA runtime) → on AMD: HIP runtime (amdhip64_*.dll)" in proc.stdout


def test_extract_lint_and_translate_read_the_dll(tmp_path):
    def fatkit(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "fatkit", *args], capture_output=True, text=True, timeout=300,
                              cwd=Path(__file__).parent.parent)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr + proc.stdout
        return proc.stdout

    fatkit("extract", str(SAMPLE), "-o", str(tmp_path / "x"))
    standalone = {e.arch: e.payload for e in next(scan_path(FATBIN)).entries}
    assert (tmp_path / "x" / "pe_kern.dll.c0.e2.compute_90.ptx").read_bytes() == standalone["compute_90"]
    assert (tmp_path / "x" / "pe_kern.dll.c0.e1.sm_90.cubin").read_bytes() == standalone["sm_90"]
    assert "pe_kern.dll#c0.e2  sm_90  7 kernels" in fatkit("lint", str(SAMPLE))
    fatkit("translate", str(SAMPLE), "--target", "gfx942", "-o", str(tmp_path / "t"))
    (code_object,) = scan_path(tmp_path / "t" / "pe_kern.dll.c0.e2.compute_90.gfx942.hsaco")
    assert code_object.format == "hsaco" and len(kernel_names(code_object.entries[0])) == 7


def test_a_32_bit_image_is_read_with_its_own_layout():
    """pe_kern32.dll (PE32, i386): 4-byte ImageBase and pointers, HIGHLOW relocations, 16-byte wrapper records."""
    path = SAMPLE.with_name("pe_kern32.dll")
    data = path.read_bytes()
    view, ref = PeView(data), _lief(data)
    assert view.magic == 0x10B and view.pointer_size == 4 and view.format == "pe-dll"
    assert view.image_base == ref.optional_header.imagebase
    assert [(s.name, s.virtual_address, s.raw_offset) for s in view.sections] == \
           [(s.name, s.virtual_address, s.pointerto_raw_data) for s in ref.sections]
    assert [i.dll for i in view.imports] == [i.name for i in ref.imports]
    assert view.relocations == {e.address: e.type.value for r in ref.relocations for e in r.entries
                                if e.type.value != 0}
    assert view.relocations[view.section(".nvFatBi").virtual_address + 8] == 3  # IMAGE_REL_BASED_HIGHLOW
    assert pe_checksum(open(path, "rb"), view.optional_offsets["checksum"]) == ref.compute_checksum()
    (record,) = wrappers.read_wrappers(view)
    assert record.target == view.section(".nv_fatb").offset
    binary = scan_buffer(Source(path.name, data))
    assert binary.errors == [] and [c.found_by for c in binary.containers] == [["wrapper", "section"]]
    standalone = next(scan_path(FATBIN))
    describe(binary, kernels=False, hashes=True)
    describe(standalone, kernels=False, hashes=True)
    assert [e.hash for e in binary.entries] == [e.hash for e in standalone.entries]


def test_delay_load_imports_are_listed_after_the_others(data):
    """A delay-load descriptor (attributes 1: RVAs) written into `.rdata`'s file padding (its VirtualSize grown
    over it), naming the DLL string of the import table, with data directory 13 pointing at it: lief and fatkit
    list the same delay-load import."""
    view = PeView(data)
    rdata = view.section(".rdata")
    assert rdata.raw_size - rdata.virtual_size >= 72 and not any(data[rdata.offset + rdata.size:][:72])
    out = bytearray(data)
    rva = rdata.virtual_address + -(-rdata.virtual_size // 8) * 8
    name_rva = struct.unpack_from("<5I", data, view.rva_to_offset(view.directory(1)[0]))[3]
    at = rdata.offset + rva - rdata.virtual_address  # past VirtualSize: no RVA maps here until it grows
    struct.pack_into("<8I", out, at, 1, name_rva, 0, 0, 0, 0, 0, 0)  # then an all-zero descriptor
    struct.pack_into("<I", out, view.section_header_offset(rdata.index) + 8, rva + 64 - rdata.virtual_address)
    struct.pack_into("<II", out, view.directories_offset + 13 * 8, rva, 64)
    ours, ref = PeView(bytes(out)), _lief(bytes(out))
    assert [i.name for i in ref.delay_imports] == ["cudart64_12.dll"]
    assert ours.imports == [("cudart64_12.dll", False), ("cudart64_12.dll", True)]
