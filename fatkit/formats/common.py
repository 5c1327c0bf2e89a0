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


def cstring(buf: Buffer, offset: int, limit: int = 4096) -> str:
    """The NUL-terminated string at offset (at most `limit` bytes), decoded leniently."""
    end = min(len(buf), offset + limit)
    raw = bytes(buf[offset:end])
    nul = raw.find(b"\0")
    return (raw if nul < 0 else raw[:nul]).decode("utf-8", "replace")
