"""Lowering: PTX kernels → LLVM modules (llvmlite IR) for a `Target`.

`core` walks a body and dispatches each instruction to the handler its family module registered;
`module` builds a kernel's whole LLVM module (signature, variables, called functions). Importing the
family modules below registers their handlers.
"""

from fatkit.translate.lower import (  # noqa: F401
    asynccopy, atomic, cluster, clusterlaunch, compare, control, convert, floating, half, integer, matrix, mbarrier,
    memory, mma, mma_native, runtime, special, sync, tensorcopy, texture, video, warp, wgmma, wmma,
)
from fatkit.translate.lower.core import Unsupported, kernel_signature, llvm_type
from fatkit.translate.lower.module import lower_kernel
from fatkit.translate.passes.base import register_types  # a body's registers, as the storage pass lists them

__all__ = ["Unsupported", "kernel_signature", "llvm_type", "lower_kernel", "register_types"]
