"""Runtime services (lower/runtime.py, docs/runtime.md): device malloc/free on the module's heap, vprintf into
the module's print buffer (decoded by fatkit/translate/printf_buffer.py) and the grid workspace that
cooperative groups' grid.sync() reads through %envreg1/%envreg2.

Kernels with a barrier run one OS thread per GPU thread on the host, so the allocator's compare-and-swap loops
really race. The host runs a grid's blocks one after another, so grid.sync() runs here with one block (and
twice, to see the barrier word come back for the next launch); grids of many blocks run on the H200
(verification/cuda/runtime.cu).

The launching tests run on the host JIT and on the gfx1100 and gfx942 code objects (fatkit.emulate, one loaded
Module per program, so the heap, the print buffer and the workspace persist across launches as on a GPU), with
the same expected values; the malloc churn runs fewer rounds on AMD and the printf flood is host-only in its
50 000-call form (see each test).
"""

from __future__ import annotations

import ctypes
import struct
import subprocess
from pathlib import Path

import pytest

from fatkit.translate import printf_buffer
from fatkit.translate.lower import runtime
from fatkit.translate.pipeline import Options, lower, parse, passes, translate
from tests import oracles
from tests.amdrun import TARGETS, EmulatedProgram, HostProgram
from tests.corpus import corpus_file
from tests.ptxrun import HEADER
from tests.ptxframes import entry

READELF = Path("/usr/lib/llvm-22/bin/llvm-readelf")
SAMPLES = Path(__file__).parent / "samples" / "ptx"

DECLARATIONS = """
.extern .func (.param .b64 func_retval0) malloc (.param .b64 malloc_param_0);
.extern .func free (.param .b64 free_param_0);
.extern .func (.param .b32 func_retval0) vprintf (.param .b64 vprintf_param_0, .param .b64 vprintf_param_1);
"""


def _malloc(size: str, result: str) -> str:
    """nvcc's call sequence for `result = malloc(size)`."""
    return f"""{{
    .param .b64 param0;
    st.param.b64 [param0+0], {size};
    .param .b64 retval0;
    call.uni (retval0), malloc, (param0);
    ld.param.b64 {result}, [retval0+0];
    }}"""


def _free(pointer: str) -> str:
    return f"""{{
    .param .b64 param0;
    st.param.b64 [param0+0], {pointer};
    call.uni free, (param0);
    }}"""


def _vprintf(fmt: str, args: str) -> str:
    return f"""{{
    .param .b64 param0;
    st.param.b64 [param0+0], {fmt};
    .param .b64 param1;
    st.param.b64 [param1+0], {args};
    .param .b32 retval0;
    call.uni (retval0), vprintf, (param0, param1);
    ld.param.b32 %r_count, [retval0+0];
    }}"""


def _program(ptx: str, target: str = "host"):
    translation = translate(ptx, Options(target=target))
    assert all(k.status == "ok" for k in translation.kernels), translation.kernels
    return translation.product


def _statuses(ptx: str, target: str) -> dict[str, str]:
    """Each kernel's "ok" or the reason it is not lowered (parse, passes and lower only)."""
    options = Options(target=target)
    return {r.name: r.reason or r.status for r in lower(passes(parse(ptx, options), options), options).reports}


def _loaded(ptx: str, target: str, kernel: str | None = None):
    """The program on `target`, launched with ctypes arrays (tests/amdrun.py); `kernel` (or every kernel) must
    lower."""
    translation = translate(ptx, Options(target=target))
    assert all(k.status == "ok" for k in translation.kernels if kernel in (None, k.name)), translation.kernels
    return HostProgram(translation.product) if target == "host" else EmulatedProgram(translation.product)


def _heap_top(program) -> int:
    return struct.unpack("<Q", program.read(program.address(runtime.HEAP), 8))[0]


# --------------------------------------------------------------------------------------------------
# malloc / free

THREADS = 96
MANY = HEADER + DECLARATIONS + "\n" + entry("many", "u64 addresses, u64 sums",
                                            ".pred %p<3>, .b32 %r<12>, .b64 %rd<16>", f"""
    mov.u32 %r1, %tid.x;
    rem.u32 %r2, %r1, 5;
    mad.lo.u32 %r3, %r2, 24, 16;          // 16, 40, 64, 88, 112 bytes
    cvt.u64.u32 %rd3, %r3;
    {_malloc("%rd3", "%rd4")}
    mul.wide.u32 %rd5, %r1, 8;
    add.s64 %rd6, %rd1, %rd5;
    st.global.u64 [%rd6], %rd4;
    mov.u32 %r4, 0;                        // fill the block: word i = tid * 1000 + i
$fill:
    mad.lo.u32 %r5, %r1, 1000, %r4;
    mul.wide.u32 %rd7, %r4, 4;
    add.s64 %rd8, %rd4, %rd7;
    st.u32 [%rd8], %r5;
    add.u32 %r4, %r4, 1;
    shl.b32 %r6, %r4, 2;
    setp.lt.u32 %p1, %r6, %r3;
    @%p1 bra $fill;
    bar.sync 0;                            // every block is written before any is read back
    mov.u32 %r4, 0;
    mov.u32 %r7, 0;
$sum:
    mul.wide.u32 %rd7, %r4, 4;
    add.s64 %rd8, %rd4, %rd7;
    ld.u32 %r8, [%rd8];
    add.u32 %r7, %r7, %r8;
    add.u32 %r4, %r4, 1;
    shl.b32 %r6, %r4, 2;
    setp.lt.u32 %p1, %r6, %r3;
    @%p1 bra $sum;
    mul.wide.u32 %rd9, %r1, 4;
    add.s64 %rd10, %rd2, %rd9;
    st.global.u32 [%rd10], %r7;
    ret;
""")


def _block_bytes(size: int) -> int:
    """The heap block a request takes: a 16-byte header and the size, rounded up to 32 << class."""
    block = 32
    while block < size + runtime.BLOCK_HEADER_BYTES:
        block *= 2
    return block


@pytest.mark.parametrize("target", TARGETS)
def test_malloc_from_many_threads_gives_distinct_aligned_blocks_that_keep_their_contents(target):
    program = _loaded(MANY, target)
    addresses, sums = (ctypes.c_uint64 * THREADS)(), (ctypes.c_uint32 * THREADS)()
    program.launch("many", [addresses, sums], block=(THREADS, 1, 1))
    sizes = [16 + 24 * (t % 5) for t in range(THREADS)]
    arena = program.address(runtime.HEAP) + runtime.HEAP_HEADER_BYTES
    spans = sorted((addresses[t], addresses[t] + sizes[t]) for t in range(THREADS))
    assert all(start % 16 == 0 and arena <= start and end <= arena + runtime.HEAP_BYTES for start, end in spans)
    assert all(end <= following for (_, end), (following, _) in zip(spans, spans[1:]))  # disjoint
    assert list(sums) == [sum(t * 1000 + i for i in range(sizes[t] // 4)) for t in range(THREADS)]
    assert _heap_top(program) == sum(_block_bytes(s) for s in sizes)  # nothing freed: all from the bump


def _churn(rounds: int) -> str:
    return HEADER + DECLARATIONS + "\n" + entry("churn", "u64 errors", ".pred %p<3>, .b32 %r<12>, .b64 %rd<16>", f"""
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, 0;
    mov.u32 %r9, 0;
    mov.u64 %rd3, 40;
    bar.sync 0;
$round:
    {_malloc("%rd3", "%rd4")}
    setp.eq.s64 %p2, %rd4, 0;
    @%p2 bra $broken;
    st.volatile.u32 [%rd4], %r1;           // the block is this thread's until it frees it
    st.volatile.u32 [%rd4+36], %r2;
    ld.volatile.u32 %r3, [%rd4];
    ld.volatile.u32 %r4, [%rd4+36];
    setp.ne.u32 %p1, %r3, %r1;
    @%p1 bra $broken;
    setp.ne.u32 %p1, %r4, %r2;
    @%p1 bra $broken;
    {_free("%rd4")}
    bra.uni $next;
$broken:
    add.u32 %r9, %r9, 1;
$next:
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p1, %r2, {rounds};
    @%p1 bra $round;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd1, %rd5;
    st.global.u32 [%rd6], %r9;
    ret;
""")


CHURN_ROUNDS = {"host": 40, "gfx1100": 8, "gfx942": 8}  # on AMD 8 rounds already reuse every block 7 times


CHURN = _churn(CHURN_ROUNDS["host"])


@pytest.mark.parametrize("target", TARGETS)
def test_freed_blocks_are_reused_by_racing_threads_without_handing_one_block_to_two(target):
    rounds = CHURN_ROUNDS[target]
    program = _loaded(_churn(rounds), target)
    errors = (ctypes.c_uint32 * THREADS)()
    program.launch("churn", [errors], block=(THREADS, 1, 1))
    assert list(errors) == [0] * THREADS
    # each thread holds one 64-byte block at a time: reuse keeps the heap at most that many blocks high
    assert 0 < _heap_top(program) <= THREADS * _block_bytes(40) < THREADS * rounds * _block_bytes(40)


EDGES = HEADER + DECLARATIONS + "\n" + entry("edges", "u64 out, u64 foreign", ".b64 %rd<16>", f"""
    mov.u64 %rd3, 0;
    {_free("%rd3")}
    {_free("%rd2")}
    mov.u64 %rd4, 100;
    {_malloc("%rd4", "%rd5")}
    {_free("%rd5")}
    {_free("%rd5")}
    {_malloc("%rd4", "%rd6")}
    {_malloc("%rd4", "%rd7")}
    mov.u64 %rd8, {3 << 20};
    {_malloc("%rd8", "%rd9")}
    {_malloc("%rd8", "%rd10")}
    {_malloc("%rd8", "%rd11")}
    mov.u64 %rd12, {9 << 20};
    {_malloc("%rd12", "%rd13")}
    mov.u64 %rd14, 0;
    {_malloc("%rd14", "%rd15")}
    st.global.v2.u64 [%rd1], {{%rd5, %rd6}};
    st.global.v2.u64 [%rd1+16], {{%rd7, %rd9}};
    st.global.v2.u64 [%rd1+32], {{%rd10, %rd11}};
    st.global.v2.u64 [%rd1+48], {{%rd13, %rd15}};
    ret;
""")


@pytest.mark.parametrize("target", TARGETS)
def test_free_of_null_foreign_and_freed_pointers_is_ignored_and_an_exhausted_heap_gives_null(target):
    program = _loaded(EDGES, target)
    out, foreign = (ctypes.c_uint64 * 8)(), (ctypes.c_uint8 * 64)()
    program.launch("edges", [out, foreign])
    first, again, other, big1, big2, big3, huge, empty = out
    assert first and again == first  # freed once (the second free ignored), then reused
    assert other and other != first  # ... by one malloc only
    # 3 MiB takes a 4 MiB block: after the two small blocks only one fits in the 8 MiB arena
    assert big1 and big1 % 16 == 0
    assert (big2 == 0) and (big3 == 0) and huge == 0
    assert empty and empty % 16 == 0  # malloc(0): a block of the smallest class
    assert _heap_top(program) == 2 * _block_bytes(100) + _block_bytes(3 << 20) + _block_bytes(0)


# --------------------------------------------------------------------------------------------------
# vprintf


def _string(text: bytes) -> str:
    return ", ".join(str(b) for b in text + b"\0")


PRINT_FORMAT = b"%c|%hd|%d|%u|%x|%ld|%lld|%f|%e|%g|%s|%p|%%|%5.2f|%*d|%-4d|\n"
PRINTS = HEADER + DECLARATIONS + f"""
.global .align 1 .b8 fmt[{len(PRINT_FORMAT) + 1}] = {{{_string(PRINT_FORMAT)}}};
.global .align 1 .b8 word[6] = {{{_string(b"hello")}}};
.visible .entry prints(.param .u64 counts)
{{
    .local .align 16 .b8 depot[104];
    .reg .b32 %r<12>;
    .reg .b32 %r_count;
    .reg .b64 %rd<20>;
    .reg .f64 %fd<4>;
    mov.u64 %rd1, depot;
    cvta.local.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    add.u32 %r2, %r1, 65;                  // %c 'A' + tid
    neg.s32 %r3, %r1;                      // %hd -tid
    mul.lo.u32 %r4, %r1, 1000;             // %d
    st.local.v2.u32 [%rd1], {{%r2, %r3}};
    st.local.u32 [%rd1+8], %r4;
    mov.u32 %r5, -1;                       // %u
    st.local.u32 [%rd1+12], %r5;
    add.u32 %r6, %r1, 0xbeef;              // %x
    st.local.u32 [%rd1+16], %r6;
    cvt.s64.s32 %rd3, %r3;
    mul.lo.s64 %rd4, %rd3, 10000000000;    // %ld
    st.local.u64 [%rd1+24], %rd4;
    mov.u64 %rd5, -9223372036854775807;    // %lld
    st.local.u64 [%rd1+32], %rd5;
    cvt.rn.f64.u32 %fd1, %r1;
    add.f64 %fd2, %fd1, 0d3FF8000000000000;  // tid + 1.5: %f %e %g
    st.local.f64 [%rd1+40], %fd2;
    st.local.f64 [%rd1+48], %fd2;
    st.local.f64 [%rd1+56], %fd2;
    mov.u64 %rd6, word;
    cvta.global.u64 %rd7, %rd6;
    st.local.u64 [%rd1+64], %rd7;          // %s
    st.local.u64 [%rd1+72], %rd7;          // %p
    st.local.f64 [%rd1+80], %fd2;          // %5.2f
    mov.u32 %r7, 6;
    st.local.v2.u32 [%rd1+88], {{%r7, %r4}};  // %*d
    st.local.u32 [%rd1+96], %r4;           // %-4d
    mov.u64 %rd8, fmt;
    cvta.global.u64 %rd9, %rd8;
    bar.sync 0;                            // the threads print together: their reservations race
    {_vprintf("%rd9", "%rd2")}
    cvt.u64.u32 %rd10, %r1;
    shl.b64 %rd10, %rd10, 2;
    ld.param.u64 %rd11, [counts];
    add.s64 %rd12, %rd11, %rd10;
    st.global.u32 [%rd12], %r_count;
    ret;
}}
"""


def _expected_line(tid: int, word_address: int) -> str:
    value = tid + 1.5
    return (f"{chr(65 + tid)}|{-tid}|{tid * 1000}|{2 ** 32 - 1}|{tid + 0xbeef:x}|{-tid * 10000000000}|"
            f"{-(2 ** 63) + 1}|{value:f}|{value:e}|{value:g}|hello|0x{word_address:x}|%|{value:5.2f}|"
            f"{tid * 1000:6d}|{tid * 1000:<4d}|\n")


def _print_buffer(program) -> bytes:
    return program.read(program.address(runtime.PRINTF), printf_buffer.HEADER_BYTES + printf_buffer.CAPACITY)


@pytest.mark.parametrize("target", TARGETS)
def test_vprintf_records_decode_to_what_c_printf_prints(target):
    layout, size = printf_buffer.argument_layout(PRINT_FORMAT)
    assert [a.offset for a in layout] == [0, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 92, 96]
    assert size == 100
    program = _loaded(PRINTS, target)
    threads = 32
    counts = (ctypes.c_uint32 * threads)()
    program.launch("prints", [counts], block=(threads, 1, 1))
    assert list(counts) == [len(layout)] * threads  # CUDA's printf returns the number of arguments
    text, dropped = printf_buffer.decode(_print_buffer(program), program.string_at)
    word = program.address("word")
    assert dropped == 0
    lines = text.decode().splitlines(keepends=True)  # in the order the threads reserved their records
    assert sorted(lines) == sorted(_expected_line(t, word) for t in range(threads))


def test_argument_layout_follows_cuda_packing():
    layout, size = printf_buffer.argument_layout(b"%c %hd %d %lld %f %f %s %p %% %hhu %5.2f %*d\n")
    # nvcc -ptx of printf(fmt, char, short, int, long long, double, float, char*, int*, uchar, double, 3, 7)
    assert [(a.offset, a.size) for a in layout] == [(0, 4), (4, 4), (8, 4), (16, 8), (24, 8), (32, 8), (40, 8),
                                                    (48, 8), (56, 4), (64, 8), (72, 4), (76, 4)]
    assert size == 80
    for bad, why in ((b"%n", "%n"), (b"%Lf", "long double"), (b"%k", "not a conversion"), (b"50%", "ends inside"),
                     (b"%lc", "wide characters"), (b"%ls", "not a conversion")):
        with pytest.raises(printf_buffer.FormatStringError, match=why):
            printf_buffer.argument_layout(bad)


FLOOD_FORMAT = b"line %d\n"
BARE_FORMAT = b"bare\n"
# (threads, calls per thread, line records already in the buffer): more records than the buffer holds. The
# host fills the whole megabyte, one thread's 50 000 calls; on AMD (ten thousand times slower) the buffer starts
# as if earlier launches had printed all but 100 lines' room (one filler record the host writes), and a wave's
# 64 lanes print 4 lines each.
FLOOD_SHAPE = {"host": (1, 50_000, 0), "gfx1100": (64, 4, 100), "gfx942": (64, 4, 100)}


def _flood(calls: int) -> str:
    """Thread 0 prints `bare` once, then each thread prints `line i*threads+tid` for i < calls."""
    return HEADER + DECLARATIONS + f"""
.global .align 1 .b8 fmt[{len(FLOOD_FORMAT) + 1}] = {{{_string(FLOOD_FORMAT)}}};
.global .align 1 .b8 bare[{len(BARE_FORMAT) + 1}] = {{{_string(BARE_FORMAT)}}};
.visible .entry flood()
{{
    .local .align 8 .b8 depot[8];
    .reg .pred %p<3>;
    .reg .b32 %r<6>;
    .reg .b32 %r_count;
    .reg .b64 %rd<8>;
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    setp.ne.u32 %p2, %r2, 0;
    @%p2 bra $lines;
    mov.u64 %rd5, bare;
    cvta.global.u64 %rd6, %rd5;
    {_vprintf("%rd6", "0")}
$lines:
    mov.u64 %rd1, depot;
    cvta.local.u64 %rd2, %rd1;
    mov.u64 %rd3, fmt;
    cvta.global.u64 %rd4, %rd3;
    mov.u32 %r1, 0;
$again:
    mad.lo.u32 %r4, %r1, %r3, %r2;
    st.local.u32 [%rd1], %r4;
    {_vprintf("%rd4", "%rd2")}
    add.u32 %r1, %r1, 1;
    setp.lt.u32 %p1, %r1, {calls};
    @%p1 bra $again;
    ret;
}}
"""


def _prefill(program, room: int) -> int:
    """Fill the print buffer but for `room` line records (24 bytes each) and a bare one (16) with one record of
    `line %d` whose argument is -1, as an earlier launch would leave it; returns that record's size."""
    size = printf_buffer.CAPACITY - 16 - 24 * room
    buffer = program.address(runtime.PRINTF)
    header = struct.pack("<II", size, 0) + bytes(printf_buffer.HEADER_BYTES - 8)
    record = struct.pack("<IIQi", size, 4, program.address("fmt"), -1)
    program.write(buffer, header + record)
    return size


@pytest.mark.parametrize("target", TARGETS)
def test_records_that_do_not_fit_are_dropped_and_counted(target):
    threads, calls, room = FLOOD_SHAPE[target]
    program = _loaded(_flood(calls), target)
    filler = _prefill(program, room) if room else 0
    program.launch("flood", [], block=(threads, 1, 1))
    records, dropped = printf_buffer.read_records(_print_buffer(program))
    text, _ = printf_buffer.decode(_print_buffer(program), program.string_at)
    if filler:
        assert records[0].arguments == struct.pack("<i", -1) and text.startswith(b"line -1\n")
        records = records[1:]
    assert [r.arguments for r in records].count(b"") == 1 and text.count(b"bare\n") == 1
    kept = len(records) - 1
    assert kept + dropped == threads * calls and dropped > 0
    # the bare record: 16 bytes; each line: 16 + 4 → 24
    assert kept == (printf_buffer.CAPACITY - filler - 16) // 24 == (room or (printf_buffer.CAPACITY - 16) // 24)
    # a thread's records are its first calls in order: once one does not fit, no later one (all 24 bytes) does
    printed: dict[int, list[int]] = {t: [] for t in range(threads)}
    for record in records:
        if record.arguments:
            value = struct.unpack("<i", record.arguments)[0]
            printed[value % threads].append(value // threads)
    assert all(calls_kept == list(range(len(calls_kept))) for calls_kept in printed.values())
    assert sum(map(len, printed.values())) == kept
    if threads == 1:
        assert text.startswith(b"bare\nline 0\nline 1\n") and text.endswith(f"line {kept - 1}\n".encode())


@pytest.mark.parametrize("source, reason", [
    ("ld.param.u64 %rd1, [fmt_param];", "not a constant string"),
    ("mov.u64 %rd1, badfmt; cvta.global.u64 %rd1, %rd1;", "not a constant string"),  # two definitions
    ("mov.u64 %rd1, nfmt;", "%n writes through a pointer"),
])
def test_vprintf_formats_it_cannot_read_are_refused(source, reason):
    ptx = HEADER + DECLARATIONS + f"""
.global .align 1 .b8 badfmt[3] = {{37, 100, 0}};
.global .align 1 .b8 nfmt[3] = {{37, 110, 0}};
.visible .entry refused(.param .u64 fmt_param)
{{
    .reg .b32 %r_count;
    .reg .b64 %rd<4>;
    {source}
    {_vprintf("%rd1", "0")}
    ret;
}}
"""
    assert reason in _statuses(ptx, "host")["refused"]


# --------------------------------------------------------------------------------------------------
# grid workspace (%envreg1/%envreg2)

GRID_SYNC = HEADER + """
.visible .entry grid_sync(.param .u64 out)
{
    .reg .pred %p<6>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd9, [out];
    mov.u32 %r2, %envreg2;
    cvt.u64.u32 %rd2, %r2;
    mov.u32 %r3, %envreg1;
    cvt.u64.u32 %rd3, %r3;
    bfi.b64 %rd1, %rd3, %rd2, 32, 32;     // cooperative groups' workspace address
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd9, %rd4;
    st.global.u32 [%rd5], %r1;
    setp.ne.s64 %p1, %rd1, 0;
    @%p1 bra $have;
    trap;
$have:
    barrier.sync 0;
    setp.ne.u32 %p2, %r1, 0;
    @%p2 bra $after;
    add.s64 %rd6, %rd1, 4;
    mov.u32 %r5, %nctaid.x;
    mov.u32 %r6, -2147483647;
    sub.s32 %r7, %r6, %r5;                // the first block adds 0x80000001 - blocks
    atom.add.release.gpu.u32 %r8, [%rd6], %r7;
$wait:
    ld.acquire.gpu.u32 %r9, [%rd6];
    xor.b32 %r10, %r9, %r8;
    setp.gt.s32 %p3, %r10, -1;
    @%p3 bra $wait;
$after:
    barrier.sync 0;
    add.u32 %r11, %r1, 1;
    mov.u32 %r16, %ntid.x;
    rem.u32 %r12, %r11, %r16;
    mul.wide.u32 %rd7, %r12, 4;
    add.s64 %rd8, %rd9, %rd7;
    ld.global.u32 %r13, [%rd8];
    ld.global.u32 %r14, [%rd5];
    add.u32 %r15, %r13, %r14;
    barrier.sync 0;
    st.global.u32 [%rd5], %r15;
    st.global.u64 [%rd9+1024], %rd1;
    ret;
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_grid_sync_finds_the_module_workspace_and_leaves_it_ready_for_the_next_launch(target):
    program = _loaded(GRID_SYNC, target)
    workspace = program.address(runtime.WORKSPACE)
    threads = 64
    for launch, flipped in ((1, 0x80000000), (2, 0)):
        out = (ctypes.c_uint32 * (256 + 2))()
        program.launch("grid_sync", [out], block=(threads, 1, 1))
        assert list(out[:threads]) == [t + (t + 1) % threads for t in range(threads)], launch
        assert out[256] | out[257] << 32 == workspace
        barrier = struct.unpack("<I", program.read(workspace + 4, 4))[0]
        assert barrier == flipped  # the top bit flips once per grid.sync; the count is back to 0


def test_other_environment_registers_are_refused_precisely():
    ptx = HEADER + ".visible .entry env(.param .u64 out) { .reg .b32 %r1; mov.u32 %r1, %envreg3; ret; }"
    reason = _statuses(ptx, "host")["env"]
    assert "%envreg3" in reason and "%envreg1/%envreg2" in reason


# --------------------------------------------------------------------------------------------------
# the AMD and NVIDIA targets

EVERYTHING = [MANY, CHURN, EDGES, PRINTS, GRID_SYNC]


def _symbols(code_object: bytes, tmp_path: Path) -> dict[str, int]:
    path = tmp_path / "runtime.hsaco"
    path.write_bytes(code_object)
    listing = subprocess.run([READELF, "--dyn-syms", "-W", path], capture_output=True, text=True, check=True).stdout
    return {fields[7]: int(fields[2]) for fields in (line.split() for line in listing.splitlines())
            if len(fields) >= 8 and fields[7].startswith("__fatkit_")}


@pytest.mark.skipif(not READELF.exists(), reason="llvm-readelf 22 not installed")
@pytest.mark.parametrize("processor", ["gfx942", "gfx1100"])
def test_amdgpu_code_objects_export_the_runtime_globals(processor, tmp_path):
    for ptx in EVERYTHING:
        code_object = _program(ptx, processor)  # validated: kernels, kernarg layout, metadata
        symbols = _symbols(code_object, tmp_path)
        if "), malloc, (" in ptx:
            assert symbols[runtime.HEAP] == runtime.HEAP_HEADER_BYTES + runtime.HEAP_BYTES
        if "vprintf, (" in ptx:
            assert symbols[runtime.PRINTF] == printf_buffer.HEADER_BYTES + printf_buffer.CAPACITY
        if "%envreg1" in ptx:
            assert symbols[runtime.WORKSPACE] == runtime.WORKSPACE_BYTES


@pytest.mark.parametrize("target", ["sm_90", "sm_90:wave64"])
def test_nvptx_uses_the_same_runtime(target, tmp_path):
    for ptx in EVERYTHING:
        text = _program(ptx, target).decode()
        assert "malloc" not in text.replace("__fatkit_malloc", "") and "vprintf" not in text and "%envreg" not in text
        oracles.assert_ptxas_accepts(text, tmp_path)


# --------------------------------------------------------------------------------------------------
# the kernels of the samples and the corpus that needed these services

SAMPLE_KERNELS = [("basics.sm_80.ptx", "_Z5callsPiiPKfS1_"), ("basics.sm_80.rdc.ptx", "_Z5callsPiiPKfS1_"),
                  ("basics.sm_120.fastmath.ptx", "_Z5callsPiiPKfS1_"), ("warp.sm_86.ptx", "_Z9grid_syncPi"),
                  ("warp.sm_90.lineinfo.ptx", "_Z9grid_syncPi")]


@pytest.mark.parametrize("target", ["gfx942", "gfx1100"])
@pytest.mark.parametrize("sample, kernel", SAMPLE_KERNELS)
def test_sample_kernels_with_malloc_printf_and_grid_sync_lower(sample, kernel, target):
    assert _statuses((SAMPLES / sample).read_text(), target)[kernel] == "ok"


@pytest.mark.parametrize("target", TARGETS)
def test_nvcc_calls_kernel_runs_new_delete_and_printf(target):
    """basics.cu's `calls`: `new Square/Circle` (malloc), a virtual call, `delete` (free through the deleting
    destructor in the vtable) and printf("thread %d of %d: %s %f %lld\\n") with a string from a table of
    addresses, a float promoted to double and a long long."""
    program = _loaded((SAMPLES / "basics.sm_80.ptx").read_text(), target, "_Z5callsPiiPKfS1_")
    threads = 3  # thread 3 would fail the kernel's own assert (out[t] >= 0)
    out, a, b = (ctypes.c_int32 * (threads + 1))(), (ctypes.c_float * 4)(1, 2, 3, 4), (ctypes.c_float * 4)(1, 1, 1, 1)
    program.launch("_Z5callsPiiPKfS1_", [out, 1, a, b], block=(threads, 1, 1))
    text, dropped = printf_buffer.decode(_print_buffer(program), program.string_at)
    assert dropped == 0 and text.decode().splitlines() == [
        "thread 0 of 3: alpha 0.500000 -1", "thread 1 of 3: beta 1.000000 9223372036854775807",
        "thread 2 of 3: alpha -2.250000 42"]
    if target == "host":  # the threads ran one after another: each new reused the block the previous delete freed
        assert _heap_top(program) == _block_bytes(16)
    else:  # one wave: the three threads hold their blocks at the same time
        assert _heap_top(program) == threads * _block_bytes(16)


CORPUS_KERNELS = [
    ("jax_cuda12_plugin/_linalg.so", "CholeskyUpdateKernel", 2),
    ("xformers/_C.so", "SPARSE32GMMA", 1),  # an arch-mismatch message: printf without arguments, then trap
]


@pytest.mark.corpus
@pytest.mark.parametrize("target", ["gfx942", "gfx1100"])
@pytest.mark.parametrize("member, marker, count", CORPUS_KERNELS)
def test_corpus_kernels_with_printf_and_grid_sync_lower(member, marker, count, target):
    from fatkit.extract.scan import scan_paths
    from fatkit.extract.select import ptx_modules
    path = corpus_file(member)
    found = {}
    for module in ptx_modules(scan_paths([path]), on_error=lambda message: None):
        if "vprintf" in module.text or "%envreg" in module.text:
            found.update({k: v for k, v in _statuses(module.text, target).items() if marker in k})
    assert len(found) == count and set(found.values()) == {"ok"}, found
