"""Bulk copies issued by the lane `elect.sync` chooses, shared by the lanes of its warp (passes/elected.py,
lower/asynccopy.py), on the host target and the AMD code objects run by fatkit.emulate (gfx1100, gfx942).

Each warp's elected lane copies a slice of global memory into shared memory (mbarrier completion) and,
after every lane has read it back, a shared slice out to global memory (bulk_group): the results are the
data moved (the model: a copy), the elected pass's output shows the copies moved to the rejoin label, and a
region the pass must leave alone (a load after the copy) still copies right, by the one lane.
"""

from __future__ import annotations

import numpy as np
import pytest

from fatkit.translate.passes import run_passes
from fatkit.translate.ptx import parse_ptx
from fatkit.translate.ptx.printer import print_ptx
from tests.amdrun import TARGETS, program
from tests.ptxframes import entry

HEADER = ".version 8.6\n.target sm_90\n.address_size 64\n"
RNG = np.random.default_rng(2122)
CHUNKS = 40  # 16-byte chunks a warp copies: more than 32 lanes, not a multiple of them


def _kernel(after_copy: str = "", masked: bool = False) -> str:
    """`masked`: the copy out has .cp_mask (sm_100), its byte mask the kernel's third parameter."""
    store = ("cp.async.bulk.global.shared::cta.bulk_group.cp_mask [%rd7], [%r15], " + f"{16 * CHUNKS}, %rs1;"
             if masked else f"cp.async.bulk.global.shared::cta.bulk_group [%rd7], [%r15], {16 * CHUNKS};")
    header = HEADER.replace("sm_90", "sm_100") if masked else HEADER
    return header + "\n" + entry("elected", "u64 psrc, u64 pout, u16 pmask",
                                 ".pred %p<8>, .b16 %rs<2>, .b32 %r<32>, .b64 %rd<16>", f"""
    mov.u32 %r1, %tid.x;
    shr.u32 %r2, %r1, 5;                     // the warp
    and.b32 %r3, %r1, 31;
    mov.u32 %r4, bar;
    shl.b32 %r5, %r2, 3;
    add.u32 %r6, %r4, %r5;                   // the warp's mbarrier
    setp.eq.u32 %p1, %r3, 0;
    @%p1 mbarrier.init.shared.b64 [%r6], 1;
    bar.sync 0;
    mov.b32 %r7, -1;
    {{
    .reg .pred P_OUT;
    elect.sync _|P_OUT, %r7;
    selp.b32 %r8, 1, 0, P_OUT;
    }}
    setp.eq.b32 %p2, %r8, 0;
    @%p2 bra $issued;
    mul.lo.u32 %r9, %r2, {16 * CHUNKS};
    mov.u32 %r10, buf;
    add.u32 %r11, %r10, %r9;                 // the warp's slice of buf
    cvt.u64.u32 %rd3, %r9;
    add.u64 %rd4, %rd1, %rd3;
    mov.u32 %r12, {16 * CHUNKS};
    mbarrier.arrive.expect_tx.shared.b64 %rd5, [%r6], %r12;
    cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes [%r11], [%rd4], %r12, [%r6];
{after_copy}$issued:
$wait:
    mbarrier.try_wait.parity.shared.b64 %p3, [%r6], 0;
    @!%p3 bra $wait;
    mul.lo.u32 %r13, %r2, {16 * CHUNKS};
    mov.u32 %r14, buf;
    add.u32 %r15, %r14, %r13;
    shl.b32 %r16, %r3, 2;
    add.u32 %r17, %r15, %r16;
    ld.shared.u32 %r18, [%r17];              // every lane reads a word of its warp's slice
    not.b32 %r18, %r18;
    st.shared.u32 [%r17], %r18;              // and inverts it
    bar.warp.sync -1;
    fence.proxy.async.shared::cta;
    mov.b32 %r19, -1;
    {{
    .reg .pred P_OUT;
    elect.sync _|P_OUT, %r19;
    selp.b32 %r20, 1, 0, P_OUT;
    }}
    setp.eq.b32 %p4, %r20, 0;
    @%p4 bra $stored;
    cvt.u64.u32 %rd6, %r13;
    add.u64 %rd7, %rd2, %rd6;
    {store}
    cp.async.bulk.commit_group;
$stored:
    cp.async.bulk.wait_group 0;
    ret;
""", declarations=f".shared .align 16 .b8 buf[{2 * 16 * CHUNKS}];\n.shared .align 8 .b64 bar[2];")


def _model(source: np.ndarray, out: np.ndarray, mask: int | None) -> np.ndarray:
    words = source.view(np.uint32).copy()
    for warp in range(2):
        words[warp * 4 * CHUNKS:warp * 4 * CHUNKS + 32] ^= 0xFFFFFFFF  # the words the lanes inverted
    copied = words.view(np.uint8)
    if mask is None:
        return copied
    selected = np.array([mask >> (i % 16) & 1 for i in range(copied.size)], bool)
    return np.where(selected, copied, out)  # unselected bytes of each 16-byte chunk keep what they held


@pytest.mark.parametrize("after_copy", ["", "    ld.global.u32 %r21, [%rd4];\n"])
@pytest.mark.parametrize("target", TARGETS)
def test_elected_bulk_copies_move_the_data(target, after_copy):
    source = RNG.integers(0, 256, 2 * 16 * CHUNKS, dtype=np.uint64).astype(np.uint8)
    out = np.zeros_like(source)
    program(_kernel(after_copy), target).launch("elected", [source, out, 0], block=(64, 1, 1))
    assert (out == _model(source, out, None)).all()


@pytest.mark.parametrize("target", TARGETS)
def test_an_elected_masked_copy_writes_the_masks_bytes(target):
    source = RNG.integers(0, 256, 2 * 16 * CHUNKS, dtype=np.uint64).astype(np.uint8)
    out = RNG.integers(0, 256, source.size, dtype=np.uint64).astype(np.uint8)
    before, mask = out.copy(), 0b1010_0110_1100_0011
    program(_kernel(masked=True), target).launch("elected", [source, out, mask], block=(64, 1, 1))
    assert (out == _model(source, before, mask)).all()


def test_the_pass_moves_the_copies_of_elected_regions_alone():
    spread = print_ptx(run_passes(parse_ptx(_kernel()), until="elected").module)
    assert spread.count("fatkit::spread") == 2
    assert spread.index("$issued:") < spread.index("cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes"
                                                   ".fatkit::spread")
    kept = print_ptx(run_passes(parse_ptx(_kernel("    ld.global.u32 %r21, [%rd4];\n")), until="elected").module)
    assert kept.count("fatkit::spread") == 1  # the first region holds a load: its copy stays the lane's own
    masked = print_ptx(run_passes(parse_ptx(_kernel(masked=True)), until="elected").module)
    assert "bulk_group.cp_mask.fatkit::spread" in masked
