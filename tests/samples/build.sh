#!/usr/bin/env bash
# Rebuilds every sample in tests/samples/ from tests/samples/src/.
#   bash tests/samples/build.sh            # both sets
#   bash tests/samples/build.sh nvidia     # NVIDIA set only
#   bash tests/samples/build.sh amd        # AMD set only
#   VERIFY=1 bash tests/samples/build.sh   # also print cuobjdump / bundler / readelf listings
# Tools: CUDA 13.0 (nvcc, fatbinary, bin2c) on PATH or in /usr/local/cuda-13.0/bin; gcc/GNU ld/strip;
# Debian clang-22, lld-22, clang-offload-bundler, llvm-readelf-22 in /usr/lib/llvm-22/bin; python3.
# Compiles run inside src/ with relative file names so paths embedded in the outputs do not depend on
# where the repository is checked out.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$HERE/src
OUT=$HERE
LLVM=/usr/lib/llvm-22/bin
[ -d /usr/local/cuda-13.0/bin ] && export PATH=/usr/local/cuda-13.0/bin:$PATH
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export SOURCE_DATE_EPOCH=0
SET=${1:-all}

# Zero e_shoff, e_shnum and e_shstrndx of an ELF64 file: the result has no section header table at all
# (objcopy/strip cannot produce that), so readers must find fatbins via program headers or a magic scan.
drop_section_headers() {
    python3 - "$1" <<'PY'
import struct, sys
path = sys.argv[1]
with open(path, "r+b") as f:
    ehdr = bytearray(f.read(64))
    assert ehdr[:4] == b"\x7fELF" and ehdr[4] == 2, "ELF64 expected"
    struct.pack_into("<Q", ehdr, 0x28, 0)      # e_shoff
    struct.pack_into("<HHH", ehdr, 0x3a, 0, 0, 0)  # e_shentsize, e_shnum, e_shstrndx
    f.seek(0)
    f.write(ehdr)
PY
}

# nvlink -dlto loads <nvcc dir>/../nvvm/lib64/libnvvm.so; this toolkit keeps libnvvm.so in lib64/ only
# ("nvlink fatal: elfLink linker library load error"). nvcc finds its tree from its own path, so give it
# a private tree of symlinks whose nvvm/lib64 exists. Prints the nvcc to use.
nvcc_with_libnvvm() {
    local cuda
    cuda=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
    if [ -e "$cuda/nvvm/lib64/libnvvm.so" ]; then echo "$cuda/bin/nvcc"; return; fi
    local view=$TMP/cuda
    if [ ! -d "$view" ]; then
        mkdir -p "$view/bin" "$view/nvvm"
        ln -s "$cuda"/bin/* "$view/bin/"
        for d in targets lib lib64 include; do [ -e "$cuda/$d" ] && ln -s "$cuda/$d" "$view/$d"; done
        for d in bin libdevice; do ln -s "$cuda/nvvm/$d" "$view/nvvm/$d"; done
        ln -s "$cuda/lib64" "$view/nvvm/lib64"
    fi
    echo "$view/bin/nvcc"
}

build_nvidia() {
    cd "$SRC"
    local two_arch=(-gencode arch=compute_80,code=sm_80 -gencode "arch=compute_90,code=[sm_90,compute_90]")
    # -cudart shared keeps executables small (no static CUDA runtime linked in).
    local nvcc_exe=(nvcc -cudart shared -O2)

    # Compression modes: sm_80 + sm_90 cubins and compute_90 PTX.
    for mode in default size speed none; do
        "${nvcc_exe[@]}" "${two_arch[@]}" --compress-mode=$mode -o "$OUT/nv_mode_$mode" kern.cu
    done
    "${nvcc_exe[@]}" "${two_arch[@]}" -Xfatbin -compress-all -o "$OUT/nv_compress_all" kern.cu

    # Linker / ELF-type variants (nv_mode_default is the PIE built by gcc + GNU ld).
    "${nvcc_exe[@]}" "${two_arch[@]}" -Xcompiler -no-pie -Xlinker -no-pie -o "$OUT/nv_nopie" kern.cu
    PATH=$LLVM:$PATH "${nvcc_exe[@]}" "${two_arch[@]}" -Xcompiler -fuse-ld=lld -o "$OUT/nv_lld" kern.cu
    "${nvcc_exe[@]}" "${two_arch[@]}" -Xlinker -z,pack-relative-relocs -o "$OUT/nv_relr" kern.cu
    PATH=$LLVM:$PATH "${nvcc_exe[@]}" "${two_arch[@]}" -Xcompiler -fuse-ld=lld \
        -Xlinker -z,pack-relative-relocs -o "$OUT/nv_lld_relr" kern.cu
    "${nvcc_exe[@]}" "${two_arch[@]}" -shared -Xcompiler -fPIC -DNO_MAIN -o "$OUT/nv_lib.so" kern.cu
    nvcc -O2 "${two_arch[@]}" -c -o "$OUT/nv_kern.o" kern.cu

    # Relocatable device code: two TUs, their -dc objects, a -dlink object, an archive of two objects.
    nvcc -O2 "${two_arch[@]}" -dc -o "$TMP/kern_rdc.o" kern.cu
    nvcc -O2 "${two_arch[@]}" -dc -o "$TMP/rdc.o" rdc.cu
    "${nvcc_exe[@]}" "${two_arch[@]}" -rdc=true -o "$OUT/nv_rdc" "$TMP/kern_rdc.o" "$TMP/rdc.o"
    nvcc "${two_arch[@]}" -dlink -o "$OUT/nv_dlink.o" "$TMP/kern_rdc.o" "$TMP/rdc.o"
    rm -f "$OUT/nv_lib.a"
    (cd "$TMP" && cp "$OUT/nv_kern.o" kern.o && ar rcsD "$OUT/nv_lib.a" kern.o rdc.o)

    # Section-less and stripped executables.
    strip -o "$OUT/nv_stripped" "$OUT/nv_mode_default"
    cp "$OUT/nv_mode_default" "$OUT/nv_noshdr"
    drop_section_headers "$OUT/nv_noshdr"

    # Debug / line info.
    "${nvcc_exe[@]}" -G -arch=sm_90 -o "$OUT/nv_debug_G" kern.cu
    "${nvcc_exe[@]}" "${two_arch[@]}" -lineinfo -o "$OUT/nv_lineinfo" kern.cu

    # Standalone device files.
    nvcc -O2 "${two_arch[@]}" -fatbin -o "$OUT/nv_kern.fatbin" kern.cu
    nvcc -O2 -arch=sm_90 -cubin -o "$OUT/nv_kern_sm90.cubin" kern.cu
    nvcc -O2 -arch=sm_90 -ptx -o "$OUT/nv_kern_sm90.ptx" kern.cu

    # bin2c: the fatbin becomes a plain array in .rodata of a gcc-built executable (no wrapper, no section).
    (cd "$TMP" && cp "$OUT/nv_kern.fatbin" kern.fatbin &&
        bin2c --name kern_fatbin --type longlong --const kern.fatbin > kern_fatbin.h)
    gcc -O1 -I"$TMP" -o "$OUT/nv_bin2c" bin2c_main.c

    # Architecture variants.
    nvcc -O2 -fatbin -gencode arch=compute_90a,code=sm_90a -o "$OUT/nv_sm90a.fatbin" tiny.cu
    nvcc -O2 -fatbin -gencode arch=compute_100a,code=sm_100a -o "$OUT/nv_sm100a.fatbin" tiny.cu
    nvcc -O2 -fatbin -gencode "arch=compute_100f,code=[sm_100f,compute_100f]" -o "$OUT/nv_sm100f.fatbin" tiny.cu
    nvcc -O2 -fatbin -gencode arch=compute_120,code=sm_120 -o "$OUT/nv_sm120.fatbin" tiny.cu

    # NVVM / LTO-IR entries.
    nvcc -O2 -dc -gencode arch=compute_90,code=lto_90 -o "$OUT/nv_lto90.o" kern.cu
    nvcc -O2 -fatbin -gencode arch=compute_90,code=lto_90 -o "$OUT/nv_lto90.fatbin" tiny.cu
    nvcc -O2 -dc -dlto -arch=sm_90 -o "$TMP/kern_dlto.o" kern.cu
    nvcc -O2 -dc -dlto -arch=sm_90 -o "$TMP/rdc_dlto.o" rdc.cu
    "$(nvcc_with_libnvvm)" -cudart shared -dlto -arch=sm_90 -o "$OUT/nv_dlto" "$TMP/kern_dlto.o" "$TMP/rdc_dlto.o"

    # fatbinary-made containers: hidden codecs, identifier, 32-bit flag.
    local cubin=$OUT/nv_kern_sm90.cubin ptx=$OUT/nv_kern_sm90.ptx
    fatbinary --create="$OUT/nv_fb_zlib.fatbin" -64 --compress-all --compress-algorithm=1 \
        --image3=kind=elf,sm=90,file="$cubin" --image3=kind=ptx,sm=90,file="$ptx"
    fatbinary --create="$OUT/nv_fb_lz4frame.fatbin" -64 --compress-all --compress-algorithm=3 \
        --image3=kind=elf,sm=90,file="$cubin" --image3=kind=ptx,sm=90,file="$ptx"
    fatbinary --create="$OUT/nv_fb_ident.fatbin" -64 --ident=myident.cu \
        --image3=kind=elf,sm=90,file="$cubin" --image3=kind=ptx,sm=90,file="$ptx"
    fatbinary --create="$OUT/nv_fb_32.fatbin" -32 --image3=kind=ptx,sm=90,file="$ptx"
}

verify_nvidia() {
    local cuobjdump
    cuobjdump=$(command -v cuobjdump || find / -name cuobjdump -path '*cu13*' 2>/dev/null | head -1)
    for f in "$OUT"/nv_*; do
        echo "== ${f##*/}"
        case $f in
            *.ptx) grep -E '^\.(version|target|address_size)|\.entry' "$f" ;;
            *) "$cuobjdump" -all -lelf -lptx "$f" 2>&1 || true ;;
        esac
    done
}

case $SET in
    all) build_nvidia; build_amd ;;
    nvidia) build_nvidia ;;
    amd) build_amd ;;
    *) echo "usage: $0 [all|nvidia|amd]" >&2; exit 2 ;;
esac
if [ "${VERIFY:-0}" = 1 ]; then
    case $SET in all|nvidia) verify_nvidia ;; esac
    case $SET in all|amd) verify_amd ;; esac
fi
