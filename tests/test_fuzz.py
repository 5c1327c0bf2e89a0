"""The standing fuzz budget (seeded, reproducible) and the regression inputs earlier fuzzing found."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fatkit.errors import FatkitError
from tests.fuzzing import TARGETS, seeds

REGRESSIONS = sorted((Path(__file__).parent / "samples" / "fuzz").glob("*.bin"))


@pytest.mark.parametrize("path", REGRESSIONS, ids=lambda p: p.name)
def test_regression_inputs_are_rejected_cleanly(path):
    """Each file is named `<target>-<what it broke>.bin`; it must now give FatkitError or nothing."""
    target = TARGETS[path.name.split("-", 1)[0]]
    try:
        target(path.read_bytes())
    except FatkitError:
        pass


@pytest.mark.parametrize("target", ["fatkit_amd", "wheel", "pe"])
def test_seeds_are_accepted(target):
    """Mutations start from inputs the reader accepts (else only its first rejection would be fuzzed)."""
    for data in seeds()[target]:
        TARGETS[target](data)


def test_fuzz_budget_has_no_escapes_or_hangs():
    """A few thousand mutated inputs per reader, under a memory ceiling, with a fixed seed."""
    proc = subprocess.run([sys.executable, "-m", "tests.fuzzing", "--per-target", "2000", "--seed", "20261129",
                           "--budget", "10"], capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).parent.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "escapes 0, over 2 s 0" in proc.stdout
