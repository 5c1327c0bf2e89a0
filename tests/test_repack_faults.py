"""Wheel repack under faults: kill -9 mid-write, a full disk, a read-only or misplaced output directory, and
hostile wheels. In every case the input is unchanged, nothing is written outside the output directory, and
the final name holds a complete wheel or nothing."""

from __future__ import annotations

import errno
import hashlib
import io
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from fatkit.cache.store import DB_NAME
from fatkit.errors import FatkitError, InputError, LimitError, UsageError
from fatkit.repack import wheel as wheel_module
from fatkit.repack.wheel import (CENTRAL_HEADER, CENTRAL_SIGNATURE, END_RECORD, END_SIGNATURE, LOCAL_HEADER,
                                 LOCAL_SIGNATURE, repack_wheel)
from tests.helpers import sample
from tests.test_repack_wheel import RECORD, WHEEL_NAME, Item, build_wheel, demo_items, record_problems

ROOT = Path(__file__).parent.parent


@pytest.fixture(scope="module")
def library() -> bytes:
    return sample("nv_lib.so").read_bytes()


def snapshot(directory: Path) -> dict[str, tuple[int, str]]:
    """Every file under `directory`: size and sha256 (to show what changed and that nothing else did)."""
    return {str(p.relative_to(directory)): (p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(directory.rglob("*")) if p.is_file()}


def refused(source: Path, out_dir: Path, error: type[FatkitError] = FatkitError, match: str | None = None) -> str:
    """repack_wheel must raise `error`; the input stays as it was and no file appears or changes anywhere under
    the input's or the output's parent directory (the output directory itself may be created, empty)."""
    roots = {source.parent.parent, out_dir.parent}
    before = {root: snapshot(root) for root in roots}
    with pytest.raises(error, match=match) as caught:
        repack_wheel(source, out_dir, ["gfx942"])
    assert {root: snapshot(root) for root in roots} == before
    return str(caught.value)


# --- kill -9 -------------------------------------------------------------------------------------------------

_KILLED_REPACK = """
import sys, time
from pathlib import Path
from fatkit.repack import wheel
write = wheel.ZipWriter.write
def slow(self, data):  # a slow disk: the kill lands while the wheel is being written
    time.sleep(0.02)
    write(self, data)
wheel.ZipWriter.write = slow
wheel.repack_wheel(Path(sys.argv[1]), Path(sys.argv[2]), ["gfx942"], cache=Path(sys.argv[3]))
print("finished")
"""


def _temporaries(directory: Path) -> list[Path]:
    return [p for p in directory.iterdir() if p.name.endswith(".fatkit-tmp")] if directory.exists() else []


@pytest.mark.parametrize("when", ["translating", "writing"])
def test_kill_9_leaves_no_partial_wheel_and_the_input_unchanged(when, library, tmp_path):
    source = build_wheel(tmp_path / "in" / WHEEL_NAME, demo_items(library) + [
        Item("demo_pkg/blob.bin", os.urandom(2 << 20), zipfile.ZIP_STORED)])
    before = snapshot(source.parent)
    out, cache, private = tmp_path / "out", tmp_path / "cache", tmp_path / "tmp"
    private.mkdir()
    if when == "writing":  # translate once, so the killed run spends its time writing
        repack_wheel(source, tmp_path / "warm", ["gfx942"], cache=cache)
    child = subprocess.Popen([sys.executable, "-c", _KILLED_REPACK, str(source), str(out), str(cache)],
                             cwd=ROOT, env={**os.environ, "TMPDIR": str(private)}, stdout=subprocess.PIPE)
    deadline = time.monotonic() + 120
    if when == "writing":
        while not any(t.stat().st_size > 0 for t in _temporaries(out)):
            assert child.poll() is None and time.monotonic() < deadline, "the child finished before the write"
            time.sleep(0.005)
    else:
        while not (cache / DB_NAME).exists():  # the member is extracted and its translation has begun
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert child.stdout.read() == b""  # killed before it finished
    assert not (out / WHEEL_NAME).exists()
    assert snapshot(source.parent) == before
    assert len(_temporaries(out)) == (1 if when == "writing" else 0)  # a hidden temporary, never the final name
    result = repack_wheel(source, out, ["gfx942"], cache=cache)  # a rerun completes next to the leftover
    assert result.status == "repacked" and record_problems(result.destination) == []
    with zipfile.ZipFile(result.destination) as archive:
        assert archive.testzip() is None


# --- full disk, read-only output, output next to the input ----------------------------------------------------


def _full_after(limit: int):
    """A ZipWriter.write that fails with ENOSPC once `limit` bytes have been written."""
    written = [0]
    real = wheel_module.ZipWriter.write

    def write(self, data):
        written[0] += len(data)
        if written[0] > limit:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(self, data)
    return write


@pytest.mark.parametrize("fraction", [0, 0.5, 0.99])
def test_disk_full_while_writing_the_wheel(fraction, library, tmp_path, monkeypatch):
    """The disk fills at the first byte, half way, and near the end (the output is a little larger than the input)."""
    source = build_wheel(tmp_path / "in" / WHEEL_NAME, demo_items(library))
    monkeypatch.setattr(wheel_module.ZipWriter, "write", _full_after(int(source.stat().st_size * fraction)))
    message = refused(source, tmp_path / "out", InputError, "No space left on device")
    assert "nothing was written" in message


def test_disk_full_while_extracting_a_member(library, tmp_path, monkeypatch):
    source = build_wheel(tmp_path / "in" / WHEEL_NAME, demo_items(library))

    class FullFile(io.FileIO):
        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(wheel_module, "open", lambda path, mode="r", *a, **k: FullFile(path, "w") if "w" in mode
                        else io.open(path, mode, *a, **k), raising=False)
    message = refused(source, tmp_path / "out", InputError, "No space left on device")
    assert "temporary copy of demo_pkg/libkern.so" in message


def test_disk_full_while_copying_a_wheel_without_ptx(tmp_path, monkeypatch):
    source = build_wheel(tmp_path / "in" / "plain-1.0-py3-none-any.whl", [Item("plain/__init__.py", b"X = 1\n")],
                         record_name="plain-1.0.dist-info/RECORD")

    def full(src, dst, length=0):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(shutil, "copyfileobj", full)
    refused(source, tmp_path / "out", InputError, "No space left on device")


_READ_ONLY_CHILD = """
import os, sys
from pathlib import Path
from fatkit.errors import FatkitError
from fatkit.repack.wheel import repack_wheel
if os.geteuid() == 0:
    os.setgid(65534); os.setuid(65534)  # root ignores permissions: drop to nobody
try:
    repack_wheel(Path(sys.argv[1]), Path(sys.argv[2]), ["gfx942"])
except FatkitError as exc:
    print("refused:", exc)
"""


def test_read_only_output_directory_is_a_clear_error_before_any_work(library):
    base = Path(tempfile.mkdtemp())  # not under pytest's 0700 tmp dir: the unprivileged child must reach it
    try:
        source = build_wheel(base / "in" / WHEEL_NAME, demo_items(library))
        out = base / "out"
        out.mkdir()
        for directory in (base, base / "in"):
            os.chmod(directory, 0o755)
        os.chmod(source, 0o644)
        os.chmod(out, 0o555)
        before = snapshot(base)
        started = time.monotonic()
        result = subprocess.run([sys.executable, "-c", _READ_ONLY_CHILD, str(source), str(out)], cwd=ROOT,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert "refused:" in result.stdout and "cannot write to the output directory" in result.stdout
        assert "Permission denied" in result.stdout and time.monotonic() - started < 30
        assert snapshot(base) == before
    finally:
        os.chmod(base / "out", 0o755)
        shutil.rmtree(base)


def test_output_that_would_replace_the_input_is_refused(library, tmp_path):
    source = build_wheel(tmp_path / "in" / WHEEL_NAME, demo_items(library))
    refused(source, source.parent, UsageError, "would replace the input")
    (tmp_path / "link").symlink_to(source.parent)
    refused(source, tmp_path / "link", UsageError, "would replace the input")
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(FatkitError, match="cannot create the output directory|not a directory"):
        repack_wheel(source, tmp_path / "file", ["gfx942"])


def test_output_directory_inside_the_input_tree(library, tmp_path):
    """A directory below the wheel's own is an ordinary output directory: the input is only read."""
    source = build_wheel(tmp_path / "in" / WHEEL_NAME, demo_items(library))
    before = source.read_bytes()
    result = repack_wheel(source, source.parent / "amd", ["gfx942"])
    assert result.status == "repacked" and result.destination == source.parent / "amd" / WHEEL_NAME
    assert source.read_bytes() == before and sorted(p.name for p in source.parent.iterdir()) == ["amd", WHEEL_NAME]


# --- hostile wheels --------------------------------------------------------------------------------------------


@dataclass
class Raw:
    """A stored member of a hand-made zip; `at` points its central record at another member's local header
    (by index), `local_name` gives the local header a different name, `claimed` a different uncompressed size."""

    name: str
    data: bytes
    flags: int = 0
    mode: int = stat.S_IFREG | 0o644
    at: int | None = None
    local_name: str | None = None
    claimed: int | None = None


def raw_zip(members: list[Raw]) -> bytes:
    """A zip written field by field, for what zipfile's writer will not produce."""
    out = bytearray()
    offsets: list[int] = []
    for m in members:
        if m.at is not None:
            offsets.append(offsets[m.at])
            continue
        offsets.append(len(out))
        name = (m.local_name or m.name).encode()
        out += LOCAL_HEADER.pack(LOCAL_SIGNATURE, 20, 0, m.flags, 0, 0, 0x21, zlib.crc32(m.data), len(m.data),
                                 m.claimed or len(m.data), len(name), 0) + name + m.data
    start = len(out)
    for m, offset in zip(members, offsets):
        name = m.name.encode()
        out += CENTRAL_HEADER.pack(CENTRAL_SIGNATURE, 20, 3, 20, 0, m.flags, 0, 0, 0x21, zlib.crc32(m.data),
                                   len(m.data), m.claimed or len(m.data), len(name), 0, 0, 0, 0, m.mode << 16,
                                   offset) + name
    out += END_RECORD.pack(END_SIGNATURE, 0, 0, len(members), len(members), len(out) - start, start, 0)
    return bytes(out)


def hostile(tmp_path: Path, members: list[Raw]) -> Path:
    path = tmp_path / "in" / WHEEL_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw_zip(members + [Raw(RECORD, b"")]))
    return path


ELF = b"\x7fELF" + bytes(60)
HOSTILE = {
    "dot-dot": ([Raw("demo_pkg/../../evil.py", b"x")], "path goes up"),
    "absolute": ([Raw("/tmp/evil.py", b"x")], "absolute path"),
    "drive": ([Raw("C:/evil.py", b"x")], "absolute path"),
    "backslash": ([Raw("demo_pkg\\..\\evil.py", b"x")], "backslash"),
    "nul": ([Raw("demo_pkg/a.py\0.so", b"x")], "control character"),
    "newline": ([Raw("demo_pkg/a.py\nb.py", b"x")], "control character"),
    "symlink": ([Raw("demo_pkg/link", b"../../../../etc/passwd", mode=stat.S_IFLNK | 0o777)], "a symlink"),
    "device": ([Raw("demo_pkg/dev", b"", mode=stat.S_IFCHR | 0o666)], "a special file"),
    "duplicate": ([Raw("demo_pkg/a.py", b"1"), Raw("demo_pkg/a.py", b"2")], "appears twice"),
    "local-name": ([Raw("demo_pkg/a.py", b"x", local_name="demo_pkg/b.py")], "names another file"),
    "shared-local-header": ([Raw("demo_pkg/a.bin", b"y" * 64), Raw("demo_pkg/a.bin2", b"z", at=0)],
                            "names another file"),
    "encrypted": ([Raw("demo_pkg/a.py", b"x", flags=1)], "encrypted"),
    "elf-claims-4-GB": ([Raw("demo_pkg/lib.so", ELF, claimed=0xFFFFFFF0)], "above the limit"),
    "elf-claims-less-than-it-holds": ([Raw("demo_pkg/lib.so", ELF, claimed=16)], "CRC"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_wheels_are_refused_without_writing(case, tmp_path):
    members, why = HOSTILE[case]
    message = refused(hostile(tmp_path, members), tmp_path / "out")
    assert why in message and WHEEL_NAME in message


def test_overlapping_members_are_refused(tmp_path):
    """The zip-bomb construction: a second member whose local header lies inside the first member's data."""
    inner = Raw("demo_pkg/b.bin", b"z" * 16)
    inner_bytes = raw_zip([inner])[:LOCAL_HEADER.size + len(inner.name) + len(inner.data)]
    first = Raw("demo_pkg/a.bin", b"y" * 8 + inner_bytes)
    path = tmp_path / "in" / WHEEL_NAME
    path.parent.mkdir(parents=True)
    data = bytearray(raw_zip([first, Raw(RECORD, b"")]))
    # add a central record for the inner member, pointing into the first member's data
    start = struct.unpack_from("<L", data, len(data) - 6)[0]
    inner_offset = LOCAL_HEADER.size + len(first.name) + 8
    name = inner.name.encode()
    extra_record = CENTRAL_HEADER.pack(CENTRAL_SIGNATURE, 20, 3, 20, 0, 0, 0, 0, 0x21, zlib.crc32(inner.data),
                                       len(inner.data), len(inner.data), len(name), 0, 0, 0, 0,
                                       (stat.S_IFREG | 0o644) << 16, inner_offset) + name
    end = END_RECORD.unpack_from(data, len(data) - END_RECORD.size)
    central = bytes(data[start:len(data) - END_RECORD.size]) + extra_record
    path.write_bytes(bytes(data[:start]) + central + END_RECORD.pack(END_SIGNATURE, 0, 0, end[3] + 1, end[4] + 1,
                                                                       len(central), start, 0))
    assert len(zipfile.ZipFile(path).infolist()) == 3  # zipfile itself accepts it
    assert "overlap" in refused(path, tmp_path / "out")


@pytest.mark.parametrize("case, why", [
    ("no-record", "not a wheel: 0 "), ("two-records", "not a wheel: 2 "), ("signed", "signed"),
    ("truncated", "not a readable zip"), ("not-a-zip", "not a readable zip"), ("empty", "empty file"),
])
def test_files_that_are_not_wheels_are_refused(case, why, library, tmp_path):
    path = tmp_path / "in" / WHEEL_NAME
    path.parent.mkdir(parents=True)
    good = build_wheel(tmp_path / "good" / WHEEL_NAME, demo_items(library)).read_bytes()
    if case == "no-record":
        path.write_bytes(raw_zip([Raw("demo_pkg/__init__.py", b"")]))
    elif case == "two-records":
        path.write_bytes(raw_zip([Raw(RECORD, b""), Raw("other-1.dist-info/RECORD", b"")]))
    elif case == "signed":
        path.write_bytes(raw_zip([Raw(RECORD, b""), Raw(RECORD + ".jws", b"{}")]))
    elif case == "truncated":
        path.write_bytes(good[:len(good) // 2])
    elif case == "not-a-zip":
        path.write_bytes(b"PK\x03\x04" + os.urandom(4000))
    else:
        path.write_bytes(b"")
    refused(path, tmp_path / "out", match=why)


def test_record_that_is_not_utf8_or_not_csv(library, tmp_path):
    for record, why in ((b"\xff\xfe broken", "not UTF-8"), (b'"demo_pkg/a.py"x,sha256=,1\n', "not CSV")):
        source = build_wheel(tmp_path / why / WHEEL_NAME, demo_items(library), record="")
        data = source.read_bytes()
        with zipfile.ZipFile(source) as archive:
            items = [(i, archive.read(i)) for i in archive.infolist()]
        with zipfile.ZipFile(source, "w") as archive:
            for info, member in items:
                archive.writestr(info, record if info.filename == RECORD else member)
        assert source.read_bytes() != data
        refused(source, tmp_path / why / "out", match=why)


def test_record_missing_lines_get_the_patched_member_added(library, tmp_path):
    items = demo_items(library)
    source = build_wheel(tmp_path / "in" / WHEEL_NAME, items, record=f"{items[0].name},,\n")
    result = repack_wheel(source, tmp_path / "out", ["gfx942"])
    assert result.status == "repacked"
    assert result.problems == ["RECORD did not list demo_pkg/libkern.so; its line was added"]
    with zipfile.ZipFile(result.destination) as archive:
        lines = archive.read(RECORD).decode().splitlines()
        assert lines[0] == f"{items[0].name},," and lines[1].startswith("demo_pkg/libkern.so,sha256=")
        assert len(lines) == 2


def test_compressed_bombs_are_never_expanded(library, tmp_path, monkeypatch):
    """A non-ELF member of 64 MB of zeros is copied compressed; an ELF member above the payload limit is refused."""
    bomb = Item("demo_pkg/zeros.bin", bytes(64 << 20))
    source = build_wheel(tmp_path / "in" / WHEEL_NAME, demo_items(library) + [bomb])
    result = repack_wheel(source, tmp_path / "out", ["gfx942"])
    with zipfile.ZipFile(source) as before, zipfile.ZipFile(result.destination) as after:
        old, new = before.getinfo(bomb.name), after.getinfo(bomb.name)
        assert (old.compress_size, old.CRC, old.file_size) == (new.compress_size, new.CRC, new.file_size)
    assert result.destination.stat().st_size < source.stat().st_size + 100_000

    monkeypatch.setattr(wheel_module, "MAX_PAYLOAD", 1 << 20)
    elf_bomb = build_wheel(tmp_path / "elf" / WHEEL_NAME, [Item("demo_pkg/lib.so", ELF + bytes(4 << 20))])
    refused(elf_bomb, tmp_path / "elf" / "out", LimitError, "above the limit")


def test_an_lzma_library_is_refused_before_translation(library, tmp_path):
    """LZMA members are read (to find libraries) but not written: a library to patch with it is refused."""
    items = [Item(i.name, i.data, zipfile.ZIP_LZMA if i.name.endswith(".so") else i.method, i.mode)
             for i in demo_items(library)]
    refused(build_wheel(tmp_path / "in" / WHEEL_NAME, items), tmp_path / "out", match="compression method 14")
