// -rdc=true: a kernel that calls a __device__ function and reads __device__ variables that
// rdc_define.cu defines; each unit has a static `twice` of its own (internal linkage).
extern __device__ int rdc_scale;
extern __device__ float rdc_table[4];
extern __device__ float rdc_lookup(int i);

static __device__ __noinline__ int twice(int v) { return 2 * v; }

__global__ void rdc_use(float* out, int n)
{
    int i = threadIdx.x;
    if (i < n) out[i] = rdc_lookup(i) * rdc_scale + rdc_table[i & 3] + twice(i);
}

void launch_rdc_use(float* out, int n) { rdc_use<<<1, 32>>>(out, n); }
