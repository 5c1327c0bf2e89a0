"""The address spaces a wave reaches: global (host memory regions), LDS, per-lane scratch, and flat over all.

Global memory is host memory, but only inside the regions the launch registered (the numpy arguments, the
loaded code object, the kernarg segment, the dispatch packet): any byte outside them is a FatkitError naming
the address and the instruction, never a host access. Values cross as Python ints (object arrays per lane).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

import numpy as np

from fatkit.errors import FatkitError

# Apertures a flat address selects LDS or scratch by (the upper 32 bits), as the hardware's SRC_SHARED_BASE
# and SRC_PRIVATE_BASE report them; both lie above any host user-space address (47 bits).
SHARED_APERTURE = 0x1_0000 << 32
PRIVATE_APERTURE = 0x2_0000 << 32
APERTURE_SIZE = 1 << 32


class MemoryFault(FatkitError):
    """An access outside every region the launch knows."""


def to_bytes(values: np.ndarray, nbytes: int) -> np.ndarray:
    """Lane values (object array of non-negative ints) as a (lanes, nbytes) little-endian byte array."""
    count = len(values)
    words = (nbytes + 7) // 8
    out = np.empty((count, words), dtype="<u8")
    for w in range(words):
        out[:, w] = np.asarray((values >> (64 * w)) & 0xFFFFFFFFFFFFFFFF if words > 1 else
                               values & 0xFFFFFFFFFFFFFFFF, dtype=object).astype(np.uint64)
    return out.view(np.uint8).reshape(count, words * 8)[:, :nbytes]


def from_bytes(data: np.ndarray) -> np.ndarray:
    """(lanes, nbytes) bytes as an object array of ints."""
    count, nbytes = data.shape
    words = (nbytes + 7) // 8
    padded = np.zeros((count, words * 8), dtype=np.uint8)
    padded[:, :nbytes] = data
    parts = padded.view("<u8")
    out = parts[:, 0].astype(object)
    for w in range(1, words):
        out = out | (parts[:, w].astype(object) << (64 * w))
    return out


class GlobalMemory:
    """Host memory regions (start address → uint8 view over their bytes)."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.regions: list[tuple[int, int, np.ndarray]] = []

    def add(self, array: np.ndarray) -> int:
        """Register a numpy array's buffer; returns its address."""
        raw = array.reshape(-1).view(np.uint8) if array.size else np.zeros(0, np.uint8)
        start = raw.ctypes.data if raw.size else 0
        if raw.size:
            index = bisect.bisect(self.starts, start)
            self.starts.insert(index, start)
            self.regions.insert(index, (start, start + raw.size, raw))
        return start

    def locate(self, lo: int, hi: int, where: Callable[[], str]) -> tuple[int, np.ndarray] | None:
        index = bisect.bisect(self.starts, lo) - 1
        if index >= 0:
            start, end, raw = self.regions[index]
            if hi <= end:
                return start, raw
        return None

    def _spans(self, addrs: np.ndarray, nbytes: int,
               where: Callable[[], str]) -> list[tuple[int, np.ndarray, slice | np.ndarray]]:
        """Groups of lanes by region: [(region start, its bytes, lane indices)]."""
        lo, hi = int(addrs.min()), int(addrs.max()) + nbytes
        found = self.locate(lo, hi, where)
        if found is not None:
            return [(found[0], found[1], slice(None))]
        groups: list[tuple[int, np.ndarray, slice | np.ndarray]] = []
        starts = np.array(self.starts, dtype=np.uint64)
        index = np.searchsorted(starts, addrs, side="right").astype(np.int64) - 1
        for region in np.unique(index):
            lanes = np.nonzero(index == region)[0]
            if region < 0 or int(addrs[lanes].max()) + nbytes > self.regions[region][1]:
                bad = lanes if region < 0 else lanes[addrs[lanes] + np.uint64(nbytes) >
                                                     np.uint64(self.regions[region][1])]
                raise MemoryFault(f"{where()}: {nbytes}-byte access at 0x{int(addrs[bad[0]]):x} lies outside "
                                  "every buffer of the launch")
            start, _, raw = self.regions[region]
            groups.append((start, raw, lanes))
        return groups

    def read(self, addrs: np.ndarray, nbytes: int, where: Callable[[], str]) -> np.ndarray:
        out = np.empty((len(addrs), nbytes), dtype=np.uint8)
        for start, raw, lanes in self._spans(addrs, nbytes, where):
            offsets = (addrs[lanes] - np.uint64(start)).astype(np.int64)
            out[lanes] = raw[offsets[:, None] + np.arange(nbytes)]
        return out

    def write(self, addrs: np.ndarray, nbytes: int, data: np.ndarray, where: Callable[[], str]) -> None:
        for start, raw, lanes in self._spans(addrs, nbytes, where):
            offsets = (addrs[lanes] - np.uint64(start)).astype(np.int64)
            # lanes in order: where two write one byte, the higher lane's value stays (as on hardware)
            raw[(offsets[:, None] + np.arange(nbytes)).reshape(-1)] = data[lanes].reshape(-1)


class FlatArray:
    """LDS (one array) or scratch (one row per lane) bounds-checked like global memory."""

    def __init__(self, name: str, size: int, lanes: int | None = None) -> None:
        self.name, self.size, self.lanes = name, size, lanes
        self.data = np.zeros((lanes, size) if lanes else size, dtype=np.uint8)

    def _offsets(self, addrs: np.ndarray, nbytes: int, where: Callable[[], str]) -> np.ndarray:
        offsets = addrs.astype(np.int64)
        if len(offsets) and (int(offsets.max()) + nbytes > self.size or int(offsets.min()) < 0):
            bad = int(offsets[(offsets + nbytes > self.size) | (offsets < 0)][0])
            raise MemoryFault(f"{where()}: {nbytes}-byte {self.name} access at offset 0x{bad & (2**64 - 1):x} "
                              f"lies outside its {self.size} bytes")
        return offsets

    def read(self, addrs: np.ndarray, nbytes: int, where: Callable[[], str],
             lanes: np.ndarray | None = None) -> np.ndarray:
        index = self._offsets(addrs, nbytes, where)[:, None] + np.arange(nbytes)
        if self.lanes:
            assert lanes is not None  # scratch has a row per lane: its accesses name the lanes
            return self.data[lanes[:, None], index]
        return self.data[index]

    def write(self, addrs: np.ndarray, nbytes: int, data: np.ndarray, where: Callable[[], str],
              lanes: np.ndarray | None = None) -> None:
        index = self._offsets(addrs, nbytes, where)[:, None] + np.arange(nbytes)
        if self.lanes:
            assert lanes is not None  # scratch has a row per lane: its accesses name the lanes
            self.data[np.repeat(lanes, nbytes), index.reshape(-1)] = data.reshape(-1)
        else:
            self.data[index.reshape(-1)] = data.reshape(-1)
