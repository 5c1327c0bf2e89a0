// HIP kernels written without HIP headers (no ROCm here): the attributes are what hip_runtime.h expands to.
#define __global__ __attribute__((global))

// The host-side kernel stub clang generates calls hipLaunchKernel; a declaration is all it needs.
struct dim3 { unsigned x, y, z; };
extern "C" int hipLaunchKernel(const void* f, dim3 grid, dim3 block, void** args, unsigned long shmem, void* stream);
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))

struct Params {
    float scale;
    int n;
    const float* src;
};

__device__ static inline int global_id() {
    return __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
}

extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = global_id();
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void with_struct(Params prm, float* out) {
    int i = __builtin_amdgcn_workitem_id_x();
    if (i < prm.n) out[i] = prm.scale * prm.src[i];
}

extern "C" __global__ __attribute__((amdgpu_flat_work_group_size(1, 128))) void reduce_shared(const float* in, float* out) {
    __shared__ float tile[128];
    unsigned t = __builtin_amdgcn_workitem_id_x();
    tile[t] = in[t];
    __builtin_amdgcn_s_barrier();
    if (t == 0) {
        float s = 0;
        for (int j = 0; j < 128; ++j) s += tile[j];
        out[0] = s;
    }
}

template <typename T>
__global__ void fill(T* p, T v) { p[__builtin_amdgcn_workitem_id_x()] = v; }
template __global__ void fill<int>(int*, int);
