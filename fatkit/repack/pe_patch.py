"""Add one section to a PE image (DLL, EXE, `.pyd`), changing nothing else the Windows loader reads.

The patched file is the original file, byte for byte, followed by

    [zeros to FileAlignment] [the section's bytes] [zeros to FileAlignment]

plus one 40-byte section header written into the zero slack after the last original header (inside
SizeOfHeaders, before the first section's bytes), and four fields of the headers updated: NumberOfSections
(COFF header), SizeOfImage, SizeOfInitializedData and CheckSum (optional header), written through
`formats/pe.py`'s declared layouts by field name, as `elf_patch` writes through `formats/elf.py`'s. Every
original section keeps its header, address and bytes; the data directories (imports, exports, relocations,
resources, exceptions, TLS, load config, debug) are not touched. The section is named `.fatkit` (a PE image
holds names of at most 8 bytes; ELF's `.fatkit_amd` does not fit) and holds the same bytes as ELF's
`.fatkit_amd`: the bundle and manifest of `fatkit.formats.fatkit_amd`.

The section is initialized read-only data (IMAGE_SCN_CNT_INITIALIZED_DATA | IMAGE_SCN_MEM_READ): the loader
maps every section of an image, so it lies at the next SectionAlignment boundary after the last section,
where the image grows by its size, and a runtime shim in the process finds it through the module's own
section table. The bytes sit after anything the file held past its sections (an overlay, the certificate
table), so those keep their offsets. CheckSum is recomputed when the original carries one and stays 0 when
it does not (0 says "not computed"; the loader checks it only for drivers and boot images).

A signed file (certificate table, data directory 4) cannot stay signed: Authenticode hashes the headers and
every section, so the signature no longer verifies; add_section says so in its warnings, and refuses with
`keep_signature`. An image with FORCE_INTEGRITY in DllCharacteristics loads only with a valid signature: a
warning too. lief (1.0) was not used: asked to add one section to libbitsandbytes_rocm72.dll, its
builder changed 414 bytes of the original range (321 in `.rsrc`, which it rebuilds, 74 in `.text`, 19 in
the headers); see docs/repack.md.

Writes are atomic (elf_patch.atomic_output).
"""

from __future__ import annotations

import mmap
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from fatkit.errors import FatkitError, InputError
from fatkit.formats.common import align
from fatkit.formats.pe import (DIRECTORY_SECURITY, IMAGE_DLLCHARACTERISTICS_FORCE_INTEGRITY,
                               REPACK_SECTION_CHARACTERISTICS, SECTION_HEADER_SIZE, SECTION_NAME_SIZE, PeView,
                               SectionHeader, pe_checksum)
from fatkit.repack.elf_patch import atomic_output

_U32 = struct.Struct("<I")
INTEGRITY_WARNING = ("the image sets FORCE_INTEGRITY: Windows loads it only with a valid signature, which the "
                     "repacked file does not have; sign it")
UNSIGNED_WARNING = ("the file was signed (Authenticode): the signature no longer verifies, Windows and signtool "
                    "report the file as modified; sign the repacked file again")


@dataclass(frozen=True)
class _Plan:
    size: int  # of the original file
    raw_offset: int
    raw_size: int
    header_at: int  # file offset of the new section header
    header: bytes
    fields: list[tuple[int, bytes]]  # (file offset, bytes) of the header fields to overwrite
    checksum_at: int | None  # where CheckSum goes, when the original carries one
    warnings: list[str]


def check_patchable(source: Path, name: str, keep_signature: bool = False) -> list[str]:
    """The warnings add_section would give; FatkitError when it cannot patch the file (checked before
    translating, so a refusal costs no translation)."""
    return _plan_file(Path(source), name, 0, keep_signature).warnings


def add_section(source: Path, destination: Path, name: str, payload: bytes, keep_signature: bool = False) -> list[str]:
    """Write `source` plus a section `name` holding `payload` to `destination` (atomically); the warnings.

    FatkitError when the image is one this does not patch: no zero slack for one more section header, a
    section of that name already there, a name over 8 bytes, a section past 4 GiB, or a signed file with
    `keep_signature`.
    """
    source = Path(source)
    plan = _plan_file(source, name, len(payload), keep_signature)
    try:
        with open(source, "rb") as src, atomic_output(destination, os.fstat(src.fileno()).st_mode) as out:
            shutil.copyfileobj(src, out, 1 << 20)
            if out.tell() != plan.size:
                raise InputError("the file changed while it was copied", path=str(source))
            out.write(bytes(plan.raw_offset - plan.size))
            out.write(payload)
            out.write(bytes(plan.raw_size - len(payload)))
            for offset, raw in [(plan.header_at, plan.header), *plan.fields]:
                out.seek(offset)
                out.write(raw)
            if plan.checksum_at is not None:
                _write_checksum(out, plan.checksum_at)
    except OSError as exc:
        raise InputError(f"cannot repack: {exc.strerror or exc}", path=str(source)) from None
    return plan.warnings


def _write_checksum(out: BinaryIO, checksum_at: int) -> None:
    out.flush()
    out.seek(0)
    checksum = pe_checksum(out, checksum_at)
    out.seek(checksum_at)
    out.write(_U32.pack(checksum))
    out.seek(0, os.SEEK_END)


def _plan_file(source: Path, name: str, payload_size: int, keep_signature: bool) -> _Plan:
    try:
        with open(source, "rb") as src:
            size = os.fstat(src.fileno()).st_size
            if size == 0:
                raise InputError("empty file, not a PE image", path=str(source))
            with mmap.mmap(src.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _plan(PeView(buf), buf, size, name, payload_size, keep_signature, str(source))
    except OSError as exc:
        raise InputError(f"cannot repack: {exc.strerror or exc}", path=str(source)) from None


def _plan(image: PeView, buf, size: int, name: str, payload_size: int, keep_signature: bool, path: str) -> _Plan:
    def refuse(why: str) -> FatkitError:
        return FatkitError(f"cannot add {name}: {why}", path=path)

    raw_name = name.encode("utf-8")
    if not raw_name or b"\0" in raw_name or len(raw_name) > SECTION_NAME_SIZE:
        raise refuse(f"a PE section name must be 1 to {SECTION_NAME_SIZE} bytes without NUL")
    sections = image.sections
    if any(s.name == name for s in sections):
        raise refuse("the file already has one (it was repacked before); repack the original")
    if not sections:
        raise refuse("the image has no sections")
    warnings = []
    if image.certificate_table[1]:
        if keep_signature:
            raise refuse("the file is signed (Authenticode) and --keep-signature was given: a new section breaks "
                         "the signature")
        warnings.append(UNSIGNED_WARNING)
    if image.optional["dll_characteristics"] & IMAGE_DLLCHARACTERISTICS_FORCE_INTEGRITY:
        warnings.append(INTEGRITY_WARNING)
    if image.section_alignment == 0 or image.file_alignment == 0:
        raise refuse("SectionAlignment or FileAlignment is 0")

    header_at = image.section_header_offset(len(sections))
    first_bytes = min((s.raw_offset for s in sections if s.has_bytes), default=image.size_of_headers)
    room_end = min(image.size_of_headers, first_bytes)
    if header_at + SECTION_HEADER_SIZE > room_end:
        raise refuse(f"no room for one more section header: the headers end at 0x{room_end:x}, the next header "
                     f"would end at 0x{header_at + SECTION_HEADER_SIZE:x} (the sections would have to move)")
    if any(bytes(buf[header_at:header_at + SECTION_HEADER_SIZE])):
        raise refuse(f"the bytes after the section table (0x{header_at:x}) are in use")
    slot = range(header_at, header_at + SECTION_HEADER_SIZE)
    for index, (rva, length) in enumerate(image.directories):
        if index != DIRECTORY_SECURITY and length and rva < slot.stop and rva + length > slot.start:
            raise refuse(f"data directory {index} lies in the slack after the section table")

    last = max(sections, key=lambda s: s.virtual_address)
    virtual_address = align(last.virtual_address + (last.virtual_size or last.raw_size), image.section_alignment)
    raw_offset = align(size, image.file_alignment)
    raw_size = align(payload_size, image.file_alignment)
    # right after the last section (the loader expects sections back to back); SizeOfImage never shrinks
    size_of_image = max(align(virtual_address + max(payload_size, 1), image.section_alignment), image.size_of_image)
    if raw_offset + raw_size >= 1 << 32 or size_of_image >= 1 << 32:
        raise refuse("the section would lie past 4 GiB, beyond what PE offsets and addresses hold")
    header = SectionHeader.build(
        name=raw_name.ljust(SECTION_NAME_SIZE, b"\0"), virtual_size=payload_size, virtual_address=virtual_address,
        size_of_raw_data=raw_size, pointer_to_raw_data=raw_offset, pointer_to_relocations=0,
        pointer_to_linenumbers=0, number_of_relocations=0, number_of_linenumbers=0,
        characteristics=REPACK_SECTION_CHARACTERISTICS)
    initialized = image.optional["size_of_initialized_data"] + raw_size
    fields = [
        image.coff_field("number_of_sections", len(sections) + 1),
        image.optional_field("size_of_image", size_of_image),
        image.optional_field("size_of_initialized_data", initialized & 0xFFFFFFFF),
    ]
    checksum_at = image.optional_offsets["checksum"] if image.checksum else None
    return _Plan(size, raw_offset, raw_size, header_at, header, fields, checksum_at, warnings)
