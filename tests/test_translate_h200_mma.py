"""mma / mma.sp / wmma on the host target against what an H200 gave (tests/samples/h200/mma_samples.npz, two
warps of every form and input distribution of verification/probe_numerics.py: random normals, every exponent
with subnormals, zeros, inf and NaN, raw bit patterns, subnormals, the largest binades, mostly zeros, ±1 with
±0 accumulators), with --mma-numerics sm90 bit for bit; and with `exact` against the host reference model of
verification/mma_reference.py (products exact, summed in f64 in k order from c, rounded once).
Every form on the host; on the gfx1100 and gfx942 code objects too (fatkit.emulate), against the same expected
bits, every AMD_EVERY-th form of each table with one distribution each, taken in turn (an fp8 mma takes a
minute a target with all seven); verification/replay.py runs the recorded mma cases on AMD.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from fatkit.translate.pipeline import Options
from tests.amdrun import TARGETS
from tests.amdrun import program as loaded_program
from verification import mma_reference
from verification.probe_numerics import DISTRIBUTIONS, mma_kernel, wmma_kernel

SAMPLES = Path(__file__).parent / "samples" / "h200"
FORMS = json.loads((SAMPLES / "mma_forms.json").read_text())
HEADER = ".version 8.7\n.target sm_90\n.address_size 64\n\n"


@lru_cache(maxsize=1)
def samples() -> dict[str, np.ndarray]:
    with np.load(SAMPLES / "mma_samples.npz") as data:
        return {key: data[key] for key in data.files}


AMD_EVERY = 4


def _rows(forms: list[dict]) -> list:
    """(form, target) rows: every form on the host, every AMD_EVERY-th on the AMD targets."""
    return [pytest.param(form, target, id=f"{form['name']}-{target}") for target in TARGETS
            for index, form in enumerate(forms) if target == "host" or index % AMD_EVERY == 0]


def _distributions(forms: list[dict], form: dict, target: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """All of `names` on the host; on AMD the one the form's place in its table selects, in turn."""
    if target == "host":
        return names
    return (names[forms.index(form) // AMD_EVERY % len(names)],)


def _run(text: str, name: str, record: np.ndarray, out_shape: tuple, out_dtype, warps: int, numerics: str,
         target: str = "host"):
    program = loaded_program(text, target, mma_numerics=numerics)
    inputs = np.ascontiguousarray(record)
    out = np.zeros(out_shape, dtype=out_dtype)
    program.launch(name, [inputs, out], grid=(warps, 1, 1), block=(32, 1, 1))
    return out


def _mma_case(form: dict, dist: str, numerics: str, target: str = "host"):
    record = samples()[f"mma:{form['name']}:{dist}:in"]
    expected = samples()[f"mma:{form['name']}:{dist}:out"]
    out = _run(HEADER + mma_kernel(form), form["name"], record, expected.shape, expected.dtype,
               record.shape[0] // 32, numerics, target)
    return record, expected, out


@pytest.mark.parametrize("form, target", _rows(FORMS["mma"]))
def test_mma_sm90_matches_h200(form, target):
    wrong = []
    for dist in _distributions(FORMS["mma"], form, target, DISTRIBUTIONS):
        _, expected, out = _mma_case(form, dist, "sm90", target)
        bad = np.nonzero(out.reshape(-1) != expected.reshape(-1))[0]
        if form["types"]["a"] == "f64":  # a NaN's sign and payload are the fma's of the target (docs/numerics.md)
            both_nan = np.isnan(out.reshape(-1).view(np.float64)) & np.isnan(expected.reshape(-1).view(np.float64))
            bad = np.array([i for i in bad if not both_nan[i]], dtype=np.int64)
        wrong += [(dist, hex(int(expected.reshape(-1)[i])), hex(int(out.reshape(-1)[i]))) for i in bad[:2]]
    assert not wrong, f"registers differing from the H200 (distribution, nvidia, fatkit): {wrong[:6]}"


EXACT_FORMS = [f for f in FORMS["mma"] if f["types"]["a"] in ("f16", "bf16", "tf32", "e4m3", "e5m2")]


@pytest.mark.parametrize("form, target", _rows(EXACT_FORMS))
def test_mma_exact_matches_reference(form, target):
    wrong = []
    for dist in _distributions(EXACT_FORMS, form, target, ("normal", "wide", "subnormal", "zeros")):
        record, _, out = _mma_case(form, dist, "exact", target)
        a, b, c, _ = mma_reference.mma_terms(form, record)
        expected = mma_reference.f64_sum_model(a, b, c, form["types"])
        got = mma_reference.d_elements(form, out)
        bad = np.nonzero(got != expected)[0]
        wrong += [(dist, hex(int(expected[i])), hex(int(got[i]))) for i in bad[:2]]
    assert not wrong, f"D elements differing from the reference (distribution, reference, fatkit): {wrong[:6]}"


@pytest.mark.parametrize("form, target", _rows(FORMS["wmma"]))
def test_wmma_sm90_matches_h200(form, target):
    wrong = []
    for dist in _distributions(FORMS["wmma"], form, target, DISTRIBUTIONS):
        record = samples()[f"wmma:{form['name']}:{dist}:in"]
        expected = samples()[f"wmma:{form['name']}:{dist}:out"]
        text = HEADER + wmma_kernel(form["name"], form["shape"], form["a"], form["c"], form["d"])
        out = _run(text, form["name"], record, expected.shape, expected.dtype, record.shape[0], "sm90", target)
        bad = np.nonzero(out != expected)[0]
        wrong += [(dist, int(i)) for i in bad[:2]]
    assert not wrong, f"tiles differing from the H200 (distribution, warp): {wrong[:6]}"


def test_unknown_numerics_are_refused_naming_the_models():
    from fatkit.errors import UsageError

    assert Options(mma_numerics="native").mma_numerics == "native"
    with pytest.raises(UsageError, match="sm90, exact, native"):
        Options(mma_numerics="sm80")
