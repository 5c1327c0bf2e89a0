// Language basics: templates, device functions (recursion, pointers, virtual calls), globals and constants
// with initializers, dynamic shared memory, launch bounds, printf/assert, math and bit intrinsics.
#include <cassert>
#include <cstdio>
#include <cstdint>

struct Shape {
    __device__ virtual float area() const = 0;
    __device__ virtual ~Shape() {}
};
struct Square : Shape {
    float side;
    __device__ explicit Square(float s) : side(s) {}
    __device__ float area() const override { return side * side; }
};
struct Circle : Shape {
    float radius;
    __device__ explicit Circle(float r) : radius(r) {}
    __device__ float area() const override { return 3.14159265f * radius * radius; }
};

__constant__ float weights[8] = {0.5f, 1.0f, -2.25f, 1e-3f, 3.0e8f, -0.0f, 1.0f / 3.0f, 7.0f};
__constant__ int64_t big_values[3] = {-1, 0x7fffffffffffffffLL, 42};
__device__ int counter = 17;
__device__ double table[4] = {1.0, 2.5, -3.75, 1e300};
__device__ const char *names[2] = {"alpha", "beta"};
__device__ int *pointer_to_counter = &counter;
__device__ __managed__ int managed_flag;

__device__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__device__ int twice(int x) { return 2 * x; }
__device__ int square(int x) { return x * x; }
typedef int (*unary_fn)(int);
__device__ unary_fn unary_table[2] = {twice, square};

template <typename T, int N>
__device__ T dot(const T *a, const T *b) {
    T sum = T(0);
#pragma unroll
    for (int i = 0; i < N; ++i) sum += a[i] * b[i];
    return sum;
}

template <typename T>
__global__ void __launch_bounds__(256, 2) axpy(T alpha, const T *__restrict__ x, T *__restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * __ldg(&x[i]) + y[i];
}
template __global__ void axpy<float>(float, const float *, float *, int);
template __global__ void axpy<double>(double, const double *, double *, int);
template __global__ void axpy<int>(int, const int *, int *, int);

extern __shared__ float dynamic_smem[];

__global__ void __launch_bounds__(128) dynamic_shared(float *out, int n) {
    __shared__ int static_smem[64];
    int t = threadIdx.x;
    dynamic_smem[t] = t * weights[t & 7];
    if (t < 64) static_smem[t] = t;
    __syncthreads();
    int all = __syncthreads_and(t < n);
    int any = __syncthreads_or(t > 3);
    int cnt = __syncthreads_count(t & 1);
    out[t] = dynamic_smem[(t + 1) % blockDim.x] + static_smem[t & 63] + all + any + cnt;
}

__global__ void calls(int *out, int selector, const float *a, const float *b) {
    int t = threadIdx.x;
    unary_fn f = unary_table[selector & 1];
    out[t] = fib(t & 15) + f(t) + (int)dot<float, 4>(a, b) + *pointer_to_counter + (int)table[t & 3];
    Shape *s = (t & 1) ? (Shape *)new Square(2.0f) : (Shape *)new Circle(1.0f);
    out[t + 1] = (int)s->area();
    delete s;
    printf("thread %d of %d: %s %f %lld\n", t, blockDim.x, names[t & 1], weights[t & 7], big_values[t % 3]);
    assert(out[t] >= 0);
    if (managed_flag) __trap();
}

__global__ void bits(unsigned *out, const unsigned *in, unsigned long long *out64) {
    int t = threadIdx.x;
    unsigned v = in[t];
    out[0 + t] = __popc(v) + __clz(v) + __ffs(v) + __brev(v);
    out[1 + t] = __byte_perm(v, in[t + 1], 0x5410) ^ __funnelshift_l(v, in[t + 2], 7) ^ __funnelshift_rc(v, v, 3);
    out[2 + t] = __dp4a(v, in[t + 3], 5u) + __dp2a_lo(v, in[t + 4], 1u);
    out[3 + t] = __vadd4(v, in[t + 5]) + __vabsdiffu4(v, 3) + __vcmpgtu2(v, 9) + __vmaxs2(v, 1);
    out[4 + t] = __sad(v, 2u, 3u) + __umulhi(v, 7u) + __mul24(v, 3) + __umul24(v, 5) + v / in[t + 6] + v % 13;
    out64[t] = __umul64hi((unsigned long long)v, 0x123456789ull) + __brevll(v) + __popcll(v) + clock64();
    volatile unsigned *vp = (volatile unsigned *)in;
    out[5 + t] = vp[t] + __ldcs(in + t) + __ldlu(in + t) + __ldcv(in + t);
    __stcs(out + 6 + t, v);
    __stwt(out + 7 + t, v);
    __nanosleep(100);
    unsigned long long gt;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
    unsigned lane, smid;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    asm("mov.u32 %0, %%smid;" : "=r"(smid));
    out64[t + 1] = gt + lane + smid;
    unsigned uniform, packed;
    asm volatile("ldu.global.u32 %0, [%1];" : "=r"(uniform) : "l"(in));
    asm volatile("red.global.add.u32 [%0], %1;" ::"l"(out + 8), "r"(v));
    asm("vadd4.u32.u32.u32.sat %0, %1, %2, %3;" : "=r"(packed) : "r"(v), "r"(uniform), "r"(0));
    unsigned shared_flag;
    asm("{\n\t.reg .pred s;\n\tisspacep.shared s, %1;\n\tselp.u32 %0, 1, 0, s;\n}" : "=r"(shared_flag) : "l"(in));
    out[9 + t] = packed + shared_flag;
}

__global__ void floats(float *f, double *d, int *i) {
    int t = threadIdx.x;
    float x = f[t];
    double y = d[t];
    f[t] = sinf(x) + cosf(x) + expf(x) + logf(x) + powf(x, 2.5f) + sqrtf(x) + rsqrtf(x) + tanhf(x) + erff(x);
    f[t + 1] = __sinf(x) + __cosf(x) + __expf(x) + __logf(x) + __fdividef(x, 3.0f) + __saturatef(x) + fmaf(x, x, 1.0f);
    f[t + 2] = __fadd_rz(x, 1.0f) + __fmul_ru(x, x) + __fdiv_rd(x, 3.0f) + __frcp_rn(x) + __fsqrt_ru(x) + copysignf(x, -1.0f);
    d[t] = sin(y) + exp(y) + log1p(y) + cbrt(y) + __dadd_rn(y, 1.0) + __drcp_rz(y) + fma(y, y, y) + y / 3.0;
    i[t] = __float2int_rn(x) + __float2uint_rz(x) + __double2int_rd(y) + (int)__float_as_uint(x) + isnan(x) + isinf(y);
    i[t + 1] = (int)__double2ll_ru(y) + __float2ll_rn(x) + (int)rintf(x) + (int)truncf(x) + (int)floor(y) + (int)fabsf(x);
}

__global__ void local_array(float *out, int k) {
    float scratch[32];
    for (int j = 0; j < 32; ++j) scratch[j] = out[j] * j;
    out[threadIdx.x] = scratch[k & 31];
}

__global__ void __maxnreg__(40) control_flow(int *out, const int *in, int n) {
    int acc = 0;
#pragma unroll 1
    for (int j = 0; j < n; ++j) {
        switch (in[j] & 15) {
            case 0: acc += 3; break;
            case 1: acc ^= 0x55; break;
            case 2: acc *= 7; break;
            case 3: acc -= in[j + 1]; break;
            case 4: acc <<= 1; break;
            case 5: acc = acc / 3; break;
            case 6: acc |= 9; break;
            case 7: acc += in[j + 2] * 5; break;
            case 8: acc = -acc; break;
            case 9: acc %= 11; break;
            case 10: acc += 100; break;
            default: acc += j; break;
        }
    }
    void *stack = alloca(n * sizeof(int));
    ((int *)stack)[0] = acc;
    out[threadIdx.x] = ((int *)stack)[n - 1];
}
