"""Textures and surfaces (`tex`, `tld4`, `txq`, `suld`, `sust`, `suq`) through HIP's texture/surface objects.

The ABI is HIP's, which ZLUDA passes through unchanged (docs/runtime.md, "Textures and surfaces"): a texture
or surface object (a `.u64` kernel parameter, `cudaTextureObject_t`) is the address, in constant memory, of
the image's 8-dword resource descriptor (T#), followed by 4 dwords HIP writes for queries, and — texture
objects only — the sampler descriptor (S#, 4 dwords used) at dword 12. A `.texref`/`.surfref` (or a `.tex`
variable, PTX 1.x's spelling of a `.texref`) is a global of
HIP's `textureReference` (88 bytes), whose 64-bit `textureObject` at byte 72 is such an address; HIP's
hipModuleGetTexRef finds it by name and the runtime fills it when a texture is bound.

The AMD image instructions do the sampling the PTX ISA describes (filtering, addressing modes, normalised
coordinates, format conversion) as the S# and T# say, so most instructions are one `llvm.amdgcn.image.*`
call: `tex` samples at level 0 (compute has no derivatives), `.level` at a given level, `.grad` with given
gradients; `tld4` is a gather of one component; a 1-D fetch with integer coordinates (`tex1Dfetch`, a
texture over linear memory) is a formatted buffer load through the T#'s first 4 dwords, which HIP makes a
buffer descriptor (V#) for linear textures; `txq`/`suq` sizes are `image_get_resinfo`, their channel
queries HIP's query words. Surfaces take the x coordinate in bytes for .b (the PTX ISA), the image the
element index: x is divided by the element's size. Two things are computed here: a cube map's face
coordinates (and gradients), and bilinear filtering at level 0 of 1-D/2-D textures, which NVIDIA weighs in
a fixed-point way AMD's sampler does not (`_nvidia_bilinear`, fitted to an H200). Channels a format lacks
read 0, as on NVIDIA.
gfx942 and gfx950 (CDNA3/CDNA4) have no image instructions and HIP no texture or surface objects for them, so
these instructions are refused there; on the other gfx9 processors (GCN, CDNA1/CDNA2, which have image
instructions: gfx90a without samplers) they are refused too, as fatkit builds RDNA's image operations only.
"""

from __future__ import annotations

import weakref

from llvmlite import ir

from fatkit.translate.lower.core import F32, F64, I1, I16, I32, I64, I8, Lowering, handles
from fatkit.translate.ptx import ast

TEXTURE_REFERENCE_BYTES = 88  # sizeof(textureReference), HIP's struct, 8-aligned
TEXTURE_OBJECT_OFFSET = 72  # textureReference.textureObject: after 17 four-byte fields and 4 bytes of padding
SAMPLER_OFFSET = 48  # bytes from a texture object to its S# (HIP_SAMPLER_OBJECT_OFFSET_DWORD = 12)
TEXTURE_TYPES = frozenset({"texref", "surfref", "samplerref"})

_V4F32 = ir.VectorType(F32, 4)
_RSRC = ir.VectorType(I32, 8)  # T#
_SAMPLER = ir.VectorType(I32, 4)  # S#, and the V# of a linear texture
# PTX geometry → (LLVM image dimension, coordinates, of which the array index is the first in PTX)
_GEOMETRY = {"1d": ("1d", 1, False), "2d": ("2d", 2, False), "3d": ("3d", 3, False),
             "a1d": ("1darray", 1, True), "a2d": ("2darray", 2, True), "cube": ("cube", 3, False),
             "acube": ("cube", 3, True), "2dms": ("2dmsaa", 2, False), "a2dms": ("2darraymsaa", 2, True)}
_MULTISAMPLE = ("2dms", "a2dms")
_SIZE_QUERIES = {"width": 0, "height": 1, "depth": 2, "array_size": 2, "num_mipmap_levels": 3}
_DIM_OF_QUERY = {"width": "1d", "height": "2d", "depth": "3d", "array_size": "2darray", "num_mipmap_levels": "2d"}


def reference_global(module: ir.Module, variable: ast.Variable, address_space: int) -> ir.GlobalVariable:
    """A `.texref`/`.surfref` as HIP's textureReference, exported under its PTX name, zero until the runtime
    binds a texture to it."""
    storage = ir.GlobalVariable(module, ir.ArrayType(I8, TEXTURE_REFERENCE_BYTES), variable.name,
                                addrspace=address_space)
    storage.type = ir.PointerType(addrspace=address_space)
    storage.initializer = ir.Constant(storage.value_type, None)
    storage.align = 8
    return storage


# No MIMG encoding at all (LLVM's assembler refuses every image opcode for them; its code generator refuses
# image samples) and clang predefines __HIP_NO_IMAGE_SUPPORT for them: no texture or surface API in HIP there
NO_IMAGES = ("gfx940", "gfx941", "gfx942", "gfx950")


def _check_target(lw: Lowering) -> None:
    target_id = getattr(lw.target, "id", None)
    if target_id is None or getattr(target_id, "vendor", None) != "amd":
        raise lw.fail(f"the {lw.target.name} target has no texture units: textures and surfaces translate for "
                      "AMD RDNA processors (gfx10 and later) only")
    if target_id.processor in NO_IMAGES:
        raise lw.fail(f"{lw.target.name} has no image instructions (CDNA3/CDNA4: no image load, store, sample or "
                      "atomic in its ISA), and HIP has no texture or surface objects for it (clang defines "
                      "__HIP_NO_IMAGE_SUPPORT there)")
    if target_id.generation < 10:
        raise lw.fail(f"{lw.target.name}: textures and surfaces are translated for RDNA (gfx10 and later) only; "
                      "gfx9's image instructions (GCN, CDNA1; gfx90a's without samplers) are not built by fatkit")


def _object(lw: Lowering, address: ast.Operand) -> ir.Value:
    """The texture/surface object of `[handle, ...]`: its address in constant memory."""
    if type(address) is not ast.Address or address.base is None or address.offset:
        raise lw.fail("the texture/surface operand must be [handle, ...]")
    base = address.base
    if base.name in lw.variables:
        space, pointer = lw.variables[base.name]
        if space != "texref":
            raise lw.fail(f"{base.name} is a .{space} variable, not a .texref/.surfref")
        field = lw.builder.gep(pointer, [ir.Constant(I64, TEXTURE_OBJECT_OFFSET)], source_etype=I8)
        handle = lw.builder.load(field, typ=I64, align=8)
    elif base.name in lw.registers:
        handle = lw.read(base, "u64")
    else:  # a .param .texref: HIP passes nothing of the kind to a kernel
        raise lw.fail(f"{base.name} is neither a register holding a texture/surface object nor a module "
                      ".texref/.surfref (a .texref kernel parameter has no HIP counterpart)")
    return lw.builder.inttoptr(handle, ir.PointerType(addrspace=lw.target.constant_address_space))


def _descriptor(lw: Lowering, pointer: ir.Value, offset: int, ty: ir.VectorType) -> ir.Value:
    if offset:
        pointer = lw.builder.gep(pointer, [ir.Constant(I64, offset)], source_etype=I8)
    return lw.builder.load(pointer, typ=ty, align=4)


def _call(lw: Lowering, name: str, result: ir.Type, args: list[ir.Value]) -> ir.Value:
    module = lw.builder.module
    function = module.globals.get(name) or ir.Function(module, ir.FunctionType(result, [a.type for a in args]),
                                                        name)
    return lw.builder.call(function, args)


def _geometry(lw: Lowering, ins: ast.Instruction, allowed: tuple[str, ...]) -> str:
    found = [m for m in ins.modifiers if m in _GEOMETRY]
    if len(found) != 1:
        raise lw.fail(f"expected one geometry ({', '.join('.' + g for g in allowed)})")
    if found[0] not in allowed:
        raise lw.fail(f"geometry .{found[0]} is not one the PTX ISA gives {ins.opcode} "
                      f"({', '.join('.' + g for g in allowed)})")
    return found[0]


def _items(lw: Lowering, operand: ast.Operand, what: str) -> tuple[ast.Operand, ...]:
    if type(operand) is ast.Vector:
        return operand.items
    if type(operand) is ast.Name:
        return (operand,)
    raise lw.fail(f"the {what} must be a register or a vector of registers")


def _coordinates(lw: Lowering, address: ast.Address, geometry: str, ctype: str) -> tuple[list[ir.Value], bool]:
    """The coordinate values of `[handle, {…}]` as the image instruction takes them (the array index last, as
    a float for sampling), and whether they are integers."""
    if len(address.extra) != 1:
        raise lw.fail("separate sampler operands (independent texturing mode) are not part of HIP's ABI: a "
                      "HIP texture object carries its sampler")
    dim, count, arrayed = _GEOMETRY[geometry]
    items = _items(lw, address.extra[0], "coordinate operand")
    multisample = geometry in _MULTISAMPLE
    needed = count + arrayed + multisample
    if len(items) < needed:
        raise lw.fail(f"a .{geometry} access takes {needed} coordinates")
    integer = ctype == "s32"
    if multisample:  # {sample, x, y, _} and {layer, sample, x, y} → (x, y[, layer], sample)
        if not integer:
            raise lw.fail(f"a .{geometry} texture is read at texel indices: the coordinates are .s32")
        sample = lw.read(items[arrayed], "u32")
        coords = [lw.read(item, "s32") for item in items[arrayed + 1:arrayed + 3]]
        return [*coords, *([lw.read(items[0], "u32")] if arrayed else []), sample], True
    coords = [lw.read(item, "s32" if integer else "f32") for item in items[arrayed:arrayed + count]]
    if arrayed:
        index = lw.read(items[0], "u32")
        coords.append(index if integer else lw.builder.uitofp(index, F32))
    return coords, integer


def _cube_coordinates(lw: Lowering, coords: list[ir.Value], arrayed: bool,
                      gradients: list[list[ir.Value]] = ()) -> tuple[list[ir.Value], list[list[ir.Value]]]:
    """A cube map's direction (and, for a cube-map array, its layer after it) → (s, t, face) as the image
    instruction takes them: the face and the face coordinates of the major axis (v_cubeid/sc/tc/ma), the
    latter scaled to [1, 2]; a cube-map array's face index is layer × 8 + face (the AMD convention). With
    `gradients` (direction derivatives), their face-space derivatives (ds, dt) too."""
    x, y, z = coords[:3]
    b = lw.builder
    sc, tc, ma, face_id = [_call(lw, f"llvm.amdgcn.cube{p}", F32, [x, y, z]) for p in ("sc", "tc", "ma", "id")]
    magnitude = lw.intrinsic("llvm.fabs", [ma])
    inverse = b.fdiv(ir.Constant(F32, 1.0), magnitude)
    s = b.fadd(b.fmul(sc, inverse), ir.Constant(F32, 1.5))
    t = b.fadd(b.fmul(tc, inverse), ir.Constant(F32, 1.5))
    face = b.fadd(b.fmul(coords[3], ir.Constant(F32, 8.0)), face_id) if arrayed else face_id
    derived = []
    for dx, dy, dz in gradients:  # sc, tc and ma are linear in the direction for the face chosen
        dsc, dtc, dma = _cube_components(lw, face_id, dx, dy, dz)
        # d(sc / |ma|) = (dsc·|ma| − sc·d|ma|) / ma², d|ma| = sign(ma)·dma
        dmagnitude = b.select(b.fcmp_ordered("<", ma, ir.Constant(F32, 0.0)), b.fneg(dma), dma)
        square = b.fmul(ma, ma)
        derived.append([b.fdiv(b.fsub(b.fmul(dsc, magnitude), b.fmul(sc, dmagnitude)), square),
                        b.fdiv(b.fsub(b.fmul(dtc, magnitude), b.fmul(tc, dmagnitude)), square)])
    return [s, t, face], derived


# v_cubesc/tc/ma for each face (+x, -x, +y, -y, +z, -z): (sc, tc, ma) as ± components of the direction
_CUBE_FACES = (((2, -1), (1, -1), (0, 2)), ((2, 1), (1, -1), (0, 2)), ((0, 1), (2, 1), (1, 2)),
               ((0, 1), (2, -1), (1, 2)), ((0, 1), (1, -1), (2, 2)), ((0, -1), (1, -1), (2, 2)))


def _cube_components(lw: Lowering, face: ir.Value, *direction: ir.Value) -> list[ir.Value]:
    """(sc, tc, ma) of another vector (a derivative) on the face `face` (v_cubeid's 0–5) the direction chose."""
    b = lw.builder
    index = b.fptoui(face, I32)
    out = []
    for part in range(3):
        value = ir.Constant(F32, 0.0)
        for number, faces in enumerate(_CUBE_FACES):
            component, scale = faces[part]
            term = b.fmul(direction[component], ir.Constant(F32, float(scale)))
            value = b.select(b.icmp_unsigned("==", index, ir.Constant(I32, number)), term, value)
        out.append(value)
    return out


def _write_results(lw: Lowering, operand: ast.Operand, components: list[ir.Value], ptx_type: str) -> None:
    items = _items(lw, operand, "destination")
    for item, value in zip(items, components):
        if type(item) is ast.Name and item.name == "_":
            continue
        lw.write(item, value, ptx_type)


def _components(lw: Lowering, vector: ir.Value, dtype: str) -> list[ir.Value]:
    values = [lw.builder.extract_element(vector, ir.Constant(I32, i)) for i in range(4)]
    if dtype in ("f32", "f16", "f16x2"):
        return values
    return [lw.builder.bitcast(v, I32) for v in values]


_TAIL = [ir.Constant(I1, 0), ir.Constant(I32, 0), ir.Constant(I32, 0)]  # unorm (S# decides), texfail, cache


def _trailing(lw: Lowering, ins: ast.Instruction, fixed: int, geometry: str):
    """The optional operands after a texture instruction's `fixed` ones: the texel offset `e` (a vector of
    .s32, -8…7) and the depth-compare value `f` (a scalar) — the latter refused: HIP's texture objects carry no
    compare function (hipTextureDesc has none, and the S# HIP writes compares with NEVER)."""
    rest = ins.operands[fixed:]
    if len(rest) > 2:
        raise lw.fail(f"expected at most {fixed + 2} operands, found {len(ins.operands)}")
    offset = None
    for operand in rest:
        if type(operand) is ast.Vector and offset is None:
            offset = operand
        else:
            raise lw.fail("a depth-compare operand: HIP's texture objects carry no depth-compare function "
                          "(hipTextureDesc has none; the S# HIP writes compares with NEVER)")
    if offset is not None and geometry in ("cube", "acube"):
        raise lw.fail("the PTX ISA gives cube-map lookups no offset operand")
    return offset


def _offset_values(lw: Lowering, offset: ast.Operand, geometry: str) -> list[ir.Value]:
    count = _GEOMETRY[geometry][1]
    items = _items(lw, offset, "offset")
    if len(items) < count:
        raise lw.fail(f"a .{geometry} offset has {count} components")
    return [lw.read(item, "s32") for item in items[:count]]


def _packed_offset(lw: Lowering, values: list[ir.Value]) -> ir.Value:
    """The image instructions' offset operand: 6-bit signed x, y, z at bits 0, 8 and 16."""
    b = lw.builder
    packed = ir.Constant(I32, 0)
    for index, value in enumerate(values):
        field = b.and_(value, ir.Constant(I32, 63))
        packed = b.or_(packed, b.shl(field, ir.Constant(I32, 8 * index)) if index else field)
    return packed


def _result_type(lw: Lowering, ins: ast.Instruction, allowed: tuple[str, ...]) -> tuple[str, str]:
    """(the destination type, the coordinate type) of tex: .v4 of .f32/.s32/.u32/.f16, or .v2.f16x2."""
    types = [m for m in ins.modifiers if m in ast.TYPES]
    vector = "v2" if types[:1] == ["f16x2"] else "v4"
    if len(types) != 2 or types[0] not in ("f32", "s32", "u32", "f16", "f16x2") or types[1] not in allowed \
            or vector not in ins.modifiers:
        raise lw.fail("expected .v4 and a result type .f32/.s32/.u32/.f16 (or .v2.f16x2) and a coordinate type "
                      + "/".join("." + a for a in allowed))
    return types[0], types[1]


def _write_texels(lw: Lowering, operand: ast.Operand, components: list[ir.Value], dtype: str) -> None:
    """Four result channels (f32 values, or integer bits) into .f32/.s32/.u32 registers, or as f16 (rounded
    to nearest) into four .f16 registers or two .f16x2 (the first channel in the low half)."""
    if dtype in ("f32", "s32", "u32"):
        _write_results(lw, operand, components, "f32" if dtype == "f32" else "b32")
        return
    b = lw.builder
    halves = [b.bitcast(b.fptrunc(c, ir.HalfType()), I16) for c in components]
    if dtype == "f16":
        _write_results(lw, operand, halves, "b16")
        return
    pairs = [b.or_(b.zext(halves[2 * i], I32), b.shl(b.zext(halves[2 * i + 1], I32), ir.Constant(I32, 16)))
             for i in range(2)]
    _write_results(lw, operand, pairs, "b32")


@handles("tex")
def tex(lw, ins):
    """tex.geom.v4.dtype.ctype d, [t, c] (+ lod for .level, dPdx, dPdy for .grad) (+ offset e): one
    sample."""
    _check_target(lw)
    geometry = _geometry(lw, ins, tuple(_GEOMETRY))
    lw.check_modifiers(ins, {"v4", "v2", "level", "grad", "base", *_GEOMETRY})
    dtype, ctype = _result_type(lw, ins, ("f32", "s32"))
    mode = "level" if "level" in ins.modifiers else "grad" if "grad" in ins.modifiers else "lz"
    extra = {"lz": 0, "level": 1, "grad": 2}[mode]
    if len(ins.operands) < 2 + extra:
        raise lw.fail(f"expected {2 + extra} operands, found {len(ins.operands)}")
    operands = ins.operands
    offset = _trailing(lw, ins, 2 + extra, geometry)
    if type(operands[0]) is ast.Pair:
        raise lw.fail("the resident-texel predicate (sparse textures) has no AMD counterpart HIP exposes")
    pointer = _object(lw, operands[1])
    coords, integer = _coordinates(lw, operands[1], geometry, ctype)
    rsrc = _descriptor(lw, pointer, 0, _RSRC)
    dim, count, arrayed = _GEOMETRY[geometry]
    offsets = _offset_values(lw, offset, geometry) if offset is not None else []
    if integer:
        if mode != "lz":
            raise lw.fail("integer coordinates fetch one texel: .level and .grad need .f32 coordinates")
        if geometry in ("cube", "acube"):
            raise lw.fail(f"a .{geometry} lookup takes a direction: its coordinates are .f32 (the PTX ISA)")
        for index, value in enumerate(offsets):  # applied to the texel indices before the fetch
            coords[index] = lw.builder.add(coords[index], value)
        if geometry == "1d":  # tex1Dfetch: a texture over linear memory, a buffer; HIP gives its V# first
            buffer = _descriptor(lw, pointer, 0, _SAMPLER)
            result = _call(lw, "llvm.amdgcn.struct.buffer.load.format.v4f32", _V4F32,
                           [buffer, coords[0], ir.Constant(I32, 0), ir.Constant(I32, 0), ir.Constant(I32, 0)])
            selects = lw.builder.extract_element(buffer, ir.Constant(I32, 3))
        else:  # texel indices (and a multisample texture's sample index): no filtering
            result = _call(lw, f"llvm.amdgcn.image.load.{dim}.v4f32.i32", _V4F32,
                           [ir.Constant(I32, 15), *coords, rsrc, ir.Constant(I32, 0), ir.Constant(I32, 0)])
            selects = lw.builder.extract_element(rsrc, ir.Constant(I32, 3))
        _write_texels(lw, operands[0], _absent_channels_zero(lw, _components(lw, result, dtype), selects), dtype)
        return
    sampler = _descriptor(lw, pointer, SAMPLER_OFFSET, _SAMPLER)
    cube = geometry in ("cube", "acube")
    gradients: list[list[ir.Value]] = []
    if mode == "grad":
        for operand in operands[2:4]:
            items = _items(lw, operand, "gradient")
            if len(items) < count:
                raise lw.fail(f"a .{geometry} gradient has {count} components")
            gradients.append([lw.read(item, "f32") for item in items[:count]])
    if cube:  # the gradients of the direction become the face coordinates' (ds, dt)
        coords, gradients = _cube_coordinates(lw, coords, arrayed, gradients)
    dmask = ir.Constant(I32, 15)
    suffix = ".o" if offsets else ""
    packed = [_packed_offset(lw, offsets)] if offsets else []
    if mode == "lz" and dim in _NVIDIA_FILTERED:  # bilinear filtering as NVIDIA's texture units weigh it
        channels = _nvidia_bilinear(lw, dim, coords, offsets, rsrc, sampler, _channel_type(lw, pointer),
                                    lambda: _call(lw, f"llvm.amdgcn.image.sample.lz{suffix}.{dim}.v4f32.f32",
                                                  _V4F32, [dmask, *packed, *coords, rsrc, sampler, *_TAIL]))
        _write_texels(lw, operands[0], _absent_channels_zero(lw, channels,
                                                             lw.builder.extract_element(rsrc, ir.Constant(I32, 3))),
                      dtype)
        return
    if mode == "lz":
        name, args = f"llvm.amdgcn.image.sample.lz{suffix}.{dim}.v4f32.f32", [dmask, *packed, *coords]
    elif mode == "level":
        name, args = (f"llvm.amdgcn.image.sample.l{suffix}.{dim}.v4f32.f32",
                      [dmask, *packed, *coords, lw.read(operands[2], "f32")])
    else:  # dPdx → the h terms, dPdy → the v terms
        name, args = (f"llvm.amdgcn.image.sample.d{suffix}.{dim}.v4f32.f32.f32",
                      [dmask, *packed, *gradients[0], *gradients[1], *coords])
    result = _call(lw, name, _V4F32, [*args, rsrc, sampler, *_TAIL])
    _write_texels(lw, operands[0], _absent_channels_zero(lw, _components(lw, result, dtype),
                                                         lw.builder.extract_element(rsrc, ir.Constant(I32, 3))),
                  dtype)


# NVIDIA's bilinear filtering (fitted to an H200, verification/textures_h200.json: every float lookup, 1 124
# lanes, to the bit): the fractions α, β of x − 0.5 and y − 0.5 (in texels) rounded to 8 bits (nearest, ties
# up), the weight αβ of texel (i+1, j+1) rounded to 8 bits the same way and the other three by difference
# (α − αβ, β − αβ, 1 − α − β + αβ), and the weighted sum of the texels of non-zero weight rounded once to f32,
# ties away from zero. A 3-D texture (refitted to the fourth run's weight sweep): slices 1 − γ and γ, each split
# by α (the x = 1 share rounded), each cell by β (the y = 1 share rounded, ties up where x = 1 and down where
# x = 0). Clamp addressing clamps the position to [0, size − 1] first. Normalised formats blend to 16 bits
# (_NORMALISED_BLENDS), half textures to an f16 value. AMD's texture unit weighs
# with its own precision, so for the dimensions below a bilinear sampler's lookup is done here: the four
# texels (two in 1-D, eight in 3-D) point-sampled at their centres through the
# same S# with its filter set to point (the hardware still applies the addressing mode and border), and the
# weights and the sum computed as NVIDIA does (the sum in f64: the products are exact there).
_NVIDIA_FILTERED = ("1d", "2d", "3d", "1darray", "2darray")
_WEIGHT_SCALE = 256.0  # 8 fractional bits
# HSA's channel types (HIP's query word 8) of the normalised formats → (texel levels: the float × this is
# the integer, × this to 16 bits, the sum × this before rounding, the 16-bit value's top): fitted to the
# fourth H200 run (UNORM8, UNORM16, SNORM16 every lane; SNORM8 a near model: verification/textures.py)
_NORMALISED_BLENDS = {0: (127.0, 1.0, 32767 / 127, 32767.0), 1: (32767.0, 1.0, 1.0, 32767.0),
                      2: (255.0, 257.0, 1.0, 65535.0), 3: (65535.0, 1.0, 1.0, 65535.0)}
_HALF_FLOAT = 14
_CLAMP_TO_EDGE = 2  # the S# clamp code of CUDA's clamp addressing
_FILTER_BITS = 0xF << 20  # S# dword 2: magnification and minification filters


def _nvidia_bilinear(lw: Lowering, dim: str, coords: list[ir.Value], offsets: list[ir.Value], rsrc: ir.Value,
                     sampler: ir.Value, channel_type: ir.Value, hardware) -> list[ir.Value]:
    """The four f32 channels of a level-0 lookup: NVIDIA's bilinear filter when the S# filters bilinearly
    (magnification filter 1), else `hardware()`'s sample (point filtering, which needs no weights). A
    normalised texture (HIP's channel-type word: SNORM/UNORM 8 or 16 bits) blends as NVIDIA's does, to a
    16-bit value: e.g. UNORM8 N = Σ weight · 257·t rounded to nearest, ties up, N / 65535 in f32."""
    b = lw.builder
    word0, word2 = (b.extract_element(sampler, ir.Constant(I32, i)) for i in (0, 2))
    bilinear = b.icmp_unsigned("==", b.and_(b.lshr(word2, ir.Constant(I32, 20)), ir.Constant(I32, 3)),
                               ir.Constant(I32, 1))
    filtered_block = lw.function.append_basic_block("nvidia_bilinear")
    sampled_block = lw.function.append_basic_block("sampled")
    following = lw.function.append_basic_block("filtered")
    b.cbranch(bilinear, filtered_block, sampled_block)
    b.position_at_end(sampled_block)
    sampled = hardware()
    sampled_channels = [b.extract_element(sampled, ir.Constant(I32, i)) for i in range(4)]
    sampled_end = b.block
    b.branch(following)

    b.position_at_end(filtered_block)
    axes = 3 if dim == "3d" else 2 if dim.startswith("2d") else 1
    unnormalized = b.icmp_unsigned("!=", b.and_(word0, ir.Constant(I32, 1 << 15)), ir.Constant(I32, 0))
    sizes = _resinfo(lw, rsrc, dim, ir.Constant(I32, 0))
    one = ir.Constant(F32, 1.0)
    fractions, lows, size_values = [], [], []
    for axis in range(axes):
        size = b.uitofp(sizes[axis], F32)
        position = b.select(unnormalized, coords[axis], b.fmul(coords[axis], size))
        position = b.fsub(position, ir.Constant(F32, 0.5))
        if axis < len(offsets):
            position = b.fadd(position, b.sitofp(offsets[axis], F32))
        # clamp-to-edge addressing (S# clamp code 2 for this axis) clamps the position to the texel centres
        # first, as NVIDIA does: it changes the 3-D weights of a lookup past an edge (1-D and 2-D: the same)
        clamped = lw.intrinsic("llvm.minnum", [lw.intrinsic("llvm.maxnum", [position, ir.Constant(F32, 0.0)]),
                                               b.fsub(size, one)])
        mode = b.and_(b.lshr(word0, ir.Constant(I32, 3 * axis)), ir.Constant(I32, 7))
        position = b.select(b.icmp_unsigned("==", mode, ir.Constant(I32, _CLAMP_TO_EDGE)), clamped, position)
        low = lw.intrinsic("llvm.floor", [position])
        fractions.append(_nearest_256th(lw, b.fsub(position, low)))
        lows.append(low)
        size_values.append(size)
    point = b.insert_element(sampler, b.and_(word2, ir.Constant(I32, ~_FILTER_BITS & 0xFFFFFFFF)),
                             ir.Constant(I32, 2))

    def texel(corner: tuple[int, ...]) -> list[ir.Value]:
        centre = []
        for axis in range(axes):  # the texel's centre, in the coordinates the S# takes
            unscaled = b.fadd(lows[axis], ir.Constant(F32, corner[axis] + 0.5))
            centre.append(b.select(unnormalized, unscaled, b.fdiv(unscaled, size_values[axis])))
        value = _call(lw, f"llvm.amdgcn.image.sample.lz.{dim}.v4f32.f32", _V4F32,
                      [ir.Constant(I32, 15), *centre, *coords[axes:], rsrc, point, *_TAIL])
        return [b.extract_element(value, ir.Constant(I32, i)) for i in range(4)]

    def planar(alpha: ir.Value, beta: ir.Value) -> list[ir.Value]:
        """The 2-D weights of (0, 0), (1, 0), (0, 1), (1, 1): only αβ is rounded; each axis's pair of weights
        still sums to its fraction (all exact in f32: αβ has 16 fractional bits)."""
        corner = _nearest_256th(lw, b.fmul(alpha, beta))
        return [b.fadd(b.fsub(b.fsub(one, alpha), beta), corner), b.fsub(alpha, corner), b.fsub(beta, corner),
                corner]

    corners: list[tuple[int, ...]]
    if axes == 1:
        corners, weights = [(0,), (1,)], [b.fsub(one, fractions[0]), fractions[0]]
    elif axes == 2:
        corners, weights = [(0, 0), (1, 0), (0, 1), (1, 1)], planar(*fractions)
    else:  # 3-D: slices by z, each split by x (its x = 1 share rounded), each cell by y (ties by x, below)
        corners, weights = [], []
        for dz, slice_weight in ((0, b.fsub(one, fractions[2])), (1, fractions[2])):
            right = _nearest_256th(lw, b.fmul(slice_weight, fractions[0]))
            for dx, cell in ((0, b.fsub(slice_weight, right)), (1, right)):
                upper = _nearest_256th(lw, b.fmul(cell, fractions[1]), ties_up=dx == 1)
                corners += [(dx, 0, dz), (dx, 1, dz)]
                weights += [b.fsub(cell, upper), upper]
    texels = [texel(corner) for corner in corners]
    # a normalised format blends to a 16-bit value: its texels back to integers (× levels), widened to 16 bits
    # (× widen), the sum (× after) rounded to nearest, ties up, over `top`; per HSA channel type
    def by_type(values: dict[int, float], otherwise: float) -> ir.Value:
        chosen: ir.Value = ir.Constant(F64, otherwise)
        for code, value in values.items():
            chosen = b.select(b.icmp_unsigned("==", channel_type, ir.Constant(I32, code)), ir.Constant(F64, value),
                              chosen)
        return chosen
    normalised = b.icmp_unsigned("<=", channel_type, ir.Constant(I32, max(_NORMALISED_BLENDS)))
    levels, widen, after, top = (by_type({code: rule[k] for code, rule in _NORMALISED_BLENDS.items()}, 1.0)
                                 for k in range(4))
    half = b.icmp_unsigned("==", channel_type, ir.Constant(I32, _HALF_FLOAT))
    filtered = []
    for channel in range(4):
        total = ir.Constant(F64, -0.0)  # a sum of -0 texels stays -0, as NVIDIA's does
        for weight, values in zip(weights, texels):
            term = lw.intrinsic("llvm.fma", [b.fpext(weight, F64), b.fpext(values[channel], F64), total])
            # a texel of weight 0 takes no part (not even as 0 · Inf or as +0 beside a -0)
            total = b.select(b.fcmp_ordered("==", weight, ir.Constant(F32, 0.0)), total, term)
        # the texels' integers (t / 255 back to t, …) widened to 16 bits; the sum exact in f64
        wide = ir.Constant(F64, 0.0)
        for weight, values in zip(weights, texels):
            level = lw.intrinsic("llvm.roundeven", [b.fmul(b.fpext(values[channel], F64), levels)])
            wide = lw.intrinsic("llvm.fma", [b.fpext(weight, F64), b.fmul(level, widen), wide])
        steps = lw.intrinsic("llvm.floor", [b.fadd(b.fmul(wide, after), ir.Constant(F64, 0.5))])
        sixteen = lw.intrinsic("llvm.maxnum", [b.fptrunc(b.fdiv(steps, top), F32), ir.Constant(F32, -1.0)])
        blended = _f32_ties_away(lw, total)
        # a half texture's result is an f16 value (NVIDIA's: every lane of the fourth run)
        blended = b.select(half, b.fpext(b.fptrunc(blended, ir.HalfType()), F32), blended)
        filtered.append(b.select(normalised, sixteen, blended))
    filtered_end = b.block
    b.branch(following)

    b.position_at_end(following)
    out = []
    for channel in range(4):
        phi = b.phi(F32)
        phi.add_incoming(filtered[channel], filtered_end)
        phi.add_incoming(sampled_channels[channel], sampled_end)
        out.append(phi)
    return out


def _nearest_256th(lw: Lowering, value: ir.Value, ties_up: bool = True) -> ir.Value:
    """A value in [0, 1] (f32) to the nearest 256th, ties up (or down), as NVIDIA rounds its filter fractions
    and weights (floor and the remainder, not floor(v + 0.5): that sum may round in f32)."""
    b = lw.builder
    scaled = b.fmul(value, ir.Constant(F32, _WEIGHT_SCALE))
    steps = lw.intrinsic("llvm.floor", [scaled])
    up = b.fcmp_ordered(">=" if ties_up else ">", b.fsub(scaled, steps), ir.Constant(F32, 0.5))
    steps = b.fadd(steps, b.select(up, ir.Constant(F32, 1.0), ir.Constant(F32, 0.0)))
    return b.fmul(steps, ir.Constant(F32, 1 / _WEIGHT_SCALE))


def _f32_ties_away(lw: Lowering, value: ir.Value) -> ir.Value:
    """An f64 rounded to the nearest f32, ties away from zero: in f32's normal range, half an f32 ulp added
    to the magnitude's bits and the 29 bits f32 lacks cleared (a carry moves to the next binade or to
    infinity); elsewhere (subnormal results, ±0, Inf, NaN) fptrunc's ties-to-even."""
    b = lw.builder
    bits = b.bitcast(value, I64)
    rounded = b.and_(b.add(bits, ir.Constant(I64, 1 << 28)), ir.Constant(I64, ~((1 << 29) - 1) & (2 ** 64 - 1)))
    normal = b.fcmp_ordered(">=", lw.intrinsic("llvm.fabs", [value]), ir.Constant(F64, 2.0 ** -126))
    finite = b.fcmp_ordered("<", lw.intrinsic("llvm.fabs", [value]), ir.Constant(F64, float("inf")))
    chosen = b.select(b.and_(normal, finite), b.bitcast(rounded, F64), value)
    return b.fptrunc(chosen, F32)


def _absent_channels_zero(lw: Lowering, components: list[ir.Value], selects: ir.Value,
                          channels: tuple[int, ...] = (0, 1, 2, 3)) -> list[ir.Value]:
    """The result channels whose descriptor select is the constant 1 read 0, as NVIDIA's texture units read
    the channels a format lacks (an H200: a one-channel texture reads (x, 0, 0, 0)); HIP's descriptors
    select (x, 0, 0, 1) for those, OpenCL's rule. CUDA makes no swizzled textures, so a select of 1 is always
    such an absent channel. `components[i]` is channel `channels[i]`."""
    b = lw.builder
    out = []
    for value, channel in zip(components, channels):
        select = b.and_(b.lshr(selects, ir.Constant(I32, 3 * channel)), ir.Constant(I32, 7))
        absent = b.icmp_unsigned("==", select, ir.Constant(I32, 1))
        out.append(b.select(absent, ir.Constant(value.type, 0 if isinstance(value.type, ir.IntType) else 0.0),
                            value))
    return out


@handles("tld4")
def tld4(lw, ins):
    """tld4.comp.geom.v4.dtype.f32 d, [t, c] (+ offset e): one component of the four texels bilinear filtering
    would read, in the order both ISAs give (-u +v, +u +v, +u -v, -u -v)."""
    _check_target(lw)
    components = [c for c in ("r", "g", "b", "a") if c in ins.modifiers]
    geometry = _geometry(lw, ins, ("2d", "a2d", "cube", "acube"))
    lw.check_modifiers(ins, {"v4", "r", "g", "b", "a", *_GEOMETRY})
    types = [m for m in ins.modifiers if m in ast.TYPES]
    if len(components) != 1 or types[1:] != ["f32"] or types[0] not in ("f32", "s32", "u32"):
        raise lw.fail("expected one component (.r/.g/.b/.a), .v4, a result type and .f32 coordinates")
    if len(ins.operands) < 2:
        raise lw.fail(f"expected 2 operands, found {len(ins.operands)}")
    operands = ins.operands
    offset = _trailing(lw, ins, 2, geometry)
    if type(operands[0]) is ast.Pair:
        raise lw.fail("the resident-texel predicate (sparse textures) has no AMD counterpart HIP exposes")
    pointer = _object(lw, operands[1])
    coords, _ = _coordinates(lw, operands[1], geometry, "f32")
    dim, _count, arrayed = _GEOMETRY[geometry]
    if dim == "cube":
        coords, _ = _cube_coordinates(lw, coords, arrayed)
    rsrc, sampler = _descriptor(lw, pointer, 0, _RSRC), _descriptor(lw, pointer, SAMPLER_OFFSET, _SAMPLER)
    channel = "rgba".index(components[0])
    packed = [_packed_offset(lw, _offset_values(lw, offset, geometry))] if offset is not None else []
    result = _call(lw, f"llvm.amdgcn.image.gather4.lz{'.o' if packed else ''}.{dim}.v4f32.f32", _V4F32,
                   [ir.Constant(I32, 1 << channel), *packed, *coords, rsrc, sampler, *_TAIL])
    gathered = _absent_channels_zero(lw, _components(lw, result, types[0]),
                                     lw.builder.extract_element(rsrc, ir.Constant(I32, 3)), (channel,) * 4)
    _write_results(lw, operands[0], gathered, "f32" if types[0] == "f32" else "b32")


def _resinfo(lw: Lowering, rsrc: ir.Value, dim: str, level: ir.Value) -> list[ir.Value]:
    """image_get_resinfo: width, height, depth (or array size) at `level`, and the number of levels."""
    result = _call(lw, f"llvm.amdgcn.image.getresinfo.{dim}.v4f32.i32", _V4F32,
                   [ir.Constant(I32, 15), level, rsrc, ir.Constant(I32, 0), ir.Constant(I32, 0)])
    return [lw.builder.bitcast(lw.builder.extract_element(result, ir.Constant(I32, i)), I32) for i in range(4)]


# HIP's image object (texture and surface objects alike) holds the channel data type and channel order at
# dwords 8 and 9 as the HSA enumerations (hsa_ext_image_channel_type_t, hsa_ext_image_channel_order_t); txq
# and suq answer them as OpenCL's codes (cl_channel_type, cl_channel_order), the PTX ISA's "source language"
# enumerations: CUDA C has no query of its own for them
CHANNEL_DATA_TYPE_WORD, CHANNEL_ORDER_WORD = 8, 9
OPENCL_CHANNEL_TYPES = (0x10D0, 0x10D1, 0x10D2, 0x10D3, 0x10DF, 0x10D5, 0x10D4, 0x10D6, 0x10D7, 0x10D8, 0x10D9,
                        0x10DA, 0x10DB, 0x10DC, 0x10DD, 0x10DE)  # SNORM_INT8 … FLOAT in HSA's order
OPENCL_CHANNEL_ORDERS = (0x10B1, 0x10B0, 0x10BA, 0x10B2, 0x10BB, 0x10B3, 0x10B4, 0x10BC, 0x10B5, 0x10B6, 0x10B7,
                         0x10C3, 0x10BF, 0x10C0, 0x10C1, 0x10C2, 0x10B8, 0x10B9, 0x10BD, 0x10BE)  # A, R, Rx, RG, …
_CHANNEL_QUERIES = {"channel_data_type": (CHANNEL_DATA_TYPE_WORD, OPENCL_CHANNEL_TYPES),
                    "channel_order": (CHANNEL_ORDER_WORD, OPENCL_CHANNEL_ORDERS)}
_MSAA_TYPES = (14, 15)  # the T#'s resource type (dword 3, bits 28-31): 2D MSAA, 2D MSAA array


def _table(lw: Lowering, name: str, values: tuple[int, ...], index: ir.Value) -> ir.Value:
    """values[index] from a constant table in the code object; 0 for an index past it."""
    module = lw.builder.module
    table = module.globals.get(name)
    if table is None:
        table = ir.GlobalVariable(module, ir.ArrayType(I32, len(values) + 1), name,
                                  addrspace=lw.target.constant_address_space)
        table.initializer = ir.Constant(table.value_type, [*values, 0])
        table.global_constant, table.linkage = True, "internal"
    b = lw.builder
    last = ir.Constant(I32, len(values))
    clamped = b.select(b.icmp_unsigned("<", index, last), index, last)
    element = b.gep(table, [ir.Constant(I32, 0), clamped], inbounds=True, source_etype=table.value_type)
    return b.load(element, typ=I32)


def _descriptor_query(lw: Lowering, ins: ast.Instruction, query: str) -> None:
    """txq/suq.{channel_data_type,channel_order}.b32 (HIP's query words as OpenCL's codes) and
    txq.num_samples.b32 (a multisample T# keeps log2 of its samples in its last-level field; every other
    image has one sample a texel)."""
    _check_target(lw)
    lw.check_modifiers(ins, {query})
    if lw.types(ins, 1) != ["b32"]:
        raise lw.fail("expected .b32")
    destination, address = lw.operands(ins, 2)
    pointer = _object(lw, address)
    b = lw.builder
    if query == "num_samples":
        word3 = b.extract_element(_descriptor(lw, pointer, 0, _RSRC), ir.Constant(I32, 3))
        kind = b.lshr(word3, ir.Constant(I32, 28))
        msaa = b.or_(*(b.icmp_unsigned("==", kind, ir.Constant(I32, t)) for t in _MSAA_TYPES))
        samples = b.shl(ir.Constant(I32, 1), b.and_(b.lshr(word3, ir.Constant(I32, 16)), ir.Constant(I32, 15)))
        lw.write(destination, b.select(msaa, samples, ir.Constant(I32, 1)), "b32")
        return
    word, codes = _CHANNEL_QUERIES[query]
    field = b.gep(pointer, [ir.Constant(I64, 4 * word)], source_etype=I8)
    lw.write(destination, _table(lw, f"__fatkit_opencl_{query}", codes, b.load(field, typ=I32, align=4)), "b32")


def _query(lw: Lowering, ins: ast.Instruction, extra: set[str]) -> None:
    descriptor_query = next((m for m in ins.modifiers if m in (*_CHANNEL_QUERIES, "num_samples")), None)
    if descriptor_query is not None:
        _descriptor_query(lw, ins, descriptor_query)
        return
    _check_target(lw)
    queries = [m for m in ins.modifiers if m in _SIZE_QUERIES]
    lw.check_modifiers(ins, {*_SIZE_QUERIES, *extra})
    if len(queries) != 1 or lw.types(ins, 1) != ["b32"]:
        raise lw.fail("expected one size query (.width, .height, .depth, .array_size, .num_mipmap_levels) and "
                      ".b32")
    level = "level" in ins.modifiers
    operands = lw.operands(ins, 3 if level else 2)
    rsrc = _descriptor(lw, _object(lw, operands[1]), 0, _RSRC)
    lod = lw.read(operands[2], "s32") if level else ir.Constant(I32, 0)
    values = _resinfo(lw, rsrc, _DIM_OF_QUERY[queries[0]], lod)
    lw.write(operands[0], values[_SIZE_QUERIES[queries[0]]], "b32")


# txq's sampler queries: the S# field (dword, first bit, bits) HIP's sampler sets
_SAMPLER_FIELDS = {"normalized_coords": (0, 15, 1), "force_unnormalized_coords": (0, 15, 1),
                   "filter_mode": (2, 20, 2), "addr_mode_0": (0, 0, 3), "addr_mode_1": (0, 3, 3),
                   "addr_mode_2": (0, 6, 3)}
# AMD's clamp codes (wrap, mirror, clamp to last texel, mirror once, half border, mirror once half border,
# border, mirror once border) → CUDA's cudaTextureAddressMode (wrap 0, clamp 1, mirror 2, border 3); the
# mirror-once and half-border codes, which HIP does not write, as their nearest CUDA mode
_CUDA_ADDRESS_MODES = (0, 2, 1, 2, 3, 2, 3, 2)


def _sampler_query(lw: Lowering, ins: ast.Instruction, query: str) -> None:
    """txq.{normalized_coords,force_unnormalized_coords,filter_mode,addr_mode_N}.b32 d, [t]: read from the
    texture object's S#, in CUDA's enumerations (filter: point 0, linear 1)."""
    lw.check_modifiers(ins, {query})
    if lw.types(ins, 1) != ["b32"]:
        raise lw.fail("expected .b32")
    destination, address = lw.operands(ins, 2)
    word, low, count = _SAMPLER_FIELDS[query]
    sampler = _descriptor(lw, _object(lw, address), SAMPLER_OFFSET, _SAMPLER)
    b = lw.builder
    field = b.and_(b.lshr(b.extract_element(sampler, ir.Constant(I32, word)), ir.Constant(I32, low)),
                   ir.Constant(I32, (1 << count) - 1))
    if query == "normalized_coords":  # the S# says whether coordinates are forced unnormalised
        field = b.xor(field, ir.Constant(I32, 1))
    elif query.startswith("addr_mode"):
        packed = sum(mode << (4 * code) for code, mode in enumerate(_CUDA_ADDRESS_MODES))  # a nibble a code
        field = b.and_(b.lshr(ir.Constant(I32, packed), b.shl(field, ir.Constant(I32, 2))), ir.Constant(I32, 15))
    lw.write(destination, field, "b32")


@handles("txq")
def txq(lw, ins):
    """txq[.level].query.b32 d, [t] (, lod): the texture's size at level 0 (or lod), its levels; or its
    sampler's state."""
    sampler_query = next((m for m in ins.modifiers if m in _SAMPLER_FIELDS), None)
    if sampler_query is not None:
        _check_target(lw)
        _sampler_query(lw, ins, sampler_query)
        return
    _query(lw, ins, {"level"})


@handles("suq")
def suq(lw, ins):
    """suq.query.b32 d, [s]: the surface's size in elements, or whether its memory is linear (1) or tiled (0):
    the T#'s swizzle mode (bits 20-24 of dword 3) is 0 for linear memory."""
    if "memory_layout" not in ins.modifiers:
        _query(lw, ins, set())
        return
    _check_target(lw)
    lw.check_modifiers(ins, {"memory_layout"})
    if lw.types(ins, 1) != ["b32"]:
        raise lw.fail("expected .b32")
    destination, address = lw.operands(ins, 2)
    rsrc = _descriptor(lw, _object(lw, address), 0, _RSRC)
    b = lw.builder
    swizzle = b.and_(b.lshr(b.extract_element(rsrc, ir.Constant(I32, 3)), ir.Constant(I32, 20)), ir.Constant(I32, 31))
    lw.write(destination, b.zext(b.icmp_unsigned("==", swizzle, ir.Constant(I32, 0)), I32), "b32")


_SURFACE_TYPES = {"b8": 1, "b16": 2, "b32": 4, "b64": 8}
_SURFACE_GEOMETRY = ("1d", "2d", "3d", "a1d", "a2d")


def _surface_access(lw: Lowering, ins: ast.Instruction, address: ast.Operand):
    """The T#, the integer coordinates (x as an element index) and the element's type of a suld/sust: .b
    addresses x in bytes, raw elements of .b8–.b64; sust.p addresses x in samples (texels) and stores .b32
    values the image store converts to the surface's format."""
    _check_target(lw)
    formatted = "p" in ins.modifiers
    if ins.opcode == "suld" and "b" not in ins.modifiers:
        raise lw.fail("suld has only .b (raw bits) in the PTX ISA: a formatted surface load is not one of its forms")
    if not formatted and "b" not in ins.modifiers:
        raise lw.fail("expected .b (raw bits) or .p (formatted)")
    lw.check_modifiers(ins, {"p" if formatted else "b", "v2", "v4", "trap", "clamp", "zero", "ca", "cg", "cs", "cv",
                             "wb", "wt", *_SURFACE_GEOMETRY})
    geometry = _geometry(lw, ins, ("1d", "2d", "3d") if formatted else _SURFACE_GEOMETRY)
    types = [m for m in ins.modifiers if m in _SURFACE_TYPES]
    if len(types) != 1 or formatted and types != ["b32"]:
        raise lw.fail("expected .b32" if formatted else "expected one of .b8, .b16, .b32, .b64")
    count = 4 if "v4" in ins.modifiers else 2 if "v2" in ins.modifiers else 1
    dtype = types[0]
    channels = count * (2 if dtype == "b64" else 1)
    if channels > 4:
        raise lw.fail("a vector of .b64 wider than two elements is not a surface access")
    coords, _ = _coordinates(lw, address, geometry, "s32")
    if not formatted:
        coords[0] = lw.builder.sdiv(coords[0], ir.Constant(I32, _SURFACE_TYPES[dtype] * count))  # bytes → elements
    rsrc = _descriptor(lw, _object(lw, address), 0, _RSRC)
    dim = _GEOMETRY[geometry][0]
    mode = next((m for m in ("trap", "clamp", "zero") if m in ins.modifiers), "trap")
    if mode != "zero":  # the image instructions read 0 and drop stores outside: what .zero asks
        coords = _out_of_range(lw, rsrc, dim, coords, mode)
    return rsrc, coords, dim, dtype, count, channels


def _out_of_range(lw: Lowering, rsrc: ir.Value, dim: str, coords: list[ir.Value], mode: str) -> list[ir.Value]:
    """.clamp: coordinates clamped to the edge; .trap: a launch abort when one lies outside."""
    sizes = _resinfo(lw, rsrc, dim, ir.Constant(I32, 0))
    b = lw.builder
    outside, clamped = ir.Constant(I1, 0), []
    for coordinate, size in zip(coords, sizes[:len(coords)]):
        limit = b.sub(size, ir.Constant(I32, 1))
        outside = b.or_(outside, b.icmp_unsigned(">", coordinate, limit))
        low = b.select(b.icmp_signed("<", coordinate, ir.Constant(I32, 0)), ir.Constant(I32, 0), coordinate)
        clamped.append(b.select(b.icmp_signed(">", low, limit), limit, low))
    if mode == "clamp":
        return clamped
    fault = _FAULTS.get(lw.function)
    if fault is None:  # one trap block a function: LLVM 22 leaves a second gfx11 trap unexpanded in some
        # layouts (a SIMULATED_TRAP pseudo that the assembler cannot encode)
        fault = _FAULTS[lw.function] = lw.function.append_basic_block("surface_out_of_range")
        here = b.block
        b.position_at_end(fault)
        lw.target.trap(b, None)
        lw.stop_thread()
        b.position_at_end(here)
    following = lw.function.append_basic_block("surface_in_range")
    b.cbranch(outside, fault, following)
    b.position_at_end(following)
    return coords


_FAULTS: weakref.WeakKeyDictionary[ir.Function, ir.Block] = weakref.WeakKeyDictionary()


@handles("suld")
def suld(lw, ins):
    """suld.b.geom[.vec].btype.mode d, [s, c]: raw elements, one image channel per .b8/.b16/.b32 element
    (two per .b64)."""
    operands = lw.operands(ins, 2)
    rsrc, coords, dim, dtype, count, channels = _surface_access(lw, ins, operands[1])
    mask = (1 << channels) - 1
    result = _call(lw, f"llvm.amdgcn.image.load.{dim}.v4f32.i32", _V4F32,
                   [ir.Constant(I32, mask), *coords, rsrc, ir.Constant(I32, 0), ir.Constant(I32, 0)])
    words = [lw.builder.bitcast(lw.builder.extract_element(result, ir.Constant(I32, i)), I32)
             for i in range(channels)]
    if dtype == "b64":
        values = [lw.builder.or_(lw.builder.zext(words[2 * i], I64),
                                 lw.builder.shl(lw.builder.zext(words[2 * i + 1], I64), ir.Constant(I64, 32)))
                  for i in range(count)]
    else:
        narrow = {"b8": I8, "b16": I16, "b32": I32}[dtype]
        values = [w if narrow is I32 else lw.builder.trunc(w, narrow) for w in words]
    items = _items(lw, operands[0], "destination")
    if len(items) != count:
        raise lw.fail(f"expected {count} destination registers")
    for item, value in zip(items, values):
        lw.write(item, value, dtype)


@handles("sust")
def sust(lw, ins):
    """sust.b.geom[.vec].btype.mode [s, c], a: raw elements stored, one image channel per element;
    sust.p.geom[.vec].b32.mode: the R, G, B, A values, converted to the surface's format by the image store
    (as .f32 for UNORM/SNORM/FLOAT formats, .u32/.s32 for UINT/SINT, the PTX rule), channels the format
    lacks ignored; integers saturate to an 8- or 16-bit channel's range first (`_saturated`)."""
    operands = lw.operands(ins, 2)
    rsrc, coords, dim, dtype, count, channels = _surface_access(lw, ins, operands[0])
    items = _items(lw, operands[1], "source")
    if len(items) != count:
        raise lw.fail(f"expected {count} source registers")
    kind = _channel_type(lw, _object(lw, operands[0])) if "p" in ins.modifiers else None
    words: list[ir.Value] = []
    for item in items:
        value = lw.read(item, dtype)
        if dtype == "b64":
            words += [lw.builder.trunc(value, I32), lw.builder.trunc(lw.builder.lshr(value, ir.Constant(I64, 32)),
                                                                      I32)]
        else:
            words.append(value if dtype == "b32" else lw.builder.zext(value, I32))
    if kind is not None:
        words = [_saturated(lw, word, kind) for word in words]
    data = ir.Constant(_V4F32, ir.Undefined)
    for index, word in enumerate(words):
        data = lw.builder.insert_element(data, lw.builder.bitcast(word, F32), ir.Constant(I32, index))
    _call(lw, f"llvm.amdgcn.image.store.{dim}.v4f32.i32", ir.VoidType(),
          [data, ir.Constant(I32, (1 << channels) - 1), *coords, rsrc, ir.Constant(I32, 0), ir.Constant(I32, 0)])


# HSA's channel types of 8- and 16-bit integer channels → the range sust.p saturates to (unsigned: the
# register as .u32, as an H200 stores 0xFFFFFFFB as 255 into a uchar4 surface; signed: as .s32)
_UNSIGNED_LIMITS = {11: 0xFF, 12: 0xFFFF}  # UNSIGNED_INT8, UNSIGNED_INT16
_SIGNED_LIMITS = {8: (-0x80, 0x7F), 9: (-0x8000, 0x7FFF)}  # SIGNED_INT8, SIGNED_INT16


def _channel_type(lw: Lowering, pointer: ir.Value) -> ir.Value:
    """HIP's channel-type word (HSA's enumeration) of a texture or surface object."""
    b = lw.builder
    return b.load(b.gep(pointer, [ir.Constant(I64, 4 * CHANNEL_DATA_TYPE_WORD)], source_etype=I8), typ=I32, align=4)


def _saturated(lw: Lowering, word: ir.Value, kind: ir.Value) -> ir.Value:
    """A sust.p integer clamped to the channel's range when the channel is 8 or 16 bits wide (NVIDIA saturates
    where AMD's format conversion keeps the low bits, as the emulator models it); other formats unchanged."""
    b = lw.builder

    def by_kind(table: dict[int, int], otherwise: int) -> ir.Value:
        chosen: ir.Value = ir.Constant(I32, otherwise)
        for code, limit in table.items():
            chosen = b.select(b.icmp_unsigned("==", kind, ir.Constant(I32, code)), ir.Constant(I32, limit), chosen)
        return chosen

    upper = by_kind(_UNSIGNED_LIMITS, 0xFFFFFFFF)
    unsigned = b.select(b.icmp_unsigned(">", word, upper), upper, word)
    low = by_kind({code: limits[0] & 0xFFFFFFFF for code, limits in _SIGNED_LIMITS.items()}, 0x80000000)
    high = by_kind({code: limits[1] for code, limits in _SIGNED_LIMITS.items()}, 0x7FFFFFFF)
    above = b.select(b.icmp_signed(">", word, high), high, word)
    signed = b.select(b.icmp_signed("<", above, low), low, above)
    is_signed = b.or_(*(b.icmp_unsigned("==", kind, ir.Constant(I32, code)) for code in _SIGNED_LIMITS))
    return b.select(is_signed, signed, unsigned)


# sured's operation and type → the image atomic's, and the element's bytes (sured.b)
_REDUCTIONS = {("add", "u32"): "add", ("add", "s32"): "add", ("add", "u64"): "add",
               ("min", "u32"): "umin", ("min", "s32"): "smin", ("min", "u64"): "umin", ("min", "s64"): "smin",
               ("max", "u32"): "umax", ("max", "s32"): "smax", ("max", "u64"): "umax", ("max", "s64"): "smax",
               ("and", "b32"): "and", ("or", "b32"): "or"}
# sured.p: .b32 (every operation) and .b64 (min, max), signed when the surface's channels are SINT
_SAMPLE_REDUCTIONS = {("add", "b32"), ("min", "b32"), ("max", "b32"), ("and", "b32"), ("or", "b32"),
                      ("min", "b64"), ("max", "b64")}
_SIGNED_CHANNEL_TYPES = (8, 9, 10)  # HSA's SIGNED_INT8/16/32 (HIP's query word 8)


@handles("sured")
def sured(lw, ins):
    """sured.{b,p}.op.geom.ctype.mode [s, c], a: an atomic reduction into one 32- or 64-bit surface element
    (the image atomics; 64-bit ones on a two-channel 32-bit format); the old value is not returned, as PTX has
    none. .b addresses x in bytes, .p in samples; sured.p's .b32/.b64 min and max are signed for a SINT
    surface (read from HIP's channel-type word), unsigned otherwise."""
    _check_target(lw)
    formatted = "p" in ins.modifiers
    if not formatted and "b" not in ins.modifiers:
        raise lw.fail("expected .b (byte addressing) or .p (sample addressing)")
    operation = next((m for m in ins.modifiers if m in ("add", "min", "max", "and", "or")), None)
    types = [m for m in ins.modifiers if m in ast.TYPES]
    key = (operation, types[0]) if len(types) == 1 else None
    if operation is None or key not in (_SAMPLE_REDUCTIONS if formatted else _REDUCTIONS):
        raise lw.fail("expected .add/.min/.max/.and/.or on .b32 or .min/.max on .b64 (sured.p)" if formatted else
                      "expected .add on .u32/.s32/.u64, .min/.max on .u32/.s32/.u64/.s64 or .and/.or on .b32 "
                      "(the PTX ISA's sured.b forms)")
    geometry = _geometry(lw, ins, ("1d", "2d", "3d"))
    lw.check_modifiers(ins, {"p" if formatted else "b", operation, "trap", "clamp", "zero", "1d", "2d", "3d"})
    address, value = lw.operands(ins, 2)
    ctype = types[0]
    wide = ctype[1:] == "64"
    element = ir.IntType(64 if wide else 32)
    coords, _ = _coordinates(lw, address, geometry, "s32")
    if not formatted:
        coords[0] = lw.builder.sdiv(coords[0], ir.Constant(I32, 8 if wide else 4))  # bytes → element index
    pointer = _object(lw, address)
    rsrc = _descriptor(lw, pointer, 0, _RSRC)
    dim = _GEOMETRY[geometry][0]
    mode = next((m for m in ("trap", "clamp", "zero") if m in ins.modifiers), "trap")
    if mode != "zero":
        coords = _out_of_range(lw, rsrc, dim, coords, mode)
    data = lw.read(value, ctype)
    width = "i64" if wide else "i32"

    def atomic(name: str) -> None:
        _call(lw, f"llvm.amdgcn.image.atomic.{name}.{dim}.{width}.i32", element,
              [data, *coords, rsrc, ir.Constant(I32, 0), ir.Constant(I32, 0)])

    if not formatted or operation in ("add", "and", "or"):
        atomic(_REDUCTIONS[operation, ctype] if not formatted else operation)
        return
    b = lw.builder
    kind = _channel_type(lw, pointer)
    signed = b.or_(b.icmp_unsigned("==", kind, ir.Constant(I32, _SIGNED_CHANNEL_TYPES[0])),
                   b.or_(*(b.icmp_unsigned("==", kind, ir.Constant(I32, t)) for t in _SIGNED_CHANNEL_TYPES[1:])))
    signed_block = lw.function.append_basic_block("sured_signed")
    unsigned_block = lw.function.append_basic_block("sured_unsigned")
    following = lw.function.append_basic_block("sured_done")
    b.cbranch(signed, signed_block, unsigned_block)
    for block, prefix in ((signed_block, "s"), (unsigned_block, "u")):
        b.position_at_end(block)
        atomic(prefix + operation)
        b.branch(following)
    b.position_at_end(following)
