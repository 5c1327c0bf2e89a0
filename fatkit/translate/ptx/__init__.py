"""The PTX front-end: `parse_ptx(text) -> Module`, `print_ptx(module) -> str`, and the typed AST.

`parse_ptx(print_ptx(m)) == m` for every module (equality ignores source positions).
"""

from fatkit.translate.ptx import ast
from fatkit.translate.ptx.errors import PtxSyntaxError
from fatkit.translate.ptx.opcodes import OPCODES
from fatkit.translate.ptx.parser import parse_ptx
from fatkit.translate.ptx.printer import print_ptx

__all__ = ["OPCODES", "PtxSyntaxError", "ast", "parse_ptx", "print_ptx"]
