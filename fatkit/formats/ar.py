"""Unix `ar` archives (`.a` static libraries): GNU and BSD long names; members are slices, never copies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from fatkit.errors import FormatError
from fatkit.formats.common import Buffer, align, need
from fatkit.formats.layout import Bytes, Const, Layout
from fatkit.formats.magic import AR_MAGIC


MemberHeader = Layout(
    "name" / Bytes(16),
    "mtime" / Bytes(12),
    "uid" / Bytes(6),
    "gid" / Bytes(6),
    "mode" / Bytes(8),
    "size" / Bytes(10),
    "fmag" / Const(b"`\n"),
    name="MemberHeader",
)
HEADER_SIZE = MemberHeader.size  # 60


@dataclass(frozen=True)
class ArMember:
    name: str
    offset: int  # of the member's data in the archive
    size: int


def is_archive(buf: Buffer) -> bool:
    return len(buf) >= 8 and bytes(buf[:8]) == AR_MAGIC


def _decimal(raw: bytes, what: str, offset: int) -> int:
    text = raw.decode("ascii", "replace").strip()
    if not text.isdigit():
        raise FormatError(f"ar member {what} {text!r} is not a number", offset=offset)
    return int(text)


def members(buf: Buffer) -> Iterator[ArMember]:
    """The archive's object members in order (symbol tables and the long-name table are not members)."""
    if not is_archive(buf):
        raise FormatError("not an ar archive (no !<arch> magic)", offset=0)
    long_names = b""
    pos = len(AR_MAGIC)
    while pos + HEADER_SIZE <= len(buf):
        try:
            header = MemberHeader.parse(bytes(buf[pos:pos + HEADER_SIZE]))
        except FormatError:
            raise FormatError("ar member header is corrupt", offset=pos) from None
        size = _decimal(header.size, "size", pos)
        data = pos + HEADER_SIZE
        need(buf, data, size, "ar member")
        raw_name = header.name.decode("utf-8", "replace").rstrip()
        if raw_name.startswith("#1/"):  # BSD: the name is the first N bytes of the data
            name_len = _decimal(raw_name[3:].encode(), "name length", pos)
            if name_len > size:
                raise FormatError("ar BSD name longer than its member", offset=pos)
            name = bytes(buf[data:data + name_len]).rstrip(b"\0").decode("utf-8", "replace")
            yield_member = ArMember(name, data + name_len, size - name_len)
        elif raw_name == "//":  # GNU long-name table
            long_names = bytes(buf[data:data + size])
            yield_member = None
        elif raw_name in ("/", "/SYM64/", "__.SYMDEF", "__.SYMDEF SORTED"):
            yield_member = None
        elif raw_name.startswith("/") and raw_name[1:].isdigit():
            start = int(raw_name[1:])
            if start >= len(long_names):
                raise FormatError(f"ar long name index {start} is outside the name table", offset=pos)
            end = long_names.find(b"/\n", start)
            name = long_names[start:end if end >= 0 else len(long_names)].decode("utf-8", "replace")
            yield_member = ArMember(name, data, size)
        else:
            yield_member = ArMember(raw_name.rstrip("/"), data, size)
        if yield_member is not None:
            yield yield_member
        pos = data + align(size, 2)
