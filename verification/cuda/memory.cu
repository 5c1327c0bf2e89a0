// Atomics, stencils with halos in shared memory, transposes, histograms.
extern "C" __global__ void histogram_shared(const unsigned* in, unsigned* bins, int n) {
    __shared__ unsigned local[64];
    if (threadIdx.x < 64) local[threadIdx.x] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[in[i] % 64], 1u);
    __syncthreads();
    if (threadIdx.x < 64) atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
}

extern "C" __global__ void atomics_mix(const int* in, int* acc, unsigned long long* wide, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = in[i];
    atomicMax(&acc[0], v);
    atomicMin(&acc[1], v);
    atomicAnd(&acc[2], v | 0x10000);
    atomicOr(&acc[3], v & 0x1010);
    atomicXor(&acc[4], v);
    atomicInc((unsigned*)&acc[5], 1000u);
    atomicAdd(&wide[0], (unsigned long long)(unsigned)v);
    int old = acc[6];
    while (true) {  // a CAS loop: saturating add
        int next = min(old + (v & 0xff), 100000);
        int seen = atomicCAS(&acc[6], old, next);
        if (seen == old) break;
        old = seen;
    }
}

extern "C" __global__ void stencil7(const float* in, float* out, int n) {
    __shared__ float tile[256 + 6];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x + 3] = i < n ? in[i] : 0.0f;
    if (threadIdx.x < 3) {
        int left = i - 3, right = i + blockDim.x;
        tile[threadIdx.x] = left >= 0 ? in[left] : 0.0f;
        tile[threadIdx.x + blockDim.x + 3] = right < n ? in[right] : 0.0f;
    }
    __syncthreads();
    const float w[7] = {0.05f, 0.1f, 0.2f, 0.3f, 0.2f, 0.1f, 0.05f};
    float s = 0.0f;
    for (int k = 0; k < 7; ++k) s += w[k] * tile[threadIdx.x + k];
    if (i < n) out[i] = s;
}

extern "C" __global__ void transpose32(const float* in, float* out, int width) {
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * width + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) out[(y + j) * width + x] = tile[threadIdx.x][threadIdx.y + j];
}

extern "C" __global__ void sgemm_tiled(const float* a, const float* b, float* c, int n) {
    __shared__ float as[16][16], bs[16][16];
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < n; t += 16) {
        as[threadIdx.y][threadIdx.x] = a[row * n + t + threadIdx.x];
        bs[threadIdx.y][threadIdx.x] = b[(t + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < 16; ++k) acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
        __syncthreads();
    }
    c[row * n + col] = acc;
}

extern "C" __global__ void bitonic_sort512(unsigned* keys) {
    __shared__ unsigned s[512];
    unsigned* block = keys + blockIdx.x * 512;
    s[threadIdx.x] = block[threadIdx.x];
    s[threadIdx.x + 256] = block[threadIdx.x + 256];
    __syncthreads();
    for (unsigned size = 2; size <= 512; size <<= 1) {
        for (unsigned stride = size / 2; stride > 0; stride >>= 1) {
            unsigned pos = 2 * threadIdx.x - (threadIdx.x & (stride - 1));
            bool up = ((pos & size) == 0);
            unsigned x = s[pos], y = s[pos + stride];
            if ((x > y) == up) { s[pos] = y; s[pos + stride] = x; }
            __syncthreads();
        }
    }
    block[threadIdx.x] = s[threadIdx.x];
    block[threadIdx.x + 256] = s[threadIdx.x + 256];
}

// __device__ tables of addresses of other __device__ variables: nvcc writes their initialisers as
// `generic(var)` and `var+offset` in the .global (and .const) declarations, resolved when the module loads
__device__ unsigned table_words[8] = {0x01234567u, 0x89ABCDEFu, 0xDEADBEEFu, 0x7F800001u,
                                      0x80000000u, 0x00000001u, 0xFFFFFFFFu, 0x3F800000u};
__device__ unsigned long long table_wide[3] = {0x0123456789ABCDEFull, 0xFFF0000000000001ull, 42ull};
__device__ unsigned char table_bytes[6] = {1, 2, 3, 250, 251, 252};
__device__ unsigned* word_pointers[4] = {table_words, table_words + 3, &table_words[5], table_words + 6};
__device__ unsigned long long* wide_pointers[2] = {&table_wide[2], table_wide};
__device__ unsigned char* byte_pointers[3] = {table_bytes + 1, table_bytes, &table_bytes[5]};
__device__ unsigned** pointer_to_table = word_pointers + 1;
__constant__ unsigned* const_pointers[2] = {table_words + 2, table_words + 6};

// out: 4 words a thread, chosen through the tables by the thread's input
extern "C" __global__ void address_tables(const unsigned* in, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = in[i];
    unsigned long long wide = *wide_pointers[x & 1];
    out[4 * i] = *word_pointers[x & 3] ^ *byte_pointers[(x >> 2) % 3];
    out[4 * i + 1] = (unsigned)(wide >> ((x >> 4) & 32));
    out[4 * i + 2] = pointer_to_table[(x >> 6) % 3][(x >> 8) & 1] + *const_pointers[(x >> 9) & 1];
    out[4 * i + 3] = (unsigned)(word_pointers[(x >> 10) & 3] - table_words) + 100u * (unsigned)(byte_pointers[x % 3] - table_bytes);
}
