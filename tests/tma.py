"""The tensor copies (TMA) as numpy sees them, and the PTX kernels that exercise them.

The model is written from the PTX ISA's tensor sections and the H200 measurements (box packed row-major,
out-of-bounds elements filled, the swizzle an XOR of the absolute shared address's bits 7-9 into bits 4-6),
independently of fatkit's lowering: it indexes whole numpy arrays where the lowering loops over elements.
The kernels are shared by tests/test_translate_tma.py (host target) and verification/tma.py (the H200:
NVIDIA's own maps against fatkit's maps on the re-lowered PTX).
"""

from __future__ import annotations

import itertools

import numpy as np

SWIZZLE_SPAN = {0: 0, 1: 32, 2: 64, 3: 128}
SHARED_BYTES = 16384  # the kernels' box buffer (.align 1024, so its address bits 7-9 are zero)


def swizzle_offsets(count: int, mode: int) -> np.ndarray:
    """Physical byte offset, within a 1024-aligned buffer, of each linear byte 0…count-1."""
    linear = np.arange(count, dtype=np.int64)
    if mode == 0:
        return linear
    mask = SWIZZLE_SPAN[mode] // 16 - 1
    return linear ^ (((linear >> 7) & mask) << 4)


def _fill_bytes(size: int, nan: bool) -> bytes:
    if not nan:
        return bytes(size)
    return ((1 << (8 * size - 1)) - 1).to_bytes(size, "little")


def box_extents(box: list[int], steps: list[int]) -> list[int]:
    return [-(-b // s) for b, s in zip(box, steps)]


def _element_positions(coords, box, steps):
    """Tensor coordinates of every box element, dimension 0 fastest (rows of an (n, rank) array)."""
    extents = box_extents(box, steps)
    grids = np.meshgrid(*[c + s * np.arange(e) for c, s, e in zip(coords, steps, extents)], indexing="ij")
    # meshgrid with ij puts dimension 0 first; C order then makes the last dimension fastest: reverse
    return np.stack([g.transpose(tuple(range(len(box)))[::-1]).ravel() for g in grids], axis=1)


def _global_offsets(positions: np.ndarray, dims, strides, size) -> tuple[np.ndarray, np.ndarray]:
    inside = np.all((positions >= 0) & (positions < np.array(dims)), axis=1)
    byte_strides = np.array([size] + list(strides), dtype=np.int64)
    return inside, positions @ byte_strides


def load(memory: np.ndarray, dims, strides, size: int, box, steps, coords, swizzle: int, nan: bool,
         shared: np.ndarray | None = None) -> np.ndarray:
    """The shared buffer after a tile load of the box at `coords` from `memory` (the tensor's bytes from its
    base address); `shared` is the buffer before (untouched bytes stay)."""
    shared = np.zeros(SHARED_BYTES, np.uint8) if shared is None else shared.copy()
    positions = _element_positions(coords, box, steps)
    inside, offsets = _global_offsets(positions, dims, strides, size)
    fill = np.frombuffer(_fill_bytes(size, nan), np.uint8)
    linear = np.empty(len(positions) * size, np.uint8)
    for byte in range(size):
        linear[byte::size] = np.where(inside, memory[np.where(inside, offsets, 0) + byte], fill[byte])
    shared[swizzle_offsets(len(linear), swizzle)] = linear
    return shared


def store(memory: np.ndarray, dims, strides, size: int, box, steps, coords, swizzle: int,
          shared: np.ndarray, reduce=None) -> np.ndarray:
    """`memory` after a tile store (or, with `reduce(old, new)` on element arrays, a reduction) of the box."""
    memory = memory.copy()
    positions = _element_positions(coords, box, steps)
    inside, offsets = _global_offsets(positions, dims, strides, size)
    linear = shared[swizzle_offsets(len(positions) * size, swizzle)]
    kind = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[size]
    elements = linear.view(kind)
    for index in np.flatnonzero(inside):
        start = offsets[index]
        if reduce is None:
            memory[start:start + size] = linear[index * size:(index + 1) * size]
        else:
            old = memory[start:start + size].view(kind)[0]
            memory[start:start + size] = np.array([reduce(old, elements[index])], kind).view(np.uint8)
    return memory


def im2col(memory: np.ndarray, dims, strides, size: int, channels: int, pixels: int, steps, lower, upper,
           coords, offsets, swizzle: int, nan: bool) -> np.ndarray:
    """The shared buffer after an im2col load (rank = len(dims)): pixel positions walk the bounding box
    lower … dim−1+upper of each spatial dimension (traversal steps, W fastest, then the next batch index)
    from the starting pixel at `coords`; each brings `channels` channels of the pixel at position + offsets."""
    rank = len(dims)
    spatial = list(range(1, rank - 1))
    ranges = {i: list(range(lower[i - 1], dims[i] + upper[i - 1], steps[i])) for i in spatial}
    walk = [p[::-1] for p in itertools.product(*[ranges[i] for i in reversed(spatial)])]  # W fastest
    start = walk.index(tuple(coords[i] for i in spatial))
    fill = _fill_bytes(size, nan)
    out = bytearray()
    for k in range(pixels):
        batch, place = divmod(start + k, len(walk))
        pixel = [coords[0]] + [walk[place][j] + offsets[j] for j in range(rank - 2)] + [coords[-1] + batch]
        for c in range(channels):
            where = [pixel[0] + c * steps[0]] + pixel[1:]
            if all(0 <= w < d for w, d in zip(where, dims)):
                offset = where[0] * size + sum(w * s for w, s in zip(where[1:], strides))
                out += memory[offset:offset + size].tobytes()
            else:
                out += fill
    shared = np.zeros(SHARED_BYTES, np.uint8)
    shared[swizzle_offsets(len(out), swizzle)] = np.frombuffer(bytes(out), np.uint8)
    return shared


# ------------------------------------------------------------------------------------------- kernels

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"
_COORDS = "".join(f", .param .u32 c{i}" for i in range(5))


def _coordinates(rank: int) -> str:
    return ", ".join(f"%c{i}" for i in range(rank))


def _prologue(name: str, extra_params: str = "") -> str:
    """Params: the map, out (SHARED_BYTES bytes of box, then a u32 completion flag a thread), five
    coordinates, the expected transaction bytes, how many times a thread tries the mbarrier wait."""
    return f"""
.visible .entry {name}(.param .align 64 .b8 map[128], .param .u64 out{_COORDS}, .param .u32 bytes,
    .param .u32 patience{extra_params})
{{
    .reg .pred %p<4>;
    .reg .b16 %h<4>;
    .reg .b32 %r<16>;
    .reg .b32 %c<5>;
    .reg .b64 %rd<8>;
    .shared .align 1024 .b8 box[{SHARED_BYTES}];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %c0, [c0];
    ld.param.u32 %c1, [c1];
    ld.param.u32 %c2, [c2];
    ld.param.u32 %c3, [c3];
    ld.param.u32 %c4, [c4];
    ld.param.u32 %r9, [bytes];
    ld.param.u32 %r12, [patience];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, box;
    mov.u32 %r3, bar;
    mov.u32 %r8, %ntid.x;
    mov.b64 %rd7, map;
    cvta.param.u64 %rd7, %rd7;
"""


# every thread writes 0xA5 over the box (bytes the copy leaves alone keep it), then thread 0 initialises bar
_PREFILL = f"""
    mov.u32 %r4, %r1;
PREFILL:
    add.u32 %r5, %r2, %r4;
    st.shared.u8 [%r5], 165;
    add.u32 %r4, %r4, %r8;
    setp.lt.u32 %p1, %r4, {SHARED_BYTES};
    @%p1 bra PREFILL;
    setp.ne.u32 %p2, %r1, 0;
    @%p2 bra INITIALISED;
    mbarrier.init.shared::cta.b64 [%r3], 1;
    fence.mbarrier_init.release.cluster;
INITIALISED:
    fence.proxy.async.shared::cta;
    bar.sync 0;
"""

# every thread waits on the phase (at most `patience` tries, so a wrong tx count cannot hang the GPU), then
# copies the box out and writes its flag (a u32 after the box, one a thread): 1 when it saw the phase complete
_WAIT_AND_COPY_OUT = f"""
    mov.u32 %r6, 0;
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r3], 0;
    @%p3 bra WAITED;
    add.u32 %r6, %r6, 1;
    setp.lt.u32 %p1, %r6, %r12;
    @%p1 bra WAIT;
WAITED:
    selp.u32 %r7, 1, 0, %p3;
    mov.u32 %r4, %r1;
COPY:
    add.u32 %r5, %r2, %r4;
    ld.shared.u8 %h1, [%r5];
    cvt.u64.u32 %rd2, %r4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u8 [%rd3], %h1;
    add.u32 %r4, %r4, %r8;
    setp.lt.u32 %p1, %r4, {SHARED_BYTES};
    @%p1 bra COPY;
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3+{SHARED_BYTES}], %r7;
    ret;
}}
"""


def load_kernel(rank: int) -> str:
    """load{rank}d: a tile load of the box at the coordinates, expect-tx `bytes`, the box copied out."""
    return _prologue(f"load{rank}d") + _PREFILL + f"""
    @%p2 bra ISSUED;
    cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r2], [%rd7, {{{_coordinates(rank)}}}], [%r3];
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], %r9;
ISSUED:
""" + _WAIT_AND_COPY_OUT


def im2col_kernel(rank: int) -> str:
    """im2col{rank}d: an im2col load with offsets o0…o2 (16-bit params), otherwise as load_kernel."""
    offsets = "".join(f", .param .u16 o{i}" for i in range(3))
    loads = "".join(f"    ld.param.u16 %h{i + 1}, [o{i}];\n" for i in range(rank - 2))
    names = ", ".join(f"%h{i + 1}" for i in range(rank - 2))
    return _prologue(f"im2col{rank}d", offsets) + _PREFILL + f"""
    @%p2 bra ISSUED;
{loads}    cp.async.bulk.tensor.{rank}d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%r2], [%rd7, {{{_coordinates(rank)}}}], [%r3], {{{names}}};
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], %r9;
ISSUED:
""" + _WAIT_AND_COPY_OUT


def store_kernel(rank: int, reduction: str | None = None) -> str:
    """store{rank}d / reduce_{op}{rank}d: the box comes from `source` (SHARED_BYTES bytes, copied into shared
    memory linearly by all threads), then thread 0 stores (or reduces) it into the tensor."""
    name = f"reduce_{reduction}{rank}d" if reduction else f"store{rank}d"
    operation = (f"cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta.{reduction}.tile.bulk_group"
                 if reduction else f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group")
    return _prologue(name, ", .param .u64 source") + f"""
    ld.param.u64 %rd4, [source];
    mov.u32 %r4, %r1;
FILL:
    cvt.u64.u32 %rd2, %r4;
    add.u64 %rd3, %rd4, %rd2;
    ld.global.u8 %h1, [%rd3];
    add.u32 %r5, %r2, %r4;
    st.shared.u8 [%r5], %h1;
    add.u32 %r4, %r4, %r8;
    setp.lt.u32 %p1, %r4, {SHARED_BYTES};
    @%p1 bra FILL;
    fence.proxy.async.shared::cta;
    bar.sync 0;
    setp.ne.u32 %p2, %r1, 0;
    @%p2 bra DONE;
    {operation} [%rd7, {{{_coordinates(rank)}}}], [%r2];
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group 0;
DONE:
    ret;
}}
"""


def module() -> str:
    """Every kernel, in one module."""
    kernels = [load_kernel(r) for r in range(1, 6)] + [im2col_kernel(r) for r in (3, 4, 5)]
    kernels += [store_kernel(r) for r in (1, 2, 3)] + [store_kernel(2, op) for op in ("add", "min", "xor")]
    return HEADER + "".join(kernels)
