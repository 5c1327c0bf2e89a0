// Warp collectives: shuffles, votes, ballots, match (blocks of 256, some of 96 to leave partial patterns).
extern "C" __global__ void warp_sum_shfl_down(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    if ((threadIdx.x & 31) == 0) out[i / 32] = v;
}

extern "C" __global__ void warp_scan_shfl_up(const unsigned* in, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v = i < n ? in[i] : 0u;
    for (int offset = 1; offset < 32; offset <<= 1) {
        unsigned up = __shfl_up_sync(0xffffffffu, v, offset);
        if ((threadIdx.x & 31) >= offset) v += up;
    }
    if (i < n) out[i] = v;
}

extern "C" __global__ void warp_max_xor_f32(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? in[i] : -1e30f;
    for (int mask = 16; mask > 0; mask >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, mask));
    if (i < n) out[i] = v;
}

extern "C" __global__ void warp_rotate_idx(const unsigned* in, unsigned* out, int n, int shift) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v = i < n ? in[i] : 0u;
    v = __shfl_sync(0xffffffffu, v, (threadIdx.x + shift) & 31);
    unsigned w = __shfl_sync(0xffffffffu, v, threadIdx.x + shift, 8);  // width 8: segments of 8 lanes
    if (i < n) out[i] = v ^ (w << 1);
}

extern "C" __global__ void ballot_compact(const int* in, int* out, unsigned* counts, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : -1;
    bool keep = (v & 7) == 3;
    unsigned ballot = __ballot_sync(0xffffffffu, keep);
    int rank = __popc(ballot & ((1u << (threadIdx.x & 31)) - 1));
    int warp = i / 32;
    if (keep) out[warp * 32 + rank] = v;
    if ((threadIdx.x & 31) == 0) counts[warp] = ballot;
}

extern "C" __global__ void votes(const int* in, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    unsigned all = __all_sync(0xffffffffu, v > 0), any = __any_sync(0xffffffffu, v > 1000000);
    unsigned uni = __uni_sync(0xffffffffu, (v & 1) == 0);
    unsigned active = __activemask();
    if (i < n) out[i] = all | (any << 1) | (uni << 2) | ((active == 0xffffffffu) << 3);
}

extern "C" __global__ void divergent_ballot(const int* in, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    unsigned r = 0;
    if (v & 1) {
        unsigned mask = __activemask();
        r = __ballot_sync(mask, v & 2) | 1u;
        r ^= __shfl_sync(mask, (unsigned)v, __ffs(mask) - 1);
    }
    if (i < n) out[i] = r;
}

extern "C" __global__ void match_groups(const int* in, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? (in[i] & 3) : 0;
    int pred;
    unsigned any = __match_any_sync(0xffffffffu, v);
    unsigned all = __match_all_sync(0xffffffffu, v >> 2, &pred);
    if (i < n) out[i] = any ^ (all + pred);
}

extern "C" __global__ void redux(const unsigned* in, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v = i < n ? in[i] : 0u;
    unsigned lanemask_lt;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lanemask_lt));
#if __CUDA_ARCH__ >= 800
    unsigned r = __reduce_add_sync(0xffffffffu, v) ^ __reduce_max_sync(0xffffffffu, v)
                 ^ (__reduce_xor_sync(0xffffffffu, v) << 3);
#else  // redux.sync is sm_80+: the same values from shuffles
    unsigned sum = v, mx = v, x = v;
    for (int mask = 16; mask > 0; mask >>= 1) {
        sum += __shfl_xor_sync(0xffffffffu, sum, mask);
        mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, mask));
        x ^= __shfl_xor_sync(0xffffffffu, x, mask);
    }
    unsigned r = sum ^ mx ^ (x << 3);
#endif
    if (i < n) out[i] = r ^ (threadIdx.x & 31) ^ (lanemask_lt << 1);
}
