"""Warp-level matrix data movement (ldmatrix, stmatrix, movmatrix) against a numpy model of the PTX ISA's
fragment layouts: run on the CPU (`host`, waves of 32 and of 64 lanes holding two warps) over blocks of full
warps, a block whose last wave64 holds one warp only, and a partial warp (for the forms whose row addresses
all come from lanes that exist); compiled for gfx942 (wave64) and gfx1100 (wave32); re-lowered for sm_90 and
assembled by ptxas. Also the cluster special registers of a cluster of one CTA, griddepcontrol and setmaxnreg.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from fatkit.translate.hazards import analyse
from fatkit.translate.pipeline import Options, lower, parse, passes, translate
from fatkit.translate.ptx import parse_ptx
from tests import oracles
from tests.ptxrun import HEADER
from tests.amdrun import EmulatedProgram, HostProgram
from tests.amdrun import program as amd_program
from tests import test_translate_warp

wave = test_translate_warp.wave  # the fixture: host wave32/wave64, gfx1100, gfx942 (its value: the target)
WARP = 32
RNG = np.random.default_rng(20261129)
COUNTS = (1, 2, 4)
# How the row address reaches the instruction: a 32-bit .shared address, a 64-bit .shared::cta one, a generic
# one, and a .shared address with an immediate offset.
ADDRESSINGS = {
    "shared32": ("shared", "%r11"),
    "shared64": ("shared::cta", "%rd10"),
    "generic": ("", "%rd11"),
    "offset": ("shared", "%r12+16"),
}
FORMS = [(count, trans) for count in COUNTS for trans in (False, True)]


def _registers(count: int) -> str:
    return "{" + ", ".join(f"%r{20 + m}" for m in range(count)) + "}"


def _matrix_op(opcode: str, count: int, trans: bool, addressing: str, shape: str = "m8n8") -> str:
    space, address = ADDRESSINGS[addressing]
    element = "b16" if shape == "m8n8" else "b8"
    registers = _registers(count * (2 if shape == "m16n16" else 1))
    qualifiers = f"sync.aligned.{shape}.x{count}{'.trans' if trans else ''}{'.' + space if space else ''}.{element}"
    if opcode == "ldmatrix":
        return f"ldmatrix.{qualifiers} {registers}, [{address}];"
    return f"stmatrix.{qualifiers} [{address}], {registers};"


def _kernel(name: str, tile_bytes: int, body: str) -> str:
    """Thread t copies in[16t..16t+15] to the tile's row slot t; %r11 (.shared, also %r12 = %r11-16, %rd10
    64-bit, %rd11 generic) is the address of row slot perm[t]; `body` runs; then out[16t..] = %r20..%r23."""
    return HEADER + f"""
.visible .entry {name}(.param .u64 pin, .param .u64 pperm, .param .u64 pout)
{{
    .reg .b32 %r<40>;
    .reg .b64 %rd<20>;
    .shared .align 16 .b8 tile[{tile_bytes}];
    ld.param.u64 %rd1, [pin];
    ld.param.u64 %rd2, [pperm];
    ld.param.u64 %rd3, [pout];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 16;
    add.s64 %rd5, %rd1, %rd4;
    mov.u32 %r6, tile;
    mul.lo.u32 %r7, %r1, 16;
    add.u32 %r8, %r6, %r7;
    mul.wide.u32 %rd6, %r1, 4;
    add.s64 %rd7, %rd2, %rd6;
    ld.global.u32 %r9, [%rd7];
    mul.lo.u32 %r10, %r9, 16;
    add.u32 %r11, %r6, %r10;
    sub.u32 %r12, %r11, 16;
    cvt.u64.u32 %rd10, %r11;
    cvta.shared.u64 %rd11, %rd10;
    mov.u32 %r20, 0;
    mov.u32 %r21, 0;
    mov.u32 %r22, 0;
    mov.u32 %r23, 0;
    {body}
    add.s64 %rd9, %rd3, %rd4;
    st.global.v4.u32 [%rd9], {{%r20, %r21, %r22, %r23}};
    ret;
}}
"""


LOAD_BODY = """ld.global.v4.u32 {%r2, %r3, %r4, %r5}, [%rd5];
    st.shared.v4.u32 [%r8], {%r2, %r3, %r4, %r5};
    bar.sync 0;
    OP"""
# stmatrix: the slots start zeroed, the fragments come from in[], the tile row slot t goes to out[]
STORE_BODY = """mov.u32 %r2, 0;
    st.shared.v4.u32 [%r8], {%r2, %r2, %r2, %r2};
    bar.sync 0;
    ld.global.v4.u32 {%r20, %r21, %r22, %r23}, [%rd5];
    OP
    bar.sync 0;
    ld.shared.v4.u32 {%r20, %r21, %r22, %r23}, [%r8];"""


def _launch(text: str, name: str, data: np.ndarray, perm: np.ndarray, target: str = "host") -> np.ndarray:
    """Run a `_kernel` over one block of len(perm) threads on `target` (tests/amdrun.py); out as (threads, 8) u16."""
    n = len(perm)
    program = amd_program(text, target)
    source = np.ascontiguousarray(data, dtype=np.uint16)
    slots = np.ascontiguousarray(perm, dtype=np.uint32)
    out = np.zeros((n, 8), dtype=np.uint16)
    program.launch(name, [source, slots, out], block=(n, 1, 1))
    return out


def _fragment_positions(trans: bool) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """m8n8 .b16, for PTX lane l: the (row, column) of the element in the low and the high half of its register."""
    if trans:
        return [((2 * (l % 4), l // 4), (2 * (l % 4) + 1, l // 4)) for l in range(WARP)]
    return [((l // 4, 2 * (l % 4)), (l // 4, 2 * (l % 4) + 1)) for l in range(WARP)]


def _m8n8(trans: bool):
    """(rows a matrix, registers a matrix, lane, register → its bytes as (row, byte in the row), low first)."""
    positions = _fragment_positions(trans)
    return 8, 1, lambda lane, register: [(row, 2 * column + byte) for row, column in positions[lane]
                                         for byte in (0, 1)]


def _m16n16_trans(lane: int, register: int) -> list[tuple[int, int]]:
    """ldmatrix .m16n16.trans.b8: the transposed matrix T (T[r][c] is byte r of row c in memory) gives lane
    4b + a columns 4a..4a+3 of rows b and b + 8 (CUTLASS SM100_U8x8_LDSM_T): register h, byte p holds
    T[b + 8 (p / 2)][4a + 2h + p % 2]."""
    a, b = lane % 4, lane // 4
    return [(4 * a + 2 * register + p % 2, b + 8 * (p // 2)) for p in range(4)]


def _m16n8_trans(lane: int, register: int) -> list[tuple[int, int]]:
    """stmatrix .m16n8.trans.b8: the 16x8 matrix X (X[r][c] is byte r of row c in memory) in the layout of an
    mma m16n8 accumulator (CUTLASS SM100_U8x4_STSM_T): bytes X[b][2a], X[b][2a+1], X[b+8][2a], X[b+8][2a+1]."""
    a, b = lane % 4, lane // 4
    return [(2 * a + p % 2, b + 8 * (p // 2)) for p in range(4)]


def _warps(n: int) -> list[range]:
    return [range(first, min(first + WARP, n)) for first in range(0, n, WARP)]


def gather_model(tile: np.ndarray, perm: np.ndarray, count: int, layout) -> np.ndarray:
    """ldmatrix: every thread's registers (threads, count × registers a matrix) u32, where row r of matrix m
    is the tile row slot (16 bytes) that lane rows·m + r of the thread's warp addresses."""
    rows, registers, bytes_of = layout
    memory = np.ascontiguousarray(tile).view(np.uint8).reshape(len(tile), 16)
    result = np.zeros((len(perm), count * registers), dtype=np.uint32)
    for warp in _warps(len(perm)):
        for lane, thread in enumerate(warp):
            for m in range(count):
                for register in range(registers):
                    places = bytes_of(lane, register)
                    result[thread, m * registers + register] = sum(
                        int(memory[perm[warp[rows * m + row]], byte]) << 8 * k for k, (row, byte) in enumerate(places))
    return result


def scatter_model(fragments: np.ndarray, perm: np.ndarray, count: int, layout) -> np.ndarray:
    """stmatrix: the tile (slots, 16) u8 after every lane stored its registers `fragments` (threads, count ×
    registers a matrix) u32 into a zeroed tile."""
    rows, registers, bytes_of = layout
    memory = np.zeros((len(perm), 16), dtype=np.uint8)
    for warp in _warps(len(perm)):
        for lane, thread in enumerate(warp):
            for m in range(count):
                for register in range(registers):
                    value = int(fragments[thread, m * registers + register])
                    for k, (row, byte) in enumerate(bytes_of(lane, register)):
                        memory[perm[warp[rows * m + row]], byte] = value >> 8 * k & 0xFF
    return memory


def ldmatrix_model(tile: np.ndarray, perm: np.ndarray, count: int, trans: bool) -> np.ndarray:
    return gather_model(tile, perm, count, _m8n8(trans))


def stmatrix_model(fragments: np.ndarray, perm: np.ndarray, count: int, trans: bool) -> np.ndarray:
    """The tile as (slots, 8) u16."""
    return scatter_model(fragments, perm, count, _m8n8(trans)).view(np.uint16)


def _defined(n: int, count: int, rows: int = 8) -> bool:
    """Whether every warp of an n-thread block has the lanes that supply `count` matrices' row addresses."""
    return all(len(warp) >= rows * count for warp in _warps(n))


BLOCKS = [32, 64, 96, 48]  # 96: on wave64 the second wave holds one warp; 48: a warp of 16 lanes


def _cases():
    for n in BLOCKS:
        for count, trans in FORMS:
            if _defined(n, count):
                yield n, count, trans


@pytest.mark.parametrize("n, count, trans", list(_cases()))
def test_ldmatrix_every_form_against_the_isa_layout(n, count, trans, wave):
    data = RNG.integers(0, 1 << 16, size=(n, 8), dtype=np.uint16)
    perm = RNG.permutation(n).astype(np.uint32)
    expected = ldmatrix_model(data, perm, count, trans)
    for addressing in ADDRESSINGS:
        body = LOAD_BODY.replace("OP", _matrix_op("ldmatrix", count, trans, addressing))
        out = _launch(_kernel("ld", 16 * n, body), "ld", data, perm, wave).view(np.uint32)
        assert np.array_equal(out[:, :count], expected), (addressing, np.argwhere(out[:, :count] != expected)[:4])


@pytest.mark.parametrize("n, count, trans", list(_cases()))
def test_stmatrix_every_form_against_the_isa_layout(n, count, trans, wave):
    data = RNG.integers(0, 1 << 16, size=(n, 8), dtype=np.uint16)
    perm = RNG.permutation(n).astype(np.uint32)
    expected = stmatrix_model(data.view(np.uint32), perm, count, trans)
    for addressing in ADDRESSINGS:
        body = STORE_BODY.replace("OP", _matrix_op("stmatrix", count, trans, addressing))
        out = _launch(_kernel("st", 16 * n, body), "st", data, perm, wave)
        assert np.array_equal(out, expected), (addressing, np.argwhere(out != expected)[:4])


EIGHT_BIT = {("ldmatrix", "m16n16"): (16, 2, _m16n16_trans), ("stmatrix", "m16n8"): (8, 1, _m16n8_trans)}


def _eight_bit_cases():
    for n in BLOCKS:
        for (opcode, shape), (rows, _, _) in EIGHT_BIT.items():
            for count in ((1, 2) if shape == "m16n16" else COUNTS):
                if _defined(n, count, rows):
                    yield opcode, shape, n, count


def _cute(shape, stride, index: int) -> int:
    """A CuTe layout (nested shape and stride tuples) at a flat index: the index's colexicographic
    coordinates dotted with the strides."""
    if isinstance(shape, int):
        return index % shape * stride
    total = 0
    for sub_shape, sub_stride in zip(shape, stride):
        size = int(np.prod(_flatten(sub_shape)))
        total += _cute(sub_shape, sub_stride, index % size)
        index //= size
    return total


def _flatten(shape) -> list[int]:
    return [shape] if isinstance(shape, int) else [n for sub in shape for n in _flatten(sub)]


# CUTLASS's Copy_Traits (cute/atom/copy_traits_sm75.hpp, _sm100.hpp): (thread, value) → bit, for the memory side
# (a thread, the 128 bits of the row it addresses) and the register side (a lane, the bits of its registers);
# the m8n8 ones (SM75_U32x1_LDSM_N, SM75_U16x2_LDSM_T) check this reading of CUTLASS against the ISA's figures
CUTLASS_SM100 = {
    ("ldmatrix", "m8n8", 1): ((((8, 4), 128), ((128, 0), 1)), ((32, 32), (32, 1))),
    ("ldmatrix", "m8n8.trans", 1): ((((8, 4), 128), ((128, 0), 1)), (((4, 8), (16, 2)), ((256, 16), (1, 128)))),
    ("ldmatrix", "m16n16", 1): ((((2, 2, 4, 2), 128), ((128, 1024, 256, 0), 1)),
                                (((4, 8), (8, 2, 2, 2)), ((256, 8), (1, 128, 64, 1024)))),
    ("ldmatrix", "m16n16", 2): ((((2, 2, 4, 2), 128), ((128, 1024, 256, 2048), 1)),
                                (((4, 8), (8, 2, 2, 4)), ((256, 8), (1, 128, 64, 1024)))),
    ("stmatrix", "m16n8", 1): ((((8, 4), 128), ((128, 0), 1)), (((4, 8), (8, 2, 2)), ((256, 8), (1, 128, 64)))),
    ("stmatrix", "m16n8", 2): ((((16, 2), 128), ((128, 0), 1)),
                               (((4, 8), (8, 2, 2, 2)), ((256, 8), (1, 128, 64, 1024)))),
    ("stmatrix", "m16n8", 4): (((32, 128), (128, 1)), (((4, 8), (8, 2, 2, 4)), ((256, 8), (1, 128, 64, 1024)))),
}


@pytest.mark.parametrize("opcode, shape, count", list(CUTLASS_SM100))
def test_models_are_cutlass_layouts(opcode, shape, count):
    """The models above, read off CUTLASS's layouts: register byte k of lane t comes from byte `byte` of
    the row lane `s` addresses (the lowest such lane: CUTLASS repeats rows for lanes whose address is unused)."""
    (memory_shape, memory_stride), (register_shape, register_stride) = CUTLASS_SM100[opcode, shape, count]
    row_bits = 128
    source: dict[int, tuple[int, int]] = {}
    for s in reversed(range(WARP)):
        for bit in range(0, row_bits, 8):
            source[_cute(memory_shape, memory_stride, s + WARP * bit)] = (s, bit // 8)
    rows, registers, bytes_of = _m8n8(shape.endswith("trans")) if shape.startswith("m8n8") else EIGHT_BIT[opcode, shape]
    for lane in range(WARP):
        for register in range(count * registers):
            matrix, own = divmod(register, registers)
            expected = [(rows * matrix + row, byte) for row, byte in bytes_of(lane, own)]
            found = [source[_cute(register_shape, register_stride, lane + WARP * (32 * register + 8 * k))]
                     for k in range(4)]
            assert found == expected, (lane, register)


@pytest.mark.parametrize("opcode, shape, n, count", list(_eight_bit_cases()))
def test_sm100_eight_bit_forms_against_the_cutlass_layout(opcode, shape, n, count, wave):
    """ldmatrix .m16n16.x1/.x2.trans.b8 and stmatrix .m16n8.x1/.x2/.x4.trans.b8 (sm_100) against the layouts
    of NVIDIA's CUTLASS (no sm_100 GPU runs in verification: these are checked against that model only)."""
    layout = EIGHT_BIT[opcode, shape]
    data = RNG.integers(0, 1 << 16, size=(n, 8), dtype=np.uint16)
    perm = RNG.permutation(n).astype(np.uint32)
    for addressing in ("shared32", "generic"):
        op = _matrix_op(opcode, count, True, addressing, shape)
        if opcode == "ldmatrix":
            text = _kernel("ld8", 16 * n, LOAD_BODY.replace("OP", op))
            out = _launch(text, "ld8", data, perm, wave).view(np.uint32)
            expected = gather_model(data, perm, count, layout)
            assert np.array_equal(out[:, :expected.shape[1]], expected), (addressing, count)
        else:
            out = _launch(_kernel("st8", 16 * n, STORE_BODY.replace("OP", op)), "st8", data, perm, wave)
            expected = scatter_model(data.view(np.uint32), perm, count, layout)
            assert np.array_equal(out.view(np.uint8), expected), (addressing, count)


def test_cutlass_modifier_order(wave):
    """CUTLASS writes the count before the shape (`ldmatrix.sync.aligned.x4.trans.m8n8.shared.b16`), as the
    corpus kernels do: the same instruction."""
    n = 64
    data = RNG.integers(0, 1 << 16, size=(n, 8), dtype=np.uint16)
    perm = RNG.permutation(n).astype(np.uint32)
    body = LOAD_BODY.replace("OP", "ldmatrix.sync.aligned.x4.trans.m8n8.shared.b16 {%r20, %r21, %r22, %r23}, [%r11];")
    out = _launch(_kernel("cutlass", 16 * n, body), "cutlass", data, perm, wave).view(np.uint32)
    assert np.array_equal(out, ldmatrix_model(data, perm, 4, True))


def movmatrix_model(values: np.ndarray) -> np.ndarray:
    """Each warp's 8x8 matrix (element (r, c) in half c%2 of lane 4r + c/2), transposed into the fragment layout."""
    result = np.zeros(len(values), dtype=np.uint32)
    transposed = _fragment_positions(trans=True)
    for warp in _warps(len(values)):
        halves = values[warp.start:warp.stop].view(np.uint16).reshape(8, 8)
        for lane, thread in enumerate(warp):
            (r0, c0), (r1, c1) = transposed[lane]
            result[thread] = int(halves[r0, c0]) | int(halves[r1, c1]) << 16
    return result


@pytest.mark.parametrize("n", [32, 64, 96])
def test_movmatrix_transposes_the_warps_fragment(n, wave):
    body = "ld.global.u32 %r2, [%rd5];\n    movmatrix.sync.aligned.m8n8.trans.b16 %r20, %r2;"
    data = RNG.integers(0, 1 << 16, size=(n, 8), dtype=np.uint16)
    out = _launch(_kernel("mov", 16, body), "mov", data, np.zeros(n, dtype=np.uint32), wave).view(np.uint32)
    assert np.array_equal(out[:, 0], movmatrix_model(np.ascontiguousarray(data.view(np.uint32)[:, 0])))


def test_ldmatrix_trans_equals_ldmatrix_then_movmatrix(wave):
    """The two ways a fragment of the transposed matrix is made agree (checks the models against each other)."""
    n = 64
    data = RNG.integers(0, 1 << 16, size=(n, 8), dtype=np.uint16)
    perm = RNG.permutation(n).astype(np.uint32)
    body = LOAD_BODY.replace("OP", "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r2}, [%r11];\n"
                             "    movmatrix.sync.aligned.m8n8.trans.b16 %r20, %r2;\n"
                             "    ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%r21}, [%r11];")
    out = _launch(_kernel("both", 16 * n, body), "both", data, perm, wave).view(np.uint32)
    assert np.array_equal(out[:, 0], out[:, 1])
    assert np.array_equal(out[:, 1], ldmatrix_model(data, perm, 1, True)[:, 0])


# ------------------------------------------------------------------------------------------------ nvcc's own

MATRIX_CU = Path(__file__).parents[1] / "verification" / "cuda" / "matrix.cu"
STORE_FORMS = [(1, False), (2, False), (4, False), (1, True), (2, True), (4, True)]


def _nvcc_matrix_program(tmp_path: Path, arch: str, target: str, *flags: str):
    """verification/cuda/matrix.cu as nvcc writes its PTX for `arch`, translated for `target`."""
    tool = shutil.which("nvcc")
    if tool is None:
        pytest.skip("nvcc not on PATH")
    ptx = tmp_path / "matrix.ptx"
    subprocess.run([tool, "-ptx", f"-arch={arch}", *flags, str(MATRIX_CU), "-o", str(ptx)], check=True,
                   capture_output=True, timeout=300)
    translation = translate(ptx.read_text(), Options(target=target))
    assert all(k.status == "ok" for k in translation.kernels), translation.kernels
    return HostProgram(translation.product) if target == "host" else EmulatedProgram(translation.product)


@pytest.mark.parametrize("arch, flags", [("compute_90", ()), ("compute_80", ()), ("compute_90", ("-G",))])
def test_nvcc_matrix_program_against_the_model(arch, flags, tmp_path, wave):
    """The verification program's kernels (inline-asm ldmatrix/stmatrix/movmatrix as nvcc emits them at -O3
    and -G) on blocks of 128 and 96 threads, against the models."""
    program = _nvcc_matrix_program(tmp_path, arch, wave, *flags)
    blocks = 2
    for threads in (128, 96):
        n = blocks * threads
        data = RNG.integers(0, 1 << 16, size=(n, 8), dtype=np.uint16)
        rows = RNG.integers(0, 1 << 32, size=n, dtype=np.uint32)

        def launch(kernel: str, out: np.ndarray) -> None:
            program.launch(kernel, [data, rows, out], grid=(blocks, 1, 1),
                           block=(threads, 1, 1), shared_bytes=16 * threads)

        loads, pairs, tiles = (np.zeros((n, 14), np.uint32), np.zeros((n, 4), np.uint32),
                               np.zeros((6, n, 8), np.uint16))
        launch("ldmatrix_forms", loads)
        launch("ldmatrix_generic_movmatrix", pairs)
        launch("stmatrix_forms", tiles)
        reversed_rows = np.array([t - t % WARP + WARP - 1 - t % WARP for t in range(threads)])
        for block in range(blocks):
            mine = slice(block * threads, (block + 1) * threads)
            tile, perm = data[mine], rows[mine] % threads
            expected = np.concatenate([ldmatrix_model(tile, perm, 1, False), ldmatrix_model(tile, perm, 2, False),
                                       ldmatrix_model(tile, perm, 4, False), ldmatrix_model(tile, reversed_rows, 1, True),
                                       ldmatrix_model(tile, perm, 2, True), ldmatrix_model(tile, reversed_rows, 4, True)],
                                      axis=1)
            assert np.array_equal(loads[mine], expected), (threads, block)
            pair = ldmatrix_model(tile, perm, 2, False)
            assert np.array_equal(pairs[mine, 0], pair[:, 0])
            for k, fragment in ((1, pair[:, 0]), (2, pair[:, 1]), (3, rows[mine])):
                assert np.array_equal(pairs[mine, k], movmatrix_model(np.ascontiguousarray(fragment))), k
            slots = (np.arange(threads) * 37 + int(rows[block])) % threads
            fragments = np.ascontiguousarray(data[mine]).view(np.uint32)
            for k, (count, trans) in enumerate(STORE_FORMS):
                stored = stmatrix_model(fragments, slots, count, trans) if arch == "compute_90" else 0
                assert np.array_equal(tiles[k, mine], np.broadcast_to(stored, (threads, 8))), (k, threads, block)


# ------------------------------------------------------------------------------------------------ refusals

def _report(text: str):
    options = Options(target="host")
    (report,) = lower(passes(parse(text, options), options), options).reports
    return report


@pytest.mark.parametrize("op, reason", [
    ("ldmatrix.sync.aligned.m8n16.x1.shared.b8x16.b6x16_p32 {%r20}, [%r11];", "decompressing forms"),
    ("ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8x16.b4x16_p64 {%r20, %r21}, [%r11];", "decompressing forms"),
    ("ldmatrix.sync.aligned.m16n16.x1.shared.b8 {%r20, %r21}, [%r11];", "needs .trans"),
    ("ldmatrix.sync.aligned.m16n16.x4.trans.shared.b8 {%r20, %r21, %r22, %r23}, [%r11];", "takes .x1, .x2"),
    ("ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {%r20}, [%r11];", "2 .b32 register(s)"),
    ("stmatrix.sync.aligned.m16n8.x1.shared.b8 [%r11], {%r20};", "needs .trans"),
    ("stmatrix.sync.aligned.m16n8.x1.trans.shared.b16 [%r11], {%r20};", "moves .b8 elements"),
    ("ldmatrix.sync.aligned.m16n8.x1.trans.shared.b8 {%r20}, [%r11];", "expected one shape"),
    ("ldmatrix.sync.aligned.m8n8.x4.shared::cluster.b16 {%r20, %r21, %r22, %r23}, [%r11];",
     "not .shared::cluster"),
    ("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%r20}, [%r11];", "2 .b32 register(s)"),
    ("ldmatrix.sync.aligned.m8n8.x2.shared.b32 {%r20, %r21}, [%r11];", "moves .b16 elements"),
    ("movmatrix.sync.aligned.m8n8.b16 %r20, %r2;", "movmatrix.sync.aligned.m8n8.trans.b16"),
])
def test_forms_outside_the_isa_are_refused_by_name(op, reason):
    report = _report(_kernel("refused", 512, op))
    assert report.status == "unsupported" and reason in report.reason, report.reason


# ------------------------------------------------------------------------------------------------ AMD, nvptx

def _all_forms_module() -> tuple[list[str], str]:
    kernels = []
    for count, trans in FORMS:
        for opcode in ("ldmatrix", "stmatrix"):
            for addressing in ("shared32", "generic"):
                name = f"{opcode}_x{count}{'_t' if trans else ''}_{addressing}"
                body = (LOAD_BODY if opcode == "ldmatrix" else STORE_BODY).replace(
                    "OP", _matrix_op(opcode, count, trans, addressing))
                kernels.append((name, _kernel(name, 16 * 256, body)))
    for opcode, shape, count in (("ldmatrix", "m16n16", 1), ("ldmatrix", "m16n16", 2), ("stmatrix", "m16n8", 1),
                                 ("stmatrix", "m16n8", 2), ("stmatrix", "m16n8", 4)):
        name = f"{opcode}_{shape}_x{count}"
        body = (LOAD_BODY if opcode == "ldmatrix" else STORE_BODY).replace(
            "OP", _matrix_op(opcode, count, True, "shared32", shape))
        kernels.append((name, _kernel(name, 16 * 256, body)))
    kernels.append(("movmatrix", _kernel("movmatrix", 16, "movmatrix.sync.aligned.m8n8.trans.b16 %r20, %r9;")))
    return [name for name, _ in kernels], HEADER + "\n".join(text[len(HEADER):] for _, text in kernels)


@pytest.mark.parametrize("processor, wave_size", [("gfx942", 64), ("gfx1100", 32)])
def test_every_form_compiles_for_amd(processor, wave_size):
    names, text = _all_forms_module()
    translation = translate(text, Options(target=processor))
    assert all(r.status == "ok" for r in translation.kernels), [r for r in translation.kernels if r.status != "ok"]
    assert {k.name for k in translation.validated.kernels} == set(names)
    options = Options(target=processor)
    lowered = lower(passes(parse(text, options), options), options)
    picked = [names.index(n) for n in ("ldmatrix_x4_shared32", "ldmatrix_x2_t_shared32", "stmatrix_x1_t_generic",
                                       "ldmatrix_m16n16_x1", "stmatrix_m16n8_x4")]
    asm = lowered.target.emit([lowered.kernels[k] for k in picked], 2, "asm").decode()
    load, load_trans, store_trans, load8, store8 = (asm.split(f"\n{names[k]}:")[1].split(".Lfunc_end")[0]
                                                    for k in picked)
    # 8-bit forms: each row's address is read once (m16n16.x1: 4 rows a lane, m16n8.x4: 2 rows a matrix)
    assert load8.count("ds_bpermute_b32") == 4 and ("ds_read_u8" in load8 or "ds_load_u8" in load8)
    assert store8.count("ds_bpermute_b32") == 8 and ("ds_write_b8" in store8 or "ds_store_b8" in store8)
    # the row addresses cross lanes by ds_bpermute (32-bit LDS addresses: one a row), then LDS accesses
    # (gfx9 spells them ds_read_*, gfx11 ds_load_*)
    assert load.count("ds_bpermute_b32") == 4 and ("ds_read_b32" in load or "ds_load_b32" in load)
    assert load_trans.count("ds_bpermute_b32") == 4 and ("ds_read_u16" in load_trans or "ds_load_u16" in load_trans)
    # generic addresses are 64 bits (two permutes a row) and flat stores
    assert store_trans.count("ds_bpermute_b32") == 4
    assert "flat_store_short" in store_trans or "flat_store_b16" in store_trans
    assert ("v_mbcnt_hi_u32_b32" in load) == (wave_size == 64)


@pytest.mark.parametrize("target", ["sm_90", "sm_90:wave64"])
def test_relowered_forms_assemble_with_ptxas(target, tmp_path):
    names, text = _all_forms_module()
    translation = translate(text, Options(target=target))
    assert all(r.status == "ok" for r in translation.kernels), [r for r in translation.kernels if r.status != "ok"]
    oracles.assert_ptxas_accepts(translation.product, tmp_path)


# ------------------------------------------------------------------------------------------------ clusters, no-ops

CLUSTER_REGISTERS = ["%clusterid.x", "%clusterid.y", "%clusterid.z", "%nclusterid.x", "%nclusterid.y",
                     "%nclusterid.z", "%cluster_ctaid.x", "%cluster_ctaid.y", "%cluster_ctaid.z",
                     "%cluster_nctaid.x", "%cluster_nctaid.y", "%cluster_nctaid.z", "%cluster_ctarank",
                     "%cluster_nctarank"]


def _cluster_kernel(directives: str) -> str:
    """Block (x, y) writes each cluster register, then %is_explicit_cluster (0/1), then %cluster_nctarank as
    a .func reads it, at out[(y * nctaid.x + x) * K + k], 32 bits each."""
    reads = [f"mov.u32 %r5, {name};\n    st.global.u32 [%rd3+{4 * k}], %r5;" for k, name in enumerate(CLUSTER_REGISTERS)]
    k = len(CLUSTER_REGISTERS)
    return HEADER + f"""
.func (.param .b32 result) cluster_size()
{{
    .reg .b32 %q;
    mov.u32 %q, %cluster_nctarank;
    st.param.b32 [result], %q;
    ret;
}}

.visible .entry clusters(.param .u64 pout) {directives}
{{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [pout];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ctaid.y;
    mov.u32 %r3, %nctaid.x;
    mad.lo.u32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd2, %r4, {4 * (k + 2)};
    add.s64 %rd3, %rd1, %rd2;
    {chr(10).join(reads)}
    mov.pred %p1, %is_explicit_cluster;
    selp.u32 %r5, 1, 0, %p1;
    st.global.u32 [%rd3+{4 * k}], %r5;
    {{
    .param .b32 size;
    call (size), cluster_size, ();
    ld.param.b32 %r6, [size];
    }}
    st.global.u32 [%rd3+{4 * (k + 1)}], %r6;
    ret;
}}
"""


@pytest.mark.parametrize("directives, explicit", [("", 0), (".reqnctapercluster 1, 1, 1", 1),
                                                   (".maxclusterrank 1", 0),
                                                   (".explicitcluster .maxclusterrank 1", 1)])
def test_cluster_registers_of_a_cluster_of_one_cta(directives, explicit):
    grid = (3, 2, 1)
    program = translate(_cluster_kernel(directives), Options(target="host")).product
    k = len(CLUSTER_REGISTERS) + 2
    out = np.zeros(6 * k, dtype=np.uint32)
    program.launch("clusters", [out.ctypes.data], grid=grid)
    for y in range(2):
        for x in range(3):
            row = out[(y * 3 + x) * k:(y * 3 + x + 1) * k].tolist()
            assert row == [x, y, 0, 3, 2, 1, 0, 0, 0, 1, 1, 1, 0, 1, explicit, 1], (x, y)


@pytest.mark.parametrize("directives, flagged", [("", False), (".reqnctapercluster 1, 1, 1", False),
                                                 (".maxclusterrank 1", False), (".explicitcluster .maxclusterrank 1", False),
                                                 (".reqnctapercluster 1, 2, 1", True),
                                                 (".explicitcluster", True), (".maxclusterrank 2", True)])
def test_lint_flags_only_clusters_of_more_than_one_cta(directives, flagged):
    kernel = next(k for k in analyse(parse_ptx(_cluster_kernel(directives))) if k.name == "clusters")
    assert any(h.kind == "cluster" for h in kernel.hazards) == flagged


@pytest.mark.parametrize("directives", [".explicitcluster", ".maxclusterrank 8"])
def test_cluster_registers_of_clusters_shaped_at_launch_in_a_function_are_refused(directives):
    """A shape only the launch gives is read from the hidden parameter after CUDA's at the kernel's entry
    (lower/cluster.py; launched in tests/test_translate_cluster.py): the function this kernel calls to read
    %cluster_nctarank cannot see it yet, and the refusal says so; where 2 CTAs cannot be one workgroup, the
    refusal says that first."""
    report = _report(_cluster_kernel(directives))
    assert report.status == "unsupported" and "not yet by the functions they call" in report.reason, report.reason
    report = _report(_cluster_kernel(directives + " .reqntid 640"))
    assert report.status == "unsupported" and "2 CTAs of 640 threads" in report.reason, report.reason


def test_mapa_lowers_in_a_cluster_of_one_and_in_larger_clusters():
    """In a cluster of one CTA, rank 0 is the executing CTA (tests/test_translate_memory.py runs it: d = a);
    tests/test_translate_cluster.py runs clusters of several."""
    text = _kernel("dsmem", 512, "mapa.shared::cluster.u32 %r20, %r11, 0;")
    assert _report(text).status == "ok"
    clustered = text.replace(".param .u64 pout)\n{", ".param .u64 pout) .reqnctapercluster 2, 1, 1\n{", 1)
    assert clustered != text
    assert _report(clustered).status == "ok"


@pytest.mark.parametrize("op, fine", [
    ("griddepcontrol.wait;", True), ("griddepcontrol.launch_dependents;", True),
    ("setmaxnreg.inc.sync.aligned.u32 240;", True), ("setmaxnreg.dec.sync.aligned.u32 40;", True),
    ("griddepcontrol;", False), ("setmaxnreg.inc.sync.aligned.u32 250;", False),
    ("setmaxnreg.dec.u32 40;", False),
])
def test_griddepcontrol_and_setmaxnreg_are_no_ops(op, fine):
    """Checked forms lower to nothing: the kernel still moves its data (the ldmatrix of LOAD_BODY)."""
    body = LOAD_BODY.replace("OP", op + "\n    ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r20}, [%r11];")
    text = _kernel("noop", 16 * 32, body)
    assert (_report(text).status == "ok") == fine
    if fine:
        data = RNG.integers(0, 1 << 16, size=(32, 8), dtype=np.uint16)
        perm = RNG.permutation(32).astype(np.uint32)
        out = _launch(text, "noop", data, perm).view(np.uint32)
        assert np.array_equal(out[:, :1], ldmatrix_model(data, perm, 1, False))
