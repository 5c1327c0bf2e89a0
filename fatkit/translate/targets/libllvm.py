"""LLVM's middle-end and AMDGPU code generation through a shared libLLVM's C API, instead of llvmlite's LLVM.

llvmlite's wheels link an LLVM built with assertions: on fatkit's IR it spends about twice the time of a
release build of the same LLVM version in the middle-end and in code generation (BENCHMARKS.md, "Translation
vs ptxas"), which is most of a translation. `FATKIT_LIBLLVM` names such a library (a distribution's
`libLLVM.so.22.1`); the codegen children then compile through it: the same IR text, the same `default<O…>`
pipeline with the default tuning options (what llvmlite's PassBuilder builds), the loop vectorizer left out
as the caller says (`amdgpu_child.LOOP_VECTORIZATION`), the same target machine (PIC, the default code
model, no features), the same object or assembly. It must be the major version llvmlite's LLVM is, whose IR
fatkit writes. Without assertions an LLVM bug that an assertion would have caught
may go on instead of aborting the child (which reports the kernel as failed), so the library is a choice the
user makes, and its version is part of the cache key (`fatkit.translate.toolchain`).

This module imports no llvmlite: a child using the library loads one LLVM only.
"""

from __future__ import annotations

import ctypes
import os
import time
from functools import lru_cache

from fatkit.errors import FatkitError

LIBRARY_VARIABLE = "FATKIT_LIBLLVM"
_OBJECT_FILE, _ASSEMBLY_FILE = 1, 0  # LLVMCodeGenFileType
_RELOC_PIC, _CODE_MODEL_DEFAULT = 2, 0  # LLVMRelocMode, LLVMCodeModel
_P = ctypes.c_void_p  # (a handle: ctypes gives it back as an int, or None for NULL)


def library_path() -> str | None:
    """The libLLVM that `FATKIT_LIBLLVM` names, or None when it is unset (llvmlite's LLVM compiles)."""
    return os.environ.get(LIBRARY_VARIABLE) or None


@lru_cache(maxsize=None)
def _library(path: str) -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL(path)
    except OSError as error:
        raise FatkitError(f"{LIBRARY_VARIABLE}={path}: cannot load it as a shared library: {error}") from None
    for name, result, arguments in (
        ("LLVMGetVersion", None, [ctypes.POINTER(ctypes.c_uint)] * 3),
        ("LLVMContextCreate", _P, []),
        ("LLVMContextDispose", None, [_P]),
        ("LLVMCreateMemoryBufferWithMemoryRangeCopy", _P, [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p]),
        ("LLVMParseIRInContext", ctypes.c_int, [_P, _P, ctypes.POINTER(_P), ctypes.POINTER(_P)]),
        ("LLVMLinkModules2", ctypes.c_int, [_P, _P]),
        ("LLVMVerifyModule", ctypes.c_int, [_P, ctypes.c_int, ctypes.POINTER(_P)]),
        ("LLVMDisposeModule", None, [_P]),
        ("LLVMDisposeMessage", None, [_P]),
        ("LLVMPrintModuleToString", _P, [_P]),
        ("LLVMGetTargetFromTriple", ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_P), ctypes.POINTER(_P)]),
        ("LLVMCreateTargetMachine", _P, [_P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                                         ctypes.c_int, ctypes.c_int]),
        ("LLVMCreatePassBuilderOptions", _P, []),
        ("LLVMDisposePassBuilderOptions", None, [_P]),
        ("LLVMPassBuilderOptionsSetLoopVectorization", None, [_P, ctypes.c_int]),
        ("LLVMRunPasses", _P, [_P, ctypes.c_char_p, _P, _P]),
        ("LLVMGetErrorMessage", _P, [_P]),
        ("LLVMDisposeErrorMessage", None, [_P]),
        ("LLVMTargetMachineEmitToMemoryBuffer", ctypes.c_int, [_P, _P, ctypes.c_int, ctypes.POINTER(_P),
                                                               ctypes.POINTER(_P)]),
        ("LLVMGetBufferStart", _P, [_P]),
        ("LLVMGetBufferSize", ctypes.c_size_t, [_P]),
        ("LLVMDisposeMemoryBuffer", None, [_P]),
    ):
        try:
            function = getattr(lib, name)
        except AttributeError:
            raise FatkitError(f"{LIBRARY_VARIABLE}={path} has no {name}: not a libLLVM with the C API") from None
        function.restype, function.argtypes = result, arguments
    for part in ("TargetInfo", "Target", "TargetMC", "AsmPrinter"):
        try:
            getattr(lib, f"LLVMInitializeAMDGPU{part}")()
        except AttributeError:
            raise FatkitError(f"{LIBRARY_VARIABLE}={path} has no AMDGPU target") from None
    return lib


@lru_cache(maxsize=None)
def version(path: str) -> tuple[int, int, int]:
    """The LLVM version of the library at `path`, (22, 1, 8)."""
    parts = [ctypes.c_uint() for _ in range(3)]
    _library(path).LLVMGetVersion(*(ctypes.byref(p) for p in parts))
    return parts[0].value, parts[1].value, parts[2].value


@lru_cache(maxsize=None)
def checked(path: str, major: int) -> str:
    """`path` once its library loads, has the AMDGPU target and is LLVM `major` (llvmlite's, whose IR text
    fatkit writes); FatkitError otherwise. Its version, `22.1.8`."""
    found = version(path)
    if found[0] != major:
        raise FatkitError(f"{LIBRARY_VARIABLE}={path} is LLVM {'.'.join(map(str, found))}, but fatkit writes the IR "
                          f"of llvmlite's LLVM {major}: name a libLLVM of version {major}")
    return ".".join(map(str, found))


def _message(lib: ctypes.CDLL, pointer: int | None) -> str:
    text = ctypes.string_at(pointer).decode(errors="replace") if pointer else ""
    if pointer:
        lib.LLVMDisposeMessage(pointer)
    return text


class LibraryCompiler:
    """Compiles requests (the IR texts of a group of kernels) with the library at `path` for one processor."""

    def __init__(self, path: str, triple: str, processor: str, opt_level: int, loop_vectorization: bool = True):
        self.lib = lib = _library(path)
        self.opt_level, self.loop_vectorization = opt_level, loop_vectorization
        target, error = _P(), _P()
        if lib.LLVMGetTargetFromTriple(triple.encode(), ctypes.byref(target), ctypes.byref(error)):
            raise FatkitError(f"{path}: no target {triple}: {_message(lib, error.value)}")
        # LLVMCodeGenOptLevel counts like the opt levels (0 none … 3 aggressive)
        self.machine = lib.LLVMCreateTargetMachine(target, triple.encode(), processor.encode(), b"", opt_level,
                                                   _RELOC_PIC, _CODE_MODEL_DEFAULT)
        if not self.machine:
            raise FatkitError(f"{path}: cannot create a target machine for {processor}")

    def compile(self, texts: list[str], kind: str, seconds: dict[str, float] | None = None) -> bytes:
        """The modules `texts` linked, verified, optimised and emitted as `kind` ("obj", "asm", "llvm"), in a
        context of their own (as `amdgpu_child.compile_modules` does with llvmlite). `seconds`, where given,
        gets the CPU seconds of each step added (benchmarks/translate_profile.py)."""
        lib = self.lib
        context = lib.LLVMContextCreate()
        module = None
        clock = time.process_time()

        def step(name: str) -> None:
            nonlocal clock
            if seconds is not None:
                now = time.process_time()
                seconds[name] = seconds.get(name, 0.0) + now - clock
                clock = now

        try:
            for index, text in enumerate(texts):
                parsed = self._parsed(context, text, f"kernel{index}")
                if module is None:
                    module = parsed
                elif lib.LLVMLinkModules2(module, parsed):  # (takes the parsed module, linked or not)
                    raise FatkitError("LLVM could not link the group's modules")
            assert module is not None
            message = _P()
            if lib.LLVMVerifyModule(module, 2, ctypes.byref(message)):  # 2: LLVMReturnStatusAction
                raise FatkitError(f"LLVM IR does not verify: {_message(lib, message.value)}")
            _message(lib, message.value)
            step("parse, link and verify")
            if self.opt_level:
                self._optimised(module)
            step(f"middle-end (default<O{self.opt_level}>)")
            if kind == "llvm":
                return _message(lib, lib.LLVMPrintModuleToString(module)).encode()
            emitted = self._emitted(module, _ASSEMBLY_FILE if kind == "asm" else _OBJECT_FILE)
            step(f"codegen ({kind})")
            return emitted
        finally:
            if module is not None:
                lib.LLVMDisposeModule(module)
            lib.LLVMContextDispose(context)

    def _parsed(self, context: int, text: str, name: str) -> int | None:
        lib, data = self.lib, text.encode()
        buffer = lib.LLVMCreateMemoryBufferWithMemoryRangeCopy(data, len(data), name.encode())
        module, message = _P(), _P()
        if lib.LLVMParseIRInContext(context, buffer, ctypes.byref(module), ctypes.byref(message)):
            raise FatkitError(f"LLVM cannot parse the IR of {name}: {_message(lib, message.value)}")
        return module.value

    def _optimised(self, module: int) -> None:
        lib = self.lib
        options = lib.LLVMCreatePassBuilderOptions()
        lib.LLVMPassBuilderOptionsSetLoopVectorization(options, int(self.loop_vectorization))
        try:
            error = lib.LLVMRunPasses(module, f"default<O{self.opt_level}>".encode(), self.machine, options)
        finally:
            lib.LLVMDisposePassBuilderOptions(options)
        if error:
            text = lib.LLVMGetErrorMessage(error)
            message = ctypes.string_at(text).decode(errors="replace")
            lib.LLVMDisposeErrorMessage(text)
            raise FatkitError(f"LLVM's pass pipeline failed: {message}")

    def _emitted(self, module: int, file_type: int) -> bytes:
        lib = self.lib
        message, buffer = _P(), _P()
        if lib.LLVMTargetMachineEmitToMemoryBuffer(self.machine, module, file_type, ctypes.byref(message),
                                                   ctypes.byref(buffer)):
            raise FatkitError(f"LLVM code generation failed: {_message(lib, message.value)}")
        try:
            return ctypes.string_at(lib.LLVMGetBufferStart(buffer.value), lib.LLVMGetBufferSize(buffer.value))
        finally:
            lib.LLVMDisposeMemoryBuffer(buffer.value)
