// Block reductions and scans through shared memory and __syncthreads (blocks of 256 threads).
extern "C" __global__ void block_sum_f32(const float* in, float* out, int n) {
    __shared__ float tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) tile[threadIdx.x] += tile[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = tile[0];
}

extern "C" __global__ void block_minmax_i32(const int* in, int* out, int n) {
    __shared__ int lo[256], hi[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    lo[threadIdx.x] = i < n ? in[i] : 0x7fffffff;
    hi[threadIdx.x] = i < n ? in[i] : (int)0x80000000;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            lo[threadIdx.x] = min(lo[threadIdx.x], lo[threadIdx.x + s]);
            hi[threadIdx.x] = max(hi[threadIdx.x], hi[threadIdx.x + s]);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) { out[2 * blockIdx.x] = lo[0]; out[2 * blockIdx.x + 1] = hi[0]; }
}

extern "C" __global__ void block_scan_u32(const unsigned* in, unsigned* out, int n) {
    __shared__ unsigned buf[2][256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int src = 0;
    buf[0][threadIdx.x] = i < n ? in[i] : 0u;
    __syncthreads();
    for (int offset = 1; offset < blockDim.x; offset <<= 1) {
        unsigned v = buf[src][threadIdx.x];
        if (threadIdx.x >= offset) v += buf[src][threadIdx.x - offset];
        buf[1 - src][threadIdx.x] = v;
        src = 1 - src;
        __syncthreads();
    }
    if (i < n) out[i] = buf[src][threadIdx.x];
}

extern "C" __global__ void dot_f64(const double* a, const double* b, double* out, int n) {
    __shared__ double tile[256];
    double acc = 0.0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc = fma(a[i], b[i], acc);
    tile[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) tile[threadIdx.x] += tile[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = tile[0];
}
