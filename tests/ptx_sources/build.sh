#!/usr/bin/env bash
# Regenerate tests/samples/ptx/*.ptx: the PTX nvcc 13.0 emits for the CUDA sources in this folder.
# Each output is named <source>.<target>[.<variant>].ptx; the tests parse, print, re-parse and ptxas them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="$here/../samples/ptx"
mkdir -p "$out"
rm -f "$out"/*.ptx

ptx() {  # ptx SOURCE NAME NVCC-OPTIONS...
    local source=$1 name=$2
    shift 2
    nvcc -ptx "$@" "$source.cu" -o "$out/$name.ptx"
}

# nvcc records absolute source paths (`.file`, and the -G sample's DWARF compile directory): a rebuild in
# another checkout changes those strings and nothing else.
cd "$here"

ptx basics basics.sm_80 -arch=sm_80
ptx basics basics.sm_80.rdc -arch=sm_80 -rdc=true               # .extern / .weak declarations
ptx basics basics.sm_120.fastmath -arch=sm_120 --use_fast_math   # .approx / .ftz forms
ptx debug debug.sm_90.G -arch=sm_90 -G                             # `.target sm_90, debug`, DWARF .section data
ptx atomics atomics.sm_75 -arch=sm_75
ptx warp warp.sm_90.lineinfo -arch=sm_90 -lineinfo               # .file, .loc … inlined_at
ptx warp warp.sm_86 -arch=sm_86
ptx halfmath halfmath.sm_90 -arch=sm_90
ptx halfmath halfmath.sm_80 -arch=sm_80
ptx texsurf texsurf.sm_80 -arch=sm_80
ptx asm_mma asm_mma.sm_80 -arch=sm_80
ptx hopper hopper.sm_90a -arch=sm_90a
ptx blackwell blackwell.sm_100a -arch=sm_100a
ptx operands operands.sm_90 -arch=sm_90                         # video instructions, .b128, vector registers
ls -l "$out"
