// Runtime services: device malloc/free (fatkit's heap in the re-lowered module, CUDA's in the original) and
// cooperative groups' grid.sync() (fatkit's grid workspace against the one CUDA's cooperative launch sets).
// Outputs depend only on the inputs, never on addresses or on which block got which memory.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// Each thread allocates 4-64 bytes, fills them, and reads back its own block and its neighbour's (blocks that
// overlapped would mix their contents), then frees it. 64 blocks of 256 threads keep well inside CUDA's default
// 8 MiB heap; the timed re-launches only fit because freed memory is reused.
extern "C" __global__ void heap_per_thread(const unsigned* in, unsigned* out, int n) {
    __shared__ unsigned* blocks[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v = i < n ? in[i] : 0u;
    unsigned words = 1 + (v & 15);
    unsigned* mine = static_cast<unsigned*>(malloc(words * sizeof(unsigned)));
    if (mine != nullptr)
        for (unsigned k = 0; k < words; ++k) mine[k] = v * (k + 1) ^ (k << 7);
    blocks[threadIdx.x] = mine;
    __syncthreads();
    unsigned sum = mine == nullptr ? 0xFFFFFFFFu : 0u;
    if (mine != nullptr)
        for (unsigned k = 0; k < words; ++k) sum = sum * 31u + mine[k];
    unsigned neighbour = (threadIdx.x + 1) % blockDim.x;
    unsigned* theirs = blocks[neighbour];
    unsigned their_words = 1 + (in[blockIdx.x * blockDim.x + neighbour] & 15);
    if (theirs != nullptr)
        for (unsigned k = 0; k < their_words; ++k) sum ^= theirs[k] + k;
    __syncthreads();
    free(mine);
    if (i < n) out[i] = sum;
}

// One allocation per block, made by thread 0 and shared through shared memory.
extern "C" __global__ void heap_per_block(const unsigned* in, unsigned* out, int n) {
    __shared__ unsigned* buffer;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x == 0) buffer = static_cast<unsigned*>(malloc(blockDim.x * sizeof(unsigned)));
    __syncthreads();
    unsigned* shared_block = buffer;
    if (shared_block == nullptr) {  // every thread sees the same pointer: no one waits at a barrier alone
        if (i < n) out[i] = 0xFFFFFFFFu;
        return;
    }
    shared_block[threadIdx.x] = (i < n ? in[i] : 0u) * 3u + 1u;
    __syncthreads();
    unsigned r = shared_block[(threadIdx.x * 7 + 3) % blockDim.x] + threadIdx.x;
    __syncthreads();
    if (threadIdx.x == 0) free(shared_block);
    if (i < n) out[i] = r;
}

// Rounds of block sums where every round reads the sums of other blocks after grid.sync(): a barrier that
// let a block through early would read a stale partial. The grid is small enough to be co-resident.
extern "C" __global__ void grid_rounds(const unsigned* in, unsigned* out, unsigned* partial, int n) {
    cg::grid_group grid = cg::this_grid();
    __shared__ unsigned block_sum;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v = i < n ? in[i] : 0u;
    for (unsigned round = 0; round < 4; ++round) {
        if (threadIdx.x == 0) block_sum = 0;
        __syncthreads();
        atomicAdd(&block_sum, v);
        __syncthreads();
        if (threadIdx.x == 0) partial[round * gridDim.x + blockIdx.x] = block_sum;
        grid.sync();
        unsigned left = partial[round * gridDim.x + (blockIdx.x + gridDim.x - 1) % gridDim.x];
        unsigned right = partial[round * gridDim.x + (blockIdx.x + 1) % gridDim.x];
        v = (v * 3u + left) ^ right;
    }
    if (i < n) out[i] = v;
}
