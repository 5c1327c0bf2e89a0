// Tensor-core and async-copy code from inline PTX and from the CUDA APIs that emit it (sm_80+).
#include <cuda_fp16.h>
#include <mma.h>
#include <cuda/pipeline>
#include <cooperative_groups.h>
#include <cooperative_groups/memcpy_async.h>
using namespace nvcuda;
namespace cg = cooperative_groups;

__global__ void inline_mma(const half *a, const half *b, float *c, int ld) {
    __shared__ __align__(128) half tile_a[16 * 16];
    __shared__ __align__(128) half tile_b[16 * 16];
    int lane = threadIdx.x & 31;
    unsigned sa = (unsigned)__cvta_generic_to_shared(&tile_a[lane * 8]);
    unsigned sb = (unsigned)__cvta_generic_to_shared(&tile_b[lane * 8]);
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(sa), "l"(a + lane * 8));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, 8;\n" ::"r"(sb), "l"(b + lane * 8));
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::);
    __syncthreads();
    unsigned a0, a1, a2, a3, b0, b1;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(sa));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(b0), "=r"(b1) : "r"(sb));
    float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    int i0 = 0, i1 = 0;
    asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
                 : "+r"(i0), "+r"(i1) : "r"(a0), "r"(b0));
    unsigned moved;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(moved) : "r"(a1));
    unsigned lop;
    asm("lop3.b32 %0, %1, %2, %3, 0x96;\n" : "=r"(lop) : "r"(a0), "r"(a1), "r"(a2));
    unsigned prmt;
    asm("prmt.b32.f4e %0, %1, %2, %3;\n" : "=r"(prmt) : "r"(a0), "r"(a1), "r"(a2));
    float neg_zero_check;
    asm("{\n\t.reg .pred p;\n\tsetp.lt.f32 p, %1, 0f00000000;\n\tselp.f32 %0, 0fBF800000, 0f3F800000, p;\n}\n"
        : "=f"(neg_zero_check) : "f"(d0));
    c[threadIdx.x] = d0 + d1 + d2 + d3 + i0 + i1 + moved + lop + prmt + neg_zero_check;
}

__global__ void wmma_api(const half *a, const half *b, float *c) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

__global__ void pipelines(const float *in, float *out) {
    __shared__ float stage[2][128];
    auto block = cg::this_thread_block();
    cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
    for (int s = 0; s < 2; ++s) {
        pipe.producer_acquire();
        cuda::memcpy_async(&stage[s][threadIdx.x], &in[s * 128 + threadIdx.x], sizeof(float), pipe);
        pipe.producer_commit();
    }
    cuda::pipeline_consumer_wait_prior<0>(pipe);
    cg::memcpy_async(block, stage[1], in + 256, sizeof(float) * 128);
    cg::wait(block);
    out[threadIdx.x] = stage[0][threadIdx.x] + stage[1][threadIdx.x];
}
