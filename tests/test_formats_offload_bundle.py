"""Offload bundles and CCOB: our reader and writer against clang-offload-bundler 22 and real ROCm binaries."""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings, strategies as st

from fatkit.errors import FatkitError, FormatError, LimitError
from fatkit.formats.offload_bundle import (
    BUNDLE_MAGIC, HOST_BUNDLE_ID, Bundle, build_bundle, build_ccob, bundle_payload, bundle_size_at, ccob_size_at,
    decompress_ccob, find_bundles, parse_bundle, parse_bundle_id, parse_ccob,
)
from tests.corpus import corpus_file
from tests.helpers import LLVM_BIN, hip_device_object, mapped, sample

BUNDLER = LLVM_BIN / "clang-offload-bundler"

GFX90A = "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+"
GFX942 = "hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"

needs_bundler = pytest.mark.skipif(not BUNDLER.exists(), reason="clang-offload-bundler 22 not installed")

KERNEL = """
#define __global__ __attribute__((global))
extern "C" __global__ void add(float *out, const float *a, int n) {
  int i = __builtin_amdgcn_workitem_id_x();
  if (i < n) out[i] = a[i] + 1.0f;
}
"""


def fake_payloads() -> list[tuple[str, bytes]]:
    """Deterministic device payloads of awkward sizes (the format does not care what they hold)."""
    return [(HOST_BUNDLE_ID, b""),
            (GFX90A, bytes(range(256)) * 7 + b"\x7f"),
            (GFX942, hashlib.sha256(b"gfx942").digest() * 40 + b"tail")]


@pytest.fixture(scope="module")
def code_objects(tmp_path_factory) -> dict[str, Path]:
    """Two small code objects compiled by clang-22 (gfx90a:xnack+, gfx942:sramecc+:xnack-)."""
    work = tmp_path_factory.mktemp("hip")
    (work / "k.hip").write_text(KERNEL)
    out = {}
    for bundle_id in (GFX90A, GFX942):
        arch = bundle_id.rsplit("--", 1)[1]
        out[bundle_id] = hip_device_object(work / "k.hip", arch, work / (arch.replace(":", "_") + ".hsaco"), "-O1")
    return out


def bundler(*args: str, env: dict | None = None) -> str:
    result = subprocess.run([str(BUNDLER), *args], capture_output=True, text=True,
                            env={**os.environ, **(env or {})})
    assert result.returncode == 0, result.stderr
    return result.stdout


def bundler_ids(path: Path) -> list[str]:
    return sorted(bundler("--list", "--type=o", f"--input={path}").split())


def unbundle(path: Path, bundle_id: str, out: Path) -> bytes:
    bundler("--unbundle", "--type=o", f"--input={path}", f"--targets={bundle_id}", f"--output={out}")
    return out.read_bytes()


def payload_of(data: bytes, bundle: Bundle, bundle_id: str) -> bytes:
    entry = next(e for e in bundle.entries if e.id == bundle_id)
    return bytes(bundle_payload(data, bundle, entry))


# ---- ids -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bundle_id, expected", [
    ("hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-", ("hipv4", "amdgcn-amd-amdhsa", "gfx942:sramecc+:xnack-")),
    ("hipv4-amdgcn-amd-amdhsa--gfx1100", ("hipv4", "amdgcn-amd-amdhsa", "gfx1100")),
    ("hipv4-amdgcn-amd-amdhsa--gfx9-4-generic:xnack+", ("hipv4", "amdgcn-amd-amdhsa", "gfx9-4-generic:xnack+")),
    ("host-x86_64-unknown-linux-gnu-", ("host", "x86_64-unknown-linux-gnu", "")),
    ("host-x86_64-unknown-linux", ("host", "x86_64-unknown-linux", "")),
    ("hip-amdgcn-amd-amdhsa-gfx906", ("hip", "amdgcn-amd-amdhsa", "gfx906")),
    ("openmp-amdgcn-amd-amdhsa--gfx90a", ("openmp", "amdgcn-amd-amdhsa", "gfx90a")),
    ("hostonly", ("hostonly", "", "")),
])
def test_parse_bundle_id(bundle_id, expected):
    assert parse_bundle_id(bundle_id) == expected


# ---- build / parse -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("align", [1, 8, 4096])
def test_build_then_parse_round_trip(align):
    entries = fake_payloads()
    data = build_bundle(entries, align=align)
    bundle = parse_bundle(data)
    assert bundle.offset == 0 and bundle.size == len(data)
    assert [e.id for e in bundle.entries] == [i for i, _ in entries]
    host, first, second = bundle.entries
    assert host.size == 0 and host.offset == first.offset  # clang's layout: host at the first payload offset
    for entry, (_, payload) in zip(bundle.entries, entries):
        assert entry.offset % align == 0
        assert payload_of(data, bundle, entry.id) == payload
    assert data[first.offset + first.size:second.offset] == bytes(second.offset - first.offset - first.size)
    assert (first.kind, first.triple, first.target_id) == ("hipv4", "amdgcn-amd-amdhsa", "gfx90a:xnack+")


def test_parse_bundle_inside_a_larger_buffer():
    data = build_bundle(fake_payloads(), align=16)
    host_file = b"\x7fELF" + bytes(4092) + data + b"trailing"
    bundle = parse_bundle(host_file, 4096)
    assert bundle.offset == 4096 and bundle.size == len(data)
    assert payload_of(host_file, bundle, GFX942) == fake_payloads()[2][1]
    assert bundle_size_at(host_file, 4096) == len(data)
    assert bundle_size_at(host_file, 0) is None


@pytest.mark.parametrize("version, method", [(v, m) for v in (1, 2, 3) for m in ("zlib", "zstd")])
def test_ccob_round_trip(version, method):
    plain = build_bundle(fake_payloads(), align=4096)
    data = build_ccob(plain, version, method)
    ccob = parse_ccob(data)
    assert (ccob.version, ccob.method, ccob.header_size) == (version, method, {1: 20, 2: 24, 3: 32}[version])
    assert ccob.uncompressed_size == len(plain) and ccob.size == len(data)
    assert ccob.total_size == (None if version == 1 else len(data))
    assert ccob.hash == int.from_bytes(hashlib.md5(plain).digest()[:8], "little")
    assert decompress_ccob(data, ccob) == plain
    assert ccob_size_at(data, 0) == len(data)


def test_bundle_payload_views_bytes_and_copies_mmap(tmp_path):
    data = build_bundle(fake_payloads())
    bundle = parse_bundle(data)
    entry = bundle.entries[1]
    assert isinstance(bundle_payload(data, bundle, entry), memoryview)
    assert isinstance(bundle_payload(memoryview(data), bundle, entry), memoryview)
    path = tmp_path / "b"
    path.write_bytes(data)
    with mapped(path) as mm:
        payload = bundle_payload(mm, bundle, entry)
        assert isinstance(payload, bytes) and payload == fake_payloads()[1][1]


def test_v1_ccob_laid_out_by_hand_with_padding():
    """FORMATS B.3 v1: magic, u16 1, u16 method, u32 uncompressed size, u64 hash, data to the end (no total)."""
    plain = build_bundle(fake_payloads(), align=4096)
    digest = int.from_bytes(hashlib.md5(plain).digest()[:8], "little")
    section, offsets = bytearray(), []
    for method, stream in ((1, zstandard.ZstdCompressor(level=3).compress(plain)), (0, zlib.compress(plain))):
        offsets.append(len(section))
        blob = b"CCOB" + struct.pack("<HHIQ", 1, method, len(plain), digest) + stream
        section += blob + bytes(-len(blob) % 4096)  # .hip_fatbin pads each TU's bundle to 4096
    assert list(find_bundles(section)) == [(offsets[0], "ccob"), (offsets[1], "ccob")]
    for offset, end, method in ((offsets[0], offsets[1], "zstd"), (offsets[1], len(section), "zlib")):
        ccob = parse_ccob(section, offset, end)
        assert (ccob.version, ccob.method, ccob.total_size, ccob.size) == (1, method, None, end - offset)
        assert decompress_ccob(section, ccob) == plain


def test_find_bundles_validates_and_resumes(tmp_path):
    plain = build_bundle(fake_payloads(), align=64)
    ccob = build_ccob(plain, 3, "zstd")
    decoys = (b"CCOB\x03\x00\x01\x00" + bytes(24) + b"no zstd here"  # right header, wrong stream
              + b"CCOB\x09\x00"  # unknown version
              + BUNDLE_MAGIC + struct.pack("<Q", 1 << 40))  # absurd entry count
    data = bytearray(b"\x7fELF" + decoys)
    data += bytes(4096 - len(data)) + plain
    data += bytes(-len(data) % 4096)
    ccob_at = len(data)
    data += ccob + b"CCOB"  # a lone magic at the very end
    expected = [(4096, "bundle"), (ccob_at, "ccob")]
    path = tmp_path / "host.so"
    path.write_bytes(data)
    with mapped(path) as mm:
        assert list(find_bundles(mm)) == expected
    for view in (bytes(data), data, memoryview(bytes(data))):
        assert list(find_bundles(view)) == expected
    assert list(find_bundles(data, start=4097)) == expected[1:]
    assert list(find_bundles(data, limit=ccob_at + 10)) == expected[:1]  # the CCOB would run past `limit`
    assert list(find_bundles(data, limit=4096 + len(plain) - 1)) == []
    assert list(find_bundles(data, end=4096 + len(BUNDLE_MAGIC))) == expected[:1]  # `end` bounds magic starts


SAMPLE_IDS = {  # what tests/samples/build.sh bundles: target id -> the code object it used
    "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+": "amd_gfx90a_xnack+_v4.hsaco",
    "hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-": "amd_gfx942_sramecc+_xnack-_v5.hsaco",
    "hipv4-amdgcn-amd-amdhsa--gfx1100": "amd_gfx1100_v6.hsaco",
}


@pytest.mark.parametrize("name, version", [("amd_plain.bundle", None), ("amd_ccob_v2.bundle", 2),
                                           ("amd_ccob_v3.bundle", 3)])
def test_committed_bundles(name, version):
    data = sample(name).read_bytes()
    if version is None:
        plain = data
    else:
        ccob = parse_ccob(data)
        assert (ccob.version, ccob.size) == (version, len(data))
        plain = decompress_ccob(data, ccob)
        assert plain == sample("amd_plain.bundle").read_bytes()
    bundle = parse_bundle(plain)
    assert sorted(e.id for e in bundle.entries) == sorted(["host-x86_64-unknown-linux-gnu-", *SAMPLE_IDS])
    for bundle_id, source in SAMPLE_IDS.items():
        assert payload_of(plain, bundle, bundle_id) == sample(source).read_bytes()


def test_committed_two_tu_executable():
    """Two TUs: a plain bundle and a CCOB, each on its own 4096 boundary of .hip_fatbin."""
    data = sample("amd_hip_two_tu").read_bytes()
    hits = list(find_bundles(data))
    assert [kind for _, kind in hits] == ["bundle", "ccob"] and all(at % 4096 == 0 for at, _ in hits)
    first = parse_bundle(data, hits[0][0])
    second = parse_bundle(decompress_ccob(data, parse_ccob(data, hits[1][0])))
    for bundle in (first, second):
        assert [e.target_id for e in bundle.entries] == ["", "gfx1100", "gfx90a"]


# ---- clang-offload-bundler -----------------------------------------------------------------------------------

@needs_bundler
@pytest.mark.parametrize("align", [1, 4096])
def test_build_bundle_is_byte_identical_to_bundler(tmp_path, code_objects, align):
    ids = [HOST_BUNDLE_ID, *code_objects]
    theirs = tmp_path / "theirs.bundle"
    bundler("--type=o", f"--bundle-align={align}", f"--targets={','.join(ids)}", "--input=/dev/null",
            *(f"--input={p}" for p in code_objects.values()), f"--output={theirs}")
    ours = build_bundle([(HOST_BUNDLE_ID, b"")] + [(i, p.read_bytes()) for i, p in code_objects.items()],
                        align=align)
    assert ours == theirs.read_bytes()


@needs_bundler
@pytest.mark.parametrize("version, method", [(None, None)] + [(v, m) for v in (1, 2, 3) for m in ("zlib", "zstd")])
def test_bundler_lists_and_unbundles_what_we_write(tmp_path, code_objects, version, method):
    plain = build_bundle([(HOST_BUNDLE_ID, b"")] + [(i, p.read_bytes()) for i, p in code_objects.items()],
                         align=4096)
    path = tmp_path / "ours.bundle"
    path.write_bytes(plain if version is None else build_ccob(plain, version, method))
    assert bundler_ids(path) == sorted([HOST_BUNDLE_ID, *code_objects])
    for bundle_id, source in code_objects.items():
        assert unbundle(path, bundle_id, tmp_path / "out.co") == source.read_bytes()


@needs_bundler
@pytest.mark.parametrize("version", [None, 2, 3])
def test_we_read_what_the_bundler_writes(tmp_path, code_objects, version):
    ids = [HOST_BUNDLE_ID, *code_objects]
    path = tmp_path / "theirs"
    args = ["--type=o", "--bundle-align=4096", f"--targets={','.join(ids)}", "--input=/dev/null",
            *(f"--input={p}" for p in code_objects.values()), f"--output={path}"]
    if version is None:
        bundler(*args)
    else:
        bundler("-compress", *args, env={"COMPRESSED_BUNDLE_FORMAT_VERSION": str(version)})
    data = path.read_bytes()
    if version is None:
        plain = data
        assert list(find_bundles(data)) == [(0, "bundle")]
    else:
        ccob = parse_ccob(data)
        assert (ccob.version, ccob.method, ccob.size) == (version, "zstd", len(data))
        assert list(find_bundles(data)) == [(0, "ccob")]
        plain = decompress_ccob(data, ccob)
        ours = parse_ccob(build_ccob(plain, version, "zstd"))
        assert (ours.header_size, ours.uncompressed_size, ours.hash) == (
            ccob.header_size, ccob.uncompressed_size, ccob.hash)
    bundle = parse_bundle(plain)
    assert sorted(e.id for e in bundle.entries) == bundler_ids(path)
    for bundle_id, source in code_objects.items():
        assert payload_of(plain, bundle, bundle_id) == source.read_bytes()


# ---- hostile input -------------------------------------------------------------------------------------------

def test_truncated_bundles_and_ccobs_raise_format_error():
    plain = build_bundle(fake_payloads(), align=64)
    for cut in range(len(plain)):
        with pytest.raises(FormatError):
            parse_bundle(plain[:cut])
    ccob = build_ccob(plain, 3, "zstd")
    for cut in list(range(40)) + [len(ccob) - 1]:
        with pytest.raises(FormatError):
            decompress_ccob(ccob[:cut], parse_ccob(ccob[:cut]))
    v1 = build_ccob(plain, 1, "zstd")
    with pytest.raises(FormatError):
        decompress_ccob(v1[:-3], parse_ccob(v1[:-3]))


def _bundle_with(count: int | None = None, entry: tuple[int, int, int] | None = None) -> bytes:
    data = bytearray(build_bundle(fake_payloads()))
    if count is not None:
        struct.pack_into("<Q", data, 24, count)
    if entry is not None:
        struct.pack_into("<QQQ", data, 32, *entry)
    return bytes(data)


@pytest.mark.parametrize("data, error", [
    (_bundle_with(count=0), FormatError),
    (_bundle_with(count=1 << 62), LimitError),
    (_bundle_with(count=4000), FormatError),  # table runs past the end
    (_bundle_with(entry=(0x1000, 1 << 60, 30)), FormatError),  # payload past the end
    (_bundle_with(entry=(8, 16, 30)), FormatError),  # payload inside the header
    (_bundle_with(entry=(0, 0, 1 << 40)), LimitError),  # id length
    (b"__CLANG_OFFLOAD_BUNDLX__" + bytes(40), FormatError),
])
def test_hostile_bundle_headers(data, error):
    with pytest.raises(error):
        parse_bundle(data)
    assert bundle_size_at(data, 0) is None


def _ccob_with(**fields) -> bytes:
    plain = build_bundle(fake_payloads())
    data = bytearray(build_ccob(plain, fields.pop("version", 3), "zstd"))
    layout = {"method": (6, "<H"), "total2": (8, "<I"), "total3": (8, "<Q"), "size3": (16, "<Q"),
              "size2": (12, "<I"), "hash3": (24, "<Q")}
    for name, value in fields.items():
        offset, fmt = layout[name]
        struct.pack_into(fmt, data, offset, value)
    return bytes(data)


@pytest.mark.parametrize("data, error", [
    (_ccob_with(total3=0), FormatError),
    (_ccob_with(total3=1 << 63), FormatError),
    (_ccob_with(version=2, total2=0xFFFFFFFF), FormatError),
    (_ccob_with(size3=0), FormatError),
    (_ccob_with(size3=1 << 50), LimitError),
    (_ccob_with(version=2, size2=3), FormatError),
    (_ccob_with(method=7), FormatError),
    (b"CCOB\x04\x00\x01\x00" + bytes(60), FormatError),
])
def test_hostile_ccob_headers(data, error):
    with pytest.raises(error):
        parse_ccob(data)
    assert ccob_size_at(data, 0) is None


@pytest.mark.parametrize("data", [
    _ccob_with(hash3=12345),  # wrong hash
    _ccob_with(size3=len(build_bundle(fake_payloads())) + 1),  # expands to fewer bytes than declared
])
def test_ccob_contents_are_checked(data):
    with pytest.raises(FormatError):
        decompress_ccob(data, parse_ccob(data))


def test_ccob_must_hold_a_bundle():
    not_a_bundle = b"\x7fELF" + bytes(200)
    digest = int.from_bytes(hashlib.md5(not_a_bundle).digest()[:8], "little")
    stream = zstandard.ZstdCompressor().compress(not_a_bundle)
    data = b"CCOB" + struct.pack("<HHQQQ", 3, 1, 32 + len(stream), len(not_a_bundle), digest) + stream
    with pytest.raises(FormatError, match="does not hold an offload bundle"):
        decompress_ccob(data, parse_ccob(data))


def test_corrupt_compressed_stream():
    data = bytearray(build_ccob(build_bundle(fake_payloads()), 3, "zstd"))
    data[40:60] = b"\xff" * 20
    with pytest.raises(FormatError):
        decompress_ccob(bytes(data), parse_ccob(bytes(data)))


def test_builders_reject_bad_arguments():
    with pytest.raises(FormatError):
        build_bundle([])
    with pytest.raises(FormatError):
        build_bundle(fake_payloads(), align=0)
    with pytest.raises(FormatError):
        build_ccob(b"not a bundle")
    with pytest.raises(FormatError):
        build_ccob(build_bundle(fake_payloads()), version=4)
    with pytest.raises(FormatError):
        build_ccob(build_bundle(fake_payloads()), method="lz4-frame")


_SAMPLES = [build_bundle(fake_payloads(), align=16), build_ccob(build_bundle(fake_payloads()), 2, "zlib"),
            build_ccob(build_bundle(fake_payloads()), 1, "zstd")]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(_SAMPLES), edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
                                                      max_size=6), cut=st.integers(0, 10**6))
def test_mutated_input_only_raises_fatkit_errors(base, edits, cut):
    data = bytearray(base)
    for position, value in edits:
        data[position % len(data)] = value
    data = bytes(data[:max(1, cut % (len(data) + 1))])
    for offset, kind in find_bundles(data):
        assert kind in ("bundle", "ccob")
    try:
        if data.startswith(b"CCOB"):
            parse_bundle(decompress_ccob(data, parse_ccob(data)))
        else:
            bundle = parse_bundle(data)
            for entry in bundle.entries:
                bundle_payload(data, bundle, entry)
    except FatkitError:
        pass


# ---- corpus --------------------------------------------------------------------------------------------------

CORPUS = {
    "bitsandbytes/libbitsandbytes_rocm64.so": {"ccob_version": 2},
    "bitsandbytes/libbitsandbytes_rocm72.so": {"ccob_version": 3},
    "jax_rocm7_plugin/_prng.so": {"ccob_version": 3, "devices": 27},
    "cupy/random/_generator_api.cpython-311-x86_64-linux-gnu.so": {"host_id": "host-x86_64-unknown-linux"},
}


@pytest.mark.corpus
@needs_bundler
@pytest.mark.parametrize("member", sorted(CORPUS))
def test_corpus_bundles(tmp_path, member):
    expect = CORPUS[member]
    path = corpus_file(member)
    with mapped(path) as mm:
        hits = list(find_bundles(mm))
        assert hits
        for number, (offset, kind) in enumerate(hits):
            if kind == "ccob":
                ccob = parse_ccob(mm, offset)
                assert ccob.version == expect["ccob_version"] and ccob.method == "zstd"
                raw = mm[offset:offset + ccob.size]
                plain = decompress_ccob(mm, ccob)
            else:
                assert "ccob_version" not in expect
                bundle = parse_bundle(mm, offset)
                raw = plain = mm[offset:offset + bundle.size]
            bundle = parse_bundle(plain)
            dumped = tmp_path / f"bundle{number}"
            dumped.write_bytes(raw)
            assert sorted(e.id for e in bundle.entries) == bundler_ids(dumped)
            host = [e for e in bundle.entries if e.kind == "host"]
            assert len(host) == 1 and host[0].size == 0
            if "host_id" in expect:
                assert host[0].id == expect["host_id"] and host[0].triple == "x86_64-unknown-linux"
            devices = [e for e in bundle.entries if e.kind != "host"]
            assert all(e.triple == "amdgcn-amd-amdhsa" and e.target_id.startswith("gfx") for e in devices)
            if "devices" in expect:
                assert len(devices) == expect["devices"]
            device = devices[-1]
            assert unbundle(dumped, device.id, tmp_path / "device.co") == payload_of(plain, bundle, device.id)
