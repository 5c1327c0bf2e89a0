"""Device printf: the layout of CUDA's argument buffer, and the reference decoder of fatkit's print buffer.

CUDA compiles `printf(fmt, ...)` into `vprintf(fmt, args)`: `args` points to the arguments packed with their
natural alignment after C's default promotions (char/short → 4-byte int, float → double), each at the next
multiple of its size — `%c %d` take 4 bytes, `%ld %lld %zu %p %s` 8 (a pointer), `%f %e %g %a` 8 (a double),
a `*` width or precision a 4-byte int. `argument_layout` reads that layout off the format string; lowering
(lower/runtime.py) uses it to copy the right number of bytes into a record, and the decoder below uses it to
read them back. The buffer (`__fatkit_printf`, docs/runtime.md):

    offset 0   u32 used       bytes of records written after the header (atomically reserved)
    offset 4   u32 dropped    records that did not fit (nothing of them was written)
    offset 8   u64 reserved   0
    offset 16  records, each {u32 size (multiple of 8, with this header), u32 argument bytes,
                              u64 format address, argument bytes, zero padding to 8}

`decode` turns a buffer image into the text C's printf prints, formatting each record with the C library's
own `snprintf`, so the output is C's to the byte; `%s` strings and the format strings are read from device
memory through the caller's `read_string(address) -> bytes`.
"""

from __future__ import annotations

import ctypes
import re
import struct
from dataclasses import dataclass
from typing import Callable

from fatkit.errors import FatkitError

HEADER_BYTES = 16  # used, dropped, reserved
RECORD_HEADER_BYTES = 16  # size, argument bytes, format address
CAPACITY = 1 << 20  # record bytes: CUDA's default cudaLimitPrintfFifoSize

# %[flags][width][.precision][length]conversion
_SPEC = re.compile(rb"%([-+ #0']*)(\*|\d+)?(?:\.(\*|\d*))?(hh|h|ll|l|L|z|j|t|q)?(.)", re.S)
_INTEGER, _FLOATING = b"diouxXc", b"fFeEgGaA"
_WIDE_LENGTHS = (b"l", b"ll", b"z", b"j", b"t", b"q")


class FormatStringError(FatkitError):
    """A printf format this runtime cannot pack or read back; the message says which conversion and why."""


@dataclass(frozen=True)
class Argument:
    """One argument's place in CUDA's argument buffer; `kind` is "int", "double", "string" or "pointer"."""

    offset: int
    size: int
    kind: str


def argument_layout(fmt: bytes) -> tuple[list[Argument], int]:
    """The arguments `fmt` reads, in order, and the bytes of CUDA's argument buffer they fill."""
    arguments: list[Argument] = []
    offset = 0

    def take(size: int, kind: str) -> None:
        nonlocal offset
        offset = (offset + size - 1) // size * size
        arguments.append(Argument(offset, size, kind))
        offset += size

    position = 0
    while (start := fmt.find(b"%", position)) >= 0:
        match = _SPEC.match(fmt, start)
        if match is None:
            raise FormatStringError(f"format {fmt!r} ends inside a conversion at byte {start}")
        _, width, precision, length, conversion = match.groups()
        spec = match.group(0).decode("latin-1")
        position = match.end()
        if conversion == b"%":
            continue
        for star in (width, precision):
            if star == b"*":
                take(4, "int")
        if conversion == b"c" and length is not None:
            raise FormatStringError(f"{spec}: wide characters are not a conversion device printf supports")
        if conversion in _INTEGER:
            take(8 if length in _WIDE_LENGTHS else 4, "int")
        elif conversion in _FLOATING:
            if length == b"L":
                raise FormatStringError(f"{spec}: long double arguments do not exist in device code")
            take(8, "double")
        elif conversion == b"s" and length is None:
            take(8, "string")
        elif conversion == b"p":
            take(8, "pointer")
        elif conversion == b"n":
            raise FormatStringError(f"{spec}: %n writes through a pointer, which device printf does not do")
        else:
            raise FormatStringError(f"{spec}: not a conversion device printf supports")
    return arguments, offset


@dataclass(frozen=True)
class Record:
    """One printf call as recorded: its format's device address and its argument bytes."""

    format_address: int
    arguments: bytes


def read_records(image: bytes) -> tuple[list[Record], int]:
    """The records of a print-buffer image (header included) and the count of dropped ones."""
    if len(image) < HEADER_BYTES:
        raise FatkitError(f"a print buffer has a {HEADER_BYTES}-byte header; got {len(image)} bytes")
    used, dropped = struct.unpack_from("<II", image)
    end = HEADER_BYTES + used
    if end > len(image):
        raise FatkitError(f"the print buffer says {used} bytes are used, the image holds {len(image) - HEADER_BYTES}")
    records, at = [], HEADER_BYTES
    while at < end:
        size, argument_bytes, address = struct.unpack_from("<IIQ", image, at)
        if size < RECORD_HEADER_BYTES or size % 8 or at + size > end or RECORD_HEADER_BYTES + argument_bytes > size:
            raise FatkitError(f"malformed print record at byte {at}: size {size}, {argument_bytes} argument bytes")
        arguments = at + RECORD_HEADER_BYTES
        records.append(Record(address, bytes(image[arguments:arguments + argument_bytes])))
        at += size
    return records, dropped


_libc = ctypes.CDLL(None)


def format_record(record: Record, read_string: Callable[[int], bytes]) -> bytes:
    """The bytes C's printf prints for one record (the C library's snprintf does the formatting)."""
    fmt = read_string(record.format_address)
    layout, size = argument_layout(fmt)
    if size > len(record.arguments):
        raise FatkitError(f"format {fmt!r} reads {size} argument bytes, the record holds {len(record.arguments)}")
    values = []
    for argument in layout:
        raw = record.arguments[argument.offset:argument.offset + argument.size]
        if argument.kind == "double":
            values.append(ctypes.c_double(struct.unpack("<d", raw)[0]))
        elif argument.kind == "string":
            address = struct.unpack("<Q", raw)[0]
            values.append(ctypes.c_char_p(read_string(address) if address else b"(null)"))
        elif argument.kind == "pointer":
            values.append(ctypes.c_void_p(struct.unpack("<Q", raw)[0]))
        else:
            values.append(ctypes.c_int32(struct.unpack("<i", raw)[0]) if argument.size == 4
                          else ctypes.c_int64(struct.unpack("<q", raw)[0]))
    length = _libc.snprintf(None, ctypes.c_size_t(0), ctypes.c_char_p(fmt), *values)
    text = ctypes.create_string_buffer(length + 1)
    _libc.snprintf(text, ctypes.c_size_t(length + 1), ctypes.c_char_p(fmt), *values)
    return text.raw[:length]


def decode(image: bytes, read_string: Callable[[int], bytes]) -> tuple[bytes, int]:
    """(everything the recorded printf calls print, in record order; the count of dropped records)."""
    records, dropped = read_records(image)
    return b"".join(format_record(record, read_string) for record in records), dropped
