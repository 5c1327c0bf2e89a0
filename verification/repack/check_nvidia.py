"""Runs the original and the `fatkit repack`ed builds of a CUDA executable and shared library on an NVIDIA GPU
and checks that they behave identically (and match a numpy reference).

    python check_nvidia.py BUILD_DIR RESULTS_JSON

BUILD_DIR is what verification/repack/build.py wrote (original/, patched/, files.json). Needs Python 3, numpy
and an NVIDIA driver for CUDA 13 (the binaries link the CUDA runtime statically); not fatkit. Checks:

- every file is the one build.py wrote (SHA-256 from files.json);
- `repack_app`, original and patched: exit status 0 and the same stdout, whose numbers equal the reference;
- `librepack.so`, original and patched, each loaded through ctypes in a fresh process: `repack_lib_run`
  returns 0, and the checksum, histogram and cluster ranks are the same and equal the reference.

Prints a table; writes every result to RESULTS_JSON; exits 0 only when every check passed.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

# Constants of verification/repack/src (repack_app.cu, repack_lib.cu).
APP_N, APP_THREADS, APP_SEED = 1 << 16, 256, 0x5EED1234
LIB_N, LIB_BINS, LIB_RANK_BLOCKS, LIB_CLUSTER = 1 << 14, 64, 4, 2
FNV_OFFSET, FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3
APP_LINE = re.compile(r"repack_app n=(\d+) seed=0x([0-9a-f]{8}) total=(\d+) checksum=([0-9a-f]{16})")
TIMEOUT = 300
# cudaError_t values repack_lib_run may return that say the machine, not the build, is the problem.
CUDA_ERRORS = {35: "cudaErrorInsufficientDriver (the driver predates CUDA 13.0)", 100: "cudaErrorNoDevice",
               209: "cudaErrorNoKernelImageForDevice", 222: "cudaErrorUnsupportedPtxVersion"}


def fnv1a(data: bytes, h: int = FNV_OFFSET) -> int:
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def mix32(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.uint32)
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return x


def app_reference() -> str:
    values = mix32(np.arange(APP_N, dtype=np.uint32) ^ np.uint32(APP_SEED))
    sums = values.astype(np.uint64).reshape(-1, APP_THREADS).sum(axis=1, dtype=np.uint64)
    checksum = fnv1a(sums.astype("<u8").tobytes(), fnv1a(values.astype("<u4").tobytes()))
    total = int(sums.sum(dtype=np.uint64))
    return f"repack_app n={APP_N} seed=0x{APP_SEED:08x} total={total} checksum={checksum:016x}"


def lib_reference() -> dict:
    i = np.arange(LIB_N)
    x = (i % 1000).astype(np.float32)
    y = ((2 * i) % 517).astype(np.float32)
    y = np.float32(0.5) * x + y  # exact for these small integers, fused or not
    bins = np.bincount(mix32(y.view(np.uint32)) % LIB_BINS, minlength=LIB_BINS).astype(np.uint32)
    ranks = (np.arange(LIB_RANK_BLOCKS) % LIB_CLUSTER).astype(np.uint32)
    h = fnv1a(y.astype("<f4").tobytes())
    h = fnv1a(bins.astype("<u4").tobytes(), h)
    h = fnv1a(ranks.astype("<u4").tobytes(), h)
    return {"status": 0, "checksum": f"{h:016x}", "bins": bins.tolist(), "ranks": ranks.tolist()}


def run_library(path: Path) -> dict:
    """In this (child) process: load the library, call repack_lib_run, return what it produced."""
    lib = ctypes.CDLL(str(path.resolve()))
    run = lib.repack_lib_run
    run.restype = ctypes.c_int
    run.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_uint)]
    checksum = ctypes.c_ulonglong(0)
    bins = (ctypes.c_uint * LIB_BINS)()
    ranks = (ctypes.c_uint * LIB_RANK_BLOCKS)()
    status = run(ctypes.byref(checksum), bins, ranks)
    return {"status": status, "checksum": f"{checksum.value:016x}", "bins": list(bins), "ranks": list(ranks)}


def library_in_child(path: Path) -> dict:
    """Each library in a fresh process: the two builds register the same kernels under the same names."""
    done = subprocess.run([sys.executable, __file__, "--library", str(path)], capture_output=True, text=True,
                          timeout=TIMEOUT)
    if done.returncode != 0:
        return {"error": f"exit status {done.returncode}: {done.stderr.strip()[-2000:]}"}
    return json.loads(done.stdout)


def run_executable(path: Path) -> dict:
    path.chmod(path.stat().st_mode | 0o111)
    done = subprocess.run([str(path.resolve())], capture_output=True, text=True, timeout=TIMEOUT)
    return {"status": done.returncode, "stdout": done.stdout.strip(), "stderr": done.stderr.strip()[-2000:]}


def check_files(build: Path) -> list[dict]:
    expected = json.loads((build / "files.json").read_text())
    out = []
    for name, digest in sorted(expected.items()):
        path = build / name
        actual = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        out.append({"check": f"sha256 {name}", "passed": actual == digest, "expected": digest, "actual": actual})
    return out


def check_app(build: Path) -> dict:
    original = run_executable(build / "original" / "repack_app")
    patched = run_executable(build / "patched" / "repack_app")
    reference = app_reference()
    passed = (original["status"] == 0 and patched["status"] == 0 and original["stdout"] == patched["stdout"]
              and original["stdout"] == reference)
    return {"check": "repack_app: run both builds", "passed": passed, "original": original, "patched": patched,
            "reference": reference}


def check_library(build: Path) -> dict:
    original = library_in_child(build / "original" / "librepack.so")
    patched = library_in_child(build / "patched" / "librepack.so")
    reference = lib_reference()
    passed = "error" not in original and original == patched == reference
    return {"check": "librepack.so: ctypes load + repack_lib_run, both builds", "passed": passed,
            "original": original, "patched": patched, "reference": reference}


def summary_of(result: dict) -> tuple[str, str]:
    if "original" not in result:
        return "-", "-"

    def short(r: dict) -> str:
        if "error" in r:
            return r["error"][:60]
        if "stdout" in r:
            return f"rc={r['status']} {r['stdout'][-26:] if r['status'] == 0 else r['stderr'][-60:]}"
        if r["status"]:
            return f"rc={r['status']} {CUDA_ERRORS.get(r['status'], '')}"
        return f"rc={r['status']} checksum={r['checksum']}"
    return short(result["original"]), short(result["patched"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build", type=Path, nargs="?")
    parser.add_argument("results", type=Path, nargs="?")
    parser.add_argument("--library", type=Path, help=argparse.SUPPRESS)  # the child process of check_library
    args = parser.parse_args()
    if args.library:
        print(json.dumps(run_library(args.library)))
        return 0
    if args.build is None or args.results is None:
        parser.error("BUILD_DIR and RESULTS_JSON are required")
    results = check_files(args.build) + [check_app(args.build), check_library(args.build)]
    width = max(len(r["check"]) for r in results)
    print(f"{'check':<{width}}  {'result':<6}  original / patched")
    for r in results:
        original, patched = summary_of(r)
        detail = f"{original}  /  {patched}" if original != "-" else ""
        print(f"{r['check']:<{width}}  {'PASS' if r['passed'] else 'FAIL':<6}  {detail}")
    passed = sum(r["passed"] for r in results)
    print(f"{passed}/{len(results)} checks passed")
    args.results.write_text(json.dumps({"passed": passed, "total": len(results), "results": results}, indent=2) + "\n")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
