"""The typed PTX syntax tree: a Module of functions, variables and directives, down to operands.

Every node is a frozen dataclass. `line` and `column` (1-based, where the node starts in the parsed
text) take no part in equality, so `parse_ptx(print_ptx(m)) == m` compares structure only. Nodes keep
what PTX says and nothing derived from it: identifiers are not resolved, registers are named, not typed.

    Module ── version, target, address_size
      └ items: Function | Variable | File | Section | Pragma | Alias
    Function ── kind (entry|func), linkage, name, returns, params, directives (.maxntid …), body
      └ body: Block ── statements: Instruction | Label | Variable | Block | Pragma | Loc
                                   | CallPrototype | TargetList
    Instruction ── guard, opcode, modifiers, operands
      └ operands: Name | Sink | IntImm | FloatImm | Address | Vector | Pair | Negated | Minus | ArgList
                  | SymbolRef | Expr
"""

from __future__ import annotations

import math

import re
import struct
from dataclasses import dataclass, field
from typing import Iterator, Union

# --------------------------------------------------------------------------------------------------
# operands


@dataclass(frozen=True, slots=True)
class Name:
    """A register, variable, parameter, label or function used as an operand: `%r1`, `%tid.x`, `$L__BB0_2`.

    `component` is the vector element selected with `.x`/`.y`/`.z`/`.w` (`%tid.x`, `%ctaid.y`).
    """

    name: str
    component: str | None = None

    @property
    def is_special_register(self) -> bool:
        return is_special_register(self.name)


@dataclass(frozen=True, slots=True)
class Sink:
    """`_`: a result the instruction computes and nobody reads."""


@dataclass(frozen=True, slots=True)
class IntImm:
    """An integer literal; `radix` (2, 8, 10, 16) and the `U` suffix are kept so it prints as written."""

    value: int
    radix: int = 10
    unsigned: bool = False


@dataclass(frozen=True, slots=True)
class FloatImm:
    """A floating-point literal as its IEEE bits: `0f3F800000` (width 32), `0d3FF0000000000000` (64).

    `decimal` marks a literal written in decimal (`1.5`), which PTX reads as a double.
    """

    bits: int
    width: int
    decimal: bool = False

    @property
    def value(self) -> float:
        if self.width == 32:
            return struct.unpack("<f", self.bits.to_bytes(4, "little"))[0]
        return struct.unpack("<d", self.bits.to_bytes(8, "little"))[0]


@dataclass(frozen=True, slots=True)
class Address:
    """`[base+offset]`: base is a register or variable (None for an absolute address `[256]`).

    Texture, surface and tensor-map operands carry more inside the brackets: `[tex, {x, y}]`,
    `[tensorMap, {c0, c1}]`, `[tex, sampler, {x}]` — those are `extra`.
    """

    base: Name | None
    offset: int = 0
    extra: tuple[Operand, ...] = ()


@dataclass(frozen=True, slots=True)
class Vector:
    """`{a, b, c, d}`: the registers of a vector operand (elements may be `_`)."""

    items: tuple[Operand, ...]


@dataclass(frozen=True, slots=True)
class Pair:
    """`d|p`: an instruction writing a second, predicate result (`setp`, `shfl.sync`, `match`)."""

    first: Operand
    second: Operand


@dataclass(frozen=True, slots=True)
class Negated:
    """`!p`: a predicate source operand used inverted."""

    operand: Operand


@dataclass(frozen=True, slots=True)
class Minus:
    """`-a`: a register source operand negated (vmad's `-a`, `-b`, `-c`); literals keep their sign."""

    operand: Operand


@dataclass(frozen=True, slots=True)
class ArgList:
    """`(a, b)`: the return or argument list of `call`."""

    items: tuple[Operand, ...]


@dataclass(frozen=True, slots=True)
class SymbolRef:
    """An address constant in an initializer or operand: `sym+8`, `generic(sym)`, `generic(sym)+8`."""

    name: str
    offset: int = 0
    generic: bool = False


@dataclass(frozen=True, slots=True)
class Expr:
    """Any other constant expression (`$L__func_end0-$L__func_begin0`, `(1<<4)`), whitespace normalised."""

    text: str


Operand = Union[Name, Sink, IntImm, FloatImm, Address, Vector, Pair, Negated, Minus, ArgList, SymbolRef, Expr]


@dataclass(frozen=True, slots=True)
class InitList:
    """`{a, b, {c, d}}`: an aggregate initializer."""

    items: tuple[Initializer, ...]


Initializer = Union[Operand, InitList]

# --------------------------------------------------------------------------------------------------
# statements


@dataclass(frozen=True, slots=True)
class Guard:
    """`@p` / `@!p`: the predicate that decides whether an instruction executes."""

    register: str
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Instruction:
    """`[@guard] opcode{.modifier} operand, …;` — `ld.global.nc.v4.u32` is opcode `ld`,
    modifiers `("global", "nc", "v4", "u32")`; `::` qualifiers stay inside one modifier (`shared::cta`).
    """

    opcode: str
    modifiers: tuple[str, ...]
    operands: tuple[Operand, ...]
    guard: Guard | None = None
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)

    @property
    def name(self) -> str:
        """The full instruction name as written: `ld.global.nc.v4.u32`."""
        return ".".join((self.opcode,) + self.modifiers)

    def has(self, *modifiers: str) -> bool:
        """Whether every one of `modifiers` is present (`ins.has("sync", "aligned")`)."""
        return all(m in self.modifiers for m in modifiers)


@dataclass(frozen=True, slots=True)
class Label:
    """`name:` — a branch target (or, in a debug section, a data address)."""

    name: str
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Variable:
    """One declared name: `.reg .b32 %r<100>`, `.shared .align 16 .b8 smem[4096]`, a `.param`.

    A statement declaring several names (`.reg .pred p, q;`) becomes one Variable per name.
    `array` holds the dimensions (`None` for `[]`, an unsized extern array); `count` is N of the
    parameterised register names `%r<N>`; `ptr`, `ptr_space`, `ptr_align` come from kernel parameters
    (`.param .u64 .ptr .global .align 16 p`).
    """

    state_space: str  # reg, sreg, const, global, local, param, shared, tex
    type: str  # b32, f16x2, pred, texref, …
    name: str
    linkage: str | None = None  # visible, extern, weak, common
    align: int | None = None
    vector: int | None = None  # 2, 4, 8 for .v2/.v4/.v8
    array: tuple[int | None, ...] = ()
    count: int | None = None
    ptr: bool = False
    ptr_space: str | None = None
    ptr_align: int | None = None
    attributes: tuple[str, ...] = ()  # `.attribute(.managed)` → ".managed"
    initializer: Initializer | None = None
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)

    @property
    def element_size(self) -> int | None:
        """Bytes of one element (vector width included); None for predicates and opaque types."""
        size = TYPE_SIZES.get(self.type)
        return None if size is None else size * (self.vector or 1)

    @property
    def size_bytes(self) -> int | None:
        """Bytes the variable occupies; None when unsized (`[]`) or of an opaque type."""
        size = self.element_size
        if size is None or None in self.array:
            return None
        for dim in self.array:
            size *= dim
        return size


@dataclass(frozen=True, slots=True)
class Block:
    """`{ … }`: a function body or a nested scope (inline asm, call sequences)."""

    statements: tuple[Statement, ...]
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)

    def walk(self) -> Iterator[Statement]:
        """Every statement, depth first; nested blocks are yielded before their contents."""
        for statement in self.statements:
            yield statement
            if type(statement) is Block:
                yield from statement.walk()


@dataclass(frozen=True, slots=True)
class Pragma:
    """`.pragma "nounroll";` (one or more strings)."""

    values: tuple[str, ...]
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Loc:
    """`.loc file line column[, function_name label, inlined_at file line column]`: debug line info."""

    file_index: int
    source_line: int
    source_column: int
    function_name: str | None = None
    inlined_at: tuple[int, int, int] | None = None
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class CallPrototype:
    """`name: .callprototype (.param .b32 _) _ (.param .b64 _);` — the signature of an indirect call."""

    name: str
    returns: tuple[Variable, ...]
    params: tuple[Variable, ...]
    noreturn: bool = False
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class TargetList:
    """`name: .branchtargets L1, L2;` (for `brx.idx`) or `name: .calltargets f, g;` (for indirect `call`)."""

    directive: str  # branchtargets | calltargets
    name: str
    targets: tuple[str, ...]
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


Statement = Union[Instruction, Label, Variable, Block, Pragma, Loc, CallPrototype, TargetList]

# --------------------------------------------------------------------------------------------------
# module level


@dataclass(frozen=True, slots=True)
class Directive:
    """A directive in a function header: `.maxntid 256, 1, 1`, `.reqnctapercluster 2, 1, 1`, `.noreturn`."""

    name: str
    values: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Function:
    """`.entry` (a kernel) or `.func` (a device function); `body` is None for a declaration."""

    kind: str  # entry | func
    name: str
    params: tuple[Variable, ...] = ()
    returns: tuple[Variable, ...] = ()
    linkage: str | None = None  # visible, extern, weak, common
    directives: tuple[Directive, ...] = ()
    body: Block | None = None
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)

    @property
    def is_kernel(self) -> bool:
        return self.kind == "entry"

    def directive(self, name: str) -> Directive | None:
        """The header directive called `name` ("maxntid", "reqntid", …), if present."""
        return next((d for d in self.directives if d.name == name), None)

    def declared_threads(self) -> int | None:
        """The most threads a block may have by the first `.reqntid`/`.maxntid`, or None where neither is given."""
        return next((math.prod(d.values) for d in self.directives if d.name in ("reqntid", "maxntid")), None)

    def statements(self) -> Iterator[Statement]:
        """Every statement of the body, nested scopes included, in order."""
        return self.body.walk() if self.body is not None else iter(())

    def instructions(self) -> Iterator[Instruction]:
        return (s for s in self.statements() if type(s) is Instruction)

    def variables(self) -> Iterator[Variable]:
        """The variables declared inside the body (registers, locals, shared, call parameters)."""
        return (s for s in self.statements() if type(s) is Variable)


@dataclass(frozen=True, slots=True)
class File:
    """`.file 1 "a.cu"[, timestamp, size]`."""

    index: int
    path: str
    timestamp: int | None = None
    size: int | None = None
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class SectionData:
    """One data line of a debug section: `.b8 1, 2, 3` / `.b32 .debug_abbrev` / `.b64 $L__func_begin0`."""

    type: str  # b8, b16, b32, b64
    values: tuple[Operand, ...]


@dataclass(frozen=True, slots=True)
class Section:
    """`.section .debug_info { … }`: DWARF data the compiler emits for `-G`/`-lineinfo`."""

    name: str
    entries: tuple[Label | SectionData, ...]
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Alias:
    """`.alias alias, target;`."""

    name: str
    target: str
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


ModuleItem = Union[Function, Variable, File, Section, Pragma, Alias]


@dataclass(frozen=True, slots=True)
class Module:
    """A PTX module: the header directives and everything declared at module scope, in order."""

    version: tuple[int, int] | None
    target: tuple[str, ...]  # ("sm_90a",) or ("sm_90", "debug")
    address_size: int | None
    items: tuple[ModuleItem, ...]
    source: str = field(default="<ptx>", compare=False)
    # name → the definition if the module has one, else the first declaration (`function`); built once, since
    # lowering and the passes ask for every call's callee
    _by_name: dict[str, Function] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name: dict[str, Function] = {}
        for item in self.items:
            if type(item) is Function:
                known = by_name.get(item.name)
                if known is None or (known.body is None and item.body is not None):
                    by_name[item.name] = item
        object.__setattr__(self, "_by_name", by_name)

    @property
    def arch(self) -> str | None:
        """The target architecture, `.target`'s first name (`sm_90a`)."""
        return self.target[0] if self.target else None

    @property
    def functions(self) -> tuple[Function, ...]:
        return tuple(item for item in self.items if type(item) is Function)

    @property
    def kernels(self) -> tuple[Function, ...]:
        return tuple(item for item in self.items if type(item) is Function and item.kind == "entry")

    @property
    def variables(self) -> tuple[Variable, ...]:
        return tuple(item for item in self.items if type(item) is Variable)

    def function(self, name: str) -> Function | None:
        """The definition of `name` if the module has one, else its declaration, else None."""
        return self._by_name.get(name)


# --------------------------------------------------------------------------------------------------
# vocabulary shared by the parser, the printer and later analyses

# Bytes per element of each fundamental type; .pred and the opaque reference types have no size.
TYPE_SIZES: dict[str, int] = {
    **{f"{k}8": 1 for k in "bsu"},
    **{f"{k}16": 2 for k in "bsuf"},
    **{f"{k}32": 4 for k in "bsuf"},
    **{f"{k}64": 8 for k in "bsuf"},
    "b128": 16,
    "bf16": 2,
    "f16x2": 4,
    "bf16x2": 4,
    "tf32": 4,
    "e4m3": 1,
    "e5m2": 1,
    "e2m3": 1,
    "e3m2": 1,
    "e2m1": 1,
    "ue8m0": 1,
    "ue4m3": 1,
    "e4m3x2": 2,
    "e5m2x2": 2,
    "e2m3x2": 2,
    "e3m2x2": 2,
    "e2m1x2": 1,
    "ue8m0x2": 2,
}
TYPES = frozenset(TYPE_SIZES) | {"pred", "texref", "samplerref", "surfref"}
STATE_SPACES = frozenset({"reg", "sreg", "const", "global", "local", "param", "shared", "tex"})
LINKAGES = frozenset({"visible", "extern", "weak", "common"})

_SPECIAL = frozenset(
    "%tid %ntid %laneid %warpid %nwarpid %ctaid %nctaid %smid %nsmid %gridid %is_explicit_cluster "
    "%clusterid %nclusterid %cluster_ctaid %cluster_nctaid %cluster_ctarank %cluster_nctarank "
    "%lanemask_eq %lanemask_le %lanemask_lt %lanemask_ge %lanemask_gt %clock %clock_hi %clock64 "
    "%globaltimer %globaltimer_lo %globaltimer_hi %total_smem_size %aggr_smem_size %dynamic_smem_size "
    "%reserved_smem_offset_begin %reserved_smem_offset_end %reserved_smem_offset_cap "
    "%current_graph_exec".split()
)
_SPECIAL_NUMBERED = re.compile(r"%(?:envreg\d+|pm\d+(?:_64)?|reserved_smem_offset_\d+)\Z")
_NUMBERED_STEMS = ("%envreg", "%pm", "%reserved_smem_offset_")  # what _SPECIAL_NUMBERED's names start with


def is_special_register(name: str) -> bool:
    """Whether `name` is a PTX special register (`%laneid`, `%tid`, `%lanemask_lt`, `%envreg3`, …)."""
    return name in _SPECIAL or (name.startswith(_NUMBERED_STEMS) and _SPECIAL_NUMBERED.match(name) is not None)
