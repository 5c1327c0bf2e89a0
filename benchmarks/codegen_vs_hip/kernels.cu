// The benchmark's kernels as CUDA (benchmarks/codegen_vs_hip.py): nvcc -arch=sm_90 -ptx gives the PTX that fatkit
// translates. kernels.hip holds the same kernels as HIP for clang. Every kernel is extern "C" so both sides
// give it the same symbol; the one-op kernels write their PTX instruction as inline assembly where CUDA has
// no intrinsic for exactly that form.
#include <cuda_fp16.h>

#define TID threadIdx.x
#define BID blockIdx.x
#define BDIM blockDim.x
#define SYNC() __syncthreads()
#define WARP_ALL 0xffffffffu

extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
  int i = BID * BDIM + TID;
  if (i < n) y[i] = a * x[i] + y[i];
}

// 2-D five-point stencil on a w×h grid, the border copied
extern "C" __global__ void stencil(const float *in, float *out, int w, int h) {
  int x = BID * BDIM + TID, y = blockIdx.y;
  if (x >= w) return;
  int i = y * w + x;
  if (x == 0 || y == 0 || x == w - 1 || y == h - 1) { out[i] = in[i]; return; }
  out[i] = 0.5f * in[i] + 0.125f * (in[i - 1] + in[i + 1] + in[i - w] + in[i + w]);
}

// sum of 256 values per block, a shared-memory tree
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

// C = A·B, n×n, 16×16 tiles through shared memory, blocks of 16×16 threads
extern "C" __global__ void sgemm_tile(const float *a, const float *b, float *c, int n) {
  __shared__ float ta[16][16], tb[16][16];
  int tx = TID, ty = threadIdx.y, row = blockIdx.y * 16 + ty, col = BID * 16 + tx;
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

// 64-bin histogram of bytes: shared-memory atomics, then one global atomic per bin and block
extern "C" __global__ void histogram(const unsigned char *data, unsigned *bins, int n) {
  __shared__ unsigned local[64];
  if (TID < 64) local[TID] = 0;
  SYNC();
  for (int i = BID * BDIM + TID; i < n; i += BDIM * gridDim.x) atomicAdd(&local[data[i] & 63], 1u);
  SYNC();
  if (TID < 64) atomicAdd(&bins[TID], local[TID]);
}

// one row of 256 per block: max, exp(x - max), sum, divide
extern "C" __global__ void softmax_row(const float *in, float *out) {
  __shared__ float part[256];
  const float *row = in + BID * 256;
  float x = row[TID];
  part[TID] = x;
  SYNC();
  for (int s = 128; s > 0; s >>= 1) {
    if (TID < s) part[TID] = fmaxf(part[TID], part[TID + s]);
    SYNC();
  }
  float e = expf(x - part[0]);
  SYNC();
  part[TID] = e;
  SYNC();
  for (int s = 128; s > 0; s >>= 1) {
    if (TID < s) part[TID] += part[TID + s];
    SYNC();
  }
  out[BID * 256 + TID] = e / part[0];
}

// f16x2 axpy with a ReLU: packed halves throughout
extern "C" __global__ void half2_axpy(const __half2 *x, __half2 *y, __half2 a, int n) {
  int i = BID * BDIM + TID;
  if (i < n) y[i] = __hmax2(__hfma2(a, x[i], y[i]), __float2half2_rn(0.0f));
}

// warp collectives: a butterfly sum over 32 lanes, a ballot and an any-vote
extern "C" __global__ void warp_collectives(const float *in, float *sums, unsigned *votes) {
  int i = BID * BDIM + TID;
  float v = in[i];
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(WARP_ALL, v, m);
  unsigned ballot = __ballot_sync(WARP_ALL, in[i] > 0.0f);
  int any = __any_sync(WARP_ALL, in[i] < -1.0f);
  sums[i] = v;
  votes[i] = ballot ^ (unsigned)any;
}

// one warp, one m16n8k16 f16→f32 mma: each lane's fragments loaded, multiplied, stored
extern "C" __global__ void __launch_bounds__(32) mma_tile(const unsigned *a, const unsigned *b, const float *c, float *d) {
  int lane = TID & 31;
  unsigned a0 = a[lane * 4], a1 = a[lane * 4 + 1], a2 = a[lane * 4 + 2], a3 = a[lane * 4 + 3];
  unsigned b0 = b[lane * 2], b1 = b[lane * 2 + 1];
  float c0 = c[lane * 4], c1 = c[lane * 4 + 1], c2 = c[lane * 4 + 2], c3 = c[lane * 4 + 3];
  float d0, d1, d2, d3;
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%10,%11,%12,%13};"
               : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c0), "f"(c1), "f"(c2), "f"(c3));
  d[lane * 4] = d0; d[lane * 4 + 1] = d1; d[lane * 4 + 2] = d2; d[lane * 4 + 3] = d3;
}

// Wide shared-memory access (lower/memory.py: addresses as GEPs from their variable). A 32×32 tile per block
// of 8×32 threads: rows come in as float4, go to shared memory as float4 (st.shared.v4), and leave
// transposed, four column elements a thread gathered from shared memory and stored as one float4.
extern "C" __global__ void transpose_tile(const float4 *in, float4 *out, int n4) {
  __shared__ float tile[32][36];  // rows of 144 bytes: 16-byte aligned, and a float4 off the bank stride
  int tx = TID, ty = threadIdx.y;
  float4 v = in[(blockIdx.y * 32 + ty) * n4 + BID * 8 + tx];
  *reinterpret_cast<float4 *>(&tile[ty][tx * 4]) = v;
  SYNC();
  float4 w = make_float4(tile[tx * 4][ty], tile[tx * 4 + 1][ty], tile[tx * 4 + 2][ty], tile[tx * 4 + 3][ty]);
  out[(BID * 32 + ty) * n4 + blockIdx.y * 8 + tx] = w;
}

// 1-D convolution of 8 taps: the block's 1,032 inputs staged in shared memory, each thread 4 consecutive
// outputs. A thread's 11 shared-memory reads are one run from a 16-byte aligned start, which a compiler that
// aligns `buf` (declared .align 4) may read 16 bytes at a time; its 4 outputs are consecutive floats. The
// taps are the same for every thread: uniform loads of read-only memory (ld.global.nc).
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

// a polynomial of degree 7 whose coefficients lie in __constant__ memory (ld.const at uniform addresses:
// scalar loads), evaluated by Horner's rule at every x
__constant__ float poly_coefficients[8] = {1.0f, -0.5f, 0.25f, -0.125f, 0.0625f, -0.03125f, 0.015625f, -0.0078125f};
extern "C" __global__ void poly_const(const float *x, float *y, int n) {
  int i = BID * BDIM + TID;
  if (i >= n) return;
  float v = x[i], s = poly_coefficients[7];
#pragma unroll
  for (int k = 6; k >= 0; --k) s = s * v + poly_coefficients[k];
  y[i] = s;
}

// One-op kernels: y[i] = op(a[i], b[i], c[i]), the op one PTX instruction (or nvcc's expf)
#include "one_op.h"
#define ASM1(op) asm(op " %0, %1;" : "=f"(y) : "f"(a))
#define ASM2(op) asm(op " %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b))
#define ASM3(op) asm(op " %0, %1, %2, %3;" : "=f"(y) : "f"(a), "f"(b), "f"(c))

ONE_OP(op_fma_rm, ASM3("fma.rm.f32"))
ONE_OP(op_max, ASM2("max.f32"))
ONE_OP(op_min, ASM2("min.f32"))
ONE_OP(op_sat, ASM1("cvt.sat.f32.f32"))
ONE_OP(op_ex2, ASM1("ex2.approx.ftz.f32"))
ONE_OP(op_rcp, ASM1("rcp.approx.ftz.f32"))
ONE_OP(op_sqrt, ASM1("sqrt.approx.ftz.f32"))
ONE_OP(op_rsqrt, ASM1("rsqrt.approx.ftz.f32"))
ONE_OP(op_lg2, ASM1("lg2.approx.ftz.f32"))
ONE_OP(op_sin, ASM1("sin.approx.ftz.f32"))
ONE_OP(op_cos, ASM1("cos.approx.ftz.f32"))
ONE_OP(op_expf, y = expf(a))
ONE_OP(op_add_ftz, ASM2("add.ftz.f32"))
ONE_OP(op_mul_ftz, ASM2("mul.ftz.f32"))
ONE_OP(op_fma_ftz, ASM3("fma.rn.ftz.f32"))

// f16x2 one-op kernels on packed pairs
#define HALF2_OP(name, expr)                                                                             \
  extern "C" __global__ void name(const unsigned *pa, const unsigned *pb, const unsigned *pc, unsigned *py) { \
    int i = BID * BDIM + TID;                                                                            \
    unsigned a = pa[i], b = pb[i], c = pc[i], y;                                                         \
    (void)c;                                                                                             \
    expr;                                                                                                \
    py[i] = y;                                                                                           \
  }
HALF2_OP(op_add_f16x2, asm("add.rn.f16x2 %0, %1, %2;" : "=r"(y) : "r"(a), "r"(b)))
HALF2_OP(op_fma_f16x2, asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(y) : "r"(a), "r"(b), "r"(c)))
