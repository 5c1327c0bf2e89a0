"""Builds the repack check: a CUDA executable and shared library, and their `fatkit repack` copies.

    python verification/repack/build.py [-o verification/repack/build] [--target gfx942,gfx1100]

writes `original/` (nvcc's output), `patched/` (`fatkit repack` of it: the same files plus `.fatkit_amd`),
`repack.json` (the repack report) and `files.json` (SHA-256 of every file, which check_nvidia.py verifies).
Then, on the NVIDIA machine (Python, numpy and the CUDA driver; no fatkit):

    python verification/repack/check_nvidia.py verification/repack/build results.json

    python verification/repack/build.py --samples tests/samples/repack

compiles the same sources with the shared CUDA runtime (small files) as the test samples of tests/test_repack.py.
Compiles run inside src/ with relative names, so the outputs do not depend on where the checkout is.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SRC = HERE / "src"
# sm_90 cubins run on the H200; compute_90 PTX is what fatkit translates (and what the driver could JIT).
ARCH = ["-gencode", "arch=compute_90,code=[sm_90,compute_90]"]
PROGRAMS = {
    "repack_app": ["repack_app.cu"],
    "librepack.so": ["-shared", "-Xcompiler", "-fPIC", "repack_lib.cu"],
}


def compile_programs(out: Path, cudart: str) -> list[Path]:
    """nvcc builds of PROGRAMS into `out`; `cudart` is nvcc's -cudart (static: no runtime library needed)."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SOURCE_DATE_EPOCH": "0"}
    built = []
    for name, args in PROGRAMS.items():
        target = out.resolve() / name
        subprocess.run(["nvcc", "-O2", "-cudart", cudart, *ARCH, "-o", str(target), *args], cwd=SRC, env=env,
                       check=True)
        built.append(target)
    return built


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--output", type=Path, default=HERE / "build")
    parser.add_argument("--target", default="gfx942,gfx1100")
    parser.add_argument("--samples", type=Path, metavar="DIR", help="only compile (shared CUDA runtime) into DIR")
    args = parser.parse_args()
    if args.samples:
        for path in compile_programs(args.samples, "shared"):
            print(f"{path}  {path.stat().st_size} bytes")
        return 0
    out = args.output.resolve()
    if out.exists():
        shutil.rmtree(out)
    originals = compile_programs(out / "original", "static")
    repack = subprocess.run([sys.executable, "-m", "fatkit", "repack", *map(str, originals), "--target", args.target,
                             "-o", str(out / "patched"), "--json"], cwd=ROOT, capture_output=True, text=True)
    if repack.returncode not in (0,):
        sys.stderr.write(repack.stderr)
        print(f"fatkit repack exited {repack.returncode}", file=sys.stderr)
        return 1
    report = json.loads(repack.stdout)
    (out / "repack.json").write_text(json.dumps(report, indent=2) + "\n")
    files = {f"{kind}/{path.name}": sha256(out / kind / path.name) for kind in ("original", "patched")
             for path in originals}
    (out / "files.json").write_text(json.dumps(files, indent=2, sort_keys=True) + "\n")
    for binary in report["binaries"]:
        print(f"{Path(binary['source']).name}: {binary['status']}, {binary['code_objects']} code objects, "
              f"{binary['kernels_ok']} kernels translated, {binary['kernels_failed']} not")
    print(f"built {out}; on the NVIDIA machine: python {HERE / 'check_nvidia.py'} {out} results.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
