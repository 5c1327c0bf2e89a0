// Warp-level matrix data movement: ldmatrix (x1/x2/x4, plain and .trans), stmatrix (sm_90) and movmatrix on
// shared tiles of 16-byte rows filled from the input; every lane's fragment registers (or the stored tile) go
// to the output, compared bit for bit. Each lane's row address is computed from its %laneid.
#include <cstdint>

#define ROW_BYTES 16

__device__ __forceinline__ unsigned lane_id() {
    unsigned lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}

__device__ __forceinline__ unsigned shared_address(const void* pointer) {
    return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

// Thread t of the block copies row t (16 bytes) of its block's part of `in` into the tile.
__device__ void fill_tile(uint4* tile, const uint4* in) {
    tile[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
    __syncthreads();
}

// 14 words a thread: ldmatrix x1, x2, x4, then x1, x2, x4 .trans. Lane l addresses the tile row
// rows[i] mod blockDim.x (rows may repeat: loads only); the .trans forms address rows in reverse lane order.
extern "C" __global__ void ldmatrix_forms(const uint4* in, const unsigned* rows, unsigned* out) {
    extern __shared__ uint4 tile[];
    fill_tile(tile, in);
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned row = shared_address(&tile[rows[i] % blockDim.x]);
    unsigned reversed = shared_address(&tile[(threadIdx.x - lane_id()) + 31 - lane_id()]);
    unsigned r[14];
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r[0]) : "r"(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(r[1]), "=r"(r[2]) : "r"(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]) : "r"(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];" : "=r"(r[7]) : "r"(reversed));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
                 : "=r"(r[8]), "=r"(r[9]) : "r"(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared::cta.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]) : "r"(reversed));
    for (int k = 0; k < 14; ++k) out[i * 14 + k] = r[k];
}

// ldmatrix with a generic address (no state space), then movmatrix of two of its fragments and of a
// register read straight from the input. 4 words a thread.
extern "C" __global__ void ldmatrix_generic_movmatrix(const uint4* in, const unsigned* rows, unsigned* out) {
    extern __shared__ uint4 tile[];
    fill_tile(tile, in);
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    const uint4* row = &tile[rows[i] % blockDim.x];
    unsigned a, b, t, u, v;
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.b16 {%0, %1}, [%2];" : "=r"(a), "=r"(b) : "l"(row));
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(t) : "r"(a));
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(u) : "r"(b));
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(v) : "r"(rows[i]));
    out[i * 4] = a;
    out[i * 4 + 1] = t;
    out[i * 4 + 2] = u;
    out[i * 4 + 3] = v;
}

// stmatrix (sm_90): x1, x2, x4, x1 .trans, x2 .trans, x4 .trans, each into a zeroed tile at rows that a
// permutation of the block's rows (seeded per block from `rows`) gives each lane; each form's tile goes to
// the output (6 tiles a block). Earlier architectures write zeros (stmatrix does not exist there).
template <int COUNT, bool TRANS>
__device__ void store_form(uint4* tile, const unsigned* fragment, unsigned row, uint4* out) {
    tile[threadIdx.x] = make_uint4(0, 0, 0, 0);
    __syncthreads();
#if __CUDA_ARCH__ >= 900
    if (COUNT == 1 && !TRANS)
        asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};" :: "r"(row), "r"(fragment[0]) : "memory");
    if (COUNT == 2 && !TRANS)
        asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};"
                     :: "r"(row), "r"(fragment[0]), "r"(fragment[1]) : "memory");
    if (COUNT == 4 && !TRANS)
        asm volatile("stmatrix.sync.aligned.m8n8.x4.shared::cta.b16 [%0], {%1, %2, %3, %4};"
                     :: "r"(row), "r"(fragment[0]), "r"(fragment[1]), "r"(fragment[2]), "r"(fragment[3])
                     : "memory");
    if (COUNT == 1 && TRANS)
        asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};"
                     :: "r"(row), "r"(fragment[0]) : "memory");
    if (COUNT == 2 && TRANS)
        asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};"
                     :: "r"(row), "r"(fragment[0]), "r"(fragment[1]) : "memory");
    if (COUNT == 4 && TRANS)
        asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};"
                     :: "r"(row), "r"(fragment[0]), "r"(fragment[1]), "r"(fragment[2]), "r"(fragment[3])
                     : "memory");
#endif
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = tile[threadIdx.x];
    __syncthreads();
}

extern "C" __global__ void stmatrix_forms(const uint4* in, const unsigned* rows, uint4* out) {
    extern __shared__ uint4 tile[];
    uint4 mine = in[blockIdx.x * blockDim.x + threadIdx.x];
    unsigned fragment[4] = {mine.x, mine.y, mine.z, mine.w};
    // 37 is odd and prime to 3, so t -> (37 t + seed) mod blockDim.x permutes blocks of 2^k or 3 * 2^k threads
    unsigned slot = (threadIdx.x * 37u + rows[blockIdx.x]) % blockDim.x;
    unsigned row = shared_address(&tile[slot]);
    unsigned tiles = gridDim.x * blockDim.x;
    store_form<1, false>(tile, fragment, row, out);
    store_form<2, false>(tile, fragment, row, out + tiles);
    store_form<4, false>(tile, fragment, row, out + 2 * tiles);
    store_form<1, true>(tile, fragment, row, out + 3 * tiles);
    store_form<2, true>(tile, fragment, row, out + 4 * tiles);
    store_form<4, true>(tile, fragment, row, out + 5 * tiles);
}
