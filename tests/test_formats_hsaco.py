"""AMDGPU code objects: our reader against llvm-readobj/llvm-objdump 22 on objects clang-22 builds, and corpus."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fatkit.errors import FormatError
from fatkit.formats.hsaco import (
    ET_DYN, ET_REL, MACH_NAMES, CodeObject, format_target_id, parse_code_object, split_target_id,
    target_id_from_flags,
)
from fatkit.formats.offload_bundle import bundle_payload, decompress_ccob, find_bundles, parse_bundle, parse_ccob
from tests.corpus import corpus_file
from tests.helpers import CLANG, LLVM_BIN, SAMPLES, clang22, hip_device_object, mapped, sample

READOBJ = LLVM_BIN / "llvm-readobj"
OBJDUMP = LLVM_BIN / "llvm-objdump"
LLC14 = shutil.which("llc-14")  # the last LLVM that writes code objects v2 and v3 (Debian llvm-14)

needs_llvm = pytest.mark.skipif(not (CLANG.exists() and READOBJ.exists() and OBJDUMP.exists()),
                                reason="clang-22 / llvm-readobj-22 / llvm-objdump-22 not installed")

HIP_SOURCE = """
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
struct Big { double d[6]; };
extern "C" __global__ void add(float *out, const float *a, int n) {
  int i = __builtin_amdgcn_workitem_id_x();
  if (i < n) out[i] = a[i] + 1.0f;
}
__global__ void mixed(Big b, short s, int *p) {
  __shared__ int lds[64];
  lds[__builtin_amdgcn_workitem_id_x()] = s;
  __builtin_amdgcn_s_barrier();
  *p = (int)b.d[2] + lds[3];
}
extern "C" __global__ void empty() {}
"""
OPENCL_SOURCE = "kernel void scale(global float *x, float f) { x[__builtin_amdgcn_workitem_id_x()] *= f; }\n"

# (offload arch, code object version); "rel" = a relocatable object from `-c`
VARIANTS = [("gfx90a:xnack+", 4), ("gfx90a:xnack+", 5), ("gfx90a:xnack+", 6), ("gfx942:sramecc+:xnack-", 5),
            ("gfx1100", 6), ("gfx942", "rel")]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict[tuple[str, object], Path]:
    clang = clang22()
    work = tmp_path_factory.mktemp("hsaco")
    (work / "k.hip").write_text(HIP_SOURCE)
    (work / "k.cl").write_text(OPENCL_SOURCE)
    out = {}
    for arch, version in VARIANTS:
        path = work / f"{arch.replace(':', '_')}_{version}.o"
        if version == "rel":
            subprocess.run([str(clang), "--target=amdgcn-amd-amdhsa", f"-mcpu={arch}", "-nogpulib", "-O2", "-c",
                            str(work / "k.cl"), "-o", str(path)], check=True, capture_output=True)
        else:
            hip_device_object(work / "k.hip", arch, path, f"-mcode-object-version={version}", "-O2")
        out[(arch, version)] = path
    return out


def readobj(path: Path) -> dict:
    result = subprocess.run([str(READOBJ), "--elf-output-style=JSON", "--file-headers", "--sections", "--notes",
                             "--symbols", "--dyn-symbols", str(path)], check=True, capture_output=True, text=True)
    return json.loads(result.stdout)[0]


def objdump_descriptor(path: Path, kd_symbol: str) -> dict[str, int]:
    result = subprocess.run([str(OBJDUMP), "-D", f"--disassemble-symbols={kd_symbol}", str(path)],
                            check=True, capture_output=True, text=True)
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s*(\.amdhsa_\w+) (-?\d+)$", result.stdout, re.M)}


def llvm_symbols(info: dict) -> dict[str, dict]:
    table = info.get("DynamicSymbols") or info.get("Symbols") or []
    return {s["Symbol"]["Name"]["Name"]: s["Symbol"] for s in table}


# ---- against clang-22 output ---------------------------------------------------------------------------------

@needs_llvm
@pytest.mark.parametrize("arch, version", VARIANTS)
def test_target_and_header_agree_with_llvm(compiled, arch, version):
    path = compiled[(arch, version)]
    info = readobj(path)
    co = parse_code_object(path.read_bytes())
    header = info["ElfHeader"]
    assert co.e_flags == header["Flags"]["Value"]
    assert co.code_object_version == header["Ident"]["ABIVersion"] + 2 == (6 if version == "rel" else version)
    assert co.e_type == (ET_REL if version == "rel" else ET_DYN)
    assert co.target_id == arch
    assert co.processor == arch.split(":")[0]
    flag_names = {flag["Name"] for flag in header["Flags"]["Flags"]}
    assert f"EF_AMDGPU_MACH_AMDGCN_{co.processor.upper()}" in flag_names
    for feature, setting in (("XNACK", co.xnack), ("SRAMECC", co.sramecc)):
        if setting is None:
            assert not any(name.startswith(f"EF_AMDGPU_FEATURE_{feature}") for name in flag_names)
        else:
            assert f"EF_AMDGPU_FEATURE_{feature}_{setting.upper()}_V4" in flag_names
    assert co.metadata["amdhsa.target"] == "amdgcn-amd-amdhsa--" + arch


@needs_llvm
@pytest.mark.parametrize("arch, version", VARIANTS)
def test_metadata_equals_llvm_readobj_notes(compiled, arch, version):
    yaml = pytest.importorskip("yaml")
    path = compiled[(arch, version)]
    notes = [note for section in readobj(path)["NoteSections"] for note in section["NoteSection"]["Notes"]]
    llvm_metadata = yaml.safe_load(next(n["AMDGPU Metadata"] for n in notes if "AMDGPU Metadata" in n))
    co = parse_code_object(path.read_bytes())
    assert co.metadata == llvm_metadata
    assert [k.name for k in co.kernels] == [k[".name"] for k in llvm_metadata["amdhsa.kernels"]]


@needs_llvm
@pytest.mark.parametrize("arch, version", VARIANTS)
def test_kernels_and_descriptors_agree_with_symbols_and_objdump(compiled, arch, version):
    path = compiled[(arch, version)]
    info = readobj(path)
    symbols = llvm_symbols(info)
    sections = {s["Section"]["Index"]: s["Section"] for s in info["Sections"]}
    co = parse_code_object(path.read_bytes())
    expected_names = ["scale"] if version == "rel" else ["add", "_Z5mixed3BigsPi", "empty"]
    assert [k.name for k in co.kernels] == expected_names
    assert sorted(d.name for d in co.descriptors) == sorted(expected_names)
    wave = 32 if arch == "gfx1100" else 64
    for kernel in co.kernels:
        kd = next(d for d in co.descriptors if d.name == kernel.name)
        assert kernel.symbol == kernel.name + ".kd"
        assert kernel.wavefront_size == wave and kd.wavefront32 == (wave == 32)
        assert (kd.kernarg_size, kd.group_segment_fixed_size, kd.private_segment_fixed_size) == (
            kernel.kernarg_size, kernel.group_segment_size, kernel.private_segment_size)
        kd_symbol, entry_symbol = symbols[kernel.symbol], symbols[kernel.name]
        assert kd_symbol["Size"] == 64
        section = sections[kd_symbol["Section"]["Value"]]
        relative = kd_symbol["Value"] - (0 if version == "rel" else section["Address"])
        assert kd.offset == section["Offset"] + relative
        if version != "rel":  # in a relocatable object the entry offset is left to a relocation
            assert kd_symbol["Value"] + kd.entry_offset == entry_symbol["Value"]
        directives = objdump_descriptor(path, kernel.symbol)
        ours = {
            ".amdhsa_group_segment_fixed_size": kd.group_segment_fixed_size,
            ".amdhsa_private_segment_fixed_size": kd.private_segment_fixed_size,
            ".amdhsa_kernarg_size": kd.kernarg_size,
            ".amdhsa_float_denorm_mode_32": kd.rsrc1 >> 16 & 3,
            ".amdhsa_float_denorm_mode_16_64": kd.rsrc1 >> 18 & 3,
            ".amdhsa_dx10_clamp": kd.rsrc1 >> 21 & 1,
            ".amdhsa_ieee_mode": kd.rsrc1 >> 23 & 1,
            ".amdhsa_system_sgpr_workgroup_id_x": kd.rsrc2 >> 7 & 1,
            ".amdhsa_system_vgpr_workitem_id": kd.rsrc2 >> 11 & 3,
            ".amdhsa_user_sgpr_kernarg_segment_ptr": kd.code_properties >> 3 & 1,
            ".amdhsa_uses_dynamic_stack": kd.code_properties >> 11 & 1,
            ".amdhsa_wavefront_size32": int(kd.wavefront32),
            ".amdhsa_accum_offset": ((kd.rsrc3 & 0x3F) + 1) * 4,
        }
        compared = {key: value for key, value in ours.items() if key in directives}
        assert len(compared) >= 8
        assert compared == {key: directives[key] for key in compared}


@needs_llvm
def test_kernel_arguments_follow_the_signature(compiled):
    co = parse_code_object(compiled[("gfx90a:xnack+", 5)].read_bytes())
    mixed = next(k for k in co.kernels if k.name == "_Z5mixed3BigsPi")
    assert [(a[".offset"], a[".size"], a[".value_kind"]) for a in mixed.args] == [
        (0, 48, "by_value"), (48, 2, "by_value"), (56, 8, "global_buffer")]
    assert (mixed.kernarg_size, mixed.kernarg_align, mixed.group_segment_size) == (64, 8, 256)
    empty = next(k for k in co.kernels if k.name == "empty")
    assert empty.args == () and empty.kernarg_size == 0


@needs_llvm
def test_notes_found_through_program_headers_when_sections_are_stripped(compiled):
    data = bytearray(compiled[("gfx90a:xnack+", 5)].read_bytes())
    struct.pack_into("<Q", data, 0x28, 0)  # e_shoff
    struct.pack_into("<HHH", data, 0x3A, 64, 0, 0)  # e_shentsize, e_shnum, e_shstrndx
    co = parse_code_object(bytes(data))
    assert co.target_id == "gfx90a:xnack+"
    assert [k.name for k in co.kernels] == ["add", "_Z5mixed3BigsPi", "empty"]
    assert co.descriptors == ()  # the symbol tables went with the section headers


@needs_llvm
def test_mach_table_matches_llvm_readobj(tmp_path):
    """Every EF_AMDGPU_MACH value llvm-readobj 22 names is in MACH_NAMES, under the same name."""
    paths = []
    for mach in range(0x20, 0x100):
        path = tmp_path / f"m{mach:02x}"
        path.write_bytes(_elf_header(e_flags=mach))
        paths.append(path)
    result = subprocess.run([str(READOBJ), "--elf-output-style=JSON", "--file-headers", *map(str, paths)],
                            check=True, capture_output=True, text=True)
    named = {}
    for entry in json.loads(result.stdout):
        for flag in entry["ElfHeader"]["Flags"]["Flags"]:
            if flag["Name"].startswith("EF_AMDGPU_MACH_AMDGCN_"):
                named[flag["Value"]] = flag["Name"][len("EF_AMDGPU_MACH_AMDGCN_"):].lower().replace("_", "-")
    assert len(named) >= 50
    for mach, name in named.items():
        assert MACH_NAMES[mach] == name, hex(mach)
    # the rest: gfx940/gfx941 (retired), and targets newer than LLVM 22
    assert {mach for mach in MACH_NAMES if mach >= 0x20} - set(named) == {
        0x40, 0x4B, 0x50, 0x57, 0x5B, 0x5C, 0x5D, 0x5E, 0x62, 0x63}


OLD_KERNEL_IR = """
define amdgpu_kernel void @add(float addrspace(1)* %out, i32 %n) {
  store float 1.0, float addrspace(1)* %out
  ret void
}
"""


@pytest.mark.skipif(LLC14 is None, reason="llc-14 not installed")
@pytest.mark.parametrize("version, cpu, mattr, target", [
    (2, "gfx906", "+sramecc,-xnack", "gfx906:sramecc+:xnack-"),
    (2, "gfx900", "+xnack", "gfx900:xnack+"),
    (3, "gfx906", "+sramecc,+xnack", "gfx906:sramecc+:xnack+"),
    (3, "gfx900", "-xnack", "gfx900:xnack-"),
    (3, "gfx1030", "", "gfx1030"),
])
def test_code_objects_v2_and_v3_from_llvm14(tmp_path, version, cpu, mattr, target):
    source, path = tmp_path / "k.ll", tmp_path / "k.o"
    source.write_text(OLD_KERNEL_IR)
    subprocess.run([LLC14, "-mtriple=amdgcn-amd-amdhsa", f"-mcpu={cpu}", f"-mattr={mattr}",
                    f"--amdhsa-code-object-version={version}", "-filetype=obj", str(source), "-o", str(path)],
                   check=True, capture_output=True)
    co = parse_code_object(path.read_bytes())
    assert (co.code_object_version, co.e_type, co.target_id) == (version, ET_REL, target)
    if version == 2:  # NT_AMD_HSA_* notes (YAML metadata) and amd_kernel_code_t: no kernels read
        assert (co.metadata, co.kernels, co.descriptors) == ({}, (), ())
    else:
        (kernel,), (kd,) = co.kernels, co.descriptors
        assert (kernel.name, kernel.kernarg_size, kd.name, kd.kernarg_size) == ("add", 12, "add", 12)
        assert kd.wavefront32 == (cpu == "gfx1030")


# ---- committed samples ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, target, version", [
    ("amd_gfx90a_xnack+_v4.hsaco", "gfx90a:xnack+", 4), ("amd_gfx90a_v5.hsaco", "gfx90a", 5),
    ("amd_gfx942_sramecc+_xnack-_v5.hsaco", "gfx942:sramecc+:xnack-", 5), ("amd_gfx942_v6.hsaco", "gfx942", 6),
    ("amd_gfx1100_v4.hsaco", "gfx1100", 4), ("amd_gfx1100_v6.hsaco", "gfx1100", 6),
    ("amd_gfx1201_v5.hsaco", "gfx1201", 5),
])
def test_committed_samples(name, target, version):
    co = parse_code_object(sample(name).read_bytes())
    assert (co.target_id, co.code_object_version) == (target, version)
    assert co.metadata["amdhsa.target"] == "amdgcn-amd-amdhsa--" + target
    assert co.kernels and sorted(k.name for k in co.kernels) == sorted(d.name for d in co.descriptors)
    wave32 = target.startswith("gfx1")
    assert all(d.wavefront32 == wave32 for d in co.descriptors)
    assert all(k.wavefront_size == (32 if wave32 else 64) for k in co.kernels)


# ---- e_flags and target ids ----------------------------------------------------------------------------------

@pytest.mark.parametrize("e_flags, abi, expected", [
    (0x12C, 2, ("gfx900", "any", None)),
    (0x52F, 3, ("gfx906", "any", "any")),
    (0x53F, 4, ("gfx90a", "any", "any")),
    (0x63F, 2, ("gfx90a", "off", "any")),
    (0xF3F, 2, ("gfx90a", "on", "on")),
    (0xB4C, 3, ("gfx942", "on", "off")),
    (0x036, 4, ("gfx1030", None, None)),
    (0x549, 4, ("gfx1250", "any", "any")),
    (0x1000054, 4, ("gfx11-generic", None, None)),
    (0x100055F, 4, ("gfx9-4-generic", "any", "any")),
    (0x12F, 1, ("gfx906", "on", "off")),  # v3: single bits, off when clear on a processor that has it
    (0x22F, 1, ("gfx906", "off", "on")),
    (0x136, 1, ("gfx1030", "on", None)),
    (0x22F, 0, ("gfx906", "off", "on")),  # v2 from LLVM 7 on: the v3 layout
    (0x12C, 0, ("gfx900", "on", None)),
])
def test_target_id_from_flags(e_flags, abi, expected):
    assert target_id_from_flags(e_flags, abi) == expected


@pytest.mark.parametrize("e_flags, abi", [(0x7E, 4), (0x00, 2), (0x01, 0), (0x0F, 1)])
def test_flags_that_name_no_processor(e_flags, abi):
    """Unknown MACH values; R600 values; pre-LLVM-7 code object v2 flags (feature bits only)."""
    with pytest.raises(FormatError):
        target_id_from_flags(e_flags, abi)


@pytest.mark.parametrize("processor, xnack, sramecc, expected", [
    ("gfx942", "off", "on", "gfx942:sramecc+:xnack-"),
    ("gfx90a", "on", "any", "gfx90a:xnack+"),
    ("gfx906", "any", "off", "gfx906:sramecc-"),
    ("gfx1100", None, None, "gfx1100"),
])
def test_format_target_id(processor, xnack, sramecc, expected):
    assert format_target_id(processor, xnack, sramecc) == expected


@pytest.mark.parametrize("text, expected", [
    ("gfx90a:xnack+", ("gfx90a", {"xnack": "+"})),
    ("gfx942:sramecc+:xnack-", ("gfx942", {"sramecc": "+", "xnack": "-"})),
    ("gfx1100", ("gfx1100", {})),
    ("gfx9-4-generic:xnack-", ("gfx9-4-generic", {"xnack": "-"})),
    ("amdgcn-amd-amdhsa--gfx90a:xnack+", ("gfx90a", {"xnack": "+"})),
])
def test_split_target_id(text, expected):
    assert split_target_id(text) == expected


@pytest.mark.parametrize("text", ["", ":xnack+", "gfx90a:xnack", "gfx90a:+", "gfx90a::"])
def test_split_target_id_rejects_malformed(text):
    with pytest.raises(FormatError):
        split_target_id(text)


# ---- synthetic objects: notes we do not know, fallbacks, hostile metadata ------------------------------------

def _elf_header(e_flags: int = 0x54C, abi: int = 4, e_type: int = ET_DYN, machine: int = 224, osabi: int = 64,
                shoff: int = 0, shnum: int = 0, shstrndx: int = 0, ei_class: int = 2) -> bytes:
    ident = b"\x7fELF" + bytes([ei_class, 1, 1, osabi, abi]) + bytes(7)
    return ident + struct.pack("<HHIQQQIHHHHHH", e_type, machine, 1, 0, 0, shoff, e_flags, 64, 56, 0, 64,
                               shnum, shstrndx)


def _note(owner: bytes, note_type: int, desc: bytes) -> bytes:
    name = owner + b"\0"
    return (struct.pack("<III", len(name), len(desc), note_type) + name + bytes(-len(name) % 4)
            + desc + bytes(-len(desc) % 4))


def tiny_code_object(notes: bytes, **header) -> bytes:
    """ELF header, one SHT_NOTE section holding `notes`, then the section header table (null + note)."""
    shoff = 64 + len(notes) + (-len(notes) % 8)
    body = notes + bytes(shoff - 64 - len(notes))
    note_section = struct.pack("<IIQQQQIIQQ", 0, 7, 2, 0, 64, len(notes), 0, 0, 4, 0)
    return _elf_header(shoff=shoff, shnum=2, **header) + body + bytes(64) + note_section


def _metadata(**overrides) -> bytes:
    kernel = {".name": "k", ".symbol": "k.kd", ".kernarg_segment_size": 8, ".kernarg_segment_align": 8,
              ".group_segment_fixed_size": 0, ".private_segment_fixed_size": 0, ".wavefront_size": 64,
              ".args": [{".offset": 0, ".size": 8, ".value_kind": "global_buffer"}]}
    kernel.update(overrides)
    kernel = {k: v for k, v in kernel.items() if v is not None}
    return msgpack.packb({"amdhsa.version": [1, 2], "amdhsa.target": "amdgcn-amd-amdhsa--gfx942",
                          "amdhsa.kernels": [kernel]})


def test_unknown_notes_are_skipped():
    notes = (_note(b"GNU", 1, b"\x01\x02\x03") + _note(b"AMD", 99, b"whatever")
             + _note(b"AMDGPU", 33, b"\xc1") + _note(b"AMDGPU", 32, _metadata()))
    co = parse_code_object(tiny_code_object(notes))
    assert isinstance(co, CodeObject)
    assert [(k.name, k.kernarg_size, k.wavefront_size, k.sgpr_count) for k in co.kernels] == [("k", 8, 64, None)]
    assert co.target_id == "gfx942" and co.descriptors == ()


def test_unknown_mach_falls_back_to_the_metadata_target():
    notes = _note(b"AMDGPU", 32, msgpack.packb({"amdhsa.target": "amdgcn-amd-amdhsa--gfx1399:xnack-",
                                                "amdhsa.kernels": []}))
    co = parse_code_object(tiny_code_object(notes, e_flags=0x7E))
    assert (co.processor, co.xnack, co.sramecc, co.target_id) == ("gfx1399", "off", None, "gfx1399:xnack-")


def test_code_object_v2_isa_note_and_flags():
    isa = struct.pack("<HHIII", 4, 7, 9, 0, 10) + b"AMD\0AMDGPU\0"
    notes = _note(b"AMD", 1, struct.pack("<II", 2, 1)) + _note(b"AMD", 3, isa) + _note(b"AMD", 10, b"---\n")
    co = parse_code_object(tiny_code_object(notes, e_flags=0, abi=0))
    assert (co.code_object_version, co.processor, co.xnack, co.sramecc) == (2, "gfx90a", "off", None)
    assert (co.metadata, co.kernels, co.target_id) == ({}, (), "gfx90a:xnack-")
    co = parse_code_object(tiny_code_object(notes, e_flags=0x1, abi=0))  # EF_AMDGPU_FEATURE_XNACK_V2
    assert (co.processor, co.xnack, co.target_id) == ("gfx90a", "on", "gfx90a:xnack+")
    with pytest.raises(FormatError):  # old v2 flags without the ISA note name no processor
        parse_code_object(tiny_code_object(b"", e_flags=0x1, abi=0))


def test_bare_header_is_a_code_object_without_kernels():
    co = parse_code_object(_elf_header())
    assert (co.target_id, co.metadata, co.kernels, co.descriptors) == ("gfx942", {}, (), ())


def test_relocatable_without_notes_still_names_its_target():
    co = parse_code_object(tiny_code_object(b"", e_type=ET_REL, e_flags=0x4F))
    assert (co.target_id, co.e_type, co.metadata, co.kernels) == ("gfx950", ET_REL, {}, ())


@pytest.mark.parametrize("data", [
    b"",
    b"\x7fELF",
    b"MZ" + bytes(100),
    tiny_code_object(b"", ei_class=1),
    tiny_code_object(b"", machine=62),
    tiny_code_object(b"", osabi=0),
    tiny_code_object(b"", e_type=4),
    tiny_code_object(b"", e_flags=0x7E),  # unknown processor and nothing else names one
    tiny_code_object(_note(b"AMDGPU", 32, b"\xc1\xc1")),  # not MessagePack
    tiny_code_object(_note(b"AMDGPU", 32, msgpack.packb([1, 2]))),  # not a map
    tiny_code_object(_note(b"AMDGPU", 32, msgpack.packb({"amdhsa.kernels": {"k": 1}}))),
    tiny_code_object(_note(b"AMDGPU", 32, msgpack.packb({"amdhsa.kernels": ["k"]}))),
    tiny_code_object(_note(b"AMDGPU", 32, _metadata(**{".kernarg_segment_size": None}))),
    tiny_code_object(_note(b"AMDGPU", 32, _metadata(**{".kernarg_segment_size": "8"}))),
    tiny_code_object(_note(b"AMDGPU", 32, _metadata(**{".symbol": None}))),
    tiny_code_object(_note(b"AMDGPU", 32, _metadata(**{".args": [1]}))),
    tiny_code_object(struct.pack("<III", 7, 1 << 30, 32) + b"AMDGPU\0\0"),  # desc past the section
])
def test_hostile_code_objects(data):
    with pytest.raises(FormatError) as info:
        parse_code_object(data)
    assert info.value.offset is not None  # metadata errors too: at the note's description


def test_hostile_table_offsets():
    good = tiny_code_object(_note(b"AMDGPU", 32, _metadata()))
    for field, fmt, value in ((0x28, "<Q", 1 << 60), (0x3A, "<H", 40), (0x3C, "<H", 0xFFFF),
                              (0x20, "<Q", 1 << 60)):
        data = bytearray(good)
        struct.pack_into(fmt, data, field, value)
        if field == 0x20:  # a program header table past the end
            struct.pack_into("<H", data, 0x38, 3)
        with pytest.raises(FormatError):
            parse_code_object(bytes(data))


@needs_llvm
def test_truncated_code_objects(compiled):
    data = compiled[("gfx90a:xnack+", 5)].read_bytes()
    for cut in list(range(0, 200, 7)) + list(range(len(data) - 1200, len(data), 97)):
        with pytest.raises(FormatError):
            parse_code_object(data[:cut])


@needs_llvm
def test_descriptor_outside_the_file(compiled):
    path = compiled[("gfx90a:xnack+", 5)]
    info = readobj(path)
    data = bytearray(path.read_bytes())
    dynsym = next(s["Section"] for s in info["Sections"] if s["Section"]["Name"]["Name"] == ".dynsym")
    index = list(llvm_symbols(info)).index("add.kd")
    struct.pack_into("<Q", data, dynsym["Offset"] + 24 * index + 8, 1 << 40)  # st_value
    with pytest.raises(FormatError):
        parse_code_object(bytes(data))


_FUZZ_BASE = tiny_code_object(_note(b"GNU", 5, b"abcd") + _note(b"AMDGPU", 32, _metadata()))
_SAMPLE = SAMPLES / "amd_gfx90a_v5.hsaco"
_FUZZ_SAMPLES = [_FUZZ_BASE] + ([_SAMPLE.read_bytes()] if _SAMPLE.exists() else [])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(_FUZZ_SAMPLES),
       edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=8))
def test_mutated_code_objects_only_raise_format_errors(base, edits):
    data = bytearray(base)
    for position, value in edits:
        data[position % len(data)] = value
    try:
        parse_code_object(bytes(data))
    except FormatError as error:
        assert error.offset is not None


# ---- corpus --------------------------------------------------------------------------------------------------

@pytest.mark.corpus
def test_corpus_prng_code_objects():
    path = corpus_file("jax_rocm7_plugin/_prng.so")
    with mapped(path) as mm:
        (offset, kind), = list(find_bundles(mm))
        assert kind == "ccob"
        plain = decompress_ccob(mm, parse_ccob(mm, offset))
    bundle = parse_bundle(plain)
    devices = [e for e in bundle.entries if e.kind != "host"]
    assert len(devices) == 27
    for entry in devices:
        co = parse_code_object(bundle_payload(plain, bundle, entry))
        assert co.target_id == entry.target_id
        assert co.metadata["amdhsa.target"] == "amdgcn-amd-amdhsa--" + entry.target_id
        assert co.code_object_version == 6 and co.kernels
        assert sorted(k.symbol for k in co.kernels) == sorted(d.name + ".kd" for d in co.descriptors)
        wave32 = {k.name: k.wavefront_size == 32 for k in co.kernels}
        assert all(wave32[d.name] == d.wavefront32 for d in co.descriptors)
