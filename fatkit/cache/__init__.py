"""The content-addressed cache of translated PTX that a runtime shim loads instead of JIT-compiling.

`lookup(image, target)` is the shim's side (docs/cache.md is its contract); `precompile` fills the cache;
`Cache` is the store (one SQLite file per cache directory).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from fatkit.cache.key import (TRANSLATOR_ABI, CacheKey, compatible_targets, key_of, linked_ptx_hash, linked_ptx_texts,
                              make_key, normalize_target, ptx_hash, ptx_texts)
from fatkit.cache.store import DB_NAME, Cache, CacheEntry, CacheError
from fatkit.translate.pipeline import Options
from fatkit.translate.targets.ids import TargetId


def default_cache_dir() -> Path:
    """$FATKIT_CACHE_DIR, else $XDG_CACHE_HOME/fatkit, else ~/.cache/fatkit."""
    explicit = os.environ.get("FATKIT_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "fatkit"


def find(cache: Cache, image: bytes, target: str, options: Options | None = None) -> CacheEntry | None:
    """The code object for what `cuModuleLoadData(image)` was given, on a device whose target id is `target`.

    Each PTX text of the image is tried newest arch first, and for each the target ids a code object may carry
    to load on the device, most specific first; the first intact entry holding a code object wins.
    """
    device = TargetId.parse_amd(target)
    options = options or Options(target=device.bare)
    for text in ptx_texts(image):
        for candidate in device.compatible():
            entry = cache.get(make_key(text, replace(options, target=candidate)))
            if entry is not None and entry.code_object is not None:
                return entry
    return None


def find_linked(cache: Cache, images: list[bytes], target: str, options: Options | None = None) -> CacheEntry | None:
    """The code object of `-rdc` units linked into one: `images` are the fatbins of one device link's units
    (a version-2 wrapper's prelinked list, or what `cuLinkAddData` was given). Each compute capability all
    of them carry PTX for is tried newest first, under `linked_ptx_hash`; None where precompile linked
    nothing (units that define nothing for each other): then each unit's own entry (`find`) serves."""
    device = TargetId.parse_amd(target)
    options = options or Options(target=device.bare)
    for texts in linked_ptx_texts(images):
        digest = linked_ptx_hash(texts)
        for candidate in device.compatible():
            entry = cache.get(key_of(digest, replace(options, target=candidate)))
            if entry is not None and entry.code_object is not None:
                return entry
    return None


def lookup(image: bytes, target: str, cache_dir: str | Path | None = None,
           options: Options | None = None) -> CacheEntry | None:
    """`find` in the cache at `cache_dir` (default: `default_cache_dir()`); None when there is no cache there.

    Opened read-only when the directory is not writable (last-use times are then not refreshed)."""
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if not (directory / DB_NAME).exists():
        return None
    with Cache(directory, read_only=not os.access(directory, os.W_OK)) as cache:
        return find(cache, image, target, options)


__all__ = ["TRANSLATOR_ABI", "Cache", "CacheEntry", "CacheError", "CacheKey", "compatible_targets",
           "default_cache_dir", "find", "find_linked", "linked_ptx_hash", "linked_ptx_texts", "lookup", "make_key",
           "normalize_target", "ptx_hash", "ptx_texts"]
