"""fatkit on every real (non-BIG) corpus binary, against the peer tools of tests/oracles.py.

NVIDIA: the (kind, arch) multiset `cuobjdump -all -lelf -lptx` lists, and the bytes `-xptx/-xelf all` write,
must be found by fatkit too; in `.nv_fatbin`/`__nv_relfatbin` (the sections cuobjdump reads) exactly those,
elsewhere fatkit may find more. cuobjdump 13.x is the peer where it reads the file, 12.8 where 13.x fails.
AMD: each bundle's ids agree with `clang-offload-bundler --list` and its code objects with `--unbundle`.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import blake3
import pytest
from elftools.elf.elffile import ELFFile

from fatkit.extract.model import Binary, Container
from tests import oracles
from tests.corpus import CORPUS_DIR, corpus_file
from tests.helpers import non_big_corpus_files

pytestmark = pytest.mark.corpus

CUOBJDUMP_SECTIONS = (".nv_fatbin", "__nv_relfatbin")  # what cuobjdump -all reads; fatbins elsewhere it misses
AMD_FORMATS = ("offload-bundle", "ccob")
BUNDLE_STARTS = (b"__CLANG_OFFLOAD_BUNDLE__", b"CCOB")
HIP_FATBIN_ALIGN = 4096


def _param_id(path: Path) -> str:
    try:
        return path.relative_to(CORPUS_DIR).as_posix()
    except ValueError:
        return path.as_posix()


CORPUS = [pytest.param(path, id=_param_id(path)) for path in non_big_corpus_files()]


@functools.cache
def _scan(path: Path) -> Binary:
    from fatkit.extract.scan import scan_path

    binaries = list(scan_path(path))
    assert len(binaries) == 1, f"one file, one Binary; got {[b.path for b in binaries]}"
    return binaries[0]


def _nvidia(binary: Binary) -> list[Container]:
    return [c for c in binary.containers if c.vendor == "nvidia"]


def _peer(path: Path) -> Path:
    """The cuobjdump to compare with, or skip (none installed, or none reads the file)."""
    tools = [t for t in (oracles.cuobjdump13(), oracles.cuobjdump12()) if t is not None]
    if not tools:
        pytest.skip("no cuobjdump (pip install nvidia-cuda-cuobjdump; triton 3.6 wheel for 12.8)")
    tool = oracles.cuobjdump_for(path)
    if tool is None:
        pytest.skip("no cuobjdump reads this file: "
                    + "; ".join(f"{t.name}: {oracles.cuobjdump_failure(t, path)}" for t in tools))
    return tool


def _as_peer_says(arch: str, tool: Path) -> str:
    """cuobjdump 12.8 predates family targets and prints sm_100f as sm_100."""
    return arch[:-1] if tool != oracles.cuobjdump13() and arch.endswith("f") else arch


def _missing(theirs: Counter, ours: Counter) -> dict:
    return dict(theirs - ours)


@pytest.mark.parametrize("path", CORPUS)
def test_scans_without_errors(path: Path) -> None:
    binary = _scan(path)
    assert [str(e) for e in binary.errors] == []
    assert [(e.kind, e.arch, e.error) for e in binary.entries if e.error is not None] == []


@pytest.mark.parametrize("path", CORPUS)
def test_entries_match_cuobjdump_listing(path: Path) -> None:
    tool = _peer(path)
    theirs = Counter(oracles.cuobjdump_listing(tool, path))
    containers = _nvidia(_scan(path))
    ours = Counter((e.kind, _as_peer_says(e.arch, tool)) for c in containers for e in c.entries
                   if e.kind in ("elf", "ptx"))
    ours_where_they_look = Counter((e.kind, _as_peer_says(e.arch, tool)) for c in containers for e in c.entries
                                   if e.kind in ("elf", "ptx") and c.section in CUOBJDUMP_SECTIONS)
    assert _missing(theirs, ours) == {}, f"{tool.name} lists entries fatkit does not report"
    assert ours_where_they_look == theirs, (
        f"in {CUOBJDUMP_SECTIONS} fatkit should report exactly what {tool.name} lists: "
        f"fatkit only {dict(ours_where_they_look - theirs)}, {tool.name} only {dict(theirs - ours_where_they_look)}")


@pytest.mark.parametrize("path", CORPUS)
def test_payloads_match_cuobjdump_extraction(path: Path, tmp_path: Path) -> None:
    from fatkit.extract.kernels import describe

    tool = _peer(path)
    binary = _scan(path)
    describe(binary, kernels=False, hashes=True)
    containers = _nvidia(binary)
    for kind in ("ptx", "elf"):
        theirs = Counter(blake3.blake3(f.read_bytes()).hexdigest()
                         for f in oracles.cuobjdump_extract(tool, path, tmp_path / kind, kind))
        ours = Counter(e.hash for c in containers for e in c.entries if e.kind == kind)
        ours_where_they_look = Counter(e.hash for c in containers for e in c.entries
                                       if e.kind == kind and c.section in CUOBJDUMP_SECTIONS)
        assert len(theirs - ours) == 0, (
            f"{sum((theirs - ours).values())} of {sum(theirs.values())} {kind} files extracted by {tool.name} "
            f"have no byte-identical fatkit payload")
        assert ours_where_they_look == theirs, (
            f"{kind} payloads in {CUOBJDUMP_SECTIONS}: fatkit has {sum(ours_where_they_look.values())}, "
            f"{tool.name} extracted {sum(theirs.values())}; {sum((theirs - ours_where_they_look).values())} of "
            f"theirs unmatched, {sum((ours_where_they_look - theirs).values())} of ours extra")


def _hip_fatbin_bundle_offsets(path: Path) -> list[int]:
    """File offsets of the bundles in `.hip_fatbin` (each TU's bundle starts on a 4096 boundary)."""
    with open(path, "rb") as f:
        if f.read(4) != b"\x7fELF":
            return []
        f.seek(0)
        section = ELFFile(f).get_section_by_name(".hip_fatbin")
        if section is None:
            return []
        data, base = section.data(), section["sh_offset"]
    return [base + at for at in range(0, len(data), HIP_FATBIN_ALIGN) if data[at:at + 24].startswith(BUNDLE_STARTS)]


@pytest.mark.parametrize("path", CORPUS)
def test_amd_bundles_match_offload_bundler(path: Path, tmp_path: Path) -> None:
    binary = _scan(path)
    bundles = [c for c in binary.containers if c.format in AMD_FORMATS]
    expected = _hip_fatbin_bundle_offsets(path)
    assert sorted(c.offset for c in bundles if c.section == ".hip_fatbin") == expected, (
        "every bundle in .hip_fatbin must be reported as a container at its offset")
    if not bundles:
        return
    if oracles.offload_bundler() is None:
        pytest.skip("no clang-offload-bundler (apt-get install clang-tools-22)")
    with open(path, "rb") as f:
        content = f.read()
    for container in bundles:
        bundle_file = tmp_path / f"container{container.index}.{container.format}"
        bundle_file.write_bytes(content[container.offset:container.offset + container.size])
        theirs = oracles.bundler_list(bundle_file)
        assert sorted(e.bundle_id for e in container.entries) == sorted(theirs), (
            f"container {container.index} at {container.offset:#x}")
        device_ids = [i for i in theirs if not i.startswith("host-")]
        unbundled = oracles.bundler_unbundle(bundle_file, device_ids, tmp_path / f"unbundled{container.index}")
        ours = {e.bundle_id: e for e in container.entries}
        differing = [i for i in device_ids if ours[i].payload != unbundled[i]]
        assert differing == [], f"container {container.index}: payloads differ from clang-offload-bundler's"


def test_xpu_library_is_sycl_not_nvidia_or_amd() -> None:
    path = corpus_file("bitsandbytes/libbitsandbytes_xpu2026.so")
    binary = _scan(path)
    assert [(c.format, c.section) for c in binary.containers] == []
    assert binary.errors == []
    assert binary.verdict.amd == "none"
    assert any("sycl" in note.lower() for note in binary.notes), binary.notes


@pytest.mark.parametrize("path", CORPUS)
def test_inspect_json_cli(path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "fatkit", "inspect", "--json", str(path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    [binary] = report["binaries"]
    assert binary["path"] == str(path)
    assert binary["errors"] == []
    assert {"amd", "reason"} <= binary["verdict"].keys()
    scanned = _scan(path)
    assert len(binary["containers"]) == len(scanned.containers)
    for container, model in zip(binary["containers"], scanned.containers):
        assert container["found_by"] == model.found_by and container["found_by"]
        assert container["section"] == model.section
        assert [(e["kind"], e["arch"], e["compression"]) for e in container["entries"]] == [
            (e.kind, e.arch, e.compression) for e in model.entries]
