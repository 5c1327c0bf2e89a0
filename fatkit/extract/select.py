"""The PTX modules of scanned binaries, each named the way `fatkit extract` names its files."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from fatkit.errors import FatkitError
from fatkit.extract.model import Binary
from fatkit.extract.write import safe_component


@dataclass(frozen=True)
class PtxModule:
    """One PTX module to translate: where it came from and the file-name stem its outputs get."""

    source: str
    container: int | None  # container and entry index inside a binary; None for a .ptx file
    entry: int | None
    arch: str | None  # compute_XX of the fatbin entry; None for a .ptx file
    stem: str
    text: str


def ptx_modules(binaries: Iterable[Binary], on_error: Callable[[str], None]) -> Iterator[PtxModule]:
    """Every PTX entry of every binary, stems unique; what cannot be read goes to `on_error`, with its file."""
    used: set[str] = set()
    for binary in binaries:
        name = safe_component(re.split(r"[/!\\]", binary.path)[-1])
        for error in binary.errors:
            on_error(f"{binary.path}: {error}")
        for container in binary.containers:
            for entry in container.entries:
                if entry.kind != "ptx":
                    continue
                in_file = binary.format == "ptx"
                stem = (name.removesuffix(".ptx") if in_file
                        else f"{name}.c{container.index}.e{entry.index}.{safe_component(entry.arch)}")
                try:
                    text = entry.payload.decode("utf-8", errors="replace")
                except FatkitError as exc:
                    on_error(f"{binary.path}: {exc}")
                    continue
                yield PtxModule(binary.path, None if in_file else container.index,
                                None if in_file else entry.index, None if in_file else entry.arch,
                                _unique(stem, used), text)


def _unique(stem: str, used: set[str]) -> str:
    candidate, n = stem, 1
    while candidate in used:
        n += 1
        candidate = f"{stem}-{n}"
    used.add(candidate)
    return candidate
