"""mma.sync operands loaded straight into the native (MFMA/WMMA) layout, and D stored straight from it.

Where an A or B fragment register of an mma comes from a 32-bit load whose address is, in every lane λ of the
warp, U + L(λ) (U the same in all lanes, L known per lane), the native word a lane wants, PTX register r of
lane s, is the 32 bits at U + L_r(s): the lane loads them itself and no lane movement is left. Proven here
from the PTX, else the mma moves the registers as before (lower/mma.Gather):

- the load (ld.global/ld.shared, plain weak forms: no .volatile/.relaxed/.acquire/.mmio; or ldmatrix
  without .trans, whose register j of lane λ is the word at lane 8j + λ/4's row address + 4·(λ mod 4)) is
  in the mma's basic block, and nothing between the two writes memory or synchronises (a short list of ALU
  forms, plain loads and other mma/ldmatrix only): the memory is what the load saw, and since mma.sync needs
  the whole warp converged, every lane ran the load;
- the address is built from uniform values (kernel parameters, variables' addresses, %ctaid/%ntid/%nctaid,
  registers computed from those, written once or last in the block before the use) and the lane: %laneid,
  or %tid.x where the kernel's .reqntid/.maxntid makes %tid.x mod 32 the lane (a block one thread high and
  deep, or .reqntid's x a multiple of 32); through add, sub, mov, shl, mul/mad by a constant, and/or with a
  constant below the uniform part's known zero bits, shr of values known in every lane, and widenings where
  no carry can cross 32 bits (`Lanes`);
- the registers of one operand share U (several bases: moved as before), and the word's address offset is
  linear in the lane's bits (one shift group per distance, `LaneOffsets`).

The original loads stay; LLVM removes those whose registers nothing else reads. Likewise `result_stores`: D's
registers stored once each, by plain 32-bit stores after the mma in its block with only register arithmetic
between, named by no other instruction of the function, at proven addresses that do not overlap, are stored
by the mma itself from the native layout (lower/mma_native.DirectResult), the stores then skipped
(Lowering.replaced).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from llvmlite import ir

from fatkit.errors import FatkitError
from fatkit.translate.lower.core import I32, I64
from fatkit.translate.lower.mma import Choice, Gather, Source, _apply, _expand
from fatkit.translate.lower.warp import WARP, WarpPosition
from fatkit.translate.ptx import ast

# ("register", name) | ("special", "%ctaid.x") | ("name", variable) | ("tid", "high"): %tid.x less its lane |
# ("zext"/"sext", uniform terms of 32 bits): their sum widened to 64 bits
Atom = tuple

# opcodes that neither write memory nor synchronise nor branch, allowed between a load and its mma
_PURE = frozenset({"mov", "cvt", "cvta", "add", "sub", "mul", "mad", "fma", "shl", "shr", "and", "or", "xor",
                   "not", "neg", "abs", "min", "max", "selp", "setp", "set", "prmt", "bfe", "bfi", "lop3",
                   "mul24", "mad24", "sad", "rem", "div", "cnot", "popc", "clz", "brev", "copysign", "rcp",
                   "sqrt", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh", "testp", "mma", "ldmatrix", "ld",
                   "dp4a", "dp2a", "shf", "fns", "bmsk", "szext", "cvt.pack"})
_LOAD_SPACES = frozenset({"global", "shared", "shared::cta"})
_LOAD_PLAIN = frozenset({"nc", "ca", "cg", "cs", "lu", "weak", "v2", "v4", "b32", "u32", "s32", "f32"})
_ORDERED = frozenset({"volatile", "relaxed", "acquire", "mmio", "cv"})
_UNIFORM_SPECIALS = frozenset({"%ctaid", "%nctaid", "%ntid", "%nclusterid", "%clusterid", "%cluster_ctaid",
                               "%cluster_nctaid", "%cluster_ctarank", "%cluster_nctarank"})


@dataclass(frozen=True)
class Lanes:
    """A w-bit value in every lane λ of the warp: Σ coefficient·atom (uniform) + table[λ], mod 2^w."""

    width: int
    uniform: tuple[tuple[Atom, int], ...]
    table: tuple[int, ...]

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1

    def zeros(self) -> int:
        """Low bits known zero in the uniform part (%tid.x's high part: 5)."""
        known = self.width
        for atom, coefficient in self.uniform:
            own = 5 if atom == ("tid", "high") else \
                Lanes(32, atom[1], (0,) * WARP).zeros() if atom[0] in ("zext", "sext") else 0
            known = min(known, own + ((coefficient & -coefficient).bit_length() - 1))
        return known


def _constant(width: int, value: int) -> Lanes:
    return Lanes(width, (), (value & ((1 << width) - 1),) * WARP)


def _combine(x: Lanes, y: Lanes, sign: int) -> Lanes:
    terms = dict(x.uniform)
    for atom, coefficient in y.uniform:
        terms[atom] = (terms.get(atom, 0) + sign * coefficient) & x.mask
    return Lanes(x.width, tuple((a, c) for a, c in sorted(terms.items()) if c),
                 tuple((p + sign * q) & x.mask for p, q in zip(x.table, y.table)))


def _scale(x: Lanes, factor: int) -> Lanes:
    terms = tuple((a, c * factor & x.mask) for a, c in x.uniform if c * factor & x.mask)
    return Lanes(x.width, terms, tuple(v * factor & x.mask for v in x.table))


def _width(ins: ast.Instruction) -> int | None:
    sizes = {int(m[1:]) for m in ins.modifiers if m[:1] in "busf" and m[1:] in ("32", "64") and m in ast.TYPES}
    return sizes.pop() if len(sizes) == 1 else None


def _destinations(operand: ast.Operand) -> list[str]:
    if type(operand) is ast.Name:
        return [operand.name]
    if type(operand) is ast.Vector:
        return [name for item in operand.items for name in _destinations(item)]
    if type(operand) is ast.Pair:
        return _destinations(operand.first) + _destinations(operand.second)
    return []


def _names(operand: ast.Operand) -> list[str]:
    """The names an operand mentions (a vector's, a pair's, an address's base)."""
    if type(operand) is ast.Address:
        return [operand.base.name] if operand.base is not None else []
    return _destinations(operand)


class _Kernel:
    """The statements of the function being lowered, where each register is written, its blocks' starts."""

    def __init__(self, kernel: ast.Function):
        self.statements = list(kernel.statements())
        self.index = {id(s): i for i, s in enumerate(self.statements)}
        self.writes: dict[str, list[int]] = {}
        self.appears: dict[str, list[int]] = {}  # register → the instructions naming it (read or written)
        self.block_start: list[int] = []
        start = 0
        for i, s in enumerate(self.statements):
            if type(s) is ast.Label:
                start = i
            self.block_start.append(start)
            if type(s) is ast.Instruction:
                for operand in s.operands:
                    for name in _names(operand):
                        self.appears.setdefault(name, []).append(i)
                if s.operands:
                    for name in _destinations(s.operands[0]):
                        self.writes.setdefault(name, []).append(i)
                if s.opcode in ("bra", "brx", "ret", "exit", "call", "trap"):
                    start = i + 1
        self.tid_is_lane = _tid_is_lane(kernel)
        # (label, branch) of every branch back to an earlier label: the stretches a loop may run again
        labels = {s.name: i for i, s in enumerate(self.statements) if type(s) is ast.Label}
        self.loops: list[tuple[int, int]] = []
        for i, s in enumerate(self.statements):
            if type(s) is ast.Instruction and s.opcode == "brx":
                self.loops.append((0, len(self.statements)))
            elif type(s) is ast.Instruction and s.opcode == "bra" and s.operands and type(s.operands[0]) is ast.Name:
                target = labels.get(s.operands[0].name)
                if target is None or target <= i:
                    self.loops.append((0 if target is None else target, i))
        # %tid.y/%tid.z are 0 where the block's declared shape is one thread high/deep
        self.flat = {axis for directive in kernel.directives if directive.name in ("reqntid", "maxntid")
                     for axis, size in zip("yz", (tuple(directive.values) + (1, 1))[1:3]) if size == 1}

    def reaching(self, name: str, at: int) -> int | None:
        """The write of `name` that statement `at` reads: the last before it in its block, else the one write
        of the function where that lies in another block (one later in this block is the previous trip's)."""
        writes = self.writes.get(name, [])
        start = self.block_start[at]
        inside = [i for i in writes if start <= i < at]
        if inside:
            return inside[-1]
        if len(writes) == 1 and self.block_start[writes[0]] != start:
            return writes[0]
        return None

    def in_loop(self, at: int) -> bool:
        return any(start <= at <= end for start, end in self.loops)

    def written_between(self, name: str, first: int, last: int) -> bool:
        return any(first < i < last for i in self.writes.get(name, []))


def _tid_is_lane(kernel: ast.Function) -> bool:
    """Whether %tid.x mod 32 is the lane: threads numbered along x alone, or rows of whole warps."""
    for directive in kernel.directives:
        if directive.name in ("reqntid", "maxntid"):
            sizes = tuple(directive.values) + (1, 1)
            if sizes[1] == 1 and sizes[2] == 1:
                return True
            if directive.name == "reqntid" and sizes[0] % WARP == 0:
                return True
    return False


class _Analysis:
    def __init__(self, kernel: _Kernel, mma: int):
        self.kernel, self.mma = kernel, mma

    def value(self, operand: ast.Operand, at: int, width: int, lw) -> Lanes | None:
        """`operand` as read by statement `at`, as w-bit Lanes, or None where not proven."""
        kind = type(operand)
        if kind is ast.IntImm:
            return _constant(width, operand.value)
        if kind is not ast.Name:
            return None
        if operand.component is not None or operand.is_special_register:
            full = operand.name + ("." + operand.component if operand.component else "")
            if width != 32:
                return None
            if full == "%laneid":
                return Lanes(32, (), tuple(range(WARP)))
            if full == "%tid.x" and self.kernel.tid_is_lane:
                return Lanes(32, ((("tid", "high"), 1),), tuple(range(WARP)))
            if full in ("%tid.y", "%tid.z") and full[-1] in self.kernel.flat:
                return _constant(32, 0)
            if operand.name in _UNIFORM_SPECIALS or (full in ("%tid.y", "%tid.z") and self.kernel.tid_is_lane):
                return Lanes(32, ((("special", full), 1),), (0,) * WARP)
            return None
        if operand.name not in lw.registers:
            # the address of a variable all threads share, or of a kernel parameter (a .func's parameters and
            # .local buffers are each thread's own)
            shared = operand.name in lw.variables and lw.variables[operand.name][0] in ("shared", "global", "const")
            if shared or operand.name in lw.params and lw.kernel.is_kernel:
                return Lanes(width, ((("name", operand.name), 1),), (0,) * WARP)
            return None
        if lw.registers[operand.name].type != ir.IntType(width):
            return None
        where = self.kernel.reaching(operand.name, at)
        if where is None:
            return None
        ins = self.kernel.statements[where]
        if type(ins) is not ast.Instruction or ins.guard is not None:
            return None
        result = self._computed(ins, where, width, lw)
        if result is not None:
            return result
        # a uniform value this analysis does not follow: the register itself, where the mma reads it unchanged:
        # written in the mma's block before the read and not again, or once outside any loop (so once at most)
        same_block = self.kernel.block_start[where] == self.kernel.block_start[self.mma] and where < at
        once = where < at and not self.kernel.in_loop(where)
        if (same_block or once) and self._uniform_inputs(ins, where, lw) and \
                not self.kernel.written_between(operand.name, where, self.mma):
            return Lanes(width, ((("register", operand.name), 1),), (0,) * WARP)
        return None

    def _uniform_inputs(self, ins: ast.Instruction, at: int, lw) -> bool:
        if ins.opcode == "ld":
            # a kernel's parameters are the same in every thread; a .func's are what each caller passed
            return "param" in ins.modifiers and type(ins.operands[0]) is ast.Name and lw.kernel.is_kernel
        if ins.opcode not in ("mov", "cvta", "cvt", "add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor") \
                or len(ins.operands) < 2 or type(ins.operands[0]) is not ast.Name:
            return False
        for source in ins.operands[1:]:
            width = 64 if type(source) is ast.Name and source.name in lw.registers and \
                lw.registers[source.name].type == I64 else 32
            value = self.value(source, at, width, lw)
            if value is None or len(set(value.table)) != 1:
                return False
        return True

    def _computed(self, ins: ast.Instruction, at: int, width: int, lw) -> Lanes | None:
        op, sources = ins.opcode, ins.operands[1:]
        if any(m in ast.TYPES and m[0] == "f" for m in ins.modifiers):
            return None  # floating-point arithmetic: not an address
        w = _width(ins)
        if op == "mov" and len(sources) == 1 and w in (None, width):
            return self.value(sources[0], at, width, lw)
        if w is None:
            return None
        if op in ("add", "sub") and w == width and len(sources) == 2 and ins.modifiers == (ins.modifiers[-1],):
            x, y = (self.value(s, at, width, lw) for s in sources)
            return _combine(x, y, 1 if op == "add" else -1) if x and y else None
        if op == "shl" and w == width and type(sources[1]) is ast.IntImm and 0 <= sources[1].value < width:
            x = self.value(sources[0], at, width, lw)
            return _scale(x, 1 << sources[1].value) if x else None
        if op in ("mul", "mad") and "lo" in ins.modifiers and w == width and type(sources[1]) is ast.IntImm:
            x = self.value(sources[0], at, width, lw)
            product = _scale(x, sources[1].value) if x else None
            if op == "mul" or product is None:
                return product
            addend = self.value(sources[2], at, width, lw)
            return _combine(product, addend, 1) if addend else None
        if op == "mul" and "wide" in ins.modifiers and width == 64 and w == 32 and type(sources[1]) is ast.IntImm:
            x = self.value(sources[0], at, 32, lw)
            wide = _widened(x, "s32" in ins.modifiers) if x else None
            return _scale(wide, sources[1].value) if wide else None
        if op == "cvt" and width == 64 and len(sources) == 1:
            types = [m for m in ins.modifiers if m in ast.TYPES]
            if len(types) != 2 or types[0] not in ("u64", "s64", "b64") or types[1] not in ("u32", "s32"):
                return None
            x = self.value(sources[0], at, 32, lw)
            return _widened(x, types[1] == "s32") if x else None
        if op in ("and", "or") and w == width and type(sources[1]) is ast.IntImm:
            x = self.value(sources[0], at, width, lw)
            if x is None:
                return None
            mask = sources[1].value & x.mask
            apply = (lambda v: v & mask) if op == "and" else (lambda v: v | mask)
            if not x.uniform:
                return Lanes(width, (), tuple(apply(v) for v in x.table))
            zeros = x.zeros()
            # U + L = U | L while every L is below U's zero bits; a mask inside them leaves U out (and) or alone (or)
            if mask >> zeros or any(v >> zeros for v in x.table) or any(apply(v) >> zeros for v in x.table):
                return None
            return Lanes(width, () if op == "and" else x.uniform, tuple(apply(v) for v in x.table))
        if op == "shr" and w == width and type(sources[1]) is ast.IntImm and 0 <= sources[1].value < width:
            x = self.value(sources[0], at, width, lw)
            if x is None or x.uniform:
                return None
            signed = any(m.startswith("s") for m in ins.modifiers if m in ast.TYPES)
            top = width - 1
            return Lanes(width, (), tuple(((v - (v >> top << width) if signed else v) >> sources[1].value) & x.mask
                                          for v in x.table))
        return None


def _extend(value: int, signed: bool) -> int:
    return value - (1 << 32) if signed and value >> 31 else value


def _widened(x: Lanes, signed: bool) -> Lanes | None:
    """A 32-bit value widened to 64 bits: exactly where known in every lane; U + L as widened U + L where L
    stays below U's zero bits (then U + L = U | L, no carry, and the sign is U's)."""
    if not x.uniform:
        return Lanes(64, (), tuple(_extend(v, signed) & ((1 << 64) - 1) for v in x.table))
    zeros = x.zeros()
    if zeros >= 32 or any(v >> zeros for v in x.table):
        return None
    return Lanes(64, (((("sext" if signed else "zext"), x.uniform), 1),), x.table)


@dataclass(frozen=True)
class Word:
    """One fragment register as loaded: its address (`Lanes`, bytes) and the load's state space."""

    address: Lanes
    space: str


def fragment_loads(lw, ins: ast.Instruction, registers: list[ast.Operand]) -> list[Word] | None:
    """Per fragment register of `ins` (an mma), the load it comes from, where every condition of the module
    docstring holds for all of them; else None."""
    kernel = _cached_kernel(lw)
    mma = kernel.index.get(id(ins))
    if mma is None:
        return None
    analysis = _Analysis(kernel, mma)
    words = []
    first = mma
    for register in registers:
        if type(register) is not ast.Name or register.name not in lw.registers:
            return None
        at = kernel.reaching(register.name, mma)
        if at is None or at < kernel.block_start[mma]:
            return None
        word = _loaded_word(lw, analysis, kernel.statements[at], at, register.name)
        if word is None:
            return None
        words.append(word)
        first = min(first, at)
    for i in range(first + 1, mma):
        between = kernel.statements[i]
        if type(between) is ast.Label:
            return None
        if type(between) is ast.Instruction and (between.opcode not in _PURE or between.guard is not None or
                                                 between.opcode == "ld" and not _plain_load(between)):
            return None
    # every atom the addresses read must hold at the mma what it held at the loads
    for word in words:
        if any(kernel.written_between(name, first, mma) for name in _registers_read(word.address.uniform)):
            return None
    if len({(w.address.uniform, w.space, w.address.width) for w in words}) != 1:
        return None
    return words


def _address_base(lw, analysis: _Analysis, address: ast.Address, space_modifier: str,
                  at: int) -> tuple[str, int, Lanes] | None:
    """(space, address width, the base register's lane value at statement `at`) of a [register+offset]
    address of .shared (32-bit) or .global (64-bit), or None when the base is not such a value."""
    if address.base is None or address.extra:
        return None
    space = "shared" if space_modifier.startswith("shared") else "global"
    width = 32 if space == "shared" else 64
    if address.base.name in lw.registers and lw.registers[address.base.name].type != ir.IntType(width):
        return None
    base = analysis.value(address.base, at, width, lw)
    return None if base is None else (space, width, base)


def _loaded_word(lw, analysis: _Analysis, load: ast.Statement, at: int, name: str) -> Word | None:
    """Register `name` as `load` (statement `at`) loads it: a 32-bit ld.global/ld.shared (vector element i at
    +4i), or ldmatrix's register j (not .trans): in lane λ the word at the row address lane 8j + λ div 4 gave,
    + 4·(λ mod 4)."""
    if type(load) is not ast.Instruction or load.opcode not in ("ld", "ldmatrix") or load.guard is not None or \
            len(load.operands) != 2 or type(load.operands[1]) is not ast.Address:
        return None
    spaces = [m for m in load.modifiers if m in _LOAD_SPACES]
    rest = [m for m in load.modifiers if m not in _LOAD_SPACES]
    if load.opcode == "ldmatrix":
        if len(spaces) != 1 or not spaces[0].startswith("shared") or \
                not set(rest) <= {"sync", "aligned", "m8n8", "x1", "x2", "x4", "b16"}:
            return None
    elif len(spaces) != 1 or any(m not in _LOAD_PLAIN and not m.startswith(("L1::", "L2::")) for m in rest) \
            or any(m in _ORDERED for m in rest) or _width(load) != 32:
        return None
    targets = _destinations(load.operands[0])
    address = load.operands[1]
    if targets.count(name) != 1:
        return None
    based = _address_base(lw, analysis, address, spaces[0], at)
    if based is None:
        return None
    space, width, base = based
    index = targets.index(name)
    if load.opcode == "ld":
        return Word(_combine(base, _constant(width, address.offset + 4 * index), 1), space)
    rows = _combine(base, _constant(width, address.offset), 1)
    table = tuple((rows.table[8 * index + (lane >> 2)] + 4 * (lane & 3)) & rows.mask for lane in range(WARP))
    return Word(Lanes(width, rows.uniform, table), space)


# %tid.x's high part widened (mul.wide of %tid.x): below 1024, added to the lane part in 32 bits
_TID_HIGH_WIDE = ((("zext", ((("tid", "high"), 1),))), (("sext", ((("tid", "high"), 1),))))
_STORE_PLAIN = frozenset({"wb", "cg", "cs", "wt", "weak", "v2", "v4", "b32", "u32", "s32", "f32"})


@dataclass(frozen=True)
class Stores:
    """D's registers as their stores write them (`result_stores`): each register's address, and the stores,
    which the mma then makes itself (Lowering.replaced)."""

    words: list[Word]
    statements: list[ast.Statement]


def result_stores(lw, ins: ast.Instruction, registers: list[ast.Operand]) -> Stores | None:
    """Where D's registers (`registers`, 32-bit) are only stored: each by one plain 32-bit st.global/st.shared
    after the mma in its block, nothing but register arithmetic between (no other memory access, no branch),
    no other instruction naming them anywhere in the function, the addresses proven as for loads (their
    uniform parts unchanged since the mma) and no two of the 4·32 words overlapping. Else None."""
    kernel = _cached_kernel(lw)
    mma = kernel.index.get(id(ins))
    if mma is None:
        return None
    analysis = _Analysis(kernel, mma)
    words, stores, last = [], [], mma
    for register in registers:
        if type(register) is not ast.Name:
            return None
        others = [i for i in kernel.appears.get(register.name, []) if i != mma]
        if len(others) != 1 or others[0] < mma or kernel.block_start[others[0]] != kernel.block_start[mma]:
            return None
        at = others[0]
        store = kernel.statements[at]
        if type(store) is not ast.Instruction or store.opcode != "st" or store.guard is not None or \
                len(store.operands) != 2 or type(store.operands[0]) is not ast.Address:
            return None
        spaces = [m for m in store.modifiers if m in _LOAD_SPACES]
        rest = [m for m in store.modifiers if m not in _LOAD_SPACES]
        if len(spaces) != 1 or any(m not in _STORE_PLAIN and not m.startswith(("L1::", "L2::")) for m in rest) \
                or _width(store) != 32:
            return None
        values = _destinations(store.operands[1])
        address = store.operands[0]
        based = _address_base(lw, analysis, address, spaces[0], at) if values.count(register.name) == 1 else None
        if based is None:
            return None
        space, width, base = based
        if any(kernel.written_between(name, mma, at) for name in _registers_read(base.uniform)):
            return None
        words.append(Word(_combine(base, _constant(width, address.offset + 4 * values.index(register.name)), 1),
                          space))
        if at not in stores:
            stores.append(at)
        last = max(last, at)
    for i in range(mma + 1, last):
        between = kernel.statements[i]
        if type(between) is ast.Label or type(between) is ast.Instruction and i not in stores and (
                between.opcode not in _PURE or between.opcode in ("ld", "ldmatrix") or between.guard is not None):
            return None
    if len({(w.address.uniform, w.space, w.address.width) for w in words}) != 1:
        return None
    addresses = sorted(v for w in words for v in w.address.table)
    if any(b - a < 4 for a, b in zip(addresses, addresses[1:])) or \
            addresses[-1] - addresses[0] > words[0].address.mask - 4:
        return None
    return Stores(words, [kernel.statements[i] for i in stores])


def _registers_read(terms: tuple) -> list[str]:
    """The registers a uniform part reads, widened sums' included."""
    names = []
    for (kind, name), _ in terms:
        if kind == "register":
            names.append(name)
        elif kind in ("zext", "sext"):
            names.extend(_registers_read(name))
    return names


def _plain_load(ins: ast.Instruction) -> bool:
    return not any(m in _ORDERED or m in ("acquire", "sys", "gpu", "cta", "cluster") for m in ins.modifiers)


_CACHE: list = [None, None]


def _cached_kernel(lw) -> _Kernel:
    """The statement tables of the function `lw` lowers, made once per Lowering."""
    if _CACHE[0] is not lw:
        _CACHE[0], _CACHE[1] = lw, _Kernel(lw.kernel)
    return _CACHE[1]


class DirectGather:
    """Gather's interface (fetch, element) for operands whose registers come from loads (`fragment_loads`):
    each lane loads its word; other operands through `Gather`. `resolve` names, for operand o's register r
    at lane λ, the loaded operand and register it is (the swapped A of lower/mma_native: register r ^ (λ & 1))."""

    def __init__(self, lw, warp: WarpPosition, registers: dict, lanes, loads: dict[str, list[Word]],
                 resolve: Callable[[str, int, int], tuple[str, int]]):
        self.lw, self.warp, self.loads, self.resolve = lw, warp, loads, resolve
        self.moved = Gather(lw, warp, registers, lanes)
        self.loaded: dict[object, ir.Value] = {}
        self.offsets = LaneOffsets(lw, warp)
        self._bases: dict[tuple, ir.Value] = {}

    def _direct(self, source: Source | Choice) -> bool:
        alternatives = source.sources if type(source) is Choice else (source,)
        return all(self.resolve(a.operand, 0, a.register)[0] in self.loads and a.position == 0 for a in alternatives)

    def fetch(self, sources) -> None:
        moved = [s for s in sources if not self._direct(s)]
        if moved:
            self.moved.fetch(list(_expand(moved)))
        for source in sources:
            if self._direct(source) and source not in self.loaded:
                self.loaded[source] = self._load(source)

    def element(self, source: Source | Choice, bits: int) -> ir.Value:
        if source in self.loaded and bits == 32:
            return self.loaded[source]
        return self.moved.element(source, bits)

    def _load(self, source: Source | Choice) -> ir.Value:
        word, table = _word_table(self, source)
        return self.load(word, table)

    def pointer(self, word: Word, table: list[int]) -> ir.Value:
        """The pointer to U + table[lane] (bytes) of `word`'s address; the table linear in the lane's bits."""
        form = linear(word.address.width, table)
        if form is None:
            raise FatkitError("internal: a direct mma address is not linear in the lane")
        b, constant, steps = self.lw.builder, *form
        scalar = tuple(term for term in word.address.uniform if term[0] not in _TID_HIGH_WIDE)
        scale = sum(coefficient for atom, coefficient in word.address.uniform if atom in _TID_HIGH_WIDE)
        if word.address.width == 64 and all(step < 1 << 24 for step in steps) and scale < 1 << 20:
            # the varying part in 32 bits (%tid.x < 1024: under 2^30 + 5·2^24) added to the scalar base once,
            # as the target's scalar base + vector offset addressing has it
            offset = self.offsets.offset(32, 0, steps)
            if scale:
                tid = _atom(self.lw, ("tid", "high"), 32)
                offset = b.add(b.mul(tid, ir.Constant(I32, scale)) if scale != 1 else tid, offset)
            pointer = b.gep(self._base(Word(Lanes(64, scalar, word.address.table), word.space)), [b.zext(offset, I64)],
                            source_etype=ir.IntType(8))
            signed = constant - (1 << 64) if constant >> 63 else constant
            return b.gep(pointer, [ir.Constant(I64, signed)], source_etype=ir.IntType(8)) if constant else pointer
        return b.gep(self._base(word), [self.offsets.offset(word.address.width, constant, steps)],
                     source_etype=ir.IntType(8))

    def load(self, word: Word, table: list[int]) -> ir.Value:
        return self.lw.builder.load(self.pointer(word, table), typ=I32, align=4)

    def _base(self, word: Word) -> ir.Value:
        """A pointer to the uniform part of the address."""
        key = (word.address.uniform, word.space)
        if key not in self._bases:
            lw, b, width = self.lw, self.lw.builder, word.address.width
            integer = _sum(lw, word.address.uniform, width)
            if word.space == "shared" and lw.callees.window:
                pointer = b.gep(lw.callees.window.base, [integer], source_etype=ir.IntType(8))
            else:
                wide = integer if width == 64 else b.zext(integer, I64)
                pointer = lw.pointer(wide, lw.address_space(word.space))
            self._bases[key] = pointer
        return self._bases[key]


class LaneOffsets:
    """Byte offsets that are linear in the PTX lane's bits, each lane part emitted once; `lane`, where given,
    the PTX lane to take them from."""

    def __init__(self, lw, warp: WarpPosition, lane: ir.Value | None = None):
        self.lw, self.warp = lw, warp
        self._offsets: dict[tuple[int, tuple[int, ...]], ir.Value] = {}
        self._lane = lane

    def offset(self, width: int, constant: int, steps: tuple[int, ...]) -> ir.Value:
        """c + Σ d_i·(lane bit i), bytes: the lane bits moved in groups of one shift distance, the lane part
        shared by the words that differ only in c (left for the load's immediate offset)."""
        b, wide = self.lw.builder, ir.IntType(width)
        if steps not in self._offsets:
            lane = self.lane()
            groups: dict[int, int] = {}
            terms = []
            for i, step in enumerate(steps):
                if step and step & (step - 1) == 0 and step < 1 << 31:
                    distance = step.bit_length() - 1 - i
                    groups[distance] = groups.get(distance, 0) | 1 << i
                elif step:  # not a power of two: the bit times the step
                    bit = b.and_(b.lshr(lane, ir.Constant(I32, i)), ir.Constant(I32, 1))
                    terms.append(b.mul(b.zext(bit, wide) if width == 64 else bit, ir.Constant(wide, step)))
            for distance, bits in sorted(groups.items()):
                picked = b.and_(lane, ir.Constant(I32, bits))
                moved = b.shl(picked, ir.Constant(I32, distance)) if distance > 0 else \
                    b.lshr(picked, ir.Constant(I32, -distance)) if distance < 0 else picked
                terms.append(b.zext(moved, wide) if width == 64 else moved)
            total = terms[0] if terms else ir.Constant(wide, 0)
            for term in terms[1:]:
                total = b.add(total, term)
            self._offsets[steps] = total
        offset = self._offsets[steps]
        return b.add(offset, ir.Constant(wide, constant)) if constant else offset

    def lane(self) -> ir.Value:
        """The PTX lane: %tid.x mod 32 where that is the lane (one AND of a register the hardware sets), else
        the hardware lane's."""
        if self._lane is None:
            if _cached_kernel(self.lw).tid_is_lane:
                tid = self.lw.read(ast.Name("%tid", "x"), "u32")
                self._lane = self.lw.builder.and_(tid, ir.Constant(I32, WARP - 1))
            else:
                self._lane = self.warp.lane
        return self._lane


def _atom(lw, atom: Atom, width: int) -> ir.Value:
    kind, name = atom
    bits = f"b{width}"
    if kind == "register":
        return lw.load_register(name, bits)
    if kind == "name":
        return lw.read(ast.Name(name), f"u{width}")
    if kind == "special":
        register, component = name.split(".", 1) if "." in name else (name, None)
        return lw.read(ast.Name(register, component), "u32")
    if kind in ("zext", "sext"):
        inner = _sum(lw, name, 32)
        return lw.builder.sext(inner, I64) if kind == "sext" else lw.builder.zext(inner, I64)
    tid = lw.read(ast.Name("%tid", "x"), "u32")  # ("tid", "high"): %tid.x less its lane
    return lw.builder.and_(tid, ir.Constant(I32, ~(WARP - 1) & 0xFFFFFFFF))


def _sum(lw, terms: tuple, width: int) -> ir.Value:
    """Σ coefficient·atom, `width` bits."""
    b, wide = lw.builder, ir.IntType(width)
    total: ir.Value = ir.Constant(wide, 0)
    for atom, coefficient in terms:
        value = _atom(lw, atom, width)
        term = value if coefficient == 1 else b.mul(value, ir.Constant(wide, coefficient))
        total = term if isinstance(total, ir.Constant) else b.add(total, term)
    return total


def direct_gather(lw, ins: ast.Instruction, warp: WarpPosition, registers: dict, lanes,
                  fragments: dict[str, list[ast.Operand]],
                  resolve: Callable[[str, int, int], tuple[str, int]], sources: list) -> Gather | DirectGather:
    """A DirectGather where some operand's registers all come from loads (and every word's address is linear
    in the lane), else lower/mma's Gather."""
    loads = {}
    for operand, operands in fragments.items():
        words = fragment_loads(lw, ins, operands)
        if words is not None:
            loads[operand] = words
    if not loads:
        return Gather(lw, warp, registers, lanes)
    gather = DirectGather(lw, warp, registers, lanes, loads, resolve)
    for source in sources:  # every word's address linear in the lane, before anything is emitted
        if not gather._direct(source):
            continue
        word, table = _word_table(gather, source)
        if linear(word.address.width, table) is None:
            return Gather(lw, warp, registers, lanes)
    return gather


def _word_table(gather: DirectGather, source: Source | Choice) -> tuple[Word, list[int]]:
    """The loaded register a word of the first lane is, and the word's address offset in every lane."""
    table, first = [], None
    for lane in range(WARP):
        chosen = source.sources[_apply(source.selector, lane)] if type(source) is Choice else source
        at = _apply(chosen.function, lane)
        operand, register = gather.resolve(chosen.operand, at, chosen.register)
        word = gather.loads[operand][register]
        first = first or word
        table.append(word.address.table[at])
    assert first is not None
    return first, table


def linear(width: int, table: list[int]) -> tuple[int, tuple[int, ...]] | None:
    """table (32 lanes, mod 2^width) as c + Σ d_i·(lane bit i): (c, d), or None where it is not."""
    mask = (1 << width) - 1
    constant = table[0]
    steps = tuple((table[1 << i] - constant) & mask for i in range(5))
    for lane in range(WARP):
        if (constant + sum(d for i, d in enumerate(steps) if lane >> i & 1) - table[lane]) & mask:
            return None
    return constant, steps
