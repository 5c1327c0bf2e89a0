// A library whose only kernel reads its thread-block cluster rank, in clusters of 2 CTAs that may hold 1024
// threads each: AMD GPUs have no clusters and fatkit runs one only as a workgroup of at most 1024 threads, so
// it translates nothing here and `fatkit repack` must report the binary as failed, with the reason.
#include <cooperative_groups.h>

__global__ void __launch_bounds__(1024) __cluster_dims__(2, 1, 1) cluster_ranks(unsigned int* ranks) {
    if (threadIdx.x == 0) ranks[blockIdx.x] = cooperative_groups::this_cluster().block_rank();
}

extern "C" void cluster_only_launch(unsigned int* ranks) { cluster_ranks<<<2, 32>>>(ranks); }
