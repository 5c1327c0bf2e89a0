// Divergent control flow, loops, switches, recursion and device-function calls.
struct Pair { int a; float b; };

__device__ __noinline__ int fib(int k) { return k < 2 ? k : fib(k - 1) + fib(k - 2); }

__device__ __noinline__ Pair combine(Pair x, Pair y, int mode) {
    Pair r;
    r.a = mode & 1 ? x.a * y.a : x.a - y.a;
    r.b = mode & 2 ? x.b * y.b + 1.0f : x.b - y.b;
    return r;
}

extern "C" __global__ void divergent(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = in[i], r = 0;
    switch (v & 7) {
        case 0: r = v * 3; break;
        case 1: r = v ^ 0x5a5a; break;
        case 2: for (int k = 0; k < (v & 15); ++k) r += k * v; break;
        case 3: r = fib(v & 15); break;
        case 4: { int x = v; while (x > 1) { x = (x & 1) ? 3 * x + 1 : x >> 1; ++r; if (r > 200) break; } } break;
        case 5: r = v < 0 ? -v : v; break;
        default: r = __popc(v) * (v >> 3);
    }
    out[i] = r;
}

extern "C" __global__ void calls(const int* ia, const float* fb, int* oa, float* ob, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Pair x = {ia[i], fb[i]}, y = {ia[(i + 1) % n], fb[(i + 7) % n]};
    Pair r = combine(x, y, i);
    r = combine(r, x, i >> 2);
    oa[i] = r.a;
    ob[i] = r.b;
}

extern "C" __global__ void early_exit(const float* in, float* out, int n, float limit) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = in[i], acc = 0.0f;
    for (int k = 0; k < 64; ++k) {
        acc = acc * 0.5f + v;
        if (acc > limit) { out[i] = -acc; return; }
        v = v * 1.25f - 0.125f;
    }
    out[i] = acc;
}
