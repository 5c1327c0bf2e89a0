/* A Windows DLL laid out like nvcc + MSVC output, for fatkit's PE reader and PE repack: nv_kern.fatbin in
   section .nv_fatb and its registration wrapper (__fatBinC_Wrapper_t, version 1) in .nvFatBi, the 8-byte cuts
   MSVC's linker makes of .nv_fatbin and .nvFatBinSegment; the wrapper's data pointer is an absolute address,
   so the linker lists it in the base relocation table. One import from cudart64_12.dll, one export.
   No C runtime: built with -nostdlib and this file's entry point. Built for x86-64 (pe_kern.dll, PE32+) and
   i386 (pe_kern32.dll, PE32, where the wrapper's pointers are 4 bytes and C names get a leading underscore:
   the asm label is named explicitly). */
__asm__(".section .nv_fatb,\"dr\"\n"
        ".p2align 3\n"
        ".globl fatbin_data\n"
        "fatbin_data:\n"
        ".incbin \"nv_kern.fatbin\"\n"
        ".text\n");
extern const unsigned char fatbin_data[] __asm__("fatbin_data");

struct fatbin_wrapper {
    unsigned magic, version;
    const void *data;
    void *filename_or_fatbins;
};
__attribute__((section(".nvFatBi"), used)) const struct fatbin_wrapper fatbin_wrapper = {0x466243B1, 1, fatbin_data, 0};

__declspec(dllimport) int cudaGetDeviceCount(int *count);

__declspec(dllexport) int device_count(void) {
    int n = 0;
    return cudaGetDeviceCount(&n) ? -1 : n;
}

int __stdcall DllMainCRTStartup(void *module, unsigned long reason, void *reserved) {
    (void)module; (void)reason; (void)reserved;
    return 1;
}
