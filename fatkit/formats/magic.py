"""The bytes and names that say which container a file or section is, in one place.

The scanner tests them before it imports the reader of the format they name, so a file is charged only for
the readers of what it holds; each reader imports its own from here.
"""

from __future__ import annotations

ELF_MAGIC = b"\x7fELF"
DOS_MAGIC = b"MZ"  # a PE image starts with its DOS stub
AR_MAGIC = b"!<arch>\n"
FATBIN_MAGIC = 0xBA55ED50
FATBIN_MAGIC_BYTES = FATBIN_MAGIC.to_bytes(4, "little")
BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
CCOB_MAGIC = b"CCOB"
FATKIT_AMD_SECTION = ".fatkit_amd"  # the section `fatkit repack` adds to ELF files (PE: `.fatkit`, pe.py)
