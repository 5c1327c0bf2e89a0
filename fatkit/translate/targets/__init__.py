"""Code generation targets of the translator: `amdgpu` (the product), `host` (tests on the CPU) and `nvptx`
(PTX again, to run beside the original on an NVIDIA GPU: verification). `ids.py` parses what names them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fatkit.translate.targets.ids import TargetId

if TYPE_CHECKING:
    from fatkit.translate.targets.base import Target


def target_named(target: TargetId | str) -> Target:
    """The code generator for a target id or its spelling (`host`, `gfx942`, `sm_90:wave64`). AMD code is
    compiled for the bare processor: xnack and sramecc unset."""
    target = target if isinstance(target, TargetId) else TargetId.parse(target)
    if target.vendor == "host":
        from fatkit.translate.targets.host import HostTarget

        return HostTarget()
    if target.vendor == "amd":
        from fatkit.translate.targets.amdgpu import AmdgpuTarget

        return AmdgpuTarget(target.processor)
    from fatkit.translate.targets.nvptx import NvptxTarget

    return NvptxTarget(str(target))


__all__ = ["TargetId", "target_named"]
