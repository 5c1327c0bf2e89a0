"""The AMD replay of the H200 recording (verification/replay/): each recorded case's PTX translated for gfx1100
and gfx942, run on fatkit.emulate with the recorded inputs, and compared with the outputs the original PTX gave
on an H200 — bit for bit, except NaN bits of the operations whose NaNs the PTX ISA leaves open and `.approx`
results, judged against the ISA's error bounds (verification/replay.py says how).

The subset (deterministic, documented in verification/replay.py's `ci_subset`): every table case (987 of the
integer, float, half, convert, video and cluster families) and every sixteenth `mma:sm90` case in the index's
order (an mma case takes seconds), on both targets. `python verification/replay.py` runs all 1,344 cases."""

from __future__ import annotations

import numpy as np
import pytest

from verification import replay

SUBSET = replay.ci_subset()


@pytest.fixture(scope="module")
def arrays():
    with np.load(replay.RECORDING / "replay.npz") as data:
        yield data


def test_ci_subset_covers_every_family():
    families = {case["family"] for case in replay.recorded_cases()}
    assert {case["family"] for case in SUBSET} == families
    assert len(SUBSET) >= 400


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
@pytest.mark.parametrize("case", SUBSET, ids=[case["name"] for case in SUBSET])
def test_replay(case, target, arrays):
    status, detail = replay.replay_case(case, target, arrays)
    assert status in ("pass", "known"), detail
