"""The GPU differential suite's cases for issue 17's module-level features, run here on the host target and the
AMD executor against models written from the CUDA sources (verification/cuda, verification/ptx): `__device__`
pointer tables initialised with `generic(var)+offset` (and hand-written `var+offset`), NCCL's unsized
non-`.extern` `.shared` array, and `-rdc` units linked by fatkit (tests/samples/verification/build.sh makes the
PTX)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fatkit.translate.link import link_modules
from tests.amdrun import TARGETS
from tests.amdrun import program as loaded_program

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = Path(__file__).parent / "samples" / "verification"


@pytest.fixture(params=TARGETS)
def target(request) -> str:
    return request.param


def _inputs(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32)


def test_pointer_tables_initialised_with_addresses(target):
    text = (SAMPLES / "memory.compute_90.ptx").read_text()
    assert "{generic(table_words), generic(table_words)+12" in text and ".const .align 8 .u64 const_pointers" in text
    n = 64
    x = _inputs(n, 17)
    out = np.full(4 * n, 0xA5A5A5A5, dtype=np.uint32)
    loaded_program(text, target).launch("address_tables", [x, out, n], grid=(2, 1, 1), block=(32, 1, 1))
    words = [0x01234567, 0x89ABCDEF, 0xDEADBEEF, 0x7F800001, 0x80000000, 0x00000001, 0xFFFFFFFF, 0x3F800000]
    wide = [0x0123456789ABCDEF, 0xFFF0000000000001, 42]
    data = bytes([1, 2, 3, 250, 251, 252])
    word_at, wide_at, byte_at = [0, 3, 5, 6], [2, 0], [1, 0, 5]  # memory.cu's tables, as element indices
    pointer_to_table = word_at[1:]
    const_at = [2, 6]
    expected = []
    for v in (int(v) for v in x):
        w = wide[wide_at[v & 1]]
        expected += [words[word_at[v & 3]] ^ data[byte_at[(v >> 2) % 3]],
                     (w >> ((v >> 4) & 32)) & 0xFFFFFFFF,
                     (words[pointer_to_table[(v >> 6) % 3] + ((v >> 8) & 1)] + words[const_at[(v >> 9) & 1]])
                     & 0xFFFFFFFF,
                     word_at[(v >> 10) & 3] + 100 * byte_at[v % 3]]
    assert out.tolist() == expected


@pytest.mark.parametrize("shared", [4 * 64 + 4, 40000])
def test_an_unsized_shared_array_without_extern_is_the_launchs_dynamic_shared_memory(target, shared):
    text = (ROOT / "verification" / "ptx" / "shared_unsized.ptx").read_text()
    assert "\n.shared .align 16 .b8 ncclShmem[];" in text
    threads, blocks = 64, 2
    x = _inputs(threads * blocks, shared)
    out = np.full(4 * threads * blocks, 0xA5A5A5A5, dtype=np.uint32)
    loaded_program(text, target).launch("unsized_shared", [x, out, threads * blocks], grid=(blocks, 1, 1),
                                        block=(threads, 1, 1), shared_bytes=shared)
    expected = []
    for block in range(blocks):
        mine = x[block * threads:(block + 1) * threads].tolist()
        for t in range(threads):
            expected += [mine[(t + 1) % threads], mine[t ^ 3], mine[1] ^ 0x5A5A5A5A, block + shared]
    assert out.tolist() == expected


def _rotate_left(value: int, count: int) -> int:
    count &= 31
    return ((value << count) | (value >> (32 - count))) & 0xFFFFFFFF if count else value


def test_rdc_units_linked_by_fatkit_run_as_one_module(target):
    units = [(name, (SAMPLES / f"{name}.compute_90.ptx").read_text()) for name in ("rdc_main", "rdc_lib")]
    assert ".extern .func  (.param .b32 func_retval0) _Z7rdc_mixjj" in units[0][1]
    linked = link_modules(units)
    assert linked is not None and not linked.unresolved
    n = 61
    x = _inputs(64, 5)
    values = np.random.default_rng(6).uniform(-8, 8, 64).astype(np.float32)
    out = np.full(2 * 64, 0xA5A5A5A5, dtype=np.uint32)
    scaled = np.full(64, np.nan, dtype=np.float32)
    loaded_program(linked.text, target).launch("rdc_calls", [x, values, out, scaled, n], grid=(2, 1, 1),
                                               block=(32, 1, 1))
    keys = [0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344]

    def lib_step(v: int) -> int:  # rdc_lib.cu's static local_step
        return ((v << 5) ^ (v >> 3) ^ 0xA5A5A5A5) & 0xFFFFFFFF

    def mix(v: int, key: int) -> int:
        h = lib_step(v ^ key)
        return (_rotate_left(h, key) + bin(v).count("1")) & 0xFFFFFFFF

    expected = []
    for i, v in enumerate(int(v) for v in x[:n]):
        main_step = (v * 0x9E3779B9 + 7) & 0xFFFFFFFF  # rdc_main.cu's static local_step
        expected += [mix(main_step, keys[v & 3]), mix(v >> 3, i) ^ keys[(v >> 2) & 3]]
    assert out[:2 * n].tolist() == expected and (out[2 * n:] == 0xA5A5A5A5).all()
    # fmaf(x, 0.375, -1.25) rounds once: exact in f64 for these values, then to f32
    fma = (values[:n].astype(np.float64) * 0.375 - 1.25).astype(np.float32)
    want = fma * np.float32(keys[1] & 15) + np.float32(0.375)
    assert scaled[:n].view(np.uint32).tolist() == want.view(np.uint32).tolist()
    assert np.isnan(scaled[n:]).all()


def test_global_initialisers_holding_generic_and_own_space_addresses(target):
    text = (ROOT / "verification" / "ptx" / "address_init.ptx").read_text()
    n = 61
    x = _inputs(64, 9)
    out = np.full(3 * 64, 0xA5A5A5A5A5A5A5A5, dtype=np.uint64)
    loaded_program(text, target).launch("address_init", [x, out, n], grid=(2, 1, 1), block=(32, 1, 1))
    values = [0x0123456789ABCDEF, 0xFFF0000000000001, 0x8000000000000000, 42]
    words = [0xDEADBEEF, 0x7F800001, 5]
    expected = []
    for v in (int(v) for v in x[:n]):
        first = values[v & 3]
        expected += [first, values[2 + ((v >> 3) & 1)] ^ first, words[2 * ((v >> 2) & 1)]]
    assert out[:3 * n].tolist() == expected and (out[3 * n:] == 0xA5A5A5A5A5A5A5A5).all()
