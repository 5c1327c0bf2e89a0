"""What the passes share: the prepared module they build up, their error and a function rewriter.

Every pass takes the `Prepared` module and returns a new one: the syntax tree rewritten (passes that
normalise instructions) or facts added beside it (rounding, FP mode, storage). A function whose PTX a pass
cannot prepare is recorded in `failures` and left as it was; the kernels that reach it are reported
unsupported with that reason, the module's other kernels go on.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from fatkit.errors import FatkitError
from fatkit.translate.ptx import ast


class PassError(FatkitError):
    """A function's PTX a pass cannot prepare; `function`, `instruction` and `line` say where."""

    def __init__(self, function: str, what: str, line: int, why: str):
        super().__init__(f"{function}: line {line}: {what}: {why}")
        self.kernel, self.instruction, self.line, self.why = function, what, line, why


@dataclass(frozen=True)
class FloatMode:
    """How one floating-point instruction rounds, written out with PTX's defaults (pass `rounding`).

    `rounding`: rn/rz/rm/rp/rna (result rounding), rni/rzi/rmi/rpi (to an integral value), or None (exact
    results, or an approximation); `approx`: .approx/.full, not correctly rounded; `ftz`: subnormal inputs
    and results flushed to sign-preserving zero; `sat`: results clamped to [0, 1] (NaN → 0) or, for cvt to an
    integer, to its range; `contractible`: add/sub/mul written without a rounding modifier, which the ISA lets
    a compiler fuse into fma."""

    rounding: str | None
    approx: bool = False
    ftz: bool = False
    sat: bool = False
    contractible: bool = False

    def __str__(self) -> str:
        words = [self.rounding or ("approx" if self.approx else "exact")]
        if self.rounding and self.approx:
            words.append("approx")
        words += [w for w, on in (("ftz", self.ftz), ("sat", self.sat), ("contractible", self.contractible)) if on]
        return " ".join(words)


@dataclass(frozen=True)
class FpMode:
    """A function's f32 subnormal handling (pass `fp_mode`): `ftz` and `ieee` count its f32 instructions that
    flush subnormals and that keep them; `uniform` is the mode all of them, and those of every function it
    calls, agree on ("ftz" or "ieee"), None where they are mixed or there are none."""

    ftz: int
    ieee: int
    uniform: str | None


@dataclass(frozen=True)
class Buffer:
    """Per-thread stack bytes lowering allocates for a `.local` variable or a call's `.param` variable."""

    name: str
    space: str  # local | param
    size: int
    align: int


@dataclass(frozen=True)
class Storage:
    """What lowering turns into allocas for one function (pass `storage`): the PTX type of every scalar
    register, and the local/param buffers."""

    registers: dict[str, str]
    buffers: tuple[Buffer, ...] = ()


@dataclass(frozen=True)
class Prepared:
    """The module after the passes, with what they found: `float_modes` by (opcode, modifiers),
    `fp_modes`, `storage` and `failures` by function name."""

    module: ast.Module
    failures: dict[str, PassError] = field(default_factory=dict)
    float_modes: dict[tuple[str, tuple[str, ...]], FloatMode] = field(default_factory=dict)
    fp_modes: dict[str, FpMode] = field(default_factory=dict)
    storage: dict[str, Storage] = field(default_factory=dict)

    def float_mode(self, ins: ast.Instruction) -> FloatMode | None:
        return self.float_modes.get((ins.opcode, ins.modifiers))

    def failure(self, name: str) -> PassError | None:
        """Why `name`, or a function it calls (transitively), could not be prepared; None if it could."""
        pending, seen = [name], {name}
        while pending:
            current = pending.pop()
            if current in self.failures:
                return self.failures[current]
            function = self.module.function(current)
            for called in callees(function) if function is not None else ():
                if called not in seen:
                    seen.add(called)
                    pending.append(called)
        return None


def operand_names(operand: ast.Operand) -> Iterator[str]:
    """Every identifier an operand mentions (registers, variables, functions, labels)."""
    kind = type(operand)
    if kind is ast.Name:
        yield operand.name
    elif kind is ast.Address:
        if operand.base is not None:
            yield operand.base.name
        for item in operand.extra:
            yield from operand_names(item)
    elif kind in (ast.Vector, ast.ArgList):
        for item in operand.items:
            yield from operand_names(item)
    elif kind is ast.Pair:
        yield from operand_names(operand.first)
        yield from operand_names(operand.second)
    elif kind in (ast.Negated, ast.Minus):
        yield from operand_names(operand.operand)
    elif kind is ast.SymbolRef:
        yield operand.name


def callees(function: ast.Function) -> set[str]:
    """Names an instruction of `function` mentions that may be functions (called or address taken)."""
    return {name for ins in function.instructions() for op in ins.operands for name in operand_names(op)}


def each_function(prepared: Prepared, rewrite: Callable[[ast.Function, Prepared], ast.Function]) -> Prepared:
    """Apply `rewrite` to every function with a body that has not failed; a PassError it raises is recorded."""
    items, failures = [], dict(prepared.failures)
    for item in prepared.module.items:
        if type(item) is ast.Function and item.body is not None and item.name not in failures:
            try:
                item = rewrite(item, prepared)
            except PassError as error:
                failures[item.name] = error
        items.append(item)
    module = dataclasses.replace(prepared.module, items=tuple(items))
    return dataclasses.replace(prepared, module=module, failures=failures)


def bodies(prepared: Prepared) -> Iterator[ast.Function]:
    """The functions with a body that no pass has failed."""
    return (f for f in prepared.module.functions if f.body is not None and f.name not in prepared.failures)


def fail(function: ast.Function, statement, why: str) -> PassError:
    what = statement.name if type(statement) is ast.Instruction else type(statement).__name__
    return PassError(function.name, what, getattr(statement, "line", 0) or function.line, why)


_NAMING = (ast.Variable, ast.Label, ast.CallPrototype, ast.TargetList)  # statements that declare a name


class Rewriter:
    """Builds a function's new flat body: fresh registers and labels that collide with no name of the
    function, and the `.reg` declarations of the registers it made."""

    def __init__(self, function: ast.Function):
        self.function = function
        self._taken: set[str] | None = None  # the function's names, gathered at the first `fresh`
        self.declared: list[ast.Variable] = []
        self._counter = itertools.count()

    @property
    def taken(self) -> set[str]:
        # (most functions a pass rewrites get no new name: the walk over their statements is then saved)
        if self._taken is None:
            function = self.function
            self._taken = {v.name for v in (*function.params, *function.returns)}
            self._taken.update(s.name for s in function.statements() if type(s) in _NAMING)
        return self._taken

    def fresh(self, stem: str) -> str:
        while True:
            name = f"{stem}${next(self._counter)}"
            if name not in self.taken:
                self.taken.add(name)
                return name

    def register(self, ptx_type: str, stem: str = "%tmp", line: int = 0) -> ast.Name:
        name = self.fresh(stem)
        self.declared.append(ast.Variable("reg", ptx_type, name, line=line))
        return ast.Name(name)

    def body(self, statements: Iterable[ast.Statement]) -> ast.Function:
        """The function with `statements` as its body, the new registers declared first."""
        block = dataclasses.replace(self.function.body, statements=(*self.declared, *statements))
        return dataclasses.replace(self.function, body=block)


def register_types(function: ast.Function) -> dict[str, str]:
    """The PTX type of every `.reg` the function declares (`%r<N>` expanded), its `.reg` parameters included."""
    types = {v.name: v.type for v in (*function.params, *function.returns) if v.state_space == "reg"}
    for v in function.variables():
        if v.state_space == "reg":
            if v.count is None:
                types[v.name] = v.type
            else:
                types.update((f"{v.name}{i}", v.type) for i in range(v.count))
    return types


def instruction(opcode: str, modifiers: tuple[str, ...], operands: tuple, line: int) -> ast.Instruction:
    """An instruction a pass adds, attributed to the PTX line it stands for."""
    return ast.Instruction(opcode, modifiers, operands, line=line)
