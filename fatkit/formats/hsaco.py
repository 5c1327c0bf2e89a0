"""AMDGPU code objects (ELF64, e_machine EM_AMDGPU): target id, metadata note, kernels (docs/formats.md §8).

Loadable objects (ET_DYN) and relocatable ones (ET_REL, from `-c` or llvmlite's emit_object) are both read.
The target comes from e_flags (MACH byte plus the xnack/sramecc fields), the kernels from the MessagePack
NT_AMDGPU_METADATA note (code object v3+), the descriptors from the `<kernel>.kd` symbols.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack

from fatkit.errors import FormatError
from fatkit.formats.common import Buffer, need
from fatkit.formats.layout import Int16ul, Int32ul, Int64sl, Layout, Padding
from fatkit.formats.elf import (
    EM_AMDGPU,
    ELFCLASS64, ET_DYN, ET_EXEC, ET_REL, SHT_DYNSYM, SHT_SYMTAB, STT_OBJECT, ElfView, Note,
)

ELFOSABI_AMDGPU_HSA = 64

NT_AMD_HSA_ISA_VERSION = 3  # code object v2, owner "AMD"
NT_AMDGPU_METADATA = 32  # code object v3+, owner "AMDGPU"

EF_AMDGPU_MACH = 0xFF
EF_AMDGPU_MACH_AMDGCN_FIRST = 0x20  # below: R600 processors, which have no HSA code objects
EF_AMDGPU_FEATURE_XNACK_V2 = 0x01  # v2 objects from before LLVM 7
EF_AMDGPU_FEATURE_XNACK_V3 = 0x100
EF_AMDGPU_FEATURE_SRAMECC_V3 = 0x200
EF_AMDGPU_FEATURE_XNACK_V4 = 0x300
EF_AMDGPU_FEATURE_SRAMECC_V4 = 0xC00
FEATURE_SETTINGS_V4 = {0: None, 1: "any", 2: "off", 3: "on"}  # 0 = the processor does not have the feature

KERNEL_CODE_PROPERTY_WAVEFRONT32 = 1 << 10
KERNEL_DESCRIPTOR_SIZE = 64

# EF_AMDGPU_MACH values: LLVM llvm/include/llvm/BinaryFormat/ELF.h. LLVM 22 (llvm-readelf-22) names all but
# the "LLVM main" ones; gfx940/gfx941 were retired (their values are RESERVED in LLVM >= 20) but ROCm 5.x/6.x
# binaries still carry them.
MACH_NAMES: dict[int, str] = {
    # R600 (ELF32, no HSA code objects; listed so the table is whole)
    0x01: "r600", 0x02: "r630", 0x03: "rs880", 0x04: "rv670", 0x05: "rv710", 0x06: "rv730", 0x07: "rv770",
    0x08: "cedar", 0x09: "cypress", 0x0A: "juniper", 0x0B: "redwood", 0x0C: "sumo", 0x0D: "barts",
    0x0E: "caicos", 0x0F: "cayman", 0x10: "turks",
    # AMDGCN
    0x20: "gfx600", 0x21: "gfx601", 0x22: "gfx700", 0x23: "gfx701", 0x24: "gfx702", 0x25: "gfx703",
    0x26: "gfx704", 0x28: "gfx801", 0x29: "gfx802", 0x2A: "gfx803", 0x2B: "gfx810", 0x2C: "gfx900",
    0x2D: "gfx902", 0x2E: "gfx904", 0x2F: "gfx906", 0x30: "gfx908", 0x31: "gfx909", 0x32: "gfx90c",
    0x33: "gfx1010", 0x34: "gfx1011", 0x35: "gfx1012", 0x36: "gfx1030", 0x37: "gfx1031", 0x38: "gfx1032",
    0x39: "gfx1033", 0x3A: "gfx602", 0x3B: "gfx705", 0x3C: "gfx805", 0x3D: "gfx1035", 0x3E: "gfx1034",
    0x3F: "gfx90a", 0x40: "gfx940", 0x41: "gfx1100", 0x42: "gfx1013", 0x43: "gfx1150", 0x44: "gfx1103",
    0x45: "gfx1036", 0x46: "gfx1101", 0x47: "gfx1102", 0x48: "gfx1200", 0x49: "gfx1250", 0x4A: "gfx1151",
    0x4B: "gfx941", 0x4C: "gfx942", 0x4E: "gfx1201", 0x4F: "gfx950", 0x50: "gfx1310",  # LLVM main
    0x51: "gfx9-generic", 0x52: "gfx10-1-generic", 0x53: "gfx10-3-generic", 0x54: "gfx11-generic",
    0x55: "gfx1152", 0x57: "gfx1154",  # LLVM main
    0x58: "gfx1153", 0x59: "gfx12-generic", 0x5A: "gfx1251",
    0x5B: "gfx12-5-generic", 0x5C: "gfx1172", 0x5D: "gfx1170", 0x5E: "gfx1171",  # LLVM main
    0x5F: "gfx9-4-generic",
    0x62: "gfx11-7-generic", 0x63: "gfx13-generic",  # LLVM main
}

# Code objects v2/v3 only say "on" (bit set) or nothing; "nothing" means off on processors that have the
# feature and unsupported elsewhere (v2 has no sramecc bit at all). The processors of that era with each
# feature (LLVM TargetParser):
_XNACK_PROCESSORS_V3 = frozenset({
    "gfx801", "gfx810", "gfx900", "gfx902", "gfx904", "gfx906", "gfx908", "gfx909", "gfx90a", "gfx90c",
    "gfx940", "gfx941", "gfx942", "gfx1010", "gfx1011", "gfx1012", "gfx1013"})
_SRAMECC_PROCESSORS_V3 = frozenset({"gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942"})

IsaVersionNote = Layout(  # NT_AMD_HSA_ISA_VERSION desc
    "vendor_name_size" / Int16ul, "architecture_name_size" / Int16ul,
    "major" / Int32ul, "minor" / Int32ul, "stepping" / Int32ul,
    name="IsaVersionNote",
)
# llvm/Support/AMDHSAKernelDescriptor.h
KernelDescriptorLayout = Layout(
    "group_segment_fixed_size" / Int32ul,
    "private_segment_fixed_size" / Int32ul,
    "kernarg_size" / Int32ul,
    Padding(4),
    "kernel_code_entry_byte_offset" / Int64sl,  # relative to the descriptor's own address
    Padding(20),
    "compute_pgm_rsrc3" / Int32ul,
    "compute_pgm_rsrc1" / Int32ul,
    "compute_pgm_rsrc2" / Int32ul,
    "kernel_code_properties" / Int16ul,
    "kernarg_preload" / Int16ul,
    Padding(4),
    name="KernelDescriptor",
)

ISA_NOTE_SIZE = IsaVersionNote.size


@dataclass(frozen=True)
class AmdKernel:
    name: str
    symbol: str  # the descriptor symbol, "<name>.kd"
    kernarg_size: int
    kernarg_align: int
    group_segment_size: int
    private_segment_size: int
    wavefront_size: int | None
    sgpr_count: int | None
    vgpr_count: int | None
    agpr_count: int | None
    max_flat_workgroup_size: int | None
    args: tuple[dict, ...] = field(hash=False)  # the metadata's `.args` maps, keys as written (".offset", ...)


@dataclass(frozen=True)
class KernelDescriptor:
    name: str  # the kernel, without ".kd"
    offset: int  # of the 64-byte descriptor in the code object
    group_segment_fixed_size: int
    private_segment_fixed_size: int
    kernarg_size: int
    entry_offset: int  # kernel entry address minus descriptor address
    rsrc1: int
    rsrc2: int
    rsrc3: int
    code_properties: int

    @property
    def wavefront32(self) -> bool:
        return bool(self.code_properties & KERNEL_CODE_PROPERTY_WAVEFRONT32)


@dataclass(frozen=True)
class CodeObject:
    code_object_version: int  # 2..6, from EI_ABIVERSION
    e_type: int
    e_flags: int
    processor: str  # "gfx942"
    xnack: str | None  # "any" | "on" | "off"; None when the processor does not have it
    sramecc: str | None
    target_id: str  # "gfx942:sramecc+:xnack-"
    metadata: dict = field(hash=False)  # the NT_AMDGPU_METADATA map; {} for v2 or when absent
    kernels: tuple[AmdKernel, ...]
    descriptors: tuple[KernelDescriptor, ...]


def format_target_id(processor: str, xnack: str | None, sramecc: str | None) -> str:
    """LLVM's spelling: only features set on or off appear, in alphabetical order."""
    features = [f":{name}{'+' if setting == 'on' else '-'}"
                for name, setting in (("sramecc", sramecc), ("xnack", xnack)) if setting in ("on", "off")]
    return processor + "".join(features)


def _single_bit_setting(e_flags: int, bit: int, processor: str, having: frozenset) -> str | None:
    return "on" if e_flags & bit else "off" if processor in having else None


def target_id_from_flags(e_flags: int, abi_version: int) -> tuple[str, str | None, str | None]:
    """(processor, xnack, sramecc) from e_flags; `abi_version` is EI_ABIVERSION (0 = v2, 1 = v3, 2+ = v4+).

    v2 objects from LLVM 7 on carry the v3 layout (MACH byte, single feature bits); older v2 objects hold only
    feature bits and name the processor in a note, so their e_flags are a FormatError, as is an unknown MACH."""
    mach = e_flags & EF_AMDGPU_MACH
    processor = MACH_NAMES.get(mach) if mach >= EF_AMDGPU_MACH_AMDGCN_FIRST else None
    if processor is None:
        raise FormatError(f"e_flags 0x{e_flags:x} name no known AMDGCN processor (EF_AMDGPU_MACH 0x{mach:02x})")
    if abi_version >= 2:
        return (processor, FEATURE_SETTINGS_V4[(e_flags & EF_AMDGPU_FEATURE_XNACK_V4) >> 8],
                FEATURE_SETTINGS_V4[(e_flags & EF_AMDGPU_FEATURE_SRAMECC_V4) >> 10])
    return (processor,
            _single_bit_setting(e_flags, EF_AMDGPU_FEATURE_XNACK_V3, processor, _XNACK_PROCESSORS_V3),
            _single_bit_setting(e_flags, EF_AMDGPU_FEATURE_SRAMECC_V3, processor, _SRAMECC_PROCESSORS_V3))


def split_target_id(s: str) -> tuple[str, dict[str, str]]:
    """"gfx90a:xnack+" → ("gfx90a", {"xnack": "+"}). A full "amdgcn-amd-amdhsa--gfx90a:xnack+" is accepted too."""
    if "--" in s:
        s = s.rsplit("--", 1)[1]
    processor, *features = s.split(":")
    if not processor:
        raise FormatError(f"target id {s!r} names no processor")
    settings = {}
    for feature in features:
        if len(feature) < 2 or feature[-1] not in "+-":
            raise FormatError(f"target id {s!r}: feature {feature!r} is not NAME+ or NAME-")
        settings[feature[:-1]] = feature[-1]
    return processor, settings


def _metadata_int(kernel: dict, key: str, name: str, required: bool) -> int | None:
    value = kernel.get(key)
    if value is None:
        if required:
            raise FormatError(f"kernel {name!r} metadata lacks {key}")
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise FormatError(f"kernel {name!r} metadata {key} is {value!r}, not an integer")
    return value


def _kernel(entry: Any) -> AmdKernel:
    if not isinstance(entry, dict) or not isinstance(entry.get(".name"), str):
        raise FormatError("amdhsa.kernels holds an entry without a .name")
    name = entry[".name"]
    symbol = entry.get(".symbol")
    if not isinstance(symbol, str):
        raise FormatError(f"kernel {name!r} metadata lacks .symbol")
    args = entry.get(".args", [])
    if not isinstance(args, list) or not all(isinstance(arg, dict) for arg in args):
        raise FormatError(f"kernel {name!r} metadata .args is not a list of maps")

    def required(key: str) -> int:
        value = _metadata_int(entry, key, name, True)
        assert value is not None  # required: _metadata_int raised otherwise
        return value

    def optional(key: str) -> int | None:
        return _metadata_int(entry, key, name, False)

    return AmdKernel(
        name=name, symbol=symbol,
        kernarg_size=required(".kernarg_segment_size"), kernarg_align=required(".kernarg_segment_align"),
        group_segment_size=required(".group_segment_fixed_size"),
        private_segment_size=required(".private_segment_fixed_size"),
        wavefront_size=optional(".wavefront_size"), sgpr_count=optional(".sgpr_count"),
        vgpr_count=optional(".vgpr_count"), agpr_count=optional(".agpr_count"),
        max_flat_workgroup_size=optional(".max_flat_workgroup_size"), args=tuple(args))


def _decode_metadata(desc: bytes) -> dict:
    try:
        metadata = msgpack.unpackb(desc, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises ValueError, ExtraData, FormatError, StackError, UnicodeDecodeError...
        raise FormatError(f"AMDGPU metadata note is not valid MessagePack: {exc}") from None
    if not isinstance(metadata, dict):
        raise FormatError("AMDGPU metadata note is not a map")
    return metadata


def _descriptors(elf: ElfView) -> tuple[KernelDescriptor, ...]:
    """From the `<kernel>.kd` symbols of .dynsym (what the loader reads), else of .symtab (relocatable objects)."""
    tables = ([s for s in elf.sections if s.type == SHT_DYNSYM]
              or [s for s in elf.sections if s.type == SHT_SYMTAB])
    found = []
    for symbol in [symbol for table in tables for symbol in elf.symbols(table)]:
        if not symbol.name.endswith(".kd") or symbol.type != STT_OBJECT:
            continue
        offset = elf.symbol_offset(symbol)
        if offset is None:
            continue
        need(elf.buffer, offset, KERNEL_DESCRIPTOR_SIZE, f"kernel descriptor {symbol.name}")
        kd = KernelDescriptorLayout.parse(bytes(elf.buffer[offset:offset + KERNEL_DESCRIPTOR_SIZE]))
        found.append(KernelDescriptor(
            name=symbol.name[:-3], offset=offset,
            group_segment_fixed_size=kd.group_segment_fixed_size,
            private_segment_fixed_size=kd.private_segment_fixed_size,
            kernarg_size=kd.kernarg_size, entry_offset=kd.kernel_code_entry_byte_offset,
            rsrc1=kd.compute_pgm_rsrc1, rsrc2=kd.compute_pgm_rsrc2, rsrc3=kd.compute_pgm_rsrc3,
            code_properties=kd.kernel_code_properties))
    return tuple(found)


def _target(elf: ElfView, metadata: dict, notes: list[Note]) -> tuple[str, str | None, str | None]:
    """From e_flags; for a processor they do not name, from the metadata's amdhsa.target (v3+) or the
    NT_AMD_HSA_ISA_VERSION note (v2)."""
    try:
        return target_id_from_flags(elf.e_flags, elf.abiversion)
    except FormatError as unknown:
        target = metadata.get("amdhsa.target")
        if isinstance(target, str):
            processor, settings = split_target_id(target)
            words = {"+": "on", "-": "off"}
            return processor, words.get(settings.get("xnack", "")), words.get(settings.get("sramecc", ""))
        for note in notes:
            if (note.owner, note.type) == ("AMD", NT_AMD_HSA_ISA_VERSION) and len(note.desc) >= ISA_NOTE_SIZE:
                isa = IsaVersionNote.parse(note.desc)
                processor = f"gfx{isa.major}{isa.minor}{isa.stepping:x}"
                return processor, _single_bit_setting(elf.e_flags, EF_AMDGPU_FEATURE_XNACK_V2, processor,
                                                      _XNACK_PROCESSORS_V3), None
        raise FormatError(unknown.message, offset=0x30) from None


def parse_code_object(data: Buffer) -> CodeObject:
    """Read an AMDGPU code object; FormatError if it is not one or is malformed."""
    elf = ElfView(data)
    if elf.elf_class != ELFCLASS64:
        raise FormatError("AMDGPU code objects are ELF64 (EI_CLASS 2)", offset=4)
    if elf.e_machine != EM_AMDGPU:
        raise FormatError(f"ELF machine {elf.e_machine} is not EM_AMDGPU ({EM_AMDGPU})", offset=0x12)
    if elf.osabi != ELFOSABI_AMDGPU_HSA:
        raise FormatError(f"ELF OS/ABI {elf.osabi} is not AMDGPU HSA ({ELFOSABI_AMDGPU_HSA})", offset=7)
    if elf.e_type not in (ET_REL, ET_EXEC, ET_DYN):
        raise FormatError(f"ELF type {elf.e_type} is not a relocatable or loadable code object", offset=0x10)
    elf.segments  # both header tables must lie in the file, even where the notes come from sections

    notes = elf.notes()
    metadata_note = next((n for n in notes if n.owner == "AMDGPU" and n.type == NT_AMDGPU_METADATA), None)
    # Metadata errors are located at the note's description.
    try:
        metadata = _decode_metadata(metadata_note.desc) if metadata_note is not None else {}
        kernel_list = metadata.get("amdhsa.kernels", [])
        if not isinstance(kernel_list, list):
            raise FormatError("AMDGPU metadata amdhsa.kernels is not a list")
        kernels = tuple(_kernel(k) for k in kernel_list)
        processor, xnack, sramecc = _target(elf, metadata, notes)
    except FormatError as error:
        if error.offset is None:
            error.offset = metadata_note.offset if metadata_note is not None else 0
        raise
    return CodeObject(
        code_object_version=elf.abiversion + 2, e_type=elf.e_type, e_flags=elf.e_flags,
        processor=processor, xnack=xnack, sramecc=sramecc,
        target_id=format_target_id(processor, xnack, sramecc),
        metadata=metadata, kernels=kernels, descriptors=_descriptors(elf))
