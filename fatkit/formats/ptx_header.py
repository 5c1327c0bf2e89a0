"""A fast scan of a PTX module's header and kernel list (docs/formats.md §4); not a parser.

PTX reaches fatkit as `nvcc -ptx` output or in the fatbin form (comments stripped, lines de-indented,
8 leading newlines, a trailing NUL), and can be 60 MB. Every step is one C-level pass over the whole
text (a translate for the character check, one regex substitution for comments, literal-prefixed
regex scans for the directives), never a Python loop over lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fatkit.errors import FormatError
from fatkit.formats.common import Buffer

DEFAULT_ADDRESS_SIZE = 32  # PTX ISA: without `.address_size` addresses are 32-bit

# Bytes PTX text may hold: printable ASCII, whitespace, and UTF-8 (in comments and file names).
_TEXT_BYTES = bytes(range(0x20, 0x7F)) + b"\t\n\v\f\r" + bytes(range(0x80, 0x100))
_COMMENT = re.compile(rb"//[^\n]*|/\*.*?(?:\*/|\Z)", re.S)
_VERSION = re.compile(rb"\.version\s+(\d+)\.(\d+)")
_TARGET = re.compile(rb"\.target\s+(\w+(?:\s*,\s*\w+)*)")
_ADDRESS_SIZE = re.compile(rb"\.address_size\s+(\d+)")
# Kernels: `[.visible|.weak|.extern] .entry <name>(`; the linkage keyword does not change the name.
_ENTRY = re.compile(rb"\.entry\s+([A-Za-z_$%][\w$]*)")
_FUNC = re.compile(rb"\.func\b")


@dataclass(frozen=True)
class PtxHeader:
    version: tuple[int, int] | None  # `.version` major, minor
    target: str | None  # first `.target` operand: "sm_90a", "sm_100f", "compute_80"
    modifiers: tuple[str, ...]  # the other `.target` operands: "debug", "texmode_independent"
    address_size: int  # 32 or 64
    entries: tuple[str, ...]  # `.entry` names in order
    functions: int  # `.func` definitions and declarations

    @property
    def arch(self) -> str | None:
        """The virtual architecture the PTX is for: `sm_90a` → `compute_90a`."""
        if self.target is None:
            return None
        return "compute_" + self.target.split("_", 1)[1] if "_" in self.target else self.target


def parse_ptx_header(text: bytes | str | Buffer) -> PtxHeader:
    """Header directives, kernel names and the `.func` count of a PTX module.

    Missing directives give None (version, target) or the PTX default (address size 32). Bytes that
    cannot be PTX text (control characters, NULs before the trailing ones) raise FormatError.
    """
    data = text.encode("utf-8", "replace") if isinstance(text, str) else bytes(text)
    data = data.rstrip(b"\0")  # the fatbin form ends with a NUL (padding may add more)
    foreign = data.translate(None, _TEXT_BYTES)
    if foreign:
        offset = data.find(foreign[:1])
        raise FormatError(f"not PTX text: byte 0x{foreign[0]:02x} at 0x{offset:x}", offset=offset)
    if b"/" in data:
        data = _COMMENT.sub(b" ", data)

    version = _VERSION.search(data)
    target = _TARGET.search(data)
    address_size = _ADDRESS_SIZE.search(data)
    operands = [op.strip().decode("ascii") for op in target.group(1).split(b",")] if target else []
    return PtxHeader(
        version=(int(version.group(1)), int(version.group(2))) if version else None,
        target=operands[0] if operands else None,
        modifiers=tuple(operands[1:]),
        address_size=int(address_size.group(1)) if address_size else DEFAULT_ADDRESS_SIZE,
        entries=tuple(name.decode("ascii") for name in _ENTRY.findall(data)),
        functions=len(_FUNC.findall(data)),
    )
