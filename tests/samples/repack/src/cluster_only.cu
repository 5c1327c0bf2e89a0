// A library whose only kernel reads its thread-block cluster rank: AMD GPUs have no clusters, so fatkit
// translates nothing here and `fatkit repack` must report the binary as failed, with the reason.
#include <cooperative_groups.h>

__global__ void __cluster_dims__(2, 1, 1) cluster_ranks(unsigned int* ranks) {
    if (threadIdx.x == 0) ranks[blockIdx.x] = cooperative_groups::this_cluster().block_rank();
}

extern "C" void cluster_only_launch(unsigned int* ranks) { cluster_ranks<<<2, 32>>>(ranks); }
