"""Translator tests on AMD code objects: the gfx1100/gfx942 products run on fatkit.emulate, launched like the
host target's programs, so a test table can be parametrised over TARGETS with the same expected values.

`program(ptx, target)` returns something with `.launch(kernel, args, grid=, block=, shared_bytes=)` for every
target, and a module global's address and the memory there (`.address(name)`, `.read(address, size)`,
`.write(address, data)`, `.string_at(address)`); the module stays loaded, so its globals keep their values
from launch to launch.
`args` hold ctypes arrays or numpy arrays (device memory, passed by address to the host JIT and as buffers to
the emulator), Python ints and floats (by value, sized by the parameter) and bytes (.b8 arrays).
"""

from __future__ import annotations

import ctypes
import struct

import numpy as np

from fatkit.emulate import Module
from fatkit.formats.hsaco import parse_code_object
from fatkit.translate.pipeline import Options, translate

TARGETS = ["host", "gfx1100", "gfx942"]
AMD_TARGETS = ["gfx1100", "gfx942"]


def _buffer(arg):
    if isinstance(arg, np.ndarray):
        return arg
    if isinstance(arg, ctypes.Array):
        return np.frombuffer(arg, dtype=np.uint8)
    return None


class HostProgram:
    """The host JIT's program, taking buffers where its launch takes addresses."""

    def __init__(self, product):
        self.product = product

    def address(self, name: str) -> int:
        address = self.product.engine.get_global_value_address(name)
        assert address, f"{name} is not in the program"
        return address

    def read(self, address: int, size: int) -> bytes:
        return ctypes.string_at(address, size)

    def write(self, address: int, data: bytes) -> None:
        ctypes.memmove(address, data, len(data))

    def string_at(self, address: int) -> bytes:
        return ctypes.string_at(address)

    def launch(self, kernel: str, args: list, grid=(1, 1, 1), block=(1, 1, 1), shared_bytes: int = 0,
               buffers=()):
        converted = []  # `buffers` (memory reached through addresses stored elsewhere) is all host memory here
        for arg in args:
            if isinstance(arg, ctypes.Array):
                converted.append(ctypes.addressof(arg))
            elif isinstance(arg, np.ndarray):
                converted.append(arg.ctypes.data)
            else:
                converted.append(arg)
        return self.product.launch(kernel, converted, grid=grid, block=block, shared_bytes=shared_bytes)


class EmulatedProgram:
    """A code object loaded once on fatkit.emulate (a Module: its globals persist across launches)."""

    def __init__(self, code_object: bytes):
        self.code_object = code_object
        self.module = Module(code_object)
        self.kernels = {k.name: k for k in parse_code_object(code_object).kernels}

    def address(self, name: str) -> int:
        return self.module.address(name)

    def read(self, address: int, size: int) -> bytes:
        return self.module.read(address, size)

    def write(self, address: int, data: bytes) -> None:
        self.module.write(address, data)

    def string_at(self, address: int) -> bytes:
        return self.module.string_at(address)

    def launch(self, kernel: str, args: list, grid=(1, 1, 1), block=(1, 1, 1), shared_bytes: int = 0,
               buffers=()):
        """`buffers`: arrays the kernel reaches through addresses stored elsewhere (a tensor map's tensor)."""
        params = [a for a in self.kernels[kernel].args if not str(a.get(".value_kind", "")).startswith("hidden_")]
        converted = []
        for arg, param in zip(args, params):
            size = param[".size"]
            buffer = _buffer(arg)
            if buffer is not None:
                converted.append(buffer)
            elif isinstance(arg, (bytes, bytearray)):
                converted.append(bytes(arg))
            elif isinstance(arg, float):
                converted.append(np.frombuffer(struct.pack("<f" if size == 4 else "<d", arg),
                                               np.float32 if size == 4 else np.float64)[0])
            elif isinstance(arg, int):
                converted.append(np.frombuffer((arg & ((1 << (8 * size)) - 1)).to_bytes(size, "little"),
                                               {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[size])[0])
            else:
                converted.append(arg)
        if len(args) != len(params):
            converted = list(args)  # let the emulator report the count
        return self.module.launch(kernel, tuple(grid), tuple(block), converted, shared_bytes,
                                  tuple(_buffer(b) for b in buffers))


def program(ptx: str, target: str = "host", **options):
    """`ptx` translated for `target` and ready to launch."""
    product = translate(ptx, Options(target=target, **options)).product
    return HostProgram(product) if target == "host" else EmulatedProgram(product)
