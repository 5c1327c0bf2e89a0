// The little of HIP that kernels.hip and kernels_ftz.hip need, from clang's own builtins (no HIP headers, no device libraries):
// clang -x hip --offload-arch=gfx942 -nogpulib -nogpuinc -include builtins.h.
#pragma once

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
// CUDA's: clang gives the kernel amdgpu-flat-work-group-size 1..threads, as kernels.cu's bound tells nvcc
#define __launch_bounds__(threads) __attribute__((launch_bounds(threads)))

#define TID __builtin_amdgcn_workitem_id_x()
#define TID_Y __builtin_amdgcn_workitem_id_y()
#define BID __builtin_amdgcn_workgroup_id_x()
#define BID_Y __builtin_amdgcn_workgroup_id_y()
// hidden_group_size_x and hidden_block_count_x of code object v5's implicit arguments
#define BDIM (unsigned)(*(const unsigned short __attribute__((address_space(4))) *) \
                        ((const char __attribute__((address_space(4))) *)__builtin_amdgcn_implicitarg_ptr() + 12))
#define GDIM (*(const unsigned __attribute__((address_space(4))) *)__builtin_amdgcn_implicitarg_ptr())

#define SYNC()                                             \
  do {                                                     \
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); \
    __builtin_amdgcn_s_barrier();                          \
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); \
  } while (0)

#define ATOMIC_ADD_SHARED(p, v) __hip_atomic_fetch_add((p), (v), __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP)
#define ATOMIC_ADD_GLOBAL(p, v) __hip_atomic_fetch_add((p), (v), __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT)

typedef _Float16 half2 __attribute__((ext_vector_type(2)));
typedef _Float16 half4 __attribute__((ext_vector_type(4)));
typedef _Float16 half16 __attribute__((ext_vector_type(16)));
typedef unsigned uint2 __attribute__((ext_vector_type(2)));
typedef unsigned uint4 __attribute__((ext_vector_type(4)));
typedef unsigned uint8 __attribute__((ext_vector_type(8)));
typedef float float4 __attribute__((ext_vector_type(4)));
typedef float float8 __attribute__((ext_vector_type(8)));

static __device__ inline unsigned lane_id() {
#if defined(__GFX9__)  // wave64; gfx10+ compile for wave32 by default
  return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
#else
  return __builtin_amdgcn_mbcnt_lo(~0u, 0u);
#endif
}

// CUDA's 32-lane warp collectives, on waves of 32 or 64 lanes
static __device__ inline float shfl_xor32(float v, int mask) {
  return __builtin_bit_cast(float, __builtin_amdgcn_ds_bpermute((int)((lane_id() ^ mask) << 2),
                                                                __builtin_bit_cast(int, v)));
}
static __device__ inline unsigned ballot32(bool p) {
#if defined(__GFX9__)  // wave64; gfx10+ compile for wave32 by default
  return (unsigned)(__builtin_amdgcn_ballot_w64(p) >> (lane_id() & 32));
#else
  return __builtin_amdgcn_ballot_w32(p);
#endif
}
