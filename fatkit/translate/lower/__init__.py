"""Lowering: PTX kernels → LLVM modules (llvmlite IR) for a `Target`.

`core` walks a body and dispatches each instruction to the handler its family module registered;
`module` builds a kernel's whole LLVM module (signature, variables, called functions). Importing the
family modules below registers their handlers.
"""

from fatkit.translate.lower import compare, control, convert, floating, integer, memory, special, sync  # noqa: F401
from fatkit.translate.lower.core import Unsupported, kernel_signature, llvm_type, register_types
from fatkit.translate.lower.module import lower_kernel

__all__ = ["Unsupported", "kernel_signature", "llvm_type", "lower_kernel", "register_types"]
