// The executable of the repack check: fills a buffer with hashes, sums it block by block (shared memory,
// warp shuffles, a barrier) and prints one deterministic line with an FNV-1a checksum of every result.
#include <cstdio>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>
#include "repack_common.cuh"

constexpr uint32_t N = 1u << 16;
constexpr uint32_t THREADS = 256;
constexpr uint32_t SEED = 0x5eed1234u;

__global__ void fill_hash(uint32_t* out, uint32_t n, uint32_t seed) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = mix32(i ^ seed);
}

__global__ void block_sums(const uint32_t* in, unsigned long long* sums, uint32_t n) {
    __shared__ unsigned long long partial[THREADS / 32];
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long v = i < n ? in[i] : 0;
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long s = 0;
        for (uint32_t w = 0; w < blockDim.x / 32; ++w) s += partial[w];
        sums[blockIdx.x] = s;
    }
}

#define CHECK(call)                                                                       \
    do {                                                                                  \
        cudaError_t err_ = (call);                                                        \
        if (err_ != cudaSuccess) {                                                        \
            std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(err_));     \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)

int main() {
    const uint32_t blocks = N / THREADS;
    uint32_t* values;
    unsigned long long* sums;
    CHECK(cudaMalloc(&values, N * sizeof(uint32_t)));
    CHECK(cudaMalloc(&sums, blocks * sizeof(unsigned long long)));
    fill_hash<<<blocks, THREADS>>>(values, N, SEED);
    CHECK(cudaGetLastError());
    block_sums<<<blocks, THREADS>>>(values, sums, N);
    CHECK(cudaGetLastError());
    std::vector<uint32_t> host_values(N);
    std::vector<unsigned long long> host_sums(blocks);
    CHECK(cudaMemcpy(host_values.data(), values, N * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(host_sums.data(), sums, blocks * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    unsigned long long total = 0;
    for (unsigned long long s : host_sums) total += s;
    uint64_t checksum = fnv1a(host_values.data(), N * sizeof(uint32_t));
    checksum = fnv1a(host_sums.data(), blocks * sizeof(unsigned long long), checksum);
    std::printf("repack_app n=%u seed=0x%08x total=%llu checksum=%016llx\n", N, SEED, total,
                static_cast<unsigned long long>(checksum));
    CHECK(cudaFree(values));
    CHECK(cudaFree(sums));
    return 0;
}
