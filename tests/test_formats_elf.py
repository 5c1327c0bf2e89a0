"""fatkit.formats.elf: header tables, symbols, notes and extent against pyelftools (ELF64 samples, ELF32 files
clang builds), pointer resolution on every linker/ELF-type sample, other machines' relocation types,
relocation search paths on synthetic tables, and hostile headers."""

from __future__ import annotations

import functools
import random
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection

from fatkit.errors import FormatError
from fatkit.formats.common import align
from fatkit.formats.elf import ET_DYN, ET_EXEC, ET_REL, SHT_RELR, ElfView, Section
from fatkit.formats.fatbin import container_size_at, find_containers
from tests.corpus import corpus_files
from tests.helpers import clang22, mapped, over_files, sample

HOST_SAMPLES = ["nv_mode_default", "nv_nopie", "nv_lld", "nv_relr", "nv_lld_relr", "nv_lib.so", "nv_kern.o",
                "nv_rdc", "nv_dlink.o", "nv_stripped", "nv_host_O2", "amd_hip_exe", "amd_hip_nopie",
                "amd_hip_ccob.so", "amd_hip_kern.o"]
WRAPPER_STRIDE, DATA_FIELD = 24, 8


def wrapper_section(elf: ElfView) -> Section:
    section = elf.section(".nvFatBinSegment") or elf.section(".hipFatBinSegment")
    assert section is not None
    return section


# --- headers against pyelftools -------------------------------------------------------------------


def check_against_pyelftools(path: Path) -> ElfView:
    """The view of `path` after comparing its header fields, tables, symbols, notes, dynamic names and
    extent with what pyelftools reads; raw fields pyelftools decodes to names are read with struct here."""
    data = path.read_bytes()
    elf = ElfView(data)
    with path.open("rb") as f:
        ref = ELFFile(f)
        assert elf.elf_class == {32: 1, 64: 2}[ref.elfclass]
        assert (elf.e_type, elf.e_machine, elf.e_version) == struct.unpack_from("<HHI", data, 16)
        assert elf.e_flags == ref.header.e_flags
        assert (elf.osabi, elf.abiversion) == (data[7], data[8])
        shoff, shentsize = ref.header.e_shoff, ref.header.e_shentsize
        ours = [(s.name, s.type, s.flags, s.addr, s.offset, s.size, s.link, s.info, s.entsize, s.align)
                for s in elf.sections]
        theirs = [(s.name, struct.unpack_from("<I", data, shoff + i * shentsize + 4)[0], s["sh_flags"],
                   s["sh_addr"], s["sh_offset"], s["sh_size"], s["sh_link"], s["sh_info"], s["sh_entsize"],
                   s["sh_addralign"])
                  for i, s in enumerate(ref.iter_sections())]
        assert ours == theirs
        assert [(g.offset, g.vaddr, g.filesz, g.memsz, g.flags, g.align) for g in elf.segments] == \
            [(g["p_offset"], g["p_vaddr"], g["p_filesz"], g["p_memsz"], g["p_flags"], g["p_align"])
             for g in ref.iter_segments()]
        for table in (s for s in elf.sections if s.type in (2, 11)):  # SHT_SYMTAB, SHT_DYNSYM
            # st_info, st_other, st_shndx as stored: (u8, u8, u16) at +12 (ELF32) or +4 (ELF64)
            raw_at, size = (12, 16) if ref.elfclass == 32 else (4, 24)
            assert [(y.name, y.value, y.size, y.info, y.other, y.shndx) for y in elf.symbols(table)] == [
                (y.name, y["st_value"], y["st_size"],
                 *struct.unpack_from("<BBH", data, table.offset + i * size + raw_at))
                for i, y in enumerate(ref.get_section(table.index).iter_symbols())]
        if any(s.type == 7 for s in elf.sections):  # SHT_NOTE: pyelftools reads notes from sections
            assert [(n.owner, n.type, n.desc, n.offset) for n in elf.notes()] == [
                (n["n_name"], struct.unpack_from("<I", data, n["n_offset"] + 8)[0], n["n_descdata"],
                 n["n_offset"] + align(12 + n["n_namesz"], 8 if s["sh_addralign"] == 8 else 4))
                for s in ref.iter_sections() if s["sh_type"] == "SHT_NOTE" for n in s.iter_notes()]
        dynamic = ref.get_section_by_name(".dynamic")
        tags = list(dynamic.iter_tags()) if dynamic is not None else []
        assert elf.needed == [t.needed for t in tags if t.entry.d_tag == "DT_NEEDED"]
        assert elf.soname == next((t.soname for t in tags if t.entry.d_tag == "DT_SONAME"), None)
    assert elf.extent == len(data)  # linkers and ptxas end the file with a section or the section headers
    assert ElfView(data + bytes(100)).extent == len(data)
    return elf


@pytest.mark.parametrize("name", HOST_SAMPLES + ["nv_kern_sm90.cubin", "amd_gfx942_v6.hsaco"])
def test_tables_match_pyelftools(name):
    check_against_pyelftools(sample(name))


@pytest.fixture(scope="module")
def elf32_files(tmp_path_factory) -> dict[str, Path]:
    """An i386 object and shared library from clang-22 and lld."""
    clang = clang22()
    work = tmp_path_factory.mktemp("elf32")
    source = work / "t.c"
    source.write_text('int counter = 3;\nstatic const char tag[] = "x";\n'
                      "int add(int a, int b) { return a + b + counter + tag[0]; }\n")
    files = {"object": work / "t.o", "shared": work / "libt32.so"}
    common = [str(clang), "--target=i386-linux-gnu", "-fPIC", "-O1", str(source), "-o"]
    subprocess.run([*common, str(files["object"]), "-c"], check=True, capture_output=True)
    subprocess.run([*common, str(files["shared"]), "-shared", "-nostdlib", "-fuse-ld=lld", "-Wl,-soname,libt32.so",
                    "-Wl,--build-id"], check=True, capture_output=True)
    return files


def test_elf32_files_match_pyelftools(elf32_files):
    assert check_against_pyelftools(elf32_files["object"]).e_type == ET_REL
    shared = check_against_pyelftools(elf32_files["shared"])
    assert (shared.elf_class, shared.e_type, shared.soname) == (1, ET_DYN, "libt32.so")
    (build_id,) = shared.notes()
    assert (build_id.owner, build_id.type, len(build_id.desc)) == ("GNU", 3, 20)  # NT_GNU_BUILD_ID, SHA-1
    data = elf32_files["shared"].read_bytes()
    counter = next(y for y in shared.symbols(shared.section(".dynsym")) if y.name == "counter")
    assert struct.unpack_from("<i", data, shared.symbol_offset(counter)) == (3,)
    with pytest.raises(FormatError, match="ELF64"):
        shared.pointers_in(shared.section(".data"), WRAPPER_STRIDE, DATA_FIELD)


def test_symbol_offsets_of_a_relocatable_object(elf32_files):
    elf = ElfView(elf32_files["object"].read_bytes())
    symbols = elf.symbols(elf.section(".symtab"))
    counter = next(y for y in symbols if y.name == "counter")
    assert elf.symbol_offset(counter) == elf.section(".data").offset  # st_value is section-relative
    assert symbols[0].shndx == 0 and elf.symbol_offset(symbols[0]) is None  # the null symbol is undefined


def test_section_lookup():
    data = sample("nv_mode_default").read_bytes()
    elf = ElfView(data)
    fatbin = elf.section(".nv_fatbin")
    assert fatbin is not None and fatbin.has_bytes and elf.section("no such section") is None
    for s in elf.sections:
        if s.has_bytes and s.size and s.type:
            assert elf.section_at(s.offset) == s
            assert elf.section_at(s.offset + s.size - 1) == s
    assert elf.section_at(0) is None  # ELF header: no section
    assert elf.section_at(len(data) + 100) is None
    bss = elf.section(".bss")
    assert bss is not None and not bss.has_bytes


def test_va_to_offset_follows_pt_load_file_bytes():
    data = sample("nv_mode_default").read_bytes()
    elf = ElfView(data)
    for s in elf.sections:
        if s.has_bytes and s.addr and s.size:
            assert elf.va_to_offset(s.addr) == s.offset
            assert elf.va_to_offset(s.addr + s.size - 1) == s.offset + s.size - 1
    bss = elf.section(".bss")
    assert elf.va_to_offset(bss.addr + bss.size - 1) is None  # memory only
    assert elf.va_to_offset(1 << 60) is None


def test_section_less_file_has_segments_only():
    data = sample("nv_noshdr").read_bytes()
    elf = ElfView(data)
    assert elf.sections == [] and elf.section(".nv_fatbin") is None and elf.section_at(0x3000) is None
    assert elf.segments and elf.needed  # PT_DYNAMIC still gives DT_NEEDED
    reference = ElfView(sample("nv_mode_default").read_bytes())
    fatbin = reference.section(".nv_fatbin")
    assert elf.va_to_offset(fatbin.addr) == fatbin.offset


# --- pointers on real linker outputs --------------------------------------------------------------


@pytest.mark.parametrize("name", HOST_SAMPLES)
def test_wrapper_pointers_land_on_containers(name):
    data = sample(name).read_bytes()
    elf = ElfView(data)
    section = wrapper_section(elf)
    pointers = elf.pointers_in(section, WRAPPER_STRIDE, DATA_FIELD)
    assert list(pointers) == list(range(section.offset, section.offset + section.size, WRAPPER_STRIDE))
    containers = set(find_containers(data))
    for target in pointers.values():
        assert target is not None
        if name.startswith("nv_"):
            assert target in containers
        else:
            assert data[target : target + 4] in (b"__CL", b"CCOB")


def _in_place(data: bytes, offset: int) -> int:
    return struct.unpack_from("<Q", data, offset)[0]


def _rela_offsets(path: Path) -> set[int]:
    with path.open("rb") as f:
        return {r["r_offset"] for s in ELFFile(f).iter_sections() if isinstance(s, RelocationSection)
                for r in s.iter_relocations()}


def test_lld_pointers_come_from_the_addend():
    path = sample("nv_lld")
    data = path.read_bytes()
    elf = ElfView(data)
    section = wrapper_section(elf)
    assert elf.e_type == ET_DYN
    for record, target in elf.pointers_in(section, WRAPPER_STRIDE, DATA_FIELD).items():
        assert _in_place(data, record + DATA_FIELD) == 0  # lld writes nothing in place
        assert container_size_at(data, target)


@pytest.mark.parametrize("name", ["nv_relr", "nv_lld_relr"])
def test_relr_pointers_come_from_the_value_in_place(name):
    path = sample(name)
    data = path.read_bytes()
    elf = ElfView(data)
    assert any(s.type == SHT_RELR for s in elf.sections)
    section = wrapper_section(elf)
    covered = _rela_offsets(path)
    for record, target in elf.pointers_in(section, WRAPPER_STRIDE, DATA_FIELD).items():
        va = section.addr + record - section.offset + DATA_FIELD
        assert va not in covered
        assert elf.va_to_offset(_in_place(data, record + DATA_FIELD)) == target
        assert container_size_at(data, target)


def test_non_pie_pointers_are_absolute():
    data = sample("nv_nopie").read_bytes()
    elf = ElfView(data)
    assert elf.e_type == ET_EXEC
    section = wrapper_section(elf)
    for record, target in elf.pointers_in(section, WRAPPER_STRIDE, DATA_FIELD).items():
        assert target == elf.va_to_offset(_in_place(data, record + DATA_FIELD))


def test_object_pointers_come_from_section_relocations():
    data = sample("nv_dlink.o").read_bytes()
    elf = ElfView(data)
    assert elf.e_type == ET_REL
    section = wrapper_section(elf)
    (record, target), = elf.pointers_in(section, WRAPPER_STRIDE, DATA_FIELD).items()
    assert _in_place(data, record + DATA_FIELD) == 0
    assert elf.section_at(target).name == ".nv_fatbin" and container_size_at(data, target)
    # The v2 wrapper's second pointer is relocated into .bss, which has no file bytes.
    assert elf.pointers_in(section, WRAPPER_STRIDE, 0x10) == {record: None}
    # A field nothing relocates has no target in an object file.
    assert elf.pointers_in(section, WRAPPER_STRIDE, 0) == {record: None}


# --- other machines: the same files with their relocation types rewritten --------------------------


def _retarget(path: Path, machine: int, old_type: int, new_type: int) -> tuple[bytes, bytes]:
    """The file and a copy whose e_machine and relocations of `old_type` at wrapper fields are rewritten."""
    data = path.read_bytes()
    elf = ElfView(data)
    section = wrapper_section(elf)
    base = 0 if elf.e_type == ET_REL else section.addr
    fields = {base + k + DATA_FIELD for k in range(0, section.size, WRAPPER_STRIDE)}
    out = bytearray(data)
    struct.pack_into("<H", out, 18, machine)
    changed = 0
    with path.open("rb") as f:
        for rel in ELFFile(f).iter_sections():
            if not isinstance(rel, RelocationSection) or not rel.is_RELA():
                continue
            for i, r in enumerate(rel.iter_relocations()):
                if r["r_offset"] in fields and r["r_info_type"] == old_type:
                    struct.pack_into("<Q", out, rel["sh_offset"] + i * 24 + 8,
                                     (r["r_info_sym"] << 32) | new_type)
                    changed += 1
    assert changed == len(fields)
    return data, bytes(out)


@pytest.mark.parametrize("machine, relative", [(183, 1027), (21, 22)])
def test_relative_relocations_of_other_machines(machine, relative):
    original, rewritten = _retarget(sample("nv_lld"), machine, 8, relative)
    expected = ElfView(original).pointers_in(wrapper_section(ElfView(original)), WRAPPER_STRIDE, DATA_FIELD)
    elf = ElfView(rewritten)
    assert elf.pointers_in(wrapper_section(elf), WRAPPER_STRIDE, DATA_FIELD) == expected


@pytest.mark.parametrize("machine, absolute", [(183, 257), (21, 38)])
def test_absolute_relocations_of_other_machines_in_objects(machine, absolute):
    original, rewritten = _retarget(sample("nv_kern.o"), machine, 1, absolute)
    expected = ElfView(original).pointers_in(wrapper_section(ElfView(original)), WRAPPER_STRIDE, DATA_FIELD)
    assert all(expected.values())
    elf = ElfView(rewritten)
    assert elf.pointers_in(wrapper_section(elf), WRAPPER_STRIDE, DATA_FIELD) == expected


def test_relocation_types_of_another_machine_are_not_guessed():
    _, rewritten = _retarget(sample("nv_lld"), 0xBEEF, 8, 8)
    elf = ElfView(rewritten)
    assert set(elf.pointers_in(wrapper_section(elf), WRAPPER_STRIDE, DATA_FIELD).values()) == {None}


def test_absolute_relocation_against_a_dynamic_symbol():
    """R_X86_64_64 in a shared object: symbol value + addend."""
    path = sample("nv_lib.so")
    data = bytearray(path.read_bytes())
    elf = ElfView(bytes(data))
    section = wrapper_section(elf)
    expected = elf.pointers_in(section, WRAPPER_STRIDE, DATA_FIELD)
    with path.open("rb") as f:
        ref = ELFFile(f)
        dynsym = ref.get_section_by_name(".dynsym")
        index, symbol = next((i, s) for i, s in enumerate(dynsym.iter_symbols())
                             if s["st_shndx"] != "SHN_UNDEF" and s["st_value"])
        rela = ref.get_section_by_name(".rela.dyn")
        for i, r in enumerate(rela.iter_relocations()):
            if section.addr <= r["r_offset"] < section.addr + section.size and r["r_info_type"] == 8:
                at = rela["sh_offset"] + i * 24
                struct.pack_into("<Qq", data, at + 8, (index << 32) | 1, r["r_addend"] - symbol["st_value"])
    elf = ElfView(bytes(data))
    assert elf.pointers_in(section, WRAPPER_STRIDE, DATA_FIELD) == expected


# --- relocation search paths on synthetic tables ----------------------------------------------------

BASE_VA = 0x10000000
RECORDS_AT = 0x1000


def synthetic_dyn(records: bytes, relocations: list[tuple[int, int, int]], e_type: int = ET_DYN) -> bytes:
    """An ET_DYN (or ET_EXEC) image mapped at BASE_VA: header, PT_LOAD + PT_DYNAMIC, records, RELA, dynamic."""
    rela = b"".join(struct.pack("<QQq", *r) for r in relocations)
    rela_at = RECORDS_AT + len(records) + 8
    dynamic_at = rela_at + len(rela)
    dynamic = struct.pack("<qQqQqQqQ", 7, BASE_VA + rela_at, 8, len(rela), 9, 24, 0, 0)
    end = dynamic_at + len(dynamic)
    image = bytearray(end)
    image[:8] = b"\x7fELF\x02\x01\x01\x00"
    struct.pack_into("<HHIQQQIHHHHHH", image, 16, e_type, 62, 1, 0, 64, 0, 0, 64, 56, 2, 64, 0, 0)
    struct.pack_into("<IIQQQQQQ", image, 64, 1, 6, 0, BASE_VA, BASE_VA, end, end, 0x1000)
    struct.pack_into("<IIQQQQQQ", image, 120, 2, 6, dynamic_at, BASE_VA + dynamic_at, BASE_VA + dynamic_at,
                     len(dynamic), len(dynamic), 8)
    image[RECORDS_AT : RECORDS_AT + len(records)] = records
    image[rela_at:dynamic_at] = rela
    image[dynamic_at:end] = dynamic
    return bytes(image)


def records_section(count: int) -> Section:
    return Section(index=1, name=".data", type=1, flags=3, addr=BASE_VA + RECORDS_AT, offset=RECORDS_AT,
                   size=count * WRAPPER_STRIDE, link=0, info=0, entsize=0, align=8)


@pytest.mark.parametrize("count", [3, 1000, 30000])  # 256-byte-block search, 64 KiB search, full scan
def test_relocation_lookup_paths_agree_with_a_direct_computation(count, tmp_path):
    rng = random.Random(count)
    field_va = [BASE_VA + RECORDS_AT + k * WRAPPER_STRIDE + DATA_FIELD for k in range(count)]
    records = bytearray(count * WRAPPER_STRIDE)
    relocations, expected = [], {}
    for k in range(count):
        record = RECORDS_AT + k * WRAPPER_STRIDE
        choice = rng.randrange(4)
        target = rng.randrange(0, RECORDS_AT)
        if choice == 0:  # RELATIVE with the target in the addend; in place garbage
            relocations.append((field_va[k], 8, BASE_VA + target))
            struct.pack_into("<Q", records, k * WRAPPER_STRIDE + DATA_FIELD, 0xDEAD)
            expected[record] = target
        elif choice == 1:  # no relocation: the value in place (GNU ld / RELR)
            struct.pack_into("<Q", records, k * WRAPPER_STRIDE + DATA_FIELD, BASE_VA + target)
            expected[record] = target
        elif choice == 2:  # a relocation type that is not a data pointer
            relocations.append((field_va[k], 7, BASE_VA + target))
            expected[record] = None
        else:  # nothing at all
            expected[record] = None
        # Decoys: the record's other fields, and wanted addresses appearing as addends.
        relocations.append((field_va[k] - DATA_FIELD, 8, field_va[k]))
        relocations.append((field_va[k] + 4, 8, field_va[k]))
    relocations.append((field_va[-1] + WRAPPER_STRIDE, 8, BASE_VA))  # just past the section
    rng.shuffle(relocations)
    image = synthetic_dyn(bytes(records), relocations)
    section = records_section(count)
    path = tmp_path / "image"
    path.write_bytes(image)
    with mapped(path) as view:  # closing the map on exit checks that no view of it outlives the calls
        for buf in (image, memoryview(image), view):
            assert ElfView(buf).pointers_in(section, WRAPPER_STRIDE, DATA_FIELD) == expected
    assert view.closed


def test_exec_pointers_ignore_relocation_addends_they_do_not_have():
    records = struct.pack("<QQQ", 0, BASE_VA + 0x40, 0) + struct.pack("<QQQ", 0, 0, 0)
    image = synthetic_dyn(records, [], e_type=ET_EXEC)
    pointers = ElfView(image).pointers_in(records_section(2), WRAPPER_STRIDE, DATA_FIELD)
    assert pointers == {RECORDS_AT: 0x40, RECORDS_AT + WRAPPER_STRIDE: None}


def test_last_record_may_end_after_its_field():
    records = struct.pack("<QQQ", 0, BASE_VA + 0x40, 0) + struct.pack("<QQ", 0, BASE_VA + 0x48)
    image = synthetic_dyn(records, [], e_type=ET_EXEC)
    section = records_section(2)
    section = section._replace(size=len(records))
    assert ElfView(image).pointers_in(section, WRAPPER_STRIDE, DATA_FIELD) == \
        {RECORDS_AT: 0x40, RECORDS_AT + WRAPPER_STRIDE: 0x48}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 0x3FFF), st.integers(0, 255)), min_size=1, max_size=6))
def test_random_header_corruption_raises_only_format_errors(flips):
    data = bytearray(_lld_bytes())
    for offset, value in flips:
        data[offset] = value
    try:
        elf = ElfView(bytes(data))
        elf.segments, elf.needed, elf.soname
        for section in elf.sections:
            if section.name == ".nvFatBinSegment":
                elf.pointers_in(section, WRAPPER_STRIDE, DATA_FIELD)
            elf.section_at(section.offset)
    except FormatError as exc:
        assert exc.offset is not None


@functools.cache
def _lld_bytes() -> bytes:
    return sample("nv_lld").read_bytes()


def test_pointers_in_rejects_fields_outside_the_record():
    elf = ElfView(synthetic_dyn(bytes(24), []))
    with pytest.raises(ValueError):
        elf.pointers_in(records_section(1), 8, 4)


# --- hostile headers ------------------------------------------------------------------------------


def test_not_an_elf():
    for data in (b"", b"\x7fEL", b"MZ" + bytes(100)):
        with pytest.raises(FormatError) as info:
            ElfView(data)
        assert info.value.offset == 0


@pytest.mark.parametrize("ei_class, ei_data, message, offset", [
    (2, 2, "not little-endian", 5), (1, 2, "not little-endian", 5), (3, 1, "ELF class", 4), (0, 1, "ELF class", 4),
])
def test_big_endian_and_unknown_classes_are_refused(ei_class, ei_data, message, offset):
    data = b"\x7fELF" + bytes([ei_class, ei_data, 1]) + bytes(57)
    with pytest.raises(FormatError, match=message) as info:
        ElfView(data)
    assert info.value.offset == offset


def test_section_name_table_is_read_alone():
    path = sample("nv_mode_default")
    data = path.read_bytes()
    with path.open("rb") as f:
        assert ElfView(data).section_name_table() == ELFFile(f).get_section_by_name(".shstrtab").data()
    with pytest.raises(FormatError, match="no section header table") as info:
        ElfView(sample("nv_noshdr").read_bytes()).section_name_table()
    assert info.value.offset == 0x28  # e_shoff
    patched = bytearray(data)
    struct.pack_into("<H", patched, 0x3E, 0xFF00)  # e_shstrndx past the table
    for read in (lambda elf: elf.section_name_table(), lambda elf: elf.sections):
        with pytest.raises(FormatError, match="section name table index") as info:
            read(ElfView(bytes(patched)))
        assert info.value.offset == 0x3E
    struct.pack_into("<H", patched, 0x3E, 0)  # SHN_UNDEF: no names, not an error
    assert {s.name for s in ElfView(bytes(patched)).sections} == {""}


def test_extended_section_numbering():
    """e_shnum = 0 and e_shstrndx = SHN_XINDEX: the real values are in section 0's sh_size and sh_link."""
    data = sample("nv_kern_sm90.cubin").read_bytes()
    expected = ElfView(data).sections
    shoff, = struct.unpack_from("<Q", data, 0x28)
    patched = bytearray(data)
    struct.pack_into("<HH", patched, 0x3C, 0, 0xFFFF)
    struct.pack_into("<Q", patched, shoff + 0x20, len(expected))  # sh_size
    struct.pack_into("<I", patched, shoff + 0x28, next(s.index for s in expected if s.name == ".shstrtab"))  # sh_link
    elf = ElfView(bytes(patched))
    assert [s.name for s in elf.sections] == [s.name for s in expected] and len(expected) > 10
    assert elf.section_name_table() == elf.data(elf.section(".shstrtab"))
    assert elf.extent == len(data)


def test_section_data_is_bounded():
    data = sample("nv_mode_default").read_bytes()
    elf = ElfView(data)
    text = elf.section(".text")
    assert elf.data(text) == data[text.offset : text.offset + text.size]
    assert elf.data(elf.section(".bss")) == b""
    with pytest.raises(FormatError) as info:
        elf.data(text._replace(offset=len(data) - 4))
    assert info.value.offset == len(data) - 4


def test_extent_of_a_cut_image():
    data = sample("nv_kern_sm90.cubin").read_bytes()
    elf = ElfView(data[:-100])  # ptxas writes the program header table last: it runs past the data
    with pytest.raises(FormatError, match="program header table") as info:
        elf.extent
    assert info.value.offset == struct.unpack_from("<Q", data, 0x20)[0]


def test_truncated_header():
    data = sample("nv_mode_default").read_bytes()
    with pytest.raises(FormatError):
        ElfView(data[:40])


@pytest.mark.parametrize("field, fmt, value, table", [
    (0x28, "<Q", 1 << 40, "sections"),  # e_shoff past the end
    (0x3C, "<H", 0x7FFF, "sections"),  # e_shnum past the end
    (0x3A, "<H", 32, "sections"),  # e_shentsize below 64
    (0x20, "<Q", 1 << 40, "segments"),  # e_phoff past the end
    (0x36, "<H", 16, "segments"),  # e_phentsize below 56
])
def test_header_tables_outside_the_file(field, fmt, value, table):
    data = bytearray(sample("nv_mode_default").read_bytes())
    struct.pack_into(fmt, data, field, value)
    elf = ElfView(bytes(data))
    with pytest.raises(FormatError) as info:
        getattr(elf, table)
    assert info.value.offset is not None


def test_relocation_table_outside_the_file():
    image = bytearray(synthetic_dyn(bytes(24), [(BASE_VA + RECORDS_AT + 8, 8, BASE_VA)]))
    dynamic_at = len(image) - 64  # four (tag, value) pairs
    struct.pack_into("<Q", image, dynamic_at + 24, 1 << 30)  # DT_RELASZ
    with pytest.raises(FormatError):
        ElfView(bytes(image)).pointers_in(records_section(1), WRAPPER_STRIDE, DATA_FIELD)


# --- corpus ---------------------------------------------------------------------------------------


@pytest.mark.corpus
@over_files(corpus_files())
def test_corpus_headers_match_pyelftools(path):
    with mapped(path) as data, path.open("rb") as f:
        elf = ElfView(data)
        ref = ELFFile(f)
        assert [s.name for s in elf.sections] == [s.name for s in ref.iter_sections()]
        dynamic = ref.get_section_by_name(".dynamic")
        tags = list(dynamic.iter_tags()) if dynamic is not None else []
        assert elf.needed == [t.needed for t in tags if t.entry.d_tag == "DT_NEEDED"]
        assert elf.soname == next((t.soname for t in tags if t.entry.d_tag == "DT_SONAME"), None)
        del elf
