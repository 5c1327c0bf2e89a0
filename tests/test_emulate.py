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
from tests.ptxframes import entry

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


SAXPY = "\n" + entry("saxpy", "u64 px, u64 py, f32 a, u32 n", ".pred %p<2>, .b32 %r<8>, .f32 %f<4>, .b64 %rd<8>", """
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
""")


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


SHARED = "\n" + entry("reduce", "u64 pin, u64 pout, u64 pcount", ".pred %p<4>, .b32 %r<16>, .b64 %rd<8>", """
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
""", declarations=".shared .align 4 .b32 part[256];")


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


WARP = "\n" + entry("warp", "u64 pin, u64 pout", ".pred %p<4>, .b32 %r<16>, .b64 %rd<8>", """
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
""")


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


HALF = "\n" + entry("half", "u64 pa, u64 pb, u64 pout", ".b16 %h<8>, .b32 %r<4>, .f32 %f<4>, .b64 %rd<8>", """
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
""")


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


U64 = "\n" + entry("wide", "u64 pin, u64 pout", ".b64 %rd<16>, .b32 %r<4>", """
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
""")


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


LOCAL = "\n" + entry("local", "u64 pin, u64 pout", ".pred %p<2>, .b32 %r<12>, .b64 %rd<8>", """
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
""", declarations=".local .align 4 .b8 table[64];")


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
""" + entry("globals", "u64 pout", ".b32 %r<10>, .b64 %rd<8>", """
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
""")


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
CMPK = "\n" + entry("cmpk", "u64 pout, u32 start", ".pred %p<4>, .b32 %r<10>, .b64 %rd<4>", """
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
""")


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


HIDDEN = "\n" + entry("dims", "u64 pout", ".b32 %r<16>, .b64 %rd<8>", """
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
""")


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


OUT_OF_BOUNDS = "\n" + entry("oob", "u64 pout, u32 step", ".b32 %r<4>, .b64 %rd<8>", """
    mov.u32 %r2, %tid.x;
    mul.lo.u32 %r3, %r2, %r1;
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
""")


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


FMA_F64 = "\n" + entry("fma64", "u64 pin, u64 pout", ".b32 %r<2>, .f64 %fd<5>, .b64 %rd<6>", """
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
""")


@pytest.mark.parametrize("target", TARGETS)
def test_f64_fma_quiets_a_signaling_nan_addend(target):
    # an H200 and AMD hardware give the signaling NaN made quiet (payload and sign kept), also when the
    # product is finite (found by the verification replay's f64 mma cases)
    inputs = np.array([[1.5, 2.0, 0.0]] * 4).view(np.uint64)
    inputs[:, 2] = [0xFFF0000000000001, 0x7FF0000000000123, 0x7FF8000000000005, 0x7FF0000000000000]
    out = np.zeros(4, dtype=np.uint64)
    launch(code_object(FMA_F64, target), "fma64", (1, 1, 1), (4, 1, 1), [inputs, out])
    assert out.tolist() == [0xFFF8000000000001, 0x7FF8000000000123, 0x7FF8000000000005, 0x7FF0000000000000]


# --- the MODE register: FP_ROUND and FP_DENORM from the descriptor and from s_round_mode / s_denorm_mode /
# s_setreg, against an independent model (the rounded result found by bisection over the ordered bit patterns
# of the format, with Python fractions)

_FLOAT_BITS = {32: (np.float32, np.uint32), 64: (np.float64, np.uint64)}
_LLVM_TYPE = {32: "float", 64: "double"}
# llvm.set.rounding's argument (FLT_ROUNDS) for PTX's directed modes
_FLT_ROUNDS = {"rz": 0, "rp": 2, "rm": 3}


def _value(bits: int, width: int):
    from fractions import Fraction
    ftype, utype = _FLOAT_BITS[width]
    return Fraction(float(np.array([bits], dtype=utype).view(ftype)[0]))


def _is_subnormal(bits: int, width: int) -> bool:
    mant = 23 if width == 32 else 52
    magnitude = bits & ((1 << (width - 1)) - 1)
    return 0 < magnitude < (1 << mant)


def _flushed(bits: int, width: int) -> int:
    return bits & (1 << (width - 1)) if _is_subnormal(bits, width) else bits


def _round_reference(exact, width: int, mode: str) -> int:
    """The bits of the non-zero rational `exact` rounded to the format: the largest pattern whose value is
    at most |exact| found by bisection, then the step up where the mode asks (2^(emax+1) stands in for inf's
    value, so round-to-nearest overflows exactly where IEEE 754 says)."""
    from fractions import Fraction
    negative = exact < 0
    magnitude = -exact if negative else exact
    infinity = 0x7F800000 if width == 32 else 0x7FF0000000000000
    top = Fraction(2) ** (128 if width == 32 else 1024)

    def value(p):
        return top if p == infinity else _value(p, width)
    lo, hi = 0, infinity  # value(lo) <= magnitude < value(hi), or magnitude beyond every finite value
    if magnitude >= top:
        lo = infinity - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if value(mid) <= magnitude:
            lo = mid
        else:
            hi = mid
    if value(lo) == magnitude:
        pick = lo
    elif mode == "rz" or (mode == "rp" and negative) or (mode == "rm" and not negative):
        pick = lo
    elif mode in ("rp", "rm"):
        pick = hi
    else:
        below, above = magnitude - value(lo), value(hi) - magnitude
        pick = lo if below < above or below == above and lo % 2 == 0 else hi
    return pick | (int(negative) << (width - 1))


def _reference(op: str, width: int, mode: str, flush: bool, operands: list[int]) -> int | None:
    """The expected bits (None: a NaN is expected)."""
    sign = 1 << (width - 1)
    if flush:
        operands = [_flushed(o, width) for o in operands]
    if op == "sub":
        op, operands = "add", [operands[0], operands[1] ^ sign]
    ftype, utype = _FLOAT_BITS[width]
    with np.errstate(all="ignore"):  # (a signaling NaN's cast)
        floats = np.array(operands, dtype=utype).view(ftype).astype(np.float64)
    if not np.isfinite(floats).all():  # Inf/NaN operands: the result does not depend on rounding
        with np.errstate(all="ignore"):
            if op == "add":
                r = floats[0] + floats[1]
            elif op == "mul":
                r = floats[0] * floats[1]
            else:
                r = np.inf * floats[0] * floats[1] + floats[2] if np.isinf(floats[:2]).any() else \
                    floats[0] * floats[1] + floats[2]
        if np.isnan(r):
            return None
        return int(np.array([r], dtype=np.float64).astype(ftype).view(utype)[0])
    signs = [bool(o & sign) for o in operands]
    values = [_value(o, width) for o in operands]
    if op == "add":
        terms, term_signs = values, signs
    elif op == "mul":
        terms, term_signs = [values[0] * values[1]], [signs[0] != signs[1]]
    else:
        terms, term_signs = [values[0] * values[1], values[2]], [signs[0] != signs[1], signs[2]]
    total = sum(terms)
    if total != 0:
        result = _round_reference(total, width, mode)
    elif op == "mul" or all(t == 0 for t in terms) and len(set(term_signs)) == 1:
        result = int(term_signs[0]) * sign
    else:
        result = sign if mode == "rm" else 0
    return _flushed(result, width) if flush else result


def _patterns(width: int, n: int) -> np.ndarray:
    """Random bit patterns, exponent-spread values near one another (so sums cancel and round), subnormals,
    ±0, ±Inf, NaN and operands whose results are ties."""
    ftype, utype = _FLOAT_BITS[width]
    raw = RNG.integers(0, 1 << width, n, dtype=np.uint64).astype(utype)
    spread = (RNG.standard_normal(n) * np.exp2(RNG.integers(-20, 20, n))).astype(ftype).view(utype)
    tiny_exponent = -140 if width == 32 else -1060
    tiny = (RNG.standard_normal(n) * np.exp2(RNG.integers(tiny_exponent, tiny_exponent + 30, n))).astype(ftype)
    out = np.where(RNG.random(n) < 0.3, raw, np.where(RNG.random(n) < 0.5, spread, tiny.view(utype)))
    half_ulp = 2.0 ** (-24 if width == 32 else -53)
    tie_square = 1.0 + 2.0 ** (-12 if width == 32 else -26)  # its square is a tie
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, half_ulp, -half_ulp, tie_square,
                3.0 * half_ulp, np.finfo(ftype).max, -np.finfo(ftype).tiny, np.finfo(ftype).smallest_subnormal]
    out[:len(specials)] = np.array(specials, dtype=ftype).view(utype)
    return out


def _mode_module(width: int, kernels: list[tuple[str, str, str]], attributes: str) -> str:
    """LLVM IR: one kernel per (name, op, mode) computing out[i] = op(a[i], b[i], c[i]); a directed mode as
    llvm.set.rounding around the constrained operation (LLVM lowers it to s_round_mode or s_setreg)."""
    t = _LLVM_TYPE[width]
    suffix = "f32" if width == 32 else "f64"
    functions = []
    for name, op, mode in kernels:
        args = {"add": "a, b", "sub": "a, b", "mul": "a, b", "fma": "a, b, c"}[op]
        ir_args = ", ".join(f"{t} %{x.strip()}" for x in args.split(","))
        constrained = {"add": "fadd", "sub": "fsub", "mul": "fmul", "fma": "fma"}[op]
        if mode == "rn":
            body = (f"  %r = call {t} @llvm.fma.{suffix}({ir_args})\n" if op == "fma" else
                    f"  %r = {constrained} {ir_args.replace(t + ' ', '', 1).replace(', ' + t, ',', 1)}\n"
                    .replace(f"{constrained} ", f"{constrained} {t} ", 1))
            strict = ""
        else:
            body = (f"  call void @llvm.set.rounding(i32 {_FLT_ROUNDS[mode]}) #1\n"
                    f"  %r = call {t} @llvm.experimental.constrained.{constrained}.{suffix}({ir_args}, "
                    "metadata !\"round.dynamic\", metadata !\"fpexcept.ignore\") #1\n"
                    "  call void @llvm.set.rounding(i32 1) #1\n")
            strict = " #1"
        loads = "".join(f"  %p{x} = getelementptr {t}, ptr addrspace(1) %{x}p, i32 %i\n"
                        f"  %{x} = load {t}, ptr addrspace(1) %p{x}\n" for x in "abc")
        functions.append(
            f"define amdgpu_kernel void @{name}(ptr addrspace(1) %out, ptr addrspace(1) %ap, "
            f"ptr addrspace(1) %bp, ptr addrspace(1) %cp) #0 {{\n"
            f"  %t = call i32 @llvm.amdgcn.workitem.id.x(){strict}\n"
            f"  %g = call i32 @llvm.amdgcn.workgroup.id.x(){strict}\n"
            "  %gs = shl i32 %g, 6\n  %i = add i32 %gs, %t\n" + loads + body +
            f"  %po = getelementptr {t}, ptr addrspace(1) %out, i32 %i\n"
            f"  store {t} %r, ptr addrspace(1) %po\n  ret void\n}}\n")
    declarations = "".join(
        f"declare {t} @llvm.experimental.constrained.{c}.{suffix}({', '.join([t] * k)}, metadata, metadata)\n"
        for c, k in (("fadd", 2), ("fsub", 2), ("fmul", 2), ("fma", 3)))
    return ("".join(functions) + declarations + f"declare {t} @llvm.fma.{suffix}({t}, {t}, {t})\n"
            "declare void @llvm.set.rounding(i32)\ndeclare i32 @llvm.amdgcn.workitem.id.x()\n"
            "declare i32 @llvm.amdgcn.workgroup.id.x()\n"
            f"attributes #0 = {{ strictfp \"amdgpu-flat-work-group-size\"=\"64,64\" {attributes} }}\n"
            "attributes #1 = { strictfp }\n")


def _compiled(text: str, target: str) -> bytes:
    """LLVM IR text → a linked code object: llvmlite's AMDGPU backend to assembly (inline asm included),
    clang's assembler, LLD."""
    from llvmlite import binding as llvm

    from fatkit.translate.targets.amdgpu import assembled, link
    from fatkit.translate.targets.amdgpu_child import target_machine
    key = (text, target)
    if key not in _BUILT:
        module = llvm.parse_assembly(text)
        module.verify()
        assembly = target_machine(target).emit_assembly(module).encode()
        _BUILT[key] = link([assembled(assembly, target)])
    return _BUILT[key]


def _check_mode_kernels(target: str, width: int, flush: bool, attributes: str, modes: tuple[str, ...]) -> None:
    ops = ("add", "sub", "mul", "fma")
    kernels = [(f"{op}_{mode}", op, mode) for op in ops for mode in modes]
    co = _compiled(_mode_module(width, kernels, attributes), target)
    n = 128
    _, utype = _FLOAT_BITS[width]
    for name, op, mode in kernels:
        a, b, c = _patterns(width, n), _patterns(width, n), _patterns(width, n)
        # ties: b = a · (half an ulp) for add/sub; mul and fma ties come from the specials above
        b[20:40] = (a[20:40].view(_FLOAT_BITS[width][0]) * np.float64(2.0 ** (-24 if width == 32 else -53))
                    ).astype(_FLOAT_BITS[width][0]).view(utype)
        out = np.zeros(n, dtype=utype)
        launch(co, name, (n // 64, 1, 1), (64, 1, 1), [out, a, b, c])
        for i in range(n):
            operands = [int(a[i]), int(b[i])] + ([int(c[i])] if op == "fma" else [])
            want = _reference(op, width, mode, flush, operands)
            got = int(out[i])
            where = f"{name} f{width} lane {i}: {[hex(o) for o in operands]} → 0x{got:x}"
            if want is None:
                assert np.isnan(np.array([got], dtype=utype).view(_FLOAT_BITS[width][0])[0]), where
            else:
                assert got == want, f"{where}, want 0x{want:x}"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("width", [32, 64])
def test_directed_rounding_through_the_mode_register(target, width):
    _check_mode_kernels(target, width, False, "", ("rz", "rp", "rm"))


@pytest.mark.parametrize("target", TARGETS)
def test_f32_denormals_flushed_by_the_descriptor_mode(target):
    co = _compiled(_mode_module(32, [("probe", "add", "rn")],
                                '"denormal-fp-math-f32"="preserve-sign,preserve-sign"'), target)
    kd = next(d for d in parse_code_object(co).descriptors if d.name == "probe")
    assert (kd.rsrc1 >> 16) & 3 == 0 and (kd.rsrc1 >> 18) & 3 == 3  # f32 flushes, f64/f16 keep
    _check_mode_kernels(target, 32, True, '"denormal-fp-math-f32"="preserve-sign,preserve-sign"',
                        ("rn", "rz", "rp", "rm"))


@pytest.mark.parametrize("target", TARGETS)
def test_f64_denormals_flushed_by_the_descriptor_mode(target):
    _check_mode_kernels(target, 64, True, '"denormal-fp-math"="preserve-sign,preserve-sign"', ("rn", "rm"))


def _asm_kernel(asm: str, constraints: str, result: str, operands: list[tuple[str, str]]) -> str:
    """A one-lane kernel storing the result of an inline-asm block over loaded operands."""
    loads = "".join(f"  %p{k} = getelementptr i32, ptr addrspace(1) %in, i32 {k}\n"
                    f"  %x{k} = load {t}, ptr addrspace(1) %p{k}\n" for k, (t, _) in enumerate(operands))
    args = ", ".join(f"{t} %x{k}" for k, (t, _) in enumerate(operands))
    return ("define amdgpu_kernel void @k(ptr addrspace(1) %out, ptr addrspace(1) %in) {\n" + loads +
            f"  %r = call {result} asm sideeffect \"{asm}\", \"{constraints}\"({args})\n"
            f"  store {result} %r, ptr addrspace(1) %out\n  ret void\n}}\n")


def _run_asm(target: str, asm: str, constraints: str, inputs: list[int]) -> int:
    co = _compiled(_asm_kernel(asm, constraints, "i32", [("i32", "")] * len(inputs)), target)
    out = np.zeros(1, dtype=np.uint32)
    launch(co, "k", (1, 1, 1), (1, 1, 1), [out, np.array(inputs, dtype=np.uint32)])
    return int(out[0])


@pytest.mark.parametrize("target", TARGETS)
def test_getreg_and_setreg_of_the_mode_register(target):
    co = _compiled(_asm_kernel("s_getreg_b32 $0, hwreg(HW_REG_MODE, 0, 10)", "=s", "i32", []), target)
    rsrc1 = next(d for d in parse_code_object(co).descriptors if d.name == "k").rsrc1
    # FP_ROUND/FP_DENORM from rsrc1 bits 19:12, DX10_CLAMP (rsrc1 bit 21) in bit 8, IEEE (bit 23) in bit 9
    want = (rsrc1 >> 12) & 0xFF | ((rsrc1 >> 21) & 1) << 8 | ((rsrc1 >> 23) & 1) << 9
    if target == "gfx1201":  # gfx12 reuses rsrc1 bits 21 and 23: no DX10_CLAMP, IEEE set (fatkit/emulate/dispatch.py)
        want = (rsrc1 >> 12) & 0xFF | 1 << 9
    assert want & 0xFF == 0xF0 and _run_asm(target, "s_getreg_b32 $0, hwreg(HW_REG_MODE, 0, 10)", "=s", []) == want
    # a field written by s_setreg_imm32_b32 and by s_setreg_b32 reads back; the rest of MODE is unchanged
    assert _run_asm(target, "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 1\\0As_nop 1\\0A"
                    "s_getreg_b32 $0, hwreg(HW_REG_MODE, 0, 10)", "=s", []) == want & ~0x30 | 0x10
    assert _run_asm(target, "s_setreg_b32 hwreg(HW_REG_MODE, 2, 2), $1\\0As_nop 1\\0A"
                    "s_getreg_b32 $0, hwreg(HW_REG_MODE, 2, 6)", "=s,s", [3]) == (want >> 2) & 0x3C | 3
    with pytest.raises(FatkitError, match="MODE bits 0x200"):  # IEEE is the descriptor's here
        _run_asm(target, "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 9, 1), 0\\0As_getreg_b32 $0, "
                 "hwreg(HW_REG_MODE, 0, 10)", "=s", [])


# f32 bit patterns: a subnormal (2^-127), its negative, and inputs whose results are subnormal (2^127: its
# reciprocal 2^-127; -127.0 and -149.0: 2^-127, 2^-149)
_SUBNORMAL, _HUGE, _MINUS_127, _MINUS_149 = 0x00400000, 0x7F000000, 0xC2FE0000, 0xC3150000


@pytest.mark.parametrize("target", TARGETS)
def test_transcendental_f32_instructions_flush_in_every_mode(target):
    """V_RCP/V_RSQ/V_SQRT/V_LOG/V_EXP_F32 with f32 denormals kept (the descriptor's default): the ISA's
    "denormals are flushed", so a subnormal source is a zero of its sign (rcp 2^-127 would be 2^127 kept,
    sqrt of −2^-127 NaN) and a subnormal result one too. Expected: the function of ±0, ±inf (IEEE)."""
    negative = _SUBNORMAL | 1 << 31
    cases = [("v_rcp_f32", _SUBNORMAL, 0x7F800000), ("v_rcp_f32", negative, 0xFF800000),
             ("v_rcp_f32", _HUGE, 0), ("v_rcp_f32", _HUGE | 1 << 31, 1 << 31),
             ("v_rsq_f32", _SUBNORMAL, 0x7F800000), ("v_rsq_f32", negative, 0xFF800000),
             ("v_sqrt_f32", _SUBNORMAL, 0), ("v_sqrt_f32", negative, 1 << 31),
             ("v_log_f32", _SUBNORMAL, 0xFF800000), ("v_log_f32", negative, 0xFF800000),
             ("v_exp_f32", _MINUS_127, 0), ("v_exp_f32", _MINUS_149, 0), ("v_exp_f32", _SUBNORMAL, 0x3F800000)]
    for instruction, x, want in cases:
        got = _run_asm(target, f"{instruction} $0, $1", "=v,v", [x])
        assert got == want, f"{instruction} 0x{x:08x} → 0x{got:08x}, want 0x{want:08x}"
    # v_sin_f32 supports denormals: sin of 2^-127 turns is 2π·2^-127 (a normal number), not 0
    assert _run_asm(target, "v_sin_f32 $0, $1", "=v,v", [_SUBNORMAL]) != 0


def test_round_and_denorm_mode_instructions_on_gfx11():
    one, third = 0x3F800000, 0x3EAAAAAB  # 1/3 rounds up to nearest: 0x3EAAAAAB is above it
    # towards −inf with s_round_mode (bits 1:0 = 2), back to nearest afterwards
    assert _run_asm("gfx1100", "s_round_mode 0x2\\0Av_mul_f32 $0, $1, $2\\0As_round_mode 0x0", "=v,v,v",
                    [one, third]) == third
    assert _run_asm("gfx1100", "s_round_mode 0x3\\0Av_add_f32 $0, $1, $2\\0As_round_mode 0x0", "=v,v,v",
                    [one, 0x33000001]) == one  # 1 + (just over half an ulp) towards zero
    assert _run_asm("gfx1100", "s_round_mode 0x1\\0Av_add_f32 $0, $1, $2\\0As_round_mode 0x0", "=v,v,v",
                    [one, 0x00000001]) == one + 1  # towards +inf, a subnormal addend moves one ulp
    # s_denorm_mode 0 flushes f32 inputs and outputs: the subnormal addend vanishes, 2^-126/2 becomes +0
    assert _run_asm("gfx1100", "s_denorm_mode 0x0\\0As_round_mode 0x1\\0Av_add_f32 $0, $1, $2\\0A"
                    "s_round_mode 0x0\\0As_denorm_mode 0xf", "=v,v,v", [one, 0x00000001]) == one
    assert _run_asm("gfx1100", "s_denorm_mode 0xc\\0Av_mul_f32 $0, $1, $2\\0As_denorm_mode 0xf", "=v,v,v",
                    [0x00800000, 0x3F000000]) == 0
    assert _run_asm("gfx1100", "v_mul_f32 $0, $1, $2", "=v,v,v", [0x00800000, 0x3F000000]) == 0x00400000


@pytest.mark.parametrize("target", TARGETS)
def test_an_operation_the_directed_modes_do_not_model_is_an_error(target):
    with pytest.raises(FatkitError, match="v_cvt_f32_u32.*MODE 0xf3"):
        _run_asm(target, "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 2), 3\\0Av_cvt_f32_u32 $0, $1\\0A"
                 "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 2), 0", "=v,v", [0xFFFFFFFF])


def _flushed_f32(bits: int) -> float:
    """An f32 pattern's value with subnormals read as zeros of their sign (the model of the flushing mode)."""
    if (bits >> 23) & 0xFF == 0:
        bits &= 0x80000000
    return float(np.array([bits], dtype=np.uint32).view(np.float32)[0])


def _f32_bits(x: np.float32) -> int:
    bits = int(np.array([x], dtype=np.float32).view(np.uint32)[0])
    return bits & 0x80000000 if (bits >> 23) & 0xFF == 0 else bits


def test_packed_f32_halves_flush_by_the_f32_mode():
    """gfx942's v_pk_add/mul/fma_f32 under MODE's f32 field set to flush (0): each half's inputs and result
    flushed to a zero of its sign, f16/f64 untouched; expected from numpy on the explicitly flushed halves."""
    rng = np.random.default_rng(18)
    specials = [0, 1, 0x80000001, 0x007FFFFF, 0x00800000, 0x80800000, 0x3F800000, 0x7F800000, 0x7FC00000,
                0x00400000, 0x3F000000, 0x80000000]
    text = ("s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 0\\0As_nop 1\\0A{op}\\0As_nop 1\\0A"
            "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 3")
    operations = {
        "v_pk_add_f32 $0, $1, $2": lambda x, y, z: x + y,
        "v_pk_mul_f32 $0, $1, $2": lambda x, y, z: x * y,
        "v_pk_fma_f32 $0, $1, $2, $3": lambda x, y, z: np.float32(np.float64(x) * np.float64(y) + np.float64(z)),
    }
    for op, model in operations.items():
        kernel = _asm_kernel(text.format(op=op), "=v,v,v,v", "i64", [("i64", "")] * 3)
        co = _compiled(kernel.replace("getelementptr i32", "getelementptr i64"), "gfx942")  # 64-bit operands
        for trial in range(24):
            halves = [[int(rng.choice(specials)) if rng.random() < 0.6 else int(rng.integers(0, 1 << 32))
                       for _ in range(2)] for _ in range(3)]
            if trial % 3 == 0:  # a product in the subnormal range
                halves[0], halves[1] = [0x1F000000, 0x9F800000], [0x1F000000, 0x1F000000]
            words = np.array([h[0] | h[1] << 32 for h in halves], dtype=np.uint64)
            out = np.zeros(1, dtype=np.uint64)
            launch(co, "k", (1, 1, 1), (1, 1, 1), [out, words])
            for lane in range(2):
                x, y, z = (np.float32(_flushed_f32(h[lane])) for h in halves)
                with np.errstate(all="ignore"):
                    want = model(x, y, z)
                got = (int(out[0]) >> (32 * lane)) & 0xFFFFFFFF
                where = (op, [hex(h[lane]) for h in halves], hex(got))
                if np.isnan(want):
                    assert (got >> 23) & 0xFF == 0xFF and got & 0x7FFFFF, where
                else:
                    assert got == _f32_bits(np.float32(want)), where
