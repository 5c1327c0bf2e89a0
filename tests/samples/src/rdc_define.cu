// Defines what rdc_use.cu declares extern; its own static `twice` differs from rdc_use.cu's.
__device__ int rdc_scale = 3;
__device__ float rdc_table[4] = {0.5f, 1.5f, 2.5f, 3.5f};

static __device__ __noinline__ int twice(int v) { return 2 * v + 1000; }

__device__ float rdc_lookup(int i) { return (float)twice(i); }

__global__ void rdc_define_only(int* out) { out[threadIdx.x] = twice(threadIdx.x) + rdc_scale; }

int main() { return 0; }
