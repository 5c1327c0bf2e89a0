"""What a CUDA-on-AMD runtime shim shares with fatkit's translated kernels beyond the code object: the
tensor map (`CUtensorMap`) layout that `cp.async.bulk.tensor` and `tensormap.replace` read and write, and a
reference encoder a shim can call or port (`encode_tensor_map`, `encode_im2col`, `encode_im2col_wide`,
`replace_address`), which accepts exactly what it documents and raises `TensorMapError` (the driver's
CUDA_ERROR_INVALID_VALUE) for the rest. docs/runtime.md is the ABI; `decode` reads a map back.

The map is fatkit's own: NVIDIA's encoding is undocumented, and the driver calls that make one
(`cuTensorMapEncodeTiled`, `…Im2col`, `…Im2colWide`, `cuTensorMapReplaceAddress`) are the shim's to
implement. 128 bytes, little-endian, every field at a fixed offset (`FIELDS`); a map of 128 zero bytes is
a valid starting point for device-side construction (rank 1, element strides 1, no interleave, swizzle or
promotion, zero fill, tiled), which is what Triton and CUTLASS start from before `tensormap.replace`. The
encoders leave every field past the rank, and every field the mode does not use, zero, so a map built on
the device field by field has the encoder's bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fatkit.errors import FatkitError

TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGNMENT = 64
MAX_RANK = 5

# field → (byte offset, struct format of one element, count)
FIELDS: dict[str, tuple[int, str, int]] = {
    "global_address": (0, "Q", 1),
    "global_dim": (8, "Q", 5),            # elements per dimension, dimension 0 innermost
    "global_stride": (48, "Q", 4),        # bytes between consecutive indices of dimensions 1…4
    "box_dim": (80, "H", 5),              # tiled: the box; im2col: unused (0; channels/pixels below)
    "element_stride_minus_one": (90, "B", 5),  # traversal strides; dimension 0's kept, not applied (H200)
    "rank_minus_one": (95, "B", 1),
    "element_type": (96, "B", 1),         # PTX's tensormap.replace .elemtype codes (ELEMENT_TYPES)
    "interleave": (97, "B", 1),           # 0 none, 1 16 B, 2 32 B
    "swizzle_mode": (98, "B", 1),         # 0 none, 1 32 B, 2 64 B, 3 128 B, 4 96 B
    "swizzle_atomicity": (99, "B", 1),    # 0 16 B, 1 32 B, 2 32 B with an 8-byte flip, 3 64 B
    "fill_mode": (100, "B", 1),           # 0 zero, 1 NaN
    "l2_promotion": (101, "B", 1),        # 0 none, 1 64 B, 2 128 B, 3 256 B (a hint)
    "mode": (102, "B", 1),                # MODES
    "lower_corner": (104, "h", 3),        # im2col: pixel box lower corner of dimensions 1…3 (W, H, D)
    "upper_corner": (110, "h", 3),        # im2col: pixel box upper corner
    "channels_per_pixel": (116, "H", 1),
    "pixels_per_column": (118, "H", 1),
}
MODES = {"tiled": 0, "im2col": 1, "im2col_wide": 2, "im2col_wide_128": 3}

# CUtensorMapDataType → (PTX element-type code, bytes per element, floating point)
DATA_TYPES: dict[int, tuple[int, int, bool]] = {
    0: (0, 1, False),    # UINT8
    1: (1, 2, False),    # UINT16
    2: (2, 4, False),    # UINT32
    3: (3, 4, False),    # INT32
    4: (4, 8, False),    # UINT64
    5: (5, 8, False),    # INT64
    6: (6, 2, True),     # FLOAT16
    7: (7, 4, True),     # FLOAT32
    8: (9, 8, True),     # FLOAT64
    9: (10, 2, True),    # BFLOAT16
    10: (8, 4, True),    # FLOAT32_FTZ
    11: (11, 4, True),   # TFLOAT32
    12: (12, 4, True),   # TFLOAT32_FTZ
}
# PTX element-type code → (name, bytes per element, floating point); 13–15 are sm_100's packed sub-byte
# types (16 x 4-bit, 16 x 6-bit), which fatkit's copies do not implement.
ELEMENT_TYPES: dict[int, tuple[str, int, bool]] = {
    0: ("u8", 1, False), 1: ("u16", 2, False), 2: ("u32", 4, False), 3: ("s32", 4, False),
    4: ("u64", 8, False), 5: ("s64", 8, False), 6: ("f16", 2, True), 7: ("f32", 4, True),
    8: ("f32.ftz", 4, True), 9: ("f64", 8, True), 10: ("bf16", 2, True), 11: ("tf32", 4, True),
    12: ("tf32.ftz", 4, True),
}
# CUtensorMapSwizzle → (swizzle mode, swizzle atomicity); 4–6 are sm_100's 128-byte swizzles of 32/64 B atoms.
SWIZZLES: dict[int, tuple[int, int]] = {0: (0, 0), 1: (1, 0), 2: (2, 0), 3: (3, 0), 4: (3, 1), 5: (3, 2),
                                        6: (3, 3)}
SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128}  # swizzle mode → span
ATOM_BYTES = {0: 16, 1: 32, 3: 64}            # swizzle atomicity → the unit swizzling moves
INTERLEAVE_BYTES = {0: 0, 1: 16, 2: 32}
_STRIDE_LIMIT = 1 << 40
_DIM_LIMIT = 1 << 32
# im2col pixel-box corners: the signed range per rank (3D: 16 bits, 4D: 8 bits, 5D: 5 bits)
_CORNER_BITS = {3: 16, 4: 8, 5: 5}


class TensorMapError(FatkitError):
    """An encode request the CUDA driver rejects (CUDA_ERROR_INVALID_VALUE): the message names the field."""


@dataclass
class TensorMap:
    """The fields of a map, as `decode` reads them (element strides and rank as themselves, not minus one)."""

    global_address: int = 0
    global_dim: list[int] = field(default_factory=lambda: [0] * 5)
    global_stride: list[int] = field(default_factory=lambda: [0] * 4)
    box_dim: list[int] = field(default_factory=lambda: [0] * 5)
    element_stride: list[int] = field(default_factory=lambda: [1] * 5)
    rank: int = 1
    element_type: int = 0
    interleave: int = 0
    swizzle_mode: int = 0
    swizzle_atomicity: int = 0
    fill_mode: int = 0
    l2_promotion: int = 0
    mode: int = 0
    lower_corner: list[int] = field(default_factory=lambda: [0] * 3)
    upper_corner: list[int] = field(default_factory=lambda: [0] * 3)
    channels_per_pixel: int = 0
    pixels_per_column: int = 0

    @property
    def element_bytes(self) -> int:
        return ELEMENT_TYPES[self.element_type][1]

    def to_bytes(self) -> bytes:
        values = {name: getattr(self, name) for name in FIELDS if hasattr(self, name)}
        values["element_stride_minus_one"] = [s - 1 for s in self.element_stride]
        values["rank_minus_one"] = self.rank - 1
        image = bytearray(TENSOR_MAP_BYTES)
        for name, (offset, code, count) in FIELDS.items():
            value = values[name]
            struct.pack_into(f"<{count}{code}", image, offset, *(value if count > 1 else [value]))
        return bytes(image)


def decode(image: bytes) -> TensorMap:
    """The fields of a 128-byte map."""
    if len(image) != TENSOR_MAP_BYTES:
        raise TensorMapError(f"a tensor map is {TENSOR_MAP_BYTES} bytes, not {len(image)}")
    values: dict[str, Any] = {}
    for name, (offset, code, count) in FIELDS.items():
        unpacked = list(struct.unpack_from(f"<{count}{code}", image, offset))
        values[name] = unpacked if count > 1 else unpacked[0]
    values["element_stride"] = [s + 1 for s in values.pop("element_stride_minus_one")]
    values["rank"] = values.pop("rank_minus_one") + 1
    return TensorMap(**values)


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise TensorMapError(message)


def _common(data_type: int, rank: int, global_address: int, global_dim: Sequence[int],
            global_strides: Sequence[int], element_strides: Sequence[int] | None, interleave: int, swizzle: int,
            l2_promotion: int, oob_fill: int, ranks: range) -> TensorMap:
    """The checks every encode function shares (the driver's list), and the map with those fields set."""
    _check(data_type in DATA_TYPES, f"tensorDataType {data_type} is not a CUtensorMapDataType fatkit supports "
           "(0-12; the packed 4/6-bit types are not implemented)")
    code, _, floating = DATA_TYPES[data_type]
    _check(rank in ranks, f"tensorRank {rank} must be {ranks.start}-{ranks.stop - 1}")
    _check(interleave in INTERLEAVE_BYTES, f"interleave {interleave} is not a CUtensorMapInterleave")
    _check(swizzle in SWIZZLES, f"swizzle {swizzle} is not a CUtensorMapSwizzle")
    _check(l2_promotion in range(4), f"l2Promotion {l2_promotion} is not a CUtensorMapL2promotion")
    _check(oob_fill in (0, 1), f"oobFill {oob_fill} is not a CUtensorMapFloatOOBfill")
    _check(not oob_fill or floating, "oobFill NAN_REQUEST_ZERO_FMA needs a floating-point tensorDataType")
    _check(interleave == 0 or rank >= 3, "an interleaved layout needs tensorRank >= 3")
    address_alignment = 32 if interleave == 2 else 16
    _check(global_address % address_alignment == 0 and global_address != 0,
           f"globalAddress 0x{global_address:x} must be non-null and {address_alignment}-byte aligned")
    _check(len(global_dim) == rank, f"globalDim needs {rank} entries")
    for i, dim in enumerate(global_dim):
        _check(0 < dim <= _DIM_LIMIT, f"globalDim[{i}] = {dim} must be 1 to 2^32")
    _check(len(global_strides) == rank - 1, f"globalStrides needs {rank - 1} entries (dimensions 1 and up)")
    stride_alignment = 32 if interleave == 2 else 16
    for i, stride in enumerate(global_strides):
        _check(stride % stride_alignment == 0 and 0 < stride < _STRIDE_LIMIT,
               f"globalStrides[{i}] = {stride} must be a positive multiple of {stride_alignment} below 2^40")
    strides = list(element_strides) if element_strides is not None else [1] * rank
    _check(len(strides) == rank, f"elementStrides needs {rank} entries")
    for i, stride in enumerate(strides):
        _check(1 <= stride <= 8, f"elementStrides[{i}] = {stride} must be 1 to 8")
    mode, atomicity = SWIZZLES[swizzle]
    _check(atomicity == 0, f"swizzle {swizzle}: the 128-byte swizzles of 32/64-byte atoms (sm_100) are not "
           "implemented by fatkit's copies")
    if interleave == 2:
        _check(mode == 1, "a 32-byte interleave needs the 32-byte swizzle")
    return TensorMap(global_address=global_address, global_dim=list(global_dim) + [0] * (5 - rank),
                     global_stride=list(global_strides) + [0] * (5 - rank),
                     element_stride=strides + [1] * (5 - rank), rank=rank, element_type=code,
                     interleave=interleave, swizzle_mode=mode, swizzle_atomicity=atomicity, fill_mode=oob_fill,
                     l2_promotion=l2_promotion)


def _inner_bytes(tensor: TensorMap, inner: int, what: str) -> None:
    """The inner extent's byte rules without interleave: a multiple of 16, within the swizzle span."""
    size = inner * tensor.element_bytes
    span = SWIZZLE_BYTES[tensor.swizzle_mode]
    if tensor.interleave == 0:
        _check(size % 16 == 0, f"{what} x element size = {size} bytes must be a multiple of 16")
        _check(span == 0 or size <= span, f"{what} x element size = {size} bytes exceeds the {span}-byte swizzle")


def encode_tensor_map(data_type: int, global_address: int, global_dim: Sequence[int],
                      global_strides: Sequence[int], box_dim: Sequence[int],
                      element_strides: Sequence[int] | None = None, *, interleave: int = 0, swizzle: int = 0,
                      l2_promotion: int = 0, oob_fill: int = 0) -> bytes:
    """`cuTensorMapEncodeTiled` (rank = len(global_dim)); arguments are the driver's, enums as their integer
    values. Returns the 128-byte map."""
    rank = len(global_dim)
    tensor = _common(data_type, rank, global_address, global_dim, global_strides, element_strides, interleave,
                     swizzle, l2_promotion, oob_fill, range(1, MAX_RANK + 1))
    _check(len(box_dim) == rank, f"boxDim needs {rank} entries")
    for i, box in enumerate(box_dim):
        _check(1 <= box <= 256, f"boxDim[{i}] = {box} must be 1 to 256")
    _inner_bytes(tensor, box_dim[0], "boxDim[0]")
    tensor.box_dim = list(box_dim) + [0] * (5 - rank)
    return tensor.to_bytes()


def _im2col_common(tensor: TensorMap, rank: int, channels_per_pixel: int, pixels_per_column: int) -> None:
    _check(1 <= channels_per_pixel <= 256, f"channelsPerPixel = {channels_per_pixel} must be 1 to 256")
    _check(1 <= pixels_per_column <= 1024, f"pixelsPerColumn = {pixels_per_column} must be 1 to 1024")
    _inner_bytes(tensor, channels_per_pixel, "channelsPerPixel")
    tensor.channels_per_pixel, tensor.pixels_per_column = channels_per_pixel, pixels_per_column


def encode_im2col(data_type: int, global_address: int, global_dim: Sequence[int], global_strides: Sequence[int],
                  lower_corner: Sequence[int], upper_corner: Sequence[int], channels_per_pixel: int,
                  pixels_per_column: int, element_strides: Sequence[int] | None = None, *, interleave: int = 0,
                  swizzle: int = 0, l2_promotion: int = 0, oob_fill: int = 0) -> bytes:
    """`cuTensorMapEncodeIm2col`: rank 3–5 (channels, then W, H, D spatial, then N); the pixel box corners
    have rank − 2 entries (W first) in the rank's signed range."""
    rank = len(global_dim)
    tensor = _common(data_type, rank, global_address, global_dim, global_strides, element_strides, interleave,
                     swizzle, l2_promotion, oob_fill, range(3, MAX_RANK + 1))
    bits = _CORNER_BITS[rank]
    for name, corner in (("pixelBoxLowerCorner", lower_corner), ("pixelBoxUpperCorner", upper_corner)):
        _check(len(corner) == rank - 2, f"{name} needs {rank - 2} entries")
        for i, value in enumerate(corner):
            _check(-(1 << (bits - 1)) <= value < 1 << (bits - 1),
                   f"{name}[{i}] = {value} is outside the {bits}-bit signed range of rank {rank}")
    _im2col_common(tensor, rank, channels_per_pixel, pixels_per_column)
    tensor.mode = MODES["im2col"]
    tensor.lower_corner = list(lower_corner) + [0] * (5 - rank)
    tensor.upper_corner = list(upper_corner) + [0] * (5 - rank)
    return tensor.to_bytes()


def encode_im2col_wide(data_type: int, global_address: int, global_dim: Sequence[int],
                       global_strides: Sequence[int], lower_corner_width: int, upper_corner_width: int,
                       channels_per_pixel: int, pixels_per_column: int,
                       element_strides: Sequence[int] | None = None, *, interleave: int = 0, wide_mode: int = 0,
                       swizzle: int = 0, l2_promotion: int = 0, oob_fill: int = 0) -> bytes:
    """`cuTensorMapEncodeIm2colWide`: as im2col, with one W corner pair and mode W (0) or W128 (1)."""
    rank = len(global_dim)
    tensor = _common(data_type, rank, global_address, global_dim, global_strides, element_strides, interleave,
                     swizzle, l2_promotion, oob_fill, range(3, MAX_RANK + 1))
    _check(wide_mode in (0, 1), f"mode {wide_mode} is not a CUtensorMapIm2ColWideMode")
    for name, value in (("pixelBoxLowerCornerWidth", lower_corner_width),
                        ("pixelBoxUpperCornerWidth", upper_corner_width)):
        _check(-(1 << 15) <= value < 1 << 15, f"{name} = {value} is outside the 16-bit signed range")
    _im2col_common(tensor, rank, channels_per_pixel, pixels_per_column)
    tensor.mode = MODES["im2col_wide_128" if wide_mode else "im2col_wide"]
    tensor.lower_corner = [lower_corner_width, 0, 0]
    tensor.upper_corner = [upper_corner_width, 0, 0]
    return tensor.to_bytes()


def replace_address(image: bytes, global_address: int) -> bytes:
    """`cuTensorMapReplaceAddress`: the same map over another global address (aligned as the encode asks)."""
    tensor = decode(image)
    alignment = 32 if tensor.interleave == 2 else 16
    _check(global_address % alignment == 0 and global_address != 0,
           f"globalAddress 0x{global_address:x} must be non-null and {alignment}-byte aligned")
    tensor.global_address = global_address
    return tensor.to_bytes()


# ------------------------------------------------------------------------------------------- cluster launches

# The kernel metadata entries (amdhsa.kernels) of a kernel that runs a cluster of CTAs as one workgroup:
# its static shape, or where the launch-given shape goes in the kernarg segment and the most CTAs it may hold.
CLUSTER_DIMS_KEY = ".fatkit.cluster_dims"
CLUSTER_SHAPE_OFFSET_KEY = ".fatkit.cluster_shape_offset"
CLUSTER_MAX_CTAS_KEY = ".fatkit.cluster_max_ctas"
MAX_WORKGROUP_THREADS = 1024


class ClusterLaunchError(FatkitError):
    """A cluster launch the shim refuses (the driver's cudaErrorClusterOutOfResources / invalid value)."""


@dataclass(frozen=True)
class ClusterLaunch:
    """What the shim launches for a CUDA launch of a kernel: workgroups, their work-items, the dynamic LDS
    bytes, and `kernarg_tail` (bytes to write at `kernarg_offset`, after CUDA's parameter buffer; empty for a
    kernel without a launch-given cluster shape)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared_bytes: int
    kernarg_offset: int | None = None
    kernarg_tail: bytes = b""


def plan_cluster_launch(kernel: dict[str, Any], grid: Sequence[int], block: Sequence[int],
                        cluster: Sequence[int] | None = None, dynamic_shared_bytes: int = 0,
                        lds_bytes: int = 64 * 1024) -> ClusterLaunch:
    """The launch of `grid` CTAs of `block` threads in clusters of `cluster` CTAs (None: a launch without a
    cluster dimension attribute), D = `dynamic_shared_bytes` a CTA, of the kernel whose metadata entry is
    `kernel` (docs/runtime.md, the shim's duties): k CTAs a workgroup of (bx, by, bz·k) work-items, a grid
    divided by the cluster shape, k·D bytes of dynamic LDS and, for a launch-given shape, (cx, cy, cz,
    explicit) as four u32 at the kernel's offset. Raises ClusterLaunchError where the driver refuses."""
    grid3, block3 = _three(grid), _three(block)
    given = None if cluster is None else _three(cluster)
    offset = kernel.get(CLUSTER_SHAPE_OFFSET_KEY)
    if CLUSTER_DIMS_KEY in kernel:
        shape = _three(kernel[CLUSTER_DIMS_KEY])
        if given is not None and given != shape:
            raise ClusterLaunchError(f"the kernel's cluster shape is {shape}; the launch asks for {given}")
        most = _product(shape)
    elif offset is not None:
        shape = given or (1, 1, 1)
        most = kernel[CLUSTER_MAX_CTAS_KEY]
    else:  # no cluster form reads the cluster: each CTA its own workgroup, whatever the launch's clusters
        return ClusterLaunch(grid3, block3, dynamic_shared_bytes)
    k = _product(shape)
    if any(g % c for g, c in zip(grid3, shape)):
        raise ClusterLaunchError(f"the grid {grid3} is not a whole number of {shape} clusters")
    if k > most:
        raise ClusterLaunchError(f"clusters of {k} CTAs: the kernel's code object holds shared memory for {most}")
    threads = k * _product(block3)
    if threads > MAX_WORKGROUP_THREADS:
        raise ClusterLaunchError(f"a cluster of {k} CTAs of {_product(block3)} threads is {threads} > "
                                 f"{MAX_WORKGROUP_THREADS} threads: it cannot run as one workgroup")
    lds = kernel.get(".group_segment_fixed_size", 0) + k * dynamic_shared_bytes
    if lds > lds_bytes:
        raise ClusterLaunchError(f"a cluster of {k} CTAs needs {lds} > {lds_bytes} bytes of LDS")
    tail = b"" if offset is None else struct.pack("<4I", *shape, int(given is not None))
    return ClusterLaunch((grid3[0] // shape[0], grid3[1] // shape[1], grid3[2] // shape[2]),
                         (block3[0], block3[1], block3[2] * k), k * dynamic_shared_bytes, offset, tail)


def _three(values: Sequence[int]) -> tuple[int, int, int]:
    """x, y, z of a dim3 given with 1 to 3 components."""
    padded = [*values, 1, 1]
    return (int(padded[0]), int(padded[1]), int(padded[2]))


def _product(values: Sequence[int]) -> int:
    result = 1
    for value in values:
        result *= value
    return result
