"""The video instructions and cvt.pack.sat (lower/video.py) against Python models written from the PTX ISA,
except where an H200 departs from its text (`finish`: .min/.max with c, the .h1 merge).

The models follow the ISA's pseudocode: operands extracted by their selectors and sign- or zero-extended by
their types (partSelectSignExtend, extractAndSignExt_2/_4 over the pair {b:a}), the operation exact,
optSaturate by the destination (sub)word, then optSecondaryOp with c or optMerge into c, the low 32 bits
kept. Each test runs one kernel on the host target where thread i applies every case to a[i], b[i], c[i]:
all triples of byte/half-word/word boundary values, then seeded random words (random bytes drawn from the
boundaries, so every lane meets 0x00/0x7F/0x80/0xFF). The H200 differential suite (verification/families.py,
`video` family) runs the same forms against NVIDIA's own lowering.
"""

from __future__ import annotations

import ctypes
import random

import pytest

from fatkit.errors import FatkitError
from fatkit.translate.pipeline import Options, translate
from tests.amdrun import TARGETS
from tests.amdrun import program as amd_program
from tests.ptxrun import HEADER, M32
from tests.ptxframes import entry

EDGES = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x807F80FF,
         0x7F00FF80, 0x00018000, 0xFFFE7FFF, 31, 32, 33]


def _inputs() -> list[tuple[int, int, int]]:
    rng = random.Random(17_2026)
    byte_edges = [0, 1, 0x7F, 0x80, 0x81, 0xFE, 0xFF]

    def word() -> int:
        if rng.random() < 0.5:
            return rng.getrandbits(32)
        return int.from_bytes(bytes(rng.choice(byte_edges) if rng.random() < 0.7 else rng.getrandbits(8)
                                    for _ in range(4)), "little")

    rows = [(a, b, EDGES[(i + j) % len(EDGES)]) for i, a in enumerate(EDGES) for j, b in enumerate(EDGES)]
    rows += [(word(), word(), word()) for _ in range(256 - len(rows) % 256 + 256)]
    return rows


ROWS = _inputs()
BLOCK = 128


@pytest.fixture(params=TARGETS)
def target(request) -> str:
    """The host JIT, or the gfx1100/gfx942 code object on fatkit.emulate (tests/amdrun.py)."""
    return request.param


def _kernel(name: str, snippets: list[str]) -> str:
    body = []
    for k, snippet in enumerate(snippets):
        body += [snippet, f"st.global.u32 [%rd9+{4 * k}], %r10;"]
    newline = "\n    "
    return HEADER + "\n" + entry(name, "u64 pin, u64 pout", ".pred %p<4>, .b32 %r<16>, .b64 %rd<16>", f"""
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ntid.x;
    mov.u32 %r6, %tid.x;
    mad.lo.u32 %r7, %r4, %r5, %r6;
    mul.wide.u32 %rd3, %r7, 12;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r1, [%rd4];
    ld.global.u32 %r2, [%rd4+4];
    ld.global.u32 %r3, [%rd4+8];
    mul.wide.u32 %rd5, %r7, {4 * len(snippets)};
    add.s64 %rd9, %rd2, %rd5;
    {newline.join(body)}
    ret;
""")


def run_cases(name: str, cases: list[tuple[str, object]], target: str = "host") -> None:
    """Run every (snippet, model) case over ROWS on `target` and compare each result with model(a, b, c)."""
    program = amd_program(_kernel(name, [snippet for snippet, _ in cases]), target)
    flat = [x for row in ROWS for x in row]
    inputs = (ctypes.c_uint32 * len(flat))(*flat)
    out = (ctypes.c_uint32 * (len(ROWS) * len(cases)))()
    program.launch(name, [inputs, out], grid=(len(ROWS) // BLOCK, 1, 1), block=(BLOCK, 1, 1))
    failures = []
    for i, (a, b, c) in enumerate(ROWS):
        for k, (snippet, model) in enumerate(cases):
            want, got = model(a, b, c) & M32, out[i * len(cases) + k]
            if want != got:
                failures.append(f"{snippet} a={a:#x} b={b:#x} c={c:#x}: got {got:#x}, want {want:#x}")
    assert not failures, f"{len(failures)} mismatches, first: " + "\n".join(failures[:8])


# -------------------------------------------------------------------------------------------------- models

def sx(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def select(x: int, signed: bool, sel: str | None) -> int:
    """partSelectSignExtend: the byte/half-word named, or the word, as an exact integer."""
    if sel is None:
        bits, value = 32, x
    elif sel[0] == "b":
        bits, value = 8, x >> (8 * int(sel[1]))
    else:
        bits, value = 16, x >> (16 * int(sel[1]))
    return sx(value, bits) if signed else value & ((1 << bits) - 1)


def clamp(value: int, bits: int, signed: bool) -> int:
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return max(low, min(high, value))


SUBWORD_BITS = {"b0": 8, "b1": 8, "b2": 8, "b3": 8, "h0": 16, "h1": 16}


def finish(tmp: int, c: int, dsigned: bool, sat: bool, secondary: str | None, dsel: str | None) -> int:
    if sat:
        tmp = clamp(tmp, SUBWORD_BITS.get(dsel, 32), dsigned)
    if secondary == "add":
        tmp += sx(c, 32) if dsigned else c
    elif secondary is not None:
        # as an H200 computes it (ptxas's SASS, and the verification run): the result wrapped to 32 bits and
        # sign-extended to 64, c extended by the destination type, compared as signed or unsigned 64-bit values
        # by that type
        wide = sx(tmp, 32) & ((1 << 64) - 1)
        cc = sx(c, 32) & ((1 << 64) - 1) if dsigned else c
        if dsigned:
            wide, cc = sx(wide, 64), sx(cc, 64)
        tmp = {"min": min(wide, cc), "max": max(wide, cc)}[secondary]
    if dsel is not None:
        bits = SUBWORD_BITS[dsel]
        shift = int(dsel[1]) * bits
        mask = ((1 << bits) - 1) << shift
        # the H200 merges .h1 from the result's own upper half (ptxas: PRMT 0x3254), bytes from its low byte
        placed = tmp & mask if dsel == "h1" else tmp << shift
        return (placed & mask) | (c & ~mask & M32)
    return tmp & M32


def scalar_model(op, dsigned, asigned, bsigned, asel, bsel, sat=False, secondary=None, dsel=None, mode=None,
                 cmp=None):
    def model(a, b, c):
        ta = select(a, asigned, asel)
        tb = select(b, bsigned, bsel)
        if op == "vadd":
            tmp = ta + tb
        elif op == "vsub":
            tmp = ta - tb
        elif op == "vabsdiff":
            tmp = abs(ta - tb)
        elif op == "vmin":
            tmp = min(ta, tb)
        elif op == "vmax":
            tmp = max(ta, tb)
        elif op == "vset":
            tmp = int({"eq": ta == tb, "ne": ta != tb, "lt": ta < tb, "le": ta <= tb, "gt": ta > tb,
                       "ge": ta >= tb}[cmp])
        else:
            amount = min(tb, 32) if mode == "clamp" else tb & 31
            tmp = sx(ta << amount, 34) if op == "vshl" else ta >> amount  # the .s34 intermediate
        return finish(tmp, c, dsigned, sat, secondary, dsel)
    return model


def simd_model(op, lanes, dsigned, asigned, bsigned, asel, bsel, c_mode, mask, sat=False, cmp=None):
    """c_mode "add": accumulate the masked lanes into c; "merge": masked lanes replace c's elements."""
    width = 32 // lanes
    asel = asel or ("h10" if lanes == 2 else "b3210")
    bsel = bsel or ("h32" if lanes == 2 else "b7654")
    enabled = [str(i) in mask[1:] for i in range(lanes)] if mask else [True] * lanes

    def element(pair: int, digit: str, signed: bool) -> int:
        value = pair >> (int(digit) * width)
        return sx(value, width) if signed else value & ((1 << width) - 1)

    def model(a, b, c):
        pair = a | (b << 32)
        t = []
        for lane in range(lanes):
            x = element(pair, asel[lanes - lane], asigned)  # the selector's last digit is lane 0
            y = element(pair, bsel[lanes - lane], bsigned)
            if op == "add":
                r = x + y
            elif op == "sub":
                r = x - y
            elif op == "avrg":
                s = x + y
                r = (s + 1) >> 1 if s >= 0 else s >> 1
            elif op == "absdiff":
                r = abs(x - y)
            elif op == "min":
                r = min(x, y)
            elif op == "max":
                r = max(x, y)
            else:
                r = int({"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y,
                         "ge": x >= y}[cmp])
            t.append(clamp(r, width, dsigned) if sat else r)
        if c_mode == "add":
            return c + sum(r for r, on in zip(t, enabled) if on)
        d = 0
        for lane in range(lanes):
            part = t[lane] if enabled[lane] else c >> (lane * width)
            d |= (part & ((1 << width) - 1)) << (lane * width)
        return d
    return model


def vmad_model(asigned, bsigned, asel, bsel, sat=False, po=False, scale=None, negated=(False, False, False)):
    """The ISA's vmad pseudocode: ~x + 1 for a negated product or c is -x, and c is sign-extended when the
    final result is signed."""
    negate_product, negate_c = negated[0] != negated[1], negated[2]

    def model(a, b, c):
        signed = asigned or bsigned or negate_product or negate_c
        product = select(a, asigned, asel) * select(b, bsigned, bsel)
        addend = sx(c, 32) if signed else c
        tmp = (-product if negate_product else product) + (-addend if negate_c else addend) + int(po)
        if scale:
            tmp >>= 7 if scale == "shr7" else 15
        return clamp(tmp, 32, signed) if sat else tmp
    return model


def pack_model(kind: str):
    bits = int(kind[1:])

    def model(a, b, c):
        ta, tb = (clamp(sx(x, 32), bits, kind[0] == "s") & ((1 << bits) - 1) for x in (a, b))
        packed = ta << bits | tb
        return packed if bits == 16 else packed | (c << (2 * bits))
    return model


# -------------------------------------------------------------------------------------------------- cases

TYPES = [(d, a, b) for d in (False, True) for a in (False, True) for b in (False, True)]
SUFFIX = {False: "u32", True: "s32"}


def _types(*signs: bool) -> str:
    return ".".join(SUFFIX[s] for s in signs)


def _sel(name: str, sel: str | None) -> str:
    return name if sel is None else f"{name}.{sel}"


def scalar_cases(rng: random.Random) -> list[tuple[str, object]]:
    cases = []
    selectors = [None, "b0", "b1", "b2", "b3", "h0", "h1"]
    for op in ("vadd", "vsub", "vabsdiff", "vmin", "vmax"):
        for dsigned, asigned, bsigned in TYPES:
            for _ in range(4):
                asel, bsel = rng.choice(selectors), rng.choice(selectors)
                sat = rng.random() < 0.5
                tail = rng.choice([None, "add", "min", "max", "merge"])
                dsel = rng.choice(list(SUBWORD_BITS)) if tail == "merge" else None
                secondary = tail if tail != "merge" else None
                mods = _types(dsigned, asigned, bsigned) + (".sat" if sat else "") + \
                    (f".{secondary}" if secondary else "")
                operands = [_sel("%r10", dsel), _sel("%r1", asel), _sel("%r2", bsel)] + (["%r3"] if tail else [])
                cases.append((f"{op}.{mods} {', '.join(operands)};",
                              scalar_model(op, dsigned, asigned, bsigned, asel, bsel, sat, secondary, dsel)))
    return cases


def shift_and_set_cases(rng: random.Random) -> list[tuple[str, object]]:
    cases = []
    selectors = [None, "b0", "b1", "b3", "h0", "h1"]
    for op in ("vshl", "vshr"):
        for dsigned, asigned, _ in TYPES[::2]:
            for mode in ("clamp", "wrap"):
                for _ in range(3):
                    asel, bsel = rng.choice(selectors), rng.choice(["b0", "b1", None, "h0"])
                    sat = rng.random() < 0.5
                    tail = rng.choice([None, "add", "max", "merge"])
                    dsel = rng.choice(list(SUBWORD_BITS)) if tail == "merge" else None
                    secondary = tail if tail != "merge" else None
                    mods = f"{_types(dsigned, asigned)}.u32{'.sat' if sat else ''}.{mode}" + \
                        (f".{secondary}" if secondary else "")
                    operands = [_sel("%r10", dsel), _sel("%r1", asel), _sel("%r2", bsel)] + (["%r3"] if tail else [])
                    cases.append((f"{op}.{mods} {', '.join(operands)};",
                                  scalar_model(op, dsigned, asigned, False, asel, bsel, sat, secondary, dsel, mode)))
    for cmp in ("eq", "ne", "lt", "le", "gt", "ge"):
        for _, asigned, bsigned in TYPES[:4]:
            asel, bsel = rng.choice(selectors), rng.choice(selectors)
            tail = rng.choice([None, "add", "min", "max", "merge"])
            dsel = rng.choice(list(SUBWORD_BITS)) if tail == "merge" else None
            secondary = tail if tail != "merge" else None
            operands = [_sel("%r10", dsel), _sel("%r1", asel), _sel("%r2", bsel)] + (["%r3"] if tail else [])
            name = f"vset.{_types(asigned, bsigned)}.{cmp}{f'.{secondary}' if secondary else ''}"
            cases.append((f"{name} {', '.join(operands)};",
                          scalar_model("vset", False, asigned, bsigned, asel, bsel, False, secondary, dsel, cmp=cmp)))
    return cases


def vmad_cases(rng: random.Random) -> list[tuple[str, object]]:
    cases = []
    for _, asigned, bsigned in TYPES[:4]:
        for negated in ((True, False, False), (False, True, False), (True, True, False), (False, False, True),
                        (True, True, True)):
            asel, sat, scale = rng.choice([None, "h1", "b2"]), rng.random() < 0.5, rng.choice([None, "shr7"])
            dtype = "s32" if asigned or bsigned or negated[0] != negated[1] or negated[2] else "u32"
            mods = f"{dtype}.{_types(asigned, bsigned)}" + (".sat" if sat else "") + (f".{scale}" if scale else "")
            a, b, c = (("-" if n else "") + r for n, r in zip(negated, ("%r1", "%r2", "%r3")))
            cases.append((f"vmad.{mods} %r10, {_sel(a, asel)}, {b}, {c};",
                          vmad_model(asigned, bsigned, asel, None, sat, False, scale, negated)))
        for sat in (False, True):
            for po, scale in ((False, None), (True, None), (False, "shr7"), (True, "shr15"), (False, "shr15")):
                asel, bsel = rng.choice([None, "b0", "b3", "h1"]), rng.choice([None, "b2", "h0"])
                dtype = "s32" if asigned or bsigned else "u32"
                mods = f"{dtype}.{_types(asigned, bsigned)}" + (".po" if po else "") + (".sat" if sat else "") + \
                    (f".{scale}" if scale else "")
                cases.append((f"vmad.{mods} %r10, {_sel('%r1', asel)}, {_sel('%r2', bsel)}, %r3;",
                               vmad_model(asigned, bsigned, asel, bsel, sat, po, scale)))
    return cases


def simd_cases(rng: random.Random, lanes: int) -> list[tuple[str, object]]:
    cases = []
    kind, digits = ("h", 4) if lanes == 2 else ("b", 8)
    masks = ["h0", "h1", "h10"] if lanes == 2 else ["b0", "b1", "b10", "b2", "b20", "b21", "b210", "b3", "b30",
                                                     "b31", "b310", "b32", "b320", "b321", "b3210"]

    def selector():
        if rng.random() < 0.3:
            return None
        return kind + "".join(str(rng.randrange(digits)) for _ in range(lanes))

    for op in ("add", "sub", "avrg", "absdiff", "min", "max", "set"):
        for dsigned, asigned, bsigned in TYPES:
            for _ in range(2):
                asel, bsel = selector(), selector()
                c_mode = rng.choice(["add", "merge"])
                sat = op != "set" and c_mode == "merge" and rng.random() < 0.6
                mask = rng.choice([None, *masks])
                cmp = rng.choice(["eq", "ne", "lt", "le", "gt", "ge"]) if op == "set" else None
                types = _types(asigned, bsigned) if op == "set" else _types(dsigned, asigned, bsigned)
                mods = types + (f".{cmp}" if cmp else "") + (".sat" if sat else "") + \
                    (".add" if c_mode == "add" else "")
                snippet = f"v{op}{lanes}.{mods} {_sel('%r10', mask)}, {_sel('%r1', asel)}, {_sel('%r2', bsel)}, %r3;"
                cases.append((snippet, simd_model(op, lanes, dsigned and op != "set", asigned, bsigned, asel, bsel,
                                                  c_mode, mask, sat, cmp)))
    return cases


def test_scalar_video(target):
    run_cases("scalar_video", scalar_cases(random.Random(1)), target)


def test_video_shifts_and_vset(target):
    run_cases("video_shift_set", shift_and_set_cases(random.Random(2)), target)


def test_vmad(target):
    run_cases("video_vmad", vmad_cases(random.Random(3)), target)


@pytest.mark.parametrize("lanes", [2, 4])
def test_simd_video(lanes: int, target):
    run_cases(f"simd_video{lanes}", simd_cases(random.Random(lanes), lanes), target)


def test_cvt_pack_sat(target):
    cases = [(f"cvt.pack.sat.{k}.s32 %r10, %r1, %r2;", pack_model(k)) for k in ("u16", "s16")]
    cases += [(f"cvt.pack.sat.{k}.s32.b32 %r10, %r1, %r2, %r3;", pack_model(k))
              for k in ("u8", "s8", "u4", "s4", "u2", "s2")]
    # small magnitudes, so that values inside the range (not only the clamped ends) are packed
    cases += [(f"shr.s32 %r11, %r1, 27;\nshr.s32 %r12, %r2, 29;\ncvt.pack.sat.{k}.s32.b32 %r10, %r11, %r12, %r3;",
               lambda a, b, c, k=k: pack_model(k)(sx(a, 32) >> 27, sx(b, 32) >> 29, c))
              for k in ("u8", "s8", "u4", "s4", "u2", "s2")]
    cases += [(f"shr.s32 %r11, %r1, 14;\nshr.s32 %r12, %r2, 17;\ncvt.pack.sat.{k}.s32 %r10, %r11, %r12;",
               lambda a, b, c, k=k: pack_model(k)(sx(a, 32) >> 14, sx(b, 32) >> 17, c)) for k in ("u16", "s16")]
    run_cases("cvt_pack", cases, target)


@pytest.mark.parametrize("snippet, why", [
    ("vadd2.u32.u32.u32.sat.add %r10, %r1, %r2, %r3;", ".sat cannot be used with the secondary .add"),
    ("vadd4.u32.u32.u32 %r10, %r1.h10, %r2, %r3;", "selector .h10"),
    ("vadd.u32.u32.u32.add %r10.b0, %r1, %r2, %r3;", "exclude each other"),
    ("vadd.u32.u32.u32 %r10, %r1, %r2, %r3;", "c is given exactly when"),
    ("vshl.u32.u32.s32.wrap %r10, %r1, %r2;", "unsigned (.u32) shift amount"),
    ("vset.u32.u32.lt.sat %r10, %r1, %r2;", "no .sat"),
    ("cvt.pack.sat.u8.s32 %r10, %r1, %r2;", "a .b32 c"),
    ("vmad.s32.u32.u32 %r10, -%r1, %r2, -%r3;", "not both"),
    ("vmad.s32.u32.u32.po %r10, %r1, %r2, -%r3;", "no operand with .po"),
    ("vadd.s32.u32.u32 %r10, -%r1, %r2;", "only vmad negates"),
])
def test_malformed_video_forms_are_refused(snippet: str, why: str):
    with pytest.raises(FatkitError, match=why.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")):
        translation = translate(_kernel("bad", [snippet]), Options(target="host"))
        for kernel in translation.kernels:
            if kernel.status != "ok":
                raise FatkitError(kernel.reason)


@pytest.mark.parametrize("processor", ["gfx942", "gfx1100"])
def test_every_video_form_compiles_for_amd(processor: str):
    rng = random.Random(5)
    cases = scalar_cases(rng) + shift_and_set_cases(rng) + vmad_cases(rng) + simd_cases(rng, 2) + \
        simd_cases(rng, 4)
    translation = translate(_kernel("video_amd", [snippet for snippet, _ in cases]), Options(target=processor))
    assert [k.status for k in translation.kernels] == ["ok"], translation.kernels
    assert translation.product[:4] == b"\x7fELF"
