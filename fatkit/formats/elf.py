"""A fast view of a host ELF (ELF64 little-endian): sections, segments, VA→offset, pointers after relocation.

Only what finding device code needs, read straight from a Buffer (bytes or mmap) without copying it.
Relocation tables are read as flat arrays of u64 and filtered in C (`map`/`compress` over a `range`
membership test), so a library with a million relocations costs milliseconds.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass
from functools import cached_property
import itertools

import construct
from construct import Bytes, Int8ul, Int16ul, Int32ul, Int64sl, Int64ul, Struct

from fatkit.errors import FormatError
from fatkit.formats.common import Buffer, cstring, need

ElfIdent = Struct(
    "magic" / Bytes(4),
    "ei_class" / Int8ul,
    "ei_data" / Int8ul,
    "ei_version" / Int8ul,
    "osabi" / Int8ul,
    "abiversion" / Int8ul,
    "pad" / Bytes(7),
)

Elf64Header = Struct(
    "ident" / ElfIdent,
    "e_type" / Int16ul,
    "e_machine" / Int16ul,
    "e_version" / Int32ul,
    "e_entry" / Int64ul,
    "e_phoff" / Int64ul,
    "e_shoff" / Int64ul,
    "e_flags" / Int32ul,
    "e_ehsize" / Int16ul,
    "e_phentsize" / Int16ul,
    "e_phnum" / Int16ul,
    "e_shentsize" / Int16ul,
    "e_shnum" / Int16ul,
    "e_shstrndx" / Int16ul,
).compile()

Elf64SectionHeader = Struct(
    "sh_name" / Int32ul,
    "sh_type" / Int32ul,
    "sh_flags" / Int64ul,
    "sh_addr" / Int64ul,
    "sh_offset" / Int64ul,
    "sh_size" / Int64ul,
    "sh_link" / Int32ul,
    "sh_info" / Int32ul,
    "sh_addralign" / Int64ul,
    "sh_entsize" / Int64ul,
).compile()

Elf64ProgramHeader = Struct(
    "p_type" / Int32ul,
    "p_flags" / Int32ul,
    "p_offset" / Int64ul,
    "p_vaddr" / Int64ul,
    "p_paddr" / Int64ul,
    "p_filesz" / Int64ul,
    "p_memsz" / Int64ul,
    "p_align" / Int64ul,
).compile()

Elf64Symbol = Struct(
    "st_name" / Int32ul,
    "st_info" / Int8ul,
    "st_other" / Int8ul,
    "st_shndx" / Int16ul,
    "st_value" / Int64ul,
    "st_size" / Int64ul,
).compile()

# Relocation and dynamic entries are arrays of whole u64 words; they are read as such (memoryview.cast)
# and these layouts give the word positions: Rela = (r_offset, r_info, r_addend), Dyn = (d_tag, d_val).
Elf64Rela = Struct("r_offset" / Int64ul, "r_info" / Int64ul, "r_addend" / Int64sl)
Elf64Rel = Struct("r_offset" / Int64ul, "r_info" / Int64ul)
Elf64Dyn = Struct("d_tag" / Int64sl, "d_val" / Int64ul)

ELF_MAGIC = b"\x7fELF"
ELFCLASS64 = 2
ELFDATA2LSB = 1

ET_REL, ET_EXEC, ET_DYN = 1, 2, 3
EM_PPC64, EM_X86_64, EM_AARCH64 = 21, 62, 183

SHT_NULL, SHT_RELA, SHT_DYNAMIC, SHT_NOBITS, SHT_REL, SHT_DYNSYM, SHT_RELR = 0, 4, 6, 8, 9, 11, 19
SHF_ALLOC = 0x2
SHN_UNDEF, SHN_LORESERVE, SHN_XINDEX = 0, 0xFF00, 0xFFFF
PN_XNUM = 0xFFFF

PT_LOAD, PT_DYNAMIC = 1, 2

DT_NULL, DT_NEEDED, DT_PLTRELSZ, DT_STRTAB, DT_SYMTAB = 0, 1, 2, 5, 6
DT_RELA, DT_RELASZ, DT_STRSZ, DT_SONAME, DT_PLTREL, DT_JMPREL = 7, 8, 10, 14, 20, 23

# (relative, absolute 64-bit) relocation types per machine: the two kinds a data pointer can carry.
POINTER_RELOCATIONS = {
    EM_X86_64: (8, 1),  # R_X86_64_RELATIVE, R_X86_64_64
    EM_AARCH64: (1027, 257),  # R_AARCH64_RELATIVE, R_AARCH64_ABS64
    EM_PPC64: (22, 38),  # R_PPC64_RELATIVE, R_PPC64_ADDR64
}

_RELA_WORDS = Elf64Rela.sizeof() // 8
_REL_WORDS = Elf64Rel.sizeof() // 8
_DYN_WORDS = Elf64Dyn.sizeof() // 8
_SYMBOL_SIZE = Elf64Symbol.sizeof()
_U64 = struct.Struct("<Q")
_RELA = struct.Struct("<QQq")
_REL = struct.Struct("<QQ")
# Relocation tables are searched with buf.find for the high bytes of the wanted addresses when
# those span at most _SEARCHED_BLOCKS blocks of 256 B or 64 KiB (one pass over the table per
# block); wider ranges test every entry instead.
_SEARCH_BLOCK_SHIFTS = (8, 16)
_SEARCHED_BLOCKS = 8
_NAME_LIMIT = 4096  # longest section/dynamic string read


@dataclass(frozen=True)
class Section:
    index: int
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


@dataclass(frozen=True)
class Segment:
    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int


@dataclass(frozen=True)
class _Relocation:
    type: int
    symbol: int
    addend: int
    symtab: int | None  # section index of the symbol table (ET_REL); None: the dynamic symbol table


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


class ElfView:
    """Headers of a host ELF read lazily from `buf`; every offset is checked against len(buf)."""

    def __init__(self, buf: Buffer):
        need(buf, 0, ElfIdent.sizeof(), "ELF identification")
        ident = ElfIdent.parse(bytes(buf[: ElfIdent.sizeof()]))
        if ident.magic != ELF_MAGIC:
            raise FormatError("not an ELF file", offset=0)
        if ident.ei_class != ELFCLASS64 or ident.ei_data != ELFDATA2LSB:
            raise FormatError(
                f"unsupported ELF class/endianness (EI_CLASS {ident.ei_class}, EI_DATA {ident.ei_data}); "
                "only ELF64 little-endian is read", offset=4)
        need(buf, 0, Elf64Header.sizeof(), "ELF header")
        header = Elf64Header.parse(bytes(buf[: Elf64Header.sizeof()]))
        self._buf = buf
        self._header = header
        self.e_type: int = header.e_type
        self.e_machine: int = header.e_machine
        self.osabi: int = ident.osabi
        self.abiversion: int = ident.abiversion
        self.e_flags: int = header.e_flags
        self._symbols: dict[int, construct.Container] = {}  # parsed symbols by file offset

    @property
    def buffer(self) -> Buffer:
        """The bytes this view reads (for callers that read records at the offsets it returns)."""
        return self._buf

    # --- tables -------------------------------------------------------------------------------

    @cached_property
    def _first_section_header(self):
        """Section header 0, which holds the real counts when they overflow the ELF header fields."""
        h = self._header
        if h.e_shoff == 0:
            return None
        if h.e_shentsize < Elf64SectionHeader.sizeof():
            raise FormatError(f"section header size {h.e_shentsize} is below 64", offset=0x3A)
        need(self._buf, h.e_shoff, Elf64SectionHeader.sizeof(), "section header 0")
        return Elf64SectionHeader.parse(bytes(self._buf[h.e_shoff : h.e_shoff + Elf64SectionHeader.sizeof()]))

    @cached_property
    def sections(self) -> list[Section]:
        h = self._header
        first = self._first_section_header
        if first is None:
            return []
        entries = h.e_shnum or first.sh_size
        need(self._buf, h.e_shoff, entries * h.e_shentsize, f"section header table ({entries} entries)")
        size = Elf64SectionHeader.sizeof()
        raw = [
            Elf64SectionHeader.parse(bytes(self._buf[off : off + size]))
            for off in range(h.e_shoff, h.e_shoff + entries * h.e_shentsize, h.e_shentsize)
        ]
        strndx = first.sh_link if h.e_shstrndx == SHN_XINDEX else h.e_shstrndx
        names = raw[strndx] if 0 < strndx < len(raw) and raw[strndx].sh_type != SHT_NOBITS else None
        if names is not None:
            need(self._buf, names.sh_offset, names.sh_size, "section name table")

        def name_of(sh) -> str:
            if names is None or sh.sh_name >= names.sh_size:
                return ""
            return cstring(self._buf, names.sh_offset + sh.sh_name, min(names.sh_size - sh.sh_name, _NAME_LIMIT))

        return [
            Section(index=i, name=name_of(sh), type=sh.sh_type, flags=sh.sh_flags, addr=sh.sh_addr,
                    offset=sh.sh_offset, size=sh.sh_size, link=sh.sh_link, info=sh.sh_info,
                    entsize=sh.sh_entsize, align=sh.sh_addralign)
            for i, sh in enumerate(raw)
        ]

    @cached_property
    def segments(self) -> list[Segment]:
        h = self._header
        if h.e_phoff == 0 or h.e_phnum == 0:
            return []
        if h.e_phentsize < Elf64ProgramHeader.sizeof():
            raise FormatError(f"program header size {h.e_phentsize} is below 56", offset=0x36)
        entries = h.e_phnum
        if entries == PN_XNUM and self._first_section_header is not None:
            entries = self._first_section_header.sh_info
        need(self._buf, h.e_phoff, entries * h.e_phentsize, f"program header table ({entries} entries)")
        size = Elf64ProgramHeader.sizeof()
        segments = []
        for off in range(h.e_phoff, h.e_phoff + entries * h.e_phentsize, h.e_phentsize):
            ph = Elf64ProgramHeader.parse(bytes(self._buf[off : off + size]))
            segments.append(Segment(type=ph.p_type, flags=ph.p_flags, offset=ph.p_offset, vaddr=ph.p_vaddr,
                                    filesz=ph.p_filesz, memsz=ph.p_memsz))
        return segments

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
        size -= size % (8 * _DYN_WORDS)
        need(self._buf, offset, size, "dynamic table")
        pairs = []
        for tag, value in struct.iter_unpack("<qQ", self._buf[offset : offset + size]):
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
                raise FormatError("dynamic string table not found", offset=self._dynamic_table[0])
            strtab = self.sections[dynamic.link]
            table, size = strtab.offset, strtab.size
        if index >= size:
            raise FormatError(f"dynamic string index {index} is past the string table ({size} bytes)",
                              offset=table)
        need(self._buf, table, size, "dynamic string table")
        return cstring(self._buf, table + index, min(size - index, _NAME_LIMIT))

    # --- pointers -----------------------------------------------------------------------------

    def pointers_in(self, section: Section, stride: int, field: int) -> dict[int, int | None]:
        """{record file offset: file offset its 8-byte pointer at +field targets, or None}.

        Records are section.offset + k*stride for every whole field in the section. ET_REL pointers
        come from the relocation sections applied to this section; ET_EXEC/ET_DYN pointers from the
        dynamic RELA relocations, else the value in place (absolute VA in ET_EXEC; in ET_DYN the addend
        GNU ld copies, or the VA that a RELR entry leaves there). A zero in place with no relocation,
        and any field of a relocatable object without a relocation, is None.
        """
        if stride <= 0 or field < 0 or field + 8 > stride:
            raise ValueError(f"field +{field} (8 bytes) does not fit a {stride}-byte record")
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
        starts = []
        for block in blocks:
            high_bytes = _U64.pack(block << shift)[low:].rstrip(b"\0")
            pos = self._buf.find(high_bytes, offset + low, end)
            while pos >= 0:
                if (pos - low - offset) % entry == 0:
                    starts.append(pos - low)
                pos = self._buf.find(high_bytes, pos + 1, end)
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
                                      offset=self._dynamic_table[0])
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
        if (reloc.symbol + 1) * _SYMBOL_SIZE > symtab.size:
            raise FormatError(f"relocation names symbol {reloc.symbol}, past the end of {symtab.name}",
                              offset=symtab.offset)
        sym = self._symbol(symtab.offset + reloc.symbol * _SYMBOL_SIZE)
        if sym.st_shndx == SHN_UNDEF or sym.st_shndx >= SHN_LORESERVE or sym.st_shndx >= len(self.sections):
            return None
        target = self.sections[sym.st_shndx]
        offset = target.offset + sym.st_value + reloc.addend
        return offset if target.has_bytes and 0 <= offset < len(self._buf) else None

    @cached_property
    def _dynsym(self) -> Section | None:
        return next((s for s in self.sections if s.type == SHT_DYNSYM), None)

    def _dynamic_symbol(self, index: int) -> construct.Container | None:
        """Dynamic symbol `index` (bounded by .dynsym when section headers exist; the file otherwise)."""
        tags = self._tags
        dynsym = self._dynsym
        if dynsym is not None and (index + 1) * _SYMBOL_SIZE > dynsym.size:
            raise FormatError(f"relocation names dynamic symbol {index}, past the end of .dynsym",
                              offset=dynsym.offset)
        table = self.va_to_offset(tags[DT_SYMTAB]) if DT_SYMTAB in tags else None
        if table is None:
            if dynsym is None:
                return None
            table = dynsym.offset
        return self._symbol(table + index * _SYMBOL_SIZE)

    def _symbol(self, offset: int) -> construct.Container:
        """The symbol at `offset`, parsed once (many relocations name the same few symbols)."""
        sym = self._symbols.get(offset)
        if sym is None:
            need(self._buf, offset, _SYMBOL_SIZE, "symbol")
            sym = self._symbols[offset] = Elf64Symbol.parse(bytes(self._buf[offset : offset + _SYMBOL_SIZE]))
        return sym
