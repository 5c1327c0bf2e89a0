"""Special registers: readers of `%tid`, `%ntid`, `%ctaid`, `%nctaid` (per .x/.y/.z) through the target."""

from __future__ import annotations

from fatkit.translate.lower.core import reads_special
from fatkit.translate.targets.base import DIM_REGISTERS


@reads_special(*DIM_REGISTERS)
def dimension(lw, operand):
    if operand.component not in ("x", "y", "z"):
        raise lw.fail(f"special register {operand.name} needs .x/.y/.z")
    return lw.target.special_register(lw.builder, operand.name, operand.component), "u32"
