"""The nvptx verification target: fatkit's lowered IR back to PTX that ptxas accepts, with the original's
kernel-parameter layout (so the differential harness launches both the same way)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fatkit.errors import UsageError
from fatkit.translate.pipeline import Options, translate
from fatkit.translate.ptx import parse_ptx
from fatkit.translate.targets import target_named
from tests import oracles
from tests.test_cli import fatkit
from tests.test_cli_translate import translate_json

SAMPLES = Path(__file__).parent / "samples"
MODULES = (SAMPLES / "nv_kern_sm90.ptx", SAMPLES / "ptx" / "basics.sm_80.ptx")


def _params(module_text: str) -> dict[str, list[tuple[int | None, int | None]]]:
    return {k.name: [(p.size_bytes, p.align or p.element_size) for p in k.params]
            for k in parse_ptx(module_text).kernels}


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.name)
def test_relowered_ptx_assembles_with_the_original_parameter_layout(module, tmp_path):
    text = module.read_text()
    translation = translate(text, Options(target="sm_90"))
    produced = translation.product.decode()
    ok = [k.name for k in translation.kernels if k.status == "ok"]
    assert ok
    original, relowered = _params(text), _params(produced)
    for name in ok:
        assert relowered[name] == original[name]
    oracles.assert_ptxas_accepts(produced, tmp_path)


def test_cli_writes_ptx_for_sm_targets(tmp_path):
    report = translate_json(str(MODULES[0]), "--target", "sm_90,gfx942", "-o", str(tmp_path))
    outputs = {m["target"]: Path(m["output"]) for m in report["modules"]}
    assert outputs["sm_90"].name == "nv_kern_sm90.sm_90.ptx"
    assert outputs["gfx942"].name == "nv_kern_sm90.gfx942.hsaco"
    assert ".entry _Z5saxpyfPKfPfi(" in outputs["sm_90"].read_text()
    usage = fatkit("translate", str(MODULES[0]), "--target", "sm_90", "-o", str(tmp_path), "--emit", "asm", check=2)
    assert "AMD targets" in usage.stderr


def test_unknown_nvidia_target_is_a_usage_error():
    with pytest.raises(UsageError):
        target_named("sm_x")
