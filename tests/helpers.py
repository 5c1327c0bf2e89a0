"""What the format tests share: sample lookup, peer tools that skip the test when missing, nvcc builds, and
read-only maps of files. The peer tools themselves are located and run by tests/oracles.py."""

from __future__ import annotations

import mmap
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

import pytest

from tests import oracles
from tests.corpus import CORPUS_DIR, corpus_files

SAMPLES = Path(__file__).parent / "samples"
LLVM_BIN = Path("/usr/lib/llvm-22/bin")  # clang, lld, llvm-readobj/objdump, clang-offload-bundler (Debian 22)
CLANG = LLVM_BIN / "clang"


def sample(name: str) -> Path:
    """tests/samples/<name>, or skip the test when tests/samples/build.sh has not built it."""
    path = SAMPLES / name
    if not path.exists():
        pytest.skip(f"sample {name} not built (tests/samples/build.sh)")
    return path


def cuobjdump13() -> Path:
    """cuobjdump 13.x, or skip the test."""
    tool = oracles.cuobjdump13()
    if tool is None:
        pytest.skip("cuobjdump 13.x not installed (pip install nvidia-cuda-cuobjdump)")
    return tool


def cuobjdump_reading(path: Path) -> Path:
    """The cuobjdump that reads `path` (13.x, else 12.8), or skip the test."""
    tool = oracles.cuobjdump_for(path)
    if tool is None:
        pytest.skip(f"no cuobjdump reads {path.name}")
    return tool


def nvcc(tmp_path: Path, output: str, *options: str) -> bytes:
    """What `nvcc -<output>` (cubin, ptx) makes of samples/src/kern.cu without its main, written to
    tmp_path/k.<output>; skip the test when nvcc is not on PATH."""
    tool = shutil.which("nvcc")
    if tool is None:
        pytest.skip("nvcc not on PATH")
    out = tmp_path / f"k.{output}"
    subprocess.run([tool, f"-{output}", "-DNO_MAIN", *options, "-o", str(out), str(SAMPLES / "src" / "kern.cu")],
                   check=True, capture_output=True, timeout=300)
    return out.read_bytes()


def non_big_corpus_files() -> list[Path]:
    """Corpus files whose index.tsv description does not start with BIG (those are for benchmarks)."""
    index = CORPUS_DIR / "index.tsv"
    if not index.exists():
        return []
    described = dict(line.split("\t", 1) for line in index.read_text().splitlines() if "\t" in line)
    return [path for path in corpus_files() if not described.get(str(path), "").startswith("BIG")]


def clang22() -> Path:
    """clang-22, or skip the test."""
    if not CLANG.exists():
        pytest.skip("clang-22 not installed")
    return CLANG


def hip_device_object(source: Path, arch: str, out: Path, *options: str) -> Path:
    """The code object clang-22 builds from a HIP source for one --offload-arch (device only, not bundled)."""
    subprocess.run([str(clang22()), "-x", "hip", "-nogpulib", "-nogpuinc", "--cuda-device-only",
                    "--no-gpu-bundle-output", f"--offload-arch={arch}", *options, str(source), "-o", str(out)],
                   check=True, capture_output=True)
    return out


def over_files(paths: Iterable[Path]):
    """Parametrize a test's `path` argument with `paths`, each test named after its file."""
    return pytest.mark.parametrize("path", list(paths), ids=lambda p: p.name)


@contextmanager
def mapped(path: Path) -> Iterator[mmap.mmap]:
    """`path` mapped read-only for the block, or skip the test when the file is missing (a corpus file not
    fetched). The map is closed on exit, which fails if a view of it outlives the block."""
    if not path.exists():
        pytest.skip(f"{path} not fetched")
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        yield data


# The kernels of tests/samples/src/kern.cu, as in nv_kern_sm90.ptx/.cubin (the anonymous-namespace hash is of the
# source path at build time).
SAMPLE_KERNELS = frozenset({
    "_Z5saxpyfPKfPfi", "_Z13static_kernelPi", "_Z13reduce_sharedPKfPf", "_Z11with_struct6ParamsPf",
    "_Z4fillIfEvPT_S0_i", "_Z4fillIiEvPT_S0_i", "_ZN39_GLOBAL__N__1f753215_7_kern_cu_38f7764e13hidden_kernelEPf",
})
