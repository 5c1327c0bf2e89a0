"""benchmarks/codegen_vs_hip.py: its output comparison, and its HIP mma_tile against an independent model of
PTX's m16n8k16 fragments (the HIP side must compute the function the CUDA side does)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import codegen_vs_hip as bench  # noqa: E402

U = 2.0 ** -24


def _f32(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def _step(value: float, ulps: int) -> np.float32:
    return (np.array([value], np.float32).view(np.int32) + ulps).view(np.float32)[0]


def test_compare_outputs_exact_and_bounded():
    ints = np.array([1, 2, 3], np.uint32)
    assert bench.compare_outputs((ints,), (ints.copy(),), 0) == (True, "equal")
    assert not bench.compare_outputs((ints,), (ints ^ np.uint32(1 << 31),), 100)[0]  # integers: bit for bit
    assert not bench.compare_outputs((_f32(0.0),), (_f32(-0.0),), 0)[0]  # tolerance 0: the sign of zero counts
    near = _f32(1.5, -3.0, 0.0)
    near_other = near.copy()
    near_other[0] = _step(1.5, 3)  # 3 ulp of 1.5: 3·2^-23 / 1.5 = 4u
    same, cell = bench.compare_outputs((near,), (near_other,), 4)
    assert same and cell.startswith("4.0u")
    assert not bench.compare_outputs((near,), (near_other,), 3)[0]
    assert not bench.compare_outputs((near,), (near_other,), 0)[0]


def test_compare_outputs_special_values():
    inf, nan = float("inf"), float("nan")
    assert bench.compare_outputs((_f32(inf, nan),), (_f32(inf, nan),), 10)[0]
    assert not bench.compare_outputs((_f32(inf),), (_f32(-inf),), 10)[0]
    assert not bench.compare_outputs((_f32(inf),), (_f32(3.4e38),), 10)[0]
    assert not bench.compare_outputs((_f32(nan),), (_f32(1.0),), 10)[0]
    tiny = np.array([1], np.uint32).view(np.float32)  # the smallest subnormal against zero: relative 1
    assert not bench.compare_outputs((tiny,), (_f32(0.0),), 1000)[0]


def _model(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """D = A·B + C in f64 and its error scale |C| + |A|·|B|, in PTX's fragment order (the PTX ISA's
    m16n8k16 .f16 layouts: thread (g, t) = (lane/4, lane%4) holds A[g+8r][2t+8q+e] in half e of word r+2q,
    B[2t+8r+e][g] in half e of word r, C[g+8r][2t+e] in float 2r+e)."""
    ah, bh = a.view(np.float16).astype(np.float64), b.view(np.float16).astype(np.float64)
    A, B, C = np.zeros((16, 16)), np.zeros((16, 8)), np.zeros((16, 8))
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for r in range(2):
            for e in range(2):
                for q in range(2):
                    A[g + 8 * r, 2 * t + 8 * q + e] = ah[2 * (4 * lane + r + 2 * q) + e]
                B[2 * t + 8 * r + e, g] = bh[2 * (2 * lane + r) + e]
                C[g + 8 * r, 2 * t + e] = c[4 * lane + 2 * r + e]
    D, scale = A @ B + C, np.abs(A) @ np.abs(B) + np.abs(C)
    order = [(g + 8 * r, 2 * t + e) for g in range(8) for t in range(4) for r in range(2) for e in range(2)]
    return np.array([D[p] for p in order]), np.array([scale[p] for p in order])


@pytest.mark.skipif(not (bench.LLVM / "clang").exists() or shutil.which("nvcc") is None,
                    reason="needs Debian's clang-22 and nvcc")
@pytest.mark.parametrize("target", ["gfx942", "gfx1100"])
def test_hip_mma_tile_is_the_ptx_mma(tmp_path, target):
    from fatkit.emulate import launch

    rng = np.random.default_rng(1818)
    # signed halves spread over exponents −8…7, some subnormal, and ±0: a wrong lane or k shows as a large error
    halves = (rng.choice([-1.0, 1.0], 384) * rng.uniform(1.0, 2.0, 384) * 2.0 ** rng.integers(-8, 8, 384))
    halves[::37] = 2.0 ** -20
    halves[5::41] = -0.0
    words = halves.astype(np.float16).view(np.uint32)
    a, b = words[:128].copy(), words[128:].copy()
    c = (rng.standard_normal(128) * 2.0 ** rng.integers(-6, 6, 128)).astype(np.float32)
    d = np.zeros(128, np.float32)
    launch(bench.build_hip(tmp_path, target), "mma_tile", (1, 1, 1), (32, 1, 1), [a, b, c, d], 0)
    exact, scale = _model(a, b, c)
    assert np.all(np.abs(d - exact) <= 17 * U * scale)  # docs/numerics.md: (K + 1)·2^-24·(|c| + Σ|a·b|)
