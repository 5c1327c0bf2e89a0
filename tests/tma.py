"""The tensor copies (TMA) as numpy sees them, and the PTX kernels that exercise them.

The model follows the H200 (runs of verification/tma.py; tests/test_translate_tma.py checks it against
NVIDIA's recorded bytes, tests/samples/h200/tma_samples.npz), independently of fatkit's lowering: it indexes
whole numpy arrays where the lowering loops over elements. What the H200 does:
- dimension 0's traversal (element) stride is not applied: a box row is box[0] consecutive elements from
  coords[0]; along dimension i > 0 the box has ceil(box[i] / stride[i]) positions coords[i] + j·stride[i];
- rows are packed without a swizzle; with one, every row starts at a multiple of the swizzle span (the
  bytes between rows are not written), and the byte at linear shared address a goes to
  a XOR (((a >> 7) & (span/16 − 1)) << 4) (absolute addresses);
- out-of-bounds elements are filled: zero, or with the NaN fill the 16-bit pattern 0x7FF7 repeated, whatever
  the floating-point type;
- the complete-tx counts rows · box[0] · element size (im2col: pixels · channels · size), the bytes that
  are written, filled ones included, the padding of swizzled rows not;
- im2col: channels are consecutive, the batch index advances by the batch dimension's traversal stride;
- NVIDIA's kernel faults where coords[0] · element size is not a multiple of 16 (fatkit traps there).
The kernels are shared by tests/test_translate_tma.py (host target, AMD executor) and verification/tma.py
(the H200: NVIDIA's own maps against fatkit's maps on the re-lowered PTX).
"""

from __future__ import annotations

import itertools

import numpy as np

SWIZZLE_SPAN = {0: 0, 1: 32, 2: 64, 3: 128}
SHARED_BYTES = 16384  # the kernels' box buffer (.align 1024, so its address bits 7-9 are zero)
NAN_FILL = b"\xf7\x7f" * 4  # the H200's NaN fill: 0x7FF7 in every 16 bits, f16, bf16, f32 and f64 alike


def swizzle_offsets(count: int, mode: int) -> np.ndarray:
    """Physical byte offset, within a 1024-aligned buffer, of each linear byte 0…count-1."""
    linear = np.arange(count, dtype=np.int64)
    if mode == 0:
        return linear
    mask = SWIZZLE_SPAN[mode] // 16 - 1
    return linear ^ (((linear >> 7) & mask) << 4)


def _fill_bytes(size: int, nan: bool) -> bytes:
    return NAN_FILL[:size] if nan else bytes(size)


def box_extents(box: list[int], steps: list[int]) -> list[int]:
    """Box positions per dimension: box[0] along dimension 0 (its stride is not applied), then
    ceil(box[i] / stride[i])."""
    return [box[0]] + [-(-b // s) for b, s in zip(box[1:], steps[1:])]


def row_pitch(row: int, swizzle: int) -> int:
    """Shared bytes from one box row to the next: the row's bytes, or with a swizzle the row rounded up to
    the span (the encoder keeps a row within the span unless interleaved)."""
    span = SWIZZLE_SPAN[swizzle]
    return -(-row // span) * span if span else row


def transfer_bytes(case: dict) -> int:
    """The bytes a load completes on its mbarrier (what the kernel must expect)."""
    if case["kind"] == "im2col":
        return case["pixels"] * case["channels"] * case["size"]
    return int(np.prod(box_extents(case["box"], case["steps"]))) * case["size"]


def _element_positions(coords, box, steps):
    """Tensor coordinates of every box element, dimension 0 fastest (rows of an (n, rank) array)."""
    extents = box_extents(box, steps)
    steps = [1] + list(steps[1:])
    grids = np.meshgrid(*[c + s * np.arange(e) for c, s, e in zip(coords, steps, extents)], indexing="ij")
    # meshgrid with ij puts dimension 0 first; C order then makes the last dimension fastest: reverse
    return np.stack([g.transpose(tuple(range(len(box)))[::-1]).ravel() for g in grids], axis=1)


def _global_offsets(positions: np.ndarray, dims, strides, size) -> tuple[np.ndarray, np.ndarray]:
    inside = np.all((positions >= 0) & (positions < np.array(dims)), axis=1)
    byte_strides = np.array([size] + list(strides), dtype=np.int64)
    return inside, positions @ byte_strides


def _shared_offsets(elements: int, row_elements: int, size: int, swizzle: int) -> np.ndarray:
    """Physical shared offset of every byte of `elements` box elements (rows of `row_elements`)."""
    index = np.arange(elements * size, dtype=np.int64)
    row, within = np.divmod(index, row_elements * size)
    linear = row * row_pitch(row_elements * size, swizzle) + within
    return swizzle_offsets(int(linear.max()) + 1, swizzle)[linear]


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
    shared[_shared_offsets(len(positions), box[0], size, swizzle)] = linear
    return shared


def store(memory: np.ndarray, dims, strides, size: int, box, steps, coords, swizzle: int,
          shared: np.ndarray, reduce=None) -> np.ndarray:
    """`memory` after a tile store (or, with `reduce(old, new)` on element arrays, a reduction) of the box
    (the elements a load of the same box would bring; out-of-bounds ones are not written)."""
    memory = memory.copy()
    positions = _element_positions(coords, box, steps)
    inside, offsets = _global_offsets(positions, dims, strides, size)
    linear = shared[_shared_offsets(len(positions), box[0], size, swizzle)]
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
           coords, offsets, swizzle: int, nan: bool, shared: np.ndarray | None = None) -> np.ndarray:
    """The shared buffer after an im2col load (rank = len(dims)): pixel positions walk the bounding box
    lower … dim−1+upper of each spatial dimension (traversal steps, W fastest, then the next batch index, a
    batch traversal step on) from the starting pixel at `coords`; each brings `channels` consecutive channels
    of the pixel at position + offsets, a row of the box."""
    rank = len(dims)
    spatial = list(range(1, rank - 1))
    ranges = {i: list(range(lower[i - 1], dims[i] + upper[i - 1], steps[i])) for i in spatial}
    walk = [p[::-1] for p in itertools.product(*[ranges[i] for i in reversed(spatial)])]  # W fastest
    start = walk.index(tuple(coords[i] for i in spatial))
    fill = _fill_bytes(size, nan)
    out = bytearray()
    for k in range(pixels):
        batch, place = divmod(start + k, len(walk))
        pixel = [coords[0]] + [walk[place][j] + offsets[j] for j in range(rank - 2)]
        pixel.append(coords[-1] + batch * steps[-1])
        for c in range(channels):
            where = [pixel[0] + c] + pixel[1:]
            if all(0 <= w < d for w, d in zip(where, dims)):
                offset = where[0] * size + sum(w * s for w, s in zip(where[1:], strides))
                out += memory[offset:offset + size].tobytes()
            else:
                out += fill
    shared = np.zeros(SHARED_BYTES, np.uint8) if shared is None else shared.copy()
    shared[_shared_offsets(pixels * channels, channels, size, swizzle)] = np.frombuffer(bytes(out), np.uint8)
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
    .reg .pred %q<4>;
    .reg .b32 %e<8>;
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


# The copy issued under elect.sync by each of the first `warps` warps (a parameter), in the shape CUB and
# CUTLASS give it (elect.sync, selp, setp, a branch around the issue): passes/elected.py moves it to where the
# warp rejoins and the lanes of the warp share it. Warp w's box goes HALF·w bytes into the buffer, every
# issuing warp's expect-tx precedes its copy, and the mbarrier waits for `warps` arrivals.
HALF = SHARED_BYTES // 2


def _elected(issue: str) -> str:
    return f"""
    shr.u32 %e2, %r1, 5;
    setp.ge.u32 %q1, %e2, %e1;
    @%q1 bra ISSUED;
    mov.b32 %e3, -1;
    elect.sync _|%q2, %e3;
    selp.b32 %e4, 1, 0, %q2;
    setp.eq.b32 %q3, %e4, 0;
    @%q3 bra ELECTED;
    mul.lo.u32 %e5, %e2, {HALF};
    add.u32 %e6, %r2, %e5;
{issue}ELECTED:
ISSUED:
"""


_WARPS = ", .param .u32 warps"
_READ_WARPS = "    ld.param.u32 %e1, [warps];\n"


def _elected_prefill() -> str:
    return _READ_WARPS + _PREFILL.replace("mbarrier.init.shared::cta.b64 [%r3], 1;", "mbarrier.init.shared::cta.b64 [%r3], %e1;")


def elected_load_kernel(rank: int) -> str:
    """elected_load{rank}d: load_kernel's copy issued under elect.sync by each of the first `warps` warps."""
    copy = (f"    mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r3], %r9;\n"
            f"    cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint "
            f"[%e6], [%rd7, {{{_coordinates(rank)}}}], [%r3], %rd6;\n")
    return (_prologue(f"elected_load{rank}d", _WARPS) + "    mov.u64 %rd6, 0;\n" + _elected_prefill()
            + _elected(copy) + _WAIT_AND_COPY_OUT)


def elected_im2col_kernel(rank: int) -> str:
    """elected_im2col{rank}d: im2col_kernel's copy issued as elected_load_kernel's."""
    offsets = "".join(f", .param .u16 o{i}" for i in range(3))
    loads = "".join(f"    ld.param.u16 %h{i + 1}, [o{i}];\n" for i in range(rank - 2))
    names = ", ".join(f"%h{i + 1}" for i in range(rank - 2))
    copy = (f"    mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r3], %r9;\n"
            f"    cp.async.bulk.tensor.{rank}d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes "
            f"[%e6], [%rd7, {{{_coordinates(rank)}}}], [%r3], {{{names}}};\n")
    return (_prologue(f"elected_im2col{rank}d", offsets + _WARPS) + loads + _elected_prefill() + _elected(copy)
            + _WAIT_AND_COPY_OUT)


def elected_store_kernel(rank: int, reduction: str | None = None) -> str:
    """elected_store{rank}d / elected_reduce_{op}{rank}d: store_kernel's store (or reduction) of the box at
    the buffer's start, issued under elect.sync by each of the first `warps` warps (commit and wait in the
    elected region)."""
    plain = store_kernel(rank, reduction)
    name = f"reduce_{reduction}{rank}d" if reduction else f"store{rank}d"
    head, body = plain.split("    ld.param.u64 %rd4, [source];\n", 1)
    head = head.replace(f".entry {name}(", f".entry elected_{name}(").replace(", .param .u64 source)",
                                                                           ", .param .u64 source" + _WARPS + ")")
    fill, issue = body.split("    setp.ne.u32 %p2, %r1, 0;\n    @%p2 bra DONE;\n", 1)
    copy = issue.replace("DONE:\n    ret;\n}\n", "")  # the store, commit and wait as store_kernel has them
    return head + "    ld.param.u64 %rd4, [source];\n" + _READ_WARPS + fill + _elected(copy) + "    ret;\n}\n"


def elected_module() -> str:
    """The elected kernels, in one module."""
    kernels = [elected_load_kernel(r) for r in range(1, 6)] + [elected_im2col_kernel(r) for r in (3, 4, 5)]
    kernels += [elected_store_kernel(r) for r in (1, 2, 3)] + [elected_store_kernel(2, op) for op in ("add", "min", "xor")]
    return HEADER + "".join(kernels)


def module() -> str:
    """Every kernel, in one module."""
    kernels = [load_kernel(r) for r in range(1, 6)] + [im2col_kernel(r) for r in (3, 4, 5)]
    kernels += [store_kernel(r) for r in (1, 2, 3)] + [store_kernel(2, op) for op in ("add", "min", "xor")]
    return HEADER + "".join(kernels)


# ------------------------------------------------------------------------------------------- cases

# CUtensorMapDataType → bytes per element; the floating-point ones
TYPES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2}
FLOATING = {6, 7, 8, 9}


def tensor(case: dict) -> np.ndarray:
    """The case's tensor: random bytes (its own seed), strides[-1] · dims[-1] of them."""
    rng = np.random.default_rng(case["seed"] + 1_000_003)
    total = case["strides"][-1] * case["dims"][-1] if case["strides"] else case["pitch"]
    return rng.integers(0, 256, total, dtype=np.uint8)


def _strides(rng: np.random.Generator, dims: list[int], size: int) -> tuple[int, list[int]]:
    """Byte strides of a tensor whose rows are padded to a multiple of 16 (0–2 more 16-byte units)."""
    pitch = -(-dims[0] * size // 16) * 16 + 16 * int(rng.integers(0, 3))
    strides = [pitch]
    for d in dims[1:-1]:
        strides.append(strides[-1] * d)
    return pitch, strides[:len(dims) - 1]


def _aligned(coordinate: int, size: int) -> int:
    """The coordinate moved down to a multiple of 16 bytes (NVIDIA's kernel faults on any other)."""
    per = 16 // size
    return coordinate // per * per


def load_case(seed: int) -> dict:
    """A random tile load: rank 1-5, element type, box within the swizzle span, traversal strides (dimension
    0's too, which is not applied), fill, coordinates from a box's extent before the tensor to past its end,
    the first on a 16-byte boundary."""
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 6))
    data_type = int(rng.choice(list(TYPES)))
    size = TYPES[data_type]
    swizzle = int(rng.integers(0, 4))
    span = SWIZZLE_SPAN[swizzle] or 64
    inner = int(rng.choice([n for n in range(16, span + 1, 16)])) // size
    box = [inner] + [int(rng.integers(1, 5)) for _ in range(rank - 1)]
    steps = [int(rng.choice([1, 1, 2, 3])) for _ in range(rank)]
    dims = [int(rng.integers(max(2, inner // 2), 3 * inner + 2))] + [int(rng.integers(2, 7)) for _ in range(rank - 1)]
    coords = [int(rng.integers(-box[i] * steps[i], dims[i] + 1)) for i in range(rank)]
    coords[0] = _aligned(coords[0], size)
    nan = data_type in FLOATING and bool(rng.integers(0, 2))
    pitch, strides = _strides(rng, dims, size)
    case = {"kind": "load", "name": f"load{rank}d.{seed}", "seed": seed, "rank": rank, "data_type": data_type,
            "size": size, "box": box, "steps": steps, "swizzle": swizzle, "nan": nan, "dims": dims,
            "pitch": pitch, "strides": strides, "coords": coords}
    return {**case, "bytes": transfer_bytes(case)}


def anchor_case(swizzle: int, coords: list[int]) -> dict:
    """The H200's measured form: UINT16, 100 x 70 with a 256-byte pitch, a box as wide as the swizzle (64
    elements without one) and 8 rows."""
    inner = (SWIZZLE_SPAN[swizzle] or 128) // 2
    return {"kind": "load", "name": f"anchor.swizzle{swizzle}.{coords[0]}.{coords[1]}", "seed": 7, "rank": 2,
            "data_type": 1, "size": 2, "box": [inner, 8], "steps": [1, 1], "swizzle": swizzle, "nan": False,
            "dims": [100, 70], "pitch": 256, "strides": [256], "coords": coords, "bytes": inner * 8 * 2}


def edge_cases() -> list[dict]:
    """The measured form with traversal strides beyond the box, and with a box wholly past the end."""
    return [{**anchor_case(0, [0, 0]), "name": "anchor.stride3.box2", "box": [64, 2], "steps": [1, 3],
             "bytes": 64 * 2},
            {**anchor_case(0, [0, 70]), "name": "anchor.past_the_end"}]


def unaligned_cases() -> list[dict]:
    """Loads whose first coordinate is off a 16-byte boundary: NVIDIA's kernel faults (CUDA error 715, every
    such case of the H200 runs), fatkit's traps."""
    return [anchor_case(0, [5, 3]), anchor_case(3, [-5, 2])]


def im2col_case(seed: int) -> dict:
    """A random im2col load of f16 channels: rank 3-5, corners inside the rank's range, offsets 0-2, the
    first channel on a 16-byte boundary."""
    rng = np.random.default_rng(100 + seed)
    rank = int(rng.integers(3, 6))
    channels = int(rng.choice([8, 16, 32]))
    dims = [channels + int(rng.integers(0, 9))] + [int(rng.integers(3, 7)) for _ in range(rank - 2)]
    dims.append(int(rng.integers(1, 4)))
    limit = {3: 3, 4: 3, 5: 2}[rank]
    lower = [int(rng.integers(-limit, 1)) for _ in range(rank - 2)]
    upper = [int(rng.integers(-limit, limit)) for _ in range(rank - 2)]
    steps = [1] + [int(rng.choice([1, 2])) for _ in range(rank - 1)]
    for i in range(rank - 2):  # at least one position per spatial dimension
        if dims[i + 1] - 1 + upper[i] < lower[i]:
            upper[i] = lower[i] - dims[i + 1] + 1
    pixels = int(rng.integers(1, 20))
    start = [int(rng.choice(range(lower[i], dims[i + 1] + upper[i], steps[i + 1]))) for i in range(rank - 2)]
    coords = [_aligned(int(rng.integers(0, dims[0] - channels + 1)), 2)] + start + [int(rng.integers(0, dims[-1]))]
    pitch, strides = _strides(rng, dims, 2)
    return {"kind": "im2col", "name": f"im2col{rank}d.{seed}", "seed": 100 + seed, "rank": rank, "data_type": 6,
            "size": 2, "channels": channels, "pixels": pixels, "lower": lower, "upper": upper, "steps": steps,
            "dims": dims, "pitch": pitch, "strides": strides, "coords": coords, "nan": bool(rng.integers(0, 2)),
            "offsets": [int(rng.integers(0, 3)) for _ in range(rank - 2)], "swizzle": 0,
            "bytes": pixels * channels * 2}


# reduction → the CUtensorMapDataType it is tested on
REDUCTION_TYPES = {"add": 2, "min": 3, "xor": 4}


def store_case(seed: int, inside: bool = True) -> dict:
    """A random tile store (seed % 4 == 0) or reduction (add u32, min s32, xor u64), the first coordinate on
    a 16-byte boundary: of a box inside the tensor, or (`inside` false) one that may stick out of it on any
    side — NVIDIA's kernel faulted on each such case measured (docs/runtime.md), fatkit writes the elements
    inside."""
    rng = np.random.default_rng(200 + seed)
    operation = [None, "add", "min", "xor"][seed % 4]
    rank = int(rng.integers(1, 4)) if operation is None else 2
    data_type = REDUCTION_TYPES[operation] if operation else int(rng.choice(list(TYPES)))
    size = TYPES[data_type]
    swizzle = int(rng.integers(0, 4))
    box = [(SWIZZLE_SPAN[swizzle] or 64) // size] + [int(rng.integers(1, 5)) for _ in range(rank - 1)]
    steps = [int(rng.choice([1, 2])) for _ in range(rank)]
    if inside:  # each dimension at least as long as the positions the box covers in it
        reach = [box[0]] + [(e - 1) * s + 1 for e, s in zip(box_extents(box, steps)[1:], steps[1:])]
        dims = [r + int(rng.integers(0, 5)) for r in reach]
        coords = [int(rng.integers(0, d - r + 1)) for d, r in zip(dims, reach)]
    else:
        dims = [int(rng.integers(box[0] // 2, 2 * box[0]))] + [int(rng.integers(2, 6)) for _ in range(rank - 1)]
        coords = [int(rng.integers(-box[i], dims[i])) for i in range(rank)]
    coords[0] = _aligned(coords[0], size)
    pitch, strides = _strides(rng, dims, size)
    name = f"reduce_{operation}{rank}d" if operation else f"store{rank}d"
    return {"kind": "store", "name": f"{name}.{seed}" + ("" if inside else ".outside"), "kernel": name,
            "seed": 200 + seed, "rank": rank, "operation": operation, "data_type": data_type, "size": size,
            "box": box, "steps": steps, "swizzle": swizzle, "dims": dims, "pitch": pitch, "strides": strides,
            "coords": coords, "nan": False}


def _probe(case: dict, name: str, question: str, **changes) -> dict:
    return {**case, **changes, "name": f"probe.{name}", "probe": question}


def _faulting(case: dict) -> dict:
    return {**case, "may_fault": True}


def probe_cases() -> list[dict]:
    """Cases that settle what the H200 runs left open (`may_fault`: the verification runs them last, each fault
    costs it a fresh process): the complete-tx of swizzled rows shorter than
    the span, im2col with a swizzle and with a channel traversal stride, stores and reductions inside the
    tensor, past its end and at negative coordinates, and loads and stores off a 16-byte boundary (NVIDIA
    faults, fatkit traps: run one kernel each). The map built on the device is verification/tma.py's."""
    short = {"kind": "load", "seed": 31, "rank": 2, "data_type": 7, "size": 4, "box": [8, 4], "steps": [1, 1],
             "nan": False, "dims": [40, 6], "pitch": 176, "strides": [176], "coords": [8, 1]}
    tx = ("expect_tx of a swizzled box whose rows are shorter than the span: the one of .unpadded/.padded "
          "that does not complete expects more bytes than the copy transfers")
    probes = []
    for swizzle, span in ((3, 128), (2, 64)):
        probes += [_probe(short, f"short_rows.swizzle{swizzle}.unpadded", tx, swizzle=swizzle, bytes=4 * 32),
                   _probe(short, f"short_rows.swizzle{swizzle}.padded", tx, swizzle=swizzle, bytes=4 * span)]
    im2col = {"kind": "im2col", "seed": 32, "rank": 3, "data_type": 6, "size": 2, "channels": 16, "pixels": 8,
              "lower": [-1], "upper": [0], "steps": [1, 1, 1], "dims": [32, 6, 2], "pitch": 64, "strides": [64, 384],
              "coords": [8, -1, 0], "nan": False, "offsets": [1], "swizzle": 0, "bytes": 8 * 16 * 2}
    probes += [_probe(im2col, "im2col.swizzle3", "im2col pixel rows shorter than the 128-byte span: placed at "
                      "multiples of the span, as tile rows are", swizzle=3),
               _probe(im2col, "im2col.channel_stride2", "im2col with dimension 0's traversal stride 2: not "
                      "applied (channels consecutive), as in tile mode", steps=[2, 1, 1])]
    plain = {"kind": "store", "kernel": "store2d", "seed": 33, "rank": 2, "operation": None, "data_type": 2,
             "size": 4, "box": [16, 4], "steps": [1, 1], "swizzle": 0, "dims": [40, 8], "pitch": 176,
             "strides": [176], "coords": [8, 2], "nan": False}
    reduction = {**plain, "kernel": "reduce_add2d", "operation": "add", "seed": 34}
    where = "a store or reduction on a 16-byte boundary: faults on NVIDIA, or writes the elements inside?"
    probes += [_probe(plain, "store.inside", where),
               _probe(plain, "store.inside.strided", where, steps=[2, 2], coords=[8, 1]),
               _probe(plain, "store.inside.short_rows.swizzle3", where, box=[8, 4], swizzle=3),
               _probe(reduction, "reduce_add.inside", where)]
    for name, coords in (("past_end.dim0", [32, 2]), ("past_end.dim1", [8, 6]), ("negative.dim0", [-8, 2]),
                         ("negative.dim1", [8, -2])):
        probes.append(_faulting(_probe(plain, f"store.{name}", where, coords=coords)))
    probes += [_faulting(_probe(reduction, "reduce_add.past_end.dim0", where, coords=[32, 2])),
               _faulting(_probe(reduction, "reduce_add.negative.dim1", where, coords=[8, -2]))]
    fault = "off a 16-byte boundary: NVIDIA's kernel faults, fatkit's traps"
    for kind, case in (("load", unaligned_cases()[0]), ("store", {**plain, "coords": [5, 2]})):
        probes += [_faulting(_probe(case, f"unaligned.{kind}.{who}", fault, kinds=[who]))
                   for who in ("orig", "fatkit")]
    return probes


def source(case: dict) -> np.ndarray:
    """The shared box a store case writes from: random bytes of its own seed."""
    return np.random.default_rng(case["seed"] + 2_000_003).integers(0, 256, SHARED_BYTES, dtype=np.uint8)


def _signed(value, bits: int) -> int:
    value = int(value)
    return value - (1 << bits) if value >> (bits - 1) else value


REDUCE = {  # operation → the reduction of the old and new elements, as unsigned integers
    None: None,
    "add": lambda old, new: (int(old) + int(new)) & 0xFFFFFFFF,
    "min": lambda old, new: min(_signed(old, 32), _signed(new, 32)) & 0xFFFFFFFF,
    "xor": lambda old, new: int(old) ^ int(new),
}


def expected(case: dict, memory: np.ndarray) -> np.ndarray:
    """What the model says the case produces: the shared box (loads; 0xA5 where the copy does not write)
    or the tensor's bytes (stores)."""
    before = np.full(SHARED_BYTES, 0xA5, np.uint8)
    if case["kind"] == "load":
        return load(memory, case["dims"], case["strides"], case["size"], case["box"], case["steps"],
                    case["coords"], case["swizzle"], case["nan"], before)
    if case["kind"] == "im2col":
        return im2col(memory, case["dims"], case["strides"], case["size"], case["channels"], case["pixels"],
                      case["steps"], case["lower"], case["upper"], case["coords"], case["offsets"], case["swizzle"],
                      case["nan"], before)
    return store(memory, case["dims"], case["strides"], case["size"], case["box"], case["steps"], case["coords"],
                 case["swizzle"], source(case), REDUCE[case["operation"]])


def expected_elected(case: dict, memory: np.ndarray, warps: int) -> np.ndarray:
    """`expected` for the elected kernels with `warps` issuing warps: a load's box also HALF bytes in for
    the second warp (the box must fit HALF), a store or reduction applied once per warp."""
    want = expected(case, memory)
    if case["kind"] == "store":
        for _ in range(warps - 1):
            want = expected(case, want)
        return want
    assert (want[HALF:] == 0xA5).all(), "the box does not fit half the buffer"
    if warps == 2:
        want[HALF:] = want[:HALF]
    return want


def coverage_cases() -> list[dict]:
    """Named cases of what the H200 has not run yet, one thing each on the measured form: the NaN fill under
    each swizzle with a box partly before the tensor, traversal strides, a box wholly outside."""
    cases = []
    for swizzle in range(4):
        inner = (SWIZZLE_SPAN[swizzle] or 128) // 2
        cases.append({**anchor_case(swizzle, [-8, -3]), "name": f"fill.nan.swizzle{swizzle}", "data_type": 6,
                      "nan": True, "bytes": inner * 8 * 2})
    for steps in ([2, 1], [1, 3], [4, 2]):
        case = {**anchor_case(0, [0, 60]), "name": f"stride.{steps[0]}x{steps[1]}", "steps": steps}
        case["bytes"] = int(np.prod(box_extents(case["box"], steps))) * 2
        cases.append(case)
    cases.append({**anchor_case(3, [-200, 20]), "name": "outside.nan", "data_type": 6, "nan": True})
    return cases


def elected_cases() -> list[dict]:
    """Cases for the elected kernels (their `elected` key: the warps that issue), loads whose box fits
    HALF bytes and whose first coordinate is on a 16-byte boundary, im2col loads, stores and reductions."""
    loads = [anchor_case(swizzle, coords) for swizzle in range(4) for coords in ([0, 0], [-16, -3])]
    loads += [load_case(seed) for seed in range(12)] + coverage_cases()
    chosen = [case for case in loads if case["bytes"] <= HALF and case["coords"][0] * case["size"] % 16 == 0]
    chosen += [im2col_case(seed) for seed in range(4)] + [store_case(seed) for seed in range(8)]
    return [{**case, "name": f"elected{1 + i % 2}." + case["name"], "elected": 1 + i % 2}
            for i, case in enumerate(chosen)]


def kernel_name(case: dict) -> str:
    return {"load": f"load{case['rank']}d", "im2col": f"im2col{case['rank']}d"}.get(case["kind"]) or case["kernel"]


def arguments(case: dict, image: bytes, out: int, patience: int, source_address: int = 0) -> list:
    """The kernel's arguments in order: the map's bytes, out's address, coordinates, expect-tx bytes, patience,
    then the im2col offsets or a store's source address."""
    coords = [c & 0xFFFFFFFF for c in case["coords"]] + [0] * (5 - len(case["coords"]))
    args = [image, out, *coords, case.get("bytes", 0), patience]
    if case["kind"] == "im2col":
        args += [o & 0xFFFF for o in case["offsets"]] + [0] * (3 - len(case["offsets"]))
    elif case["kind"] == "store":
        args.append(source_address)
    return args


def out_bytes(threads: int) -> int:
    return SHARED_BYTES + 4 * threads


# A map built on the device: 128 zero bytes, every field replaced (the Triton/CUTLASS sequence), copied to
# global memory with cp_fenceproxy, acquired, then (flags bit 1) used by a tile load, whose box is copied out
# with a bulk copy after the wait (at most `patience` tries). Flags bit 0: dimension 0's element stride is
# replaced too (1: the H200 faulted on the load without it, a zero map holding something else there).
# (NVIDIA's tensormap.replace needs PTX 8.3 and sm_90a; .swizzle_atomicity, PTX 8.6 and sm_100a, is left 0.)
# REPLACE_MAP: the map it builds, as the encoder's arguments, and where the load reads.
REPLACE_MAP = {"data_type": 6, "dims": [40, 7], "strides": [96], "box": [32, 4], "steps": [1, 2], "swizzle": 2,
               "nan": True, "coords": [32, 5], "size": 2, "tensor_bytes": 96 * 7}
REPLACE = ".version 8.3\n.target sm_90a\n.address_size 64\n" + """
.visible .entry build(.param .u64 out, .param .u64 address, .param .u64 source, .param .u64 data,
    .param .u32 flags, .param .u32 patience)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<12>;
    .shared .align 128 .b8 map[128];
    .shared .align 1024 .b8 box[1024];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [address];
    ld.param.u64 %rd3, [source];
    ld.param.u64 %rd4, [data];
    ld.param.u32 %r8, [flags];
    ld.param.u32 %r9, [patience];
    mov.u32 %r1, map;
    mov.u64 %rd5, 0;
    st.shared.v2.u64 [map], {%rd5, %rd5};
    st.shared.v2.u64 [map+16], {%rd5, %rd5};
    st.shared.v2.u64 [map+32], {%rd5, %rd5};
    st.shared.v2.u64 [map+48], {%rd5, %rd5};
    st.shared.v2.u64 [map+64], {%rd5, %rd5};
    st.shared.v2.u64 [map+80], {%rd5, %rd5};
    st.shared.v2.u64 [map+96], {%rd5, %rd5};
    st.shared.v2.u64 [map+112], {%rd5, %rd5};
    tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%r1], %rd4;
    tensormap.replace.tile.rank.shared::cta.b1024.b32 [%r1], 1;
    tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%r1], 0, 32;
    tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%r1], 1, 4;
    tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%r1], 0, 40;
    tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%r1], 1, 7;
    tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%r1], 1, 96;
    and.b32 %r10, %r8, 1;
    setp.eq.u32 %p2, %r10, 0;
    @%p2 bra STRIDE1;
    tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%r1], 0, 1;
STRIDE1:
    tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%r1], 1, 2;
    tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%r1], 6;
    tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%r1], 2;
    tensormap.replace.tile.fill_mode.shared::cta.b1024.b32 [%r1], 1;
    tensormap.replace.tile.interleave_layout.shared::cta.b1024.b32 [%r1], 0;
    tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%rd2], [%r1], 128;
    and.b32 %r10, %r8, 2;
    setp.eq.u32 %p2, %r10, 0;
    @%p2 bra DONE;
    fence.proxy.tensormap::generic.acquire.gpu [%rd2], 128;
    mov.u32 %r2, box;
    mov.u32 %r3, bar;
    mbarrier.init.shared::cta.b64 [%r3], 1;
    mov.u32 %r4, 32;
    mov.u32 %r5, 5;
    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r2], [%rd2, {%r4, %r5}], [%r3];
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 128;
    mov.u32 %r6, 0;
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r3], 0;
    @%p1 bra WAITED;
    add.u32 %r6, %r6, 1;
    setp.lt.u32 %p3, %r6, %r9;
    @%p3 bra WAIT;
WAITED:
    cp.async.bulk.global.shared::cta.bulk_group [%rd1], [box], 1024;
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group 0;
DONE:
    ret;
}
"""
