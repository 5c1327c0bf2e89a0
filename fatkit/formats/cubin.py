"""NVIDIA device ELF ("cubin", EM_CUDA 190): architecture, attributes and kernels (FORMATS.md A.3).

Two readers share one bounds-checked reading of the ELF header:

* `cubin_kernel_names` is the fast path run on every cubin of a library: it reads the ELF header, the
  `.shstrtab` section header and `.shstrtab` only.
* `parse_cubin` reads everything fatkit reports: the e_flags decoding of ABI 7 and ABI 8, the
  `.nv.compat` and note sections, and per kernel the `.nv.info` attributes (parameters, registers,
  launch bounds, frame size) and static shared memory.

Fixed layouts are `struct.Struct`s rather than construct Structs: a compiled construct parse costs about
25 µs, the whole budget of `cubin_kernel_names`, and a cubin has thousands of symbols and records.
ELFCLASS32 cubins (ptxas 11 `-m32`) are read too; only little-endian ELF exists for CUDA.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import NamedTuple

from fatkit.errors import FormatError
from fatkit.formats.common import Buffer, need

EM_CUDA = 190
ELF_MAGIC = b"\x7fELF"
ELFCLASS32, ELFCLASS64 = 1, 2
ELFDATA2LSB = 1
ET_REL, ET_EXEC = 1, 2
SHT_SYMTAB, SHT_NOTE, SHT_NOBITS = 2, 7, 8
SHN_XINDEX = 0xFFFF
STT_FUNC = 2
STO_CUDA_ENTRY = 0x10  # st_other of a kernel (entry point); device functions have 0

INFO_PREFIX = ".nv.info."
SHARED_PREFIX = ".nv.shared."

# e_flags, ABI 7 (legacy) and ABI 8.
EF7_SM_MASK = 0xFF
EF7_64BIT_ADDRESS = 0x400
EF7_ACCELERATORS = 0x800
EF7_VIRTUAL_SM_SHIFT = 16
EF8_SM_SHIFT = 8
EF8_ACCELERATORS = 0x8

# `.nv.info` record formats.
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
# `.nv.info` attribute ids used here (FORMATS.md A.3 lists the others).
EIATTR_MAX_THREADS = 0x05
EIATTR_PARAM_CBANK = 0x0A
EIATTR_FRAME_SIZE = 0x11
EIATTR_KPARAM_INFO = 0x17
EIATTR_CBANK_PARAM_SIZE = 0x19
EIATTR_REGCOUNT = 0x2F
EIATTR_CUDA_API_VERSION = 0x37
# `.nv.compat` attribute: 1 for arch-specific (`sm_XXa`) targets.
EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET = 0x09

NOTE_OWNER_NVIDIA = b"NVIDIA Corp"
NT_CUDA_INFO = 1000  # `.note.nv.cuinfo` (CUDA 13) / `.note.nv.cuver` (12.9): u16 version, u16 virtual SM, …
NT_CUDA_TOOLKIT = 2000  # `.note.nv.tkinfo`: producer, release, build and command-line strings

_IDENT = struct.Struct("<4sBBBBB")  # magic, class, data, version, osabi, abiversion
# After e_ident (16 bytes): e_type, e_machine, e_version, e_entry, e_phoff, e_shoff, e_flags, e_ehsize,
# e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx.
_HEADER = {ELFCLASS32: struct.Struct("<HHIIIIIHHHHHH"), ELFCLASS64: struct.Struct("<HHIQQQIHHHHHH")}
# sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, sh_info, sh_addralign, sh_entsize.
_SECTION = {ELFCLASS32: struct.Struct("<IIIIIIIIII"), ELFCLASS64: struct.Struct("<IIQQQQIIQQ")}
# Symbols as (st_name, st_info, st_other); the rest is skipped.
_SYMBOL = {ELFCLASS32: struct.Struct("<I8xBB2x"), ELFCLASS64: struct.Struct("<IBB18x")}
_NOTE = struct.Struct("<III")  # namesz, descsz, type
_RECORD = struct.Struct("<BBH")  # format, attribute, u16 value or payload size
_U32 = struct.Struct("<I")
_U32X2 = struct.Struct("<II")
_U32X3 = struct.Struct("<III")
_KPARAM = struct.Struct("<IHHI")  # index, ordinal, offset, packed (bits 18-31: size)
_PARAM_CBANK = struct.Struct("<IHH")  # symbol of .nv.constant0.<k>, offset, size
_CUINFO = struct.Struct("<HH")  # note version, virtual SM
_TKINFO = struct.Struct("<IIIIII")  # ?, ?, offsets of tool, release, build, command line
KPARAM_SIZE_SHIFT = 18
# Whole names in a string table (every name follows the NUL that ends the previous one).
_INFO_NAME = re.compile(rb"\0\.nv\.info\.([^\0]+)(?=\0)")
_CONSTANT0_NAME = re.compile(rb"\0\.nv\.constant0\.([^\0]+)(?=\0)")


@dataclass(frozen=True)
class NvInfoAttr:
    format: int  # EIFMT_*
    attribute: int  # EIATTR_* (`.nv.info`) or EICOMPAT_ATTR_* (`.nv.compat`)
    value: int | bytes  # u16/u8 for NVAL/HVAL/BVAL, the payload for SVAL


@dataclass(frozen=True)
class CubinParam:
    ordinal: int
    offset: int  # within the parameter block
    size: int


@dataclass(frozen=True)
class CubinKernel:
    name: str  # the (mangled) symbol
    param_bytes: int  # size of the parameter block
    params: tuple[CubinParam, ...]  # by ordinal
    registers: int | None
    shared_bytes: int  # static shared memory (`.nv.shared.<k>`)
    max_threads: tuple[int, int, int] | None  # `__launch_bounds__` / `.maxntid`
    frame_bytes: int | None


@dataclass(frozen=True)
class CubinInfo:
    abi_version: int  # EI_ABIVERSION: 7 legacy, 8 new layout
    osabi: int
    e_type: str  # "exec" | "rel"
    sm: int  # real architecture, e.g. 90
    arch: str  # "sm_90", "sm_90a", "sm_100f"
    virtual_sm: int | None  # the compute_XX the code was generated from
    toolkit: int | None  # CUDA release * 10, e.g. 130
    debug: bool  # DWARF (`nvcc -G`) present
    address_64: bool
    compat: dict[int, int | bytes]  # `.nv.compat` attributes by id
    tool_cmdline: str | None  # options of the tool that wrote the cubin (ptxas, nvlink): `.note.nv.tkinfo`
    kernels: tuple[CubinKernel, ...]  # sorted by name


class _Header(NamedTuple):
    elf_class: int
    osabi: int
    abi_version: int
    e_type: int
    e_version: int  # 1, except ABI-7 cubins, where it is the toolkit release (118 = 11.8)
    e_flags: int
    shoff: int  # section header table
    shnum: int
    shentsize: int
    shstrndx: int


class _Section(NamedTuple):
    name: str
    type: int
    offset: int
    size: int
    link: int
    header: int  # offset of its section header, for error messages


class _Symbol(NamedTuple):
    index: int
    other: int  # st_other: STO_CUDA_ENTRY marks a kernel


def _unpack(layout: struct.Struct, data: Buffer, offset: int, what: str) -> tuple:
    need(data, offset, layout.size, what)
    return layout.unpack_from(data, offset)


def _header(data: Buffer) -> _Header:
    """The ELF header, checked to be an EM_CUDA little-endian ELF with a section header table whose
    counts (extended numbering resolved) fit in the data."""
    magic, elf_class, elf_data, _, osabi, abi_version = _unpack(_IDENT, data, 0, "ELF identification")
    if magic != ELF_MAGIC:
        raise FormatError("not an ELF file (no \\x7fELF magic)", offset=0)
    if elf_class not in _HEADER:
        raise FormatError(f"unknown ELF class {elf_class}", offset=4)
    if elf_data != ELFDATA2LSB:
        raise FormatError(f"cubin is not little-endian (EI_DATA {elf_data})", offset=5)
    (e_type, machine, e_version, _, _, shoff, e_flags, _, _, _, shentsize, shnum, shstrndx) = _unpack(
        _HEADER[elf_class], data, 16, "ELF header")
    if machine != EM_CUDA:
        raise FormatError(f"e_machine {machine} is not EM_CUDA ({EM_CUDA})", offset=18)
    if shoff == 0:
        raise FormatError("cubin has no section header table", offset=0)
    if shentsize != _SECTION[elf_class].size:
        raise FormatError(f"section header size {shentsize} is not {_SECTION[elf_class].size}", offset=0)
    if shnum == 0 or shstrndx == SHN_XINDEX:  # extended numbering: the real values are in section 0
        _, _, _, _, _, size0, link0, _, _, _ = _unpack(_SECTION[elf_class], data, shoff, "section header 0")
        shnum = shnum or size0
        shstrndx = link0 if shstrndx == SHN_XINDEX else shstrndx
    need(data, shoff, shnum * shentsize, "section header table")
    if shstrndx >= shnum:
        raise FormatError(f"section name table index {shstrndx} is outside the {shnum} sections", offset=0)
    return _Header(elf_class, osabi, abi_version, e_type, e_version, e_flags, shoff, shnum, shentsize, shstrndx)


def _contents(data: Buffer, offset: int, size: int, what: str, header: int) -> bytes:
    if offset < 0 or size < 0 or offset + size > len(data):
        raise FormatError(f"{what} ({size} bytes at 0x{offset:x}) runs past the end of the data "
                          f"(0x{len(data):x} bytes)", offset=header)
    return bytes(data[offset:offset + size])


def _section_names_table(data: Buffer, h: _Header) -> bytes:
    """The bytes of `.shstrtab`."""
    header = h.shoff + h.shstrndx * h.shentsize
    _, sh_type, _, _, offset, size, _, _, _, _ = _SECTION[h.elf_class].unpack_from(data, header)
    if sh_type == SHT_NOBITS:
        raise FormatError("section name table has no bytes (SHT_NOBITS)", offset=header)
    return _contents(data, offset, size, "section name table", header)


def _string(table: bytes, offset: int, what: str, header: int) -> str:
    end = table.find(b"\0", offset)
    if offset >= len(table) or end < 0:
        raise FormatError(f"{what} name offset 0x{offset:x} is outside its string table "
                          f"(0x{len(table):x} bytes)", offset=header)
    return table[offset:end].decode("utf-8", "replace")


def cubin_kernel_names(data: Buffer) -> list[str]:
    """Kernel names, sorted, from the ELF header and `.shstrtab` alone (no symbol table).

    A kernel has both `.nv.info.<k>` and `.nv.constant0.<k>` (its parameter bank); device functions
    may have `.nv.info.<f>` too (`-G`, `-rdc`) but never a constant bank 0. The names are matched in
    the string table itself (two C-level regex scans), which is what keeps this at ~10 µs a cubin;
    on real cubins the result equals the entry-point symbols `parse_cubin` lists.
    """
    names = _section_names_table(data, _header(data))
    kernels = set(_INFO_NAME.findall(names)).intersection(_CONSTANT0_NAME.findall(names))
    return sorted(name.decode("utf-8", "replace") for name in kernels)


def parse_nv_info(data: Buffer) -> list[NvInfoAttr]:
    """The records of a `.nv.info`, `.nv.info.<k>` or `.nv.compat` section, in order."""
    records = []
    pos, end = 0, len(data)
    while pos < end:
        fmt, attribute, value = _unpack(_RECORD, data, pos, "attribute record")
        if fmt == EIFMT_SVAL:
            need(data, pos + 4, value, f"attribute 0x{attribute:x} payload")
            records.append(NvInfoAttr(fmt, attribute, bytes(data[pos + 4:pos + 4 + value])))
            pos += 4 + value
        elif fmt in (EIFMT_NVAL, EIFMT_HVAL):
            records.append(NvInfoAttr(fmt, attribute, value))
            pos += 4
        elif fmt == EIFMT_BVAL:
            records.append(NvInfoAttr(fmt, attribute, value & 0xFF))
            pos += 4
        else:
            raise FormatError(f"unknown attribute record format {fmt} (attribute 0x{attribute:x})", offset=pos)
    return records


def _sections(data: Buffer, h: _Header) -> list[_Section]:
    names = _section_names_table(data, h)
    layout = _SECTION[h.elf_class]
    sections = []
    for index in range(h.shnum):
        header = h.shoff + index * h.shentsize
        name, sh_type, _, _, offset, size, link, _, _, _ = layout.unpack_from(data, header)
        sections.append(_Section(_string(names, name, "section", header), sh_type, offset, size, link, header))
    return sections


def _section_bytes(data: Buffer, section: _Section) -> bytes:
    if section.type == SHT_NOBITS:
        return b""
    return _contents(data, section.offset, section.size, f"section {section.name}", section.header)


def _nv_info(data: Buffer, section: _Section) -> list[NvInfoAttr]:
    try:
        return parse_nv_info(_section_bytes(data, section))
    except FormatError as error:
        raise error.located(base=section.offset) from None


def _functions(data: Buffer, h: _Header, sections: list[_Section]) -> dict[str, _Symbol]:
    """Function symbols of `.symtab` by name (the first of each name)."""
    symtab = next((s for s in sections if s.type == SHT_SYMTAB), None)
    if symtab is None:
        return {}
    if symtab.link >= len(sections):
        raise FormatError(f"symbol table links to section {symtab.link}, which does not exist",
                          offset=symtab.header)
    table = _section_bytes(data, symtab)
    strings = _section_bytes(data, sections[symtab.link])
    layout = _SYMBOL[h.elf_class]
    functions: dict[str, _Symbol] = {}
    usable = len(table) - len(table) % layout.size
    for index, (name, info, other) in enumerate(layout.iter_unpack(table[:usable])):
        if info & 0xF == STT_FUNC:
            functions.setdefault(_string(strings, name, "symbol", symtab.offset + index * layout.size),
                                 _Symbol(index, other))
    return functions


def _notes(data: Buffer, section: _Section) -> list[tuple[bytes, int, bytes, int]]:
    """(owner, type, desc, offset of desc in data) of each note in a SHT_NOTE section."""
    contents = _section_bytes(data, section)
    notes = []
    pos = 0
    while pos < len(contents):
        try:
            namesz, descsz, note_type = _unpack(_NOTE, contents, pos, "note header")
            name_at = pos + _NOTE.size
            desc_at = name_at + (namesz + 3) // 4 * 4
            need(contents, desc_at, descsz, "note description")
        except FormatError as error:
            raise error.located(base=section.offset) from None
        notes.append((contents[name_at:name_at + namesz].rstrip(b"\0"), note_type,
                      contents[desc_at:desc_at + descsz], section.offset + desc_at))
        pos = desc_at + (descsz + 3) // 4 * 4
    return notes


def _tool_cmdline(desc: bytes) -> str:
    """The command-line string of a `.note.nv.tkinfo` description (offsets count from its string table)."""
    *_, cmdline = _unpack(_TKINFO, desc, 0, "toolkit note")
    strings = desc[_TKINFO.size:]
    return _string(strings, cmdline, "toolkit note command line", 0).strip()


@dataclass
class _Notes:
    virtual_sm: int | None = None
    toolkit: int | None = None
    # One per tool that made the cubin, the last one first (nvlink, then the ptxas runs it linked).
    tool_cmdlines: list[str] = field(default_factory=list)


def _read_notes(data: Buffer, sections: list[_Section]) -> _Notes:
    found = _Notes()
    for section in sections:
        if section.type != SHT_NOTE:
            continue
        for owner, note_type, desc, desc_offset in _notes(data, section):
            if owner != NOTE_OWNER_NVIDIA:
                continue
            try:
                if note_type == NT_CUDA_INFO:
                    version, virtual_sm = _unpack(_CUINFO, desc, 0, "CUDA information note")
                    found.virtual_sm = virtual_sm or None
                    if version >= 2 and len(desc) >= _CUINFO.size + _U32.size:  # v2 adds the toolkit
                        found.toolkit = _U32.unpack_from(desc, _CUINFO.size)[0]
                elif note_type == NT_CUDA_TOOLKIT:
                    found.tool_cmdlines.append(_tool_cmdline(desc))
            except FormatError as error:
                raise error.located(base=desc_offset) from None
    return found


def _by_symbol(records: list[NvInfoAttr], attribute: int) -> dict[int, int]:
    """{symbol index: value} of the (u32 symbol, u32 value) records of `attribute`."""
    return {
        sym: value
        for sym, value in (_U32X2.unpack_from(r.value) for r in records
                           if r.attribute == attribute and r.format == EIFMT_SVAL and len(r.value) >= 8)
    }


def _kernel(name: str, records: list[NvInfoAttr], symbol: _Symbol, registers: dict[int, int],
            frames: dict[int, int], shared_bytes: int) -> CubinKernel:
    """A kernel from its `.nv.info.<k>` records. Records whose format or size differ from the known
    layout are left out (older or newer toolkits), never an error."""
    params = []
    param_bytes = cbank_bytes = 0
    max_threads = None
    for r in records:
        if r.format == EIFMT_SVAL:
            if r.attribute == EIATTR_KPARAM_INFO and len(r.value) >= _KPARAM.size:
                _, ordinal, offset, packed = _KPARAM.unpack_from(r.value)
                params.append(CubinParam(ordinal, offset, packed >> KPARAM_SIZE_SHIFT))
            elif r.attribute == EIATTR_MAX_THREADS and len(r.value) >= _U32X3.size:
                max_threads = _U32X3.unpack_from(r.value)
            elif r.attribute == EIATTR_PARAM_CBANK and len(r.value) >= _PARAM_CBANK.size:
                cbank_bytes = _PARAM_CBANK.unpack_from(r.value)[2]
        elif r.format == EIFMT_HVAL and r.attribute == EIATTR_CBANK_PARAM_SIZE:
            param_bytes = r.value
    return CubinKernel(
        name=name,
        param_bytes=param_bytes or cbank_bytes,
        params=tuple(sorted(params, key=lambda p: p.ordinal)),
        registers=registers.get(symbol.index),
        shared_bytes=shared_bytes,
        max_threads=max_threads,
        frame_bytes=frames.get(symbol.index),
    )


def _family(cmdlines: list[str], sm: int) -> bool:
    """Whether a tool was run for the family target `sm_XXf` (recorded nowhere else in a cubin)."""
    target = re.compile(rf"(?:^|\s)-arch[= ]sm_{sm}f(?:\s|$)")
    return any(target.search(cmdline) for cmdline in cmdlines)


def parse_cubin(data: Buffer) -> CubinInfo:
    """Everything fatkit reports about a cubin; FormatError (offset in `data`) on malformed bytes."""
    h = _header(data)
    if h.e_type not in (ET_REL, ET_EXEC):
        raise FormatError(f"cubin e_type {h.e_type} is neither ET_REL nor ET_EXEC", offset=16)
    sections = _sections(data, h)
    by_name: dict[str, _Section] = {}
    for section in sections:
        by_name.setdefault(section.name, section)

    compat_section = by_name.get(".nv.compat")
    compat = {r.attribute: r.value for r in _nv_info(data, compat_section)} if compat_section else {}
    notes = _read_notes(data, sections)

    flags = h.e_flags
    if h.abi_version >= 8:
        sm = (flags >> EF8_SM_SHIFT) & 0xFF
        accelerated = bool(flags & EF8_ACCELERATORS) or compat.get(EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET) == 1
        virtual_sm = notes.virtual_sm
        address_64 = h.elf_class == ELFCLASS64
        toolkit = notes.toolkit
    else:  # ABI 7 and older layouts
        sm = flags & EF7_SM_MASK
        accelerated = bool(flags & EF7_ACCELERATORS)
        virtual_sm = ((flags >> EF7_VIRTUAL_SM_SHIFT) & 0xFF) or None
        address_64 = bool(flags & EF7_64BIT_ADDRESS)
        toolkit = h.e_version if h.e_version > 1 else None
    variant = "a" if accelerated else "f" if _family(notes.tool_cmdlines, sm) else ""

    global_section = by_name.get(".nv.info")
    global_records = _nv_info(data, global_section) if global_section else []
    registers = _by_symbol(global_records, EIATTR_REGCOUNT)
    frames = _by_symbol(global_records, EIATTR_FRAME_SIZE)
    functions = _functions(data, h, sections)
    kernels = []
    api_versions = []
    for section_name, section in by_name.items():
        if not section_name.startswith(INFO_PREFIX):
            continue
        name = section_name[len(INFO_PREFIX):]
        symbol = functions.get(name)
        if symbol is None:
            raise FormatError(f"section {section_name} names no function symbol", offset=section.header)
        records = _nv_info(data, section)
        api_versions += [_U32.unpack_from(r.value)[0] for r in records if r.attribute == EIATTR_CUDA_API_VERSION
                         and r.format == EIFMT_SVAL and len(r.value) >= _U32.size]
        if not symbol.other & STO_CUDA_ENTRY:
            continue  # a device function's attributes (`-G`, `-rdc`)
        shared = by_name.get(SHARED_PREFIX + name)
        kernels.append(_kernel(name, records, symbol, registers, frames, shared.size if shared else 0))

    return CubinInfo(
        abi_version=h.abi_version,
        osabi=h.osabi,
        e_type="exec" if h.e_type == ET_EXEC else "rel",
        sm=sm,
        arch=f"sm_{sm}{variant}",
        virtual_sm=virtual_sm,
        # 12.9's ABI-8 cubins name the toolkit in neither e_version nor their (v1) cuinfo note.
        toolkit=toolkit if toolkit is not None else max(api_versions, default=None),
        debug=".debug_info" in by_name,
        address_64=address_64,
        compat=compat,
        tool_cmdline=notes.tool_cmdlines[0] if notes.tool_cmdlines else None,
        kernels=tuple(sorted(kernels, key=lambda k: k.name)),
    )
