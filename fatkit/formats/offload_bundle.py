"""Clang offload bundles: plain `__CLANG_OFFLOAD_BUNDLE__` and compressed `CCOB` v1/v2/v3 (docs/formats.md §6, §7).

Plain bundle: magic, u64 entry count, then per entry u64 payload offset (from the bundle start), u64 payload
size, u64 id length and the id (no NUL); payloads follow, gaps zero-filled. A CCOB is a small header and one
zlib/zstd stream that expands to a plain bundle; its hash is the low 8 bytes (little-endian) of the MD5 of
that bundle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from typing import Iterator, Sequence

from fatkit.errors import FormatError
from fatkit.formats import codecs
from fatkit.formats.common import Buffer, MAX_PAYLOAD, align as align_up, cap, find, need
from fatkit.formats.layout import Const, Int16ul, Int32ul, Int64ul, Layout
from fatkit.formats.magic import BUNDLE_MAGIC, CCOB_MAGIC

# The host id clang 22 writes; ROCm 5.x wrote "host-x86_64-unknown-linux" (both parse).
HOST_BUNDLE_ID = "host-x86_64-unknown-linux-gnu-"

BundleHeader = Layout("magic" / Const(BUNDLE_MAGIC), "count" / Int64ul, name="BundleHeader")
BundleEntryHeader = Layout("offset" / Int64ul, "size" / Int64ul, "id_length" / Int64ul, name="BundleEntryHeader")
CcobPrefix = Layout("magic" / Const(CCOB_MAGIC), "version" / Int16ul, "method" / Int16ul, name="CcobPrefix")
CcobHeaders = {
    1: Layout(*CcobPrefix.fields, "uncompressed_size" / Int32ul, "hash" / Int64ul, name="CcobHeaderV1"),
    2: Layout(*CcobPrefix.fields, "total_size" / Int32ul, "uncompressed_size" / Int32ul, "hash" / Int64ul,
              name="CcobHeaderV2"),
    3: Layout(*CcobPrefix.fields, "total_size" / Int64ul, "uncompressed_size" / Int64ul, "hash" / Int64ul,
              name="CcobHeaderV3"),
}
CCOB_HEADER_SIZES = {1: 20, 2: 24, 3: 32}
CCOB_METHODS = {0: "zlib", 1: "zstd"}  # llvm::compression::Format

BUNDLE_HEADER_SIZE = BundleHeader.size
ENTRY_HEADER_SIZE = BundleEntryHeader.size
# Far above anything real (27 targets, ids under 100 characters); a header claiming more is hostile.
MAX_BUNDLE_ENTRIES = 4096
MAX_BUNDLE_ID = 4096
# The smallest plain bundle: header plus one entry with a one-character id.
MIN_BUNDLE_SIZE = BUNDLE_HEADER_SIZE + ENTRY_HEADER_SIZE + 1

ZSTD_FRAME_MAGIC = b"\x28\xb5\x2f\xfd"
# A GPU processor name right after a 3-component triple (old ids such as "hip-amdgcn-amd-amdhsa-gfx906").
_PROCESSOR = re.compile(r"(gfx[0-9a-f]+|sm_[0-9]+[af]?)\b")


@dataclass(frozen=True)
class BundleEntry:
    id: str
    offset: int  # of the payload, from the bundle start
    size: int
    kind: str  # "hipv4", "hip", "host", "openmp", ...
    triple: str  # "amdgcn-amd-amdhsa"
    target_id: str  # "gfx942:sramecc+:xnack-"; "" for host


@dataclass(frozen=True)
class Bundle:
    offset: int
    size: int  # extent: the end of the header or of the last payload, whichever is further
    entries: tuple[BundleEntry, ...]


@dataclass(frozen=True)
class CompressedBundle:
    offset: int
    version: int
    method: str  # "zlib" | "zstd"
    header_size: int
    total_size: int | None  # None for v1, which does not record it
    uncompressed_size: int
    hash: int
    size: int  # bytes this CCOB occupies: total_size, or for v1 everything up to the end it was given


def parse_bundle_id(s: str) -> tuple[str, str, str]:
    """Split an id into (kind, triple, target id), leniently.

    `hipv4-amdgcn-amd-amdhsa--gfx942:xnack-` → ("hipv4", "amdgcn-amd-amdhsa", "gfx942:xnack-");
    `host-x86_64-unknown-linux-gnu-` and `host-x86_64-unknown-linux` → ("host", "x86_64-unknown-linux[-gnu]", "").
    """
    kind, _, rest = s.partition("-")
    parts = rest.split("-", 4)
    if len(parts) >= 4 and _PROCESSOR.match(parts[3]):
        return kind, "-".join(parts[:3]), "-".join(parts[3:])
    if len(parts) == 5:
        return kind, "-".join(p for p in parts[:4] if p), parts[4]
    return kind, rest.rstrip("-"), ""


def _md5_low(data: bytes) -> int:
    """LLVM's MD5Result::low(): the first 8 digest bytes read little-endian."""
    import hashlib  # CCOBs only: most scanned files hold none (and hashlib costs 4 ms to import)

    return int.from_bytes(hashlib.md5(data).digest()[:8], "little")


def _bytes(buf: Buffer, start: int, end: int) -> bytes:
    return bytes(buf[start:end])


def _slice(buf: Buffer, start: int, end: int) -> memoryview | bytes:
    """A view where that costs nothing and pins nothing; a copy of just this range otherwise."""
    if isinstance(buf, memoryview):
        return buf[start:end]
    if isinstance(buf, bytes):
        return memoryview(buf)[start:end]
    return bytes(buf[start:end])  # mmap (a view would block close()), bytearray (may be resized)


def parse_bundle(buf: Buffer, offset: int = 0) -> Bundle:
    """The plain bundle starting at `offset`; every payload must lie inside `buf`."""
    need(buf, offset, BUNDLE_HEADER_SIZE, "offload bundle header")
    try:
        count = BundleHeader.parse(_bytes(buf, offset, offset + BUNDLE_HEADER_SIZE)).count
    except FormatError:
        raise FormatError("no __CLANG_OFFLOAD_BUNDLE__ magic", offset=offset) from None
    if count == 0:
        raise FormatError("offload bundle holds no entries", offset=offset)
    cap(count, "offload bundle entry count", MAX_BUNDLE_ENTRIES, offset)
    need(buf, offset + BUNDLE_HEADER_SIZE, count * ENTRY_HEADER_SIZE, f"offload bundle table of {count} entries")

    raw_entries = []
    pos = offset + BUNDLE_HEADER_SIZE
    for _ in range(count):
        need(buf, pos, ENTRY_HEADER_SIZE, "offload bundle entry")
        head = BundleEntryHeader.parse(_bytes(buf, pos, pos + ENTRY_HEADER_SIZE))
        cap(head.id_length, "offload bundle id", MAX_BUNDLE_ID, pos)
        need(buf, pos + ENTRY_HEADER_SIZE, head.id_length, "offload bundle id")
        raw_id = _bytes(buf, pos + ENTRY_HEADER_SIZE, pos + ENTRY_HEADER_SIZE + head.id_length)
        raw_entries.append((pos, head.offset, head.size, raw_id.decode("utf-8", "replace")))
        pos += ENTRY_HEADER_SIZE + head.id_length

    header_end = pos - offset
    extent = header_end
    entries = []
    for entry_pos, payload_offset, size, bundle_id in raw_entries:
        if size and payload_offset < header_end:
            raise FormatError(f"payload of {bundle_id!r} overlaps the bundle header", offset=entry_pos)
        need(buf, offset + payload_offset, size, f"payload of {bundle_id!r}")
        extent = max(extent, payload_offset + size)
        entries.append(BundleEntry(bundle_id, payload_offset, size, *parse_bundle_id(bundle_id)))
    return Bundle(offset, extent, tuple(entries))


def bundle_size_at(buf: Buffer, offset: int) -> int | None:
    """The extent of a well-formed plain bundle at `offset`, or None (for validating magic-scan hits)."""
    if bytes(buf[offset:offset + len(BUNDLE_MAGIC)]) != BUNDLE_MAGIC:
        return None
    try:
        return parse_bundle(buf, offset).size
    except FormatError:
        return None


def parse_ccob(buf: Buffer, offset: int = 0, end: int | None = None) -> CompressedBundle:
    """The CCOB header at `offset`. `end` (default: the end of `buf`) bounds it; v1 runs up to `end`."""
    end = len(buf) if end is None else min(end, len(buf))
    need(buf, offset, CcobPrefix.size, "CCOB header")
    try:
        prefix = CcobPrefix.parse(_bytes(buf, offset, offset + CcobPrefix.size))
    except FormatError:
        raise FormatError("no CCOB magic", offset=offset) from None
    if prefix.version not in CcobHeaders:
        raise FormatError(f"unknown CCOB version {prefix.version}", offset=offset)
    if prefix.method not in CCOB_METHODS:
        raise FormatError(f"unknown CCOB compression method {prefix.method}", offset=offset)
    header_size = CCOB_HEADER_SIZES[prefix.version]
    if offset + header_size > end:
        raise FormatError(f"CCOB v{prefix.version} header runs past the end of the data", offset=offset)
    header = CcobHeaders[prefix.version].parse(_bytes(buf, offset, offset + header_size))

    cap(header.uncompressed_size, "CCOB uncompressed size", MAX_PAYLOAD, offset)
    if header.uncompressed_size < MIN_BUNDLE_SIZE:
        raise FormatError(f"CCOB uncompressed size {header.uncompressed_size} cannot hold a bundle", offset=offset)
    total_size = getattr(header, "total_size", None)
    if total_size is None:
        size = end - offset
    else:
        if total_size <= header_size:
            raise FormatError(f"CCOB total size {total_size} leaves no room for data", offset=offset)
        if offset + total_size > end:
            raise FormatError(
                f"CCOB total size {total_size} runs past the end of the data (0x{end:x})", offset=offset)
        size = total_size
    if size <= header_size:
        raise FormatError("CCOB holds no compressed data", offset=offset)
    return CompressedBundle(offset, prefix.version, CCOB_METHODS[prefix.method], header_size, total_size,
                            header.uncompressed_size, header.hash, size)


def _looks_compressed(method: str, head: bytes) -> bool:
    if method == "zstd":
        return head[:4] == ZSTD_FRAME_MAGIC
    if len(head) < 2:
        return False
    cmf, flg = head[0], head[1]  # RFC 1950: deflate, window <= 32K, header checksum
    return cmf & 0x0F == 8 and cmf >> 4 <= 7 and (cmf << 8 | flg) % 31 == 0


def _plausible_ccob(buf: Buffer, offset: int, end: int | None) -> CompressedBundle | None:
    if bytes(buf[offset:offset + len(CCOB_MAGIC)]) != CCOB_MAGIC:
        return None
    try:
        ccob = parse_ccob(buf, offset, end)
    except FormatError:
        return None
    data = offset + ccob.header_size
    return ccob if _looks_compressed(ccob.method, _bytes(buf, data, data + 4)) else None


def ccob_size_at(buf: Buffer, offset: int, end: int | None = None) -> int | None:
    """The size of a plausible CCOB at `offset`, or None. "CCOB" is a short magic, so besides a known version
    and method and sane sizes the data must start like the stream its method names."""
    ccob = _plausible_ccob(buf, offset, end)
    return None if ccob is None else ccob.size


def _zstd_frame_size(data: bytes) -> int | None:
    """Length of the zstd frame at the start of `data`, read from its block headers (RFC 8878 §3.1.1);
    None if it is malformed or truncated. Needed for v1 CCOBs, whose data may be followed by padding."""
    if len(data) < 6 or data[:4] != ZSTD_FRAME_MAGIC:
        return None
    descriptor = data[4]
    if descriptor & 0x08:  # reserved bit
        return None
    single_segment = descriptor >> 5 & 1
    pos = (5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
           + ((1 if single_segment else 0), 2, 4, 8)[descriptor >> 6])
    while True:
        if pos + 3 > len(data):
            return None
        block = int.from_bytes(data[pos:pos + 3], "little")
        block_type, block_size = block >> 1 & 3, block >> 3
        if block_type == 3:
            return None
        pos += 3 + (1 if block_type == 1 else block_size)
        if block & 1:
            break
    if descriptor & 0x04:  # content checksum
        pos += 4
    return pos if pos <= len(data) else None


def decompress_ccob(buf: Buffer, ccob: CompressedBundle) -> bytes:
    """The plain bundle inside `ccob`, after checking its size and MD5-low hash."""
    start = ccob.offset + ccob.header_size
    need(buf, start, ccob.size - ccob.header_size, "CCOB compressed data")
    data = _bytes(buf, start, ccob.offset + ccob.size)
    if ccob.version == 1 and ccob.method == "zstd":
        frame = _zstd_frame_size(data)
        if frame is None:
            raise FormatError("CCOB zstd frame is malformed or truncated", offset=ccob.offset)
        data = data[:frame]
    try:
        out = codecs.decompress(ccob.method, data, ccob.uncompressed_size)
    except FormatError as exc:
        raise type(exc)(f"CCOB: {exc.message}", offset=ccob.offset) from None
    digest = _md5_low(out)
    if digest != ccob.hash:
        raise FormatError(f"CCOB hash mismatch: header 0x{ccob.hash:016x}, data 0x{digest:016x}",
                          offset=ccob.offset)
    try:
        parse_bundle(out)
    except FormatError as exc:
        raise FormatError(f"CCOB does not hold an offload bundle: {exc.message}", offset=ccob.offset) from None
    return out


def bundle_payload(buf: Buffer, bundle: Bundle, entry: BundleEntry) -> memoryview | bytes:
    """The bytes of one entry (a view into `buf` where that is safe, else a copy of just those bytes)."""
    start = bundle.offset + entry.offset
    need(buf, start, entry.size, f"payload of {entry.id!r}")
    return _slice(buf, start, start + entry.size)


def find_bundles(buf: Buffer, start: int = 0, end: int | None = None,
                 limit: int | None = None) -> Iterator[tuple[int, str]]:
    """Validated bundles and CCOBs whose magic starts in buf[start:end], in file order: (offset, kind).

    Each must end by `limit` (default: the end of buf; callers scanning window by window pass the end of the
    region, so a container may run past its window). Scanning resumes after each hit's extent (a v1 CCOB, of
    unknown length, only after its header)."""
    end = len(buf) if end is None else min(end, len(buf))
    limit = len(buf) if limit is None else min(limit, len(buf))
    finders = {"bundle": partial(find, buf, BUNDLE_MAGIC), "ccob": partial(find, buf, CCOB_MAGIC)}
    next_hit = {kind: search(start, end) for kind, search in finders.items()}
    while True:
        live = [(at, kind) for kind, at in next_hit.items() if at >= 0]
        if not live:
            return
        at, kind = min(live)
        if kind == "bundle":
            size = bundle_size_at(buf, at)
            if size is not None and at + size > limit:
                size = None
        else:
            ccob = _plausible_ccob(buf, at, limit)
            # a v1 CCOB records no length: keep scanning right after its header
            size = None if ccob is None else ccob.header_size if ccob.version == 1 else ccob.size
        if size is None:
            resume = at + 1
        else:
            yield at, kind
            resume = at + size
        for other, search in finders.items():
            if 0 <= next_hit[other] < resume:
                next_hit[other] = search(resume, end)


def build_bundle(entries: Sequence[tuple[str, bytes]], align: int = 1) -> bytes:
    """A plain bundle laid out as clang-offload-bundler writes it: the table in the given order, each payload at
    the next multiple of `align` after the previous one, gaps zero-filled. Pass the host entry first, with an
    empty payload (HOST_BUNDLE_ID, b""), as clang does; it then sits at the first payload offset."""
    if not entries:
        raise FormatError("an offload bundle needs at least one entry")
    if align < 1:
        raise FormatError(f"bundle alignment must be positive, not {align}")
    ids = [bundle_id.encode("utf-8") for bundle_id, _ in entries]
    cursor = BUNDLE_HEADER_SIZE + sum(ENTRY_HEADER_SIZE + len(raw) for raw in ids)
    table = [BundleHeader.build({"count": len(entries)})]
    offsets = []
    for raw, (_, payload) in zip(ids, entries):
        cursor = align_up(cursor, align)
        offsets.append(cursor)
        table.append(BundleEntryHeader.build({"offset": cursor, "size": len(payload), "id_length": len(raw)}))
        table.append(raw)
        cursor += len(payload)
    out = bytearray(b"".join(table))
    for payload_offset, (_, payload) in zip(offsets, entries):
        out.extend(bytes(payload_offset - len(out)))
        out.extend(payload)
    return bytes(out)


def build_ccob(bundle: bytes, version: int = 3, method: str = "zstd", level: int | None = None) -> bytes:
    """A CCOB holding the plain `bundle` (clang 22 writes v3 with zstd; v1 and v2 are for older readers)."""
    parse_bundle(bundle)
    if version not in CcobHeaders:
        raise FormatError(f"unknown CCOB version {version}")
    method_ids = {name: number for number, name in CCOB_METHODS.items()}
    if method not in method_ids:
        raise FormatError(f"CCOB cannot hold {method!r} data (only zlib, zstd)")
    data = codecs.compress(method, bytes(bundle), level)
    header_size = CCOB_HEADER_SIZES[version]
    fields = {"version": version, "method": method_ids[method], "uncompressed_size": len(bundle),
              "total_size": header_size + len(data),
              "hash": _md5_low(bundle)}
    if version < 3 and max(fields["uncompressed_size"], fields["total_size"]) > 0xFFFFFFFF:
        raise FormatError(f"CCOB v{version} sizes are 32-bit; {len(bundle)} bytes need v3")
    return CcobHeaders[version].build(fields) + data
