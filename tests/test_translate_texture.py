"""Textures and surfaces (fatkit/translate/lower/texture.py) through HIP's texture/surface object ABI.

The AMD code is checked by its disassembly (LLVM 22's llvm-objdump): which image instruction each PTX one
became, with which dimension and channel mask, and that the descriptors come from the handle at the
offsets HIP's ABI puts them (T# at 0, S# at 48; a .texref's object at byte 72). It also runs on
fatkit.emulate's model of gfx11's image instructions (fatkit/emulate/image.py), against PTX's texturing
rules; docs/runtime.md, "Textures and surfaces", says what that model does not settle.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from fatkit.errors import FatkitError
from fatkit.translate.pipeline import Options, lower, parse, passes, translate
from tests.amdrun import program
from tests.helpers import LLVM_BIN
from verification import textures

SAMPLE = Path(__file__).parent / "samples" / "ptx" / "texsurf.sm_80.ptx"
_H200 = json.loads((Path(textures.__file__).parent / "textures_h200.json").read_text())  # an H200's measurements
OBJDUMP = LLVM_BIN / "llvm-objdump"


def _disassembly(product: bytes, processor: str, tmp_path: Path) -> dict[str, str]:
    """Each kernel's disassembly, by name."""
    if not OBJDUMP.exists():
        pytest.skip("llvm-objdump 22 not installed")
    path = tmp_path / "code.hsaco"
    path.write_bytes(product)
    text = subprocess.run([OBJDUMP, "-d", f"--mcpu={processor}", path], check=True, capture_output=True,
                          text=True).stdout
    return {m.group(1): m.group(2) for m in re.finditer(r"^[0-9a-f]+ <([^>]+)>:\n((?:\t.*\n)+)", text, re.M)}


def _mnemonics(body: str, prefix: str) -> list[str]:
    """`image_sample_lz …dmask:0x1 dim:SQ_RSRC_IMG_2D` → "image_sample_lz 2D dmask:0x1" for each instruction."""
    found = []
    for line in body.splitlines():
        words = line.split()
        if words and words[0].startswith(prefix):
            dim = re.search(r"dim:SQ_RSRC_IMG_(\w+)", line)
            mask = re.search(r"dmask:(0x[0-9a-f]+)", line)
            parts = [words[0]] + ([dim.group(1)] if dim else []) + ([f"dmask:{mask.group(1)}"] if mask else [])
            found.append(" ".join(parts))
    return found


def test_the_sample_translates_for_rdna_with_one_image_instruction_per_texture_instruction(tmp_path):
    translation = translate(SAMPLE.read_text(), Options(target="gfx1100"))
    assert [(k.name, k.status) for k in translation.kernels] == [
        ("_Z8texturesyyyyyP6float4Pi", "ok"), ("_Z8surfacesyyyPi", "ok")]
    bodies = _disassembly(translation.product, "gfx1100", tmp_path)
    textures = bodies["_Z8texturesyyyyyP6float4Pi"]
    # LLVM shrinks the channel masks to the components the kernel stores (one each; tld4 keeps its four)
    assert sorted(_mnemonics(textures, "image_")) == sorted([
        "image_sample_lz 1D dmask:0x1",  # tex.1d.v4.s32.f32: %r3 stored
        "image_sample_lz 2D dmask:0x1",  # tex.2d
        "image_sample_lz 3D dmask:0x1",  # tex.3d
        "image_sample_lz 2D_ARRAY dmask:0x1",  # tex.a2d
        "image_sample_lz CUBE dmask:0x1",  # tex.cube
        "image_sample_l 2D dmask:0x1",  # tex.level.2d
        "image_sample_d_g16 2D dmask:0x1",  # tex.grad.2d (its constant gradients are exact in f16)
        "image_gather4_lz 2D dmask:0x2",  # tld4.g: the green channel of the four texels
    ])
    assert _mnemonics(textures, "buffer_load_format") == ["buffer_load_format_x"]  # tex1Dfetch
    # the five handles: a T# (256 bits) at each handle, an S# (128 bits) at handle + 48 for the samplers
    loads = set(re.findall(r"s_load_(b256|b128) s\[\d+:\d+\], (s\[\d+:\d+\]), (null|0x\w+)", textures))
    samplers = {base for size, base, offset in loads if size == "b128" and offset == "0x30"}
    assert len(samplers) == 5 and all(("b256", base, "null") in loads for base in samplers)

    surfaces = bodies["_Z8surfacesyyyPi"]
    assert _mnemonics(surfaces, "image_load") == ["image_load 2D dmask:0x1", "image_load 1D dmask:0x1",
                                                  "image_load 3D dmask:0xf"]
    assert _mnemonics(surfaces, "image_store") == ["image_store 2D dmask:0x1", "image_store 1D dmask:0x1",
                                                   "image_store 3D dmask:0xf"]
    # .trap accesses read the surface's size first and trap outside it; the .clamp load clamps to it
    assert _mnemonics(surfaces, "image_get_resinfo") == ["image_get_resinfo 2D dmask:0x3",
                                                         "image_get_resinfo 1D dmask:0x1",
                                                         "image_get_resinfo 3D dmask:0x7"]
    assert surfaces.count("s_trap") >= 3


def _lowered_ir(text: str, target: str = "gfx1100") -> str:
    options = Options(target=target)
    lowered = lower(passes(parse(text, options), options), options)
    (report,) = lowered.reports
    assert report.status == "ok", report.reason
    (kernel,) = lowered.kernels
    return kernel.llvm_ir


_KERNEL = """.version 8.0
.target sm_80
.address_size 64
{globals}
.visible .entry k(.param .u64 handle, .param .u64 out)
{{
    .reg .b16 %rs<8>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<16>;
    ld.param.u64 %rd1, [handle];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    cvt.rn.f32.u32 %f1, %r1;
    {body}
    ret;
}}
"""


def test_surface_x_is_a_byte_offset_divided_by_the_element_size():
    """suld.b.2d.v2.b16 reads 4-byte elements: x / 4 is the element index; .zero needs no bounds check."""
    ir_text = _lowered_ir(_KERNEL.format(globals="", body=(
        "suld.b.2d.v2.b16.zero {%rs1, %rs2}, [%rd1, {%r1, %r1}];\n"
        "    st.global.v2.u16 [%rd2], {%rs1, %rs2};")))
    assert re.search(r"sdiv i32 %\S+, 4", ir_text)
    assert "getresinfo" not in ir_text and "llvm.trap" not in ir_text
    assert re.search(r'call <4 x float> @"llvm\.amdgcn\.image\.load\.2d\.v4f32\.i32"\(i32 3,', ir_text)


def test_array_index_comes_first_in_ptx_and_last_in_the_image_instruction():
    ir_text = _lowered_ir(_KERNEL.format(globals="", body=(
        "tex.a1d.v4.f32.f32 {%f2, %f3, %f4, %f5}, [%rd1, {%r1, %f1}];\n"
        "    st.global.f32 [%rd2], %f2;")))
    call = re.search(r'@"llvm\.amdgcn\.image\.sample\.lz\.1darray\.v4f32\.f32"\(i32 15, float (%\S+), float (%\S+),',
                     ir_text)
    assert call, ir_text
    index = re.search(rf"{re.escape(call.group(2))} = uitofp i32", ir_text)
    assert index, "the slice is the PTX array index converted to float"


@pytest.mark.parametrize("declaration", [".global .texref tex0;", ".tex .u32 tex0;"])  # (.tex: PTX 1.x's texref)
def test_texref_is_a_hip_texture_reference_global_read_at_its_texture_object_field(tmp_path, declaration):
    text = _KERNEL.format(globals=declaration, body=(
        "tex.2d.v4.f32.f32 {%f2, %f3, %f4, %f5}, [tex0, {%f1, %f1}];\n"
        "    txq.width.b32 %r2, [tex0];\n"
        "    cvt.rn.f32.u32 %f6, %r2;\n"
        "    add.f32 %f2, %f2, %f6;\n"
        "    st.global.f32 [%rd2], %f2;"))
    translation = translate(text, Options(target="gfx1100"))
    assert translation.kernels[0].status == "ok", translation.kernels[0].reason
    body = _disassembly(translation.product, "gfx1100", tmp_path)["k"]
    symbols = subprocess.run([LLVM_BIN / "llvm-readelf", "--dyn-syms", tmp_path / "code.hsaco"], check=True,
                             capture_output=True, text=True).stdout
    assert re.search(r"\s88 OBJECT\s+GLOBAL\s+DEFAULT\s+\d+ tex0$", symbols, re.M)  # hipModuleGetTexRef finds it
    assert re.search(r"s_load_b64 s\[\d+:\d+\], s\[\d+:\d+\], 0x48", body)  # textureReference.textureObject
    assert _mnemonics(body, "image_get_resinfo") == ["image_get_resinfo 1D dmask:0x1"]


@pytest.mark.parametrize("target, why", [
    ("gfx942", "gfx942 has no image instructions"),
    ("gfx90a", "gfx90a has no image instructions"),
    ("host", "the host target has no texture units"),
])
def test_targets_without_image_instructions_refuse_naming_the_instruction_and_line(target, why):
    text = SAMPLE.read_text()
    options = Options(target=target)
    reports = lower(passes(parse(text, options), options), options).reports
    first_tex = next(n for n, line in enumerate(text.splitlines(), 1) if line.strip().startswith("tex."))
    first_suld = next(n for n, line in enumerate(text.splitlines(), 1) if line.strip().startswith("suld."))
    assert [(r.status, r.line) for r in reports] == [("unsupported", first_tex), ("unsupported", first_suld)]
    assert all(why in r.reason for r in reports), [r.reason for r in reports]


@pytest.mark.parametrize("body, why", [
    ("tex.2d.v4.f32.f32 {%f2, %f3, %f4, %f5}, [%rd1, %rd3, {%f1, %f1}];", "independent texturing mode"),
    ("tex.a2dms.v4.f32.f32 {%f2, %f3, %f4, %f5}, [%rd1, {%r1, %r1, %f1, %f1}];", "the coordinates are .s32"),
    ("tex.cube.v4.f32.s32 {%f2, %f3, %f4, %f5}, [%rd1, {%r1, %r1, %r1, %r1}];", "takes a direction"),
    ("suld.p.2d.v4.f32.zero {%f2, %f3, %f4, %f5}, [%rd1, {%r1, %r1}];", "suld has only .b (raw bits)"),
    ("sust.p.a2d.v4.b32.zero [%rd1, {%r1, %r1, %r1, %r1}], {%r1, %r1, %r1, %r1};", "geometry .a2d is not one"),
    ("sured.p.add.1d.b64.zero [%rd1, {%r1}], %rd1;", "on .b64 (sured.p)"),
])
def test_forms_outside_the_abi_are_refused_with_the_reason(body, why):
    text = _KERNEL.format(globals="", body=body)
    options = Options(target="gfx1100")
    (report,) = lower(passes(parse(text, options), options), options).reports
    assert report.status == "unsupported" and why in report.reason, report.reason


# ------------------------------------------------------------------------------------------------------------
# Running the translated kernels on fatkit.emulate's model of gfx11's image instructions. The descriptors are
# built here the way HIP's runtime lays them out on gfx11 (docs/runtime.md: T# at the object, S# 48 bytes on),
# in one buffer with the texels (256-byte aligned, as a T#'s base must be); the expected values follow the PTX
# ISA's texturing rules (nearest texel, or bilinear filtering of the four around x - 0.5, clamp/wrap/mirror/
# border addressing) with coordinates whose weights are exact in 8 fractional bits, NVIDIA's precision: the
# kernels and the model are verification/textures.py's, which runs them on an H200 as well.

_FLOAT32x4, _FLOAT32, _UINT32, _UINT8x4 = 63, 22, 20, 46  # AMD unified format codes
_SEL_XYZW = 4 | 5 << 3 | 6 << 6 | 7 << 9
_SEL_X001 = 4 | 0 << 3 | 0 << 6 | 1 << 9
_ADDRESS = {"wrap": 0, "mirror": 1, "clamp": 2, "border": 6}
_OBJECT_BYTES = 80  # 12 dwords of image object, 8 of sampler


def _texture_object(texels: np.ndarray, code: int, selects: int, *, layers: int = 0, address: str = "clamp",
                    linear: bool = False, unnormalized: bool = False) -> np.ndarray:
    """One buffer: HIP's texture object (T#, its query words, S#) and, 256-aligned after it, the texels
    (rows of texels.shape[-2] elements; a linear texture's V# when `linear`)."""
    element = texels.dtype.itemsize * (texels.shape[-1] if texels.ndim >= 2 and code != _FLOAT32 else 1)
    data = np.ascontiguousarray(texels).view(np.uint8).reshape(-1)
    buffer = np.zeros(_OBJECT_BYTES + 512 + data.size, dtype=np.uint8)
    start = buffer.ctypes.data
    base = (start + _OBJECT_BYTES + 255) // 256 * 256
    buffer[base - start:base - start + data.size] = data
    words = np.zeros(20, dtype=np.uint32)
    if linear:
        count = data.size // element
        words[:4] = [base & 0xFFFFFFFF, (base >> 32) & 0xFFFF | element << 16, count, selects | code << 12]
    else:
        height, width = (texels.shape[-3], texels.shape[-2]) if code != _FLOAT32 else texels.shape[-2:]
        if layers:
            height = texels.shape[-3] if code != _FLOAT32 else texels.shape[-2]
        kind = 13 if layers else 9  # SQ_RSRC_IMG_2D_ARRAY, _2D
        words[0] = (base >> 8) & 0xFFFFFFFF
        words[1] = (base >> 40) & 0xFF | code << 20 | ((width - 1) & 3) << 30
        words[2] = ((width - 1) >> 2) & 0xFFF | (height - 1) << 14
        words[3] = selects | kind << 28
        words[4] = layers - 1 if layers else width - 1  # arrays: the last layer; 2D: the pitch - 1
        words[10] = width
    mode = _ADDRESS[address]
    words[12] = mode | mode << 3 | mode << 6 | int(unnormalized) << 15
    words[14] = 1 << 20 | 1 << 22  # bilinear magnification and minification
    buffer[:_OBJECT_BYTES] = words.view(np.uint8)
    return buffer


@pytest.mark.parametrize("address", ["clamp", "wrap", "mirror", "border"])
def test_bilinear_tex_2d_on_the_emulated_gfx1100(address):
    texels = textures.bilinear_texels()
    obj = _texture_object(texels, _FLOAT32x4, _SEL_XYZW, address=address)
    us, vs = textures.BILINEAR_U, textures.BILINEAR_V  # weights exact in 8 fractional bits
    coords = np.array(list(zip(us, vs)), dtype=np.float32).reshape(-1)
    out = np.full((len(us), 4), np.nan, dtype=np.float32)
    text = textures.SAMPLING.replace("{instruction}", textures.TEX_2D)
    program(text, "gfx1100").launch("sample", [obj, coords, out], block=(len(us), 1, 1))
    for lane, (u, v) in enumerate(zip(us, vs)):
        expected = textures.ptx_sample(texels, u, v, address).astype(np.float32)
        np.testing.assert_array_equal(out[lane], expected, err_msg=f"lane {lane}: ({u}, {v})")


def test_tld4_gathers_the_component_of_the_four_texels_in_ptx_order():
    texels = np.arange(4 * 4 * 4, dtype=np.float32).reshape(4, 4, 4)
    obj = _texture_object(texels, _FLOAT32x4, _SEL_XYZW)
    coords = np.array([0.375, 0.375, 0.625, 0.875], dtype=np.float32)  # texel centres (1,1)…(2,2) and (2,3)…
    out = np.zeros((2, 4), dtype=np.float32)
    text = textures.SAMPLING.replace("{instruction}", textures.TLD4_G)
    program(text, "gfx1100").launch("sample", [obj, coords, out], block=(2, 1, 1))
    for lane, (u, v) in enumerate([(0.375, 0.375), (0.625, 0.875)]):
        assert list(out[lane]) == textures.gather_order(texels, u, v, 1)  # the green channel


def test_tex1dfetch_reads_a_linear_texture_through_its_buffer_descriptor():
    values = np.array([1.5, -2.0, np.inf, 7.25, 0.0, -0.0, 3.0, 1e-40], dtype=np.float32)
    obj = _texture_object(values.reshape(-1, 1), _FLOAT32, _SEL_X001, linear=True)
    indices = np.array([[i, 0] for i in (0, 1, 2, 3, 7, 8, 100, 5)], dtype=np.int32).reshape(-1).view(np.float32)
    out = np.full((8, 4), np.nan, dtype=np.float32)
    text = textures.SAMPLING.replace("{instruction}", textures.FETCH_1D)
    program(text, "gfx1100").launch("sample", [obj, indices, out], block=(8, 1, 1))
    # HIP's V# selects (x, 0, 0, 1) for one channel, OpenCL's rule; the kernel reads w as 0 all the same, as an
    # H200 does (its measured bits, verification/textures_h200.json); an index past the buffer reads 0
    expected = [[values[i], 0, 0, 0] if i < 8 else [0, 0, 0, 0] for i in (0, 1, 2, 3, 7, 8, 100, 5)]
    np.testing.assert_array_equal(out, np.array(expected, dtype=np.float32))
    measured = next(r for r in _H200 if r["case"] == "tex1Dfetch of a float1 linear texture")["measured_bits"]
    assert out.view(np.uint32).tolist() == [[int(b, 16) for b in row] for row in measured]


def test_array_layer_and_txq_sizes_on_the_emulated_gfx1100():
    texels = np.stack([np.full((2, 4, 4), layer + 1, dtype=np.float32) for layer in range(3)])
    texels[1, 1, 2] = [9, 8, 7, 6]
    obj = _texture_object(texels, _FLOAT32x4, _SEL_XYZW, layers=3, unnormalized=True)
    coords = np.array([2.5, 1.5, 0.5, 0.5], dtype=np.float32)
    out = np.zeros((2, 4), dtype=np.float32)
    text = textures.SAMPLING.replace("{instruction}", "mov.u32 %r2, %tid.x;\n    "
                             "tex.a2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%r2, %f1, %f2, %f2}];\n    "
                             "txq.width.b32 %r3, [%rd1];\n    cvt.rn.f32.u32 %f7, %r3;")
    text = text.replace("mov.u32 %r2, %tid.x;", "add.u32 %r2, %r1, %r1;")  # layers 0 and 2
    program(text, "gfx1100").launch("sample", [obj, coords, out], block=(2, 1, 1))
    # unnormalised (2.5, 1.5) is texel (2, 1)'s centre in layer 0; (0.5, 0.5) texel (0, 0) in layer 2
    assert list(out[0]) == [1, 1, 1, 4] and list(out[1]) == [3, 3, 3, 4]  # w: txq.width = 4


def test_surface_loads_and_stores_address_bytes_and_clamp_or_zero_outside():
    texels = np.arange(3 * 4, dtype=np.uint32).reshape(3, 4, 1) * 10 + 1
    surface = _texture_object(texels, _UINT32, _SEL_X001)
    out = np.zeros(6, dtype=np.uint32)
    kernel = program(textures.SURFACE.replace("{body}", textures.CLAMP_AND_ZERO), "gfx1100")
    kernel.launch("surface", [surface, out], block=(6, 1, 1))
    clamped = [int(texels[min(t, 2), min(t, 3), 0]) for t in range(6)]
    assert list(out) == [clamped[t] + 1000 if t < 4 else 0 for t in range(6)]


def test_a_surface_access_outside_traps_with_trap():
    texels = np.zeros((2, 2, 4), dtype=np.uint8)
    surface = _texture_object(texels, _UINT8x4, _SEL_XYZW)
    body = "suld.b.2d.v4.b8.trap {%rs1, %rs2, %rs3, %rs4}, [%rd1, {%r2, 0}];\n    cvt.u32.u16 %r5, %rs1;"
    with pytest.raises(FatkitError, match="trapped"):
        kernel = program(textures.SURFACE.replace("{body}", body), "gfx1100")
        kernel.launch("surface", [surface, np.zeros(4, np.uint32)], block=(3, 1, 1))


def test_surface_reductions_are_image_atomics_on_the_emulated_gfx1100():
    """32 threads reduce into 4 elements: add into row 0, signed max into row 5 (.clamp: the last row, 2)."""
    texels = np.array([[7, 0, 0, 0], [1, 2, 3, 4], [-50, 100, -1, 20]], dtype=np.int32).view(np.uint32)[..., None]
    surface = _texture_object(texels.copy(), _UINT32, _SEL_X001)
    text = """.version 8.0
.target sm_80
.address_size 64
.visible .entry reduce(.param .u64 surf)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [surf];
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 3;
    shl.b32 %r3, %r2, 2;
    sub.s32 %r4, 10, %r1;
    sured.b.add.2d.u32.zero [%rd1, {%r3, 0}], %r1;
    sured.b.max.2d.s32.clamp [%rd1, {%r3, 5}], %r4;
    sured.b.add.2d.u32.zero [%rd1, {%r3, 7}], %r1;
    ret;
}
"""
    program(text, "gfx1100").launch("reduce", [surface], block=(32, 1, 1))
    base = (surface.ctypes.data + 80 + 255) // 256 * 256 - surface.ctypes.data
    after = surface[base:base + texels.nbytes].view(np.int32).reshape(3, 4)
    start = texels[..., 0].view(np.int32)
    added = [int(start[0, i]) + sum(t for t in range(32) if t & 3 == i) for i in range(4)]
    maxima = [max(int(start[2, i]), max(10 - t for t in range(32) if t & 3 == i)) for i in range(4)]
    assert after[0].tolist() == added and after[2].tolist() == maxima  # row 7 is outside: .zero drops it
    assert after[1].tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize("address, unnormalized, expected", [
    ("mirror", True, [0, 1, 2, 3]),  # x mirror, y (patched below) border; bilinear
    ("wrap", False, [1, 1, 0, 3]),
    ("clamp", False, [1, 1, 1, 3]),
])
def test_txq_reads_the_sampler_state_in_cudas_enumerations(address, unnormalized, expected):
    obj = _texture_object(np.zeros((2, 2, 4), np.float32), _FLOAT32x4, _SEL_XYZW, address=address,
                          unnormalized=unnormalized)
    words = obj[:_OBJECT_BYTES].view(np.uint32)
    words[12] = (words[12] & ~np.uint32(0x38)) | np.uint32(_ADDRESS["border"] << 3)  # y: border
    text = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 t, .param .u64 out)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [t];
    ld.param.u64 %rd2, [out];
    txq.normalized_coords.b32 %r1, [%rd1];
    txq.filter_mode.b32 %r2, [%rd1];
    txq.addr_mode_0.b32 %r3, [%rd1];
    txq.addr_mode_1.b32 %r4, [%rd1];
    suq.memory_layout.b32 %r5, [%rd1];
    st.global.v4.u32 [%rd2], {%r1, %r2, %r3, %r4};
    st.global.u32 [%rd2+16], %r5;
    ret;
}
"""
    out = np.full(5, 99, dtype=np.uint32)
    program(text, "gfx1100").launch("k", [obj, out], block=(1, 1, 1))
    # normalized, linear filtering (1), addr_mode_0, addr_mode_1 (border: 3); the image is linear (1)
    assert out.tolist() == expected + [1]
    words[3] |= np.uint32(9 << 20)  # a tiled swizzle mode: not linear
    program(text, "gfx1100").launch("k", [obj, out], block=(1, 1, 1))
    assert out[4] == 0
