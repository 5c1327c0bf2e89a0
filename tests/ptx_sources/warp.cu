// Warp-collective operations and cooperative groups.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>
namespace cg = cooperative_groups;

__global__ void shuffles(int *out, const int *in, float *fout, double *dout) {
    int t = threadIdx.x;
    int v = in[t];
    unsigned full = 0xffffffffu;
    int s = __shfl_sync(full, v, 3) + __shfl_up_sync(full, v, 1) + __shfl_down_sync(full, v, 2, 16) +
            __shfl_xor_sync(full, v, 4);
    float f = __shfl_xor_sync(full, (float)v, 1);
    double d = __shfl_down_sync(full, (double)v, 8);
    unsigned ballot = __ballot_sync(full, v > 0);
    int all = __all_sync(full, v != 0), any = __any_sync(full, v == 7), uni = __uni_sync(full, v & 1);
    unsigned mask = __match_any_sync(full, v);
    int pred;
    unsigned allmask = __match_all_sync(__activemask(), (long long)v, &pred);
    unsigned r = __reduce_add_sync(full, (unsigned)v) + __reduce_min_sync(full, (unsigned)v) +
                 __reduce_max_sync(full, v) + __reduce_and_sync(full, (unsigned)v) + __reduce_or_sync(full, (unsigned)v) +
                 __reduce_xor_sync(full, (unsigned)v);
    __syncwarp();
    __syncwarp(0x0000ffffu);
    unsigned lt, ge;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
    asm("mov.u32 %0, %%lanemask_ge;" : "=r"(ge));
    out[t] = s + ballot + all + any + uni + mask + allmask + pred + r + lt + ge;
    fout[t] = f;
    dout[t] = d;
}

__global__ void groups(int *out, const int *in) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    cg::thread_block_tile<8> tile8 = cg::tiled_partition<8>(block);
    int v = in[block.thread_rank()];
    int sum = cg::reduce(warp, v, cg::plus<int>());
    int mx = cg::reduce(tile8, v, cg::greater<int>());
    int x = warp.shfl(v, 0) + tile8.shfl_down(v, 1) + warp.ballot(v > 2) + tile8.any(v == 3);
    if (v & 1) {
        cg::coalesced_group active = cg::coalesced_threads();
        x += active.size() + active.thread_rank() + active.shfl(v, 0);
    }
    cg::thread_group dyn = cg::tiled_partition(block, 16);
    dyn.sync();
    block.sync();
    out[block.thread_rank()] = sum + mx + x + cg::inclusive_scan(warp, v) + cg::exclusive_scan(tile8, v);
}

__global__ void grid_sync(int *out) {
    cg::grid_group grid = cg::this_grid();
    out[grid.thread_rank()] = 1;
    grid.sync();
    out[grid.thread_rank()] += out[(grid.thread_rank() + 1) % grid.size()];
}
