"""NVIDIA fatbin containers (docs/formats.md §2): find, parse, extract entry payloads, build.

A container is a 16-byte header followed by entries back to back; each entry is a header of at
least 0x40 bytes (identifier, options record and `.nv.compat` copy live in its variable part)
followed by the stored payload padded to 8 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

from fatkit.errors import FormatError
from fatkit.formats.codecs import compress, decompress
from fatkit.formats.common import Buffer, align, cap, find, need
from fatkit.formats.layout import Int16ul, Int32ul, Int64ul, Layout
from fatkit.formats.magic import FATBIN_MAGIC, FATBIN_MAGIC_BYTES
from fatkit.formats.elf import ElfView

ENTRY_VERSION = 0x0101

ContainerHeader = Layout(
    "magic" / Int32ul,
    "version" / Int16ul,  # 1
    "header_size" / Int16ul,  # 16; entries start here
    "fat_size" / Int64ul,  # bytes of entries after the header
    name="ContainerHeader",
)

EntryHeader = Layout(
    "kind" / Int16ul,
    "entry_version" / Int16ul,  # 0x0101
    "header_size" / Int32ul,  # payload starts at entry + header_size
    "padded_size" / Int64ul,  # align8(stored size); next entry = entry + header_size + padded_size
    "compressed_size" / Int32ul,  # stored bytes when compressed, else 0
    "options_offset" / Int32ul,  # OptionsRecord position from the entry start, or 0
    "version_minor" / Int16ul,
    "version_major" / Int16ul,
    "sm" / Int32ul,
    "ident_offset" / Int32ul,  # identifier string from the entry start, or 0
    "ident_len" / Int32ul,
    "flags" / Int64ul,
    "obfuscation" / Int64ul,
    "uncompressed_size" / Int64ul,  # size after decompression, else 0
    name="EntryHeader",
)

OptionsRecord = Layout(
    "str_offset" / Int32ul,  # from the entry start
    "str_len" / Int32ul,
    name="OptionsRecord",
)

# Headers are read through struct unpackers (0.2 us per header instead of ~10 us for a construct parse: a
# cuBLAS-size library has thousands of entries); construct builds the same layouts (formats/layout.py).
_CONTAINER = ContainerHeader.unpack
_ENTRY = EntryHeader.unpack
_OPTIONS = OptionsRecord.unpack
# What the scan searches for: magic, version 1, header size 16 (the only container header there is). The longer
# needle makes the search of a 500 MB library a third faster and skips most false hits before validation.
_SCAN_NEEDLE = FATBIN_MAGIC_BYTES + (1).to_bytes(2, "little") + (16).to_bytes(2, "little")

KIND_PTX, KIND_ELF, KIND_CUBIN_LEGACY, KIND_NVVM = 1, 2, 4, 8
KIND_NAMES = {KIND_PTX: "ptx", KIND_ELF: "elf", KIND_NVVM: "nvvm", KIND_CUBIN_LEGACY: "cubin-legacy"}
COMPRESSION_FLAGS = {0x1000: "zlib", 0x2000: "lz4-block", 0x4000: "lz4-frame", 0x8000: "zstd"}
COMPRESSION_MASK = 0xF000
FLAG_64BIT = 0x1
FLAG_DEBUG = 0x2
HOST_FLAGS = {0x10: "linux", 0x20: "mac", 0x40: "windows"}
FLAG_OBFUSCATED = 0x10000
FLAG_ARCH_SPECIFIC = 0x100000  # sm_XXa / compute_XXa
FLAG_FAMILY = 0x200000  # sm_XXf / compute_XXf

ENTRY_HEADER_SIZE = EntryHeader.size  # 0x40: the fixed part
CONTAINER_HEADER_SIZE = ContainerHeader.size  # 0x10
# The code version nvcc 13.0 writes when a builder's caller gives none: PTX ISA 9.0, cubin ABI 8, NVVM 1.0x41.
DEFAULT_VERSIONS = {KIND_PTX: (9, 0), KIND_ELF: (1, 8), KIND_NVVM: (1, 0x41)}


@dataclass(frozen=True)
class FatbinEntry:
    offset: int  # of the entry header, in the buffer given to parse_container
    kind: int
    header_size: int
    padded_size: int
    compressed_size: int
    uncompressed_size: int
    version_major: int
    version_minor: int
    sm: int
    flags: int
    identifier: str | None
    options: str | None  # PTX ptxas / NVVM options (None when absent or empty)
    compat: bytes | None  # sm_100+ ELF entries: copy of the cubin's .nv.compat
    obfuscation: int  # the u64 at +0x30 (nonzero on obfuscated NVVM entries)

    @property
    def kind_name(self) -> str:
        return KIND_NAMES.get(self.kind, f"kind-{self.kind}")

    @property
    def compression(self) -> str | None:
        bits = self.flags & COMPRESSION_MASK
        if bits == 0:
            return None
        if bits not in COMPRESSION_FLAGS:
            raise FormatError(f"fatbin entry sets several compression flags (0x{bits:x})", offset=self.offset)
        return COMPRESSION_FLAGS[bits]

    @property
    def arch(self) -> str:
        prefix = "compute" if self.kind in (KIND_PTX, KIND_NVVM) else "sm"
        suffix = "a" if self.flags & FLAG_ARCH_SPECIFIC else "f" if self.flags & FLAG_FAMILY else ""
        return f"{prefix}_{self.sm}{suffix}"

    @property
    def payload_offset(self) -> int:
        return self.offset + self.header_size

    @property
    def stored_size(self) -> int:
        return self.compressed_size or self.padded_size

    @property
    def is_64bit(self) -> bool:
        return bool(self.flags & FLAG_64BIT)

    @property
    def has_debug_info(self) -> bool:
        return bool(self.flags & FLAG_DEBUG)

    @property
    def host(self) -> str | None:
        return next((name for bit, name in HOST_FLAGS.items() if self.flags & bit), None)

    @property
    def obfuscated(self) -> bool:
        return bool(self.flags & FLAG_OBFUSCATED)


@dataclass(frozen=True)
class FatbinContainer:
    offset: int
    size: int  # 16 + fat_size
    entries: tuple[FatbinEntry, ...]


@dataclass(frozen=True)
class EntrySpec:
    """One entry for build_container. `payload` is the content as extracted (PTX without its NUL)."""

    kind: int
    sm: int
    payload: bytes
    flags: int = FLAG_64BIT | 0x10  # 64-bit, host Linux: what nvcc writes on Linux
    version: tuple[int, int] | None = None  # (major, minor); None: DEFAULT_VERSIONS[kind]
    compression: str | None = None
    identifier: str | None = None
    options: str | None = None
    compat: bytes | None = None  # ELF only: the .nv.compat copy nvcc puts in sm_100+ entries
    obfuscation: int = 0


# --- finding ----------------------------------------------------------------------------------


def container_size_at(buf: Buffer, offset: int) -> int | None:
    """Size of the fatbin container at `offset` if its header and entry chain are consistent, else None.

    The check a whole-file magic scan needs (docs/formats.md §1): magic, version 1, header size 16, the
    container inside `buf`, and entry headers (each >= 0x40 bytes, kind 1..255, compressed size
    within the padded size) chaining exactly to the container's end. Empty containers are refused:
    they hold no code.
    """
    if offset < 0 or offset + CONTAINER_HEADER_SIZE > len(buf):
        return None
    magic, version, header_size, fat_size = _CONTAINER.unpack_from(buf, offset)
    if magic != FATBIN_MAGIC or version != 1 or header_size != CONTAINER_HEADER_SIZE or fat_size == 0:
        return None
    end = offset + CONTAINER_HEADER_SIZE + fat_size
    if end > len(buf):
        return None
    pos = offset + CONTAINER_HEADER_SIZE
    while pos < end:
        if pos + ENTRY_HEADER_SIZE > end:
            return None
        kind, _, entry_header_size, padded_size, compressed_size, *_ = _ENTRY.unpack_from(buf, pos)
        if (not 0 < kind < 0x100 or entry_header_size < ENTRY_HEADER_SIZE or compressed_size > padded_size
                or pos + entry_header_size + padded_size > end):
            return None
        pos += entry_header_size + padded_size
    return CONTAINER_HEADER_SIZE + fat_size


def find_containers(buf: Buffer, start: int = 0, end: int | None = None) -> Iterator[int]:
    """Offsets of every valid container whose magic lies inside buf[start:end] (the container itself may
    extend past `end`: callers scan big files window by window).

    After a valid container the scan resumes at its end (entries cannot hold another container
    that the runtime would see); after a false hit, at the next byte.
    """
    end = len(buf) if end is None else min(end, len(buf))
    pos = max(start, 0)
    while True:
        hit = find(buf, _SCAN_NEEDLE, pos, end)
        if hit < 0:
            return
        size = container_size_at(buf, hit)
        if size is not None:
            yield hit
            pos = hit + size
        else:
            pos = hit + 1


# --- parsing ----------------------------------------------------------------------------------


def parse_container(buf: Buffer, offset: int) -> FatbinContainer:
    """The container at `offset` with all its entries; FormatError at the first inconsistency."""
    need(buf, offset, CONTAINER_HEADER_SIZE, "fatbin container header")
    magic, version, header_size, fat_size = _CONTAINER.unpack_from(buf, offset)
    if magic != FATBIN_MAGIC:
        raise FormatError(f"no fatbin magic (found 0x{magic:08x})", offset=offset)
    if version != 1:
        raise FormatError(f"fatbin container version {version} (only 1 is known)", offset=offset + 4)
    if header_size != CONTAINER_HEADER_SIZE:
        raise FormatError(f"fatbin container header size {header_size} (expected 16)", offset=offset + 6)
    size = CONTAINER_HEADER_SIZE + fat_size
    need(buf, offset, size, "fatbin container")
    end = offset + size
    entries = []
    pos = offset + CONTAINER_HEADER_SIZE
    while pos < end:
        entry = _parse_entry(buf, pos, end)
        entries.append(entry)
        pos += entry.header_size + entry.padded_size
    return FatbinContainer(offset=offset, size=size, entries=tuple(entries))


def _parse_entry(buf: Buffer, pos: int, end: int) -> FatbinEntry:
    if pos + ENTRY_HEADER_SIZE > end:
        raise FormatError(f"fatbin entry header (0x40 bytes) runs past the container end 0x{end:x}", offset=pos)
    (kind, _, header_size, padded_size, compressed_size, options_offset, version_minor, version_major, sm,
     ident_offset, ident_len, flags, obfuscation, uncompressed_size) = _ENTRY.unpack_from(buf, pos)
    if header_size < ENTRY_HEADER_SIZE:
        raise FormatError(f"fatbin entry header size 0x{header_size:x} is below 0x40", offset=pos)
    if pos + header_size + padded_size > end:
        raise FormatError(
            f"fatbin entry (header 0x{header_size:x} + payload 0x{padded_size:x}) runs past the container "
            f"end 0x{end:x}", offset=pos)
    if compressed_size > padded_size:
        raise FormatError(
            f"fatbin entry compressed size 0x{compressed_size:x} exceeds its padded size 0x{padded_size:x}",
            offset=pos)
    compression_bits = flags & COMPRESSION_MASK
    if compression_bits and compression_bits not in COMPRESSION_FLAGS:
        raise FormatError(f"fatbin entry sets several compression flags (0x{compression_bits:x})", offset=pos)

    def header_bytes(start: int, length: int, what: str) -> bytes:
        """Bytes of the entry header's variable part (identifier, options, compat live there)."""
        if start < ENTRY_HEADER_SIZE or start + length > header_size:
            raise FormatError(f"fatbin entry {what} (0x{length:x} bytes at +0x{start:x}) is outside its "
                              f"0x{header_size:x}-byte header", offset=pos)
        return bytes(buf[pos + start : pos + start + length])

    identifier = None
    if ident_offset:
        identifier = header_bytes(ident_offset, ident_len, "identifier").decode("utf-8", "replace")
    options = compat = None
    if options_offset:
        str_offset, str_len = _OPTIONS.unpack(header_bytes(options_offset, _OPTIONS.size, "options record"))
        if kind == KIND_ELF:
            # ELF entries store one NUL and then the cubin's .nv.compat bytes (str_len of them).
            if str_len:
                compat = header_bytes(str_offset + 1, str_len, "compat attributes")
        elif str_len:
            options = header_bytes(str_offset, str_len, "options").decode("utf-8", "replace")
    return FatbinEntry(
        offset=pos, kind=kind, header_size=header_size, padded_size=padded_size,
        compressed_size=compressed_size, uncompressed_size=uncompressed_size,
        version_major=version_major, version_minor=version_minor, sm=sm, flags=flags,
        identifier=identifier, options=options, compat=compat, obfuscation=obfuscation,
    )


# --- payloads ---------------------------------------------------------------------------------


def entry_payload(buf: Buffer, entry: FatbinEntry) -> bytes:
    """The entry's content as `cuobjdump -xptx/-xelf` writes it.

    Compressed entries are decompressed to exactly uncompressed_size (capped before allocating);
    PTX loses its trailing NULs; an uncompressed ELF is cut to the ELF's own extent (the rest is
    padding); NVVM is returned as stored. Obfuscated entries (nvcc's LTO IR) raise FormatError.
    """
    if entry.obfuscated:
        raise FormatError(f"{entry.kind_name} entry is obfuscated (flag 0x10000): its content cannot be decoded "
                          "without NVIDIA's key", offset=entry.offset)
    stored = entry.stored_size
    need(buf, entry.payload_offset, stored, f"{entry.kind_name} payload of the fatbin entry")
    codec = entry.compression
    if codec is not None:
        try:
            data = decompress(codec, memoryview(buf)[entry.payload_offset : entry.payload_offset + stored],
                              entry.uncompressed_size or None)
        except FormatError as exc:  # LimitError included: say where the payload is
            if exc.offset is None:
                exc.offset = entry.payload_offset
            raise
    else:
        cap(stored, f"{entry.kind_name} payload", offset=entry.offset)
        data = bytes(buf[entry.payload_offset : entry.payload_offset + stored])
    if entry.kind == KIND_PTX:
        return data.rstrip(b"\0")
    if entry.kind == KIND_ELF and codec is None:
        try:
            return data[: ElfView(data).extent]
        except FormatError as exc:  # offsets in the stored payload are offsets in `buf` after it
            raise exc.located(base=entry.payload_offset) from None
    return data


# --- building ---------------------------------------------------------------------------------


def _padded_string(raw: bytes) -> bytes:
    """A string area as nvcc lays it out: the bytes, a NUL, zero padding to 8."""
    return raw.ljust(align(len(raw) + 1, 8), b"\0")


def _build_entry(spec: EntrySpec) -> bytes:
    content = spec.payload + b"\0" if spec.kind == KIND_PTX else spec.payload
    flags = spec.flags & ~COMPRESSION_MASK
    if spec.compression is None:
        stored, compressed_size, uncompressed_size = content, 0, 0
    else:
        bit = next((b for b, name in COMPRESSION_FLAGS.items() if name == spec.compression), None)
        if bit is None:
            raise FormatError(f"unknown fatbin compression {spec.compression!r}")
        stored = compress(spec.compression, content)
        compressed_size, uncompressed_size = len(stored), len(content)
        flags |= bit
    variable = b""
    ident_offset = ident_len = 0
    if spec.identifier is not None:
        ident = spec.identifier.encode()
        ident_offset, ident_len = ENTRY_HEADER_SIZE, len(ident)
        variable += _padded_string(ident)
    options_offset = 0
    if spec.kind in (KIND_PTX, KIND_NVVM) or spec.options is not None or spec.compat is not None:
        options_offset = ENTRY_HEADER_SIZE + len(variable)
        if spec.compat is not None:
            text, text_len = b"\0" + spec.compat, len(spec.compat)
        else:
            text = (spec.options or "").encode()
            text_len = len(text)
        record = OptionsRecord.build({"str_offset": options_offset + OptionsRecord.size, "str_len": text_len})
        variable += record + _padded_string(text)
    major, minor = spec.version if spec.version is not None else DEFAULT_VERSIONS.get(spec.kind, (1, 0))
    header = EntryHeader.build({
        "kind": spec.kind, "entry_version": ENTRY_VERSION, "header_size": ENTRY_HEADER_SIZE + len(variable),
        "padded_size": align(len(stored), 8), "compressed_size": compressed_size,
        "options_offset": options_offset, "version_minor": minor, "version_major": major, "sm": spec.sm,
        "ident_offset": ident_offset, "ident_len": ident_len, "flags": flags, "obfuscation": spec.obfuscation,
        "uncompressed_size": uncompressed_size,
    })
    return header + variable + stored.ljust(align(len(stored), 8), b"\0")


def build_container(entries: Sequence[EntrySpec]) -> bytes:
    """A fatbin container laid out as nvcc/fatbinary write it (uncompressed entries byte-identical).

    ValueError when a spec does not fit the header fields (e.g. a stored payload of 4 GiB or more).
    """
    try:
        body = b"".join(_build_entry(spec) for spec in entries)
        header = ContainerHeader.build({"magic": FATBIN_MAGIC, "version": 1,
                                        "header_size": CONTAINER_HEADER_SIZE, "fat_size": len(body)})
    except ValueError as exc:
        raise ValueError(f"fatbin entry does not fit its header fields: {exc}") from None
    return header + body
