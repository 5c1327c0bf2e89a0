"""The bytes that add one non-loaded section to an ELF image, changing nothing the loader reads.

The image is kept byte for byte and followed by:

    [padding to the alignment (16)] [the section's bytes] [.shstrtab + the new name] [padding to 8]
    [the section header table]

with the ELF header's `e_shoff` and `e_shnum` updated to the new table (the only original bytes that change).
The new table is the original one with two changes: the `.shstrtab` header points at the grown copy of the
name table (whose first bytes are the original table), and one header is appended for the new section
(SHT_PROGBITS, no flags, address 0). Every other section keeps its offset, address, size and bytes; the
program headers are not touched and every PT_LOAD range ends before the appended bytes, so the loader maps
exactly what it mapped before. The original `.shstrtab` bytes and section header table stay, unreferenced.
Headers are written through `formats/elf.py`'s layouts, by field name.

`repack/elf_patch.py` writes this to files; `section_added` makes it in memory (ZLUDA's cache rows).
"""

from __future__ import annotations

from fatkit.errors import FatkitError
from fatkit.formats.common import align
from fatkit.formats.elf import ELFCLASS64, SHN_LORESERVE, SHT_PROGBITS, ElfView, layouts

PAYLOAD_ALIGN = 16


def section_added(data: bytes, name: str, payload: bytes, *, alignment: int = PAYLOAD_ALIGN) -> bytes:
    """`data` (an ELF in memory) plus a non-alloc PROGBITS section `name` holding `payload`, laid out as
    repack.elf_patch.add_section writes it to a file; `alignment` is the payload's file alignment and its
    sh_addralign."""
    tail, header_fields = appended_section(ElfView(data), len(data), name, payload, "<in memory>", alignment)
    out = bytearray(data)
    out += tail
    for offset, raw in header_fields:
        out[offset:offset + len(raw)] = raw
    return bytes(out)


def appended_section(elf: ElfView, size: int, name: str, payload: bytes, path: str,
                     alignment: int = PAYLOAD_ALIGN) -> tuple[bytes, list[tuple[int, bytes]]]:
    """The bytes to append to the `size` bytes of `elf`'s image and the ELF header fields to overwrite
    ((offset, bytes) pairs); FatkitError naming `path` when the image is one this does not patch: not 64-bit
    little-endian, no section header table (section-stripped), extended section numbering, or a section of
    that name already there."""
    def refuse(why: str) -> FatkitError:
        return FatkitError(f"cannot add {name}: {why}", path=path)

    if elf.elf_class != ELFCLASS64:  # ElfView reads little-endian files only
        raise refuse("only 64-bit little-endian ELF files are patched")
    elf64 = layouts(ELFCLASS64)
    section_header = elf64.section
    shoff, shentsize, shnum, names_index = (elf.header.e_shoff, elf.header.e_shentsize, elf.header.e_shnum,
                                            elf.header.e_shstrndx)
    if shoff == 0 or shnum == 0:
        raise refuse("the file has no section header table (section-stripped, or extended numbering)")
    if shnum + 1 >= SHN_LORESERVE:
        raise refuse(f"{shnum} sections: one more needs extended section numbering")
    if shentsize != section_header.size:
        raise refuse(f"section headers of {shentsize} bytes, not {section_header.size}")
    if "\0" in name or not name:
        raise refuse("a section name must be non-empty and hold no NUL")
    sections = elf.sections
    if any(s.name == name for s in sections):
        raise refuse("the file already has one (it was repacked before); repack the original")
    if not 0 < names_index < shnum:
        raise refuse(f"e_shstrndx {names_index} names no section")
    old_table = bytes(elf.buffer[shoff:shoff + shnum * section_header.size])
    if len(old_table) != shnum * section_header.size:
        raise refuse("the section header table runs past the end of the file")
    old_names = elf.section_name_table()

    payload_offset = align(size, alignment)
    names_offset = payload_offset + len(payload)
    new_names = old_names + name.encode("utf-8") + b"\0"
    table_offset = align(names_offset + len(new_names), 8)

    headers = [section_header.at(old_table, i * section_header.size) for i in range(shnum)]
    headers[names_index] = headers[names_index]._replace(sh_offset=names_offset, sh_size=len(new_names))
    headers.append(section_header.record(
        sh_name=len(old_names), sh_type=SHT_PROGBITS, sh_flags=0, sh_addr=0, sh_offset=payload_offset,
        sh_size=len(payload), sh_link=0, sh_info=0, sh_addralign=alignment, sh_entsize=0))
    table = b"".join(section_header.pack(h) for h in headers)

    tail = b"".join([bytes(payload_offset - size), payload, new_names,
                     bytes(table_offset - names_offset - len(new_names)), table])
    fields = [elf64.header.field_bytes("e_shoff", table_offset), elf64.header.field_bytes("e_shnum", shnum + 1)]
    return tail, fields
