"""Clusters of several CTAs run as one workgroup (lower/cluster.py), on the host target and on the AMD code
objects run by fatkit.emulate (gfx1100, gfx942).

A kernel of `.reqnctapercluster cx, cy, cz` is launched as the shim must (docs/runtime.md): workgroups of
(ntid.x, ntid.y, ntid.z·k) threads and a grid divided by the cluster shape. Expected values come from the
models in the tests — what CUDA's definitions make each CTA of each cluster compute — over random inputs:
the special registers, shared memory exchanged between the CTAs of a cluster through mapa (.u32
shared::cluster addresses and .u64 generic ones), ld/st/atom on .shared::cluster, getctarank,
barrier.cluster, barriers of one CTA while the other CTAs of its workgroup do otherwise (bar.sync and
bar.red.popc), and dynamic shared memory.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from fatkit import runtime
from fatkit.extract.scan import scan_paths
from fatkit.extract.select import ptx_modules
from fatkit.formats.hsaco import parse_code_object
from fatkit.translate.lower import kernel_signature
from fatkit.translate.passes import run_passes
from fatkit.translate.pipeline import Options, parse, run, translate
from fatkit.translate.ptx import ast, parse_ptx
from fatkit.translate.ptx.printer import print_ptx
from tests.amdrun import TARGETS, program
from tests.corpus import corpus_file
from tests.ptxframes import entry

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"
RNG = np.random.default_rng(2121)


def _launch_geometry(grid_ctas, block, shape):
    """What the shim launches for clusters of `shape`: (workgroups, workgroup size)."""
    k = shape[0] * shape[1] * shape[2]
    assert all(g % c == 0 for g, c in zip(grid_ctas, shape))
    return tuple(g // c for g, c in zip(grid_ctas, shape)), (block[0], block[1], block[2] * k)


@functools.cache
def _program(ptx: str, target: str):
    return program(ptx, target)


# ------------------------------------------------------------------------------------------------ registers

REGISTERS = ["%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z", "%ctaid.x", "%ctaid.y", "%ctaid.z",
             "%nctaid.x", "%nctaid.y", "%nctaid.z", "%cluster_ctaid.x", "%cluster_ctaid.y", "%cluster_ctaid.z",
             "%cluster_nctaid.x", "%cluster_nctaid.y", "%cluster_nctaid.z", "%cluster_ctarank",
             "%cluster_nctarank", "%clusterid.x", "%clusterid.y", "%clusterid.z", "%nclusterid.x",
             "%nclusterid.y", "%nclusterid.z", "%warpid"]


def _registers_kernel(shape, directive: str | None = None) -> str:
    """Each thread writes the registers at its (CTA linear index · CTA threads + linear thread) row; the
    cluster shape `.reqnctapercluster shape`, or `directive` (a launch-given shape)."""
    reads = "".join(f"    mov.u32 %r10, {name};\n    st.global.u32 [%rd3+{4 * k}], %r10;\n"
                    for k, name in enumerate(REGISTERS))
    return HEADER + "\n" + entry("registers", "u64 out", ".pred %p<2>, .b32 %r<16>, .b64 %rd<4>", f"""
    mov.u32 %r1, %ctaid.z;
    mov.u32 %r2, %nctaid.y;
    mov.u32 %r3, %ctaid.y;
    mad.lo.u32 %r1, %r1, %r2, %r3;
    mov.u32 %r2, %nctaid.x;
    mov.u32 %r3, %ctaid.x;
    mad.lo.u32 %r1, %r1, %r2, %r3;       // the CTA's linear index in the grid
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %ntid.y;
    mov.u32 %r6, %ntid.z;
    mul.lo.u32 %r7, %r4, %r5;
    mul.lo.u32 %r7, %r7, %r6;            // threads a CTA
    mov.u32 %r8, %tid.z;
    mov.u32 %r9, %tid.y;
    mad.lo.u32 %r8, %r8, %r5, %r9;
    mov.u32 %r9, %tid.x;
    mad.lo.u32 %r8, %r8, %r4, %r9;       // the linear thread
    mad.lo.u32 %r1, %r1, %r7, %r8;
    mul.lo.u32 %r1, %r1, {4 * (len(REGISTERS) + 1)};
    cvt.u64.u32 %rd2, %r1;
    add.u64 %rd3, %rd1, %rd2;
{reads}    mov.pred %p1, %is_explicit_cluster;
    selp.u32 %r10, 1, 0, %p1;
    st.global.u32 [%rd3+{4 * len(REGISTERS)}], %r10;
    ret;
""", directives=f'{directive or ".reqnctapercluster " + ", ".join(map(str, shape))}')


def _registers_model(grid, block, shape, explicit: int = 1) -> np.ndarray:
    rows = []
    for cz in range(grid[2]):
        for cy in range(grid[1]):
            for cx in range(grid[0]):
                ctaid = (cx, cy, cz)
                within = tuple(c % s for c, s in zip(ctaid, shape))
                rank = within[0] + shape[0] * (within[1] + shape[1] * within[2])
                for tz in range(block[2]):
                    for ty in range(block[1]):
                        for tx in range(block[0]):
                            linear = tx + block[0] * (ty + block[1] * tz)
                            rows.append([tx, ty, tz, *block, *ctaid, *grid, *within, *shape, rank,
                                         shape[0] * shape[1] * shape[2],
                                         *(c // s for c, s in zip(ctaid, shape)),
                                         *(g // s for g, s in zip(grid, shape)), linear // 32, explicit])
    return np.array(rows, np.uint32)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape, grid, block", [((2, 2, 1), (4, 2, 1), (16, 2, 1)),
                                                ((1, 2, 2), (2, 2, 4), (8, 2, 4)),
                                                ((4, 1, 1), (4, 1, 2), (32, 1, 1))])
def test_cluster_registers_are_each_ctas(target, shape, grid, block):
    workgroups, size = _launch_geometry(grid, block, shape)
    want = _registers_model(grid, block, shape)
    out = np.zeros(want.size, np.uint32)
    _program(_registers_kernel(shape), target).launch("registers", [out], grid=workgroups, block=size)
    got = out.reshape(want.shape)
    for column, name in enumerate([*REGISTERS, "%is_explicit_cluster"]):
        assert (got[:, column] == want[:, column]).all(), name


# ------------------------------------------------------------------------------------------------ DSMEM

DSMEM = HEADER + "\n" + entry("dsmem", "u64 pa, u64 pout", ".pred %p<2>, .b32 %r<40>, .b64 %rd<16>", """
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %cluster_ctarank;
    mov.u32 %r4, %cluster_nctarank;
    mad.lo.u32 %r5, %r2, 32, %r1;            // g: the thread's element
    mul.wide.u32 %rd3, %r5, 4;
    add.u64 %rd4, %rd1, %rd3;
    ld.global.u32 %r6, [%rd4];
    mov.u32 %r7, values;
    shl.b32 %r8, %r1, 2;
    add.u32 %r9, %r7, %r8;
    st.shared.u32 [%r9], %r6;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 st.shared.u32 [counter], 0;
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    add.u32 %r10, %r3, 1;
    rem.u32 %r10, %r10, %r4;                 // next = (rank + 1) % k
    add.u32 %r11, %r3, %r4;
    sub.u32 %r11, %r11, 1;
    rem.u32 %r11, %r11, %r4;                 // previous = (rank + k - 1) % k
    mul.lo.u32 %r12, %r1, 7;
    and.b32 %r12, %r12, 31;
    shl.b32 %r12, %r12, 2;
    add.u32 %r12, %r7, %r12;
    mapa.shared::cluster.u32 %r13, %r12, %r10;
    ld.shared::cluster.u32 %r14, [%r13];     // next's values[(7t) & 31]
    getctarank.shared::cluster.u32 %r15, %r13;
    cvt.u64.u32 %rd6, %r9;
    cvta.shared.u64 %rd5, %rd6;
    mapa.u64 %rd7, %rd5, %r11;
    ld.u32 %r16, [%rd7];                     // previous's values[t], through a generic address
    mov.u32 %r17, counter;
    mapa.shared::cluster.u32 %r18, %r17, %r10;
    and.b32 %r19, %r6, 255;
    atom.shared::cluster.add.u32 %r20, [%r18], %r19;
    mov.u32 %r21, inbox;
    add.u32 %r21, %r21, %r8;
    mapa.shared::cluster.u32 %r22, %r21, %r10;
    mad.lo.u32 %r23, %r3, 1000, %r1;
    st.shared::cluster.u32 [%r22], %r23;     // next's inbox[t] = rank * 1000 + t
    fence.acq_rel.cluster;
    barrier.cluster.arrive;
    barrier.cluster.wait;
    ld.shared.u32 %r24, [counter];
    ld.shared.u32 %r26, [%r21];
    mul.wide.u32 %rd8, %r5, 32;
    add.u64 %rd9, %rd2, %rd8;
    st.global.v4.u32 [%rd9], {%r14, %r16, %r15, %r24};
    st.global.u32 [%rd9+16], %r26;
    barrier.cluster.arrive;
    barrier.cluster.wait;
    ret;
""", directives=".reqnctapercluster 4, 1, 1",
    declarations=".shared .align 16 .b8 values[128];\n.shared .align 16 .b8 inbox[128];\n"
                 ".shared .align 4 .b8 counter[4];")


def _dsmem_model(a: np.ndarray, k: int) -> np.ndarray:
    ctas = a.size // 32
    values = a.reshape(ctas, 32)
    out = np.zeros((ctas, 32, 8), np.uint32)
    for cta in range(ctas):
        base, rank = cta - cta % k, cta % k
        after, before = base + (rank + 1) % k, base + (rank + k - 1) % k
        for t in range(32):
            out[cta, t, :5] = [values[after, (7 * t) & 31], values[before, t], (rank + 1) % k,
                           int((values[before] & 255).sum()), ((rank + k - 1) % k) * 1000 + t]
    return out.reshape(-1)


@pytest.mark.parametrize("target", TARGETS)
def test_ctas_exchange_shared_memory_across_the_cluster(target):
    """32-thread CTAs: on gfx942 one wave holds the warps of two CTAs."""
    a = RNG.integers(0, 1 << 32, 8 * 32, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(8 * 32 * 8, np.uint32)
    workgroups, size = _launch_geometry((8, 1, 1), (32, 1, 1), (4, 1, 1))
    _program(DSMEM, target).launch("dsmem", [a, out], grid=workgroups, block=size)
    assert (out == _dsmem_model(a, 4)).all()


# ------------------------------------------------------------------------------------------------ barriers

DIVERGENT = HEADER + "\n" + entry("divergent", "u64 pa, u64 pout", ".pred %p<4>, .b32 %r<32>, .b64 %rd<8>", """
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %cluster_ctarank;
    mad.lo.u32 %r4, %r2, 64, %r1;
    mul.wide.u32 %rd3, %r4, 4;
    add.u64 %rd4, %rd1, %rd3;
    ld.global.u32 %r5, [%rd4];
    mov.u32 %r6, s;
    shl.b32 %r7, %r1, 2;
    add.u32 %r8, %r6, %r7;
    st.shared.u32 [%r8], %r5;
    add.u32 %r9, %r1, 1;
    and.b32 %r9, %r9, 63;
    shl.b32 %r9, %r9, 2;
    add.u32 %r9, %r6, %r9;
    add.u32 %r10, %r3, 1;                    // rounds: rank + 1
    mov.u32 %r11, 0;
    mov.u32 %r20, 0;
$round:
    bar.sync 0;
    ld.shared.u32 %r12, [%r9];
    and.b32 %r13, %r12, 1;
    setp.ne.u32 %p1, %r13, 0;
    bar.red.popc.u32 %r14, 0, %p1;           // odd neighbours in this CTA
    add.u32 %r20, %r20, %r14;
    add.u32 %r12, %r12, %r1;
    st.shared.u32 [%r8], %r12;
    add.u32 %r11, %r11, 1;
    setp.lt.u32 %p2, %r11, %r10;
    @%p2 bra $round;
    barrier.cluster.arrive;
    barrier.cluster.wait;
    xor.b32 %r15, %r3, 1;
    mapa.shared::cluster.u32 %r16, %r8, %r15;
    ld.shared::cluster.u32 %r17, [%r16];
    mul.wide.u32 %rd5, %r4, 16;
    add.u64 %rd6, %rd2, %rd5;
    st.global.v2.u32 [%rd6], {%r12, %r17};
    st.global.u32 [%rd6+8], %r20;
    barrier.cluster.arrive;
    barrier.cluster.wait;
    ret;
""", directives=".reqnctapercluster 2, 1, 1", declarations=".shared .align 4 .b8 s[256];")


def _divergent_model(a: np.ndarray) -> np.ndarray:
    ctas = a.size // 64
    finals, popcs = [], []
    for cta in range(ctas):
        s = a[cta * 64:(cta + 1) * 64].astype(np.uint64)
        popc = 0
        for _ in range(cta % 2 + 1):
            neighbour = np.roll(s, -1)
            popc += int((neighbour & 1).sum())
            s = (neighbour + np.arange(64, dtype=np.uint64)) & 0xFFFFFFFF
        finals.append(s.astype(np.uint32))
        popcs.append(popc)
    out = np.zeros((ctas, 64, 4), np.uint32)
    for cta in range(ctas):
        out[cta, :, 0] = finals[cta]
        out[cta, :, 1] = finals[cta ^ 1]
        out[cta, :, 2] = popcs[cta]
    return out.reshape(-1)


@pytest.mark.parametrize("target", TARGETS)
def test_a_ctas_barriers_wait_for_that_cta_alone(target):
    """CTA 0 of each cluster runs one round of bar.sync + bar.red.popc, CTA 1 two: one workgroup barrier for
    both would pair CTA 0's barrier.cluster with CTA 1's second round."""
    a = RNG.integers(0, 1 << 32, 4 * 64, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(4 * 64 * 4, np.uint32)
    workgroups, size = _launch_geometry((4, 1, 1), (64, 1, 1), (2, 1, 1))
    _program(DIVERGENT, target).launch("divergent", [a, out], grid=workgroups, block=size)
    assert (out == _divergent_model(a)).all()


# ------------------------------------------------------------------------------------------------ dynamic

DYNAMIC = HEADER + """
.extern .shared .align 16 .b8 dyn[];
""" + entry("dynamic", "u64 pout", ".b32 %r<24>, .b64 %rd<8>", """
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %cluster_ctarank;
    mov.u32 %r4, dyn;
    shl.b32 %r5, %r1, 2;
    add.u32 %r6, %r4, %r5;
    mad.lo.u32 %r7, %r2, 100, %r1;
    st.shared.u32 [%r6], %r7;
    st.shared.u32 [own], %r3;
    barrier.cluster.arrive;
    barrier.cluster.wait;
    xor.b32 %r8, %r3, 1;
    mapa.shared::cluster.u32 %r9, %r6, %r8;
    ld.shared::cluster.u32 %r10, [%r9];
    getctarank.shared::cluster.u32 %r11, %r9;
    mov.u32 %r12, %dynamic_smem_size;
    mov.u32 %r13, own;
    mapa.shared::cluster.u32 %r14, %r13, %r8;
    ld.shared::cluster.u32 %r15, [%r14];
    getctarank.shared::cluster.u32 %r16, %r13;
    mad.lo.u32 %r17, %r2, 32, %r1;
    mul.wide.u32 %rd2, %r17, 32;
    add.u64 %rd3, %rd1, %rd2;
    st.global.v4.u32 [%rd3], {%r10, %r11, %r12, %r15};
    st.global.u32 [%rd3+16], %r16;
    barrier.cluster.arrive;
    barrier.cluster.wait;
    ret;
""", directives=".reqnctapercluster 2, 1, 1", declarations=".shared .align 4 .b8 own[4];")


@pytest.mark.parametrize("target", TARGETS)
def test_dynamic_shared_memory_is_a_kth_a_cta(target):
    per_cta = 128
    out = np.zeros(4 * 32 * 8, np.uint32)
    workgroups, size = _launch_geometry((4, 1, 1), (32, 1, 1), (2, 1, 1))
    _program(DYNAMIC, target).launch("dynamic", [out], grid=workgroups, block=size, shared_bytes=2 * per_cta)
    want = np.array([[(cta ^ 1) * 100 + t, (cta % 2) ^ 1, per_cta, (cta % 2) ^ 1, cta % 2]
                     for cta in range(4) for t in range(32)], np.uint32)
    assert (out.reshape(-1, 8)[:, :5] == want).all()


# ------------------------------------------------------------------------------------------------ bulk copies

MULTICAST = HEADER + """
.visible .entry multicast(.param .u64 psrc, .param .u64 pout, .param .u32 pmask, .param .align 64 .b8 map[128])
    .reqnctapercluster 4, 1, 1
{
    .reg .pred %p<4>;
    .reg .b16 %h<2>;
    .reg .b32 %r<24>;
    .reg .b64 %rd<12>;
    .shared .align 128 .b8 buf[64];
    .shared .align 128 .b8 box[64];
    .shared .align 8 .b64 bar[2];
    ld.param.u64 %rd1, [psrc];
    ld.param.u64 %rd2, [pout];
    ld.param.u32 %r1, [pmask];
    cvt.u16.u32 %h1, %r1;
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %cluster_ctarank;
    mov.u32 %r4, %clusterid.x;
    shl.b32 %r5, %r2, 2;
    mov.u32 %r6, buf;
    add.u32 %r7, %r6, %r5;
    st.shared.u32 [%r7], -1;                // 16 threads: each CTA's buf and box start as all ones
    mov.u32 %r8, box;
    add.u32 %r9, %r8, %r5;
    st.shared.u32 [%r9], -1;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 mbarrier.init.shared.b64 [bar], 1;
    @%p1 mbarrier.init.shared.b64 [bar+8], 1;
    fence.mbarrier_init.release.cluster;
    barrier.cluster.arrive;
    barrier.cluster.wait;
    setp.eq.u32 %p2, %r3, 0;
    and.pred %p2, %p2, %p1;                 // thread 0 of rank 0 issues both copies for the cluster
    mul.wide.u32 %rd3, %r4, 64;
    add.u64 %rd4, %rd1, %rd3;
    mov.u32 %r10, bar;
    mul.lo.u32 %r11, %r4, 16;               // the tensor copy's coordinate: the cluster's 16 elements
    @%p2 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster
        [buf], [%rd4], 64, [bar], %h1;
    @%p2 cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster
        [box], [map, {%r11}], [bar+8], %h1;
    shr.u32 %r12, %r1, %r3;
    and.b32 %r12, %r12, 1;
    setp.ne.u32 %p3, %r12, 0;
    and.pred %p3, %p3, %p1;                 // thread 0 of each CTA the mask selects expects both
    @%p3 mbarrier.arrive.expect_tx.shared.b64 %rd5, [bar], 64;
    @%p3 mbarrier.arrive.expect_tx.shared.b64 %rd5, [bar+8], 64;
    @!%p3 bra $waited;
$wait:
    mbarrier.try_wait.parity.shared.b64 %p1, [bar], 0;
    @!%p1 bra $wait;
$wait2:
    mbarrier.try_wait.parity.shared.b64 %p1, [bar+8], 0;
    @!%p1 bra $wait2;
$waited:
    bar.sync 0;
    ld.shared.u32 %r13, [%r7];
    ld.shared.u32 %r14, [%r9];
    mov.u32 %r15, %ctaid.x;
    mad.lo.u32 %r16, %r15, 16, %r2;
    mul.wide.u32 %rd6, %r16, 8;
    add.u64 %rd7, %rd2, %rd6;
    st.global.v2.u32 [%rd7], {%r13, %r14};
    barrier.cluster.arrive;
    barrier.cluster.wait;
    ret;
}
"""


_TENSOR_LINES = ("    @%p2 cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".multicast::cluster\n        [box], [map, {%r11}], [bar+8], %h1;\n",
                 "    @%p3 mbarrier.arrive.expect_tx.shared.b64 %rd5, [bar+8], 64;\n", """$wait2:
    mbarrier.try_wait.parity.shared.b64 %p1, [bar+8], 0;
    @!%p1 bra $wait2;
""")
MULTICAST_BULK = functools.reduce(lambda text, line: text.replace(line, ""), _TENSOR_LINES, MULTICAST)


@pytest.mark.parametrize("target", TARGETS)
def test_multicast_bulk_copies_fill_the_ctas_of_the_mask(target):
    """The bulk copy alone (the AMD executor's buffers have no address a host-made tensor map could hold)."""
    assert MULTICAST_BULK.count("multicast::cluster") == 1
    source = RNG.integers(0, 1 << 32, 2 * 16, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(8 * 16 * 2, np.uint32)
    workgroups, size = _launch_geometry((8, 1, 1), (16, 1, 1), (4, 1, 1))
    mask = 0b1101
    _program(MULTICAST_BULK, target).launch("multicast", [source, out, mask, bytes(128)], grid=workgroups, block=size)
    got = out.reshape(8, 16, 2)
    for cta in range(8):
        cluster, rank = divmod(cta, 4)
        want = source[16 * cluster:16 * cluster + 16] if mask >> rank & 1 else np.full(16, 0xFFFFFFFF, np.uint32)
        assert (got[cta, :, 0] == want).all() and (got[cta, :, 1] == 0xFFFFFFFF).all(), cta


@pytest.mark.parametrize("mask", [0b1011, 0b0100, 0b1111])
def test_multicast_bulk_and_tensor_copies_fill_the_ctas_of_the_mask(mask):
    """Host only: the tensor map holds a host address (the AMD code compiles, test below). 16-thread CTAs:
    a wave holds several CTAs, each waiting at its own bar.sync."""
    source = RNG.integers(0, 1 << 32, 2 * 16, dtype=np.uint64).astype(np.uint32)
    tensor = RNG.integers(0, 1 << 32, 2 * 16, dtype=np.uint64).astype(np.uint32)
    image = runtime.encode_tensor_map(2, tensor.ctypes.data, [32], [], [16])  # CU_TENSOR_MAP_DATA_TYPE_UINT32
    out = np.zeros(8 * 16 * 2, np.uint32)
    workgroups, size = _launch_geometry((8, 1, 1), (16, 1, 1), (4, 1, 1))
    _program(MULTICAST, "host").launch("multicast", [source, out, mask, image], grid=workgroups, block=size)
    got = out.reshape(8, 16, 2)
    for cta in range(8):
        cluster, rank = divmod(cta, 4)
        selected = mask >> rank & 1
        want_buf = source[16 * cluster:16 * cluster + 16] if selected else np.full(16, 0xFFFFFFFF, np.uint32)
        want_box = tensor[16 * cluster:16 * cluster + 16] if selected else np.full(16, 0xFFFFFFFF, np.uint32)
        assert (got[cta, :, 0] == want_buf).all() and (got[cta, :, 1] == want_box).all(), (cta, mask)


@pytest.mark.parametrize("processor", ["gfx942", "gfx1100"])
def test_the_multicast_kernel_compiles_for_amd(processor):
    program(MULTICAST, processor)


IGNORE_OOB = HEADER + "\n" + entry("ignore_oob", "u64 psrc, u64 pcases, u64 pout",
                                   ".pred %p<2>, .b32 %r<16>, .b64 %rd<12>", """
    mov.u32 %r1, %ctaid.x;
    mul.wide.u32 %rd4, %r1, 12;
    add.u64 %rd5, %rd2, %rd4;
    ld.global.u32 %r2, [%rd5];              // size
    ld.global.u32 %r3, [%rd5+4];            // ignoreBytesLeft
    ld.global.u32 %r4, [%rd5+8];            // ignoreBytesRight
    st.shared.v4.u32 [buf], {-1, -1, -1, -1};
    st.shared.v4.u32 [buf+16], {-1, -1, -1, -1};
    st.shared.v4.u32 [buf+32], {-1, -1, -1, -1};
    st.shared.v4.u32 [buf+48], {-1, -1, -1, -1};
    mbarrier.init.shared.b64 [bar], 1;
    mul.wide.u32 %rd6, %r1, 64;
    add.u64 %rd7, %rd1, %rd6;
    cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes.ignore_oob [buf], [%rd7], %r2, %r3, %r4, [bar];
    mbarrier.arrive.expect_tx.shared.b64 %rd8, [bar], %r2;
$wait:
    mbarrier.try_wait.parity.shared.b64 %p1, [bar], 0;
    @!%p1 bra $wait;
    add.u64 %rd9, %rd3, %rd6;
    ld.shared.v4.u32 {%r5, %r6, %r7, %r8}, [buf];
    st.global.v4.u32 [%rd9], {%r5, %r6, %r7, %r8};
    ld.shared.v4.u32 {%r5, %r6, %r7, %r8}, [buf+16];
    st.global.v4.u32 [%rd9+16], {%r5, %r6, %r7, %r8};
    ld.shared.v4.u32 {%r5, %r6, %r7, %r8}, [buf+32];
    st.global.v4.u32 [%rd9+32], {%r5, %r6, %r7, %r8};
    ld.shared.v4.u32 {%r5, %r6, %r7, %r8}, [buf+48];
    st.global.v4.u32 [%rd9+48], {%r5, %r6, %r7, %r8};
    ret;
""", declarations=".shared .align 16 .b8 buf[64];\n.shared .align 8 .b64 bar;")


@pytest.mark.parametrize("target", TARGETS)
def test_ignore_oob_copies_all_but_the_ignored_edges_and_completes_the_whole_size(target):
    """The ignored bytes are not read: the destination keeps its all-ones there (one of the indeterminate
    values the ISA allows); the phase completes on `size` bytes of tx."""
    cases = [(16, 0, 0), (16, 15, 0), (16, 3, 9), (32, 15, 15), (48, 1, 2), (64, 7, 15), (64, 0, 0), (32, 8, 0)]
    source = RNG.integers(0, 256, 64 * len(cases), dtype=np.uint64).astype(np.uint8)
    out = np.zeros(64 * len(cases), np.uint8)
    table = np.array(cases, np.uint32)
    _program(IGNORE_OOB, target).launch("ignore_oob", [source, table, out], grid=(len(cases), 1, 1))
    for index, (size, left, right) in enumerate(cases):
        want = np.full(64, 0xFF, np.uint8)
        want[left:size - right] = source[64 * index + left:64 * index + size - right]
        assert (out[64 * index:64 * index + 64] == want).all(), (size, left, right)


@pytest.mark.parametrize("processor", ["gfx942", "gfx1100"])
def test_the_code_objects_metadata_gives_the_shim_the_cluster_shape(processor):
    """.fatkit.cluster_dims on the cluster kernel alone; its LDS holds every CTA's static shared memory."""
    both = DIVERGENT + _registers_kernel((1, 2, 2)).replace(HEADER, "") + IGNORE_OOB.replace(HEADER, "")
    code_object = parse_code_object(translate(both, Options(target=processor)).product)
    kernels = {k.name: k for k in code_object.kernels}
    metadata = {k[".name"]: k for k in code_object.metadata["amdhsa.kernels"]}
    assert metadata["divergent"][".fatkit.cluster_dims"] == [2, 1, 1]
    assert metadata["registers"][".fatkit.cluster_dims"] == [1, 2, 2]
    assert ".fatkit.cluster_dims" not in metadata["ignore_oob"]
    assert kernels["divergent"].group_segment_size >= 2 * (256 + 192)  # s and the 16 named barriers, twice


# ------------------------------------------------------------------------------------------------ refusals

@pytest.mark.parametrize("directives, shared, reason", [
    (".maxntid 512 .reqnctapercluster 4, 1, 1", 16, "(2048 > 1024 threads)"),
    # 12288 bytes and the CTA's 16 named barriers (3 words each): 12480 a CTA
    (".reqnctapercluster 2, 2, 2", 12288, "8 CTAs of 12480 bytes of shared memory cannot run as one workgroup "
                                          "(99840 > 65536 bytes of LDS)"),
    (".explicitcluster .maxntid 1024", 16, "clusters (of a shape given at launch) of 2 CTAs of 1024 threads cannot "
                                           "run as one workgroup (2048 > 1024 threads)"),
    (".maxclusterrank 4", 40000, "clusters (of a shape given at launch) of 2 CTAs of 40192 bytes of shared memory "
                                 "cannot run as one workgroup (80384 > 65536 bytes of LDS)"),
])
def test_clusters_that_cannot_be_one_workgroup_are_refused_with_the_reason(directives, shared, reason):
    ptx = HEADER + "\n" + entry("big", "u64 out", ".b32 %r<4>, .b64 %rd<2>", """
    mov.u32 %r1, s;
    mapa.shared::cluster.u32 %r2, %r1, 1;
    st.shared::cluster.u32 [%r2], 0;
    ret;
""", directives=directives, declarations=f".shared .align 16 .b8 s[{shared}];")
    (report,) = run(ptx, Options(target="gfx942"), until="lower").reports
    assert report.status == "unsupported" and reason in report.reason, report.reason


# ------------------------------------------------------------------------------------------------ corpus

def _cluster_forms(function) -> bool:
    """Whether a kernel body uses a cluster form: barrier.cluster, mapa, getctarank, clusterlaunchcontrol,
    a .shared::cluster access or a cluster register."""
    for instruction in function.instructions():
        if (instruction.opcode in ("mapa", "getctarank", "clusterlaunchcontrol")
                or (instruction.opcode == "barrier" and instruction.has("cluster"))
                or "shared::cluster" in instruction.modifiers
                or any(type(o) is ast.Name and o.name.startswith(("%cluster", "%is_explicit_cluster"))
                       for o in instruction.operands)):
            return True
    return False


@pytest.mark.parametrize("target", ["gfx942", "gfx1100"])
def test_warp_langs_cluster_kernels_lower(target):
    """warp-lang 1.19.0's compute_121 PTX: CUB kernels with barrier.cluster and clusterlaunchcontrol (clusters
    of one CTA: no cluster directives). Every cluster form lowers; 4 of them stop elsewhere, at forms that
    are not the cluster's: cp.async.bulk's .ignore_oob (PTX 9.2) and st.relaxed.gpu.b128."""
    path = corpus_file("warp/bin/warp.so")
    options = Options(target=target)
    ok, refused = 0, []
    for module in ptx_modules(scan_paths([path]), on_error=pytest.fail):
        if "cluster" not in module.text:
            continue
        clustered = {f.name for f in parse(module.text, options).kernels if _cluster_forms(f)}
        for report in run(module.text, options, until="lower").reports:
            if report.name in clustered:
                ok += report.status == "ok"
                refused += [report.reason] if report.status != "ok" else []
    assert ok and all(".ignore_oob" in reason or "single-copy-atomic" in reason for reason in refused), refused


@pytest.mark.parametrize("target", ["gfx942", "gfx1100"])
def test_the_samples_cluster_kernels_lower(target):
    text = (Path(__file__).parent / "samples" / "ptx" / "hopper.sm_90a.ptx").read_text()
    reports = {r.name: r for r in run(text, Options(target=target), until="lower").reports}
    for name in ("_Z9clusteredPi", "_Z14cluster_boundsPi"):  # (.maxclusterrank 2: a launch-given shape)
        assert reports[name].status == "ok", reports[name].reason


# ------------------------------------------------------------------------------------------------ launch-given shapes

def _planned(program, kernel: str, grid, block, cluster, shared_bytes: int = 0) -> runtime.ClusterLaunch:
    """The launch the shim makes (fatkit.runtime.plan_cluster_launch) from the kernel's code-object metadata;
    the host target has none: there the entry the amdgpu target writes, from the kernel's signature."""
    if hasattr(program, "code_object"):
        (entry,) = [k for k in parse_code_object(program.code_object).metadata["amdhsa.kernels"]
                    if k[".name"] == kernel]
    else:
        signature = next(kernel_signature(k) for k in parse(program.ptx, Options(target="host")).kernels
                         if k.name == kernel)
        entry = {runtime.CLUSTER_SHAPE_OFFSET_KEY: signature.params[-1].offset, runtime.CLUSTER_MAX_CTAS_KEY: 8}
    return runtime.plan_cluster_launch(entry, grid, block, cluster, shared_bytes)


@functools.cache
def _launchable(ptx: str, target: str):
    loaded = program(ptx, target)
    loaded.ptx = ptx
    return loaded


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("directive, shape, grid, block, explicit", [
    (".explicitcluster", (2, 2, 1), (4, 2, 1), (16, 2, 1), 1),
    (".explicitcluster", (1, 2, 2), (2, 2, 4), (8, 2, 4), 1),
    (".maxclusterrank 4", (4, 1, 1), (4, 1, 2), (32, 1, 1), 1),
    (".maxclusterrank 4", None, (3, 2, 1), (32, 1, 1), 0),  # a launch without clusters: of one CTA, implicit
])
def test_cluster_registers_of_a_launch_given_shape_are_each_ctas(target, directive, shape, grid, block, explicit):
    """The shim writes the launch's shape after CUDA's parameters (docs/runtime.md); the registers follow it."""
    loaded = _launchable(_registers_kernel(None, directive), target)
    plan = _planned(loaded, "registers", grid, block, shape)
    want = _registers_model(grid, block, shape or (1, 1, 1), explicit)
    out = np.zeros(want.size, np.uint32)
    loaded.launch("registers", [out, plan.kernarg_tail], grid=plan.grid, block=plan.block)
    got = out.reshape(want.shape)
    for column, name in enumerate([*REGISTERS, "%is_explicit_cluster"]):
        assert (got[:, column] == want[:, column]).all(), name


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("k", [2, 4])
def test_ctas_of_a_launch_given_cluster_exchange_shared_memory(target, k):
    """dsmem with `.explicitcluster` in place of its `.reqnctapercluster 4, 1, 1`, launched in clusters of k."""
    loaded = _launchable(DSMEM.replace(".reqnctapercluster 4, 1, 1", ".explicitcluster"), target)
    plan = _planned(loaded, "dsmem", (8, 1, 1), (32, 1, 1), (k, 1, 1))
    a = RNG.integers(0, 1 << 32, 8 * 32, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(8 * 32 * 8, np.uint32)
    loaded.launch("dsmem", [a, out, plan.kernarg_tail], grid=plan.grid, block=plan.block)
    assert (out == _dsmem_model(a, k)).all()


@pytest.mark.parametrize("target", TARGETS)
def test_dynamic_shared_memory_of_a_launch_given_cluster_is_a_kth_a_cta(target):
    loaded = _launchable(DYNAMIC.replace(".reqnctapercluster 2, 1, 1", ".maxclusterrank 2"), target)
    per_cta = 128
    plan = _planned(loaded, "dynamic", (4, 1, 1), (32, 1, 1), (2, 1, 1), per_cta)
    assert plan.dynamic_shared_bytes == 2 * per_cta
    out = np.zeros(4 * 32 * 8, np.uint32)
    loaded.launch("dynamic", [out, plan.kernarg_tail], grid=plan.grid, block=plan.block,
                  shared_bytes=plan.dynamic_shared_bytes)
    want = np.array([[(cta ^ 1) * 100 + t, (cta % 2) ^ 1, per_cta, (cta % 2) ^ 1, cta % 2]
                     for cta in range(4) for t in range(32)], np.uint32)
    assert (out.reshape(-1, 8)[:, :5] == want).all()


@pytest.mark.parametrize("processor", ["gfx942", "gfx1100"])
def test_the_code_objects_metadata_says_where_the_launch_given_shape_goes(processor):
    """The shape's offset (after the 8-byte parameter buffer) and the most CTAs the LDS was laid out for
    (`.maxclusterrank 4`; CUDA's portable 8 for `.explicitcluster`); the shim's checks refuse what cannot run."""
    kernels = (_registers_kernel(None, ".maxclusterrank 4")
               + DSMEM.replace(".reqnctapercluster 4, 1, 1", ".explicitcluster").replace(HEADER, ""))
    code_object = parse_code_object(translate(kernels, Options(target=processor)).product)
    metadata = {k[".name"]: k for k in code_object.metadata["amdhsa.kernels"]}
    sizes = {k.name: k.group_segment_size for k in code_object.kernels}
    keys = (runtime.CLUSTER_SHAPE_OFFSET_KEY, runtime.CLUSTER_MAX_CTAS_KEY)
    assert [metadata[name][key] for name in ("registers", "dsmem") for key in keys] == [8, 4, 16, 8]
    assert runtime.CLUSTER_DIMS_KEY not in metadata["dsmem"] and sizes["dsmem"] >= 8 * (128 + 128 + 4)
    for grid, block, cluster, shared, message in [((16, 1, 1), (32, 1, 1), (16, 1, 1), 0, "holds shared memory for 8"),
                                                  ((8, 1, 1), (512, 1, 1), (4, 1, 1), 0, "2048 > 1024 threads"),
                                                  ((6, 1, 1), (32, 1, 1), (4, 1, 1), 0, "not a whole number"),
                                                  ((8, 1, 1), (32, 1, 1), (4, 1, 1), 20000, "bytes of LDS")]:
        with pytest.raises(runtime.ClusterLaunchError, match=message):
            runtime.plan_cluster_launch(metadata["dsmem"], grid, block, cluster, shared)
    plan = runtime.plan_cluster_launch(metadata["dsmem"], (8, 2, 1), (32, 1, 1), (4, 1, 1), 100)
    assert (plan.grid, plan.block, plan.dynamic_shared_bytes, plan.kernarg_offset, plan.kernarg_tail) == \
           ((2, 2, 1), (32, 1, 4), 400, 16, bytes([4, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0]))


ELECTED_MULTICAST = HEADER + """
.visible .entry elected_multicast(.param .u64 pout, .param .u32 pmask, .param .align 64 .b8 map[128])
    .reqnctapercluster 4, 1, 1
{
    .reg .pred %p<8>;
    .reg .b16 %h<2>;
    .reg .b32 %r<24>;
    .reg .b64 %rd<12>;
    .shared .align 128 .b8 box[128];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd2, [pout];
    ld.param.u32 %r1, [pmask];
    cvt.u16.u32 %h1, %r1;
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %cluster_ctarank;
    mov.u32 %r4, %clusterid.x;
    shl.b32 %r5, %r2, 2;
    mov.u32 %r8, box;
    add.u32 %r9, %r8, %r5;
    st.shared.u32 [%r9], -1;                // each CTA's box starts as all ones
    setp.eq.u32 %p1, %r2, 0;
    @%p1 mbarrier.init.shared.b64 [bar], 1;
    fence.mbarrier_init.release.cluster;
    barrier.cluster.arrive;
    barrier.cluster.wait;
    shr.u32 %r12, %r1, %r3;
    and.b32 %r12, %r12, 1;
    setp.ne.u32 %p3, %r12, 0;               // the mask selects this CTA
    and.pred %p4, %p3, %p1;
    @%p4 mbarrier.arrive.expect_tx.shared.b64 %rd5, [bar], 128;
    mov.b64 %rd8, map;
    cvta.param.u64 %rd8, %rd8;              // the map's generic address, as nvcc passes it
    setp.ne.u32 %p2, %r3, 0;
    @%p2 bra $issued;                       // rank 0's warp issues, its elected lane the copy
    mov.u32 %r13, -1;
    elect.sync _|%p5, %r13;
    selp.b32 %r14, 1, 0, %p5;
    setp.eq.b32 %p6, %r14, 0;
    @%p6 bra $elected;
    mul.lo.u32 %r11, %r4, 32;               // the cluster's 32 elements
    mov.u32 %r10, bar;
    cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster
        [%r8], [%rd8, {%r11}], [%r10], %h1;
$elected:
$issued:
    @!%p3 bra $waited;
$wait:
    mbarrier.try_wait.parity.shared.b64 %p1, [bar], 0;
    @!%p1 bra $wait;
$waited:
    bar.sync 0;
    ld.shared.u32 %r15, [%r9];
    mov.u32 %r16, %ctaid.x;
    mad.lo.u32 %r17, %r16, 32, %r2;
    mul.wide.u32 %rd6, %r17, 4;
    add.u64 %rd7, %rd2, %rd6;
    st.global.u32 [%rd7], %r15;
    barrier.cluster.arrive;
    barrier.cluster.wait;
    ret;
}
"""


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("mask", [0b1011, 0b0100, 0b1111])
def test_an_elected_multicast_tensor_copy_is_shared_by_the_warp_and_fills_the_ctas_of_the_mask(target, mask):
    """Rank 0's warp issues the multicast under elect.sync (passes/elected.py moves it; its lanes share each
    destination's box, its issuer completes each selected CTA's mbarrier once): 32-thread CTAs, on gfx942 two
    CTAs a wave."""
    assert "fatkit::spread" in print_ptx(run_passes(parse_ptx(ELECTED_MULTICAST), until="elected").module)
    tensor = RNG.integers(0, 1 << 32, 2 * 32, dtype=np.uint64).astype(np.uint32)
    image = runtime.encode_tensor_map(2, tensor.ctypes.data, [64], [], [32])  # UINT32, a 32-element box
    out = np.zeros(8 * 32, np.uint32)
    workgroups, size = _launch_geometry((8, 1, 1), (32, 1, 1), (4, 1, 1))
    _program(ELECTED_MULTICAST, target).launch("elected_multicast", [out, mask, image], grid=workgroups, block=size,
                                               buffers=(tensor,))
    got = out.reshape(8, 32)
    for cta in range(8):
        cluster, rank = divmod(cta, 4)
        want = tensor[32 * cluster:32 * cluster + 32] if mask >> rank & 1 else np.full(32, 0xFFFFFFFF, np.uint32)
        assert (got[cta] == want).all(), (cta, mask)
