"""Write entries out as files: names derived from the binary, container and entry, never from raw identifiers."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Iterable

import blake3

from fatkit.errors import FatkitError, InputError
from fatkit.extract.model import Binary, Entry

EXTENSIONS = {"ptx": "ptx", "elf": "cubin", "nvvm": "nvvm", "hsaco": "hsaco"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def safe_component(text: str, limit: int = 80) -> str:
    """One file-name component from arbitrary text: no separators, no leading dots, bounded length."""
    cleaned = _UNSAFE.sub("_", text).lstrip(".") or "_"
    return cleaned[:limit]


def arch_matches(entry: Entry, arch: str | None) -> bool:
    """`--arch` filter: exact (`sm_90`, `compute_90a`, `gfx942:xnack-`) or a gfx processor without features."""
    return arch is None or entry.arch == arch or entry.arch.split(":")[0] == arch


def extract_entries(binaries: Iterable[Binary], outdir: Path, kinds: set[str], arch: str | None) -> dict:
    """Write the selected entries of every binary into outdir, plus manifest.json; return the manifest."""
    outdir = Path(outdir)
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create output directory: {exc.strerror}", path=str(outdir)) from None
    root = outdir.resolve()
    used: set[str] = set()
    files: list[dict[str, object]] = []
    errors: list[dict[str, object]] = []
    for binary in binaries:
        stem = safe_component(re.split(r"[/!\\]", binary.path)[-1])
        errors.extend({"path": binary.path, "offset": e.offset, "message": e.message} for e in binary.errors)
        for container in binary.containers:
            for entry in container.entries:
                if entry.kind not in kinds or not arch_matches(entry, arch):
                    continue
                name = f"{stem}.c{container.index}.e{entry.index}.{safe_component(entry.arch)}.{EXTENSIONS[entry.kind]}"
                name = _unique(name, used)
                target = root / name
                if target.parent != root:  # cannot happen with safe_component; the guarantee is checked anyway
                    raise InputError(f"refusing to write outside {root}: {name}")
                try:
                    data = entry.payload
                except FatkitError as exc:
                    errors.append({"path": binary.path, "offset": exc.offset, "message": exc.message})
                    continue
                _write(target, data)
                files.append({
                    "file": name, "binary": binary.path, "container": container.index,
                    "container_offset": container.offset, "section": container.section, "entry": entry.index,
                    "kind": entry.kind, "arch": entry.arch, "size": len(data),
                    "hash": blake3.blake3(data).hexdigest(),
                })
    manifest = {"files": files, "errors": errors}
    _write(root / "manifest.json", json.dumps(manifest, indent=2).encode() + b"\n")
    return manifest


def _unique(name: str, used: set[str]) -> str:
    candidate, n = name, 1
    while candidate in used:
        n += 1
        base, dot, ext = name.rpartition(".")
        candidate = f"{base}-{n}{dot}{ext}"
    used.add(candidate)
    return candidate


def _write(target: Path, data: bytes) -> None:
    tmp = target.with_name(target.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, target)
