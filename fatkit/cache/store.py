"""The cache store: one SQLite database file, `fatkit-cache.sqlite3`, in the cache directory.

Why SQLite rather than files and an index: a transaction makes each write atomic (a writer killed at any
point leaves the previous state), SQLite's locks serialise concurrent writer processes, WAL mode lets
lookups proceed while a writer commits, the LRU order and total size are one indexed query, and a closed
cache is a single self-contained file that can be copied anywhere (no absolute paths are stored). ZLUDA's own
cache is SQLite too, so a shim that reads it already links SQLite.

Every row carries a BLAKE3 checksum of its manifest and code object, verified on every read: a row that
does not match is reported and treated as absent, never returned.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import blake3

from fatkit.cache.key import TRANSLATOR_ABI, CacheKey, is_current_scheme, options_scheme
from fatkit.errors import FatkitError

DB_NAME = "fatkit-cache.sqlite3"
SCHEMA_VERSION = 1
DEFAULT_MAX_SIZE = 10 * 1000**3  # bytes of code objects and manifests
TOUCH_AFTER_MS = 60_000  # last_access is refreshed at most once a minute: most lookups stay read-only
_BUSY_TIMEOUT_MS = 60_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    ptx_blake3 TEXT NOT NULL,
    target TEXT NOT NULL,
    abi INTEGER NOT NULL,
    options TEXT NOT NULL,
    code_object BLOB,
    manifest TEXT NOT NULL,
    checksum TEXT NOT NULL,
    size INTEGER NOT NULL,
    created INTEGER NOT NULL,
    last_access INTEGER NOT NULL,
    PRIMARY KEY (ptx_blake3, target, abi, options)
);
CREATE INDEX IF NOT EXISTS entries_lru ON entries (last_access);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class CacheError(FatkitError):
    """The cache cannot be opened, read or written (path says which database)."""


@dataclass(frozen=True)
class CacheEntry:
    key: CacheKey
    code_object: bytes | None  # None: the module was translated and no kernel of it could be lowered
    manifest: dict[str, Any]
    size: int
    last_access: int  # ms since the epoch

    @property
    def kernels(self) -> list[dict[str, Any]]:
        return self.manifest.get("kernels", [])


@dataclass
class Problem:
    """A row that failed its checksum or did not decode: ignored, reported."""

    key: CacheKey
    reason: str


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def checksum(manifest: str, code_object: bytes | None) -> str:
    """BLAKE3 hex of the manifest's UTF-8 bytes, one NUL, and the code object (nothing when NULL)."""
    return blake3.blake3(manifest.encode("utf-8") + b"\0" + (code_object or b"")).hexdigest()


@dataclass
class Cache:
    """An open cache directory. `problems` collects the corrupt rows met so far."""

    directory: Path
    read_only: bool = False
    problems: list[Problem] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)
        self.path = self.directory / DB_NAME
        self._db = self._connect()

    # --- opening ------------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self.read_only:
            return self._connect_read_only()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            if not os.access(self.directory, os.W_OK):
                raise PermissionError(13, "the directory is not writable")
            db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            db.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: a killed process loses nothing committed
            if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
                with _transaction(db):
                    for statement in filter(str.strip, _SCHEMA.split(";")):
                        db.execute(statement)
                    db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        except (OSError, sqlite3.Error) as exc:
            raise self._error("cannot open the cache for writing", exc) from None
        self._check_schema(db)
        return db

    def _connect_read_only(self) -> sqlite3.Connection:
        if not self.path.exists():
            raise CacheError(f"no cache here ({DB_NAME} missing)", path=str(self.directory))
        uri = self.path.resolve().as_uri()
        # In a directory nobody can write, no writer can exist either, and WAL's shared-memory file cannot be
        # created: open the database as immutable.
        suffix = "?mode=ro" if os.access(self.directory, os.W_OK) else "?immutable=1"
        try:
            db = sqlite3.connect(uri + suffix, uri=True, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            db.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        except sqlite3.Error as exc:
            raise self._error("cannot open the cache", exc) from None
        self._check_schema(db)
        return db

    def _check_schema(self, db: sqlite3.Connection) -> None:
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        except sqlite3.Error as exc:
            raise self._error("cannot read the cache", exc) from None
        if row is None or int(row[0]) != SCHEMA_VERSION:
            raise CacheError(f"cache schema {row and row[0]} is not {SCHEMA_VERSION} (made by another fatkit)",
                             path=str(self.path))

    def _error(self, what: str, exc: BaseException) -> CacheError:
        detail = getattr(exc, "strerror", None) or str(exc)
        if isinstance(exc, sqlite3.DatabaseError) and ("malformed" in detail or "not a database" in detail):
            detail += "; move the file aside (or delete it) and run precompile again"
        return CacheError(f"{what}: {detail}", path=str(self.path))

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Cache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- reading --------------------------------------------------------------------------------------

    def get(self, key: CacheKey, *, touch: bool = True) -> CacheEntry | None:
        """The entry for `key` if present and intact; a corrupt row is added to `problems` and not returned."""
        try:
            row = self._db.execute(
                "SELECT code_object, manifest, checksum, size, last_access FROM entries "
                "WHERE ptx_blake3 = ? AND target = ? AND abi = ? AND options = ?",
                (key.ptx_blake3, key.target, key.abi, key.options)).fetchone()
        except sqlite3.Error as exc:
            raise self._error("cannot read the cache", exc) from None
        if row is None:
            return None
        entry = self._verified(key, *row)
        if entry is not None and touch and not self.read_only and now_ms() - entry.last_access > TOUCH_AFTER_MS:
            self._touch(key)
        return entry

    def _verified(self, key: CacheKey, code_object: bytes | None, manifest: str, stored: str, size: int,
                  last_access: int) -> CacheEntry | None:
        if not isinstance(manifest, str) or checksum(manifest, code_object) != stored:
            self.problems.append(Problem(key, "checksum mismatch: the row's contents changed after it was written"))
            return None
        try:
            decoded = json.loads(manifest)
        except ValueError as exc:
            self.problems.append(Problem(key, f"manifest is not JSON: {exc}"))
            return None
        return CacheEntry(key, code_object, decoded, size, last_access)

    def _touch(self, key: CacheKey) -> None:
        try:
            self._db.execute("UPDATE entries SET last_access = ? WHERE ptx_blake3 = ? AND target = ? AND abi = ? "
                             "AND options = ?", (now_ms(), key.ptx_blake3, key.target, key.abi, key.options))
        except sqlite3.OperationalError:
            pass  # a read-only file or a busy writer: the LRU order is a hint, the lookup still succeeds

    def entries(self, *, verify: bool = True) -> Iterator[CacheEntry]:
        """Every row, least recently used first; with `verify` corrupt rows go to `problems` instead."""
        try:
            rows = self._db.execute(
                "SELECT ptx_blake3, target, abi, options, code_object, manifest, checksum, size, last_access "
                "FROM entries ORDER BY last_access").fetchall()
        except sqlite3.Error as exc:
            raise self._error("cannot read the cache", exc) from None
        for ptx, target, abi, options, code_object, manifest, stored, size, last_access in rows:
            key = CacheKey(ptx, target, abi, options)
            if verify:
                entry = self._verified(key, code_object, manifest, stored, size, last_access)
                if entry is not None:
                    yield entry
            else:
                yield CacheEntry(key, code_object, {}, size, last_access)

    def total_size(self) -> int:
        return self._db.execute("SELECT COALESCE(SUM(size), 0) FROM entries").fetchone()[0]

    def max_size(self) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'max_size'").fetchone()
        return int(row[0]) if row else DEFAULT_MAX_SIZE

    def integrity(self) -> list[str]:
        """SQLite's own page-level check: [] when the database file is sound."""
        try:
            result = [r[0] for r in self._db.execute("PRAGMA integrity_check").fetchall()]
        except sqlite3.DatabaseError as exc:
            return [str(exc)]
        return [] if result == ["ok"] else result

    # --- writing --------------------------------------------------------------------------------------

    def put(self, key: CacheKey, code_object: bytes | None, manifest: dict[str, Any]) -> None:
        """Store (or replace) one entry, then evict least recently used entries beyond the size limit.

        One transaction: a failure (disk full, killed process) leaves the cache as it was."""
        self._writable()
        text = json.dumps(manifest, sort_keys=True, separators=(",", ":"))
        size = len(text.encode("utf-8")) + len(code_object or b"")
        stamp = now_ms()
        try:
            with _transaction(self._db):
                self._db.execute(
                    "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (key.ptx_blake3, key.target, key.abi, key.options, code_object, text,
                     checksum(text, code_object), size, stamp, stamp))
                self._evict(self.max_size())
        except sqlite3.Error as exc:
            raise self._error(f"cannot store {key}; nothing was stored", exc) from None

    def set_max_size(self, limit: int) -> list[CacheKey]:
        self._writable()
        try:
            with _transaction(self._db):
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('max_size', ?)", (str(limit),))
                return self._evict(limit)
        except sqlite3.Error as exc:
            raise self._error("cannot change the size limit", exc) from None

    def gc(self) -> tuple[list[CacheKey], list[CacheKey]]:
        """Delete corrupt rows and stale ones (another translator ABI version, or an options column in another
        key scheme: `options_scheme`), then evict to the size limit. Neither kind is ever served.

        Returns (removed as corrupt or stale, evicted)."""
        self._writable()
        self.problems.clear()
        list(self.entries())
        removed = [p.key for p in self.problems]
        corrupt, scheme = set(removed), options_scheme()
        removed += [e.key for e in self.entries(verify=False) if e.key not in corrupt and (
            e.key.abi != TRANSLATOR_ABI or not is_current_scheme(e.key.options, scheme))]
        try:
            with _transaction(self._db):
                for key in removed:
                    self._delete(key)
                evicted = self._evict(self.max_size())
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            raise self._error("cannot collect garbage", exc) from None
        return removed, evicted

    def _evict(self, limit: int) -> list[CacheKey]:
        """Inside a transaction: delete least recently used rows until the total size fits `limit`."""
        excess = self.total_size() - limit
        evicted: list[CacheKey] = []
        if excess <= 0:
            return evicted
        for ptx, target, abi, options, size in self._db.execute(
                "SELECT ptx_blake3, target, abi, options, size FROM entries ORDER BY last_access, created"
        ).fetchall():
            if excess <= 0:
                break
            key = CacheKey(ptx, target, abi, options)
            self._delete(key)
            evicted.append(key)
            excess -= size
        return evicted

    def _delete(self, key: CacheKey) -> None:
        self._db.execute("DELETE FROM entries WHERE ptx_blake3 = ? AND target = ? AND abi = ? AND options = ?",
                         (key.ptx_blake3, key.target, key.abi, key.options))

    def _writable(self) -> None:
        if self.read_only:
            raise CacheError("the cache was opened read-only", path=str(self.path))


class _transaction:
    """BEGIN IMMEDIATE … COMMIT, or ROLLBACK on any exception: writers queue on SQLite's lock, never interleave."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.db.execute("COMMIT")
        elif self.db.in_transaction:
            self.db.execute("ROLLBACK")
