// Second HIP TU, so a linked host binary holds two bundles in .hip_fatbin.
#define __global__ __attribute__((global))

extern "C" __global__ void second_kernel(int* p) { p[__builtin_amdgcn_workitem_id_x()] += 1; }
