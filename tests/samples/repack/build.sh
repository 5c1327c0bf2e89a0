#!/usr/bin/env bash
# Rebuilds the samples of tests/test_repack.py (sm_90 cubins + compute_90 PTX, shared CUDA runtime; needs nvcc 13):
# repack_app and librepack.so from verification/repack/src/ (the sources the NVIDIA check of repack runs too),
# libcluster_only.so from src/cluster_only.cu (a library none of whose kernels fatkit can translate).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python3 "$HERE/../../../verification/repack/build.py" --samples "$HERE"
cd "$HERE/src"
SOURCE_DATE_EPOCH=0 nvcc -O2 -cudart shared -gencode "arch=compute_90,code=[sm_90,compute_90]" -shared \
    -Xcompiler -fPIC -o "$HERE/libcluster_only.so" cluster_only.cu
