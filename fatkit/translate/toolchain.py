"""The versions of the tools that make a code object: part of every cache key (`fatkit.cache.key`).

A different LLVM (llvmlite's build) or linker (ziglang's ld.lld) may compile the same PTX to different code,
so entries they made are kept apart rather than served as if equal.
"""

from __future__ import annotations

import os
from functools import lru_cache
from importlib import metadata


@lru_cache(maxsize=None)
def llvm_version() -> str:
    """The LLVM that compiles the code objects: the one llvmlite was built with, `22.1.0`, or the libLLVM that
    `FATKIT_LIBLLVM` names (targets/libllvm.py), `22.1.8+libLLVM.so.22.1` (another build may compile
    differently, so it is told apart even where the version is the same)."""
    from llvmlite import binding

    from fatkit.translate.targets import libllvm

    own = ".".join(str(part) for part in binding.llvm_version_info)
    library = libllvm.library_path()
    if library is None:
        return own
    return f"{libllvm.checked(library, binding.llvm_version_info[0])}+{os.path.basename(library)}"


@lru_cache(maxsize=None)
def lld_version() -> str:
    """The ziglang package whose ld.lld links the code objects, `ziglang-0.15.1` (its LLD is fixed per release)."""
    return f"ziglang-{metadata.version('ziglang')}"


def versions() -> tuple[tuple[str, str], ...]:
    """(tool, version) pairs in a fixed order."""
    return (("llvm", llvm_version()), ("lld", lld_version()))
