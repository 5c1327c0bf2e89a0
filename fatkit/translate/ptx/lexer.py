"""Regular expressions that cut PTX text into statements and statements into parts.

PTX modules reach tens of megabytes, so nothing here walks characters in Python: comments go in one
substitution, and one master expression (`STATEMENT`, used with `finditer` over the whole text) yields
one match per statement — `{`, `}`, a label, a function header, an instruction with its guard,
opcode, modifier chain and operand text already captured, or a directive. Every part of the grammar
that can repeat is written as an "unrolled loop" (`a*(?:b a*)*`) so that no input makes the engine
backtrack more than linearly.
"""

from __future__ import annotations

import re

from fatkit.translate.ptx.errors import PtxSyntaxError

IDENT = r"[A-Za-z_$%][\w$]*"
# An instruction modifier: `.u32`, `.1d`, `.shared::cta`, `.mbarrier::complete_tx::bytes`.
MODIFIER = r"\.\w+(?:::\w+)*"


def _braced(depth: int) -> str:
    """`{…}` with up to `depth` levels of nested braces (vector operands, aggregate initializers)."""
    inner = r"\{[^{}]*\}"
    for _ in range(depth - 1):
        inner = r"\{[^{}]*(?:" + inner + r"[^{}]*)*\}"
    return inner


BRACED = _braced(4)
_STRING = r'"[^"\n]*"'
# Text up to a `;` that may hold braced groups and strings but no bare `{ } ;`.
_BODY = r'[^;{}"]*(?:(?:' + BRACED + "|" + _STRING + r')[^;{}"]*)*'
_GUARD = r"@[ \t]*!?[ \t]*" + IDENT
_LINKAGE = r"(?:\.(?:visible|extern|weak|common)\s+)*"

STATEMENT = re.compile(
    r"\s*(?:"
    r"(?P<instruction>(?:(" + _GUARD + r")\s+)?([a-z][\w.]*(?:::[\w.]+)*)(?![\w.:$]|\s*:)\s*(?!\s)(" + _BODY + r");)"
    r"|(?P<loc>\.loc[ \t]+(\d+)[ \t]+(\d+)[ \t]+(\d+)"
    r"(?:[ \t]*,[ \t]*function_name[ \t]+([\w$.]+))?"
    r"(?:[ \t]*,[ \t]*inlined_at[ \t]+(\d+)[ \t]+(\d+)[ \t]+(\d+))?[ \t]*;?)"
    r"|(?P<label>(" + IDENT + r"))\s*:(?!:)"
    r"|(?P<open>\{)"
    r"|(?P<close>\})"
    r"|(?P<line>\.(?:version|target|address_size|file)\b(?:[^\n;\"]|" + _STRING + r")*;?)"
    r"|(?P<section>\.section[ \t]+([^\s{;]+)\s*\{([^{}]*)\})"
    r"|(?P<header>" + _LINKAGE + r"\.(?:entry|func)\b[^;{}]*[;{])"
    r"|(?P<directive>\." + _BODY + r";)"
    r"|(?P<bad>\S[^\n]*)"
    r")"
)
# Group numbers: each kind of statement, and the captures inside it.
GROUP = STATEMENT.groupindex
INSTRUCTION = GROUP["instruction"]
I_GUARD, I_CHAIN, I_OPERANDS = INSTRUCTION + 1, INSTRUCTION + 2, INSTRUCTION + 3
LOC = GROUP["loc"]
LABEL = GROUP["label"]
HEADER = GROUP["header"]
L_NAME = LABEL + 1
S_NAME, S_BODY = GROUP["section"] + 1, GROUP["section"] + 2
# The master expression takes any run of word characters, dots and `::` as the opcode chain (simpler for
# the engine); each distinct chain is checked once against the real grammar.
CHAIN = re.compile(r"[a-z][a-z0-9_]*(?:" + MODIFIER + r")*\Z")
GUARD = re.compile(r"@[ \t]*(!?)[ \t]*(" + IDENT + r")\Z")

# Operand text → operand texts, when commas may sit inside `{}`, `[]` or `()`.
BRACKET_COMMA = re.compile(r"\[[^\]]*,")
_PIECE = (
    r"[^,{}\[\]()]*(?:(?:"
    + BRACED
    + r"|\[[^\[\]{}]*(?:"
    + BRACED
    + r"[^\[\]{}]*)*\]|\([^()]*(?:\([^()]*\)[^()]*)*\))[^,{}\[\]()]*)*"
)
PIECE = re.compile(r"\s*(" + _PIECE + r")\s*(,|\Z)")

# `.x`…`.w` (`.r`…`.a`): a vector element; `.b0`–`.b7`/`.h0`–`.h3` and their runs (`.h10`, `.b3210`): the
# byte/half-word selectors and masks of the video instructions.
NAME = re.compile(r"(" + IDENT + r")(?:\.([xyzwrgba]|b[0-7]{1,4}|h[0-3]{1,2}))?\Z")
INTEGER = re.compile(r"(-)?(?:0[xX]([0-9a-fA-F]+)|0[bB]([01]+)|0([0-7]+)|([1-9][0-9]*|0))(U)?\Z")
HEX_FLOAT = re.compile(r"(-)?0([fF][0-9a-fA-F]{8}|[dD][0-9a-fA-F]{16})\Z")
DECIMAL_FLOAT = re.compile(r"-?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\Z|-?[0-9]+[eE][-+]?[0-9]+\Z")
_OFFSET = r"(?:0[xX][0-9a-fA-F]+|[0-9]+)"
ADDRESS = re.compile(
    r"\s*(?:(" + IDENT + r")(?:\.([xyzw]))?)?\s*(?:([-+])\s*(-)?\s*(" + _OFFSET + r")|(-)?(" + _OFFSET + r"))?U?\s*\Z"
)
PAIR = re.compile(r"(" + IDENT + r")\s*\|\s*(" + IDENT + r")\Z")
SYMBOL_REF = re.compile(
    r"(?:generic\s*\(\s*(" + IDENT + r")\s*\)|(" + IDENT + r"))\s*(?:([-+])\s*(" + _OFFSET + r"))?\Z"
)
# Constant expressions: atoms and C operators, checked so that two atoms never stand side by side.
_NUMBER = (
    r"0[xX][0-9a-fA-F]+U?|0[bB][01]+U?|0[fF][0-9a-fA-F]{8}|0[dD][0-9a-fA-F]{16}"
    r"|[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?|[0-9]+U?"
)
EXPR_TOKEN = re.compile(
    r"\s*(?:(" + IDENT + r"|\.[A-Za-z_][\w.$]*|(?:" + _NUMBER + r")(?![\w.]))"
    r"|(<<|>>|&&|\|\||[<>=!]=|[-+*/%&|^~!<>?:()]))"
)

# Declarations: qualifiers one at a time, then the declared names.
DECL_QUALIFIER = re.compile(r"\s*\.(?:(attribute)\s*\(((?:[^()]|\([^()]*\))*)\)|(align)\s+(\w+)|(\w+))")
DECLARATOR = re.compile(r"\s*(" + IDENT + r")\s*(?:<\s*(\d+)\s*>)?((?:\s*\[[^\]]*\])*)\s*(?:=\s*(.*))?\Z", re.S)
SAMPLER_FIELD = re.compile(r"\s*(\w+)\s*=\s*([\w.]+)\s*\Z")
ARRAY_DIM = re.compile(r"\[\s*([^\]]*?)\s*\]")
DECLARATORS = re.compile(r"\s*((?:[^,{}]|" + BRACED + r")+)\s*(,|\Z)")

HEADER_MATCH = re.compile(
    r"((?:\.(?:visible|extern|weak|common)\s+)*)\.(entry|func)\s*(?:\(([^()]*)\)\s*)?(" + IDENT + r")?\s*"
    r"(?:\(([^()]*)\))?(.*?)([;{])\Z",
    re.S,
)
HEADER_DIRECTIVE = re.compile(r"\s*\.(\w+)((?:\s*,?\s*(?:0[xX][0-9a-fA-F]+|[0-9]+)\b)*)")
CALLPROTOTYPE = re.compile(
    r"\.callprototype\s*(?:\(([^()]*)\)\s*)?_\s*(?:\(([^()]*)\))?\s*(\.noreturn)?\s*;\Z"
)
TARGET_LIST = re.compile(r"\.(branchtargets|calltargets)\s+(" + IDENT + r"(?:\s*,\s*" + IDENT + r")*)\s*;\Z")
VERSION = re.compile(r"\.version\s+(\d+)\.(\d+)\s*;?\Z")
TARGET = re.compile(r"\.target\s+(\w+(?:\s*,\s*\w+)*)\s*;?\Z")
ADDRESS_SIZE = re.compile(r"\.address_size\s+(\d+)\s*;?\Z")
FILE = re.compile(r'\.file\s+(\d+)\s+"([^"\n]*)"(?:\s*,\s*(\d+)\s*,\s*(\d+))?\s*;?\Z')
PRAGMA = re.compile(r'\.pragma\s+("[^"\n]*"(?:\s*,\s*"[^"\n]*")*)\s*;\Z')
STRING = re.compile(r'"([^"\n]*)"')
ALIAS = re.compile(r"\.alias\s+(" + IDENT + r")\s*,\s*(" + IDENT + r")\s*;\Z")
DIRECTIVE_NAME = re.compile(r"\.(\w+)")
SECTION_LINE = re.compile(
    r"\s*(?:([\w$.]+)\s*:(?!:)|\.(b8|b16|b32|b64)[ \t]+([^\n;]*?)[ \t]*;?[ \t]*(?=\n|\Z)|(\S[^\n]*))"
)
SECTION_NAME = re.compile(r"\.[A-Za-z_][\w.$]*\Z")

_COMMENT = re.compile(r'"[^"\n]*"|//[^\n]*|/\*(?:[^*]|\*(?!/))*\*/|/\*')
_NOT_NEWLINE = re.compile(r"[^\n]")


def locate(text: str, pos: int, known: int = 0, line: int = 1, line_start: int = 0) -> tuple[int, int]:
    """1-based (line, column) of offset `pos` in `text`, counting from offset `known` (>= `line_start`),
    which lies on `line`, whose first character is at `line_start`."""
    newlines = text.count("\n", known, pos)
    if newlines:
        line += newlines
        line_start = text.rfind("\n", known, pos) + 1
    return line, pos - line_start + 1


def strip_comments(text: str, source: str) -> str:
    """`text` with every comment replaced by blanks, so lines and columns stay where they were."""
    if "//" not in text and "/*" not in text:
        return text

    def blank(m: re.Match) -> str:
        found = m.group()
        if found[0] == '"':
            return found
        if found[1] == "/":
            return ""
        if found == "/*":
            line, column = locate(text, m.start())
            raise PtxSyntaxError("unterminated comment", source=source, line=line, column=column, text="/*")
        return _NOT_NEWLINE.sub(" ", found)

    return _COMMENT.sub(blank, text)
