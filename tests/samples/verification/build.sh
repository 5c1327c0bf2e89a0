#!/usr/bin/env bash
# PTX of verification/cuda programs that tests/test_verification_cases.py runs on the host target and the AMD
# executor (the same sources the GPU differential suite compiles, verification/build.py):
#   bash tests/samples/verification/build.sh      (CUDA 13.0 nvcc on PATH)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CUDA=$HERE/../../../verification/cuda
cd "$CUDA"
nvcc -ptx -arch=compute_90 memory.cu -o "$HERE/memory.compute_90.ptx"
nvcc -ptx -rdc=true -arch=compute_90 rdc_main.cu -o "$HERE/rdc_main.compute_90.ptx"
nvcc -ptx -rdc=true -arch=compute_90 rdc_lib.cu -o "$HERE/rdc_lib.compute_90.ptx"
