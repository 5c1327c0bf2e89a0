"""Target ids: what every command's `--target` names, parsed and normalised in one place.

Three kinds of target:

- AMD: LLVM's target id, a processor then the features set on or off, alphabetically:
  `gfx942`, `gfx942:xnack-`, `gfx942:sramecc+:xnack-`. A feature left out means code that works with either
  setting, so `gfx942` is an id of its own. The `amdgcn-amd-amdhsa--` prefix of a bundle entry id is dropped;
  unknown, repeated or contradicting features and unknown processors are errors.
- NVIDIA (`sm_90`, `sm_90a`, `sm_100f`; `sm_90:wave64` emulates AMD's 64-lane waves): fatkit's re-lowered
  PTX, the verification target.
- `host`: the CPU, through llvmlite's JIT (tests).

This module imports nothing heavy: the CLI parses targets before it decides what else to load.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from fatkit.errors import UsageError

Vendor = Literal["amd", "nvidia", "host"]

# Features a target id may set, as LLVM names them; they are written in this (alphabetical) order.
AMD_FEATURES = ("sramecc", "xnack")
AMD_TRIPLE_PREFIX = "amdgcn-amd-amdhsa--"
NVIDIA_WAVE64 = ":wave64"
KIB = 1024

# The AMDGCN processors (the names of the code object's EF_AMDGPU_MACH values, without the generic ones).
# gfx6–gfx9 (GCN, CDNA) run 64-lane waves, gfx10 and later (RDNA) 32-lane ones; LDS per workgroup is 64 KiB
# except on gfx950 (160 KiB).
AMD_PROCESSORS = frozenset("""
    gfx600 gfx601 gfx602 gfx700 gfx701 gfx702 gfx703 gfx704 gfx705 gfx801 gfx802 gfx803 gfx805 gfx810
    gfx900 gfx902 gfx904 gfx906 gfx908 gfx909 gfx90a gfx90c gfx940 gfx941 gfx942 gfx950
    gfx1010 gfx1011 gfx1012 gfx1013 gfx1030 gfx1031 gfx1032 gfx1033 gfx1034 gfx1035 gfx1036
    gfx1100 gfx1101 gfx1102 gfx1103 gfx1150 gfx1151 gfx1152 gfx1153 gfx1154 gfx1170 gfx1171 gfx1172
    gfx1200 gfx1201 gfx1250 gfx1251 gfx1310
""".split())
LDS_BYTES = {"gfx950": 160 * KIB}
DEFAULT_LDS_BYTES = 64 * KIB

_NVIDIA = re.compile(r"(sm_\d+[af]?)(:wave64)?")
_RDNA = re.compile(r"gfx(1[0-9])[0-9a-f]{2}")


@dataclass(frozen=True, order=True)
class TargetId:
    """A parsed, normalised target; `str()` gives its canonical spelling."""

    vendor: Vendor
    processor: str  # gfx942, sm_90, host
    features: tuple[tuple[str, str], ...] = ()  # AMD: (("sramecc", "+"), ("xnack", "-")), alphabetical
    wave64: bool = False  # NVIDIA: 64-lane waves emulated (sm_90:wave64)

    @classmethod
    def parse(cls, text: str) -> TargetId:
        """Any target spelling; UsageError naming what is wrong."""
        spelled = text.strip().lower()
        if spelled == "host":
            return cls("host", "host")
        nvidia = _NVIDIA.fullmatch(spelled)
        if nvidia:
            return cls("nvidia", nvidia.group(1), wave64=nvidia.group(2) is not None)
        if spelled.startswith("sm_"):
            raise UsageError(f"target {text!r}: an NVIDIA target is sm_XX, sm_XXa, sm_XXf or sm_XX:wave64")
        return cls._parse_amd(text, spelled.removeprefix(AMD_TRIPLE_PREFIX))

    @classmethod
    def parse_amd(cls, text: str) -> TargetId:
        """An AMD target id only (the cache, precompile, repack and lint take nothing else)."""
        target = cls.parse(text)
        if target.vendor != "amd":
            raise UsageError(f"target {text!r}: an AMD target id like gfx942 or gfx942:sramecc+:xnack- is needed")
        return target

    @classmethod
    def _parse_amd(cls, text: str, spelled: str) -> TargetId:
        processor, *settings = spelled.split(":")
        if processor not in AMD_PROCESSORS:
            raise UsageError(f"target {text!r}: {processor or 'nothing'!r} is not an AMD processor like gfx942, "
                             f"gfx90a or gfx1100 (or sm_90 for verification)")
        features: dict[str, str] = {}
        for setting in settings:
            name, sign = setting[:-1], setting[-1:]
            if not name or sign not in ("+", "-"):
                raise UsageError(f"target {text!r}: feature {setting!r} is not NAME+ or NAME-")
            if name not in AMD_FEATURES:
                raise UsageError(f"target {text!r}: unknown feature {name!r} (known: {', '.join(AMD_FEATURES)})")
            if name in features:
                raise UsageError(f"target {text!r} sets {name} twice")
            features[name] = sign
        return cls("amd", processor, tuple(sorted(features.items())))

    @classmethod
    def parse_list(cls, text: str, *, vendors: tuple[Vendor, ...] = ("amd", "nvidia", "host")) -> list[TargetId]:
        """Comma-separated targets, each once, in the order given."""
        spelled = [t for t in (part.strip() for part in text.split(",")) if t]
        if not spelled:
            raise UsageError("at least one target, like gfx942")
        targets = []
        for item in spelled:
            target = cls.parse_amd(item) if vendors == ("amd",) else cls.parse(item)
            if target.vendor not in vendors:
                raise UsageError(f"target {item!r}: here only {' or '.join(vendors)} targets are accepted")
            targets.append(target)
        return list(dict.fromkeys(targets))

    def __str__(self) -> str:
        if self.vendor == "amd":
            return self.processor + "".join(f":{name}{sign}" for name, sign in self.features)
        return self.processor + (NVIDIA_WAVE64 if self.wave64 else "")

    @property
    def bare(self) -> TargetId:
        """The processor alone: the id of code compiled with every feature unset."""
        return TargetId(self.vendor, self.processor, (), self.wave64)

    def compatible(self) -> list[TargetId]:
        """AMD ids whose code objects load on a device reporting this id, most specific first.

        A feature a code object leaves unset works with either setting, so a device reporting
        `gfx942:sramecc+:xnack-` can use code for that id, for `gfx942:xnack-`, `gfx942:sramecc+` and `gfx942`.
        """
        count = len(self.features)
        subsets = [tuple(f for i, f in enumerate(self.features) if mask & (1 << i))
                   for mask in range((1 << count) - 1, -1, -1)]
        return [TargetId(self.vendor, self.processor, kept) for kept in sorted(subsets, key=lambda s: -len(s))]

    @cached_property
    def generation(self) -> int:
        """AMD: the major version (9 for gfx90a, 11 for gfx1100)."""
        rdna = _RDNA.fullmatch(self.processor)
        return int(rdna.group(1)) if rdna else int(self.processor[3])

    @property
    def family(self) -> str:
        """AMD GPUs that behave alike for fatkit: the processor on gfx9 and before (gfx90a, gfx942), the
        generation on RDNA (gfx11 for gfx1100–gfx1172); NVIDIA and host: the processor."""
        if self.vendor == "amd" and self.generation >= 10:
            return f"gfx{self.generation}"
        return self.processor

    @property
    def wave_size(self) -> int:
        """Lanes of a hardware wave: 64 on GCN/CDNA (gfx6–gfx9), 32 on RDNA; NVIDIA 32 (64 emulated); host 32."""
        if self.vendor == "amd":
            return 32 if self.generation >= 10 else 64
        return 64 if self.wave64 else 32

    @property
    def matrix_cores(self) -> str | None:
        """AMD matrix instructions: "mfma" (gfx90a, gfx942, gfx950: wave64 MFMA with VGPR accumulators),
        "wmma11" (gfx11 WMMA, wave32), "wmma12" (gfx12 WMMA, another lane layout), or None."""
        if self.vendor != "amd":
            return None
        if self.processor in ("gfx90a", "gfx942", "gfx950"):
            return "mfma"
        return {11: "wmma11", 12: "wmma12"}.get(self.generation)

    @property
    def lds_bytes(self) -> int:
        """Shared memory (LDS) one workgroup may use."""
        return LDS_BYTES.get(self.processor, DEFAULT_LDS_BYTES)
