"""Bounds checks and global caps shared by every format reader."""

from __future__ import annotations

import mmap
import os
from typing import Union

from fatkit.errors import FormatError, LimitError

Buffer = Union[bytes, bytearray, memoryview, mmap.mmap]

# The most any single payload may decompress to, and the most a header may make us allocate.
# Real payloads are far below this (the largest PTX seen is ~60 MB); a header claiming more is hostile.
MAX_PAYLOAD = int(os.environ.get("FATKIT_MAX_PAYLOAD", 1 << 30))


def need(buf: Buffer, offset: int, size: int, what: str) -> None:
    """Raise FormatError unless buf[offset:offset+size] lies wholly inside buf."""
    if offset < 0 or size < 0 or offset + size > len(buf):
        raise FormatError(
            f"{what} ({size} bytes at 0x{offset:x}) runs past the end of the data (0x{len(buf):x} bytes)",
            offset=offset,
        )


def cap(size: int, what: str, limit: int | None = None, offset: int | None = None) -> int:
    """Return size if it is an allocation fatkit agrees to make, else raise LimitError."""
    limit = MAX_PAYLOAD if limit is None else limit
    if size < 0 or size > limit:
        raise LimitError(f"{what} claims {size} bytes, above the limit of {limit}", offset=offset)
    return size


def align(value: int, to: int) -> int:
    return (value + to - 1) // to * to


def find(buf: Buffer, needle: bytes, start: int, end: int) -> int:
    """buf.find(needle, start, end) for bytes/bytearray/mmap; a chunked search for a memoryview (a stored zip
    member), which has no find. -1 when the needle does not lie wholly inside buf[start:end]."""
    if not isinstance(buf, memoryview):
        return buf.find(needle, start, end)
    chunk = 1 << 24
    for chunk_start in range(start, end, chunk):
        hit = bytes(buf[chunk_start : min(end, chunk_start + chunk + len(needle) - 1)]).find(needle)
        if hit >= 0:
            return chunk_start + hit
    return -1


def cstring(buf: Buffer, offset: int, limit: int = 4096) -> str:
    """The NUL-terminated string at offset (at most `limit` bytes), decoded leniently."""
    end = min(len(buf), offset + limit)
    raw = bytes(buf[offset:end])
    nul = raw.find(b"\0")
    return (raw if nul < 0 else raw[:nul]).decode("utf-8", "replace")
