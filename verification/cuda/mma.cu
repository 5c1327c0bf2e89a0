// Warp-level mma (mma.sync.aligned, dense, and mma.sp with 2:4 sparse A): one kernel per shape and type. Every
// thread builds its A, B, C (and sparse metadata) registers from 24 input words (its own), runs the instruction
// and writes every D register, compared bit for bit. Float inputs are small integers (fp8: values 0.5–7.5
// with 3-bit mantissas), so every partial sum is exact and the result does not depend on the order or the
// rounding of the accumulation, which the ISA leaves to the hardware. Integer forms take raw bits; the
// .satfinite ones start odd/even lanes' C near INT32_MAX / INT32_MIN so that sums saturate. Forms of sm_89 and
// sm_90 (fp8, the m16n8 f64 shapes) write nothing below compute_90: their outputs stay as they were.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define WORDS_PER_THREAD 24
#define INPUT_MASK ((1u << 20) - 1)  // the input holds 2^20 words

__device__ __forceinline__ unsigned word(const unsigned* in, unsigned thread, unsigned j) {
    return in[(thread * WORDS_PER_THREAD + j) & INPUT_MASK];
}

// An integer in [-range, range] from the bits of w.
__device__ __forceinline__ int small(unsigned w, int range) { return int(w % unsigned(2 * range + 1)) - range; }

__device__ __forceinline__ unsigned f16x2(unsigned w) {
    return unsigned(__half_as_ushort(__int2half_rn(small(w & 0xffff, 8))))
         | unsigned(__half_as_ushort(__int2half_rn(small(w >> 16, 8)))) << 16;
}

// f16 accumulators: |c| ≤ 500, so that c + 16 products of |x| ≤ 8 stays below 2048 (integers exact in f16)
__device__ __forceinline__ unsigned f16x2_accumulator(unsigned w) {
    return unsigned(__half_as_ushort(__int2half_rn(small(w & 0xffff, 500))))
         | unsigned(__half_as_ushort(__int2half_rn(small(w >> 16, 500)))) << 16;
}

__device__ __forceinline__ unsigned bf16x2(unsigned w) {
    return unsigned(__bfloat16_as_ushort(__float2bfloat16_rn(float(small(w & 0xffff, 8)))))
         | unsigned(__bfloat16_as_ushort(__float2bfloat16_rn(float(small(w >> 16, 8))))) << 16;
}

__device__ __forceinline__ unsigned tf32(unsigned w) { return __float_as_uint(float(small(w, 8))); }

// the same with the 13 bits below tf32's mantissa set from w: the tensor core is taken to ignore them
__device__ __forceinline__ unsigned tf32_low_bits(unsigned w) { return tf32(w) | (w >> 19 & 0x1fffu); }

__device__ __forceinline__ unsigned f32_small(unsigned w) { return __float_as_uint(float(small(w, 1000))); }

__device__ __forceinline__ unsigned bits(unsigned w) { return w; }

__device__ __forceinline__ unsigned s32_bits(unsigned w) { return w; }

// within 2^20 of INT32_MAX (even threads) or INT32_MIN (odd ones): the products' sum can pass either limit
__device__ __forceinline__ unsigned s32_near_limits(unsigned w) {
    unsigned offset = w & 0xfffffu;
    return (threadIdx.x & 1) ? 0x80000000u + offset : 0x7fffffffu - offset;
}

// Four fp8 values of exponent 2^-1..2^2 with random sign and mantissa: products are multiples of 2^-8 below 64.
__device__ __forceinline__ unsigned e4m3x4(unsigned w) {
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) {
        unsigned byte = (w >> (8 * i)) & 0xffu;
        r |= ((byte & 0x80u) | (6u + (byte & 3u)) << 3 | (byte >> 2 & 7u)) << (8 * i);
    }
    return r;
}

__device__ __forceinline__ unsigned e5m2x4(unsigned w) {
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) {
        unsigned byte = (w >> (8 * i)) & 0xffu;
        r |= ((byte & 0x80u) | (14u + (byte & 3u)) << 2 | (byte >> 2 & 3u)) << (8 * i);
    }
    return r;
}

__device__ __forceinline__ double f64_small(unsigned w) { return double(small(w, 100)); }

// 2:4 sparsity metadata: for each of the eight 4-column chunks an ascending pair of distinct indices.
__device__ __forceinline__ unsigned metadata(unsigned w) {
    const unsigned pairs[6] = {0x4u, 0x8u, 0xcu, 0x9u, 0xdu, 0xeu};  // (0,1) (0,2) (0,3) (1,2) (1,3) (2,3)
    unsigned r = 0;
    for (int chunk = 0; chunk < 8; ++chunk) {
        r |= pairs[w % 6u] << (4 * chunk);
        w /= 6u;
    }
    return r;
}

extern "C" __global__ void mma_m16n8k16_f32_f16(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[4], b[2], c[4], d[4];
    for (int r = 0; r < 4; ++r) a[r] = f16x2(word(in, i, r));
    for (int r = 0; r < 2; ++r) b[r] = f16x2(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f32_small(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_m16n8k16_f32_bf16(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[4], b[2], c[4], d[4];
    for (int r = 0; r < 4; ++r) a[r] = bf16x2(word(in, i, r));
    for (int r = 0; r < 2; ++r) b[r] = bf16x2(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f32_small(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_m16n8k16_f16_f16(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[4], b[2], c[2], d[2];
    for (int r = 0; r < 4; ++r) a[r] = f16x2(word(in, i, r));
    for (int r = 0; r < 2; ++r) b[r] = f16x2(word(in, i, 8 + r));
    for (int r = 0; r < 2; ++r) c[r] = f16x2_accumulator(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%8, %9};"
                 : "=r"(d[0]), "=r"(d[1])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]));
    for (int r = 0; r < 2; ++r) out[i * 2 + r] = d[r];
}

extern "C" __global__ void mma_m16n8k8_f32_f16(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[2], b[1], c[4], d[4];
    for (int r = 0; r < 2; ++r) a[r] = f16x2(word(in, i, r));
    for (int r = 0; r < 1; ++r) b[r] = f16x2(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f32_small(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_m16n8k8_f32_bf16(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[2], b[1], c[4], d[4];
    for (int r = 0; r < 2; ++r) a[r] = bf16x2(word(in, i, r));
    for (int r = 0; r < 1; ++r) b[r] = bf16x2(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f32_small(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_m16n8k8_f16_f16(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[2], b[1], c[2], d[2];
    for (int r = 0; r < 2; ++r) a[r] = f16x2(word(in, i, r));
    for (int r = 0; r < 1; ++r) b[r] = f16x2(word(in, i, 8 + r));
    for (int r = 0; r < 2; ++r) c[r] = f16x2_accumulator(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3}, {%4}, {%5, %6};"
                 : "=r"(d[0]), "=r"(d[1])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(c[0]), "r"(c[1]));
    for (int r = 0; r < 2; ++r) out[i * 2 + r] = d[r];
}

extern "C" __global__ void mma_m16n8k8_tf32(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[4], b[2], c[4], d[4];
    for (int r = 0; r < 4; ++r) a[r] = tf32(word(in, i, r));
    for (int r = 0; r < 2; ++r) b[r] = tf32(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f32_small(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_m16n8k8_tf32_low_bits_set(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[4], b[2], c[4], d[4];
    for (int r = 0; r < 4; ++r) a[r] = tf32_low_bits(word(in, i, r));
    for (int r = 0; r < 2; ++r) b[r] = tf32_low_bits(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f32_small(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_m16n8k4_tf32(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[2], b[1], c[4], d[4];
    for (int r = 0; r < 2; ++r) a[r] = tf32(word(in, i, r));
    for (int r = 0; r < 1; ++r) b[r] = tf32(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f32_small(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_m16n8k32_s8(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[4], b[2], c[4], d[4];
    for (int r = 0; r < 4; ++r) a[r] = bits(word(in, i, r));
    for (int r = 0; r < 2; ++r) b[r] = bits(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = s32_bits(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_m16n8k32_u8_s8_satfinite(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[4], b[2], c[4], d[4];
    for (int r = 0; r < 4; ++r) a[r] = bits(word(in, i, r));
    for (int r = 0; r < 2; ++r) b[r] = bits(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = s32_near_limits(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_m16n8k16_s8_u8_satfinite(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[2], b[1], c[4], d[4];
    for (int r = 0; r < 2; ++r) a[r] = bits(word(in, i, r));
    for (int r = 0; r < 1; ++r) b[r] = bits(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = s32_near_limits(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k16.row.col.satfinite.s32.s8.u8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_m8n8k16_s8_satfinite(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[1], b[1], c[2], d[2];
    for (int r = 0; r < 1; ++r) a[r] = bits(word(in, i, r));
    for (int r = 0; r < 1; ++r) b[r] = bits(word(in, i, 8 + r));
    for (int r = 0; r < 2; ++r) c[r] = s32_near_limits(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m8n8k16.row.col.satfinite.s32.s8.s8.s32 {%0, %1}, {%2}, {%3}, {%4, %5};"
                 : "=r"(d[0]), "=r"(d[1])
                 : "r"(a[0]), "r"(b[0]), "r"(c[0]), "r"(c[1]));
    for (int r = 0; r < 2; ++r) out[i * 2 + r] = d[r];
}

extern "C" __global__ void mma_m16n8k64_s4(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[4], b[2], c[4], d[4];
    for (int r = 0; r < 4; ++r) a[r] = bits(word(in, i, r));
    for (int r = 0; r < 2; ++r) b[r] = bits(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = s32_bits(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_m16n8k32_u4_s4_satfinite(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[2], b[1], c[4], d[4];
    for (int r = 0; r < 2; ++r) a[r] = bits(word(in, i, r));
    for (int r = 0; r < 1; ++r) b[r] = bits(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = s32_near_limits(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u4.s4.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_m8n8k32_s4_u4(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[1], b[1], c[2], d[2];
    for (int r = 0; r < 1; ++r) a[r] = bits(word(in, i, r));
    for (int r = 0; r < 1; ++r) b[r] = bits(word(in, i, 8 + r));
    for (int r = 0; r < 2; ++r) c[r] = s32_bits(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m8n8k32.row.col.s32.s4.u4.s32 {%0, %1}, {%2}, {%3}, {%4, %5};"
                 : "=r"(d[0]), "=r"(d[1])
                 : "r"(a[0]), "r"(b[0]), "r"(c[0]), "r"(c[1]));
    for (int r = 0; r < 2; ++r) out[i * 2 + r] = d[r];
}

extern "C" __global__ void mma_m8n8k128_b1_xor(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[1], b[1], c[2], d[2];
    for (int r = 0; r < 1; ++r) a[r] = bits(word(in, i, r));
    for (int r = 0; r < 1; ++r) b[r] = bits(word(in, i, 8 + r));
    for (int r = 0; r < 2; ++r) c[r] = s32_bits(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.xor.popc {%0, %1}, {%2}, {%3}, {%4, %5};"
                 : "=r"(d[0]), "=r"(d[1])
                 : "r"(a[0]), "r"(b[0]), "r"(c[0]), "r"(c[1]));
    for (int r = 0; r < 2; ++r) out[i * 2 + r] = d[r];
}

extern "C" __global__ void mma_m16n8k128_b1_and(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[2], b[1], c[4], d[4];
    for (int r = 0; r < 2; ++r) a[r] = bits(word(in, i, r));
    for (int r = 0; r < 1; ++r) b[r] = bits(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = s32_bits(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k128.row.col.s32.b1.b1.s32.and.popc {%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_m16n8k256_b1_xor(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[4], b[2], c[4], d[4];
    for (int r = 0; r < 4; ++r) a[r] = bits(word(in, i, r));
    for (int r = 0; r < 2; ++r) b[r] = bits(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = s32_bits(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.xor.popc {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_m16n8k32_e4m3(const unsigned* in, unsigned* out) {
#if __CUDA_ARCH__ >= 900
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[4], b[2], c[4], d[4];
    for (int r = 0; r < 4; ++r) a[r] = e4m3x4(word(in, i, r));
    for (int r = 0; r < 2; ++r) b[r] = e4m3x4(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f32_small(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
#endif
}

extern "C" __global__ void mma_m16n8k32_e5m2_e4m3(const unsigned* in, unsigned* out) {
#if __CUDA_ARCH__ >= 900
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[4], b[2], c[4], d[4];
    for (int r = 0; r < 4; ++r) a[r] = e5m2x4(word(in, i, r));
    for (int r = 0; r < 2; ++r) b[r] = e4m3x4(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f32_small(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
#endif
}

extern "C" __global__ void mma_m8n8k4_f64(const unsigned* in, unsigned long long* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    double a[1], b[1], c[2], d[2];
    for (int r = 0; r < 1; ++r) a[r] = f64_small(word(in, i, r));
    for (int r = 0; r < 1; ++r) b[r] = f64_small(word(in, i, 8 + r));
    for (int r = 0; r < 2; ++r) c[r] = f64_small(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%4, %5};"
                 : "=d"(d[0]), "=d"(d[1])
                 : "d"(a[0]), "d"(b[0]), "d"(c[0]), "d"(c[1]));
    for (int r = 0; r < 2; ++r) out[i * 2 + r] = __double_as_longlong(d[r]);
}

extern "C" __global__ void mma_m16n8k4_f64(const unsigned* in, unsigned long long* out) {
#if __CUDA_ARCH__ >= 900
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    double a[2], b[1], c[4], d[4];
    for (int r = 0; r < 2; ++r) a[r] = f64_small(word(in, i, r));
    for (int r = 0; r < 1; ++r) b[r] = f64_small(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f64_small(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};"
                 : "=d"(d[0]), "=d"(d[1]), "=d"(d[2]), "=d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(b[0]), "d"(c[0]), "d"(c[1]), "d"(c[2]), "d"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = __double_as_longlong(d[r]);
#endif
}

extern "C" __global__ void mma_m16n8k8_f64(const unsigned* in, unsigned long long* out) {
#if __CUDA_ARCH__ >= 900
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    double a[4], b[2], c[4], d[4];
    for (int r = 0; r < 4; ++r) a[r] = f64_small(word(in, i, r));
    for (int r = 0; r < 2; ++r) b[r] = f64_small(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f64_small(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                 : "=d"(d[0]), "=d"(d[1]), "=d"(d[2]), "=d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]), "d"(c[0]), "d"(c[1]), "d"(c[2]), "d"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = __double_as_longlong(d[r]);
#endif
}

extern "C" __global__ void mma_m16n8k16_f64(const unsigned* in, unsigned long long* out) {
#if __CUDA_ARCH__ >= 900
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    double a[8], b[4], c[4], d[4];
    for (int r = 0; r < 8; ++r) a[r] = f64_small(word(in, i, r));
    for (int r = 0; r < 4; ++r) b[r] = f64_small(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f64_small(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, {%16, %17, %18, %19};"
                 : "=d"(d[0]), "=d"(d[1]), "=d"(d[2]), "=d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]), "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]), "d"(c[0]), "d"(c[1]), "d"(c[2]), "d"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = __double_as_longlong(d[r]);
#endif
}

extern "C" __global__ void mma_m8n8k4_f16_row_col_f32(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[2], b[2], c[8], d[8];
    for (int r = 0; r < 2; ++r) a[r] = f16x2(word(in, i, r));
    for (int r = 0; r < 2; ++r) b[r] = f16x2(word(in, i, 8 + r));
    for (int r = 0; r < 8; ++r) c[r] = f32_small(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9}, {%10, %11}, {%12, %13, %14, %15, %16, %17, %18, %19};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]), "=r"(d[4]), "=r"(d[5]), "=r"(d[6]), "=r"(d[7])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]), "r"(c[5]), "r"(c[6]), "r"(c[7]));
    for (int r = 0; r < 8; ++r) out[i * 8 + r] = d[r];
}

extern "C" __global__ void mma_m8n8k4_f16_col_row_f16_to_f32(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[2], b[2], c[4], d[8];
    for (int r = 0; r < 2; ++r) a[r] = f16x2(word(in, i, r));
    for (int r = 0; r < 2; ++r) b[r] = f16x2(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f16x2_accumulator(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m8n8k4.col.row.f32.f16.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9}, {%10, %11}, {%12, %13, %14, %15};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]), "=r"(d[4]), "=r"(d[5]), "=r"(d[6]), "=r"(d[7])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    for (int r = 0; r < 8; ++r) out[i * 8 + r] = d[r];
}

extern "C" __global__ void mma_m8n8k4_f16_row_row_f16(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[2], b[2], c[4], d[4];
    for (int r = 0; r < 2; ++r) a[r] = f16x2(word(in, i, r));
    for (int r = 0; r < 2; ++r) b[r] = f16x2(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f16x2_accumulator(word(in, i, 12 + r));
    asm volatile("mma.sync.aligned.m8n8k4.row.row.f16.f16.f16.f16 {%0, %1, %2, %3}, {%4, %5}, {%6, %7}, {%8, %9, %10, %11};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_sp_m16n8k32_f16(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[4], b[4], c[4], d[4];
    for (int r = 0; r < 4; ++r) a[r] = f16x2(word(in, i, r));
    for (int r = 0; r < 4; ++r) b[r] = f16x2(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f32_small(word(in, i, 12 + r));
    unsigned e = metadata(word(in, i, 8 + 4 + 3) ^ word(in, i, 7));
    asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9, %10, %11}, {%12, %13, %14, %15}, %16, 0;"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(e));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_sp_m16n8k32_bf16_selector1(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[4], b[4], c[4], d[4];
    for (int r = 0; r < 4; ++r) a[r] = bf16x2(word(in, i, r));
    for (int r = 0; r < 4; ++r) b[r] = bf16x2(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f32_small(word(in, i, 12 + r));
    unsigned e = metadata(word(in, i, 8 + 4 + 3) ^ word(in, i, 7));
    asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9, %10, %11}, {%12, %13, %14, %15}, %16, 1;"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(e));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_sp_m16n8k16_f16_selector2(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[2], b[2], c[4], d[4];
    for (int r = 0; r < 2; ++r) a[r] = f16x2(word(in, i, r));
    for (int r = 0; r < 2; ++r) b[r] = f16x2(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f32_small(word(in, i, 12 + r));
    unsigned e = metadata(word(in, i, 8 + 4 + 3) ^ word(in, i, 7));
    asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6, %7}, {%8, %9, %10, %11}, %12, 2;"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(e));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_sp_m16n8k32_s8_u8_satfinite_selector1(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[2], b[2], c[4], d[4];
    for (int r = 0; r < 2; ++r) a[r] = bits(word(in, i, r));
    for (int r = 0; r < 2; ++r) b[r] = bits(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = s32_near_limits(word(in, i, 12 + r));
    unsigned e = metadata(word(in, i, 8 + 4 + 3) ^ word(in, i, 7));
    asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.u8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6, %7}, {%8, %9, %10, %11}, %12, 1;"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(e));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_sp_m16n8k64_u8(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[4], b[4], c[4], d[4];
    for (int r = 0; r < 4; ++r) a[r] = bits(word(in, i, r));
    for (int r = 0; r < 4; ++r) b[r] = bits(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = s32_bits(word(in, i, 12 + r));
    unsigned e = metadata(word(in, i, 8 + 4 + 3) ^ word(in, i, 7));
    asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.s32.u8.u8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9, %10, %11}, {%12, %13, %14, %15}, %16, 0;"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(e));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

extern "C" __global__ void mma_sp_m16n8k64_e4m3(const unsigned* in, unsigned* out) {
#if __CUDA_ARCH__ >= 900
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[4], b[4], c[4], d[4];
    for (int r = 0; r < 4; ++r) a[r] = e4m3x4(word(in, i, r));
    for (int r = 0; r < 4; ++r) b[r] = e4m3x4(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f32_small(word(in, i, 12 + r));
    unsigned e = metadata(word(in, i, 8 + 4 + 3) ^ word(in, i, 7));
    asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9, %10, %11}, {%12, %13, %14, %15}, %16, 0;"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(e));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
#endif
}

extern "C" __global__ void mma_sp_m16n8k16_bf16_selector3(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[2], b[2], c[4], d[4];
    for (int r = 0; r < 2; ++r) a[r] = bf16x2(word(in, i, r));
    for (int r = 0; r < 2; ++r) b[r] = bf16x2(word(in, i, 8 + r));
    for (int r = 0; r < 4; ++r) c[r] = f32_small(word(in, i, 12 + r));
    unsigned e = metadata(word(in, i, 8 + 4 + 3) ^ word(in, i, 7));
    asm volatile("mma.sp.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6, %7}, {%8, %9, %10, %11}, %12, 3;"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(e));
    for (int r = 0; r < 4; ++r) out[i * 4 + r] = d[r];
}

// ---------------------------------------------------------------------------------------------------- wmma
// The CUDA WMMA API (nvcuda::wmma → wmma.load/mma/store): each warp multiplies its own tiles, built from the
// input in shared memory (small integers: exact sums) or read from the input in global memory (s8), and
// stores D to global memory. Fragments are also scaled element by element, as code may do whatever layout
// the implementation chose.
#include <mma.h>

using namespace nvcuda;

#define WMMA_WARPS_PER_BLOCK 8  // blocks of 256 threads

__device__ __forceinline__ unsigned warp_index() { return (blockIdx.x * blockDim.x + threadIdx.x) / 32; }

__device__ __forceinline__ unsigned lane() { return threadIdx.x & 31; }

// Fill `count` elements of a shared tile with small integers from the warp's input words.
template <typename T, typename Make>
__device__ void fill(T* tile, unsigned count, const unsigned* in, unsigned salt, Make make) {
    for (unsigned e = lane(); e < count; e += 32)
        tile[e] = make(in[(warp_index() * 997u + salt * 131u + e) & INPUT_MASK]);
    __syncwarp();
}

extern "C" __global__ void wmma_m16n16k16_f16_f32(const unsigned* in, float* out) {
    __shared__ __half a[WMMA_WARPS_PER_BLOCK][16 * 16], b[WMMA_WARPS_PER_BLOCK][16 * 16];
    __shared__ float c[WMMA_WARPS_PER_BLOCK][16 * 16];
    unsigned w = threadIdx.x / 32;
    fill(a[w], 256, in, 1, [](unsigned x) { return __int2half_rn(small(x, 8)); });
    fill(b[w], 256, in, 2, [](unsigned x) { return __int2half_rn(small(x, 8)); });
    fill(c[w], 256, in, 3, [](unsigned x) { return float(small(x, 1000)); });
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::load_matrix_sync(fa, a[w], 16);
    wmma::load_matrix_sync(fb, b[w], 16);
    wmma::load_matrix_sync(fc, c[w], 16, wmma::mem_row_major);
    for (int i = 0; i < fc.num_elements; ++i) fc.x[i] *= 2.0f;
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(out + warp_index() * 256, fc, 16, wmma::mem_row_major);
}

extern "C" __global__ void wmma_m32n8k16_f16_f16(const unsigned* in, __half* out) {
    __shared__ __half a[WMMA_WARPS_PER_BLOCK][32 * 16], b[WMMA_WARPS_PER_BLOCK][16 * 8], c[WMMA_WARPS_PER_BLOCK][32 * 8];
    unsigned w = threadIdx.x / 32;
    fill(a[w], 512, in, 4, [](unsigned x) { return __int2half_rn(small(x, 8)); });
    fill(b[w], 128, in, 5, [](unsigned x) { return __int2half_rn(small(x, 8)); });
    fill(c[w], 256, in, 6, [](unsigned x) { return __int2half_rn(small(x, 500)); });
    wmma::fragment<wmma::matrix_a, 32, 8, 16, __half, wmma::col_major> fa;
    wmma::fragment<wmma::matrix_b, 32, 8, 16, __half, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 32, 8, 16, __half> fc;
    wmma::load_matrix_sync(fa, a[w], 32);
    wmma::load_matrix_sync(fb, b[w], 8);
    wmma::load_matrix_sync(fc, c[w], 32, wmma::mem_col_major);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(out + warp_index() * 256, fc, 8, wmma::mem_row_major);
}

extern "C" __global__ void wmma_m8n32k16_bf16(const unsigned* in, float* out) {
    __shared__ __nv_bfloat16 a[WMMA_WARPS_PER_BLOCK][8 * 16], b[WMMA_WARPS_PER_BLOCK][16 * 32];
    unsigned w = threadIdx.x / 32;
    fill(a[w], 128, in, 7, [](unsigned x) { return __float2bfloat16_rn(float(small(x, 8))); });
    fill(b[w], 512, in, 8, [](unsigned x) { return __float2bfloat16_rn(float(small(x, 8))); });
    wmma::fragment<wmma::matrix_a, 8, 32, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 8, 32, 16, __nv_bfloat16, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 8, 32, 16, float> fc;
    wmma::fill_fragment(fc, 3.0f);
    wmma::load_matrix_sync(fa, a[w], 16);
    wmma::load_matrix_sync(fb, b[w], 32);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(out + warp_index() * 256, fc, 8, wmma::mem_col_major);
}

extern "C" __global__ void wmma_m16n16k16_s8(const unsigned* in, int* out) {
    // A and B straight from the input (raw bytes: every sum wraps as the ISA says); C from the input too
    const signed char* bytes = reinterpret_cast<const signed char*>(in);
    unsigned tile = (warp_index() * 1024u) & (INPUT_MASK * 4u);
    wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, int> fc;
    wmma::load_matrix_sync(fa, bytes + tile, 16);
    wmma::load_matrix_sync(fb, bytes + tile + 256, 32);  // a stride past the 16 columns
    wmma::load_matrix_sync(fc, reinterpret_cast<const int*>(bytes + tile + 768), 16, wmma::mem_row_major);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(out + warp_index() * 256, fc, 16, wmma::mem_col_major);
}

extern "C" __global__ void wmma_m16n16k8_tf32(const unsigned* in, float* out) {
    __shared__ float a[WMMA_WARPS_PER_BLOCK][16 * 8], b[WMMA_WARPS_PER_BLOCK][8 * 16], c[WMMA_WARPS_PER_BLOCK][16 * 16];
    unsigned w = threadIdx.x / 32;
    fill(a[w], 128, in, 9, [](unsigned x) { return float(small(x, 8)); });
    fill(b[w], 128, in, 10, [](unsigned x) { return float(small(x, 8)); });
    fill(c[w], 256, in, 11, [](unsigned x) { return float(small(x, 1000)); });
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> fc;
    wmma::load_matrix_sync(fa, a[w], 8);
    wmma::load_matrix_sync(fb, b[w], 8);
    for (int i = 0; i < fa.num_elements; ++i) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
    for (int i = 0; i < fb.num_elements; ++i) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
    wmma::load_matrix_sync(fc, c[w], 16, wmma::mem_col_major);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(out + warp_index() * 256, fc, 16, wmma::mem_row_major);
}

extern "C" __global__ void wmma_m8n8k4_f64(const unsigned* in, double* out) {
    __shared__ double a[WMMA_WARPS_PER_BLOCK][8 * 4], b[WMMA_WARPS_PER_BLOCK][4 * 8], c[WMMA_WARPS_PER_BLOCK][8 * 8];
    unsigned w = threadIdx.x / 32;
    fill(a[w], 32, in, 12, [](unsigned x) { return double(small(x, 100)); });
    fill(b[w], 32, in, 13, [](unsigned x) { return double(small(x, 100)); });
    fill(c[w], 64, in, 14, [](unsigned x) { return double(small(x, 100)); });
    wmma::fragment<wmma::matrix_a, 8, 8, 4, double, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 8, 8, 4, double, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 8, 8, 4, double> fc;
    wmma::load_matrix_sync(fa, a[w], 4);
    wmma::load_matrix_sync(fb, b[w], 4);
    wmma::load_matrix_sync(fc, c[w], 8, wmma::mem_row_major);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(out + warp_index() * 64, fc, 8, wmma::mem_row_major);
}

// Sub-byte and single-bit WMMA (nvcuda::wmma::experimental): raw input bits, A row-major and B column-major
// with strides past a row (in elements), every sum wrapping as the ISA says.
extern "C" __global__ void wmma_m8n8k32_s4(const unsigned* in, int* out) {
    namespace experimental = wmma::experimental;
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(in);
    unsigned tile = (warp_index() * 1024u) & (INPUT_MASK * 4u);
    wmma::fragment<wmma::matrix_a, 8, 8, 32, experimental::precision::s4, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 8, 8, 32, experimental::precision::s4, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 8, 8, 32, int> fc;
    wmma::load_matrix_sync(fa, bytes + tile, 64);
    wmma::load_matrix_sync(fb, bytes + tile + 256, 32);
    wmma::load_matrix_sync(fc, reinterpret_cast<const int*>(bytes + tile + 512), 8, wmma::mem_row_major);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(out + warp_index() * 64, fc, 8, wmma::mem_row_major);
}

extern "C" __global__ void wmma_m8n8k128_b1(const unsigned* in, int* out) {
    namespace experimental = wmma::experimental;
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(in);
    unsigned tile = (warp_index() * 1024u) & (INPUT_MASK * 4u);
    wmma::fragment<wmma::matrix_a, 8, 8, 128, experimental::precision::b1, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 8, 8, 128, experimental::precision::b1, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 8, 8, 128, int> fc, fd;
    wmma::load_matrix_sync(fa, bytes + tile, 256);
    wmma::load_matrix_sync(fb, bytes + tile + 256, 128);
    wmma::load_matrix_sync(fc, reinterpret_cast<const int*>(bytes + tile + 512), 8, wmma::mem_col_major);
    wmma::bmma_sync(fd, fa, fb, fc, experimental::bmmaBitOpXOR, experimental::bmmaAccumulateOpPOPC);
    wmma::bmma_sync(fd, fa, fb, fd, experimental::bmmaBitOpAND, experimental::bmmaAccumulateOpPOPC);
    wmma::store_matrix_sync(out + warp_index() * 64, fd, 8, wmma::mem_row_major);
}
