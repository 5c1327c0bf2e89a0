"""Every user-facing failure is a FatkitError naming what went wrong and where."""

from __future__ import annotations


class FatkitError(Exception):
    """Base class. `path` is the file (or `wheel!member`), `offset` a byte offset inside it."""

    def __init__(self, message: str, *, path: str | None = None, offset: int | None = None):
        super().__init__(message)
        self.message = message
        self.path = path
        self.offset = offset

    def located(self, path: str | None = None, base: int = 0) -> "FatkitError":
        """Fill in the file and shift the offset by `base` (formats report offsets in their buffer)."""
        if self.path is None and path is not None:
            self.path = path
        if self.offset is not None:
            self.offset += base
        return self

    def __str__(self) -> str:
        where = []
        if self.path is not None:
            where.append(str(self.path))
        if self.offset is not None:
            where.append(f"offset 0x{self.offset:x}")
        return ": ".join(where + [self.message])


class FormatError(FatkitError):
    """Bytes that do not follow the format they claim to be (truncated, corrupt, hostile)."""


class LimitError(FormatError):
    """A size read from a header exceeds what fatkit agrees to allocate or decompress."""


class InputError(FatkitError):
    """An input that cannot be read at all (missing file, permission, unknown kind)."""


class UsageError(FatkitError):
    """Options that contradict each other or name something that does not exist."""
