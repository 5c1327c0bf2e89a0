"""Add one non-loaded section to a host ELF, changing nothing the loader, the CUDA runtime or a tool reads.

The patched file is the original file, byte for byte, followed by:

    [padding to 16] [the section's bytes] [.shstrtab + the new name] [padding to 8] [the section header table]

and the ELF header's `e_shoff` and `e_shnum` updated to the new table (the only original bytes that change).
The new table is the original one with two changes: the `.shstrtab` header points at the grown copy of the
name table (whose first bytes are the original table), and one header is appended for the new section
(SHT_PROGBITS, no flags, address 0). Every other section keeps its offset, address, size and bytes; the
program headers are not touched and every PT_LOAD range ends before the appended bytes, so the loader maps
exactly what it mapped before. The original `.shstrtab` bytes and section header table stay in the file,
unreferenced. lief was not used: its builder rewrites and moves more than this (see docs/repack.md).

Writes are atomic: a temporary file next to the destination, fsync'd, then renamed over the final name.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO, Iterator

from fatkit.errors import FatkitError, InputError
from fatkit.formats.common import align
from fatkit.formats.elf import ELFCLASS64, SHN_LORESERVE, SHT_PROGBITS, ElfView, layouts

PAYLOAD_ALIGN = 16


@contextlib.contextmanager
def atomic_output(destination: Path, mode: int | None = None) -> Iterator[BinaryIO]:
    """A file to write `destination` through: it appears under its name only once complete (fsync + rename);
    on any error, or a kill mid-write, only a hidden temporary in the same directory can remain."""
    destination = Path(destination)
    fd, temporary = tempfile.mkstemp(prefix=f".{destination.name[:40]}.", suffix=".fatkit-tmp",
                                     dir=destination.parent)
    try:
        with os.fdopen(fd, "w+b") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(temporary, mode & 0o7777)
        os.replace(temporary, destination)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def copy_file(source: Path, destination: Path) -> None:
    """An unchanged copy of `source`, written atomically, with its permission bits."""
    with open(source, "rb") as src, atomic_output(destination, os.stat(source).st_mode) as out:
        shutil.copyfileobj(src, out, 1 << 20)


def check_patchable(source: Path, name: str) -> None:
    """FatkitError unless `add_section(source, …, name, …)` can patch the file (checked before translating)."""
    _with_plan(Path(source), name, b"", lambda src, size, tail, fields: None)


def add_section(source: Path, destination: Path, name: str, payload: bytes) -> None:
    """Write `source` plus a non-alloc PROGBITS section `name` holding `payload` to `destination` (atomically).

    FatkitError when the ELF is one this does not patch: not 64-bit little-endian, no section header table
    (section-stripped), extended section numbering, or a section of that name already there.
    """
    def write(src: BinaryIO, size: int, tail: bytes, header_fields: list[tuple[int, bytes]]) -> None:
        src.seek(0)
        with atomic_output(destination, os.fstat(src.fileno()).st_mode) as out:
            shutil.copyfileobj(src, out, 1 << 20)
            if out.tell() != size:
                raise InputError("the file changed while it was copied", path=str(source))
            out.write(tail)
            for offset, raw in header_fields:
                out.seek(offset)
                out.write(raw)

    _with_plan(Path(source), name, payload, write)


def section_added(data: bytes, name: str, payload: bytes, *, alignment: int = PAYLOAD_ALIGN) -> bytes:
    """`data` (an ELF in memory) plus a non-alloc PROGBITS section `name` holding `payload`, laid out as
    add_section lays out a file; `alignment` is the payload's file alignment and its sh_addralign."""
    tail, header_fields = _plan(ElfView(data), data, len(data), name, payload, "<in memory>", alignment)
    out = bytearray(data)
    out += tail
    for offset, raw in header_fields:
        out[offset:offset + len(raw)] = raw
    return bytes(out)


def _with_plan(source: Path, name: str, payload: bytes, then) -> None:
    """Plan the patch of `source` (open, mapped, checked) and call `then(file, size, tail, header_fields)`."""
    try:
        with open(source, "rb") as src:
            size = os.fstat(src.fileno()).st_size
            if size == 0:
                raise InputError("empty file, not an ELF", path=str(source))
            with mmap.mmap(src.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                tail, header_fields = _plan(ElfView(buf), buf, size, name, payload, str(source))
            then(src, size, tail, header_fields)
    except OSError as exc:
        raise InputError(f"cannot repack: {exc.strerror or exc}", path=str(source)) from None


def _plan(elf: ElfView, buf, size: int, name: str, payload: bytes, path: str,
          alignment: int = PAYLOAD_ALIGN) -> tuple[bytes, list[tuple[int, bytes]]]:
    """The bytes to append and the ELF header fields to overwrite."""
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
    old_table = bytes(buf[shoff:shoff + shnum * section_header.size])
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
