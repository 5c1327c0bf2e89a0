"""fatkit.formats.fatbin: containers built here, nvcc/fatbinary samples checked against cuobjdump, hostile
headers, and every container of the corpus."""

from __future__ import annotations

import re
import struct
import subprocess
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fatkit.errors import FatkitError, FormatError, LimitError
from fatkit.formats.fatbin import (
    COMPRESSION_FLAGS,
    FATBIN_MAGIC,
    KIND_ELF,
    KIND_NVVM,
    KIND_PTX,
    EntrySpec,
    FatbinEntry,
    build_container,
    container_size_at,
    entry_payload,
    find_containers,
    parse_container,
)
from tests import oracles
from tests.helpers import cuobjdump13, mapped, non_big_corpus_files, over_files, sample

CODECS = [None, *COMPRESSION_FLAGS.values()]
ENTRY = 0x10  # offset of the first entry in a container


def tiny_elf(body: bytes) -> bytes:
    """An ELF64 image: header, one PROGBITS section holding `body`, then the section header table."""
    shoff = 64 + len(body)
    header = bytearray(64)
    header[:7] = b"\x7fELF\x02\x01\x01"
    struct.pack_into("<HHIQQQIHHHHHH", header, 16, 2, 190, 1, 0, 0, shoff, 0, 64, 56, 0, 64, 2, 0)
    null_section = bytes(64)
    section = struct.pack("<IIQQQQIIQQ", 0, 1, 0, 0, 64, len(body), 0, 0, 1, 0)
    return bytes(header) + body + null_section + section


PTX_TEXT = b"\n\n.version 9.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\nret;\n}\n"
CUBIN = tiny_elf(b"SASS" * 5 + b"x")  # odd length: the container pads it
COMPAT = bytes.fromhex("020900000202010002050500030701010203000002060100040b08000900000000000000")


def sample_specs(compression: str | None) -> list[EntrySpec]:
    return [
        EntrySpec(KIND_ELF, 90, CUBIN, compression=compression),
        EntrySpec(KIND_PTX, 90, PTX_TEXT, flags=0x100011, compression=compression, identifier="kern.cu",
                  options="-O2 -v  "),
        EntrySpec(KIND_ELF, 100, CUBIN, flags=0x1200011, compression=compression, compat=COMPAT),
        # NVVM comes back as stored, padding included: a multiple of 8 round-trips exactly.
        EntrySpec(KIND_NVVM, 90, b"BC\xc0\xde\x35\x14\x00\x00", compression=compression, options="-ftz=0 "),
    ]


# --- building and parsing -------------------------------------------------------------------------


@pytest.mark.parametrize("compression", CODECS)
def test_build_parse_round_trip(compression):
    specs = sample_specs(compression)
    data = build_container(specs)
    assert container_size_at(data, 0) == len(data)
    container = parse_container(data, 0)
    assert (container.offset, container.size, len(container.entries)) == (0, len(data), len(specs))
    for spec, entry in zip(specs, container.entries):
        assert (entry.kind, entry.sm, entry.identifier, entry.options, entry.compat) == \
            (spec.kind, spec.sm, spec.identifier, spec.options, spec.compat)
        assert entry.compression == compression
        assert entry.flags & ~0xF000 == spec.flags
        assert entry_payload(data, entry) == spec.payload
        assert entry.offset % 8 == 0 and (entry.header_size + entry.padded_size) % 8 == 0
    ptx = container.entries[1]
    assert (ptx.kind_name, ptx.arch, ptx.version_major, ptx.version_minor) == ("ptx", "compute_90a", 9, 0)
    assert container.entries[2].arch == "sm_100f"
    assert (container.entries[3].kind_name, container.entries[3].version_minor) == ("nvvm", 0x41)


def test_build_layout_matches_nvcc_rules():
    """Identifier at +0x40 padded to 8, then the options record, then the string NUL-padded to 8."""
    data = build_container([EntrySpec(KIND_PTX, 90, b"x", identifier="myident.cu", options="-O2 -v  ")])
    kind, _, header_size = struct.unpack_from("<HHI", data, ENTRY)
    options_offset, = struct.unpack_from("<I", data, ENTRY + 0x14)
    ident_offset, ident_len = struct.unpack_from("<II", data, ENTRY + 0x20)
    assert (ident_offset, ident_len, options_offset, header_size) == (0x40, 10, 0x50, 0x68)
    assert struct.unpack_from("<II", data, ENTRY + 0x50) == (0x58, 8)
    assert data[ENTRY + 0x40 : ENTRY + 0x50] == b"myident.cu\0\0\0\0\0\0"
    payload_at = ENTRY + header_size
    assert data[payload_at : payload_at + 8] == b"x\0" + bytes(6)  # PTX NUL-terminated, padded to 8


@pytest.mark.parametrize("name", ["nv_mode_none", "nv_sm100a.fatbin", "nv_sm120.fatbin", "nv_sm90a.fatbin"])
def test_rebuilt_uncompressed_containers_are_byte_identical(name):
    data = sample(name).read_bytes()
    offsets = list(find_containers(data))
    assert offsets
    for offset in offsets:
        container = parse_container(data, offset)
        assert all(e.compression is None for e in container.entries)
        specs = [EntrySpec(e.kind, e.sm, entry_payload(data, e), flags=e.flags,
                           version=(e.version_major, e.version_minor), identifier=e.identifier,
                           options=e.options, compat=e.compat, obfuscation=e.obfuscation)
                 for e in container.entries]
        assert build_container(specs) == data[offset : offset + container.size]


def test_entry_properties():
    def entry(**changes) -> FatbinEntry:
        fields = dict(offset=0, kind=KIND_ELF, header_size=0x40, padded_size=8, compressed_size=0,
                      uncompressed_size=0, version_major=1, version_minor=8, sm=90, flags=0x11,
                      identifier=None, options=None, compat=None, obfuscation=0)
        return FatbinEntry(**{**fields, **changes})

    plain = entry()
    assert (plain.kind_name, plain.arch, plain.host, plain.is_64bit, plain.has_debug_info, plain.obfuscated,
            plain.compression, plain.payload_offset, plain.stored_size) == \
        ("elf", "sm_90", "linux", True, False, False, None, 0x40, 8)
    assert entry(kind=KIND_PTX, flags=0x100010).arch == "compute_90a"
    assert entry(kind=KIND_NVVM, sm=100, flags=0x200000).arch == "compute_100f"
    assert entry(kind=77).kind_name == "kind-77"
    assert entry(kind=4).kind_name == "cubin-legacy"
    assert entry(flags=0x20).host == "mac" and entry(flags=0x40).host == "windows" and entry(flags=0).host is None
    assert not entry(flags=0x10).is_64bit and entry(flags=0x3).has_debug_info
    assert entry(flags=0x10000).obfuscated
    assert entry(flags=0x8011, compressed_size=5).stored_size == 5
    with pytest.raises(FormatError) as info:
        entry(offset=0x48, flags=0x3011).compression
    assert info.value.offset == 0x48


# --- scanning -----------------------------------------------------------------------------------


def test_find_containers_in_every_buffer_kind(tmp_path):
    first = build_container(sample_specs("zstd"))
    second = build_container(sample_specs(None)[:1])
    false_hit = struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, 0x40) + bytes(0x40)  # entry header size 0
    data = b"junk" + false_hit + first + b"\0" * 3 + second + struct.pack("<I", FATBIN_MAGIC)
    expected = [4 + len(false_hit), 4 + len(false_hit) + len(first) + 3]
    path = tmp_path / "blob"
    path.write_bytes(data)
    with mapped(path) as view:
        for buf in (data, bytearray(data), memoryview(data), view):
            assert list(find_containers(buf)) == expected
            assert list(find_containers(buf, start=expected[0] + 1)) == expected[1:]
            # `end` bounds where a magic may start, not where its container ends (window scans)
            assert list(find_containers(buf, end=expected[1] + 7)) == expected[:1]
            assert list(find_containers(buf, end=expected[1] + 8)) == expected
            assert [parse_container(buf, o).size for o in expected] == [len(first), len(second)]


def test_container_size_at_rejects_chance_bytes():
    data = build_container(sample_specs(None))
    assert container_size_at(data, 0) == len(data)
    assert container_size_at(data, -1) is None
    assert container_size_at(data, 1) is None
    assert container_size_at(data[:-8], 0) is None
    assert container_size_at(data + b"tail", 0) == len(data)
    empty = struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, 0)
    assert container_size_at(empty, 0) is None
    assert parse_container(empty, 0).entries == ()


# --- hostile input ------------------------------------------------------------------------------


def patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


CONTAINER = build_container(sample_specs(None))
PTX_ENTRY = parse_container(CONTAINER, 0).entries[1].offset

CORRUPTIONS = {
    # name: (bytes, error offset, also refused by the cheap scan check)
    "magic": (patched(CONTAINER, 0, "<I", 0xBA55ED51), 0, True),
    "version": (patched(CONTAINER, 4, "<H", 2), 4, True),
    "header size": (patched(CONTAINER, 6, "<H", 0x20), 6, True),
    "truncated": (CONTAINER[:-8], 0, True),
    "fat size past end": (patched(CONTAINER, 8, "<Q", 1 << 40), 0, True),
    "entry header below 0x40": (patched(CONTAINER, ENTRY + 4, "<I", 0x38), ENTRY, True),
    "entry runs past container": (patched(CONTAINER, ENTRY + 8, "<Q", len(CONTAINER)), ENTRY, True),
    "compressed above padded": (patched(CONTAINER, ENTRY + 0x10, "<I", 0x10000), ENTRY, True),
    "two compression flags": (patched(CONTAINER, ENTRY + 0x28, "<Q", 0x9011), ENTRY, False),
    "identifier outside header": (patched(CONTAINER, PTX_ENTRY + 0x24, "<I", 0x100), PTX_ENTRY, False),
    "options record outside header": (patched(CONTAINER, PTX_ENTRY + 0x14, "<I", 0x1000), PTX_ENTRY, False),
    "options string outside header": (patched(CONTAINER, PTX_ENTRY + 0x4C, "<I", 0x100), PTX_ENTRY, False),
}


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_corrupt_containers_raise_format_error_with_offset(name):
    data, offset, scan_refuses = CORRUPTIONS[name]
    with pytest.raises(FormatError) as info:
        parse_container(data, 0)
    assert info.value.offset == offset
    assert (container_size_at(data, 0) is None) == scan_refuses


MIXED = build_container(sample_specs("zstd")[:2] + sample_specs(None)[2:])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(MIXED) - 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_random_corruption_raises_only_fatkit_errors(flips):
    data = bytearray(MIXED)
    for offset, value in flips:
        data[offset] = value
    data = bytes(data)
    container_size_at(data, 0)
    list(find_containers(data))
    try:
        for entry in parse_container(data, 0).entries:
            try:
                entry_payload(data, entry)
            except FatkitError as exc:
                assert exc.offset is not None
    except FormatError as exc:
        assert exc.offset is not None


def test_builder_refuses_values_its_fields_cannot_hold():
    with pytest.raises(ValueError):
        build_container([EntrySpec(KIND_ELF, -1, CUBIN)])


def test_truncated_at_every_length_raises_format_error():
    for length in range(len(CONTAINER)):
        with pytest.raises(FormatError) as info:
            parse_container(CONTAINER[:length], 0)
        assert info.value.offset is not None


def test_huge_uncompressed_size_raises_limit_error_without_allocating():
    data = build_container([EntrySpec(KIND_PTX, 90, PTX_TEXT, compression="zstd")])
    entry = parse_container(data, 0).entries[0]
    data = patched(data, entry.offset + 0x38, "<Q", 2 << 30)
    entry = parse_container(data, 0).entries[0]
    tracemalloc.start()
    try:
        with pytest.raises(LimitError) as info:
            entry_payload(data, entry)
        assert info.value.offset == entry.payload_offset
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("compression", CODECS[1:])
def test_corrupt_compressed_payload_raises_format_error(compression):
    data = bytearray(build_container([EntrySpec(KIND_ELF, 90, CUBIN * 4, compression=compression)]))
    entry = parse_container(bytes(data), 0).entries[0]
    data[entry.payload_offset : entry.payload_offset + entry.compressed_size] = bytes(
        b ^ 0x5A for b in data[entry.payload_offset : entry.payload_offset + entry.compressed_size])
    with pytest.raises(FormatError) as info:
        entry_payload(bytes(data), entry)
    assert info.value.offset == entry.payload_offset


def test_elf_entry_must_hold_an_elf_image_that_fits():
    not_elf = build_container([EntrySpec(KIND_ELF, 90, b"not an elf image at all" * 4)])
    with pytest.raises(FormatError):
        entry_payload(not_elf, parse_container(not_elf, 0).entries[0])
    cut = build_container([EntrySpec(KIND_ELF, 90, CUBIN[:-64])])  # section table runs past the image
    with pytest.raises(FormatError):
        entry_payload(cut, parse_container(cut, 0).entries[0])


def test_obfuscated_entries_are_refused():
    data = build_container([EntrySpec(KIND_NVVM, 90, b"obfuscated", flags=0x10011, obfuscation=0xB21E4B49)])
    entry = parse_container(data, 0).entries[0]
    assert entry.obfuscated and entry.obfuscation == 0xB21E4B49
    with pytest.raises(FormatError, match="obfuscated"):
        entry_payload(data, entry)


def test_nvcc_lto_entries_are_nvvm_and_obfuscated():
    data = sample("nv_lto90.fatbin").read_bytes()
    (entry,) = parse_container(data, 0).entries
    assert (entry.kind_name, entry.arch, entry.compression, entry.obfuscated) == ("nvvm", "compute_90", "zstd", True)
    assert entry.options == "-ftz=0 -prec_div=1 -prec_sqrt=1 -fmad=1 "


# --- against cuobjdump --------------------------------------------------------------------------

FATBIN_SAMPLES = [
    "nv_mode_default", "nv_mode_none", "nv_mode_size", "nv_mode_speed", "nv_compress_all", "nv_host_O2",
    "nv_nopie", "nv_lld", "nv_relr", "nv_lld_relr", "nv_lib.so", "nv_kern.o", "nv_lib.a", "nv_rdc",
    "nv_dlink.o", "nv_stripped", "nv_noshdr", "nv_bin2c", "nv_debug_G", "nv_lineinfo", "nv_dlto",
    "nv_kern.fatbin", "nv_sm90a.fatbin", "nv_sm100a.fatbin", "nv_sm100f.fatbin", "nv_sm120.fatbin",
    "nv_lto90.fatbin", "nv_lto90.o", "nv_fb_zlib.fatbin", "nv_fb_lz4frame.fatbin", "nv_fb_ident.fatbin",
    "nv_fb_32.fatbin",
]

# An entry header as `cuobjdump -res-usage -ptx` prints it: "Fatbin ptx code:", a rule, then key = value
# lines and bare flags.
_HEADER_BLOCK = re.compile(
    r"^Fatbin (elf|ptx|nvvm) code:\n=+\n((?:(?:\w[\w ]*? = .*|compressed|has debug info)\n)*)", re.M)


def cuobjdump_headers(tool: Path, fatbin: Path) -> list[tuple[str, dict[str, str]]]:
    out = subprocess.run([tool, "-res-usage", "-ptx", fatbin], capture_output=True, text=True, check=True).stdout
    headers = []
    for kind, body in _HEADER_BLOCK.findall(out):
        fields = {}
        for line in body.splitlines():
            key, sep, value = line.partition(" = ")
            fields[key] = value if sep else True
        headers.append((kind, fields))
    return headers


def cuobjdump_extracted(tool: Path, fatbin: Path, outdir: Path) -> dict[str, list[bytes | None]]:
    """Per kind, in entry order, the bytes `-xelf all -xptx all` wrote for each entry; None where a later
    entry with the same name (identifier-named entries) overwrote it."""
    extracted: dict[str, list[bytes | None]] = {"elf": [], "ptx": []}
    for kind, file in oracles.cuobjdump_written(tool, fatbin, outdir):
        extracted[kind].append(file.read_bytes() if file is not None else None)
    return extracted


def _cuobjdump_arch(entry: FatbinEntry) -> str:
    """cuobjdump names every arch sm_XX, PTX and NVVM included."""
    return "sm_" + entry.arch.split("_", 1)[1]


@pytest.mark.parametrize("name", FATBIN_SAMPLES)
def test_samples_agree_with_cuobjdump(name, tmp_path):
    tool = cuobjdump13()
    data = sample(name).read_bytes()
    offsets = list(find_containers(data))
    assert offsets, f"{name} holds no fatbin container"
    for n, offset in enumerate(offsets):
        container = parse_container(data, offset)
        carved = tmp_path / f"c{n}.fatbin"
        carved.write_bytes(data[offset : offset + container.size])
        headers = cuobjdump_headers(tool, carved)
        assert [kind for kind, _ in headers] == [e.kind_name for e in container.entries]
        for entry, (_, fields) in zip(container.entries, headers):
            assert fields["arch"] == _cuobjdump_arch(entry)
            assert fields["code version"] == f"[{entry.version_major},{entry.version_minor}]"
            assert fields["host"] == entry.host
            assert fields["compile_size"] == ("64bit" if entry.is_64bit else "32bit")
            assert ("compressed" in fields) == (entry.compression is not None)
            assert ("has debug info" in fields) == entry.has_debug_info
            assert fields.get("identifier") == entry.identifier
            if entry.kind == KIND_PTX:
                assert fields["ptxasOptions"] == (entry.options or "")
            if entry.kind == KIND_NVVM:
                assert fields["nvvmOptions"] == (entry.options or "")
        extracted = cuobjdump_extracted(tool, carved, tmp_path / f"x{n}")
        for kind in ("elf", "ptx"):
            ours = [e for e in container.entries if e.kind_name == kind]
            assert len(extracted[kind]) == len(ours)
            for entry, theirs in zip(ours, extracted[kind]):
                payload = entry_payload(data, entry)
                assert theirs is None or payload == theirs, f"{kind} entry at 0x{entry.offset:x}"


def test_sample_compression_modes():
    """nvcc 13.0: default compresses PTX with zstd, speed with LZ4 block, size also the cubins, none nothing."""
    expected = {
        "nv_mode_default": {("elf", None), ("ptx", "zstd")},
        "nv_mode_speed": {("elf", None), ("ptx", "lz4-block")},
        "nv_mode_size": {("elf", "zstd"), ("ptx", "zstd")},
        "nv_mode_none": {("elf", None), ("ptx", None)},
        "nv_fb_zlib.fatbin": {("elf", "zlib"), ("ptx", "zlib")},
        "nv_fb_lz4frame.fatbin": {("elf", "lz4-frame"), ("ptx", "lz4-frame")},
    }
    for name, pairs in expected.items():
        data = sample(name).read_bytes()
        found = {(e.kind_name, e.compression) for o in find_containers(data) for e in parse_container(data, o).entries}
        assert found == pairs, name


# --- corpus -------------------------------------------------------------------------------------


@pytest.mark.corpus
@over_files(non_big_corpus_files())
def test_corpus_containers_parse_and_payloads_decompress(path):
    with mapped(path) as data:
        kinds = Counter()
        for offset in find_containers(data):
            for entry in parse_container(data, offset).entries:
                payload = entry_payload(data, entry)
                kinds[entry.kind_name] += 1
                if entry.kind == KIND_ELF:
                    assert payload[:4] == b"\x7fELF"
                    if entry.compression:
                        assert len(payload) == entry.uncompressed_size
                elif entry.kind == KIND_PTX:
                    assert b".version" in payload and b"\0" not in payload[-1:]
        assert set(kinds) <= {"elf", "ptx", "nvvm"}
