"""`fatkit translate` as a user runs it: code objects per module and target, JSON keys, --dump-after, --strict."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from fatkit.formats.hsaco import parse_code_object
from tests.helpers import SAMPLE_KERNELS, sample
from tests.test_cli import fatkit
from tests.ptxframes import entry

SAMPLES = Path(__file__).parent / "samples"
SAMPLE_PTX = SAMPLES / "nv_kern_sm90.ptx"
HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"
GOOD = "\n" + entry("good", "u64 out", ".b32 %r<2>, .b64 %rd<2>", """
    mov.u32 %r1, %tid.x;
    st.global.u32 [%rd1], %r1;
    ret;
""")
TENSOR_MEMORY = """
.visible .entry waits()
{
    tcgen05.fence::before_thread_sync;
    ret;
}
"""


def translate_json(*args: str, check: int = 0) -> dict:
    return json.loads(fatkit("translate", "--json", *args, check=check).stdout)


@pytest.fixture
def mixed(tmp_path) -> Path:
    """One kernel that lowers and one that waits on async copies (outside what the translator supports)."""
    path = tmp_path / "mixed.ptx"
    path.write_text(HEADER + GOOD + TENSOR_MEMORY)
    return path


@pytest.fixture
def only_unsupported(tmp_path) -> Path:
    path = tmp_path / "async_only.ptx"
    path.write_text(HEADER + TENSOR_MEMORY)
    return path


def test_ptx_file_gives_one_code_object_per_target(tmp_path):
    out = tmp_path / "out"
    report = translate_json(str(SAMPLE_PTX), "--target", "gfx942,gfx1100", "-o", str(out))
    modules = report["modules"]
    assert [m["target"] for m in modules] == ["gfx942", "gfx1100"]
    for module, wave in zip(modules, (64, 32)):
        assert module["source"] == str(SAMPLE_PTX)
        assert module["ptx_sha256"] == hashlib.sha256(SAMPLE_PTX.read_bytes()).hexdigest()
        assert Path(module["output"]) == (out / f"nv_kern_sm90.{module['target']}.hsaco").resolve()
        assert {k["name"] for k in module["kernels"]} == SAMPLE_KERNELS
        assert all(k["status"] == "ok" and k["reason"] is None for k in module["kernels"])
        code_object = parse_code_object(Path(module["output"]).read_bytes())
        assert code_object.processor == module["target"]
        assert {k.name for k in code_object.kernels} == SAMPLE_KERNELS
        assert {k.wavefront_size for k in code_object.kernels} == {wave}


def test_binary_ptx_entries_are_named_like_extract(tmp_path):
    binary = sample("nv_mode_none")
    report = translate_json(str(binary), "--target", "gfx942", "-o", str(tmp_path))
    (module,) = report["modules"]  # its one PTX entry: container 1, entry 2, compute_90
    assert module["source"] == str(binary)
    assert Path(module["output"]).name == "nv_mode_none.c1.e2.compute_90.gfx942.hsaco"
    names = {k.name for k in parse_code_object(Path(module["output"]).read_bytes()).kernels}
    assert names == {k["name"] for k in module["kernels"]} and names


def test_unsupported_kernel_is_reported_and_the_rest_written(tmp_path, mixed):
    (module,) = translate_json(str(mixed), "--target", "gfx1100", "-o", str(tmp_path))["modules"]
    kernels = {k["name"]: k for k in module["kernels"]}
    assert kernels["good"]["status"] == "ok"
    assert kernels["waits"]["status"] == "unsupported"
    assert "tcgen05.fence" in kernels["waits"]["reason"] and kernels["waits"]["line"] == 17
    assert [k.name for k in parse_code_object(Path(module["output"]).read_bytes()).kernels] == ["good"]


def test_all_unsupported_module_is_reported_without_output(tmp_path, only_unsupported):
    (module,) = translate_json(str(only_unsupported), "--target", "gfx942", "-o", str(tmp_path))["modules"]
    assert module["output"] is None
    assert [k["status"] for k in module["kernels"]] == ["unsupported"]
    assert list(tmp_path.glob("*.hsaco")) == []


def test_strict_exits_1_with_the_reason(tmp_path, mixed):
    proc = fatkit("translate", str(mixed), "--target", "gfx942", "-o", str(tmp_path), "--strict", check=1)
    assert "tcgen05.fence" in proc.stdout
    fatkit("translate", str(SAMPLE_PTX), "--target", "gfx942", "-o", str(tmp_path), "--strict", check=0)


def test_human_output_lists_modules_and_reasons(tmp_path, mixed):
    proc = fatkit("translate", str(mixed), "--target", "gfx942", "-o", str(tmp_path))
    assert "mixed.gfx942.hsaco" in proc.stdout
    assert "unsupported" in proc.stdout and "tcgen05.fence" in proc.stdout


def test_dump_after_prints_the_stage_and_writes_nothing(tmp_path, mixed):
    out = tmp_path / "out"
    parsed = fatkit("translate", str(mixed), "--target", "gfx942", "--dump-after", "parse").stdout
    assert ".visible .entry good" in parsed and "tcgen05.fence" in parsed
    lowered = fatkit("translate", str(mixed), "--target", "gfx942,gfx1100", "-o", str(out),
                     "--dump-after", "lower").stdout
    assert lowered.count('target triple = "amdgcn-amd-amdhsa"') == 2  # the good kernel, once per target
    assert "unsupported: waits: line 17" in lowered
    validated = fatkit("translate", str(mixed), "--target", "gfx1100", "--dump-after", "validate").stdout
    assert "good:" in validated and "wave32" in validated
    assert not out.exists()


def test_bad_options_are_usage_errors(tmp_path):
    fatkit("translate", str(SAMPLE_PTX), "--target", "vulkan", "-o", str(tmp_path), check=2)
    fatkit("translate", str(SAMPLE_PTX), "--target", "gfx942", "--dump-after", "nope", check=2)
    fatkit("translate", str(SAMPLE_PTX), "--target", "gfx942", check=2)  # neither -o nor --dump-after


def test_emit_writes_objects_assembly_and_llvm_ir(tmp_path):
    from llvmlite import binding as llvm

    from fatkit.formats.elf import ET_REL, ElfView
    from fatkit.formats.hsaco import EM_AMDGPU

    outputs = {}
    for kind in ("obj", "asm", "llvm"):
        report = translate_json(str(SAMPLE_PTX), "--target", "gfx1100", "-o", str(tmp_path), "--emit", kind)
        (module,) = report["modules"]
        outputs[kind] = Path(module["output"])
        assert outputs[kind].name == f"nv_kern_sm90.gfx1100.{ {'obj': 'o', 'asm': 's', 'llvm': 'll'}[kind] }"
    relocatable = ElfView(outputs["obj"].read_bytes())
    assert relocatable.e_type == ET_REL and relocatable.e_machine == EM_AMDGPU
    assembly = outputs["asm"].read_text()
    assert '.amdgcn_target "amdgcn-amd-amdhsa--gfx1100"' in assembly
    ir = llvm.parse_assembly(outputs["llvm"].read_text())
    kernels = {f.name for f in ir.functions if not f.is_declaration}
    for name in SAMPLE_KERNELS:
        assert f"\n{name}:" in assembly
        assert name in kernels
    assert fatkit("translate", str(SAMPLE_PTX), "--target", "gfx1100", "-o", str(tmp_path), "--emit", "exe",
                  check=2).returncode == 2


def test_unsupported_reasons_are_grouped_without_kernel_and_line():
    from fatkit.cli.render import grouped_reasons

    reasons = ["_Z1av: line 12: ldmatrix.x4: instruction not supported yet",
               "_Z1bv: line 907: ldmatrix.x4: instruction not supported yet",
               "k: line 3: call.uni: malloc: device-side malloc needs a device heap"]
    assert grouped_reasons(reasons) == [("ldmatrix.x4: instruction not supported yet", 2),
                                        ("call.uni: malloc: device-side malloc needs a device heap", 1)]


def test_mma_numerics_flag(tmp_path):
    """--mma-numerics takes sm90, exact and native; anything else is refused with the choices (translate and
    precompile alike)."""
    source = tmp_path / "k.ptx"
    source.write_text(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n    ret;\n}\n")
    for numerics in ("exact", "native"):
        out = tmp_path / f"out-{numerics}"
        fatkit("translate", "--target", "gfx942", "--mma-numerics", numerics, "-o", str(out), str(source))
        assert out.is_dir() and any(out.iterdir())
    for command in (["translate", "-o", str(tmp_path / "o2")], ["precompile", "--cache", str(tmp_path / "c")]):
        refused = fatkit(*command, "--target", "gfx942", "--mma-numerics", "sm80", str(source), check=2)
        assert "sm90, exact, native" in refused.stderr
