"""What is derived from an entry's payload: kernel names cheaply (verdicts on 500 MB libraries), kernels with
their resources and hashes on request (`inspect --kernels/--hashes`), each from one read of the payload.

The readers of each kind (cubin, PTX header, AMD code object) are imported by the first entry of that kind that
is read: a verdict needs none of them when every fatbin carries PTX."""

from __future__ import annotations

from fatkit.errors import FatkitError
from fatkit.extract.model import Binary, Entry, Kernel


def kernel_names(entry: Entry) -> tuple[str, ...]:
    """The names of the entry's kernels, read once and kept on the entry; FatkitError when unreadable."""
    if entry.kernel_names is None:
        entry.kernel_names = _names(entry.kind, entry.payload)
    return entry.kernel_names


def describe(binary: Binary, *, kernels: bool, hashes: bool) -> None:
    """Fill each entry's kernels and/or hash; an entry that cannot be read gets its error instead."""
    if not (kernels or hashes):
        return
    import blake3  # --hashes only
    for entry in binary.entries:
        if entry.error is not None:
            continue
        try:
            data = entry.payload
            if hashes:
                entry.hash = blake3.blake3(data).hexdigest()
            if kernels:
                entry.kernels = _kernels(entry.kind, data)
        except FatkitError as exc:
            entry.error = exc.message


def _names(kind: str, payload: bytes) -> tuple[str, ...]:
    if kind == "ptx":
        from fatkit.formats import ptx_header

        return tuple(ptx_header.parse_ptx_header(payload).entries)
    if kind == "elf":
        from fatkit.formats import cubin

        return tuple(cubin.cubin_kernel_names(payload))
    if kind == "hsaco":
        from fatkit.formats import hsaco

        return tuple(k.name for k in hsaco.parse_code_object(payload).kernels)
    return ()


def _kernels(kind: str, payload: bytes) -> tuple[Kernel, ...]:
    if kind == "ptx":
        from fatkit.formats import ptx_header

        return tuple(Kernel(name) for name in ptx_header.parse_ptx_header(payload).entries)
    if kind == "elf":
        from fatkit.formats import cubin

        return tuple(
            Kernel(name=k.name, param_bytes=k.param_bytes, params=tuple(p.size for p in k.params),
                   registers=k.registers, shared_bytes=k.shared_bytes)
            for k in cubin.parse_cubin(payload).kernels
        )
    if kind == "hsaco":
        from fatkit.formats import hsaco

        return tuple(
            Kernel(name=k.name, param_bytes=k.kernarg_size, registers=k.vgpr_count,
                   shared_bytes=k.group_segment_size, wavefront_size=k.wavefront_size)
            for k in hsaco.parse_code_object(payload).kernels
        )
    return ()
