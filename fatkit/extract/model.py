"""The one vocabulary of fatkit: Binary → Container → Entry → Kernel.

The CLI prints these, `--json` serialises them (`to_json`) and the Python API returns them. They are data:
the scanner fills them, extract/report.py judges them, extract/kernels.py reads kernels and hashes into them,
and serialising reads nothing. Payload bytes are never copied eagerly: an Entry keeps a loader that slices or
decompresses on first use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from fatkit.errors import FatkitError

# "manifest": the host entry of a `.fatkit_amd` bundle (fatkit repack)
EntryKind = Literal["ptx", "elf", "nvvm", "cubin-legacy", "hsaco", "host", "manifest", "other"]
ContainerFormat = Literal["fatbin", "offload-bundle", "ccob", "offload-section", "cubin", "ptx", "hsaco"]
BinaryFormat = Literal["elf-exec", "elf-pie", "elf-shared", "elf-rel", "elf", "pe-dll", "pe-exe", "pe", "cubin",
                       "hsaco", "fatbin", "offload-bundle", "ccob", "ptx", "ar-archive", "zip", "unreadable", "other"]
AmdVerdict = Literal["yes", "partial", "no", "native", "none"]
AMD_FORMATS: tuple[ContainerFormat, ...] = ("offload-bundle", "ccob", "offload-section", "hsaco")


@dataclass(frozen=True)
class Kernel:
    """A kernel as far as the entry describes it (PTX: name only; cubin/code object: resources too)."""

    name: str
    param_bytes: int | None = None
    params: tuple[int, ...] | None = None  # parameter sizes in ordinal order
    registers: int | None = None
    shared_bytes: int | None = None
    wavefront_size: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(eq=False)
class Entry:
    """One piece of device code: a fatbin entry (PTX, cubin, NVVM) or an offload-bundle entry (code object)."""

    index: int
    kind: EntryKind
    arch: str  # compute_90a, sm_100f, gfx942:xnack-
    offset: int  # file offset of the entry (fatbin: its header; bundle: its payload)
    stored_size: int  # bytes the entry occupies as stored
    compression: str | None
    loader: Callable[[], bytes] = field(repr=False)
    size: int | None = None  # uncompressed size when the header states it
    identifier: str | None = None
    options: str | None = None
    code_version: str | None = None
    flags: int | None = None
    bundle_id: str | None = None
    error: str | None = None  # set when the payload could not be read
    translated_from: dict[str, Any] | None = None  # `.fatkit_amd` code objects: the PTX and kernels behind them
    # derived from the payload, filled when asked for (extract/kernels.py): BLAKE3 of the payload (the key ZLUDA
    # and fatkit's cache use for PTX; how duplicates are found), kernel names (verdicts), kernels (--kernels)
    hash: str | None = None
    kernel_names: tuple[str, ...] | None = None
    kernels: tuple[Kernel, ...] | None = None

    @property
    def payload(self) -> bytes:
        """The entry's content, exactly as `cuobjdump -xptx/-xelf` or `clang-offload-bundler` would write it.

        Not cached: a 500 MB library holds gigabytes of decompressed payloads. What is derived from it
        (hash, kernel names, kernels) is kept instead, computed from one read by extract/kernels.py.
        """
        return self.loader()

    def to_json(self) -> dict[str, Any]:
        """What is known about the entry; reads nothing (`describe` fills hashes and kernels beforehand)."""
        out: dict[str, Any] = {
            "index": self.index,
            "kind": self.kind,
            "arch": self.arch,
            "offset": self.offset,
            "stored_size": self.stored_size,
            "size": self.size,
            "compression": self.compression,
        }
        for key in ("identifier", "options", "code_version", "bundle_id"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.hash is not None:
            out["hash"] = self.hash
        if self.kernels is not None:
            out["kernels"] = [k.to_json() for k in self.kernels]
        if self.translated_from is not None:
            out["translated_from"] = self.translated_from
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(eq=False)
class Container:
    """A fatbin, an offload bundle or a compressed bundle (CCOB) inside a binary, or a standalone device file."""

    index: int
    format: ContainerFormat
    offset: int
    size: int
    section: str | None
    found_by: list[str]  # wrapper | section | magic-scan | file
    entries: list[Entry] = field(default_factory=list)
    wrapper: dict[str, Any] | None = None  # {"vendor", "version", "offset"} of the registering record
    ccob: dict[str, Any] | None = None  # {"version", "method", "uncompressed_size"} for compressed bundles
    manifest: dict[str, Any] | None = None  # the `.fatkit_amd` manifest (fatkit repack, docs/repack.md)

    @property
    def vendor(self) -> str:
        return "amd" if self.format in AMD_FORMATS else "nvidia"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "format": self.format,
            "vendor": self.vendor,
            "offset": self.offset,
            "size": self.size,
            "section": self.section,
            "found_by": list(self.found_by),
        }
        if self.wrapper is not None:
            out["wrapper"] = self.wrapper
        if self.ccob is not None:
            out["ccob"] = self.ccob
        if self.manifest is not None:
            out["manifest"] = self.manifest
        out["entries"] = [e.to_json() for e in self.entries]
        return out


@dataclass(eq=False)
class Binary:
    """One input file (or archive/wheel member, named `outer!member`) and everything found in it."""

    path: str
    size: int
    format: BinaryFormat  # pe-dll covers .pyd modules; elf / pe: headers fatkit could not read (the error says why)
    containers: list[Container] = field(default_factory=list)
    needed: list[str] = field(default_factory=list)
    errors: list[FatkitError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was found that is neither NVIDIA nor AMD code
    # what it means for AMD (extract/report.py's judge): module by module after a scan, kernel by kernel when
    # asked for (inspect --kernels)
    verdict: Verdict | None = None

    @property
    def entries(self) -> list[Entry]:
        return [e for c in self.containers for e in c.entries]

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "format": self.format,
            "needed": list(self.needed),
            "containers": [c.to_json() for c in self.containers],
            "verdict": None if self.verdict is None else self.verdict.to_json(),
            "notes": list(self.notes),
            "errors": [{"message": e.message, "offset": e.offset} for e in self.errors],
        }


@dataclass(frozen=True)
class Verdict:
    """What the binary means for AMD: translatable yes / partial / no / native / none, and why."""

    amd: AmdVerdict
    reason: str
    ptx_archs: tuple[str, ...] = ()
    cubin_archs: tuple[str, ...] = ()
    amd_targets: tuple[str, ...] = ()
    kernels_total: int = 0
    kernels_without_ptx: tuple[str, ...] = ()
    libraries: tuple[dict[str, str], ...] = ()  # NVIDIA libraries needed and their AMD counterparts

    def to_json(self) -> dict[str, Any]:
        return {
            "amd": self.amd,
            "reason": self.reason,
            "ptx_archs": list(self.ptx_archs),
            "cubin_archs": list(self.cubin_archs),
            "amd_targets": list(self.amd_targets),
            "kernels_total": self.kernels_total,
            "kernels_without_ptx": list(self.kernels_without_ptx),
            "libraries": [dict(x) for x in self.libraries],
        }
