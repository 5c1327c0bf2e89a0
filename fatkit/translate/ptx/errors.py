"""The one error the PTX front-end raises: text that is not PTX, located to line and column."""

from __future__ import annotations

from fatkit.errors import FatkitError


class PtxSyntaxError(FatkitError):
    """Malformed PTX: names the source, the 1-based line and column, and the offending text."""

    def __init__(self, message: str, *, source: str, line: int, column: int, text: str):
        super().__init__(message, path=source)
        self.source = source
        self.line = line
        self.column = column
        self.text = text

    def __str__(self) -> str:
        return f"{self.source}:{self.line}:{self.column}: {self.message}: {self.text!r}"
