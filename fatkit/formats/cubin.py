"""NVIDIA device ELF ("cubin", EM_CUDA 190): architecture, attributes and kernels (docs/formats.md §3).

The ELF itself is read by `fatkit.formats.elf.ElfView`, which reads only what is asked of it:

* `cubin_kernel_names` is the fast path run on every cubin of a library: it reads the ELF header, the
  `.shstrtab` section header and `.shstrtab` only.
* `parse_cubin` reads everything fatkit reports: the e_flags decoding of ABI 7 and ABI 8, the
  `.nv.compat` and note sections, and per kernel the `.nv.info` attributes (parameters, registers,
  launch bounds, frame size) and static shared memory.

The `.nv.info` records and note descriptions are `struct.Struct`s rather than construct Structs: a
compiled construct parse costs about 25 µs, and a cubin has thousands of records.
ELFCLASS32 cubins (ptxas 11 `-m32`) are read too; only little-endian ELF exists for CUDA.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

from fatkit.errors import FormatError
from fatkit.formats.common import Buffer, need
from fatkit.formats.elf import ELFCLASS64, EM_CUDA, ET_EXEC, ET_REL, SHT_SYMTAB, STT_FUNC, ElfView, Section, Symbol

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
# `.nv.info` attribute ids used here (docs/formats.md §3).
EIATTR_MAX_THREADS = 0x05
EIATTR_PARAM_CBANK = 0x0A
EIATTR_FRAME_SIZE = 0x11
EIATTR_KPARAM_INFO = 0x17
EIATTR_CBANK_PARAM_SIZE = 0x19
EIATTR_REGCOUNT = 0x2F
EIATTR_CUDA_API_VERSION = 0x37
# `.nv.compat` attribute: 1 for arch-specific (`sm_XXa`) targets.
EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET = 0x09

NOTE_OWNER_NVIDIA = "NVIDIA Corp"
NT_CUDA_INFO = 1000  # `.note.nv.cuinfo` (CUDA 13) / `.note.nv.cuver` (12.9): u16 version, u16 virtual SM, …
NT_CUDA_TOOLKIT = 2000  # `.note.nv.tkinfo`: producer, release, build and command-line strings

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


def _unpack(layout: struct.Struct, data: Buffer, offset: int, what: str) -> tuple:
    need(data, offset, layout.size, what)
    return layout.unpack_from(data, offset)


def _cubin(data: Buffer) -> ElfView:
    """The ELF view of `data`, checked to be an EM_CUDA ELF."""
    elf = ElfView(data)
    if elf.e_machine != EM_CUDA:
        raise FormatError(f"e_machine {elf.e_machine} is not EM_CUDA ({EM_CUDA})", offset=18)
    return elf


def cubin_kernel_names(data: Buffer) -> list[str]:
    """Kernel names, sorted, from the ELF header and `.shstrtab` alone (no symbol table).

    A kernel has both `.nv.info.<k>` and `.nv.constant0.<k>` (its parameter bank); device functions
    may have `.nv.info.<f>` too (`-G`, `-rdc`) but never a constant bank 0. The names are matched in
    the string table itself (two C-level regex scans), which is what keeps this at ~10 µs a cubin;
    on real cubins the result equals the entry-point symbols `parse_cubin` lists.
    """
    names = _cubin(data).section_name_table()
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


def _nv_info(elf: ElfView, section: Section) -> list[NvInfoAttr]:
    try:
        return parse_nv_info(elf.data(section))
    except FormatError as error:
        raise error.located(base=section.offset) from None


def _functions(elf: ElfView) -> dict[str, Symbol]:
    """Function symbols of `.symtab` by name (the first of each name)."""
    symtab = next((s for s in elf.sections if s.type == SHT_SYMTAB), None)
    if symtab is None:
        return {}
    functions: dict[str, Symbol] = {}
    for symbol in elf.symbols(symtab):
        if symbol.type == STT_FUNC:
            functions.setdefault(symbol.name, symbol)
    return functions


def _tool_cmdline(desc: bytes) -> str:
    """The command-line string of a `.note.nv.tkinfo` description (offsets count from its string table)."""
    *_, cmdline = _unpack(_TKINFO, desc, 0, "toolkit note")
    strings = desc[_TKINFO.size:]
    end = strings.find(b"\0", cmdline)
    if cmdline >= len(strings) or end < 0:
        raise FormatError(f"toolkit note command line offset 0x{cmdline:x} is outside its string table "
                          f"(0x{len(strings):x} bytes)", offset=_TKINFO.size)
    return strings[cmdline:end].decode("utf-8", "replace").strip()


@dataclass
class _Notes:
    virtual_sm: int | None = None
    toolkit: int | None = None
    # One per tool that made the cubin, the last one first (nvlink, then the ptxas runs it linked).
    tool_cmdlines: list[str] = field(default_factory=list)


def _read_notes(elf: ElfView) -> _Notes:
    found = _Notes()
    for note in elf.notes():
        if note.owner != NOTE_OWNER_NVIDIA:
            continue
        try:
            if note.type == NT_CUDA_INFO:
                version, virtual_sm = _unpack(_CUINFO, note.desc, 0, "CUDA information note")
                found.virtual_sm = virtual_sm or None
                if version >= 2 and len(note.desc) >= _CUINFO.size + _U32.size:  # v2 adds the toolkit
                    found.toolkit = _U32.unpack_from(note.desc, _CUINFO.size)[0]
            elif note.type == NT_CUDA_TOOLKIT:
                found.tool_cmdlines.append(_tool_cmdline(note.desc))
        except FormatError as error:
            raise error.located(base=note.offset) from None
    return found


def _by_symbol(records: list[NvInfoAttr], attribute: int) -> dict[int, int]:
    """{symbol index: value} of the (u32 symbol, u32 value) records of `attribute`."""
    return {
        sym: value
        for sym, value in (_U32X2.unpack_from(r.value) for r in records
                           if r.attribute == attribute and isinstance(r.value, bytes) and len(r.value) >= 8)
    }


def _kernel(name: str, records: list[NvInfoAttr], symbol: Symbol, registers: dict[int, int],
            frames: dict[int, int], shared_bytes: int) -> CubinKernel:
    """A kernel from its `.nv.info.<k>` records. Records whose format or size differ from the known
    layout are left out (older or newer toolkits), never an error."""
    params = []
    param_bytes = cbank_bytes = 0
    max_threads = None
    for r in records:
        value = r.value
        if isinstance(value, bytes):  # EIFMT_SVAL
            if r.attribute == EIATTR_KPARAM_INFO and len(value) >= _KPARAM.size:
                _, ordinal, offset, packed = _KPARAM.unpack_from(value)
                params.append(CubinParam(ordinal, offset, packed >> KPARAM_SIZE_SHIFT))
            elif r.attribute == EIATTR_MAX_THREADS and len(value) >= _U32X3.size:
                max_threads = _U32X3.unpack_from(value)
            elif r.attribute == EIATTR_PARAM_CBANK and len(value) >= _PARAM_CBANK.size:
                cbank_bytes = _PARAM_CBANK.unpack_from(value)[2]
        elif r.format == EIFMT_HVAL and r.attribute == EIATTR_CBANK_PARAM_SIZE:
            param_bytes = value
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
    elf = _cubin(data)
    if elf.e_type not in (ET_REL, ET_EXEC):
        raise FormatError(f"cubin e_type {elf.e_type} is neither ET_REL nor ET_EXEC", offset=16)
    by_name: dict[str, Section] = {}
    for section in elf.sections:
        by_name.setdefault(section.name, section)

    compat_section = by_name.get(".nv.compat")
    compat = {r.attribute: r.value for r in _nv_info(elf, compat_section)} if compat_section else {}
    notes = _read_notes(elf)

    flags = elf.e_flags
    if elf.abiversion >= 8:
        sm = (flags >> EF8_SM_SHIFT) & 0xFF
        accelerated = bool(flags & EF8_ACCELERATORS) or compat.get(EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET) == 1
        virtual_sm = notes.virtual_sm
        address_64 = elf.elf_class == ELFCLASS64
        toolkit = notes.toolkit
    else:  # ABI 7 and older layouts
        sm = flags & EF7_SM_MASK
        accelerated = bool(flags & EF7_ACCELERATORS)
        virtual_sm = ((flags >> EF7_VIRTUAL_SM_SHIFT) & 0xFF) or None
        address_64 = bool(flags & EF7_64BIT_ADDRESS)
        toolkit = elf.e_version if elf.e_version > 1 else None  # the release there: 118 = 11.8
    variant = "a" if accelerated else "f" if _family(notes.tool_cmdlines, sm) else ""

    global_section = by_name.get(".nv.info")
    global_records = _nv_info(elf, global_section) if global_section else []
    registers = _by_symbol(global_records, EIATTR_REGCOUNT)
    frames = _by_symbol(global_records, EIATTR_FRAME_SIZE)
    functions = _functions(elf)
    kernels = []
    api_versions = []
    for section_name, section in by_name.items():
        if not section_name.startswith(INFO_PREFIX):
            continue
        name = section_name[len(INFO_PREFIX):]
        symbol = functions.get(name)
        if symbol is None:
            raise FormatError(f"section {section_name} names no function symbol", offset=section.offset)
        records = _nv_info(elf, section)
        api_versions += [_U32.unpack_from(r.value)[0] for r in records if r.attribute == EIATTR_CUDA_API_VERSION
                         and isinstance(r.value, bytes) and len(r.value) >= _U32.size]
        if not symbol.other & STO_CUDA_ENTRY:
            continue  # a device function's attributes (`-G`, `-rdc`)
        shared = by_name.get(SHARED_PREFIX + name)
        kernels.append(_kernel(name, records, symbol, registers, frames, shared.size if shared else 0))

    return CubinInfo(
        abi_version=elf.abiversion,
        osabi=elf.osabi,
        e_type="exec" if elf.e_type == ET_EXEC else "rel",
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
