"""The PTX modules of scanned binaries, each named the way `fatkit extract` names its files."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Iterator, Protocol

from fatkit.errors import FatkitError
from fatkit.extract.model import Binary
from fatkit.extract.write import safe_component
from fatkit.formats.elf import SHT_SYMTAB, STT_FUNC, STT_OBJECT, ElfView


@dataclass(frozen=True)
class PtxModule:
    """One PTX module to translate: where it came from and the file-name stem its outputs get.

    A module of `-rdc` units linked into one (`ptx_modules(link_rdc=link_units)`) has `container` and `entry`
    None, `linked` the containers of its units and `members` their PTX texts (what its cache key hashes)."""

    source: str
    container: int | None  # container and entry index inside a binary; None for a .ptx file
    entry: int | None
    arch: str | None  # compute_XX of the fatbin entry; None for a .ptx file
    stem: str
    text: str
    linked: tuple[int, ...] = ()
    members: tuple[str, ...] = ()


class RdcLinked(Protocol):
    """What linking -rdc units gives (fatkit/translate/link.py's `Linked`)."""

    @property
    def text(self) -> str: ...

    @property
    def unresolved(self) -> dict[str, str]: ...  # an .extern no unit defines → the unit declaring it


# Links -rdc units (name, PTX text) into one module, or None where none needs another; the translator's
# `link_units`, passed in by the caller because the translator sits above this layer.
RdcLinker = Callable[[list[tuple[str, str]]], "RdcLinked | None"]

RELOCATABLE_SECTION = "__nv_relfatbin"  # the per-unit fatbins of an -rdc build (ET_REL cubins and PTX)


def ptx_modules(binaries: Iterable[Binary], on_error: Callable[[str], None], *,
                link_rdc: RdcLinker | None = None) -> Iterator[PtxModule]:
    """Every PTX entry of every binary, stems unique; what cannot be read goes to `on_error`, with its file.

    With a `link_rdc` linker (fatkit.translate.link.link_units), the PTX modules of a binary's `-rdc` units
    (its `__nv_relfatbin` containers) of one compute capability are linked into one module, as nvlink links
    their cubins, where one unit declares `.extern` what another defines; that module replaces them. The CUDA runtime
    registers such units together, as one image (docs/cache.md), so the linked module is what a shim sees."""
    used: set[str] = set()
    for binary in binaries:
        name = safe_component(re.split(r"[/!\\]", binary.path)[-1])
        for error in binary.errors:
            on_error(str(error.located(binary.path)))  # scan errors name their file already
        found: list[tuple[PtxModule, bool]] = []  # (module, whether it is an -rdc unit)
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
                    on_error(str(exc.located(binary.path)))
                    continue
                found.append((PtxModule(binary.path, None if in_file else container.index,
                                        None if in_file else entry.index, None if in_file else entry.arch,
                                        stem, text), container.section == RELOCATABLE_SECTION))
        modules = [module for module, _ in found]
        if link_rdc is not None:
            # (reading the images' symbols only where there are units to link: a binary holds thousands of cubins)
            links = _device_links(binary) if sum(relocatable for _, relocatable in found) > 1 else {}
            modules = _rdc_linked(binary.path, name, found, on_error, link_rdc, links)
        for module in modules:
            yield replace(module, stem=_unique(module.stem, used))


# functions and objects; a relocatable cubin types its __device__ variables 13 (STT_LOPROC: CUDA's object)
_SYMBOL_TYPES = (STT_FUNC, STT_OBJECT, 13)


def _symbol_names(payload, defined: bool) -> set[str]:
    """The function and object symbols of a CUDA ELF (those it defines, if `defined`); none if unreadable."""
    try:
        elf = ElfView(payload)
        table = next((s for s in elf.sections if s.type == SHT_SYMTAB), None)
        if table is None:
            return set()
        return {symbol.name for symbol in elf.symbols(table) if symbol.name and symbol.type in _SYMBOL_TYPES
                and (symbol.shndx != 0 or not defined)}
    except FatkitError:
        return set()


def _device_links(binary: Binary) -> dict[int, int]:
    """Which device link each -rdc unit's container belongs to: unit container → the container of the linked
    image (nvlink's output, in `.nv_fatbin`) holding most of the unit's symbols, among them the per-unit
    `_INTERNAL_<hash>` names of its static functions. A binary made of several device links (two libraries,
    each device-linked on its own) has one image each, and units link only with their own link's; a unit
    no image or two images claim equally is left out (linked with the other such units, as one link)."""
    images: dict[int, set[str]] = {}
    units: dict[int, set[str]] = {}
    for container in binary.containers:
        for entry in container.entries:
            if entry.kind != "elf":
                continue
            relocatable = container.section == RELOCATABLE_SECTION
            names = _symbol_names(entry.payload, defined=relocatable)
            (units if relocatable else images).setdefault(container.index, set()).update(names)
    links: dict[int, int] = {}
    for unit, names in units.items():
        scores = sorted(((len(names & image_names), image) for image, image_names in images.items()), reverse=True)
        if scores and scores[0][0] and (len(scores) == 1 or scores[1][0] < scores[0][0]):
            links[unit] = scores[0][1]
    return links


def _rdc_linked(path: str, name: str, found: list[tuple[PtxModule, bool]], on_error: Callable[[str], None],
                link: RdcLinker, device_links: dict[int, int] | None = None) -> list[PtxModule]:
    """`found` with the -rdc units of each compute capability and device link (`_device_links`; without them,
    all units as one link) linked into one module where they need it."""
    device_links = device_links or {}
    by_group: dict[tuple[str, int | None], list[PtxModule]] = {}
    for module, relocatable in found:
        if relocatable and module.arch is not None:
            group = device_links.get(module.container) if module.container is not None else None
            by_group.setdefault((module.arch, group), []).append(module)
    several = len({group for _, group in by_group}) > 1
    replaced: dict[int, PtxModule | None] = {}  # id of a unit → the linked module (at its first unit) or None
    for (arch, group), units in by_group.items():
        if len(units) < 2:
            continue
        try:
            result = link([(f"c{u.container}.e{u.entry}", u.text) for u in units])
        except FatkitError as exc:
            on_error(f"{path}: cannot link the -rdc units of {arch}: {exc}")
            continue
        if result is None:
            continue
        for symbol, unit in sorted(result.unresolved.items()):
            on_error(f"{path}: {symbol}, declared .extern in the -rdc unit {unit} ({arch}), is defined by no unit "
                     "of the binary: the kernels reaching it are not translated")
        stem = f"{name}.rdc.c{group}.{safe_component(arch)}" if several else f"{name}.rdc.{safe_component(arch)}"
        linked = PtxModule(path, None, None, arch, stem, result.text,
                           tuple(u.container for u in units if u.container is not None), tuple(u.text for u in units))
        replaced.update({id(u): None for u in units})
        replaced[id(units[0])] = linked
    out = []
    for module, _ in found:
        if id(module) not in replaced:
            out.append(module)
        else:
            linked_module = replaced[id(module)]
            if linked_module is not None:
                out.append(linked_module)
    return out


def _unique(stem: str, used: set[str]) -> str:
    candidate, n = stem, 1
    while candidate in used:
        n += 1
        candidate = f"{stem}-{n}"
    used.add(candidate)
    return candidate
