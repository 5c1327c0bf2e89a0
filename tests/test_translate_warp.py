"""Warp collectives and the lane/warp special registers: run on the CPU (`host`, one OS thread per GPU
thread, warps meeting in a rendezvous) against a Python model of the PTX ISA's pseudo-code, over full,
partial (block sizes not a multiple of 32) and divergent warps; and compiled for gfx942 (wave64: two warps
a wave) and gfx1100 (wave32)."""

from __future__ import annotations

import ctypes
import math
import random
import re
import struct
import time
from pathlib import Path

import pytest

from fatkit.errors import FatkitError
from fatkit.translate import pipeline
from fatkit.translate.pipeline import Options, lower, parse, passes, translate
from fatkit.translate.targets import host
from tests.amdrun import program as amd_program
from tests.ptxrun import HEADER, M32, bits, run_table
from tests.ptxframes import entry

WARP = 32
BLOCKS = [32, 48, 64, 96, 128]
RANDOM = random.Random(20261129)


@pytest.fixture(params=[32, 64], ids=["wave32", "wave64"])
def host_wave(request, monkeypatch):
    """The host target as it is (a warp a wave), or with waves of 64 lanes holding two warps, as gfx9
    runs them: the same tests then check warp.py's per-half logic (bases, shifted masks) on the CPU."""
    if request.param == 64:
        make = pipeline.target_named
        monkeypatch.setattr(pipeline, "target_named",
                            lambda name: host.HostTarget(wave_size=64) if name == "host" else make(name))
    return request.param


@pytest.fixture(params=["host-wave32", "host-wave64", "gfx1100", "gfx942"])
def wave(request, monkeypatch) -> str:
    """Where a warp test runs: the host target with waves of 32 or 64 lanes (as host_wave), or the AMD code
    objects on fatkit.emulate (wave32 gfx1100, wave64 gfx942). The target name to translate for."""
    if request.param == "host-wave64":
        make = pipeline.target_named
        monkeypatch.setattr(pipeline, "target_named",
                            lambda name: host.HostTarget(wave_size=64) if name == "host" else make(name))
    return "host" if request.param.startswith("host") else request.param


def _inputs(n: int) -> tuple[list[int], list[int]]:
    return [RANDOM.getrandbits(32) for _ in range(n)], [RANDOM.getrandbits(32) for _ in range(n)]


def _warp_of(i: int, n: int) -> range:
    """The threads of thread i's warp (the last warp of a block may be partial)."""
    first = i - i % WARP
    return range(first, min(first + WARP, n))


def _with_pred(instruction: str) -> str:
    """A snippet running `instruction` (writing %r11|%p1) and leaving value | pred << 32 in %rd10."""
    return (f"{instruction}\nselp.u32 %r12, 1, 0, %p1;\ncvt.u64.u32 %rd10, %r12;\nshl.b64 %rd10, %rd10, 32;\n"
            "cvt.u64.u32 %rd11, %r11;\nor.b64 %rd10, %rd10, %rd11;")


# ------------------------------------------------------------------------------------------------ shfl

def shfl_model(mode: str, values: list[int], lane: int, b: int, c: int, live: int) -> tuple[int | None, bool]:
    """The PTX ISA's shfl.sync pseudo-code for one lane of a warp whose `live` lanes exist; None where the
    source lane does not exist (undefined)."""
    bval, cval, segmask = b & 31, c & 31, (c >> 8) & 31
    max_lane = (lane & segmask) | (cval & ~segmask & 31)
    min_lane = lane & segmask
    if mode == "up":
        j = lane - bval
        pval = j >= max_lane
    elif mode == "down":
        j = lane + bval
        pval = j <= max_lane
    elif mode == "bfly":
        j = lane ^ bval
        pval = j <= max_lane
    else:
        j = min_lane | (bval & ~segmask & 31)
        pval = j <= max_lane
    if not pval:
        j = lane
    return (values[j] if j < live else None), pval


# (mode, b operand, c operand): immediates, the per-lane random %r3 (b), widths 8/4 (segmask), odd clamps
SHFL_CASES = [
    ("up", "1", "0"), ("up", "5", "0"), ("up", "3", "0x1800"), ("up", "31", "0"), ("up", "2", "7"),
    ("down", "1", "31"), ("down", "4", "0x181f"), ("down", "31", "31"), ("down", "0", "31"), ("down", "3", "10"),
    ("down", "2", "0x1c03"),
    ("bfly", "1", "31"), ("bfly", "16", "31"), ("bfly", "4", "0x1c1f"), ("bfly", "8", "5"), ("bfly", "%r3", "31"),
    ("idx", "0", "31"), ("idx", "7", "31"), ("idx", "35", "31"), ("idx", "3", "0x181f"), ("idx", "%r3", "31"),
    ("idx", "%r3", "%r3"), ("up", "%r3", "%r3"), ("down", "%r3", "%r3"), ("bfly", "%r3", "%r3"),
]


@pytest.mark.parametrize("n", BLOCKS + [1000])
def test_shfl_sync_every_mode_clamp_and_segment_mask(n, wave):
    ops = [_with_pred(f"shfl.sync.{mode}.b32 %r11|%p1, %r2, {b}, {c}, -1;") for mode, b, c in SHFL_CASES]
    a, b_in = _inputs(n)
    results = run_table(f"shfl{n}", ops, a, b_in, target=wave)
    checked = 0
    for i in range(n):
        warp = _warp_of(i, n)
        values, lane = [a[t] for t in warp], i % WARP
        for k, (mode, b, c) in enumerate(SHFL_CASES):
            b_value = b_in[i] if b == "%r3" else int(b, 0)
            c_value = b_in[i] if c == "%r3" else int(c, 0)
            expected, pval = shfl_model(mode, values, lane, b_value, c_value, len(warp))
            got = results[i][k]
            assert got >> 32 == pval, (i, mode, b, c)
            if expected is not None:
                assert got & M32 == expected, (i, mode, b, c)
                checked += 1
    assert checked > n * len(SHFL_CASES) * 0.9


def test_shfl_without_sync_and_sink_predicate(wave):
    """The deprecated form takes part with the lanes executing together: here the whole warp."""
    ops = ["shfl.down.b32 %r10|%p1, %r2, 1, 31;", "shfl.sync.bfly.b32 %r10, %r2, 2, 31, -1;",
           "shfl.idx.b32 %r10, %r2, 0, 31;"]
    n = 64
    a, b = _inputs(n)
    results = run_table("shfl_old", ops, a, b, target=wave)
    for i in range(n):
        lane, first = i % WARP, i - i % WARP
        assert results[i] == [a[first + min(lane + 1, 31)] if lane < 31 else a[i], a[first + (lane ^ 2)], a[first]]


# ------------------------------------------------------------------------------------------------ vote

VOTES = ["all", "any", "uni"]


# The membermask of the .pred forms comes in a register here (%r14 = -1); an immediate one is tested below.
def _vote_ops(predicate: str) -> list[str]:
    ops = [f"setp.ne.u32 %p2, {predicate}, 0;\nvote.sync.{m}.pred %p1, %p2, %r14;\nselp.u32 %r10, 1, 0, %p1;"
           for m in VOTES]
    ops.append(f"setp.ne.u32 %p2, {predicate}, 0;\nvote.sync.ballot.b32 %r10, %p2, -1;")
    ops.append(f"setp.ne.u32 %p2, {predicate}, 0;\nvote.sync.ballot.b32 %r10, !%p2, -1;")
    return ops


@pytest.mark.parametrize("n", BLOCKS)
def test_vote_sync_over_full_and_partial_warps(n, wave):
    # predicates: random bits, all set, and set everywhere in one warp but one lane
    ops = _vote_ops("%r12") + [op.replace("%r12", "%r13") for op in _vote_ops("%r12")]
    prologue = "and.b32 %r12, %r2, 1;\nsetp.ne.u32 %p3, %r1, 37;\nselp.u32 %r13, 1, 0, %p3;\nmov.u32 %r14, -1;\n"
    ops = [prologue + op for op in ops]
    a, b = _inputs(n)
    results = run_table(f"vote{n}", ops, a, b, target=wave)
    for i in range(n):
        warp = _warp_of(i, n)
        for column, predicate in enumerate([lambda t: a[t] & 1, lambda t: t != 37]):
            votes = [bool(predicate(t)) for t in warp]
            ballot = sum(1 << (t % WARP) for t, v in zip(warp, votes) if v)
            everyone = (1 << len(warp)) - 1
            expected = [all(votes), any(votes), all(votes) or not any(votes), ballot, everyone & ~ballot]
            assert results[i][5 * column:5 * column + 5] == [int(e) for e in expected], (i, column)


def test_votes_and_activemask_under_divergence(wave):
    """Lanes split by a branch: each side votes with its own membermask, and what runs without .sync
    (activemask, vote.any, vote.ballot) sees exactly the lanes of its side."""
    n = 80
    split = """and.b32 %r11, %r1, 31;
    setp.lt.u32 %p3, %r11, 11;
    and.b32 %r12, %r2, 1;
    setp.ne.u32 %p2, %r12, 0;
    @%p3 bra LOW@K;
    {high}
    bra DONE@K;
LOW@K:
    {low}
DONE@K:"""
    ops = [
        split.format(low="vote.sync.ballot.b32 %r10, %p2, 0x7ff;", high="vote.sync.ballot.b32 %r10, %p2, 0xfffff800;"),
        split.format(low="activemask.b32 %r10;", high="activemask.b32 %r10;"),
        split.format(low="vote.ballot.b32 %r10, %p2;", high="vote.any.pred %p1, %p2;\nselp.u32 %r10, 1, 0, %p1;"),
        split.format(low="mov.u32 %r14, 0x7ff;\nvote.sync.all.pred %p1, %p2, %r14;\nselp.u32 %r10, 1, 0, %p1;",
                     high="mov.u32 %r14, 0xfffff800;\nvote.sync.uni.pred %p1, %p2, %r14;\n"
                          "selp.u32 %r10, 1, 0, %p1;"),
    ]
    a, b = _inputs(n)
    results = run_table("diverge", ops, a, b, target=wave)
    for i in range(n):
        warp = _warp_of(i, n)
        low = i % WARP < 11
        side = [t for t in warp if (t % WARP < 11) == low]
        votes = [t for t in side if a[t] & 1]
        ballot = sum(1 << (t % WARP) for t in votes)
        side_mask = sum(1 << (t % WARP) for t in side)
        assert results[i][0] == ballot
        assert results[i][1] == side_mask
        assert results[i][2] == (ballot if low else int(bool(votes)))
        assert results[i][3] == int(len(votes) == len(side) if low else len(votes) in (0, len(side)))


def test_vote_sync_pred_with_an_immediate_membermask():
    """The operands pass normalises predicate immediates only where every operand is a predicate."""
    ops = ["setp.ne.u32 %p2, %r1, 99;\nvote.sync.all.pred %p1, %p2, -1;\nselp.u32 %r10, 1, 0, %p1;"]
    assert run_table("vote_immediate", ops, *_inputs(32)) == [[1]] * 32


# ------------------------------------------------------------------------------------------------ match

@pytest.mark.parametrize("n", [32, 48, 96])
def test_match_any_and_all(n, wave):
    ops = [
        "rem.u32 %r11, %r2, 3;\nmatch.any.sync.b32 %r10, %r11, -1;",
        # 64-bit values equal in the low word but not always in the high one
        "rem.u32 %r11, %r2, 2;\ncvt.u64.u32 %rd11, %r11;\nrem.u32 %r12, %r3, 2;\ncvt.u64.u32 %rd12, %r12;\n"
        "shl.b64 %rd12, %rd12, 32;\nor.b64 %rd11, %rd11, %rd12;\nmatch.any.sync.b64 %r10, %rd11, -1;",
        _with_pred("rem.u32 %r12, %r2, 3;\nmatch.all.sync.b32 %r11|%p1, %r12, -1;"),
        _with_pred("shr.u32 %r12, %r1, 5;\nmatch.all.sync.b32 %r11|%p1, %r12, -1;"),  # the warp index
        _with_pred("cvt.u64.u32 %rd12, %r1;\nshr.u64 %rd12, %rd12, 5;\nmatch.all.sync.b64 %r11|%p1, %rd12, -1;"),
    ]
    a, b = _inputs(n)
    results = run_table(f"match{n}", ops, a, b, target=wave)
    for i in range(n):
        warp = _warp_of(i, n)
        key32 = {t: a[t] % 3 for t in warp}
        key64 = {t: (a[t] % 2) | (b[t] % 2) << 32 for t in warp}
        assert results[i][0] == sum(1 << (t % WARP) for t in warp if key32[t] == key32[i])
        assert results[i][1] == sum(1 << (t % WARP) for t in warp if key64[t] == key64[i])
        same, live = len(set(key32.values())) == 1, (1 << len(warp)) - 1  # .all: the non-exited members
        assert results[i][2] == (live if same else 0) | int(same) << 32
        assert results[i][3] == live | 1 << 32
        assert results[i][4] == live | 1 << 32


# ------------------------------------------------------------------------------------------------ redux

def _signed(x: int) -> int:
    return x - (1 << 32) if x & 0x80000000 else x


REDUX_INT = {
    "add.u32": lambda xs: sum(xs) & M32, "add.s32": lambda xs: sum(xs) & M32,
    "min.u32": min, "max.u32": max,
    "min.s32": lambda xs: min(xs, key=_signed), "max.s32": lambda xs: max(xs, key=_signed),
    "and.b32": lambda xs: _fold(xs, lambda x, y: x & y), "or.b32": lambda xs: _fold(xs, lambda x, y: x | y),
    "xor.b32": lambda xs: _fold(xs, lambda x, y: x ^ y),
}


def _fold(xs, op):
    result = xs[0]
    for x in xs[1:]:
        result = op(result, x)
    return result


@pytest.mark.parametrize("n", BLOCKS)
def test_redux_sync_integer(n, wave):
    ops = [f"redux.sync.{op} %r10, %r2, -1;" for op in REDUX_INT]
    # even lanes only, with their own membermask
    ops += [f"and.b32 %r11, %r1, 1;\nsetp.ne.u32 %p3, %r11, 0;\nmov.u32 %r10, 7;\n@%p3 bra SKIP@K;\n"
            f"redux.sync.{op} %r10, %r2, 0x55555555;\nSKIP@K:" for op in ("add.u32", "min.s32", "xor.b32")]
    a, b = _inputs(n)
    a[: 8] = [0, M32, 0x80000000, 0x7FFFFFFF, 1, 0xFFFFFFFE, 5, 5][: n]
    results = run_table(f"redux{n}", ops, a, b, target=wave)
    for i in range(n):
        warp = list(_warp_of(i, n))
        values = [a[t] for t in warp]
        expected = [reduce(values) for reduce in REDUX_INT.values()]
        even = [a[t] for t in warp if t % 2 == 0]
        expected += [7] * 3 if i % 2 else [REDUX_INT[op](even) for op in ("add.u32", "min.s32", "xor.b32")]
        assert results[i] == expected, i


NAN = 0x7FFFFFFF
F32_SPECIALS = [bits(0.0), bits(-0.0), bits(math.inf), bits(-math.inf), 0x7FC00000, 0xFFC00001, 0x7F800001,
                bits(1e-45), bits(-3.5), bits(2.25)]


def _f32(b: int) -> float:
    return struct.unpack("<f", struct.pack("<I", b))[0]


def redux_f32_model(op: str, xs: list[int], absolute: bool, nan: bool) -> int:
    """min/max with -0.0 < +0.0; NaN skipped (or, with .NaN, winning); the canonical NaN 0x7fffffff."""
    if absolute:
        xs = [x & 0x7FFFFFFF for x in xs]
    if any(math.isnan(_f32(x)) for x in xs) and nan:
        return NAN
    numbers = [x for x in xs if not math.isnan(_f32(x))]
    if not numbers:
        return NAN
    key = lambda x: (_f32(x), -1 if x >> 31 else 0)  # noqa: E731  -0.0 orders below +0.0
    return (min if op == "min" else max)(numbers, key=key)


def test_redux_sync_f32_min_max_abs_nan(wave):
    variants = [(op, absolute, nan) for op in ("min", "max") for absolute in (False, True) for nan in (False, True)]
    ops = [f"redux.sync.{op}{'.abs' if absolute else ''}{'.NaN' if nan else ''}.f32 %r10, %r2, -1;"
           for op, absolute, nan in variants]
    warps = [
        [RANDOM.choice(F32_SPECIALS) for _ in range(WARP)],
        [bits(0.0), bits(-0.0)] * 16,
        [0x7FC00000] * 31 + [bits(-2.0)],
        [0x7FC00000] * 32,
        [bits(RANDOM.uniform(-100, 100)) for _ in range(WARP)],
    ]
    a = [x for warp in warps for x in warp]
    results = run_table("reduxf", ops, a, [0] * len(a), target=wave)
    for i in range(len(a)):
        warp = warps[i // WARP]
        assert results[i] == [redux_f32_model(op, warp, absolute, nan) for op, absolute, nan in variants], i


# ------------------------------------------------------------------------------------------------ elect, bar.warp.sync

def test_elect_sync_and_bar_warp_sync(wave):
    n = 72
    ops = [
        _with_pred("elect.sync %r11|%p1, -1;"),
        # lanes >= 5 only, with their membermask: the leader is lane 5
        "and.b32 %r11, %r1, 31;\nsetp.lt.u32 %p3, %r11, 5;\nmov.u32 %r10, 99;\n@%p3 bra SKIP@K;\n"
        "elect.sync %r10|%p1, 0xffffffe0;\nSKIP@K:",
        "elect.sync _|%p1, 0xffffffff;\nselp.u32 %r10, 1, 0, %p1;",
    ]
    a, b = _inputs(n)
    results = run_table("elect", ops, a, b, target=wave)
    for i in range(n):
        lane = i % WARP
        assert results[i] == [int(lane == 0) << 32, 99 if lane < 5 else 5, int(lane == 0)]


def _shared_kernel(name: str, body: str) -> str:
    return HEADER + "\n" + entry(name, "u64 pout", ".pred %p<4>, .b32 %r<16>, .b64 %rd<8>", f"""
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    mov.u32 %r2, box;
    shl.b32 %r3, %r1, 2;
    add.u32 %r4, %r2, %r3;
{body}
    st.global.u32 [%rd3], %r10;
    ret;
""", declarations=".shared .align 4 .b32 box[128];")


def _launch(text: str, name: str, n: int, launches: int = 1, target: str = "host") -> list[int]:
    program = amd_program(text, target)
    out = (ctypes.c_uint32 * n)()
    for _ in range(launches):
        program.launch(name, [out], block=(n, 1, 1))
    return list(out)


def test_bar_warp_sync_orders_shared_memory(wave):
    body = """    mul.lo.u32 %r5, %r1, 7;
    st.shared.u32 [%r4], %r5;
    bar.warp.sync -1;
    xor.b32 %r6, %r1, 1;
    shl.b32 %r6, %r6, 2;
    add.u32 %r6, %r2, %r6;
    ld.shared.u32 %r10, [%r6];"""
    assert _launch(_shared_kernel("wsync", body), "wsync", 64, target=wave) == [(i ^ 1) * 7 for i in range(64)]


def test_lane_out_of_its_membermask_is_reported():
    text = _shared_kernel("outside", "    vote.sync.ballot.b32 %r10, %p1, 0x1;")
    with pytest.raises(FatkitError, match="leaves it out"):
        _launch(text, "outside", 4)


def test_meeting_that_never_completes_is_reported(monkeypatch):
    # lane 0 waits for lane 1 under mask 0x3; lane 1 uses mask 0x2, then waits for lane 0 at bar.sync
    monkeypatch.setattr(host, "_DEADLOCK_S", 0.5)
    body = """    setp.eq.u32 %p1, %r1, 0;
    selp.u32 %r7, 3, 2, %p1;
    shfl.sync.idx.b32 %r10, %r1, 1, 31, %r7;
    bar.sync 0;"""
    with pytest.raises(FatkitError, match="never came"):
        _launch(_shared_kernel("stuck", body), "stuck", 2)


# ------------------------------------------------------------------------------------------------ special registers

def _special_kernel(registers: list[tuple[str, str]]) -> str:
    """Thread (x, y) of a 2D block writes each register (type, name) as a u64 at out[linear*K + k]."""
    body = []
    for k, (ptx_type, name) in enumerate(registers):
        if ptx_type == "u64":
            body.append(f"mov.u64 %rd5, {name};")
        else:
            body.append(f"mov.u32 %r5, {name};\ncvt.u64.u32 %rd5, %r5;")
        body.append(f"st.global.u64 [%rd4+{8 * k}], %rd5;")
    return HEADER + "\n" + entry("sregs", "u64 pout", ".b32 %r<8>, .b64 %rd<8>", f"""
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %tid.y;
    mov.u32 %r3, %ntid.x;
    mad.lo.u32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd2, %r4, {8 * len(registers)};
    add.s64 %rd4, %rd1, %rd2;
    {chr(10).join(body)}
    ret;
""")


LANE_REGISTERS = [("u32", "%laneid"), ("u32", "%warpid"), ("u32", "%nwarpid"), ("u32", "%lanemask_eq"),
                  ("u32", "%lanemask_le"), ("u32", "%lanemask_lt"), ("u32", "%lanemask_ge"),
                  ("u32", "%lanemask_gt"), ("u32", "%smid"), ("u32", "%nsmid"), ("u64", "%gridid"),
                  ("u64", "%clock64"), ("u64", "%globaltimer"), ("u32", "%clock"), ("u32", "%globaltimer_hi")]


def test_lane_and_machine_special_registers(host_wave):
    block = (8, 6)  # 48 threads: warps of threads in linear order, x fastest
    n = block[0] * block[1]
    program = translate(_special_kernel(LANE_REGISTERS), Options(target="host")).product
    out = (ctypes.c_uint64 * (n * len(LANE_REGISTERS)))()
    before = time.time_ns()
    program.launch("sregs", [ctypes.addressof(out)], block=block)
    first = list(out)
    program.launch("sregs", [ctypes.addressof(out)], block=block)
    after = time.time_ns()
    k = len(LANE_REGISTERS)
    for i in range(n):
        lane = i % WARP
        row = first[i * k:(i + 1) * k]
        assert row[:10] == [lane, i // WARP, 32, 1 << lane, (2 << lane) - 1, (1 << lane) - 1,
                            M32 & ~((1 << lane) - 1), M32 & ~((2 << lane) - 1), 0, 1]
        assert before <= row[12] <= after and row[14] == row[12] >> 32
        assert out[i * k + 10] == row[10] + 1  # %gridid: the next launch
        assert out[i * k + 11] >= row[11]  # the cycle counter runs forward


def test_envreg_is_refused():
    text = _special_kernel([("u32", "%envreg3")])
    options = Options(target="host")
    (report,) = lower(passes(parse(text, options), options), options).reports
    assert report.status == "unsupported" and "CUDA driver" in report.reason


# ------------------------------------------------------------------------------------------------ AMD

AMD_OPS = [
    "shfl.sync.up.b32 %r10|%p1, %r2, 1, 0, -1;", "shfl.sync.down.b32 %r10, %r2, %r3, 0x181f, -1;",
    "shfl.sync.bfly.b32 %r10, %r2, 4, 31, -1;", "shfl.sync.idx.b32 %r10, %r2, %r3, 31, 0xffff;",
    "shfl.down.b32 %r10, %r2, 1, 31;",
    "setp.ne.u32 %p2, %r2, 0;\nvote.sync.all.pred %p1, %p2, %r3;\nselp.u32 %r10, 1, 0, %p1;",
    "setp.ne.u32 %p2, %r2, 0;\nvote.sync.uni.pred %p1, !%p2, %r3;\nselp.u32 %r10, 1, 0, %p1;",
    "setp.ne.u32 %p2, %r2, 0;\nvote.sync.ballot.b32 %r10, %p2, -1;",
    "setp.ne.u32 %p2, %r2, 0;\nvote.any.pred %p1, %p2;\nselp.u32 %r10, 1, 0, %p1;",
    "match.any.sync.b32 %r10, %r2, -1;", "cvt.u64.u32 %rd11, %r2;\nmatch.all.sync.b64 %r10|%p1, %rd11, -1;",
    "redux.sync.add.u32 %r10, %r2, -1;", "redux.sync.min.s32 %r10, %r2, 0xff;", "redux.sync.xor.b32 %r10, %r2, -1;",
    "redux.sync.max.abs.NaN.f32 %r10, %r2, -1;", "redux.sync.min.f32 %r10, %r2, -1;",
    "activemask.b32 %r10;", "elect.sync %r10|%p1, -1;", "bar.warp.sync -1;\nmov.u32 %r10, %laneid;",
    "mov.u32 %r10, %lanemask_lt;", "mov.u32 %r10, %warpid;", "mov.u32 %r10, %smid;",
    "mov.u64 %rd10, %globaltimer;", "mov.u64 %rd10, %gridid;",
]


def _amd_module() -> str:
    from tests.ptxrun import table_kernel

    kernels = [table_kernel(f"warp{k}", [op]) for k, op in enumerate(AMD_OPS)]
    return HEADER + "\n".join(kernel[len(HEADER):] for kernel in kernels)


@pytest.mark.parametrize("processor, wave", [("gfx942", 64), ("gfx1100", 32)])
def test_every_collective_compiles_for_amd(processor, wave):
    text = _amd_module()
    translation = translate(text, Options(target=processor))
    assert all(r.status == "ok" for r in translation.kernels), [r for r in translation.kernels if r.status != "ok"]
    assert {k.name for k in translation.validated.kernels} == {f"warp{k}" for k in range(len(AMD_OPS))}
    options = Options(target=processor)
    lowered = lower(passes(parse(text, options), options), options)
    ir_text = "\n".join(k.llvm_ir for k in lowered.kernels)
    assert f"llvm.amdgcn.ballot.i{wave}" in ir_text and "llvm.amdgcn.ds.bpermute" in ir_text
    assert ("llvm.amdgcn.mbcnt.hi" in ir_text) == (wave == 64)
    picked = (0, 7, 11)  # shfl.sync.up, vote.sync.ballot, redux.sync.add
    asm = lowered.target.emit([lowered.kernels[k] for k in picked], 2, "asm").decode()
    shfl, ballot, reduction = (asm.split(f"\nwarp{k}:")[1].split(".Lfunc_end")[0] for k in picked)
    assert "ds_bpermute_b32" in shfl
    # wave64: the warp's base hardware lane (lane & 0x60, LLVM knowing lane < 64) enters the bpermute
    # address, and the 64-bit ballot is shifted down by it; wave32 has neither
    assert ("v_mbcnt_hi_u32_b32" in shfl and "0x60" in shfl) == (wave == 64)
    assert ("v_lshrrev_b64" in ballot) == (wave == 64)
    sample = translate(WARP_SAMPLE.read_text(), Options(target=processor))
    assert {k.name: k.status for k in sample.kernels if "grid_sync" not in k.name} == \
        {"_Z8shufflesPiPKiPfPd": "ok", "_Z6groupsPiPKi": "ok"}
    # a scalar loop over the active lanes: find the lowest (s_ff1 / s_ctz), read it (v_readlane)
    assert "v_readlane_b32" in reduction and ("s_ff1_i32_b64" in reduction or "s_ctz_i32_b32" in reduction)


CLOCKS = HEADER + """
.visible .entry clocks(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u64 %rd2, %clock64;
    mov.u32 %r1, %clock;
    mov.u32 %r2, 0;
LOOP:
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p1, %r2, 3000;
    @%p1 bra LOOP;
    mov.u32 %r3, %clock_hi;
    mov.u64 %rd3, %clock64;
    st.global.v2.u64 [%rd1], {%rd2, %rd3};
    st.global.v2.u32 [%rd1+16], {%r1, %r3};
    ret;
}
"""


@pytest.mark.parametrize("processor, instruction", [
    ("gfx942", "s_memtime"), ("gfx1201", "s_getreg_b32 s{}, hwreg(HW_REG_SHADER_CYCLES_HI)"),
    # gfx11's cycle counter has 20 bits: the 64-bit REALTIME clock (HIP's wall_clock64) serves instead
    ("gfx1100", "s_sendmsg_rtn_b64 s[{}], sendmsg(MSG_RTN_GET_REALTIME)"),
    ("gfx1150", "sendmsg(MSG_RTN_GET_REALTIME)")])
def test_clock64_on_amd(processor, instruction):
    """%clock64 reads a 64-bit counter on every AMD target (and %clock/%clock_hi its halves); on the executor
    two reads differ, the later is larger, and the counter carries into its high word (it starts a launch
    just below 2^32)."""
    translation = translate(CLOCKS, Options(target=processor))
    assert [k.status for k in translation.kernels] == ["ok"], translation.kernels
    options = Options(target=processor)
    lowered = lower(passes(parse(CLOCKS, options), options), options)
    asm = lowered.target.emit(lowered.kernels, 2, "asm").decode()
    assert re.search(re.escape(instruction).replace(re.escape("{}"), r"[\d:]+"), asm), asm
    assert "SHADER_CYCLES, 0, 20" not in asm  # never the 20-bit counter
    if processor in ("gfx1100", "gfx942"):
        out = (ctypes.c_uint64 * 3)()
        amd_program(CLOCKS, processor).launch("clocks", [out])
        first, second, halves = list(out)
        low, high = halves & M32, halves >> 32  # %clock after the first read, %clock_hi before the second
        assert first < second and second >> 32 > first >> 32
        assert low != first & M32 and first >> 32 <= high <= second >> 32


# ------------------------------------------------------------------------------------------------ nvcc's own

WARP_SAMPLE = Path(__file__).parent / "samples" / "ptx" / "warp.sm_86.ptx"  # from ptx_sources/warp.cu


def _i32(x: int) -> int:
    return (x + (1 << 31)) % (1 << 32) - (1 << 31)


def test_nvcc_warp_intrinsics_sample(wave):
    """`shuffles` of warp.cu over 16 threads (its __syncwarp(0xffff) names only lanes 0-15)."""
    n = 16
    v = [3, -1, 0, 7, 7, 12, -5, 2, 9, 1, 1, 4, -8, 6, 0, 11]
    program = amd_program(WARP_SAMPLE.read_text(), wave)
    source = (ctypes.c_int32 * n)(*v)
    out, fout, dout = (ctypes.c_int32 * n)(), (ctypes.c_float * n)(), (ctypes.c_double * n)()
    program.launch("_Z8shufflesPiPKiPfPd", [out, source, fout, dout], block=(n, 1, 1))
    u = [x & M32 for x in v]
    every = (1 << n) - 1
    ballot = sum(1 << t for t in range(n) if v[t] > 0)
    reduced = (sum(u) + min(u) + max(v) + _fold(u, lambda x, y: x & y) + _fold(u, lambda x, y: x | y)
               + _fold(u, lambda x, y: x ^ y))
    same = len(set(v)) == 1
    for t in range(n):
        s = v[3] + (v[t - 1] if t else v[t]) + (v[t + 2] if t + 2 <= 15 else v[t]) + v[t ^ 4]
        mask = sum(1 << k for k in range(n) if v[k] == v[t])
        lt = (1 << t) - 1
        expected = (s + ballot + all(x != 0 for x in v) + any(x == 7 for x in v)
                    + (len({x & 1 for x in v}) == 1) + mask + (every if same else 0) + same + reduced
                    + lt + (M32 & ~lt))
        assert out[t] == _i32(expected), t
        assert fout[t] == v[t ^ 1]
        if t < 8:  # lanes 16-23 that the others would read do not exist
            assert dout[t] == v[t + 8]


def test_nvcc_cooperative_groups_sample(wave):
    """`groups` of warp.cu: tiles of 32 and 8, a coalesced group inside a branch, scans; 64 threads."""
    n = 64
    v = [RANDOM.randrange(-6, 7) for _ in range(n)]
    program = amd_program(WARP_SAMPLE.read_text(), wave)
    source, out = (ctypes.c_int32 * n)(*v), (ctypes.c_int32 * n)()
    program.launch("_Z6groupsPiPKi", [out, source], block=(n, 1, 1))
    for t in range(n):
        warp, tile = range(t - t % 32, t - t % 32 + 32), range(t - t % 8, t - t % 8 + 8)
        x = (v[warp[0]] + (v[t + 1] if t % 8 < 7 else v[t])
             + sum(1 << (k % 32) for k in warp if v[k] > 2) + any(v[k] == 3 for k in tile))
        if v[t] & 1:
            odd = [k for k in warp if v[k] & 1]
            x += len(odd) + odd.index(t) + v[odd[0]]
        expected = (sum(v[k] for k in warp) + max(v[k] for k in tile) + x
                    + sum(v[k] for k in warp if k <= t) + sum(v[k] for k in tile if k < t))
        assert out[t] == _i32(expected), t
