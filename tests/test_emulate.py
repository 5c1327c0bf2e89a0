"""fatkit.emulate: fatkit's gfx1100, gfx942, gfx90a and gfx1201 code objects run on the CPU executor, checked
against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from fatkit.emulate import launch
from fatkit.errors import FatkitError
from fatkit.formats.hsaco import parse_code_object
from fatkit.translate.pipeline import Options, translate
from tests.ptxrun import HEADER

# gfx1100 (RDNA3) and gfx942 (CDNA3) run every translator table; gfx90a (CDNA2: MUBUF scratch, v_pk_mov_b32)
# and gfx1201 (RDNA4: its VGLOBAL/VFLAT/VSCRATCH encodings, split barriers and waits, workgroup ids in ttmp7/9)
# run these kernels
TARGETS = ["gfx1100", "gfx942", "gfx90a", "gfx1201"]
WAVE32 = ("gfx1100", "gfx1201")
RNG = np.random.default_rng(20261201)
_BUILT: dict[tuple[str, str], bytes] = {}


def code_object(ptx: str, target: str) -> bytes:
    key = (ptx, target)
    if key not in _BUILT:
        _BUILT[key] = translate(HEADER + ptx, Options(target=target)).product
    return _BUILT[key]


def f32_patterns(n: int) -> np.ndarray:
    """Exponent-spread f32 values with zeros, subnormals, infinities and NaN among them."""
    values = (RNG.standard_normal(n) * np.exp2(RNG.integers(-30, 30, n))).astype(np.float32)
    values[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -3e-39, 1.0]
    return values


SAXPY = """
.visible .entry saxpy(.param .u64 px, .param .u64 py, .param .f32 a, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [px];
    ld.param.u64 %rd2, [py];
    ld.param.f32 %f1, [a];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    ld.global.f32 %f2, [%rd4];
    ld.global.f32 %f3, [%rd5];
    fma.rn.f32 %f3, %f1, %f2, %f3;
    st.global.f32 [%rd5], %f3;
DONE:
    ret;
}
"""


def exact_fma_f32(a, x, y) -> np.ndarray:
    """fma rounded once: the float64 product is exact, and float64 → float32 of the sum rounds twice only
    where the float64 sum is a float32 midpoint, which these magnitudes (no cancellation) never reach."""
    return (np.float64(a) * x.astype(np.float64) + y.astype(np.float64)).astype(np.float32)


@pytest.mark.parametrize("target", TARGETS)
def test_saxpy_over_a_partial_last_block(target):
    n = 1000
    x = RNG.uniform(1, 2, n).astype(np.float32)
    y = RNG.uniform(1, 2, n).astype(np.float32)
    want = exact_fma_f32(np.float32(2.5), x, y)
    stats = launch(code_object(SAXPY, target), "saxpy", (8, 1, 1), (128, 1, 1),
                   [x, y, np.float32(2.5), np.uint32(n)])
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32))
    waves = 8 * (128 // (32 if target in WAVE32 else 64))
    assert stats.waves == waves and stats.workgroups == 8
    assert stats.per_class["VMEM"] > 0 and stats.wave_instructions == sum(stats.per_class.values())


SHARED = """
.visible .entry reduce(.param .u64 pin, .param .u64 pout, .param .u64 pcount)
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b32 part[256];
    ld.param.u64 %rd1, [pin];
    ld.param.u64 %rd2, [pout];
    ld.param.u64 %rd3, [pcount];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.u32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd4, %r4, 4;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.u32 %r5, [%rd5];
    mov.u32 %r6, part;
    shl.b32 %r7, %r1, 2;
    add.u32 %r8, %r6, %r7;
    st.shared.u32 [%r8], %r5;
    bar.sync 0;
    shr.u32 %r9, %r3, 1;
LOOP:
    setp.eq.u32 %p1, %r9, 0;
    @%p1 bra DONE;
    setp.ge.u32 %p2, %r1, %r9;
    @%p2 bra SKIP;
    shl.b32 %r10, %r9, 2;
    add.u32 %r11, %r8, %r10;
    ld.shared.u32 %r12, [%r11];
    ld.shared.u32 %r13, [%r8];
    add.u32 %r13, %r13, %r12;
    st.shared.u32 [%r8], %r13;
SKIP:
    bar.sync 0;
    shr.u32 %r9, %r9, 1;
    bra LOOP;
DONE:
    and.b32 %r14, %r5, 7;
    atom.shared.add.u32 %r15, [part+1020], %r14;
    bar.sync 0;
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra END;
    ld.shared.u32 %r13, [part];
    mul.wide.u32 %rd6, %r2, 8;
    add.s64 %rd7, %rd2, %rd6;
    st.global.u32 [%rd7], %r13;
    ld.shared.u32 %r13, [part+1020];
    st.global.u32 [%rd7+4], %r13;
    atom.global.add.u32 %r15, [%rd3], %r13;
END:
    ret;
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_shared_memory_barriers_and_atomics(target):
    blocks, threads = 3, 256
    data = RNG.integers(0, 2**32, blocks * threads, dtype=np.uint32)
    out = np.zeros(2 * blocks, dtype=np.uint32)
    count = np.zeros(1, dtype=np.uint32)
    launch(code_object(SHARED, target), "reduce", (blocks, 1, 1), (threads, 1, 1), [data, out, count])
    rows = data.reshape(blocks, threads).astype(np.uint64)
    sums = rows.sum(axis=1) & 0xFFFFFFFF
    # part[255] takes part in the tree reduction before the atomics add into it
    atomics = (rows[:, 255] + (rows & 7).sum(axis=1)) & 0xFFFFFFFF
    assert out.reshape(blocks, 2).tolist() == [[int(s), int(a)] for s, a in zip(sums, atomics)]
    assert int(count[0]) == int(atomics.sum() & 0xFFFFFFFF)


WARP = """
.visible .entry warp(.param .u64 pin, .param .u64 pout)
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [pin];
    ld.param.u64 %rd2, [pout];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r2, [%rd4];
    shfl.sync.bfly.b32 %r3, %r2, 5, 31, -1;
    shfl.sync.down.b32 %r4, %r2, 3, 31, -1;
    and.b32 %r5, %r2, 1;
    setp.ne.u32 %p1, %r5, 0;
    vote.sync.ballot.b32 %r6, %p1, -1;
    vote.sync.any.pred %p2, %p1, -1;
    selp.u32 %r7, 1, 0, %p2;
    redux.sync.add.u32 %r8, %r2, -1;
    mul.wide.u32 %rd5, %r1, 20;
    add.s64 %rd6, %rd2, %rd5;
    st.global.u32 [%rd6], %r3;
    st.global.u32 [%rd6+4], %r4;
    st.global.u32 [%rd6+8], %r6;
    st.global.u32 [%rd6+12], %r7;
    st.global.u32 [%rd6+16], %r8;
    ret;
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_shuffles_votes_and_reductions(target):
    n = 128
    data = RNG.integers(0, 2**32, n, dtype=np.uint32)
    data[32:64] &= ~np.uint32(1)  # a warp without odd values: vote.any is 0 there
    out = np.zeros((n, 5), dtype=np.uint32)
    launch(code_object(WARP, target), "warp", (1, 1, 1), (n, 1, 1), [data, out])
    for i in range(n):
        base, lane = i - i % 32, i % 32
        warp = data[base:base + 32]
        ballot = sum(1 << k for k in range(32) if warp[k] & 1)
        down = warp[lane + 3] if lane + 3 < 32 else warp[lane]
        assert out[i].tolist() == [int(warp[lane ^ 5]), int(down), ballot, int(ballot != 0),
                                   int(warp.astype(np.uint64).sum() & 0xFFFFFFFF)], i


HALF = """
.visible .entry half(.param .u64 pa, .param .u64 pb, .param .u64 pout)
{
    .reg .b16 %h<8>;
    .reg .b32 %r<4>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [pa];
    ld.param.u64 %rd2, [pb];
    ld.param.u64 %rd3, [pout];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 2;
    add.s64 %rd5, %rd1, %rd4;
    add.s64 %rd6, %rd2, %rd4;
    ld.global.b16 %h1, [%rd5];
    ld.global.b16 %h2, [%rd6];
    add.rn.f16 %h3, %h1, %h2;
    mul.rn.f16 %h4, %h1, %h2;
    cvt.f32.f16 %f1, %h1;
    cvt.rn.f16.f32 %h5, %f1;
    mul.wide.u32 %rd4, %r1, 8;
    add.s64 %rd7, %rd3, %rd4;
    st.global.b16 [%rd7], %h3;
    st.global.b16 [%rd7+2], %h4;
    st.global.b16 [%rd7+4], %h5;
    st.global.b16 [%rd7+6], %h2;
    ret;
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_f16_arithmetic_and_conversions(target):
    n = 256
    a = RNG.integers(0, 2**16, n, dtype=np.uint16)
    b = RNG.integers(0, 2**16, n, dtype=np.uint16)
    a[:6] = [0x0000, 0x8000, 0x7C00, 0x0001, 0x3C00, 0x7BFF]
    b[:6] = [0x8000, 0x8000, 0xFC00, 0x0001, 0x3C01, 0x7BFF]
    out = np.zeros((n, 4), dtype=np.uint16)
    launch(code_object(HALF, target), "half", (1, 1, 1), (n, 1, 1), [a, b, out])
    fa, fb = a.view(np.float16), b.view(np.float16)
    with np.errstate(all="ignore"):
        # f16 add/mul through float64 round once (11-bit operands: the float64 result is exact)
        add = (fa.astype(np.float64) + fb.astype(np.float64)).astype(np.float16)
        mul = (fa.astype(np.float64) * fb.astype(np.float64)).astype(np.float16)
    for name, got, want in (("add", out[:, 0], add), ("mul", out[:, 1], mul)):
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got.view(np.float16)), nan), name
        assert np.array_equal(got[~nan], want.view(np.uint16)[~nan]), name
    nan_a = np.isnan(fa)
    assert np.array_equal(out[~nan_a, 2], a[~nan_a]) and np.all(np.isnan(out[nan_a, 2].view(np.float16)))
    assert np.array_equal(out[:, 3], b)


U64 = """
.visible .entry wide(.param .u64 pin, .param .u64 pout)
{
    .reg .b64 %rd<16>;
    .reg .b32 %r<4>;
    ld.param.u64 %rd1, [pin];
    ld.param.u64 %rd2, [pout];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 16;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u64 %rd5, [%rd4];
    ld.global.u64 %rd6, [%rd4+8];
    mul.lo.u64 %rd7, %rd5, %rd6;
    mul.hi.u64 %rd8, %rd5, %rd6;
    or.b64 %rd9, %rd6, 1;
    div.u64 %rd10, %rd5, %rd9;
    rem.s64 %rd11, %rd5, %rd9;
    shr.s64 %rd12, %rd5, 13;
    mul.wide.u32 %rd3, %r1, 40;
    add.s64 %rd13, %rd2, %rd3;
    st.global.u64 [%rd13], %rd7;
    st.global.u64 [%rd13+8], %rd8;
    st.global.u64 [%rd13+16], %rd10;
    st.global.u64 [%rd13+24], %rd11;
    st.global.u64 [%rd13+32], %rd12;
    ret;
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_u64_arithmetic(target):
    n = 64
    pairs = RNG.integers(0, 2**64, (n, 2), dtype=np.uint64)
    pairs[0] = [2**64 - 1, 2**64 - 1]
    pairs[1] = [2**63, 3]
    out = np.zeros((n, 5), dtype=np.uint64)
    launch(code_object(U64, target), "wide", (1, 1, 1), (n, 1, 1), [pairs, out])
    m64 = (1 << 64) - 1
    for i, (x, y) in enumerate(pairs.tolist()):
        d = y | 1
        sx, sd = x - (1 << 64) if x >> 63 else x, d - (1 << 64) if d >> 63 else d
        rem = abs(sx) % abs(sd) * (-1 if sx < 0 else 1)
        want = [(x * y) & m64, (x * y) >> 64, x // d, rem & m64, (sx >> 13) & m64]
        assert out[i].tolist() == want, i


LOCAL = """
.visible .entry local(.param .u64 pin, .param .u64 pout)
{
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    .local .align 4 .b8 table[64];
    ld.param.u64 %rd1, [pin];
    ld.param.u64 %rd2, [pout];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r2, [%rd4];
    mov.u32 %r3, 0;
FILL:
    mad.lo.u32 %r4, %r3, %r2, %r1;
    shl.b32 %r5, %r3, 2;
    mov.u32 %r6, table;
    add.u32 %r7, %r6, %r5;
    st.local.u32 [%r7], %r4;
    add.u32 %r3, %r3, 1;
    setp.lt.u32 %p1, %r3, 16;
    @%p1 bra FILL;
    and.b32 %r8, %r2, 15;
    shl.b32 %r9, %r8, 2;
    add.u32 %r10, %r6, %r9;
    ld.local.u32 %r11, [%r10];
    add.s64 %rd5, %rd2, %rd3;
    st.global.u32 [%rd5], %r11;
    ret;
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_local_arrays_are_private_per_lane(target):
    n = 96
    data = RNG.integers(0, 2**32, n, dtype=np.uint32)
    out = np.zeros(n, dtype=np.uint32)
    launch(code_object(LOCAL, target), "local", (1, 1, 1), (n, 1, 1), [data, out])
    want = [((int(v) & 15) * int(v) + i) & 0xFFFFFFFF for i, v in enumerate(data)]
    assert out.tolist() == want
    kernel = parse_code_object(code_object(LOCAL, target)).kernels[0]
    assert kernel.private_segment_size >= 64


GLOBALS = """
.const .align 4 .u32 primes[8] = {2, 3, 5, 7, 11, 13, 17, 19};
.global .align 4 .u32 counter;
.global .align 8 .u64 where = generic(counter);
.visible .entry globals(.param .u64 pout)
{
    .reg .b32 %r<10>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [pout];
    mov.u32 %r1, %tid.x;
    mov.u32 %r5, %ctaid.x;
    mov.u32 %r6, %ntid.x;
    mad.lo.u32 %r7, %r5, %r6, %r1;
    and.b32 %r2, %r1, 7;
    mul.wide.u32 %rd2, %r2, 4;
    mov.u64 %rd3, primes;
    add.s64 %rd4, %rd3, %rd2;
    ld.const.u32 %r3, [%rd4];
    ld.global.u64 %rd5, [where];
    atom.add.u32 %r4, [%rd5], %r3;
    mul.wide.u32 %rd6, %r7, 4;
    add.s64 %rd7, %rd1, %rd6;
    st.global.u32 [%rd7], %r3;
    ret;
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_module_constants_and_globals(target):
    n = 40
    out = np.zeros(n, dtype=np.uint32)
    primes = [2, 3, 5, 7, 11, 13, 17, 19]
    stats = launch(code_object(GLOBALS, target), "globals", (2, 1, 1), (n // 2, 1, 1), [out])
    want = [primes[i % 8] for i in range(n // 2)] * 2
    assert out.tolist() == want
    # the counter lives in the loaded image: find it through the symbol table
    from fatkit.formats.elf import SHT_SYMTAB, ElfView
    elf = ElfView(code_object(GLOBALS, target))
    symtab = next(s for s in elf.sections if s.type == SHT_SYMTAB)
    counter = next(s for s in elf.symbols(symtab) if s.name == "counter")
    assert int(stats.image[counter.value:counter.value + 4].view(np.uint32)[0]) == sum(want)



@pytest.mark.parametrize("target", TARGETS)
def test_a_module_keeps_its_globals_from_launch_to_launch(target):
    """Module: the image is loaded once, so the counter one launch adds to is there for the next (and a host
    write by symbol is what the kernel sees); launch() loads a fresh image each time."""
    from fatkit.emulate import Module
    n = 24
    primes = [2, 3, 5, 7, 11, 13, 17, 19]
    per_launch = sum(primes[i % 8] for i in range(n))
    module = Module(code_object(GLOBALS, target))
    counter = module.symbol("counter").view(np.uint32)
    assert counter.shape == (1,) and counter[0] == 0
    seen = []
    for start in (0, 0, 0xFFFFFF00):
        if start:
            counter[0] = start
        module.launch("globals", (1, 1, 1), (n, 1, 1), [np.zeros(n, dtype=np.uint32)])
        seen.append(int(counter[0]))
    assert seen == [per_launch, 2 * per_launch, (0xFFFFFF00 + per_launch) & 0xFFFFFFFF]
    # the `where` global holds the counter's address after the relocation: the address the module reports
    assert int(module.symbol("where").view(np.uint64)[0]) == module.address("counter")
    assert module.read(module.address("primes"), 8) == bytes([2, 0, 0, 0, 3, 0, 0, 0])
    again = launch(code_object(GLOBALS, target), "globals", (1, 1, 1), (n, 1, 1), [np.zeros(n, dtype=np.uint32)])
    offset = module.symbols["counter"].value
    assert int(again.image[offset:offset + 4].view(np.uint32)[0]) == per_launch
    with pytest.raises(FatkitError, match="no symbol 'missing'"):
        module.address("missing")
    with pytest.raises(FatkitError, match="outside the loaded code object"):
        module.read(module.base - 4, 8)


# loops whose exit LLVM compares against a 16-bit immediate: s_cmpk_gt_u32, s_cmpk_gt_i32 (negative) and
# s_cmpk_eq_i32 on both targets. The compare reads the SGPR its sdst field names (it once read the immediate
# for both sides, so every such loop left after one pass)
CMPK = """
.visible .entry cmpk(.param .u64 pout, .param .u32 start)
{
    .reg .pred %p<4>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [pout];
    ld.param.u32 %r1, [start];
    mov.u32 %r2, 0;
$up:
    mul.lo.u32 %r1, %r1, 3;
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p1, %r1, 40000;
    @%p1 bra $up;
    ld.param.u32 %r3, [start];
    neg.s32 %r3, %r3;
    mov.u32 %r4, 0;
$down:
    mad.lo.s32 %r3, %r3, 2, -1;
    add.u32 %r4, %r4, 1;
    setp.gt.s32 %p2, %r3, -300;
    @%p2 bra $down;
    ld.param.u32 %r5, [start];
    mov.u32 %r6, 0;
$ne:
    mul.lo.u32 %r5, %r5, 5;
    add.u32 %r6, %r6, 1;
    setp.ne.u32 %p3, %r5, 1250;
    @%p3 bra $ne;
    st.global.v4.u32 [%rd1], {%r2, %r4, %r6, %r1};
    ret;
}
"""


def _cmpk_counts(start: int) -> list[int]:
    x, up = start, 0
    while True:
        x, up = x * 3 & 0xFFFFFFFF, up + 1
        if x >= 40000:
            break
    y, down = -start, 0
    while True:
        y, down = 2 * y - 1, down + 1
        if y <= -300:
            break
    z, ne = start, 0
    while True:
        z, ne = z * 5 & 0xFFFFFFFF, ne + 1
        if z == 1250:
            break
    return [up, down, ne, x]


@pytest.mark.parametrize("target", TARGETS)
def test_loops_exit_on_scalar_compares_with_an_immediate(target):
    out = np.zeros(4, dtype=np.uint32)
    launch(code_object(CMPK, target), "cmpk", (1, 1, 1), (1, 1, 1), [out, np.uint32(2)])
    assert out.tolist() == _cmpk_counts(2) == [10, 7, 4, 118098]


HIDDEN = """
.visible .entry dims(.param .u64 pout)
{
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [pout];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %tid.y;
    mov.u32 %r3, %tid.z;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %ntid.y;
    mov.u32 %r6, %ntid.z;
    mov.u32 %r7, %ctaid.x;
    mov.u32 %r8, %ctaid.y;
    mov.u32 %r9, %ctaid.z;
    mov.u32 %r10, %nctaid.x;
    mov.u32 %r11, %nctaid.y;
    mov.u32 %r12, %nctaid.z;
    mad.lo.u32 %r13, %r9, %r11, %r8;
    mad.lo.u32 %r13, %r13, %r10, %r7;
    mad.lo.u32 %r14, %r3, %r5, %r2;
    mad.lo.u32 %r14, %r14, %r4, %r1;
    mul.lo.u32 %r15, %r4, %r5;
    mul.lo.u32 %r15, %r15, %r6;
    mad.lo.u32 %r13, %r13, %r15, %r14;
    mul.wide.u32 %rd2, %r13, 48;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v4.u32 [%rd3], {%r1, %r2, %r3, %r4};
    st.global.v4.u32 [%rd3+16], {%r5, %r6, %r7, %r8};
    st.global.v4.u32 [%rd3+32], {%r9, %r10, %r11, %r12};
    ret;
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_ids_and_hidden_arguments_in_three_dimensions(target):
    grid, block = (3, 2, 2), (5, 3, 2)  # 30 threads: a partial wave on both targets
    threads = block[0] * block[1] * block[2]
    out = np.zeros((grid[0] * grid[1] * grid[2] * threads, 12), dtype=np.uint32)
    launch(code_object(HIDDEN, target), "dims", grid, block, [out])
    row = 0
    for cz in range(grid[2]):
        for cy in range(grid[1]):
            for cx in range(grid[0]):
                for tz in range(block[2]):
                    for ty in range(block[1]):
                        for tx in range(block[0]):
                            assert out[row].tolist() == [tx, ty, tz, *block, cx, cy, cz, *grid], row
                            row += 1


OUT_OF_BOUNDS = """
.visible .entry oob(.param .u64 pout, .param .u32 step)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [pout];
    ld.param.u32 %r1, [step];
    mov.u32 %r2, %tid.x;
    mul.lo.u32 %r3, %r2, %r1;
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_out_of_bounds_access_is_an_error_naming_address_and_instruction(target):
    out = np.zeros(64, dtype=np.uint32)
    launch(code_object(OUT_OF_BOUNDS, target), "oob", (1, 1, 1), (64, 1, 1), [out, np.uint32(1)])
    assert out.tolist() == list(range(64))
    with pytest.raises(FatkitError, match=r"global_store_(b32|dword) at pc 0x[0-9a-f]+: 4-byte access at 0x"):
        launch(code_object(OUT_OF_BOUNDS, target), "oob", (1, 1, 1), (64, 1, 1), [out, np.uint32(1 << 20)])


@pytest.mark.parametrize("target", TARGETS)
def test_an_undecodable_instruction_is_an_error_naming_it(target):
    data = bytearray(code_object(SAXPY, target))
    co = parse_code_object(bytes(data))
    kd = co.descriptors[0]
    from fatkit.formats.elf import ElfView
    # the descriptor's segment starts at VA 0, so its file offset is its VA; the code's is elsewhere
    entry = ElfView(bytes(data)).va_to_offset(kd.offset + kd.entry_offset)
    data[entry:entry + 4] = (0xFFFFFFFF).to_bytes(4, "little")
    x, y = np.zeros(4, np.float32), np.zeros(4, np.float32)
    with pytest.raises(FatkitError, match=r"pc 0x[0-9a-f]+: instruction word 0xffffffff does not decode"):
        launch(bytes(data), "saxpy", (1, 1, 1), (4, 1, 1), [x, y, np.float32(1), np.uint32(4)])


def test_opcode_without_pseudocode_is_an_error_naming_it():
    from fatkit.emulate.semantics import Semantics
    with pytest.raises(FatkitError, match="V_NOT_AN_OPCODE has no pseudocode"):
        Semantics("rdna3").text("V_NOT_AN_OPCODE")


@pytest.mark.parametrize("target", TARGETS)
def test_arguments_are_checked(target):
    co = code_object(SAXPY, target)
    x = np.zeros(4, np.float32)
    with pytest.raises(FatkitError, match="takes 4 arguments, got 3"):
        launch(co, "saxpy", (1, 1, 1), (4, 1, 1), [x, x, np.float32(1)])
    with pytest.raises(FatkitError, match="has 8 bytes, parameter 2"):
        launch(co, "saxpy", (1, 1, 1), (4, 1, 1), [x, x, np.float64(1), np.uint32(4)])
    with pytest.raises(FatkitError, match="no kernel 'nope'"):
        launch(co, "nope", (1, 1, 1), (4, 1, 1), [])


FMA_F64 = """
.visible .entry fma64(.param .u64 pin, .param .u64 pout)
{
    .reg .b32 %r<2>;
    .reg .f64 %fd<5>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [pin];
    ld.param.u64 %rd2, [pout];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 24;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f64 %fd1, [%rd4];
    ld.global.f64 %fd2, [%rd4+8];
    ld.global.f64 %fd3, [%rd4+16];
    fma.rn.f64 %fd4, %fd1, %fd2, %fd3;
    mul.wide.u32 %rd3, %r1, 8;
    add.s64 %rd5, %rd2, %rd3;
    st.global.f64 [%rd5], %fd4;
    ret;
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_f64_fma_quiets_a_signaling_nan_addend(target):
    # an H200 and AMD hardware give the signaling NaN made quiet (payload and sign kept), also when the
    # product is finite (found by the verification replay's f64 mma cases)
    inputs = np.array([[1.5, 2.0, 0.0]] * 4).view(np.uint64)
    inputs[:, 2] = [0xFFF0000000000001, 0x7FF0000000000123, 0x7FF8000000000005, 0x7FF0000000000000]
    out = np.zeros(4, dtype=np.uint64)
    launch(code_object(FMA_F64, target), "fma64", (1, 1, 1), (4, 1, 1), [inputs, out])
    assert out.tolist() == [0xFFF8000000000001, 0x7FF8000000000123, 0x7FF8000000000005, 0x7FF0000000000000]
