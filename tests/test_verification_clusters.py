"""verification/clusters.py's build, here: nvcc's cluster kernels (verification/cuda/clusters.cu) and the
elected multicast TMA kernel in the static and launch-given forms, fatkit's sm_90 re-lowering of each (ptxas
must accept all eight modules, as the H200's driver will), and the executor's outputs the build stores
(gfx942, gfx1100, launched through fatkit.runtime.plan_cluster_launch) against a numpy model of what CUDA's
definitions make each kernel write.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tests import oracles
from verification import clusters


def _ring(a: np.ndarray, k: int) -> np.ndarray:
    values = a.reshape(-1, 64).astype(np.uint64)
    out = np.zeros((values.shape[0], 64, 4), np.uint64)
    for cta in range(values.shape[0]):
        base, rank = cta - cta % k, cta % k
        after, before = base + (rank + 1) % k, base + (rank + k - 1) % k
        for t in range(64):
            out[cta, t] = [values[after, (7 * t) & 63], (values[before] & 255).sum(), rank, (rank + 1) % k]
    return (out & 0xFFFFFFFF).astype(np.uint32).reshape(-1)


def _registers(grid, block, cluster) -> np.ndarray:
    rows = np.zeros((grid[0] * grid[1], block[0] * block[1], 16), np.uint32)
    for by in range(grid[1]):
        for bx in range(grid[0]):
            index = (bx % cluster[0], by % cluster[1])
            for ty in range(block[1]):
                for tx in range(block[0]):
                    rows[bx + grid[0] * by, tx + block[0] * ty] = [
                        tx, ty, bx, by, grid[0], grid[1], *index, cluster[0], cluster[1],
                        index[0] + cluster[0] * index[1], cluster[0] * cluster[1], bx // cluster[0],
                        by // cluster[1], grid[0] // cluster[0], grid[1] // cluster[1]]
    return rows.reshape(-1)


def _divergent(a: np.ndarray, threads: int) -> np.ndarray:
    ctas = a.reshape(-1, threads).astype(np.uint64)
    final = np.zeros_like(ctas)
    for cta in range(ctas.shape[0]):
        shared = ctas[cta].copy()
        total = ctas[cta].copy()
        for round_ in range(3 + 2 * (cta % 2)):
            total = (total + shared[(np.arange(threads) + round_ + 1) % threads]) & 0xFFFFFFFF
            shared = total.copy()
        final[cta] = total
    out = np.zeros((ctas.shape[0], threads, 2), np.uint64)
    for cta in range(ctas.shape[0]):
        out[cta, :, 0] = final[cta]
        out[cta, :, 1] = final[cta ^ 1][(np.arange(threads) * 5) % threads]
    return out.astype(np.uint32).reshape(-1)


def _multicast(a: np.ndarray, ctas: int, mask: int) -> np.ndarray:
    """Each CTA's box: its cluster's 32 words where the mask selects its rank, else the all-ones it started as."""
    return np.concatenate([a[32 * (cta // 4):32 * (cta // 4) + 32] if mask >> (cta % 4) & 1
                           else np.full(32, 0xFFFFFFFF, np.uint32) for cta in range(ctas)])


def _model(name: str, a: np.ndarray) -> np.ndarray:
    kernel, grid, block, cluster, _, _, _ = clusters.CASES[name]
    if kernel == "elected_multicast":
        return _multicast(a, grid[0], clusters.MASKS[name])
    if kernel == "ring":
        return _ring(a, cluster[0])
    if kernel == "registers":
        return _registers(grid, block, cluster)
    return _divergent(a, block[0])


def test_the_cluster_verification_builds_and_the_executor_matches_the_model(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not available (PyPI nvidia-cuda-nvcc)")
    clusters.build(tmp_path)
    for module in ("clusters", "multicast"):
        for form in ("static", "launch"):
            for kind in ("orig", "fatkit"):
                oracles.assert_ptxas_accepts((tmp_path / f"{module}.{form}.{kind}.ptx").read_bytes(), tmp_path)
        launch = (tmp_path / f"{module}.launch.orig.ptx").read_text()
        assert ".reqnctapercluster" not in launch and ".explicitcluster" in launch
    cases = json.loads((tmp_path / "cases.json").read_text())
    assert {c["name"] for c in cases} == set(clusters.CASES)
    inputs, executor = np.load(tmp_path / "inputs.npz"), np.load(tmp_path / "executor.npz")
    for case in cases:
        want = _model(case["name"], inputs[case["name"]])
        for processor in clusters.PROCESSORS:
            np.testing.assert_array_equal(executor[f"{case['name']}@{processor}"], want, err_msg=case["name"])
        if case["form"] == "launch":  # the shape after CUDA's parameters: x, y, z, given by the launch
            assert bytes.fromhex(case["fatkit"]["tail"])[:12] == np.array(case["cluster"], "<u4").tobytes()
    assert sum(path.stat().st_size for path in tmp_path.iterdir() if path.is_file()) < 1 << 20
