"""The compressions found in fatbins and offload bundles, every one capped before it allocates.

lz4 and zstandard are imported by the codec that needs them: most files scanned hold no compressed entry.
"""

from __future__ import annotations

import io
import zlib

from fatkit.errors import FormatError, LimitError
from fatkit.formats.common import MAX_PAYLOAD, cap

CODECS = ("zlib", "lz4-block", "lz4-frame", "zstd")


def decompress(codec: str, data: bytes | memoryview, expected_size: int | None = None,
               *, limit: int | None = None) -> bytes:
    """Decompress `data`; never produce more than `limit` bytes (default MAX_PAYLOAD).

    `expected_size`, when given, must match the result exactly (it is required by lz4-block,
    which stores no size of its own).
    """
    limit = MAX_PAYLOAD if limit is None else limit
    if expected_size is not None:
        cap(expected_size, f"{codec} uncompressed size", limit)
    data = bytes(data)
    # Ask for one byte more than allowed (or expected) to detect overruns; never preallocate the whole limit.
    want = (limit if expected_size is None else expected_size) + 1
    corrupt: tuple[type[Exception], ...] = (zlib.error, RuntimeError)  # and the codec's own error, once imported
    try:
        if codec == "zlib":
            out = zlib.decompressobj().decompress(data, want)
        elif codec == "lz4-block":
            import lz4.block

            corrupt += (lz4.block.LZ4BlockError,)
            if expected_size is None:
                raise FormatError("an LZ4 block needs its uncompressed size")
            out = lz4.block.decompress(data, uncompressed_size=expected_size)
        elif codec == "lz4-frame":
            import lz4.frame

            out = lz4.frame.LZ4FrameDecompressor().decompress(data, max_length=want)
        elif codec == "zstd":
            import zstandard

            corrupt += (zstandard.ZstdError,)
            declared = zstandard.frame_content_size(data)
            if declared > limit:
                raise LimitError(f"zstd frame declares {declared} bytes, above the limit of {limit}")
            if expected_size is None and declared >= 0:
                want = declared + 1
            reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
            out = _read_up_to(reader, want)
        else:
            raise FormatError(f"unknown compression {codec!r}")
    except corrupt as exc:
        raise FormatError(f"{codec} data is corrupt: {exc}") from None
    if len(out) > limit:
        raise LimitError(f"{codec} data expands past the limit of {limit} bytes")
    if expected_size is not None and len(out) != expected_size:
        raise FormatError(f"{codec} data expands to {len(out)} bytes, header says {expected_size}")
    return out


def _read_up_to(reader, want: int) -> bytes:
    """Read at most `want` bytes in growing chunks, so a wrong size estimate never preallocates it."""
    chunks, total, chunk = [], 0, 1 << 20
    while total < want:
        block = reader.read(min(chunk, want - total))
        if not block:
            break
        chunks.append(block)
        total += len(block)
        chunk = min(chunk * 2, 1 << 28)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def compress(codec: str, data: bytes, level: int | None = None) -> bytes:
    """Compress for writing containers (repack, test samples)."""
    if codec == "zlib":
        return zlib.compress(data, 9 if level is None else level)
    if codec == "lz4-block":
        import lz4.block

        return lz4.block.compress(data, store_size=False)
    if codec == "lz4-frame":
        import lz4.frame

        return lz4.frame.compress(data)
    if codec == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=19 if level is None else level, write_content_size=True).compress(data)
    raise FormatError(f"unknown compression {codec!r}")
