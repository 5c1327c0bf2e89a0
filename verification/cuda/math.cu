// Integer and floating-point math as nvcc expands it: libdevice-style sequences, intrinsics, conversions.
#include <cuda_fp16.h>
extern "C" __global__ void int_mix(const unsigned* in, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned v = in[i], w = in[(i * 7 + 3) % n];
    unsigned h = v * 0x9e3779b1u;
    h ^= h >> 15;
    h = __funnelshift_l(h, w, v & 31) + __byte_perm(h, w, 0x5140);
    h += __popc(v) + __clz(w) + __brev(v) + __umulhi(v, w) + __sad(v, w, 7u);
    h ^= (unsigned)(__mul64hi((long long)v * 12345, (long long)w) >> 7);
    h += w ? v / w + v % w : 0u;
    int s = (int)v, t = (int)w | 1;
    h += (unsigned)(s / t) + (unsigned)(s % t) + __vabsdiffu4(v, w) + __vadd2(v, w);
    out[i] = h;
}

extern "C" __global__ void float_libm(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = in[i];
    out[6 * i + 0] = expf(x);
    out[6 * i + 1] = logf(fabsf(x) + 1e-3f);
    out[6 * i + 2] = sinf(x) + cosf(x);
    out[6 * i + 3] = powf(fabsf(x), 0.37f);
    out[6 * i + 4] = tanhf(x) + erff(x);
    out[6 * i + 5] = sqrtf(fabsf(x)) / (x + 3.0f) + rsqrtf(fabsf(x) + 1.0f);
}

extern "C" __global__ void double_libm(const double* in, double* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = in[i];
    out[4 * i + 0] = exp(x);
    out[4 * i + 1] = log(fabs(x) + 1e-9);
    out[4 * i + 2] = sin(x) * cos(x);
    out[4 * i + 3] = sqrt(fabs(x)) / (x + 3.0);
}

extern "C" __global__ void conversions(const float* in, int* oi, unsigned short* oh, double* od, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = in[i] * 1000.0f;
    oi[4 * i + 0] = __float2int_rn(x);
    oi[4 * i + 1] = __float2int_rz(x);
    oi[4 * i + 2] = (int)__float2uint_rd(x);
    oi[4 * i + 3] = (int)__float2ll_ru(x);
    oh[2 * i + 0] = __half_as_ushort(__float2half_rn(x));
    oh[2 * i + 1] = __float2half_rn(x) == __float2half_rn(x) ? 1 : 0;
    od[i] = (double)x * 3.0 + __int2double_rn((int)x);
}
