"""Code generation targets of the translator: `amdgpu` (the product), `host` (tests on the CPU) and `nvptx`
(PTX again, to run beside the original on an NVIDIA GPU: verification)."""

from __future__ import annotations

from fatkit.errors import UsageError
from fatkit.translate.targets.base import Target


def target_named(name: str) -> Target:
    """`host`, an AMD processor name (`gfx942`, `gfx1100`, …) or an NVIDIA one (`sm_90`)."""
    if name == "host":
        from fatkit.translate.targets.host import HostTarget

        return HostTarget()
    if name.startswith("gfx"):
        from fatkit.translate.targets.amdgpu import AmdgpuTarget

        return AmdgpuTarget(name)
    if name.startswith("sm_"):
        from fatkit.translate.targets.nvptx import NvptxTarget

        return NvptxTarget(name)
    raise UsageError(f"unknown translation target {name!r} (expected 'host', an AMD processor like gfx942 "
                     "or an NVIDIA one like sm_90)")


__all__ = ["Target", "target_named"]
