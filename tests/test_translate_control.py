"""Control flow lowering (lower/control.py): brx.idx, indirect calls through prototypes, target lists,
function addresses and vtable initializers, `.func` parameters of every kind, exit, trap, brkpt, CUDA's
external functions. Kernels run on the host target; one batch compiles for gfx942 and gfx1100."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from fatkit.errors import FatkitError
from fatkit.translate.pipeline import Options, translate
from tests.amdrun import TARGETS
from tests.amdrun import program as amd_program
from tests.ptxrun import HEADER
from tests.ptxframes import entry

SAMPLES = Path(__file__).parent / "samples" / "ptx"


def _run(ptx: str, kernel: str, threads: int, words: int = 1, target: str = "host") -> list[int]:
    """Launch `kernel(out)` over `threads` threads of one block on `target` (the host JIT, or the AMD code
    object on fatkit.emulate); out holds `words` u32 per thread."""
    program = amd_program(ptx, target)
    out = (ctypes.c_uint32 * (threads * words))()
    program.launch(kernel, [out], block=(threads,))
    return list(out)


@pytest.fixture(params=TARGETS)
def target(request) -> str:
    return request.param


def _store_per_thread(value: str) -> str:
    """PTX storing u32 register `value` to out[tid]; needs %rd1 = out, %r1 = tid."""
    return f"""
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], {value};"""


BRX = HEADER + "\n" + entry("brx", "u64 out", ".b32 %r<4>, .b64 %rd<4>", """
    mov.u32 %r1, %tid.x;
    rem.u32 %r2, %r1, 3;
    ts: .branchtargets L0, L1, L2;
    brx.idx %r2, ts;
L1:
    mov.u32 %r3, 111;
    bra.uni DONE;
L0:
    mov.u32 %r3, 100;
    bra.uni DONE;
L2:
    mov.u32 %r3, 222;
DONE:""" + _store_per_thread("%r3") + """
    ret;
""")


def test_brx_idx_jumps_to_the_indexed_label(target):
    assert _run(BRX, "brx", 9, target=target) == [(100, 111, 222)[t % 3] for t in range(9)]


FUNCTIONS = """
.func (.param .b32 r) twice(.param .b32 a)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [a];
    add.s32 %r2, %r1, %r1;
    st.param.b32 [r], %r2;
    ret;
}
.func (.param .b32 r) square(.param .b32 a)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [a];
    mul.lo.s32 %r2, %r1, %r1;
    st.param.b32 [r], %r2;
    ret;
}
"""

INDIRECT = HEADER + FUNCTIONS + """
.global .align 8 .u64 table[3] = {0, twice, square};
.global .align 4 .u32 numbers[4] = {5, 6, 7, 8};
.global .align 8 .u64 where[2] = {generic(numbers)+4, numbers};

""" + entry("through_table", "u64 out", ".b32 %r<8>, .b64 %rd<8>", """
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 1;
    mul.wide.u32 %rd4, %r2, 8;
    mov.u64 %rd5, table;
    add.s64 %rd5, %rd5, %rd4;
    ld.global.u64 %rd6, [%rd5+8];
    {
    .param .b32 param0;
    st.param.b32 [param0], %r1;
    .param .b32 retval0;
    proto : .callprototype (.param .b32 _) _ (.param .b32 _);
    call (retval0), %rd6, (param0), proto;
    ld.param.b32 %r3, [retval0];
    }""" + _store_per_thread("%r3") + """
    ret;
""") + """
.visible .entry through_targets(.param .u64 out)
{
    .reg .pred %p1;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u64 %rd5, twice;
    setp.gt.u32 %p1, %r1, 2;
    @%p1 mov.u64 %rd5, square;
    {
    .param .b32 param0;
    st.param.b32 [param0], %r1;
    .param .b32 retval0;
    targets : .calltargets twice, square;
    call (retval0), %rd5, (param0), targets;
    ld.param.b32 %r3, [retval0];
    }""" + _store_per_thread("%r3") + """
    ret;
}

.visible .entry generic_initializer(.param .u64 out)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    ld.global.u64 %rd5, [where];
    ld.u32 %r3, [%rd5];
    ld.global.u64 %rd6, [where+8];
    ld.global.u32 %r4, [%rd6+12];
    add.s32 %r5, %r3, %r4;
    mul.lo.s32 %r5, %r5, 1000;
    add.s32 %r5, %r5, %r1;""" + _store_per_thread("%r5") + """
    ret;
}
"""


def test_calls_through_a_vtable_of_function_addresses(target):
    assert _run(INDIRECT, "through_table", 6, target=target) == [t * t if t & 1 else 2 * t for t in range(6)]


def test_calls_through_a_calltargets_list_and_function_addresses(target):
    assert _run(INDIRECT, "through_targets", 6, target=target) == [t * t if t > 2 else 2 * t for t in range(6)]


def test_initializers_hold_variable_addresses(target):
    assert _run(INDIRECT, "generic_initializer", 3, target=target) == [(6 + 8) * 1000 + t for t in range(3)]


def test_an_indirect_call_needs_a_prototype():
    ptx = INDIRECT.replace("call (retval0), %rd6, (param0), proto;", "call (retval0), %rd6, (param0);")
    report = {k.name: k for k in translate(ptx, Options(target="host")).kernels}["through_table"]
    assert report.status == "unsupported" and "needs a .callprototype or a .calltargets list" in report.reason


REGISTER_ABI = HEADER + """
.weak .func (.reg .b32 r) add_tid(.reg .b32 a, .param .b32 b)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [b];
    add.s32 r, a, %r1;
    ret;
}
.visible .entry register_abi(.param .u64 out)
{
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.lo.s32 %r2, %r1, 7;
    call.uni (%r3), add_tid, (%r2, %r1);
    call.uni (%r4), add_tid, (%r3, 1000);""" + _store_per_thread("%r4") + """
    ret;
}
"""


def test_register_parameters_returns_and_immediate_arguments(target):
    assert _run(REGISTER_ABI, "register_abi", 5, target=target) == [8 * t + 1000 for t in range(5)]


EXIT = HEADER + """
.func leave_if_odd(.param .b32 a)
{
    .reg .pred %p1;
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [a];
    and.b32 %r2, %r1, 1;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 bra EVEN;
    exit;
EVEN:
    ret;
}
.func (.param .b32 r) relay(.param .b32 a)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [a];
    {
    .param .b32 param0;
    st.param.b32 [param0], %r1;
    call.uni leave_if_odd, (param0);
    }
    add.s32 %r2, %r1, 500;
    st.param.b32 [r], %r2;
    ret;
}
.visible .entry exits(.param .u64 out)
{
    .reg .pred %p1;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    setp.eq.u32 %p1, %r1, 4;
    @%p1 exit;
    {
    .param .b32 param0;
    st.param.b32 [param0], %r1;
    .param .b32 retval0;
    call.uni (retval0), relay, (param0);
    ld.param.b32 %r3, [retval0];
    }""" + _store_per_thread("%r3") + """
    ret;
}
"""


def test_exit_ends_the_thread_from_kernels_and_nested_functions(target):
    # Odd threads exit two calls deep, thread 4 in the kernel: neither stores.
    assert _run(EXIT, "exits", 7, target=target) == [0 if t & 1 or t == 4 else t + 500 for t in range(7)]


TRAPS = HEADER + """
.global .align 1 .b8 message[7] = {98, 97, 100, 32, 120, 33, 0};
.global .align 1 .b8 file[6] = {107, 46, 99, 117, 0, 0};
.global .align 1 .b8 function[5] = {109, 97, 105, 110, 0};
.extern .func __assertfail(.param .b64 m, .param .b64 f, .param .b32 l, .param .b64 fn, .param .b64 s);
.extern .func (.param .b32 r) vprintf(.param .b64 fmt, .param .b64 args);
.extern .func (.param .b64 r) malloc(.param .b64 size);
.extern .func free(.param .b64 p);
.extern .func elsewhere();

.func fail() .noreturn
{
    trap;
}
.visible .entry traps(.param .u64 out, .param .u32 which)
{
    .reg .pred %p<3>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r2, [which];
    mov.u32 %r1, %tid.x;
    brkpt;""" + _store_per_thread("1") + """
    setp.ne.u32 %p1, %r1, %r2;
    @%p1 bra DONE;
    setp.eq.u32 %p2, %r2, 3;
    @%p2 bra ASSERT;
    call.uni fail, ();
ASSERT:
    mov.u64 %rd4, message;
    cvta.global.u64 %rd4, %rd4;
    mov.u64 %rd5, file;
    cvta.global.u64 %rd5, %rd5;
    mov.u64 %rd6, function;
    cvta.global.u64 %rd6, %rd6;
    {
    .param .b64 param0;
    st.param.b64 [param0], %rd4;
    .param .b64 param1;
    st.param.b64 [param1], %rd5;
    .param .b32 param2;
    st.param.b32 [param2], 42;
    .param .b64 param3;
    st.param.b64 [param3], %rd6;
    .param .b64 param4;
    st.param.b64 [param4], 1;
    call.uni __assertfail, (param0, param1, param2, param3, param4);
    }
DONE:
    ret;
}
"""


def test_trap_and_failed_assert_abort_the_launch_on_host():
    program = translate(TRAPS, Options(target="host")).product
    out = (ctypes.c_uint32 * 8)()
    program.launch("traps", [ctypes.addressof(out), 99], block=(8,))  # nobody traps; brkpt goes on
    assert list(out) == [1] * 8
    out = (ctypes.c_uint32 * 8)()
    with pytest.raises(FatkitError, match=r"kernel trapped in block \(0, 0, 0\): trap"):
        program.launch("traps", [ctypes.addressof(out), 2], block=(8,))
    assert list(out[:3]) == [1, 1, 1] and list(out[3:]) == [0] * 5  # the launch stopped at thread 2
    with pytest.raises(FatkitError, match=r"assertion `bad x!` failed at k.cu:42 in main"):
        program.launch("traps", [ctypes.addressof(out), 3], block=(8,))
    program.launch("traps", [ctypes.addressof(out), 99], block=(4,))  # a later launch runs normally


@pytest.mark.parametrize("callee, reason", [
    ("vprintf", "vprintf takes (format, arguments)"),  # the runtime's functions, called wrongly
    ("malloc", "malloc takes (size) and returns a pointer"),
    ("free", "free takes (pointer) and returns nothing"),
    ("elsewhere", "elsewhere is declared .extern and no PTX module linked with this one defines it"),
])
def test_external_functions_are_reported_by_name(callee, reason):
    ptx = TRAPS + f"""
.visible .entry calls_{callee}()
{{
    call.uni {callee}, ();
    ret;
}}
"""
    reports = {k.name: k for k in translate(ptx, Options(target="host")).kernels}
    assert reports["traps"].status == "ok"
    report = reports[f"calls_{callee}"]
    assert report.status == "unsupported" and reason in report.reason and "call.uni" in report.reason


@pytest.mark.parametrize("sample", ["basics.sm_80.ptx", "basics.sm_80.rdc.ptx", "basics.sm_120.fastmath.ptx"])
def test_nvcc_sample_calls_kernel_translates(sample):
    """nvcc's `calls` kernel: new/delete and virtual calls through vtables, printf, assert, trap (malloc, free
    and vprintf are the runtime's: tests/test_translate_runtime.py)."""
    text = (SAMPLES / sample).read_text()
    calls = {k.name: k for k in translate(text, Options(target="host")).kernels}["_Z5callsPiiPKfS1_"]
    assert calls.status == "ok", calls.reason


def test_batch_compiles_for_amdgpu():
    """Every control-flow form of this file in one module, for wave64 and wave32 processors."""
    kernels = [BRX, INDIRECT.replace(FUNCTIONS, "").replace(HEADER, ""), EXIT.replace(HEADER, ""),
               TRAPS.replace(HEADER, ""), REGISTER_ABI.replace(HEADER, "")]
    ptx = HEADER + FUNCTIONS + "\n".join(kernels[1:]) + BRX.replace(HEADER, "")
    names = {"brx", "through_table", "through_targets", "generic_initializer", "exits", "traps", "register_abi"}
    for processor in ("gfx942", "gfx1100"):
        result = translate(ptx, Options(target=processor))
        assert {k.name for k in result.kernels if k.status == "ok"} == names, result.kernels
        assert {k.name for k in result.validated.kernels} == names
