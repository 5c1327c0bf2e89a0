"""Verdicts: what a binary (or a tree of them) means for running on AMD GPUs, and why."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable

from fatkit.errors import FatkitError
from fatkit.extract.kernels import kernel_names
from fatkit.extract.model import Binary, Container, Entry, Verdict

# NVIDIA libraries a binary may need (DT_NEEDED), the library they are, and what replaces them on AMD.
# Order matters: the first pattern that matches a soname wins (cublasLt before cublas).
NVIDIA_LIBRARIES: tuple[tuple[str, str, str], ...] = (
    (r"libcuda\.so", "CUDA driver", "HIP runtime (libamdhip64), or a CUDA-on-AMD shim such as ZLUDA"),
    (r"libcudart\.so", "CUDA runtime", "HIP runtime (libamdhip64)"),
    (r"libcublasLt\.so", "cuBLASLt", "hipBLASLt"),
    (r"libcublas\.so", "cuBLAS", "hipBLAS / rocBLAS"),
    (r"libcudnn\w*\.so", "cuDNN", "MIOpen"),
    (r"libcufftw\.so", "cuFFTW", "hipFFTW / rocFFT"),
    (r"libcufft\.so", "cuFFT", "hipFFT / rocFFT"),
    (r"libcurand\.so", "cuRAND", "hipRAND / rocRAND"),
    (r"libcusparseLt\.so", "cuSPARSELt", "hipSPARSELt"),
    (r"libcusparse\.so", "cuSPARSE", "hipSPARSE / rocSPARSE"),
    (r"libcusolverMg\.so", "cuSOLVERMg", "none (multi-GPU solvers have no ROCm counterpart)"),
    (r"libcusolver\.so", "cuSOLVER", "hipSOLVER / rocSOLVER"),
    (r"libcutensor\w*\.so", "cuTENSOR", "hipTensor"),
    (r"libnccl\.so", "NCCL", "RCCL"),
    (r"libnvrtc\w*\.so", "NVRTC", "hipRTC"),
    (r"libnvJitLink\.so", "nvJitLink", "amd_comgr"),
    (r"libnvjpeg\.so", "nvJPEG", "rocJPEG"),
    (r"libnvToolsExt\.so|libnvtx\w*\.so", "NVTX", "rocTX"),
    (r"libcupti\.so", "CUPTI", "rocprofiler-sdk"),
    (r"libnvidia-ml\.so", "NVML", "AMD SMI (libamd_smi) / ROCm SMI"),
    (r"libnpp\w*\.so", "NPP", "none in ROCm (port to hipCV/MIVisionX or own kernels)"),
    (r"libcufile\w*\.so", "cuFile (GPUDirect Storage)", "hipFile"),
    (r"libnvblas\.so", "NVBLAS", "none (call hipBLAS/rocBLAS directly)"),
    (r"libcudss\.so", "cuDSS", "none in ROCm"),
    (r"libnvshmem\w*\.so", "NVSHMEM", "rocSHMEM"),
)
# The same for the DLLs a Windows image imports (matched without regard to case, as Windows names files),
# with the DLLs of AMD's HIP SDK for Windows that replace them. `amdhip64_<n>.dll` carries the ROCm major
# version (amdhip64_6.dll, amdhip64_7.dll); NVIDIA's DLLs carry their CUDA major version (cudart64_12.dll).
WINDOWS_NVIDIA_LIBRARIES: tuple[tuple[str, str, str], ...] = (
    (r"nvcuda\.dll", "CUDA driver", "HIP runtime (amdhip64_*.dll), or a CUDA-on-AMD shim such as ZLUDA"),
    (r"cudart64_\w+\.dll", "CUDA runtime", "HIP runtime (amdhip64_*.dll)"),
    (r"cublasLt64_\w+\.dll", "cuBLASLt", "hipBLASLt (hipblaslt.dll)"),
    (r"cublas64_\w+\.dll", "cuBLAS", "hipBLAS / rocBLAS (hipblas.dll, rocblas.dll)"),
    (r"cudnn\w*64_\w+\.dll", "cuDNN", "MIOpen (MIOpen.dll)"),
    (r"cufftw64_\w+\.dll", "cuFFTW", "hipFFTW / rocFFT"),
    (r"cufft64_\w+\.dll", "cuFFT", "hipFFT / rocFFT (hipfft.dll, rocfft.dll)"),
    (r"curand64_\w+\.dll", "cuRAND", "hipRAND / rocRAND (hiprand.dll, rocrand.dll)"),
    (r"cusparse64_\w+\.dll", "cuSPARSE", "hipSPARSE / rocSPARSE (hipsparse.dll, rocsparse.dll)"),
    (r"cusolverMg64_\w+\.dll", "cuSOLVERMg", "none (multi-GPU solvers have no ROCm counterpart)"),
    (r"cusolver64_\w+\.dll", "cuSOLVER", "hipSOLVER / rocSOLVER (hipsolver.dll, rocsolver.dll)"),
    (r"nvrtc64_\w+\.dll", "NVRTC", "hipRTC (hiprtc*.dll)"),
    (r"nvJitLink_\w+\.dll", "nvJitLink", "amd_comgr (amd_comgr*.dll)"),
    (r"nvToolsExt64_\w+\.dll", "NVTX", "rocTX"),
    (r"cupti64_\w+\.dll", "CUPTI", "rocprofiler-sdk"),
    (r"nvml\.dll", "NVML", "AMD SMI / ROCm SMI"),
    (r"npp\w*64_\w+\.dll", "NPP", "none in ROCm (port to hipCV/MIVisionX or own kernels)"),
    (r"nvjpeg64_\w+\.dll", "nvJPEG", "rocJPEG"),
)
_LIBRARY_PATTERNS = [(re.compile(rf"^(?:{pattern})"), name, amd) for pattern, name, amd in NVIDIA_LIBRARIES]
_LIBRARY_PATTERNS += [(re.compile(rf"^(?:{pattern})$", re.IGNORECASE), name, amd)
                      for pattern, name, amd in WINDOWS_NVIDIA_LIBRARIES]


def nvidia_libraries(needed: Iterable[str]) -> tuple[dict[str, str], ...]:
    """The NVIDIA libraries among shared-object names (DT_NEEDED) or imported DLL names, with their AMD
    counterparts: [{"soname", "library", "amd"}]."""
    out = []
    for soname in needed:
        for pattern, name, amd in _LIBRARY_PATTERNS:
            if pattern.match(soname):
                out.append({"soname": soname, "library": name, "amd": amd})
                break
    return tuple(out)


RELOCATABLE_FATBIN_SECTIONS = ("__nv_relfatbin", "__nv_rel")  # ELF, and its 8-byte cut in PE images


def _arch_key(arch: str) -> tuple[int, str]:
    digits = re.search(r"\d+", arch)
    return (int(digits.group()) if digits else 0, arch)


def _target_key(target: str) -> tuple[int, str]:
    """gfx908 before gfx1030: shorter processor names are older generations."""
    processor = target.split(":")[0]
    return (len(processor), target)


def _names(binary: Binary, entries: Iterable[Entry]) -> set[str] | None:
    """Kernel names of the entries; None (and an error on the binary) when one cannot be read."""
    names: set[str] = set()
    for entry in entries:
        if entry.error is not None:
            return None
        try:
            names.update(kernel_names(entry))
        except FatkitError as exc:
            entry.error = exc.message
            binary.errors.append(exc.located(binary.path))
            return None
    return names


def _covered(name: str, ptx_names: set[str]) -> bool:
    if name in ptx_names:
        return True
    # -rdc links rename static kernels to __nv_static_<id>__<mangled name>
    return name.startswith("__nv_static_") and any(name.endswith(p) for p in ptx_names)


# Cubin-only modules are read to see whether they hold kernels at all (nvcc's device-link stub holds none;
# 1025 of cuBLASLt's modules hold only data) when that is cheap: uncompressed, or small once decompressed.
# Bigger compressed cubins are taken to hold code: decompressing them all would cost seconds on big libraries.
CHEAP_CUBIN_BYTES = 64 * 1024


def _module_without_ptx(binary: Binary, container: Container, relocatable_ptx: bool) -> bool:
    """Whether a fatbin without PTX blocks AMD: it has kernels that no PTX in the binary provides."""
    cubins = [e for e in container.entries if e.kind == "elf"]
    if not cubins:
        return True  # NVVM/LTO IR only
    first = cubins[0]
    if first.compression is None or (first.size or first.stored_size) <= CHEAP_CUBIN_BYTES:
        names = _names(binary, [first])
        if names is not None and not names:
            return False  # no kernels: nothing to translate
    # The device-link image of an -rdc build holds the kernels of relocatable objects whose PTX is present.
    return not (container.wrapper and container.wrapper.get("version") == 2 and relocatable_ptx)


def judge(binary: Binary, *, by_kernel: bool = False) -> Verdict:
    """The verdict for one binary: module by module (fast), or kernel by kernel (reads every entry)."""
    entries = binary.entries
    ptx_archs = sorted({e.arch for e in entries if e.kind == "ptx"}, key=_arch_key)
    cubin_archs = sorted({e.arch for e in entries if e.kind == "elf"}, key=_arch_key)
    amd_targets = sorted({e.arch for e in entries if e.kind == "hsaco"}, key=_target_key)
    libraries = nvidia_libraries(binary.needed)
    common: dict[str, Any] = dict(ptx_archs=tuple(ptx_archs), cubin_archs=tuple(cubin_archs),
                                  amd_targets=tuple(amd_targets), libraries=libraries)
    modules = [c for c in binary.containers if c.vendor == "nvidia"]
    if not modules:
        if amd_targets:
            return Verdict("native", f"already holds AMD code objects for {', '.join(amd_targets)}", **common)
        reason = "no NVIDIA or AMD device code"
        if binary.notes:
            reason += f" ({binary.notes[0].split(' (')[0].split(':')[0]})"
        elif libraries:
            reason += f"; uses {', '.join(sorted({x['library'] for x in libraries}))} (host calls only)"
        return Verdict("none", reason, **common)
    if by_kernel:
        return _judge_kernels(binary, common)

    def has_ptx(c: Container) -> bool:
        return any(e.kind == "ptx" for e in c.entries)

    relocatable = [c for c in modules if c.section in RELOCATABLE_FATBIN_SECTIONS]
    relocatable_ptx = bool(relocatable) and all(has_ptx(c) for c in relocatable)
    blocking = [c for c in modules if not has_ptx(c) and _module_without_ptx(binary, c, relocatable_ptx)]
    if not blocking:
        if not ptx_archs:
            return Verdict("yes", "no module holds kernels: nothing needs translating", **common)
        return Verdict("yes", f"PTX ({', '.join(ptx_archs)}) in every module with kernels ({len(modules)})",
                       **common)
    if not ptx_archs:
        return _no_ptx(common)
    return Verdict("partial", f"{len(blocking)} of {len(modules)} modules have no PTX, only "
                              f"{_what_blocks(blocking)}; the others have PTX ({', '.join(ptx_archs)})", **common)


def _what_blocks(blocking: list[Container]) -> str:
    """What modules without PTX hold instead: `cubins (sm_80, sm_90)`, `NVVM/LTO IR (nvvm)`, or both."""
    held = []
    for kind, name in (("elf", "cubins"), ("nvvm", "NVVM/LTO IR")):
        archs = sorted({e.arch for c in blocking for e in c.entries if e.kind == kind}, key=_arch_key)
        if archs:
            held.append(f"{name} ({', '.join(archs)})")
    return " and ".join(held) or "entries fatkit does not recognise"


def _no_ptx(common: dict[str, Any]) -> Verdict:
    if not common["cubin_archs"]:
        return Verdict("no", "only NVVM/LTO IR (obfuscated by nvcc): nothing fatkit can translate", **common)
    return Verdict("no", f"cubin only ({', '.join(common['cubin_archs'])}): no PTX to translate", **common)


def _judge_kernels(binary: Binary, common: dict[str, Any]) -> Verdict:
    ptx_names = _names(binary, [e for e in binary.entries if e.kind == "ptx"]) or set()
    cubin_names = set()
    for entry in binary.entries:
        if entry.kind == "elf":
            cubin_names |= _names(binary, [entry]) or set()
    missing = tuple(sorted(n for n in cubin_names if not _covered(n, ptx_names)))
    total = len(ptx_names) + len(missing)  # cubin kernels with PTX are the PTX kernels themselves
    common.update(kernels_total=total, kernels_without_ptx=missing)
    ptx_archs = ", ".join(common["ptx_archs"])
    if not missing:
        if not ptx_archs:
            return Verdict("yes", "no kernels: nothing needs translating", **common)
        return Verdict("yes", f"PTX ({ptx_archs}) for every kernel ({total})", **common)
    if not ptx_archs:
        return _no_ptx(common)
    return Verdict("partial", f"{len(missing)} of {total} kernels have no PTX, only cubins "
                              f"({', '.join(common['cubin_archs'])}); the rest have PTX ({ptx_archs})", **common)


def summarize(binaries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Totals over serialised binaries (a tree or a wheel): counts per verdict, archs, libraries."""
    verdicts: Counter[str] = Counter()
    ptx, cubin, amd, libs = set(), set(), set(), {}
    count = containers = entries = errors = 0
    hashes: list[str] = []
    for b in binaries:
        count += 1
        verdict = b["verdict"]
        verdicts[verdict["amd"]] += 1
        ptx.update(verdict["ptx_archs"])
        cubin.update(verdict["cubin_archs"])
        amd.update(verdict["amd_targets"])
        for lib in verdict["libraries"]:
            libs[lib["library"]] = lib["amd"]
        containers += len(b["containers"])
        entries += sum(len(c["entries"]) for c in b["containers"])
        hashes.extend(e["hash"] for c in b["containers"] for e in c["entries"] if "hash" in e)
        errors += len(b["errors"])
    with_code = verdicts["yes"] + verdicts["partial"] + verdicts["no"]
    if with_code == 0:
        overall = "native" if verdicts["native"] else "none"
    elif verdicts["yes"] == with_code:
        overall = "yes"
    elif verdicts["no"] == with_code:
        overall = "no"
    else:
        overall = "partial"
    summary: dict[str, Any] = {
        "binaries": count,
        "containers": containers,
        "entries": entries,
        "errors": errors,
        "verdicts": dict(sorted(verdicts.items())),
        "amd": overall,
        "ptx_archs": sorted(ptx, key=_arch_key),
        "cubin_archs": sorted(cubin, key=_arch_key),
        "amd_targets": sorted(amd, key=_target_key),
        "libraries": [{"library": k, "amd": v} for k, v in sorted(libs.items())],
    }
    if hashes:  # with --hashes: identical payloads across containers and binaries
        summary["duplicate_entries"] = len(hashes) - len(set(hashes))
    return summary
