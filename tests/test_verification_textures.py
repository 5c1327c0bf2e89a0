"""verification/textures.py's host side, the parts an H200 run relies on but cannot check: the kernels assemble
(ptxas), the coordinate sets hold the cases they promise (ties, texel borders, the grid's neighbours), the
n-D filter model reduces to the fitted 2-D and 3-D rules, and the 3-D weight sweep's inversion recovers
eight weights from two lookups."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from tests import oracles
from verification import textures


@pytest.mark.parametrize("key", list(textures.LOOKUPS))
def test_grid_kernels_assemble(key, tmp_path) -> None:
    oracles.assert_ptxas_accepts(textures.GRID.replace("{instruction}", textures.LOOKUPS[key]), tmp_path)


def test_axis_coords_hold_ties_borders_and_grid_neighbours() -> None:
    for size in (2, 4, 8, 16):
        coords = textures.axis_coords(size, 512, 5)
        assert coords.dtype == np.float32 and coords.shape == (512,)
        fractions = [(float(c) * size - 0.5) % 1 * 256 for c in coords]
        ties = sum(f % 1 == 0.5 for f in fractions)
        halves = sum(f == 128 for f in fractions)  # x on a texel border: a two-texel blend's tie when t0 + t1 is odd
        near = sum(0 < abs(f - round(f)) < 2 ** -4 for f in fractions)
        assert ties >= 100 and halves >= 3 and near >= 100, (size, ties, halves, near)
        assert min(coords) < 0 and max(coords) > 1  # past both edges


def test_point_coords_straddle_borders() -> None:
    coords = textures.point_coords(8, 512, 3)
    beside = [c for c in coords if 0 < abs(float(c) * 8 - round(float(c) * 8)) < 2 ** -7]
    assert len(beside) >= 200
    below = sum(float(c) * 8 < round(float(c) * 8) for c in beside)
    assert 50 < below < len(beside) - 50


def test_nvidia_filter_is_the_fitted_rules() -> None:
    rng = np.random.default_rng(3)
    coords = textures.filter_coords((8, 4, 4), 128, 11)
    plane = rng.uniform(-4, 4, (4, 8, 4)).astype(np.float32)
    volume = rng.uniform(-4, 4, (4, 4, 8, 4)).astype(np.float32)
    for c in coords:
        for address in ("clamp", "wrap", "border"):
            np.testing.assert_array_equal(textures.nvidia_filter(plane, c[:2], address, textures.float_blend),
                                          textures.nvidia_sample(plane, *c[:2], address))
        np.testing.assert_array_equal(textures.nvidia_filter(volume, c[:3], "clamp", textures.float_blend),
                                      textures.nvidia_sample_3d(volume, *c[:3]))
    data = rng.integers(0, 256, (4, 8, 4), dtype=np.uint8)
    for c in coords:
        np.testing.assert_array_equal(textures.nvidia_filter(data, c[:2], "clamp", textures.normalised_blend(8, False)),
                                      textures.nvidia_sample_unorm8(data, *c[:2], "clamp"))


def test_sweep_3d_inversion_recovers_any_weights() -> None:
    """Any eight weights summing to 256 (not only the rule's) come back from the two lookups' exact sums."""
    first, second = textures.sweep_3d_texels()
    rng = np.random.default_rng(7)
    for _case in range(200):
        cuts = np.sort(rng.integers(0, 257, 7))
        weights = np.diff(np.concatenate([[0], cuts, [256]]))
        lookups = [np.array([sum(w * float(t[c]) for w, t in zip(weights, texels.reshape(8, 4))) / 256
                             for c in range(4)], np.float32) for texels in (first, second)]
        assert textures.weights_from_sweep_3d(*lookups).tolist() == weights.tolist()


def test_normalised_texels_and_values() -> None:
    for name, (bits, signed) in textures.NORMALISED_FORMATS.items():
        texels = textures.normalised_texels(bits, signed, (4, 8, 4), 1)
        limits = np.iinfo(textures.normalised_dtype(bits, signed))
        assert texels.dtype == limits.dtype and limits.max in texels and (limits.min in texels)
        assert textures.normalised_value(limits.max, bits, signed) == 1
        assert textures.normalised_value(limits.min, bits, signed) == (-1 if signed else 0), name
    assert textures.normalised_value(-127, 8, True) == -1
    assert textures.normalised_value(1, 16, False) == Fraction(1, 65535)
