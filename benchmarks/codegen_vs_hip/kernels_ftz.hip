// kernels.cu's .ftz arithmetic one-op kernels as HIP, compiled with -fgpu-flush-denormals-to-zero (HIP's
// nvcc -ftz=true: every f32 instruction of the file flushes subnormal inputs and results, the kernels'
// FLOAT_DENORM_MODE_32 = 0; HIP has no flush per operation). That flush comes after rounding: a result whose
// exact value lies below 2^-126 but rounds to ±2^-126 stays ±2^-126, where NVIDIA GPUs flush it to ±0
// (tininess before rounding). op_*_ftz compute PTX's function as a HIP programmer would who wants NVIDIA's
// results; op_*_ftz_amd are the plain operation under AMD's flush, the price of NVIDIA's tininess.

#include "one_op.h"

// a sum below 2^-126 is exact: the flush after rounding is PTX's
ONE_OP(op_add_ftz, y = a + b)

// fma(|a|, |b|, -2^-126) rounds once, so it has the sign of |a·b| - 2^-126 (a tiny negative difference
// flushes to -0, an exact zero is +0). Negative, the product rounded to ±0 or ±2^-126, and ldexp by the
// difference's bits (below -2^31 + 2^23) makes it the zero of its sign; else ldexp by 0 keeps it (±inf,
// NaN too).
static __device__ inline float mul_ftz(float a, float b) {
  int difference = __builtin_bit_cast(int, __builtin_fmaf(__builtin_fabsf(a), __builtin_fabsf(b), -0x1p-126f));
  return __builtin_ldexpf(a * b, difference < 0 ? difference : 0);
}
ONE_OP(op_mul_ftz, y = mul_ftz(a, b))

// z, the fma rounded towards zero (flushed), is ±0 exactly where the exact value is below 2^-126, of its
// sign (+0 for terms cancelling exactly); otherwise the nearest result lies between z and 2z (an ulp above z
// at most; 2z may be ±inf). So the median of 2z, z and the nearest result is PTX's fma.rn.ftz. clang-22 has
// no FENV_ACCESS on AMDGPU: the rounding switch (__builtin_set_flt_rounds: s_setreg, s_round_mode) does not
// keep it from merging two fma(a, b, c) into one, so the second is fma(-a, b, -c), towards zero exactly
// -z, except that cancelling terms give +0 where z is +0. z and 2z are then -0 and the nearest +0: by the
// ISA's V_MED3_F32 (D = v_max(S1, S2) where the v_max3 of the three equals S0, ±0 equal; v_max puts +0
// above -0) the median is +0 as long as the nearest result is not S0. Tiny, the three are zeros of one
// sign, or ±2^-126 beside two zeros of its sign. All NaN, V_MED3_F32 is V_MIN3_F32, whose choice of NaN
// is S0 on gfx11 and S2 on gfx9: z and the nearest result, both the NaN a plain fma gives.
static __device__ inline float fma_ftz(float a, float b, float c) {
  float nearest = __builtin_fmaf(a, b, c);
  __builtin_set_flt_rounds(0);  // towards zero
  float negated = __builtin_fmaf(-a, b, -c);
  __builtin_set_flt_rounds(1);  // to nearest even
  return __builtin_amdgcn_fmed3f(-negated, -2.0f * negated, nearest);
}
ONE_OP(op_fma_ftz, y = fma_ftz(a, b, c))

ONE_OP(op_mul_ftz_amd, y = a * b)
ONE_OP(op_fma_ftz_amd, y = __builtin_fmaf(a, b, c))
