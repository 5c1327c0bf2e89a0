"""cvt on the host target against outputs an H200 gave (tests/samples/h200/cvt_samples.json, measured by
verification/probe_numerics.py): for every f32/f64 → f16/bf16/fp8/tf32/f32 form, f16x2/bf16x2/fp8 packs and their
unpacking, with every rounding, .ftz, .sat, .relu and .satfinite, samples of every input class (all f32
subnormals, random bit patterns, exponent-spread values), the ones where fatkit once differed first.
Every form on the host; every AMD_EVERY-th form (in name order) on the gfx1100 and gfx942 code objects too
(fatkit.emulate), against the same H200 bits; verification/replay.py runs the recorded cvt cases on AMD.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import pytest

from tests.amdrun import TARGETS
from tests.amdrun import program as loaded_program
from verification.probe_numerics import cvt_kernel

SAMPLES = json.loads((Path(__file__).parent / "samples" / "h200" / "cvt_samples.json").read_text())["forms"]


AMD_EVERY = 4


@pytest.mark.parametrize("name, target", [
    pytest.param(name, target, id=f"{name}-{target}") for target in TARGETS
    for index, name in enumerate(sorted(SAMPLES)) if target == "host" or index % AMD_EVERY == 0])
def test_cvt_matches_h200(name, target):
    form = SAMPLES[name]
    rows = [row for entry in form["classes"].values() for row in entry["samples"]]
    wide = form["source"] == "f64"
    first = (ctypes.c_uint64 if wide else ctypes.c_uint32)(0).__class__ * len(rows)
    a = first(*(int(r[0], 16) for r in rows))
    b = (ctypes.c_uint32 * len(rows))(*(int(r[1], 16) for r in rows))
    out = (ctypes.c_uint32 * len(rows))()
    program = loaded_program(cvt_kernel({**form, "name": name}), target)
    program.launch(name, [a, b, out, len(rows)], block=(len(rows), 1, 1))
    wrong = [(r[0], r[1], r[2], hex(got)) for r, got in zip(rows, out) if int(r[2], 16) != got]
    assert not wrong, f"{len(wrong)} of {len(rows)} differ from the H200 (a, b, nvidia, fatkit): {wrong[:4]}"
