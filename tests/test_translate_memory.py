"""Memory, atomics, fences and barriers: ld/st orderings and hints, atom/red, fence/membar, named barriers
with counts, bar.arrive, bar.red, dynamic shared memory, isspacep and variable initializers.

Kernels with a barrier run one OS thread per GPU thread on the host, so their atomics really race. The
expected values are computed here in Python; the AMD test compiles everything for gfx942 and gfx1100.
"""

from __future__ import annotations

import ctypes
import random
import re
import struct
import subprocess
from pathlib import Path

import pytest

from fatkit.errors import FatkitError
from fatkit.translate import pipeline
from fatkit.translate.pipeline import Options, translate
from tests.amdrun import TARGETS, EmulatedProgram, HostProgram
from tests.ptxrun import HEADER, M32
from tests.ptxframes import entry

OBJDUMP = Path("/usr/lib/llvm-22/bin/llvm-objdump")


def _host(ptx: str):
    translation = translate(ptx, Options(target="host"))
    assert all(k.status == "ok" for k in translation.kernels), translation.kernels
    return translation.product


def _program(ptx: str, target: str):
    """The kernel on `target`: the host JIT, or its AMD code object on fatkit.emulate."""
    if target == "host":
        return HostProgram(_host(ptx))
    translation = translate(ptx, Options(target=target))
    assert all(k.status == "ok" for k in translation.kernels), translation.kernels
    return EmulatedProgram(translation.product)


@pytest.fixture(params=TARGETS)
def target(request) -> str:
    return request.param


def _bfloat(x: float) -> int:  # exact for the small integers used here
    return struct.unpack("<I", struct.pack("<f", x))[0] >> 16


# --------------------------------------------------------------------------------------------------
# atom / red: every thread of a block (running together: the kernel has a barrier) updates shared counters

THREADS = 96
ATOMICS = HEADER + "\n" + entry("atomics", "u64 out, u64 out_f",
                                ".pred %p<4>, .b16 %h<4>, .b32 %r<32>, .b64 %rd<16>, .f32 %f<4>, .f64 %fd<2>", """
    mov.u32 %r1, %tid.x;
    add.u32 %r2, %r1, 1;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra START;
    mov.u32 %r3, 0;
    st.shared.u32 [counters], %r3;
    st.shared.u32 [counters+4], %r3;
    st.shared.u32 [counters+8], %r3;
START:
    bar.sync 0;
    atom.global.add.u32 %r4, [%rd1], %r2;
    cvt.u64.u32 %rd3, %r2;
    atom.relaxed.gpu.global.add.u64 %rd4, [%rd1+8], %rd3;
    neg.s32 %r5, %r2;
    red.global.add.s32 [%rd1+16], %r5;
    xor.b32 %r6, %r1, 37;
    atom.acquire.sys.global.min.s32 %r7, [%rd1+20], %r6;
    atom.release.cta.global.max.u32 %r7, [%rd1+24], %r6;
    shl.b32 %r8, 1, %r1;
    atom.global.or.b32 %r7, [%rd1+28], %r8;
    not.b32 %r9, %r8;
    red.release.gpu.global.and.b32 [%rd1+32], %r9;
    atom.global.xor.b32 %r7, [%rd1+36], %r2;
    atom.global.inc.u32 %r7, [%rd1+40], 9;
    atom.global.dec.u32 %r7, [%rd1+44], 4;
    cvt.rn.f32.u32 %f1, %r2;
    atom.global.add.f32 %f2, [%rd2], %f1;
    cvt.rn.f64.u32 %fd1, %r2;
    red.global.add.f64 [%rd2+8], %fd1;
    mov.b16 %h1, 0x3C00;
    atom.global.add.noftz.f16 %h2, [%rd2+16], %h1;
    mov.b16 %h1, 0x3F80;
    red.global.add.noftz.bf16 [%rd2+18], %h1;
    mov.b32 %r10, 0x40003C00;
    atom.global.add.noftz.f16x2 %r11, [%rd2+20], %r10;
    mov.b32 %r10, 0x40003F80;
    red.global.add.noftz.bf16x2 [%rd2+24], %r10;
    mov.f32 %f3, 0f40000000;
    atom.global.v2.f32.add {%f1, %f2}, [%rd2+32], {%f1, %f3};
    atom.shared.add.u32 %r12, [counters], %r2;
    atom.shared::cta.exch.b32 %r13, [counters+4], %r2;
    atom.add.u32 %r14, [%rd1+48], 1;
    red.shared.add.u32 [counters+8], 2;
    bar.sync 0;
    @%p1 bra DONE;
    ld.shared.u32 %r15, [counters];
    st.global.u32 [%rd1+52], %r15;
    ld.shared.u32 %r15, [counters+4];
    st.global.u32 [%rd1+56], %r15;
    ld.shared.u32 %r15, [counters+8];
    st.global.u32 [%rd1+60], %r15;
DONE:
    ret;
""", declarations=".shared .align 8 .b8 counters[64];")


def test_atomics_from_many_threads(target):
    out = (ctypes.c_uint32 * 16)()
    out[5], out[6], out[8] = 0x7FFFFFFF, 0, M32
    out_f = (ctypes.c_uint8 * 48)()
    _program(ATOMICS, target).launch("atomics", [out, out_f], block=(THREADS, 1, 1))
    n = THREADS
    total = n * (n + 1) // 2
    values = [t ^ 37 for t in range(n)]
    words = list(out)
    assert words[0] == total
    assert words[2] | words[3] << 32 == total
    assert words[4] == (-total) & M32
    assert words[5] == min(values) and words[6] == max(values)
    assert words[7] == (1 << 32) - 1 and words[8] == 0  # shl by ≥32 is 0 in PTX: lanes 32+ add nothing
    expected_xor = 0
    for t in range(n):
        expected_xor ^= t + 1
    assert words[9] == expected_xor
    assert words[10] == n % 10  # inc wraps to 0 after 9
    dec = 0
    for _ in range(n):
        dec = 4 if dec == 0 or dec > 4 else dec - 1
    assert words[11] == dec
    assert words[12] == n
    assert words[13] == total and 1 <= words[14] <= n and words[15] == 2 * n
    raw = bytes(out_f)
    assert struct.unpack_from("<f", raw, 0)[0] == total
    assert struct.unpack_from("<d", raw, 8)[0] == total
    assert struct.unpack_from("<e", raw, 16)[0] == n
    assert struct.unpack_from("<H", raw, 18)[0] == _bfloat(n)
    assert struct.unpack_from("<ee", raw, 20) == (n, 2 * n)
    assert struct.unpack_from("<HH", raw, 24) == (_bfloat(n), _bfloat(2 * n))
    assert struct.unpack_from("<ff", raw, 32) == (total, 2 * n)


CAS_LOOP = HEADER + "\n" + entry("cas_sum", "u64 out", ".pred %p<2>, .b16 %h<4>, .b32 %r<8>, .b64 %rd<4>", """
    mov.u32 %r1, %tid.x;
    bar.sync 0;
    ld.volatile.global.u32 %r2, [%rd1];
RETRY:
    mad.lo.u32 %r3, %r2, 3, %r1;
    atom.acq_rel.gpu.global.cas.b32 %r4, [%rd1], %r2, %r3;
    setp.ne.u32 %p1, %r4, %r2;
    mov.u32 %r2, %r4;
    @%p1 bra RETRY;
    cvt.u64.u32 %rd2, %r1;
    atom.global.cas.b64 %rd3, [%rd1+8], %rd2, 7;
    cvt.u16.u32 %h1, %r1;
    add.u16 %h2, %h1, 1;
    atom.global.cas.b16 %h3, [%rd1+16], %h1, %h2;
    ret;
""")


def test_cas_loops_serialise_every_thread(target):
    # x = 3x + tid through a compare-and-swap loop: the result must be every thread's update applied once.
    out = (ctypes.c_uint64 * 3)(0, 0, 0xFFFF_FFFF_FFFF_0000)
    _program(CAS_LOOP, target).launch("cas_sum", [out], block=(8, 1, 1))
    assert _updates_undone(out[0], frozenset(range(8))), f"{out[0]:#x} is not each thread's update applied once"
    assert out[1] == 7  # only thread 0 found 0 there, then every compare fails on 7 (thread 7 stores 7)
    # b16: thread t replaces t by t + 1, so the threads that come in order count up as far as they can;
    # the neighbouring bytes stay
    assert out[2] >> 16 == 0xFFFF_FFFF_FFFF and 1 <= out[2] & 0xFFFF <= 8


def _updates_undone(value: int, left: frozenset) -> bool:
    """Whether undoing x = 3x + t (mod 2^32, where 3 is invertible) once for each t of `left`, in some
    order, leads back to the initial 0."""
    if not left:
        return value == 0
    return any(_updates_undone((value - t) * pow(3, -1, 1 << 32) & M32, left - {t}) for t in left)


def test_inc_and_dec_wrap_as_ptx_defines(target):
    ptx = HEADER + "\n" + entry("wrap", "u64 out, u32 limit", ".b32 %r<8>, .b64 %rd<4>", """
    atom.global.inc.u32 %r2, [%rd1], %r1;
    atom.global.dec.u32 %r3, [%rd1+4], %r1;
    st.global.u32 [%rd1+8], %r2;
    st.global.u32 [%rd1+12], %r3;
    ret;
""")
    program = _program(ptx, target)
    for start, limit in [(0, 0), (0, 5), (5, 5), (6, 5), (7, 5), (0, M32), (M32, M32), (M32, 3), (3, 0)]:
        cell = (ctypes.c_uint32 * 4)(start, start, 0, 0)
        program.launch("wrap", [cell, limit])
        assert cell[0] == (0 if start >= limit else start + 1)
        assert cell[1] == (limit if start == 0 or start > limit else start - 1)
        assert cell[2] == cell[3] == start


# --------------------------------------------------------------------------------------------------
# ld/st orderings and hints, prefetch, isspacep

# .v8 (256-bit accesses) needs sm_100.
LOADS = HEADER.replace("8.0", "8.8").replace("sm_90", "sm_100") + """
.global .align 4 .u32 answer = 42;
.const .align 8 .b8 table[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
""" + entry("loads", "u64 in, u64 out", ".pred %p<8>, .b32 %r<40>, .b64 %rd<16>, .f32 %f<8>", """
    mov.u64 %rd3, 0x1234;  // a cache policy (createpolicy's): only a hint
    ld.global.L2::cache_hint.u32 %r1, [%rd1], %rd3;
    ld.global.L1::evict_last.L2::128B.u32 %r2, [%rd1+4];
    ld.global.nc.v4.u32 {%r3, %r4, %r5, %r6}, [%rd1];
    ldu.global.u32 %r7, [%rd1+8];
    ld.relaxed.gpu.global.u32 %r8, [%rd1+12];
    ld.acquire.sys.u32 %r9, [%rd1];
    ld.volatile.global.v2.u32 {%r10, _}, [%rd1+4];
    ld.global.cs.L2::256B.v8.u32 {%r11, %r12, %r13, %r14, %r15, %r16, %r17, %r18}, [%rd1];
    ld.mmio.relaxed.sys.global.u32 %r19, [%rd1+28];
    ld.global.u32 %r20, [answer];
    ld.const.u32 %r21, [table+4];
    prefetch.global.L2 [%rd1];
    prefetch.local.L1 [scratch];
    prefetchu.L1 [%rd1];
    prefetch.global.L2::evict_last [%rd1];
    st.global.wt.u32 [%rd2], %r1;
    st.global.L1::no_allocate.u32 [%rd2+4], %r2;
    st.release.cta.global.v4.u32 [%rd2+8], {%r3, %r4, %r5, %r6};
    st.relaxed.sys.global.u32 [%rd2+24], %r7;
    st.volatile.global.u32 [%rd2+28], %r8;
    st.global.L2::cache_hint.u32 [%rd2+32], %r9, %rd3;
    st.mmio.relaxed.sys.global.u32 [%rd2+36], %r10;
    st.global.v8.u32 [%rd2+64], {%r11, %r12, %r13, %r14, %r15, %r16, %r17, %r18};
    st.global.L2::evict_last.v8.u32 [%rd2+64], {_, _, _, _, _, %r1, _, _};  // writes only out[21]
    st.global.u32 [%rd2+40], %r19;
    st.global.u32 [%rd2+44], %r20;
    st.global.u32 [%rd2+48], %r21;
    st.shared.relaxed.cta.u32 [tile], %r1;
    ld.shared::cta.acquire.cta.u32 %r22, [tile];
    st.global.u32 [%rd2+52], %r22;
    // isspacep: one bit each of 12 checks
    mov.u64 %rd4, tile;
    cvta.shared.u64 %rd5, %rd4;
    mov.u64 %rd6, scratch;
    cvta.local.u64 %rd7, %rd6;
    mov.u64 %rd8, table;
    cvta.const.u64 %rd9, %rd8;
    mov.u32 %r30, 0;
    isspacep.global %p1, %rd1;
    isspacep.shared %p2, %rd1;
    isspacep.local %p3, %rd1;
    isspacep.const %p4, %rd1;
    selp.u32 %r31, 1, 0, %p1;
    selp.u32 %r32, 2, 0, %p2;
    or.b32 %r31, %r31, %r32;
    selp.u32 %r32, 4, 0, %p3;
    or.b32 %r31, %r31, %r32;
    selp.u32 %r32, 8, 0, %p4;
    or.b32 %r30, %r31, %r32;
    isspacep.shared %p1, %rd5;
    isspacep.global %p2, %rd5;
    isspacep.local %p3, %rd7;
    isspacep.global %p4, %rd7;
    selp.u32 %r31, 16, 0, %p1;
    or.b32 %r30, %r30, %r31;
    selp.u32 %r31, 32, 0, %p2;
    or.b32 %r30, %r30, %r31;
    selp.u32 %r31, 64, 0, %p3;
    or.b32 %r30, %r30, %r31;
    selp.u32 %r31, 128, 0, %p4;
    or.b32 %r30, %r30, %r31;
    isspacep.const %p1, %rd9;
    isspacep.global %p2, %rd9;
    isspacep.shared::cta %p3, %rd7;
    selp.u32 %r31, 256, 0, %p1;
    or.b32 %r30, %r30, %r31;
    selp.u32 %r31, 512, 0, %p2;
    or.b32 %r30, %r30, %r31;
    selp.u32 %r31, 1024, 0, %p3;
    or.b32 %r30, %r30, %r31;
    st.global.u32 [%rd2+56], %r30;
    ret;
""", declarations=".local .align 4 .b8 scratch[8];\n.shared .align 16 .b8 tile[32];")


def test_loads_and_stores_with_orderings_and_hints(target):
    words = [random.Random(5).getrandbits(32) for _ in range(8)]
    source, out = (ctypes.c_uint32 * 8)(*words), (ctypes.c_uint32 * 24)()
    _program(LOADS, target).launch("loads", [source, out], block=(2, 1, 1))
    w = words
    assert list(out[:14]) == [w[0], w[1], w[0], w[1], w[2], w[3], w[2], w[3], w[0], w[1], w[7], 42,
                              int.from_bytes(bytes([5, 6, 7, 8]), "little"), w[0]]
    assert list(out[16:24]) == w[:5] + [w[0]] + w[6:]
    # isspacep: a global pointer is global only; the block's shared, the thread's local and the module's
    # const addresses are each in their own space and not global
    assert out[14] == 1 | 16 | 64 | 256


# --------------------------------------------------------------------------------------------------
# fences and every barrier form

FENCES = HEADER + "\n" + entry("fences", "u64 out", ".pred %p<4>, .b32 %r<8>, .b64 %rd<4>", """
    membar.cta;
    membar.gl;
    membar.sys;
    fence.cta;
    fence.sc.cta;
    fence.sc.gpu;
    fence.sc.sys;
    fence.sc.cluster;
    fence.acq_rel.cta;
    fence.acq_rel.gpu;
    fence.acq_rel.sys;
    fence.acq_rel.cluster;
    fence.acquire.sync_restrict::shared::cluster.cluster;
    fence.release.sync_restrict::shared::cta.cluster;
    fence.mbarrier_init.release.cluster;
    fence.proxy.alias;
    membar.proxy.alias;
    fence.proxy.async;
    fence.proxy.async.global;
    fence.proxy.async.shared::cta;
    fence.proxy.async.shared::cluster;
    fence.proxy.tensormap::generic.release.gpu;
    fence.proxy.tensormap::generic.acquire.gpu [%rd1], 128;
    fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster;
    mov.u32 %r1, %tid.x;
    nanosleep.u32 %r1;
    nanosleep.u32 1000;
    barrier.sync 0;
    barrier.sync.aligned 0;
    barrier.cta.sync 1, 64;
    bar.sync 2;
    bar.cta.sync 3, 64;
    barrier.arrive 4, 64;
    barrier.cta.arrive.aligned 5, 64;
    bar.arrive 6, 64;
    bar.cta.arrive 7, 64;
    barrier.sync 4, 64;
    barrier.sync 5, 64;
    barrier.sync 6, 64;
    barrier.sync 7, 64;
    and.b32 %r2, %r1, 3;
    setp.eq.u32 %p1, %r2, 0;
    barrier.red.popc.u32 %r3, 8, %p1;
    barrier.cta.red.popc.aligned.u32 %r4, 9, 64, !%p1;
    mov.u32 %r7, 11;
    bar.red.and.pred %p2, %r7, !%p1;
    bar.cta.red.or.pred %p3, 10, %p1;
    selp.u32 %r5, 1, 0, %p2;
    selp.u32 %r6, 1, 0, %p3;
    mul.wide.u32 %rd2, %r1, 16;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v4.u32 [%rd3], {%r3, %r4, %r5, %r6};
    ret;
""")


def test_every_fence_and_barrier_form_runs(target):
    out = (ctypes.c_uint32 * (64 * 4))()
    _program(FENCES, target).launch("fences", [out], block=(64, 1, 1))
    for t in range(64):  # 16 of the 64 threads have t % 4 == 0
        assert list(out[4 * t:4 * t + 4]) == [16, 48, 0, 1]


def test_bar_red_reduces_over_the_block_and_a_counted_subset(target):
    ptx = HEADER + "\n" + entry("reduce", "u64 in, u64 out", ".pred %p<4>, .b32 %r<12>, .b64 %rd<8>", """
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r2, [%rd4];
    setp.ne.u32 %p1, %r2, 0;
    bar.red.popc.u32 %r3, 0, %p1;
    mov.u32 %r9, 0;
    bar.red.and.pred %p2, %r9, %p1;
    bar.red.or.pred %p3, %r9, %p1;
    selp.u32 %r4, 1, 0, %p2;
    selp.u32 %r5, 1, 0, %p3;
    mov.u32 %r6, 0;
    setp.lt.u32 %p2, %r1, 64;
    @!%p2 bra SKIP;
    mov.u32 %r10, 1;
    mov.u32 %r11, 64;
    bar.red.popc.u32 %r6, %r10, %r11, %p1;
SKIP:
    mul.wide.u32 %rd5, %r1, 16;
    add.s64 %rd6, %rd2, %rd5;
    st.global.v4.u32 [%rd6], {%r3, %r4, %r5, %r6};
    ret;
""")
    program = _program(ptx, target)
    rng = random.Random(11)
    for votes in ([rng.getrandbits(1) for _ in range(96)], [1] * 96, [0] * 96):
        source, out = (ctypes.c_uint32 * 96)(*votes), (ctypes.c_uint32 * (96 * 4))()
        program.launch("reduce", [source, out], block=(96, 1, 1))
        for t in range(96):
            assert list(out[4 * t:4 * t + 4]) == [sum(votes), int(all(votes)), int(any(votes)),
                                                  sum(votes[:64]) if t < 64 else 0]


PRODUCER_CONSUMER = HEADER + "\n" + entry("pipeline", "u64 out, u32 rounds",
                                          ".pred %p<4>, .b32 %r<16>, .b64 %rd<8>", """
    mov.u32 %r2, %tid.x;
    and.b32 %r3, %r2, 63;
    shl.b32 %r4, %r3, 2;
    mov.u32 %r5, slots;
    add.u32 %r5, %r5, %r4;
    mov.u32 %r6, 0;
    mov.u32 %r7, 0;
    setp.lt.u32 %p1, %r2, 64;
    @!%p1 bra CONSUMER;
PRODUCE:
    mad.lo.u32 %r8, %r6, 1000, %r3;
    st.shared.u32 [%r5], %r8;
    bar.arrive 1, 128;
    add.u32 %r6, %r6, 1;
    setp.lt.u32 %p2, %r6, %r1;
    @!%p2 bra DONE;
    bar.sync 2, 128;
    bra.uni PRODUCE;
CONSUMER:
    bar.sync 1, 128;
    xor.b32 %r9, %r3, 17;
    shl.b32 %r9, %r9, 2;
    mov.u32 %r10, slots;
    add.u32 %r10, %r10, %r9;
    ld.shared.u32 %r11, [%r10];
    add.u32 %r7, %r7, %r11;
    add.u32 %r6, %r6, 1;
    setp.lt.u32 %p2, %r6, %r1;
    @!%p2 bra STORE;
    bar.arrive 2, 128;
    bra.uni CONSUMER;
STORE:
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r7;
DONE:
    ret;
""", declarations=".shared .align 4 .b8 slots[256];")


def test_named_barriers_carry_a_producer_consumer_pipeline(target):
    # Warps 0–1 produce into shared slots and arrive at barrier 1; warps 2–3 wait there, read a slot
    # another producer wrote and arrive at barrier 2, which the producers wait on before overwriting.
    rounds = 25
    out = (ctypes.c_uint32 * 64)()
    _program(PRODUCER_CONSUMER, target).launch("pipeline", [out, rounds], block=(128, 1, 1))
    for lane in range(64):
        assert out[lane] == sum(r * 1000 + (lane ^ 17) for r in range(rounds))


def test_a_barrier_nobody_can_complete_is_reported():
    ptx = HEADER + """
.visible .entry stuck()
{
    bar.sync 1, 96;
    ret;
}
"""
    program = _host(ptx)
    import fatkit.translate.targets.host as host

    saved, host._DEADLOCK_S = host._DEADLOCK_S, 0.5
    try:
        with pytest.raises(FatkitError, match="barrier 1 waited"):
            program.launch("stuck", [], block=(32, 1, 1))
    finally:
        host._DEADLOCK_S = saved


# --------------------------------------------------------------------------------------------------
# dynamic shared memory, shared variables of vector types, initializers

DYNAMIC = HEADER + """
.extern .shared .align 16 .b8 dynamic_smem[];
.extern .shared .align 8 .b8 also_dynamic[];
""" + entry("dynamic", "u64 out", ".b32 %r<12>, .b64 %rd<4>, .f32 %f<4>", """
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %dynamic_smem_size;
    mov.u32 %r3, %total_smem_size;
    shl.b32 %r4, %r1, 2;
    mov.u32 %r5, dynamic_smem;
    add.u32 %r6, %r5, %r4;
    mul.lo.u32 %r7, %r1, 7;
    st.shared.u32 [%r6], %r7;
    mov.f32 %f1, 0f3F800000;
    st.shared.v4.f32 [quad+16], {%f1, %f1, %f1, %f1};
    bar.sync 0;
    xor.b32 %r8, %r1, 1;
    shl.b32 %r8, %r8, 2;
    mov.u32 %r9, also_dynamic;
    add.u32 %r9, %r9, %r8;
    ld.shared.u32 %r10, [%r9];
    ld.shared.f32 %f2, [quad+28];
    cvt.rzi.u32.f32 %r11, %f2;
    mul.wide.u32 %rd2, %r1, 16;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v4.u32 [%rd3], {%r10, %r2, %r3, %r11};
    ret;
""", declarations=".shared .align 16 .v4 .f32 quad[2];")


# NCCL's `.shared .align 16 .b8 ncclShmem[];`: an unsized .shared array without .extern names the same
# dynamic shared memory (fatkit/translate/lower/module.py says why).
DYNAMIC_WITHOUT_EXTERN = DYNAMIC.replace(".extern .shared .align 8 .b8 also_dynamic[];",
                                         ".shared .align 8 .b8 also_dynamic[];")


@pytest.mark.parametrize("module", [DYNAMIC, DYNAMIC_WITHOUT_EXTERN], ids=["extern", "without-extern"])
def test_dynamic_shared_memory_grows_with_the_launch(module, target):
    assert module.count(".extern") == (2 if module is DYNAMIC else 1)
    program = _program(module, target)
    for threads, size in [(64, 256), (128, 4000)]:
        out = (ctypes.c_uint32 * (4 * threads))()
        program.launch("dynamic", [out], block=(threads, 1, 1), shared_bytes=size)
        for t in range(threads):
            assert list(out[4 * t:4 * t + 4]) == [7 * (t ^ 1), size, (32 + size + 127) // 128 * 128, 1]
    with pytest.raises(Exception, match="dynamic shared memory"):
        program.launch("dynamic", [0], block=(1, 1, 1), shared_bytes=1 << 20)


def test_an_unsized_shared_array_without_extern_is_dynamic_lds_on_amdgpu():
    options = Options(target="gfx942")
    lowered = pipeline.lower(pipeline.passes(pipeline.parse(DYNAMIC_WITHOUT_EXTERN, options), options), options)
    assert [r.status for r in lowered.reports] == ["ok"]
    # every dynamic array starts at one address, at the largest alignment among them
    assert re.search(r'@"also_dynamic" = external addrspace\(3\) global \[0 x i8\], align 16',
                     lowered.kernels[0].llvm_ir)
    (kernel,) = translate(DYNAMIC_WITHOUT_EXTERN, options).validated.kernels
    assert kernel.group_segment_size == 32  # the static `quad`; the launch adds the dynamic bytes


INITIALIZERS = HEADER + """
.global .align 2 .b16 half_bits = 0x3E00;
.global .align 16 .v4 .f32 four = {1.0, 0f40000000, -3.5, 0d7FF0000000000000};
.global .align 8 .v2 .u32 pair[2] = {{1, 2}, {3, 4}};
.const .align 8 .f64 wide = 0.1;
.global .align 1 .s8 tiny[3] = {-1, 2, -128};
""" + entry("initial", "u64 out", ".b16 %h<4>, .b32 %r<12>, .b64 %rd<4>", """
    ld.global.b16 %h1, [half_bits];
    st.global.b16 [%rd1], %h1;
    ld.global.v4.u32 {%r1, %r2, %r3, %r4}, [four];
    st.global.v4.u32 [%rd1+16], {%r1, %r2, %r3, %r4};
    ld.global.v4.u32 {%r1, %r2, %r3, %r4}, [pair];
    st.global.v4.u32 [%rd1+32], {%r1, %r2, %r3, %r4};
    ld.const.u64 %rd2, [wide];
    st.global.u64 [%rd1+8], %rd2;
    ld.global.s8 %r5, [tiny];
    ld.global.s8 %r6, [tiny+2];
    st.global.v2.u32 [%rd1+48], {%r5, %r6};
    ret;
""")


def test_module_variable_initializers_of_scalar_and_vector_types(target):
    out = (ctypes.c_uint8 * 56)()
    _program(INITIALIZERS, target).launch("initial", [out])
    raw = bytes(out)
    assert struct.unpack_from("<e", raw, 0)[0] == 1.5
    assert struct.unpack_from("<d", raw, 8)[0] == 0.1
    assert struct.unpack_from("<4f", raw, 16) == (1.0, 2.0, -3.5, float("inf"))
    assert struct.unpack_from("<4I", raw, 32) == (1, 2, 3, 4)
    assert struct.unpack_from("<2i", raw, 48) == (-1, -128)


def test_a_kernel_variable_hides_a_module_variable_of_its_name(target):
    ptx = HEADER + """
.global .align 4 .u32 x = 5;
""" + entry("hides", "u64 p", ".b32 %r<3>, .b64 %rd<2>", """
    mov.u32 %r1, 9;
    st.shared.u32 [x], %r1;
    ld.shared.u32 %r2, [x];
    st.global.u32 [%rd1], %r2;
    ret;
""", declarations=".shared .align 4 .u32 x;") + entry("sees", "u64 p", ".b32 %r<3>, .b64 %rd<2>", """
    ld.global.u32 %r2, [x];
    st.global.u32 [%rd1], %r2;
    ret;
""")
    program, cell = _program(ptx, target), (ctypes.c_uint32 * 1)()
    program.launch("hides", [cell])
    assert cell[0] == 9
    program.launch("sees", [cell])
    assert cell[0] == 5


# --------------------------------------------------------------------------------------------------
# errors that name what is missing

@pytest.mark.parametrize("instruction, why", [
    ("atom.shared::cgroup.add.u32 %r1, [%rd1], 1;", ".shared::cgroup is not a state space"),
    ("atom.global.min.f32 %f1, [%rd1], %f1;", "min on .f32"),
    ("atom.global.inc.u64 %rd2, [%rd1], 1;", "only for .u32"),
    ("ld.relaxed.global.u32 %r1, [%rd1];", "needs a scope"),
    ("ld.volatile.local.u32 %r1, [%rd1];", "not .local"),
    ("isspacep.param %p1, %rd1;", "generic .param"),
])
def test_unsupported_forms_say_why(instruction, why):
    ptx = HEADER + "\n" + entry("bad", "u64 p", ".pred %p<2>, .b32 %r<2>, .f32 %f<2>, .b64 %rd<3>", f"""
    {instruction}
    ret;
""")
    report = translate(ptx + ".visible .entry ok()\n{\n    ret;\n}\n", Options(target="host")).kernels[0]
    assert report.status == "unsupported" and why in report.reason


# --------------------------------------------------------------------------------------------------
# AMD: everything above compiles for wave64 and wave32, with the sync scopes PTX asked for

def _kernels(text: str) -> str:
    return text.split("\n", 3)[3]  # without the three header lines


AMD_MODULE = "\n".join(LOADS.split("\n")[:3]) + "\n" + "".join(
    _kernels(k) for k in (ATOMICS, CAS_LOOP, LOADS, FENCES, PRODUCER_CONSUMER, DYNAMIC, INITIALIZERS))


@pytest.mark.parametrize("processor", ["gfx942", "gfx1100"])
def test_everything_compiles_for_amd_with_its_sync_scopes(processor):
    options = Options(target=processor)
    lowered = pipeline.lower(pipeline.passes(pipeline.parse(AMD_MODULE, options), options), options)
    assert all(r.status == "ok" for r in lowered.reports), lowered.reports
    ir_text = {k.signature.name: k.llvm_ir for k in lowered.kernels}
    atomics = ir_text["atomics"]
    assert re.search(r'atomicrmw add ptr addrspace\(1\) %"[^"]+", i32 %"[^"]+" syncscope\("agent"\) monotonic', atomics)
    assert re.search(r'atomicrmw min ptr addrspace\(1\) .* acquire', atomics)  # .sys: no syncscope
    assert re.search(r'atomicrmw umax .* syncscope\("workgroup"\) release', atomics)
    assert "atomicrmw uinc_wrap" in atomics and "atomicrmw udec_wrap" in atomics
    assert re.search(r"atomicrmw fadd .* <2 x half>", atomics) and re.search(r"cmpxchg .* i16", atomics)  # bf16
    assert re.search(r'cmpxchg .* syncscope\("agent"\) acq_rel acquire', ir_text["cas_sum"])
    fences = ir_text["fences"]
    for fence in ['fence syncscope("workgroup") seq_cst', 'fence syncscope("agent") seq_cst', "fence seq_cst",
                  'fence syncscope("agent") acquire', 'fence syncscope("agent") release',
                  'fence syncscope("workgroup") acq_rel']:
        assert fence in fences, fence
    assert "@\"fatkit.barriers\"" in fences and fences.count("llvm.amdgcn.s.sleep") >= 3  # polls, nanosleep
    assert re.search(r'@"dynamic_smem" = external addrspace\(3\) global \[0 x i8\], align 16', ir_text["dynamic"])
    assert "llvm.amdgcn.is.shared" in ir_text["loads"] and "llvm.amdgcn.is.private" in ir_text["loads"]
    assert re.search(r'load atomic volatile i32, ptr addrspace\(1\) .* monotonic', ir_text["loads"])
    translation = translate(AMD_MODULE, options)
    lds = {k.name: k.group_segment_size for k in translation.validated.kernels}
    assert lds["fences"] >= 16 * 12 and lds["dynamic"] == 32  # the static bytes; the launch adds the dynamic
    if OBJDUMP.exists():
        path = Path(f"/tmp/fatkit-memory-{processor}.hsaco")
        path.write_bytes(translation.product)
        listing = subprocess.run([OBJDUMP, "-d", f"--mcpu={processor}", path], capture_output=True, text=True).stdout
        assert "s_sleep" in listing and "ds_add_rtn_u32" in listing
        assert "global_atomic_add" in listing or "flat_atomic_add" in listing


ALLOCA = HEADER + "\n" + entry("alloca_sum", "u64 out, u32 n", ".pred %p<2>, .b32 %r<8>, .b64 %rd<8>", """
    mul.wide.u32 %rd2, %r1, 4;
    alloca.u64 %rd3, %rd2, 16;
    cvta.local.u64 %rd3, %rd3;
    mov.u32 %r2, 0;
FILL:
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 bra SUM;
    mul.wide.u32 %rd4, %r2, 4;
    add.s64 %rd5, %rd3, %rd4;
    mul.lo.u32 %r3, %r2, %r2;
    st.u32 [%rd5], %r3;
    add.u32 %r2, %r2, 1;
    bra FILL;
SUM:
    mov.u32 %r4, 0;
    mov.u32 %r2, 0;
ADD:
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 bra DONE;
    mul.wide.u32 %rd4, %r2, 4;
    add.s64 %rd5, %rd3, %rd4;
    ld.u32 %r3, [%rd5];
    add.u32 %r4, %r4, %r3;
    add.u32 %r2, %r2, 1;
    bra ADD;
DONE:
    st.global.u32 [%rd1], %r4;
    ret;
""")


def test_alloca_gives_stack_bytes_in_local_space(target):
    """PTX `alloca` (a runtime-sized C array): stack bytes at a .local address, made generic by cvta.local."""
    program = _program(ALLOCA, target)
    out = (ctypes.c_uint32 * 1)()
    program.launch("alloca_sum", [out, 37])
    assert out[0] == sum(i * i for i in range(37))
    for processor in ("gfx942", "gfx1100"):
        assert [k.status for k in translate(ALLOCA, Options(target=processor)).kernels] == ["ok"]


PARAM_ADDRESS = HEADER + """
.visible .entry param_address(.param .u64 out, .param .align 8 .b8 pair[16], .param .u32 bias)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    mov.u64 %rd2, pair;
    ld.param.u32 %r1, [%rd2+8];
    cvta.param.u64 %rd3, %rd2;
    ld.u32 %r2, [%rd3+12];
    mov.u64 %rd4, bias;
    cvta.param.u64 %rd5, %rd4;
    ld.u32 %r3, [%rd5];
    add.u32 %r4, %r1, %r2;
    add.u32 %r4, %r4, %r3;
    st.global.u32 [%rd1], %r4;
    ret;
}
"""


def test_parameter_addresses_read_through_registers(target):
    """`mov.u64 %rd, param` takes a kernel parameter's address: ld.param through it, or cvta.param and a
    generic load (CUtensorMap and large Params structs are passed this way)."""
    import struct

    program = _program(PARAM_ADDRESS, target)
    out = (ctypes.c_uint32 * 1)()
    program.launch("param_address", [out, struct.pack("<QII", 0, 1000, 200), 7])
    assert out[0] == 1207
    for processor in ("gfx942", "gfx1100", "sm_90"):
        assert [k.status for k in translate(PARAM_ADDRESS, Options(target=processor)).kernels] == ["ok"]


STACK_AND_CLUSTER_OF_ONE = HEADER + """
.shared .align 16 .b8 tile[64];
""" + entry("stack_and_cluster", "u64 out", ".pred %p<3>, .b32 %r<8>, .b64 %rd<8>", """
    mov.u64 %rd6, 64;
    stacksave.u64 %rd2;
    alloca.u64 %rd3, %rd6;
    stackrestore.u64 %rd2;
    alloca.u64 %rd4, %rd6, 16;
    cvta.local.u64 %rd4, %rd4;
    st.u32 [%rd4+12], 41;
    ld.u32 %r1, [%rd4+12];
    add.u32 %r1, %r1, 1;
    and.b64 %rd7, %rd4, 15;
    cvt.u32.u64 %r5, %rd7;
    add.u32 %r1, %r1, %r5;
    mov.u32 %r2, tile;
    add.u32 %r2, %r2, 20;
    mapa.shared::cluster.u32 %r3, %r2, 0;
    sub.u32 %r3, %r3, %r2;
    getctarank.shared::cluster.u32 %r4, %r2;
    createpolicy.fractional.L2::evict_last.b64 %rd5, 0f3F000000;
    discard.global.L2 [%rd1], 128;
    applypriority.global.L2::evict_normal [%rd1], 128;
    pmevent 3;
    st.global.v4.u32 [%rd1], {%r1, %r3, %r4, 7};
    ret;
""")


def test_stack_save_restore_and_a_cluster_of_one():
    """An alloca of a dynamic size after stackrestore is usable stack, at its alignment (the ISA promises no
    address reuse to check); mapa and getctarank in a cluster of one CTA name the CTA itself; the cache hints
    and pmevent change nothing."""
    program = _host(STACK_AND_CLUSTER_OF_ONE)
    out = (ctypes.c_uint32 * 4)(9, 9, 9, 9)
    program.launch("stack_and_cluster", [ctypes.addressof(out)])
    assert list(out) == [42, 0, 0, 7]
    options = Options(target="gfx942")
    lowered = pipeline.lower(pipeline.passes(pipeline.parse(STACK_AND_CLUSTER_OF_ONE, options), options), options)
    assert [r.status for r in lowered.reports] == ["ok"]
    assert "llvm.stacksave.p5" in lowered.kernels[0].llvm_ir and "llvm.stackrestore.p5" in lowered.kernels[0].llvm_ir
    translate(STACK_AND_CLUSTER_OF_ONE, options)  # and LLVM compiles it for the GPU


SHARED_CLUSTER = HEADER + "\n" + entry("shared_cluster", "u64 out", ".b32 %r<8>, .b64 %rd<4>", """
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, words;
    add.u32 %r3, %r3, %r2;
    mapa.shared::cluster.u32 %r4, %r3, 0;
    st.shared::cluster.u32 [%r4], %r1;
    bar.sync 0;
    atom.shared::cluster.add.u32 %r5, [words], 100;
    red.shared::cluster.add.u32 [words+4], 1;
    bar.sync 0;
    xor.b32 %r6, %r2, 4;
    mov.u32 %r7, words;
    add.u32 %r7, %r7, %r6;
    ld.shared::cluster.u32 %r6, [%r7];
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd2, %rd1, %rd2;
    st.global.u32 [%rd2], %r6;
    ret;
""", declarations=".shared .align 4 .b8 words[128];")


def test_shared_cluster_accesses_reach_the_ctas_own_shared_memory():
    """In a cluster of one CTA, ld/st/atom/red.shared::cluster at shared::cta (and mapa'd) addresses are the
    CTA's own shared memory: thread t reads word t^1 after 32 atomic adds of 100 to word 0 and 32 of 1 to
    word 1."""
    program = _host(SHARED_CLUSTER)
    out = (ctypes.c_uint32 * 32)()
    program.launch("shared_cluster", [ctypes.addressof(out)], block=(32, 1, 1))
    words = list(range(32))
    words[0] += 32 * 100
    words[1] += 32
    assert list(out) == [words[t ^ 1] for t in range(32)]
    options = Options(target="gfx942")
    lowered = pipeline.lower(pipeline.passes(pipeline.parse(SHARED_CLUSTER, options), options), options)
    assert [r.status for r in lowered.reports] == ["ok"] and "addrspace(3)" in lowered.kernels[0].llvm_ir
