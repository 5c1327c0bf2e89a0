"""Kernels of an entry: names cheaply (verdicts on 500 MB libraries), full resources on request (--kernels)."""

from __future__ import annotations

from fatkit.extract.model import Kernel
from fatkit.formats import cubin, hsaco, ptx_header


def kernel_names(kind: str, payload: bytes) -> tuple[str, ...]:
    if kind == "ptx":
        return tuple(ptx_header.parse_ptx_header(payload).entries)
    if kind == "elf":
        return tuple(cubin.cubin_kernel_names(payload))
    if kind == "hsaco":
        return tuple(k.name for k in hsaco.parse_code_object(payload).kernels)
    return ()


def kernels(kind: str, payload: bytes) -> tuple[Kernel, ...]:
    if kind == "ptx":
        return tuple(Kernel(name) for name in ptx_header.parse_ptx_header(payload).entries)
    if kind == "elf":
        return tuple(
            Kernel(name=k.name, param_bytes=k.param_bytes, params=tuple(p.size for p in k.params),
                   registers=k.registers, shared_bytes=k.shared_bytes)
            for k in cubin.parse_cubin(payload).kernels
        )
    if kind == "hsaco":
        return tuple(
            Kernel(name=k.name, param_bytes=k.kernarg_size, registers=k.vgpr_count,
                   shared_bytes=k.group_segment_size, wavefront_size=k.wavefront_size)
            for k in hsaco.parse_code_object(payload).kernels
        )
    return ()
