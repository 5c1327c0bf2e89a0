"""AMD ISA pseudocode (the `PCODE` tables) compiled to Python source that runs one instruction over a wave.

The generated function works on lane vectors: integers are numpy object arrays of Python ints (exact, no
overflow), floats numpy float16/32/64 arrays, conditions bool arrays; the same code runs on plain Python
scalars for scalar instructions and for one lane at a time (atomics). A per-lane `if` becomes two masked
passes (`M` is the mask of lanes the statement applies to); assignments inside merge with `np.where`.

Translation is static where the pseudocode says the type (`S0.u32`, `64'F(x)`): each expression carries a kind
('i' integer, 'f' float, 'b' condition) and a width, so an integer meeting a float is converted, not mixed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from fatkit.errors import FatkitError

# bump when the generated code changes meaning, so the disk cache is rebuilt
TRANSLATOR_VERSION = 18


class PcodeError(FatkitError):
    """Pseudocode this translator does not understand."""


_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r]+) | (?P<comment>//[^\n]*) | (?P<nl>\n) |
    (?P<cast>\d+'[IUFB]\() |
    (?P<type>\d+'[IUFB](?:\[\d+\])?) |
    (?P<wfloat>\d+'\d+\.\d+) |
    (?P<wlit>\d+'(?:0x[0-9a-fA-F]+|\d+)[UI]?) |
    (?P<float>\d+\.\d+(?:[eE][-+]?\d+)?F?) |
    (?P<hex>0x[0-9a-fA-F]+(?:ULL|LL|U|L)?) |
    (?P<int>\d+(?:ULL|LL|U|L)?) |
    (?P<name>[A-Za-z_][A-Za-z_0-9]*) |
    (?P<op>\*\*|<<=|>>=|==|!=|<>|<=|>=|<<|>>|&&|\|\||\+=|-=|\*=|\|=|&=|\^=|[-+*/%&|^~!<>=?:;,()\[\]{}.])
""", re.VERBOSE)


@dataclass
class Tok:
    kind: str
    text: str


def tokenize(text: str) -> list[Tok]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise PcodeError(f"pseudocode: cannot read {text[pos:pos + 20]!r}")
        pos = m.end()
        kind = m.lastgroup
        assert kind is not None  # every alternative of _TOKEN is a named group
        if kind in ("ws", "comment"):
            continue
        out.append(Tok(kind, m.group()))
    out.append(Tok("eof", ""))
    return out


# Width of each type suffix; kind 'f' float, 'i' integer (signed or not by `signed`).
_SUFFIX = re.compile(r"^(u|i|b|f|bf)(\d+)$")


@dataclass
class Expr:
    code: str
    kind: str | None  # 'i', 'f', 'b' or None when not known statically
    width: int | None = None
    literal: bool = False
    text: str = ""  # the pseudocode token for a bare name (lvalues)


def _int_literal(text: str) -> int:
    text = text.rstrip("ULI")
    return int(text, 16) if text.lower().startswith("0x") else int(text)


_FLOAT_CONST = {
    "INF": "_INF", "NAN": "_NAN", "PI": "_PI", "UNDERFLOW_F32": "0.0", "OVERFLOW_F32": "_INF",
    "UNDERFLOW_F64": "0.0", "OVERFLOW_F64": "_INF", "MAX_FLOAT_F32": "_MAXF32",
}
_CONST = {"WAVE32": "ctx.wave32", "WAVE64": "(not ctx.wave32)", "laneId": "LANE", "true": "True",
          "false": "False", "ROUND_MODE": "0", "ROUND_NEAREST_EVEN": "0", "ROUND_TOWARD_ZERO": "3"}
# Operands the executor provides (raw bits, or addresses); anything else assigned is a local variable.
OPERANDS = frozenset({
    "S0", "S1", "S2", "D0", "D1", "SCC", "VCC", "EXEC", "EXEC_LO", "EXEC_HI", "VCC_LO", "VCC_HI", "PC", "M0",
    "SIMM16", "SIMM32", "ADDR", "DATA", "DATA0", "DATA1", "DATA2", "RETURN_DATA", "VDATA", "SDATA", "OFFSET",
    "OFFSET0", "OFFSET1", "VCCZ", "EXECZ", "SRC0", "VDST", "OPSEL", "OPSEL_HI", "ADDR_BASE", "SADDR",
    "SBASE", "SOFFSET", "INST_OFFSET", "LDS", "NEG",
})
# functions: name -> (helper, result kind); None kind = same as first argument
_FUNCS = {
    "isNAN": ("_isnan", "b"), "isSignalNAN": ("_issnan", "b"), "isQuietNAN": ("_isqnan", "b"),
    "cvtToQuietNAN": ("_quiet", None), "abs": ("_abs", None), "sign": ("_sign", "i"),
    "exponent": ("_exponent", "i"), "mantissa": ("_mantissa", None), "fma": ("_fma", None),
    "ldexp": ("_ldexp", None), "fma_scaled": ("_fma_scaled", None),
    "frexp_exp": ("_frexp_exp", "i"), "rint": ("_rint", None), "floor": ("_floor", None), "trunc": ("_trunc", None),
    "sqrt": ("_sqrt", None),
    "fract": ("_fract", None), "isEven": ("_iseven", "b"), "log2": ("_log2", None), "pow": ("_pow", None),
    "sin": ("_sin", None), "cos": ("_cos", None), "signext": ("_signext", "i"),
    "signext_from_bit": ("_signext_from_bit", "i"), "count_ones": ("_popcount", "i"),
    "countbits": ("_popcount", "i"), "bitCount": ("_popcount", "i"), "reverse_bits": ("_rev32", "i"),
    "s_ff1_i32_b32": ("_ff1", "i"), "s_ff1_i32_b64": ("_ff1", "i"),
    "f32_to_i32": ("_f_to_i32", "i"), "f32_to_u32": ("_f_to_u32", "i"), "f64_to_i32": ("_f_to_i32", "i"),
    "f64_to_u32": ("_f_to_u32", "i"), "f16_to_i16": ("_f_to_i16", "i"), "f16_to_u16": ("_f_to_u16", "i"),
    "v_cvt_i16_f32": ("_f_to_i16", "i"), "v_cvt_u16_f32": ("_f_to_u16", "i"), "f32_to_u8": ("_f_to_u8", "i"),
    "i32_to_f32": ("_to_f32", "f32"), "u32_to_f32": ("_to_f32", "f32"), "i32_to_f64": ("_to_f64", "f64"),
    "u32_to_f64": ("_to_f64", "f64"), "f32_to_f64": ("_to_f64", "f64"), "f64_to_f32": ("_to_f32", "f32"),
    "f16_to_f32": ("_to_f32", "f32"), "f32_to_f16": ("_to_f16", "f16"), "u16_to_f16": ("_to_f16", "f16"),
    "i16_to_f16": ("_to_f16", "f16"), "bf16_to_f32": ("_bf16_to_f32", "f32"), "f32_to_bf16": ("_f32_to_bf16", "i"),
    "u8_to_u32": ("_u8", "i"), "u16_to_u32": ("_u16", "i"), "u4_to_u32": ("_u4", "i"),
    "i8_to_i32": ("_i8", "i"), "i16_to_i32": ("_i16", "i"), "i4_to_i32": ("_i4", "i"),
    "u32_to_u16": ("_u16", "i"), "i32_to_i16": ("_i16", "i"),
    "v_minimum_f32": ("_vminimum", None), "v_maximum_f32": ("_vmaximum", None),
    "ABSDIFF": ("_absdiff", "i"), "SAT8": ("_sat8", "i"), "perm_b32": ("perm_b32", "i"),
}


class _Compiler:
    def __init__(self, text: str, vector: bool):
        self.toks = tokenize(text)
        self.pos = 0
        self.vector = vector
        self.lines: list[str] = []
        self.indent = 1
        self.defined: set[str] = set(OPERANDS)
        self.kinds: dict[str, tuple[str | None, int | None]] = {}
        self.temp = 0
        self.depth = 0  # nesting of per-lane conditionals
        self.written: set[str] = set()
        self.extent: dict[str, int] = {}
        self.arrays: set[str] = set()  # declared `x : 32'I[4]`: element by element
        self.loops: list[str] = []  # per loop: the variable holding the lanes that broke out
        self.read: set[str] = set()
        self.result: tuple[str, int, bool] | None = None  # the type D0 is written as (what a call returns)
        self.functions: dict[str, str] = {}  # called opcodes' functions: name -> Python source

    # --- tokens
    def peek(self, k: int = 0) -> Tok:
        return self.toks[self.pos + k]

    def next(self) -> Tok:
        tok = self.toks[self.pos]
        self.pos += 1
        return tok

    def accept(self, text: str) -> bool:
        if self.peek().text == text and self.peek().kind in ("op", "name"):
            self.pos += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.accept(text):
            raise PcodeError(f"pseudocode: expected {text!r}, found {self.peek().text!r}")

    def skip_separators(self) -> None:
        while self.peek().kind == "nl" or self.peek().text == ";":
            self.pos += 1

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def fresh(self) -> str:
        self.temp += 1
        return f"_t{self.temp}"

    # --- statements
    def block(self, enders: tuple[str, ...]) -> str:
        while True:
            self.skip_separators()
            tok = self.peek()
            if tok.kind == "eof" or (tok.kind == "name" and tok.text in enders):
                return tok.text
            self.statement()

    def statement(self) -> None:
        tok = self.peek()
        if tok.kind == "name" and tok.text == "if":
            self.next()
            return self.if_statement()
        if tok.kind == "name" and tok.text == "for":
            self.next()
            return self.for_statement()
        if tok.kind == "name" and tok.text == "declare":
            self.next()
            name = self.next().text
            array = False
            while self.peek().kind not in ("nl", "eof") and self.peek().text != ";":
                array |= self.next().text.endswith("]")
            self.kinds.pop(name, None)
            if array:
                self.arrays.add(name)
                self.defined.add(name)
                self.emit(f"v_{name} = {{}}")
            return
        if tok.kind == "name" and tok.text == "break":
            self.next()
            if self.vector and self.depth and self.loops:
                # lanes that break leave the loop; the others go on
                self.emit(f"{self.loops[-1]} = _lor({self.loops[-1]}, M)")
            else:
                self.emit("break")
            return
        if tok.kind == "name" and tok.text in ("s_nop", "nop"):
            while self.peek().kind not in ("nl", "eof") and self.peek().text != ";":
                self.next()
            return
        self.assignment()

    def if_statement(self) -> None:
        cond = self.condition()
        self.expect("then")
        saved = self.fresh()
        self.emit(f"{saved} = M")
        rest = self.fresh()
        self.emit(f"{rest} = M")
        self.depth += 1
        while True:
            c = self.fresh()
            # an elsif's condition is evaluated for the lanes no earlier branch took (a call in it runs there)
            self.emit(f"M = {rest}")
            self.emit(f"{c} = _b({cond.code})")
            self.emit(f"M = _mand({rest}, {c})")
            self.emit(f"{rest} = _mand({rest}, _mnot({c}))")
            self.emit("if _any(M):")
            self.indent += 1
            self.emit("pass")
            ender = self.block(("elsif", "else", "endif"))
            self.indent -= 1
            self.next()
            if ender == "elsif":
                cond = self.condition()
                self.expect("then")
                continue
            if ender == "else":
                self.emit(f"M = {rest}")
                self.emit("if _any(M):")
                self.indent += 1
                self.emit("pass")
                if self.block(("endif",)) != "endif":
                    raise PcodeError("pseudocode: if without endif")
                self.next()
                self.indent -= 1
            elif ender != "endif":
                raise PcodeError("pseudocode: if without endif")
            break
        self.depth -= 1
        self.emit(f"M = {saved}")
        if self.loops:
            self.emit(f"M = _mand(M, _mnot({self.loops[-1]}))")

    def for_statement(self) -> None:
        var = self.next().text
        self.expect("in")
        lo = self.expr()
        self.expect(":")
        hi = self.expr()
        self.expect("do")
        loop_mask, broken = self.fresh(), self.fresh()
        self.emit(f"{loop_mask} = M")
        self.emit(f"{broken} = False")
        self.emit(f"for v_{var} in _range({lo.code}, {hi.code}):")
        self.defined.add(var)
        self.kinds[var] = ("i", 32)
        self.indent += 1
        self.emit(f"M = _mand({loop_mask}, _mnot({broken}))")
        self.emit("if not _any(M):")
        self.emit("    break")
        self.loops.append(broken)
        depth, self.depth = self.depth, self.depth + 1  # assignments in the body merge (lanes may break)
        if self.block(("endfor",)) != "endfor":
            raise PcodeError("pseudocode: for without endfor")
        self.depth = depth
        self.loops.pop()
        self.next()
        self.indent -= 1
        self.emit(f"M = {loop_mask}")

    def condition(self) -> Expr:
        return self.expr()

    # --- assignments
    def assignment(self) -> None:
        if self.accept("{"):
            parts = []
            while True:
                parts.append(self.lvalue())
                if self.accept("}"):
                    break
                self.expect(",")
            self.expect("=")
            value = self.expr()
            total = self.fresh()
            self.emit(f"{total} = _bits({value.code}, {value.width})")
            shift = 0
            for target in reversed(parts):
                width = target[2] or 32
                self.store(target, Expr(f"(({total} >> {shift}) & {(1 << width) - 1})", "i", width))
                shift += width
            return
        target = self.lvalue()
        op = self.next()
        if op.text not in ("=", "+=", "-=", "*=", "|=", "&=", "^=", "<<=", ">>="):
            raise PcodeError(f"pseudocode: expected an assignment, found {op.text!r}")
        value = self.expr()
        if op.text != "=":
            current = self.read_lvalue(target)
            value = self.binary(op.text[:-1], current, value)
        self.store(target, value)

    def lvalue(self) -> tuple:
        """(name, kind, width, bit offset expr or None, lane index expr or None, memory address or None)"""
        tok = self.next()
        if tok.kind != "name":
            raise PcodeError(f"pseudocode: cannot assign to {tok.text!r}")
        name = tok.text
        kind: str | None
        width: int | None
        if name in ("MEM", "VGPR", "SGPR"):
            if name != "MEM":
                raise PcodeError(f"pseudocode: writes {name}[] (cross-lane register access)")
            self.expect("[")
            addr = self.expr()
            self.expect("]")
            kind, width = "i", 32  # an untyped MEM[] is a dword
            if self.accept("."):
                kind, width, _ = self.suffix(self.next().text)
            return ("MEM", kind, width, None, None, addr)
        kind, width, offset, lane = None, None, None, None
        if name in self.arrays and self.peek().text == "[":
            self.next()
            index = self.expr()
            self.expect("]")
            return ("ARRAY", None, None, index, name, None)
        if name in self.kinds:
            kind, width = self.kinds[name]
        signed = False
        while True:
            if self.peek().text == "." and self.peek(1).kind == "name" and _SUFFIX.match(self.peek(1).text):
                self.next()
                kind, width, signed = self.suffix(self.next().text)
            elif self.peek().text == "[":
                self.next()
                hi = self.expr()
                if self.accept(":"):
                    lo = self.expr()
                    self.expect("]")
                    if not (hi.literal and lo.literal):
                        raise PcodeError("pseudocode: variable bit range as a target")
                    h, low = int(hi.code), int(lo.code)
                    if h < low:
                        raise PcodeError("pseudocode: reversed bit range as a target")
                    offset, width, kind = (f"({offset} + {low})" if offset else str(low)), h - low + 1, "i"
                else:
                    self.expect("]")
                    if hi.code == "LANE" and self.vector:
                        lane = hi
                    else:
                        offset = hi.code if offset is None else f"({offset} + {hi.code})"
                        width, kind = 1, "i"
            else:
                break
        if name == "D0" and offset is None and lane is None and kind is not None and width is not None:
            self.result = (kind, width, signed)
        return (name, kind, width, offset, lane, None)

    def read_lvalue(self, target: tuple) -> Expr:
        name, kind, width, offset, lane, addr = target
        if name == "ARRAY":
            return Expr(f"v_{lane}[int({offset.code})]", *self.kinds.get(lane, (None, None)))
        if name == "MEM":
            return Expr(f"ctx.load({addr.code}, {width}, M)", kind, width) if kind != "f" else \
                Expr(f"_asf(ctx.load({addr.code}, {width}, M), {width})", "f", width)
        base = self.name_ref(name)
        if lane is not None:
            return Expr(f"_lanebit({base}, LANE)", "i", 1)
        if offset is not None:
            raw = Expr(f"((_bits({base}, None) >> {offset}) & {(1 << width) - 1})", "i", width)
            return self.typed(raw, kind, width)
        if kind is None or width is None:
            return Expr(base, *self.kinds.get(name, (None, None)))
        return self.typed(Expr(base, None, None), kind, width)

    def store(self, target: tuple, value: Expr) -> None:
        name, kind, width, offset, lane, addr = target
        if name in OPERANDS and lane is None:  # how many bits of the operand the instruction writes
            low = int(offset) if offset is not None and offset.isdigit() else 0
            self.extent[name] = max(self.extent.get(name, 0), low + (width or value.width or 32))
        if name == "ARRAY":
            element = f"v_{lane}[int({offset.code})]"
            code = f"_asg(M, {value.code}, v_{lane}.get(int({offset.code}), 0))" if self.depth else value.code
            self.emit(f"{element} = {code}")
            self.kinds[lane] = (value.kind, value.width)
            return
        if name == "MEM":
            self.emit(f"ctx.store({addr.code}, {width}, {self.to_bits(value, kind, width)}, M)")
            return
        if name in ("VCC", "EXEC", "D0") and self.vector and lane is None and offset is None and \
                name in self.lane_masks:
            lane = Expr("LANE", "i")  # a VALU write of the whole VCC is this lane's bit
        var = self.var_name(name)
        if lane is not None:
            self.written.add(name)
            self.emit(f"{var} = _setlanebit({var}, M, _b({value.code}), LANE)")
            return
        if offset is not None:
            bits = self.to_bits(value, kind, width)
            new = f"_setbits({var}, {offset}, {width}, {bits})"
            self.assign(name, var, new, "i", None)
            return
        if name in OPERANDS or kind is not None and width is not None and name in self.kinds:
            if kind is None:
                new = self.to_bits(value, value.kind, value.width) if value.kind == "f" else value.code
                self.assign(name, var, new, "i" if value.kind != "b" else "b", None)
                return
            if name in OPERANDS:
                whole = width >= (self.widths or {}).get(name, 64) or name in ("SCC", "PC")
                new = self.to_bits(value, kind, width) if whole else \
                    f"_setbits({var}, 0, {width}, {self.to_bits(value, kind, width)})"
                self.assign(name, var, new, "i", None)
                return
        # a local variable takes the value (typed when the target says so)
        if kind is not None:
            value = self.convert(value, kind, width)
            self.assign(name, var, value.code, kind, width)
        else:
            self.assign(name, var, value.code, value.kind, value.width)

    def assign(self, name: str, var: str, code: str, kind, width) -> None:
        self.written.add(name)
        if self.depth and name in self.defined:
            self.emit(f"{var} = _asg(M, {code}, {var})")
        else:
            self.emit(f"{var} = {code}")
        self.defined.add(name)
        if name not in OPERANDS:
            self.kinds[name] = (kind, width)

    def var_name(self, name: str) -> str:
        return name if name in OPERANDS else f"v_{name}"

    def name_ref(self, name: str) -> str:
        if name in OPERANDS:
            self.read.add(name)
            return name
        if name in _CONST:
            return _CONST[name]
        if name not in self.defined:
            raise PcodeError(f"pseudocode: {name} is read before it is set")
        return f"v_{name}"

    # --- expressions (precedence climbing)
    _BINARY = (("?",), ("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!=", "<>"), ("<", ">", "<=", ">="),
               ("<<", ">>"), ("+", "-"), ("*", "/", "%"), ("**",))

    def expr(self, level: int = 0) -> Expr:
        if level == 0:
            cond = self.expr(1)
            if self.accept("?"):
                a = self.expr(0)
                self.expect(":")
                b = self.expr(0)
                return self.select(cond, a, b)
            return cond
        if level >= len(self._BINARY):
            return self.unary()
        left = self.expr(level + 1)
        while self.peek().kind == "op" and self.peek().text in self._BINARY[level]:
            op = self.next().text
            right = self.expr(level + 1)
            left = self.binary(op, left, right)
        return left

    def select(self, cond: Expr, a: Expr, b: Expr) -> Expr:
        a, b = self.unify(a, b)
        width = a.width if a.width == b.width else None if a.kind == "f" else (a.width or b.width)
        return Expr(f"_sel({cond.code}, {a.code}, {b.code})", a.kind or b.kind, width)

    def unify(self, a: Expr, b: Expr) -> tuple[Expr, Expr]:
        if a.kind == "f" and b.kind == "i":
            b = self.convert(b, "f", a.width)
        elif a.kind == "i" and b.kind == "f":
            a = self.convert(a, "f", b.width)
        elif a.kind == "b" and b.kind == "i":
            a = Expr(f"_int({a.code})", "i", 1)
        elif a.kind == "i" and b.kind == "b":
            b = Expr(f"_int({b.code})", "i", 1)
        return a, b

    def binary(self, op: str, a: Expr, b: Expr) -> Expr:
        if op in ("&&", "||"):
            return Expr(f"_{'land' if op == '&&' else 'lor'}({a.code}, {b.code})", "b")
        if op in ("==", "!=", "<>") and (self._signed_zero(b) or self._signed_zero(a)):
            zero, other = (b, a) if self._signed_zero(b) else (a, b)
            test = f"_is_zero_signed({other.code}, {zero.code.startswith('-')})"
            return Expr(test if op == "==" else f"_mnot({test})", "b")
        if op in ("==", "!=", "<>") and (b.code.startswith("_DENORM") or a.code.startswith("_DENORM")):
            denorm, other = (b, a) if b.code.startswith("_DENORM") else (a, b)
            test = f"_isdenorm({other.code}, {denorm.width})"
            return Expr(test if op == "==" else f"_mnot({test})", "b")
        if op == "**":
            if a.kind == "f" and b.kind == "i":
                return Expr(f"_exp2({a.code}, {b.code})", "f", a.width)
            raise PcodeError("pseudocode: ** of non-float")
        a, b = self.unify(a, b)
        kind = a.kind if a.kind == b.kind else (a.kind or b.kind)
        width = max(a.width or 0, b.width or 0) or None
        if op == "<>" and kind == "f":  # "less or greater": ordered, unlike != (false for NaN)
            return Expr(f"(({a.code} < {b.code}) | ({a.code} > {b.code}))", "b")
        if op in ("==", "!=", "<>", "<", ">", "<=", ">="):
            py = "!=" if op == "<>" else op
            return Expr(f"({a.code} {py} {b.code})", "b")
        if kind == "b" and op in ("&", "|", "^"):
            return Expr(f"({a.code} {op} {b.code})", "b")
        if kind == "f":
            if op in ("+", "-", "*", "/"):
                return Expr(f"_f{ {'+': 'add', '-': 'sub', '*': 'mul', '/': 'div'}[op]}({a.code}, {b.code})",
                            "f", width)
            raise PcodeError(f"pseudocode: {op} on floats")
        if op == "/":
            return Expr(f"_idiv({a.code}, {b.code})", "i", width)
        if op == "%":
            return Expr(f"_imod({a.code}, {b.code})", "i", width)
        if op == ">>" or op == "<<":
            return Expr(f"_{'shr' if op == '>>' else 'shl'}({a.code}, {b.code})", "i", a.width)
        if op == "*" and (a.literal and a.code in ("1",)):
            return b
        return Expr(f"({a.code} {op} {b.code})", kind or "i", width)

    @staticmethod
    def _signed_zero(e: Expr) -> bool:
        return e.code in ("-0.0", "+0.0")

    def unary(self) -> Expr:
        tok = self.peek()
        if tok.kind == "op" and tok.text in ("-", "+", "~", "!"):
            self.next()
            if tok.text in ("-", "+") and self.peek().kind == "float" and self.peek().text.rstrip("F") == "0.0":
                width = 32 if self.next().text.endswith("F") else None
                return Expr(f"{tok.text}0.0", "f", width, literal=True)
            operand = self.unary()
            if tok.text == "+":
                return operand
            if tok.text == "-":
                if operand.kind == "f":
                    return Expr(f"_fneg({operand.code})", "f", operand.width)
                return Expr(f"(-{operand.code})", operand.kind, operand.width, literal=operand.literal)
            if tok.text == "~":
                return Expr(f"(~_int({operand.code}))", "i", operand.width)
            return Expr(f"_mnot(_b({operand.code}))", "b")
        return self.postfix(self.primary())

    def postfix(self, e: Expr) -> Expr:
        while True:
            if self.peek().text == "." and self.peek(1).kind == "name":
                self.next()
                name = self.next().text
                if name == "IEEE" and e.code == "ctx.mode":
                    e = Expr("ctx.ieee", "b")
                    continue
                kind, width, signed = self.suffix(name)
                e = self.typed(e, kind, width, signed)
            elif self.peek().text == "[":
                self.next()
                hi = self.expr()
                if self.accept(":"):
                    lo = self.expr()
                    self.expect("]")
                    if hi.literal and lo.literal and int(hi.code) < int(lo.code):
                        e = Expr(f"_reverse({self.int_bits(e)}, {int(lo.code) - int(hi.code) + 1})", "i",
                                 int(lo.code) - int(hi.code) + 1)
                    elif hi.literal and lo.literal:
                        h, low = int(hi.code), int(lo.code)
                        e = Expr(f"((_bits({e.code}, {e.width}) >> {low}) & {(1 << (h - low + 1)) - 1})", "i",
                                 h - low + 1)
                    else:
                        e = Expr(f"_slice({self.int_bits(e)}, {hi.code}, {lo.code})", "i", None)
                else:
                    self.expect("]")
                    e = Expr(f"_lanebit({self.int_bits(e)}, {hi.code})", "i", 1)
            else:
                return e

    def int_bits(self, e: Expr) -> str:
        return f"_bits({e.code}, {e.width})" if e.kind == "f" else e.code

    def suffix(self, name: str) -> tuple[str, int, bool]:
        m = _SUFFIX.match(name)
        if not m:
            raise PcodeError(f"pseudocode: unknown type .{name}")
        letter, width = m.group(1), int(m.group(2))
        if letter == "bf":
            return "bf", width, False
        return ("f" if letter == "f" else "i"), width, letter == "i"

    def typed(self, e: Expr, kind: str, width: int, signed: bool = False) -> Expr:
        """`x.u32`: the value read as that type (a reinterpretation for raw bits, a conversion of floats)."""
        if e.code == "_DENORM":  # `DENORM.f32` only means "is an f32 denormal" in a comparison
            return Expr(f"_DENORM{width}", "f", width)
        if kind == "bf":  # bfloat16 values are computed as f32
            if e.kind == "f":
                return Expr(f"_fcast({e.code}, 32)", "f", 32)
            return Expr(f"_bf16_to_f32({e.code} & 65535)", "f", 32)
        if kind == "f":
            if e.kind == "f":
                return Expr(f"_fcast({e.code}, {width})", "f", width) if e.width != width else e
            if e.literal:
                return Expr(f"_fconst({e.code}, {width})", "f", width)
            return Expr(f"_asf({e.code}, {width})", "f", width)
        if e.kind == "f":
            code = f"_bits({e.code}, {e.width})"
        elif e.kind == "b":
            code = f"_int({e.code})"
        else:
            code = e.code
        if signed:
            return Expr(f"_sext({code}, {width})", "i", width)
        return Expr(f"({code} & {(1 << width) - 1})", "i", width)

    def convert(self, e: Expr, kind: str, width: int | None) -> Expr:
        """A value converted (not reinterpreted) to the kind: int→float by value, float→float by rounding."""
        if kind == e.kind or kind is None:
            if kind == "f" and width and e.width != width:
                return Expr(f"_fcast({e.code}, {width})", "f", width)
            if kind == "i" and width and e.width and e.width > width:
                return Expr(f"({e.code} & {(1 << width) - 1})", "i", width)
            return e
        if kind == "f":
            if e.literal and e.kind == "i":
                return Expr(f"_fconst({e.code}, {width or 32})", "f", width or 32)
            return Expr(f"_itof({e.code}, {width or 64})", "f", width or 64)
        if kind == "i":
            if e.kind == "b":
                return Expr(f"_int({e.code})", "i", 1)
            if e.kind == "f":
                return Expr(f"_bits({e.code}, {e.width})", "i", e.width)
            return e
        if kind == "b":
            return Expr(f"_b({e.code})", "b")
        return e

    def to_bits(self, value: Expr, kind: str | None, width: int | None) -> str:
        """Bits of `value` stored into a field of that type."""
        if kind == "bf":
            return f"_f32_to_bf16(_fcast({value.code}, 32))"
        if kind == "f":  # the value's static width may be a literal's: convert at run time (no-op if equal)
            return f"_bits(_fcast({value.code}, {width}), {width})"
        if value.kind == "f":
            return f"_bits({value.code}, {value.width})"
        if value.kind == "b":
            return f"_int({value.code})"
        return value.code

    def primary(self) -> Expr:
        tok = self.next()
        kind: str | None
        width: int | None
        if tok.kind == "op" and tok.text == "(":
            e = self.expr()
            self.expect(")")
            return e
        if tok.kind == "op" and tok.text == "{":
            parts = [self.expr()]
            while self.accept(","):
                parts.append(self.expr())
            self.expect("}")
            code, width = "0", 0
            for part in parts:
                w = part.width
                if w is None:
                    raise PcodeError("pseudocode: concatenation of a value of unknown width")
                code = f"((({code}) << {w}) | ({self.int_bits(part)} & {(1 << w) - 1}))"
                width += w
            return Expr(code, "i", width)
        if tok.kind == "cast":
            width, letter = int(tok.text.split("'")[0]), tok.text.split("'")[1][0]
            inner = self.expr()
            self.expect(")")
            if letter == "F":
                if inner.kind == "i" and inner.literal:
                    return Expr(f"_asf({inner.code}, {width})", "f", width)
                return self.convert(inner, "f", width)
            if inner.kind == "f":
                if letter == "I" or letter == "U":
                    return Expr(f"_ftoi({inner.code})", "i", width)
                return Expr(f"_bits({inner.code}, {inner.width})", "i", width)
            return self.typed(inner, "i", width, letter == "I")
        if tok.kind == "wfloat":
            digits, value = tok.text.split("'")
            return Expr(repr(float(value)), "f", int(digits), literal=True)
        if tok.kind == "wlit":
            digits, value = tok.text.split("'")
            return Expr(str(_int_literal(value)), "i", int(digits), literal=True)
        if tok.kind == "float":
            return Expr(repr(float(tok.text.rstrip("F"))), "f", 32 if tok.text.endswith("F") else None,
                        literal=True)
        if tok.kind in ("hex", "int"):
            width = 64 if tok.text.endswith("LL") else None
            return Expr(str(_int_literal(tok.text.rstrip("L"))), "i", width, literal=True)
        if tok.kind != "name":
            raise PcodeError(f"pseudocode: unexpected {tok.text!r}")
        name = tok.text
        if name == "MEM":
            self.expect("[")
            addr = self.expr()
            self.expect("]")
            kind, width, signed = "i", 32, False
            if self.peek().text == "." and self.peek(1).kind == "name" and _SUFFIX.match(self.peek(1).text):
                self.next()
                kind, width, signed = self.suffix(self.next().text)
            raw = Expr(f"ctx.load({addr.code}, {width}, M)", "i", width)
            return self.typed(raw, kind, width, signed)
        if name in ("VGPR", "SGPR"):
            raise PcodeError(f"pseudocode: reads {name}[] (cross-lane register access)")
        if name == "WAVE_MODE":
            return Expr("ctx.mode", None)
        if name in _FLOAT_CONST:
            return Expr(_FLOAT_CONST[name], "f", None)
        if name == "DENORM":
            return Expr("_DENORM", "f")
        if self.peek().text == "(" and self.peek().kind == "op":
            self.next()
            args = []
            if name.startswith("Calc") and name.endswith("Addr") and (name != "CalcDsAddr" or
                                                                    self.peek().text == "vgpr_a"):
                # the executor computed the whole address: the arguments (registers, offsets, and in the
                # RDNA4 tables locals such as sgpr_base or vgpr_a that the pseudocode never sets) are not
                # read; RDNA4's DS pseudocode adds its OFFSET itself, after CalcDsAddr(vgpr_a, 0)
                depth = 1
                while depth:
                    token = self.next()
                    if token.kind == "op" and token.text in ("(", ")"):
                        depth += 1 if token.text == "(" else -1
                self.read.add("ADDR")
                return Expr("ADDR", "i", 64)
            if not self.accept(")"):
                args.append(self.expr())
                while self.accept(","):
                    args.append(self.expr())
                self.expect(")")
            if name == "CalcDsAddr":  # the executor's ADDR is the lane's address; the offsets come here
                self.read.add("ADDR")
                return Expr(f"(ADDR + {args[1].code} + ({args[2].code} << 8))", "i", 32)
            if self.resolve is not None and (callee := self.resolve(name)) is not None:
                return self.call(name, callee, args)
            if name not in _FUNCS:
                raise PcodeError(f"pseudocode: function {name}()")
            helper, kind = _FUNCS[name]
            width = args[0].width if args else None
            if kind in ("f32", "f64", "f16"):
                kind, width = "f", int(kind[1:])
            elif kind is None:
                kind = args[0].kind if args else None
            if helper in ("_fma", "_fma_scaled"):
                args = [self.convert(a, "f", width) if a.kind != "f" else a for a in args[:3]] + args[3:]
            return Expr(f"{helper}({', '.join(a.code for a in args)})", kind, width)
        if name in _CONST:
            return Expr(_CONST[name], "b" if name in ("WAVE32", "WAVE64", "true", "false") else "i")
        if name in self.arrays and self.peek().text == "[":
            self.next()
            index = self.expr()
            self.expect("]")
            return Expr(f"v_{name}[int({index.code})]", *self.kinds.get(name, (None, None)))
        ref = self.name_ref(name)
        kind, width = self.kinds.get(name, (None, None))
        if name in ("SCC", "VCCZ", "EXECZ"):
            kind, width = "i", 1
        return Expr(ref, kind, width, text=name)

    def call(self, name: str, text: str, args: list[Expr]) -> Expr:
        """A call of another opcode's function (`v_max_num_f32(S0.f32, S1.f32)`): that opcode's own pseudocode,
        compiled as a function of its sources S0, S1, ... (the arguments' bits) that returns its D0, read as
        the type the callee writes it."""
        if name in self.calling:
            raise PcodeError(f"pseudocode: {name}() calls itself")
        callee = _compile(name, text, self.vector, frozenset(), None, self.resolve, self.calling | {name})
        sources = [f"S{i}" for i in range(len(args))]
        params = sorted((callee.read | callee.written) & OPERANDS)
        if "D0" not in callee.written or callee.result is None or set(params) - {"D0", *sources}:
            raise PcodeError(f"pseudocode: {name}() is called with {len(args)} arguments and its pseudocode "
                             f"uses {', '.join(params)}")
        function = f"_op_{name}"
        self.functions.update(callee.functions)
        self.functions[function] = _function_source(function, callee, params, ["D0"])
        bits = {s: self.to_bits(a, a.kind, a.width) for s, a in zip(sources, args)}
        code = f"{function}(ctx, M, LANE, {', '.join('0' if p == 'D0' else bits[p] for p in params)})[0]"
        kind, width, signed = callee.result
        return self.typed(Expr(code, "i", None), kind, width, signed)

    lane_masks: frozenset[str] = frozenset()
    widths: dict[str, int] | None = None
    resolve: Callable[[str], str | None] | None = None  # an opcode's function name -> its pseudocode
    calling: frozenset[str] = frozenset()  # the opcode functions being compiled around this one


_CHAINED = re.compile(r"^(\S+) = (\S+) = (.*)$", re.MULTILINE)


def _substitute_lambdas(text: str) -> str:
    """Expression lambdas (`F = lambda(a, b) (expr);`) are expanded textually at their calls."""
    pattern = re.compile(r"(\w+) = lambda\(([^)]*)\) \(\n?(.*?)\);", re.DOTALL)
    while True:
        m = pattern.search(text)
        if not m:
            return text
        name, params, body = m.group(1), [p.strip() for p in m.group(2).split(",")], m.group(3)
        if re.search(r"\b(if|return|declare|for)\b", body):
            raise PcodeError(f"pseudocode: lambda {name} has statements")
        text = text[:m.start()] + text[m.end():]
        call = re.compile(rf"\b{name}\(")
        while (c := call.search(text)):
            depth, i, args, start = 1, c.end(), [], c.end()
            while depth:
                ch = text[i]
                if ch == "(":
                    depth += 1
                elif ch == ")":
                    depth -= 1
                    if depth == 0:
                        args.append(text[start:i])
                elif ch == "," and depth == 1:
                    args.append(text[start:i])
                    start = i + 1
                i += 1
            expanded = body
            for param, arg in zip(params, args):
                expanded = re.sub(rf"\b{param}\b", f"({arg.strip()})", expanded)
            text = text[:c.start()] + f"({expanded})" + text[i:]


def _compile(name: str, text: str, vector: bool, lane_masks: frozenset[str], widths: dict[str, int] | None,
             resolve: Callable[[str], str | None] | None, calling: frozenset[str]) -> _Compiler:
    text = _CHAINED.sub(r"\2 = \3;\n\1 = \2", _substitute_lambdas(text))
    comp = _Compiler(text, vector)
    comp.lane_masks = lane_masks
    comp.widths = widths or {}
    comp.resolve = resolve
    comp.calling = calling
    try:
        end = comp.block(())
    except (TypeError, ValueError, IndexError, KeyError) as exc:
        raise PcodeError(f"pseudocode of {name}: {exc}") from None
    if end != "":
        raise PcodeError(f"pseudocode of {name}: stray {end!r}")
    return comp


def _function_source(function: str, comp: _Compiler, params: list[str], written: list[str]) -> str:
    # every local exists from the start: a lane-masked branch that did not run leaves it 0, not unbound
    locals_ = sorted(n for n in comp.written - OPERANDS if n not in comp.arrays)
    body = "\n".join([f"    v_{n} = 0" for n in locals_] + comp.lines) or "    pass"
    return (f"def {function}(ctx, M, LANE, {', '.join(params)}):\n{body}\n"
            f"    return ({', '.join(written)}{',' if len(written) == 1 else ''})\n")


def compile_pcode(name: str, text: str, vector: bool, lane_masks: frozenset[str] = frozenset(),
                  widths: dict[str, int] | None = None,
                  resolve: Callable[[str], str | None] | None = None) -> tuple[str, list[str], list[str]]:
    """Python source of `def run(ctx, M, LANE, <operands>) -> (written operands)`, with the operand names it
    takes and the ones it returns, in order. `lane_masks`: operands that are per-lane bit masks in this instruction
    (a VALU write of the whole VCC/D0 sets this lane's bit); `widths`: register bits of the operands (a
    write of all of them needs no merge with the old value); `resolve`: the pseudocode of the opcode a
    lowercase call such as `v_max_num_f32(...)` names, or None where the tables have no such opcode."""
    comp = _compile(name, text, vector, lane_masks, widths, resolve, frozenset({name.lower()}))
    params = sorted((comp.read | comp.written) & OPERANDS)
    written = sorted(comp.written & OPERANDS)
    extent = {name: comp.extent[name] for name in written if name in comp.extent}
    src = f"EXTENT = {extent!r}\n" + "".join(f + "\n" for f in comp.functions.values()) + \
        _function_source("run", comp, params, written)
    return src, params, written
