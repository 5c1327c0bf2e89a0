"""The amdgpu target's codegen process: LLVM's optimisation and AMDGPU code generation, apart from fatkit.

LLVM reports fatal errors by aborting the process, so `AmdgpuTarget.emit` runs `main` in a child Python
process. It imports only llvmlite and the module linker of targets/base.py: a child starts for every group of
kernels, and fatkit's format readers would add a tenth of a second to each.
"""

from __future__ import annotations

import sys

from llvmlite import binding as llvm

from fatkit.translate.targets.base import linked_and_optimised

TRIPLE = "amdgcn-amd-amdhsa"


def target_machine(processor: str, opt_level: int = 2) -> llvm.TargetMachine:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(
        cpu=processor, opt=opt_level, reloc="pic", codemodel="default")


def main() -> None:
    """NUL-separated LLVM modules on stdin → what argv[3] asks for on stdout: "obj", "asm" or "llvm"."""
    processor, opt_level, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    texts = sys.stdin.buffer.read().decode().split("\0")
    machine = target_machine(processor, opt_level)
    module = linked_and_optimised(texts, machine, opt_level)
    if kind == "llvm":
        sys.stdout.buffer.write(str(module).encode())
    elif kind == "asm":
        sys.stdout.buffer.write(machine.emit_assembly(module).encode())
    else:
        sys.stdout.buffer.write(machine.emit_object(module))
