"""Device linking of separately compiled PTX modules (`nvcc -rdc`), as nvlink links their cubins.

With `-rdc`, each translation unit's PTX stays a module of its own (a `__nv_relfatbin` container of the
binary) whose `.extern .func` and `.extern .global`/`.const` declarations name what another unit defines
(`.visible` or `.weak`). `link_modules` makes one module of them: the definitions replace the `.extern`
declarations; a name with internal linkage (no linkage directive: static functions, `$str` literals) is
per unit, so one that another unit also uses is renamed in its unit (`name_fatkit_rdc<unit>`); two
`.visible` definitions of a name are an error, as for nvlink; a `.visible` one wins over `.weak`/`.common`
ones, and of those the first is kept. An `.extern` that no unit defines stays, and lowering reports the
kernels that reach it, naming it. Debug information (`.file`, `.loc`, DWARF `.section`s) is left out: file
numbers are per unit.

Units are linked only when one of them declares `.extern` what another defines (`link_modules` returns None
otherwise); `linkable` is the quick look at the texts that spares parsing units that cannot need it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fatkit.errors import FatkitError
from fatkit.translate.hazards import DEVICE_RUNTIME_PREFIXES, EXTERN_FUNCTION_KINDS
from fatkit.translate.ptx import ast, parse_ptx
from fatkit.translate.ptx.printer import print_ptx

_EXPORTED = ("visible", "weak", "common")
_EXTERN_NAME = re.compile(r"^[ \t]*\.extern[ \t]+\.(?:func|global|const)\b[^;]*?([A-Za-z_$][\w$]*)\s*(?:\(|\[|;|=)",
                          re.M)
_IDENTIFIER = re.compile(r"[A-Za-z_$%][\w$]*")


def extern_names(text: str) -> set[str]:
    """The names a module's text declares `.extern .func`/`.global`/`.const` (a quick look, before parsing)."""
    names = set()
    for match in _EXTERN_NAME.finditer(text):
        names.add(match.group(1))
    return names


def linkable(texts: Sequence[str]) -> bool:
    """Whether some unit declares `.extern` a name that another unit's text mentions: then their definitions
    may meet (`link_modules` decides exactly; this only spares parsing units that cannot need it)."""
    externs = [extern_names(text) for text in texts]
    return any(name in other for i, names in enumerate(externs) for name in names
               for j, other in enumerate(texts) if j != i)


@dataclass(frozen=True)
class Linked:
    """Units linked into one module: its PTX text, and each `.extern` no unit defines → the unit declaring it
    (CUDA's device-runtime functions, which translation serves itself, left out)."""

    text: str
    unresolved: dict[str, str]


def link_units(units: list[tuple[str, str]]) -> Linked | None:
    """`link_modules` of the units where `linkable` says they may need each other (the selection's linker,
    `fatkit.extract.select.ptx_modules(link_rdc=link_units)`), else None without parsing them."""
    if not linkable([text for _, text in units]):
        return None
    return link_modules(units)


def link_modules(units: Sequence[tuple[str, str]]) -> Linked | None:
    """The units (name, PTX text) linked into one module, or None when no `.extern` of one unit is defined
    by another (each unit is complete on its own). Raises FatkitError for a name two units define
    `.visible`, or for units of different address sizes."""
    modules = [parse_ptx(text) for _, text in units]
    names = [name for name, _ in units]
    defined: list[dict[str, str | None]] = [_definitions(module) for module in modules]
    externs = [_externs(module) for module in modules]
    exported_by: dict[str, int] = {}  # name → the unit whose definition stands
    for index, definitions in enumerate(defined):
        for name, linkage in definitions.items():
            if linkage not in _EXPORTED and not _is_entry(modules[index], name):
                continue
            first = exported_by.get(name)
            if first is None:
                exported_by[name] = index
            elif _strong(linkage):
                if _strong(defined[first][name]):
                    raise FatkitError(f"{name} is defined in both {names[first]} and {names[index]} (multiple "
                                      "definition, as nvlink reports it)")
                exported_by[name] = index  # a .visible definition wins over .weak/.common ones
    if not any(name in exported_by and exported_by[name] != index
               for index, declared in enumerate(externs) for name in declared):
        return None
    if len({m.address_size for m in modules}) > 1:
        raise FatkitError("the -rdc modules " + ", ".join(names) + " differ in .address_size")
    everywhere: dict[str, int] = {}
    for definitions in defined:
        for name in definitions:
            everywhere[name] = everywhere.get(name, 0) + 1
    items: list[ast.ModuleItem] = []
    kept: set[str] = set()
    declared_extern: dict[str, str] = {}  # unresolved name → the unit declaring it first
    for index, module in enumerate(modules):
        local = {name: f"{name}_fatkit_rdc{index}" for name, linkage in defined[index].items()
                 if linkage is None and not _is_entry(module, name) and everywhere[name] > 1}
        for item in module.items:
            if isinstance(item, (ast.File, ast.Section)):
                continue
            if isinstance(item, (ast.Function, ast.Variable)):
                shared = isinstance(item, ast.Variable) and item.state_space == "shared"
                if item.linkage == "extern" and not shared:
                    if item.name in exported_by or item.name in declared_extern:
                        continue  # defined by a unit (or already declared): the definition stands
                    declared_extern[item.name] = names[index]
                elif _is_definition(item) and item.name in exported_by and exported_by[item.name] != index:
                    continue  # a .weak/.common definition where another unit's stands
                elif shared and item.name in kept:
                    continue  # the same dynamic shared array declared in two units
                kept.add(item.name)
            items.append(_renamed(item, local) if local else _without_locations(item))
    newest = max((m.version for m in modules if m.version), default=None)
    target = max((m.target for m in modules), key=lambda t: _sm(t[0]) if t else 0)
    text = print_ptx(ast.Module(newest, target, modules[0].address_size, _declared_first(items)))
    return Linked(text, {name: unit for name, unit in declared_extern.items()
                         if name not in EXTERN_FUNCTION_KINDS and not name.startswith(DEVICE_RUNTIME_PREFIXES)})


def _strong(linkage: str | None) -> bool:
    """A `.visible` definition, or a kernel's (whose name the runtime looks up): one per link."""
    return linkage in ("visible", None)


def _sm(arch: str) -> int:
    match = re.match(r"sm_(\d+)", arch)
    return int(match.group(1)) if match else 0


def _is_entry(module: ast.Module, name: str) -> bool:
    function = module.function(name)
    return function is not None and function.kind == "entry"


def _is_definition(item: ast.Function | ast.Variable) -> bool:
    if isinstance(item, ast.Function):
        return item.body is not None
    return item.linkage != "extern"


def _definitions(module: ast.Module) -> dict[str, str | None]:
    """Module-level names the module defines (functions with bodies, variables not `.extern`): linkage."""
    found: dict[str, str | None] = {}
    for item in module.items:
        if isinstance(item, (ast.Function, ast.Variable)) and _is_definition(item):
            found.setdefault(item.name, item.linkage)
    return found


def _externs(module: ast.Module) -> set[str]:
    return {item.name for item in module.items
            if isinstance(item, (ast.Function, ast.Variable)) and item.linkage == "extern"}


def _declared_first(items: list[ast.ModuleItem]) -> tuple[ast.ModuleItem, ...]:
    """The items with a declaration of every `.func` ahead of all variables and bodies: PTX names a function
    only after its declaration, and a unit may call what a later unit defines (or a vtable name it)."""
    declarations, seen = [], set()
    for item in items:
        if type(item) is ast.Function and item.kind == "func" and item.body is not None and item.name not in seen:
            seen.add(item.name)
            declarations.append(dataclasses.replace(item, body=None))
    rest = [item for item in items
            if not (type(item) is ast.Function and item.body is None and item.name in seen)]
    return tuple(declarations + rest)


def _without_locations(node: ast.ModuleItem) -> ast.ModuleItem:
    return _renamed(node, {})


def _renamed(node: Any, mapping: dict[str, str]) -> Any:
    """`node` (an AST node, a tuple of them, or a leaf value) with the module-level names in `mapping` renamed
    wherever they are used, and without `.loc`."""
    kind = type(node)
    if kind is tuple:
        return tuple(_renamed(item, mapping) for item in node if type(item) is not ast.Loc)
    if kind is ast.Name or kind is ast.SymbolRef:
        return dataclasses.replace(node, name=mapping[node.name]) if node.name in mapping else node
    if kind is ast.Expr:
        return ast.Expr(_IDENTIFIER.sub(lambda m: mapping.get(m.group(0), m.group(0)), node.text))
    if kind is ast.TargetList:
        return dataclasses.replace(node, targets=tuple(mapping.get(t, t) for t in node.targets))
    if isinstance(node, type) or not dataclasses.is_dataclass(node) or kind in (ast.Label, ast.IntImm,
                                                                                   ast.FloatImm, ast.Pragma):
        return node
    changes = {}
    for field in dataclasses.fields(node):
        value = getattr(node, field.name)
        if type(value) is tuple or dataclasses.is_dataclass(value):
            changes[field.name] = _renamed(value, mapping)
    if isinstance(node, (ast.Function, ast.Variable, ast.Alias)) and node.name in mapping:
        changes["name"] = mapping[node.name]
    if isinstance(node, ast.Alias) and node.target in mapping:
        changes["target"] = mapping[node.target]
    return dataclasses.replace(node, **changes)
