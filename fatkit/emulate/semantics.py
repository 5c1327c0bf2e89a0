"""Per-opcode semantics: the ISA tables' pseudocode compiled to Python once, cached on disk.

The cache lives under $FATKIT_EMULATE_CACHE or ~/.cache/fatkit/emulate, in a directory named after the
translator version and the tinygrad version whose tables were compiled, one file per (opcode, variant).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fatkit.emulate import runtime
from fatkit.emulate.pcode import TRANSLATOR_VERSION, PcodeError, compile_pcode
from fatkit.errors import FatkitError

# Corrections to the tables, in the tables' own pseudocode language (each names what the table gets wrong).
FIXES: dict[tuple[str, str], str] = {
    # The table leaves D0 unset when no scaling is needed; the hardware passes S0 through.
    ("*", "V_DIV_SCALE_F32"): "D0.f32 = S0.f32;\n",
    ("*", "V_DIV_SCALE_F64"): "D0.f64 = S0.f64;\n",
}
# Whole replacements: the table's text is not what the hardware computes for these (keys without the
# _E32/_E64 encoding suffix match both encodings).
REPLACEMENTS: dict[tuple[str, str], str] = {
    # `S0.f32 * 2.0F ** S1.i32` overflows the power before the product; ldexp is exact.
    ("*", "V_LDEXP_F32"): "D0.f32 = ldexp(S0.f32, S1.i32)",
    ("*", "V_LDEXP_F64"): "D0.f64 = ldexp(S0.f64, S1.i32)",
    # gfx90a's v_pk_mov_b32 picks a 32-bit half of each 64-bit source by op_sel; the table slices `S0.u32[63:32]`,
    # the high half of a value it has just made 32 bits wide
    ("cdna", "V_PK_MOV_B32"): ("D0.u64[31 : 0] = S0.u64[OPSEL[0].u32 * 32U + 31U : OPSEL[0].u32 * 32U];\n"
                               "D0.u64[63 : 32] = S1.u64[OPSEL[1].u32 * 32U + 31U : OPSEL[1].u32 * 32U]"),
    ("*", "V_LDEXP_F16"): "D0.f16 = ldexp(S0.f16, S1.i16)",
    # The table scales by 2**32; LLVM's division sequence (and so the hardware it targets) needs the
    # compensation for div_scale's 2**64 scaling, upward for a large scaled quotient, downward for a small
    # one, applied before the single rounding.
    ("*", "V_DIV_FMAS_F32"): "if VCC.u64[laneId] then\nD0.f32 = fma_scaled(S0.f32, S1.f32, S2.f32, "
                             "exponent(S2.f32) > 127 ? 64 : -64)\nelse\nD0.f32 = fma(S0.f32, S1.f32, S2.f32)\nendif",
    # exponent() of the tables reads the biased field, which is 0 for denormals; frexp's exponent is that of
    # the value (the hardware normalizes denormals)
    ("*", "V_FREXP_EXP_I32_F32"): "if ((64'F(S0.f32) == +INF) || (64'F(S0.f32) == -INF) || isNAN(64'F(S0.f32))) then"
                                  "\nD0.i32 = 0\nelse\nD0.i32 = frexp_exp(S0.f32)\nendif",
    ("*", "V_FREXP_EXP_I32_F64"): "if ((S0.f64 == +INF) || (S0.f64 == -INF) || isNAN(S0.f64)) then"
                                  "\nD0.i32 = 0\nelse\nD0.i32 = frexp_exp(S0.f64)\nendif",
    ("*", "V_FREXP_EXP_I16_F16"): "if ((64'F(S0.f16) == +INF) || (64'F(S0.f16) == -INF) || isNAN(64'F(S0.f16))) then"
                                  "\nD0.i16 = 16'0\nelse\nD0.i16 = frexp_exp(S0.f16)\nendif",
    ("*", "V_DIV_FMAS_F64"): "if VCC.u64[laneId] then\nD0.f64 = fma_scaled(S0.f64, S1.f64, S2.f64, "
                             "exponent(S2.f64) > 1023 ? 128 : -128)\nelse\nD0.f64 = fma(S0.f64, S1.f64, S2.f64)\nendif",
    # The tables round to even as floor(x + 0.5) with a correction: +0 for a negative value that rounds to
    # zero (the hardware keeps the sign) and a rounded x + 0.5 for large values; IEEE roundToIntegralTiesToEven
    ("*", "V_RNDNE_F16"): "D0.f16 = rint(S0.f16)",
    ("*", "V_RNDNE_F32"): "D0.f32 = rint(S0.f32)",
    ("*", "V_RNDNE_F64"): "D0.f64 = rint(S0.f64)",
    # v_perm_b32's table text is a statement lambda; the byte selector as the manual defines it
    ("*", "V_PERM_B32"): "D0.u32 = perm_b32(S0.u32, S1.u32, S2.u32)",
    # v_mbcnt's table counts bit by bit in a 32-step loop; the same count in one step
    ("*", "V_MBCNT_LO_U32_B32"): "D0.u32 = S1.u32 + countbits(S0.u32 & ((1ULL << laneId) - 1ULL)[31 : 0].u32)",
    ("*", "V_MBCNT_HI_U32_B32"): "D0.u32 = S1.u32 + countbits(S0.u32 & ((1ULL << laneId) - 1ULL)[63 : 32].u32)",
}


_ONLY_DENOMINATOR = ("== DENORM.f{w})) then\nVCC = 0x1LL;\nif S0.f{w} == S1.f{w} then\n// Only scale the "
                     "denominator\nD0.f{w} = ldexp(S0.f{w}, {e})")
# Substitutions in the tables' text: (opcode, old, new).
SUBSTITUTIONS: list[tuple[str, str, str]] = [
    # v_div_scale_f32 asks whether 1/den, computed in f64, "is DENORM.f64": no f32 operand gives an f64
    # denormal, and the branch (den close to the largest f32) exists for f32 denormal reciprocals.
    ("V_DIV_SCALE_F32", "== DENORM.f64", "== DENORM.f32"),
    # A huge denominator whose quotient would be denormal is scaled down (the table scales it up, to
    # infinity); v_div_fmas then scales the quotient back down with one rounding.
    ("V_DIV_SCALE_F32", _ONLY_DENOMINATOR.format(w=32, e=64), _ONLY_DENOMINATOR.format(w=32, e=-64)),
    ("V_DIV_SCALE_F64", _ONLY_DENOMINATOR.format(w=64, e=128), _ONLY_DENOMINATOR.format(w=64, e=-128)),
]
# gfx12's min/max tables first raise TRAPSTS.INVALID for a signalling NaN source: the trap status is not
# modelled (a kernel runs with FP exceptions masked, and the result does not depend on it), so the statement goes.
# A call of an opcode's function in the pseudocode (`v_max_num_f32(S0.f32, S1.f32)`).
_CALL = re.compile(r"\b([vs]_\w+)\(")
_TRAP_STATUS = re.compile(r"if \([^\n]*\) then\nTRAPSTS\.\w+ = 1\nendif;\n")


def _joined_conditions(text: str) -> str:
    """The text with a condition the tables break over lines (gfx12's min/max: `... &&` then the rest) on one
    line: a line whose parentheses are still open continues on the next."""
    lines: list[str] = []
    open_parens = 0
    for line in text.split("\n"):
        if open_parens > 0:
            lines[-1] += " " + line
        else:
            lines.append(line)
        open_parens += line.count("(") - line.count(")")
    return "\n".join(lines)


# Insertions into the tables' text: (opcode, the text to insert before, the inserted text).
INSERTIONS: list[tuple[str, str, str]] = [
    # A NaN quotient from inputs that are neither NaN nor 0/0 or inf/inf is a scaled quotient that
    # overflowed in v_div_fmas: the quotient is infinite (assumed; the table would return the NaN).
    ("V_DIV_FIXUP_F32", "else\nD0.f32 = sign_out ? -abs(S0.f32)",
     "elsif isNAN(64'F(S0.f32)) then\nD0.f32 = sign_out ? -INF.f32 : +INF.f32\n"),
    ("V_DIV_FIXUP_F64", "else\nD0.f64 = sign_out ? -abs(S0.f64)",
     "elsif isNAN(S0.f64) then\nD0.f64 = sign_out ? -INF : +INF\n"),
]


@dataclass
class Compiled:
    code: Callable
    params: list[str]
    outputs: list[str]
    reads_memory: bool
    writes_memory: bool
    source: str
    extent: dict[str, int]  # operand → bits written (from bit 0)


def _tinygrad_tables(arch: str) -> dict[str, str]:
    try:
        module = importlib.import_module(f"tinygrad.runtime.autogen.amd.{arch}.str_pcode")
    except ImportError as exc:
        raise FatkitError("fatkit.emulate needs the AMD ISA tables of tinygrad 0.14 "
                          f"(pip install 'tinygrad>=0.14,<0.15'): {exc}") from None
    return {op.name: text for op, text in module.PCODE.items()}


def _cache_dir() -> Path:
    import tinygrad
    root = os.environ.get("FATKIT_EMULATE_CACHE") or os.path.join(Path.home(), ".cache", "fatkit", "emulate")
    version = getattr(tinygrad, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version
        version = dist_version("tinygrad")
    return Path(root) / f"v{TRANSLATOR_VERSION}-tinygrad{version}"


class Semantics:
    """Compiled semantics for one architecture's tables ("rdna3", "rdna4", "cdna")."""

    def __init__(self, arch: str):
        self.arch = arch
        self.tables = _tinygrad_tables(arch)
        self.memo: dict[tuple, Compiled] = {}
        self.cache = _cache_dir() / arch

    def text(self, name: str) -> str:
        plain = name.removesuffix("_E64").removesuffix("_E32")
        for key in ((self.arch, name), ("*", name), (self.arch, plain), ("*", plain)):
            if key in REPLACEMENTS:
                return REPLACEMENTS[key]
        base = self.tables.get(name)
        if base is None and name.endswith("_E64"):  # a VOP1/VOP2/VOPC operation in the VOP3 encoding
            base = self.tables.get(name[:-4] + "_E32")
        if base is None:
            raise FatkitError(f"opcode {name} has no pseudocode in the {self.arch} tables (unlisted opcode)")
        base = _joined_conditions(_TRAP_STATUS.sub("", base))
        for opcode, old, new in SUBSTITUTIONS:
            if opcode == plain:
                base = base.replace(old, new)
        for opcode, anchor, inserted in INSERTIONS:
            if opcode == plain and anchor in base:
                base = base.replace(anchor, inserted + anchor, 1)
        for key in ((self.arch, name), ("*", name), (self.arch, plain), ("*", plain)):
            if key in FIXES:
                base = FIXES[key] + base
                break
        return base

    def called(self, function: str) -> str | None:
        """The pseudocode of the opcode a lowercase call in the tables names (`v_max_num_f32(...)` in gfx12's
        v_max3_num_f32), or None where the tables have no such opcode (a runtime helper such as
        v_cvt_i16_f32 then stands for it)."""
        if not function.startswith(("v_", "s_")):
            return None
        for name in (function.upper(), function.upper() + "_E32", function.upper() + "_E64"):
            if name in self.tables:
                return self.text(name)
        return None

    def _with_callees(self, text: str) -> str:
        """The text and, recursively, that of every opcode it calls: what the compiled code depends on."""
        seen: dict[str, str] = {}
        pending = [text]
        while pending:
            for function in _CALL.findall(pending.pop()):
                if function not in seen and (called := self.called(function)) is not None:
                    seen[function] = called
                    pending.append(called)
        return text + "".join(f"\n{function}: {called}" for function, called in sorted(seen.items()))

    def get(self, name: str, vector: bool, lane_masks: frozenset[str] = frozenset(),
            widths: dict[str, int] | None = None) -> Compiled:
        key = (name, vector, lane_masks, tuple(sorted((widths or {}).items())))
        found = self.memo.get(key)
        if found is not None:
            return found
        text = self.text(name)
        digest = hashlib.sha256(repr((self._with_callees(text), key)).encode()).hexdigest()[:16]
        path = self.cache / f"{name}-{digest}.py"
        source = None
        try:
            source = path.read_text()
        except OSError:
            pass
        if source is None:
            try:
                src, params, outputs = compile_pcode(name, text, vector, lane_masks, widths, self.called)
            except PcodeError as error:
                raise FatkitError(f"opcode {name}: {error.message}") from None
            source = f"# {name}\nPARAMS = {params!r}\nOUTPUTS = {outputs!r}\n{src}"
            try:
                self.cache.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(source)
                os.replace(tmp, path)
            except OSError:
                pass  # a read-only cache costs speed only
        namespace = dict(runtime.HELPERS)
        namespace["perm_b32"] = _perm_b32
        exec(compile(source, str(path), "exec"), namespace)  # noqa: S102  fatkit's own generated code
        compiled = Compiled(namespace["run"], namespace["PARAMS"], namespace["OUTPUTS"],
                            "ctx.load" in source, "ctx.store" in source, source, namespace["EXTENT"])
        self.memo[key] = compiled
        return compiled


def _perm_b32(s0, s1, sel):
    """v_perm_b32: each result byte picks a byte of {S0, S1} (selector 0–7), a sign replica (8–11), 0 (12)
    or 0xff (13 and up)."""
    import numpy as np
    data = (s0 << 32) | s1

    def byte(selector):
        picked = (data >> (8 * (selector & 7))) & 0xFF
        sign_source = {8: 15, 9: 31, 10: 47, 11: 63}
        out = picked
        for code, bit in sign_source.items():
            replica = ((data >> bit) & 1) * 0xFF
            out = runtime._sel(runtime._b(selector == code), replica, out)
        out = runtime._sel(runtime._b(selector == 12), 0, out)
        out = runtime._sel(runtime._b(selector >= 13), 0xFF, out)
        return out
    result = 0
    for k in range(4):
        result = result | (byte((sel >> (8 * k)) & 0xFF) << (8 * k))
    del np
    return result


# ------------------------------------------------------------------------------------------------ matrix ops
# The ISA tables give MFMA/WMMA as one line ("D = A (16x16) * B (16x16) + C (16x16)"); their lane layouts
# come from AMD's matrix instruction calculator (which register and lane hold which element), written here
# as formulas, and the arithmetic is a model: every product exact, the sum of one instruction's products and
# C in f64, rounded once to f32 to nearest even (integers: exact, wrapped to 32 bits, or clamped where the
# instruction's clamp bit asks). Hardware sums in its own order with its own rounding (docs/numerics.md);
# subnormal inputs are kept.

@dataclass(frozen=True)
class MatrixOp:
    """One MFMA/WMMA opcode: D (m×n per block, `blocks` blocks) = A (m×k) · B (k×n) + C."""

    m: int
    n: int
    k: int
    blocks: int
    element: str  # "f16", "bf16", "i8" (signed), "iu8" (signedness from the NEG bits)
    accumulator: str  # "f32" or "i32"
    layout: str  # "cdna" (gfx9 MFMA, wave64), "rdna3" (gfx11 WMMA, wave32) or "rdna4" (gfx12 WMMA, wave32)

    @property
    def element_bits(self) -> int:
        return 8 if self.element in ("i8", "iu8") else 16

    @property
    def input_registers(self) -> int:
        lanes = {"cdna": 64, "rdna3": 16, "rdna4": 32}[self.layout]
        return self.m * self.k * self.blocks * self.element_bits // (32 * lanes)

    @property
    def output_registers(self) -> int:
        return self.m * self.n * self.blocks // (64 if self.layout == "cdna" else 32)

    def input_place(self, block: int, index: int, k: int) -> tuple[int, int, int]:
        """(lane, register, bit offset) of A[index][k] (index a row) or B[k][index] (a column) of `block`."""
        if self.layout == "rdna3":  # lanes 16-31 hold the same as lanes 0-15
            per = 32 // self.element_bits
            return index, k // per, (k % per) * self.element_bits
        if self.layout == "rdna4":  # 16-bit elements: k 0-3 and 8-11 in lanes 0-15, 4-7 and 12-15 in 16-31
            if self.element_bits != 16:
                raise FatkitError(f"the gfx12 WMMA layout of {self.element} operands is not modelled")
            held = (k & 3) + 4 * (k >> 3)  # the lane's k index
            return index + 16 * (k >> 2 & 1), held // 2, (held % 2) * 16
        per_lane = max(1, self.m * self.k * self.blocks // 64)  # k values one lane holds
        lane = self.m * block + index
        if self.m * self.blocks < 64:
            lane += self.m * self.blocks * (k // per_lane)
        offset = (k % per_lane) * self.element_bits
        return lane, offset // 32, offset % 32

    def output_place(self, block: int, i: int, j: int) -> tuple[int, int]:
        """(lane, register) of D[i][j] of `block`."""
        if self.layout == "rdna3":
            return 16 * (i % 2) + j, i // 2
        if self.layout == "rdna4":
            return 16 * (i // 8) + j, i % 8
        if self.m == 4:
            return 4 * block + j, i
        if self.m == 16 and self.blocks == 1:
            return 16 * (i // 4) + j, i % 4
        raise FatkitError(f"the D layout of a {self.m}x{self.n} MFMA with {self.blocks} blocks is not modelled")


MATRIX_OPS: dict[str, MatrixOp] = {
    "V_MFMA_F32_4X4X4_16B_F16": MatrixOp(4, 4, 4, 16, "f16", "f32", "cdna"),
    "V_MFMA_F32_4X4X4_16B_BF16": MatrixOp(4, 4, 4, 16, "bf16", "f32", "cdna"),
    "V_MFMA_I32_4X4X4_16B_I8": MatrixOp(4, 4, 4, 16, "i8", "i32", "cdna"),
    "V_MFMA_F32_16X16X16_F16": MatrixOp(16, 16, 16, 1, "f16", "f32", "cdna"),
    "V_MFMA_F32_16X16X16_BF16": MatrixOp(16, 16, 16, 1, "bf16", "f32", "cdna"),
    "V_MFMA_I32_16X16X32_I8": MatrixOp(16, 16, 32, 1, "i8", "i32", "cdna"),
    "V_WMMA_F32_16X16X16_F16": MatrixOp(16, 16, 16, 1, "f16", "f32", "rdna3"),
    "V_WMMA_F32_16X16X16_BF16": MatrixOp(16, 16, 16, 1, "bf16", "f32", "rdna3"),
    "V_WMMA_I32_16X16X16_IU8": MatrixOp(16, 16, 16, 1, "iu8", "i32", "rdna3"),
}


def _element_values(bits, op: MatrixOp, signed: bool):
    """Raw element bits (an integer array) as float64 or int64 values."""
    import numpy as np
    bits = np.asarray(bits, dtype=np.uint32)
    if op.element == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    if op.element == "bf16":
        return (bits << 16).astype(np.uint32).view(np.float32).astype(np.float64)
    values = bits.astype(np.int64)
    return np.where(values >= 128, values - 256, values) if signed else values


def matrix_multiply(op: MatrixOp, a_regs, b_regs, c_regs, signs: tuple[bool, bool] = (True, True),
                    clamp: bool = False, broadcast: tuple[int, int] = (0, 0)):
    """D's registers (uint32 arrays [register][lane]) from A's, B's and C's, as `op` lays them out.
    `broadcast` is MFMA's (CBSZ, ABID): within each group of 2^CBSZ consecutive blocks, every block takes
    the A of the group's block ABID."""
    import numpy as np
    lanes = a_regs.shape[1]
    if op.layout == "rdna3":
        for name, regs in (("A", a_regs), ("B", b_regs)):
            if not np.array_equal(regs[:, :16], regs[:, 16:32]):
                raise FatkitError(f"WMMA {name} operand: lanes 16-31 must hold what lanes 0-15 hold")
    mask = (1 << op.element_bits) - 1
    shape = (op.blocks, op.m, op.k)  # [block][row of A or column of B][k]
    a_bits, b_bits = np.zeros(shape, dtype=np.uint32), np.zeros(shape, dtype=np.uint32)
    for block in range(op.blocks):
        for index in range(op.m):
            for k in range(op.k):
                lane, register, offset = op.input_place(block, index, k)
                a_bits[block, index, k] = (int(a_regs[register, lane]) >> offset) & mask
                b_bits[block, index, k] = (int(b_regs[register, lane]) >> offset) & mask
    size, chosen = broadcast
    if size:
        a_bits = a_bits[[(block >> size << size) + chosen for block in range(op.blocks)]]
    a = _element_values(a_bits, op, signs[0])
    b = _element_values(b_bits, op, signs[1])
    d_regs = np.zeros((op.output_registers, lanes), dtype=np.uint32)
    for block in range(op.blocks):
        for i in range(op.m):
            for j in range(op.n):
                lane, register = op.output_place(block, i, j)
                c = int(c_regs[register, lane])
                if op.accumulator == "i32":
                    total = (c - (1 << 32) if c >> 31 else c) + int(np.dot(a[block, i], b[block, j]))
                    if clamp:
                        total = max(-(1 << 31), min((1 << 31) - 1, total))
                    d_regs[register, lane] = total & 0xFFFFFFFF
                else:
                    c_value = np.uint32(c).view(np.float32).astype(np.float64)
                    with np.errstate(invalid="ignore", over="ignore"):
                        total = np.float32(c_value + np.sum(a[block, i] * b[block, j]))
                    d_regs[register, lane] = total.view(np.uint32)
    return d_regs
