// Small CUDA TU exercising the kernel shapes fatkit's parsers must list.
#include <cuda_runtime.h>

struct Params {              // struct passed by value (aggregate .param)
    float scale;
    int n;
    const float* src;
};

__global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

namespace {                  // internal-linkage kernel (STB_LOCAL, no .visible)
__global__ void hidden_kernel(float* p) { p[threadIdx.x] *= 2.0f; }
}

static __global__ void static_kernel(int* p) { p[threadIdx.x] += 1; }

template <typename T>
__global__ void fill(T* p, T v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}

__global__ void __launch_bounds__(128, 2) reduce_shared(const float* in, float* out) {
    __shared__ float tile[128];
    tile[threadIdx.x] = in[blockIdx.x * 128 + threadIdx.x];
    __syncthreads();
    for (int s = 64; s > 0; s >>= 1) {
        if (threadIdx.x < s) tile[threadIdx.x] += tile[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = tile[0];
}

__global__ void with_struct(Params prm, float* out) {
    int i = threadIdx.x;
    if (i < prm.n) out[i] = prm.scale * prm.src[i];
}

// Used by rdc.cu's kernel when both TUs are built with -rdc=true.
__device__ float rdc_helper(float v) { return v * 3.0f + 1.0f; }

void launch_rdc(float* p) __attribute__((weak));

void launch_all(float* f, int* i, int n) {
    saxpy<<<1, 32>>>(2.0f, f, f, n);
    hidden_kernel<<<1, 32>>>(f);
    static_kernel<<<1, 32>>>(i);
    fill<float><<<1, 32>>>(f, 1.0f, n);
    fill<int><<<1, 32>>>(i, 7, n);
    reduce_shared<<<1, 128>>>(f, f);
    Params prm = {0.5f, n, f};
    with_struct<<<1, 32>>>(prm, f);
    if (launch_rdc) launch_rdc(f);
}

#ifndef NO_MAIN
int main() {
    float* f = nullptr;
    int* i = nullptr;
    cudaMalloc(&f, 256 * sizeof(float));
    cudaMalloc(&i, 256 * sizeof(int));
    launch_all(f, i, 256);
    return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
#endif
