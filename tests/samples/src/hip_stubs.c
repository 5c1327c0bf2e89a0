/* Stand-ins for the HIP runtime entry points that clang's registration code calls (no ROCm here).
   Linking these lets a real host executable / shared library keep .hip_fatbin + .hipFatBinSegment. */
#include <stddef.h>

void** __hipRegisterFatBinary(const void* wrapper) { (void)wrapper; static void* handle; return &handle; }
void __hipUnregisterFatBinary(void** handle) { (void)handle; }
void __hipRegisterFunction(void** handle, const void* stub, char* device_fun, const char* device_name,
                           unsigned thread_limit, void* tid, void* bid, void* block_dim, void* grid_dim,
                           int* wsize) {
    (void)handle; (void)stub; (void)device_fun; (void)device_name; (void)thread_limit;
    (void)tid; (void)bid; (void)block_dim; (void)grid_dim; (void)wsize;
}
int __hipPopCallConfiguration(void* grid, void* block, size_t* shmem, void* stream) {
    (void)grid; (void)block; (void)shmem; (void)stream;
    return 0;
}
int hipLaunchKernel(const void* f, ...) { (void)f; return 0; }

#ifdef WITH_MAIN
int main(void) { return 0; }
#endif
