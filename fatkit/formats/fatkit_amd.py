"""The `.fatkit_amd` section: an offload bundle of translated code objects plus the manifest that maps them.

The section's bytes are one clang offload bundle, compressed as CCOB v3 (zstd) by default, so
`llvm-objcopy --dump-section .fatkit_amd=x` gives a file `clang-offload-bundler --list` reads as it is:

- the host entry (`host-x86_64-unknown-linux-gnu-`, first, as clang writes it) holds the manifest: UTF-8 JSON,
  keys sorted, no whitespace, no timestamps or paths (the same inputs give the same bytes);
- one entry per code object, id `hipv4-amdgcn-amd-amdhsa-ptx<BLAKE3 of the PTX>-<target id>`. The PTX hash in
  the triple's environment field keeps ids unique when several modules are translated for one target
  (a bundle holds one entry per id; clang's bundler parses `<kind>-<arch>-<vendor>-<os>-<env>-<target id>`).

Manifest (version 1): `{"format": "fatkit-amd", "version": 1, "fatkit_version", "translator", "targets",
"modules": [...]}`; one module record per (PTX module, target) in (ptx_blake3, target) order, with the
code object's `bundle_id` (null when nothing was produced), `status` (translated | failed | no-kernels), the
failure `reason`, every kernel with its status and reason, the other PTX candidates of the
same fatbin (`alternatives`, which a shim may also be asked for) and where the PTX sits (`sources`: c0.e1).
docs/repack.md describes it for shim writers. `read_payload` accepts exactly this and nothing else: it is
fed hostile bytes by the fuzzer, so every size is bounded and every field type-checked.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from fatkit.errors import FatkitError, FormatError
from fatkit.formats import offload_bundle
from fatkit.formats.common import MAX_PAYLOAD, cap
from fatkit.formats.magic import FATKIT_AMD_SECTION

SECTION_NAME = FATKIT_AMD_SECTION
MANIFEST_FORMAT = "fatkit-amd"
MANIFEST_VERSION = 1
MANIFEST_BUNDLE_ID = offload_bundle.HOST_BUNDLE_ID
CODE_OBJECT_KIND = "hipv4"
CODE_OBJECT_TRIPLE = "amdgcn-amd-amdhsa"
# The manifest of the largest corpus library is a few hundred KB; anything near this is hostile.
MAX_MANIFEST = 64 << 20
MODULE_STATUSES = ("translated", "failed", "no-kernels")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_TARGET_ID = re.compile(r"gfx[0-9a-f]+(?::[a-z]+[+-])*")
_SOURCE = re.compile(r"c\d+\.e\d+")


@dataclass(frozen=True)
class KernelRecord:
    name: str
    status: str  # "ok" or the translator's reason class
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "reason": self.reason}


@dataclass(frozen=True)
class ModuleRecord:
    """One PTX module translated (or not) for one target."""

    ptx_blake3: str  # BLAKE3 of the PTX text the code object was translated from (fatkit's cache key)
    target: str  # requested target id, normalised
    status: str  # translated | failed | no-kernels (served from the cache or not: the bytes are the same)
    bundle_id: str | None  # the bundle entry holding the code object; None when there is none
    arch: str | None = None  # compute_XX of the PTX entry
    sources: tuple[str, ...] = ()  # fatbin containers and entries holding this PTX: "c0.e1"
    alternatives: tuple[str, ...] = ()  # BLAKE3 of the other PTX entries of the same fatbin(s)
    reason: str | None = None  # why there is no code object
    kernels: tuple[KernelRecord, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"ptx_blake3": self.ptx_blake3, "target": self.target, "status": self.status,
                "bundle_id": self.bundle_id, "arch": self.arch, "sources": list(self.sources),
                "alternatives": list(self.alternatives), "reason": self.reason,
                "kernels": [k.to_json() for k in self.kernels]}


@dataclass(frozen=True)
class Manifest:
    """What `.fatkit_amd` holds: the module records and the code objects by bundle id."""

    fatkit_version: str
    translator: str
    targets: tuple[str, ...]
    modules: tuple[ModuleRecord, ...]
    code_objects: Mapping[str, bytes] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The manifest document stored in the host entry (code objects are the bundle's other entries)."""
        return {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "fatkit_version": self.fatkit_version,
                "translator": self.translator, "targets": list(self.targets),
                "modules": [m.to_json() for m in self.modules]}

    def find(self, ptx_blake3: str, target: str) -> ModuleRecord | None:
        """The record serving this PTX (translated from it, or from another PTX entry of its fatbin)."""
        for wanted_alternatives in (False, True):
            for module in self.modules:
                matches = ptx_blake3 in module.alternatives if wanted_alternatives else module.ptx_blake3 == ptx_blake3
                if matches and module.target == target and module.bundle_id is not None:
                    return module
        return None


def code_object_bundle_id(ptx_blake3: str, target_id: str) -> str:
    return f"{CODE_OBJECT_KIND}-{CODE_OBJECT_TRIPLE}-ptx{ptx_blake3}-{target_id}"


def build_payload(manifest: Manifest, *, compress: bool = True) -> bytes:
    """The section bytes: a CCOB v3 (zstd) — or with `compress=False` a plain bundle — holding the manifest as
    the host entry, then the code objects in bundle-id order. Deterministic: equal manifests, equal bytes."""
    referenced = [m.bundle_id for m in manifest.modules if m.bundle_id is not None]
    if len(set(referenced)) != len(referenced):
        raise FatkitError("two module records name the same code object")
    if set(referenced) != set(manifest.code_objects):
        raise FatkitError("the code objects and the module records that name them differ")
    document = json.dumps(manifest.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    entries = [(MANIFEST_BUNDLE_ID, document.encode("utf-8"))]
    entries += [(bundle_id, bytes(manifest.code_objects[bundle_id])) for bundle_id in sorted(manifest.code_objects)]
    bundle = offload_bundle.build_bundle(entries, align=8)
    return offload_bundle.build_ccob(bundle, version=3, method="zstd") if compress else bundle


def read_payload(data: bytes) -> Manifest:
    """The manifest and code objects of a `.fatkit_amd` section; FormatError for anything else."""
    data = bytes(data)
    cap(len(data), f"{SECTION_NAME} section", MAX_PAYLOAD)
    if data.startswith(offload_bundle.CCOB_MAGIC):
        ccob = offload_bundle.parse_ccob(data, 0)
        if ccob.size != len(data):
            raise FormatError(f"{SECTION_NAME}: {len(data) - ccob.size} bytes follow the compressed bundle",
                              offset=ccob.size)
        data = offload_bundle.decompress_ccob(data, ccob)
    elif not data.startswith(offload_bundle.BUNDLE_MAGIC):
        raise FormatError(f"{SECTION_NAME} holds neither an offload bundle nor a CCOB", offset=0)
    bundle = offload_bundle.parse_bundle(data, 0)
    payloads: dict[str, bytes] = {}
    for entry in bundle.entries:
        if entry.id in payloads:
            raise FormatError(f"{SECTION_NAME}: bundle id {entry.id!r} appears twice", offset=entry.offset)
        payloads[entry.id] = bytes(offload_bundle.bundle_payload(data, bundle, entry))
    if MANIFEST_BUNDLE_ID not in payloads:
        raise FormatError(f"{SECTION_NAME}: no manifest (host entry {MANIFEST_BUNDLE_ID!r})")
    document = _parse_document(payloads.pop(MANIFEST_BUNDLE_ID))
    manifest = _manifest(document, payloads)
    referenced = {m.bundle_id for m in manifest.modules if m.bundle_id is not None}
    unreferenced = sorted(set(payloads) - referenced)
    if unreferenced:
        raise FormatError(f"{SECTION_NAME}: code object {unreferenced[0]!r} is in no module record")
    return manifest


def _parse_document(raw: bytes) -> dict[str, Any]:
    cap(len(raw), f"{SECTION_NAME} manifest", MAX_MANIFEST)
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FormatError(f"{SECTION_NAME}: manifest is not JSON: {type(exc).__name__}") from None
    if not isinstance(document, dict) or document.get("format") != MANIFEST_FORMAT:
        raise FormatError(f"{SECTION_NAME}: manifest is not a {MANIFEST_FORMAT} document")
    if document.get("version") != MANIFEST_VERSION:
        raise FormatError(f"{SECTION_NAME}: manifest version {document.get('version')!r} is not "
                          f"{MANIFEST_VERSION}")
    return document


class _Fields:
    """Typed reads from one JSON object; every mistake is a FormatError naming the field and where."""

    def __init__(self, obj: Any, where: str):
        if not isinstance(obj, dict):
            raise FormatError(f"{SECTION_NAME}: {where} is not an object")
        self.obj, self.where = obj, where

    def get(self, key: str, kind: type | tuple[type, ...], *, optional: bool = False,
            pattern: re.Pattern | None = None) -> Any:
        value = self.obj.get(key)
        if value is None and optional:
            return None
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            raise FormatError(f"{SECTION_NAME}: {self.where}.{key} is missing or has the wrong type")
        if pattern is not None and not pattern.fullmatch(value):
            raise FormatError(f"{SECTION_NAME}: {self.where}.{key} = {str(value)[:80]!r} is malformed")
        return value

    def strings(self, key: str, pattern: re.Pattern | None = None) -> tuple[str, ...]:
        values = self.get(key, list)
        for i, value in enumerate(values):
            if not isinstance(value, str) or pattern is not None and not pattern.fullmatch(value):
                raise FormatError(f"{SECTION_NAME}: {self.where}.{key}[{i}] is malformed")
        return tuple(values)


def _manifest(document: dict[str, Any], payloads: dict[str, bytes]) -> Manifest:
    top = _Fields(document, "manifest")
    modules = []
    seen: set[str] = set()
    for i, raw in enumerate(top.get("modules", list)):
        fields = _Fields(raw, f"modules[{i}]")
        ptx = fields.get("ptx_blake3", str, pattern=_HEX64)
        target = fields.get("target", str, pattern=_TARGET_ID)
        status = fields.get("status", str)
        if status not in MODULE_STATUSES:
            raise FormatError(f"{SECTION_NAME}: modules[{i}].status {status[:40]!r} is not one of {MODULE_STATUSES}")
        bundle_id = fields.get("bundle_id", str, optional=True)
        if bundle_id is not None:
            if bundle_id not in payloads:
                raise FormatError(f"{SECTION_NAME}: modules[{i}] names code object {bundle_id[:120]!r}, "
                                  "which the bundle does not hold")
            if bundle_id in seen:
                raise FormatError(f"{SECTION_NAME}: code object {bundle_id[:120]!r} is named twice")
            seen.add(bundle_id)
        kernels = []
        for j, kernel in enumerate(fields.get("kernels", list)):
            kf = _Fields(kernel, f"modules[{i}].kernels[{j}]")
            kernels.append(KernelRecord(kf.get("name", str), kf.get("status", str),
                                        kf.get("reason", str, optional=True)))
        modules.append(ModuleRecord(
            ptx_blake3=ptx, target=target, status=status, bundle_id=bundle_id,
            arch=fields.get("arch", str, optional=True), sources=fields.strings("sources", _SOURCE),
            alternatives=fields.strings("alternatives", _HEX64), reason=fields.get("reason", str, optional=True),
            kernels=tuple(kernels)))
    return Manifest(fatkit_version=top.get("fatkit_version", str), translator=top.get("translator", str),
                    targets=top.strings("targets", _TARGET_ID), modules=tuple(modules),
                    code_objects={bundle_id: payloads[bundle_id] for bundle_id in sorted(seen)})
