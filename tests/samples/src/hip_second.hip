// Second HIP TU, so a linked host binary holds two bundles in .hip_fatbin.
#define __global__ __attribute__((global))

// The host-side kernel stub clang generates calls hipLaunchKernel; a declaration is all it needs.
struct dim3 { unsigned x, y, z; };
extern "C" int hipLaunchKernel(const void* f, dim3 grid, dim3 block, void** args, unsigned long shmem, void* stream);

extern "C" __global__ void second_kernel(int* p) { p[__builtin_amdgcn_workitem_id_x()] += 1; }
