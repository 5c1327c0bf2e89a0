// The one-op kernels' frame, the same in kernels.cu, kernels.hip and kernels_ftz.hip: y[i] = op(a[i], b[i],
// c[i]) with TID, BID and BDIM each side's own.
#pragma once

#define ONE_OP(name, expr)                                                                       \
  extern "C" __global__ void name(const float *pa, const float *pb, const float *pc, float *py) { \
    int i = BID * BDIM + TID;                                                                    \
    float a = pa[i], b = pb[i], c = pc[i], y;                                                    \
    (void)b; (void)c;                                                                            \
    expr;                                                                                        \
    py[i] = y;                                                                                   \
  }
