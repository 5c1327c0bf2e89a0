"""Zip archive records (PKWARE APPNOTE 4.3) as struct layouts: what the scanner and the wheel repacker read
and write directly (everything else goes through Python's zipfile)."""

from __future__ import annotations

import struct

# local file header, central directory header, ZIP64 end record and locator, end of central directory
LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
CENTRAL_HEADER = struct.Struct("<4s4B4HL2L5H2L")
ZIP64_END = struct.Struct("<4sQ2H2L4Q")
ZIP64_LOCATOR = struct.Struct("<4sLQL")
END_RECORD = struct.Struct("<4s4H2LH")
LOCAL_SIGNATURE, CENTRAL_SIGNATURE = b"PK\x03\x04", b"PK\x01\x02"
ZIP64_END_SIGNATURE, ZIP64_LOCATOR_SIGNATURE, END_SIGNATURE = b"PK\x06\x06", b"PK\x06\x07", b"PK\x05\x06"
# the local header's signature, then its file name and extra field lengths at +26 (where the data starts)
LOCAL_HEADER_NAME_LENGTHS = struct.Struct("<4s22xHH")
