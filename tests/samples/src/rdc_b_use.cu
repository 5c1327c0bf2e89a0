// nv_rdc_two_links, second device link: a kernel calling the rdc_lookup of its own link (rdc_b_define.cu).
extern __device__ int b_scale;
extern __device__ float rdc_lookup(int i);
__global__ void b_use(float* out, int n)
{
    int i = threadIdx.x;
    if (i < n) out[i] = rdc_lookup(i) + b_scale;
}
void launch_b_use(float* out, int n) { b_use<<<1, 32>>>(out, n); }
