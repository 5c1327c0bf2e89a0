"""The one ELF reader of fatkit: host libraries and executables, NVIDIA cubins, AMDGPU code objects.

`ElfView` reads ELF32 and ELF64 little-endian files straight from a Buffer (bytes or mmap) without copying
them. Construction reads the ELF header alone; section and program headers, names, symbols, notes and the
dynamic table are read on first use, so `cubin_kernel_names`, which needs one string table of thousands of
cubins, pays for nothing else. Fixed layouts are declared once (`formats/layout.py`): read through struct,
built through construct by the writers.

Relocation tables are read as flat arrays of u64 and filtered in C (`map`/`compress` over a `range`
membership test), so a library with a million relocations costs milliseconds.
"""

from __future__ import annotations

import bisect
import itertools
import struct
from dataclasses import dataclass
from functools import cached_property, partial
from operator import itemgetter
from typing import NamedTuple

from fatkit.errors import FormatError
from fatkit.formats.common import Buffer, align, cstring, need
from fatkit.formats.magic import ELF_MAGIC
from fatkit.formats.layout import Bytes, FieldType, Int8ul, Int16ul, Int32sl, Int32ul, Int64sl, Int64ul, Layout, Padding

ElfIdent = Layout(
    "magic" / Bytes(4),
    "ei_class" / Int8ul,
    "ei_data" / Int8ul,
    "ei_version" / Int8ul,
    "osabi" / Int8ul,
    "abiversion" / Int8ul,
    Padding(7),
    name="ElfIdent",
)


def _elf_header(address: FieldType) -> Layout:
    """The ELF header; `address` is the size of e_entry, e_phoff and e_shoff (Int32ul or Int64ul)."""
    return Layout(
        *ElfIdent.fields,
        "e_type" / Int16ul,
        "e_machine" / Int16ul,
        "e_version" / Int32ul,
        "e_entry" / address,
        "e_phoff" / address,
        "e_shoff" / address,
        "e_flags" / Int32ul,
        "e_ehsize" / Int16ul,
        "e_phentsize" / Int16ul,
        "e_phnum" / Int16ul,
        "e_shentsize" / Int16ul,
        "e_shnum" / Int16ul,
        "e_shstrndx" / Int16ul,
        name="ElfHeader",
    )


def _section_header(word: FieldType) -> Layout:
    """A section header; `word` is the size of the address-sized fields (Int32ul or Int64ul)."""
    return Layout(
        "sh_name" / Int32ul, "sh_type" / Int32ul, "sh_flags" / word, "sh_addr" / word, "sh_offset" / word,
        "sh_size" / word, "sh_link" / Int32ul, "sh_info" / Int32ul, "sh_addralign" / word, "sh_entsize" / word,
        name="SectionHeader",
    )


Elf32Header, Elf64Header = _elf_header(Int32ul), _elf_header(Int64ul)
Elf32SectionHeader, Elf64SectionHeader = _section_header(Int32ul), _section_header(Int64ul)
# Program headers and symbols order their fields differently in the two classes.
Elf32ProgramHeader = Layout("p_type" / Int32ul, "p_offset" / Int32ul, "p_vaddr" / Int32ul, "p_paddr" / Int32ul,
                            "p_filesz" / Int32ul, "p_memsz" / Int32ul, "p_flags" / Int32ul, "p_align" / Int32ul,
                            name="ProgramHeader")
Elf64ProgramHeader = Layout("p_type" / Int32ul, "p_flags" / Int32ul, "p_offset" / Int64ul, "p_vaddr" / Int64ul,
                            "p_paddr" / Int64ul, "p_filesz" / Int64ul, "p_memsz" / Int64ul, "p_align" / Int64ul,
                            name="ProgramHeader")
Elf32Symbol = Layout("st_name" / Int32ul, "st_value" / Int32ul, "st_size" / Int32ul, "st_info" / Int8ul,
                     "st_other" / Int8ul, "st_shndx" / Int16ul, name="SymbolEntry")
Elf64Symbol = Layout("st_name" / Int32ul, "st_info" / Int8ul, "st_other" / Int8ul, "st_shndx" / Int16ul,
                     "st_value" / Int64ul, "st_size" / Int64ul, name="SymbolEntry")
Elf32Dyn = Layout("d_tag" / Int32sl, "d_val" / Int32ul, name="Dyn")
Elf64Dyn = Layout("d_tag" / Int64sl, "d_val" / Int64ul, name="Dyn")
NoteHeader = Layout("namesz" / Int32ul, "descsz" / Int32ul, "type" / Int32ul, name="NoteHeader")

# Relocation entries are arrays of whole u64 words; they are read as such (memoryview.cast) and these
# layouts give the word positions: Rela = (r_offset, r_info, r_addend), Rel = (r_offset, r_info).
Elf64Rela = Layout("r_offset" / Int64ul, "r_info" / Int64ul, "r_addend" / Int64sl, name="Rela")
Elf64Rel = Layout("r_offset" / Int64ul, "r_info" / Int64ul, name="Rel")

ELFCLASS32, ELFCLASS64 = 1, 2
ELFDATA2LSB = 1

ET_REL, ET_EXEC, ET_DYN = 1, 2, 3
EM_PPC64, EM_X86_64, EM_AARCH64 = 21, 62, 183
EM_CUDA, EM_AMDGPU = 190, 224  # device code: NVIDIA cubins, AMD code objects

SHT_NULL, SHT_PROGBITS, SHT_SYMTAB, SHT_RELA, SHT_DYNAMIC, SHT_NOTE, SHT_NOBITS = 0, 1, 2, 4, 6, 7, 8
SHT_REL, SHT_DYNSYM, SHT_RELR = 9, 11, 19
SHF_ALLOC = 0x2
SHN_UNDEF, SHN_LORESERVE, SHN_XINDEX = 0, 0xFF00, 0xFFFF
PN_XNUM = 0xFFFF
STT_OBJECT, STT_FUNC = 1, 2

PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE = 1, 2, 3, 4  # PT_INTERP: a shared object with one is a PIE

DT_NULL, DT_NEEDED, DT_PLTRELSZ, DT_STRTAB, DT_SYMTAB = 0, 1, 2, 5, 6
DT_RELA, DT_RELASZ, DT_STRSZ, DT_SONAME, DT_PLTREL, DT_JMPREL = 7, 8, 10, 14, 20, 23

# (relative, absolute 64-bit) relocation types per machine: the two kinds a data pointer can carry.
POINTER_RELOCATIONS = {
    EM_X86_64: (8, 1),  # R_X86_64_RELATIVE, R_X86_64_64
    EM_AARCH64: (1027, 257),  # R_AARCH64_RELATIVE, R_AARCH64_ABS64
    EM_PPC64: (22, 38),  # R_PPC64_RELATIVE, R_PPC64_ADDR64
}

_RELA_WORDS = Elf64Rela.size // 8
_REL_WORDS = Elf64Rel.size // 8
_U64 = struct.Struct("<Q")
_RELA = Elf64Rela.unpack
_REL = Elf64Rel.unpack
_IDENT = ElfIdent.unpack
_NOTE = NoteHeader.unpack
# Relocation tables are searched with buf.find for the high bytes of the wanted addresses when
# those span at most _SEARCHED_BLOCKS blocks of 256 B or 64 KiB (one pass over the table per
# block); wider ranges test every entry instead.
_SEARCH_BLOCK_SHIFTS = (8, 16)
_SEARCHED_BLOCKS = 8
_NAME_LIMIT = 4096  # longest dynamic string read


@dataclass(frozen=True)
class _ClassLayouts:
    """The tables of one ELF class."""

    header: Layout
    section: Layout
    segment: Layout
    symbol: Layout
    dyn: Layout

    @cached_property
    def section_fields(self) -> itemgetter:
        """A section header's fields in the order of Section's after index and name."""
        return self.section.getter("sh_type", "sh_flags", "sh_addr", "sh_offset", "sh_size", "sh_link", "sh_info",
                                   "sh_entsize", "sh_addralign")

    @cached_property
    def symbol_fields(self) -> itemgetter:
        """A symbol entry's fields in the order of Symbol's after index and name."""
        return self.symbol.getter("st_value", "st_size", "st_info", "st_other", "st_shndx")


def layouts(elf_class: int) -> _ClassLayouts:
    """The header, section, segment, symbol and dynamic-entry layouts of ELFCLASS32 or ELFCLASS64 (writers
    build and patch records through these, by field name)."""
    return _LAYOUTS[elf_class]


_LAYOUTS = {
    elf_class: _ClassLayouts(header, section, segment, symbol, dyn)
    for elf_class, header, section, segment, symbol, dyn in (
        (ELFCLASS32, Elf32Header, Elf32SectionHeader, Elf32ProgramHeader, Elf32Symbol, Elf32Dyn),
        (ELFCLASS64, Elf64Header, Elf64SectionHeader, Elf64ProgramHeader, Elf64Symbol, Elf64Dyn),
    )
}


# The records are named tuples rather than frozen dataclasses: a cubin has hundreds of sections and symbols,
# and a frozen dataclass costs ~3 us to build where a named tuple costs 0.4 us (0.2 us through _new, which
# skips the Python-level __new__ of named tuples).


class Section(NamedTuple):
    index: int  # type: ignore[assignment]  # the field shadows tuple.index, which nothing here calls
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int
    align: int

    @property
    def has_bytes(self) -> bool:
        return self.type != SHT_NOBITS


class Segment(NamedTuple):
    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int
    align: int


class Symbol(NamedTuple):
    index: int  # type: ignore[assignment]  # in its symbol table (shadows tuple.index, never called)
    name: str
    value: int
    size: int
    info: int  # st_info: binding << 4 | type
    other: int
    shndx: int

    @property
    def type(self) -> int:
        return self.info & 0xF

    @property
    def bind(self) -> int:
        return self.info >> 4


class Note(NamedTuple):
    owner: str  # the note's name, without its NUL
    type: int
    desc: bytes
    offset: int  # of desc in the buffer


def _new(record: type[tuple]):
    """record's constructor from one tuple of all its fields, in order."""
    return partial(tuple.__new__, record)


@dataclass(frozen=True)
class _Relocation:
    type: int
    symbol: int
    addend: int
    symtab: int | None  # section index of the symbol table (ET_REL); None: the dynamic symbol table


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


class ElfView:
    """A little-endian ELF (32- or 64-bit) read lazily from `buf`; every offset is checked against len(buf)."""

    def __init__(self, buf: Buffer):
        need(buf, 0, _IDENT.size, "ELF identification")
        magic, ei_class, ei_data, _, osabi, abiversion = _IDENT.unpack_from(buf, 0)
        if magic != ELF_MAGIC:
            raise FormatError("not an ELF file (no \\x7fELF magic)", offset=0)
        layouts = _LAYOUTS.get(ei_class)
        if layouts is None:
            raise FormatError(f"unknown ELF class {ei_class} (EI_CLASS is neither ELFCLASS32 nor ELFCLASS64)",
                              offset=4)
        if ei_data != ELFDATA2LSB:
            raise FormatError(f"ELF data encoding {ei_data} is not little-endian (EI_DATA); big-endian ELF is "
                              "not read", offset=5)
        need(buf, 0, layouts.header.size, "ELF header")
        header = layouts.header.at(buf, 0)
        self._buf = buf
        self._layouts = layouts
        self._header = header
        self.elf_class: int = ei_class
        self.e_type: int = header.e_type
        self.e_machine: int = header.e_machine
        self.e_version: int = header.e_version
        self.osabi: int = osabi
        self.abiversion: int = abiversion
        self.e_flags: int = header.e_flags
        self._symbols: dict[int, tuple] = {}  # raw symbol entries by file offset (relocation targets)

    @property
    def header(self):
        """The ELF header as a record of its field names (e_shoff, e_shnum, e_shstrndx, …)."""
        return self._header

    @property
    def buffer(self) -> Buffer:
        """The bytes this view reads (for callers that read records at the offsets it returns)."""
        return self._buf

    # --- tables -------------------------------------------------------------------------------

    def _header_offset(self, field: str) -> int:
        return self._layouts.header.offsets[field]

    def _first_section_header(self):
        """Section header 0, which holds the real counts when they overflow the ELF header fields."""
        shoff = self._header.e_shoff
        if shoff == 0:
            return None
        layout = self._layouts.section
        need(self._buf, shoff, layout.size, "section header 0")
        return layout.at(self._buf, shoff)

    def _section_table(self) -> tuple[int, int]:
        """(offset, entry count) of the section header table, extended numbering resolved and the whole
        table checked to lie in the buffer; (0, 0) when there is none."""
        h = self._header
        if h.e_shoff == 0:
            return 0, 0
        if h.e_shentsize < self._layouts.section.size:
            raise FormatError(f"section header size {h.e_shentsize} is below {self._layouts.section.size}",
                              offset=self._header_offset("e_shentsize"))
        count = h.e_shnum or self._first_section_header().sh_size
        need(self._buf, h.e_shoff, count * h.e_shentsize, f"section header table ({count} entries)")
        return h.e_shoff, count

    def _names_index(self) -> int:
        """Index of the section name string table (SHN_XINDEX resolved through section 0)."""
        index = self._header.e_shstrndx
        if index == SHN_XINDEX:
            first = self._first_section_header()
            if first is not None:
                index = first.sh_link
        return index

    def section_name_table(self) -> bytes:
        """The bytes of the section name string table (`.shstrtab`), read through its own section header
        alone: the cheap way to every section name. FormatError when the file has no section headers or
        e_shstrndx names no table with bytes."""
        offset, count = self._section_table()
        if count == 0:
            raise FormatError("ELF has no section header table", offset=self._header_offset("e_shoff"))
        index = self._names_index()
        if not SHN_UNDEF < index < count:
            raise FormatError(f"section name table index {index} is outside the {count} sections",
                              offset=self._header_offset("e_shstrndx"))
        header_at = offset + index * self._header.e_shentsize
        names = self._layouts.section.at(self._buf, header_at)
        if names.sh_type == SHT_NOBITS:
            raise FormatError("section name table has no bytes (SHT_NOBITS)", offset=header_at)
        need(self._buf, names.sh_offset, names.sh_size, "section name table")
        return bytes(self._buf[names.sh_offset : names.sh_offset + names.sh_size])

    def _records(self, table: tuple[int, int], entsize: int, layout: Layout) -> list:
        """The records of a header table given as (offset, count) by _section_table/_segment_table."""
        offset, count = table
        return layout.array(bytes(self._buf[offset : offset + count * entsize]), entsize) if count else []

    def section_header_field(self, index: int, field: str) -> int:
        """The file offset of `field` (`sh_offset`, `sh_size`, …) in section header `index`, for writers that
        patch one header in place."""
        offset, count = self._section_table()
        if not 0 <= index < count:
            raise FormatError(f"no section header {index} (the file has {count})", offset=offset)
        return offset + index * self._header.e_shentsize + self._layouts.section.offsets[field]

    @cached_property
    def _section_headers(self) -> list:
        """The raw section header records, in index order."""
        return self._records(self._section_table(), self._header.e_shentsize, self._layouts.section)

    @cached_property
    def sections(self) -> list[Section]:
        raw = self._section_headers
        if not raw:
            return []
        # No name table (e_shstrndx = SHN_UNDEF) leaves every name empty.
        names = b"" if self._names_index() == SHN_UNDEF else self.section_name_table()

        def name_of(sh) -> str:
            end = names.find(b"\0", sh.sh_name)
            return names[sh.sh_name : end if end >= 0 else len(names)].decode("utf-8", "replace")

        fields = self._layouts.section_fields
        section = _new(Section)
        return [section((i, name_of(sh), *fields(sh))) for i, sh in enumerate(raw)]

    def _segment_table(self) -> tuple[int, int]:
        """(offset, entry count) of the program header table, checked to lie in the buffer; (0, 0) without one."""
        h = self._header
        if h.e_phoff == 0 or h.e_phnum == 0:
            return 0, 0
        layout = self._layouts.segment
        if h.e_phentsize < layout.size:
            raise FormatError(f"program header size {h.e_phentsize} is below {layout.size}",
                              offset=self._header_offset("e_phentsize"))
        count = h.e_phnum
        if count == PN_XNUM:
            first = self._first_section_header()
            if first is not None:
                count = first.sh_info
        need(self._buf, h.e_phoff, count * h.e_phentsize, f"program header table ({count} entries)")
        return h.e_phoff, count

    @cached_property
    def segments(self) -> list[Segment]:
        return [Segment(ph.p_type, ph.p_flags, ph.p_offset, ph.p_vaddr, ph.p_filesz, ph.p_memsz, ph.p_align)
                for ph in self._records(self._segment_table(), self._header.e_phentsize, self._layouts.segment)]

    @cached_property
    def extent(self) -> int:
        """Bytes the ELF occupies as written: its header, header tables and section contents, whichever ends
        last (an image padded inside a larger buffer ends there). FormatError when any runs past the buffer."""
        h = self._header
        section_table, section_count = self._section_table()
        segment_table, segment_count = self._segment_table()
        ends = [self._layouts.header.size, h.e_ehsize, section_table + section_count * h.e_shentsize,
                segment_table + segment_count * h.e_phentsize]
        for index, sh in enumerate(self._section_headers):
            if sh.sh_type != SHT_NOBITS:
                need(self._buf, sh.sh_offset, sh.sh_size, f"section {index}")
                ends.append(sh.sh_offset + sh.sh_size)
        extent = max(ends)
        need(self._buf, 0, extent, "ELF header (e_ehsize)")
        return extent

    @cached_property
    def _loads(self) -> list[Segment]:
        return [s for s in self.segments if s.type == PT_LOAD and s.filesz > 0]

    @cached_property
    def _sections_by_offset(self) -> tuple[list[int], list[Section]]:
        ordered = sorted((s for s in self.sections if s.has_bytes and s.size > 0 and s.type != SHT_NULL),
                         key=lambda s: s.offset)
        return [s.offset for s in ordered], ordered

    @cached_property
    def _dynamic_table(self) -> tuple[int, int] | None:
        """(file offset, size) of the dynamic table: PT_DYNAMIC, else the SHT_DYNAMIC section."""
        table = next(((s.offset, s.filesz) for s in self.segments if s.type == PT_DYNAMIC), None)
        if table is None:
            table = next(((s.offset, s.size) for s in self.sections if s.type == SHT_DYNAMIC), None)
        return table

    @cached_property
    def _dynamic(self) -> list[tuple[int, int]]:
        """(tag, value) pairs of the dynamic table up to DT_NULL; [] for files without one."""
        if self._dynamic_table is None:
            return []
        offset, size = self._dynamic_table
        layout = self._layouts.dyn
        size -= size % layout.size
        need(self._buf, offset, size, "dynamic table")
        pairs = []
        for tag, value in layout.unpack.iter_unpack(self._buf[offset : offset + size]):
            if tag == DT_NULL:
                break
            pairs.append((tag, value))
        return pairs

    @cached_property
    def _tags(self) -> dict[int, int]:
        """The dynamic table as a mapping (the first entry wins for single-valued tags)."""
        tags: dict[int, int] = {}
        for tag, value in self._dynamic:
            tags.setdefault(tag, value)
        return tags

    # --- queries ------------------------------------------------------------------------------

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def section_at(self, offset: int) -> Section | None:
        """The section whose file bytes contain `offset` (None in gaps and in section-less files)."""
        starts, ordered = self._sections_by_offset
        i = bisect.bisect_right(starts, offset) - 1
        if i >= 0 and offset < ordered[i].offset + ordered[i].size:
            return ordered[i]
        return None

    def data(self, section: Section) -> bytes:
        """The section's bytes (b"" for SHT_NOBITS); FormatError when they run past the buffer."""
        if not section.has_bytes:
            return b""
        need(self._buf, section.offset, section.size, f"section {section.name or section.index}")
        return bytes(self._buf[section.offset : section.offset + section.size])

    def va_to_offset(self, va: int) -> int | None:
        """File offset of virtual address `va` through the PT_LOAD segments' file-backed part."""
        for seg in self._loads:
            if seg.vaddr <= va < seg.vaddr + seg.filesz:
                offset = seg.offset + va - seg.vaddr
                return offset if offset < len(self._buf) else None
        return None

    @cached_property
    def needed(self) -> list[str]:
        return [self._dynamic_string(value) for tag, value in self._dynamic if tag == DT_NEEDED]

    @cached_property
    def soname(self) -> str | None:
        return next((self._dynamic_string(value) for tag, value in self._dynamic if tag == DT_SONAME), None)

    def _dynamic_string(self, index: int) -> str:
        tags = self._tags
        table = self.va_to_offset(tags.get(DT_STRTAB, 0)) if DT_STRTAB in tags else None
        size = tags.get(DT_STRSZ, 0)
        if table is None:
            dynamic = next((s for s in self.sections if s.type == SHT_DYNAMIC), None)
            if dynamic is None or not 0 < dynamic.link < len(self.sections):
                where = self._dynamic_table[0] if self._dynamic_table else None
                raise FormatError("dynamic string table not found", offset=where)
            strtab = self.sections[dynamic.link]
            table, size = strtab.offset, strtab.size
        if index >= size:
            raise FormatError(f"dynamic string index {index} is past the string table ({size} bytes)",
                              offset=table)
        need(self._buf, table, size, "dynamic string table")
        return cstring(self._buf, table + index, min(size - index, _NAME_LIMIT))

    # --- symbols and notes --------------------------------------------------------------------

    def _linked(self, section: Section) -> Section:
        """The section `section.link` names (a symbol table's string table)."""
        if not 0 < section.link < len(self.sections):
            raise FormatError(f"section {section.name or section.index} links to section {section.link}, "
                              "which does not exist", offset=section.offset)
        return self.sections[section.link]

    def symbols(self, table: Section) -> list[Symbol]:
        """The entries of a symbol table section (SHT_SYMTAB or SHT_DYNSYM), named from its linked string
        table; a partial entry at the end is left out."""
        layout = self._layouts.symbol
        if table.entsize not in (0, layout.size):
            raise FormatError(f"symbol table {table.name} has {table.entsize}-byte entries, not {layout.size}",
                              offset=table.offset)
        strings = self.data(self._linked(table))
        raw = self.data(table)
        fields = self._layouts.symbol_fields
        symbol = _new(Symbol)
        symbols = []
        for index, entry in enumerate(layout.unpack.iter_unpack(raw[: len(raw) - len(raw) % layout.size])):
            st_name = entry[0]  # first in both classes
            if st_name >= len(strings) and st_name:
                raise FormatError(f"symbol {index} names offset {st_name}, outside its string table "
                                  f"({len(strings)} bytes)", offset=table.offset + index * layout.size)
            end = strings.find(b"\0", st_name)
            name = strings[st_name : end if end >= 0 else len(strings)].decode("utf-8", "replace")
            symbols.append(symbol((index, name, *fields(entry))))
        return symbols

    def symbol_offset(self, symbol: Symbol) -> int | None:
        """File offset of a defined symbol's bytes (st_value is section-relative in ET_REL, a virtual address
        otherwise); None for undefined, absolute and common symbols and those in sections without bytes.
        FormatError when the value lies outside its section."""
        index = symbol.shndx
        if index == SHN_UNDEF or index >= SHN_LORESERVE or index >= len(self.sections):
            return None
        section = self.sections[index]
        if not section.has_bytes:
            return None
        relative = symbol.value if self.e_type == ET_REL else symbol.value - section.addr
        if not 0 <= relative <= section.size:
            raise FormatError(f"symbol {symbol.name} lies outside its section {section.name or index}",
                              offset=section.offset)
        return section.offset + relative

    def notes(self) -> list[Note]:
        """Every note of the SHT_NOTE sections, or of the PT_NOTE segments when no section holds notes
        (section-less files). Header plus name, and the description, are padded to 4 bytes, to 8 in a region
        aligned to 8 (.note.gnu.property)."""
        regions = [(s.offset, s.size, s.align) for s in self.sections if s.type == SHT_NOTE]
        if not regions:
            regions = [(p.offset, p.filesz, p.align) for p in self.segments if p.type == PT_NOTE]
        notes = []
        for offset, size, alignment in regions:
            need(self._buf, offset, size, "note section")
            step = 8 if alignment == 8 else 4
            pos, end = offset, offset + size
            while pos < end:
                if pos + _NOTE.size > end:
                    raise FormatError("note header runs past the end of its section", offset=pos)
                namesz, descsz, note_type = _NOTE.unpack_from(self._buf, pos)
                name_at = pos + _NOTE.size
                desc_at = pos + align(_NOTE.size + namesz, step)
                if desc_at + descsz > end:
                    raise FormatError(f"note ({namesz}-byte name, {descsz}-byte description) runs past the end "
                                      "of its section", offset=pos)
                owner = bytes(self._buf[name_at : name_at + namesz]).rstrip(b"\0").decode("utf-8", "replace")
                notes.append(Note(owner, note_type, bytes(self._buf[desc_at : desc_at + descsz]), desc_at))
                pos = desc_at + align(descsz, step)
        return notes

    # --- pointers -----------------------------------------------------------------------------

    def pointers_in(self, section: Section, stride: int, field: int) -> dict[int, int | None]:
        """{record file offset: file offset its 8-byte pointer at +field targets, or None}.

        Records are section.offset + k*stride for every whole field in the section. ET_REL pointers
        come from the relocation sections applied to this section; ET_EXEC/ET_DYN pointers from the
        dynamic RELA relocations, else the value in place (absolute VA in ET_EXEC; in ET_DYN the addend
        GNU ld copies, or the VA that a RELR entry leaves there). A zero in place with no relocation,
        and any field of a relocatable object without a relocation, is None. ELF64 only.
        """
        if stride <= 0 or field < 0 or field + 8 > stride:
            raise ValueError(f"field +{field} (8 bytes) does not fit a {stride}-byte record")
        if self.elf_class != ELFCLASS64:
            raise FormatError("pointers are resolved in ELF64 files only (8-byte fields, 64-bit relocations)",
                              offset=4)
        if not section.has_bytes or section.size < field + 8:
            return {}
        need(self._buf, section.offset, section.size, f"section {section.name or section.index}")
        records = (section.size - field - 8) // stride + 1
        # The last record may be cut short after its field: pad it to a whole record.
        span = bytes(self._buf[section.offset : section.offset + section.size]).ljust(records * stride, b"\0")
        in_place = [value for (value,) in struct.iter_unpack(f"<{field}xQ{stride - field - 8}x", span)]
        # Relocations are keyed by r_offset: section-relative in ET_REL, a virtual address otherwise.
        base = 0 if self.e_type == ET_REL else section.addr
        wanted = range(base + field, base + field + records * stride, stride)
        if self.e_type == ET_REL:
            relocations = self._object_relocations(section, wanted)
        else:
            relocations = self._dynamic_relocations(wanted)
        result: dict[int, int | None] = {}
        for k, value in enumerate(in_place):
            reloc = relocations.get(wanted[k])
            if reloc is not None:
                target = self._relocation_target(reloc)
            elif self.e_type == ET_REL or value == 0:
                target = None
            else:
                target = self.va_to_offset(value)
            result[section.offset + k * stride] = target
        return result

    def _scan_table(self, offset: int, size: int, words: int, wanted: range) -> list[tuple[int, int, int]]:
        """(r_offset, r_info, r_addend) of the RELA (words=3) or REL (words=2, addend 0) entries
        at offset..offset+size whose r_offset is in `wanted`."""
        entry = 8 * words
        size -= size % entry
        need(self._buf, offset, size, "relocation table")
        if size == 0 or not wanted:
            return []
        starts = None
        if hasattr(self._buf, "find"):
            for shift in _SEARCH_BLOCK_SHIFTS:
                blocks = range(wanted[0] >> shift, (wanted[-1] >> shift) + 1)
                if len(blocks) <= _SEARCHED_BLOCKS and blocks[0] > 0:
                    starts = self._entries_by_search(offset, size, entry, blocks, shift)
                    break
        if starts is None:
            starts = self._entries_by_scan(offset, size, words, wanted)
        layout = _RELA if words == _RELA_WORDS else _REL
        found = []
        for start in starts:
            r_offset, info, *addend = layout.unpack_from(self._buf, start)
            if r_offset in wanted:
                found.append((r_offset, info, addend[0] if addend else 0))
        return found

    def _entries_by_search(self, offset: int, size: int, entry: int, blocks: range, shift: int) -> list[int]:
        """Entry starts whose r_offset lies in one of the (1 << shift)-byte `blocks`, found with buf.find.

        The high bytes of such an r_offset are a fixed string per block, so the search runs at
        memory speed and only entries (or other fields) holding those bytes cost Python time. The
        string's zero top bytes are left out: a needle ending in a byte as common as 0 defeats the
        search's skipping, and every hit is checked against `wanted` afterwards anyway.
        """
        low = shift // 8
        end = offset + size
        # mmap and bytes search in place; a memoryview (a stored zip member) has no find: its table is copied
        table, base = (self._buf, 0) if not isinstance(self._buf, memoryview) else \
            (bytes(self._buf[offset:end]), offset)
        starts = []
        for block in blocks:
            high_bytes = _U64.pack(block << shift)[low:].rstrip(b"\0")
            pos = table.find(high_bytes, offset + low - base, end - base)
            while pos >= 0:
                if (pos + base - low - offset) % entry == 0:
                    starts.append(pos + base - low)
                pos = table.find(high_bytes, pos + 1, end - base)
        return starts

    def _entries_by_scan(self, offset: int, size: int, words: int, wanted: range) -> list[int]:
        """Entry starts whose r_offset is in `wanted`, testing every entry (memoryview has no find)."""
        with memoryview(self._buf) as whole, whole[offset : offset + size] as table, table.cast("Q") as q:
            with q[0::words] as offsets:
                hits = itertools.compress(itertools.count(), map(wanted.__contains__, offsets))
                return [offset + 8 * words * i for i in hits]

    def _dynamic_relocations(self, wanted: range) -> dict[int, _Relocation]:
        if self._dynamic:
            tags = self._tags
            tables = []
            if DT_RELA in tags:
                tables.append((tags[DT_RELA], tags.get(DT_RELASZ, 0)))
            if DT_JMPREL in tags and tags.get(DT_PLTREL) == DT_RELA:
                tables.append((tags[DT_JMPREL], tags.get(DT_PLTRELSZ, 0)))
            located = []
            for va, size in tables:
                offset = self.va_to_offset(va)
                if offset is None:
                    raise FormatError(f"dynamic relocation table at VA 0x{va:x} is not in the file",
                                      offset=self._dynamic_table[0] if self._dynamic_table else None)
                located.append((offset, size))
        else:
            located = [(s.offset, s.size) for s in self.sections if s.type == SHT_RELA and s.flags & SHF_ALLOC]
        found: dict[int, _Relocation] = {}
        for offset, size in located:
            for r_offset, info, addend in self._scan_table(offset, size, _RELA_WORDS, wanted):
                found[r_offset] = _Relocation(info & 0xFFFFFFFF, info >> 32, addend, None)
        return found

    def _object_relocations(self, section: Section, wanted: range) -> dict[int, _Relocation]:
        found: dict[int, _Relocation] = {}
        for rel in self.sections:
            if rel.info != section.index or rel.type not in (SHT_RELA, SHT_REL):
                continue
            words = _RELA_WORDS if rel.type == SHT_RELA else _REL_WORDS
            for r_offset, info, addend in self._scan_table(rel.offset, rel.size, words, wanted):
                if rel.type == SHT_REL:  # REL keeps the addend in the relocated field itself
                    addend = _signed64(_U64.unpack_from(self._buf, section.offset + r_offset)[0])
                found[r_offset] = _Relocation(info & 0xFFFFFFFF, info >> 32, addend, rel.link)
        return found

    def _relocation_target(self, reloc: _Relocation) -> int | None:
        relative, absolute = POINTER_RELOCATIONS.get(self.e_machine, (None, None))
        if self.e_type == ET_REL:
            return self._object_symbol_target(reloc) if reloc.type == absolute else None
        if reloc.type == relative:
            return self.va_to_offset(reloc.addend)
        if reloc.type == absolute:
            sym = self._dynamic_symbol(reloc.symbol)
            if sym is None or sym.st_shndx == SHN_UNDEF:
                return None
            return self.va_to_offset(sym.st_value + reloc.addend)
        return None

    def _object_symbol_target(self, reloc: _Relocation) -> int | None:
        """File offset of symbol + addend in a relocatable object, where the symbol's section has bytes."""
        if reloc.symtab is None or not 0 < reloc.symtab < len(self.sections):
            return None
        symtab = self.sections[reloc.symtab]
        size = self._layouts.symbol.size
        if (reloc.symbol + 1) * size > symtab.size:
            raise FormatError(f"relocation names symbol {reloc.symbol}, past the end of {symtab.name}",
                              offset=symtab.offset)
        sym = self._symbol_entry(symtab.offset + reloc.symbol * size)
        if sym.st_shndx == SHN_UNDEF or sym.st_shndx >= SHN_LORESERVE or sym.st_shndx >= len(self.sections):
            return None
        target = self.sections[sym.st_shndx]
        offset = target.offset + sym.st_value + reloc.addend
        return offset if target.has_bytes and 0 <= offset < len(self._buf) else None

    @cached_property
    def _dynsym(self) -> Section | None:
        return next((s for s in self.sections if s.type == SHT_DYNSYM), None)

    def _dynamic_symbol(self, index: int):
        """Dynamic symbol entry `index` (bounded by .dynsym when section headers exist; the file otherwise)."""
        tags = self._tags
        dynsym = self._dynsym
        size = self._layouts.symbol.size
        if dynsym is not None and (index + 1) * size > dynsym.size:
            raise FormatError(f"relocation names dynamic symbol {index}, past the end of .dynsym",
                              offset=dynsym.offset)
        table = self.va_to_offset(tags[DT_SYMTAB]) if DT_SYMTAB in tags else None
        if table is None:
            if dynsym is None:
                return None
            table = dynsym.offset
        return self._symbol_entry(table + index * size)

    def _symbol_entry(self, offset: int):
        """The raw symbol entry at `offset`, read once (many relocations name the same few symbols)."""
        sym = self._symbols.get(offset)
        if sym is None:
            layout = self._layouts.symbol
            need(self._buf, offset, layout.size, "symbol")
            sym = self._symbols[offset] = layout.at(self._buf, offset)
        return sym
