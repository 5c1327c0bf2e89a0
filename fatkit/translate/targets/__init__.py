"""Code generation targets of the translator: `amdgpu` (the product) and `host` (tests on the CPU)."""

from __future__ import annotations

from fatkit.errors import UsageError
from fatkit.translate.targets.base import Target


def target_named(name: str) -> Target:
    """`host`, or an AMD processor name (`gfx942`, `gfx1100`, …)."""
    if name == "host":
        from fatkit.translate.targets.host import HostTarget

        return HostTarget()
    if name.startswith("gfx"):
        from fatkit.translate.targets.amdgpu import AmdgpuTarget

        return AmdgpuTarget(name)
    raise UsageError(f"unknown translation target {name!r} (expected 'host' or an AMD processor like gfx942)")


__all__ = ["Target", "target_named"]
