// Atomics of every kind, scope and memory order, and fences.
#include <cuda/atomic>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

__global__ void atomics(int *i, unsigned *u, unsigned long long *ull, float *f, double *d, __half2 *h2,
                        __nv_bfloat162 *b2, __half *h, unsigned short *us) {
    int t = threadIdx.x;
    atomicAdd(i, 1);
    atomicSub(i + 1, 2);
    atomicExch(i + 2, t);
    atomicMin(i + 3, t);
    atomicMax(i + 4, t);
    atomicInc(u, 100u);
    atomicDec(u + 1, 100u);
    atomicCAS(i + 5, 0, t);
    atomicAnd(i + 6, 0xff);
    atomicOr(i + 7, 0x100);
    atomicXor(i + 8, t);
    atomicAdd(ull, 1ull);
    atomicCAS(ull + 1, 0ull, 5ull);
    atomicMin(ull + 2, (unsigned long long)t);
    atomicAdd(f, 1.5f);
    atomicAdd(d, 2.5);
    atomicExch(f + 1, 0.0f);
    atomicAdd(h2, __floats2half2_rn(1.0f, 2.0f));
    atomicAdd(b2, __floats2bfloat162_rn(1.0f, 2.0f));
    atomicAdd(h, __float2half(0.5f));
    atomicCAS(us, (unsigned short)0, (unsigned short)1);
    atomicAdd_block(i + 9, 1);
    atomicAdd_system(i + 10, 1);
    atomicCAS_system(i + 11, 1, 2);
    atomicExch_block(f + 2, 1.0f);
    atomicMax_system(ull + 3, 9ull);
    __shared__ int sh[32];
    atomicAdd(&sh[t & 31], 1);
    __syncthreads();
    i[12 + t] = sh[t & 31];
}

__global__ void ordered(int *p, unsigned long long *q, int *flag) {
    cuda::atomic_ref<int, cuda::thread_scope_device> a(*p);
    a.fetch_add(1, cuda::memory_order_relaxed);
    a.fetch_sub(1, cuda::memory_order_release);
    int old = a.load(cuda::memory_order_acquire);
    a.store(old + 1, cuda::memory_order_seq_cst);
    int expected = 3;
    a.compare_exchange_strong(expected, 4, cuda::memory_order_acq_rel);
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> b(*q);
    b.fetch_or(2ull, cuda::memory_order_relaxed);
    b.exchange(7ull);
    cuda::atomic_ref<int, cuda::thread_scope_block> c(*flag);
    c.fetch_max(5, cuda::memory_order_relaxed);
    __threadfence();
    __threadfence_block();
    __threadfence_system();
    cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_device);
    cuda::atomic_thread_fence(cuda::memory_order_seq_cst, cuda::thread_scope_system);
    volatile int *v = flag;
    while (*v == 0) {
    }
}
