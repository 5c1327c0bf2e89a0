// A small program built with -G (device debug): `.target …, debug`, DWARF `.section`s, `.file`, `.loc`.
struct Pair {
    int key;
    float value;
};

__device__ float weigh(Pair p, float scale) { return p.value * scale + p.key; }

__global__ void debugged(const Pair *pairs, float *out, int n) {
    float total = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) total += weigh(pairs[i], 0.5f);
    __shared__ float partial[32];
    partial[threadIdx.x & 31] = total;
    __syncthreads();
    if (threadIdx.x == 0) {
        float sum = 0.0f;
        for (int i = 0; i < 32; ++i) sum += partial[i];
        out[blockIdx.x] = sum;
    }
}
