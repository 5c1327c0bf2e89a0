"""formats/layout.py: every declared layout reads (struct) what it writes (construct), field by field.

The two directions are independent implementations of one declaration: the reader is a `struct.Struct` the
declaration maps to, the writer the construct `Struct` it names. Random values (each field's extremes among
them) built by construct must come back unchanged through struct, and a patch of one field (`field_bytes`)
must be the bytes construct writes there.
"""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from fatkit.errors import FormatError
from fatkit.formats import ar, elf, fatbin, hsaco, offload_bundle, pe, wrappers
from fatkit.formats.layout import Layout

LAYOUTS = sorted({
    (module.__name__.rsplit(".", 1)[1] + "." + name, value)
    for module in (ar, elf, fatbin, hsaco, offload_bundle, pe, wrappers)
    for name, value in vars(module).items() if isinstance(value, Layout)
} | {(f"offload_bundle.CcobHeaders[{v}]", layout) for v, layout in offload_bundle.CcobHeaders.items()},
    key=lambda item: item[0])

RANGES = {"B": (0, 0xFF), "H": (0, 0xFFFF), "I": (0, 0xFFFFFFFF), "Q": (0, (1 << 64) - 1),
          "i": (-(1 << 31), (1 << 31) - 1), "q": (-(1 << 63), (1 << 63) - 1)}


def _value(code: str, rng: random.Random, extreme: int | None):
    if code.endswith("s"):
        return bytes(rng.randrange(256) for _ in range(int(code[:-1])))
    low, high = RANGES[code]
    return (low, high, 0)[extreme] if extreme is not None else rng.randint(low, high)


def _values(layout: Layout, rng: random.Random, extreme: int | None) -> dict:
    return {f.name: f.kind.const if f.kind.const is not None else _value(f.kind.code, rng, extreme)
            for f in layout.fields if f.name is not None}


def test_every_format_declares_layouts():
    assert len(LAYOUTS) >= 25, [name for name, _ in LAYOUTS]


@pytest.mark.parametrize("name,layout", LAYOUTS, ids=[name for name, _ in LAYOUTS])
def test_struct_reads_what_construct_builds(name, layout):
    rng = random.Random(name)
    for round_ in range(40):
        values = _values(layout, rng, round_ if round_ < 3 else None)
        raw = layout.build(values)
        assert len(raw) == layout.size == layout.construct.sizeof()
        record = layout.parse(raw)
        assert record._asdict() == values
        assert layout.at(b"\x55" + raw, 1) == record
        parsed = layout.construct.parse(raw)  # construct's own reader agrees too
        assert {k: parsed[k] for k in values} == values
        for field in layout.fields:
            if field.name is not None and not field.kind.code.endswith("s"):
                at, patch = layout.field_bytes(field.name, values[field.name])
                assert raw[at:at + len(patch)] == patch, field.name
        padding = [i for f, start in zip(layout.fields, _starts(layout)) if f.name is None
                   for i in range(start, start + f.size)]
        assert all(raw[i] == 0 for i in padding)


def _starts(layout: Layout) -> list[int]:
    starts, at = [], 0
    for field in layout.fields:
        starts.append(at)
        at += field.size
    return starts


def test_build_refuses_a_value_its_field_cannot_hold():
    with pytest.raises(ValueError, match="cannot hold"):
        fatbin.ContainerHeader.build(magic=fatbin.FATBIN_MAGIC, version=1 << 16, header_size=16, fat_size=0)
    with pytest.raises(ValueError):
        pe.SectionHeader.build(name=b"short", virtual_size=0, virtual_address=0, size_of_raw_data=0,
                               pointer_to_raw_data=0, pointer_to_relocations=0, pointer_to_linenumbers=0,
                               number_of_relocations=0, number_of_linenumbers=0, characteristics=0)


def test_parse_refuses_a_wrong_const_and_short_data():
    good = offload_bundle.BundleHeader.build(count=3)
    assert offload_bundle.BundleHeader.parse(good).count == 3
    with pytest.raises(FormatError, match="magic"):
        offload_bundle.BundleHeader.parse(b"X" + good[1:])
    with pytest.raises(FormatError, match="needs 32 bytes"):
        offload_bundle.BundleHeader.parse(good[:-1])


def test_reading_imports_no_construct():
    """The point of the lazy writer: reading every format's headers leaves construct unimported."""
    code = ("import sys; from fatkit.formats import ar, elf, fatbin, hsaco, offload_bundle, pe, wrappers; "
            "elf.ElfView(open(sys.executable, 'rb').read()).sections; "
            "offload_bundle.BundleHeader.parse(b'__CLANG_OFFLOAD_BUNDLE__' + bytes(8)); "
            "print('construct' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
