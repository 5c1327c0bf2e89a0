"""Add one non-loaded section to a host ELF file, changing nothing the loader, the CUDA runtime or a tool reads.

The patched file is the original file, byte for byte, followed by what `formats/elf_append.py` lays out (the
section's bytes, the grown name table and a new section header table), with the ELF header's `e_shoff` and
`e_shnum` updated: the only original bytes that change. lief was not used: its builder rewrites and moves more
than this (see docs/repack.md).

Writes are atomic: a temporary file next to the destination, fsync'd, then renamed over the final name.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO, Iterator

from fatkit.errors import InputError
from fatkit.formats.elf import ElfView
from fatkit.formats.elf_append import appended_section


@contextlib.contextmanager
def atomic_output(destination: Path, mode: int | None = None) -> Iterator[BinaryIO]:
    """A file to write `destination` through: it appears under its name only once complete (fsync + rename);
    on any error, or a kill mid-write, only a hidden temporary in the same directory can remain."""
    destination = Path(destination)
    fd, temporary = tempfile.mkstemp(prefix=f".{destination.name[:40]}.", suffix=".fatkit-tmp",
                                     dir=destination.parent)
    try:
        with os.fdopen(fd, "w+b") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(temporary, mode & 0o7777)
        os.replace(temporary, destination)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def copy_file(source: Path, destination: Path) -> None:
    """An unchanged copy of `source`, written atomically, with its permission bits."""
    with open(source, "rb") as src, atomic_output(destination, os.stat(source).st_mode) as out:
        shutil.copyfileobj(src, out, 1 << 20)


def check_patchable(source: Path, name: str) -> None:
    """FatkitError unless `add_section(source, …, name, …)` can patch the file (checked before translating)."""
    _with_plan(Path(source), name, b"", lambda src, size, tail, fields: None)


def add_section(source: Path, destination: Path, name: str, payload: bytes) -> None:
    """Write `source` plus a non-alloc PROGBITS section `name` holding `payload` to `destination` (atomically).

    FatkitError when the ELF is one this does not patch: not 64-bit little-endian, no section header table
    (section-stripped), extended section numbering, or a section of that name already there.
    """
    def write(src: BinaryIO, size: int, tail: bytes, header_fields: list[tuple[int, bytes]]) -> None:
        src.seek(0)
        with atomic_output(destination, os.fstat(src.fileno()).st_mode) as out:
            shutil.copyfileobj(src, out, 1 << 20)
            if out.tell() != size:
                raise InputError("the file changed while it was copied", path=str(source))
            out.write(tail)
            for offset, raw in header_fields:
                out.seek(offset)
                out.write(raw)

    _with_plan(Path(source), name, payload, write)


def _with_plan(source: Path, name: str, payload: bytes, then) -> None:
    """Plan the patch of `source` (open, mapped, checked) and call `then(file, size, tail, header_fields)`."""
    try:
        with open(source, "rb") as src:
            size = os.fstat(src.fileno()).st_size
            if size == 0:
                raise InputError("empty file, not an ELF", path=str(source))
            with mmap.mmap(src.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                tail, header_fields = appended_section(ElfView(buf), size, name, payload, str(source))
            then(src, size, tail, header_fields)
    except OSError as exc:
        raise InputError(f"cannot repack: {exc.strerror or exc}", path=str(source)) from None
