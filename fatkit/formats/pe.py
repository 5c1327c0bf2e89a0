"""The PE/COFF reader of fatkit: Windows DLLs, EXEs and Python extension modules (`.pyd`, which are DLLs).

`PeView` reads a PE image straight from a Buffer (bytes or mmap) without copying it: construction reads the
DOS stub's `e_lfanew`, the COFF file header, the optional header with its data directories and the section
table (a few KB); the import, delay-import and base-relocation tables are read on first use, each bounded by
its data directory and the file. Fixed layouts are declared once (`formats/layout.py`), as the ELF reader's
are: read through struct, built (and patched by field name) by the writer.

Why not lief, which the design names for PE: `lief.PE.parse` reads the whole file into memory and copies
every section's content into its model (measured: +42 MB resident for the 21 MB `libbitsandbytes_cuda121.dll`)
before a single field can be asked for, and its builder rewrites headers and tables when it writes. fatkit
reads files of hundreds of MB through mmap slices and must change no byte the loader reads when it adds a
section, so both the reader and the writer (`fatkit.repack.pe_patch`) are declared here. The tests use lief
as the independent reader of the corpus DLLs and of what repack writes.

What fatkit relies on (Microsoft's PE format description):
- `MZ` at 0, the u32 at 0x3C (`e_lfanew`) is the offset of `PE\\0\\0`, followed by the 20-byte COFF file
  header and the optional header (`0x10b` PE32, `0x20b` PE32+), whose data directories are (RVA, size)
  pairs, except the certificate table (index 4), whose first field is a file offset.
- Section headers (40 bytes) follow the optional header. In images a name is at most 8 bytes, padded with
  NULs: the linker cuts longer ones, so `.nv_fatbin` is `.nv_fatb`, `__nv_relfatbin` is `__nv_rel`,
  `.nvFatBinSegment` is `.nvFatBi`, `.hipFatBinSegment` is `.hipFatB`, `.hip_fatbin` is `.hip_fat` and
  `__CLANG_OFFLOAD_BUNDLE__…` is `__CLANG_`. A name `/<decimal>` (GNU ld with debug sections, and COFF
  objects) is an offset into the COFF string table that follows the symbol table.
- A section's file bytes are SizeOfRawData bytes at PointerToRawData; it occupies VirtualSize bytes from
  VirtualAddress once mapped (the bytes past SizeOfRawData are zeros). An RVA inside the headers is its own
  file offset.
- Pointers in data (the `data` field of a registration wrapper) hold the absolute VA at the preferred
  ImageBase; the base relocation table lists each such field (type 10 `IMAGE_REL_BASED_DIR64`, 3 `HIGHLOW`
  in PE32) so the loader can move them. Blocks are {u32 page RVA, u32 block size} then u16 entries
  `type << 12 | offset in page`; type 0 is padding.
- Import descriptors (20 bytes, zero-terminated) name each DLL by an RVA; delay-load descriptors (32 bytes)
  do too when their attribute bit 0 is set (older ones hold a VA).
"""

from __future__ import annotations

import bisect
import struct
from functools import cached_property
from typing import BinaryIO, Literal, NamedTuple

from fatkit.errors import FormatError
from fatkit.formats.common import Buffer, cstring, need
from fatkit.formats.layout import Bytes, FieldType, Int8ul, Int16ul, Int32ul, Int64ul, Layout
from fatkit.formats.magic import DOS_MAGIC, FATKIT_AMD_SECTION

DosHeader = Layout("e_magic" / Bytes(2), "e_skipped" / Bytes(58), "e_lfanew" / Int32ul, name="DosHeader")
CoffHeader = Layout(
    "signature" / Bytes(4),  # PE\0\0
    "machine" / Int16ul,
    "number_of_sections" / Int16ul,
    "time_date_stamp" / Int32ul,
    "pointer_to_symbol_table" / Int32ul,
    "number_of_symbols" / Int32ul,
    "size_of_optional_header" / Int16ul,
    "characteristics" / Int16ul,
    name="CoffHeader",
)


def _optional_header(address: FieldType, base_of_data: bool) -> Layout:
    """The optional header up to NumberOfRvaAndSizes; `address` is the size of ImageBase and the stack/heap
    sizes (Int32ul in PE32, Int64ul in PE32+), which alone also has no BaseOfData."""
    return Layout(
        "magic" / Int16ul,
        "major_linker_version" / Int8ul,
        "minor_linker_version" / Int8ul,
        "size_of_code" / Int32ul,
        "size_of_initialized_data" / Int32ul,
        "size_of_uninitialized_data" / Int32ul,
        "address_of_entry_point" / Int32ul,
        "base_of_code" / Int32ul,
        *(["base_of_data" / Int32ul] if base_of_data else []),
        "image_base" / address,
        "section_alignment" / Int32ul,
        "file_alignment" / Int32ul,
        "major_os_version" / Int16ul,
        "minor_os_version" / Int16ul,
        "major_image_version" / Int16ul,
        "minor_image_version" / Int16ul,
        "major_subsystem_version" / Int16ul,
        "minor_subsystem_version" / Int16ul,
        "win32_version_value" / Int32ul,
        "size_of_image" / Int32ul,
        "size_of_headers" / Int32ul,
        "checksum" / Int32ul,
        "subsystem" / Int16ul,
        "dll_characteristics" / Int16ul,
        "size_of_stack_reserve" / address,
        "size_of_stack_commit" / address,
        "size_of_heap_reserve" / address,
        "size_of_heap_commit" / address,
        "loader_flags" / Int32ul,
        "number_of_rva_and_sizes" / Int32ul,
        name="OptionalHeader",
    )


OptionalHeader32 = _optional_header(Int32ul, base_of_data=True)
OptionalHeader64 = _optional_header(Int64ul, base_of_data=False)
DataDirectory = Layout("virtual_address" / Int32ul, "size" / Int32ul, name="DataDirectory")
SectionHeader = Layout(
    "name" / Bytes(8),
    "virtual_size" / Int32ul,
    "virtual_address" / Int32ul,
    "size_of_raw_data" / Int32ul,
    "pointer_to_raw_data" / Int32ul,
    "pointer_to_relocations" / Int32ul,
    "pointer_to_linenumbers" / Int32ul,
    "number_of_relocations" / Int16ul,
    "number_of_linenumbers" / Int16ul,
    "characteristics" / Int32ul,
    name="SectionHeader",
)
ImportDescriptor = Layout("original_first_thunk" / Int32ul, "time_date_stamp" / Int32ul,
                          "forwarder_chain" / Int32ul, "name" / Int32ul, "first_thunk" / Int32ul,
                          name="ImportDescriptor")
DelayImportDescriptor = Layout("attributes" / Int32ul, "dll_name" / Int32ul, "module_handle" / Int32ul,
                               "import_address_table" / Int32ul, "import_name_table" / Int32ul,
                               "bound_import_address_table" / Int32ul, "unload_information_table" / Int32ul,
                               "time_date_stamp" / Int32ul, name="DelayImportDescriptor")
BaseRelocationBlock = Layout("page_rva" / Int32ul, "block_size" / Int32ul, name="BaseRelocationBlock")

PE_SIGNATURE = b"PE\0\0"
PE32_MAGIC, PE32_PLUS_MAGIC = 0x10B, 0x20B
IMAGE_FILE_DLL = 0x2000
IMAGE_SCN_CNT_CODE = 0x20
IMAGE_SCN_CNT_INITIALIZED_DATA = 0x40
IMAGE_SCN_MEM_EXECUTE = 0x20000000
IMAGE_SCN_MEM_READ = 0x40000000
DIRECTORY_IMPORT, DIRECTORY_SECURITY, DIRECTORY_BASERELOC = 1, 4, 5
DIRECTORY_DELAY_IMPORT = 13
IMAGE_REL_BASED_ABSOLUTE, IMAGE_REL_BASED_HIGHLOW, IMAGE_REL_BASED_DIR64 = 0, 3, 10
# The ELF section each device-code section of a PE image stands for (its name cut to 8 bytes by the linker);
# `.fatkit` is the section `fatkit repack` adds to PE files (ELF: `.fatkit_amd`, too long for a PE image).
ELF_SECTION_OF = {".nv_fatb": ".nv_fatbin", "__nv_rel": "__nv_relfatbin", ".nvFatBi": ".nvFatBinSegment",
                  ".hipFatB": ".hipFatBinSegment", ".hip_fat": ".hip_fatbin", ".fatkit": FATKIT_AMD_SECTION}
REPACK_SECTION = ".fatkit"
# `.fatkit` is initialized read-only data: the loader maps every section of an image; nothing reads or runs it
REPACK_SECTION_CHARACTERISTICS = IMAGE_SCN_CNT_INITIALIZED_DATA | IMAGE_SCN_MEM_READ
SECTION_NAME_SIZE = 8  # bytes of a section header's name
IMAGE_DLLCHARACTERISTICS_FORCE_INTEGRITY = 0x0080  # the image loads only with a valid signature
CLANG_OFFLOAD_SECTION = "__CLANG_"  # the 8-byte cut of `__CLANG_OFFLOAD_BUNDLE__<bundle id>`
SYCL_TARGET_SYMBOLS = ".tgtsym"  # the SYCL runtime's table of `<bundle id>.<kernel symbol>` strings
SECTION_HEADER_SIZE = SectionHeader.size
COFF_SYMBOL_SIZE = 18
# The most entries of one table read before fatkit calls the table hostile: real DLLs import a few dozen
# DLLs and carry at most a few hundred thousand relocated fields.
MAX_IMPORTS = 4096
MAX_RELOCATION_BYTES = 64 << 20
_NAME_LIMIT = 4096

_DOS = DosHeader.unpack
_COFF = CoffHeader.unpack
_OPTIONAL = {PE32_MAGIC: OptionalHeader32, PE32_PLUS_MAGIC: OptionalHeader64}
_DIRECTORY = DataDirectory.unpack
_SECTION = SectionHeader.unpack
_IMPORT = ImportDescriptor.unpack
_DELAY_IMPORT = DelayImportDescriptor.unpack
_BLOCK = BaseRelocationBlock.unpack
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class PeSection(NamedTuple):
    """One section header. `offset`/`size` are the section's bytes in the file (what `data` reads): SizeOfRawData
    cut to VirtualSize, since the raw size is rounded up to FileAlignment with padding past the content."""

    index: int  # type: ignore[assignment]  # the field shadows tuple.index, which nothing here calls
    name: str
    virtual_address: int
    virtual_size: int
    raw_offset: int  # PointerToRawData
    raw_size: int  # SizeOfRawData
    characteristics: int

    @property
    def offset(self) -> int:
        return self.raw_offset

    @property
    def size(self) -> int:
        return min(self.raw_size, self.virtual_size) if self.virtual_size else self.raw_size

    @property
    def has_bytes(self) -> bool:
        return self.raw_size > 0 and self.raw_offset > 0

    @property
    def executable(self) -> bool:
        return bool(self.characteristics & (IMAGE_SCN_CNT_CODE | IMAGE_SCN_MEM_EXECUTE))


class Import(NamedTuple):
    dll: str
    delayed: bool  # a delay-load import (resolved on first call), not one the loader resolves at load time


def is_pe(buf: Buffer) -> bool:
    """Whether the buffer starts like a PE image: `MZ`, and `PE\\0\\0` where e_lfanew says (cheap)."""
    if len(buf) < _DOS.size or bytes(buf[:2]) != DOS_MAGIC:
        return False
    lfanew = _U32.unpack_from(buf, 0x3C)[0]
    return bytes(buf[lfanew:lfanew + 4]) == PE_SIGNATURE


class PeView:
    """A PE image (PE32 or PE32+) read lazily from `buf`; every offset is checked against len(buf)."""

    def __init__(self, buf: Buffer):
        need(buf, 0, _DOS.size, "DOS header")
        magic, _, lfanew = _DOS.unpack_from(buf, 0)
        if magic != DOS_MAGIC:
            raise FormatError("not a PE file (no MZ magic)", offset=0)
        need(buf, lfanew, _COFF.size, "PE signature and COFF file header (e_lfanew)")
        (signature, self.machine, self.number_of_sections, _, self.pointer_to_symbol_table,
         self.number_of_symbols, optional_size, self.characteristics) = _COFF.unpack_from(buf, lfanew)
        if signature != PE_SIGNATURE:
            raise FormatError(f"no PE\\0\\0 signature at e_lfanew 0x{lfanew:x} (a DOS program, or not PE)",
                              offset=lfanew)
        self.coff_header_offset = lfanew + 4
        optional_at = lfanew + _COFF.size
        need(buf, optional_at, 2, "optional header magic")
        self.magic: int = _U16.unpack_from(buf, optional_at)[0]
        if self.magic not in _OPTIONAL:
            raise FormatError(f"optional header magic 0x{self.magic:x} is neither PE32 (0x10b) nor PE32+ (0x20b)",
                              offset=optional_at)
        layout = _OPTIONAL[self.magic]
        unpack = layout.unpack
        if optional_size < unpack.size:
            raise FormatError(f"SizeOfOptionalHeader {optional_size} is below the {unpack.size} bytes of its "
                              "fixed fields", offset=lfanew + 20)
        need(buf, optional_at, optional_size, "optional header")
        values = dict(zip(layout.names, unpack.unpack_from(buf, optional_at)))
        self._buf = buf
        self._optional_layout = layout
        self._coff_at = lfanew
        self.optional = values
        self.optional_offsets = {name: optional_at + at for name, at in layout.offsets.items()}
        self.image_base: int = values["image_base"]
        self.section_alignment: int = values["section_alignment"]
        self.file_alignment: int = values["file_alignment"]
        self.size_of_image: int = values["size_of_image"]
        self.size_of_headers: int = values["size_of_headers"]
        self.checksum: int = values["checksum"]
        directories = min(values["number_of_rva_and_sizes"], (optional_size - unpack.size) // _DIRECTORY.size)
        self.directories_offset = optional_at + unpack.size
        self.directories: list[tuple[int, int]] = [
            _DIRECTORY.unpack_from(buf, self.directories_offset + i * _DIRECTORY.size) for i in range(directories)]
        self.section_table_offset = optional_at + optional_size
        need(buf, self.section_table_offset, self.number_of_sections * SECTION_HEADER_SIZE,
             f"section table ({self.number_of_sections} entries)")

    @property
    def buffer(self) -> Buffer:
        """The bytes this view reads (for callers that read records at the offsets it returns)."""
        return self._buf

    def coff_field(self, name: str, value: int) -> tuple[int, bytes]:
        """The file offset of COFF file header field `name` and `value` as its bytes (what a patch writes)."""
        at, raw = CoffHeader.field_bytes(name, value)
        return self._coff_at + at, raw

    def optional_field(self, name: str, value: int) -> tuple[int, bytes]:
        """The file offset of optional header field `name` and `value` as its bytes (PE32 or PE32+ layout)."""
        _, raw = self._optional_layout.field_bytes(name, value)
        return self.optional_offsets[name], raw

    @property
    def is_dll(self) -> bool:
        return bool(self.characteristics & IMAGE_FILE_DLL)

    @property
    def format(self) -> Literal["pe-dll", "pe-exe"]:
        """fatkit's Binary.format: `pe-dll` (also `.pyd` modules) or `pe-exe`."""
        return "pe-dll" if self.is_dll else "pe-exe"

    @property
    def pointer_size(self) -> int:
        return 8 if self.magic == PE32_PLUS_MAGIC else 4

    def directory(self, index: int) -> tuple[int, int]:
        """(RVA, size) of data directory `index` ((0, 0) when the header has fewer)."""
        return self.directories[index] if index < len(self.directories) else (0, 0)

    @property
    def certificate_table(self) -> tuple[int, int]:
        """(file offset, size) of the Authenticode certificate table; size 0 when the file is not signed."""
        return self.directory(DIRECTORY_SECURITY)

    # --- sections -----------------------------------------------------------------------------

    @cached_property
    def sections(self) -> list[PeSection]:
        table = bytes(self._buf[self.section_table_offset:
                                self.section_table_offset + self.number_of_sections * SECTION_HEADER_SIZE])
        out = []
        for index, (raw_name, vsize, va, raw_size, raw_offset, *_, characteristics) in enumerate(
                _SECTION.iter_unpack(table)):
            out.append(PeSection(index, self._section_name(raw_name, index), va, vsize, raw_offset, raw_size,
                                 characteristics))
        return out

    def _section_name(self, raw: bytes, index: int) -> str:
        name = raw.rstrip(b"\0").decode("utf-8", "replace")
        if name.startswith("/") and name[1:].isdigit() and self.pointer_to_symbol_table:
            strings = self.pointer_to_symbol_table + self.number_of_symbols * COFF_SYMBOL_SIZE
            need(self._buf, strings, 4, f"COFF string table (long name of section {index})")
            size = _U32.unpack_from(self._buf, strings)[0]
            at = int(name[1:])
            if not 4 <= at < size:
                raise FormatError(f"section {index} names string table offset {at}, outside its {size} bytes",
                                  offset=self.section_table_offset + index * SECTION_HEADER_SIZE)
            need(self._buf, strings, size, "COFF string table")
            return cstring(self._buf, strings + at, min(size - at, _NAME_LIMIT))
        return name

    def section(self, name: str) -> PeSection | None:
        return next((s for s in self.sections if s.name == name), None)

    def section_header_offset(self, index: int) -> int:
        return self.section_table_offset + index * SECTION_HEADER_SIZE

    @cached_property
    def _sections_by_offset(self) -> tuple[list[int], list[PeSection]]:
        ordered = sorted((s for s in self.sections if s.has_bytes and s.size), key=lambda s: s.offset)
        return [s.offset for s in ordered], ordered

    def section_at(self, offset: int) -> PeSection | None:
        """The section whose file bytes contain `offset` (None in the headers, gaps and the overlay)."""
        starts, ordered = self._sections_by_offset
        i = bisect.bisect_right(starts, offset) - 1
        if i >= 0 and offset < ordered[i].offset + ordered[i].size:
            return ordered[i]
        return None

    def data(self, section: PeSection) -> bytes:
        need(self._buf, section.offset, section.size, f"section {section.name or section.index}")
        return bytes(self._buf[section.offset:section.offset + section.size])

    @cached_property
    def extent(self) -> int:
        """Bytes the image occupies as written: headers, section contents, COFF symbols and certificates,
        whichever ends last (bytes after that are an overlay nothing in the headers names)."""
        ends = [self.size_of_headers, self.section_table_offset + self.number_of_sections * SECTION_HEADER_SIZE]
        ends += [s.raw_offset + s.raw_size for s in self.sections if s.has_bytes]
        offset, size = self.certificate_table
        if size:
            ends.append(offset + size)
        return max(ends)

    # --- addresses ----------------------------------------------------------------------------

    @cached_property
    def _sections_by_rva(self) -> tuple[list[int], list[PeSection]]:
        ordered = sorted((s for s in self.sections if s.has_bytes), key=lambda s: s.virtual_address)
        return [s.virtual_address for s in ordered], ordered

    def rva_to_offset(self, rva: int) -> int | None:
        """File offset of the byte the image maps at `rva`; None where the image holds no file byte there
        (zero-filled tails of sections, gaps, past the image) or the offset lies past the file."""
        if 0 <= rva < self.size_of_headers:
            return rva if rva < len(self._buf) else None
        starts, ordered = self._sections_by_rva
        i = bisect.bisect_right(starts, rva) - 1
        if i < 0:
            return None
        section = ordered[i]
        within = rva - section.virtual_address
        if within >= section.raw_size or (section.virtual_size and within >= section.virtual_size):
            return None
        offset = section.raw_offset + within
        return offset if offset < len(self._buf) else None

    def offset_to_rva(self, offset: int) -> int | None:
        """The RVA where the file byte at `offset` is mapped; None outside the headers and the sections."""
        if 0 <= offset < self.size_of_headers:
            return offset
        section = self.section_at(offset)
        return None if section is None else section.virtual_address + offset - section.raw_offset

    def va_to_offset(self, va: int) -> int | None:
        """File offset of an absolute virtual address at the preferred ImageBase."""
        return self.rva_to_offset(va - self.image_base) if va >= self.image_base else None

    def _string_at_rva(self, rva: int, what: str) -> str:
        offset = self.rva_to_offset(rva)
        if offset is None:
            raise FormatError(f"{what} at RVA 0x{rva:x} is not in the file")
        return cstring(self._buf, offset, _NAME_LIMIT)

    # --- base relocations ---------------------------------------------------------------------

    @cached_property
    def relocations(self) -> dict[int, int]:
        """{RVA of a relocated field: its base relocation type}, padding (type 0) left out."""
        rva, size = self.directory(DIRECTORY_BASERELOC)
        if size == 0:
            return {}
        if size > MAX_RELOCATION_BYTES:
            raise FormatError(f"base relocation table claims {size} bytes, above {MAX_RELOCATION_BYTES}")
        offset = self.rva_to_offset(rva)
        if offset is None:
            raise FormatError(f"base relocation table at RVA 0x{rva:x} is not in the file",
                              offset=self.directories_offset + DIRECTORY_BASERELOC * _DIRECTORY.size)
        need(self._buf, offset, size, "base relocation table")
        table = bytes(self._buf[offset:offset + size])
        found: dict[int, int] = {}
        pos = 0
        while pos + _BLOCK.size <= size:
            page, block_size = _BLOCK.unpack_from(table, pos)
            if block_size < _BLOCK.size or pos + block_size > size or block_size % 2:
                raise FormatError(f"base relocation block of {block_size} bytes (page RVA 0x{page:x}) does not "
                                  "fit its table", offset=offset + pos)
            entries = table[pos + _BLOCK.size:pos + block_size]
            for (entry,) in struct.iter_unpack("<H", entries):
                if entry >> 12 != IMAGE_REL_BASED_ABSOLUTE:
                    found[page + (entry & 0xFFF)] = entry >> 12
            pos += block_size
        return found

    def pointers_in(self, section: PeSection, stride: int, field: int) -> dict[int, int | None]:
        """{record file offset: file offset its pointer at +field targets, or None}, for records at
        section.offset + k*stride, as ElfView.pointers_in. The field holds the target's VA at the preferred
        ImageBase, moved by a base relocation (DIR64, HIGHLOW in PE32) when the image loads elsewhere; a field
        the relocation table does not list while the table exists, or a zero, resolves to None (a pointer the
        loader would leave unrelocated is not one the runtime registers)."""
        width = self.pointer_size
        if stride <= 0 or field < 0 or field + width > stride:
            raise ValueError(f"field +{field} ({width} bytes) does not fit a {stride}-byte record")
        if not section.has_bytes or section.size < field + width:
            return {}
        need(self._buf, section.offset, section.size, f"section {section.name or section.index}")
        relocations = self.relocations
        relocated_type = IMAGE_REL_BASED_DIR64 if width == 8 else IMAGE_REL_BASED_HIGHLOW
        unpack = _U64 if width == 8 else _U32
        result: dict[int, int | None] = {}
        for record in range(section.offset, section.offset + section.size - field - width + 1, stride):
            value = unpack.unpack_from(self._buf, record + field)[0]
            rva = section.virtual_address + record - section.offset + field
            unrelocated = bool(relocations) and relocations.get(rva) != relocated_type
            result[record] = None if value == 0 or unrelocated else self.va_to_offset(value)
        return result

    # --- imports ------------------------------------------------------------------------------

    @cached_property
    def imports(self) -> list[Import]:
        """The DLLs the image imports, in table order: the import directory, then delay-load imports."""
        out = [Import(name, False) for name in self._descriptor_names(DIRECTORY_IMPORT, _IMPORT, 3, "import")]
        out += [Import(name, True) for name in self._descriptor_names(DIRECTORY_DELAY_IMPORT, _DELAY_IMPORT, 1,
                                                                      "delay-load import")]
        return out

    def _descriptor_names(self, directory: int, layout: struct.Struct, name_field: int, what: str) -> list[str]:
        rva = self.directory(directory)[0]  # the tables end at their all-zero descriptor, not at a size
        if rva == 0:
            return []
        offset = self.rva_to_offset(rva)
        if offset is None:
            raise FormatError(f"{what} directory at RVA 0x{rva:x} is not in the file",
                              offset=self.directories_offset + directory * _DIRECTORY.size)
        names: list[str] = []
        for index in range(MAX_IMPORTS + 1):
            at = offset + index * layout.size
            need(self._buf, at, layout.size, f"{what} descriptor {index}")
            descriptor = layout.unpack_from(self._buf, at)
            if not any(descriptor):
                return names
            if index == MAX_IMPORTS:
                break
            name_rva = descriptor[name_field]
            if directory == DIRECTORY_DELAY_IMPORT and not descriptor[0] & 1:
                name_rva -= self.image_base  # version-1 delay-load descriptors hold VAs
            names.append(self._string_at_rva(name_rva, f"{what} DLL name {index}"))
        raise FormatError(f"{what} table has more than {MAX_IMPORTS} descriptors", offset=offset)


def pe_checksum(stream: BinaryIO, checksum_at: int, chunk: int = 1 << 20) -> int:
    """The optional header's CheckSum of the file `stream` reads from its start: the 16-bit one's-complement
    sum of the file's little-endian words (an odd last byte padded with zero), the 4-byte CheckSum field at
    `checksum_at` read as zeros, folded to 16 bits, plus the file length. Read in `chunk`-byte pieces."""
    total = position = 0
    while block := stream.read(chunk - chunk % 2):
        data = bytearray(block)
        start, end = max(checksum_at - position, 0), min(checksum_at + 4 - position, len(data))
        if start < end:
            data[start:end] = bytes(end - start)
        position += len(data)
        if len(data) % 2:
            data.append(0)
        total += sum(memoryview(data).cast("H"))
    while total >> 16:  # end-around carry: folding the whole sum equals folding after every word
        total = (total & 0xFFFF) + (total >> 16)
    return (total + position) & 0xFFFFFFFF
