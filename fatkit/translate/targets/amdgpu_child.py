"""The amdgpu target's codegen process: LLVM's optimisation and AMDGPU code generation, apart from fatkit.

LLVM reports fatal errors by aborting the process, so `AmdgpuTarget.emit` hands the work to a child process
running `serve`, which stays up for the run and compiles one request after another. The first child of a run
is fatkit's process forked at the start of codegen, while it has one thread (a few milliseconds); the others
are fresh Pythons (~0.25 s of CPU each, as much as LLVM spends on a small module), which import only
llvmlite and the module linker of targets/base.py. A request that aborts LLVM ends the child; the parent
reads LLVM's message from the child's stderr and starts a fresh one for the next request.

The protocol, on the child's stdin and stdout: a request is a line `processor opt_level kind count` and
`count` LLVM modules, each an 8-byte little-endian length and that many bytes of IR text; the answer is a
status byte (0: the product; 1: a Python error's traceback) and an 8-byte length, then that many bytes.

With `FATKIT_LIBLLVM` set (targets/libllvm.py) the child compiles through that library; a started one never
imports llvmlite, a forked one has llvmlite's library loaded too, unused (it exports only llvmlite's own
functions, so the two LLVMs do not meet).
"""

from __future__ import annotations

import os
import struct
import traceback

from typing import TYPE_CHECKING, Callable

from fatkit.translate.targets import libllvm

if TYPE_CHECKING:
    from llvmlite import binding as llvm

TRIPLE = "amdgcn-amd-amdhsa"
# `default<O2>` without LLVM's loop vectorizer: on the corpus kernels it made gfx942 code longer (up to 1.3× the
# instructions of a kernel) and the rest no shorter, and cost time in the middle-end and codegen
# (BENCHMARKS.md, "Translation vs ptxas", the pipe19 round); the SLP vectorizer, which packs halves, is LLVM's
# default (off in the PassBuilder's tuning) either way
LOOP_VECTORIZATION = False
_LENGTH = struct.Struct("<Q")
ANSWER = struct.Struct("<BQ")  # status, length


def target_machine(processor: str, opt_level: int = 2) -> llvm.TargetMachine:
    from llvmlite import binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(
        cpu=processor, opt=opt_level, reloc="pic", codemodel="default")


def compile_modules(texts: list[str], machine: llvm.TargetMachine, opt_level: int, kind: str) -> bytes:
    """The LLVM modules `texts` linked, optimised and emitted as `kind`: "obj", "asm" or "llvm". They are
    parsed into a context of their own, so that a child compiling one request after another gives each the
    type names, and so the output, a fresh process would."""
    from llvmlite import binding as llvm

    from fatkit.translate.targets.base import linked_and_optimised

    context = llvm.create_context()
    module = linked_and_optimised(texts, machine, opt_level, context, LOOP_VECTORIZATION)
    if kind == "llvm":
        return str(module).encode()
    if kind == "asm":
        return machine.emit_assembly(module).encode()
    return machine.emit_object(module)


def serve() -> None:
    """Answer requests on stdin until it closes. The protocol owns file descriptor 1: whatever else writes
    to stdout (LLVM, Python) goes to stderr instead."""
    requests = os.fdopen(0, "rb", closefd=False)  # (not sys.stdin's buffer: a forked child's may hold data)
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    compilers: dict[tuple[str, int], Callable[[list[str], str], bytes]] = {}
    library = libllvm.library_path()
    while True:
        header = requests.readline()
        if not header:
            return
        processor, opt, kind, count = header.decode().split()
        opt_level = int(opt)
        texts = [requests.read(_LENGTH.unpack(requests.read(_LENGTH.size))[0]).decode() for _ in range(int(count))]
        try:
            compiler = compilers.get((processor, opt_level))
            if compiler is None:
                compiler = compilers[processor, opt_level] = _compiler(library, processor, opt_level)
            status, answer = 0, compiler(texts, kind)
        except Exception:  # reported to the parent as the child's failure, as an uncaught error would be
            status, answer = 1, traceback.format_exc().encode()
        answers.write(ANSWER.pack(status, len(answer)))
        answers.write(answer)
        answers.flush()


def _compiler(library: str | None, processor: str, opt_level: int) -> Callable[[list[str], str], bytes]:
    """What compiles a request's modules for `processor`: the libLLVM at `library`, else llvmlite's LLVM."""
    if library is not None:
        return libllvm.LibraryCompiler(library, TRIPLE, processor, opt_level, LOOP_VECTORIZATION).compile
    machine = target_machine(processor, opt_level)
    return lambda texts, kind: compile_modules(texts, machine, opt_level, kind)


def request(processor: str, opt_level: int, kind: str, texts: list[str]) -> bytes:
    """The bytes of one request for `serve`."""
    parts = [f"{processor} {opt_level} {kind} {len(texts)}\n".encode()]
    for text in texts:
        data = text.encode()
        parts += [_LENGTH.pack(len(data)), data]
    return b"".join(parts)
