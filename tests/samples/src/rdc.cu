// Second TU for -rdc=true builds: calls a __device__ function defined in kern.cu.
extern __device__ float rdc_helper(float v);

__global__ void rdc_kernel(float* p) { p[threadIdx.x] = rdc_helper(p[threadIdx.x]); }

void launch_rdc(float* p) { rdc_kernel<<<1, 32>>>(p); }
