"""`repack`: a copy of a CUDA binary that also carries AMD code objects translated from its PTX.

`repack_binary` scans one host ELF or PE image (executable or shared library, a `.pyd` too), translates every
PTX module for every target through the code-object cache (`fatkit.cache.precompile`: identical modules once,
cached ones not again), and writes the original file plus one section to the destination: `.fatkit_amd` in an
ELF file (non-loaded; `elf_patch.py` appends it), `.fatkit` in a PE image (8-byte names; `pe_patch.py` adds
it); `formats/fatkit_amd.py` lays out its bytes, the same for both. Nothing NVIDIA's loader or runtime reads
changes.

Statuses of a binary:
- `repacked`: the section was added and every kernel of every module translated for every target;
- `partial`: the section was added; some kernels or modules did not translate (listed, with reasons);
- `failed`: the binary has PTX but no kernel translated: the section holds only the manifest that says why;
- `no-ptx`: nothing to translate: the destination is an unchanged copy, so a release tree stays complete;
- `error`: nothing was written (unreadable input, not an executable or shared library, an ELF or PE layout
  fatkit does not patch, a signed PE image with `keep_signature`); `reason` says why.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

import fatkit
from fatkit.cache import Cache
from fatkit.cache.key import TRANSLATOR_ABI, CacheKey, ptx_hash, translator_fingerprint
from fatkit.cache.precompile import arch_rank, precompile
from fatkit.errors import FatkitError, InputError
from fatkit.extract.model import Binary
from fatkit.extract.scan import scan_path
from fatkit.extract.select import PtxModule, ptx_modules
from fatkit.formats.fatkit_amd import (SECTION_NAME, KernelRecord, Manifest, ModuleRecord, build_payload,
                                       code_object_bundle_id)
from fatkit.formats.pe import REPACK_SECTION
from fatkit.repack import elf_patch, pe_patch
from fatkit.repack.elf_patch import copy_file
from fatkit.translate.targets.ids import TargetId

ELF_HOST_FORMATS = ("elf-exec", "elf-pie", "elf-shared")
PE_HOST_FORMATS = ("pe-dll", "pe-exe")
HOST_FORMATS = ELF_HOST_FORMATS + PE_HOST_FORMATS
PE_SECTION_NAME = REPACK_SECTION  # `.fatkit`: SECTION_NAME does not fit the 8 bytes of a PE section name
STATUSES = ("repacked", "partial", "failed", "no-ptx", "error")


@dataclass
class BinaryRepack:
    """What `repack_binary` did with one binary. `modules` are the manifest's records: each PTX module (by the
    BLAKE3 of its text, `ptx_blake3`, the key fatkit's cache and ZLUDA use) for each target, with its kernels'
    statuses and reasons; `problems` are scan errors that did not stop the repack."""

    source: Path
    destination: Path | None  # None when nothing was written
    status: str  # one of STATUSES
    modules: list[ModuleRecord] = field(default_factory=list)
    reason: str | None = None
    problems: list[str] = field(default_factory=list)
    section_size: int = 0  # bytes of the `.fatkit_amd` payload (0 when none was added)
    cached: int = 0  # module records whose code object the cache already held
    section_name: str = SECTION_NAME  # `.fatkit` in a PE image

    @property
    def code_objects(self) -> int:
        return sum(m.bundle_id is not None for m in self.modules)

    @property
    def kernels_ok(self) -> int:
        return sum(k.status == "ok" for m in self.modules for k in m.kernels)

    @property
    def kernels_failed(self) -> int:
        return sum(k.status != "ok" for m in self.modules for k in m.kernels)

    def to_json(self) -> dict[str, Any]:
        return {"source": str(self.source), "destination": None if self.destination is None else str(self.destination),
                "status": self.status, "reason": self.reason,
                "section": self.section_name if self.section_size else None,
                "section_size": self.section_size, "code_objects": self.code_objects, "modules_cached": self.cached,
                "kernels_ok": self.kernels_ok, "kernels_failed": self.kernels_failed, "problems": list(self.problems),
                "modules": [m.to_json() for m in self.modules]}


def repack_binary(source: Path, destination: Path, targets: list[str], cache: Path | None = None,
                  jobs: int = 1, keep_signature: bool = False) -> BinaryRepack:
    """Translate the PTX of `source` for `targets` and write the patched copy to `destination` (atomically;
    `source` is only read). `cache` is a code-object cache directory to reuse and fill; without it a
    temporary one is used and removed. Problems with the input, or a destination that cannot be written, are a
    status `error` with its reason, not an exception (a release run goes on with the other binaries). A signed
    PE image loses the validity of its signature (a warning among `problems`); `keep_signature` refuses it."""
    source, destination = Path(source), Path(destination)
    normalized = translated_targets(targets)
    if not normalized:
        raise FatkitError("repack needs at least one target, like gfx942")
    result = BinaryRepack(source, None, "error")
    try:
        binary = _host_binary(source)
    except FatkitError as exc:
        result.reason = str(exc)
        return result
    result.problems = [str(e) for e in binary.errors]
    modules = list(ptx_modules([binary], on_error=result.problems.append))
    if not modules:
        try:
            copy_file(source, destination)
        except OSError as exc:
            result.reason = f"{destination}: cannot write: {exc.strerror or exc}"
            return result
        result.destination, result.status = destination, "no-ptx"
        result.reason = "no PTX in the binary: copied unchanged"
        return result
    pe = binary.format in PE_HOST_FORMATS
    result.section_name = PE_SECTION_NAME if pe else SECTION_NAME
    try:  # before translating: a refusal must not cost the translation
        if pe:
            pe_patch.check_patchable(source, PE_SECTION_NAME, keep_signature)
        else:
            elf_patch.check_patchable(source, SECTION_NAME)
    except FatkitError as exc:
        result.reason = str(exc)
        return result
    with _cache(cache) as store:
        report = precompile(modules, normalized, store, jobs=jobs)
        result.problems += report.problems
        manifest, result.cached = _manifest(modules, report.modules, store, normalized)
    payload = build_payload(manifest)
    try:
        if pe:
            result.problems += pe_patch.add_section(source, destination, PE_SECTION_NAME, payload, keep_signature)
        else:
            elf_patch.add_section(source, destination, SECTION_NAME, payload)
    except FatkitError as exc:
        result.reason = str(exc)
        return result
    result.destination, result.modules, result.section_size = destination, list(manifest.modules), len(payload)
    result.status = _status(manifest.modules)
    if result.status == "failed":
        result.reason = "no code object for any module: the section holds only the manifest of reasons"
    return result


def translated_targets(targets: list[str]) -> list[str]:
    """The processors a repack translates for, sorted: code objects are compiled with xnack and sramecc unset,
    which loads on every setting, so `gfx942:xnack-` and `gfx942` are one target (one code object per PTX
    module and processor in the section)."""
    return sorted({str(TargetId.parse_amd(t).bare) for t in targets})


_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f\\]")


def output_path(root: Path, relative: str | PurePosixPath) -> Path:
    """Where an input named `relative` (a file name, a path inside a walked directory or a wheel) is written
    under `root`: never outside it. Components are kept as they are (the copy has the same name) unless
    they could escape or confuse: `..`, `.`, empty, absolute, control characters or backslashes are refused."""
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute():
        raise InputError(f"output name {str(relative)!r} is empty or absolute")
    for part in parts:
        if part in (".", "..") or _UNSAFE_NAME.search(part) or len(part.encode("utf-8", "replace")) > 255:
            raise InputError(f"output name {str(relative)!r} has an unsafe component {part!r}")
    root = Path(root).resolve()
    destination = root.joinpath(*parts)
    # a directory under root that is a symbolic link could still lead elsewhere
    existing = destination.parent
    while not existing.exists():
        existing = existing.parent
    if not existing.resolve().is_relative_to(root) or destination.is_symlink():
        raise InputError(f"output name {str(relative)!r} leads outside {root}")
    return destination


def _host_binary(source: Path) -> Binary:
    """The scanned executable or shared library at `source`; FatkitError for anything else."""
    if not source.is_file():
        raise InputError("not a regular file", path=str(source))
    binaries = list(scan_path(source))
    if len(binaries) != 1 or binaries[0].format not in HOST_FORMATS:
        kind = binaries[0].format if len(binaries) == 1 else "archive"
        raise InputError(f"not an ELF executable or shared library or a PE DLL/EXE ({kind}); repack patches "
                         "only those", path=str(source))
    binary = binaries[0]
    name = PE_SECTION_NAME if binary.format in PE_HOST_FORMATS else SECTION_NAME
    if any(c.section == name for c in binary.containers):
        raise InputError(f"already holds a {name} section (repacked before); repack the original", path=str(source))
    return binary


@contextlib.contextmanager
def _cache(directory: Path | None) -> Iterator[Cache]:
    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fatkit-repack-")))
        yield stack.enter_context(Cache(directory))


def _manifest(modules: list[PtxModule], records: list[dict[str, Any]], store: Cache,
              targets: list[str]) -> tuple[Manifest, int]:
    """Module records (sorted by PTX hash and target) and their code objects, read back from the cache; and
    how many of them the cache already held before this run."""
    places = _places(modules)
    out: list[ModuleRecord] = []
    code_objects: dict[str, bytes] = {}
    cached = 0
    for record in records:
        ptx = record["ptx_blake3"]
        sources, alternatives = places[ptx]
        bundle_id = None
        reason = record["reason"]
        cached += record["status"] == "cached"
        if record["status"] in ("translated", "cached"):
            entry = store.get(CacheKey(ptx, record["stored_as"], TRANSLATOR_ABI, record["options"]), touch=False)
            if entry is None or not entry.code_object:
                reason = "the code object vanished from the cache before it was read back"
                record = {**record, "status": "failed"}
            else:
                bundle_id = code_object_bundle_id(ptx, record["stored_as"])
                code_objects[bundle_id] = entry.code_object
        # where the code object came from is this run's history, not the binary's content: both "translated"
        status = "translated" if record["status"] == "cached" else record["status"]
        if status == "failed" and reason is None:  # the kernels carry the reasons
            reason = "none of its kernels translated"
        out.append(ModuleRecord(
            ptx_blake3=ptx, target=record["target"], status=status, bundle_id=bundle_id,
            arch=record["arch"], sources=sources, alternatives=alternatives, reason=reason,
            kernels=tuple(KernelRecord(k["name"], k["status"], k.get("reason")) for k in record["kernels"])))
    out.sort(key=lambda m: (m.ptx_blake3, m.target))
    return Manifest(fatkit.__version__, translator_fingerprint(), tuple(targets), tuple(out), code_objects), cached


def _places(modules: list[PtxModule]) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """For each PTX hash: the entries holding it ("c0.e1") and the other PTX hashes of its fatbin(s)."""
    by_container: dict[int | None, list[PtxModule]] = {}
    for module in modules:
        by_container.setdefault(module.container, []).append(module)
    sources: dict[str, set[str]] = {}
    siblings: dict[str, set[str]] = {}
    for members in by_container.values():
        members.sort(key=lambda m: arch_rank(m.arch))
        hashes = [ptx_hash(m.text) for m in members]
        for module, digest in zip(members, hashes):
            sources.setdefault(digest, set()).add(f"c{module.container}.e{module.entry}")
            siblings.setdefault(digest, set()).update(h for h in hashes if h != digest)
    return {h: (tuple(sorted(sources[h])), tuple(sorted(siblings[h]))) for h in sources}


def _status(modules: tuple[ModuleRecord, ...]) -> str:
    failed = any(m.status == "failed" or any(k.status != "ok" for k in m.kernels) for m in modules)
    if not any(m.bundle_id is not None for m in modules):
        return "failed" if failed else "repacked"
    return "partial" if failed else "repacked"

