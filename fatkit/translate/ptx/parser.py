"""PTX text → `ast.Module`.

One pass of `lexer.STATEMENT` over the whole text gives one match per statement; a table keyed by
what matched builds the node. Instructions dominate real modules (95% of statements), and they repeat
heavily — the same opcode chains, registers and operand lists thousands of times — so their parts are
memoised per parse: a modifier chain is split and checked once, an operand text classified once, and
nodes (which are immutable) are shared.
"""

from __future__ import annotations

import gc
import re
import struct
from typing import Callable

from fatkit.translate.ptx import constexpr, lexer
from fatkit.translate.ptx.ast import (
    LINKAGES,
    STATE_SPACES,
    TYPES,
    Address,
    Alias,
    ArgList,
    Block,
    CallPrototype,
    Directive,
    Expr,
    File,
    FloatImm,
    Function,
    Guard,
    InitList,
    Initializer,
    Instruction,
    IntImm,
    Label,
    Loc,
    Minus,
    Module,
    Name,
    Negated,
    Operand,
    Pair,
    Pragma,
    Section,
    SectionData,
    Sink,
    SymbolRef,
    TargetList,
    Variable,
    Vector,
)
from fatkit.translate.ptx.errors import PtxSyntaxError
from fatkit.translate.ptx.opcodes import OPCODES

# Real PTX nests a few levels (inline asm inside call sequences); the tree is walked recursively.
MAX_BLOCK_DEPTH = 200
_SINK = Sink()
_ARGUMENT_TYPES = (Name, Sink, IntImm, FloatImm)
_INSTRUCTION_SETTERS = tuple(
    getattr(Instruction, name).__set__ for name in ("opcode", "modifiers", "operands", "guard", "line", "column")
)
_VECTORS = {"v2": 2, "v4": 4, "v8": 8}
# Directives with a statement form of their own in lexer.STATEMENT; reaching the generic handler means
# their text did not fit it.
_LINE_DIRECTIVES = frozenset({"loc", "version", "target", "address_size", "file", "section", "entry", "func"})
_WHITESPACE = re.compile(r"\s+")
# `sym ± expression` or `generic(sym) ± expression`, the expression binding no looser than + and -
_SYMBOL_PLUS_EXPR = re.compile(r"\s*(?:generic\s*\(\s*(" + lexer.IDENT + r")\s*\)|(" + lexer.IDENT + r"))\s*"
                               r"([-+][^<>&^|?!=]*)\Z")


class _Bad(Exception):
    """A statement-level failure; the caller turns it into a PtxSyntaxError at `fragment`'s position."""

    def __init__(self, message: str, fragment: str):
        super().__init__(message)
        self.message = message
        self.fragment = fragment


class _Memo(dict):
    """A dict that computes (and keeps) the value of a missing key with `make(key)`."""

    __slots__ = ("make",)

    def __init__(self, make: Callable):
        super().__init__()
        self.make = make

    def __missing__(self, key):
        value = self[key] = self.make(key)
        return value


def parse_ptx(text: str, *, source: str = "<ptx>") -> Module:
    """Parse a whole PTX module (nvcc output or the comment-less fatbin form).

    Raises PtxSyntaxError naming `source`, line, column and text at the first statement that is not
    PTX: unknown opcodes and directives, malformed operands, unbalanced braces.
    """
    # A module is hundreds of thousands of new, long-lived objects: the cyclic collector would walk
    # them again and again while they are built (a third of the parse time) and cannot free any.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _Parser(text, source).module()
    finally:
        if collecting:
            gc.enable()


def _int(text: str) -> int:
    """A PTX integer literal's value: decimal, 0x hex, 0b binary, leading-0 octal, optional U suffix."""
    m = lexer.INTEGER.match(text.strip())
    if m is None:
        raise _Bad("not an integer", text)
    return _integer(m).value


def _dimension(text: str) -> int:
    """An array dimension: a literal or an integer constant expression (`WARP_SZ*4`)."""
    m = lexer.INTEGER.match(text.strip())
    if m is not None:
        return _integer(m).value
    folded = constexpr.evaluate(text)
    if folded is None or folded[0] < 0:
        raise _Bad("not a non-negative integer constant", text)
    return folded[0]


def _opt_int(text: str | None) -> int | None:
    return None if text is None else int(text)


def _integer(m: re.Match) -> IntImm:
    negative, hexa, binary, octal, decimal, unsigned = m.groups()
    if hexa is not None:
        value, radix = int(hexa, 16), 16
    elif binary is not None:
        value, radix = int(binary, 2), 2
    elif octal is not None:
        value, radix = int(octal, 8), 8
    else:
        value, radix = int(decimal), 10
    return IntImm(-value if negative else value, radix, unsigned is not None)


class _Parser:
    def __init__(self, text: str, source: str):
        self.source = source
        self.text = lexer.strip_comments(text.rstrip("\0"), source)
        self.bracketed_lists = _Memo(self._bracketed_list)
        self.operand = _Memo(self._piece)
        self.chains = _Memo(self._chain)
        self.guards = _Memo(self._guard)
        self.declarations = _Memo(lambda text: self._declaration(text[:-1]))
        self.version: tuple[int, int] | None = None
        self.target: tuple[str, ...] = ()
        self.address_size: int | None = None

    # ----------------------------------------------------------------------------------------------
    # the statement loop

    def module(self) -> Module:
        text = self.text
        items: list = []
        current = items  # where the next statement goes
        # open scopes: (the enclosing statement list, the Function fields of the header whose body
        # this is or None for a nested block, (line, column) of the `{`)
        scopes: list[tuple[list, tuple | None, tuple[int, int]]] = []
        handlers = self._handlers()
        chains, bracketed_lists, guards = self.chains, self.bracketed_lists, self.guards
        piece = self.operand.__getitem__
        count, rfind = text.count, text.rfind
        INSTRUCTION, I_GUARD, I_CHAIN, I_OPERANDS = lexer.INSTRUCTION, lexer.I_GUARD, lexer.I_CHAIN, lexer.I_OPERANDS
        LABEL, L_NAME = lexer.LABEL, lexer.L_NAME
        new = object.__new__
        set_opcode, set_modifiers, set_operands, set_guard, set_line, set_column = _INSTRUCTION_SETTERS
        line, line_start, last = 1, 0, 0
        for m in lexer.STATEMENT.finditer(text):
            kind = m.lastindex
            start = m.start(kind)
            newlines = count("\n", last, start)
            if newlines:
                line += newlines
                line_start = rfind("\n", last, start) + 1
            last = start
            try:
                if kind == INSTRUCTION and scopes:
                    guard, chain, operand_text = m.group(I_GUARD, I_CHAIN, I_OPERANDS)
                    chain = chains[chain]
                    if "[" in operand_text or "{" in operand_text or "(" in operand_text:
                        ops = bracketed_lists[operand_text]
                    elif operand_text:
                        ops = tuple(map(piece, operand_text.split(",")))
                    else:
                        ops = ()
                    # Instruction(...) spelled out: the generated __init__ of a frozen dataclass costs
                    # half as much again, and this runs once per instruction.
                    ins = new(Instruction)
                    set_opcode(ins, chain[0])
                    set_modifiers(ins, chain[1])
                    set_operands(ins, ops)
                    set_guard(ins, guards[guard])
                    set_line(ins, line)
                    set_column(ins, start - line_start + 1)
                    current.append(ins)
                elif kind == LABEL and scopes:
                    current.append(Label(m.group(L_NAME), line, start - line_start + 1))
                else:
                    current = handlers[kind](m, current, scopes, line, start - line_start + 1)
            except _Bad as bad:
                self._fail(bad, start, m.end())
        if scopes:
            line, column = scopes[-1][2]
            raise PtxSyntaxError("'{' is never closed", source=self.source, line=line, column=column, text="{")
        return Module(self.version, self.target, self.address_size, tuple(items), self.source)

    def _fail(self, bad: _Bad, start: int, end: int) -> None:
        """Raise the PtxSyntaxError for `bad`, located at its fragment inside text[start:end]."""
        found = self.text.find(bad.fragment, start, end) if bad.fragment else -1
        pos = found if found >= 0 else start
        line, column = lexer.locate(self.text, pos)
        fragment = bad.fragment or self.text[start:end]
        raise PtxSyntaxError(bad.message, source=self.source, line=line, column=column, text=fragment.strip())

    def _handlers(self) -> dict[int, Callable]:
        """What each kind of statement (a group number of lexer.STATEMENT) does; returns where the
        statements after it go."""
        group = lexer.GROUP
        return {
            group["instruction"]: self._orphan_instruction,
            group["loc"]: self._loc,
            group["label"]: self._orphan_label,
            group["open"]: self._open,
            group["close"]: self._close,
            group["header"]: self._header,
            group["line"]: self._line_directive,
            group["section"]: self._section,
            group["directive"]: self._directive,
            group["bad"]: self._bad,
        }

    def _orphan_instruction(self, m: re.Match, current: list, scopes: list, line: int, column: int) -> list:
        raise _Bad("instruction outside a function", m.group(lexer.INSTRUCTION))

    def _orphan_label(self, m: re.Match, current: list, scopes: list, line: int, column: int) -> list:
        raise _Bad("label outside a function", m.group(lexer.LABEL))

    def _open(self, m: re.Match, current: list, scopes: list, line: int, column: int) -> list:
        if not scopes:
            raise _Bad("block outside a function", "{")
        if len(scopes) > MAX_BLOCK_DEPTH:
            raise _Bad(f"blocks nested more than {MAX_BLOCK_DEPTH} deep", "{")
        scopes.append((current, None, (line, column)))
        return []

    def _close(self, m: re.Match, current: list, scopes: list, line: int, column: int) -> list:
        if not scopes:
            raise _Bad("'}' without a matching '{'", "}")
        outer, header, opened = scopes.pop()
        body = Block(tuple(current), *opened)
        outer.append(body if header is None else Function(*header[:-2], body, *header[-2:]))
        return outer

    def _bad(self, m: re.Match, current: list, scopes: list, line: int, column: int) -> list:
        found = m.group("bad")
        if found.startswith("@"):
            raise _Bad("malformed guard or instruction", found)
        if found.startswith("."):
            raise _Bad("directive is not terminated", found)
        raise _Bad("statement is not terminated by ';' or is not PTX", found)

    # ----------------------------------------------------------------------------------------------
    # instructions

    def _chain(self, chain: str) -> tuple[str, tuple[str, ...]]:
        """`ld.global.u32` → ("ld", ("global", "u32")), for a known opcode."""
        opcode, _, modifiers = chain.partition(".")
        if opcode not in OPCODES:
            raise _Bad(f"unknown instruction '{opcode}'", chain)
        if lexer.CHAIN.match(chain) is None:
            raise _Bad("malformed modifier chain", chain)
        return opcode, tuple(modifiers.split(".")) if modifiers else ()

    def _guard(self, text: str | None) -> Guard | None:
        if text is None:
            return None
        g = lexer.GUARD.match(text)
        return Guard(g.group(2), g.group(1) == "!")

    def _bracketed_list(self, text: str) -> tuple[Operand, ...]:
        """The operands of a list holding `[…]`, `{…}` or `(…)`, whose commas need not separate operands.

        Pieces keep their surrounding blanks: `self.operand` maps " %r1" and "%r1" to equal operands,
        which is cheaper than stripping every piece of every list.
        """
        if "{" in text or "(" in text or lexer.BRACKET_COMMA.search(text):
            return tuple(map(self.operand.__getitem__, self._split(text)))
        return tuple(map(self.operand.__getitem__, text.split(",")))

    def _split(self, text: str) -> list[str]:
        """Top-level comma-separated pieces of `text` (commas inside {} [] () do not split)."""
        pieces, pos, end = [], 0, len(text)
        while True:
            m = lexer.PIECE.match(text, pos)
            if m is None:
                raise _Bad("unbalanced brackets in operands", text[pos:].strip())
            pieces.append(m.group(1))
            if not m.group(2):
                if m.end() != end:
                    raise _Bad("unbalanced brackets in operands", text[m.end() :].strip())
                return pieces
            pos = m.end()

    def _piece(self, text: str) -> Operand:
        """The operand a piece of an operand list stands for (blanks around it ignored)."""
        stripped = text.strip()
        return self.operand[stripped] if stripped != text else self._operand(text)

    def _operand(self, text: str) -> Operand:
        if not text:
            raise _Bad("empty operand", text)
        first = text[0]
        if first == "%" or first == "$" or first == "_" or first.isalpha():
            m = lexer.NAME.match(text)
            if m is not None:
                return _SINK if text == "_" else Name(m.group(1), m.group(2))
            m = lexer.PAIR.match(text)
            if m is not None:
                return Pair(self._name_or_sink(m.group(1)), self._name_or_sink(m.group(2)))
            return self._symbol_or_expr(text)
        if first == "[":
            return self._address(text)
        if first == "-" and lexer.NAME.match(text[1:].lstrip()):
            return Minus(self._operand(text[1:].lstrip()))  # a negated register (vmad)
        if first.isdigit() or first == "-" or first == ".":
            return self._number(text)
        if first == "{":
            if text[-1] != "}":
                raise _Bad("malformed vector operand", text)
            return Vector(tuple(self._operand(item.strip()) for item in self._split(text[1:-1])))
        if first == "(":
            return self._arg_list(text)
        if first == "!":
            return Negated(self._operand(text[1:].strip()))
        return self._expr(text)

    def _name_or_sink(self, name: str) -> Operand:
        return _SINK if name == "_" else Name(name)

    def _number(self, text: str) -> Operand:
        m = lexer.HEX_FLOAT.match(text)
        if m is not None:
            digits = m.group(2)
            width = 32 if digits[0] in "fF" else 64
            bits = int(digits[1:], 16)
            if m.group(1):
                bits ^= 1 << (width - 1)
            return FloatImm(bits, width)
        m = lexer.INTEGER.match(text)
        if m is not None:
            return _integer(m)
        if lexer.DECIMAL_FLOAT.match(text):
            return FloatImm(int.from_bytes(struct.pack("<d", float(text)), "little"), 64, True)
        return self._expr(text)

    def _address(self, text: str) -> Address:
        if text[-1] != "]":
            raise _Bad("malformed address operand", text)
        inner = text[1:-1]
        extra: tuple[Operand, ...] = ()
        if "," in inner:
            pieces = self._split(inner)
            inner = pieces[0]
            extra = tuple(self._operand(piece.strip()) for piece in pieces[1:])
        m = lexer.ADDRESS.match(inner)
        if m is None:
            raise _Bad("malformed address operand", text)
        base, component, sign, negative, offset, absolute_negative, absolute = m.groups()
        if base is not None:
            value = 0
            if offset is not None:
                value = _int(offset)
                if (sign == "-") != (negative == "-"):
                    value = -value
            return Address(Name(base, component), value, extra)
        if absolute is None:
            raise _Bad("empty address operand", text)
        value = _int(absolute)
        return Address(None, -value if absolute_negative else value, extra)

    def _arg_list(self, text: str) -> Operand:
        """`(a, b)` of `call` (names and immediates); anything else in parentheses is an expression."""
        if text[-1] == ")":
            inner = text[1:-1].strip()
            if not inner:
                return ArgList(())
            try:
                items = tuple(self._operand(piece.strip()) for piece in self._split(inner))
            except _Bad:
                items = ()
            if items and all(type(item) in _ARGUMENT_TYPES for item in items):
                return ArgList(items)
        return self._expr(text)

    def _symbol_or_expr(self, text: str) -> Operand:
        m = lexer.SYMBOL_REF.match(text)
        if m is not None:
            generic, plain, sign, offset = m.groups()
            value = 0 if offset is None else _int(offset)
            if generic is None and plain == "WARP_SZ" and offset is not None:  # `WARP_SZ-1`: a constant
                return IntImm(constexpr.WARP_SIZE + (-value if sign == "-" else value), 10, False)
            if generic is None and value == 0:
                return Name(plain)  # `sym+0`
            return SymbolRef(generic or plain, -value if sign == "-" else value, generic is not None)
        return self._expr(text)

    def _expr(self, text: str) -> Expr | IntImm:
        """A constant expression: atoms and operators alternate (unary operators aside), parens balance; one of
        integers and WARP_SZ alone is its value (ptx/constexpr.py)."""
        folded = constexpr.evaluate(text)
        if folded is not None:
            return IntImm(folded[0], 10, folded[1])
        m = _SYMBOL_PLUS_EXPR.match(text)
        if m is not None and (m.group(1) or m.group(2)) != "WARP_SZ":  # `sym+WARP_SZ*4`: address + offset
            offset = constexpr.evaluate("0" + m.group(3))
            if offset is not None:
                return SymbolRef(m.group(1) or m.group(2), offset[0], m.group(1) is not None)
        pos, end, depth, expect_atom = 0, len(text), 0, True
        while pos < end:
            m = lexer.EXPR_TOKEN.match(text, pos)
            if m is None:
                if text[pos:].strip():
                    raise _Bad("malformed operand", text)
                break
            atom, op = m.groups()
            if atom is not None:
                if not expect_atom:
                    raise _Bad("malformed operand (missing comma?)", text)
                expect_atom = False
            elif op == "(":
                depth += 1
            elif op == ")":
                depth -= 1
                if depth < 0 or expect_atom:
                    raise _Bad("malformed operand", text)
            elif expect_atom and op not in "-+~!":
                raise _Bad("malformed operand", text)
            else:
                expect_atom = True
            pos = m.end()
        if depth or expect_atom:
            raise _Bad("malformed operand", text)
        return Expr(_WHITESPACE.sub(" ", text.strip()))

    # ----------------------------------------------------------------------------------------------
    # directives

    def _loc(self, m: re.Match, current: list, scopes: list, line: int, column: int) -> list:
        if not scopes:
            raise _Bad(".loc outside a function", m.group(lexer.LOC))
        file_index, source_line, source_column, function_name, i_file, i_line, i_column = m.group(
            *range(lexer.LOC + 1, lexer.LOC + 8)
        )
        inlined = None if i_file is None else (int(i_file), int(i_line), int(i_column))
        current.append(
            Loc(int(file_index), int(source_line), int(source_column), function_name, inlined, line, column)
        )
        return current

    def _line_directive(self, m: re.Match, current: list, scopes: list, line: int, column: int) -> list:
        text = m.group("line").strip()
        if scopes:
            raise _Bad("module directive inside a function", text)
        name = lexer.DIRECTIVE_NAME.match(text).group(1)
        if name == "file":
            f = lexer.FILE.match(text)
            if f is None:
                raise _Bad("malformed .file directive", text)
            current.append(File(int(f.group(1)), f.group(2), _opt_int(f.group(3)), _opt_int(f.group(4)), line, column))
            return current
        seen = {"version": self.version, "target": self.target, "address_size": self.address_size}[name]
        if seen not in (None, ()):
            raise _Bad(f"second .{name} directive", text)
        if name == "version":
            v = lexer.VERSION.match(text)
            if v is None:
                raise _Bad("malformed .version directive", text)
            self.version = (int(v.group(1)), int(v.group(2)))
        elif name == "target":
            t = lexer.TARGET.match(text)
            if t is None:
                raise _Bad("malformed .target directive", text)
            self.target = tuple(part.strip() for part in t.group(1).split(","))
        else:
            a = lexer.ADDRESS_SIZE.match(text)
            if a is None:
                raise _Bad("malformed .address_size directive", text)
            self.address_size = int(a.group(1))
        return current

    def _section(self, m: re.Match, current: list, scopes: list, line: int, column: int) -> list:
        if scopes:
            raise _Bad(".section inside a function", m.group("section"))
        name, body = m.group(lexer.S_NAME, lexer.S_BODY)
        body_start = m.start(lexer.S_BODY)
        entries: list = []
        text = self.text
        entry_line, line_start, last = line, text.rfind("\n", 0, body_start) + 1, body_start
        entry_line += text.count("\n", m.start("section"), body_start)
        for item in lexer.SECTION_LINE.finditer(body):
            label, data_type, values, bad = item.groups()
            if bad is not None:
                raise _Bad("not a data line of a section", bad)
            if label is not None:
                entry_line, entry_column = lexer.locate(text, body_start + item.start(1), last, entry_line, line_start)
                last = body_start + item.start(1)
                line_start = last - entry_column + 1
                entries.append(Label(label, entry_line, entry_column))
            else:
                entries.append(SectionData(data_type, tuple(self._section_value(v.strip()) for v in values.split(","))))
        current.append(Section(name, tuple(entries), line, column))
        return current

    def _section_value(self, text: str) -> Operand:
        return Name(text) if lexer.SECTION_NAME.match(text) else self.operand[text]

    def _directive(self, m: re.Match, current: list, scopes: list, line: int, column: int) -> list:
        text = m.group("directive")
        d = lexer.DIRECTIVE_NAME.match(text)
        if d is None:
            raise _Bad("malformed directive", text)
        name = d.group(1)
        if name in STATE_SPACES or name in LINKAGES:
            current.extend(Variable(*fields, line, column) for fields in self.declarations[text])
        elif name == "pragma":
            p = lexer.PRAGMA.match(text)
            if p is None:
                raise _Bad("malformed .pragma directive", text)
            current.append(Pragma(tuple(lexer.STRING.findall(p.group(1))), line, column))
        elif name in ("callprototype", "branchtargets", "calltargets"):
            if not scopes:
                raise _Bad(f".{name} outside a function", text)
            if not current or type(current[-1]) is not Label:
                raise _Bad(f".{name} needs a label ('name: .{name} …')", text)
            label = current.pop()
            if name == "callprototype":
                current.append(self._callprototype(text, label))
            else:
                t = lexer.TARGET_LIST.match(text)
                if t is None:
                    raise _Bad(f"malformed .{name} directive", text)
                targets = tuple(part.strip() for part in t.group(2).split(","))
                current.append(TargetList(name, label.name, targets, label.line, label.column))
        elif name == "alias":
            if scopes:
                raise _Bad(".alias inside a function", text)
            a = lexer.ALIAS.match(text)
            if a is None:
                raise _Bad("malformed .alias directive", text)
            current.append(Alias(a.group(1), a.group(2), line, column))
        elif name in _LINE_DIRECTIVES:
            raise _Bad(f"malformed .{name} directive", text)
        else:
            raise _Bad(f"unknown directive '.{name}'", text)
        return current

    def _callprototype(self, text: str, label: Label) -> CallPrototype:
        c = lexer.CALLPROTOTYPE.match(text)
        if c is None:
            raise _Bad("malformed .callprototype directive", text)
        returns, params, noreturn = c.groups()
        return CallPrototype(
            label.name, self._params(returns), self._params(params), noreturn is not None, label.line, label.column
        )

    # ----------------------------------------------------------------------------------------------
    # declarations

    def _declaration(self, text: str) -> list[tuple]:
        """The Variable fields (all but the position) of each name a declaration statement declares."""
        linkage = space = type_ = align = vector = ptr_space = ptr_align = None
        ptr = False
        attributes: list[str] = []
        pos = 0
        while True:
            q = lexer.DECL_QUALIFIER.match(text, pos)
            if q is None:
                break
            pos = q.end()
            attribute, attribute_body, align_keyword, align_value, word = q.groups()
            if attribute is not None:
                attributes.append(_WHITESPACE.sub("", attribute_body))
            elif align_keyword is not None:
                value = _int(align_value)
                if ptr:
                    ptr_align = value
                else:
                    align = value
            elif word in LINKAGES and linkage is None and space is None:
                linkage = word
            elif word in STATE_SPACES and (space is None or (ptr and ptr_space is None)):
                if space is None:
                    space = word
                else:
                    ptr_space = word
            elif word in TYPES and type_ is None:
                type_ = word
            elif word in _VECTORS and vector is None:
                vector = _VECTORS[word]
            elif word == "ptr" and not ptr:
                ptr = True
            else:
                raise _Bad(f"unexpected '.{word}' in a declaration", "." + word)
        if space is None or type_ is None:
            raise _Bad("declaration needs a state space and a type", text)
        rest = text[pos:]
        if "=" in rest or "{" in rest:
            declarators = self._declarators(rest)
        else:
            declarators = rest.split(",")
        fields = []
        for declarator in declarators:
            d = lexer.DECLARATOR.match(declarator)
            if d is None:
                raise _Bad("malformed declaration", declarator.strip() or text)
            name, count, dims, init = d.groups()
            array = tuple(_dimension(dim) if dim else None for dim in lexer.ARRAY_DIM.findall(dims)) if dims else ()
            initializer = None if init is None else self._initializer(init.strip())
            fields.append(
                (space, type_, name, linkage, align, vector, array, None if count is None else int(count),
                 ptr, ptr_space, ptr_align, tuple(attributes), initializer)
            )
        return fields

    def _declarators(self, text: str) -> list[str]:
        pieces, pos, end = [], 0, len(text)
        while pos < end:
            m = lexer.DECLARATORS.match(text, pos)
            if m is None:
                raise _Bad("malformed declaration", text[pos:].strip())
            pieces.append(m.group(1))
            pos = m.end()
            if not m.group(2):
                break
        if pos != end:
            raise _Bad("malformed declaration", text[pos:].strip())
        return pieces

    def _initial_value(self, text: str) -> Initializer:
        """One value of an initializer; WARP_SZ, a name elsewhere, is the constant here."""
        return IntImm(constexpr.WARP_SIZE, 10, False) if text == "WARP_SZ" else self.operand[text]

    def _initializer(self, text: str) -> Initializer:
        if not text.startswith("{"):
            return self._initial_value(text)
        if not text.endswith("}"):
            raise _Bad("malformed initializer", text)
        inner = text[1:-1]
        if "=" in inner:
            return InitList(tuple(self._sampler_field(piece) for piece in inner.split(",")))
        if "{" not in inner:
            return InitList(tuple(map(self._initial_value, map(str.strip, inner.split(",")))))
        return InitList(tuple(self._initializer(piece.strip()) for piece in self._split(inner)))

    def _sampler_field(self, text: str) -> Expr:
        """`filter_mode = linear` of a `.samplerref` initializer (texmode_independent modules)."""
        f = lexer.SAMPLER_FIELD.match(text)
        if f is None:
            raise _Bad("malformed sampler initializer", text.strip())
        return Expr(f"{f.group(1)} = {f.group(2)}")

    def _params(self, text: str | None) -> tuple[Variable, ...]:
        if text is None or not text.strip():
            return ()
        pieces = self._split(text) if "(" in text else text.split(",")
        params = []
        for piece in pieces:
            fields = self._declaration(piece.strip())
            if len(fields) != 1 or fields[0][0] not in ("param", "reg") or fields[0][-1] is not None:
                raise _Bad("a parameter is one '.param' or '.reg' name", piece.strip())
            params.append(Variable(*fields[0]))
        return tuple(params)

    def _header(self, m: re.Match, current: list, scopes: list, line: int, column: int) -> list:
        """A function header: a declaration (ends in `;`) or the start of a definition (ends in `{`)."""
        text = m.group(lexer.HEADER)
        if scopes:
            raise _Bad("function inside a function", text)
        h = lexer.HEADER_MATCH.match(text)
        if h is None or h.group(4) is None:
            raise _Bad("malformed function header", text)
        linkages, kind, returns, name, params, tail, terminator = h.groups()
        linkage_words = linkages.split()
        if len(linkage_words) > 1:
            raise _Bad("more than one linkage", linkages.strip())
        if returns is not None and kind == "entry":
            raise _Bad("a kernel has no return parameters", text)
        directives = []
        pos, tail = 0, tail.rstrip()
        while pos < len(tail):
            d = lexer.HEADER_DIRECTIVE.match(tail, pos)
            if d is None:
                raise _Bad("malformed function header directive", tail[pos:].strip())
            values = tuple(_int(v) for v in re.split(r"[\s,]+", d.group(2).strip()) if v)
            directives.append(Directive(d.group(1), values))
            pos = d.end()
            while pos < len(tail) and tail[pos].isspace():
                pos += 1
        fields = (
            kind,
            name,
            self._params(params),
            self._params(returns),
            linkage_words[0][1:] if linkage_words else None,
            tuple(directives),
        )
        if terminator == ";":
            current.append(Function(*fields, None, line, column))
            return current
        start = m.start(lexer.HEADER)
        brace = lexer.locate(self.text, m.end(lexer.HEADER) - 1, start, line, start - column + 1)
        scopes.append((current, fields + (line, column), brace))
        return []
