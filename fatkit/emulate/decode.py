"""Instruction decoding through tinygrad's decoder, once per code object and address.

A code object's prepared instructions (`Step`s) are kept for the life of the process, keyed by the object's
digest, the ISA and the wave size, so relaunching a kernel decodes nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np

from fatkit.emulate import image as image_instructions
from fatkit.emulate.executor import CONTROL, Preparer, Step
from fatkit.errors import FatkitError

_CACHE_INVALIDATES = {43: "BUFFER_GL0_INV", 44: "BUFFER_GL1_INV"}  # gfx11 MUBUF opcodes
_PROGRAMS: dict[tuple, tuple[Preparer, dict[int, Step]]] = {}


def program_for(data: bytes, arch: str, wave32: bool,
                make_preparer: Callable[[], Preparer]) -> tuple[Preparer, dict[int, Step]]:
    key = (hashlib.sha256(data).digest(), arch, wave32)
    found = _PROGRAMS.get(key)
    if found is None:
        found = _PROGRAMS[key] = (make_preparer(), {})
    return found


def fetch(preparer: Preparer, steps: dict[int, Step], offset: int, image: np.ndarray) -> Step:
    """Decode and prepare the instruction at `offset` of the loaded image."""
    from tinygrad.renderer.amd import decode_inst
    if not 0 <= offset < len(image) - 16:
        raise FatkitError(f"pc 0x{offset:x} lies outside the loaded code object")
    raw = bytes(image[offset:offset + 16])
    word = int.from_bytes(raw[:4], "little")
    if preparer.arch != "cdna" and word >> 26 == 0b111000 and (word >> 18) & 0x7F in _CACHE_INVALIDATES:
        # gfx11 buffer_gl0_inv / buffer_gl1_inv: tinygrad's formats do not decode them; host memory has no
        # caches to invalidate
        step = steps[offset] = Step(_CACHE_INVALIDATES[(word >> 18) & 0x7F], CONTROL, 8, None, offset)
        return step
    if preparer.arch == "rdna3" and image_instructions.handles(word):  # no tables: a model of their own
        step = steps[offset] = image_instructions.prepare(preparer, raw, offset)
        return step
    try:
        inst = decode_inst(raw, preparer.arch)
    except (ValueError, KeyError, AssertionError) as exc:
        word = int.from_bytes(raw[:4], "little")
        raise FatkitError(f"pc 0x{offset:x}: instruction word 0x{word:08x} does not decode as {preparer.arch} "
                          f"({exc}); unknown or unlisted opcode") from None
    step = preparer.prepare(inst, offset)
    steps[offset] = step
    return step
