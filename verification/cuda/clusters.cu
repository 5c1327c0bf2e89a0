#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// A ring over the cluster: each CTA publishes its values in shared memory, reads the next CTA's through
// distributed shared memory, adds into the next CTA's counter, and writes what it saw.
extern "C" __global__ void __cluster_dims__(4, 1, 1) ring(const unsigned *a, unsigned *out) {
    __shared__ unsigned values[64];
    __shared__ unsigned counter;
    cg::cluster_group cluster = cg::this_cluster();
    unsigned t = threadIdx.x, rank = cluster.block_rank(), k = cluster.num_blocks();
    unsigned g = blockIdx.x * 64 + t;
    values[t] = a[g];
    if (t == 0) counter = 0;
    cluster.sync();
    unsigned next = (rank + 1) % k;
    unsigned *theirs = cluster.map_shared_rank(values, next);
    unsigned *their_counter = cluster.map_shared_rank(&counter, next);
    unsigned seen = theirs[(7 * t) & 63];
    atomicAdd(their_counter, a[g] & 255);
    cluster.sync();
    out[4 * g] = seen;
    out[4 * g + 1] = counter;
    out[4 * g + 2] = rank;
    out[4 * g + 3] = cluster.query_shared_rank(theirs);
    cluster.sync();
}

// The cluster registers of a (2, 2, 1) cluster over a 2-D grid of 2-D blocks.
extern "C" __global__ void __cluster_dims__(2, 2, 1) registers(unsigned *out) {
    cg::cluster_group cluster = cg::this_cluster();
    unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned *row = out + 16 * (block * blockDim.x * blockDim.y * blockDim.z + thread);
    dim3 index = cluster.block_index(), dims = cluster.dim_blocks();
    unsigned cid_x, cid_y, ncid_x, ncid_y;
    asm("mov.u32 %0, %%clusterid.x;" : "=r"(cid_x));
    asm("mov.u32 %0, %%clusterid.y;" : "=r"(cid_y));
    asm("mov.u32 %0, %%nclusterid.x;" : "=r"(ncid_x));
    asm("mov.u32 %0, %%nclusterid.y;" : "=r"(ncid_y));
    unsigned values[16] = {threadIdx.x, threadIdx.y, blockIdx.x, blockIdx.y, gridDim.x, gridDim.y, index.x, index.y,
                           dims.x, dims.y, cluster.block_rank(), cluster.num_blocks(), cid_x, cid_y, ncid_x, ncid_y};
    for (int i = 0; i < 16; i++) row[i] = values[i];
}

// CTAs of one cluster wait at their own barriers a different number of times (a workgroup-wide barrier
// would deadlock), then exchange through dynamic shared memory.
extern "C" __global__ void __cluster_dims__(2, 1, 1) divergent(const unsigned *a, unsigned *out) {
    extern __shared__ unsigned dynamic[];
    cg::cluster_group cluster = cg::this_cluster();
    unsigned t = threadIdx.x, rank = cluster.block_rank();
    unsigned g = blockIdx.x * blockDim.x + t;
    unsigned sum = a[g];
    dynamic[t] = sum;
    for (unsigned round = 0; round < 3 + 2 * rank; round++) {
        __syncthreads();
        sum += dynamic[(t + round + 1) % blockDim.x];
        __syncthreads();
        dynamic[t] = sum;
    }
    cluster.sync();
    unsigned *other = cluster.map_shared_rank(dynamic, rank ^ 1);
    out[2 * g] = sum;
    out[2 * g + 1] = other[(t * 5) % blockDim.x];
    cluster.sync();
}
