"""What a cache entry is keyed by, and how a shim computes the same key from the bytes it is given.

A key is (BLAKE3 hex of the PTX text, target id, translator ABI version, options). The PTX text is the
bytes as stored in the fatbin entry, decompressed, trailing NULs stripped (the hash ZLUDA's cache uses);
`cuModuleLoadData` given raw PTX sees a NUL-terminated string, whose bytes before the NUL are the same text.
"""

from __future__ import annotations

import re
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
TRANSLATOR_ABI = 3  # 2: runtime-service globals (docs/runtime.md), [5/8] instruction families; 3: sm90 mma numerics

# Features a target id may set, as LLVM names them; they are written in this (alphabetical) order.
TARGET_FEATURES = ("sramecc", "xnack")
_PROCESSOR = re.compile(r"gfx[0-9a-f]+")
_FATBIN_MAGIC = FATBIN_MAGIC.to_bytes(4, "little")


@dataclass(frozen=True)
class CacheKey:
    ptx_blake3: str  # 64 hex digits
    target: str  # normalised target id: "gfx942", "gfx942:sramecc+:xnack-"
    abi: int
    options: str  # canonical spelling of the code-changing options, "O2" (sm90 mma numerics) or "O2-mma_exact"

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
    """The options that change code, spelled canonically (the target is a key field of its own). The default
    mma numerics (sm90) adds nothing, so keys of entries made before the option existed stay as they were."""
    numerics = "" if options.mma_numerics == "sm90" else f"-mma_{options.mma_numerics}"
    return f"O{options.opt_level}{numerics}"


def make_key(ptx: bytes | str, target: str, options: Options | None = None) -> CacheKey:
    options = options or Options(target=target.split(":")[0])
    return CacheKey(ptx_hash(ptx), normalize_target(target), TRANSLATOR_ABI, options_key(options))


def ptx_texts(image: bytes) -> list[bytes]:
    """The PTX texts a shim would hash for the image given to `cuModuleLoadData`, newest arch first.

    A fatbin (magic 0xBA55ED50): every PTX entry of every container in it, decompressed, trailing NULs
    stripped, ordered by compute capability, highest first. An ELF (a cubin) holds no PTX: []. Anything else
    is a NUL-terminated PTX string: the bytes before the first NUL.
    """
    data = bytes(image)
    if data.startswith(_FATBIN_MAGIC):
        found = []
        for offset in find_containers(data):
            container = parse_container(data, offset)
            found += [(entry.sm, entry_payload(data, entry)) for entry in container.entries if entry.kind == KIND_PTX]
        return [text for _, text in sorted(found, key=lambda pair: -pair[0])]
    if data.startswith(b"\x7fELF"):
        return []
    text = data.split(b"\0", 1)[0]
    if not text.strip():
        raise FatkitError("the image holds neither a fatbin nor PTX text")
    return [text]
