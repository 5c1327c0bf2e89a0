"""Textures and surfaces (fatkit/translate/lower/texture.py) through HIP's texture/surface object ABI.

The AMD code is checked by its disassembly (LLVM 22's llvm-objdump): which image instruction each PTX one
became, with which dimension and channel mask, and that the descriptors come from the handle at the
offsets HIP's ABI puts them (T# at 0, S# at 48; a .texref's object at byte 72). fatkit.emulate does not
model the image instructions (MIMG), so what the AMD texture units compute is not run here; see
docs/runtime.md, "Textures and surfaces".
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from fatkit.translate.pipeline import Options, lower, parse, passes, translate
from tests.helpers import LLVM_BIN

SAMPLE = Path(__file__).parent / "samples" / "ptx" / "texsurf.sm_80.ptx"
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


def test_texref_is_a_hip_texture_reference_global_read_at_its_texture_object_field(tmp_path):
    text = _KERNEL.format(globals=".global .texref tex0;", body=(
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
    ("tex.a2dms.v4.f32.s32 {%f2, %f3, %f4, %f5}, [%rd1, {%r1, %r1, %r1, %r1}];", "a multisample texture"),
    ("suld.p.2d.v4.f32.zero {%f2, %f3, %f4, %f5}, [%rd1, {%r1, %r1}];", "only .b (raw bits)"),
])
def test_forms_outside_the_abi_are_refused_with_the_reason(body, why):
    text = _KERNEL.format(globals="", body=body)
    options = Options(target="gfx1100")
    (report,) = lower(passes(parse(text, options), options), options).reports
    assert report.status == "unsupported" and why in report.reason, report.reason
