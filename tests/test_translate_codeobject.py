"""Structural checks of produced AMD code objects with LLVM's own tools, per processor family.

Every code object must decode with LLVM 19's `llvm-readelf --notes` and `llvm-objdump -d` (the oldest LLVM
whose tools ROCm users have), not only with fatkit's reader and the LLVM 22 that wrote it. LLVM 19 does not
know gfx950 (added in LLVM 20); that processor is checked with LLVM 22's tools.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from fatkit.formats.hsaco import parse_code_object
from fatkit.translate.pipeline import Options, translate
from tests import oracles
from tests.helpers import LLVM_BIN

SAMPLES = Path(__file__).parent / "samples"
MODULES = (SAMPLES / "nv_kern_sm90.ptx", SAMPLES / "ptx" / "basics.sm_80.ptx")
# processor → wave size LLVM compiles it for
PROCESSORS = {"gfx90a": 64, "gfx942": 64, "gfx950": 64, "gfx1030": 32, "gfx1100": 32, "gfx1201": 32}
LLVM19_LACKS = {"gfx950"}


def _tool(name: str, processor: str) -> Path:
    if processor in LLVM19_LACKS:
        return LLVM_BIN / name
    tool = oracles.llvm19(name)
    if tool is None:
        pytest.skip(f"{name}-19 not installed (Debian llvm-19)")
    return tool


def _run(argv: list) -> str:
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr.lower(), result.stderr
    return result.stdout


@pytest.mark.parametrize("processor", PROCESSORS)
def test_code_objects_decode_with_llvm_tools(processor, tmp_path):
    wave = PROCESSORS[processor]
    for module in MODULES:
        translation = translate(module.read_text(), Options(target=processor))
        path = tmp_path / f"{module.stem}.{processor}.hsaco"
        path.write_bytes(translation.product)
        kernels = [k.name for k in translation.kernels if k.status == "ok"]
        assert kernels

        code_object = parse_code_object(translation.product)  # fatkit's own reader agrees
        assert code_object.processor == processor and code_object.code_object_version == 5
        assert sorted(k.name for k in code_object.kernels) == sorted(kernels)

        notes = _run([_tool("llvm-readelf", processor), "--notes", path])
        assert "NT_AMDGPU_METADATA" in notes
        assert re.search(r"amdhsa\.target:\s+amdgcn-amd-amdhsa--" + processor, notes)
        assert re.search(r"amdhsa\.version:\s+-\s+1\s+-\s+2", notes)  # code object v5
        for name in kernels:
            assert f".name:           {name}\n" in notes
            assert f".symbol:         {name}.kd" in notes
        assert set(re.findall(r"\.wavefront_size:\s+(\d+)", notes)) == {str(wave)}

        disassembly = _run([_tool("llvm-objdump", processor), "-d", f"--mcpu={processor}", path])
        assert "<unknown>" not in disassembly
        for name in kernels:
            body = re.search(rf"^[0-9a-f]+ <{re.escape(name)}>:\n((?:\t.*\n)+)", disassembly, re.M)
            assert body, f"{name} not disassembled"
            assert re.search(r"\ts_endpgm\b", body.group(1))


def test_kernels_compiled_in_groups_make_one_code_object(monkeypatch, tmp_path):
    """A module's kernels compiled in several children (codegen_groups) link into one code object with one
    metadata note listing every kernel, each global defined once, and the same bytes for any number of jobs."""
    from fatkit.translate.pipeline import lower, parse, passes
    from fatkit.translate.targets import amdgpu

    text = (SAMPLES / "ptx" / "basics.sm_80.ptx").read_text()
    options = Options(target="gfx942")
    kernels = lower(passes(parse(text, options), options), options).kernels
    monkeypatch.setattr(amdgpu, "_GROUP_IR_BYTES", sum(len(k.llvm_ir) for k in kernels) // 6)
    assert len(amdgpu.codegen_groups(list(kernels))) >= 3

    serial = translate(text, Options(target="gfx942", jobs=1))
    parallel = translate(text, Options(target="gfx942", jobs=2))
    assert serial.product == parallel.product
    assert sorted(k.name for k in parallel.validated.kernels) == sorted(k.signature.name for k in kernels)

    path = tmp_path / "grouped.hsaco"
    path.write_bytes(parallel.product)
    notes = _run([_tool("llvm-readelf", "gfx942"), "--notes", path])
    assert notes.count("NT_AMDGPU_METADATA") == 1
    assert len(re.findall(r"\.symbol:\s+\S+\.kd", notes)) == len(kernels)
    symbols = _run([_tool("llvm-readelf", "gfx942"), "--dyn-symbols", "-W", path])
    defined = [line.split()[-1] for line in symbols.splitlines()
               if re.search(r"\b(OBJECT|FUNC)\b", line) and " UND " not in line]
    assert "weights" in defined and len(defined) == len(set(defined))
    _run([_tool("llvm-objdump", "gfx942"), "-d", "--mcpu=gfx942", path])
