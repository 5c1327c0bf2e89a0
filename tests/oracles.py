"""The peer tools fatkit is checked against: cuobjdump 13.x, cuobjdump 12.8, clang-offload-bundler and LLVM 19.

Each locator returns None when its tool is not available (tests then skip). Facts about what each tool
lists, misses and fails on in the corpus are in tests/ORACLES.md.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import re
import shutil
import struct
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tests.corpus import CORPUS_DIR

TOOLS_DIR = CORPUS_DIR / "tools"
TRITON_REQUIREMENT = "triton==3.6.0"
TRITON_CUOBJDUMP_MEMBER = "triton/backends/nvidia/bin/cuobjdump"
CUOBJDUMP12_PATH = TOOLS_DIR / "cuobjdump-12.8"
BUNDLER_PATH = Path("/usr/lib/llvm-22/bin/clang-offload-bundler")
PLAIN_BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
LEGACY_HOST_ID = b"host-x86_64-unknown-linux"  # ROCm 5; bundler 22 rejects it as a target
MODERN_HOST_ID = b"host-x86_64-pc-linux-gnu-"  # a valid host id of the same length

# `cuobjdump -lelf -lptx` lines; info messages ("No PTX file found…") share stdout.
_LISTED = re.compile(r"^(ELF|PTX) file\s+\d+: (.+)$")
# `-xelf/-xptx` lines: "Extracting PTX file and ptxas options    1: x.1.sm_80.ptx -arch=sm_80 -O2 ".
_EXTRACTED = re.compile(r"^Extracting (ELF|PTX) file(?: and ptxas options)?\s+\d+: (\S+)")
_NAME_ARCH = re.compile(r"\.(sm_\d+[a-z]?)\.(?:cubin|ptx)$")
# Entry headers printed by `-res-usage` (ELF) and `-ptx` (PTX): "Fatbin elf code:", "====", "arch = sm_90a".
_HEADER = re.compile(r"^Fatbin (elf|ptx) code:\n=+\narch = (sm_\d+[a-z]?)$", re.M)
_FAILURE = re.compile(r"^cuobjdump\S*\s+(?:fatal|error)\s*:.*$", re.M)
_NO_DEVICE_CODE = "does not contain device code"


class PeerFailed(Exception):
    """A peer tool refused the file (its own message), or its outputs contradict each other."""


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str

    @property
    def failure(self) -> str | None:
        """The tool's complaint when it failed; None when it answered (an empty answer included)."""
        text = self.stdout + self.stderr
        found = _FAILURE.search(text)
        if found:
            return found.group(0)
        if self.returncode == 0 or (self.returncode == 255 and _NO_DEVICE_CODE in text):
            return None
        return f"exit status {self.returncode}: {text.strip()[-500:]}"


def _run(argv: list[str | Path], cwd: Path | None = None) -> Run:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, timeout=600)
    return Run(done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"))


def cuda_release(tool: Path) -> str | None:
    """The CUDA release an NVIDIA tool (cuobjdump, ptxas) reports ("13.5", "12.8"), or None when it does not run."""
    try:
        run = _run([tool, "--version"])
    except OSError:
        return None
    found = re.search(r"release (\d+\.\d+)", run.stdout)
    return found.group(1) if found else None


# ---------------------------------------------------------------------------------------------------------
# locating the tools


def _packaged_tool(distribution: str, name: str) -> Path | None:
    """`bin/<name>` of an installed PyPI distribution (NVIDIA ships its tools as wheels)."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or ():
        if file.name == name and file.parent.name == "bin":
            return Path(dist.locate_file(file))
    return None


@functools.cache
def cuobjdump13() -> Path | None:
    """cuobjdump 13.x from the PyPI package nvidia-cuda-cuobjdump."""
    path = _packaged_tool("nvidia-cuda-cuobjdump", "cuobjdump")
    release = cuda_release(path) if path else None
    return path if release and release.startswith("13.") else None


@functools.cache
def ptxas() -> Path | None:
    """ptxas 13.x: the CUDA toolkit's on PATH, else the one of the PyPI package nvidia-cuda-nvcc."""
    found = shutil.which("ptxas")
    path = Path(found) if found else _packaged_tool("nvidia-cuda-nvcc", "ptxas")
    if path is not None and not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | 0o111)  # wheels do not always keep the executable bit
    return path


def assert_ptxas_accepts(ptx: bytes | str, workdir: Path, arch: str = "sm_90") -> None:
    """ptxas assembles `ptx` for `arch` (the test skips when no ptxas 13 is installed)."""
    import pytest

    tool = ptxas()
    if tool is None:
        pytest.skip("ptxas not available (CUDA toolkit or PyPI nvidia-cuda-nvcc)")
    source = workdir / "ptxas-input.ptx"
    source.write_bytes(ptx.encode() if isinstance(ptx, str) else ptx)
    result = subprocess.run([tool, f"-arch={arch}", str(source), "-o", str(workdir / "ptxas-output.cubin")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


@functools.cache
def cuobjdump12() -> Path | None:
    """cuobjdump 12.8, taken once from the triton 3.6 wheel (the only 12.x build pip can fetch)."""
    if not CUOBJDUMP12_PATH.exists():
        try:
            _fetch_cuobjdump12()
        except (OSError, subprocess.SubprocessError, KeyError, zipfile.BadZipFile):
            return None
    return CUOBJDUMP12_PATH if cuda_release(CUOBJDUMP12_PATH) == "12.8" else None


def _fetch_cuobjdump12() -> None:
    TOOLS_DIR.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", TRITON_REQUIREMENT,
         "-d", str(TOOLS_DIR)],
        check=True, capture_output=True, timeout=600,
    )
    version = TRITON_REQUIREMENT.split("==")[1]
    wheels = sorted(TOOLS_DIR.glob(f"triton-{version}-*.whl"))
    if not wheels:
        raise OSError(f"pip download left no triton-{version} wheel in {TOOLS_DIR}")
    partial = CUOBJDUMP12_PATH.with_suffix(".part")
    with zipfile.ZipFile(wheels[0]) as wheel:
        partial.write_bytes(wheel.read(TRITON_CUOBJDUMP_MEMBER))
    partial.chmod(0o755)
    os.replace(partial, CUOBJDUMP12_PATH)
    for wheel_path in wheels:  # 190 MB; the extracted tool is the cache
        wheel_path.unlink()


@functools.cache
def offload_bundler() -> Path | None:
    """clang-offload-bundler of LLVM 22 (Debian clang-tools-22)."""
    if BUNDLER_PATH.is_file() and os.access(BUNDLER_PATH, os.X_OK):
        return BUNDLER_PATH
    found = shutil.which("clang-offload-bundler-22")
    return Path(found) if found else None


@functools.cache
def llvm19(tool: str) -> Path | None:
    """`llvm-readelf`/`llvm-objdump` of LLVM 19 (Debian `llvm-19`), the oldest LLVM whose tools must read our
    code objects."""
    for candidate in (Path("/usr/lib/llvm-19/bin") / tool, shutil.which(f"{tool}-19")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


# ---------------------------------------------------------------------------------------------------------
# cuobjdump


@functools.cache
def _listing_run(tool: Path, path: Path) -> Run:
    return _run([tool, "-all", "-lelf", "-lptx", path])


def cuobjdump_failure(tool: Path, path: Path) -> str | None:
    """Why `cuobjdump -all -lelf -lptx` failed on the file (its message), or None when it listed it."""
    return _listing_run(tool, path).failure


def cuobjdump_for(path: Path) -> Path | None:
    """The cuobjdump to compare with: 13.x where it reads the file, else 12.8 where that does, else None."""
    for tool in (cuobjdump13(), cuobjdump12()):
        if tool is not None and cuobjdump_failure(tool, path) is None:
            return tool
    return None


def _model_arch(kind: str, sm_arch: str) -> str:
    """cuobjdump says `sm_80` for a PTX entry too; fatkit says `compute_80`."""
    return "compute_" + sm_arch[3:] if kind == "ptx" else sm_arch


@functools.cache
def cuobjdump_listing(tool: Path, path: Path) -> tuple[tuple[str, str], ...]:
    """(kind, arch) of every entry `cuobjdump -all -lelf -lptx` lists, in its order: ("elf", "sm_90a"),
    ("ptx", "compute_100f"). The listed file names drop the `f` of family targets, so the arch is taken
    from the entry headers of `-res-usage` (ELF) and `-ptx` (PTX), which come in the same order."""
    listed_run = _listing_run(tool, path)
    if listed_run.failure:
        raise PeerFailed(listed_run.failure)
    listed = []
    for line in listed_run.stdout.splitlines():
        match = _LISTED.match(line)
        if match:
            arch = _NAME_ARCH.search(match.group(2))
            if arch is None:
                raise PeerFailed(f"no architecture in listed name {match.group(2)!r}")
            listed.append((match.group(1).lower(), arch.group(1)))
    header_run = _run([tool, "-all", "-res-usage", "-ptx", path])
    if header_run.failure:
        raise PeerFailed(header_run.failure)
    headers = _HEADER.findall(header_run.stdout)
    if not headers and all(kind == "elf" for kind, _ in listed):
        headers = listed  # a bare cubin: no fatbin entry header, the listed name is all there is
    if len(headers) != len(listed) or any(
        lk != hk or not (ha == la or (ha[-1] in "af" and ha[:-1] == la))
        for (lk, la), (hk, ha) in zip(listed, headers)
    ):
        raise PeerFailed(f"listing {listed} and entry headers {headers} disagree")
    return tuple((kind, _model_arch(kind, arch)) for kind, arch in headers)


def cuobjdump_written(tool: Path, path: Path, outdir: Path, kinds: tuple[str, ...] = ("elf", "ptx")
                      ) -> list[tuple[str, Path | None]]:
    """(kind, file) of every entry `cuobjdump -all -xelf all -xptx all` (or only the `kinds` given: "elf",
    "ptx") extracts into outdir, in listing order. The file is None where a later entry of the same name
    (identifier-named entries) overwrote it. `-all` is needed for the `__nv_relfatbin` containers."""
    if not kinds or set(kinds) - {"elf", "ptx"}:
        raise ValueError(kinds)
    outdir.mkdir(parents=True, exist_ok=True)
    run = _run([tool, "-all", *(arg for kind in kinds for arg in (f"-x{kind}", "all")), path.resolve()], cwd=outdir)
    if run.failure:
        raise PeerFailed(run.failure)
    announced = [(m.group(1).lower(), m.group(2)) for m in map(_EXTRACTED.match, run.stdout.splitlines()) if m]
    last = {name: i for i, (_, name) in enumerate(announced)}
    return [(kind, outdir / name if last[name] == i else None) for i, (kind, name) in enumerate(announced)]


def cuobjdump_extract(tool: Path, path: Path, outdir: Path, what: str) -> list[Path]:
    """Files written by `cuobjdump -all -xptx all` (what="ptx") or `-xelf all` (what="elf") into outdir,
    in listing order; PeerFailed unless every entry it announced is a file of its own."""
    written = cuobjdump_written(tool, path, outdir, (what,))
    names = [file.name if file is not None else None for _, file in written]
    on_disk = sorted(p.name for p in outdir.iterdir())
    if None in names or sorted(names) != on_disk:
        raise PeerFailed(f"cuobjdump announced {names} (None: overwritten) but wrote {on_disk}")
    return [file for _, file in written]


# ---------------------------------------------------------------------------------------------------------
# clang-offload-bundler


def bundler_list(path: Path) -> list[str]:
    """Bundle ids in a bundle file (plain or CCOB), or in an ELF holding `__CLANG_OFFLOAD_BUNDLE__*` sections."""
    tool = offload_bundler()
    if tool is None:
        raise PeerFailed("clang-offload-bundler not available")
    run = _run([tool, "--list", "--type=o", f"--input={path}"])
    if run.returncode != 0:
        raise PeerFailed(f"clang-offload-bundler --list: {run.stderr.strip()}")
    return [line.strip() for line in run.stdout.splitlines() if line.strip()]


def bundler_unbundle(path: Path, bundle_ids: list[str], outdir: Path) -> dict[str, bytes]:
    """The payload of each id as `clang-offload-bundler --unbundle` writes it."""
    tool = offload_bundler()
    if tool is None:
        raise PeerFailed("clang-offload-bundler not available")
    outdir.mkdir(parents=True, exist_ok=True)
    data = path.read_bytes()
    legacy_at = _legacy_host_id_offset(data)
    if legacy_at is not None:
        # bundler 22 lists ROCm 5's host id but refuses to unbundle any entry of a bundle holding it; the
        # same-length modern spelling keeps every offset, so the device entries come out unchanged.
        path = outdir / "modern-host-id.bundle"
        path.write_bytes(data[:legacy_at] + MODERN_HOST_ID + data[legacy_at + len(MODERN_HOST_ID):])
    outputs = [outdir / f"entry{i}" for i in range(len(bundle_ids))]
    run = _run([tool, "--unbundle", "--type=o", f"--input={path}", f"--targets={','.join(bundle_ids)}",
                *(f"--output={o}" for o in outputs)])
    if run.returncode != 0:
        raise PeerFailed(f"clang-offload-bundler --unbundle: {run.stderr.strip()}")
    return {bundle_id: out.read_bytes() for bundle_id, out in zip(bundle_ids, outputs)}


def _legacy_host_id_offset(data: bytes) -> int | None:
    """Where a plain bundle's table holds the id "host-x86_64-unknown-linux", if it does."""
    if not data.startswith(PLAIN_BUNDLE_MAGIC):
        return None
    (count,) = struct.unpack_from("<Q", data, 24)
    pos = 32
    for _ in range(count):
        if pos + 24 > len(data):
            return None
        (id_len,) = struct.unpack_from("<Q", data, pos + 16)
        if data[pos + 24 : pos + 24 + id_len] == LEGACY_HOST_ID:
            return pos + 24
        pos += 24 + id_len
    return None
