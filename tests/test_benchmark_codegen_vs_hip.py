"""benchmarks/codegen_vs_hip.py: its output comparison, its HIP mma_tile against an independent model of
PTX's m16n8k16 fragments, and its .ftz kernels' inputs and both sides' results about the tininess boundary
against exact arithmetic (the HIP side must compute the function the CUDA side does)."""

from __future__ import annotations

import math
import shutil
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import codegen_vs_hip as bench  # noqa: E402

U = 2.0 ** -24
TOOLS = pytest.mark.skipif(not (bench.LLVM / "clang").exists() or shutil.which("nvcc") is None,
                           reason="needs Debian's clang-22 and nvcc")


def _f32(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def _step(value: float, ulps: int) -> np.float32:
    return (np.array([value], np.float32).view(np.int32) + ulps).view(np.float32)[0]


def test_compare_outputs_exact_and_bounded():
    ints = np.array([1, 2, 3], np.uint32)
    assert bench.compare_outputs((ints,), (ints.copy(),), 0) == (True, "equal")
    assert not bench.compare_outputs((ints,), (ints ^ np.uint32(1 << 31),), 100)[0]  # integers: bit for bit
    assert not bench.compare_outputs((_f32(0.0),), (_f32(-0.0),), 0)[0]  # tolerance 0: the sign of zero counts
    nans = _f32(float("nan"), 1.0, 2.0)
    other = _f32(float("nan"), 1.0, -2.0)
    assert bench.compare_outputs((nans,), (other,), 0) == (False, "DIFFER: 1 of 3 elements")  # by bits
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


@TOOLS
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


# ---- .ftz: NVIDIA flushes a result whose exact value is below 2^-126 (tininess before rounding) ----

NORMAL = Fraction(1, 2 ** 126)


def _flushed(x: float) -> float:
    return math.copysign(0.0, x) if 0 < abs(x) < 2.0 ** -126 else x


def _nearest_f32(x: Fraction) -> float:
    """x rounded to nearest even among the normal f32 (|x| ≥ 2^-126), ±inf beyond."""
    m = abs(x)
    exponent = m.numerator.bit_length() - m.denominator.bit_length()
    exponent -= Fraction(2) ** exponent > m
    ulp = Fraction(2) ** (exponent - 23)
    whole, rest = divmod(m, ulp)
    whole += rest > ulp / 2 or (rest == ulp / 2 and whole % 2 == 1)
    value = float(whole * ulp)
    return math.copysign(value if value < 2.0 ** 128 else math.inf, x)


def _ptx_ftz(op: str, a: float, b: float, c: float) -> float:
    """PTX's add/mul/fma.rn.ftz.f32 in exact arithmetic: subnormal inputs are zeros of their sign, an exact
    result below 2^-126 is the zero of its sign, an exact zero +0 unless every term is −0; NaN for NaN."""
    a, b, c = _flushed(a), _flushed(b), _flushed(c)
    if op == "add":
        a, b, c = a, 1.0, b
    elif op == "mul":
        c = -0.0  # a·b + (−0) is a·b, its zero's sign included
    if not all(map(math.isfinite, (a, b, c))):
        return float(np.float32(a * b + c))
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        both_negative = math.copysign(1.0, a) * math.copysign(1.0, b) < 0 and math.copysign(1.0, c) < 0
        return -0.0 if both_negative else 0.0
    if abs(exact) < NORMAL:
        return math.copysign(0.0, exact)
    return _nearest_f32(exact)


def _exact_values(op: str) -> list[Fraction | None]:
    a, b, c, _ = bench._ftz_boundary(np.random.default_rng(18))
    values = []
    for x, y, z in zip(a.tolist(), b.tolist(), c.tolist()):
        normal = all(v == 0 or abs(v) >= 2.0 ** -126 for v in (x, y, z)) and all(map(math.isfinite, (x, y, z)))
        values.append(Fraction(x) * Fraction(y) + (Fraction(z) if op == "fma" else 0) if normal else None)
    return values


@pytest.mark.parametrize("op", ["mul", "fma"])
def test_ftz_inputs_reach_the_tininess_boundary(op):
    """The inputs hold, from normal operands and of both signs: exact values below 2^-126 that round to it
    (the boundary NVIDIA and AMD's flush disagree on), exactly 2^-126, just above it; and subnormal operands,
    zeros, NaN and ±inf, and for fma terms cancelling exactly and to a tiny rounding error."""
    a, b, c, _ = bench._ftz_boundary(np.random.default_rng(18))
    exact = _exact_values(op)
    rounds_up = [e for e in exact if e is not None and NORMAL * (1 - Fraction(1, 2 ** 25)) <= abs(e) < NORMAL]
    assert {e > 0 for e in rounds_up} == {True, False} and len(rounds_up) >= 4
    assert {e for e in exact if e is not None and abs(e) == NORMAL} == {NORMAL, -NORMAL}
    above = [e for e in exact if e is not None and NORMAL < abs(e) < NORMAL * (1 + Fraction(1, 2 ** 24))]
    assert {e > 0 for e in above} == {True, False}
    operands = np.concatenate([a, b] + ([c] if op == "fma" else []))
    assert np.count_nonzero((operands != 0) & (np.abs(operands) < 2.0 ** -126)) >= 4
    assert np.any(np.signbit(a) & (a == 0)) and np.any(~np.signbit(a) & (a == 0))
    assert np.isnan(operands).any() and np.isinf(operands).any()
    if op == "fma":
        cancelled = [i for i, e in enumerate(exact) if e == 0 and a[i] * b[i] != 0]
        tiny_errors = [e for i, e in enumerate(exact) if e is not None and 0 < abs(e) < NORMAL and c[i] != 0]
        assert cancelled and {e > 0 for e in tiny_errors} == {True, False}


def _same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))


@TOOLS
@pytest.mark.parametrize("target", ["gfx942", "gfx1100"])
def test_ftz_kernels_compute_ptx_function(tmp_path, target):
    """fatkit's translation of kernels.cu's add/mul/fma.ftz kernels and kernels_ftz.hip's HIP ones give
    PTX's results (exact arithmetic) on the boundary inputs, on fatkit.emulate; the plain operation under
    AMD's flush (op_*_ftz_amd) keeps ±2^-126 where the exact value is just below it."""
    from fatkit.emulate import launch

    fatkit = bench.build_fatkit(bench.build_ptx(tmp_path), target)[0]
    hip = bench.build_hip(tmp_path, target, "kernels_ftz.hip")
    a, b, c, _ = bench._ftz_boundary(np.random.default_rng(18))

    def run(code_object: bytes, name: str) -> np.ndarray:
        args = [a.copy(), b.copy(), c.copy(), np.zeros(64, np.float32)]
        launch(code_object, name, (1, 1, 1), (64, 1, 1), args, 0)
        return args[3]

    for op in ("add", "mul", "fma"):
        want = np.array([_ptx_ftz(op, *row) for row in zip(a.tolist(), b.tolist(), c.tolist())], np.float32)
        for side, code_object in (("fatkit", fatkit), ("HIP", hip)):
            got = run(code_object, f"op_{op}_ftz")
            assert _same(got, want).all(), (side, op, np.flatnonzero(~_same(got, want)))
        if op == "add":
            continue
        rounds_up = [i for i, e in enumerate(_exact_values(op))
                     if e is not None and NORMAL * (1 - Fraction(1, 2 ** 25)) <= abs(e) < NORMAL]
        amd = run(hip, f"op_{op}_ftz_amd")
        assert np.array_equal(np.abs(amd[rounds_up]), np.full(len(rounds_up), 2.0 ** -126, np.float32))
        assert np.array_equal(np.signbit(amd[rounds_up]), np.signbit(want[rounds_up]))
