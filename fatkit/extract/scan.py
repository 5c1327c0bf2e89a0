"""Find every GPU-code container in files, directories, `.a` archives, wheels and zips.

Order of discovery inside one host ELF or PE image (each later step only adds what the earlier ones did not
find):
1. registration wrappers (`.nvFatBinSegment`, `.hipFatBinSegment`; in PE `.nvFatBi`, `.hipFatB`): what the
   runtime actually loads;
2. known device sections (`.nv_fatbin`, `__nv_relfatbin`, `.hip_fatbin`, …; in PE their 8-byte cuts
   `.nv_fatb`, `__nv_rel`, `.hip_fat`), walked container by container;
3. a validated magic scan of the whole file: fatbins in `.ldata`, `.cask_resource`, `.rodata` (bin2c),
   section-stripped binaries, members of archives.
Every container records where it lies (section) and how it was found. The readers of archives, standalone
cubins, PTX and AMD code objects and of fatkit's own `.fatkit_amd` section are imported when their magic or
section is found (formats/magic.py), so a file is charged only for what it holds.
"""

from __future__ import annotations

import mmap
import os
import re
import stat
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, get_args

from fatkit.errors import FatkitError, FormatError, InputError
from fatkit.extract.model import Binary, BinaryFormat, Container, ContainerFormat, Entry, EntryKind
from fatkit.extract.report import judge
from fatkit.formats import fatbin, pe, wrappers
from fatkit.formats.common import MAX_PAYLOAD, Buffer, find, need
from fatkit.formats.fatbin import FatbinEntry
from fatkit.formats.elf import EM_AMDGPU, EM_CUDA, ET_DYN, ET_EXEC, ET_REL, PT_INTERP, ElfView
from fatkit.formats.magic import (AR_MAGIC, BUNDLE_MAGIC, CCOB_MAGIC, DOS_MAGIC, ELF_MAGIC, FATBIN_MAGIC_BYTES,
                                  FATKIT_AMD_SECTION)
from fatkit.formats.pe import PeView
from fatkit.formats.zip import LOCAL_HEADER_NAME_LENGTHS
from fatkit.formats.zip import LOCAL_SIGNATURE as ZIP_LOCAL_SIGNATURE

if TYPE_CHECKING:
    import zipfile

ET_NAMES: dict[int, BinaryFormat] = {ET_REL: "elf-rel", ET_EXEC: "elf-exec", ET_DYN: "elf-shared"}

FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin", ".nv.fatbin", "__fatbin", "__nv_fatbin")
BUNDLE_SECTIONS = (".hip_fatbin",)
BUNDLE_SECTION_PREFIX = "__CLANG_OFFLOAD_BUNDLE__"  # clang-offload-bundler -type=o: one section per target
LLVM_OFFLOADING_SECTION = ".llvm.offloading"

# Standalone device files recognised by name when their bytes do not say what they are (PTX is text).
DEVICE_SUFFIXES = (".ptx", ".cubin", ".fatbin", ".hsaco", ".co", ".fatbin.c")
_PTX_START = re.compile(rb"\A(?:\s|//[^\n]*\n|/\*.*?\*/)*\.version\s+\d+\.\d+", re.S)
_NONZERO = re.compile(rb"[^\x00]")
SCAN_WINDOW = 32 << 20
SCAN_OVERLAP = len(BUNDLE_MAGIC)


@dataclass(frozen=True)
class Source:
    """Bytes to scan and the name to report them under (`file`, or `outer!member` for archive members)."""

    name: str
    buf: Buffer


# ---------------------------------------------------------------------------------------------------------
# inputs


class BrokenLink(InputError):
    """A symbolic link met in a directory walk whose target does not exist: nothing to read, only to say."""


def expand_inputs(paths: Iterable[str | Path], skipped: list[FatkitError] | None = None) -> list[Path]:
    """Files named directly, plus every file under named directories, sorted.

    Symbolic links are followed, to files and to directories, and each real file comes once however many
    names reach it (the first in walk order is kept: a directory of symlinks to libraries is inspected like
    the libraries). A symlinked directory that leads back into the walk (a loop) is skipped. What a walk passes
    over goes to `skipped`: a broken symbolic link (`BrokenLink`) and a directory that cannot be listed
    (`InputError`). InputError when a path does not exist, or a directory holds no file at all."""
    files: list[Path] = []
    seen: set[tuple[int, int]] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            passed_over: list[FatkitError] = []
            found = _walk(path, seen, passed_over)
            if not found:
                broken = sum(isinstance(p, BrokenLink) for p in passed_over)
                note = f" ({broken} broken symbolic link{'s' if broken != 1 else ''})" if broken else ""
                raise InputError(f"no files under this directory{note}", path=str(path))
            files.extend(found)
            if skipped is not None:
                skipped.extend(passed_over)
        elif path.exists():
            if _first_time(path, seen):
                files.append(path)
        else:
            raise InputError(f"no such file or directory: {path}")
    return files


def _walk(top: Path, seen: set[tuple[int, int]], skipped: list[FatkitError]) -> list[Path]:
    """Files under `top` (links followed), each real file once, directories on the current path never again."""
    found: list[Path] = []
    ancestors: set[tuple[int, int]] = set()

    def visit(directory: Path) -> None:
        info = directory.stat()
        ident = (info.st_dev, info.st_ino)
        if ident in ancestors:  # a link back to a directory being walked: a loop
            return
        ancestors.add(ident)
        try:
            children = sorted(directory.iterdir())
        except OSError as exc:
            skipped.append(InputError(f"cannot list this directory: {exc.strerror}", path=str(directory)))
            children = []
        for child in children:
            try:
                if child.is_dir():
                    visit(child)
                elif child.is_file():
                    if _first_time(child, seen):
                        found.append(child)
                elif child.is_symlink() and not child.exists():
                    skipped.append(BrokenLink(f"broken symbolic link (to {os.readlink(child)})", path=str(child)))
            except OSError as exc:  # a link through an unreadable directory, or a file gone since listed
                skipped.append(InputError(f"cannot read: {exc.strerror}", path=str(child)))
        ancestors.discard(ident)

    visit(top)
    return found


def _first_time(path: Path, seen: set[tuple[int, int]]) -> bool:
    info = path.stat()
    ident = (info.st_dev, info.st_ino)
    if ident in seen:
        return False
    seen.add(ident)
    return True


def _map_file(path: Path) -> Buffer:
    try:
        # stat before open: opening a FIFO named on the command line would wait for a writer forever
        if not stat.S_ISREG(Path(path).stat().st_mode):
            raise InputError("not a regular file", path=str(path))
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            if size == 0:
                return b""
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=str(path)) from None


def _looks_like_device_code(head: bytes, name: str) -> bool:
    """Whether a file (member) may hold GPU code: worth reading whole. Cheap: first bytes and the name."""
    return (
        head.startswith((ELF_MAGIC, DOS_MAGIC, AR_MAGIC, ZIP_LOCAL_SIGNATURE, FATBIN_MAGIC_BYTES, BUNDLE_MAGIC[:8],
                         CCOB_MAGIC))
        or name.lower().endswith(DEVICE_SUFFIXES)
        or bool(_PTX_START.match(head))
    )


def scan_path(path: str | Path, *, only_candidates: bool = False) -> Iterator[Binary]:
    """Binaries in one file: itself, or the members of an `.a`, wheel or zip.

    With `only_candidates` (directory walks), files that cannot hold device code are skipped unread.
    """
    path = Path(path)
    buf = _map_file(path)
    if only_candidates and not _looks_like_device_code(bytes(buf[:4096]), path.name):
        return
    yield from scan_source(Source(str(path), buf), only_candidates=only_candidates)


def scan_paths(paths: Iterable[str | Path], *, on_file: Callable[[Path], None] | None = None,
               unreadable: list[FatkitError] | None = None) -> Iterator[Binary]:
    """Binaries in files and directory trees (`expand_inputs`: links followed, each real file once); `on_file`
    is called before each file (progress bars). `unreadable` collects, for each binary nothing could be read
    from (errors, no container: truncated, corrupt, not a regular file), its first error: commands exit 1. What
    a directory walk passed over comes last, each an unreadable Binary: a directory that cannot be listed
    (collected as unreadable too) and a broken symbolic link (a `BrokenLink`: named, not collected, since it
    names nothing that could have been read)."""
    paths = list(paths)
    walked = {Path(raw) for raw in paths if Path(raw).is_dir()}
    skipped: list[FatkitError] = []
    files = expand_inputs(paths, skipped)
    for file in files:
        if on_file is not None:
            on_file(file)
        try:
            for binary in scan_path(file, only_candidates=any(file.is_relative_to(d) for d in walked)):
                yield _noted(binary, unreadable)
        except FatkitError as exc:
            yield _noted(_judged(Binary(path=str(file), size=0, format="unreadable",
                                        errors=[exc.located(str(file))])), unreadable)
    for problem in skipped:
        yield _noted(_judged(Binary(path=problem.path or "", size=0, format="unreadable", errors=[problem])),
                     unreadable)


def _noted(binary: Binary, unreadable: list[FatkitError] | None) -> Binary:
    if unreadable is not None and binary.errors and not binary.containers \
            and not isinstance(binary.errors[0], BrokenLink):
        unreadable.append(binary.errors[0].located(binary.path))
    return binary


def _judged(binary: Binary) -> Binary:
    """The binary with its module-by-module verdict (extract/report.py)."""
    binary.verdict = judge(binary)
    return binary


def scan_source(source: Source, *, only_candidates: bool = False) -> Iterator[Binary]:
    """A Binary for the source, or one per member when the source is an archive or a zip; each judged."""
    head = bytes(source.buf[:8])
    if head.startswith(AR_MAGIC):
        found: Iterable[Binary] = _scan_archive(source)
    elif head.startswith(ZIP_LOCAL_SIGNATURE):
        found = _scan_zip(source, only_candidates=only_candidates)
    else:
        found = [scan_buffer(source)]
    for binary in found:
        yield binary if binary.verdict is not None else _judged(binary)


def _scan_archive(source: Source) -> Iterator[Binary]:
    from fatkit.formats import ar

    try:
        members = list(ar.members(source.buf))
    except FatkitError as exc:
        yield Binary(path=source.name, size=len(source.buf), format="ar-archive", errors=[exc.located(source.name)])
        return
    view = memoryview(source.buf)
    for member in members:
        yield scan_buffer(Source(f"{source.name}!{member.name}", view[member.offset:member.offset + member.size]))


def zip_errors() -> tuple[type[Exception], ...]:
    """What zipfile raises on corrupt archives: bad structure, broken streams, and unsupported versions or
    methods (RuntimeError covers those: zipfile raises its subclass for them). zipfile (6 ms to import) is
    loaded by the first zip or wheel scanned."""
    import lzma
    import zipfile
    import zlib

    return (zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, OSError, ValueError, RuntimeError,
            IndexError, KeyError)


def _scan_zip(source: Source, *, only_candidates: bool) -> Iterator[Binary]:
    import zipfile

    corrupt = zip_errors()
    try:
        archive = zipfile.ZipFile(BufferFile(source.buf))
        infos = [i for i in archive.infolist() if i.filename and not i.filename.endswith("/")]
    except corrupt as exc:
        yield Binary(path=source.name, size=len(source.buf), format="zip",
                     errors=[FormatError(f"zip is corrupt: {exc}", path=source.name)])
        return
    scanned = False
    for info in infos:
        name = f"{source.name}!{info.filename}"
        try:
            data = _zip_member(source.buf, archive, info)
        except corrupt as exc:
            yield Binary(path=name, size=info.file_size, format="unreadable",
                         errors=[FormatError(f"cannot read zip member: {exc}", path=name)])
            continue
        except FatkitError as exc:
            yield Binary(path=name, size=info.file_size, format="unreadable", errors=[exc.located(name)])
            continue
        if data is not None:
            scanned = True
            yield from scan_source(Source(name, data), only_candidates=only_candidates)
    if not scanned:  # a zip without a member that may hold device code is still reported (as holding none)
        yield Binary(path=source.name, size=len(source.buf), format="zip")


def _zip_member(buf: Buffer, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Buffer | None:
    """A member's bytes if it may hold device code, else None. Stored members are slices of the zip itself;
    compressed ones are inflated in memory (never to disk), capped at MAX_PAYLOAD."""
    if info.file_size > MAX_PAYLOAD:
        raise FormatError(f"zip member claims {info.file_size} bytes, above the limit of {MAX_PAYLOAD}")
    import zipfile

    if info.compress_type == zipfile.ZIP_STORED:
        need(buf, info.header_offset, LOCAL_HEADER_NAME_LENGTHS.size, "zip local header")
        signature, name_len, extra_len = LOCAL_HEADER_NAME_LENGTHS.unpack_from(buf, info.header_offset)
        start = info.header_offset + LOCAL_HEADER_NAME_LENGTHS.size + name_len + extra_len
        if signature != ZIP_LOCAL_SIGNATURE:
            raise FormatError("zip local header signature is wrong", offset=info.header_offset)
        need(buf, start, info.file_size, "stored zip member")
        stored = memoryview(buf)[start:start + info.file_size]
        return stored if _looks_like_device_code(bytes(stored[:4096]), info.filename) else None
    with archive.open(info) as member:
        head = member.read(4096)
        if not _looks_like_device_code(head, info.filename):
            return None
        data = head + member.read(MAX_PAYLOAD + 1 - len(head))
    if len(data) > MAX_PAYLOAD:
        raise FormatError(f"zip member expands past the limit of {MAX_PAYLOAD} bytes")
    return data


class BufferFile:
    """A read-only file object over an mmap/memoryview, so zipfile reads members without copying the zip."""

    def __init__(self, buf: Buffer):
        self._view = memoryview(buf)
        self._pos = 0

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = 0) -> int:
        base = (0, self._pos, len(self._view))[whence]
        self._pos = max(0, base + pos)
        return self._pos

    def read(self, n: int = -1) -> bytes:
        end = len(self._view) if n is None or n < 0 else min(len(self._view), self._pos + n)
        data = bytes(self._view[self._pos:end])
        self._pos = max(self._pos, end)
        return data


# ---------------------------------------------------------------------------------------------------------
# one buffer


def scan_buffer(source: Source) -> Binary:
    """Everything in one buffer: host ELF, standalone device file, or unknown bytes (magic scan only)."""
    buf, name = source.buf, source.name
    head = bytes(buf[:64])
    binary = Binary(path=name, size=len(buf), format="other")
    finder = _Finder(binary, buf)
    try:
        if head.startswith(ELF_MAGIC):
            _scan_elf(finder)
        elif pe.is_pe(buf):
            _scan_pe(finder)
        elif head.startswith(FATBIN_MAGIC_BYTES):
            binary.format = "fatbin"
            finder.fatbin(0, "file")
        elif head.startswith(BUNDLE_MAGIC):
            binary.format = "offload-bundle"
            finder.bundle(0, "bundle", "file")
        elif head.startswith(CCOB_MAGIC):
            binary.format = "ccob"
            finder.bundle(0, "ccob", "file")
        elif _PTX_START.match(bytes(buf[:4096])):
            binary.format = "ptx"
            finder.standalone_ptx()
    except FatkitError as exc:
        binary.errors.append(exc.located(name))
    finder.magic_scan()
    # a truncated section table fails both the wrapper lookup and the section walk: report it once
    binary.errors = list({(e.offset, e.message): e for e in binary.errors}.values())
    binary.containers.sort(key=lambda c: c.offset)
    for i, container in enumerate(binary.containers):
        container.index = i
    return binary


def _scan_elf(finder: _Finder) -> None:
    binary = finder.binary
    try:
        elf = ElfView(finder.buf)
    except FatkitError as exc:
        binary.format = "elf"
        binary.errors.append(exc.located(binary.path))
        return
    if elf.e_machine == EM_CUDA:
        binary.format = "cubin"
        finder.standalone_cubin()
        return
    if elf.e_machine == EM_AMDGPU:
        binary.format = "hsaco"
        finder.standalone_code_object()
        return
    binary.format = ET_NAMES.get(elf.e_type, "elf")
    if elf.e_type == ET_DYN and any(seg.type == PT_INTERP for seg in elf.segments):
        binary.format = "elf-pie"
    finder.elf = elf
    try:
        binary.needed = list(elf.needed)
    except FatkitError as exc:
        binary.errors.append(exc.located(binary.path))
    _scan_host(finder, elf, lambda section: section.name, _cannot_hold_containers)


def _scan_pe(finder: _Finder) -> None:
    """A Windows DLL, EXE or `.pyd`: its imports, then what `_scan_host` finds through its 8-byte section names."""
    binary = finder.binary
    try:
        image = PeView(finder.buf)
    except FatkitError as exc:
        binary.format = "pe"
        binary.errors.append(exc.located(binary.path))
        return
    binary.format = image.format
    finder.elf = image
    try:
        binary.needed = [imported.dll for imported in image.imports]
    except FatkitError as exc:
        binary.errors.append(exc.located(binary.path))
    _scan_host(finder, image, lambda section: pe.ELF_SECTION_OF.get(section.name, section.name),
               _pe_cannot_hold_containers)


def _scan_host(finder: _Finder, view: ElfView | PeView, role: Callable[[Any], str],
               skipped: Callable[[Any], bool]) -> None:
    """Registration wrappers, then the known device sections, of a host image; `role` gives the ELF name of a
    section (PE names are cut to 8 bytes) and `skipped` the sections the magic scan need not read."""
    binary, buf = finder.binary, finder.buf
    try:
        records = wrappers.read_wrappers(view)
    except FatkitError as exc:
        binary.errors.append(exc.located(binary.path))
        records = []
    for record in records:
        if record.target is None:
            binary.errors.append(FormatError(
                f"{record.vendor} registration wrapper points nowhere in the file", path=binary.path,
                offset=record.offset))
            continue
        info = {"vendor": record.vendor, "version": record.version, "offset": record.offset}
        if record.vendor == "nvidia":
            finder.fatbin(record.target, "wrapper", wrapper=info)
        else:
            kind = "ccob" if bytes(buf[record.target:record.target + 4]) == CCOB_MAGIC else "bundle"
            finder.bundle(record.target, kind, "wrapper", wrapper=info)
    try:
        sections = view.sections
    except FatkitError as exc:
        binary.errors.append(exc.located(binary.path))
        sections = []
    for section in sections:
        if not section.has_bytes or section.size == 0:
            continue
        name = role(section)
        if name in FATBIN_SECTIONS:
            finder.walk_section(section, family="fatbin")
        elif name in BUNDLE_SECTIONS:
            finder.walk_section(section, family="bundle")
        elif name.startswith(BUNDLE_SECTION_PREFIX):
            finder.offload_section(section)
        elif name == FATKIT_AMD_SECTION:
            finder.repack_section(section)
        elif name == LLVM_OFFLOADING_SECTION:
            binary.notes.append(
                f"{LLVM_OFFLOADING_SECTION} section (LLVM offload binary from clang -fgpu-rdc/--offload-new-driver):"
                " device code is only materialised at link time; not decoded")
        elif name == pe.CLANG_OFFLOAD_SECTION and isinstance(view, PeView):
            binary.notes.append(_pe_offload_note(view, section.name))
    finder.skip = [(s.offset, s.offset + s.size) for s in sections if skipped(s)]


# symbols, strings, relocations, hashes, versions
SHT_SKIPPED = {2, 3, 4, 5, 6, 9, 11, 19, 0x6FFFFFF6, 0x6FFFFFFE, 0x6FFFFFFF, 0x6FFFFFFD}
SHF_EXECINSTR = 0x4


def _cannot_hold_containers(section) -> bool:
    """Host machine code and linker tables: the magic scan skips them (nothing can load a fatbin from there)."""
    return (section.has_bytes and (section.flags & SHF_EXECINSTR or section.type in SHT_SKIPPED
                                   or section.name in (".eh_frame", ".eh_frame_hdr", ".gcc_except_table")
                                   or section.name.startswith(".debug_")))


PE_SKIPPED = (".pdata", ".reloc")  # exception and base relocation tables


def _pe_cannot_hold_containers(section: pe.PeSection) -> bool:
    """Machine code and the loader's tables of a PE image: the magic scan skips them."""
    return section.has_bytes and (section.executable or section.name in PE_SKIPPED)


def _pe_offload_note(image: PeView, section_name: str) -> str:
    """What a PE `__CLANG_` section (clang-offload-bundler output, its name cut to 8 bytes) holds, as far as the
    SYCL runtime's `.tgtsym` table names its targets (`<bundle id>.<kernel>` strings)."""
    from fatkit.formats import offload_bundle

    symbols = image.section(pe.SYCL_TARGET_SYMBOLS)
    targets: dict[str, None] = {}
    if symbols is not None and symbols.has_bytes:
        for text in image.data(symbols).split(b"\0"):
            bundle_id = text.split(b".", 1)[0].decode("utf-8", "replace")
            if bundle_id:
                targets.setdefault(bundle_id)
    where = f"PE section {section_name}, cut from {BUNDLE_SECTION_PREFIX}…"
    parsed = [offload_bundle.parse_bundle_id(t) for t in targets]
    if not parsed:
        return (f"clang offload section ({where}): its target is not named in the image; neither NVIDIA nor AMD "
                "code was found in it")
    if any(triple.startswith("amdgcn") for _, triple, _ in parsed):
        return f"AMD offload section ({where}) named by {pe.SYCL_TARGET_SYMBOLS}: not decoded"
    kinds = sorted({kind.upper() for kind, _, _ in parsed})
    triples = ", ".join(dict.fromkeys(triple for _, triple, _ in parsed))
    return (f"{'/'.join(kinds)} device code for {triples} ({where}; targets from {pe.SYCL_TARGET_SYMBOLS}): "
            "neither NVIDIA nor AMD code (Intel GPUs use SYCL)")


class _Finder:
    """Adds containers to a Binary, merging what several discovery methods find at the same offset."""

    def __init__(self, binary: Binary, buf: Buffer):
        self.binary = binary
        self.buf = buf
        self.elf: ElfView | PeView | None = None  # the host image, ELF or PE
        self.by_offset: dict[int, Container] = {}
        self.skip: list[tuple[int, int]] = []  # byte ranges the magic scan need not read

    # -- bookkeeping

    def _section_name(self, offset: int) -> str | None:
        if self.elf is None:
            return None
        try:
            section = self.elf.section_at(offset)
        except FatkitError:  # a truncated section table: the container is still reported, without a section
            return None
        return section.name if section is not None else None

    def _known(self, offset: int, how: str, wrapper: dict | None) -> bool:
        container = self.by_offset.get(offset)
        if container is None:
            return False
        if how not in container.found_by:
            container.found_by.append(how)
        if wrapper is not None and container.wrapper is None:
            container.wrapper = wrapper
        return True

    def _add(self, container: Container) -> None:
        self.by_offset[container.offset] = container
        self.binary.containers.append(container)

    def _error(self, exc: FatkitError) -> None:
        self.binary.errors.append(exc.located(self.binary.path))

    def _loader(self, read: Callable[[], bytes]) -> Callable[[], bytes]:
        return partial(_located_read, read, self.binary.path)

    # -- NVIDIA fatbins

    def fatbin(self, offset: int, how: str, wrapper: dict | None = None) -> int | None:
        """Parse the fatbin at offset (once); returns its size, or None when it is not a valid fatbin."""
        if self._known(offset, how, wrapper):
            return self.by_offset[offset].size
        try:
            parsed = fatbin.parse_container(self.buf, offset)
        except FatkitError as exc:
            self._error(exc)
            return None
        container = Container(index=0, format="fatbin", offset=offset, size=parsed.size,
                              section=self._section_name(offset), found_by=[how], wrapper=wrapper)
        for i, rec in enumerate(parsed.entries):
            container.entries.append(self._fatbin_entry(i, rec))
        self._add(container)
        return parsed.size

    def _fatbin_entry(self, index: int, rec: FatbinEntry) -> Entry:
        error = None
        try:
            compression = rec.compression
        except FatkitError as exc:
            compression, error = None, exc.message
        return Entry(
            index=index, kind=_entry_kind(rec.kind_name), arch=rec.arch, offset=rec.offset, stored_size=rec.stored_size,
            compression=compression, loader=self._loader(partial(fatbin.entry_payload, self.buf, rec)),
            size=rec.uncompressed_size if compression else rec.stored_size,
            identifier=rec.identifier, options=rec.options,
            code_version=f"{rec.version_major}.{rec.version_minor}", flags=rec.flags, error=error,
        )

    # -- AMD offload bundles

    def bundle(self, offset: int, kind: str, how: str, wrapper: dict | None = None,
               end: int | None = None) -> int | None:
        """Parse the plain bundle or CCOB at offset (once); returns its size or None."""
        if self._known(offset, how, wrapper):
            return self.by_offset[offset].size
        from fatkit.formats import offload_bundle

        try:
            if kind == "ccob":
                ccob = offload_bundle.parse_ccob(self.buf, offset, end)
                data = offload_bundle.decompress_ccob(self.buf, ccob)
                inner = offload_bundle.parse_bundle(data, 0)
                container = Container(index=0, format="ccob", offset=offset, size=ccob.size,
                                      section=self._section_name(offset), found_by=[how], wrapper=wrapper,
                                      ccob={"version": ccob.version, "method": ccob.method,
                                            "uncompressed_size": ccob.uncompressed_size})
                # Entry offsets of a CCOB are inside its uncompressed bundle (there is no file offset).
                self._bundle_entries(container, data, inner, base=0, compression=ccob.method)
            else:
                inner = offload_bundle.parse_bundle(self.buf, offset)
                container = Container(index=0, format="offload-bundle", offset=offset, size=inner.size,
                                      section=self._section_name(offset), found_by=[how], wrapper=wrapper)
                self._bundle_entries(container, self.buf, inner, base=offset, compression=None)
        except FatkitError as exc:
            self._error(exc)
            return None
        self._add(container)
        return container.size

    def _bundle_entries(self, container: Container, data: Buffer, bundle, base: int, compression: str | None) -> None:
        for i, entry in enumerate(bundle.entries):
            kind: EntryKind = "host" if entry.kind == "host" else "hsaco" if entry.triple.startswith("amdgcn") \
                else "other"
            container.entries.append(Entry(
                index=i, kind=kind, arch=entry.target_id or entry.triple, offset=base + entry.offset,
                stored_size=entry.size, compression=compression,
                loader=self._loader(partial(_bundle_bytes, data, bundle, entry)), size=entry.size,
                bundle_id=entry.id,
            ))

    # -- known sections and the magic scan

    def walk_section(self, section, family: str) -> None:
        """Containers back to back inside a device section (zero padding between them is skipped)."""
        end = min(section.offset + section.size, len(self.buf))
        pos = section.offset
        while pos < end:
            hit = _NONZERO.search(self.buf, pos, end)
            if hit is None:
                return
            pos = hit.start()
            head = bytes(self.buf[pos:pos + 24])
            if family == "fatbin" and head.startswith(FATBIN_MAGIC_BYTES):
                size = self.fatbin(pos, "section")
            elif family == "bundle" and head.startswith(BUNDLE_MAGIC):
                size = self.bundle(pos, "bundle", "section")
            elif family == "bundle" and head.startswith(CCOB_MAGIC):
                size = self.bundle(pos, "ccob", "section", end=_next_ccob_end(self.buf, pos, end))
            else:
                size = None
                self._error(FormatError(f"unrecognised bytes inside {section.name}", offset=pos))
            if not size:
                return
            pos += size

    def offload_section(self, section) -> None:
        """`__CLANG_OFFLOAD_BUNDLE__<id>` sections (clang-offload-bundler -type=o): the section is the payload."""
        bundle_id = section.name[len(BUNDLE_SECTION_PREFIX):]
        from fatkit.formats import offload_bundle

        kind, triple, target_id = offload_bundle.parse_bundle_id(bundle_id)
        if not triple.startswith("amdgcn"):
            if kind != "host":
                self.binary.notes.append(f"{kind.upper()} device code for {triple or bundle_id} (section "
                                         f"{section.name}): neither NVIDIA nor AMD code (Intel GPUs use SYCL)")
            return
        entry = Entry(index=0, kind="hsaco", arch=target_id or triple, offset=section.offset,
                      stored_size=section.size, compression=None, size=section.size, bundle_id=bundle_id,
                      loader=self._loader(partial(_slice_bytes, self.buf, section.offset, section.size)))
        self._add(Container(index=0, format="offload-section", offset=section.offset, size=section.size,
                            section=section.name, found_by=["section"], entries=[entry]))

    def repack_section(self, section) -> None:
        """`.fatkit_amd` (fatkit repack): its bundle, each code object mapped to the PTX it was translated from."""
        from fatkit.formats import fatkit_amd

        end = min(section.offset + section.size, len(self.buf))
        kind = "ccob" if bytes(self.buf[section.offset:section.offset + 4]) == CCOB_MAGIC else "bundle"
        if not self.bundle(section.offset, kind, "section", end=end):
            return
        try:
            manifest = fatkit_amd.read_payload(bytes(self.buf[section.offset:end]))
        except FatkitError as exc:
            self._error(exc.located(base=section.offset))
            return
        container = self.by_offset[section.offset]
        container.manifest = manifest.to_json()
        by_id = {m.bundle_id: m for m in manifest.modules if m.bundle_id is not None}
        for entry in container.entries:
            module = by_id.get(entry.bundle_id) if entry.bundle_id is not None else None
            if module is not None:
                entry.translated_from = {"ptx_blake3": module.ptx_blake3, "sources": list(module.sources),
                                         "arch": module.arch, "target": module.target,
                                         "kernels": len(module.kernels),
                                         "kernels_failed": sum(k.status != "ok" for k in module.kernels)}
            elif entry.kind == "host":
                entry.kind = "manifest"

    def magic_scan(self) -> None:
        """Validated scan for containers nothing else found, window by window.

        Skips known containers and sections that cannot hold any; each window's pages are dropped from
        this process once scanned, so peak memory stays flat on 500 MB libraries.
        """
        for start, end in self._gaps():
            pos = start
            while pos < end:
                window = pos
                stop = min(pos + SCAN_WINDOW, end)
                reach = min(stop + SCAN_OVERLAP, end)  # a magic starting before `stop` is found whole
                for offset in fatbin.find_containers(self.buf, pos, reach):
                    if offset < stop and offset not in self.by_offset:
                        pos = max(pos, offset + (self.fatbin(offset, "magic-scan") or 1))
                # the bundle reader is imported when a window holds one of its magics (most files hold none)
                if find(self.buf, BUNDLE_MAGIC, pos, reach) >= 0 or find(self.buf, CCOB_MAGIC, pos, reach) >= 0:
                    from fatkit.formats import offload_bundle

                    for offset, kind in offload_bundle.find_bundles(self.buf, pos, reach, limit=end):
                        if offset < stop and offset not in self.by_offset:
                            pos = max(pos, offset + (self.bundle(offset, kind, "magic-scan", end=end) or 1))
                _release(self.buf, window, stop)
                pos = max(pos, stop)

    def _gaps(self) -> list[tuple[int, int]]:
        size = len(self.buf)
        covered = sorted([(c.offset, c.offset + c.size) for c in self.by_offset.values()] + self.skip)
        gaps, pos = [], 0
        for begin, finish in covered:  # section headers may claim ranges past the end: clamp to the file
            begin, finish = min(begin, size), min(finish, size)
            if begin > pos:
                gaps.append((pos, begin))
            pos = max(pos, finish)
        if pos < size:
            gaps.append((pos, size))
        return gaps

    # -- standalone device files

    def standalone_cubin(self) -> None:
        from fatkit.formats import cubin  # a standalone cubin; cubins inside fatbins are read by kernels.py

        info = cubin.parse_cubin(self.buf)
        self._standalone("cubin", Entry(
            index=0, kind="elf", arch=info.arch, offset=0, stored_size=len(self.buf), compression=None,
            loader=self._loader(partial(bytes, self.buf)), size=len(self.buf),
            code_version=f"1.{info.abi_version}"))

    def standalone_code_object(self) -> None:
        from fatkit.formats import hsaco  # AMD code objects only: most inspected files hold none

        info = hsaco.parse_code_object(self.buf)
        self._standalone("hsaco", Entry(
            index=0, kind="hsaco", arch=info.target_id, offset=0, stored_size=len(self.buf), compression=None,
            loader=self._loader(partial(bytes, self.buf)), size=len(self.buf)))

    def standalone_ptx(self) -> None:
        from fatkit.formats import ptx_header

        header = ptx_header.parse_ptx_header(bytes(self.buf))
        version = f"{header.version[0]}.{header.version[1]}" if header.version else None
        self._standalone("ptx", Entry(
            index=0, kind="ptx", arch=header.arch or "unknown", offset=0, stored_size=len(self.buf),
            compression=None, loader=self._loader(partial(_ptx_file_bytes, self.buf)), size=len(self.buf),
            code_version=version))

    def _standalone(self, fmt: ContainerFormat, entry: Entry) -> None:
        self._add(Container(index=0, format=fmt, offset=0, size=len(self.buf), section=None,
                            found_by=["file"], entries=[entry]))


def _entry_kind(name: str) -> EntryKind:
    """A fatbin entry's kind as the model names it; kinds fatbin.py does not know are "other"."""
    return next((kind for kind in get_args(EntryKind) if kind == name), "other")


def _next_ccob_end(buf: Buffer, offset: int, end: int) -> int:
    """Where a version-1 CCOB (which has no size) ends: the next bundle magic in the section, or its end."""
    window = bytes(buf[offset + 4:end])  # a memoryview (stored zip member) has no find; sections are bounded
    found = [offset + 4 + at for at in (window.find(m) for m in (CCOB_MAGIC, BUNDLE_MAGIC)) if at >= 0]
    return min(found) if found else end


def _release(buf: Buffer, start: int, end: int) -> None:
    """Drop scanned pages of a file mapping from this process (the page cache keeps them)."""
    if isinstance(buf, mmap.mmap):
        first = start - start % mmap.PAGESIZE
        if end > first:
            buf.madvise(mmap.MADV_DONTNEED, first, end - first)


def _slice_bytes(buf: Buffer, offset: int, size: int) -> bytes:
    return bytes(buf[offset:offset + size])


def _bundle_bytes(data: Buffer, bundle, entry) -> bytes:
    from fatkit.formats import offload_bundle

    return bytes(offload_bundle.bundle_payload(data, bundle, entry))


def _ptx_file_bytes(buf: Buffer) -> bytes:
    return bytes(buf).rstrip(b"\0")


def _located_read(read: Callable[[], bytes], path: str) -> bytes:
    try:
        return read()
    except FatkitError as exc:
        raise exc.located(path) from None
