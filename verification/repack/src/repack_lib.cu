// The shared library of the repack check. repack_lib_run launches scale_add, histogram and cluster_ranks and
// returns an FNV-1a checksum of their outputs (and the histogram and ranks, for the checker's reference).
// cluster_ranks reads its rank in a thread-block cluster of 2 CTAs that may hold 1024 threads each: AMD GPUs
// have no clusters and fatkit runs one only as a workgroup of at most 1024 threads, so it cannot translate
// it and the repack must list it with that reason; on NVIDIA it runs in both builds.
#include <cstdint>
#include <vector>
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include "repack_common.cuh"

constexpr int N = 1 << 14;
constexpr int BINS = 64;
constexpr int RANK_BLOCKS = 4;

__global__ void scale_add(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void histogram(const float* y, unsigned int* bins, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&bins[mix32(__float_as_uint(y[i])) % BINS], 1u);
}

__global__ void __launch_bounds__(1024) __cluster_dims__(2, 1, 1) cluster_ranks(unsigned int* ranks) {
    if (threadIdx.x == 0) ranks[blockIdx.x] = cooperative_groups::this_cluster().block_rank();
}

// Returns 0 or the CUDA error; *checksum gets FNV-1a over y, bins then ranks; bins_out (BINS entries) the
// histogram, ranks_out (RANK_BLOCKS entries) each block's rank in its cluster.
extern "C" int repack_lib_run(unsigned long long* checksum, unsigned int* bins_out, unsigned int* ranks_out) {
    std::vector<float> x(N), y(N);
    for (int i = 0; i < N; ++i) {
        x[i] = static_cast<float>(i % 1000);  // small integers: a*x+y is exact, fused or not
        y[i] = static_cast<float>((2 * i) % 517);
    }
    float *dx, *dy;
    unsigned int *dbins, *dranks;
    cudaError_t err;
    if ((err = cudaMalloc(&dx, N * sizeof(float))) != cudaSuccess) return err;
    if ((err = cudaMalloc(&dy, N * sizeof(float))) != cudaSuccess) return err;
    if ((err = cudaMalloc(&dbins, BINS * sizeof(unsigned int))) != cudaSuccess) return err;
    if ((err = cudaMalloc(&dranks, RANK_BLOCKS * sizeof(unsigned int))) != cudaSuccess) return err;
    if ((err = cudaMemcpy(dx, x.data(), N * sizeof(float), cudaMemcpyHostToDevice)) != cudaSuccess) return err;
    if ((err = cudaMemcpy(dy, y.data(), N * sizeof(float), cudaMemcpyHostToDevice)) != cudaSuccess) return err;
    if ((err = cudaMemset(dbins, 0, BINS * sizeof(unsigned int))) != cudaSuccess) return err;
    scale_add<<<N / 128, 128>>>(dx, dy, 0.5f, N);
    histogram<<<N / 128, 128>>>(dy, dbins, N);
    cluster_ranks<<<RANK_BLOCKS, 32>>>(dranks);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    if ((err = cudaMemcpy(y.data(), dy, N * sizeof(float), cudaMemcpyDeviceToHost)) != cudaSuccess) return err;
    if ((err = cudaMemcpy(bins_out, dbins, BINS * sizeof(unsigned int), cudaMemcpyDeviceToHost)) != cudaSuccess)
        return err;
    if ((err = cudaMemcpy(ranks_out, dranks, RANK_BLOCKS * sizeof(unsigned int), cudaMemcpyDeviceToHost)) !=
        cudaSuccess)
        return err;
    uint64_t h = fnv1a(y.data(), N * sizeof(float));
    h = fnv1a(bins_out, BINS * sizeof(unsigned int), h);
    *checksum = fnv1a(ranks_out, RANK_BLOCKS * sizeof(unsigned int), h);
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dbins);
    cudaFree(dranks);
    return 0;
}

