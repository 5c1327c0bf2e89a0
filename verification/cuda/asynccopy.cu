// Asynchronous copies and transaction barriers: a cp.async double-buffered pipeline (inline PTX: 16-byte
// .cg copies with src-size zero fill and .ca copies with an ignore-src predicate), the same pipeline through
// the CUDA pipeline primitives (8-byte copies, zfill), a producer/consumer ring of mbarriers waited by phase
// parity, and (sm_90) a bulk copy completing on an mbarrier's tx-count followed by a bulk store and bulk
// reductions. Every output is an integer the program determines (sums of the bulk reductions commute).
#include <cstdint>
#include <cuda_pipeline_primitives.h>

__device__ __forceinline__ unsigned shared_address(const void* pointer) {
    return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

#define PIPE_THREADS 128
#define TILE_WORDS (PIPE_THREADS * 4)  // one 16-byte chunk a thread
#define PIPE_TILES 8                   // tiles a block streams through its two buffers

// What thread t keeps of a tile: words of other threads' chunks, so a misplaced chunk shows.
__device__ __forceinline__ unsigned mix_tile(const unsigned* b, unsigned t) {
    return b[(t * 4 + 1) % TILE_WORDS] * 3u + b[(t * 4 + 130) % TILE_WORDS] * 5u
           + (b[(t * 4 + 257) % TILE_WORDS] ^ b[(t + 511) % TILE_WORDS]) * 7u;
}

// Tile `tile` of the block into buffer tile & 1: even threads copy the words below n and zero the rest
// (src-size), odd threads copy all four or, when any is past n, write zeros without reading (ignore-src).
__device__ __forceinline__ void issue_tile(unsigned (*buf)[TILE_WORDS], const unsigned* in, int n, int tile) {
    unsigned t = threadIdx.x;
    int e = (blockIdx.x * PIPE_TILES + tile) * TILE_WORDS + t * 4;
    int valid = max(0, min(4, n - e)) * 4;
    unsigned dst = shared_address(&buf[tile & 1][t * 4]);
    const unsigned* src = in + (valid ? e : 0);
    if (t & 1) {
        asm volatile("{\n .reg .pred ignore;\n setp.lt.s32 ignore, %2, 16;\n"
                     " cp.async.ca.shared.global [%0], [%1], 16, ignore;\n}" :: "r"(dst), "l"(src), "r"(valid) : "memory");
    } else {
        asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(valid)
                     : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
}

extern "C" __global__ void cp_async_pipeline(const unsigned* in, unsigned* out, int n) {
    __shared__ __align__(16) unsigned buf[2][TILE_WORDS];
    issue_tile(buf, in, n, 0);
    for (int tile = 0; tile < PIPE_TILES; ++tile) {
        if (tile + 1 < PIPE_TILES) {
            issue_tile(buf, in, n, tile + 1);
            asm volatile("cp.async.wait_group 1;" ::: "memory");
        } else {
            asm volatile("cp.async.wait_all;" ::: "memory");
        }
        __syncthreads();
        out[(blockIdx.x * PIPE_TILES + tile) * PIPE_THREADS + threadIdx.x] = mix_tile(buf[tile & 1], threadIdx.x);
        __syncthreads();
    }
}

// The same stream through __pipeline_memcpy_async: two 8-byte copies a thread, zero-filled past n.
extern "C" __global__ void pipeline_primitives(const unsigned* in, unsigned* out, int n) {
    __shared__ __align__(16) unsigned buf[2][TILE_WORDS];
    unsigned t = threadIdx.x;
    auto issue = [&](int tile) {
        for (int half = 0; half < 2; ++half) {
            int e = (blockIdx.x * PIPE_TILES + tile) * TILE_WORDS + t * 4 + half * 2;
            int valid = max(0, min(2, n - e)) * 4;
            __pipeline_memcpy_async(&buf[tile & 1][t * 4 + half * 2], in + (valid ? e : 0), 8, 8 - valid);
        }
        __pipeline_commit();
    };
    issue(0);
    for (int tile = 0; tile < PIPE_TILES; ++tile) {
        if (tile + 1 < PIPE_TILES) {
            issue(tile + 1);
            __pipeline_wait_prior(1);
        } else {
            __pipeline_wait_prior(0);
        }
        __syncthreads();
        out[(blockIdx.x * PIPE_TILES + tile) * PIPE_THREADS + t] = mix_tile(buf[tile & 1], t);
        __syncthreads();
    }
}

#define RING_ROUNDS 16
#define RING_LANES 64  // two producer warps, two consumer warps

__device__ __forceinline__ void mbarrier_wait_parity(unsigned long long* bar, unsigned parity) {
    unsigned address = shared_address(bar);
#if __CUDA_ARCH__ >= 900
    asm volatile("{\n .reg .pred done;\n wait:\n"
                 " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n @!done bra wait;\n}"
                 :: "r"(address), "r"(parity) : "memory");
#else
    asm volatile("{\n .reg .pred done;\n wait:\n"
                 " mbarrier.test_wait.parity.shared.b64 done, [%0], %1;\n @!done bra wait;\n}"
                 :: "r"(address), "r"(parity) : "memory");
#endif
}

__device__ __forceinline__ unsigned long long mbarrier_arrive(unsigned long long* bar) {
    unsigned long long state;
    asm volatile("mbarrier.arrive.shared.b64 %0, [%1];" : "=l"(state) : "r"(shared_address(bar)) : "memory");
    return state;
}

// Producers fill slot r & 1 with round r's words once the consumers emptied it; consumers wait for it full.
extern "C" __global__ void mbarrier_ring(const unsigned* in, unsigned* out) {
    __shared__ __align__(8) unsigned long long full[2], empty[2];
    __shared__ unsigned slots[2][RING_LANES];
    unsigned t = threadIdx.x, lane = t % RING_LANES;
    if (t == 0) {
        for (int s = 0; s < 2; ++s) {
            asm volatile("mbarrier.init.shared.b64 [%0], %1;" :: "r"(shared_address(&full[s])), "r"(RING_LANES));
            asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(shared_address(&empty[s])), "r"(RING_LANES));
        }
    }
    __syncthreads();
    const unsigned* source = in + blockIdx.x * RING_ROUNDS * RING_LANES;
    if (t < RING_LANES) {
        for (unsigned r = 0; r < RING_ROUNDS; ++r) {
            unsigned slot = r & 1;
            if (r >= 2) mbarrier_wait_parity(&empty[slot], ((r >> 1) - 1) & 1);
            slots[slot][lane] = source[r * RING_LANES + lane] ^ r;
            mbarrier_arrive(&full[slot]);
        }
    } else {
        unsigned acc = 0;
        for (unsigned r = 0; r < RING_ROUNDS; ++r) {
            unsigned slot = r & 1;
            mbarrier_wait_parity(&full[slot], (r >> 1) & 1);
            acc = acc * 31u + slots[slot][(lane + r) % RING_LANES];
            mbarrier_arrive(&empty[slot]);
        }
        out[blockIdx.x * RING_LANES + lane] = acc;
    }
}

#define BULK_WORDS 1024  // 4 KiB a block
#define BULK_THREADS 256

// One thread copies the block's 4 KiB into shared memory on the mbarrier's tx-count; every thread waits,
// mixes, and one thread bulk-stores the result and bulk-reduces it into the sums and maxima of all blocks.
extern "C" __global__ void bulk_copy_mbarrier(const unsigned* in, unsigned* out, unsigned* sums, unsigned* maxima) {
#if __CUDA_ARCH__ >= 900
    __shared__ __align__(128) unsigned tile[BULK_WORDS];
    __shared__ __align__(128) unsigned staged[BULK_WORDS];
    __shared__ __align__(8) unsigned long long bar;
    unsigned t = threadIdx.x;
    unsigned bar_address = shared_address(&bar);
    if (t == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar_address) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (t == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar_address), "r"(BULK_WORDS * 4)
                     : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     :: "r"(shared_address(tile)), "l"(in + blockIdx.x * BULK_WORDS), "r"(BULK_WORDS * 4),
                        "r"(bar_address) : "memory");
    }
    mbarrier_wait_parity(&bar, 0);
    for (int k = 0; k < BULK_WORDS / BULK_THREADS; ++k) {
        unsigned w = k * BULK_THREADS + t;
        staged[w] = tile[(w * 7) % BULK_WORDS] * 2654435761u + blockIdx.x;
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (t == 0) {
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                     :: "l"(out + blockIdx.x * BULK_WORDS), "r"(shared_address(staged)), "r"(BULK_WORDS * 4) : "memory");
        asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [%0], [%1], %2;"
                     :: "l"(sums), "r"(shared_address(staged)), "r"(BULK_WORDS * 4) : "memory");
        asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.max.u32 [%0], [%1], %2;"
                     :: "l"(maxima), "r"(shared_address(staged)), "r"(BULK_WORDS * 4) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
#endif
}
