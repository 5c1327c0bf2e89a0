"""fatkit.formats.wrappers: every wrapper of every sample and corpus binary resolves to a container."""

from __future__ import annotations

import struct
from collections import Counter

import pytest

from fatkit.errors import FormatError
from fatkit.formats.elf import ElfView
from fatkit.formats.fatbin import parse_container
from fatkit.formats.wrappers import HIP_WRAPPER_MAGIC, NV_WRAPPER_MAGIC, WRAPPER_SIZE, read_wrappers
from tests.corpus import corpus_files
from tests.helpers import mapped, over_files, sample

BUNDLE_MAGICS = (b"__CLANG_OFFLOAD_BUNDLE__", b"CCOB")

EXE_PAIR = {("nvidia", 1, ".nv_fatbin"): 1, ("nvidia", 2, ".nv_fatbin"): 1}  # nvcc 13 always device-links
RDC = {("nvidia", 2, ".nv_fatbin"): 1, ("nvidia", 1, "__nv_relfatbin"): 2}
EXPECTED = {
    **{name: EXE_PAIR for name in ["nv_mode_default", "nv_mode_none", "nv_mode_size", "nv_mode_speed",
                                   "nv_compress_all", "nv_nopie", "nv_lld", "nv_relr", "nv_lld_relr",
                                   "nv_lib.so", "nv_stripped", "nv_debug_G", "nv_lineinfo"]},
    "nv_host_O2": {("nvidia", 1, ".nv_fatbin"): 1},  # gcc -O2 dropped the unreferenced v2 wrapper
    "nv_kern.o": {("nvidia", 1, ".nv_fatbin"): 1},
    "nv_dlink.o": {("nvidia", 2, ".nv_fatbin"): 1},
    "nv_rdc": RDC,
    "nv_dlto": RDC,
    "nv_lto90.o": {("nvidia", 1, "__nv_relfatbin"): 1},
    "nv_noshdr": {},  # no section headers: wrappers cannot be named
    "nv_bin2c": {},  # a fatbin in .rodata that nothing registers
    "amd_hip_exe": {("hip", 1, ".hip_fatbin"): 1},
    "amd_hip_nopie": {("hip", 1, ".hip_fatbin"): 1},
    "amd_hip_kern.o": {("hip", 1, ".hip_fatbin"): 1},
    "amd_hip_ccob.so": {("hip", 1, ".hip_fatbin"): 1},
    "amd_hip_two_tu": {("hip", 1, ".hip_fatbin"): 2},
}


def check_targets(data, elf: ElfView) -> list:
    """The wrappers, after checking each resolves to a parseable fatbin or a bundle."""
    wrappers = read_wrappers(elf)
    for wrapper in wrappers:
        assert wrapper.target is not None, f"wrapper at 0x{wrapper.offset:x} does not resolve"
        if wrapper.vendor == "nvidia":
            assert parse_container(data, wrapper.target).entries
        else:
            assert any(data[wrapper.target : wrapper.target + len(m)] == m for m in BUNDLE_MAGICS)
    return wrappers


@pytest.mark.parametrize("name", EXPECTED)
def test_sample_wrappers(name):
    data = sample(name).read_bytes()
    elf = ElfView(data)
    wrappers = check_targets(data, elf)
    assert Counter((w.vendor, w.version, elf.section_at(w.target).name) for w in wrappers) == Counter(EXPECTED[name])
    for wrapper in wrappers:
        section = elf.section_at(wrapper.offset)
        assert section.name in (".nvFatBinSegment", ".hipFatBinSegment")
        assert (wrapper.offset - section.offset) % WRAPPER_SIZE == 0


def test_two_tu_hip_registers_a_plain_bundle_and_a_ccob():
    data = sample("amd_hip_two_tu").read_bytes()
    starts = sorted(data[w.target : w.target + 4] for w in read_wrappers(ElfView(data)))
    assert starts == [b"CCOB", b"__CL"]


def _first_record(data: bytes) -> int:
    section = ElfView(data).section(".nvFatBinSegment")
    return section.offset


def test_wrong_magic_raises_with_the_record_offset():
    data = bytearray(sample("nv_mode_default").read_bytes())
    record = _first_record(bytes(data)) + WRAPPER_SIZE
    assert struct.unpack_from("<I", data, record)[0] == NV_WRAPPER_MAGIC
    struct.pack_into("<I", data, record, HIP_WRAPPER_MAGIC)  # a HIP record in the NVIDIA section
    with pytest.raises(FormatError) as info:
        read_wrappers(ElfView(bytes(data)))
    assert info.value.offset == record


def test_section_of_partial_records_raises():
    data = bytearray(sample("nv_mode_default").read_bytes())
    elf = ElfView(bytes(data))
    section = elf.section(".nvFatBinSegment")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    struct.pack_into("<Q", data, shoff + section.index * 64 + 0x20, section.size - 4)  # sh_size
    with pytest.raises(FormatError) as info:
        read_wrappers(ElfView(bytes(data)))
    assert info.value.offset == section.offset


def test_unresolvable_pointer_is_reported_as_none():
    """lld leaves the field zero; without a usable relocation the wrapper has no target."""
    data = bytearray(sample("nv_lld").read_bytes())
    elf = ElfView(bytes(data))
    section = elf.section(".nvFatBinSegment")
    rela = elf.section(".rela.dyn")
    for at in range(rela.offset, rela.offset + rela.size, 24):
        r_offset, r_info = struct.unpack_from("<QQ", data, at)
        if section.addr <= r_offset < section.addr + section.size:
            struct.pack_into("<Q", data, at + 8, (r_info & ~0xFFFFFFFF) | 7)  # R_X86_64_JUMP_SLOT
    wrappers = read_wrappers(ElfView(bytes(data)))
    assert [w.target for w in wrappers] == [None, None]
    assert [w.version for w in wrappers] == [2, 1]


@pytest.mark.corpus
@over_files(corpus_files())
def test_corpus_wrappers_resolve(path):
    with mapped(path) as data:
        elf = ElfView(data)
        wrappers = check_targets(data, elf)
        sections = {s.name for s in elf.sections}
        assert bool(wrappers) == bool(sections & {".nvFatBinSegment", ".hipFatBinSegment"})
        del elf
