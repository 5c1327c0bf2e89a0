"""fatkit.formats.cubin: cubins extracted from the samples checked against `cuobjdump -elf`/`-res-usage`,
cubins built here (synthetic and nvcc), e_flags decoding of every ABI, hostile bytes, and corpus cubins."""

from __future__ import annotations

import random
import re
import struct
import subprocess
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from fatkit.errors import FormatError
from fatkit.formats.cubin import (
    EIFMT_BVAL,
    EIFMT_HVAL,
    EIFMT_NVAL,
    EIFMT_SVAL,
    CubinParam,
    NvInfoAttr,
    cubin_kernel_names,
    parse_cubin,
    parse_nv_info,
)
from tests import oracles
from tests.corpus import corpus_file
from tests.helpers import cuobjdump13, cuobjdump_reading, mapped, nvcc, sample

# Samples whose cubins cover ABI 8 for sm_80/90/90a/100a/100f/120, ET_REL (-rdc), -G and -lineinfo.
CUBIN_SAMPLES = ["nv_mode_default", "nv_rdc", "nv_debug_G", "nv_lineinfo", "nv_sm90a.fatbin",
                 "nv_sm100a.fatbin", "nv_sm100f.fatbin", "nv_sm120.fatbin"]

SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_NOTE, SHT_NOBITS = 1, 2, 3, 7, 8
SHT_CUDA_INFO, SHT_CUDA_COMPAT = 0x70000000, 0x70000086


def extract_cubins(tool: Path, path: Path, outdir: Path) -> list[Path]:
    """Every cubin `cuobjdump -all -xelf all` leaves (identifier-named entries overwrite each other)."""
    return [file for _, file in oracles.cuobjdump_written(tool, path, outdir, ("elf",)) if file is not None]


# --- what cuobjdump says about one cubin ------------------------------------------------------------------

_ELF_HEADER_13 = re.compile(r"^64-bit ELF: type=ET_(\w+), ABI=(\d+), sm=(\w+), toolkit=(\d+)\.(\d+)", re.M)
_ELF_HEADER_OLD = re.compile(r"^(?:64|32)bit elf: type=(\d), abi=(\d+), sm=(\w+), toolkit=(\d+), flags = (0x\w+)", re.M)
_ENTRY_SYMBOL = re.compile(r"^\s+0x\w+\s+\w+\s+\w+\s+FUNC\s+\w+\s+\w+\s+ENTRY\s+\w+\s+(\S+)$", re.M)
_INFO_BLOCK = re.compile(r"^\.nv\.info\.(\S+)\n(.*?)(?=^\S|\Z)", re.M | re.S)
_KPARAM = re.compile(r"Ordinal : (0x\w+)\tOffset  : (0x\w+)\tSize    : (0x\w+)")
_CBANK_SIZE = re.compile(r"EIATTR_CBANK_PARAM_SIZE\n\tFormat:\tEIFMT_HVAL\n\tValue:\t(0x\w+)")
_MAX_THREADS = re.compile(r"EIATTR_MAX_THREADS\n\tFormat:\tEIFMT_SVAL\n\tValue:\t(0x\w+) (0x\w+) (0x\w+)")
_VIRTUAL_SM = re.compile(r"CUDA Virtual SM: sm_(\d+)")
_CMDLINE = re.compile(r"Tool Command Line Arguments: ([^\n]*?)\s*$", re.M)
_ACCELERATOR = re.compile(r"EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET\n\tFormat:\tEIFMT_BVAL\n\tValue:\t(0x\w+)")
_RESOURCES = re.compile(r"Function (\S+):\n\s+REG:(\d+) STACK:(\d+) SHARED:(\d+)")


@dataclass
class PeerKernel:
    params: list[tuple[int, int, int]]
    param_bytes: int
    max_threads: tuple[int, int, int] | None


@dataclass
class PeerCubin:
    e_type: str
    abi: int
    arch: str
    toolkit: int
    virtual_sm: int | None
    cmdline: str | None
    accelerator: int | None
    entries: set[str]
    kernels: dict[str, PeerKernel] = field(default_factory=dict)
    resources: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # REG, STACK, SHARED


def cuobjdump_cubin(tool: Path, cubin: Path) -> PeerCubin:
    elf = subprocess.run([str(tool), "-elf", str(cubin)], capture_output=True, text=True, timeout=300).stdout
    usage = subprocess.run([str(tool), "-res-usage", str(cubin)], capture_output=True, text=True,
                           timeout=300).stdout
    if (new := _ELF_HEADER_13.search(elf)) is not None:
        e_type, abi, arch = new.group(1).lower(), int(new.group(2)), new.group(3)
        toolkit = int(new.group(4)) * 10 + int(new.group(5))
        virtual = _VIRTUAL_SM.search(elf)
        virtual_sm = int(virtual.group(1)) if virtual else None
    else:
        old = _ELF_HEADER_OLD.search(elf)
        assert old is not None, elf[:300]
        e_type, abi, arch = {"1": "rel", "2": "exec"}[old.group(1)], int(old.group(2)), old.group(3)
        toolkit = int(old.group(4))
        virtual_sm = (int(old.group(5), 16) >> 16) & 0xFF
    cmdline = _CMDLINE.search(elf)
    accelerator = _ACCELERATOR.search(elf)
    peer = PeerCubin(e_type, abi, f"sm_{arch}", toolkit, virtual_sm, cmdline.group(1) if cmdline else None,
                     int(accelerator.group(1), 16) if accelerator else None, set(_ENTRY_SYMBOL.findall(elf)))
    for name, block in _INFO_BLOCK.findall(elf):
        size = _CBANK_SIZE.search(block)
        threads = _MAX_THREADS.search(block)
        peer.kernels[name] = PeerKernel(
            sorted((int(o, 16), int(off, 16), int(s, 16)) for o, off, s in _KPARAM.findall(block)),
            int(size.group(1), 16) if size else 0,
            tuple(int(v, 16) for v in threads.groups()) if threads else None)
    peer.resources = {m.group(1): tuple(map(int, m.group(2, 3, 4))) for m in _RESOURCES.finditer(usage)}
    return peer


@pytest.fixture(scope="module")
def sample_cubins(tmp_path_factory) -> list[Path]:
    tool = cuobjdump13()
    cubins = [sample("nv_kern_sm90.cubin")]
    for name in CUBIN_SAMPLES:
        cubins += extract_cubins(tool, sample(name), tmp_path_factory.mktemp(name.replace(".", "_")))
    return cubins


def test_sample_cubins_match_cuobjdump(sample_cubins):
    tool = cuobjdump13()
    seen_arches, seen_types, kernels_checked = set(), set(), 0
    for cubin in sample_cubins:
        data = cubin.read_bytes()
        info = parse_cubin(data)
        peer = cuobjdump_cubin(tool, cubin)
        where = cubin.name
        # cuobjdump knows no family variant: it prints sm=100 for an sm_100f cubin.
        assert info.arch.removesuffix("f") == peer.arch, where
        assert (info.e_type, info.abi_version, info.toolkit) == (peer.e_type, peer.abi, peer.toolkit), where
        assert info.virtual_sm == peer.virtual_sm, where
        assert info.tool_cmdline == peer.cmdline, where
        assert info.compat.get(0x09) == peer.accelerator, where
        assert info.osabi == 65 and info.address_64, where
        assert [k.name for k in info.kernels] == sorted(peer.entries), where
        assert cubin_kernel_names(data) == sorted(peer.entries), where
        for kernel in info.kernels:
            expected = peer.kernels[kernel.name]
            assert [(p.ordinal, p.offset, p.size) for p in kernel.params] == expected.params, kernel.name
            assert kernel.param_bytes == expected.param_bytes, kernel.name
            assert kernel.max_threads == expected.max_threads, kernel.name
            assert (kernel.registers, kernel.frame_bytes, kernel.shared_bytes) == peer.resources[kernel.name]
            kernels_checked += 1
        seen_arches.add(info.arch)
        seen_types.add(info.e_type)
    assert {"sm_80", "sm_90", "sm_90a", "sm_100a", "sm_100f", "sm_120"} <= seen_arches
    assert seen_types == {"exec", "rel"}
    assert kernels_checked > 40


def test_kern_sm90_details():
    info = parse_cubin(sample("nv_kern_sm90.cubin").read_bytes())
    assert (info.sm, info.arch, info.virtual_sm, info.toolkit, info.debug) == (90, "sm_90", 90, 130, False)
    kernels = {k.name: k for k in info.kernels}
    assert len(kernels) == 7
    saxpy = kernels["_Z5saxpyfPKfPfi"]
    assert saxpy.params == (CubinParam(0, 0, 4), CubinParam(1, 8, 8), CubinParam(2, 16, 8), CubinParam(3, 24, 4))
    assert saxpy.param_bytes == 28 and saxpy.max_threads is None and saxpy.shared_bytes == 0
    reduce = kernels["_Z13reduce_sharedPKfPf"]
    assert reduce.max_threads == (128, 1, 1) and reduce.shared_bytes > 0
    assert kernels["_Z11with_struct6ParamsPf"].params[0] == CubinParam(0, 0, 16)  # struct by value


def test_device_functions_are_not_kernels(sample_cubins):
    """-G and -rdc give the device function rdc_helper its own .nv.info section, but no constant bank."""
    debug = [c for c in sample_cubins if c.parent.name.startswith("nv_debug_G")]
    assert debug
    for cubin in debug:
        data = cubin.read_bytes()
        names = {s.name for s in ELFFile(BytesIO(data)).iter_sections()}
        assert ".nv.info._Z10rdc_helperf" in names
        info = parse_cubin(data)
        assert info.debug
        assert "_Z10rdc_helperf" not in cubin_kernel_names(data)
        assert "_Z10rdc_helperf" not in {k.name for k in info.kernels}
    lineinfo = [c for c in sample_cubins if c.parent.name.startswith("nv_lineinfo")]
    assert lineinfo and not any(parse_cubin(c.read_bytes()).debug for c in lineinfo)


def test_every_buffer_kind(tmp_path):
    path = sample("nv_kern_sm90.cubin")
    data = path.read_bytes()
    expected = parse_cubin(data)
    with mapped(path) as view:  # closing the map on exit checks that no view of it outlives the calls
        assert parse_cubin(view) == expected
        assert cubin_kernel_names(view) == cubin_kernel_names(data)
    padded = b"\xee" * 24 + data
    assert parse_cubin(memoryview(padded)[24:]) == expected
    assert parse_cubin(bytearray(data)) == expected


# --- cubins built with nvcc -------------------------------------------------------------------------------


def test_virtual_architecture_from_the_cuinfo_note(tmp_path):
    info = parse_cubin(nvcc(tmp_path, "cubin", "-gencode", "arch=compute_86,code=sm_90"))
    assert (info.sm, info.arch, info.virtual_sm, info.abi_version) == (90, "sm_90", 86, 8)
    assert info.tool_cmdline.startswith("-arch sm_90")


# --- e_flags of every ABI, on a real cubin with its identification patched -------------------------------


def patched(data: bytes, *, abi: int, osabi: int, e_flags: int, e_version: int) -> bytes:
    out = bytearray(data)
    out[7], out[8] = osabi, abi
    struct.pack_into("<I", out, 0x14, e_version)
    struct.pack_into("<I", out, 0x30, e_flags)
    return bytes(out)


@pytest.mark.parametrize("abi, e_flags, e_version, arch, virtual_sm, address_64, toolkit", [
    (7, 0x005A055A, 118, "sm_90", 90, True, 118),  # ptxas 11.8 sm_90
    (7, 0x005A0D5A, 129, "sm_90a", 90, True, 129),  # ptxas 12.9 sm_90a: EF_CUDA_ACCELERATORS 0x800
    (7, 0x004B064B, 129, "sm_75", 75, True, 129),  # texmode_independent
    (7, 0x004B0556, 129, "sm_86", 75, True, 129),  # compute_75 → sm_86
    (7, 0x00340134, 118, "sm_52", 52, False, 118),  # no EF_CUDA_64BIT_ADDRESS
    (6, 0x00230523, 1, "sm_35", 35, True, 130),  # unknown older ABI: the ABI-7 rule; toolkit from the kernels
    (8, 0x0600640A, 1, "sm_100a", 90, True, 130),  # ptxas 12.9 sm_100a: EF_CUDA_ACCELERATORS 0x8
    (8, 0x06007802, 1, "sm_120", 90, True, 130),
])
def test_e_flags_decoding(abi, e_flags, e_version, arch, virtual_sm, address_64, toolkit):
    data = patched(sample("nv_kern_sm90.cubin").read_bytes(), abi=abi, osabi=51 if abi < 8 else 65,
                   e_flags=e_flags, e_version=e_version)
    info = parse_cubin(data)
    # ABI 8 keeps the virtual SM of the cubin's cuinfo note (compute_90); ABI 7 reads e_flags.
    assert (info.abi_version, info.arch, info.virtual_sm, info.address_64) == (abi, arch, virtual_sm, address_64)
    assert info.sm == int(arch[3:].rstrip("af"))
    assert info.toolkit == toolkit
    assert len(info.kernels) == 7


# --- synthetic cubins -------------------------------------------------------------------------------------


def record(fmt: int, attribute: int, value: int | bytes) -> bytes:
    if fmt == EIFMT_SVAL:
        return struct.pack("<BBH", fmt, attribute, len(value)) + value
    return struct.pack("<BBH", fmt, attribute, value)


def note(note_type: int, desc: bytes) -> bytes:
    owner = b"NVIDIA Corp\0"
    return struct.pack("<III", len(owner), len(desc), note_type) + owner + desc + b"\0" * (-len(desc) % 4)


def symbol_table(symbols: list[tuple[str, int]], elf_class: int) -> tuple[bytes, bytes]:
    """(.symtab, .strtab) for FUNC GLOBAL symbols given as (name, st_other), after the null symbol."""
    strtab, table = b"\0", bytearray(24 if elf_class == 2 else 16)
    for name, other in symbols:
        if elf_class == 2:
            table += struct.pack("<IBBHQQ", len(strtab), 0x12, other, 1, 0, 0x80)
        else:
            table += struct.pack("<IIIBBH", len(strtab), 0, 0x80, 0x12, other, 1)
        strtab += name.encode() + b"\0"
    return bytes(table), strtab


def build_elf(sections: list[tuple[str, int, bytes, int]], *, elf_class: int = 2, abi: int = 8,
              e_flags: int = 0x06005A04, extended: bool = False) -> bytes:
    """An EM_CUDA ELF: the sections (name, type, bytes, link) after the null section, then .shstrtab.
    `extended` writes e_shnum = 0 and e_shstrndx = SHN_XINDEX, the real values in section 0."""
    sections = [*sections, (".shstrtab", SHT_STRTAB, b"", 0)]
    names = b"\0"
    name_offsets = []
    for name, *_ in sections:
        name_offsets.append(len(names))
        names += name.encode() + b"\0"
    sections[-1] = (".shstrtab", SHT_STRTAB, names, 0)
    header_size = 64 if elf_class == 2 else 52
    body = bytearray(header_size)
    offsets = []
    for _, sh_type, data, _ in sections:
        body += b"\0" * (-len(body) % 8)
        offsets.append(len(body))
        body += b"" if sh_type == SHT_NOBITS else data
    body += b"\0" * (-len(body) % 8)
    shoff, shnum, shstrndx = len(body), len(sections) + 1, len(sections)
    layout = "<IIQQQQIIQQ" if elf_class == 2 else "<IIIIIIIIII"
    body += struct.pack(layout, 0, 0, 0, 0, 0, shnum if extended else 0, shstrndx if extended else 0, 0, 0, 0)
    for name_offset, (_, sh_type, data, link), offset in zip(name_offsets, sections, offsets):
        entsize = (24 if elf_class == 2 else 16) if sh_type == SHT_SYMTAB else 0
        body += struct.pack(layout, name_offset, sh_type, 0, 0, offset, len(data), link, 0, 4, entsize)
    ident = b"\x7fELF" + bytes([elf_class, 1, 1, 65 if abi >= 8 else 51, abi]) + bytes(7)
    fields = (2, 190, 1, 0, 0, shoff, e_flags, header_size, 0, 0, 64 if elf_class == 2 else 40,
              0 if extended else shnum, 0xFFFF if extended else shstrndx)
    body[:header_size] = ident + struct.pack("<HHIQQQIHHHHHH" if elf_class == 2 else "<HHIIIIIHHHHHH", *fields)
    return bytes(body)


def synthetic_cubin(*, elf_class: int = 2, extended: bool = False, abi: int = 8) -> bytes:
    """Kernel `k$0` (2 parameters recorded in reverse order, launch bounds, static shared memory) and
    device function `f` (.nv.info.f, no constant bank); symbol 1 = k$0, 2 = f."""
    symtab, strtab = symbol_table([("k$0", 0x10), ("f", 0)], elf_class)
    def kparam(ordinal: int, offset: int, size: int) -> bytes:
        return struct.pack("<IHHI", 0, ordinal, offset, size << 18 | 0x1F000)

    global_info = (record(EIFMT_SVAL, 0x2F, struct.pack("<II", 1, 42))
                   + record(EIFMT_SVAL, 0x11, struct.pack("<II", 1, 16))
                   + record(EIFMT_SVAL, 0x2F, struct.pack("<II", 2, 7)) + record(EIFMT_NVAL, 0x35, 0))
    kernel_info = (record(EIFMT_SVAL, 0x37, struct.pack("<I", 128)) + record(EIFMT_SVAL, 0x17, kparam(1, 8, 4))
                   + record(EIFMT_SVAL, 0x17, kparam(0, 0, 8)) + record(EIFMT_HVAL, 0x19, 12)
                   + record(EIFMT_SVAL, 0x05, struct.pack("<III", 256, 2, 1)) + record(EIFMT_BVAL, 0x4C, 1)
                   + record(EIFMT_SVAL, 0x0A, struct.pack("<IHH", 5, 0x210, 12)) + record(EIFMT_SVAL, 0x7E, b"new!"))
    compat = record(EIFMT_BVAL, 0x09, 1) + record(EIFMT_HVAL, 0x07, 0x101) + record(EIFMT_SVAL, 0x0B, bytes(8))
    tkinfo = struct.pack("<IIIIII", 2, 0, 1, 7, 9, 11) + b"\0ptxas\0v\0b\0-arch sm_90a -m 64 \0"
    return build_elf([
        (".strtab", SHT_STRTAB, strtab, 0),
        (".symtab", SHT_SYMTAB, symtab, 1),
        (".note.nv.tkinfo", SHT_NOTE, note(2000, tkinfo), 0),
        (".note.nv.cuinfo", SHT_NOTE, note(1000, struct.pack("<HHI", 2, 89, 131)), 0),
        (".nv.info", SHT_CUDA_INFO, global_info, 2),
        (".nv.compat", SHT_CUDA_COMPAT, compat, 0),
        (".nv.info.k$0", SHT_CUDA_INFO, kernel_info, 2),
        (".nv.info.f", SHT_CUDA_INFO, record(EIFMT_SVAL, 0x37, struct.pack("<I", 128)), 2),
        (".nv.constant0.k$0", SHT_PROGBITS, bytes(0x21C), 0),
        (".nv.shared.k$0", SHT_NOBITS, bytes(0x400), 0),
        (".text.k$0", SHT_PROGBITS, bytes(0x80), 0),
        (".text.f", SHT_PROGBITS, bytes(0x80), 0),
    ], elf_class=elf_class, abi=abi, extended=extended)


@pytest.mark.parametrize("elf_class, extended", [(2, False), (1, False), (2, True), (1, True)])
def test_synthetic_cubin(elf_class, extended):
    data = synthetic_cubin(elf_class=elf_class, extended=extended)
    # The builder writes what a standard ELF reader reads.
    assert ".nv.info.k$0" in {s.name for s in ELFFile(BytesIO(data)).iter_sections()}
    info = parse_cubin(data)
    assert (info.sm, info.arch, info.virtual_sm, info.toolkit) == (90, "sm_90a", 89, 131)
    assert info.tool_cmdline == "-arch sm_90a -m 64"
    assert info.compat == {0x09: 1, 0x07: 0x101, 0x0B: bytes(8)}
    assert info.address_64 == (elf_class == 2) and not info.debug and info.e_type == "exec"
    (kernel,) = info.kernels
    assert kernel.name == "k$0"
    assert kernel.params == (CubinParam(0, 0, 8), CubinParam(1, 8, 4))
    assert (kernel.param_bytes, kernel.registers, kernel.frame_bytes) == (12, 42, 16)
    assert (kernel.max_threads, kernel.shared_bytes) == ((256, 2, 1), 0x400)
    assert cubin_kernel_names(data) == ["k$0"]


def test_family_variant_comes_from_the_command_line():
    data = synthetic_cubin().replace(b"\x02\x09\x01\x00", b"\x02\x09\x00\x00")  # accelerator target 0
    assert parse_cubin(data).arch == "sm_90"
    data = data.replace(b"-arch sm_90a", b"-arch sm_90f")
    assert parse_cubin(data).arch == "sm_90f"


def test_parameter_block_size_falls_back_to_param_cbank():
    data = synthetic_cubin().replace(record(EIFMT_HVAL, 0x19, 12), record(EIFMT_HVAL, 0x4C, 0))
    assert parse_cubin(data).kernels[0].param_bytes == 12


def test_parse_nv_info_formats():
    raw = (record(EIFMT_NVAL, 0x35, 0) + record(EIFMT_BVAL, 0x4C, 0x0201) + record(EIFMT_HVAL, 0x1B, 0xFF)
           + record(EIFMT_SVAL, 0x1C, b"\x80\x03\x00\x00") + record(EIFMT_SVAL, 0x99, b""))
    assert parse_nv_info(raw) == [
        NvInfoAttr(EIFMT_NVAL, 0x35, 0), NvInfoAttr(EIFMT_BVAL, 0x4C, 0x01), NvInfoAttr(EIFMT_HVAL, 0x1B, 0xFF),
        NvInfoAttr(EIFMT_SVAL, 0x1C, b"\x80\x03\x00\x00"), NvInfoAttr(EIFMT_SVAL, 0x99, b""),
    ]
    assert parse_nv_info(memoryview(raw)) == parse_nv_info(raw)
    assert parse_nv_info(b"") == []


@pytest.mark.parametrize("raw, offset", [
    (record(EIFMT_HVAL, 0x1B, 0xFF) + record(EIFMT_SVAL, 0x1C, b"\x80\x03\x00\x00")[:-1], 8),  # payload overrun
    (record(EIFMT_HVAL, 0x1B, 0xFF) + b"\x03\x1b", 4),  # truncated record header
    (record(EIFMT_HVAL, 0x1B, 0xFF) + b"\x05\x1b\x00\x00", 4),  # unknown format
    (b"\x00" * 4, 0),  # zero padding is not a record
])
def test_parse_nv_info_rejects(raw, offset):
    with pytest.raises(FormatError) as caught:
        parse_nv_info(raw)
    assert caught.value.offset == offset


def test_nv_info_error_offsets_are_in_the_cubin():
    data = synthetic_cubin()
    broken = data.replace(record(EIFMT_HVAL, 0x19, 12), b"\x09\x19\x0c\x00")
    with pytest.raises(FormatError) as caught:
        parse_cubin(broken)
    assert broken[caught.value.offset] == 0x09


# --- hostile bytes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("data, message", [
    (b"", "ELF identification"),
    (b"\x7fELF", "ELF identification"),
    (b"MZ" + bytes(100), "not an ELF"),
    (b"\x7fELF\x03\x01" + bytes(100), "ELF class"),
    (b"\x7fELF\x02\x02" + bytes(100), "little-endian"),
])
def test_not_a_cubin(data, message):
    with pytest.raises(FormatError, match=message):
        parse_cubin(data)
    with pytest.raises(FormatError, match=message):
        cubin_kernel_names(data)


def test_host_elf_is_not_a_cubin():
    data = bytearray(synthetic_cubin())
    data[18] = 62  # EM_X86_64
    with pytest.raises(FormatError, match="EM_CUDA"):
        cubin_kernel_names(bytes(data))


def test_header_counts_are_bounded():
    data = bytearray(synthetic_cubin())
    struct.pack_into("<H", data, 0x3C, 0xFFF0)  # e_shnum
    with pytest.raises(FormatError, match="section header table"):
        parse_cubin(bytes(data))
    data = bytearray(synthetic_cubin())
    struct.pack_into("<H", data, 0x3E, 200)  # e_shstrndx past the table
    with pytest.raises(FormatError, match="section name table index"):
        cubin_kernel_names(bytes(data))


def hostile_variants(data: bytes, rng: random.Random, count: int) -> list[bytes]:
    variants = [data[:cut] for cut in range(0, len(data), max(1, len(data) // 60))]
    for _ in range(count):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 6)):
            # Flip mostly in the headers and tables, where a flip changes the structure.
            where = rng.randrange(min(len(data), 0x40)) if rng.random() < 0.2 else rng.randrange(len(data))
            mutated[where] = rng.randrange(256)
        variants.append(bytes(mutated))
    return variants


def test_hostile_bytes_raise_only_format_errors():
    rng = random.Random(1234)
    cubins = [synthetic_cubin(), synthetic_cubin(elf_class=1, extended=True), sample("nv_kern_sm90.cubin").read_bytes()]
    rejected = 0
    for data in cubins:
        for variant in hostile_variants(data, rng, 600):
            for reader in (parse_cubin, cubin_kernel_names):
                try:
                    reader(variant)
                except FormatError as error:
                    assert error.offset is not None and error.offset >= 0, str(error)
                    rejected += 1
    assert rejected > 500


# --- corpus -----------------------------------------------------------------------------------------------


def corpus_cubins(member: str, tmp_path: Path) -> list[Path]:
    path = corpus_file(member)
    cubins = extract_cubins(cuobjdump_reading(path), path, tmp_path)
    assert cubins
    return cubins


@pytest.mark.corpus
@pytest.mark.parametrize("member", [
    "torchaudio/lib/libtorchaudio.so",
    "jax_cuda12_plugin/_prng.so",
    "nvidia/nvjpeg/lib/libnvjpeg.so.11",  # sm_35…sm_90 CUDA 11.8 cubins: only cuobjdump 12.8 reads them
])
def test_corpus_cubins_parse(member, tmp_path):
    arches, kernels = set(), 0
    for cubin in corpus_cubins(member, tmp_path):
        data = cubin.read_bytes()
        info = parse_cubin(data)
        assert [k.name for k in info.kernels] == cubin_kernel_names(data), cubin.name
        arches.add(info.arch)
        kernels += len(info.kernels)
    assert kernels > 0
    if member.endswith("libnvjpeg.so.11"):
        assert {"sm_35", "sm_37", "sm_90"} <= arches


@pytest.mark.corpus
def test_corpus_cubins_match_cuobjdump(tmp_path):
    """jax's CUDA 12.9 cubins: ABI 7 for sm_50…sm_90, ABI 8 for sm_100/101/120."""
    tool = cuobjdump13()
    cubins = corpus_cubins("jax_cuda12_plugin/_prng.so", tmp_path)
    assert {parse_cubin(c.read_bytes()).abi_version for c in cubins} == {7, 8}
    for cubin in cubins:
        info = parse_cubin(cubin.read_bytes())
        peer = cuobjdump_cubin(tool, cubin)
        assert (info.arch, info.toolkit, info.abi_version) == (peer.arch, peer.toolkit, peer.abi), cubin.name
        assert [k.name for k in info.kernels] == sorted(peer.entries)
        for kernel in info.kernels:
            assert (kernel.registers, kernel.frame_bytes, kernel.shared_bytes) == peer.resources[kernel.name]
            assert [(p.ordinal, p.offset, p.size) for p in kernel.params] == peer.kernels[kernel.name].params
