"""Codegen through a release libLLVM (`FATKIT_LIBLLVM`, fatkit/translate/targets/libllvm.py): the code objects it
makes run right on the executor, its version is in the cache key, and a library that does not fit is refused
with a message naming the variable."""

from __future__ import annotations

import ctypes.util
import glob

import pytest

from fatkit.errors import FatkitError
from fatkit.translate import toolchain
from fatkit.translate.pipeline import Options, translate
from fatkit.translate.targets import libllvm
from tests.amdrun import AMD_TARGETS
from tests.test_translate_integer import check, op, sx, ux

KERNEL = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 p)
{
    .reg .b64 %a;
    ld.param.u64 %a, [p];
    st.global.u32 [%a], 1;
    ret;
}
"""


def _llvm_major() -> int:
    from llvmlite import binding

    return binding.llvm_version_info[0]


def _installed(major: int) -> str:
    """A libLLVM of version `major` where Debian and Ubuntu put it (package libllvm<major>)."""
    found = sorted(glob.glob(f"/usr/lib/llvm-{major}/lib/libLLVM.so*"))
    if not found:
        pytest.skip(f"no libLLVM {major} in /usr/lib/llvm-{major}/lib (apt-get install libllvm{major})")
    return found[0]


@pytest.fixture
def library(monkeypatch) -> str:
    """FATKIT_LIBLLVM set to llvmlite's major version's libLLVM for the test (the key's cached version too)."""
    path = _installed(_llvm_major())
    monkeypatch.setenv(libllvm.LIBRARY_VARIABLE, path)
    toolchain.llvm_version.cache_clear()
    yield path
    monkeypatch.delenv(libllvm.LIBRARY_VARIABLE)
    toolchain.llvm_version.cache_clear()


@pytest.mark.parametrize("target", AMD_TARGETS)
def test_code_compiled_through_the_library_runs(library, target):
    cases = [op("mul.wide.u32 {d}, {a}, {b};", 64, lambda a, b, c, e: ux(a, 32) * ux(b, 32)),
             op("mad.lo.s32 {d}, {a}, {b}, {c};", 32, lambda a, b, c, e: a * b + c),
             op("shr.s64 {d}, {a}, {b};", 64, lambda a, b, c, e: sx(a, 64) >> min(ux(b, 32), 63)),
             op("brev.b32 {d}, {a};", 32, lambda a, b, c, e: int(f"{ux(a, 32):032b}"[::-1], 2)),
             ("popc.b64 %d, %x0;", 32, lambda a, b, c, e: bin(ux(a, 64)).count("1")),
             op("mul.hi.s64 {d}, {a}, {b};", 64, lambda a, b, c, e: (sx(a, 64) * sx(b, 64)) >> 64)]
    check("through_libllvm", cases, target=target)


def test_the_library_version_is_in_the_key(library):
    spelled = toolchain.llvm_version()
    assert spelled.startswith(f"{_llvm_major()}.") and spelled.endswith(library.rsplit("/", 1)[-1])
    assert spelled != toolchain_without_library()


def toolchain_without_library() -> str:
    from llvmlite import binding

    return ".".join(map(str, binding.llvm_version_info))


def test_a_library_without_llvm_is_refused(monkeypatch):
    monkeypatch.setenv(libllvm.LIBRARY_VARIABLE, ctypes.util.find_library("c") or "libc.so.6")
    with pytest.raises(FatkitError, match="FATKIT_LIBLLVM=.*has no LLVMGetVersion"):
        translate(KERNEL, Options(target="gfx942"))


def test_a_missing_library_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv(libllvm.LIBRARY_VARIABLE, str(tmp_path / "libLLVM.so"))
    with pytest.raises(FatkitError, match="FATKIT_LIBLLVM=.*cannot load it"):
        translate(KERNEL, Options(target="gfx942"))


def test_a_library_of_another_version_is_refused(monkeypatch):
    other = _installed(19 if _llvm_major() != 19 else 22)
    monkeypatch.setenv(libllvm.LIBRARY_VARIABLE, other)
    with pytest.raises(FatkitError, match=f"is LLVM .*name a libLLVM of version {_llvm_major()}"):
        translate(KERNEL, Options(target="gfx942"))
