#!/usr/bin/env bash
# Rebuilds every sample in tests/samples/ from tests/samples/src/.
#   bash tests/samples/build.sh            # both sets
#   bash tests/samples/build.sh nvidia     # NVIDIA set only
#   bash tests/samples/build.sh amd        # AMD set only
#   bash tests/samples/build.sh pe         # Windows DLL set only (needs nv_kern.fatbin from the NVIDIA set)
#   VERIFY=1 bash tests/samples/build.sh   # also print cuobjdump / bundler / readelf listings
# Tools: CUDA 13.0 (nvcc, fatbinary, bin2c) on PATH or in /usr/local/cuda-13.0/bin; gcc/GNU ld/strip;
# Debian clang-22, lld-22, clang-offload-bundler, llvm-readelf-22 in /usr/lib/llvm-22/bin; python3;
# for the PE set, the ziglang wheel (zig 0.17: clang + lld for x86_64-windows-gnu, and its dlltool).
# Compiles run inside src/ with relative file names so paths embedded in the outputs do not depend on
# where the repository is checked out.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$HERE/src
OUT=$HERE
LLVM=/usr/lib/llvm-22/bin
if [ -d /usr/local/cuda-13.0/bin ]; then export PATH=/usr/local/cuda-13.0/bin:$PATH; fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export SOURCE_DATE_EPOCH=0
SET=${1:-all}

# Zero e_shoff, e_shentsize, e_shnum and e_shstrndx of an ELF64 file: the result has no section header table at all
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
        for d in targets lib lib64 include; do if [ -e "$cuda/$d" ]; then ln -s "$cuda/$d" "$view/$d"; fi; done
        for d in bin libdevice; do ln -s "$cuda/nvvm/$d" "$view/nvvm/$d"; done
        ln -s "$cuda/lib64" "$view/nvvm/lib64"
    fi
    echo "$view/bin/nvcc"
}

build_nvidia() {
    cd "$SRC"
    rm -f "$OUT"/nv_*
    local two_arch=(-gencode arch=compute_80,code=sm_80 -gencode "arch=compute_90,code=[sm_90,compute_90]")
    # -cudart shared keeps executables small (no static CUDA runtime linked in). No -O: nvcc's defaults
    # (host gcc -O0) keep the device-link image's version-2 wrapper, see nv_host_O2.
    local nvcc_exe=(nvcc -cudart shared)

    # Compression modes: sm_80 + sm_90 cubins and compute_90 PTX.
    for mode in default size speed none; do
        "${nvcc_exe[@]}" "${two_arch[@]}" --compress-mode=$mode -o "$OUT/nv_mode_$mode" kern.cu
    done
    "${nvcc_exe[@]}" "${two_arch[@]}" -Xfatbin -compress-all -o "$OUT/nv_compress_all" kern.cu

    # Host -O2 lets gcc drop link.stub's unreferenced version-2 wrapper: its container stays in .nv_fatbin
    # with no wrapper pointing at it.
    "${nvcc_exe[@]}" "${two_arch[@]}" -O2 -o "$OUT/nv_host_O2" kern.cu

    # Linker / ELF-type variants (nv_mode_default is the PIE built by gcc + GNU ld).
    "${nvcc_exe[@]}" "${two_arch[@]}" -Xcompiler -no-pie -Xlinker -no-pie -o "$OUT/nv_nopie" kern.cu
    PATH=$LLVM:$PATH "${nvcc_exe[@]}" "${two_arch[@]}" -Xcompiler -fuse-ld=lld -o "$OUT/nv_lld" kern.cu
    "${nvcc_exe[@]}" "${two_arch[@]}" -Xlinker -z,pack-relative-relocs -o "$OUT/nv_relr" kern.cu
    PATH=$LLVM:$PATH "${nvcc_exe[@]}" "${two_arch[@]}" -Xcompiler -fuse-ld=lld \
        -Xlinker -z,pack-relative-relocs -o "$OUT/nv_lld_relr" kern.cu
    "${nvcc_exe[@]}" "${two_arch[@]}" -shared -Xcompiler -fPIC -DNO_MAIN -o "$OUT/nv_lib.so" kern.cu
    nvcc "${two_arch[@]}" -c -o "$OUT/nv_kern.o" kern.cu

    # Relocatable device code: two TUs, their -dc objects, a -dlink object, an archive of two objects.
    nvcc "${two_arch[@]}" -dc -o "$TMP/kern_rdc.o" kern.cu
    nvcc "${two_arch[@]}" -dc -o "$TMP/rdc.o" rdc.cu
    "${nvcc_exe[@]}" "${two_arch[@]}" -rdc=true -o "$OUT/nv_rdc" "$TMP/kern_rdc.o" "$TMP/rdc.o"
    nvcc "${two_arch[@]}" -dlink -o "$OUT/nv_dlink.o" "$TMP/kern_rdc.o" "$TMP/rdc.o"
    # -rdc across units: rdc_use.cu's kernel calls a __device__ function and reads __device__ variables
    # that rdc_define.cu defines (one arch, to stay small).
    local sm90=(-gencode "arch=compute_90,code=[sm_90,compute_90]")
    nvcc "${sm90[@]}" -dc -o "$TMP/rdc_use.o" rdc_use.cu
    nvcc "${sm90[@]}" -dc -o "$TMP/rdc_define.o" rdc_define.cu
    "${nvcc_exe[@]}" "${sm90[@]}" -rdc=true -o "$OUT/nv_rdc_var" "$TMP/rdc_use.o" "$TMP/rdc_define.o"
    # Two device links in one library: rdc_use+rdc_define and rdc_b_use+rdc_b_define, each -dlink'ed on its
    # own (two .nv_fatbin images); both define the __device__ function rdc_lookup, so the units link only
    # within their own link. Each half is ld -r'ed and its host stub of rdc_lookup made local, so that the
    # host link sees no duplicate.
    local half
    for half in a b; do
        local use=rdc_use.cu define=rdc_define.cu
        if [ $half = b ]; then use=rdc_b_use.cu define=rdc_b_define.cu; fi
        nvcc "${sm90[@]}" -Xcompiler -fPIC -dc -o "$TMP/${half}_use.o" $use
        nvcc "${sm90[@]}" -Xcompiler -fPIC -dc -o "$TMP/${half}_define.o" $define
        nvcc "${sm90[@]}" -Xcompiler -fPIC -dlink -o "$TMP/${half}_link.o" "$TMP/${half}_use.o" "$TMP/${half}_define.o"
        ld -r -o "$TMP/${half}_all.o" "$TMP/${half}_use.o" "$TMP/${half}_define.o" "$TMP/${half}_link.o"
        objcopy --localize-symbol=_Z10rdc_lookupi "$TMP/${half}_all.o"
    done
    g++ -shared -o "$OUT/nv_rdc_two_links" "$TMP/a_all.o" "$TMP/b_all.o"
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
    nvcc "${two_arch[@]}" -fatbin -o "$OUT/nv_kern.fatbin" kern.cu
    nvcc -arch=sm_90 -cubin -o "$OUT/nv_kern_sm90.cubin" kern.cu
    nvcc -arch=sm_90 -ptx -o "$OUT/nv_kern_sm90.ptx" kern.cu

    # bin2c: the fatbin becomes a plain array in .rodata of a gcc-built executable (no wrapper, no section).
    (cd "$TMP" && cp "$OUT/nv_kern.fatbin" kern.fatbin &&
        bin2c --name kern_fatbin --type longlong --const kern.fatbin > kern_fatbin.h)
    gcc -O1 -I"$TMP" -o "$OUT/nv_bin2c" bin2c_main.c

    # Architecture variants.
    nvcc -fatbin -gencode arch=compute_90a,code=sm_90a -o "$OUT/nv_sm90a.fatbin" tiny.cu
    nvcc -fatbin -gencode arch=compute_100a,code=sm_100a -o "$OUT/nv_sm100a.fatbin" tiny.cu
    nvcc -fatbin -gencode "arch=compute_100f,code=[sm_100f,compute_100f]" -o "$OUT/nv_sm100f.fatbin" tiny.cu
    nvcc -fatbin -gencode arch=compute_120,code=sm_120 -o "$OUT/nv_sm120.fatbin" tiny.cu

    # NVVM / LTO-IR entries.
    nvcc -dc -gencode arch=compute_90,code=lto_90 -o "$OUT/nv_lto90.o" kern.cu
    nvcc -fatbin -gencode arch=compute_90,code=lto_90 -o "$OUT/nv_lto90.fatbin" tiny.cu
    nvcc -dc -dlto -arch=sm_90 -o "$TMP/kern_dlto.o" kern.cu
    nvcc -dc -dlto -arch=sm_90 -o "$TMP/rdc_dlto.o" rdc.cu
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

# Copies every fatbin container found by magic (docs/formats.md §1) into DIR/<n>.fatbin, so that
# cuobjdump can check containers it cannot find itself (bin2c arrays, files without section headers).
carve_fatbins() {
    python3 - "$1" "$2" <<'PY'
import struct, sys
data, out = open(sys.argv[1], "rb").read(), sys.argv[2]
pos = count = 0
while (pos := data.find(b"\x50\xed\x55\xba", pos)) >= 0:
    version, header_size, fat_size = struct.unpack_from("<HHQ", data, pos + 4)
    end = pos + 16 + fat_size
    entry = pos + 16
    while version == 1 and header_size == 16 and entry + 16 <= end <= len(data):
        entry_header, padded = struct.unpack_from("<IQ", data, entry + 4)
        if entry_header < 0x40:
            break
        entry += entry_header + padded
    if version == 1 and header_size == 16 and entry == end <= len(data):
        count += 1
        open(f"{out}/{count}.fatbin", "wb").write(data[pos:end])
        pos = end
    else:
        pos += 4
PY
}

verify_nvidia() {
    local cuobjdump
    cuobjdump=$(command -v cuobjdump ||
        python3 -c "import nvidia.cu13, os; print(os.path.join(nvidia.cu13.__path__[0], 'bin', 'cuobjdump'))")
    for f in "$OUT"/nv_*; do
        echo "== ${f##*/}"
        case $f in
            *.ptx) grep -E '^\.(version|target|address_size)|\.entry' "$f" ;;
            */nv_bin2c|*/nv_noshdr)
                rm -rf "$TMP/carved" && mkdir "$TMP/carved"
                carve_fatbins "$f" "$TMP/carved"
                for c in "$TMP"/carved/*.fatbin; do
                    echo "-- container carved by magic scan: ${c##*/}"
                    "$cuobjdump" -lelf -lptx "$c" 2>&1 || true
                done ;;
            *)
                "$cuobjdump" -all -lelf -lptx "$f" 2>&1 | grep -v '^cuobjdump info' || true
                "$cuobjdump" -all "$f" 2>/dev/null | grep -c '^Fatbin nvvm code' |
                    sed -n 's/^\([1-9][0-9]*\)$/NVVM entries: \1/p' || true ;;
        esac
    done
}

build_amd() {
    cd "$SRC"
    rm -f "$OUT"/amd_*
    local clang=$LLVM/clang-22 bundler=$LLVM/clang-offload-bundler
    # clang derives the default CUID (the __hip_cuid_<hash> symbol) from paths including the output's;
    # an explicit one per output keeps the build reproducible wherever it runs.
    hipcc() { "$clang" -x hip -nogpulib -nogpuinc -O2 -cuid="$(basename "$1" | tr -c 'A-Za-z0-9\n' _)" -o "$@"; }
    devonly() { hipcc "$1" --cuda-device-only --no-gpu-bundle-output "${@:2}"; }

    # Single code objects (ET_DYN, EM_AMDGPU): targets x code object versions x target-id features.
    devonly "$OUT/amd_gfx90a_xnack+_v4.hsaco" --offload-arch=gfx90a:xnack+ -mcode-object-version=4 hip_kern.hip
    devonly "$OUT/amd_gfx90a_v5.hsaco" --offload-arch=gfx90a -mcode-object-version=5 hip_kern.hip
    devonly "$OUT/amd_gfx942_sramecc+_xnack-_v5.hsaco" --offload-arch=gfx942:sramecc+:xnack- \
        -mcode-object-version=5 hip_kern.hip
    devonly "$OUT/amd_gfx942_v6.hsaco" --offload-arch=gfx942 -mcode-object-version=6 hip_kern.hip
    devonly "$OUT/amd_gfx1100_v4.hsaco" --offload-arch=gfx1100 -mcode-object-version=4 hip_kern.hip
    devonly "$OUT/amd_gfx1100_v6.hsaco" --offload-arch=gfx1100 -mcode-object-version=6 hip_kern.hip
    devonly "$OUT/amd_gfx1201_v5.hsaco" --offload-arch=gfx1201 -mcode-object-version=5 hip_kern.hip

    # Bundles. clang's own device-only output: plain bundle, payloads 4096-aligned, host entry /dev/null.
    hipcc "$OUT/amd_device_only.bundle" --cuda-device-only --offload-arch=gfx90a --offload-arch=gfx1100 \
        hip_kern.hip
    local targets=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+
    targets+=,hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-,hipv4-amdgcn-amd-amdhsa--gfx1100
    local inputs=(-input=/dev/null -input="$OUT/amd_gfx90a_xnack+_v4.hsaco"
                  -input="$OUT/amd_gfx942_sramecc+_xnack-_v5.hsaco" -input="$OUT/amd_gfx1100_v6.hsaco")
    "$bundler" -type=o -targets=$targets "${inputs[@]}" -output="$OUT/amd_plain.bundle"
    for v in 2 3; do
        COMPRESSED_BUNDLE_FORMAT_VERSION=$v "$bundler" -type=o -compress -targets=$targets "${inputs[@]}" \
            -output="$OUT/amd_ccob_v$v.bundle"
    done

    # Host side: clang -c gives objects with .hip_fatbin + .hipFatBinSegment; link them with stub runtime
    # entry points (hip_stubs.c) since no HIP runtime is installed.
    local two_arch=(--offload-arch=gfx90a --offload-arch=gfx1100)
    hipcc "$OUT/amd_hip_kern.o" -fPIC "${two_arch[@]}" -c hip_kern.hip
    hipcc "$TMP/hip_kern_ccob.o" -fPIC "${two_arch[@]}" --offload-compress -c hip_kern.hip
    hipcc "$TMP/hip_second_ccob.o" -fPIC "${two_arch[@]}" --offload-compress -c hip_second.hip
    "$clang" -O2 -fPIC -c -o "$TMP/hip_stubs.o" hip_stubs.c
    "$clang" -O2 -fPIC -DWITH_MAIN -c -o "$TMP/hip_stubs_main.o" hip_stubs.c
    "$clang" -o "$OUT/amd_hip_exe" "$OUT/amd_hip_kern.o" "$TMP/hip_stubs_main.o"
    "$clang" -no-pie -o "$OUT/amd_hip_nopie" "$OUT/amd_hip_kern.o" "$TMP/hip_stubs_main.o"
    "$clang" -fuse-ld=lld -shared -o "$OUT/amd_hip_ccob.so" "$TMP/hip_kern_ccob.o" "$TMP/hip_stubs.o"
    "$clang" -o "$OUT/amd_hip_two_tu" "$OUT/amd_hip_kern.o" "$TMP/hip_second_ccob.o" "$TMP/hip_stubs_main.o"
}

verify_amd() {
    for f in "$OUT"/amd_*; do
        echo "== ${f##*/}"
        case $f in
            *.hsaco)
                "$LLVM/llvm-readelf" -h "$f" | grep -E 'ABI Version|Type:|Flags:'
                "$LLVM/llvm-readelf" --notes "$f" | grep -E 'amdhsa.target|^      - \.name|\.name: ' ;;
            *.bundle)
                "$LLVM/clang-offload-bundler" --list --type=o --input="$f"
                case $f in *ccob*)
                    "$LLVM/clang-offload-bundler" --unbundle --verbose --type=o --input="$f" \
                        --targets=hipv4-amdgcn-amd-amdhsa--gfx1100 --output="$TMP/unbundled.hsaco" 2>&1 |
                        grep -E 'format version|method|Hashes match'
                    cmp "$TMP/unbundled.hsaco" "$OUT/amd_gfx1100_v6.hsaco" && echo "gfx1100 entry == amd_gfx1100_v6.hsaco" ;;
                esac ;;
            *)
                "$LLVM/llvm-readelf" -SW "$f" | grep -E 'hip'
                # llvm-objdump writes the extracted entries next to its input: give it a copy in $TMP.
                rm -rf "$TMP/offloading" && mkdir "$TMP/offloading" && cp "$f" "$TMP/offloading/"
                "$LLVM/llvm-objdump" --offloading "$TMP/offloading/${f##*/}" 2>&1 |
                    sed -n "s|^Extracting offload bundle: $TMP/offloading/|llvm-objdump extracted: |p" ;;
        esac
    done
}

# pe_kern.dll (x86-64) and pe_kern32.dll (i386): src/pe_kern.c, a DLL whose .nv_fatb holds nv_kern.fatbin and
# whose .nvFatBi wrapper points at it (see the source). lld writes the link time into the COFF header and the export directory: both are zeroed
# so the sample is the same bytes on every rebuild.
build_pe() {
    cd "$TMP"
    cp "$SRC/pe_kern.c" "$OUT/nv_kern.fatbin" .
    printf 'LIBRARY cudart64_12.dll\nEXPORTS\ncudaGetDeviceCount\n' > cudart64_12.def
    python3 -m ziglang dlltool -d cudart64_12.def -l libcudart64_12.a -m i386:x86-64
    python3 -m ziglang dlltool -d cudart64_12.def -l libcudart64_12_i386.a -m i386
    python3 -m ziglang cc -target x86_64-windows-gnu -shared -O2 -s -nostdlib -Wl,--entry=DllMainCRTStartup \
        -Wl,--build-id=none -o pe_kern.dll pe_kern.c -L. -lcudart64_12
    python3 -m ziglang cc -target x86-windows-gnu -shared -O2 -s -nostdlib -Wl,--entry=DllMainCRTStartup@12 \
        -Wl,--build-id=none -o pe_kern32.dll pe_kern.c -L. -lcudart64_12_i386
    python3 - pe_kern.dll pe_kern32.dll <<'PY'
import struct, sys
for path in sys.argv[1:]:
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        lfanew = struct.unpack_from("<I", data, 0x3C)[0]
        struct.pack_into("<I", data, lfanew + 8, 0)  # COFF TimeDateStamp
        optional = lfanew + 24
        magic = struct.unpack_from("<H", data, optional)[0]
        directories = optional + {0x20B: 112, 0x10B: 96}[magic]  # PE32+ / PE32
        export_rva = struct.unpack_from("<I", data, directories)[0]  # data directory 0
        sections = optional + struct.unpack_from("<H", data, lfanew + 20)[0]
        for i in range(struct.unpack_from("<H", data, lfanew + 6)[0]):
            _, vsize, va, raw_size, raw = struct.unpack_from("<8sIIII", data, sections + 40 * i)
            if va <= export_rva < va + raw_size:
                struct.pack_into("<I", data, raw + export_rva - va + 4, 0)  # export directory TimeDateStamp
        f.seek(0)
        f.write(data)
PY
    cp pe_kern.dll pe_kern32.dll "$OUT/"
}

case $SET in
    all) build_nvidia; build_amd; build_pe ;;
    nvidia) build_nvidia ;;
    amd) build_amd ;;
    pe) build_pe ;;
    *) echo "usage: $0 [all|nvidia|amd|pe]" >&2; exit 2 ;;
esac
if [ "${VERIFY:-0}" = 1 ]; then
    case $SET in all|nvidia) verify_nvidia ;; esac
    case $SET in all|amd) verify_amd ;; esac
fi
