"""PTX integer constant expressions (`WARP_SZ*4`, `(1 << 5) - 1`): array sizes, initialisers, operands.

The PTX ISA (section "Constant Expressions") evaluates them as C does, in 64 bits: a literal is .s64 unless
it carries the `U` suffix (.u64); an operation with an unsigned operand is unsigned (comparisons and the
logical operators give a signed 0/1); shifts take the type of their left operand; `/` and `%` truncate
toward zero. `WARP_SZ` is 32. Expressions naming anything else (a variable: `sym+4` is an address) are not
constant here and stay as they are written.
"""

from __future__ import annotations

import re

WARP_SIZE = 32
_MASK = (1 << 64) - 1
_TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|0[bB][01]+|[0-9]+)(U?)|(WARP_SZ)\b|"
                    r"(<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%<>&^|!~()?:]))")
# binary operators by precedence, loosest first (C's)
_LEVELS = (("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", ">", "<=", ">="), ("<<", ">>"),
           ("+", "-"), ("*", "/", "%"))


class _NotConstant(Exception):
    pass


def _signed(value: int) -> int:
    value &= _MASK
    return value - (1 << 64) if value >> 63 else value


def _value(value: int, unsigned: bool) -> tuple[int, bool]:
    return (value & _MASK if unsigned else _signed(value)), unsigned


def _literal(digits: str) -> int:
    if digits[:2] in ("0x", "0X"):
        return int(digits[2:], 16)
    if digits[:2] in ("0b", "0B"):
        return int(digits[2:], 2)
    if len(digits) > 1 and digits[0] == "0":
        return int(digits, 8)
    return int(digits)


class _Parser:
    def __init__(self, text: str):
        self.tokens: list[tuple[str, object]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                if text[pos:].strip():
                    raise _NotConstant
                break
            number, unsigned, warp, op = m.groups()
            if number is not None:
                self.tokens.append(("int", _value(_literal(number), bool(unsigned))))
            elif warp is not None:
                self.tokens.append(("int", (WARP_SIZE, False)))
            else:
                self.tokens.append(("op", op))
            pos = m.end()
        self.at = 0

    def peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) and self.tokens[self.at][0] == "op" \
            else None

    def take(self, op: str) -> None:
        if self.peek() != op:
            raise _NotConstant
        self.at += 1

    def expression(self) -> tuple[int, bool]:
        condition = self.binary(0)
        if self.peek() != "?":
            return condition
        self.at += 1
        if_true = self.expression()
        self.take(":")
        if_false = self.expression()
        unsigned = if_true[1] or if_false[1]
        return _value(if_true[0] if condition[0] else if_false[0], unsigned)

    def binary(self, level: int) -> tuple[int, bool]:
        if level == len(_LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in _LEVELS[level]:
            op = self.peek()
            self.at += 1
            left = _apply(op, left, self.binary(level + 1))
        return left

    def unary(self) -> tuple[int, bool]:
        op = self.peek()
        if op in ("-", "+", "~", "!"):
            self.at += 1
            value, unsigned = self.unary()
            if op == "-":
                return _value(-value, unsigned)
            if op == "~":
                return _value(~value, unsigned)
            if op == "!":
                return int(value == 0), False
            return value, unsigned
        if op == "(":
            self.at += 1
            inner = self.expression()
            self.take(")")
            return inner
        if self.at < len(self.tokens) and self.tokens[self.at][0] == "int":
            self.at += 1
            return self.tokens[self.at - 1][1]
        raise _NotConstant


def _apply(op: str, left: tuple[int, bool], right: tuple[int, bool]) -> tuple[int, bool]:
    (a, a_unsigned), (b, b_unsigned) = left, right
    if op in ("<<", ">>"):  # the left operand's type; a shift of 64 or more clears (or fills with the sign)
        count = b & _MASK
        if op == "<<":
            return _value(a << count if count < 64 else 0, a_unsigned)
        return _value(a >> min(count, 64), a_unsigned)
    if op in ("&&", "||"):
        return int(bool(a) and bool(b)) if op == "&&" else int(bool(a) or bool(b)), False
    unsigned = a_unsigned or b_unsigned
    a, b = _value(a, unsigned)[0], _value(b, unsigned)[0]
    if op in ("==", "!=", "<", ">", "<=", ">="):
        result = {"==": a == b, "!=": a != b, "<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]
        return int(result), False
    if op in ("/", "%"):
        if b == 0:
            raise _NotConstant  # undefined in C; left for lowering to refuse
        quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        return _value(quotient if op == "/" else a - quotient * b, unsigned)
    results = {"+": a + b, "-": a - b, "*": a * b, "&": a & b, "^": a ^ b, "|": a | b}
    return _value(results[op], unsigned)


def evaluate(text: str) -> tuple[int, bool] | None:
    """The value of an integer constant expression and whether it is unsigned (.u64); None when `text` is
    not one (it names a symbol, holds a float, or divides by zero)."""
    try:
        parser = _Parser(text)
        if not parser.tokens:
            return None
        value = parser.expression()
    except (_NotConstant, IndexError, ValueError):
        return None
    return value if parser.at == len(parser.tokens) else None
