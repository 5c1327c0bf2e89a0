"""What a cache entry is keyed by, and how a shim computes the same key from the bytes it is given.

A key is (BLAKE3 hex of the PTX text, target id, translator ABI version, options). The PTX text is the
bytes as stored in the fatbin entry, decompressed, trailing NULs stripped (the hash ZLUDA's cache uses);
`cuModuleLoadData` given raw PTX sees a NUL-terminated string, whose bytes before the NUL are the same text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import blake3

from fatkit.errors import FatkitError, FormatError, UsageError
from fatkit.formats.fatbin import FATBIN_MAGIC, KIND_PTX, entry_payload, find_containers, parse_container
from fatkit.formats.hsaco import split_target_id
from fatkit.translate.pipeline import Options

# Bump when what the translator produces for the same PTX changes in a way a shim can observe: kernel
# argument layout, code object version, wave size, names, or fixed miscompilations. Entries of another
# ABI version are never served (they stay until evicted).
TRANSLATOR_ABI = 2  # 2: runtime-service globals (docs/runtime.md), [5/8] instruction families

# Features a target id may set, as LLVM names them; they are written in this (alphabetical) order.
TARGET_FEATURES = ("sramecc", "xnack")
_PROCESSOR = re.compile(r"gfx[0-9a-f]+")
_FATBIN_MAGIC = FATBIN_MAGIC.to_bytes(4, "little")


@dataclass(frozen=True)
class CacheKey:
    ptx_blake3: str  # 64 hex digits
    target: str  # normalised target id: "gfx942", "gfx942:sramecc+:xnack-"
    abi: int
    options: str  # canonical spelling of the code-changing options, "O2"

    def __str__(self) -> str:
        return f"{self.ptx_blake3[:16]}…/{self.target}/abi{self.abi}/{self.options}"


def ptx_hash(ptx: bytes | str) -> str:
    """BLAKE3 hex of PTX text with its trailing NULs stripped."""
    data = ptx.encode("utf-8") if isinstance(ptx, str) else bytes(ptx)
    return blake3.blake3(data.rstrip(b"\0")).hexdigest()


def normalize_target(text: str) -> str:
    """The canonical target id: processor, then the features set on or off in alphabetical order.

    `gfx942` (no features: code that runs with either setting) and `gfx942:sramecc+:xnack-` are different
    ids; the `amdgcn-amd-amdhsa--` prefix is dropped; unknown, repeated or contradicting features are errors.
    """
    try:
        processor, settings = split_target_id(text.strip())
    except FormatError as exc:
        raise UsageError(str(exc)) from None
    if not _PROCESSOR.fullmatch(processor):
        raise UsageError(f"target {text!r}: {processor!r} is not an AMD processor like gfx942 or gfx1100")
    features = text.split(":")[1:]
    if len(features) != len(settings):
        raise UsageError(f"target {text!r} sets a feature twice")
    unknown = sorted(set(settings) - set(TARGET_FEATURES))
    if unknown:
        raise UsageError(f"target {text!r}: unknown feature(s) {', '.join(unknown)} "
                         f"(known: {', '.join(TARGET_FEATURES)})")
    return processor + "".join(f":{name}{settings[name]}" for name in TARGET_FEATURES if name in settings)


def compatible_targets(device: str) -> list[str]:
    """Target ids whose code objects load on `device`, most specific first.

    A feature a code object leaves unset works with either setting, so a device reporting
    `gfx942:sramecc+:xnack-` can use entries for that id, for `gfx942:sramecc+`, `gfx942:xnack-` and `gfx942`.
    A bare `gfx942` (settings unknown) matches only entries for `gfx942`.
    """
    target = normalize_target(device)
    processor, *features = target.split(":")
    ids = []
    for mask in range((1 << len(features)) - 1, -1, -1):  # all features kept first, none last
        kept = [f for i, f in enumerate(features) if mask & (1 << i)]
        ids.append(":".join([processor, *kept]))
    return sorted(ids, key=lambda t: -t.count(":"))


@lru_cache(maxsize=None)
def translator_fingerprint() -> str:
    """BLAKE3 of the translator's sources (fatkit/translate/**/*.py): which build made an entry.

    Not part of the key (a shim cannot know it); precompile re-translates entries another build made, so
    a changed translator refreshes the cache without an ABI bump."""
    import fatkit.translate

    root = Path(fatkit.translate.__file__).parent
    digest = blake3.blake3()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def options_key(options: Options) -> str:
    """The options that change code, spelled canonically (the target is a key field of its own)."""
    return f"O{options.opt_level}"


_LINKED_DOMAIN = b"fatkit -rdc link\0"


def linked_ptx_hash(texts: Iterable[bytes | str]) -> str:
    """The `ptx_blake3` of `-rdc` units linked into one (docs/cache.md): BLAKE3 of `fatkit -rdc link` and a
    NUL, then each unit's `ptx_hash` (64 hex digits) and a newline, the digests sorted, so that the order
    in which units are registered does not matter. One unit is its own `ptx_hash`."""
    digests = sorted(ptx_hash(text) for text in texts)
    if len(digests) == 1:
        return digests[0]
    return blake3.blake3(_LINKED_DOMAIN + b"".join(d.encode() + b"\n" for d in digests)).hexdigest()


def make_key(ptx: bytes | str, target: str, options: Options | None = None) -> CacheKey:
    options = options or Options(target=target.split(":")[0])
    return CacheKey(ptx_hash(ptx), normalize_target(target), TRANSLATOR_ABI, options_key(options))


def ptx_texts(image: bytes) -> list[bytes]:
    """The PTX texts a shim would hash for the image given to `cuModuleLoadData`, newest arch first.

    A fatbin (magic 0xBA55ED50): every PTX entry of every container in it, decompressed, trailing NULs
    stripped, ordered by compute capability, highest first. An ELF (a cubin) holds no PTX: []. Anything else
    is a NUL-terminated PTX string: the bytes before the first NUL.
    """
    return [text for _, text in _ptx_texts_by_sm(image)]


def linked_ptx_texts(images: Iterable[bytes]) -> list[list[bytes]]:
    """For the fatbins of the units of one `-rdc` device link (what a version-2 wrapper's prelinked list
    holds), one list per compute capability every unit has PTX for, newest first: that capability's text of
    each unit, in the images' order, to be hashed with `linked_ptx_hash`."""
    per_unit = [dict(reversed(_ptx_texts_by_sm(image))) for image in images]  # the first text of an sm wins
    shared = set.intersection(*(set(unit) for unit in per_unit)) if per_unit else set()
    return [[unit[sm] for unit in per_unit] for sm in sorted(shared, reverse=True)]


def _ptx_texts_by_sm(image: bytes) -> list[tuple[int, bytes]]:
    data = bytes(image)
    if data.startswith(_FATBIN_MAGIC):
        found = []
        for offset in find_containers(data):
            container = parse_container(data, offset)
            found += [(entry.sm, entry_payload(data, entry)) for entry in container.entries if entry.kind == KIND_PTX]
        return sorted(found, key=lambda pair: -pair[0])
    if data.startswith(b"\x7fELF"):
        return []
    text = data.split(b"\0", 1)[0]
    if not text.strip():
        raise FatkitError("the image holds neither a fatbin nor PTX text")
    return [(0, text)]
