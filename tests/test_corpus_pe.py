"""The four Windows DLLs of bitsandbytes 0.50.2 (`fetch.py --tsv ../shared/corpus/windows.tsv`) against lief and
against the Linux `.so` files of the same release.

NVIDIA's Linux cuobjdump does not read PE files ("does not contain device code"), so the peers are lief (sections,
imports, relocations) and the ELF builds of the same library version, which fatkit reads through its ELF path
(itself checked against cuobjdump in test_corpus.py).

What the DLL and the `.so` have in common, measured on these files:
- the same 7 fatbins in the same order (6 in `__nv_relfatbin`/`__nv_rel` from `-rdc` TUs, one device-linked
  image in `.nv_fatbin`/`.nv_fatb` with a version-2 wrapper), the same (kind, arch) entries in each;
- PTX with the same kernels in every module. Byte-identical PTX: the first module of the CUDA 13 build (no
  kernels, 56 bytes). Every other module differs, for reasons the test checks one by one:
  * the CUDA 12.1 Windows build writes PTX with CRLF line ends, and inline-asm lines lose their leading tab;
  * an `-rdc` build names file-static symbols `__nv_static_<n>__<8 hex>_<len>_<file>_cu_<8 hex>[_<n>]_<name>`:
    the hex parts are module ids of that compile (paths, host), so the two builds never share them;
  * with those normalised (and the ids in `_INTERNAL_` anonymous-namespace names), modules 0, 2, 3, 4, 5 are
    equal. Module 1 (kernels.cu, with thrust/libcu++ headers; ~1000 of ~100000 lines differ) is not, because
    Windows is LLP64: `long` is 32 bits, so `kfunc<float, 0>(float*, float*, float, long)` takes a `.u32`
    where Linux has `.u64` and its code differs, and (CUDA 13) `size_t` mangles as `y` where Linux has `m`.
    Also 292 float constants of the 4-bit quantizers' thresholds differ by exactly one ulp (`0f3F5C89D9` on
    Linux, `0f3F5C89DA` on Windows; 146 up, 146 down: the two compiles round some decimal constants
    differently, which step is not established), and function-local statics are numbered differently
    (`…ii$236` vs `…ii$28`). Same kernels, not the same bytes.
- the HIP DLL holds code objects for the 7 consumer targets of the Linux build's 16, with the same kernel names;
  none is byte-identical (host-dependent symbol names), so only names are compared.
"""

from __future__ import annotations

import re
from pathlib import Path

import lief
import pytest

from fatkit.extract.kernels import kernel_names
from fatkit.extract.model import Binary
from fatkit.extract.scan import scan_path
from tests.corpus import corpus_file

pytestmark = pytest.mark.corpus

DLLS = ("libbitsandbytes_cuda121.dll", "libbitsandbytes_cuda130.dll", "libbitsandbytes_rocm72.dll",
        "libbitsandbytes_xpu2026.dll")
WRAPPER_SECTIONS = {".nvFatBi": "nvidia", ".hipFatB": "hip"}
MEMBER = "bitsandbytes/{}"
# fatkit's (library, part of the AMD counterpart) for the NVIDIA imports of each DLL (lief lists the imports)
LIBRARIES = {
    "libbitsandbytes_cuda121.dll": [("CUDA runtime", "amdhip64_"), ("cuBLAS", "hipblas.dll"),
                                    ("cuBLASLt", "hipblaslt.dll")],
    "libbitsandbytes_cuda130.dll": [("cuBLAS", "rocblas.dll"), ("cuBLASLt", "hipblaslt.dll")],  # cudart static
    "libbitsandbytes_rocm72.dll": [],
    "libbitsandbytes_xpu2026.dll": [],
}
VERDICTS = {"libbitsandbytes_cuda121.dll": "yes", "libbitsandbytes_cuda130.dll": "yes",
            "libbitsandbytes_rocm72.dll": "native", "libbitsandbytes_xpu2026.dll": "none"}
_STATIC = re.compile(rb"__nv_static_\d+__[0-9a-f]{8}_\d+_(\w+?)_cu_[0-9a-f]{8}(?:_\d+)?_")
_INTERNAL = re.compile(rb"_ZN\d+_INTERNAL_[0-9a-f]{8}_\d+_(\w+?)_cu_[0-9a-f]{8}_\d+")  # its anonymous namespace
_LEADING_BLANKS = re.compile(rb"(?m)^[ \t]+")


def _binary(path: Path) -> Binary:
    (binary,) = scan_path(path)
    return binary


@pytest.fixture(scope="module", params=DLLS)
def dll(request) -> tuple[str, Path, Binary]:
    path = corpus_file(MEMBER.format(request.param))
    return request.param, path, _binary(path)


@pytest.fixture(scope="module", params=("cuda121", "cuda130"))
def cuda_pair(request) -> tuple[str, Binary, Binary]:
    dll_path = corpus_file(MEMBER.format(f"libbitsandbytes_{request.param}.dll"))
    so_path = corpus_file(MEMBER.format(f"libbitsandbytes_{request.param}.so"))
    return request.param, _binary(dll_path), _binary(so_path)


def test_sections_imports_and_format_agree_with_lief(dll):
    name, path, binary = dll
    image = lief.PE.parse(str(path))
    assert binary.format == "pe-dll" and binary.errors == []
    assert binary.needed == [i.name for i in image.imports] + [i.name for i in image.delay_imports]
    sections = {s.name: s for s in image.sections}
    for container in binary.containers:
        section = sections[container.section]
        start = section.pointerto_raw_data
        assert start <= container.offset and container.offset + container.size <= start + section.virtual_size


def test_every_wrapper_record_is_resolved_to_a_container(dll):
    name, path, binary = dll
    image = lief.PE.parse(str(path))
    records = sum(s.virtual_size // 24 for s in image.sections if s.name in WRAPPER_SECTIONS)
    wrapped = [c for c in binary.containers if c.wrapper is not None]
    assert len(wrapped) == records
    assert all("wrapper" in c.found_by and "section" in c.found_by for c in binary.containers)
    relocated = {e.address for r in image.relocations for e in r.entries if e.type.value == 10}
    for container in wrapped:
        record_rva = image.offset_to_virtual_address(container.wrapper["offset"]) - image.optional_header.imagebase
        assert record_rva + 8 in relocated  # the data pointer is one the loader relocates


def test_imports_are_mapped_and_the_verdict_is_given(dll):
    name, _, binary = dll
    libraries = binary.verdict.libraries
    assert [x["library"] for x in libraries] == [lib for lib, _ in LIBRARIES[name]]
    for entry, (_, counterpart) in zip(libraries, LIBRARIES[name]):
        assert counterpart in entry["amd"]
    assert binary.verdict.amd == VERDICTS[name], binary.verdict.reason


def test_the_sycl_dll_is_named_for_what_it_holds():
    binary = _binary(corpus_file(MEMBER.format("libbitsandbytes_xpu2026.dll")))
    assert binary.containers == []
    (note,) = binary.notes
    assert note.startswith("SYCL device code for spir64_gen-unknown-unknown, spir64-unknown-unknown (PE section "
                           "__CLANG_")


def test_fatbins_match_the_linux_build(cuda_pair):
    _, dll, so = cuda_pair
    assert [c.section for c in dll.containers] == ["__nv_rel"] * 6 + [".nv_fatb"]
    assert [c.section for c in so.containers] == ["__nv_relfatbin"] * 6 + [".nv_fatbin"]
    assert [c.wrapper["version"] for c in dll.containers] == [c.wrapper["version"] for c in so.containers]
    for ours, theirs in zip(dll.containers, so.containers, strict=True):
        assert [(e.kind, e.arch) for e in ours.entries] == [(e.kind, e.arch) for e in theirs.entries]


def _normalised(ptx: bytes) -> bytes:
    ptx = _STATIC.sub(rb"__nv_static_\1_", ptx.replace(b"\r\n", b"\n"))
    return _LEADING_BLANKS.sub(b"", _INTERNAL.sub(rb"_ZN_INTERNAL_\1", ptx))


def test_ptx_matches_the_linux_build_where_built_from_the_same_source(cuda_pair):
    release, dll, so = cuda_pair
    pairs = list(zip((e for e in dll.entries if e.kind == "ptx"), (e for e in so.entries if e.kind == "ptx"),
                     strict=True))
    assert len(pairs) == 6
    for ours, theirs in pairs:
        assert set(kernel_names(ours)) == set(kernel_names(theirs))
    identical = [ours.payload == theirs.payload for ours, theirs in pairs]
    assert identical == [release == "cuda130"] + [False] * 5
    assert (b"\r\n" in pairs[0][0].payload) == (release == "cuda121")
    same_source = [_normalised(ours.payload) == _normalised(theirs.payload) for ours, theirs in pairs]
    assert same_source == [True, False, True, True, True, True]
    # kernels.cu: what remains are the differences the docstring names
    ours, theirs = (_normalised(e.payload).decode() for e in pairs[1])
    assert ".param .u32 _Z5kfuncIfLi0EEvPT_S1_S0_l_param_3" in ours  # long: 32 bits on Windows
    assert ".param .u64 _Z5kfuncIfLi0EEvPT_S1_S0_l_param_3" in theirs
    assert "0f3F5C89DA;" in ours and "0f3F5C89D9;" in theirs
    assert ("discard_memoryEPVvy" in ours and "discard_memoryEPVvm" in theirs) == (release == "cuda130")


def test_the_hip_dll_holds_the_linux_builds_kernels_for_its_targets():
    dll = _binary(corpus_file(MEMBER.format("libbitsandbytes_rocm72.dll")))
    so = _binary(corpus_file(MEMBER.format("libbitsandbytes_rocm72.so")))
    assert [c.section for c in dll.containers] == [".hip_fat"] * 2
    linux = {(c.index, e.arch): e for c in so.containers for e in c.entries if e.kind == "hsaco"}
    windows = {(c.index, e.arch): e for c in dll.containers for e in c.entries if e.kind == "hsaco"}
    assert sorted({arch for _, arch in windows}) == ["gfx1100", "gfx1101", "gfx1102", "gfx1150", "gfx1151",
                                                     "gfx1200", "gfx1201"]
    assert set(windows) < set(linux)
    for key, entry in windows.items():
        assert set(kernel_names(entry)) == set(kernel_names(linux[key])) != set()
