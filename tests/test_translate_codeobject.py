"""Structural checks of produced AMD code objects with LLVM's own tools, per processor family.

Every code object must decode with LLVM 19's `llvm-readelf --notes` and `llvm-objdump -d` (the oldest LLVM
whose tools ROCm users have), not only with fatkit's reader and the LLVM 22 that wrote it. LLVM 19 does not
know gfx950 (added in LLVM 20); that processor is checked with LLVM 22's tools.
"""

from __future__ import annotations

import math
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
    """A module's kernels compiled in several children (codegen groups) link into one code object with one
    metadata note listing every kernel, each global defined once, and the same bytes for any number of jobs,
    whichever group's codegen ends first (groups started while others lower, or after lowering)."""
    import threading

    from fatkit.translate.pipeline import finish, run
    from fatkit.translate.targets import amdgpu

    text = (SAMPLES / "ptx" / "basics.sm_80.ptx").read_text()
    options = Options(target="gfx942")
    kernels = run(text, options, until="lower").kernels
    assert len(amdgpu.grouped(list(kernels))) == 1
    monkeypatch.setattr(amdgpu, "_GROUP_STATEMENTS", 300)
    kernels = run(text, options, until="lower").kernels
    assert len(amdgpu.grouped(list(kernels))) >= 3

    serial = translate(text, Options(target="gfx942", jobs=1))
    objects = amdgpu.AmdgpuTarget._objects
    count = len(amdgpu.grouped(list(kernels)))
    ends: list[list[int]] = []
    ended = threading.Condition()

    def objects_of(self, group, opt_level, failed):
        # the group `last` waits for every other group of the run to end (jobs = groups: none waits for it)
        compiled = objects(self, group, opt_level, failed)
        with ended:
            if group[0].group == last:
                assert ended.wait_for(lambda: len(ends[-1]) == count - 1, timeout=120)
            ends[-1].append(group[0].group)
            ended.notify_all()
        return compiled

    monkeypatch.setattr(amdgpu.AmdgpuTarget, "_objects", objects_of)
    products = set()
    for last in (0, count - 1):
        ends.append([])
        products.add(translate(text, Options(target="gfx942", jobs=count)).product)
    assert [order[-1] for order in ends] == [0, count - 1]
    monkeypatch.setattr(amdgpu.AmdgpuTarget, "_objects", objects)
    products.add(finish(run(text, options, until="lower"), Options(target="gfx942", jobs=2)).product)
    assert products == {serial.product}
    parallel = translate(text, Options(target="gfx942", jobs=2))
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


# s_sleep_var exists from gfx12 on: on gfx942 and gfx1100 LLVM 22 selects it and then finds no encoding,
# aborting in MCInstrInfo::get (the assertion seen on cub kernels); an abort of the codegen child, not a
# Python error, is what isolation must survive.
_ABORTING_KERNEL = """target triple = "amdgcn-amd-amdhsa"
declare void @llvm.amdgcn.s.sleep.var(i32)
define amdgpu_kernel void @"{name}"(i32 %cycles) {{
  call void @llvm.amdgcn.s.sleep.var(i32 %cycles)
  ret void
}}
"""


@pytest.mark.parametrize("processor", ["gfx942", "gfx1100"])
def test_a_kernel_llvm_aborts_on_is_reported_and_the_rest_of_its_group_links(processor, monkeypatch):
    """One kernel whose codegen aborts LLVM, in a group with seven or eight others: the group is halved until
    that kernel is compiled alone; it is reported unsupported with LLVM's assertion, the others are in the
    code object."""
    import dataclasses

    from fatkit.translate.pipeline import codegen, lower, parse, passes, validate
    from fatkit.translate.targets import amdgpu

    # the assertion is llvmlite's LLVM's (built with assertions); a release libLLVM (FATKIT_LIBLLVM) crashes
    # on that IR instead, which is reported the same way with the signal only
    monkeypatch.delenv("FATKIT_LIBLLVM", raising=False)
    options = Options(target=processor)
    lowered = lower(passes(parse((SAMPLES / "ptx" / "basics.sm_80.ptx").read_text(), options), options), options)
    assert len(amdgpu.grouped(list(lowered.kernels))) == 1 and len(lowered.kernels) >= 8
    victim = lowered.kernels[5].signature.name
    kernels = tuple(dataclasses.replace(k, llvm_ir=_ABORTING_KERNEL.format(name=victim))
                    if k.signature.name == victim else k for k in lowered.kernels)
    emitted: list[list[str]] = []
    emit = amdgpu.AmdgpuTarget.emit

    def recording_emit(self, group, opt_level, kind):
        emitted.append([k.signature.name for k in group])
        return emit(self, group, opt_level, kind)

    monkeypatch.setattr(amdgpu.AmdgpuTarget, "emit", recording_emit)
    translation = validate(codegen(dataclasses.replace(lowered, kernels=kernels), options), options)

    reports = {r.name: r for r in translation.kernels}
    assert reports[victim].status == "unsupported"
    assert reports[victim].reason.startswith("LLVM codegen failed: ")
    assert "MCInstrInfo.h:91" in reports[victim].reason and "Invalid opcode" in reports[victim].reason
    assert reports[victim].reason.endswith("(SIGABRT)")
    survivors = sorted(k.signature.name for k in lowered.kernels if k.signature.name != victim)
    assert sorted(n for n, r in reports.items() if r.status == "ok") == survivors
    assert sorted(k.name for k in parse_code_object(translation.product).kernels) == survivors
    assert [victim] in emitted  # halving: the whole group, then two halves per level down to the victim
    assert len(emitted) <= 1 + 2 * math.ceil(math.log2(len(kernels)))


def test_a_forked_codegen_child_answers_ends_with_its_pipe_and_dies_alone(monkeypatch):
    """The codegen child forked from this process (`_CodegenChild(forked=True)`, what a run with one thread
    starts) compiles a request as a started one does; it ends when its request pipe closes although a second
    forked child, which had this process's descriptors, lives on; an LLVM abort ends the second alone, with
    LLVM's assertion in what it wrote."""
    import signal
    import time

    from fatkit.translate.targets import amdgpu
    from fatkit.translate.targets.amdgpu_child import request

    monkeypatch.delenv("FATKIT_LIBLLVM", raising=False)  # (the assertion is llvmlite's LLVM's, as above)
    first, second = amdgpu._CodegenChild(forked=True), amdgpu._CodegenChild(forked=True)
    try:
        plain = 'target triple = "amdgcn-amd-amdhsa"\ndefine amdgpu_kernel void @k() {\n  ret void\n}\n'
        assert first.compile(request("gfx942", 2, "obj", [plain])).startswith(b"\x7fELF")
        first.requests.close()
        deadline = time.monotonic() + 10
        while first.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert first.process.returncode == 0 and second.alive
        with pytest.raises(amdgpu._ChildFailed) as failed:
            second.compile(request("gfx942", 2, "obj", [_ABORTING_KERNEL.format(name="k")]))
        assert failed.value.returncode == -signal.SIGABRT and "MCInstrInfo.h" in failed.value.stderr
    finally:
        for child in (first, second):
            child.process.kill()
            child.process.wait()
            child.log.close()


def test_a_module_whose_every_kernel_llvm_aborts_on_fails_naming_them(monkeypatch):
    monkeypatch.delenv("FATKIT_LIBLLVM", raising=False)  # (the assertion is llvmlite's LLVM's, as above)
    from fatkit.errors import FatkitError
    from fatkit.translate.targets.amdgpu import AmdgpuTarget
    from fatkit.translate.targets.base import KernelSignature, LoweredKernel

    kernels = [LoweredKernel(KernelSignature(name, (), 0), _ABORTING_KERNEL.format(name=name)) for name in "ab"]
    with pytest.raises(FatkitError, match=r"failed on every kernel: a: .*MCInstrInfo.*; b: "):
        AmdgpuTarget("gfx942").codegen(kernels, 2)
