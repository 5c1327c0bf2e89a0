// Hopper (sm_90a): thread-block clusters, distributed shared memory, mbarrier-based async copies,
// TMA bulk tensor copies, wgmma, register reallocation, elect, programmatic dependent launch.
#include <cooperative_groups.h>
#include <cuda/barrier>
#include <cuda.h>
namespace cg = cooperative_groups;

__global__ void __cluster_dims__(2, 1, 1) clustered(int *out) {
    __shared__ int smem[64];
    cg::cluster_group cluster = cg::this_cluster();
    unsigned rank = cluster.block_rank();
    smem[threadIdx.x & 63] = rank;
    cluster.sync();
    int *peer = cluster.map_shared_rank(smem, rank ^ 1);
    unsigned owner;
    asm("getctarank.shared::cluster.u32 %0, %1;" : "=r"(owner) : "r"((unsigned)__cvta_generic_to_shared(smem)));
    smem[(threadIdx.x + 1) & 63] += owner;
    out[blockIdx.x * blockDim.x + threadIdx.x] = peer[threadIdx.x & 63] + cluster.num_blocks() + cluster.dim_blocks().x;
    cluster.sync();
}

__global__ void __launch_bounds__(128, 1, 2) cluster_bounds(int *out) {
    unsigned cid, nc;
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(cid));
    asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(nc));
    out[threadIdx.x] = cid + nc;
}

__global__ void bulk_copy(const int4 *in, int4 *out) {
    __shared__ alignas(128) int4 buffer[256];
#pragma nv_diag_suppress static_var_with_dynamic_init
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    if (threadIdx.x == 0) init(&bar, blockDim.x);
    __syncthreads();
    if (threadIdx.x == 0) cuda::memcpy_async(buffer, in, cuda::aligned_size_t<16>(sizeof(buffer)), bar);
    bar.arrive_and_wait();
    out[threadIdx.x] = buffer[threadIdx.x];
}

__global__ void tma(const __grid_constant__ CUtensorMap map, int *out) {
    __shared__ alignas(128) int tile[32 * 32];
    __shared__ alignas(8) unsigned long long mbar;
    unsigned smem = (unsigned)__cvta_generic_to_shared(tile);
    unsigned bar = (unsigned)__cvta_generic_to_shared(&mbar);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar));
        asm volatile("fence.proxy.async.shared::cta;");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 4096;" ::"r"(bar));
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
            ::"r"(smem), "l"(&map), "r"(0), "r"(32), "r"(bar) : "memory");
    }
    __syncthreads();
    asm volatile(
        "{\n\t.reg .pred done;\nwait_loop:\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n\t@!done bra wait_loop;\n}" ::"r"(bar));
    out[threadIdx.x] = tile[threadIdx.x];
    if (threadIdx.x == 0) {
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                     ::"l"(&map), "r"(0), "r"(0), "r"(smem) : "memory");
        asm volatile("cp.async.bulk.commit_group;");
        asm volatile("cp.async.bulk.wait_group.read 0;");
        asm volatile("prefetch.tensormap [%0];" ::"l"(&map));
    }
}

__global__ void __launch_bounds__(128) wgmma_kernel(float *out, unsigned long long desc_a, unsigned long long desc_b) {
    float d[8] = {0};
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    asm volatile("wgmma.fence.sync.aligned;");
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, 1, 1, 1, 0, 0;"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(desc_a), "l"(desc_b));
    asm volatile("wgmma.commit_group.sync.aligned;");
    asm volatile("wgmma.wait_group.sync.aligned 0;");
    unsigned leader;
    asm volatile("{\n\t.reg .pred p;\n\telect.sync %0|p, 0xffffffff;\n}" : "=r"(leader));
    unsigned s0 = 0, s1 = 1;
    __shared__ alignas(16) unsigned short st[64 * 8];
    unsigned addr = (unsigned)__cvta_generic_to_shared(st + (threadIdx.x & 7) * 8);
    asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};" ::"r"(addr), "r"(s0), "r"(s1));
    for (int i = 0; i < 8; ++i) out[threadIdx.x * 8 + i] = d[i] + leader;
}

__global__ void dependent_launch(int *out) {
    cudaGridDependencySynchronize();
    out[threadIdx.x] += 1;
    cudaTriggerProgrammaticLaunchCompletion();
}
