// The benchmark's kernels as HIP (benchmarks/codegen_vs_hip.py), the same as kernels.cu, for clang-22 with
// builtins.h. The one-op kernels use the AMD instruction a HIP programmer would write for the PTX form.

extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
  int i = BID * BDIM + TID;
  if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void stencil(const float *in, float *out, int w, int h) {
  int x = BID * BDIM + TID, y = BID_Y;
  if (x >= w) return;
  int i = y * w + x;
  if (x == 0 || y == 0 || x == w - 1 || y == h - 1) { out[i] = in[i]; return; }
  out[i] = 0.5f * in[i] + 0.125f * (in[i - 1] + in[i + 1] + in[i - w] + in[i + w]);
}

extern "C" __global__ void reduction(const float *in, float *out) {
  __shared__ float part[256];
  part[TID] = in[BID * 256 + TID];
  SYNC();
  for (int s = 128; s > 0; s >>= 1) {
    if (TID < s) part[TID] += part[TID + s];
    SYNC();
  }
  if (TID == 0) out[BID] = part[0];
}

extern "C" __global__ void sgemm_tile(const float *a, const float *b, float *c, int n) {
  __shared__ float ta[16][16], tb[16][16];
  int tx = TID, ty = TID_Y, row = BID_Y * 16 + ty, col = BID * 16 + tx;
  float sum = 0.0f;
  for (int k = 0; k < n; k += 16) {
    ta[ty][tx] = a[row * n + k + tx];
    tb[ty][tx] = b[(k + ty) * n + col];
    SYNC();
#pragma unroll
    for (int j = 0; j < 16; ++j) sum += ta[ty][j] * tb[j][tx];
    SYNC();
  }
  c[row * n + col] = sum;
}

extern "C" __global__ void histogram(const unsigned char *data, unsigned *bins, int n) {
  __shared__ unsigned local[64];
  if (TID < 64) local[TID] = 0;
  SYNC();
  for (int i = BID * BDIM + TID; i < n; i += BDIM * GDIM) ATOMIC_ADD_SHARED(&local[data[i] & 63], 1u);
  SYNC();
  if (TID < 64) ATOMIC_ADD_GLOBAL(&bins[TID], local[TID]);
}

extern "C" __global__ void softmax_row(const float *in, float *out) {
  __shared__ float part[256];
  const float *row = in + BID * 256;
  float x = row[TID];
  part[TID] = x;
  SYNC();
  for (int s = 128; s > 0; s >>= 1) {
    if (TID < s) part[TID] = __builtin_fmaxf(part[TID], part[TID + s]);
    SYNC();
  }
  float e = __builtin_expf(x - part[0]);
  SYNC();
  part[TID] = e;
  SYNC();
  for (int s = 128; s > 0; s >>= 1) {
    if (TID < s) part[TID] += part[TID + s];
    SYNC();
  }
  out[BID * 256 + TID] = e / part[0];
}

extern "C" __global__ void half2_axpy(const half2 *x, half2 *y, half2 a, int n) {
  int i = BID * BDIM + TID;
  if (i < n) y[i] = __builtin_elementwise_max(__builtin_elementwise_fma(a, x[i], y[i]), (half2){0, 0});
}

extern "C" __global__ void warp_collectives(const float *in, float *sums, unsigned *votes) {
  int i = BID * BDIM + TID;
  float v = in[i];
  for (int m = 16; m > 0; m >>= 1) v += shfl_xor32(v, m);
  unsigned ballot = ballot32(in[i] > 0.0f);
  int any = ballot32(in[i] < -1.0f) != 0;
  sums[i] = v;
  votes[i] = ballot ^ (unsigned)any;
}

// One warp's m16n8k16 f16→f32 mma, the fragments in memory in PTX's order (kernels.cu: a[lane*4+i],
// b[lane*2+i], c[lane*4+i], d[lane*4+i]; thread (g, t) = (lane/4, lane%4) holds A[g+8r][2t+8q..] in word
// 16g+4t+r+2q, B[2t+8r..][g] in word 8g+2t+r, C[g+8r][2t+e] in 16g+4t+2r+e). Each lane loads the words its
// matrix-instruction operands want straight from that order, so no lane moves data to another: the order
// of k inside one instruction does not change its sum, so each takes the k whose words lie together.
// Offsets are in bytes, each an OR of lane bit fields (the fewest instructions: measured against word
// indices and row/column formulas).
#define AT(type, p, bytes) (*(type *)((const char *)(p) + (bytes)))
#if defined(__gfx942__)
// A block of 32 threads is half a wave64, and every single-block MFMA reads k from lanes 32-63, which have
// no thread. The 4x4x4 16-block form keeps lanes 0-31 to themselves: block β = (lane bits 4, 3, 2) computes
// D's columns 2j + β0 (j = its lane, bits 1, 0) and rows 4β2 + 2β1 + j/2 + 8(j%2), which lane j supplies as
// A (so D register i is at a constant offset: 0, 2, 16, 18 words). Blocks 2p and 2p+1 share rows, so each
// instruction broadcasts one's A (CBSZ 1, ABID): a lane's A word pair serves two instructions, the k
// {2s, 2s+1, 2s+8, 2s+9} of step s = 2p + β0 (thread column s).
// Measured (instructions): 41; word indices 43, other row arrangements 44-63, without the broadcast 49.
extern "C" __global__ void __launch_bounds__(32) mma_tile(const unsigned *a, const unsigned *b, const float *c,
                                                          float *d) {
  unsigned lane = TID;
  unsigned ai = ((lane & 24) << 4) | ((lane & 2) << 5) | ((lane & 5) << 2);  // A row, step 2p + β0
  unsigned bi = ((lane & 3) << 6) | ((lane & 4) << 3);                         // B column 2j + β0
  unsigned ci = ((lane & 24) << 4) | ((lane & 3) << 4) | ((lane >> 2 & 1) << 2);  // C[block's row 0][column]
  const unsigned row_offsets[4] = {0, 8, 64, 72};
  float4 acc;
#pragma unroll
  for (int i = 0; i < 4; ++i) acc[i] = AT(const float, c, ci + row_offsets[i]);
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    half4 av = __builtin_bit_cast(half4, (uint2){AT(const unsigned, a, ai + 32 * p),
                                                 AT(const unsigned, a, ai + 32 * p + 8)});
    uint4 bw = AT(const uint4, b, bi + 16 * p);
    half4 b0 = __builtin_bit_cast(half4, (uint2){bw[0], bw[1]});
    half4 b1 = __builtin_bit_cast(half4, (uint2){bw[2], bw[3]});
    acc = __builtin_amdgcn_mfma_f32_4x4x4f16(av, b0, acc, 1, 0, 0);
    acc = __builtin_amdgcn_mfma_f32_4x4x4f16(av, b1, acc, 1, 1, 0);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) AT(float, d, ci + row_offsets[i]) = acc[i];
}
#else
// WMMA 16x16x16 computes Dᵀ = Bᵀ·Aᵀ: its A's row L%16 is PTX B column L%8 (rows 8-15 repeat 0-7; their
// results, registers 4-7, are dropped), its B's column L%16 PTX A row L%16, so Dᵀ[2i + L/16][L%16] in
// register i < 4 is all of D, 4 elements a lane, and lanes 16-31 repeat 0-15 as WMMA requires. Word w of
// B's column n is b[8n + w] (k 2(w/2) + 8(w%2)); A's row m holds the same k at a[16(m%8) + m/8 + 2w].
// Measured (instructions): 39; word indices 41, row/column formulas 42, A from 16-byte loads of both rows
// 47, D not transposed (8 registers, half the lanes storing) 104.
extern "C" __global__ void __launch_bounds__(32) mma_tile(const unsigned *a, const unsigned *b, const float *c,
                                                          float *d) {
  unsigned lane = TID;
  unsigned ai = ((lane & 7) << 6) | ((lane >> 1) & 4), bi = (lane & 7) << 5;
  unsigned ci = ((lane & 7) << 6) | (lane & 8) | ((lane >> 4) << 2);  // C[m][L/16], + 16i bytes: C[m][2i + L/16]
  uint8 aw, bw;
#pragma unroll
  for (int w = 0; w < 8; ++w) {
    aw[w] = AT(const unsigned, a, ai + 8 * w);
    bw[w] = AT(const unsigned, b, bi + 4 * w);
  }
  float8 acc = {};
#pragma unroll
  for (int i = 0; i < 4; ++i) acc[i] = AT(const float, c, ci + 16 * i);
  acc = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(__builtin_bit_cast(half16, bw), __builtin_bit_cast(half16, aw),
                                                    acc);
#pragma unroll
  for (int i = 0; i < 4; ++i) AT(float, d, ci + 16 * i) = acc[i];
}
#endif

extern "C" __global__ void transpose_tile(const float4 *in, float4 *out, int n4) {
  __shared__ float tile[32][36];
  int tx = TID, ty = TID_Y;
  float4 v = in[(BID_Y * 32 + ty) * n4 + BID * 8 + tx];
  *reinterpret_cast<float4 *>(&tile[ty][tx * 4]) = v;
  SYNC();
  float4 w = {tile[tx * 4][ty], tile[tx * 4 + 1][ty], tile[tx * 4 + 2][ty], tile[tx * 4 + 3][ty]};
  out[(BID * 32 + ty) * n4 + BID_Y * 8 + tx] = w;
}

extern "C" __global__ void conv_rows(const float *__restrict__ in, const float *__restrict__ taps,
                                     float *__restrict__ out) {
  __shared__ float buf[1024 + 8];
  const float *src = in + BID * 1024;
#pragma unroll
  for (int i = 0; i < 1024; i += 256) buf[i + TID] = src[i + TID];
  if (TID < 8) buf[1024 + TID] = src[1024 + TID];
  SYNC();
  float w[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) w[k] = taps[k];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; ++k) s += w[k] * buf[4 * TID + j + k];
    out[BID * 1024 + 4 * TID + j] = s;
  }
}

__constant__ float poly_coefficients[8] = {1.0f, -0.5f, 0.25f, -0.125f, 0.0625f, -0.03125f, 0.015625f, -0.0078125f};
extern "C" __global__ void poly_const(const float *x, float *y, int n) {
  int i = BID * BDIM + TID;
  if (i >= n) return;
  float v = x[i], s = poly_coefficients[7];
#pragma unroll
  for (int k = 6; k >= 0; --k) s = s * v + poly_coefficients[k];
  y[i] = s;
}

#include "one_op.h"

static constexpr float TURNS_PER_RADIAN = 0.15915494309189535f;

// fma.rm: the f32 rounding mode switched to round-down around the fma (FLT_ROUNDS 3), and back (1)
ONE_OP(op_fma_rm, __builtin_set_flt_rounds(3); y = __builtin_fmaf(a, b, c); __builtin_set_flt_rounds(1))
ONE_OP(op_max, y = __builtin_fmaxf(a, b))
ONE_OP(op_min, y = __builtin_fminf(a, b))
ONE_OP(op_sat, y = __builtin_fminf(__builtin_fmaxf(a, 0.0f), 1.0f))
ONE_OP(op_ex2, y = __builtin_amdgcn_exp2f(a))
ONE_OP(op_rcp, y = __builtin_amdgcn_rcpf(a))
ONE_OP(op_sqrt, y = __builtin_amdgcn_sqrtf(a))
ONE_OP(op_rsqrt, y = __builtin_amdgcn_rsqf(a))
ONE_OP(op_lg2, y = __builtin_amdgcn_logf(a))
ONE_OP(op_sin, y = __builtin_amdgcn_sinf(a * TURNS_PER_RADIAN))
ONE_OP(op_cos, y = __builtin_amdgcn_cosf(a * TURNS_PER_RADIAN))
ONE_OP(op_expf, y = __builtin_expf(a))
// (the .ftz arithmetic kernels are in kernels_ftz.hip: HIP flushes subnormals only file-wide)

#define HALF2_OP(name, expr)                                                                             \
  extern "C" __global__ void name(const half2 *pa, const half2 *pb, const half2 *pc, half2 *py) {        \
    int i = BID * BDIM + TID;                                                                            \
    half2 a = pa[i], b = pb[i], c = pc[i], y;                                                            \
    (void)c;                                                                                             \
    expr;                                                                                                \
    py[i] = y;                                                                                           \
  }
HALF2_OP(op_add_f16x2, y = a + b)
HALF2_OP(op_fma_f16x2, y = __builtin_elementwise_fma(a, b, c))
