"""The import structure of fatkit/: every import points down the layer list of the design, and no module
imports itself back through others (no cycle). Read from the sources (every `import`, deferred or not)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "fatkit"

# Top to bottom, as docs/design.md lists them: a module may import its own layer and the ones below.
LAYERS = ("cli", "repack", "cache", "emulate", "translate", "runtime", "extract", "formats", "errors")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.Module) -> set[ast.AST]:
    """The import nodes inside `if TYPE_CHECKING:` blocks: read by the type checker, never run."""
    nodes: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            nodes.update(n for statement in node.body for n in ast.walk(statement))
    return nodes


def _imports(path: Path, module: str, runtime_only: bool = False) -> set[str]:
    """fatkit modules `path` imports (absolute names; relative imports resolved); with `runtime_only`, not
    those only the type checker reads."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    skipped = _type_checking_only(tree) if runtime_only else set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if node in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from fatkit.x import module`
    return {name for name in found if name == "fatkit" or name.startswith("fatkit.")}


def _graph(runtime_only: bool = False) -> dict[str, set[str]]:
    """Module → the fatkit modules it imports. A module's own ancestor packages are left out: Python runs a
    package's __init__ before any of its modules, so naming it (`from fatkit.translate.ptx import ast`) adds
    no dependency a module does not already have."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m for m in _imports(path, name, runtime_only) if m in modules and m != name
                   and not name.startswith(m + ".")}
            for name, path in modules.items()}


def layer(module: str) -> int | None:
    """The module's index in LAYERS; None for the package root, `fatkit.__main__` (above everything)."""
    parts = module.split(".")
    if module == "fatkit":
        return len(LAYERS)  # only __version__: anything may read it
    if parts[1] == "__main__":
        return -1
    return LAYERS.index(parts[1])


def test_every_module_is_in_a_layer():
    for module in _graph():
        assert layer(module) is not None, module


def test_imports_only_point_down():
    upward = sorted(f"{module} imports {imported}" for module, imports in _graph().items() for imported in imports
                    if layer(imported) < layer(module))
    assert upward == []


def cycles_in(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk meets, each as the path that closes it."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the current path, 2 done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for imported in sorted(graph[module]):
            if state.get(imported) == 1:
                cycles.append(path[path.index(imported):] + [imported])
            elif imported not in state:
                visit(imported, path + [imported])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return cycles


def test_no_import_cycle():
    """Among the imports that run: an annotation may name a type of a module that imports this one."""
    cycles = cycles_in(_graph(runtime_only=True))
    assert cycles == [], "\n".join(" → ".join(c) for c in cycles)


def test_the_cycle_finder_finds_cycles():
    assert cycles_in({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles_in({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


@pytest.mark.parametrize("module, imported, allowed", [
    ("fatkit.cli.inspect", "fatkit.extract.scan", True),
    ("fatkit.extract.scan", "fatkit.repack.wheel", False),
    ("fatkit.formats.elf", "fatkit.errors", True),
    ("fatkit.translate.hazards", "fatkit.cache.key", False),
])
def test_the_rule_itself(module, imported, allowed):
    assert (layer(imported) >= layer(module)) == allowed
