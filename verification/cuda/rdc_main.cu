// Separately compiled device code (nvcc -rdc=true), the kernel's unit: it calls functions and reads
// variables that rdc_lib.cu defines (`.extern .func` / `.extern .global` in this unit's PTX); each unit also
// has a static function of the same name (internal linkage: one per unit).
extern __device__ unsigned rdc_mix(unsigned x, unsigned key);
extern __device__ float rdc_scaled(float x);
extern __device__ unsigned rdc_keys[4];
extern __device__ float rdc_scale;

static __device__ __noinline__ unsigned local_step(unsigned x) { return x * 0x9E3779B9u + 7u; }

extern "C" __global__ void rdc_calls(const unsigned* in, const float* values, unsigned* out, float* scaled, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = in[i];
    out[2 * i] = rdc_mix(local_step(x), rdc_keys[x & 3]);
    out[2 * i + 1] = rdc_mix(x >> 3, i) ^ rdc_keys[(x >> 2) & 3];
    scaled[i] = rdc_scaled(values[i]) + rdc_scale;
}
