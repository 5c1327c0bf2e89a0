"""`fatkit repack`: the patched copy keeps every original section, segment and symbol, carries a `.fatkit_amd`
bundle the peer tools read, maps its code objects to their PTX, and is written reproducibly and atomically.

Samples: tests/samples/repack/ (repack_app, librepack.so; rebuilt by its build.sh from verification/repack/src).
The ELF checks read both files with pyelftools (not fatkit's reader) and run readelf, cuobjdump,
llvm-objcopy and clang-offload-bundler where they are installed.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from fatkit.cache.key import ptx_hash
from fatkit.errors import FatkitError, FormatError
from fatkit.extract.kernels import describe
from fatkit.extract.scan import scan_path
from fatkit.formats import offload_bundle
from fatkit.repack import output_path, repack_binary
from fatkit.repack.elf_patch import add_section, atomic_output
from fatkit.formats.fatkit_amd import (SECTION_NAME, KernelRecord, Manifest, ModuleRecord, build_payload,
                                   code_object_bundle_id, read_payload)
from tests import oracles
from tests.corpus import corpus_file

SAMPLES = Path(__file__).parent / "samples"
REPACK_SAMPLES = SAMPLES / "repack"
SAMPLE_NAMES = ("repack_app", "librepack.so")
LLVM22 = Path("/usr/lib/llvm-22/bin")
TARGET = "gfx942"
SHF_ALLOC = 0x2
PT_LOAD = 1


def fatkit(*args: str, check: int | None = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "fatkit", *args], capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).parent.parent)
    if check is not None:
        assert proc.returncode == check, proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr + proc.stdout
    return proc


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Both samples repacked once through the CLI (copies of them as inputs), with their hashes before."""
    root = tmp_path_factory.mktemp("repack")
    inputs = root / "in"
    inputs.mkdir()
    for name in SAMPLE_NAMES:
        shutil.copy2(REPACK_SAMPLES / name, inputs / name)
    before = {name: (sha256(inputs / name), os.stat(inputs / name).st_mtime_ns) for name in SAMPLE_NAMES}
    proc = fatkit("repack", *(str(inputs / n) for n in SAMPLE_NAMES), "--target", TARGET, "-o", str(root / "out"),
                  "--cache", str(root / "cache"), "--json")
    report = json.loads(proc.stdout)
    return {"root": root, "inputs": inputs, "out": root / "out", "before": before, "report": report,
            "binaries": {Path(b["source"]).name: b for b in report["binaries"]}}


# --- the guarantees, checked on any (original, patched) pair -------------------------------------------------


def _sections(path: Path) -> list[dict]:
    with open(path, "rb") as f:
        elf = ELFFile(f)
        return [{**dict(s.header), "name": s.name, "data": s.data() if s["sh_type"] != "SHT_NOBITS" else b""}
                for s in elf.iter_sections()]


def _segments(path: Path) -> list[dict]:
    with open(path, "rb") as f:
        return [dict(s.header) for s in ELFFile(f).iter_segments()]


def _symbols_and_dynamic(path: Path) -> dict:
    out = {}
    with open(path, "rb") as f:
        for section in ELFFile(f).iter_sections():
            if isinstance(section, SymbolTableSection):
                out[section.name] = [(s.name, dict(s.entry)) for s in section.iter_symbols()]
            elif isinstance(section, DynamicSection):
                out[section.name] = [dict(t.entry) for t in section.iter_tags()]
    return out


def check_patch(original: Path, patched: Path) -> None:
    """Every guarantee of docs/repack.md that reads the two files (no peer tool)."""
    old, new = original.read_bytes(), patched.read_bytes()
    # the original bytes are a prefix of the copy, except e_shoff (0x28, 8 bytes) and e_shnum (0x3c, 2 bytes)
    changed = [i for i in range(len(old)) if old[i] != new[i]]
    assert set(changed) <= set(range(0x28, 0x30)) | {0x3C, 0x3D}
    before, after = _sections(original), _sections(patched)
    assert len(after) == len(before) + 1
    for a, b in zip(before, after):
        if a["name"] == ".shstrtab":  # the one section that grows: the new name is appended to it
            assert b["data"].startswith(a["data"]) and b["data"][len(a["data"]):] == SECTION_NAME.encode() + b"\0"
            continue
        assert a == b, a["name"]  # name, type, flags, address, offset, size, link, info, alignment, bytes
    added = after[-1]
    assert added["name"] == SECTION_NAME and added["sh_type"] == "SHT_PROGBITS"
    assert added["sh_flags"] & SHF_ALLOC == 0 and added["sh_addr"] == 0
    assert added["sh_offset"] >= len(old)
    segments = _segments(original)
    assert _segments(patched) == segments
    for segment in segments:
        assert segment["p_offset"] + segment["p_filesz"] <= len(old)
    assert _symbols_and_dynamic(patched) == _symbols_and_dynamic(original)
    assert read_payload(added["data"]).modules  # the section holds a manifest fatkit reads back


def check_readelf(patched: Path) -> None:
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("binutils readelf is not installed")
    proc = subprocess.run([readelf, "-a", "-W", str(patched)], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "warning" not in proc.stdout.lower()


def check_cuobjdump(original: Path, patched: Path) -> None:
    tool = oracles.cuobjdump_for(original)
    if tool is None:
        pytest.skip("no cuobjdump reads this file (tests/oracles.py)")
    assert oracles.cuobjdump_listing(tool, patched) == oracles.cuobjdump_listing(tool, original)


def check_bundler(patched: Path, workdir: Path, section: str = SECTION_NAME) -> Manifest:
    objcopy = LLVM22 / "llvm-objcopy"
    if not objcopy.exists() or oracles.offload_bundler() is None:
        pytest.skip("llvm-objcopy-22 or clang-offload-bundler-22 is not installed")
    workdir.mkdir(parents=True, exist_ok=True)
    dumped = workdir / "fatkit_amd.bundle"
    subprocess.run([objcopy, f"--dump-section={section}={dumped}", patched, workdir / "objcopy-output"],
                   check=True, capture_output=True)
    manifest = read_payload(dumped.read_bytes())
    ids = oracles.bundler_list(dumped)
    assert sorted(ids) == sorted([offload_bundle.HOST_BUNDLE_ID, *manifest.code_objects])
    # The bundler matches ids without their environment field, where the PTX hash is: code objects of several
    # modules for one target are told apart by fatkit's reader only (docs/repack.md), the others by both.
    def matched_as(bundle_id: str) -> str:
        return re.sub(r"-ptx[0-9a-f]{64}-", "--", bundle_id)

    alike = Counter(map(matched_as, ids))
    distinct = [bundle_id for bundle_id in ids if alike[matched_as(bundle_id)] == 1]
    unbundled = oracles.bundler_unbundle(dumped, distinct, workdir / "unbundled")
    assert json.loads(unbundled[offload_bundle.HOST_BUNDLE_ID]) == manifest.to_json()
    for bundle_id in distinct:
        if bundle_id != offload_bundle.HOST_BUNDLE_ID:
            assert unbundled[bundle_id] == manifest.code_objects[bundle_id]
    return manifest


def check_inspect_mapping(patched: Path) -> None:
    """fatkit's scan finds `.fatkit_amd` by name and maps every code object to a PTX entry of the binary."""
    (binary,) = scan_path(patched)
    describe(binary, kernels=True, hashes=False)
    assert not binary.errors
    (container,) = [c for c in binary.containers if c.section == SECTION_NAME]
    assert container.found_by[0] == "section" and container.manifest["format"] == "fatkit-amd"
    ptx = {f"c{c.index}.e{e.index}": ptx_hash(e.payload) for c in binary.containers for e in c.entries
           if e.kind == "ptx"}
    code_objects = [e for e in container.entries if e.kind == "hsaco"]
    assert code_objects and [e.kind for e in container.entries].count("manifest") == 1
    records = {m["bundle_id"]: m for m in container.manifest["modules"]}
    for entry in code_objects:
        origin = entry.translated_from
        assert origin is not None and origin["sources"]
        for source in origin["sources"]:
            assert ptx[source] == origin["ptx_blake3"]
        assert entry.arch.split(":")[0] == origin["target"].split(":")[0]
        # the code object holds exactly the kernels the manifest says translated
        translated = {k["name"] for k in records[entry.bundle_id]["kernels"] if k["status"] == "ok"}
        assert {k.name for k in entry.kernels} == translated


# --- the samples -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_patch_keeps_every_original_section_segment_and_symbol(run, name):
    check_patch(run["inputs"] / name, run["out"] / name)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_readelf_reads_the_patched_file_without_warnings(run, name):
    check_readelf(run["out"] / name)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_cuobjdump_lists_the_same_nvidia_entries(run, name):
    check_cuobjdump(run["inputs"] / name, run["out"] / name)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_clang_offload_bundler_reads_the_dumped_section(run, name, tmp_path):
    manifest = check_bundler(run["out"] / name, tmp_path)
    assert manifest.targets == (TARGET,)
    assert all(m.bundle_id == code_object_bundle_id(m.ptx_blake3, TARGET) for m in manifest.modules)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_inspect_maps_the_amd_entries_to_their_ptx(run, name):
    check_inspect_mapping(run["out"] / name)
    text = fatkit("inspect", str(run["out"] / name)).stdout
    assert SECTION_NAME in text and "← PTX c1.e1 (compute_90" in text
    report = json.loads(fatkit("inspect", "--json", str(run["out"] / name)).stdout)
    (container,) = [c for c in report["binaries"][0]["containers"] if c["section"] == SECTION_NAME]
    assert container["manifest"]["modules"] and any("translated_from" in e for e in container["entries"])


def test_json_report_lists_statuses_and_kernels(run):
    app, lib = run["binaries"]["repack_app"], run["binaries"]["librepack.so"]
    assert app["status"] == "repacked" and app["kernels_failed"] == 0 and app["code_objects"] == 1
    assert {k["name"] for m in app["modules"] for k in m["kernels"]} == {"_Z9fill_hashPjjj", "_Z10block_sumsPKjPyj"}
    assert run["report"]["summary"]["repacked"] == 1 and run["report"]["summary"]["partial"] == 1
    assert lib["destination"] == str(run["out"] / "librepack.so") and lib["section"] == SECTION_NAME


def test_a_binary_with_nothing_translatable_fails_with_the_reasons_in_its_section(tmp_path):
    source = REPACK_SAMPLES / "libcluster_only.so"
    proc = fatkit("repack", str(source), "--target", TARGET, "-o", str(tmp_path / "out"), "--json", check=1)
    (binary,) = json.loads(proc.stdout)["binaries"]
    assert binary["status"] == "failed" and binary["code_objects"] == 0 and "only the manifest" in binary["reason"]
    (module,) = binary["modules"]
    assert module["status"] == "failed" and module["bundle_id"] is None
    assert "AMD has no thread-block clusters" in module["kernels"][0]["reason"]
    patched = tmp_path / "out" / source.name
    check_patch(source, patched)
    manifest = check_bundler(patched, tmp_path / "bundle")  # a bundle of the manifest alone
    assert not manifest.code_objects and manifest.modules[0].reason == "none of its kernels translated"


def test_untranslatable_kernels_are_listed_with_their_reason(run):
    lib = run["binaries"]["librepack.so"]
    assert lib["status"] == "partial" and lib["kernels_ok"] == 2 and lib["kernels_failed"] == 1
    (failed,) = [k for m in lib["modules"] for k in m["kernels"] if k["status"] != "ok"]
    assert failed["name"] == "_Z13cluster_ranksPj" and "AMD has no thread-block clusters" in failed["reason"]
    manifest = read_payload(_sections(run["out"] / "librepack.so")[-1]["data"])
    kernels = {k.name: k for m in manifest.modules for k in m.kernels}
    assert kernels["_Z13cluster_ranksPj"].reason == failed["reason"]
    assert kernels["_Z9scale_addPKfPffi"].status == "ok"


def test_inputs_are_not_modified_and_nothing_is_written_elsewhere(run):
    for name, (digest, mtime) in run["before"].items():
        assert sha256(run["inputs"] / name) == digest
        assert os.stat(run["inputs"] / name).st_mtime_ns == mtime
    assert sorted(p.name for p in run["inputs"].iterdir()) == sorted(SAMPLE_NAMES)
    assert sorted(p.name for p in run["out"].iterdir()) == sorted(SAMPLE_NAMES)  # no temporaries left
    for name in SAMPLE_NAMES:
        assert os.stat(run["out"] / name).st_mode == os.stat(run["inputs"] / name).st_mode


def test_same_inputs_give_byte_identical_outputs(run, tmp_path):
    """A second run translating afresh (no cache) writes the same bytes."""
    fatkit("repack", *(str(run["inputs"] / n) for n in SAMPLE_NAMES), "--target", TARGET, "-o", str(tmp_path))
    for name in SAMPLE_NAMES:
        assert (tmp_path / name).read_bytes() == (run["out"] / name).read_bytes()


def test_a_given_cache_is_reused(run, tmp_path):
    result = repack_binary(run["inputs"] / "repack_app", tmp_path / "repack_app", [TARGET], run["root"] / "cache")
    assert result.cached == 1 and [m.status for m in result.modules] == ["translated"]
    assert result.to_json()["modules"][0]["kernels"] == run["binaries"]["repack_app"]["modules"][0]["kernels"]


def test_several_targets_give_one_code_object_each(run, tmp_path):
    result = repack_binary(run["inputs"] / "repack_app", tmp_path / "repack_app", ["gfx1100", TARGET],
                           run["root"] / "cache")
    assert result.status == "repacked"
    assert [m.target for m in result.modules] == ["gfx1100", TARGET]
    manifest = read_payload(_sections(tmp_path / "repack_app")[-1]["data"])
    archs = {bundle_id.rsplit("-", 1)[1] for bundle_id in manifest.code_objects}
    assert archs == {"gfx1100", TARGET}
    check_patch(run["inputs"] / "repack_app", tmp_path / "repack_app")


def test_a_binary_without_ptx_is_copied_unchanged(tmp_path):
    source = SAMPLES / "amd_hip_exe"
    result = repack_binary(source, tmp_path / "amd_hip_exe", [TARGET])
    assert result.status == "no-ptx" and not result.modules
    assert (tmp_path / "amd_hip_exe").read_bytes() == source.read_bytes()
    assert os.stat(tmp_path / "amd_hip_exe").st_mode == os.stat(source).st_mode


@pytest.mark.parametrize("sample, why", [
    ("nv_kern.o", "not an ELF executable or shared library"),
    ("nv_kern_sm90.ptx", "not an ELF executable or shared library"),
    ("nv_noshdr", "no section header table"),
])
def test_inputs_it_cannot_patch_are_errors_and_write_nothing(sample, why, tmp_path):
    result = repack_binary(SAMPLES / sample, tmp_path / sample, [TARGET])
    assert result.status == "error" and why in result.reason and result.destination is None
    assert list(tmp_path.iterdir()) == []


def test_a_repacked_binary_is_not_repacked_again(run, tmp_path):
    result = repack_binary(run["out"] / "repack_app", tmp_path / "repack_app", [TARGET], run["root"] / "cache")
    assert result.status == "error" and "already holds a .fatkit_amd section" in result.reason
    with pytest.raises(FatkitError, match="already has one"):
        add_section(run["out"] / "repack_app", tmp_path / "x", SECTION_NAME, b"data")


def test_cli_exit_status_and_errors(run, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a binary\n")
    proc = fatkit("repack", str(text), str(run["inputs"] / "repack_app"), "--target", TARGET, "-o",
                  str(tmp_path / "out"), "--cache", str(run["root"] / "cache"), check=1)
    assert "not an ELF executable or shared library" in proc.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["repack_app"]


def test_same_output_name_twice_is_an_error_not_an_overwrite(run, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy2(SAMPLES / "amd_hip_exe", other / "repack_app")
    proc = fatkit("repack", str(run["inputs"] / "repack_app"), str(other / "repack_app"), "--target", TARGET,
                  "-o", str(tmp_path / "out"), "--cache", str(run["root"] / "cache"), "--json", check=1)
    statuses = [b["status"] for b in json.loads(proc.stdout)["binaries"]]
    assert statuses == ["repacked", "error"]
    check_patch(run["inputs"] / "repack_app", tmp_path / "out" / "repack_app")  # the first one's, intact


def test_a_directory_keeps_its_layout_under_the_output(run, tmp_path):
    tree = tmp_path / "tree"
    (tree / "lib").mkdir(parents=True)
    shutil.copy2(run["inputs"] / "librepack.so", tree / "lib" / "librepack.so")
    (tree / "README").write_text("not an ELF: not repacked\n")
    proc = fatkit("repack", str(tree), "--target", TARGET, "-o", str(tmp_path / "out"), "--cache",
                  str(run["root"] / "cache"), "--json")
    (binary,) = json.loads(proc.stdout)["binaries"]
    assert binary["destination"] == str(tmp_path / "out" / "tree" / "lib" / "librepack.so")
    assert sorted(p.name for p in (tmp_path / "out" / "tree").rglob("*")) == ["lib", "librepack.so"]
    check_patch(run["inputs"] / "librepack.so", tmp_path / "out" / "tree" / "lib" / "librepack.so")


@pytest.mark.parametrize("name", ["../escape", "/abs/path", "a/../../b", "", ".", "bad\nname", "back\\slash"])
def test_output_names_cannot_leave_the_output_directory(name, tmp_path):
    with pytest.raises(FatkitError):
        output_path(tmp_path, name)


def test_output_names_through_a_symlink_out_of_the_directory_are_refused(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out" / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FatkitError, match="leads outside"):
        output_path(tmp_path / "out", "link/lib.so")
    assert output_path(tmp_path / "out", "pkg/lib.so") == (tmp_path / "out" / "pkg" / "lib.so").resolve()


# --- atomic writes ----------------------------------------------------------------------------------------


def test_an_error_mid_write_leaves_no_output(tmp_path):
    destination = tmp_path / "lib.so"
    with pytest.raises(RuntimeError):
        with atomic_output(destination) as out:
            out.write(b"partial")
            raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def test_a_kill_mid_write_leaves_nothing_under_the_final_name(tmp_path):
    destination = tmp_path / "lib.so"
    script = (f"import os, signal\nfrom fatkit.repack.elf_patch import atomic_output\n"
              f"with atomic_output({str(destination)!r}) as out:\n"
              f"    out.write(b'x' * 65536)\n    out.flush()\n    os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).parent.parent)
    assert proc.returncode == -9
    assert not destination.exists()
    assert all(p.name.startswith(".lib.so.") and p.name.endswith(".fatkit-tmp") for p in tmp_path.iterdir())


# --- the section payload ----------------------------------------------------------------------------------


def _manifest(code_objects: int = 2) -> Manifest:
    modules, objects = [], {}
    for i in range(code_objects):
        ptx = f"{i:064x}"
        bundle_id = code_object_bundle_id(ptx, "gfx942")
        objects[bundle_id] = bytes([i]) * (100 + i)
        kernels = (KernelRecord("k", "ok"), KernelRecord("bad", "unsupported", "why"))
        modules.append(ModuleRecord(ptx, "gfx942", "translated", bundle_id, "compute_90", (f"c{i}.e1",),
                                    (f"{i + 100:064x}",), None, kernels))
    modules.append(ModuleRecord("f" * 64, "gfx942", "failed", None, "compute_80", ("c9.e1",), (),
                                "no candidate parses", ()))
    return Manifest("1.0", "abc", ("gfx942",), tuple(modules), objects)


@pytest.mark.parametrize("compress", [True, False])
def test_payload_round_trips(compress):
    manifest = _manifest()
    data = build_payload(manifest, compress=compress)
    assert data.startswith(offload_bundle.CCOB_MAGIC if compress else offload_bundle.BUNDLE_MAGIC)
    assert read_payload(data) == manifest
    assert build_payload(manifest, compress=compress) == data
    assert manifest.find(f"{101:064x}", "gfx942").ptx_blake3 == f"{1:064x}"  # served through an alternative
    assert manifest.find("f" * 64, "gfx942") is None


def _bundle_with(document: bytes, extra: list[tuple[str, bytes]] = ()) -> bytes:
    return offload_bundle.build_bundle([(offload_bundle.HOST_BUNDLE_ID, document), *extra])


@pytest.mark.parametrize("data, message", [
    (b"", "neither an offload bundle nor a CCOB"),
    (b"\x7fELF" + bytes(60), "neither an offload bundle nor a CCOB"),
    (offload_bundle.build_bundle([("hipv4-amdgcn-amd-amdhsa--gfx942", b"x")]), "no manifest"),
    (_bundle_with(b"\xff\xfe"), "not JSON"),
    (_bundle_with(b"[" * 100000 + b"]" * 100000), "not JSON"),
    (_bundle_with(b'{"format": "other"}'), "not a fatkit-amd document"),
    (_bundle_with(b'{"format": "fatkit-amd", "version": 2}'), "version 2"),
    (_bundle_with(b'{"format": "fatkit-amd", "version": 1, "modules": {}}'), "modules is missing"),
    (_bundle_with(b'{"format": "fatkit-amd", "version": 1, "modules": [1]}'), "modules[0] is not an object"),
    (_bundle_with(b'{"format": "fatkit-amd", "version": 1, "modules": [{"ptx_blake3": "zz"}]}'), "malformed"),
])
def test_malformed_payloads_are_format_errors(data, message):
    with pytest.raises(FormatError) as caught:
        read_payload(data)
    assert message in str(caught.value)


def test_payload_entries_and_records_must_agree():
    manifest = _manifest()
    document = json.dumps(manifest.to_json()).encode()
    objects = sorted(manifest.code_objects.items())
    with pytest.raises(FormatError, match="which the bundle does not hold"):
        read_payload(_bundle_with(document, objects[:1]))
    stray = [*objects, ("hipv4-amdgcn-amd-amdhsa--gfx1100", b"x")]
    with pytest.raises(FormatError, match="is in no module record"):
        read_payload(_bundle_with(document, stray))
    with pytest.raises(FormatError, match="bytes follow the compressed bundle"):
        read_payload(build_payload(manifest) + b"\0")
    with pytest.raises(FatkitError, match="differ"):
        build_payload(Manifest("1", "t", ("gfx942",), manifest.modules, {}))


def test_mutated_payloads_raise_only_format_errors():
    """The fuzzer's contract, in small: any bytes give a Manifest or a FatkitError, never another exception."""
    rng = random.Random(8)
    for compress in (False, True):
        data = build_payload(_manifest(), compress=compress)
        for _ in range(300):
            mutated = bytearray(data)
            for _ in range(rng.randint(1, 8)):
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            cut = rng.choice([len(mutated), rng.randrange(len(mutated))])
            try:
                read_payload(bytes(mutated[:cut]))
            except FatkitError:
                pass


# --- real binaries ----------------------------------------------------------------------------------------


# a jax plugin (one PTX module) and torchaudio's library (three modules, sm_120 PTX)
CORPUS_BINARIES = {"jax_cuda12_plugin/_prng.so": 1, "torchaudio/lib/libtorchaudio.so": 3}


@pytest.fixture(scope="module", params=sorted(CORPUS_BINARIES))
def corpus_repack(request, tmp_path_factory):
    source = corpus_file(request.param)
    out = tmp_path_factory.mktemp("corpus-repack")
    result = repack_binary(source, out / source.name, [TARGET])
    return source, out / source.name, result


@pytest.mark.corpus
def test_corpus_binary_keeps_every_guarantee(corpus_repack, tmp_path):
    source, patched, result = corpus_repack
    expected = next(count for name, count in CORPUS_BINARIES.items() if source.as_posix().endswith(name))
    assert result.status == "repacked" and result.code_objects == expected
    check_patch(source, patched)
    check_readelf(patched)
    check_cuobjdump(source, patched)
    check_bundler(patched, tmp_path)
    check_inspect_mapping(patched)


@pytest.mark.corpus
def test_corpus_binary_is_reproducible(corpus_repack, tmp_path):
    source, patched, _ = corpus_repack
    again = repack_binary(source, tmp_path / source.name, [TARGET])
    assert again.status == "repacked"
    assert (tmp_path / source.name).read_bytes() == patched.read_bytes()
