"""What a cache entry is keyed by, and how a shim computes the same key from the bytes it is given.

A key is (BLAKE3 hex of the PTX text, target id, translator ABI version, options and toolchain). The PTX text is the
bytes as stored in the fatbin entry, decompressed, trailing NULs stripped (the hash ZLUDA's cache uses);
`cuModuleLoadData` given raw PTX sees a NUL-terminated string, whose bytes before the NUL are the same text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path

import blake3

from fatkit.errors import FatkitError, UsageError
from fatkit.formats.fatbin import KIND_PTX, entry_payload, find_containers, parse_container
from fatkit.formats.magic import ELF_MAGIC, FATBIN_MAGIC_BYTES
from fatkit.translate import toolchain
from fatkit.translate.pipeline import CHANGES_CODE, Options
from fatkit.translate.targets.ids import TargetId

# Bump when what the translator produces for the same PTX changes in a way a shim can observe: kernel
# argument layout, code object version, wave size, names, or fixed miscompilations. Entries of another
# ABI version are never served (they stay until evicted).
TRANSLATOR_ABI = 4  # 2: runtime-service globals (docs/runtime.md), [5/8] instruction families; 3: sm90 mma numerics;
# 4: textures read absent channels as 0 and filter bilinearly as NVIDIA does (docs/runtime.md), TMA copies as an
# H200 does them, launch-given cluster shapes in a hidden kernarg, m8n8k4 .f16-D sums as ptxas computes them,
# a .const variable's loads no longer folded into its initializer (the host's writes to it were not seen)


@dataclass(frozen=True)
class CacheKey:
    ptx_blake3: str  # 64 hex digits
    target: str  # normalised target id: "gfx942", "gfx942:sramecc+:xnack-"
    abi: int
    options: str  # `options_key`: the code-changing options and the toolchain, canonically spelled

    def __str__(self) -> str:
        return f"{self.ptx_blake3[:16]}…/{self.target}/abi{self.abi}/{self.options}"


def ptx_hash(ptx: bytes | str) -> str:
    """BLAKE3 hex of PTX text with its trailing NULs stripped."""
    data = ptx.encode("utf-8") if isinstance(ptx, str) else bytes(ptx)
    return blake3.blake3(data.rstrip(b"\0")).hexdigest()


def normalize_target(text: str) -> str:
    """The canonical spelling of an AMD target id (`TargetId.parse_amd`): `gfx942:xnack-:sramecc+` →
    `gfx942:sramecc+:xnack-`; UsageError for anything that is not one."""
    return str(TargetId.parse_amd(text))


def compatible_targets(device: str) -> list[str]:
    """Target ids whose code objects load on `device`, most specific first (`TargetId.compatible`)."""
    return [str(t) for t in TargetId.parse_amd(device).compatible()]


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
    """The options column of a key: every field of `options` that can change the code, by name, in field
    order (a new field is in the key without an edit here), then the toolchain versions that make the code
    object. The target is a column of its own; fields marked `CHANGES_CODE: False` (jobs) are left out.

    `opt_level=2;emit=hsaco;mma_numerics=sm90;llvm=20.1.8;lld=ziglang-0.15.1`"""
    spelled = [f"{name}={_spelling(getattr(options, name))}" for name in _code_fields(type(options))]
    spelled += [f"{name}={version}" for name, version in toolchain.versions()]
    return ";".join(spelled)


def _code_fields(options_type: type[Options]) -> list[str]:
    return [f.name for f in fields(options_type) if f.metadata.get(CHANGES_CODE, True) and f.name != "target"]


def options_scheme(options_type: type[Options] = Options) -> tuple[str, ...]:
    """The names of the options column as this fatkit writes it, in order: `("opt_level", "emit",
    "mma_numerics", "llvm", "lld")`. A row spelled with other names (`O2`, from before the column was derived
    from Options, or one without a field added since) matches no key this fatkit or a shim built for it asks
    for: it is stale."""
    return (*_code_fields(options_type), *(name for name, _ in toolchain.versions()))


def is_current_scheme(options: str, scheme: tuple[str, ...]) -> bool:
    """Whether an options column is `name=value` pairs joined by `;` with exactly the names of `scheme`, in
    order (the values, such as another LLVM version, may be anything: a shim may serve those)."""
    pairs = options.split(";")
    return all("=" in pair for pair in pairs) and tuple(pair.partition("=")[0] for pair in pairs) == scheme


_LINKED_DOMAIN = b"fatkit -rdc link\0"


def linked_ptx_hash(texts: Iterable[bytes | str]) -> str:
    """The `ptx_blake3` of `-rdc` units linked into one (docs/cache.md): BLAKE3 of `fatkit -rdc link` and a
    NUL, then each unit's `ptx_hash` (64 hex digits) and a newline, the digests sorted, so that the order
    in which units are registered does not matter. One unit is its own `ptx_hash`."""
    digests = sorted(ptx_hash(text) for text in texts)
    if len(digests) == 1:
        return digests[0]
    return blake3.blake3(_LINKED_DOMAIN + b"".join(d.encode() + b"\n" for d in digests)).hexdigest()


def _spelling(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, str, TargetId)):
        return str(value)
    raise TypeError(f"an Options field of type {type(value).__name__} has no canonical spelling for the cache key")


def make_key(ptx: bytes | str, options: Options | TargetId | str) -> CacheKey:
    """The key of `ptx` translated with `options` (a target alone means the default options for it)."""
    if not isinstance(options, Options):
        options = Options(target=options if isinstance(options, TargetId) else TargetId.parse_amd(options))
    return key_of(ptx_hash(ptx), options)


def key_of(ptx_blake3: str, options: Options) -> CacheKey:
    if options.target.vendor != "amd":
        raise UsageError(f"the cache holds AMD code objects, not code for {options.target}")
    return CacheKey(ptx_blake3, str(options.target), TRANSLATOR_ABI, options_key(options))


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
    if data.startswith(FATBIN_MAGIC_BYTES):
        found = []
        # a fatbin whose first container fails validation is parsed anyway, for the error saying why (where)
        for offset in list(find_containers(data)) or [0]:
            container = parse_container(data, offset)
            found += [(entry.sm, entry_payload(data, entry)) for entry in container.entries if entry.kind == KIND_PTX]
        return sorted(found, key=lambda pair: -pair[0])
    if data.startswith(ELF_MAGIC):
        return []
    text = data.split(b"\0", 1)[0]
    if not text.strip():
        raise FatkitError("the image holds neither a fatbin nor PTX text")
    return [(0, text)]
