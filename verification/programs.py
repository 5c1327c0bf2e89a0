"""The CUDA-program cases of the differential suite: sources in verification/cuda/, how each kernel is launched.

Each program is compiled by nvcc to PTX in every VARIANT (compute_* version × optimisation level), so the
same patterns reach fatkit as nvcc writes them at -O3, at lower NVVM optimisation, with -G and with
--use_fast_math. Inputs are drawn afresh on every run (runner.py); only deterministic outputs are compared
(integer atomics; no float atomics, whose order the hardware chooses).
"""

from __future__ import annotations

from dataclasses import dataclass, field

N = 1 << 20  # elements of a 1-D problem: enough work per launch to time more than the launch
BLOCK = 256


@dataclass(frozen=True)
class Param:
    kind: str  # in | out | inout | scalar
    dtype: str = "u32"
    count: int = N  # elements (in/inout) or bytes (out)
    random: str = "bits"  # bits | uniform | range
    low: float = 0
    high: float = 1
    value: float = 0

    def manifest(self) -> dict:
        spec = {"kind": self.kind, "dtype": self.dtype}
        if self.kind in ("in", "inout"):
            spec.update(count=self.count, random=self.random, low=self.low, high=self.high)
        elif self.kind == "out":
            spec.update(bytes=self.count)
        else:
            spec.update(value=self.value)
        return spec


@dataclass(frozen=True)
class Launch:
    kernel: str
    params: tuple[Param, ...]
    grid: tuple[int, int, int] = (N // BLOCK, 1, 1)
    block: tuple[int, int, int] = (BLOCK, 1, 1)
    shared: int = 0
    fast_math_ulp: int = 0  # f32 outputs only: the tolerance where nvcc's --use_fast_math made .approx code
    f64_outputs: bool = False  # every output word an f64: NaN results compare as NaN (sign and payload are open)
    name: str = ""  # the case's label when one kernel is launched more than one way (default: the kernel)

    @property
    def label(self) -> str:
        return self.name or self.kernel


@dataclass(frozen=True)
class Program:
    name: str
    source: str
    launches: tuple[Launch, ...] = field(default_factory=tuple)
    variants: tuple[tuple[str, str, tuple[str, ...]], ...] | None = None  # None: every VARIANT
    # more verification/cuda sources compiled with it by `nvcc -rdc=true`, one PTX module each: fatkit links
    # the modules (fatkit/translate/link.py), and the original is their sm_90 cubins linked by nvlink
    rdc_units: tuple[str, ...] = ()
    # a hand-written PTX source (verification/ptx/): (text, replacement) that makes the original ptxas accepts
    # out of what fatkit translates, where ptxas refuses a form with the same meaning
    original_edit: tuple[str, str] | None = None

    def built_variants(self) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
        return VARIANTS if self.variants is None else self.variants


def _in(dtype: str, random: str = "bits", low: float = 0, high: float = 1, count: int = N) -> Param:
    return Param("in", dtype, count, random, low, high)


def _out(nbytes: int) -> Param:
    return Param("out", count=nbytes)


def _n(value: int = N) -> Param:
    return Param("scalar", "s32", value=value)


FLOATS = dict(random="uniform", low=-8.0, high=8.0)
BLOCKS = N // BLOCK
MATRIX_BLOCKS = 512  # blocks of the matrix program's launches

WARP_LAUNCHES = (
    Launch("warp_sum_shfl_down", (_in("s32", "range", -1000, 1000), _out(4 * N // 32), _n())),
    Launch("warp_scan_shfl_up", (_in("u32"), _out(4 * N), _n())),
    Launch("warp_max_xor_f32", (_in("f32", **FLOATS), _out(4 * N), _n())),
    Launch("warp_rotate_idx", (_in("u32"), _out(4 * N), _n(), Param("scalar", "s32", value=5))),
    Launch("ballot_compact", (_in("s32"), _out(4 * N), _out(4 * N // 32), _n())),
    Launch("votes", (_in("s32", "range", -10, 2000000), _out(4 * N), _n(N - 40))),
    Launch("divergent_ballot", (_in("s32"), _out(4 * N), _n(N - 13)), block=(96, 1, 1), grid=(N // 96 + 1, 1, 1)),
    Launch("match_groups", (_in("s32"), _out(4 * N), _n())),
    Launch("redux", (_in("u32"), _out(4 * N), _n())),
)

PROGRAMS = (
    Program("reduce", "reduce.cu", (
        Launch("block_sum_f32", (_in("f32", **FLOATS), _out(4 * BLOCKS), _n())),
        Launch("block_minmax_i32", (_in("s32"), _out(8 * BLOCKS), _n())),
        Launch("block_scan_u32", (_in("u32", "range", 0, 1000), _out(4 * N), _n())),
        Launch("dot_f64", (_in("f64", **FLOATS), _in("f64", **FLOATS), _out(8 * 64), _n()), grid=(64, 1, 1),
               f64_outputs=True),
    )),
    Program("warp", "warp.cu", WARP_LAUNCHES),
    # the warp kernels with 160-thread blocks: five warps, so the last emulated 64-lane wave is half full
    Program("warp_blocks160", "warp.cu", tuple(
        Launch(launch.kernel, launch.params, grid=(N // 160, 1, 1), block=(160, 1, 1),
               name=f"{launch.kernel}.block160")
        for launch in WARP_LAUNCHES if launch.kernel != "divergent_ballot")),
    Program("memory", "memory.cu", (
        Launch("histogram_shared", (_in("u32"), _out(4 * 64), _n()), grid=(32, 1, 1)),
        Launch("atomics_mix", (_in("s32", "range", 0, 1 << 30), Param("inout", "s32", 8, "range", 0, 1),
                               Param("inout", "u64", 1, "range", 0, 1), _n())),
        Launch("stencil7", (_in("f32", **FLOATS), _out(4 * N), _n(N - 100))),
        Launch("transpose32", (_in("f32", **FLOATS, count=512 * 512), _out(4 * 512 * 512), _n(512)),
               grid=(16, 16, 1), block=(32, 8, 1)),
        Launch("sgemm_tiled", (_in("f32", **FLOATS, count=256 * 256), _in("f32", **FLOATS, count=256 * 256),
                               _out(4 * 256 * 256), _n(256)), grid=(16, 16, 1), block=(16, 16, 1)),
        Launch("bitonic_sort512", (Param("inout", "u32", 512 * 64),), grid=(64, 1, 1)),
        # __device__/__constant__ tables of addresses of __device__ arrays: generic(var)+offset initialisers
        Launch("address_tables", (_in("u32"), _out(16 * N), _n())),
    )),
    Program("control", "control.cu", (
        Launch("divergent", (_in("s32"), _out(4 * N), _n())),
        Launch("calls", (_in("s32"), _in("f32", **FLOATS), _out(4 * N), _out(4 * N), _n())),
        Launch("early_exit", (_in("f32", **FLOATS), _out(4 * N), _n(), Param("scalar", "f32", value=40.0))),
    )),
    Program("math", "math.cu", (
        Launch("int_mix", (_in("u32"), _out(4 * N), _n())),
        Launch("float_libm", (_in("f32", **FLOATS), _out(24 * N), _n()), fast_math_ulp=4),
        Launch("double_libm", (_in("f64", **FLOATS), _out(32 * N), _n())),
        Launch("conversions", (_in("f32", **FLOATS), _out(16 * N), _out(4 * N), _out(8 * N), _n())),
    )),
    # ldmatrix/movmatrix need sm_75+, stmatrix sm_90 (its kernel writes zeros below); blocks of 128 threads and
    # of 96, whose last emulated 64-lane wave holds one warp; the tile is one 16-byte row a thread
    Program("matrix", "matrix.cu", tuple(
        Launch(kernel, (_in("u32", count=4 * MATRIX_BLOCKS * threads), _in("u32", count=MATRIX_BLOCKS * threads),
                        _out(words * MATRIX_BLOCKS * threads)),
               grid=(MATRIX_BLOCKS, 1, 1), block=(threads, 1, 1), shared=16 * threads, name=f"{kernel}.block{threads}")
        for kernel, words in (("ldmatrix_forms", 4 * 14), ("ldmatrix_generic_movmatrix", 4 * 4),
                              ("stmatrix_forms", 6 * 16))
        for threads in (128, 96)),
        variants=(("O3", "compute_90", ()), ("O3", "compute_80", ()), ("G", "compute_90", ("-G",)))),
    # cp.async pipelines (sm_80+), an mbarrier ring (try_wait on sm_90, test_wait below), and an sm_90 bulk copy
    # on an mbarrier with bulk store/reductions (compiled out below compute_90: its outputs stay as they were)
    Program("asynccopy", "asynccopy.cu", (
        *(Launch(kernel, (_in("u32"), _out(N), _n(N - 1000)), grid=(N // 4096, 1, 1), block=(128, 1, 1))
          for kernel in ("cp_async_pipeline", "pipeline_primitives")),
        Launch("mbarrier_ring", (_in("u32"), _out(4 * 64 * (N // 1024))), grid=(N // 1024, 1, 1), block=(128, 1, 1)),
        Launch("bulk_copy_mbarrier", (_in("u32"), _out(4 * N), Param("inout", "u32", 1024),
                                      Param("inout", "u32", 1024)), grid=(N // 1024, 1, 1), block=(256, 1, 1)),
    ), variants=(("O3", "compute_90", ()), ("O3", "compute_80", ()), ("O1", "compute_90", ("-Xcicc", "-O1")),
                 ("G", "compute_90", ("-G",)))),
    # device malloc/free (fatkit's heap against CUDA's) and cooperative groups' grid.sync() on a co-resident
    # grid of 128 blocks (the runner launches modules reading %envreg cooperatively); every variant builds
    Program("runtime", "runtime.cu", (
        Launch("heap_per_thread", (_in("u32", count=64 * 256), _out(4 * 64 * 256), _n(64 * 256)), grid=(64, 1, 1)),
        Launch("heap_per_block", (_in("u32", count=1024 * 256), _out(4 * 1024 * 256), _n(1024 * 256)),
               grid=(1024, 1, 1)),
        Launch("grid_rounds", (_in("u32", count=128 * 256), _out(4 * 128 * 256), _out(4 * 4 * 128), _n(128 * 256)),
               grid=(128, 1, 1)),
    )),
    # warp-level mma, dense and 2:4 sparse, every shape and type fatkit lowers (sm_89/sm_90 forms write nothing
    # below compute_90), and the WMMA API: 2^16 threads; (kernel, bytes of D a thread writes)
    Program("mma", "mma.cu", tuple(
        Launch(kernel, (_in("u32"), _out(words << 16)), grid=((1 << 16) // BLOCK, 1, 1)) for kernel, words in (
            ("mma_m16n8k16_f32_f16", 16), ("mma_m16n8k16_f32_bf16", 16), ("mma_m16n8k16_f16_f16", 8),
            ("mma_m16n8k8_f32_f16", 16), ("mma_m16n8k8_f32_bf16", 16), ("mma_m16n8k8_f16_f16", 8),
            ("mma_m16n8k8_tf32", 16), ("mma_m16n8k8_tf32_low_bits_set", 16), ("mma_m16n8k4_tf32", 16),
            ("mma_m16n8k32_s8", 16), ("mma_m16n8k32_u8_s8_satfinite", 16), ("mma_m16n8k16_s8_u8_satfinite", 16),
            ("mma_m8n8k16_s8_satfinite", 8), ("mma_m16n8k64_s4", 16), ("mma_m16n8k32_u4_s4_satfinite", 16),
            ("mma_m8n8k32_s4_u4", 8), ("mma_m8n8k128_b1_xor", 8), ("mma_m16n8k128_b1_and", 16),
            ("mma_m16n8k256_b1_xor", 16), ("mma_m16n8k32_e4m3", 16), ("mma_m16n8k32_e5m2_e4m3", 16),
            ("mma_m8n8k4_f64", 16), ("mma_m16n8k4_f64", 32), ("mma_m16n8k8_f64", 32), ("mma_m16n8k16_f64", 32),
            ("mma_m8n8k4_f16_row_col_f32", 32), ("mma_m8n8k4_f16_col_row_f16_to_f32", 32),
            ("mma_m8n8k4_f16_row_row_f16", 16), ("mma_sp_m16n8k32_f16", 16), ("mma_sp_m16n8k32_bf16_selector1", 16),
            ("mma_sp_m16n8k16_f16_selector2", 16), ("mma_sp_m16n8k16_bf16_selector3", 16),
            ("mma_sp_m16n8k32_s8_u8_satfinite_selector1", 16), ("mma_sp_m16n8k64_u8", 16),
            ("mma_sp_m16n8k64_e4m3", 16), ("wmma_m16n16k16_f16_f32", 32), ("wmma_m32n8k16_f16_f16", 16),
            ("wmma_m8n32k16_bf16", 32), ("wmma_m16n16k16_s8", 32), ("wmma_m16n16k8_tf32", 32),
            ("wmma_m8n8k4_f64", 16), ("wmma_m8n8k32_s4", 8), ("wmma_m8n8k128_b1", 8))),
        variants=(("O3", "compute_90", ()), ("O3", "compute_80", ()), ("G", "compute_90", ("-G",)))),
)

PTX_VARIANTS = (("ptx", "sm_90", ()),)
WGMMA_BLOCKS = 64  # blocks of the wgmma program's launches (a warpgroup each)  # a hand-written PTX program: its text as it is
RDC_VARIANTS = (("O3", "compute_90", ()), ("O3", "compute_80", ()), ("G", "compute_90", ("-G",)))
PROGRAMS += (
    # NCCL's unsized `.shared .align 16 .b8 ncclShmem[];` (clang's NVPTX backend writes it; ptxas 13.0 refuses
    # it as "incomplete type"): fatkit translates it as dynamic shared memory; the original run on the H200 is
    # the same text with `.extern`, the form of that meaning ptxas accepts; two dynamic sizes a launch
    Program("shared_unsized", "shared_unsized.ptx", tuple(
        Launch("unsized_shared", (_in("u32"), _out(16 * N), _n()), shared=shared, name=f"unsized_shared.dyn{shared}")
        for shared in (4 * BLOCK + 4, 40000)),
        variants=PTX_VARIANTS,
        original_edit=(".shared .align 16 .b8 ncclShmem[];", ".extern .shared .align 16 .b8 ncclShmem[];")),
    # .global address initialisers in both spellings: generic(var)+offset and var+offset
    Program("address_init", "address_init.ptx", (Launch("address_init", (_in("u32"), _out(24 * N), _n(N - 5))),),
            variants=PTX_VARIANTS),
    # wgmma.mma_async (sm_90a) against fatkit's mma.sync steps: descriptor A and register A, K-major and MN-major
    # tiles, every swizzle mode (param 2), a start advanced into the swizzle row (param 3), scale-d both ways
    # (param 4); small integers (exact in any order), then the same kernels on random f16 patterns of spread
    # exponents and random f32 C (param 5 = 1: ".random"), whose D bits show whether the H200's wgmma sums
    # like mma.sync m16n8k16 (fatkit's sm_90 re-lowering runs it as mma.sync steps)
    Program("wgmma", "wgmma.ptx", tuple(
        Launch(kernel, (_in("s32", "bits" if random else "range", -8, 9, count=WGMMA_BLOCKS * 6144),
                        _out(WGMMA_BLOCKS * 128 * 32 * 4), Param("scalar", "s32", value=mode),
                        Param("scalar", "s32", value=shift), Param("scalar", "s32", value=accumulate),
                        Param("scalar", "s32", value=random),
                        # wgmma_desc: swizzle patterns `rows` 128-byte rows past their alignment, the matrix
                        # base offset set to match
                        *((Param("scalar", "s32", value=rows),) if kernel == "wgmma_desc" else ())),
               grid=(WGMMA_BLOCKS, 1, 1), block=(128, 1, 1),
               name=f"{kernel}.mode{mode}.shift{shift}.acc{accumulate}" + (f".base{rows}" if rows else "")
               + (".random" if random else ""))
        for random in (0, 1)
        for kernel, mode, shift, accumulate, rows in (
            ("wgmma_desc", 0, 0, 1, 0), ("wgmma_desc", 1, 0, 1, 0), ("wgmma_desc", 1, 32, 1, 0),
            ("wgmma_desc", 2, 0, 1, 0), ("wgmma_desc", 2, 32, 1, 0), ("wgmma_desc", 3, 0, 1, 0),
            ("wgmma_desc", 1, 0, 1, 3), ("wgmma_desc", 2, 32, 1, 1), ("wgmma_desc", 3, 0, 1, 5),
            ("wgmma_regs", 0, 0, 0, 0), ("wgmma_regs", 1, 64, 1, 0), ("wgmma_regs", 3, 0, 1, 0),
            ("wgmma_trans", 0, 0, 1, 0), ("wgmma_trans", 1, 0, 1, 0), ("wgmma_trans", 2, 0, 1, 0),
            ("wgmma_trans", 3, 0, 1, 0))) + tuple(
        # wgmma.mma_async.sp (sparse A, m64n64k32): swizzle modes 0-2 (param 2), sparsity selector (param 3)
        Launch("wgmma_sparse", (_in("s32", "bits" if random else "range", -8, 9, count=WGMMA_BLOCKS * 8192),
                                _out(WGMMA_BLOCKS * 128 * 32 * 4), Param("scalar", "s32", value=mode),
                                Param("scalar", "s32", value=selector), Param("scalar", "s32", value=accumulate),
                                Param("scalar", "s32", value=random)),
               grid=(WGMMA_BLOCKS, 1, 1), block=(128, 1, 1),
               name=f"wgmma_sparse.mode{mode}.selector{selector}.acc{accumulate}" + (".random" if random else ""))
        for random in (0, 1) for mode, selector, accumulate in ((0, 0, 1), (1, 1, 1), (2, 0, 0), (2, 1, 1))),
        variants=PTX_VARIANTS),
    # -rdc device code: rdc_main.cu's kernel calls functions and reads variables that rdc_lib.cu defines
    Program("rdc", "rdc_main.cu", (
        Launch("rdc_calls", (_in("u32"), _in("f32", **FLOATS), _out(8 * N), _out(4 * N), _n(N - 77))),),
        variants=RDC_VARIANTS, rdc_units=("rdc_lib.cu",)),
)

# (name, nvcc -arch, extra nvcc flags)
VARIANTS = (
    ("O3", "compute_90", ()),
    ("O3", "compute_80", ()),
    ("O1", "compute_75", ("-Xcicc", "-O1")),
    ("G", "compute_90", ("-G",)),
    ("fastmath", "compute_86", ("--use_fast_math",)),
)
