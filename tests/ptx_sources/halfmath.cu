// Half, bfloat16 and fp8 arithmetic and conversions.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

__global__ void halves(__half *h, __half2 *h2, __nv_bfloat16 *b, __nv_bfloat162 *b2, float *f) {
    int t = threadIdx.x;
    __half x = h[t], y = h[t + 1];
    h[t] = __hadd(x, y) + __hmul(x, y) + __hfma(x, y, x) + hsqrt(x) + hexp(y) + __hdiv(x, y) + __habs(x) + __hneg(y);
    h[t + 1] = __hmax(x, y) + __hmin_nan(x, y) + hrcp(x) + hlog2(x) + __hadd_sat(x, y) + (__hlt(x, y) ? x : y);
    __half2 p = h2[t], q = h2[t + 1];
    h2[t] = __hfma2(p, q, p) + __hmul2(p, q) + h2sqrt(p) + __hmax2(p, q) + __hadd2_sat(p, q) + h2exp2(q) + __h2div(p, q);
    __nv_bfloat16 u = b[t], w = b[t + 1];
    b[t] = __hadd(u, w) + __hmul(u, w) + __hfma(u, w, u) + hsqrt(u) + __hmax(u, w) + hexp(w) + __hfma_relu(u, w, u);
    __nv_bfloat162 r = b2[t], s = b2[t + 1];
    b2[t] = __hfma2(r, s, r) + __hmul2(r, s) + __hmin2(r, s) + h2log(r);
    f[t] = __half2float(x) + __bfloat162float(u) + __low2float(p) + __high2float(q);
    h[t + 2] = __float2half_rz(f[t + 1]) + __float2half_rd(f[t + 2]) + __int2half_rn(t) + __ushort_as_half((unsigned short)t);
    b[t + 2] = __float2bfloat16_rn(f[t + 3]) + __int2bfloat16_rn(t) + __double2bfloat16(1.0 / 3.0);
    h2[t + 2] = __floats2half2_rn(f[t], f[t + 1]) + __float2half2_rn(2.0f) + __lowhigh2highlow(p);
    f[t + 4] = (float)__hisnan(x) + (float)__hbeq2(p, q) + (float)__hisinf(u);
}

__global__ void fp8(const float *in, __nv_fp8_e4m3 *e4, __nv_fp8_e5m2 *e5, float *out) {
    int t = threadIdx.x;
    e4[t] = __nv_fp8_e4m3(in[t]);
    e5[t] = __nv_fp8_e5m2(in[t + 1]);
    __nv_fp8x2_e4m3 pair(make_float2(in[t], in[t + 1]));
    out[t] = float(e4[t + 1]) + float(e5[t + 1]) + float2(pair).x;
    __nv_fp8x4_e5m2 quad(make_float4(in[0], in[1], in[2], in[3]));
    out[t + 1] = float4(quad).w;
}
