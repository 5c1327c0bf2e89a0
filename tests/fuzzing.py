"""Mutation fuzzer over every reader fatkit has: only FatkitError may escape, no input may take over 2 s.

Seeds are real bytes: the committed samples and what fatkit extracts from them (cubins, PTX, code objects,
fatbins, bundles). Mutations are the ones hostile files use: bit flips, random bytes, truncation, size fields
set to 0 / huge / -1, duplicated and overlapping chunks, wrong compression flags; PTX text also gets token-level
ones (lines swapped, repeated or dropped; tokens replaced by PTX vocabulary).

    python -m tests.fuzzing --per-target 100000 --seed 1      # the long local run (BENCHMARKS.md)

The CI budget runs a few thousand inputs per target through `tests/test_fuzz.py` with a fixed seed.
"""

from __future__ import annotations

import argparse
import io
import random
import re
import resource
import signal
import struct
import sys
import time
import traceback
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from fatkit.errors import FatkitError
from fatkit.extract.kernels import describe
from fatkit.extract.model import Binary
from fatkit.extract.report import judge
from fatkit.extract.scan import Source, scan_buffer, scan_source
from fatkit.formats import ar, codecs, cubin, fatbin, hsaco, offload_bundle, ptx_header, wrappers
from fatkit.formats.elf import ElfView
from fatkit.formats.fatkit_amd import (KernelRecord, Manifest, ModuleRecord, build_payload, code_object_bundle_id,
                                       read_payload)
from fatkit.formats.pe import PeView
from fatkit.repack.wheel import read_wheel, record_hash, rewrite_record, write_wheel
from fatkit.translate.hazards import analyse
from fatkit.translate.ptx import parse_ptx, print_ptx

SAMPLES = Path(__file__).parent / "samples"
TIME_LIMIT = 2.0  # seconds one input may take (issue: robustness invariants)
HANG_LIMIT = 10.0  # an input still running after this is interrupted and reported as a hang
MEMORY_LIMIT = 4 << 30  # address space of the fuzzing process: a blind huge allocation fails loudly


def _elf(data: bytes) -> None:
    view = ElfView(data)
    for section in view.sections:
        view.section_at(section.offset)
        if section.name in wrappers.WRAPPER_SECTIONS:
            view.pointers_in(section, 24, 8)
    view.segments
    view.needed
    view.soname
    wrappers.read_wrappers(view)


def _pe(data: bytes) -> None:
    view = PeView(data)
    for section in view.sections:
        view.section_at(section.offset)
        view.rva_to_offset(section.virtual_address)
        if section.name in (".nvFatBi", ".hipFatB"):
            view.pointers_in(section, 24, 8)
    view.extent
    view.relocations
    view.imports
    wrappers.read_wrappers(view)


def _fatbin(data: bytes) -> None:
    for offset in fatbin.find_containers(data):
        container = fatbin.parse_container(data, offset)
        for entry in container.entries:
            try:
                fatbin.entry_payload(data, entry)
            except FatkitError:
                pass


def _codecs(data: bytes) -> None:
    """First byte: codec (low bits) and whether to state the size (0x80); then u32 size; then the stream."""
    mode = data[0] if data else 0
    codec = codecs.CODECS[mode % len(codecs.CODECS)]
    expected = struct.unpack_from("<I", data, 1)[0] % (1 << 24) if len(data) >= 5 else 0
    codecs.decompress(codec, data[5:], expected if codec == "lz4-block" or mode & 0x80 else None)


def _cubin(data: bytes) -> None:
    cubin.cubin_kernel_names(data)
    cubin.parse_cubin(data)


def _bundle(data: bytes) -> None:
    for offset, kind in offload_bundle.find_bundles(data):
        if kind == "ccob":
            ccob = offload_bundle.parse_ccob(data, offset)
            inner = offload_bundle.decompress_ccob(data, ccob)
            bundle = offload_bundle.parse_bundle(inner, 0)
        else:
            inner = data
            bundle = offload_bundle.parse_bundle(data, offset)
        for entry in bundle.entries:
            offload_bundle.bundle_payload(inner, bundle, entry)


def _ptx(data: bytes) -> None:
    """The PTX parser, then printing and analysing whatever it accepted."""
    module = parse_ptx(data.decode("latin-1"), source="fuzz")
    print_ptx(module)
    analyse(module)


def _scan(data: bytes) -> None:
    for binary in scan_source(Source("fuzz", data)):
        _described(binary)


def _described(binary: Binary) -> dict:
    """Everything inspect --kernels --hashes --json derives from a binary: every payload read."""
    describe(binary, kernels=True, hashes=True)
    binary.verdict = judge(binary, by_kernel=True)
    return binary.to_json()


def _zip(data: bytes) -> None:
    _scan(data)


def _fatkit_amd(data: bytes) -> None:
    """The `.fatkit_amd` section reader, then what a shim asks of what it accepted."""
    manifest = read_payload(data)
    manifest.to_json()
    for module in manifest.modules:
        manifest.find(module.ptx_blake3, module.target)


def _wheel(data: bytes) -> None:
    """The wheel repacker's reader and writer: what it accepts it must copy (RECORD rewritten) into a wheel it
    reads back with the same members, in order, with the same compressed bytes."""
    wheel = read_wheel(data, "fuzz")
    for member in wheel.members:
        if not member.is_dir and member.info.file_size >= 4 and wheel.head(member) == b"\x7fELF":
            wheel.stream(member, io.BytesIO())
    first = next((m.name for m in wheel.members if m is not wheel.record), "missing.so")
    record, _ = rewrite_record(wheel.read_record(), {first: (record_hash(bytes(32)), 1)})
    out = io.BytesIO()
    write_wheel(wheel, out, record)
    try:
        again = read_wheel(out.getvalue(), "fuzz output")
    except FatkitError as exc:
        raise AssertionError(f"the wheel written from an accepted one is refused: {exc}") from None
    assert [m.name for m in again.members] == [m.name for m in wheel.members]
    for old, new in zip(wheel.members, again.members):
        if old is not wheel.record:
            assert bytes(wheel.raw(old)) == bytes(again.raw(new)), old.name
            assert (old.info.CRC, old.info.file_size, old.info.external_attr) == \
                   (new.info.CRC, new.info.file_size, new.info.external_attr), old.name
    assert again.read_record() == record


TARGETS: dict[str, Callable[[bytes], None]] = {
    "elf": _elf,
    "pe": _pe,
    "fatbin": _fatbin,
    "codecs": _codecs,
    "cubin": _cubin,
    "ptx_header": lambda data: ptx_header.parse_ptx_header(data),
    "ptx": _ptx,
    "offload_bundle": _bundle,
    "hsaco": lambda data: hsaco.parse_code_object(data),
    "ar": lambda data: list(ar.members(data)),
    "zip": _zip,
    "fatkit_amd": _fatkit_amd,
    "wheel": _wheel,
    "scan": lambda data: _described(scan_buffer(Source("fuzz", data))),
}


def seeds() -> dict[str, list[bytes]]:
    """Real inputs per target, from the committed samples and what fatkit extracts from them."""
    files = {p.name: p.read_bytes() for p in sorted(SAMPLES.iterdir()) if p.is_file() and p.name != "build.sh"
             and not p.name.endswith(".md")}
    out: dict[str, list[bytes]] = {name: [] for name in TARGETS}
    for name, data in files.items():
        if data.startswith(b"\x7fELF"):
            out["elf"].append(data)
        if name.endswith(".dll"):
            out["pe"].append(data)
        if name.endswith(".fatbin"):
            out["fatbin"].append(data)
        if name.endswith(".bundle"):
            out["offload_bundle"].append(data)
        if name.endswith(".hsaco"):
            out["hsaco"].append(data)
        if name.endswith(".a"):
            out["ar"].append(data)
    out["pe"].append(pe_with_long_names(files["pe_kern.dll"]))
    for name in ("nv_mode_default", "nv_rdc", "nv_lib.so", "amd_hip_two_tu", "nv_bin2c", "nv_lib.a", "pe_kern.dll"):
        out["scan"].append(files[name])
    for binary in scan_buffer(Source("seed", files["nv_mode_none"])), scan_buffer(Source("s", files["nv_mode_speed"])):
        for entry in binary.entries:
            (out["cubin"] if entry.kind == "elf" else out["ptx_header"]).append(entry.payload)
    for name in ("nv_mode_default", "nv_mode_speed", "nv_fb_zlib.fatbin", "nv_fb_lz4frame.fatbin"):
        for container in scan_buffer(Source("seed", files[name])).containers:
            out["fatbin"].append(files[name][container.offset:container.offset + container.size])
    # small real modules only: mutating a 2 MB module is slow and finds nothing a small one does not
    out["ptx"] = [p.read_bytes() for p in sorted((SAMPLES / "ptx").glob("*.ptx")) if p.stat().st_size < 40000]
    out["ptx"].append(files["nv_kern_sm90.ptx"])
    sample = files["nv_kern_sm90.ptx"]
    for index, codec in enumerate(codecs.CODECS):
        out["codecs"].append(bytes([index | 0x80]) + struct.pack("<I", len(sample)) + codecs.compress(codec, sample))
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("pkg/lib.so", files["nv_lib.so"])
        z.writestr("pkg/k.hsaco", files["amd_gfx942_v6.hsaco"])
    out["zip"].append(zipped.getvalue())
    out["fatkit_amd"] = _payload_seeds(files["amd_gfx942_v6.hsaco"])
    out["wheel"] = _wheel_seeds(files["amd_gfx942_v6.hsaco"])
    return out


def pe_with_long_names(image: bytes) -> bytes:
    """`image` with its sections renamed `/<offset>` into a COFF string table appended at its end (how GNU ld
    writes names over 8 bytes): `.nv_fatb` becomes `.nv_fatbin`, `.nvFatBi` `.nvFatBinSegment`, the other
    sections keep their names through the table."""
    data = bytearray(image)
    lfanew = struct.unpack_from("<I", data, 0x3C)[0]
    count = struct.unpack_from("<H", data, lfanew + 6)[0]
    table = lfanew + 24 + struct.unpack_from("<H", data, lfanew + 20)[0]
    full = {".nv_fatb": ".nv_fatbin", ".nvFatBi": ".nvFatBinSegment"}
    strings = b""
    for index in range(count):
        name = bytes(data[table + 40 * index:table + 40 * index + 8]).rstrip(b"\0").decode()
        data[table + 40 * index:table + 40 * index + 8] = f"/{4 + len(strings)}".encode().ljust(8, b"\0")
        strings += full.get(name, name).encode() + b"\0"
    struct.pack_into("<II", data, lfanew + 12, len(data), 0)  # PointerToSymbolTable (no symbols), NumberOfSymbols
    return bytes(data + struct.pack("<I", 4 + len(strings)) + strings)


def _payload_seeds(code_object: bytes) -> list[bytes]:
    """`.fatkit_amd` payloads as repack writes them: compressed (CCOB v3) and plain, with a translated module,
    a failed one and an alternative PTX (small code objects: mutations should land in the structure)."""
    ptx_a, ptx_b, ptx_c = (bytes([n]).hex() * 32 for n in (0xA1, 0xB2, 0xC3))
    bundle_id = code_object_bundle_id(ptx_a, "gfx942")
    manifest = Manifest("0.1.0", "0123456789abcdef", ("gfx942", "gfx1100"), (
        ModuleRecord(ptx_a, "gfx942", "translated", bundle_id, "compute_90", ("c0.e1",), (ptx_c,), None,
                     (KernelRecord("saxpy", "ok"), KernelRecord("tma", "unsupported", "cp.async.bulk.tensor"))),
        ModuleRecord(ptx_b, "gfx1100", "failed", None, "compute_80", ("c1.e2",), (), "no kernel translated", ())),
        {bundle_id: code_object[:512]})
    return [build_payload(manifest), build_payload(manifest, compress=False)]


def _wheel_seeds(elf: bytes) -> list[bytes]:
    """Small wheels: stored and deflated members, an ELF one, a directory entry, RECORD with CRLF lines."""
    seeds = []
    for method in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", method) as z:
            z.writestr("pkg/", b"")
            z.writestr("pkg/__init__.py", b"X = 1\n")
            z.writestr("pkg/k.so", elf[:64])  # small: most mutations should land in the zip structure
            z.writestr("pkg-1.0.dist-info/RECORD", b"pkg/__init__.py,sha256=abc,6\r\npkg/k.so,sha256=def,64\r\n"
                                                   b"pkg-1.0.dist-info/RECORD,,\r\n")
        seeds.append(buf.getvalue())
    return seeds


SPECIAL_VALUES = (0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF,
                  1 << 31, 1 << 40)


def mutate(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 3, 8))):
        if not buf:
            buf = bytearray(rng.randbytes(rng.randrange(1, 64)))
        how = rng.randrange(8)
        pos = rng.randrange(len(buf))
        if how == 0:  # bit flip
            buf[pos] ^= 1 << rng.randrange(8)
        elif how == 1:  # random bytes
            n = rng.randrange(1, 9)
            buf[pos:pos + n] = rng.randbytes(n)
        elif how == 2:  # truncate
            del buf[rng.randrange(len(buf)):]
        elif how == 3 and len(buf) >= 8:  # a size/offset field set to a special value (aligned, as headers are)
            width = rng.choice((2, 4, 8))
            pos -= pos % width
            value = rng.choice(SPECIAL_VALUES) & ((1 << (8 * width)) - 1)
            buf[pos:pos + width] = value.to_bytes(width, "little")[:len(buf) - pos]
        elif how == 4:  # duplicate a chunk (repeated/overlapping entries)
            end = min(len(buf), pos + rng.randrange(1, 256))
            at = rng.randrange(len(buf) + 1)
            buf[at:at] = buf[pos:end]
        elif how == 5:  # delete a chunk
            del buf[pos:pos + rng.randrange(1, 64)]
        elif how == 6:  # flip compression/variant flag bits where fatbin flags live
            buf[pos] ^= rng.choice((0x10, 0x20, 0x40, 0x80, 0xF0))
        else:  # copy bytes from elsewhere (pointers into loops)
            src = rng.randrange(len(buf))
            n = rng.randrange(1, 16)
            buf[pos:pos + n] = buf[src:src + n]
    return bytes(buf)


_PTX_TOKENS = re.compile(rb"%?[A-Za-z_$][\w$.:]*|0[xX][0-9A-Fa-f]+|0[fFdD][0-9A-Fa-f]+|-?\d+|\S")
_PTX_VOCABULARY = (b"{", b"}", b";", b",", b"[", b"]", b"(", b")", b"@%p1", b"@!%p2", b".reg", b".pred", b".b32",
                   b".shared", b".param", b".entry", b".func", b".visible", b".extern", b"%r<4>", b"|", b"_",
                   b"0f7FC00000", b"0xFFFFFFFFFFFFFFFF", b"-2147483648", b"::", b"%tid.x", b"%laneid", b".align",
                   b".version 9.9", b".target sm_999a", b"mma.sync.aligned", b"ld.global.v4.u32", b"call", b"\n")


def mutate_ptx(data: bytes, rng: random.Random) -> bytes:
    """Token-level mutations of PTX text: lines and tokens swapped, repeated, dropped or replaced."""
    if rng.random() < 0.3:
        return mutate(data, rng)
    lines = data.split(b"\n")
    for _ in range(rng.choice((1, 2, 4))):
        i = rng.randrange(len(lines))
        how = rng.randrange(5)
        if how == 0:  # swap two lines (scopes, labels, declarations out of order)
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif how == 1:  # repeat a line (duplicate declarations, labels)
            lines.insert(rng.randrange(len(lines) + 1), lines[i])
        elif how == 2:
            del lines[i]
            lines = lines or [b""]
        else:  # replace or insert one token of the line
            tokens = _PTX_TOKENS.findall(lines[i]) or [b""]
            k = rng.randrange(len(tokens))
            new = rng.choice(_PTX_VOCABULARY) if how == 3 else rng.choice(tokens) + rng.choice(_PTX_VOCABULARY)
            tokens[k] = new
            lines[i] = b" ".join(tokens)
    return b"\n".join(lines)


@dataclass
class Report:
    runs: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)  # FatkitError: the expected answer to hostile bytes
    escapes: list[str] = field(default_factory=list)
    slow: list[str] = field(default_factory=list)


class Hang(BaseException):
    """Raised by the alarm inside a hung reader (BaseException, so no reader's `except Exception` eats it)."""


def _alarm(signum, frame):
    raise Hang()


def run(per_target: int, seed: int, targets: list[str] | None = None, budget: float | None = None) -> Report:
    """Fuzz each target with `per_target` mutated inputs (or until `budget` seconds per target)."""
    rng = random.Random(seed)
    report = Report()
    signal.signal(signal.SIGALRM, _alarm)
    corpus = seeds()
    for name in targets or list(TARGETS):
        fn, inputs = TARGETS[name], corpus[name]
        if not inputs:
            raise SystemExit(f"no seeds for {name}")
        started = time.monotonic()
        for i in range(per_target):
            if budget is not None and time.monotonic() - started > budget:
                break
            data = (mutate_ptx if name == "ptx" else mutate)(rng.choice(inputs), rng)
            t0 = time.monotonic()
            signal.setitimer(signal.ITIMER_REAL, HANG_LIMIT)
            try:
                fn(data)
            except FatkitError:
                report.rejected[name] += 1
            except Hang:
                report.slow.append(f"{name} seed={seed} input#{i}: hangs (> {HANG_LIMIT:.0f} s)")
                _save(name, seed, i, data)
            except Exception:  # noqa: BLE001 - the point is to catch whatever escapes
                report.escapes.append(f"{name} seed={seed} input#{i}: {traceback.format_exc(limit=-3)}")
                _save(name, seed, i, data)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            elapsed = time.monotonic() - t0
            if TIME_LIMIT < elapsed < HANG_LIMIT:
                report.slow.append(f"{name} seed={seed} input#{i}: {elapsed:.1f} s")
                _save(name, seed, i, data)
            report.runs[name] += 1
    return report


def _save(name: str, seed: int, index: int, data: bytes) -> None:
    crashes = Path(".fuzz-crashes")
    crashes.mkdir(exist_ok=True)
    (crashes / f"{name}-{seed}-{index}.bin").write_bytes(data)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-target", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--targets", nargs="*")
    parser.add_argument("--budget", type=float, help="seconds per target at most (CI)")
    args = parser.parse_args()
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    started = time.monotonic()
    report = run(args.per_target, args.seed, args.targets, args.budget)
    print(f"{'target':16} {'inputs':>8} {'rejected':>9}")
    for name, count in report.runs.items():
        print(f"{name:16} {count:8} {report.rejected[name]:9}")
    print(f"total {sum(report.runs.values())} inputs in {time.monotonic() - started:.0f} s; "
          f"escapes {len(report.escapes)}, over {TIME_LIMIT:.0f} s {len(report.slow)}")
    for line in report.escapes[:20] + report.slow[:20]:
        print(line)
    return 1 if report.escapes or report.slow else 0


if __name__ == "__main__":
    sys.exit(main())
