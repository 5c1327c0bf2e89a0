"""Textures and surfaces (`tex`, `tld4`, `txq`, `suld`, `sust`, `suq`) through HIP's texture/surface objects.

The ABI is HIP's, which ZLUDA passes through unchanged (docs/runtime.md, "Textures and surfaces"): a texture
or surface object (a `.u64` kernel parameter, `cudaTextureObject_t`) is the address, in constant memory, of
the image's 8-dword resource descriptor (T#), followed by 4 dwords HIP writes for queries, and — texture
objects only — the sampler descriptor (S#, 4 dwords used) at dword 12. A `.texref`/`.surfref` (or a `.tex`
variable, PTX 1.x's spelling of a `.texref`) is a global of
HIP's `textureReference` (88 bytes), whose 64-bit `textureObject` at byte 72 is such an address; HIP's
hipModuleGetTexRef finds it by name and the runtime fills it when a texture is bound.

The AMD image instructions do the sampling the PTX ISA describes (filtering, addressing modes, normalised
coordinates, format conversion) as the S# and T# say, so each instruction is one `llvm.amdgcn.image.*`
call: `tex` samples at level 0 (compute has no derivatives), `.level` at a given level, `.grad` with given
gradients; `tld4` is a gather of one component; a 1-D fetch with integer coordinates (`tex1Dfetch`, a
texture over linear memory) is a formatted buffer load through the T#'s first 4 dwords, which HIP makes a
buffer descriptor (V#) for linear textures; `txq`/`suq` sizes are `image_get_resinfo`. Surfaces take the x
coordinate in bytes (the PTX ISA), the image the element index: x is divided by the element's size.
GCN/CDNA processors (gfx9 and earlier, gfx942 among them) have no image instructions and HIP makes no
texture objects for them, so these instructions are refused there.
"""

from __future__ import annotations

from llvmlite import ir

from fatkit.translate.lower.core import F32, I1, I16, I32, I64, I8, Lowering, handles
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
             "a1d": ("1darray", 1, True), "a2d": ("2darray", 2, True), "cube": ("cube", 3, False)}
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


def _check_target(lw: Lowering) -> None:
    target_id = getattr(lw.target, "id", None)
    if target_id is None or getattr(target_id, "vendor", None) != "amd":
        raise lw.fail(f"the {lw.target.name} target has no texture units: textures and surfaces translate for "
                      "AMD RDNA processors (gfx10 and later) only")
    if target_id.generation < 10:
        raise lw.fail(f"{lw.target.name} has no image instructions (GCN/CDNA, gfx9 and earlier), and HIP creates "
                      "no texture or surface objects for it")


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
    found = [m for m in ins.modifiers if m in _GEOMETRY or m in ("acube", "2dms", "a2dms")]
    if len(found) != 1:
        raise lw.fail("expected one geometry (.1d, .2d, .3d, .a1d, .a2d, .cube)")
    if found[0] not in allowed:
        raise lw.fail(f"geometry .{found[0]} is not translated: a cube-map array needs its layer folded into "
                      "the face index, a multisample texture a sample index, which this lowering does not derive"
                      if found[0] in ("acube", "2dms", "a2dms") else f"geometry .{found[0]} is not valid here")
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
    needed = count + arrayed
    if len(items) < needed:
        raise lw.fail(f"a .{geometry} access takes {needed} coordinates")
    integer = ctype == "s32"
    coords = [lw.read(item, "s32" if integer else "f32") for item in items[arrayed:arrayed + count]]
    if arrayed:
        index = lw.read(items[0], "u32")
        coords.append(index if integer else lw.builder.uitofp(index, F32))
    return coords, integer


def _cube_coordinates(lw: Lowering, direction: list[ir.Value]) -> list[ir.Value]:
    """A cube map's direction → (s, t, face) as the image instruction takes them: the face and the face
    coordinates of the major axis (v_cubeid/sc/tc/ma), the latter scaled to [1, 2]."""
    x, y, z = direction
    parts = [_call(lw, f"llvm.amdgcn.cube{p}", F32, [x, y, z]) for p in ("sc", "tc", "ma", "id")]
    sc, tc, ma, face = parts
    inverse = lw.builder.fdiv(ir.Constant(F32, 1.0), lw.intrinsic("llvm.fabs", [ma]))
    s = lw.builder.fadd(lw.builder.fmul(sc, inverse), ir.Constant(F32, 1.5))
    t = lw.builder.fadd(lw.builder.fmul(tc, inverse), ir.Constant(F32, 1.5))
    return [s, t, face]


def _write_results(lw: Lowering, operand: ast.Operand, components: list[ir.Value], ptx_type: str) -> None:
    items = _items(lw, operand, "destination")
    for item, value in zip(items, components):
        if type(item) is ast.Name and item.name == "_":
            continue
        lw.write(item, value, ptx_type)


def _components(lw: Lowering, vector: ir.Value, dtype: str) -> list[ir.Value]:
    values = [lw.builder.extract_element(vector, ir.Constant(I32, i)) for i in range(4)]
    if dtype == "f32":
        return values
    return [lw.builder.bitcast(v, I32) for v in values]


_TAIL = [ir.Constant(I1, 0), ir.Constant(I32, 0), ir.Constant(I32, 0)]  # unorm (S# decides), texfail, cache


@handles("tex")
def tex(lw, ins):
    """tex.geom.v4.dtype.ctype d, [t, c] (+ lod for .level, dPdx, dPdy for .grad): one sample."""
    _check_target(lw)
    geometry = _geometry(lw, ins, tuple(_GEOMETRY))
    lw.check_modifiers(ins, {"v4", "level", "grad", "base", *_GEOMETRY})
    types = [m for m in ins.modifiers if m in ast.TYPES]
    if len(types) != 2 or types[0] not in ("f32", "s32", "u32") or types[1] not in ("f32", "s32") \
            or "v4" not in ins.modifiers:
        raise lw.fail("expected .v4 and a result type .f32/.s32/.u32 and a coordinate type .f32/.s32")
    dtype, ctype = types
    mode = "level" if "level" in ins.modifiers else "grad" if "grad" in ins.modifiers else "lz"
    extra = {"lz": 0, "level": 1, "grad": 2}[mode]
    operands = lw.operands(ins, 2 + extra)
    if type(operands[0]) is ast.Pair:
        raise lw.fail("the resident-texel predicate (sparse textures) has no AMD counterpart HIP exposes")
    pointer = _object(lw, operands[1])
    coords, integer = _coordinates(lw, operands[1], geometry, ctype)
    rsrc = _descriptor(lw, pointer, 0, _RSRC)
    dim = _GEOMETRY[geometry][0]
    if integer:
        if mode != "lz":
            raise lw.fail("integer coordinates fetch one texel: .level and .grad need .f32 coordinates")
        if geometry == "1d":  # tex1Dfetch: a texture over linear memory, a buffer; HIP gives its V# first
            buffer = _descriptor(lw, pointer, 0, _SAMPLER)
            result = _call(lw, "llvm.amdgcn.struct.buffer.load.format.v4f32", _V4F32,
                           [buffer, coords[0], ir.Constant(I32, 0), ir.Constant(I32, 0), ir.Constant(I32, 0)])
        else:  # texel indices: no filtering
            result = _call(lw, f"llvm.amdgcn.image.load.{dim}.v4f32.i32", _V4F32,
                           [ir.Constant(I32, 15), *coords, rsrc, ir.Constant(I32, 0), ir.Constant(I32, 0)])
        _write_results(lw, operands[0], _components(lw, result, dtype), "f32" if dtype == "f32" else "b32")
        return
    sampler = _descriptor(lw, pointer, SAMPLER_OFFSET, _SAMPLER)
    if geometry == "cube":
        coords = _cube_coordinates(lw, coords)
    dmask = ir.Constant(I32, 15)
    if mode == "lz":
        name, args = f"llvm.amdgcn.image.sample.lz.{dim}.v4f32.f32", [dmask, *coords]
    elif mode == "level":
        name, args = f"llvm.amdgcn.image.sample.l.{dim}.v4f32.f32", [dmask, *coords, lw.read(operands[2], "f32")]
    else:
        if geometry == "cube":
            raise lw.fail("gradients of a cube map: the face-space derivatives are not derived")
        count = _GEOMETRY[geometry][1]
        gradients = []
        for operand in operands[2:4]:
            items = _items(lw, operand, "gradient")
            if len(items) < count:
                raise lw.fail(f"a .{geometry} gradient has {count} components")
            gradients += [lw.read(item, "f32") for item in items[:count]]
        name, args = f"llvm.amdgcn.image.sample.d.{dim}.v4f32.f32.f32", [dmask, *gradients, *coords]
    result = _call(lw, name, _V4F32, [*args, rsrc, sampler, *_TAIL])
    _write_results(lw, operands[0], _components(lw, result, dtype), "f32" if dtype == "f32" else "b32")


@handles("tld4")
def tld4(lw, ins):
    """tld4.comp.2d.v4.dtype.f32 d, [t, c]: one component of the four texels bilinear filtering would
    read, in the order both ISAs give (-u +v, +u +v, +u -v, -u -v)."""
    _check_target(lw)
    components = [c for c in ("r", "g", "b", "a") if c in ins.modifiers]
    geometry = _geometry(lw, ins, ("2d", "a2d"))
    lw.check_modifiers(ins, {"v4", "r", "g", "b", "a", *_GEOMETRY})
    types = [m for m in ins.modifiers if m in ast.TYPES]
    if len(components) != 1 or types[1:] != ["f32"] or types[0] not in ("f32", "s32", "u32"):
        raise lw.fail("expected one component (.r/.g/.b/.a), .v4, a result type and .f32 coordinates")
    operands = lw.operands(ins, 2)
    if type(operands[0]) is ast.Pair:
        raise lw.fail("the resident-texel predicate (sparse textures) has no AMD counterpart HIP exposes")
    pointer = _object(lw, operands[1])
    coords, _ = _coordinates(lw, operands[1], geometry, "f32")
    rsrc, sampler = _descriptor(lw, pointer, 0, _RSRC), _descriptor(lw, pointer, SAMPLER_OFFSET, _SAMPLER)
    dmask = ir.Constant(I32, 1 << "rgba".index(components[0]))
    result = _call(lw, f"llvm.amdgcn.image.gather4.lz.{_GEOMETRY[geometry][0]}.v4f32.f32", _V4F32,
                   [dmask, *coords, rsrc, sampler, *_TAIL])
    _write_results(lw, operands[0], _components(lw, result, types[0]), "f32" if types[0] == "f32" else "b32")


def _resinfo(lw: Lowering, rsrc: ir.Value, dim: str, level: ir.Value) -> list[ir.Value]:
    """image_get_resinfo: width, height, depth (or array size) at `level`, and the number of levels."""
    result = _call(lw, f"llvm.amdgcn.image.getresinfo.{dim}.v4f32.i32", _V4F32,
                   [ir.Constant(I32, 15), level, rsrc, ir.Constant(I32, 0), ir.Constant(I32, 0)])
    return [lw.builder.bitcast(lw.builder.extract_element(result, ir.Constant(I32, i)), I32) for i in range(4)]


def _query(lw: Lowering, ins: ast.Instruction, extra: set[str]) -> None:
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
    """The T#, the integer coordinates (x as an element index) and the element's type of a suld/sust."""
    _check_target(lw)
    if "b" not in ins.modifiers:
        raise lw.fail("only .b (raw bits) surface accesses are translated; .p converts through the surface's "
                      "format, which PTX defines per format and this lowering does not")
    lw.check_modifiers(ins, {"b", "v2", "v4", "trap", "clamp", "zero", "ca", "cg", "cs", "cv", "wb", "wt",
                             *_SURFACE_GEOMETRY})
    geometry = _geometry(lw, ins, _SURFACE_GEOMETRY)
    types = [m for m in ins.modifiers if m in _SURFACE_TYPES]
    if len(types) != 1:
        raise lw.fail("expected one of .b8, .b16, .b32, .b64")
    count = 4 if "v4" in ins.modifiers else 2 if "v2" in ins.modifiers else 1
    dtype = types[0]
    channels = count * (2 if dtype == "b64" else 1)
    if channels > 4:
        raise lw.fail("a vector of .b64 wider than two elements is not a surface access")
    coords, _ = _coordinates(lw, address, geometry, "s32")
    element = _SURFACE_TYPES[dtype] * count
    coords[0] = lw.builder.sdiv(coords[0], ir.Constant(I32, element))  # bytes → element index
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
    fault = lw.function.append_basic_block("surface_out_of_range")
    following = lw.function.append_basic_block("surface_in_range")
    b.cbranch(outside, fault, following)
    b.position_at_end(fault)
    lw.target.trap(b, None)
    lw.stop_thread()
    b.position_at_end(following)
    return coords


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
    """sust.b.geom[.vec].btype.mode [s, c], a: raw elements stored, one image channel per element."""
    operands = lw.operands(ins, 2)
    rsrc, coords, dim, dtype, count, channels = _surface_access(lw, ins, operands[0])
    items = _items(lw, operands[1], "source")
    if len(items) != count:
        raise lw.fail(f"expected {count} source registers")
    words: list[ir.Value] = []
    for item in items:
        value = lw.read(item, dtype)
        if dtype == "b64":
            words += [lw.builder.trunc(value, I32), lw.builder.trunc(lw.builder.lshr(value, ir.Constant(I64, 32)),
                                                                      I32)]
        else:
            words.append(value if dtype == "b32" else lw.builder.zext(value, I32))
    data = ir.Constant(_V4F32, ir.Undefined)
    for index, word in enumerate(words):
        data = lw.builder.insert_element(data, lw.builder.bitcast(word, F32), ir.Constant(I32, index))
    _call(lw, f"llvm.amdgcn.image.store.{dim}.v4f32.i32", ir.VoidType(),
          [data, ir.Constant(I32, (1 << channels) - 1), *coords, rsrc, ir.Constant(I32, 0), ir.Constant(I32, 0)])


# sured's operation and type → the image atomic's (32-bit only: fatkit does not emit 64-bit image atomics)
_REDUCTIONS = {("add", "u32"): "add", ("add", "s32"): "add", ("min", "u32"): "umin", ("min", "s32"): "smin",
               ("max", "u32"): "umax", ("max", "s32"): "smax", ("and", "b32"): "and", ("or", "b32"): "or"}


@handles("sured")
def sured(lw, ins):
    """sured.b.op.geom.ctype.mode [s, c], a: an atomic reduction into one 32-bit surface element (the image
    atomics); the old value is not returned, as PTX has none."""
    _check_target(lw)
    if "b" not in ins.modifiers:
        raise lw.fail("only .b surface reductions are translated; .p addresses elements of the surface's format")
    operation = next((m for m in ins.modifiers if m in ("add", "min", "max", "and", "or")), None)
    types = [m for m in ins.modifiers if m in ast.TYPES]
    if operation is None or len(types) != 1 or (operation, types[0]) not in _REDUCTIONS:
        raise lw.fail("expected .add/.min/.max on .u32/.s32 or .and/.or on .b32; 64-bit surface reductions are "
                      "not lowered (fatkit emits only 32-bit image atomics)")
    geometry = _geometry(lw, ins, _SURFACE_GEOMETRY)
    lw.check_modifiers(ins, {"b", operation, "trap", "clamp", "zero", *_SURFACE_GEOMETRY})
    address, value = lw.operands(ins, 2)
    coords, _ = _coordinates(lw, address, geometry, "s32")
    coords[0] = lw.builder.sdiv(coords[0], ir.Constant(I32, 4))  # bytes → element index
    rsrc = _descriptor(lw, _object(lw, address), 0, _RSRC)
    dim = _GEOMETRY[geometry][0]
    mode = next((m for m in ("trap", "clamp", "zero") if m in ins.modifiers), "trap")
    if mode != "zero":
        coords = _out_of_range(lw, rsrc, dim, coords, mode)
    _call(lw, f"llvm.amdgcn.image.atomic.{_REDUCTIONS[operation, types[0]]}.{dim}.i32.i32", I32,
          [lw.read(value, types[0]), *coords, rsrc, ir.Constant(I32, 0), ir.Constant(I32, 0)])
