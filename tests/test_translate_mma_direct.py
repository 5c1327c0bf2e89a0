"""mma.sync operands loaded straight into the MFMA/WMMA layout (lower/mma_direct.py) on fatkit.emulate: kernels
whose A and B registers come from loads of lane-affine addresses (fragment order in global memory through
%tid.x under .maxntid, vector loads; row-major tiles in shared memory through %laneid, scalar loads), and the
kernels the rewrite must leave alone (a store between the loads and the mma; %tid.x without a block shape
that makes it the lane, run on a block 16 threads wide). Results against the independent model of
tests/test_translate_mma.py: f32 within docs/numerics.md's bound (random and edge f16 inputs: exponent spread,
subnormals, ±0, Inf, NaN), s32 bit for bit."""

from __future__ import annotations

import random
import re
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from fatkit.translate.pipeline import Options, translate
from tests import test_translate_mma as model
from tests.amdrun import program as amd_program
from tests.ptxrun import HEADER

FORMS = [("m16n8k16", "f32", "f16", "f16", "f32", ""), ("m16n8k32", "s32", "s8", "s8", "s32", "satfinite")]
TARGETS = ["gfx942", "gfx1100"]
THREADS = 128  # two blocks of 64: at wave64 two warps a wave


def _declarations() -> str:
    return """
    .reg .b32 %a<4>, %b<2>, %c<4>, %d<4>, %t, %n, %e, %base, %lane, %g, %q, %row, %s<3>, %x, %y;
    .reg .b64 %p<4>, %u, %w, %o<4>, %v<4>;"""


def _fragment_kernel(instruction: str, between: str, directive: str, after: str = "") -> str:
    """A, B, C in fragment order (row i: 16, 8 and 16 bytes at 16·i, 8·i, 16·i), block k's thread x loading
    row 64k + x as vectors through %tid.x; D stored at row 64k + %tid.x + 16·%tid.y. `between`: PTX between
    the loads and the mma; `after`: after D's store."""
    offsets = "\n    ".join(f"ld.param.u64 %p{slot}, [param{slot}];\n    mul.wide.u32 %o{slot}, %base, {size};\n"
                           f"    add.s64 %v{slot}, %p{slot}, %o{slot};"
                           for slot, size in enumerate((16, 8, 16, 16)))
    return HEADER.replace("8.0", "8.5") + f"""
.visible .entry direct(.param .u64 param0, .param .u64 param1, .param .u64 param2, .param .u64 param3){directive}
{{{_declarations()}
    .reg .b64 %z<4>;
    mov.u32 %t, %tid.x;
    mov.u32 %e, %ctaid.x;
    mul.lo.u32 %base, %e, 64;
    {offsets}
    mul.wide.u32 %w, %t, 16;
    add.s64 %z0, %v0, %w;
    add.s64 %z2, %v2, %w;
    mul.wide.u32 %u, %t, 8;
    add.s64 %z1, %v1, %u;
    ld.global.v4.u32 {{%a0, %a1, %a2, %a3}}, [%z0];
    ld.global.nc.v2.u32 {{%b0, %b1}}, [%z1];
    ld.global.v4.u32 {{%c0, %c1, %c2, %c3}}, [%z2];
    {between}
    {instruction} {{%d0, %d1, %d2, %d3}}, {{%a0, %a1, %a2, %a3}}, {{%b0, %b1}}, {{%c0, %c1, %c2, %c3}};
    mov.u32 %y, %tid.y;
    mad.lo.u32 %x, %y, 16, %t;
    mul.wide.u32 %w, %x, 16;
    add.s64 %z3, %v3, %w;
    st.global.v4.u32 [%z3], {{%d0, %d1, %d2, %d3}};
    {after}
    ret;
}}
"""


# the fragments' reads from the warp's tiles (A at %row, B at %s0 + %q + 1024): ld.shared.u32 of each register,
# or ldmatrix (A: lane μ gives row μ mod 16 at bytes 16·(μ div 16), B: column μ mod 8 at bytes 16·(μ div 8 mod 2))
_READS = {
    "scalar": """shr.u32 %g, %lane, 2;
    shl.b32 %g, %g, 5;
    and.b32 %y, %lane, 3;
    shl.b32 %y, %y, 2;
    add.u32 %g, %g, %y;
    add.u32 %s1, %row, %g;
    add.u32 %s2, %s0, %q;
    add.u32 %s2, %s2, %g;
    ld.shared.u32 %a0, [%s1];
    ld.shared.u32 %a1, [%s1+256];
    ld.shared.u32 %a2, [%s1+16];
    ld.shared.u32 %a3, [%s1+272];
    ld.shared.u32 %b0, [%s2+1024];
    ld.shared.u32 %b1, [%s2+1040];""",
    "ldmatrix": """and.b32 %y, %lane, 15;
    shl.b32 %y, %y, 5;
    shr.u32 %g, %lane, 4;
    shl.b32 %g, %g, 4;
    add.u32 %g, %g, %y;
    add.u32 %s1, %row, %g;
    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%a0, %a1, %a2, %a3}, [%s1];
    and.b32 %y, %lane, 7;
    shl.b32 %y, %y, 5;
    shr.u32 %g, %lane, 3;
    and.b32 %g, %g, 1;
    shl.b32 %g, %g, 4;
    add.u32 %g, %g, %y;
    add.u32 %s2, %s0, %q;
    add.u32 %s2, %s2, %g;
    ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%b0, %b1}, [%s2+1024];""",
}


def _shared_kernel(instruction: str, reads: str) -> str:
    """Each warp's A as a row-major 16×32-byte tile and B column-major (8 columns of 32 bytes) copied to
    shared memory, then read as the fragments want them through %laneid (`_READS`); C in fragment order."""
    return HEADER.replace("8.0", "8.5") + f"""
.visible .entry direct(.param .u64 param0, .param .u64 param1, .param .u64 param2, .param .u64 param3)
.maxntid 64, 1, 1
{{{_declarations()}
    .shared .align 16 .b8 tiles[1536];
    mov.u32 %t, %tid.x;
    mov.u32 %n, %ntid.x;
    mov.u32 %e, %ctaid.x;
    mul.lo.u32 %base, %e, %n;
    add.u32 %x, %base, %t;
    ld.param.u64 %p0, [param0];
    ld.param.u64 %p1, [param1];
    ld.param.u64 %p2, [param2];
    ld.param.u64 %p3, [param3];
    mul.wide.u32 %w, %x, 16;
    add.s64 %o0, %p0, %w;
    add.s64 %o2, %p2, %w;
    add.s64 %o3, %p3, %w;
    mul.wide.u32 %u, %x, 8;
    add.s64 %o1, %p1, %u;
    ld.global.v4.u32 {{%a0, %a1, %a2, %a3}}, [%o0];
    ld.global.v2.u32 {{%b0, %b1}}, [%o1];
    mov.u32 %s0, tiles;
    shl.b32 %y, %t, 4;
    add.u32 %s1, %s0, %y;
    st.shared.v4.u32 [%s1], {{%a0, %a1, %a2, %a3}};
    shl.b32 %y, %t, 3;
    add.u32 %s2, %s0, %y;
    st.shared.v2.u32 [%s2+1024], {{%b0, %b1}};
    bar.sync 0;
    mov.u32 %lane, %laneid;
    sub.u32 %q, %t, %lane;
    shl.b32 %row, %q, 4;
    add.u32 %row, %row, %s0;
    shl.b32 %q, %q, 3;
    {_READS[reads]}
    ld.global.v4.u32 {{%c0, %c1, %c2, %c3}}, [%o2];
    {instruction} {{%d0, %d1, %d2, %d3}}, {{%a0, %a1, %a2, %a3}}, {{%b0, %b1}}, {{%c0, %c1, %c2, %c3}};
    st.global.v4.u32 [%o3], {{%d0, %d1, %d2, %d3}};
    ret;
}}
"""


def _tiles(a: list[list[int]], b: list[list[int]]) -> tuple[list[list[int]], list[list[int]]]:
    """Thread-ordered words that, copied to shared memory as the shared kernel copies them, place each warp's
    A as a row-major tile (word of row R, byte column C at 32·R + C) and B column-major (column n at 32·n),
    so that the fragment loads read back a[thread] and b[thread] (the PTX ISA's fragment tables:
    register r of lane 4g + t at row g + 8·(r mod 2), bytes 4t + 16·(r div 2); B's register r at column g,
    bytes 4t + 16·r)."""
    a_image, b_image = [[0] * 4 for _ in a], [[0] * 2 for _ in b]
    for thread in range(len(a)):
        warp, lane = divmod(thread, 32)
        g, t = divmod(lane, 4)
        for r in range(4):
            word = (32 * (g + 8 * (r % 2)) + 4 * t + 16 * (r // 2)) // 4
            a_image[32 * warp + word // 4][word % 4] = a[thread][r]
        for r in range(2):
            word = (32 * g + 4 * t + 16 * r) // 4
            b_image[32 * warp + word // 2][word % 2] = b[thread][r]
    return a_image, b_image


def _inputs(form, special: bool, seed: str):
    shape, dtype, atype, btype, ctype, extra = form
    rng = random.Random(zlib.crc32(repr((form, special, seed)).encode()))
    a = [[model._word(atype, rng, special) for _ in range(4)] for _ in range(THREADS)]
    b = [[model._word(btype, rng, special) for _ in range(2)] for _ in range(THREADS)]
    c = [[model._accumulator_word(ctype, rng, special) for _ in range(4)] for _ in range(THREADS)]
    return a, b, c


def _launch(text: str, target: str, a, b, c, block=(64, 1, 1)) -> list[list[int]]:
    program = amd_program(text, target, mma_numerics="native")
    arrays = [np.array(rows, dtype=np.uint32).ravel() for rows in (a, b, c)]
    out = np.zeros(THREADS * 4, dtype=np.uint32)
    threads = block[0] * block[1] * block[2]
    program.launch("direct", [*arrays, out], grid=(THREADS // threads, 1, 1), block=block)
    return out.reshape(THREADS, 4).tolist()


def _check(form, a, b, c, got) -> None:
    shape, dtype, atype, btype, ctype, extra = form
    if dtype == "s32":
        assert got == model._reference(shape, dtype, atype, btype, ctype, a, b, c, extra)
    else:
        model.check_native_f32(form, a, b, c, got)


def _moves(text: str, target: str, tmp_path: Path) -> int:
    """The lane moves in the kernel's code: its ds_bpermute, and where it moves words through LDS (gfx1100:
    lower/mma_native.py's buffer in the module) its LDS stores and loads."""
    path = tmp_path / f"{target}.hsaco"
    path.write_bytes(translate(text, Options(target=target, mma_numerics="native")).product)
    listing = subprocess.run(["/usr/lib/llvm-22/bin/llvm-objdump", "-d", str(path)], check=True,
                             capture_output=True, text=True).stdout
    module = translate(text, Options(target=target, mma_numerics="native", emit="llvm")).product
    through_lds = "fatkit.mma.lanes" in (module if isinstance(module, str) else module.decode())
    return len(re.findall(r"ds_bpermute" + (r"|ds_store|ds_load" if through_lds else ""), listing))


# gfx1201 runs its 8-bit forms on the portable path (no native operands to load)
CASES = [pytest.param(form, target, id=f"{form[2]}-{target}") for form in FORMS for target in TARGETS + ["gfx1201"]
         if target != "gfx1201" or form[2] == "f16"]


@pytest.mark.parametrize("special", [False, True], ids=["random", "edges"])
@pytest.mark.parametrize("form,target", CASES)
def test_fragment_order_vector_loads(form, target, special, tmp_path):
    """ld.global.v4 / ld.global.nc.v2 of thread-ordered fragments, %tid.x under .maxntid 64, 1, 1: loaded
    directly and, D only stored, C added and D stored in the native layout (no lane moves left: gfx1100's
    result moves gone too); equal to the model."""
    text = _fragment_kernel(model._instruction(*form), "", "\n.maxntid 64, 1, 1")
    a, b, c = _inputs(form, special, "fragment")
    _check(form, a, b, c, _launch(text, target, a, b, c))
    unproven = _fragment_kernel(model._instruction(*form), "", "")
    assert _moves(text, target, tmp_path) == 0 < _moves(unproven, target, tmp_path)


@pytest.mark.parametrize("reads", ["scalar", "ldmatrix"])
@pytest.mark.parametrize("special", [False, True], ids=["random", "edges"])
@pytest.mark.parametrize("form,target", CASES)
def test_shared_tiles_through_laneid(form, target, special, reads, tmp_path):
    """Row-major A and column-major B tiles in shared memory read through %laneid by ld.shared.u32 or by
    ldmatrix .x4 (A) and .x2 (B): loaded directly, fewer lane moves than with a membar.cta between the reads
    and the mma (which keeps them moving)."""
    text = _shared_kernel(model._instruction(*form), reads)
    a, b, c = _inputs(form, special, "shared")
    a_image, b_image = _tiles(a, b)
    _check(form, a, b, c, _launch(text, target, a_image, b_image, c))
    fenced = text.replace("    ld.global.v4.u32 {%c0", "    membar.cta;\n    ld.global.v4.u32 {%c0")
    assert fenced != text and _moves(text, target, tmp_path) < _moves(fenced, target, tmp_path)


@pytest.mark.parametrize("form,target", CASES)
def test_store_between_keeps_the_loaded_values(form, target):
    """A store over A's words between the loads and the mma: the mma takes what the loads read."""
    between = "st.global.v4.u32 [%z0], {%b0, %b1, %b1, %b0};"
    text = _fragment_kernel(model._instruction(*form), between, "\n.maxntid 64, 1, 1")
    a, b, c = _inputs(form, True, "store")
    _check(form, a, b, c, _launch(text, target, a, b, c))


@pytest.mark.parametrize("form,target", CASES)
def test_tid_x_not_the_lane(form, target):
    """%tid.x without .maxntid/.reqntid, run on 16×4 blocks (lane = x + 16·y mod 32): thread (x, y) of block k
    reads row 64k + x, not its lane's, and the mma must take the registers as they are."""
    text = _fragment_kernel(model._instruction(*form), "", "")
    a, b, c = _inputs(form, False, "tid")
    got = _launch(text, target, a, b, c, block=(16, 4, 1))
    read = [64 * (i // 64) + i % 16 for i in range(THREADS)]  # thread 64k + x + 16y reads row 64k + x
    _check(form, *([rows[read[i]] for i in range(THREADS)] for rows in (a, b, c)), got)


@pytest.mark.parametrize("form,target", CASES)
def test_d_read_again_stays_in_registers(form, target):
    """D's d1 stored a second time, over d0: D is not only stored, so it stays in its registers (moved into
    the PTX layout) and the words come out as the program writes them."""
    text = _fragment_kernel(model._instruction(*form), "", "\n.maxntid 64, 1, 1", "st.global.u32 [%z3], %d1;")
    a, b, c = _inputs(form, True, "again")
    got = _launch(text, target, a, b, c)
    assert all(row[0] == row[1] for row in got)  # d0's word holds d1
    if form[1] == "s32":
        assert got == [[row[1], *row[1:]] for row in model._reference(*form[:5], a, b, c, form[5])]


@pytest.mark.parametrize("form,target", CASES)
def test_base_changed_after_the_loads(form, target):
    """A's base pointer register moved on after the loads: the mma takes what the loads read (at the old base),
    not the words at the new one."""
    text = _fragment_kernel(model._instruction(*form), "add.s64 %p0, %p0, 16;", "\n.maxntid 64, 1, 1")
    a, b, c = _inputs(form, False, "base")
    _check(form, a, b, c, _launch(text, target, a, b, c))
