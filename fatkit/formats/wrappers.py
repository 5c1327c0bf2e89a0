"""Registration wrappers: NVIDIA `__fatBinC_Wrapper_t` and HIP "HIPF" (docs/formats.md §1, §5).

Both are arrays of 24-byte records {u32 magic, u32 version, u64 data, u64 filename_or_fatbins} in a
section of their own; `data` points at the fatbin (NVIDIA) or offload bundle (HIP) the runtime
registers, and is resolved to a file offset through ElfView.pointers_in (PeView.pointers_in in a Windows
image, where the wrapper sections are `.nvFatBi` and `.hipFatB`, the names cut to 8 bytes).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Literal

from fatkit.errors import FormatError
from fatkit.formats.elf import ElfView
from fatkit.formats.layout import Int32ul, Int64ul, Layout
from fatkit.formats.pe import ELF_SECTION_OF, PeView

NV_WRAPPER_MAGIC = 0x466243B1
HIP_WRAPPER_MAGIC = 0x48495046
WRAPPER_SECTIONS: dict[str, Vendor] = {".nvFatBinSegment": "nvidia", ".hipFatBinSegment": "hip"}
WRAPPER_MAGICS = {"nvidia": NV_WRAPPER_MAGIC, "hip": HIP_WRAPPER_MAGIC}

WrapperRecord = Layout(
    "magic" / Int32ul,
    "version" / Int32ul,  # NVIDIA: 1 per-TU fatbin, 2 device-linked image; HIP: 1
    "data" / Int64ul,  # pointer to the fatbin / bundle
    "filename_or_fatbins" / Int64ul,  # NVIDIA v2: pointer to the .bss prelinked array; else 0
    name="WrapperRecord",
)
WRAPPER_SIZE = WrapperRecord.size
DATA_FIELD = 0x08  # offset of "data" in WrapperRecord
# In a 32-bit image (PE32) the two pointers are 4 bytes: {u32 magic, u32 version, u32 data, u32 …}, 16 bytes.
WrapperRecord32 = Layout("magic" / Int32ul, "version" / Int32ul, "data" / Int32ul, "filename_or_fatbins" / Int32ul,
                         name="WrapperRecord32")
WRAPPER32_SIZE = WrapperRecord32.size
_MAGIC_VERSION = struct.Struct("<II")  # the first two fields of WrapperRecord

Vendor = Literal["nvidia", "hip"]


@dataclass(frozen=True)
class Wrapper:
    offset: int  # file offset of the 24-byte record (16 bytes in a 32-bit PE image)
    vendor: Vendor
    version: int
    target: int | None  # file offset of the fatbin/bundle it registers; None when the pointer cannot be resolved


def read_wrappers(elf: ElfView | PeView) -> list[Wrapper]:
    """Every record of every wrapper section, in section then record order.

    A record whose magic is not its section's raises FormatError at that record: the sections hold
    nothing but wrappers, so a foreign magic means the section (or its size) is corrupt. A section
    whose size is not a whole number of records raises too. NOBITS sections hold no records.
    """
    wrappers = []
    pe = isinstance(elf, PeView)
    for section in elf.sections:
        vendor = WRAPPER_SECTIONS.get(ELF_SECTION_OF.get(section.name, section.name) if pe else section.name)
        if vendor is None or not section.has_bytes or section.size == 0:
            continue
        size = WRAPPER32_SIZE if isinstance(elf, PeView) and elf.pointer_size == 4 else WRAPPER_SIZE
        if section.size % size:
            raise FormatError(f"{section.name} is {section.size} bytes, not a whole number of {size}-byte "
                              "wrappers", offset=section.offset)
        # the section is the view's own (mypy cannot pair the union's members)
        targets = elf.pointers_in(section, size, DATA_FIELD)  # type: ignore[arg-type]
        for record, target in targets.items():
            magic, version = _MAGIC_VERSION.unpack_from(elf.buffer, record)
            if magic != WRAPPER_MAGICS[vendor]:
                raise FormatError(f"{section.name} record has magic 0x{magic:08x}, expected "
                                  f"0x{WRAPPER_MAGICS[vendor]:08x}", offset=record)
            wrappers.append(Wrapper(offset=record, vendor=vendor, version=version, target=target))
    return wrappers
