"""The one vocabulary of fatkit: Binary → Container → Entry → Kernel.

The CLI prints these, `--json` serialises them (`to_json`) and the Python API returns them. Payload bytes are
never copied eagerly: an Entry keeps a loader that slices or decompresses on first use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

import blake3

from fatkit.errors import FatkitError


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
    kind: str  # ptx | elf | nvvm | hsaco | host | manifest (of `.fatkit_amd`) | other
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

    @property
    def payload(self) -> bytes:
        """The entry's content, exactly as `cuobjdump -xptx/-xelf` or `clang-offload-bundler` would write it.

        Not cached: a 500 MB library holds gigabytes of decompressed payloads. What is derived from it
        (hash, kernel names) is cached instead, computed from one read.
        """
        return self.loader()

    @cached_property
    def hash(self) -> str:
        """BLAKE3 of the payload: the key ZLUDA and fatkit's cache use for PTX, and how duplicates are found."""
        return blake3.blake3(self.payload).hexdigest()

    @cached_property
    def kernel_names(self) -> tuple[str, ...]:
        from fatkit.extract.kernels import kernel_names

        return kernel_names(self.kind, self.payload)

    @cached_property
    def kernels(self) -> tuple[Kernel, ...]:
        from fatkit.extract.kernels import kernels

        return kernels(self.kind, self.payload)

    def _derive(self, *, with_kernels: bool, with_hash: bool) -> None:
        """Fill the requested caches from a single read of the payload."""
        from fatkit.extract.kernels import kernels

        missing_hash = with_hash and "hash" not in self.__dict__
        missing_kernels = with_kernels and "kernels" not in self.__dict__
        if not (missing_hash or missing_kernels):
            return
        data = self.payload
        if missing_hash:
            self.__dict__["hash"] = blake3.blake3(data).hexdigest()
        if missing_kernels:
            self.__dict__["kernels"] = kernels(self.kind, data)

    def to_json(self, *, with_kernels: bool = False, with_hash: bool = False) -> dict[str, Any]:
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
        if self.error is None and (with_hash or with_kernels):
            try:
                self._derive(with_kernels=with_kernels, with_hash=with_hash)
            except FatkitError as exc:
                self.error = exc.message
        if with_hash and "hash" in self.__dict__:
            out["hash"] = self.hash
        if with_kernels and "kernels" in self.__dict__:
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
    format: str  # fatbin | offload-bundle | ccob | offload-section | cubin | ptx | hsaco
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
        return "amd" if self.format in ("offload-bundle", "ccob", "offload-section", "hsaco") else "nvidia"

    def to_json(self, **kw: bool) -> dict[str, Any]:
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
        out["entries"] = [e.to_json(**kw) for e in self.entries]
        return out


@dataclass(eq=False)
class Binary:
    """One input file (or archive/wheel member, named `outer!member`) and everything found in it."""

    path: str
    size: int
    # elf-exec | elf-pie | elf-shared | elf-rel | pe-dll (DLLs and .pyd modules) | pe-exe | cubin | hsaco | fatbin
    # | offload-bundle | ccob | ptx | other; elf / pe: headers fatkit could not read (the error says why)
    format: str
    containers: list[Container] = field(default_factory=list)
    needed: list[str] = field(default_factory=list)
    errors: list[FatkitError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was found that is neither NVIDIA nor AMD code

    @property
    def entries(self) -> list[Entry]:
        return [e for c in self.containers for e in c.entries]

    @cached_property
    def verdict(self) -> "Verdict":
        """The fast verdict: module by module, reading no payload except tiny uncompressed cubins."""
        from fatkit.extract.report import judge

        return judge(self)

    @cached_property
    def kernel_verdict(self) -> "Verdict":
        """The precise verdict: kernel by kernel, reading every PTX and cubin entry."""
        from fatkit.extract.report import judge

        return judge(self, by_kernel=True)

    def to_json(self, **kw: bool) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "format": self.format,
            "needed": list(self.needed),
            "containers": [c.to_json(**kw) for c in self.containers],
            "verdict": (self.kernel_verdict if kw.get("with_kernels") else self.verdict).to_json(),
            "notes": list(self.notes),
            "errors": [{"message": e.message, "offset": e.offset} for e in self.errors],
        }


@dataclass(frozen=True)
class Verdict:
    """What the binary means for AMD: translatable yes / partial / no / native / none, and why."""

    amd: str  # yes | partial | no | native | none
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
