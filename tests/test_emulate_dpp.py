"""fatkit.emulate's DPP16 lane moves under row and bank masks: an LLVM IR kernel calls llvm.amdgcn.update.dpp on
values loaded per lane, checked against a model written here from the ISA's description (a lane of a disabled
row or bank keeps its destination, the intrinsic's old value; with bound_ctrl a lane whose source is outside
its row of 16 reads 0)."""

from __future__ import annotations

import numpy as np
import pytest

from fatkit.emulate import launch
from fatkit.translate.targets.amdgpu import CODE_OBJECT_VERSION, link
from fatkit.translate.targets.amdgpu_child import target_machine

RNG = np.random.default_rng(20261203)
LANES = {"gfx942": 64, "gfx1100": 32}


def _kernel_ir(control: int, rows: int, banks: int) -> str:
    return f"""target triple = "amdgcn-amd-amdhsa"
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.update.dpp.i32(i32, i32, i32, i32, i32, i1)
define amdgpu_kernel void @k(ptr addrspace(1) %pold, ptr addrspace(1) %psrc, ptr addrspace(1) %pout) {{
  %lane = call i32 @llvm.amdgcn.workitem.id.x()
  %op = getelementptr i32, ptr addrspace(1) %pold, i32 %lane
  %sp = getelementptr i32, ptr addrspace(1) %psrc, i32 %lane
  %dp = getelementptr i32, ptr addrspace(1) %pout, i32 %lane
  %old = load i32, ptr addrspace(1) %op
  %src = load i32, ptr addrspace(1) %sp
  %moved = call i32 @llvm.amdgcn.update.dpp.i32(i32 %old, i32 %src, i32 {control}, i32 {rows}, i32 {banks}, i1 1)
  store i32 %moved, ptr addrspace(1) %dp
  ret void
}}
!llvm.module.flags = !{{!0}}
!0 = !{{i32 1, !"amdhsa_code_object_version", i32 {CODE_OBJECT_VERSION}}}
"""


def _model(control: int, rows: int, banks: int, old: np.ndarray, src: np.ndarray) -> np.ndarray:
    out = old.copy()
    for lane in range(len(old)):
        row, in_row = lane // 16, lane % 16
        if not (rows >> row & 1 and banks >> (in_row // 4) & 1):
            continue  # disabled: the destination stays
        if control <= 0xFF:  # quad_perm
            source = lane - lane % 4 + (control >> 2 * (lane % 4) & 3)
        elif 0x101 <= control <= 0x10F:  # row_shl: the lane `shift` above in the row
            source = lane + (control & 15) if in_row + (control & 15) < 16 else None
        else:  # row_shr
            source = lane - (control & 15) if in_row >= control & 15 else None
        out[lane] = 0 if source is None else src[source]
    return out


@pytest.mark.parametrize("target", list(LANES))
@pytest.mark.parametrize("control,rows,banks", [(0x104, 0xF, 0xF), (0x104, 0xF, 0b0101), (0x114, 0xF, 0b1010),
                                                (0x114, 0b0101, 0b0011), (0xB1, 0b0010, 0b1100)])
def test_dpp_disabled_lanes_keep_their_destination(target, control, rows, banks):
    from llvmlite import binding as llvm
    lanes = LANES[target]
    old = RNG.integers(0, 1 << 32, lanes, dtype=np.uint64).astype(np.uint32)
    src = RNG.integers(0, 1 << 32, lanes, dtype=np.uint64).astype(np.uint32)
    module = llvm.parse_assembly(_kernel_ir(control, rows, banks))
    code_object = link([target_machine(target).emit_object(module)])
    out = np.zeros(lanes, dtype=np.uint32)
    launch(code_object, "k", (1, 1, 1), (lanes, 1, 1), [old.copy(), src.copy(), out], 0)
    assert np.array_equal(out, _model(control, rows, banks, old, src))
