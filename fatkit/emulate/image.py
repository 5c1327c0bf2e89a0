"""gfx11 image instructions (MIMG) and formatted buffer loads (MUBUF `buffer_load_format_*`), modelled from their
descriptors: what translated textures and surfaces execute (fatkit/translate/lower/texture.py).

tinygrad's tables give these instructions no pseudocode and its decoder does not take MUBUF, so they are
decoded here from the RDNA3 encoding and run by a model of the texture unit written from the descriptor
layouts (docs/emulate.md, "Images"). The model covers what the translator emits on linear (swizzle mode 0),
single-level images: loads, stores, 32- and 64-bit integer atomics and size queries of 1D/2D/3D/array
images; level-0 sampling and gathers of 1D/2D/2D-array images and cube maps (within a face) with point or
bilinear filtering, wrap/mirror/clamp/border addressing and normalised or unnormalised coordinates. Anything
else (tiled images, mip chains, filtering across a cube face's edge, 3D sampling, anisotropy, 16-bit data)
is a FatkitError naming the instruction.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable

import numpy as np

from fatkit.emulate.executor import VMEM, Preparer, Step
from fatkit.errors import FatkitError

MIMG_ENCODING, MUBUF_ENCODING = 0b111100, 0b111000
_LOAD, _STORE, _RESINFO, _SAMPLE_D, _SAMPLE_L, _SAMPLE_LZ, _GATHER4_LZ, _SAMPLE_D_G16 = 0, 6, 23, 28, 29, 31, 50, 57
_SAMPLE_LZ_O, _GATHER4_LZ_O = 41, 54  # with a texel offset: one address register (packed x, y, z) first
_OFFSET_FORMS = {_SAMPLE_LZ_O: _SAMPLE_LZ, _GATHER4_LZ_O: _GATHER4_LZ}
def _signed(value: int, bits: int) -> int:
    return value - (value >> (bits - 1) << bits)


# image atomics, 32-bit (dmask 0x1) or 64-bit (dmask 0x3): opcode → (name, the new value from the old value,
# the data and the width, all unsigned)
_ATOMICS: dict[int, tuple[str, Callable[[int, int, int], int]]] = {
    12: ("IMAGE_ATOMIC_ADD", lambda old, data, bits: (old + data) & ((1 << bits) - 1)),
    14: ("IMAGE_ATOMIC_SMIN", lambda old, data, bits: min(_signed(old, bits), _signed(data, bits)) & ((1 << bits) - 1)),
    15: ("IMAGE_ATOMIC_UMIN", lambda old, data, bits: min(old, data)),
    16: ("IMAGE_ATOMIC_SMAX", lambda old, data, bits: max(_signed(old, bits), _signed(data, bits)) & ((1 << bits) - 1)),
    17: ("IMAGE_ATOMIC_UMAX", lambda old, data, bits: max(old, data)),
    18: ("IMAGE_ATOMIC_AND", lambda old, data, bits: old & data),
    19: ("IMAGE_ATOMIC_OR", lambda old, data, bits: old | data),
}
_MIMG_NAMES = {_LOAD: "IMAGE_LOAD", _STORE: "IMAGE_STORE", _RESINFO: "IMAGE_GET_RESINFO", _SAMPLE_D: "IMAGE_SAMPLE_D",
               _SAMPLE_L: "IMAGE_SAMPLE_L", _SAMPLE_LZ: "IMAGE_SAMPLE_LZ", _GATHER4_LZ: "IMAGE_GATHER4_LZ",
               _SAMPLE_D_G16: "IMAGE_SAMPLE_D_G16", _SAMPLE_LZ_O: "IMAGE_SAMPLE_LZ_O",
               _GATHER4_LZ_O: "IMAGE_GATHER4_LZ_O", **{op: name for op, (name, _) in _ATOMICS.items()}}
_FORMAT_LOADS = {0: 1, 1: 2, 2: 3, 3: 4}  # buffer_load_format_x … _xyzw: channels
# the instruction's dim field: (name, coordinates, whether the last is an array layer)
_DIMS = {0: ("1D", 1, False), 1: ("2D", 2, False), 2: ("3D", 3, False), 3: ("CUBE", 3, False),
         4: ("1D_ARRAY", 2, True), 5: ("2D_ARRAY", 3, True)}
# AMD's unified format codes (T# dword 1 bits 20-27, V# dword 3 bits 12-17) → bits per channel, channels, kind
_FORMATS = {
    1: (8, 1, "unorm"), 2: (8, 1, "snorm"), 5: (8, 1, "uint"), 6: (8, 1, "sint"),
    7: (16, 1, "unorm"), 8: (16, 1, "snorm"), 11: (16, 1, "uint"), 12: (16, 1, "sint"), 13: (16, 1, "float"),
    14: (8, 2, "unorm"), 18: (8, 2, "uint"), 19: (8, 2, "sint"),
    20: (32, 1, "uint"), 21: (32, 1, "sint"), 22: (32, 1, "float"),
    23: (16, 2, "unorm"), 27: (16, 2, "uint"), 28: (16, 2, "sint"), 29: (16, 2, "float"),
    42: (8, 4, "unorm"), 43: (8, 4, "snorm"), 46: (8, 4, "uint"), 47: (8, 4, "sint"),
    48: (32, 2, "uint"), 49: (32, 2, "sint"), 50: (32, 2, "float"),
    51: (16, 4, "unorm"), 52: (16, 4, "snorm"), 55: (16, 4, "uint"), 56: (16, 4, "sint"), 57: (16, 4, "float"),
    61: (32, 4, "uint"), 62: (32, 4, "sint"), 63: (32, 4, "float"),
}
_WRAP, _MIRROR, _CLAMP_LAST_TEXEL, _CLAMP_BORDER = 0, 1, 2, 6
_BORDERS = {0: (0.0, 0.0, 0.0, 0.0), 1: (0.0, 0.0, 0.0, 1.0), 2: (1.0, 1.0, 1.0, 1.0)}  # S# dword 3 bits 30-31


def _memory(preparer: Preparer):
    """The global memory of the launch the preparer serves."""
    assert preparer.launch is not None, "an image instruction ran outside a launch"
    return preparer.launch.memory


def _bits(value: int, low: int, count: int) -> int:
    return (value >> low) & ((1 << count) - 1)


def _f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


def _f32_bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


class _Image:
    """A T# read: where the texels are, their format, the sizes and the channel selects."""

    def __init__(self, words: list[int], where: Callable[[], str]):
        self.base = (words[0] | (words[1] & 0xFF) << 32) << 8
        code = _bits(words[1], 20, 8)
        if code not in _FORMATS:
            raise FatkitError(f"{where()}: image format code {code} is not modelled")
        self.bits, self.channels, self.kind = _FORMATS[code]
        self.bytes = self.bits * self.channels // 8
        self.width = (_bits(words[1], 30, 2) | _bits(words[2], 0, 12) << 2) + 1
        self.height = _bits(words[2], 14, 14) + 1
        self.selects = [_bits(words[3], 3 * i, 3) for i in range(4)]
        base_level, last_level = _bits(words[3], 12, 4), _bits(words[3], 16, 4)
        self.levels = last_level - base_level + 1
        if _bits(words[3], 20, 5) != 0:
            raise FatkitError(f"{where()}: a tiled image (swizzle mode {_bits(words[3], 20, 5)}) is not modelled; "
                              "only linear ones are")
        self.type = _bits(words[3], 28, 4)  # 8 1D, 9 2D, 10 3D, 11 cube, 12 1D array, 13 2D array
        word4 = _bits(words[4], 0, 13)
        # dword 4: depth - 1 (3D), the last layer (arrays; a cube map's last face, 6 a cube) or the row
        # pitch - 1 (the others); an array's, a cube map's or a 3D image's rows are taken `width` texels apart
        # (the pitch has no field of its own there)
        layered = self.type in (10, 11, 12, 13)
        self.depth = word4 + 1 if layered else 1
        self.pitch = self.width if layered else _bits(words[4], 0, 14) + 1
        if self.type == 12:  # a 1D array's layers are its rows
            self.height = 1

    def size(self, dim: str) -> tuple[int, int, int]:
        return self.width, 1 if dim in ("1D", "1D_ARRAY") else self.height, self.depth

    def address(self, x: int, y: int, z: int) -> int:
        return self.base + ((z * self.height + y) * self.pitch + x) * self.bytes


def _channel_values(raw: bytes, bits: int, channels: int, kind: str) -> list[float | int]:
    value = int.from_bytes(raw, "little")
    out: list[float | int] = []
    for index in range(channels):
        field = _bits(value, index * bits, bits)
        if kind == "uint":
            out.append(field)
        elif kind == "sint":
            out.append(field - (1 << bits) if field >> (bits - 1) else field)
        elif kind == "unorm":
            out.append(field / ((1 << bits) - 1))
        elif kind == "snorm":
            signed = field - (1 << bits) if field >> (bits - 1) else field
            out.append(max(signed / ((1 << (bits - 1)) - 1), -1.0))
        elif bits == 32:
            out.append(_f32(field))
        else:
            out.append(struct.unpack("<e", field.to_bytes(2, "little"))[0])
    return out


def _selected(values: list[float | int], selects: list[int], integer: bool) -> list[float | int]:
    """The four results after the descriptor's channel selects (0, 1 or a channel; a channel the format lacks
    reads 0, its alpha 1)."""
    one = 1 if integer else 1.0
    padded = values + [0 if integer else 0.0] * (3 - len(values)) + [one] if len(values) < 4 else values
    return [0 if integer and s == 0 else 0.0 if s == 0 else one if s == 1 else padded[s - 4] if s >= 4 else 0
            for s in selects]


def _register(value: float | int, integer: bool) -> int:
    return int(value) & 0xFFFFFFFF if integer else _f32_bits(float(value))


def _encode(value: int, bits: int, kind: str) -> int:
    """A 32-bit data register as one channel of the format (stores)."""
    if kind in ("uint", "sint"):
        return value & ((1 << bits) - 1)
    number = _f32(value)
    if kind == "float":
        return value if bits == 32 else int.from_bytes(struct.pack("<e", number), "little")
    scale = (1 << bits) - 1 if kind == "unorm" else (1 << (bits - 1)) - 1
    low = 0.0 if kind == "unorm" else -1.0
    clamped = min(max(number, low), 1.0) if not math.isnan(number) else 0.0
    return int(round(clamped * scale)) & ((1 << bits) - 1)


def _texel_index(i: int, n: int, mode: int) -> int | None:
    """Texel `i` of `n` under an addressing mode; None: the border."""
    if mode == _WRAP:
        return i % n
    if mode == _MIRROR:
        m = i % (2 * n)
        return m if m < n else 2 * n - 1 - m
    if mode == _CLAMP_LAST_TEXEL:
        return min(max(i, 0), n - 1)
    return i if 0 <= i < n else None


class _ImageStep:
    """One MIMG instruction, decoded."""

    def __init__(self, preparer: Preparer, raw: bytes, pc: int):
        w0, w1 = int.from_bytes(raw[0:4], "little"), int.from_bytes(raw[4:8], "little")
        self.preparer, self.pc = preparer, pc
        self.op = _bits(w0, 18, 8)
        self.name = _MIMG_NAMES.get(self.op, f"MIMG opcode {self.op}")
        if self.op not in _MIMG_NAMES:
            raise FatkitError(f"{self.name.lower()} at pc 0x{pc:x} is not modelled")
        if self.op == _SAMPLE_D:
            raise FatkitError(f"{self.where()}: 32-bit gradients are not modelled")
        self.nsa, dim = _bits(w0, 0, 1), _bits(w0, 2, 3)
        self.returns = _bits(w0, 14, 1)  # glc: an atomic returns the value before it
        self.unnormalized, self.dmask = _bits(w0, 7, 1), _bits(w0, 8, 4)
        self.a16, d16 = _bits(w0, 16, 1), _bits(w0, 17, 1)
        self.vaddr, self.vdata = _bits(w1, 0, 8), _bits(w1, 8, 8)
        self.srsrc, self.ssamp = _bits(w1, 16, 5) * 4, _bits(w1, 26, 5) * 4
        if _bits(w1, 21, 2) or d16:
            raise FatkitError(f"{self.where()}: tfe/lwe/d16 are not modelled")
        if dim not in _DIMS:
            raise FatkitError(f"{self.where()}: dimension {dim} (multisample) is not modelled")
        self.dim, self.coordinates, self.arrayed = _DIMS[dim]
        count = {_RESINFO: 1, _SAMPLE_L: self.coordinates + 1}.get(self.op, self.coordinates)
        self.offset = self.op in _OFFSET_FORMS
        if self.offset:
            self.op, count = _OFFSET_FORMS[self.op], count + 1
        if self.op == _SAMPLE_D_G16:  # 16-bit gradients (h, then v), two a register, before the coordinates
            count = {1: 2, 2: 2, 3: 4}[self.coordinates - self.arrayed] + self.coordinates
        integer_addresses = self.op in (_LOAD, _STORE, *_ATOMICS)
        if self.a16 and self.op != _RESINFO:
            if not integer_addresses:
                raise FatkitError(f"{self.where()}: 16-bit sampling coordinates are not modelled")
            self.components = count  # 16-bit texel indices, two a register (the low half first)
            count = (count + 1) // 2
        self.addresses = [self.vaddr]
        if self.nsa:
            extra = raw[8:8 + 4 * ((count - 1 + 3) // 4)]
            self.addresses += list(extra[:count - 1])
        else:
            self.addresses = [self.vaddr + i for i in range(count)]
        self.size = 8 + (4 * ((count - 1 + 3) // 4) if self.nsa else 0)

    def where(self) -> str:
        return f"{self.name.lower()} at pc 0x{self.pc:x}"

    def run(self, w) -> None:
        active = np.nonzero(w.exec_bool)[0]
        words = [w.s[self.srsrc + i] for i in range(8)]
        image = _Image(words, self.where)
        if self.op == _RESINFO:
            self._resinfo(w, active, image)
        elif self.op == _LOAD:
            self._load(w, active, image)
        elif self.op == _STORE:
            self._store(w, active, image)
        elif self.op in _ATOMICS:
            self._atomic(w, active, image)
        else:
            self._sample(w, active, image, [w.s[self.ssamp + i] for i in range(4)])
        w.pc += self.size

    def _address_values(self, w, lane: int) -> list[int]:
        values = [int(w.v[register][lane]) for register in self.addresses]
        if not self.a16 or self.op == _RESINFO:
            return values
        halves = [value >> shift & 0xFFFF for value in values for shift in (0, 16)][:self.components]
        return [h - 0x10000 + (1 << 32) if h >> 15 else h for h in halves]  # sign-extended as 32-bit words

    def _write(self, w, lane: int, values: list[int]) -> None:
        for index, value in enumerate(values):
            w.v[self.vdata + index][lane] = value & 0xFFFFFFFF

    def _masked(self, four: list[int]) -> list[int]:
        return [four[c] for c in range(4) if self.dmask >> c & 1]

    def _resinfo(self, w, active, image: _Image) -> None:
        for lane in active:
            level = int(w.v[self.addresses[0]][lane]) & (0xFFFF if self.a16 else 0xFFFFFFFF)
            width, height, depth = image.size(self.dim)
            if level >= image.levels:
                four = [0, 0, 0, 0]
            else:
                depth = depth if self.arrayed or self.dim != "3D" else max(depth >> level, 1)
                four = [max(width >> level, 1), max(height >> level, 1), depth, image.levels]
            self._write(w, lane, self._masked(four))

    def _texel(self, w, image: _Image, x: int, y: int, z: int) -> list[float | int]:
        raw = _memory(self.preparer).read(np.array([image.address(x, y, z)], dtype=np.uint64), image.bytes,
                                               self.where)[0].tobytes()
        return _channel_values(raw, image.bits, image.channels, image.kind)

    def _indices(self, w, lane: int, image: _Image) -> tuple[int, int, int] | None:
        values = [v - (1 << 32) if v >> 31 else v for v in self._address_values(w, lane)]
        x = values[0]
        y = values[1] if self.coordinates - self.arrayed >= 2 else 0
        z = values[-1] if self.arrayed or self.dim == "3D" else 0
        width, height, depth = image.size(self.dim)
        if not (0 <= x < width and 0 <= y < height and 0 <= z < depth):
            return None  # outside: loads read 0, stores are dropped
        return x, y, z

    def _load(self, w, active, image: _Image) -> None:
        integer = image.kind in ("uint", "sint")
        for lane in active:
            at = self._indices(w, lane, image)
            if at is None:
                self._write(w, lane, [0] * bin(self.dmask).count("1"))
                continue
            four = _selected(self._texel(w, image, *at), image.selects, integer)
            self._write(w, lane, self._masked([_register(v, integer) for v in four]))

    def _store(self, w, active, image: _Image) -> None:
        channels = [c for c in range(4) if self.dmask >> c & 1]
        if channels[:image.channels] != list(range(image.channels)):  # data the format lacks is dropped
            raise FatkitError(f"{self.where()}: a store's channel mask 0x{self.dmask:x} must hold the format's "
                              f"{image.channels} channels in this model")
        for lane in active:
            at = self._indices(w, lane, image)
            if at is None:
                continue
            value = 0
            for index in range(image.channels):
                value |= _encode(int(w.v[self.vdata + index][lane]), image.bits, image.kind) << (index * image.bits)
            _memory(self.preparer).write(np.array([image.address(*at)], dtype=np.uint64), image.bytes,
                                              np.frombuffer(value.to_bytes(image.bytes, "little"),
                                                            dtype=np.uint8).reshape(1, -1), self.where)

    def _atomic(self, w, active, image: _Image) -> None:
        """One read-modify-write a lane, in lane order, of a 32-bit element (dmask 0x1) or of a 64-bit one
        (dmask 0x3: a two-channel 32-bit format, the low word first, as the data registers hold it); outside
        the image nothing happens (0 returned)."""
        words = {1: 1, 3: 2}.get(self.dmask)
        if words is None or image.bytes != 4 * words or image.bits != 32 or image.kind not in ("uint", "sint"):
            raise FatkitError(f"{self.where()}: only 32-bit integer image atomics on a 32-bit element and 64-bit "
                              "ones on a two-channel 32-bit element are modelled")
        update, size = _ATOMICS[self.op][1], 4 * words
        for lane in active:
            at = self._indices(w, lane, image)
            old = 0
            if at is not None:
                address = np.array([image.address(*at)], dtype=np.uint64)
                old = int.from_bytes(_memory(self.preparer).read(address, size, self.where)[0].tobytes(), "little")
                data = sum(int(w.v[self.vdata + k][lane]) << (32 * k) for k in range(words))
                new = update(old, data, 32 * words)
                _memory(self.preparer).write(address, size, np.frombuffer(new.to_bytes(size, "little"),
                                                                          dtype=np.uint8).reshape(1, -1), self.where)
            if self.returns:
                for k in range(words):
                    w.v[self.vdata + k][lane] = (old >> (32 * k)) & 0xFFFFFFFF

    def _sample(self, w, active, image: _Image, sampler: list[int]) -> None:
        three_d = self.dim == "3D"  # point sampling only (fatkit's lowering filters 3D textures itself)
        if image.levels != 1:
            raise FatkitError(f"{self.where()}: mip chains are not modelled")
        modes = [_bits(sampler[0], 3 * axis, 3) for axis in range(3 if three_d else 2)]
        unnormalized = self.unnormalized or _bits(sampler[0], 15, 1)
        magnify, minify = _bits(sampler[2], 20, 2), _bits(sampler[2], 22, 2)
        border = _BORDERS.get(_bits(sampler[3], 30, 2))
        if any(m not in (_WRAP, _MIRROR, _CLAMP_LAST_TEXEL, _CLAMP_BORDER) for m in modes) or border is None \
                or magnify > 1 or minify > 1 or _bits(sampler[0], 9, 3):
            raise FatkitError(f"{self.where()}: sampler state (clamp {modes}, filters {magnify}/{minify}, border "
                              "type or anisotropy) outside the model")
        integer = image.kind in ("uint", "sint")
        if three_d and (magnify or minify) and not integer:
            raise FatkitError(f"{self.where()}: filtering a 3D image is not modelled (point sampling is)")
        width, height, layers = image.size(self.dim)
        cube = self.dim == "CUBE"
        two_d = self.coordinates - self.arrayed == 2 or cube or three_d
        if cube:  # a face is addressed within its edges (the clamp fields do not apply)
            modes, unnormalized = [_CLAMP_LAST_TEXEL, _CLAMP_LAST_TEXEL], 0
        for lane in active:
            raw = self._address_values(w, lane)
            offsets = [0, 0, 0]
            if self.offset:  # 6-bit signed texel offsets at bits 0, 8 (and 16), added in texel space
                offsets = [_signed(_bits(raw[0], 8 * k, 6), 6) for k in range(3)]
                raw = raw[1:]
            floats = [_f32(v) for v in raw]
            if self.op == _SAMPLE_D_G16:  # the gradients come first; at one level they choose nothing
                floats = floats[len(floats) - self.coordinates:]
            lod = floats[self.coordinates] if self.op == _SAMPLE_L else 0.0
            filter_mode = minify if lod > 0 else magnify
            s, t = floats[0], floats[1] if two_d else 0.5
            layer: int | None = 0  # None: a 3-D slice in the border
            if cube:  # (s, t) on the face in [1, 2]; the face index layer × 8 + face (v_cubeid's 0–5)
                s, t = s - 1.0, t - 1.0
                index = int(floats[2])
                layer = index // 8 * 6 + index % 8
                if not 0 <= layer < layers or index % 8 > 5:
                    raise FatkitError(f"{self.where()}: cube face index {floats[2]} outside the image's "
                                      f"{layers} faces")
            elif self.arrayed:
                layer = min(max(int(np.rint(floats[self.coordinates - 1])), 0), layers - 1)
            elif three_d:  # the slice: point sampling's texel in z, under the z clamp mode
                r = (floats[2] if unnormalized else floats[2] * layers) + offsets[2]
                layer = _texel_index(math.floor(r), layers, modes[2])
            u, v = (s, t) if unnormalized else (s * width, t * (height if two_d else 1))
            u, v = u + offsets[0], v + (offsets[1] if two_d else 0)
            if cube and (self.op == _GATHER4_LZ or filter_mode and not integer) and not (
                    0 <= math.floor(u - 0.5) and math.floor(u - 0.5) + 1 < width
                    and 0 <= math.floor(v - 0.5) and math.floor(v - 0.5) + 1 < height):
                raise FatkitError(f"{self.where()}: a footprint across a cube face's edge (seamless filtering "
                                  "into the next face) is not modelled")

            def texel(i: int, j: int) -> list[float | int]:
                x, y = _texel_index(i, width, modes[0]), _texel_index(j, height, modes[1]) if two_d else 0
                if x is None or y is None or layer is None:
                    return list(border)
                return _selected(self._texel(w, image, x, y, layer), image.selects, integer)

            if self.op == _GATHER4_LZ:
                i0, j0 = math.floor(u - 0.5), math.floor(v - 0.5)
                component = self.dmask.bit_length() - 1
                corners = [texel(i0, j0 + 1), texel(i0 + 1, j0 + 1), texel(i0 + 1, j0), texel(i0, j0)]
                self._write(w, lane, [_register(c[component], integer) for c in corners])
                continue
            if filter_mode == 0 or integer:
                four = texel(math.floor(u), math.floor(v))
            else:
                x, y = u - 0.5, v - 0.5
                i0, j0 = math.floor(x), math.floor(y)
                a, b = x - i0, (y - j0) if two_d else 0.0
                corners = [texel(i0, j0), texel(i0 + 1, j0), texel(i0, j0 + 1), texel(i0 + 1, j0 + 1)]
                weights = [(1 - a) * (1 - b), a * (1 - b), (1 - a) * b, a * b]
                four = [sum(wt * c[k] for wt, c in zip(weights, corners)) for k in range(4)]
            self._write(w, lane, self._masked([_register(v, integer) for v in four]))


class _FormatLoad:
    """buffer_load_format_x … _xyzw through a V#: a structured buffer's element, converted by its format."""

    def __init__(self, preparer: Preparer, raw: bytes, pc: int):
        w0, w1 = int.from_bytes(raw[0:4], "little"), int.from_bytes(raw[4:8], "little")
        self.preparer, self.pc = preparer, pc
        self.channels = _FORMAT_LOADS[_bits(w0, 18, 8)]
        self.name = f"BUFFER_LOAD_FORMAT_{'XYZW'[:self.channels]}"
        self.offset = _bits(w0, 0, 12)
        self.vaddr, self.vdata, self.srsrc = _bits(w1, 0, 8), _bits(w1, 8, 8), _bits(w1, 16, 5) * 4
        self.offen, self.idxen, soffset = _bits(w1, 22, 1), _bits(w1, 23, 1), _bits(w1, 24, 8)
        if _bits(w1, 21, 1):
            raise FatkitError(f"{self.where()}: tfe is not modelled")
        if soffset == 124 or 128 <= soffset <= 192:
            self.soffset: Callable = (lambda w, value=0 if soffset == 124 else soffset - 128: value)
        elif soffset < 106:
            self.soffset = lambda w: w.s[soffset]
        else:
            raise FatkitError(f"{self.where()}: soffset operand {soffset} is not modelled")

    def where(self) -> str:
        return f"{self.name.lower()} at pc 0x{self.pc:x}"

    def run(self, w) -> None:
        words = [w.s[self.srsrc + i] for i in range(4)]
        base = words[0] | (words[1] & 0xFFFF) << 32
        stride, records = _bits(words[1], 16, 14), words[2]
        code = _bits(words[3], 12, 6)
        if code not in _FORMATS:
            raise FatkitError(f"{self.where()}: buffer format code {code} is not modelled")
        bits, channels, kind = _FORMATS[code]
        selects = [_bits(words[3], 3 * i, 3) for i in range(4)]
        integer = kind in ("uint", "sint")
        for lane in np.nonzero(w.exec_bool)[0]:
            index = int(w.v[self.vaddr][lane]) if self.idxen else 0
            offset = int(w.v[self.vaddr + self.idxen][lane]) if self.offen else 0
            offset += self.offset + self.soffset(w)
            if index >= records or offset + bits * channels // 8 > stride:  # outside: reads 0
                four = [0, 0, 0, 0]
            else:
                raw = _memory(self.preparer).read(np.array([base + index * stride + offset], dtype=np.uint64),
                                                       bits * channels // 8, self.where)[0].tobytes()
                four = [_register(v, integer) for v in _selected(_channel_values(raw, bits, channels, kind),
                                                                  selects, integer)]
            for k in range(self.channels):
                w.v[self.vdata + k][lane] = four[k]
        w.pc += 8


def handles(word: int) -> bool:
    """Whether the instruction word is one this module runs (gfx11 MIMG, or MUBUF buffer_load_format_*)."""
    encoding = word >> 26
    return encoding == MIMG_ENCODING or encoding == MUBUF_ENCODING and _bits(word, 18, 8) in _FORMAT_LOADS


def prepare(preparer: Preparer, raw: bytes, pc: int) -> Step:
    word = int.from_bytes(raw[:4], "little")
    model = _ImageStep(preparer, raw, pc) if word >> 26 == MIMG_ENCODING else _FormatLoad(preparer, raw, pc)
    size = model.size if isinstance(model, _ImageStep) else 8
    return Step(model.name, VMEM, size, model.run, pc)
