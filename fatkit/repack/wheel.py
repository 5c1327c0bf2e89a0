"""Repack a wheel: each ELF or PE member (a `win_amd64` wheel's DLLs and `.pyd`s) that carries PTX gets its
`.fatkit_amd` (PE: `.fatkit`) section (`repack_binary`), every other member is copied as it is, and
`*.dist-info/RECORD` is rewritten for the members that changed.

The wheel is read from a read-only map of the file; members are never unpacked together: an ELF member is
streamed into a private temporary directory only to be scanned and repacked, one at a time. Member names
are never used as paths on disk, so a hostile name cannot make fatkit write anywhere; names with `..`,
absolute or drive paths, backslashes or control characters, duplicated names, symlink and device entries,
encrypted members and members whose bytes overlap (a zip-bomb construction) are refused with a FatkitError
before anything is written. Only ELF members are ever decompressed, each capped at FATKIT_MAX_PAYLOAD.

The new wheel has the same file name, in the output directory, written atomically (temporary + rename).
Members keep their order, compression method, timestamps, attributes and comments; an unchanged member's
compressed bytes are copied verbatim, a patched one is compressed again with its original method. Headers
are written fresh (extra fields other than ZIP64 are dropped; wheels use none that pip reads), so the same
input and targets give byte-identical output. A wheel in which nothing was repacked is copied byte for byte.
"""

from __future__ import annotations

import base64
import bz2
import contextlib
import csv
import hashlib
import io
import mmap
import os
import re
import stat
import struct
import tempfile
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from fatkit.errors import FatkitError, FormatError, InputError, LimitError, UsageError
from fatkit.extract.scan import BufferFile, scan_path, zip_errors
from fatkit.formats.common import MAX_PAYLOAD, Buffer
from fatkit.formats.magic import DOS_MAGIC, ELF_MAGIC
from fatkit.repack import HOST_FORMATS, BinaryRepack, repack_binary, translated_targets
from fatkit.repack.elf_patch import atomic_output, copy_file
from fatkit.formats.zip import (CENTRAL_HEADER, CENTRAL_SIGNATURE, END_RECORD, END_SIGNATURE, LOCAL_HEADER,
                                LOCAL_SIGNATURE, ZIP64_END, ZIP64_END_SIGNATURE, ZIP64_LOCATOR,
                                ZIP64_LOCATOR_SIGNATURE)
from fatkit.formats.fatkit_amd import ModuleRecord

ZIP_ERRORS = zip_errors()

HOST_MAGICS = (ELF_MAGIC, DOS_MAGIC)  # members that may be host images: ELF, and PE (which starts with MZ)
RECORD_NAME = re.compile(r"[^/]+\.dist-info/RECORD")
SIGNATURE_SUFFIXES = ("/RECORD.jws", "/RECORD.p7s")  # wheel signatures: a repacked wheel cannot keep them valid
READABLE_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)
WRITABLE_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2)
CONTROL_OR_BACKSLASH = re.compile(r"[\x00-\x1f\x7f\\]")
MAX_RECORD = 64 << 20  # RECORD of the largest wheels is a few MB
CHUNK = 1 << 20
FLAG_ENCRYPTED = 0x1
FLAG_DATA_DESCRIPTOR = 0x8  # sizes follow the data: the new headers carry them, so the flag is cleared
FLAG_UTF8 = 0x800
UNIX = 3  # create_system whose external attributes hold st_mode
ZIP64_LIMIT = 0xFFFFFFFF  # sizes and offsets at or above this need ZIP64 records (module-level: tests lower it)
ZIP64_VERSION = 45



# ---------------------------------------------------------------------------------------------------------
# reading


@dataclass(frozen=True)
class Member:
    """One validated wheel member: its central-directory record and where its compressed bytes lie."""

    info: zipfile.ZipInfo
    raw_name: bytes
    data_offset: int

    @property
    def name(self) -> str:
        return self.info.filename

    @property
    def is_dir(self) -> bool:
        return self.name.endswith("/")


@dataclass
class WheelContents:
    """A validated wheel: its members in archive order and its RECORD."""

    archive: zipfile.ZipFile
    buf: Buffer
    members: list[Member]
    record: Member
    path: str  # the wheel, as errors name it

    def where(self, member: Member) -> str:
        return f"{self.path}!{member.name}"

    def raw(self, member: Member) -> memoryview:
        """The compressed bytes, as they lie in the file (a view: release it when done)."""
        return memoryview(self.buf)[member.data_offset:member.data_offset + member.info.compress_size]

    def close(self) -> None:
        self.archive.close()

    def head(self, member: Member, size: int = 4) -> bytes:
        """The first bytes of a member, decompressed (the rest is not read)."""
        try:
            with self.archive.open(member.info) as stream:
                return stream.read(size)
        except ZIP_ERRORS as exc:
            raise FormatError(f"cannot read member: {exc}", path=self.where(member)) from None

    def stream(self, member: Member, out: BinaryIO) -> int:
        """Decompress a member into `out`; its CRC is checked and at most MAX_PAYLOAD bytes are written."""
        if member.info.file_size > MAX_PAYLOAD:
            raise LimitError(f"member claims {member.info.file_size} bytes, above the limit of {MAX_PAYLOAD}",
                             path=self.where(member))
        written = 0
        try:
            with self.archive.open(member.info) as stream:
                while block := stream.read(CHUNK):
                    written += len(block)
                    if written > MAX_PAYLOAD:
                        raise LimitError(f"member expands past the limit of {MAX_PAYLOAD} bytes",
                                         path=self.where(member))
                    out.write(block)
        except ZIP_ERRORS as exc:
            if isinstance(exc, OSError) and exc.errno is not None:
                raise  # a write error of `out`, not a corrupt member: the caller reports it
            raise FormatError(f"cannot read member: {exc}", path=self.where(member)) from None
        return written

    def read_record(self) -> bytes:
        if self.record.info.file_size > MAX_RECORD:
            raise LimitError(f"RECORD claims {self.record.info.file_size} bytes, above {MAX_RECORD}",
                             path=self.where(self.record))
        out = io.BytesIO()
        self.stream(self.record, out)
        return out.getvalue()


def read_wheel(buf: Buffer, path: str = "wheel") -> WheelContents:
    """Open and validate a wheel held in `buf`; FatkitError for anything fatkit will not repack."""
    try:
        archive = zipfile.ZipFile(BufferFile(buf))
        infos = archive.infolist()
    except ZIP_ERRORS as exc:
        raise FormatError(f"not a readable zip: {exc}", path=path) from None
    try:
        members = [_validated(buf, info) for info in infos]
    except FatkitError as exc:
        raise exc.located(path) from None
    names: set[str] = set()
    for member in members:
        if member.name in names:
            raise FormatError(f"member {member.name!r} appears twice (installers disagree on which one wins)",
                              path=path)
        names.add(member.name)
    _refuse_overlaps(members, path)
    records = [m for m in members if RECORD_NAME.fullmatch(m.name)]
    if len(records) != 1:
        raise FormatError(f"not a wheel: {len(records)} *.dist-info/RECORD files (one expected)", path=path)
    signed = [m.name for m in members if m.name.endswith(SIGNATURE_SUFFIXES)]
    if signed:
        raise UsageError(f"the wheel is signed ({signed[0]}); a repacked wheel cannot keep a valid signature: "
                         "remove the signature first", path=path)
    return WheelContents(archive, buf, members, records[0], path)


def _validated(buf: Buffer, info: zipfile.ZipInfo) -> Member:
    name = info.orig_filename

    def refuse(why: str) -> FormatError:
        return FormatError(f"member {name[:200]!r}: {why}", offset=info.header_offset)

    parts = name.split("/")
    if not name or CONTROL_OR_BACKSLASH.search(name):
        raise refuse("empty name, or a control character (NUL, newline) or backslash in it")
    if name.startswith("/") or re.match(r"[A-Za-z]:", name):
        raise refuse("absolute path")
    if ".." in parts:
        raise refuse("path goes up ('..')")
    if info.flag_bits & FLAG_ENCRYPTED:
        raise refuse("encrypted")
    if info.compress_type not in READABLE_METHODS:
        raise refuse(f"compression method {info.compress_type} is not one zip readers agree on")
    mode = info.external_attr >> 16
    if info.create_system == UNIX and stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
        kind = "a symlink" if stat.S_ISLNK(mode) else "a special file"
        raise refuse(f"{kind} (mode 0o{mode:o}); wheels hold only files and directories")
    raw_name = name.encode("utf-8" if info.flag_bits & FLAG_UTF8 else "cp437")
    offset = info.header_offset
    if offset < 0 or offset + LOCAL_HEADER.size > len(buf):
        raise refuse("local header lies outside the file")
    fields = LOCAL_HEADER.unpack_from(buf, offset)
    signature, name_length, extra_length = fields[0], fields[-2], fields[-1]
    if signature != LOCAL_SIGNATURE:
        raise refuse("local header signature is wrong")
    start = offset + LOCAL_HEADER.size
    if bytes(buf[start:start + name_length]) != raw_name:
        raise refuse("local header names another file (zip readers would disagree)")
    data_offset = start + name_length + extra_length
    if data_offset + info.compress_size > len(buf):
        raise refuse(f"{info.compress_size} compressed bytes run past the end of the file")
    return Member(info, raw_name, data_offset)


def _refuse_overlaps(members: list[Member], path: str) -> None:
    ordered = sorted(members, key=lambda m: m.info.header_offset)
    for before, after in zip(ordered, ordered[1:]):
        if before.data_offset + before.info.compress_size > after.info.header_offset:
            raise FormatError(f"members {before.name[:200]!r} and {after.name[:200]!r} overlap "
                              "(a zip-bomb construction)", path=path, offset=after.info.header_offset)


# ---------------------------------------------------------------------------------------------------------
# RECORD


def record_hash(digest: bytes) -> str:
    """RECORD's hash notation: sha256=<urlsafe base64, no padding>."""
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def rewrite_record(text: bytes, changed: dict[str, tuple[str, int]], path: str = "RECORD") -> tuple[bytes, list[str]]:
    """RECORD with the lines of `changed` members (name → (hash, size)) replaced, every other line kept as it
    was (byte for byte); members RECORD did not list are appended. Returns the text and what was appended."""
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"RECORD is not UTF-8 (byte {exc.start})", path=path) from None
    # lines end at "\n" only (str.splitlines would also split at \x85, \u2028 and others, which names may hold)
    lines = [line + "\n" for line in decoded.split("\n")]
    lines[-1] = lines[-1][:-1]
    if not lines[-1]:
        lines.pop()
    ending = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    listed: set[str] = set()
    out = []
    for number, line in enumerate(lines, 1):
        try:
            row = next(csv.reader([line], strict=True), [])
        except csv.Error as exc:
            raise FormatError(f"RECORD line {number} is not CSV: {exc}", path=path) from None
        name = row[0] if row else None
        if name in changed:  # every line naming it (a RECORD may repeat one)
            line = _record_line(name, *changed[name], line[len(line.rstrip("\r\n")):] or ending)
            listed.add(name)
        out.append(line)
    appended = sorted(set(changed) - listed)
    if appended and out and not out[-1].endswith("\n"):
        out[-1] += ending
    out.extend(_record_line(name, *changed[name], ending) for name in appended)
    return "".join(out).encode("utf-8"), appended


def _record_line(name: str, digest: str, size: int, ending: str) -> str:
    line = io.StringIO()
    csv.writer(line, lineterminator=ending).writerow([name, digest, size])
    return line.getvalue()


# ---------------------------------------------------------------------------------------------------------
# writing


class ZipWriter:
    """Writes zip records with fixed fields: what it is given, in the order given, ZIP64 only where needed."""

    def __init__(self, out: BinaryIO):
        self._out = out
        self._central: list[bytes] = []

    def write(self, data: bytes | memoryview) -> None:
        self._out.write(data)

    def copy(self, member: Member, raw: memoryview) -> None:
        """An unchanged member: its compressed bytes as they were."""
        info = member.info
        zip64 = info.file_size >= ZIP64_LIMIT or info.compress_size >= ZIP64_LIMIT
        offset = self._local_header(member, info.CRC, info.compress_size, info.file_size, zip64)
        for start in range(0, len(raw), CHUNK):
            self.write(raw[start:start + CHUNK])
        self._central_header(member, info.CRC, info.compress_size, info.file_size, offset)

    def add(self, member: Member, source: BinaryIO, size: int) -> None:
        """A member with new contents (`size` bytes from `source`), compressed with the member's method."""
        info = member.info
        if info.compress_type not in WRITABLE_METHODS:
            raise FormatError(f"member uses compression method {info.compress_type}; fatkit rewrites only stored, "
                              "deflated and bzip2 members", path=member.name)
        zip64 = size * 1.05 >= ZIP64_LIMIT  # compressed data may be a little larger than the input
        offset = self._local_header(member, 0, 0, size, zip64)
        compressor = _compressor(info.compress_type)
        crc, written, compressed = 0, 0, 0
        while block := source.read(CHUNK):
            crc = zlib.crc32(block, crc)
            written += len(block)
            out = compressor.compress(block) if compressor else block
            compressed += len(out)
            self.write(out)
        if compressor:
            out = compressor.flush()
            compressed += len(out)
            self.write(out)
        if written != size:
            raise InputError(f"member changed size while it was written ({written} of {size} bytes)",
                             path=member.name)
        if compressed >= ZIP64_LIMIT and not zip64:
            raise FormatError("compressed member outgrew its header's size fields", path=member.name)
        end = self._out.tell()
        self._out.seek(offset)
        self._local_header(member, crc, compressed, size, zip64)
        self._out.seek(end)
        self._central_header(member, crc, compressed, size, offset)

    def finish(self, comment: bytes) -> None:
        """The central directory and the end records."""
        start = self._out.tell()
        for record in self._central:
            self.write(record)
        size = self._out.tell() - start
        count = len(self._central)
        if count >= 0xFFFF or size >= ZIP64_LIMIT or start >= ZIP64_LIMIT:
            end64 = self._out.tell()
            self.write(ZIP64_END.pack(ZIP64_END_SIGNATURE, ZIP64_END.size - 12, ZIP64_VERSION, ZIP64_VERSION,
                                      0, 0, count, count, size, start))
            self.write(ZIP64_LOCATOR.pack(ZIP64_LOCATOR_SIGNATURE, 0, end64, 1))
            count, size, start = min(count, 0xFFFF), _u32(size), _u32(start)
        self.write(END_RECORD.pack(END_SIGNATURE, 0, 0, count, count, size, start, len(comment)))
        self.write(comment)

    def _local_header(self, member: Member, crc: int, compressed: int, size: int, zip64: bool) -> int:
        info = member.info
        offset = self._out.tell()
        extra = struct.pack("<HHQQ", 1, 16, size, compressed) if zip64 else b""
        sizes = (0xFFFFFFFF, 0xFFFFFFFF) if zip64 else (compressed, size)  # ZIP64: both in the extra
        version = max(info.extract_version, ZIP64_VERSION) if zip64 else info.extract_version
        self.write(LOCAL_HEADER.pack(LOCAL_SIGNATURE, version, info.reserved, _flags(info), info.compress_type,
                                     *_dos_time(info), crc, *sizes, len(member.raw_name), len(extra)))
        self.write(member.raw_name)
        self.write(extra)
        return offset

    def _central_header(self, member: Member, crc: int, compressed: int, size: int, offset: int) -> None:
        info = member.info
        # the ZIP64 extra holds, in this order, the values whose 32-bit fields say 0xFFFFFFFF
        big = [value for value in (size, compressed, offset) if value >= ZIP64_LIMIT]
        extra = struct.pack(f"<HH{len(big)}Q", 1, 8 * len(big), *big) if big else b""
        version = max(info.extract_version, ZIP64_VERSION) if big else info.extract_version
        comment = info.comment
        self._central.append(b"".join([
            CENTRAL_HEADER.pack(CENTRAL_SIGNATURE, info.create_version, info.create_system, version, info.reserved,
                                _flags(info), info.compress_type, *_dos_time(info), crc, _u32(compressed),
                                _u32(size), len(member.raw_name), len(extra), len(comment), 0, info.internal_attr,
                                info.external_attr, _u32(offset)),
            member.raw_name, extra, comment]))


def _u32(value: int) -> int:
    """A 32-bit size or offset field: the value, or 0xFFFFFFFF when a ZIP64 record holds it."""
    return 0xFFFFFFFF if value >= ZIP64_LIMIT else value


def _flags(info: zipfile.ZipInfo) -> int:
    return info.flag_bits & ~FLAG_DATA_DESCRIPTOR


def _dos_time(info: zipfile.ZipInfo) -> tuple[int, int]:
    year, month, day, hour, minute, second = info.date_time
    return (hour << 11) | (minute << 5) | (second // 2), ((year - 1980) << 9) | (month << 5) | day


def _compressor(method: int):
    if method == zipfile.ZIP_DEFLATED:
        return zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)
    if method == zipfile.ZIP_BZIP2:
        return bz2.BZ2Compressor(9)
    return None


# ---------------------------------------------------------------------------------------------------------
# repack


@dataclass
class MemberRepack:
    """One ELF member that carries PTX and what repack_binary made of it (paths in it name the member)."""

    name: str
    result: BinaryRepack
    size: int | None = None  # of the patched member; None when the member was kept as it was
    sha256: str | None = None

    @property
    def patched(self) -> bool:
        return self.size is not None

    def to_json(self) -> dict[str, Any]:
        return {"member": self.name, "patched": self.patched, "size": self.size, "sha256": self.sha256,
                **self.result.to_json()}


@dataclass
class WheelRepack:
    """What `repack_wheel` did with one wheel; it reads like a BinaryRepack, so a report lists both alike.

    Statuses: `repacked` (every PTX-carrying member repacked), `partial` (some members, modules or kernels did
    not translate), `failed` (members were patched but no kernel translated), `no-ptx` (no ELF member carries
    PTX: an unchanged copy was written), `error` (nothing was written; `reason` says why).
    """

    source: Path
    destination: Path | None  # None when nothing was written
    targets: list[str]
    status: str = "error"
    members: list[MemberRepack] = field(default_factory=list)
    copied: int = 0  # members written unchanged
    reason: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def patched(self) -> list[str]:
        return [m.name for m in self.members if m.patched]

    @property
    def modules(self) -> list[ModuleRecord]:
        return [module for m in self.members for module in m.result.modules]

    @property
    def problems(self) -> list[str]:
        return self.notes + [f"{m.name}: {p}" for m in self.members for p in m.result.problems]

    @property
    def code_objects(self) -> int:
        return sum(m.result.code_objects for m in self.members)

    @property
    def cached(self) -> int:
        return sum(m.result.cached for m in self.members)

    @property
    def kernels_ok(self) -> int:
        return sum(m.result.kernels_ok for m in self.members)

    @property
    def kernels_failed(self) -> int:
        return sum(m.result.kernels_failed for m in self.members)

    def to_json(self) -> dict[str, Any]:
        return {"source": str(self.source), "destination": None if self.destination is None else str(self.destination),
                "format": "wheel", "status": self.status, "reason": self.reason, "targets": list(self.targets),
                "code_objects": self.code_objects, "modules_cached": self.cached, "kernels_ok": self.kernels_ok,
                "kernels_failed": self.kernels_failed, "patched": self.patched, "copied": self.copied,
                "problems": self.problems, "members": [m.to_json() for m in self.members]}


def repack_wheel(source: Path, out_dir: Path, targets: list[str], cache: Path | None = None,
                 jobs: int = 1, keep_signature: bool = False) -> WheelRepack:
    """Write `out_dir/<source name>`: the wheel with every PTX-carrying ELF member repacked for `targets`.

    FatkitError for a wheel fatkit will not read (hostile or corrupt) or an output it cannot write; the input is
    only read, and the output appears complete or not at all."""
    source, out_dir = Path(source), Path(out_dir)
    targets = translated_targets(targets)
    if not targets:
        raise UsageError("repack needs at least one target, like gfx942")
    destination = out_dir / source.name
    _check_output(source, out_dir, destination)
    report = WheelRepack(source, None, targets)
    with _mapped(source) as buf, _private_directory() as private:
        wheel = read_wheel(buf, str(source))
        try:
            _repack(wheel, report, destination, private, targets, cache, jobs, keep_signature)
        finally:
            wheel.close()
    return report


def _repack(wheel: WheelContents, report: WheelRepack, destination: Path, private: Path, targets: list[str],
            cache: Path | None, jobs: int, keep_signature: bool) -> None:
    """Repack the members one by one (the patched ones wait in `private`), then write the new wheel."""
    source = report.source
    patched: dict[str, Path] = {}
    for index, member in enumerate(wheel.members):
        repack = _repack_member(wheel, member, private / str(index), targets, cache, jobs, f"{source}!{member.name}",
                                keep_signature)
        if repack is None:
            continue
        report.members.append(repack)
        if repack.result.destination is not None and repack.result.status != "no-ptx":
            patched[member.name] = repack.result.destination
            repack.size, repack.sha256 = _size_and_sha256(repack.result.destination)
            repack.result.destination = Path(f"{destination}!{member.name}")
    report.status = _wheel_status([m.result.status for m in report.members], bool(patched))
    errors = [f"{m.name}: {m.result.reason}" for m in report.members if m.result.status == "error"]
    report.reason = "; ".join(errors) or None
    if report.status == "error":
        return
    if not patched:
        report.copied = len(wheel.members)
        _write_or_refuse(lambda: copy_file(source, destination), destination)
    else:
        changed = {m.name: (record_hash(bytes.fromhex(m.sha256)), m.size) for m in report.members
                   if m.sha256 is not None and m.size is not None}  # the patched members
        record, appended = rewrite_record(wheel.read_record(), changed, f"{source}!{wheel.record.name}")
        report.notes += [f"RECORD did not list {name}; its line was added" for name in appended]
        report.copied = len(wheel.members) - len(patched) - 1
        _write_or_refuse(lambda: _write_atomically(wheel, destination, os.stat(source).st_mode, record, patched),
                         destination)
    report.destination = destination


def repack_wheel_or_error(source: Path, out_dir: Path, targets: list[str], cache: Path | None = None,
                          jobs: int = 1, keep_signature: bool = False) -> WheelRepack:
    """`repack_wheel`, with a FatkitError turned into status `error` (a release run goes on with other inputs)."""
    try:
        return repack_wheel(source, out_dir, targets, cache, jobs, keep_signature)
    except FatkitError as exc:
        return WheelRepack(Path(source), None, list(targets), reason=str(exc))


def _wheel_status(statuses: list[str], patched: bool) -> str:
    if not patched:
        return "error" if "error" in statuses else "no-ptx"
    if all(s == "repacked" for s in statuses):
        return "repacked"
    return "failed" if all(s in ("failed", "error", "no-ptx") for s in statuses) else "partial"


def _check_output(source: Path, out_dir: Path, destination: Path) -> None:
    if not source.is_file():
        raise InputError("not a file", path=str(source))
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the output directory: {exc.strerror or exc}", path=str(out_dir)) from None
    if not out_dir.is_dir():
        raise UsageError("the output path is not a directory", path=str(out_dir))
    if destination.exists() and os.path.samefile(source, destination):
        raise UsageError("the output would replace the input wheel: choose another output directory",
                         path=str(destination))
    try:  # fail before translating anything when the output cannot be written (read-only, no permission)
        with tempfile.TemporaryFile(dir=out_dir, prefix=".fatkit-probe-"):
            pass
    except OSError as exc:
        raise InputError(f"cannot write to the output directory: {exc.strerror or exc}", path=str(out_dir)) from None


@contextlib.contextmanager
def _mapped(path: Path) -> Iterator[Buffer]:
    """A read-only map of the whole file (the page cache holds it; nothing is copied)."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                raise FormatError("empty file, not a wheel", path=str(path))
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=str(path)) from None
    try:
        yield buf
    finally:
        with contextlib.suppress(BufferError):  # a view still held (by a traceback): unmapped when freed
            buf.close()


@contextlib.contextmanager
def _private_directory() -> Iterator[Path]:
    """A temporary directory only this process uses (0700), removed afterwards."""
    try:
        directory = tempfile.TemporaryDirectory(prefix="fatkit-wheel-")
    except OSError as exc:
        raise InputError(f"cannot create a temporary directory: {exc.strerror or exc}",
                         path=tempfile.gettempdir()) from None
    with directory as path:
        yield Path(path)


def _repack_member(wheel: WheelContents, member: Member, work: Path, targets: list[str], cache: Path | None,
                   jobs: int, shown_as: str, keep_signature: bool) -> MemberRepack | None:
    """repack_binary's result for a member that is an ELF or PE executable or library carrying PTX, else None.
    The member is streamed to `work` (a private directory), and paths in the result name it `wheel!member`."""
    if member.is_dir or member.info.file_size < len(ELF_MAGIC) or not wheel.head(member).startswith(HOST_MAGICS):
        return None
    basename = member.name.rsplit("/", 1)[-1]
    extracted = work / (basename if basename not in ("", ".") else "member")
    try:
        work.mkdir()
        with open(extracted, "wb") as out:
            wheel.stream(member, out)
    except OSError as exc:
        raise InputError(f"cannot write a temporary copy of {member.name}: {exc.strerror or exc}",
                         path=str(work)) from None
    binaries = list(scan_path(extracted))
    if not (len(binaries) == 1 and binaries[0].format in HOST_FORMATS
            and any(entry.kind == "ptx" for entry in binaries[0].entries)):
        extracted.unlink()
        return None
    for rewritten in (member, wheel.record):  # before translating: both are compressed again
        if rewritten.info.compress_type not in WRITABLE_METHODS:
            raise FormatError(f"{rewritten.name} uses compression method {rewritten.info.compress_type}; fatkit "
                              "rewrites only stored, deflated and bzip2 members", path=wheel.path)
    result = repack_binary(extracted, work / "patched", targets, cache=cache, jobs=jobs,
                           keep_signature=keep_signature)
    extracted.unlink()

    def shown(text: str) -> str:
        return text.replace(str(work / "patched"), shown_as).replace(str(extracted), shown_as)

    result.source = Path(shown_as)
    result.reason = result.reason and shown(result.reason)
    result.problems = [shown(p) for p in result.problems]
    return MemberRepack(member.name, result)


def _size_and_sha256(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


def write_wheel(wheel: WheelContents, out: BinaryIO, record: bytes, patched: dict[str, Path] | None = None) -> None:
    """The wheel's members in order into `out` (seekable): `patched` ones (name → file) and RECORD (`record`)
    with new contents, the others copied compressed as they are."""
    patched = patched or {}
    writer = ZipWriter(out)
    for member in wheel.members:
        if member.name in patched:
            with open(patched[member.name], "rb") as source:
                writer.add(member, source, os.fstat(source.fileno()).st_size)
        elif member is wheel.record:
            writer.add(member, io.BytesIO(record), len(record))
        else:
            with wheel.raw(member) as raw:
                writer.copy(member, raw)
    writer.finish(wheel.archive.comment)


def _write_atomically(wheel: WheelContents, destination: Path, mode: int, record: bytes,
                      patched: dict[str, Path]) -> None:
    with atomic_output(destination, mode) as out:
        write_wheel(wheel, out, record, patched)


def _write_or_refuse(write, destination: Path) -> None:
    """Run a write of `destination`; an OS error (disk full, read-only directory) becomes a FatkitError."""
    try:
        write()
    except OSError as exc:
        raise InputError(f"cannot write the repacked wheel: {exc.strerror or exc}; nothing was written",
                         path=str(destination)) from None
