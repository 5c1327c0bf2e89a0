"""Run AMDGPU code objects on the CPU: an executor built on the ISA tables of the `tinygrad` wheel.

`launch(code_object, kernel, grid, block, args, shared=0) -> LaunchStats` runs one launch on a freshly loaded
image; `Module(code_object)` loads it once, so module globals persist from one `.launch` to the next, and
reads and writes them by symbol (`.symbol(name)`, `.address(name)`). Needs `tinygrad>=0.14,<0.15`
(the `test` extra); it is imported on first use, and its absence is a FatkitError. docs/emulate.md says what
is modelled and what is not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fatkit.errors import FatkitError

if TYPE_CHECKING:
    from fatkit.emulate.dispatch import Module
    from fatkit.emulate.executor import LaunchStats


def _require_tinygrad() -> None:
    try:
        import tinygrad.renderer.amd
        import tinygrad.runtime.autogen.amd.rdna3.str_pcode  # noqa: F401
    except ImportError as exc:
        raise FatkitError("fatkit.emulate needs the AMD ISA tables of tinygrad 0.14: pip install "
                          f"'tinygrad>=0.14,<0.15' (or fatkit[test]) ({exc})") from None


def launch(code_object: bytes, kernel: str, grid: tuple[int, int, int], block: tuple[int, int, int],
           args: list, shared: int = 0, buffers: tuple = ()) -> LaunchStats:
    """Run `kernel` of the code object over `grid` × `block` threads; `args` in PTX parameter order (a numpy
    array is device memory read and written in place, a numpy scalar a by-value parameter, bytes an array
    parameter); `shared` bytes of dynamic LDS per workgroup; `buffers` more numpy arrays the kernel may reach
    through addresses stored elsewhere (a tensor map's tensor)."""
    _require_tinygrad()
    from fatkit.emulate.dispatch import launch as run
    return run(code_object, kernel, grid, block, args, shared, tuple(buffers))


def __getattr__(name: str) -> object:
    # Module is imported on first use, as launch imports the executor: importing fatkit.emulate stays cheap
    if name == "Module":
        from fatkit.emulate.dispatch import Module
        return Module
    raise AttributeError(f"module 'fatkit.emulate' has no attribute {name!r}")


__all__ = ["Module", "launch"]
