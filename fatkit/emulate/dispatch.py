"""A kernel launch on the CPU: load the code object, build the launch state HIP would, run every wave.

State at entry follows the kernel descriptor (code object v5): user SGPRs in the order the
kernel_code_properties bits enable them, then the workgroup ids rsrc2 enables, workitem ids in v0 (packed
x | y << 10 | z << 20 on gfx11) or v0–v2 (gfx9); the kernarg segment holds the explicit arguments at the
metadata's offsets and the hidden arguments HIP fills; LDS is group_segment_fixed_size plus the dynamic size.
"""

from __future__ import annotations

import os
import struct
import time

import numpy as np

from fatkit.emulate import fpmode, runtime
from fatkit.emulate.decode import fetch, program_for
from fatkit.emulate.executor import LaunchStats, Preparer, Step, Wave
from fatkit.emulate.memory import (
    PRIVATE_APERTURE,
    SHARED_APERTURE,
    FlatArray,
    GlobalMemory,
)
from fatkit.emulate.semantics import Semantics
from fatkit.errors import FatkitError
from fatkit.formats.elf import PT_LOAD, SHT_DYNSYM, SHT_SYMTAB, ElfView, Symbol
from fatkit.formats.hsaco import parse_code_object

R_AMDGPU_ABS64, R_AMDGPU_RELATIVE64 = 3, 13
DEFAULT_BUDGET = 20_000_000  # wave-instructions per launch before it counts as hung
LDS_CAPACITY = 65536  # bytes of LDS a workgroup may use on gfx90a/gfx94x and gfx11
DYNAMIC_STACK = 16384  # scratch bytes per lane beyond the fixed frame for kernels with a dynamic stack
TIME_SLICE = 5_000  # wave-instructions a wave runs before the next wave of its workgroup
# rsrc2 fields
_USER_SGPR_COUNT_SHIFT, _WG_ID_X_BIT, _VGPR_WORKITEM_SHIFT = 1, 7, 11
_PROCESSOR_ARCH = {"gfx1100": "rdna3", "gfx1101": "rdna3", "gfx1102": "rdna3", "gfx1103": "rdna3",
                   "gfx1150": "rdna3", "gfx1151": "rdna3", "gfx1200": "rdna4", "gfx1201": "rdna4",
                   "gfx942": "cdna", "gfx940": "cdna", "gfx941": "cdna", "gfx950": "cdna", "gfx90a": "cdna"}
_SEMANTICS: dict[str, Semantics] = {}
_DECODED: dict[tuple, dict] = {}  # (code object digest, arch, wave32) → {code offset: decoded instruction}


def _load_image(data: bytes, elf: ElfView) -> np.ndarray:
    """The PT_LOAD segments in one host buffer, with the dynamic relocations applied for its address."""
    loads = [s for s in elf.segments if s.type == PT_LOAD]
    if not loads:
        raise FatkitError("code object has no PT_LOAD segment")
    size = max(s.vaddr + s.memsz for s in loads)
    image = np.zeros(size + 64, dtype=np.uint8)  # slack: instruction fetch reads up to 16 bytes ahead
    for s in loads:
        if s.offset + s.filesz > len(data):
            raise FatkitError(f"PT_LOAD segment at offset 0x{s.offset:x} runs past the file")
        image[s.vaddr:s.vaddr + s.filesz] = np.frombuffer(data, np.uint8, s.filesz, s.offset)
    base = image.ctypes.data  # where GlobalMemory.add places it: the buffer's own address
    for offset, reloc in elf._dynamic_relocations(range(1 << 64)).items():
        if reloc.type == R_AMDGPU_RELATIVE64:
            value = base + reloc.addend
        elif reloc.type == R_AMDGPU_ABS64:
            symbol = elf._dynamic_symbol(reloc.symbol)
            value = base + symbol.st_value + reloc.addend
        else:
            raise FatkitError(f"dynamic relocation type {reloc.type} at 0x{offset:x} is not modelled")
        image[offset:offset + 8] = np.frombuffer(struct.pack("<Q", value & (2**64 - 1)), np.uint8)
    return image


def _symbols(elf: ElfView) -> dict[str, Symbol]:
    """Defined symbols by name, from .symtab (which lists local globals too) and .dynsym."""
    found: dict[str, Symbol] = {}
    for table in [s for s in elf.sections if s.type in (SHT_DYNSYM, SHT_SYMTAB)]:
        for symbol in elf.symbols(table):
            if symbol.name and symbol.shndx != 0:
                found.setdefault(symbol.name, symbol)
    return found


def _arg_bytes(kernel: str, index: int, arg: object, meta: dict, memory: GlobalMemory) -> bytes:
    size = meta.get(".size")
    kind = meta.get(".value_kind")
    if isinstance(arg, np.ndarray):
        if size != 8:
            raise FatkitError(f"{kernel}: argument {index} is an array but parameter {index} takes {size} bytes")
        if not arg.flags.c_contiguous:
            raise FatkitError(f"{kernel}: argument {index} is not a contiguous array")
        return struct.pack("<Q", memory.add(arg))
    if isinstance(arg, np.generic):
        raw = arg.tobytes()
        if len(raw) != size:
            raise FatkitError(f"{kernel}: argument {index} ({arg.dtype}) has {len(raw)} bytes, parameter {index} "
                              f"({kind}) takes {size} bytes")
        return raw
    if isinstance(arg, (bytes, bytearray)):
        if len(arg) != size:
            raise FatkitError(f"{kernel}: argument {index} has {len(arg)} bytes, parameter {index} takes {size} "
                              "bytes")
        return bytes(arg)
    raise FatkitError(f"{kernel}: argument {index} is a {type(arg).__name__}; pass a numpy array (device "
                      "memory), a numpy scalar (by value) or bytes (an array parameter)")


def _hidden(kind: str, grid: tuple[int, ...], block: tuple[int, ...], shared: int, queue: int) -> int:
    axes = "xyz"
    for i, axis in enumerate(axes):
        if kind == f"hidden_block_count_{axis}":
            return grid[i]
        if kind == f"hidden_group_size_{axis}":
            return block[i]
        if kind == f"hidden_remainder_{axis}":
            return 0  # the grid is whole blocks
        if kind == f"hidden_global_offset_{axis}":
            return 0
    if kind == "hidden_grid_dims":
        return 3 if grid[2] > 1 or block[2] > 1 else 2 if grid[1] > 1 or block[1] > 1 else 1
    if kind == "hidden_dynamic_lds_size":
        return shared
    if kind == "hidden_shared_base":
        return SHARED_APERTURE >> 32
    if kind == "hidden_private_base":
        return PRIVATE_APERTURE >> 32
    if kind == "hidden_queue_ptr":
        return queue
    return 0  # printf/hostcall buffers, default queue, completion action, heap: none in this runtime


class Launch:
    """The state one launch shares across its waves."""

    def __init__(self) -> None:
        self.memory = GlobalMemory()
        self.stats = LaunchStats()
        self.code_base = 0
        self.ieee = True
        self.dx10_clamp = False  # the clamp modifier takes a NaN to +0 (else it passes NaN through)
        self.mode = fpmode.DEFAULT_FP  # MODE at dispatch


class Module:
    """A code object loaded once: its image (code, constants and `.global` variables) stays in host memory
    across launches, so what one launch writes to a module global the next one reads, as on a GPU where the
    module stays loaded (a grid-sync workspace, a device-side counter, the malloc heap, the printf buffer)."""

    def __init__(self, code_object: bytes) -> None:
        from fatkit.emulate import _require_tinygrad
        _require_tinygrad()
        data = self.data = bytes(code_object)
        co = self.code_object = parse_code_object(data)
        arch = _PROCESSOR_ARCH.get(co.processor)
        if arch is None:
            raise FatkitError(f"fatkit.emulate does not model {co.processor} (gfx1100-family, gfx1200/1201, "
                              "gfx90a, gfx94x)")
        self.arch, self.processor = arch, co.processor
        elf = ElfView(data)
        self.image = _load_image(data, elf)
        self.base = self.image.ctypes.data
        self.symbols = _symbols(elf)

    def address(self, name: str) -> int:
        """The host address of a symbol of the image (a module global, a kernel)."""
        symbol = self.symbols.get(name)
        if symbol is None:
            raise FatkitError(f"the code object has no symbol {name!r}")
        return self.base + symbol.value

    def symbol(self, name: str) -> np.ndarray:
        """A module global's bytes in the image (its symbol's size), read and written in place."""
        symbol = self.symbols.get(name)
        if symbol is None:
            raise FatkitError(f"the code object has no symbol {name!r}")
        return self.image[symbol.value:symbol.value + symbol.size]

    def read(self, address: int, size: int) -> bytes:
        """`size` bytes of the image at a host address (as a kernel sees it); FatkitError outside the image."""
        offset = address - self.base
        if size < 0 or offset < 0 or offset + size > len(self.image):
            raise FatkitError(f"{size} bytes at 0x{address:x} lie outside the loaded code object")
        return bytes(self.image[offset:offset + size])

    def write(self, address: int, data: bytes) -> None:
        """Write bytes into the image at a host address (a global's new value before a launch)."""
        offset = address - self.base
        if offset < 0 or offset + len(data) > len(self.image):
            raise FatkitError(f"{len(data)} bytes at 0x{address:x} lie outside the loaded code object")
        self.image[offset:offset + len(data)] = np.frombuffer(bytes(data), np.uint8)

    def string_at(self, address: int, limit: int = 1 << 16) -> bytes:
        """The NUL-terminated string of the image at a host address (at most `limit` bytes)."""
        offset = address - self.base
        if not 0 <= offset < len(self.image):
            raise FatkitError(f"a string at 0x{address:x} lies outside the loaded code object")
        chunk = self.image[offset:offset + limit].tobytes()
        end = chunk.find(b"\0")
        if end < 0:
            raise FatkitError(f"the string at 0x{address:x} has no NUL within {limit} bytes")
        return chunk[:end]

    def launch(self, kernel: str, grid: tuple[int, ...], block: tuple[int, ...], args: list,
               shared: int = 0, buffers: tuple[np.ndarray, ...] = ()) -> LaunchStats:
        """`buffers`: device memory the kernel reaches only through addresses stored elsewhere (a tensor map,
        a pointer table in another buffer), registered for this launch like the argument arrays."""
        started = time.perf_counter()
        data, co, arch = self.data, self.code_object, self.arch
        meta = next((k for k in co.kernels if k.name == kernel), None)
        kd = next((d for d in co.descriptors if d.name == kernel), None)
        if meta is None or kd is None:
            raise FatkitError(f"code object has no kernel {kernel!r} (kernels: "
                              f"{', '.join(k.name for k in co.kernels)})")
        grid = (tuple(int(g) for g in grid) + (1, 1))[:3]
        block = (tuple(int(b) for b in block) + (1, 1))[:3]
        if min(grid) < 1 or min(block) < 1:
            raise FatkitError(f"grid {grid} and block {block} must be positive")
        threads = block[0] * block[1] * block[2]
        if meta.max_flat_workgroup_size and threads > meta.max_flat_workgroup_size:
            raise FatkitError(f"{kernel}: {threads} threads per block exceed its max_flat_workgroup_size "
                              f"{meta.max_flat_workgroup_size}")

        state = Launch()
        base = state.code_base = state.memory.add(self.image)
        for buffer in buffers:
            if not isinstance(buffer, np.ndarray) or not buffer.flags.c_contiguous:
                raise FatkitError(f"{kernel}: a buffer is {type(buffer).__name__}, not a contiguous numpy array")
            state.memory.add(buffer)
        rsrc1, rsrc2, props = kd.rsrc1, kd.rsrc2, kd.code_properties
        state.ieee = bool((rsrc1 >> 23) & 1) if arch == "cdna" or arch == "rdna3" else True
        # DX10_CLAMP (rsrc1 bit 21, gfx6–gfx11; gfx12 reuses the bit): clamp turns NaN into +0
        state.dx10_clamp = bool((rsrc1 >> 21) & 1) if arch == "cdna" or arch == "rdna3" else False
        state.mode = fpmode.entry_mode(rsrc1)
        if not 0 <= shared or kd.group_segment_fixed_size + shared > LDS_CAPACITY:
            raise FatkitError(f"{kernel}: {shared} bytes of dynamic shared memory with "
                              f"{kd.group_segment_fixed_size} static exceed the {LDS_CAPACITY} bytes of LDS")

        # kernarg segment
        explicit = [a for a in meta.args if not str(a.get(".value_kind", "")).startswith("hidden_")]
        if len(args) != len(explicit):
            raise FatkitError(f"{kernel} takes {len(explicit)} arguments, got {len(args)}")
        kernarg = np.zeros(max(meta.kernarg_size, 16) + 64, dtype=np.uint8)
        queue = np.zeros(256, dtype=np.uint8)
        queue_address = state.memory.add(queue)
        for index, (arg, arg_meta) in enumerate(zip(args, explicit)):
            raw = _arg_bytes(kernel, index, arg, arg_meta, state.memory)
            offset = arg_meta[".offset"]
            kernarg[offset:offset + len(raw)] = np.frombuffer(raw, np.uint8)
        for arg_meta in meta.args:
            kind = str(arg_meta.get(".value_kind", ""))
            if kind.startswith("hidden_"):
                value = _hidden(kind, grid, block, shared, queue_address)
                size, offset = arg_meta[".size"], arg_meta[".offset"]
                kernarg[offset:offset + size] = np.frombuffer(
                    (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little"), np.uint8)
        kernarg_address = state.memory.add(kernarg)
        dispatch = np.zeros(64, dtype=np.uint8)
        struct.pack_into("<HHHHHHIIIIIQQ", dispatch.data, 0, 0, 3, block[0], block[1], block[2], 0,
                         grid[0] * block[0], grid[1] * block[1], grid[2] * block[2],
                         kd.private_segment_fixed_size, kd.group_segment_fixed_size + shared,
                         base + kd.offset, kernarg_address)
        dispatch_address = state.memory.add(dispatch)

        wave32 = kd.wavefront32
        lanes = 32 if wave32 else 64
        runtime.LANES[0] = lanes
        sem = _SEMANTICS.get(arch)
        if sem is None:
            sem = _SEMANTICS[arch] = Semantics(arch)
        preparer, steps = program_for(data, arch, wave32, lambda: Preparer(arch, wave32, sem))
        preparer.has_sve = self.processor != "gfx90a"
        preparer.attach(state)
        entry = self.address(kernel + ".kd") + kd.entry_offset
        stats = state.stats
        stats.budget = int(os.environ.get("FATKIT_EMULATE_BUDGET", DEFAULT_BUDGET))
        user_count = (rsrc2 >> _USER_SGPR_COUNT_SHIFT) & 0x1F
        wg_ids = [(rsrc2 >> (_WG_ID_X_BIT + i)) & 1 for i in range(3)]
        private_size = kd.private_segment_fixed_size
        if kd.code_properties & (1 << 11):  # a dynamic stack (alloca, recursion): room beyond the fixed frame
            private_size += DYNAMIC_STACK
        lds_size = kd.group_segment_fixed_size + shared
        vgprs = 512 if arch == "cdna" else 256
        workitem_dims = (rsrc2 >> _VGPR_WORKITEM_SHIFT) & 3
        packed_ids = True  # gfx90a, gfx94x and gfx11/12 pack the workitem ids into v0 (older gfx9: v0, v1, v2)
        user = []  # (count, value) in enable order
        if props & 1:
            user.append((4, 0))  # private segment buffer: scratch goes through flat scratch here
        if props & 2:
            user.append((2, dispatch_address))
        if props & 4:
            user.append((2, queue_address))
        if props & 8:
            user.append((2, kernarg_address))
        if props & 16:
            user.append((2, 0))  # dispatch id
        if props & 32:
            user.append((2, 0))  # flat scratch init: scratch addresses are per-lane offsets from 0
        if props & 64:
            user.append((1, private_size))
        if sum(c for c, _ in user) > user_count:
            raise FatkitError(f"{kernel}: descriptor enables more user SGPRs than user_sgpr_count {user_count}")
        with np.errstate(all="ignore"):
            for gz in range(grid[2]):
                for gy in range(grid[1]):
                    for gx in range(grid[0]):
                        _run_workgroup(preparer, steps, self.image, base, stats, entry, (gx, gy, gz), block, lanes,
                                       vgprs, user, user_count, wg_ids, packed_ids, workitem_dims, private_size,
                                       lds_size, rsrc2)
        stats.seconds = time.perf_counter() - started
        stats.image = self.image
        stats.image_base = base
        return stats


def launch(code_object: bytes, kernel: str, grid: tuple[int, ...], block: tuple[int, ...], args: list,
           shared: int = 0, buffers: tuple[np.ndarray, ...] = ()) -> LaunchStats:
    """One launch on a freshly loaded image (module globals start from the code object's initial values)."""
    return Module(code_object).launch(kernel, grid, block, args, shared, buffers)


def _run_workgroup(preparer, steps, image, base, stats, entry, wg, block, lanes, vgprs, user, user_count, wg_ids,
                   packed_ids, workitem_dims, private_size, lds_size, rsrc2) -> None:
    threads = block[0] * block[1] * block[2]
    lds = FlatArray("LDS", lds_size)
    waves = []
    for first in range(0, threads, lanes):
        w = Wave(lanes, vgprs, preparer.cdna)
        w.mode = preparer.launch.mode
        w.lds = lds
        w.private = FlatArray("scratch", private_size, lanes)
        index = 0
        for count, value in user:
            w.swrite(index, count, value)
            index += count
        index = user_count
        for axis in range(3):
            if wg_ids[axis]:
                w.s[index] = wg[axis]
                index += 1
        if rsrc2 & 1:  # private segment wave byte offset
            w.s[index] = 0
        if preparer.arch == "rdna4":  # gfx12 reads the workgroup ids from the trap temporaries (architected SGPRs)
            w.s[108 + 9] = wg[0]  # ttmp9: x
            w.s[108 + 7] = wg[1] | (wg[2] << 16)  # ttmp7: y, z
        ids = np.arange(first, first + lanes)
        x = ids % block[0]
        y = (ids // block[0]) % block[1]
        z = ids // (block[0] * block[1])
        live = ids < threads
        x, y, z = np.where(live, x, 0), np.where(live, y, 0), np.where(live, z, 0)
        if packed_ids:
            w.v[0] = (x | (y << 10) | (z << 20)).astype(np.uint32)
        else:
            w.v[0] = x.astype(np.uint32)
            if workitem_dims >= 1:
                w.v[1] = y.astype(np.uint32)
            if workitem_dims >= 2:
                w.v[2] = z.astype(np.uint32)
        mask = runtime._pack(live)
        w.s[126], w.s[127] = mask & 0xFFFFFFFF, mask >> 32 if lanes == 64 else 0
        w.pc = entry
        waves.append(w)
    stats.waves += len(waves)
    stats.workgroups += 1
    while True:
        # round robin in time slices, so a wave spinning on memory that another wave will write lets it run
        running = [w for w in waves if not w.done and not w.at_barrier]
        if not running:
            if all(w.done for w in waves):
                return
            for w in waves:  # every wave is at the barrier or finished: release
                w.at_barrier = False
            continue
        for w in running:
            _run_wave(w, preparer, steps, image, base, stats)


def _run_wave(w: Wave, preparer: Preparer, steps: dict, image: np.ndarray, base: int, stats: LaunchStats) -> None:
    counts = stats.per_class
    executed = 0
    budget = stats.budget - stats.wave_instructions
    slice_end = executed + TIME_SLICE
    w.yielded = False
    try:
        while not w.done and not w.at_barrier and not w.yielded and executed < slice_end:
            if executed >= budget:
                raise FatkitError(f"the launch ran {stats.budget} wave-instructions without finishing (at pc "
                                  f"0x{w.pc - base:x}): a loop that never ends? (FATKIT_EMULATE_BUDGET raises it)")
            step = steps.get(w.pc - base)
            if step is None:
                step = fetch(preparer, steps, w.pc - base, image)
            executed += 1
            counts[step.klass] = counts.get(step.klass, 0) + 1
            if step.run is None:
                w.pc += step.size
            else:
                step.run(w)
    finally:
        stats.wave_instructions += executed


__all__ = ["LaunchStats", "Module", "Step", "launch"]
