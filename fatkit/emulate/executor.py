"""Waves: register files, instruction preparation (decode once per address), and execution.

Each instruction address is decoded once into a `Step`: the compiled semantics of its opcode plus closures that
fetch its operands (registers, inline constants, literals, modifiers) and write its results back under EXEC.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from fatkit.emulate import fpmode, runtime
from fatkit.emulate.memory import (
    APERTURE_SIZE,
    PRIVATE_APERTURE,
    SHARED_APERTURE,
    FlatArray,
    GlobalMemory,
    MemoryFault,
    from_bytes,
    to_bytes,
)
from fatkit.emulate.semantics import MATRIX_OPS, Semantics, matrix_multiply
from fatkit.errors import FatkitError

if TYPE_CHECKING:
    from tinygrad.renderer.amd.dsl import Inst

    from fatkit.emulate.dispatch import Launch

M32 = 0xFFFFFFFF
M64 = (1 << 64) - 1

# Instruction classes counted by LaunchStats
SALU, BRANCH, CONTROL, SMEM, VALU, MATRIX, LDS, VMEM = (
    "SALU", "branch", "control", "SMEM", "VALU", "MFMA/WMMA", "LDS", "VMEM")

# Opcodes without an architectural effect here: waits, hints, cache control (every cache is coherent host
# memory), scheduling.
NO_EFFECT = frozenset({
    "S_NOP", "S_WAITCNT", "S_WAITCNT_VSCNT", "S_WAITCNT_VMCNT", "S_WAITCNT_EXPCNT", "S_WAITCNT_LGKMCNT",
    "S_WAITCNT_DEPCTR", "S_CLAUSE", "S_DELAY_ALU", "S_INST_PREFETCH", "S_SETPRIO", "S_SENDMSG", "S_SENDMSGHALT",
    "S_ICACHE_INV", "S_DCACHE_INV", "S_DCACHE_WB", "S_DCACHE_INV_VOL", "S_DCACHE_WB_VOL", "S_GL1_INV",
    "BUFFER_GL0_INV", "BUFFER_GL1_INV", "BUFFER_WBINVL1", "BUFFER_WBINVL1_VOL", "BUFFER_INV", "BUFFER_WBL2",
    "S_TTRACEDATA", "S_CODE_END", "S_VERSION", "S_WAIT_IDLE",
    "S_SET_INST_PREFETCH_DISTANCE", "S_BARRIER_SIGNAL_ISFIRST",
    # gfx12's split waits
    "S_WAIT_LOADCNT", "S_WAIT_STORECNT", "S_WAIT_SAMPLECNT", "S_WAIT_BVHCNT", "S_WAIT_EXPCNT", "S_WAIT_DSCNT",
    "S_WAIT_KMCNT", "S_WAIT_LOADCNT_DSCNT", "S_WAIT_STORECNT_DSCNT", "S_WAIT_ALU", "S_WAIT_EVENT",
    "GLOBAL_INV", "GLOBAL_WB", "GLOBAL_WBINV",  # gfx12 cache control: host memory has no caches
})


def _i32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.uint32).view(np.int32)


def _f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.uint32).view(np.float32)


# 32-bit integer VALU operations without carries, modifiers or lane masks, run on the register file's uint32
# rows directly (numpy wraps uint32 arithmetic modulo 2^32, as the hardware does): the common case of the
# generic path, which computes with exact Python integers over object arrays, about ten times slower. Each
# is what the tables' pseudocode says for these opcodes; the translator tables run through both paths.
_FAST_VALU: dict[str, tuple[int, Callable[..., np.ndarray]]] = {
    "V_MOV_B32": (1, lambda a: a),
    "V_NOT_B32": (1, lambda a: ~a),
    "V_ADD_U32": (2, lambda a, b: a + b),  # CDNA: no carry out
    "V_ADD_NC_U32": (2, lambda a, b: a + b),
    "V_SUB_U32": (2, lambda a, b: a - b),
    "V_SUB_NC_U32": (2, lambda a, b: a - b),
    "V_SUBREV_U32": (2, lambda a, b: b - a),
    "V_SUBREV_NC_U32": (2, lambda a, b: b - a),
    "V_AND_B32": (2, lambda a, b: a & b),
    "V_OR_B32": (2, lambda a, b: a | b),
    "V_XOR_B32": (2, lambda a, b: a ^ b),
    "V_XNOR_B32": (2, lambda a, b: ~(a ^ b)),
    "V_LSHLREV_B32": (2, lambda a, b: b << (a & np.uint32(31))),
    "V_LSHRREV_B32": (2, lambda a, b: b >> (a & np.uint32(31))),
    "V_ASHRREV_I32": (2, lambda a, b: (_i32(b) >> _i32(a & np.uint32(31))).view(np.uint32)),
    "V_MUL_LO_U32": (2, lambda a, b: a * b),
    "V_MUL_U32_U24": (2, lambda a, b: (a & np.uint32(0xFFFFFF)) * (b & np.uint32(0xFFFFFF))),
    "V_MAX_U32": (2, np.maximum),
    "V_MIN_U32": (2, np.minimum),
    "V_MAX_I32": (2, lambda a, b: np.maximum(_i32(a), _i32(b)).view(np.uint32)),
    "V_MIN_I32": (2, lambda a, b: np.minimum(_i32(a), _i32(b)).view(np.uint32)),
    "V_ADD3_U32": (3, lambda a, b, c: a + b + c),
    "V_LSHL_ADD_U32": (3, lambda a, b, c: (a << (b & np.uint32(31))) + c),
    "V_ADD_LSHL_U32": (3, lambda a, b, c: (a + b) << (c & np.uint32(31))),
    "V_LSHL_OR_B32": (3, lambda a, b, c: (a << (b & np.uint32(31))) | c),
    "V_AND_OR_B32": (3, lambda a, b, c: (a & b) | c),
    "V_OR3_B32": (3, lambda a, b, c: a | b | c),
    "V_XOR3_B32": (3, lambda a, b, c: a ^ b ^ c),
    "V_XAD_U32": (3, lambda a, b, c: (a ^ b) + c),
    "V_MAD_U32_U24": (3, lambda a, b, c: (a & np.uint32(0xFFFFFF)) * (b & np.uint32(0xFFFFFF)) + c),
    # f32 arithmetic: numpy's float32 operations are IEEE's, correctly rounded, as the generic path computes
    # them (denormals kept: the only FP mode a launch accepts)
    "V_ADD_F32": (2, lambda a, b: (_f32(a) + _f32(b)).view(np.uint32)),
    "V_SUB_F32": (2, lambda a, b: (_f32(a) - _f32(b)).view(np.uint32)),
    "V_SUBREV_F32": (2, lambda a, b: (_f32(b) - _f32(a)).view(np.uint32)),
    "V_MUL_F32": (2, lambda a, b: (_f32(a) * _f32(b)).view(np.uint32)),
}

_FLOAT_CONSTANTS = {  # src encoding → value (f32 bits come from the Python float)
    240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0,
}
_INV_2PI = {16: 0x3118, 32: 0x3E22F983, 64: 0x3FC45F306DC9C882}


def _float_bits(value: float, width: int) -> int:
    fmt = {16: "<e", 32: "<f", 64: "<d"}[width]
    return int.from_bytes(struct.pack(fmt, value), "little")


@dataclass
class LaunchStats:
    """Work done by one launch: wave-instructions executed, in total and per instruction class."""
    wave_instructions: int = 0
    per_class: dict[str, int] = field(default_factory=dict)
    workgroups: int = 0
    waves: int = 0
    seconds: float = 0.0
    budget: int = 0  # wave-instructions allowed before the launch counts as hung
    clock_value: int = (1 << 32) - 2  # the last value `clock` gave: a launch's first reads carry into bit 32
    # the loaded code object and its address (its globals after the run)
    image: np.ndarray | None = field(default=None, repr=False, compare=False)
    image_base: int = 0

    def clock(self) -> int:
        """The launch's counter (s_memtime, s_memrealtime, gfx11's REALTIME message): 2^32 − 2 plus the
        wave-instructions executed by the end of the last time slice, and past every earlier read, so that
        two reads differ and the value never goes back, as a hardware clock's; starting just below 2^32, the
        first reads already need both words."""
        self.clock_value = max(self.clock_value + 1, (1 << 32) - 2 + self.wave_instructions)
        return self.clock_value

    def count(self, klass: str, n: int = 1) -> None:
        self.per_class[klass] = self.per_class.get(klass, 0) + n
        self.wave_instructions += n


class Wave:
    """One wave's architectural state."""

    def __init__(self, lanes: int, vgprs: int, cdna: bool):
        self.lanes = lanes
        self.s = [0] * 256
        self.v = np.zeros((max(vgprs, 1), lanes), dtype=np.uint32)
        self.scc = 0
        self.pc = 0
        self.done = False
        self.at_barrier = False
        self.yielded = False  # gave up the rest of its time slice (s_sleep)
        self.m0 = 124 if cdna else 125
        self.cdna = cdna
        self.lane_ids = np.arange(lanes, dtype=object)
        self._exec_value = -1
        self._exec_bool = np.zeros(lanes, dtype=bool)
        self.private: FlatArray | None = None
        self.lds: FlatArray | None = None
        self.mode = fpmode.DEFAULT_FP  # the MODE register (set from the descriptor at dispatch)

    @property
    def exec_int(self) -> int:
        return self.s[126] | (self.s[127] << 32)

    @property
    def exec_bool(self) -> np.ndarray:
        value = self.s[126] | (self.s[127] << 32)
        if value != self._exec_value:
            self._exec_value = value
            self._exec_bool = np.unpackbits(np.frombuffer(value.to_bytes(8, "little"), np.uint8),
                                            bitorder="little")[:self.lanes].astype(bool)
        return self._exec_bool

    def sread(self, index: int, count: int) -> int:
        value = 0
        for k in range(count):
            value |= self.s[index + k] << (32 * k)
        return value

    def swrite(self, index: int, count: int, value: int) -> None:
        if not self.cdna and index == 124:  # NULL
            return
        for k in range(count):
            self.s[index + k] = (value >> (32 * k)) & M32

    def vread(self, index: int, count: int) -> np.ndarray:
        value = self.v[index].astype(object)
        for k in range(1, count):
            value = value | (self.v[index + k].astype(object) << (32 * k))
        return value

    def vwrite(self, index: int, count: int, value: int | np.ndarray, mask: np.ndarray) -> None:
        for k in range(count):
            part = (value >> (32 * k)) & M32 if count > 1 else value & M32
            if isinstance(part, np.ndarray):
                part = part.astype(np.uint32)
            np.copyto(self.v[index + k], np.uint32(part) if not isinstance(part, np.ndarray) else part,
                      where=mask)


class Space:
    """What the compiled pseudocode calls `ctx`: loads and stores in one address space for the current wave."""

    def __init__(self, launch: Launch | None, kind: str) -> None:
        self.launch, self.kind = launch, kind
        self.wave: Wave | None = None
        self.where: Callable[[], str] = lambda: "?"
        self.wave32 = True
        self.ieee = True
        self.mode = None

    def _lanes(self, M: bool | np.ndarray) -> np.ndarray:
        # lane by lane accesses come from vector memory instructions only, inside a wave's step
        assert self.wave is not None and self.kind != "scalar"
        active = self.wave.exec_bool
        if isinstance(M, np.ndarray):
            active = active & M
        return np.nonzero(active)[0]

    def load(self, addr: int | np.ndarray, width: int, M: bool | np.ndarray) -> int | np.ndarray:
        nbytes = width // 8
        if not isinstance(addr, np.ndarray):  # one lane (scalar memory, or an atomic lane by lane)
            return int(from_bytes(self._read(np.array([int(addr) & M64], dtype=np.uint64), nbytes,
                                             np.array([runtime.LANES[1]])))[0])
        lanes = self._lanes(M)
        out = np.zeros(len(addr), dtype=object)
        if len(lanes):
            addrs = (addr[lanes] & M64).astype(np.uint64)
            out[lanes] = from_bytes(self._read(addrs, nbytes, lanes))
        return out

    def store(self, addr: int | np.ndarray, width: int, value: int | np.ndarray, M: bool | np.ndarray) -> None:
        nbytes = width // 8
        if not isinstance(addr, np.ndarray):
            self._write(np.array([int(addr) & M64], dtype=np.uint64), nbytes,
                        to_bytes(np.array([int(value) & ((1 << width) - 1)], dtype=object), nbytes),
                        np.array([runtime.LANES[1]]))
            return
        lanes = self._lanes(M)
        if not len(lanes):
            return
        values = np.broadcast_to(np.asarray(value, dtype=object), (len(addr),))[lanes] & ((1 << width) - 1)
        addrs = (addr[lanes] & M64).astype(np.uint64)
        self._write(addrs, nbytes, to_bytes(values, nbytes), lanes)

    # the spaces
    def _read(self, addrs, nbytes, lanes):
        if self.kind == "flat":
            return self._flat(addrs, nbytes, lanes, None)
        if self.kind == "lds":  # LDS addresses are 32 bits: address + offset wraps
            return self.wave.lds.read(addrs & np.uint64(M32), nbytes, self.where)
        if self.kind == "scratch":
            return self.wave.private.read(addrs, nbytes, self.where, lanes)
        return self.launch.memory.read(addrs, nbytes, self.where)

    def _write(self, addrs, nbytes, data, lanes):
        if self.kind == "flat":
            self._flat(addrs, nbytes, lanes, data)
        elif self.kind == "lds":
            self.wave.lds.write(addrs & np.uint64(M32), nbytes, data, self.where)
        elif self.kind == "scratch":
            self.wave.private.write(addrs, nbytes, data, self.where, lanes)
        else:
            self.launch.memory.write(addrs, nbytes, data, self.where)

    def _flat(self, addrs, nbytes, lanes, data):
        """A flat address goes to LDS or scratch inside their apertures, to global memory elsewhere."""
        shared = (addrs >= np.uint64(SHARED_APERTURE)) & (addrs < np.uint64(SHARED_APERTURE + APERTURE_SIZE))
        private = (addrs >= np.uint64(PRIVATE_APERTURE)) & (addrs < np.uint64(PRIVATE_APERTURE + APERTURE_SIZE))
        other = ~(shared | private)
        out = np.empty((len(addrs), nbytes), dtype=np.uint8) if data is None else None
        for sel, target, base in ((shared, "lds", SHARED_APERTURE), (private, "scratch", PRIVATE_APERTURE),
                                  (other, "global", 0)):
            if not sel.any():
                continue
            sub = addrs[sel] - np.uint64(base)
            if target == "lds":
                space = self.wave.lds
                args = ()
            elif target == "scratch":
                space = self.wave.private
                args = (lanes[sel],)
            else:
                space = self.launch.memory
                args = ()
            if data is None:
                out[sel] = space.read(sub, nbytes, self.where, *args)
            else:
                space.write(sub, nbytes, data[sel], self.where, *args)
        return out


class Step:
    """One prepared instruction."""
    __slots__ = ("klass", "name", "pc", "run", "size")

    def __init__(self, name: str, klass: str, size: int, run: Callable[[Wave], None] | None, pc: int) -> None:
        self.name, self.klass, self.size, self.run, self.pc = name, klass, size, run, pc


def _is_float_fmt(fmt) -> int:
    name = fmt.name if fmt is not None else ""
    for width in (16, 32, 64):
        if name == f"FMT_NUM_F{width}":
            return width
    return 0


def _high_half(getter):
    return lambda w: (getter(w) >> 16) & 0xFFFF


def _clear_bits(getter, mask: int):
    return lambda w: getter(w) & ~mask


def _flip_bits(getter, mask: int):
    return lambda w: getter(w) ^ mask


def _flushed(getter):
    return lambda w: fpmode.flush_bits(np.asarray(getter(w), dtype=object) & M32, 32)


def _flushing(put):
    return lambda w, value: put(w, fpmode.flush_bits(np.asarray(value, dtype=object) & M32, 32))


class Preparer:
    """Turns decoded instructions into Steps for one launch (architecture, wave size, address spaces)."""

    def __init__(self, arch: str, wave32: bool, semantics: Semantics) -> None:
        self.launch: Launch | None = None
        self.arch, self.wave32 = arch, wave32
        self.cdna = arch == "cdna"
        self.sem = semantics
        self.lanes = 32 if wave32 else 64
        self.spaces = {kind: Space(None, kind) for kind in ("global", "lds", "scratch", "flat", "scalar")}
        for space in self.spaces.values():
            space.wave32 = wave32

    has_sve = True  # scratch instructions carry the SVE bit (gfx11, gfx94x); gfx90a's do not
    # the uint32/uint64 fast paths of common VALU operations (_FAST_VALU); off, every VALU instruction runs its
    # compiled pseudocode (benchmarks/emulate_speed.py --generic measures the difference)
    fast_paths = True

    def attach(self, launch: Launch) -> None:
        """The launch whose memory and statistics the prepared instructions use from now on."""
        self.launch = launch
        for space in self.spaces.values():
            space.launch = launch
            space.ieee = launch.ieee

    # --- operands
    def source(self, inst, reg, bits: int, fmt, literal: int | None, uniform_ok: bool = True):
        """A function wave → operand bits (an int when uniform, an object array per lane otherwise)."""
        o, count = reg.offset, max(1, bits // 32)
        width = _is_float_fmt(fmt)
        mask = (1 << bits) - 1
        if 256 <= o < 512:
            idx = o - 256
            if count == 1:
                return lambda w: w.v[idx].astype(object)
            return lambda w: w.vread(idx, count)
        if o < 106 or 108 <= o < 124 or o in (124, 125) and (self.cdna or o == 125):
            if not self.cdna and o == 124:
                return lambda w: 0
            return lambda w: w.sread(o, count)
        if o in (106, 126, 107, 127, 102, 103, 104, 105):
            if o in (106, 126) and count == 1 and not self.wave32 and bits == 64:
                count = 2
            return lambda w: w.sread(o, count)
        if o == 124:
            return lambda w: 0
        if 128 <= o <= 208:
            value = (o - 128 if o <= 192 else 192 - o) & mask
            return lambda w: value
        if 240 <= o <= 247:
            value = _float_bits(_FLOAT_CONSTANTS[o], width or 32) & mask if width != 64 else \
                _float_bits(_FLOAT_CONSTANTS[o], 64)
            return lambda w: value
        if o == 248:
            value = _INV_2PI[width or 32]
            return lambda w: value
        if o == 255:
            if literal is None:
                raise FatkitError(f"{inst.op_name}: literal operand without a literal")
            if bits == 64:
                if width == 64:
                    value = literal << 32
                elif fmt is not None and fmt.name == "FMT_NUM_I64":
                    value = runtime._sext(literal, 32) & M64
                else:
                    value = literal
            else:
                value = literal & mask
            return lambda w: value
        if o == 251:
            return lambda w: int((w.s[106] | w.s[107] << 32) == 0)
        if o == 252:
            return lambda w: int(w.exec_int == 0)
        if o == 253:
            return lambda w: w.scc
        if o in (235, 236, 237, 238):
            value = {235: SHARED_APERTURE, 236: SHARED_APERTURE + APERTURE_SIZE - 1, 237: PRIVATE_APERTURE,
                     238: PRIVATE_APERTURE + APERTURE_SIZE - 1}[o]
            return lambda w: value & mask
        raise FatkitError(f"{inst.op_name}: operand encoding {o} is not modelled")

    def where_for(self, name: str, pc: int) -> Callable[[], str]:
        return lambda: f"{name.lower()} at pc 0x{pc:x}"

    # --- preparation
    def prepare(self, inst: Inst, pc: int) -> Step:
        kind = type(inst).__name__
        name = inst.op_name if hasattr(inst, "op") else kind
        size = inst.size()
        if name in NO_EFFECT:
            return Step(name, CONTROL, size, None, pc)
        base = kind.split("_")[0]
        try:
            if base in ("SOP1", "SOP2", "SOPC", "SOPK", "SOPP"):
                return self.scalar(inst, name, kind, size, pc)
            if base == "SMEM":
                return self.smem(inst, name, size, pc)
            if base == "DS":
                return self.ds(inst, name, size, pc)
            if base in ("GLOBAL", "FLAT", "SCRATCH"):
                return self.vmem(inst, name, base, size, pc)
            if base in ("VGLOBAL", "VFLAT", "VSCRATCH"):  # gfx12's encodings of the same operations
                return self.vmem(inst, name, base[1:], size, pc)
            if base == "MUBUF" and self.cdna:
                return self.mubuf(inst, name, size, pc)
            if base in ("VOP1", "VOP2", "VOP3", "VOPC", "VOP3SD", "VOP3P"):
                return self.valu(inst, name, kind, size, pc)
            if base == "VOPD":
                return self.vopd(inst, size, pc)
        except FatkitError as error:
            if "pc 0x" not in error.message:
                error.message = f"{name} at pc 0x{pc:x}: {error.message}"
                error.args = (error.message,)
            raise
        raise FatkitError(f"{name} ({kind}) at pc 0x{pc:x}: this instruction format is "
                          "not modelled")

    def scalar(self, inst, name, kind, size, pc) -> Step:
        if name == "S_ENDPGM":
            def run(w):
                w.done = True
            return Step(name, CONTROL, size, run, pc)
        if name == "S_BARRIER_SIGNAL":  # gfx12: the workgroup barrier (-1) is signal, then s_barrier_wait
            if inst.ssrc0.offset != 193:
                raise FatkitError(f"s_barrier_signal {inst.ssrc0} at pc 0x{pc:x}: only the workgroup barrier (-1) "
                                  "is modelled")
            return Step(name, CONTROL, size, None, pc)
        if name in ("S_BARRIER", "S_BARRIER_WAIT"):
            def run(w):
                w.at_barrier = True
                w.pc += size
            return Step(name, CONTROL, size, run, pc)
        if name == "S_SLEEP":  # a wave polling for others: let them run
            def run(w):
                w.yielded = True
                w.pc += size
            return Step(name, CONTROL, size, run, pc)
        if name in ("S_SENDMSG_RTN_B32", "S_SENDMSG_RTN_B64"):
            message, d = inst.ssrc0.offset, inst.sdst.offset
            if message != 0x83:  # MSG_RTN_GET_REALTIME (gfx11's s_memrealtime): a clock, as S_MEMREALTIME
                raise FatkitError(f"{name.lower()} message 0x{message:x} at pc 0x{pc:x} is not modelled")

            def run(w):
                w.swrite(d, 2 if name.endswith("B64") else 1, self.launch.stats.clock())
                w.pc += size
            return Step(name, SMEM, size, run, pc)
        if name in ("S_TRAP", "S_SETHALT"):
            def run(w):
                raise FatkitError(f"{name.lower()} at pc 0x{pc:x}: the kernel trapped")
            return Step(name, CONTROL, size, run, pc)
        if name in ("S_DENORM_MODE", "S_ROUND_MODE", "S_SETREG_B32", "S_SETREG_IMM32_B32", "S_GETREG_B32"):
            mode_step = self.mode_register(inst, name, size, pc)
            if mode_step is not None:
                return mode_step
        fn = self.sem.get(name, vector=False, widths=self._scalar_widths(inst))
        getters, puts = [], []
        literal = getattr(inst, "literal", None)
        bits = inst.canonical_op_bits
        for param in fn.params:
            if param == "S0" and hasattr(inst, "ssrc0"):
                getters.append(self.source(inst, inst.ssrc0, bits["s0"], None, literal))
            elif param == "S0" and kind.startswith("SOPK") and name.startswith("S_CMPK"):
                # the compares read the SGPR the sdst field names (S0) against the immediate (SIMM16 on
                # gfx11, S1 in the CDNA tables); the other SOPK ops call the immediate S0
                d = inst.sdst.offset
                getters.append(lambda w, d=d: w.sread(d, 1))
            elif param == "S0" and kind.startswith("SOPK"):
                value = inst.simm16
                getters.append(lambda w, value=value: value)
            elif param == "S1" and kind.startswith("SOPK"):
                value = inst.simm16
                getters.append(lambda w, value=value: value)
            elif param == "S1" and hasattr(inst, "ssrc1"):
                getters.append(self.source(inst, inst.ssrc1, bits["s1"], None, literal))
            elif param == "D0" and hasattr(inst, "sdst"):
                d, count = inst.sdst.offset, max(1, bits["d"] // 32)
                getters.append(lambda w, d=d, count=count: w.sread(d, count))
            elif param in ("SIMM16", "SIMM32"):
                value = inst.simm16 if param == "SIMM16" else literal
                getters.append(lambda w, value=value: value)
            else:
                getters.append(self.common_getter(param, name))
        for out in fn.outputs:
            if out == "D0":
                d, count = inst.sdst.offset, max(1, bits["d"] // 32)
                puts.append(lambda w, v, d=d, count=count: w.swrite(d, count, int(v)))
            else:
                puts.append(self.common_put(out, name))
        klass = BRANCH if "BRANCH" in name or name in ("S_SETPC_B64", "S_SWAPPC_B64") else SALU
        space = self.spaces["scalar"]
        return Step(name, klass, size, self._runner(fn, getters, puts, size, space, vector=False,
                                                      where=self.where_for(name, pc)), pc)

    def mode_register(self, inst, name, size, pc) -> Step | None:
        """s_round_mode / s_denorm_mode (gfx10+) and s_setreg / s_getreg of HW_REG_MODE; None for another
        hwreg (the tables' semantics)."""
        where = f"{name.lower()} at pc 0x{pc:x}"
        if name in ("S_DENORM_MODE", "S_ROUND_MODE"):
            shift, field = 4 if name == "S_DENORM_MODE" else 0, inst.simm16 & 0xF

            def set_field(w):
                w.mode = (w.mode & ~(0xF << shift)) | (field << shift)
                w.pc += size
            return Step(name, SALU, size, set_field, pc)
        if fpmode.hwreg_field(inst.simm16)[0] != fpmode.HW_REG_MODE:
            return None
        simm16 = inst.simm16

        def rest(w):  # MODE's bits beyond FP_ROUND/FP_DENORM: DX10_CLAMP (8) and IEEE (9), the launch's
            return int(self.launch.dx10_clamp) << 8 | int(self.launch.ieee) << 9
        if name == "S_GETREG_B32":
            d = inst.sdst.offset

            def read(w):
                w.swrite(d, 1, fpmode.getreg(w.mode, rest(w), simm16))
                w.pc += size
            return Step(name, SALU, size, read, pc)
        if name == "S_SETREG_IMM32_B32":
            literal = inst.literal
            value = lambda w: literal  # noqa: E731
        else:  # s_setreg_b32 writes from its SGPR (decoded as sdst)
            value = self.source(inst, inst.sdst, 32, None, None)

        def write(w):
            w.mode = fpmode.setreg(w.mode, rest(w), simm16, int(value(w)), where)
            w.pc += size
        return Step(name, SALU, size, write, pc)

    def _scalar_widths(self, inst: Inst) -> dict[str, int]:
        bits = inst.canonical_op_bits
        return {"D0": bits["d"], "S0": bits["s0"], "S1": bits["s1"], "EXEC": 64 if not self.wave32 else 32,
                "VCC": 64 if not self.wave32 else 32, "SCC": 1}

    def common_getter(self, param: str, name: str):
        lanes = self.lanes
        if param == "SCC":
            return lambda w: w.scc
        if param == "EXEC":
            return lambda w: w.exec_int
        if param == "EXEC_LO":
            return lambda w: w.s[126]
        if param == "VCC":
            return lambda w: w.s[106] | (w.s[107] << 32 if lanes == 64 else 0)
        if param == "VCC_LO":
            return lambda w: w.s[106]
        if param == "PC":
            return lambda w: w.pc
        if param == "M0":
            return lambda w: w.s[w.m0]
        if param == "VCCZ":
            return lambda w: int((w.s[106] | (w.s[107] << 32 if lanes == 64 else 0)) == 0)
        if param == "EXECZ":
            return lambda w: int(w.exec_int == 0)
        if param in ("D0", "D1", "SDATA", "RETURN_DATA", "VDATA"):
            return lambda w: 0
        if param in ("SBASE", "SOFFSET", "OFFSET", "SADDR"):  # only an address calculation's arguments,
            return lambda w: 0  # which the executor has done (ADDR)
        raise FatkitError(f"{name}: operand {param} is not modelled")

    def common_put(self, out: str, name: str):
        lanes = self.lanes
        if out == "SCC":
            def put(w, v):
                w.scc = int(bool(v))
            return put
        if out == "EXEC":
            def put(w, v):
                v = int(v)
                w.s[126] = v & M32
                w.s[127] = (v >> 32) & M32 if lanes == 64 else 0
            return put
        if out == "VCC":
            def put(w, v):
                v = int(v)
                w.s[106] = v & M32
                if lanes == 64:
                    w.s[107] = (v >> 32) & M32
            return put
        if out == "PC":
            def put(w, v):
                w.pc = int(v) & M64
                w.branched = True
            return put
        if out == "M0":
            def put(w, v):
                w.s[w.m0] = int(v) & M32
            return put
        raise FatkitError(f"{name}: writes {out}, which is not modelled")

    def _runner(self, fn, getters, puts, size, space, vector: bool, where):
        code = fn.code

        def run(w):
            space.wave = w
            space.where = where
            args = [g(w) for g in getters]
            w.branched = False
            result = code(space, True, w.lane_ids if vector else 0, *args)
            for put, value in zip(puts, result):
                put(w, value)
            if not w.branched:
                w.pc += size
        return run

    def smem(self, inst, name, size, pc) -> Step:
        if not name.startswith("S_LOAD") and not name.startswith("S_BUFFER_LOAD"):
            if name in ("S_MEMTIME", "S_MEMREALTIME"):
                d = inst.sdata.offset

                def run(w):
                    w.swrite(d, 2, self.launch.stats.clock())
                    w.pc += size
                return Step(name, SMEM, size, run, pc)
            raise FatkitError(f"{name}: scalar memory operation not modelled")
        if name.startswith("S_BUFFER"):
            raise FatkitError(f"{name}: buffer resources are not modelled")
        fn = self.sem.get(name, vector=False)
        base = inst.sbase.offset
        if hasattr(inst, "ioffset"):  # gfx12: a 24-bit signed immediate offset
            offset = inst.ioffset - (1 << 24) if inst.ioffset & (1 << 23) else inst.ioffset
        else:
            offset = inst.offset - (1 << 21) if inst.offset & (1 << 20) else inst.offset
        soffset = None
        if self.cdna:
            if not inst.imm:
                soffset, offset = offset & 0x7F, 0
            if inst.soffset_en:
                soffset = inst.soffset.offset
        elif inst.soffset.offset != 124:
            soffset = inst.soffset.offset
        count = max(1, inst.canonical_op_bits["d"] // 32)
        d = inst.sdata.offset

        def address(w):
            a = w.sread(base, 2) + offset + (w.s[soffset] if soffset is not None else 0)
            return a & M64
        getters = [address if p == "ADDR" else self.common_getter(p, name) for p in fn.params]
        puts = [(lambda w, v: w.swrite(d, count, int(v))) if o == "SDATA" else self.common_put(o, name)
                for o in fn.outputs]
        return Step(name, SMEM, size, self._runner(fn, getters, puts, size, self.spaces["global"], False,
                                                   self.where_for(name, pc)), pc)

    # --- vector memory
    def _vector_mem_step(self, inst, name, size, pc, klass, space, address, data_regs, vdst, returns: bool,
                         offsets: dict):
        ops = inst.canonical_op_bits
        fn = self.sem.get(name, vector=True)
        atomic = fn.reads_memory and fn.writes_memory
        getters = []
        def lane_addresses(w, address=address):  # a uniform address (scratch "off") is every lane's
            a = address(w)
            return a if isinstance(a, np.ndarray) else np.full(w.lanes, a, dtype=object)
        for p in fn.params:
            if p == "ADDR":
                getters.append(lane_addresses)
            elif p in ("DATA", "DATA0"):
                getters.append(self._vregs(data_regs[0], ops["data"]))
            elif p in ("DATA2", "DATA1"):
                getters.append(self._vregs(data_regs[1], ops["data"]))
            elif p == "VDATA":
                if "VDATA" in fn.outputs:
                    getters.append(self._vregs(vdst, fn.extent.get(p, 32)))
                else:
                    getters.append(self._vregs(data_regs[0], ops["data"]))
            elif p == "RETURN_DATA":
                getters.append(self._vregs(vdst, fn.extent.get(p, 32)))
            elif p in offsets:
                value = offsets[p]
                getters.append(lambda w, value=value: value)
            else:
                getters.append(self.common_getter(p, name))
        puts: list[Callable[..., None] | None] = []
        for o in fn.outputs:
            if o in ("VDATA", "RETURN_DATA"):
                if o == "RETURN_DATA" and not returns:
                    puts.append(None)
                    continue
                # as many registers as the operation writes (the tables' vdst sizes are not reliable)
                idx, count = vdst.offset - 256, max(1, (fn.extent.get(o, 32) + 31) // 32)
                puts.append(lambda w, v, idx=idx, count=count: w.vwrite(idx, count, v, w.exec_bool))
            else:
                raise FatkitError(f"{name}: writes {o}, which is not modelled")
        code = fn.code
        where = self.where_for(name, pc)

        def run(w):
            space.wave, space.where = w, where
            args = [g(w) for g in getters]
            if atomic:  # lane by lane, in lane order: lanes hitting one address see each other
                results = [np.zeros(w.lanes, dtype=object) for _ in puts]
                for lane in np.nonzero(w.exec_bool)[0]:
                    runtime.LANES[1] = int(lane)
                    lane_args = [a[lane] if isinstance(a, np.ndarray) else a for a in args]
                    out = code(space, True, int(lane), *lane_args)
                    for k, value in enumerate(out):
                        results[k][lane] = value
            else:
                results = code(space, True, w.lane_ids, *args)
            for put, value in zip(puts, results):
                if put is not None:
                    put(w, value)
            w.pc += size
        return Step(name, klass, size, run, pc)

    def _vregs(self, reg, bits):
        idx, count = reg.offset - 256, max(1, bits // 32)
        return lambda w: w.vread(idx, count)

    def ds(self, inst, name, size, pc) -> Step:
        if getattr(inst, "gds", 0):
            raise FatkitError(f"{name}: GDS is not modelled")
        addr = inst.addr.offset - 256
        offset = inst.offset0 | (inst.offset1 << 8)
        if name in ("DS_BPERMUTE_B32", "DS_PERMUTE_B32"):
            return self.permute(inst, name, size, pc, addr, offset)
        if name == "DS_SWIZZLE_B32":
            return self.swizzle(inst, name, size, pc, offset)
        fn = self.sem.get(name, vector=True)
        uses_offset = any(p in fn.params for p in ("OFFSET", "OFFSET0", "OFFSET1"))
        # where the pseudocode leaves the instruction's offset out (CDNA's DS_READ_U8/_U16, DS_WRITE_B8/_B16,
        # DS_ADD_F64…: MEM[ADDR]), the address still includes it
        extra = 0 if uses_offset else offset

        def address(w):  # LDS addresses are 32-bit: the offset wraps
            return (w.v[addr].astype(object) + extra) & M32 if extra else w.v[addr].astype(object)
        offsets = {"OFFSET": offset, "OFFSET0": inst.offset0, "OFFSET1": inst.offset1}
        # the tables give every atomic a RETURN_DATA; only the _RTN forms (and loads) write it back
        returns = "_RTN" in name or name.startswith(("DS_LOAD", "DS_READ")) or name in ("DS_CONSUME", "DS_APPEND")
        return self._vector_mem_step(inst, name, size, pc, LDS, self.spaces["lds"], address,
                                     (inst.data0, inst.data1), inst.vdst, returns, offsets)

    def vmem(self, inst, name, base, size, pc) -> Step:
        gfx12 = hasattr(inst, "ioffset")  # gfx12: a 24-bit signed offset, vaddr/vsrc fields, th for returns
        if gfx12:
            offset = inst.ioffset - (1 << 24) if inst.ioffset & (1 << 23) else inst.ioffset
        else:
            offset = inst.offset
            bits_offset = 13 if base != "FLAT" else 12
            if base != "FLAT" and offset & (1 << (bits_offset - 1)):
                offset -= 1 << bits_offset
        saddr = inst.saddr.offset
        saddr_off = saddr == 0x7F if self.cdna else saddr in (124, 125)  # "off": NULL / M0 on gfx11
        vaddr = (inst.vaddr if gfx12 else inst.addr).offset - 256
        if base == "SCRATCH":
            # gfx11 and gfx94x say with SVE whether the VGPR address takes part (gfx90a: whenever saddr is off)
            use_vaddr = bool(inst.sve) if self.has_sve else saddr_off

            def address(w):
                a = w.v[vaddr].astype(object) if use_vaddr else 0
                if not saddr_off:
                    a = a + w.s[saddr]
                return (a + offset) & M32
            space = self.spaces["scratch"]
        elif base == "GLOBAL" and not saddr_off:
            def address(w):
                return (w.sread(saddr, 2) + w.v[vaddr].astype(object) + offset) & M64
            space = self.spaces["global"]
        else:
            def address(w):
                return (w.vread(vaddr, 2) + offset) & M64
            space = self.spaces["flat" if base == "FLAT" else "global"]
        if gfx12:  # an atomic returns when th says so (TH_ATOMIC_RETURN)
            returns, data = bool(inst.th & 1), inst.vsrc
        else:
            returns, data = bool(getattr(inst, "sc0", 0) if self.cdna else getattr(inst, "glc", 0)), inst.data
        return self._vector_mem_step(inst, name, size, pc, VMEM, space, address, (data, data),
                                     inst.vdst, returns, {"OFFSET": offset})

    def mubuf(self, inst, name, size, pc) -> Step:
        """gfx90a's scratch: LLVM reaches it through buffer loads and stores on the private segment buffer
        (s[0:3], the first user SGPRs), at VGPR offset (offen) + soffset + the instruction's offset in the lane's
        scratch; what the resource would say (base, stride, swizzle) is what this launch models directly.
        Buffers other than that resource, indexed forms and LDS-direct loads are not modelled."""
        if inst.srsrc.offset != 0 or inst.idxen or inst.lds or not name.startswith(("BUFFER_LOAD_", "BUFFER_STORE_")):
            raise FatkitError(f"{name} at pc 0x{pc:x}: only scratch through the private segment buffer s[0:3] "
                              "(offen or off, no idxen or lds) is modelled for MUBUF")
        vaddr, offen, offset = inst.vaddr.offset - 256, inst.offen, inst.offset
        soffset = self.source(inst, inst.soffset, 32, None, None)

        def address(w):
            base = soffset(w)
            return ((w.v[vaddr].astype(object) if offen else 0) + base + offset) & M32
        return self._vector_mem_step(inst, name, size, pc, VMEM, self.spaces["scratch"], address,
                                     (inst.vdata, inst.vdata), inst.vdata, False,
                                     {"VADDR": 0, "SRSRC": 0, "SOFFSET": 0, "OFFSET": offset})

    # --- cross-lane operations the tables express through VGPR[lane][...] (written here directly)
    def permute(self, inst, name, size, pc, addr, offset) -> Step:
        data, vdst, n = inst.data0.offset - 256, inst.vdst.offset - 256, self.lanes
        backward = name == "DS_BPERMUTE_B32"

        def run(w):
            active = w.exec_bool
            lane = ((w.v[addr].astype(np.int64) + offset) // 4) % n
            src = w.v[data]
            if backward:  # lane i reads lane[i]; an inactive source lane reads as 0
                result = np.where(active[lane], src[lane], 0).astype(np.uint32)
            else:  # lane i writes to lane[i]; higher lanes win
                result = np.zeros(n, dtype=np.uint32)
                for i in np.nonzero(active)[0]:
                    result[lane[i]] = src[i]
            np.copyto(w.v[vdst], result, where=active)
            w.pc += size
        return Step(name, LDS, size, run, pc)

    def swizzle(self, inst, name, size, pc, offset) -> Step:
        data, vdst, n = inst.data0.offset - 256, inst.vdst.offset - 256, self.lanes
        ids = np.arange(n)
        if offset & 0x8000:  # quad permute: 4 lanes × 2 bits
            lane = (ids & ~3) + ((offset >> (2 * (ids & 3))) & 3)
        else:  # bitmask mode over groups of 32
            and_mask, or_mask, xor_mask = offset & 0x1F, (offset >> 5) & 0x1F, (offset >> 10) & 0x1F
            lane = (ids & ~0x1F) | ((((ids & 0x1F) & and_mask) | or_mask) ^ xor_mask)

        def run(w):
            active = w.exec_bool
            result = np.where(active[lane], w.v[data][lane], 0).astype(np.uint32)
            np.copyto(w.v[vdst], result, where=active)
            w.pc += size
        return Step(name, LDS, size, run, pc)

    # --- VALU
    def fast_valu(self, inst, name, kind, size, pc) -> Step | None:
        """A _FAST_VALU operation on uint32 rows, when nothing about the instruction needs the generic path
        (no DPP/SDWA, neg/abs/op_sel, clamp or omod; sources VGPRs, SGPRs, inline integers or a literal)."""
        if name == "V_CNDMASK_B32_E32" and kind == "VOP2" and not getattr(inst, "literal", None):
            return self.fast_cndmask(inst, name, size, pc)
        entry = _FAST_VALU.get(name.removesuffix("_E32").removesuffix("_E64"))
        if entry is None:
            return self.fast_valu64(inst, name, kind, size, pc)
        if kind.startswith("VOP3P") or "_DPP" in kind or "_SDWA" in kind:
            return None
        if (getattr(inst, "neg", 0) or getattr(inst, "abs", 0) or getattr(inst, "opsel", 0) or
                getattr(inst, "clmp", 0) or getattr(inst, "clamp", 0) or getattr(inst, "omod", 0)):
            return None
        arity, operation = entry
        fields = ("src0", "vsrc1") if kind.startswith("VOP2") else ("src0", "src1", "src2")
        sources = self.fast_sources(inst, fields[:arity], getattr(inst, "literal", None))
        if sources is None or len(sources) != arity or not 256 <= inst.vdst.offset < 512:
            return None
        d = inst.vdst.offset - 256
        if arity == 1:
            (s0,) = sources

            def run(w):
                np.copyto(w.v[d], operation(s0(w)), where=w.exec_bool)
                w.pc += size
        elif arity == 2:
            s0, s1 = sources

            def run(w):
                np.copyto(w.v[d], operation(s0(w), s1(w)), where=w.exec_bool)
                w.pc += size
        else:
            s0, s1, s2 = sources

            def run(w):
                np.copyto(w.v[d], operation(s0(w), s1(w), s2(w)), where=w.exec_bool)
                w.pc += size
        return Step(name, VALU, size, run, pc)

    def fast_source64(self, reg, literal) -> Callable | None:
        """A 64-bit source as uint64 (per lane or uniform) for the 64-bit fast operations, or None."""
        o = reg.offset
        if 256 <= o < 511:
            def vgprs(w, idx=o - 256):
                return w.v[idx].astype(np.uint64) | (w.v[idx + 1].astype(np.uint64) << np.uint64(32))
            return vgprs
        if 0 <= o < 105:
            return lambda w: np.uint64(w.s[o] | (w.s[o + 1] << 32))
        if 128 <= o <= 208 or (o == 255 and literal is not None):
            # a literal is zero-extended: these operations' 64-bit operands are unsigned (u64/b64)
            value = np.uint64((o - 128 if o <= 192 else 192 - o) & M64 if o != 255 else literal & M32)
            return lambda w: value
        return None

    def fast_valu64(self, inst, name, kind, size, pc) -> Step | None:
        """v_lshlrev_b64, v_lshl_add_u64 and (gfx11, carry to NULL) v_mad_u64_u32 on uint64 lanes: the
        address arithmetic of nearly every kernel. Wraps modulo 2^64 as D0 does."""
        base = name.removesuffix("_E32").removesuffix("_E64")
        if base not in ("V_LSHLREV_B64", "V_LSHL_ADD_U64", "V_MAD_U64_U32") or "_DPP" in kind or "_SDWA" in kind:
            return None
        if (getattr(inst, "neg", 0) or getattr(inst, "abs", 0) or getattr(inst, "opsel", 0) or
                getattr(inst, "clmp", 0) or getattr(inst, "clamp", 0) or getattr(inst, "omod", 0)):
            return None
        if not 256 <= inst.vdst.offset < 511:
            return None
        d, literal = inst.vdst.offset - 256, getattr(inst, "literal", None)
        low0, low1 = self.fast_sources(inst, ("src0",), literal), self.fast_sources(inst, ("src1",), literal)
        if base == "V_MAD_U64_U32":
            if self.cdna or inst.sdst.offset != 124 or low0 is None or low1 is None:
                return None
            s0, s1 = low0[0], low1[0]
            s2 = self.fast_source64(inst.src2, literal)
            if s2 is None:
                return None

            def value(w):
                return np.asarray(s0(w), np.uint64) * np.asarray(s1(w), np.uint64) + s2(w)
        elif base == "V_LSHLREV_B64":
            if low0 is None:
                return None
            s0 = low0[0]
            s1 = self.fast_source64(inst.src1 if hasattr(inst, "src1") else inst.vsrc1, literal)
            if s1 is None:
                return None

            def value(w):
                return s1(w) << (np.asarray(s0(w), np.uint64) & np.uint64(63))
        else:
            s0, s2 = self.fast_source64(inst.src0, literal), self.fast_source64(inst.src2, literal)
            if low1 is None or s0 is None or s2 is None:
                return None
            s1 = low1[0]

            def value(w):
                return (s0(w) << (np.asarray(s1(w), np.uint64) & np.uint64(7))) + s2(w)

        def run(w):
            result = np.broadcast_to(np.asarray(value(w), np.uint64), (w.lanes,))
            active = w.exec_bool
            np.copyto(w.v[d], (result & np.uint64(M32)).astype(np.uint32), where=active)
            np.copyto(w.v[d + 1], (result >> np.uint64(32)).astype(np.uint32), where=active)
            w.pc += size
        return Step(name, VALU, size, run, pc)

    def fast_sources(self, inst, fields, literal) -> list | None:
        """32-bit sources as uint32 (a VGPR row, an SGPR, an inline integer or the literal), or None."""
        sources = []
        for field_name in fields:
            reg = getattr(inst, field_name, None)
            o = -1 if reg is None else reg.offset
            if 256 <= o < 512:
                sources.append(lambda w, idx=o - 256: w.v[idx])
            elif 0 <= o < 106:
                sources.append(lambda w, o=o: np.uint32(w.s[o]))
            elif 128 <= o <= 208 or (o == 255 and literal is not None):
                value = np.uint32((o - 128 if o <= 192 else 192 - o) & M32 if o != 255 else literal & M32)
                sources.append(lambda w, value=value: value)
            else:
                return None
        return sources

    def fast_cndmask(self, inst, name, size, pc) -> Step | None:
        """v_cndmask_b32 (VOP2): lane i takes S1 where VCC's bit i is set, else S0."""
        lanes, sources = self.lanes, self.fast_sources(inst, ("src0",), None)
        if sources is None:
            return None
        s0 = sources[0]
        s1, d = inst.vsrc1.offset - 256, inst.vdst.offset - 256

        def run(w):
            vcc = w.s[106] | (w.s[107] << 32 if lanes == 64 else 0)
            take = np.unpackbits(np.frombuffer(vcc.to_bytes(8, "little"), np.uint8), bitorder="little")[:lanes]
            np.copyto(w.v[d], np.where(take.astype(bool), w.v[s1], s0(w)), where=w.exec_bool)
            w.pc += size
        return Step(name, VALU, size, run, pc)

    def valu(self, inst, name, kind, size, pc) -> Step:
        fast = self.fast_valu(inst, name, kind, size, pc) if self.fast_paths else None
        if fast is None:
            return self.generic_valu(inst, name, kind, size, pc)
        if not any(t in name for t in ("_F16", "_F32", "_F64")):
            return fast
        # a float fast path knows only the default MODE: other modes take the generic step (fpmode)
        generic, fast_run = self.generic_valu(inst, name, kind, size, pc).run, fast.run

        def run(w):
            (fast_run if w.mode == fpmode.DEFAULT_FP else generic)(w)
        return Step(fast.name, fast.klass, fast.size, run, fast.pc)

    def generic_valu(self, inst, name, kind, size, pc) -> Step:
        if name in ("V_READLANE_B32", "V_READFIRSTLANE_B32_E32", "V_READFIRSTLANE_B32_E64",
                    "V_WRITELANE_B32", "V_READFIRSTLANE_B32"):
            return self.lane_access(inst, name, size, pc)
        if name in ("V_ACCVGPR_WRITE", "V_ACCVGPR_READ", "V_ACCVGPR_MOV_B32_E32"):
            return self.accvgpr(inst, name, size, pc)
        if "MFMA" in name or "WMMA" in name or "SMFMAC" in name:
            return self.matrix(inst, name, size, pc)
        ops = inst.operands
        bits = inst.canonical_op_bits
        literal = getattr(inst, "literal", None)
        is_cmp = "CMP" in name and (kind.startswith("VOPC") or "VOPC" in str(type(inst).__mro__)
                                    or name.startswith("V_CMP"))
        cmpx = name.startswith("V_CMPX")
        lane_masks = set()
        if is_cmp:
            lane_masks.add("EXEC" if cmpx else "D0")
            if cmpx:
                lane_masks.add("D0")
        lane_masks.update({"VCC", "D1"})
        widths = {"D0": bits["d"] if not is_cmp else 64, "D1": 64}
        fn = self.sem.get(name, vector=True, lane_masks=frozenset(lane_masks), widths=widths)
        src_fields = [("S0", "src0"), ("S1", "src1"), ("S2", "src2")]
        if kind.startswith(("VOP2", "VOPC")):
            src_fields = [("S0", "src0"), ("S1", "vsrc1")]
        fields = dict(src_fields)
        neg = getattr(inst, "neg", 0) if not kind.startswith("VOP3P") else 0
        absm = getattr(inst, "abs", 0)
        if "_DPP" in kind or "_SDWA" in kind:
            neg = getattr(inst, "src0_neg", 0) | getattr(inst, "src1_neg", 0) << 1
            absm = getattr(inst, "src0_abs", 0) | getattr(inst, "src1_abs", 0) << 1
        opsel = getattr(inst, "opsel", 0) if kind.startswith("VOP3") and not kind.startswith("VOP3P") else 0
        getters = []
        float_widths: dict[str, int] = {}  # float source params → their width (for the MODE path)
        vop3sd = kind.startswith("VOP3SD")
        for param in fn.params:
            if param in fields:
                i = int(param[1])
                opname = fields[param]
                reg = getattr(inst, opname)
                if ("_DPP" in kind or "_SDWA" in kind) and i == 0:
                    reg = inst.vsrc0
                if "_SDWA" in kind and bool(getattr(inst, f"s{i}", 0)):  # SDWA's SGPR source flag
                    reg = type(reg)(reg.offset - 256, reg.sz)
                # gfx12's VOP3 tables name the first source vsrc0 where gfx11's say src0
                op_info = ops.get(opname) or ops.get(opname.lstrip("v")) or ops.get("v" + opname) or \
                    ops.get("src" + str(i))
                fmt, obits = (op_info[0], op_info[1]) if op_info else (None, bits[f"s{i}"])
                true16_hi = (not self.cdna and obits == 16 and not kind.startswith("VOP3") and
                             384 <= reg.offset < 512)
                if true16_hi:  # gfx11 true16: v[n].h of a 16-bit operand is encoded as VGPR n + 128
                    reg = type(reg)(reg.offset - 128, reg.sz)
                getter = self.source(inst, reg, obits, fmt, literal)
                if true16_hi:
                    getter = _high_half(getter)
                fw = _is_float_fmt(fmt)
                if "_DPP" in kind and i == 0:
                    getter = self.dpp(inst, getter, name)
                if "_SDWA" in kind:
                    getter = self.sdwa_source(inst, getter, i, name)
                if opsel & (1 << i) and obits == 16:
                    getter = _high_half(getter)
                sign_bit = 1 << ((fw or min(obits, 64)) - 1)  # v_cndmask_b32 takes f32 modifiers on b32
                if (absm >> i) & 1:
                    getter = _clear_bits(getter, sign_bit)
                if (neg >> i) & 1:
                    getter = _flip_bits(getter, sign_bit)
                if kind.startswith("VOP3P"):
                    getter = self.packed_source(inst, getter, i, obits, name, "NEG" in fn.params)
                getters.append(getter)
                if fw:
                    float_widths[param] = fw
            elif param == "VCC" and ("CNDMASK" in name or "_CO_CI" in name or "SUBB" in name or "ADDC" in name) \
                    and kind.startswith("VOP3"):
                getters.append(self.source(inst, inst.src2, 64 if not self.wave32 else 32, None, literal))
            elif param == "D0":
                if is_cmp:
                    getters.append(lambda w: 0)
                elif bits["d"] == 16 and not self.cdna and (
                        (not kind.startswith("VOP3") and inst.vdst.offset - 256 >= 128) or opsel & 8):
                    # the high half of a true16 destination (v[n].h, or VOP3's op_sel bit 3) as D0
                    d_index = (inst.vdst.offset - 256) % 128 if not kind.startswith("VOP3") else \
                        inst.vdst.offset - 256
                    getters.append(lambda w, d=d_index: (w.v[d].astype(object) >> 16) & 0xFFFF)
                else:
                    getters.append(self._vregs(inst.vdst, bits["d"]))
            elif param == "D1":
                getters.append(lambda w: 0)
            elif param == "NEG":
                neg_bits = getattr(inst, "neg", 0)
                getters.append(lambda w, value=neg_bits: value)
            elif param == "OPSEL" and kind.startswith("VOP3P"):  # v_pk_mov_b32 picks its halves by op_sel
                getters.append(lambda w, value=getattr(inst, "opsel", 0): value)
            elif param in ("SIMM32", "SIMM16"):
                getters.append(lambda w, value=literal: value)
            else:
                getters.append(self.common_getter(param, name))
        puts: list[Callable[..., None] | None] = []
        clamp = getattr(inst, "clmp", 0) or getattr(inst, "clamp", 0)
        omod = getattr(inst, "omod", 0)
        dfmt = ops.get("vdst", (None, 32, None))[0] if ops.get("vdst") else None
        dwidth = _is_float_fmt(dfmt)
        if clamp and not dwidth and not kind.startswith("VOP3P"):
            saturating = self.saturating(inst, name, size, pc, getters, fn)
            if saturating is not None:
                return saturating
            raise FatkitError(f"{name}: clamp on this integer result is not modelled")
        if omod:
            raise FatkitError(f"{name}: output modifier omod={omod} is not modelled")
        for out in fn.outputs:
            if out == "D0" and is_cmp:
                if cmpx and not self.cdna:
                    puts.append(None)  # gfx11 v_cmpx writes EXEC only
                    continue
                dst = 106 if kind.startswith("VOPC") and not hasattr(inst, "vdst") else \
                    getattr(inst, "sdst", None) or inst.vdst
                d = 106 if kind.startswith("VOPC") and "_E64" not in name and not kind.startswith("VOP3") else \
                    (dst.offset if hasattr(dst, "offset") else dst)
                if "_SDWA" in kind and bool(getattr(inst, "sd", 0)):
                    d = inst.sdst.offset
                puts.append(self.mask_put(d))
            elif out == "D0":
                lanes = self.dpp_enabled(inst) if "_DPP" in kind else None
                puts.append(self.vdst_put(inst, kind, bits["d"], opsel, clamp and dwidth, dwidth, lanes))
            elif out == "VCC":
                d = inst.sdst.offset if vop3sd else 106
                puts.append(self.mask_put(d))
            elif out == "D1":
                d = inst.sdst.offset
                puts.append(self.mask_put(d, pack=True))
            elif out == "EXEC":
                puts.append(self.mask_put(126))
            else:
                puts.append(self.common_put(out, name))
        if fpmode.always_flushes(name):
            getters = [_flushed(g) if param == "S0" else g for param, g in zip(fn.params, getters)]
            puts = [_flushing(p) if out == "D0" and p is not None else p for out, p in zip(fn.outputs, puts)]
        klass = VALU
        code = fn.code
        where = self.where_for(name, pc)
        space = self.spaces["global"]
        if dwidth and not is_cmp:
            float_widths.setdefault("D0", dwidth)
        in_mode = self.mode_path(name, kind, fn, getters, float_widths, dwidth if not is_cmp else 0, pc)

        def run(w):
            space.wave, space.where = w, where
            if w.mode != fpmode.DEFAULT_FP and in_mode is not None:
                result = in_mode(w, space)
            else:
                args = [g(w) for g in getters]
                result = code(space, True, w.lane_ids, *args)
            for put, value in zip(puts, result):
                if put is not None:
                    put(w, value)
            w.pc += size
        return Step(name, klass, size, run, pc)

    def matrix(self, inst, name, size, pc) -> Step:
        """An MFMA/WMMA (semantics.MATRIX_OPS): A, B and C read from VGPRs (C may be an inline constant),
        D written to the active lanes. AccVGPR operands and BLGP (B's lane patterns) are not modelled,
        CBSZ/ABID (one block's A broadcast to its group) are; WMMA runs with every lane active, as the ISA
        requires."""
        op = MATRIX_OPS.get(name)
        if op is None:
            raise FatkitError(f"{name}: this matrix instruction is not modelled")
        if self.arch == "rdna4" and op.layout == "rdna3":  # gfx12's WMMA of the same name: its own lane layout
            op = replace(op, layout="rdna4")
        if any(getattr(inst, bits, 0) for bits in ("acc", "acc_cd", "blgp")):
            raise FatkitError(f"{name}: AccVGPR operands and the BLGP modifier are not modelled")
        broadcast = (getattr(inst, "cbsz", 0), getattr(inst, "abid", 0))
        if broadcast[0] and (op.blocks < 1 << broadcast[0] or broadcast[1] >= 1 << broadcast[0]):
            raise FatkitError(f"{name}: CBSZ {broadcast[0]} / ABID {broadcast[1]} out of range")
        neg = getattr(inst, "neg", 0) if op.layout != "cdna" else 0  # MFMA's encoding has BLGP/CBSZ there
        if op.element != "iu8" and op.layout != "cdna" and (neg or getattr(inst, "neg_hi", 0)):
            raise FatkitError(f"{name}: NEG modifiers are not modelled")
        signs = (bool(neg & 1), bool(neg & 2)) if op.element == "iu8" else (True, True)
        clamp = bool(getattr(inst, "clmp", 0))
        inputs = op.input_registers
        registers = []
        for operand, count in (("src0", inputs), ("src1", inputs), ("src2", op.output_registers)):
            offset = getattr(inst, operand).offset
            if 256 <= offset < 512:
                registers.append((offset - 256, count))
            elif 128 <= offset <= 208 and operand == "src2":  # an inline integer constant as every C element
                registers.append((None, offset - 128 if offset <= 192 else (192 - offset) & M32))
            else:
                raise FatkitError(f"{name}: operand {operand} encoding {offset} is not modelled")
        vdst = inst.vdst.offset - 256
        wmma = op.layout != "cdna"

        def run(w):
            active = w.exec_bool
            if wmma and not active.all():
                raise FatkitError(f"{name} at pc 0x{pc:x}: WMMA needs every lane of the wave active")
            values = []
            for index, count in registers:
                if index is None:
                    values.append(np.full((op.output_registers, w.lanes), count, dtype=np.uint32))
                else:
                    values.append(w.v[index:index + count].copy())
            result = matrix_multiply(op, *values, signs=signs, clamp=clamp, broadcast=broadcast)
            for r in range(op.output_registers):
                np.copyto(w.v[vdst + r], result[r], where=active)
            w.pc += size
        return Step(name, MATRIX, size, run, pc)

    def mode_path(self, name, kind, fn, getters, float_widths, dwidth, pc):
        """The instruction under a MODE other than nearest-even with denormals kept (fpmode's docstring), or
        None where it has no float operand."""
        packed = kind.startswith("VOP3P")
        # V_PK_* hold two values of `half` bits in each operand (their operand formats are not the scalar
        # float ones); the other VOP3P forms (dot products, fma_mix) mix formats and are not flushed here
        half = (32 if "_F32" in name else 16) if packed and name.startswith("V_PK_") and \
            ("_F32" in name or "_F16" in name) else None
        if half:
            float_widths, dwidth = {p: half for p in fn.params if p in ("S0", "S1", "S2")}, 2 * half
        if not float_widths and not dwidth:
            return None
        code, lanes, params = fn.code, self.lanes, fn.params
        arith = fpmode.arithmetic(name)
        flush_in = fpmode.flushes_inputs(name)
        free = fpmode.rounding_free(name)
        width = half or (arith[1] if arith else dwidth or max(float_widths.values()))

        def run(w, space):
            mode = w.mode
            rounding = fpmode.rounding_of(mode, width)
            if rounding and arith is None and not free or packed and rounding or \
                    packed and not half and fpmode.denorm_of(mode, width) != 3:
                raise FatkitError(f"{name.lower()} at pc 0x{pc:x}: MODE 0x{mode:02x} (FP_ROUND, FP_DENORM) "
                                  "for this operation is not modelled")
            args = [g(w) for g in getters]
            if flush_in:
                for k, param in enumerate(params):
                    fw = float_widths.get(param)
                    if fw and not fpmode.denorm_of(mode, fw) & 1:
                        args[k] = fpmode.flush_halves(args[k], half) if half else fpmode.flush_bits(args[k], fw)
            result = list(code(space, True, w.lane_ids, *args))
            if "D0" not in fn.outputs:
                return result
            d = fn.outputs.index("D0")
            if rounding and arith is not None:
                operation, _, operands, negated = arith
                values = [args[params.index(p)] for p in operands]
                result[d] = fpmode.directed(operation, width, values, negated, rounding, result[d], lanes)
            if half and dwidth and not fpmode.denorm_of(mode, half) & 2:
                result[d] = fpmode.flush_halves(np.asarray(result[d], dtype=object) & ((1 << 2 * half) - 1), half)
            elif dwidth and not half and not fpmode.denorm_of(mode, dwidth) & 2:
                result[d] = fpmode.flush_bits(np.asarray(result[d], dtype=object) & ((1 << dwidth) - 1), dwidth)
            return result
        return run

    def saturating(self, inst, name, size, pc, getters, fn):
        """Integer add/sub with the clamp bit: the exact result saturated to the destination type."""
        import re
        m = re.match(r"V_(ADD|SUB|SUBREV)_(?:NC_|CO_)?([UI])(16|32)(?:_E64)?$", name)
        if not m or fn.params[:3] != ["D0", "S0", "S1"] and fn.params[1:3] != ["S0", "S1"]:
            return None
        op, signed, width = m.group(1), m.group(2) == "I", int(m.group(3))
        lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
        s0, s1 = getters[fn.params.index("S0")], getters[fn.params.index("S1")]
        idx = inst.vdst.offset - 256
        mask = (1 << width) - 1
        # a 16-bit result goes to the half op_sel[3] names, the other half kept (gfx9: cleared, for the low half)
        high = width == 16 and bool(getattr(inst, "opsel", 0) & 8)

        def value(x):
            x = np.broadcast_to(np.asarray(x, dtype=object), (self.lanes,)) & mask
            return np.array([runtime._sext(v, width) for v in x], dtype=object) if signed else x

        def run(w):
            a, b = value(s0(w)), value(s1(w))
            exact = a + b if op == "ADD" else a - b if op == "SUB" else b - a
            clamped = np.minimum(np.maximum(exact, lo), hi) & mask
            if high:
                clamped = (w.v[idx].astype(object) & 0xFFFF) | (clamped << 16)
            elif width == 16 and not self.cdna:
                clamped = (w.v[idx].astype(object) & 0xFFFF0000) | clamped
            w.vwrite(idx, 1, clamped, w.exec_bool)
            w.pc += size
        return Step(name, VALU, size, run, pc)

    def accvgpr(self, inst, name, size, pc) -> Step:
        """CDNA's accumulation registers (LLVM spills VGPRs to them): AGPR n is row 256 + n of the unified
        register file. The tables give these moves no pseudocode; each copies 32 bits per active lane, the
        opcode saying which side is an AGPR (write: VGPR/SGPR/constant → AGPR, read: AGPR → VGPR, mov: both)."""
        def index(reg) -> int:
            return reg.offset - 256 if reg.offset >= 256 else reg.offset

        if not self.cdna:
            raise FatkitError(f"{name} at pc 0x{pc:x}: accumulation registers exist on CDNA only")
        d = index(inst.vdst) + (0 if name == "V_ACCVGPR_READ" else 256)
        if name == "V_ACCVGPR_WRITE":
            fetch = self.source(inst, inst.src0, 32, None, getattr(inst, "literal", None))
        else:
            row = 256 + index(inst.src0)

            def fetch(w):
                return w.v[row].astype(object)

        def run(w):
            w.vwrite(d, 1, fetch(w), w.exec_bool)
            w.pc += size
        return Step(name, VALU, size, run, pc)

    def mask_put(self, d: int, pack: bool = False):
        lanes = self.lanes

        def put(w, v):
            if pack:
                v = runtime._pack(np.asarray(v, dtype=object) & 1 != 0) if isinstance(v, np.ndarray) else v
            v = int(v) & w.exec_int
            if d == 126:
                w.s[126] = v & M32
                w.s[127] = (v >> 32) & M32 if lanes == 64 else 0
            elif lanes == 64:
                w.swrite(d, 2, v)
            else:
                w.swrite(d, 1, v)
        return put

    def vdst_put(self, inst, kind, bits, opsel, clamp, dwidth, lanes=None):
        """The destination VGPR's writer; `lanes` (DPP's row and bank masks) leaves the others as they were."""
        idx, count = inst.vdst.offset - 256, max(1, bits // 32)
        if "_SDWA" in kind:
            return self.sdwa_put(inst, idx, bits)
        hi = bool(opsel & 8) and bits == 16
        if bits == 16 and not self.cdna and not kind.startswith("VOP3") and idx >= 128:
            idx, hi = idx - 128, True  # true16 v[n].h
        zero_high = self.cdna and not hi  # gfx9's 16-bit operations clear the destination's upper half
        def put(w, v):
            if clamp:
                f = runtime._asf(v, dwidth)
                nan = f.dtype.type(0) if self.launch is not None and self.launch.dx10_clamp else f
                f = np.where(np.isnan(f), nan, np.clip(f, 0.0, 1.0))
                v = runtime._bits(f.astype(f.dtype), dwidth)
            if bits == 16 and zero_high:
                v = v & 0xFFFF
            elif bits == 16:
                old = w.v[idx].astype(object)
                v = (old & 0xFFFF) | ((v & 0xFFFF) << 16) if hi else (old & 0xFFFF0000) | (v & 0xFFFF)
            w.vwrite(idx, count, v, w.exec_bool if lanes is None else w.exec_bool & lanes)
        return put

    def packed_source(self, inst, getter, i, obits, name, neg_is_operand: bool = False):
        """VOP3P: the low and high halves each pick a source half (opsel / opsel_hi) and may be negated."""
        half = 16 if obits <= 32 else 32
        opsel = (inst.opsel >> i) & 1
        opsel_hi = ((inst.opsel_hi | (inst.opsel_hi2 << 2)) >> i) & 1 if hasattr(inst, "opsel_hi2") else \
            (inst.opsel_hi >> i) & 1
        neg_lo, neg_hi = (inst.neg >> i) & 1, (inst.neg_hi >> i) & 1
        if neg_is_operand:  # the operation reads NEG itself (signedness of dot products)
            neg_lo = neg_hi = 0
        if not name.startswith("V_PK_"):
            if opsel or not opsel_hi or neg_lo or neg_hi:
                raise FatkitError(f"{name}: op_sel/neg modifiers on a non-packed VOP3P operation are not modelled")
            return getter
        mask = (1 << half) - 1
        float_op = "_F16" in name or "_F32" in name
        sign = 1 << (half - 1)

        def packed(w):
            value = getter(w)
            lo = (value >> (half * opsel)) & mask
            hi = (value >> (half * opsel_hi)) & mask
            if float_op:
                lo = lo ^ sign if neg_lo else lo
                hi = hi ^ sign if neg_hi else hi
            return (hi << half) | lo
        return packed

    def dpp(self, inst, getter, name):
        """DPP16: the source operand read from another lane of the same row (or wave, on CDNA)."""
        ctrl, n = inst.dpp, self.lanes
        ids = np.arange(n)
        row_start = ids & ~15
        in_row = ids & 15
        if ctrl <= 0xFF:
            lane = (ids & ~3) + ((ctrl >> (2 * (ids & 3))) & 3)
        elif 0x101 <= ctrl <= 0x10F:
            lane = ids + (ctrl & 15)
            lane = np.where(in_row + (ctrl & 15) > 15, -1, lane)
        elif 0x111 <= ctrl <= 0x11F:
            lane = ids - (ctrl & 15)
            lane = np.where(in_row - (ctrl & 15) < 0, -1, lane)
        elif 0x121 <= ctrl <= 0x12F:
            lane = row_start + ((in_row - (ctrl & 15)) & 15)
        elif ctrl == 0x140:
            lane = row_start + (15 - in_row)
        elif ctrl == 0x141:
            lane = (ids & ~7) + (7 - (ids & 7))
        elif 0x150 <= ctrl <= 0x15F and not self.cdna:
            lane = row_start + (ctrl & 15)
        elif 0x160 <= ctrl <= 0x16F and not self.cdna:
            lane = row_start + (in_row ^ (ctrl & 15))
        elif ctrl == 0x130 and self.cdna:
            lane = np.where(ids + 1 < n, ids + 1, -1)
        elif ctrl == 0x138 and self.cdna:
            lane = ids - 1
        elif ctrl == 0x134 and self.cdna:
            lane = (ids + 1) % n
        elif ctrl == 0x13C and self.cdna:
            lane = (ids - 1) % n
        elif ctrl == 0x142 and self.cdna:
            lane = np.where((ids & 15) == 0, ((ids >> 4) << 4) - 1, -1)
            lane = np.where(ids >= 16, lane, -1)
        elif ctrl == 0x143 and self.cdna:
            lane = np.where(ids >= 32, 31, -1)
        else:
            raise FatkitError(f"{name}: DPP control 0x{ctrl:x} is not modelled")
        bound_zero = inst.bc
        enabled = self.dpp_enabled(inst)
        fetch_ok = lane >= 0
        safe = np.where(fetch_ok, lane, 0)

        def read(w):
            value = getter(w)
            value = np.broadcast_to(np.asarray(value, dtype=object), (n,))
            active = w.exec_bool
            valid = fetch_ok & active[safe]
            moved = np.where(valid, value[safe], 0 if bound_zero else value)
            return np.where(enabled, moved, value).astype(object)
        if not bound_zero:
            raise FatkitError(f"{name}: DPP with bound_ctrl off (invalid lanes keep the destination) is not "
                              "modelled")
        return read

    def dpp_enabled(self, inst) -> np.ndarray:
        """The lanes DPP's row_mask (rows of 16) and bank_mask (lanes 4b–4b+3 of each row) enable: the others keep
        their destination."""
        ids = np.arange(self.lanes)
        rows = ((inst.row_mask >> (ids >> 4)) & 1).astype(bool)
        return rows & ((inst.bank_mask >> ((ids >> 2) & 3)) & 1).astype(bool)

    def sdwa_source(self, inst, getter, i, name):
        sel = getattr(inst, f"src{i}_sel", 6)
        sext = getattr(inst, f"src{i}_sext", 0)
        if sel == 6:
            return getter
        shift, width = ((sel & 3) * 8, 8) if sel < 4 else ((sel - 4) * 16, 16)

        def read(w):
            v = (getter(w) >> shift) & ((1 << width) - 1)
            return runtime._sext(v, width) & M32 if sext else v
        return read

    def sdwa_put(self, inst, idx, bits: int = 32):
        sel, unused = inst.dst_sel, inst.dst_unused
        shift, width = (0, 32) if sel == 6 else (((sel & 3) * 8, 8) if sel < 4 else ((sel - 4) * 16, 16))

        def put(w, v):
            if bits == 16:  # a 16-bit operation's result is 16 bits wide, the ALU's upper half zero (dst_sel DWORD)
                v = v & 0xFFFF
            part = (v & ((1 << width) - 1)) << shift
            if width < 32:
                if unused == 2:  # preserve
                    old = w.v[idx].astype(object)
                    part = (old & ~(((1 << width) - 1) << shift) & M32) | part
                elif unused == 1:  # sign-extend upward
                    sign = (v >> (width - 1)) & 1
                    part = part | np.where(sign != 0, (M32 << (shift + width)) & M32, 0).astype(object)
            w.vwrite(idx, 1, part, w.exec_bool)
        return put

    def lane_access(self, inst, name, size, pc) -> Step:
        n = self.lanes
        literal = getattr(inst, "literal", None)
        if name == "V_WRITELANE_B32":
            value = self.source(inst, inst.src0, 32, None, literal)
            lane = self.source(inst, inst.src1, 32, None, literal)
            d = inst.vdst.offset - 256

            def run(w):
                w.v[d][int(lane(w)) % n] = int(value(w)) & M32
                w.pc += size
            return Step(name, VALU, size, run, pc)
        src = inst.src0.offset - 256
        dst = inst.vdst.offset % 256  # an SGPR, whatever the field's decoded kind
        if src < 0:  # an SGPR or constant: every lane holds it
            value = self.source(inst, inst.src0, 32, None, literal)

            def read(w, lane):
                return int(value(w)) & M32
        else:
            def read(w, lane):
                return int(w.v[src][lane])
        if name == "V_READLANE_B32":
            lane_of = self.source(inst, inst.src1, 32, None, literal)

            def run(w):
                w.swrite(dst, 1, read(w, int(lane_of(w)) % n))
                w.pc += size
        else:
            def run(w):
                e = w.exec_int
                lane = (e & -e).bit_length() - 1 if e else 0
                w.swrite(dst, 1, read(w, lane))
                w.pc += size
        return Step(name, VALU, size, run, pc)

    def vopd(self, inst, size, pc) -> Step:
        """gfx11 dual issue: two VALU operations whose sources are all read before either writes."""
        halves = []
        literal = getattr(inst, "literal", None)
        for side, op, dst, s0, s1 in (("X", inst.opx, inst.vdstx, inst.srcx0, inst.vsrcx1),
                                      ("Y", inst.opy, inst.vdsty, inst.srcy0, inst.vsrcy1)):
            opname = op.name.replace("V_DUAL_", "V_")
            base = {"V_MOV_B32": "V_MOV_B32_E32", "V_CNDMASK_B32": "V_CNDMASK_B32_E32"}.get(opname, opname + "_E32")
            if opname in ("V_FMAMK_F32", "V_FMAAK_F32"):
                base = opname + "_E32"
            fn = self.sem.get(base, vector=True, lane_masks=frozenset({"VCC"}), widths={"D0": 32})
            getters = []
            for param in fn.params:
                if param == "S0":
                    getters.append(self.source(inst, s0, 32, None, literal))
                elif param == "S1":
                    getters.append(self.source(inst, s1, 32, None, literal))
                elif param == "D0":
                    getters.append(self._vregs(dst, 32))
                elif param in ("SIMM32",):
                    getters.append(lambda w: literal)
                else:
                    getters.append(self.common_getter(param, base))
            if fn.outputs != ["D0"]:
                raise FatkitError(f"{base} in VOPD writes {fn.outputs}")
            # f32 halves under a MODE other than the default: as the VOP2 forms (a dot product's f16 sources
            # are not flushed as f32: those are refused in a directed mode, as unmodelled operations)
            single = "_F32" in base and "DOT" not in base
            widths = {p: 32 for p in fn.params if p in ("S0", "S1", "D0", "SIMM32")} if single else {}
            in_mode = self.mode_path(base, "VOPD", fn, getters, widths, 32 if single else 0, pc)
            halves.append((fn.code, getters, dst.offset - 256, in_mode))
        space = self.spaces["global"]

        def run(w):
            results = []
            for code, getters, d, in_mode in halves:
                if w.mode != fpmode.DEFAULT_FP and in_mode is not None:
                    results.append((d, in_mode(w, space)[0]))
                    continue
                results.append((d, code(space, True, w.lane_ids, *[g(w) for g in getters])[0]))
            for d, value in results:
                w.vwrite(d, 1, value, w.exec_bool)
            w.pc += size
        return Step("VOPD", VALU, size, run, pc)


__all__ = ["FlatArray", "GlobalMemory", "LaunchStats", "MemoryFault", "Preparer", "Step", "Wave"]
