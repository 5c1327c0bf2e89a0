"""The integer instruction family (lower/integer.py) against Python models written from the PTX ISA text.

Each test builds one kernel where thread i reads four 64-bit inputs (%x0-%x3, with 32-bit views %w0-%w3 and
16-bit views %h0-%h3) and runs a list of PTX snippets, each leaving its result in %dh/%d/%dd (16/32/64 bits)
or the predicate %q. The inputs are all pairs of boundary values plus seeded random rows.
"""

from __future__ import annotations

import ctypes
import random
import sys

import pytest

from fatkit.errors import FatkitError
from fatkit.translate.pipeline import Options, translate
from tests.amdrun import TARGETS
from tests.amdrun import program as amd_program
from tests.ptxrun import HEADER, M32, M64

WIDTH_MASK = {16: 0xFFFF, 32: M32, 64: M64, "pred": 1}
REGISTER = {16: "%h", 32: "%w", 64: "%x"}
RESULT = {16: "%dh", 32: "%d", 64: "%dd"}
TO_64 = {16: "cvt.u64.u16 %dd, %dh;", 32: "cvt.u64.u32 %dd, %d;", 64: "", "pred": "selp.u64 %dd, 1, 0, %q;"}

EDGES = [0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 255, 256, 0x7FFF, 0x8000, 0xFFFF,
         0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x7FFFFFFFFFFFFFFF, 0x8000000000000000, M64, M64 - 1,
         0xFFFFFFFF80000000, 0xFFFFFFFFFFFF8000, 0x123456789ABCDEF0]


def _rows() -> list[tuple[int, int, int, int]]:
    rng = random.Random(20240611)

    def draw() -> int:
        kind = rng.randrange(5)
        if kind == 0:
            return rng.getrandbits(64)
        if kind == 1:
            return rng.getrandbits(32)
        if kind == 2:
            return rng.getrandbits(16)
        if kind == 3:
            return rng.randrange(70)
        return rng.choice(EDGES)

    rows = [(a, b, EDGES[(i * 7 + j) % len(EDGES)], draw())
            for i, a in enumerate(EDGES) for j, b in enumerate(EDGES)]
    rows += [(draw(), draw(), draw(), draw()) for _ in range(500)]  # 1400 rows in all
    return rows


ROWS = _rows()
BLOCK = 200  # threads per block; ROWS is a whole number of blocks
# The AMD targets run on the CPU executor (fatkit.emulate): every third edge row and every third random one.
AMD_ROWS = ROWS[::3]


@pytest.fixture(params=TARGETS)
def target(request) -> str:
    return request.param


def sx(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def ux(value: int, bits: int) -> int:
    return value & ((1 << bits) - 1)


def kernel(name: str, cases) -> str:
    body = []
    for k, (ptx, width, _) in enumerate(cases):
        body += [ptx, TO_64[width], f"st.global.u64 [%out+{8 * k}], %dd;"]
    loads = []
    for i in range(4):
        loads += [f"ld.global.u64 %x{i}, [%in+{8 * i}];", f"cvt.u32.u64 %w{i}, %x{i};", f"cvt.u16.u64 %h{i}, %x{i};"]
    newline = "\n    "
    return HEADER + f"""
.visible .entry {name}(.param .u64 pin, .param .u64 pout)
{{
    .reg .pred %p<4>;
    .reg .pred %q;
    .reg .b16 %h<4>;
    .reg .b16 %dh;
    .reg .b32 %w<4>;
    .reg .b32 %t<4>;
    .reg .b32 %d;
    .reg .b32 %index;
    .reg .b32 %block;
    .reg .b64 %x<4>;
    .reg .b64 %y<4>;
    .reg .b64 %dd;
    .reg .b64 %in;
    .reg .b64 %out;
    .reg .b64 %off;
    ld.param.u64 %in, [pin];
    ld.param.u64 %out, [pout];
    mov.u32 %index, %ctaid.x;
    mov.u32 %block, %ntid.x;
    mul.lo.u32 %index, %index, %block;
    mov.u32 %block, %tid.x;
    add.u32 %index, %index, %block;
    mul.wide.u32 %off, %index, 32;
    add.s64 %in, %in, %off;
    mul.wide.u32 %off, %index, {8 * len(cases)};
    add.s64 %out, %out, %off;
    {newline.join(loads)}
    {newline.join(body)}
    ret;
}}
"""


def check(name: str, cases, rows=ROWS, target: str = "host") -> None:
    """Run every case on every row (on `target`) and compare with its Python model."""
    if target != "host" and rows is ROWS:
        rows = AMD_ROWS
    program = amd_program(kernel(name, cases), target)
    n = len(rows)
    inputs = (ctypes.c_uint64 * (4 * n))(*(v & M64 for row in rows for v in row))
    out = (ctypes.c_uint64 * (n * len(cases)))()
    block = BLOCK if n % BLOCK == 0 else n
    program.launch(name, [inputs, out], grid=(n // block, 1, 1), block=(block, 1, 1))
    wrong = []
    for r, row in enumerate(rows):
        for k, (ptx, width, model) in enumerate(cases):
            want = model(*row) & WIDTH_MASK[width]
            got = out[r * len(cases) + k]
            if got != want:
                wrong.append(f"{ptx!r} on {[hex(v) for v in row]}: got {got:#x}, want {want:#x}")
    assert not wrong, f"{len(wrong)} mismatches:\n" + "\n".join(wrong[:12])


def op(text: str, width, model):
    """A case: `{d}` is the result register of `width`, `{a}`, `{b}`, `{c}`, `{e}` the four inputs at that
    width (32-bit for predicate results); model(x0, x1, x2, x3) gets the raw 64-bit inputs."""
    regs = REGISTER.get(width, "%w")
    return (text.format(d=RESULT.get(width, "%q"), a=regs + "0", b=regs + "1", c=regs + "2", e=regs + "3"),
            width, model)


def typed(text: str, t: str, model):
    """A case for the operand type `t` (b16 … s64), TYPE in `text` spelled as it: model(a, b, c, e, bits)
    gets the inputs cut to the width and sign- or zero-extended per `t`."""
    bits, signed = int(t[1:]), t[0] == "s"
    view = (lambda v: sx(v, bits)) if signed else (lambda v: ux(v, bits))
    return op(text.replace("TYPE", t), bits, lambda *xs: model(*(view(x) for x in xs), bits))


INT_TYPES = ["u16", "s16", "u32", "s32", "u64", "s64"]


# --------------------------------------------------------------------------------------------------
# add, sub, mul, mad and saturation


def _saturate32(value: int) -> int:
    return max(-(1 << 31), min((1 << 31) - 1, value))


def _lanes(value: int) -> list[int]:
    return [value & 0xFFFF, value >> 16 & 0xFFFF]


def _join(lanes) -> int:
    return (lanes[0] & 0xFFFF) | (lanes[1] & 0xFFFF) << 16


def test_add_sub_mul_mad(target):
    cases = []
    for t in INT_TYPES:
        cases += [
            typed("add.TYPE {d}, {a}, {b};", t, lambda a, b, c, e, n: a + b),
            typed("sub.TYPE {d}, {a}, {b};", t, lambda a, b, c, e, n: a - b),
            typed("mul.lo.TYPE {d}, {a}, {b};", t, lambda a, b, c, e, n: a * b),
            typed("mul.hi.TYPE {d}, {a}, {b};", t, lambda a, b, c, e, n: (a * b) >> n),
            typed("mad.lo.TYPE {d}, {a}, {b}, {c};", t, lambda a, b, c, e, n: a * b + c),
            typed("mad.hi.TYPE {d}, {a}, {b}, {c};", t, lambda a, b, c, e, n: ((a * b) >> n) + c),
        ]
    for t, wide in (("u16", "u32"), ("s16", "s32"), ("u32", "u64"), ("s32", "s64")):
        bits, view = int(t[1:]), (sx if t[0] == "s" else ux)
        src, dst = REGISTER[bits], RESULT[2 * bits]
        cases += [
            (f"mul.wide.{t} {dst}, {src}0, {src}1;", 2 * bits,
             lambda a, b, c, e, bits=bits, view=view: view(a, bits) * view(b, bits)),
            (f"mad.wide.{t} {dst}, {src}0, {src}1, {REGISTER[2 * bits]}2;", 2 * bits,
             lambda a, b, c, e, bits=bits, view=view: view(a, bits) * view(b, bits) + c),
        ]
    cases += [
        op("add.sat.s32 {d}, {a}, {b};", 32, lambda a, b, c, e: _saturate32(sx(a, 32) + sx(b, 32))),
        op("sub.sat.s32 {d}, {a}, {b};", 32, lambda a, b, c, e: _saturate32(sx(a, 32) - sx(b, 32))),
        op("mad.hi.sat.s32 {d}, {a}, {b}, {c};", 32,
           lambda a, b, c, e: _saturate32(((sx(a, 32) * sx(b, 32)) >> 32) + sx(c, 32))),
        op("add.u16x2 {d}, {a}, {b};", 32, lambda a, b, c, e: _join([x + y for x, y in zip(_lanes(a), _lanes(b))])),
        op("add.s16x2 {d}, {a}, {b};", 32,
           lambda a, b, c, e: _join([x + y for x, y in zip(_lanes(a & M32), _lanes(b & M32))])),
        op("add.u32 {d}, {a}, -1;", 32, lambda a, b, c, e: a - 1),
    ]
    check("arith", cases, target=target)


# --------------------------------------------------------------------------------------------------
# carry chains

HIGH_WORDS = "shr.b64 %y0, %x0, 32; cvt.u32.u64 %t0, %y0; shr.b64 %y1, %x1, 32; cvt.u32.u64 %t1, %y1;"
JOIN_T2_T3 = "cvt.u64.u32 %dd, %t2; cvt.u64.u32 %y2, %t3; shl.b64 %y2, %y2, 32; or.b64 %dd, %dd, %y2;"


def test_carry_chains(target):
    cases = [
        # 64-bit add and sub out of 32-bit halves, then the final carry / borrow
        (HIGH_WORDS + "add.cc.u32 %t2, %w0, %w1; addc.cc.u32 %t3, %t0, %t1;" + JOIN_T2_T3, 64,
         lambda a, b, c, e: a + b),
        (HIGH_WORDS + "add.cc.u32 %t2, %w0, %w1; addc.cc.u32 %t3, %t0, %t1; addc.u32 %d, 0, 0;", 32,
         lambda a, b, c, e: (a + b) >> 64),
        (HIGH_WORDS + "sub.cc.u32 %t2, %w0, %w1; subc.cc.u32 %t3, %t0, %t1;" + JOIN_T2_T3, 64,
         lambda a, b, c, e: a - b),
        (HIGH_WORDS + "sub.cc.u32 %t2, %w0, %w1; subc.cc.u32 %t3, %t0, %t1; subc.u32 %d, 0, 0;", 32,
         lambda a, b, c, e: -1 if a < b else 0),
        # 128-bit {x2:x0} ± {x3:x1} with 64-bit words
        ("add.cc.s64 %y0, %x0, %x1; addc.cc.s64 %dd, %x2, %x3;", 64,
         lambda a, b, c, e: (((c << 64 | a) + (e << 64 | b)) >> 64)),
        ("add.cc.u64 %y0, %x0, %x1; addc.cc.u64 %y1, %x2, %x3; addc.u32 %d, 0, 0;", 32,
         lambda a, b, c, e: ((c << 64 | a) + (e << 64 | b)) >> 128),
        ("sub.cc.u64 %y0, %x0, %x1; subc.cc.u64 %dd, %x2, %x3;", 64,
         lambda a, b, c, e: ((c << 64 | a) - (e << 64 | b)) >> 64),
        ("sub.cc.s64 %y0, %x0, %x1; subc.cc.s64 %y1, %x2, %x3; subc.u32 %d, 0, 0;", 32,
         lambda a, b, c, e: -1 if (c << 64 | a) < (e << 64 | b) else 0),
        # CC.CF is a carry: 1 after a subtraction that borrowed nothing (as on NVIDIA GPUs), and subc
        # subtracts 1 - CC.CF
        ("sub.cc.u32 %t0, %w0, %w1; addc.u32 %d, 0, 0;", 32, lambda a, b, c, e: int(a & M32 >= b & M32)),
        ("add.cc.u32 %t0, %w0, %w1; subc.u32 %d, %w2, %w3;", 32,
         lambda a, b, c, e: c - e - 1 + ((a & M32) + (b & M32) >> 32)),
        ("sub.cc.u32 %t0, %w0, %w1; madc.lo.u32 %d, %w2, %w3, %w0;", 32,
         lambda a, b, c, e: c * e + a + int(a & M32 >= b & M32)),
        ("sub.cc.u64 %y0, %x0, %x1; addc.cc.u64 %y1, %x2, %x3; subc.u32 %d, 0, 0;", 32,
         lambda a, b, c, e: -1 + ((c + e + int(a >= b)) >> 64)),
        ("add.cc.s32 %t0, %w0, %w1; addc.s32 %d, %w2, %w3;", 32,
         lambda a, b, c, e: c + e + ((a & M32) + (b & M32) >> 32)),
        # multiword multiply-add: {w3:w2} + w0*w1
        ("mad.lo.cc.u32 %t2, %w0, %w1, %w2; madc.hi.u32 %t3, %w0, %w1, %w3;" + JOIN_T2_T3, 64,
         lambda a, b, c, e: (a & M32) * (b & M32) + (c & M32) + ((e & M32) << 32)),
        ("add.cc.u32 %t0, %w0, %w1; madc.lo.cc.u32 %t1, %w2, %w3, %w0; addc.u32 %d, 0, 0;", 32,
         lambda a, b, c, e: ((((c & M32) * (e & M32)) & M32) + (a & M32) + ((a & M32) + (b & M32) >> 32)) >> 32),
        ("mad.hi.cc.u64 %y0, %x0, %x1, %x2; madc.lo.u64 %dd, %x0, %x1, %x3;", 64,
         lambda a, b, c, e: (a * b & M64) + e + (((a * b >> 64) + c) >> 64)),
        ("mad.lo.cc.s64 %y0, %x0, %x1, %x2; madc.hi.cc.s64 %y1, %x0, %x1, %x3; addc.u32 %d, 0, 0;", 32,
         lambda a, b, c, e: (((sx(a, 64) * sx(b, 64)) >> 64 & M64) + e
                             + (((a * b & M64) + c) >> 64)) >> 64),
    ]
    check("carry", cases, target=target)


# --------------------------------------------------------------------------------------------------
# mul24, mad24, sad, abs, neg, cnot, min, max


def _mul24(a: int, b: int, signed: bool) -> int:
    view = sx if signed else ux
    return view(a, 24) * view(b, 24)


def test_mul24_sad_abs_neg_cnot(target):
    cases = []
    for t in ("u32", "s32"):
        signed = t == "s32"
        cases += [
            op(f"mul24.lo.{t} {{d}}, {{a}}, {{b}};", 32, lambda a, b, c, e, s=signed: _mul24(a, b, s)),
            op(f"mul24.hi.{t} {{d}}, {{a}}, {{b}};", 32, lambda a, b, c, e, s=signed: _mul24(a, b, s) >> 16),
            op(f"mad24.lo.{t} {{d}}, {{a}}, {{b}}, {{c}};", 32, lambda a, b, c, e, s=signed: _mul24(a, b, s) + c),
            op(f"mad24.hi.{t} {{d}}, {{a}}, {{b}}, {{c}};", 32,
               lambda a, b, c, e, s=signed: (_mul24(a, b, s) >> 16) + c),
        ]
    cases.append(op("mad24.hi.sat.s32 {d}, {a}, {b}, {c};", 32,
                    lambda a, b, c, e: _saturate32(sx(_mul24(a, b, True) >> 16, 32) + sx(c, 32))))
    for t in INT_TYPES:
        cases.append(typed("sad.TYPE {d}, {a}, {b}, {c};", t, lambda a, b, c, e, n: c + abs(a - b)))
    for t in ("s16", "s32", "s64"):
        cases += [typed("abs.TYPE {d}, {a};", t, lambda a, b, c, e, n: abs(a)),
                  typed("neg.TYPE {d}, {a};", t, lambda a, b, c, e, n: -a)]
    for t in ("b16", "b32", "b64"):
        cases.append(typed("cnot.TYPE {d}, {a};", t, lambda a, b, c, e, n: int(a == 0)))
    check("misc", cases, target=target)


def test_min_max(target):
    cases = []
    for t in INT_TYPES:
        cases += [typed("min.TYPE {d}, {a}, {b};", t, lambda a, b, c, e, n: min(a, b)),
                  typed("max.TYPE {d}, {a}, {b};", t, lambda a, b, c, e, n: max(a, b))]
    cases += [typed("min.relu.TYPE {d}, {a}, {b};", "s32", lambda a, b, c, e, n: max(min(a, b), 0)),
              typed("max.relu.TYPE {d}, {a}, {b};", "s32", lambda a, b, c, e, n: max(a, b, 0))]
    for name, pick in (("min", min), ("max", max)):
        for t in ("u16x2", "s16x2"):
            view = (lambda v: sx(v, 16)) if t[0] == "s" else (lambda v: v)
            cases.append(op(f"{name}.{t} {{d}}, {{a}}, {{b}};", 32,
                            lambda a, b, c, e, pick=pick, view=view:
                            _join([pick(view(x), view(y)) for x, y in zip(_lanes(a), _lanes(b))])))
        cases.append(op(f"{name}.relu.s16x2 {{d}}, {{a}}, {{b}};", 32,
                        lambda a, b, c, e, pick=pick:
                        _join([max(pick(sx(x, 16), sx(y, 16)), 0) for x, y in zip(_lanes(a), _lanes(b))])))
    check("minmax", cases, target=target)


# --------------------------------------------------------------------------------------------------
# div, rem


def _quotient(a: int, b: int) -> int:
    """Truncating division with NVIDIA's results (measured on an H200): x/0 is all ones; INT_MIN/-1 wraps."""
    if b == 0:
        return -1
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def _remainder(a: int, b: int) -> int:
    return -1 if b == 0 else a - _quotient(a, b) * b


def test_div_rem(target):
    cases = []
    for t in INT_TYPES:
        cases += [typed("div.TYPE {d}, {a}, {b};", t, lambda a, b, c, e, n: _quotient(a, b)),
                  typed("rem.TYPE {d}, {a}, {b};", t, lambda a, b, c, e, n: _remainder(a, b))]
    check("divrem", cases, target=target)


def test_division_edge_values(target):
    """INT_MIN / -1 and division by zero, spelled out for every width."""
    cases, rows = [], []
    for bits in (16, 32, 64):
        minimum = 1 << (bits - 1)
        for a, b in ((minimum, -1), (5, 0), (-5, 0), (0, 0), (minimum, 0)):
            rows.append((a & M64, b & M64, 0, 0))
    for t in INT_TYPES:
        cases += [typed("div.TYPE {d}, {a}, {b};", t, lambda a, b, c, e, n: _quotient(a, b)),
                  typed("rem.TYPE {d}, {a}, {b};", t, lambda a, b, c, e, n: _remainder(a, b))]
    check("divedge", cases, rows, target=target)
    assert _quotient(-(1 << 31), -1) & M32 == 0x80000000  # the model itself wraps like PTX


# --------------------------------------------------------------------------------------------------
# bit counting and searching


def _bfind(a: int, bits: int, signed: bool, shift_amount: bool) -> int:
    if signed and a >> (bits - 1) & 1:
        a = ~a & ((1 << bits) - 1)
    for i in range(bits - 1, -1, -1):
        if a >> i & 1:
            return bits - 1 - i if shift_amount else i
    return M32


def _fns(mask: int, base: int, offset: int) -> int:
    if offset == -2**31:  # an H200 gives 0 (the ISA's search finds nothing)
        return 0
    if offset == 0:
        return base if mask >> base & 1 else M32
    position, count, step = base, abs(offset) - 1, 1 if offset > 0 else -1
    while 0 <= position < 32:
        if mask >> position & 1:
            if count == 0:
                return position
            count -= 1
        position += step
    return M32


SMALL_OFFSET = "shl.b32 %t1, %w2, 26; shr.s32 %t1, %t1, 26;"  # w2's low 6 bits as a signed offset
BASE = "and.b32 %t0, %w1, 31;"  # fns bases above 31 are undefined


def test_bit_counts(target):
    cases = []
    for bits in (32, 64):
        t = f"b{bits}"
        src = REGISTER[bits] + "0"
        cases += [
            (f"popc.{t} %d, {src};", 32, lambda a, b, c, e, n=bits: bin(ux(a, n)).count("1")),
            (f"clz.{t} %d, {src};", 32, lambda a, b, c, e, n=bits: n - ux(a, n).bit_length()),
            (f"brev.{t} {RESULT[bits]}, {src};", bits,
             lambda a, b, c, e, n=bits: int(format(ux(a, n), f"0{n}b")[::-1], 2)),
        ]
        for kind in "us":
            for amount in ("", ".shiftamt"):
                cases.append((f"bfind{amount}.{kind}{bits} %d, {src};", 32,
                              lambda a, b, c, e, n=bits, s=kind == "s", m=bool(amount): _bfind(a, n, s, m)))
    cases += [
        (BASE + SMALL_OFFSET + "fns.b32 %d, %w0, %t0, %t1;", 32,
         lambda a, b, c, e: _fns(a & M32, b & 31, sx(c, 6))),
        (BASE + "fns.b32 %d, %w0, %t0, %w2;", 32, lambda a, b, c, e: _fns(a & M32, b & 31, sx(c, 32))),
        (BASE + "fns.b32 %d, %w3, %t0, 1;", 32, lambda a, b, c, e: _fns(e & M32, b & 31, 1)),
        (BASE + "fns.b32 %d, %w3, %t0, -1;", 32, lambda a, b, c, e: _fns(e & M32, b & 31, -1)),
    ]
    check("bitcount", cases, target=target)
    assert [_fns(0xAAAAAAAA, 3, 1), _fns(0xAAAAAAAA, 3, -1), _fns(0xAAAAAAAA, 2, 1), _fns(0xAAAAAAAA, 2, -1)] \
        == [3, 3, 3, 1]  # the ISA's own examples


# --------------------------------------------------------------------------------------------------
# bit fields


def _field(value: int, bits: int) -> int:
    """A bfe/bfi position or length: its low 8 bits in the 32-bit forms (the ISA), the whole value in the
    64-bit ones (what an H200 does; the ISA says low 8 bits there too)."""
    return value if bits == 64 else value & 0xFF


def _bfe(a: int, pos: int, length: int, bits: int, signed: bool) -> int:
    msb, pos, length = bits - 1, _field(pos, bits), _field(length, bits)
    sign = 0 if not signed or length == 0 else a >> min(pos + length - 1, msb) & 1
    return sum((a >> (pos + i) & 1 if i < length and pos + i <= msb else sign) << i for i in range(bits))


def _bfi(a: int, b: int, pos: int, length: int, bits: int) -> int:
    pos, length = _field(pos, bits), _field(length, bits)
    for i in range(min(length, bits)):
        if pos + i > bits - 1:
            break
        b = b & ~(1 << (pos + i)) | (a >> i & 1) << (pos + i)
    return b


def _bmsk(a: int, b: int, clamp: bool) -> int:
    a1, b1 = a & 0x1F, b & 0x1F
    mask0, total = (M32 << a1) & M32, a1 + b1
    mask1 = (M32 << total) & M32
    position_over = width_over = False
    if clamp:
        if a >= 32:
            position_over, mask0 = True, 0
        width_over = b >= 32
    if total >= 32 or position_over or width_over:
        mask1 = 0
    elif b1 == 0:
        mask1 = M32
    return mask0 & ~mask1 & M32


def _szext(a: int, b: int, clamp: bool, signed: bool) -> int:
    b1 = b & 0x1F
    too_large = b >= 32 and clamp
    mask = 0 if too_large else (M32 << b1) & M32
    sign = 0 if b1 == 0 or too_large or not signed else a >> ((b1 - 1) & 0x1F) & 1
    return (a & ~mask | (mask if sign else 0)) & M32


def test_bit_fields(target):
    cases = []
    small = "and.b32 %t0, %w1, 127; and.b32 %t1, %w2, 127;"  # positions and lengths around the widths
    for bits in (32, 64):
        src = REGISTER[bits]
        for kind in "us":
            for prefix, pos, length in (("", "%w1", "%w2"), (small, "%t0", "%t1")):
                cases.append((f"{prefix}bfe.{kind}{bits} {RESULT[bits]}, {src}0, {pos}, {length};", bits,
                              lambda a, b, c, e, n=bits, s=kind == "s", m=M32 if not prefix else 0x7F:
                              _bfe(ux(a, n), b & m, c & m, n, s)))
        for prefix, pos, length in (("", "%w2", "%w3"), ("and.b32 %t0, %w2, 127; and.b32 %t1, %w3, 127;",
                                                          "%t0", "%t1")):
            cases.append((f"{prefix}bfi.b{bits} {RESULT[bits]}, {src}0, {src}1, {pos}, {length};", bits,
                          lambda a, b, c, e, n=bits, m=M32 if not prefix else 0x7F:
                          _bfi(ux(a, n), ux(b, n), c & m, e & m, n)))
    for mode in ("clamp", "wrap"):
        for prefix, x, y in (("", "%w0", "%w1"), ("and.b32 %t0, %w0, 63; and.b32 %t1, %w1, 63;", "%t0", "%t1")):
            m = M32 if not prefix else 63
            cases.append((f"{prefix}bmsk.{mode}.b32 %d, {x}, {y};", 32,
                          lambda a, b, c, e, cl=mode == "clamp", m=m: _bmsk(a & m, b & m, cl)))
            for kind in "us":
                cases.append((f"{prefix}szext.{mode}.{kind}32 %d, %w2, {y};", 32,
                              lambda a, b, c, e, cl=mode == "clamp", s=kind == "s", m=m:
                              _szext(c & M32, b & m, cl, s)))
    check("bitfield", cases, target=target)
    assert _bmsk(1, 2, False) == 6 and _szext(M32, 0, False, False) == 0  # the ISA's examples


# --------------------------------------------------------------------------------------------------
# prmt, shf


# Source byte of result bytes 0-3 for each prmt mode, indexed by c & 3 (the ISA's tables, low byte first).
PRMT_MODES = {
    "f4e": [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]],
    "b4e": [[0, 7, 6, 5], [1, 0, 7, 6], [2, 1, 0, 7], [3, 2, 1, 0]],
    "rc8": [[0] * 4, [1] * 4, [2] * 4, [3] * 4],
    "ecl": [[0, 1, 2, 3], [1, 1, 2, 3], [2, 2, 2, 3], [3, 3, 3, 3]],
    "ecr": [[0, 0, 0, 0], [0, 1, 1, 1], [0, 1, 2, 2], [0, 1, 2, 3]],
    "rc16": [[0, 1, 0, 1], [2, 3, 2, 3], [0, 1, 0, 1], [2, 3, 2, 3]],
}


def _prmt(a: int, b: int, c: int, mode: str | None) -> int:
    source = (b & M32) << 32 | (a & M32)
    result = 0
    for i in range(4):
        if mode:
            byte = source >> (8 * PRMT_MODES[mode][c & 3][i]) & 0xFF
        else:
            selector = c >> (4 * i) & 0xF
            byte = source >> (8 * (selector & 7)) & 0xFF
            if selector & 8:
                byte = 0xFF if byte & 0x80 else 0
        result |= byte << (8 * i)
    return result


def _shf(a: int, b: int, c: int, left: bool, clamp: bool) -> int:
    n = min(c, 32) if clamp else c & 0x1F
    joined = (b & M32) << 32 | (a & M32)
    return (joined << n) >> 32 if left else joined >> n


def test_permute_and_funnel_shift(target):
    cases = [op("prmt.b32 {d}, {a}, {b}, {c};", 32, lambda a, b, c, e: _prmt(a, b, c & M32, None))]
    cases += [op(f"prmt.b32.{mode} {{d}}, {{a}}, {{b}}, {{c}};", 32,
                 lambda a, b, c, e, mode=mode: _prmt(a, b, c & M32, mode)) for mode in PRMT_MODES]
    cases.append(op("prmt.b32 {d}, {a}, {b}, 0x3210;", 32, lambda a, b, c, e: a))
    cases.append(op("prmt.b32 {d}, {a}, {b}, 0x8888;", 32, lambda a, b, c, e: _prmt(a, b, 0x8888, None)))
    for direction in "lr":
        for mode in ("clamp", "wrap"):
            for prefix, amount in (("", "%w2"), ("and.b32 %t0, %w2, 63;", "%t0")):
                cases.append((f"{prefix}shf.{direction}.{mode}.b32 %d, %w0, %w1, {amount};", 32,
                               lambda a, b, c, e, l=direction == "l", cl=mode == "clamp", m=M32 if not prefix else 63:
                               _shf(a, b, c & m, l, cl)))
    check("permute", cases, target=target)


# --------------------------------------------------------------------------------------------------
# lop3


def _lop3(a: int, b: int, c: int, table: int) -> int:
    return sum((table >> ((a >> i & 1) << 2 | (b >> i & 1) << 1 | (c >> i & 1)) & 1) << i for i in range(32))


def test_lop3(target):
    rng = random.Random(7)
    tables = [0x00, 0xFF, 0x96, 0xE8, 0x80, 0xFE, 0xF0, 0xCC, 0xAA, 0x1E, 0x6A, 0xCA, 0x01, 0x7F]
    tables += [rng.randrange(256) for _ in range(10)]
    cases = [op(f"lop3.b32 {{d}}, {{a}}, {{b}}, {{c}}, {table:#x};", 32,
                lambda a, b, c, e, t=table: _lop3(a, b, c, t)) for table in tables]
    q = "and.b32 %t0, %w3, 1; setp.ne.u32 %p0, %t0, 0;"
    for combine, join in (("or", lambda x, y: x or y), ("and", lambda x, y: x and y)):
        for table in (0x96, 0x80, 0x00, 0xFF):
            cases += [
                (q + f"lop3.{combine}.b32 %d|%q, %w0, %w1, %w2, {table:#x}, %p0;", "pred",
                 lambda a, b, c, e, t=table, j=join: int(j(_lop3(a, b, c, t) != 0, bool(e & 1)))),
                (q + f"lop3.{combine}.b32 %d|%q, %w0, %w1, %w2, {table:#x}, %p0;", 32,
                 lambda a, b, c, e, t=table: _lop3(a, b, c, t)),
            ]
    cases.append((q + "lop3.or.b32 _|%q, %w0, %w1, %w2, 0xE8, %p0;", "pred",
                  lambda a, b, c, e: int(_lop3(a, b, c, 0xE8) != 0 or bool(e & 1))))
    check("lop3", cases, target=target)


# --------------------------------------------------------------------------------------------------
# dp4a, dp2a


def _elements(value: int, bits: int, count: int, signed: bool) -> list[int]:
    view = sx if signed else ux
    return [view(value >> (bits * i), bits) for i in range(count)]


def test_dot_products(target):
    cases = []
    for at in ("u32", "s32"):
        for bt in ("u32", "s32"):
            sa, sb = at == "s32", bt == "s32"
            cases.append(op(f"dp4a.{at}.{bt} {{d}}, {{a}}, {{b}}, {{c}};", 32,
                            lambda a, b, c, e, sa=sa, sb=sb:
                            c + sum(x * y for x, y in zip(_elements(a, 8, 4, sa), _elements(b, 8, 4, sb)))))
            for half, first in (("lo", 0), ("hi", 2)):
                cases.append(op(f"dp2a.{half}.{at}.{bt} {{d}}, {{a}}, {{b}}, {{c}};", 32,
                                lambda a, b, c, e, sa=sa, sb=sb, f=first:
                                c + sum(x * y for x, y in zip(_elements(a, 16, 2, sa),
                                                              _elements(b, 8, 4, sb)[f:f + 2]))))
    check("dot", cases, target=target)


# --------------------------------------------------------------------------------------------------
# SIMD video instructions


def _video(op: str, lanes: int, types: tuple[bool, bool, bool], mode: str, a: int, b: int, c: int) -> int:
    """The ISA's vop4/vop2 with default selectors and mask; types = signedness of .dtype, .atype, .btype."""
    bits = 32 // lanes
    results = []
    for x, y in zip(_elements(a, bits, lanes, types[1]), _elements(b, bits, lanes, types[2])):
        total = x + y
        value = {"vadd": total, "vsub": x - y, "vabsdiff": abs(x - y), "vmin": min(x, y), "vmax": max(x, y),
                 "vavrg": (total + 1) >> 1 if total >= 0 else total >> 1}[op]
        if mode == "sat":
            low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if types[0] else (0, (1 << bits) - 1)
            value = max(low, min(high, value))
        results.append(value)
    if mode == "add":
        return c + sum(results)
    return sum(ux(value, bits) << (bits * i) for i, value in enumerate(results))


def test_simd_video(target):
    cases = []
    for name in ("vadd", "vsub", "vavrg", "vabsdiff", "vmin", "vmax"):
        for lanes in (4, 2):
            for types in ("uuu", "sss", "sus", "usu"):
                spelled = ".".join(("s32" if t == "s" else "u32") for t in types)
                for mode in ("", "sat", "add"):
                    suffix = f".{mode}" if mode else ""
                    cases.append(op(f"{name}{lanes}.{spelled}{suffix} {{d}}, {{a}}, {{b}}, {{c}};", 32,
                                    lambda a, b, c, e, o=name, n=lanes, t=tuple(x == "s" for x in types), m=mode:
                                    _video(o, n, t, m, a, b, c)))
    check("video", cases, target=target)


# --------------------------------------------------------------------------------------------------
# logic and shifts


def test_logic_and_shifts(target):
    cases = []
    for bits in (16, 32, 64):
        for kind in "bus":
            t = f"{kind}{bits}"
            for prefix, amount in (("", "%w1"), ("and.b32 %t0, %w1, 127;", "%t0")):
                m = M32 if not prefix else 127
                if kind == "b":  # shl is defined for .bN only
                    cases.append(op(f"{prefix}shl.{t} {{d}}, {{a}}, {amount};", bits,
                                    lambda a, b, c, e, n=bits, m=m: ux(a, n) << (b & m) if (b & m) < n else 0))
                cases.append(op(f"{prefix}shr.{t} {{d}}, {{a}}, {amount};", bits,
                                lambda a, b, c, e, n=bits, m=m, s=kind == "s":
                                (sx(a, n) >> min(b & m, n - 1)) if s else (ux(a, n) >> (b & m) if (b & m) < n else 0)))
        t = f"b{bits}"
        cases += [op(f"and.{t} {{d}}, {{a}}, {{b}};", bits, lambda a, b, c, e: a & b),
                  op(f"or.{t} {{d}}, {{a}}, {{b}};", bits, lambda a, b, c, e: a | b),
                  op(f"xor.{t} {{d}}, {{a}}, {{b}};", bits, lambda a, b, c, e: a ^ b),
                  op(f"not.{t} {{d}}, {{a}};", bits, lambda a, b, c, e: ~a)]
    check("logic", cases, target=target)


def test_shifts_by_immediates_and_constant_operands(target):
    """Immediate shift amounts (lowering needs no range test for them) below, at and past the width, and shifts
    and integer cvts of values known at lowering time (a mov'd immediate: folded into a constant)."""
    cases = []
    for bits in (16, 32, 64):
        for amount in (0, 1, 3, bits - 1, bits, bits + 1, 200):
            cases.append(op(f"shl.b{bits} {{d}}, {{a}}, {amount};", bits,
                            lambda a, b, c, e, n=bits, k=amount: ux(a, n) << k if k < n else 0))
            for kind in "bus":
                cases.append(op(f"shr.{kind}{bits} {{d}}, {{a}}, {amount};", bits,
                                lambda a, b, c, e, n=bits, k=amount, s=kind == "s":
                                sx(a, n) >> min(k, n - 1) if s else (ux(a, n) >> k if k < n else 0)))
    constant = 0x9234_5678_8765_4321
    for amount in (0, 5, 31, 32, 33):
        cases.append((f"mov.b64 %y0, {constant}; shl.b64 %dd, %y0, {amount};", 64,
                      lambda a, b, c, e, k=amount: ux(constant << k, 64) if k < 64 else 0))
        cases.append((f"mov.b64 %y0, {constant}; shr.s64 %dd, %y0, {amount};", 64,
                      lambda a, b, c, e, k=amount: sx(constant, 64) >> k))
        cases.append((f"mov.b32 %t0, {constant & M32}; shr.u32 %d, %t0, {amount};", 32,
                      lambda a, b, c, e, k=amount: (constant & M32) >> k if k < 32 else 0))
    for value in (0, 1, 0x7FFF_FFFF, 0x8000_0001, M32):
        cases += [(f"mov.b32 %t0, {value}; cvt.s64.s32 %dd, %t0;", 64, lambda a, b, c, e, v=value: sx(v, 32)),
                  (f"mov.b32 %t0, {value}; cvt.u64.u32 %dd, %t0;", 64, lambda a, b, c, e, v=value: v),
                  (f"mov.b32 %t0, {value}; cvt.u16.u32 %dh, %t0;", 16, lambda a, b, c, e, v=value: v & 0xFFFF),
                  (f"mov.b32 %t0, {value}; cvt.s16.s32 %dh, %t0;", 16, lambda a, b, c, e, v=value: v & 0xFFFF)]
    check("shift_immediates", cases, target=target)


# --------------------------------------------------------------------------------------------------
# what is rejected, and the AMD targets


@pytest.mark.parametrize("snippet, why", [
    ("sub.u16x2 %d, %w0, %w1;", "sub has no .u16x2"),
    ("add.sat.u32 %d, %w0, %w1;", "modifier .sat"),
    ("add.cc.u16 %dh, %h0, %h1;", "extended-precision arithmetic is not defined for .u16"),
    ("mad.wide.cc.u32 %dd, %w0, %w1, %x2;", "mad.cc/madc take .lo/.hi"),
    ("mad.lo.sat.s32 %d, %w0, %w1, %w2;", ".sat applies to mad.hi.s32 only"),
    ("mad24.lo.sat.s32 %d, %w0, %w1, %w2;", ".sat applies to mad24.hi.s32 only"),
    ("min.relu.u32 %d, %w0, %w1;", "modifier .relu"),
    ("max.relu.u16x2 %d, %w0, %w1;", ".relu applies to .s16x2 and .s32 only"),
    ("lop3.b32 %d, %w0, %w1, %w2, %w3;", "immLut must be an 8-bit integer literal"),
    ("shf.l.b32 %d, %w0, %w1, %w2;", "exactly one of .clamp/.wrap"),
    ("bmsk.b32 %d, %w0, %w1;", "exactly one of .clamp/.wrap"),
    ("abs.u32 %d, %w0;", "integer abs is not defined for .u32"),
    ("div.b32 %d, %w0, %w1;", "integer div is not defined for .b32"),
    ("shl.u32 %d, %w0, %w1;", "shl is not defined for .u32"),
    ("vadd4.u32.u32.u32.sat.add %d, %w0, %w1, %w2;", ".sat cannot be used with the secondary .add"),
    ("dp4a.u32.f32 %d, %w0, %w1, %w2;", "dp4a takes .u32/.s32"),
])
def test_rejected_forms_say_why(snippet, why):
    with pytest.raises(FatkitError, match=why.replace(".", r"\.")):
        translate(kernel("rejected", [(snippet, 32, None)]), Options(target="host"))


ALL_TESTS = [test_add_sub_mul_mad, test_carry_chains, test_mul24_sad_abs_neg_cnot, test_min_max, test_div_rem,
             test_bit_counts, test_bit_fields, test_permute_and_funnel_shift, test_lop3, test_dot_products,
             test_simd_video, test_logic_and_shifts]


@pytest.mark.parametrize("target", ["gfx942", "gfx1100"])
def test_all_integer_instructions_compile_for_amdgpu(target, monkeypatch):
    """Every snippet of the tests above, in one kernel, becomes a validated AMD code object."""
    collected = []
    monkeypatch.setattr(sys.modules[__name__], "check",
                        lambda name, cases, rows=ROWS, target="host": collected.extend(cases))
    for test in ALL_TESTS:
        test("host")
    code_object = translate(kernel("everything", collected), Options(target=target)).validated
    (compiled,) = code_object.kernels
    assert compiled.name == "everything" and compiled.wavefront_size == (64 if target == "gfx942" else 32)
