"""Fixed little-endian records, declared once: read through `struct`, written through construct.

A layout is declared in construct's own vocabulary (`Layout("magic" / Int32ul, "name" / Bytes(8), Padding(4))`)
but declaring one imports nothing: the readers unpack records with the `struct.Struct` the declaration maps to
(0.2 µs a record, where a compiled construct parse costs ~10 µs), and the writers build them by field name
through the construct `Struct` the declaration names, made on first use. So a command that only reads, such
as `fatkit inspect`, never imports construct (about 20 ms of every start otherwise), and a layout is never
written down twice, once per direction.
"""

from __future__ import annotations

import struct
from collections import namedtuple
from functools import cached_property, partial
from operator import itemgetter
from typing import Any, Mapping

from fatkit.errors import FormatError


class Field:
    """One field of a layout: its name (None for padding) and what it holds."""

    def __init__(self, name: str | None, kind: FieldType):
        self.name = name
        self.kind = kind

    @property
    def size(self) -> int:
        return self.kind.size

    def construct(self) -> Any:
        sub = self.kind.construct()
        return sub if self.name is None else self.name / sub


class FieldType:
    """What a field holds: the struct code it is read with and the construct type it is built with (by name,
    so that construct is imported only when a record is built)."""

    def __init__(self, code: str, construct_name: str, *args: Any, const: bytes | None = None):
        self.code = code
        self.size = struct.calcsize("<" + code)
        self.construct_name = construct_name
        self.args = args
        self.const = const

    def __rtruediv__(self, name: str) -> Field:  # "name" / Int32ul, as construct spells a named field
        return Field(name, self)

    def construct(self) -> Any:
        import construct

        made = getattr(construct, self.construct_name)
        return made(*self.args) if self.args else made


Int8ul = FieldType("B", "Int8ul")
Int16ul = FieldType("H", "Int16ul")
Int32ul = FieldType("I", "Int32ul")
Int64ul = FieldType("Q", "Int64ul")
Int32sl = FieldType("i", "Int32sl")
Int64sl = FieldType("q", "Int64sl")


def Bytes(length: int) -> FieldType:
    return FieldType(f"{length}s", "Bytes", length)


def Const(value: bytes) -> FieldType:
    """Bytes that must be `value`: `parse` refuses others, `build` writes them without being given them."""
    return FieldType(f"{len(value)}s", "Const", value, const=value)


def Padding(length: int) -> Field:
    """`length` bytes that are skipped when read and written as zeros."""
    return Field(None, FieldType(f"{length}x", "Padding", length))


class Layout:
    """A fixed-size little-endian record: its fields in order, read into a named tuple of the named fields."""

    def __init__(self, *fields: Field, name: str = "Record"):
        self.fields = fields  # every field, padding included: `Layout(*other.fields, …)` extends a layout
        self.name = name
        self.unpack = struct.Struct("<" + "".join(f.kind.code for f in fields))
        self.size = self.unpack.size

    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields if f.name is not None)

    @cached_property
    def record(self) -> Any:
        """The named tuple type of the named fields (made on first use: most layouts of a run are never read)."""
        return namedtuple(self.name, self.names)

    @cached_property
    def offsets(self) -> dict[str, int]:
        """Where each named field lies in the record: what error offsets and in-place patches need."""
        offsets, position = {}, 0
        for field in self.fields:
            if field.name is not None:
                offsets[field.name] = position
            position += field.size
        return offsets

    @cached_property
    def construct(self) -> Any:
        """The construct Struct of this layout (imports construct; writers only)."""
        import construct

        return construct.Struct(*(field.construct() for field in self.fields))

    # -- reading

    def at(self, buf: Any, offset: int) -> Any:
        """The record at `offset` of a buffer; the caller has bounds-checked it (Consts are not checked)."""
        return tuple.__new__(self.record, self.unpack.unpack_from(buf, offset))

    def parse(self, data: bytes | memoryview) -> Any:
        """The record in `data` (at least `size` bytes); FormatError when a Const field holds other bytes."""
        if len(data) < self.size:
            raise FormatError(f"{self.name} needs {self.size} bytes, {len(data)} given")
        record = self.at(data, 0)
        for field in self.fields:
            if field.kind.const is not None and field.name is not None:
                found = getattr(record, field.name)
                if found != field.kind.const:
                    raise FormatError(f"{self.name}.{field.name} is {found!r}, not {field.kind.const!r}",
                                      offset=self.offsets[field.name])
        return record

    def array(self, raw: bytes, stride: int) -> list:
        """The records of `stride`-byte entries in `raw` (stride >= size; a partial last entry is left out)."""
        if stride == self.size:
            entries = self.unpack.iter_unpack(raw[: len(raw) - len(raw) % stride])
        else:
            entries = (self.unpack.unpack_from(raw, at) for at in range(0, len(raw) - self.size + 1, stride))
        return list(map(partial(tuple.__new__, self.record), entries))

    def getter(self, *names: str) -> itemgetter:
        """A function from a record (or its raw tuple) to the tuple of the named fields."""
        return itemgetter(*(self.names.index(name) for name in names))

    # -- writing

    def build(self, values: Mapping[str, Any] | None = None, **fields: Any) -> bytes:
        """The record's bytes from its fields by name (Consts may be left out); ValueError when a value does not
        fit its field, or one is missing."""
        import construct

        try:
            return self.construct.build({**(values or {}), **fields})
        except construct.ConstructError as exc:
            raise ValueError(f"{self.name} cannot hold these values: {exc}") from None

    def pack(self, record: tuple) -> bytes:
        """The bytes of a whole record (`at`'s, possibly `_replace`d, or `record(**fields)`), every field given."""
        return self.unpack.pack(*record)

    def field_bytes(self, name: str, value: int) -> tuple[int, bytes]:
        """Where integer field `name` lies in the record and `value` as its bytes: what a patch overwrites."""
        field = next(f for f in self.fields if f.name == name)
        return self.offsets[name], struct.pack("<" + field.kind.code, value)
