// Inline PTX for the operand forms and instructions nvcc itself rarely emits: the video instructions with
// byte/half-word selectors, masks and negated vmad operands, cvt.pack.sat, 128-bit registers and atomics,
// vector registers, WARP_SZ, guarded vector movs, and float loads into wider bit registers.
#include <cstdint>

__global__ void video(const unsigned *a, const unsigned *b, const unsigned *c, unsigned *out) {
    unsigned i = threadIdx.x, x = a[i], y = b[i], z = c[i], d[12];
    asm("vadd.s32.u32.s32.sat %0, %1.b1, %2.h1;" : "=r"(d[0]) : "r"(x), "r"(y));
    asm("vabsdiff.u32.u32.u32.add %0, %1.b3, %2.b0, %3;" : "=r"(d[1]) : "r"(x), "r"(y), "r"(z));
    asm("vmax.s32.s32.s32.sat %0.h1, %1, %2.h0, %3;" : "=r"(d[2]) : "r"(x), "r"(y), "r"(z));
    asm("vshl.u32.u32.u32.clamp.add %0, %1, %2.b0, %3;" : "=r"(d[3]) : "r"(x), "r"(y), "r"(z));
    asm("vset.s32.u32.lt.max %0, %1.b2, %2, %3;" : "=r"(d[4]) : "r"(x), "r"(y), "r"(z));
    asm("vmad.s32.s32.u32.sat.shr15 %0, -%1.h0, %2.h1, %3;" : "=r"(d[5]) : "r"(x), "r"(y), "r"(z));
    asm("vmad.s32.u32.u32 %0, %1, %2, -%3;" : "=r"(d[6]) : "r"(x), "r"(y), "r"(z));
    asm("vavrg2.s32.s32.s32.sat %0.h0, %1.h21, %2.h30, %3;" : "=r"(d[7]) : "r"(x), "r"(y), "r"(z));
    asm("vset4.u32.u32.ge.add %0.b31, %1.b7654, %2.b0123, %3;" : "=r"(d[8]) : "r"(x), "r"(y), "r"(z));
    asm("vmin4.s32.u32.s32 %0.b20, %1, %2, %3;" : "=r"(d[9]) : "r"(x), "r"(y), "r"(z));
    asm("cvt.pack.sat.s16.s32 %0, %1, %2;" : "=r"(d[10]) : "r"(x), "r"(y));
    asm("cvt.pack.sat.u4.s32.b32 %0, %1, %2, %3;" : "=r"(d[11]) : "r"(x), "r"(y), "r"(z));
    for (int k = 0; k < 12; k++) out[12 * i + k] = d[k];
}

__global__ void wide(unsigned __int128 *cells, const float *f, uint64_t *out) {
    unsigned i = threadIdx.x;
    uint64_t lo, hi, bits;
    unsigned lane;
    asm volatile("{\n\t.reg .b128 %%q<3>;\n\t"
                 "ld.global.b128 %%q1, [%2];\n\t"
                 "mov.b128 {%0, %1}, %%q1;\n\t"
                 "mov.b128 %%q2, {%1, %0};\n\t"
                 "atom.global.exch.b128 %%q1, [%2], %%q2;\n\t"
                 "}" : "=l"(lo), "=l"(hi) : "l"(cells + i) : "memory");
    asm("{\n\t.reg .v4 .u32 %%v;\n\t.reg .pred %%p;\n\t"
        "mov.u32 %%v.x, %1;\n\tmov.u32 %%v.y, WARP_SZ;\n\tadd.u32 %%v.z, %%v.x, %%v.y;\n\t"
        "setp.lt.u32 %%p, %%v.x, 16;\n\t@%%p mov.b64 {%%v.z, %%v.w}, %2;\n\t"
        "mov.u32 %0, %%v.z;\n\t}" : "=r"(lane) : "r"(i), "l"(lo));
    asm("ld.global.f32 %0, [%1];" : "=l"(bits) : "l"(f + i));
    out[4 * i] = lo;
    out[4 * i + 1] = hi;
    out[4 * i + 2] = lane;
    out[4 * i + 3] = bits;
}
