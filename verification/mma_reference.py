"""Host reference models of warp-level mma/mma.sp/wmma arithmetic, independent of fatkit's lowering: exact integer
arithmetic in Python/numpy on the inputs' bit patterns.

    exact_model(terms_a, terms_b, c, types)  c + Σ a·b exactly, rounded once to nearest even (fatkit's `exact`)
    sm90_model(terms_a, terms_b, c, types)   what an H100/H200 tensor core computes (docs/numerics.md)

Operands are arrays of bit patterns (uint64): `a`, `b` of shape (N, K) (the K products of each of N output
elements, in k order), `c` of shape (N,). `dot_terms` turns a probe or verification record (lane registers) into
those arrays using the ISA's fragment layouts.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

# (exponent bits, stored mantissa bits, has infinities) of the element types; tf32 sits in an f32 word
FORMATS = {"f16": (5, 10, True), "bf16": (8, 7, True), "tf32": (8, 23, True), "f32": (8, 23, True),
           "e4m3": (4, 3, False), "e5m2": (5, 2, True), "f64": (11, 52, True)}
WIDTH = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "e4m3": 8, "e5m2": 8, "f64": 64}
FINITE, INF, NAN = 0, 1, 2


def decode(bits: np.ndarray, ptx_type: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(sign, integer significand, exponent, kind) with value = (-1)^sign · significand · 2^exponent; tf32
    ignores its word's low 13 bits as the tensor cores do."""
    e_bits, m_bits, infinities = FORMATS[ptx_type]
    bits = bits.astype(np.uint64)
    if ptx_type == "tf32":
        bits = bits >> np.uint64(13)
        m_bits = 10
    width = 1 + e_bits + m_bits
    sign = ((bits >> np.uint64(width - 1)) & np.uint64(1)).astype(np.int64)
    field = ((bits >> np.uint64(m_bits)) & np.uint64((1 << e_bits) - 1)).astype(np.int64)
    fraction = (bits & np.uint64((1 << m_bits) - 1)).astype(np.int64)
    bias = (1 << (e_bits - 1)) - 1
    top = (1 << e_bits) - 1
    normal = field > 0
    significand = np.where(normal, fraction + (1 << m_bits), fraction)
    exponent = np.where(normal, field, 1) - bias - m_bits
    kind = np.full(bits.shape, FINITE, dtype=np.int64)
    if infinities:
        kind = np.where((field == top) & (fraction == 0), INF, kind)
        kind = np.where((field == top) & (fraction != 0), NAN, kind)
    else:  # e4m3: S.1111.111 is NaN, no infinities
        kind = np.where((field == top) & (fraction == (1 << m_bits) - 1), NAN, kind)
    significand = np.where(kind == FINITE, significand, 0)
    return sign, significand, exponent, kind


def _emin(ptx_type: str) -> int:
    """The exponent of the smallest normal number the tensor core aligns a value of `ptx_type` by (fp8 becomes f16)."""
    e_bits = FORMATS["f16" if ptx_type in ("e4m3", "e5m2") else ptx_type][0]
    return 2 - (1 << (e_bits - 1))


def _bit_length(x: np.ndarray) -> np.ndarray:
    """Bit lengths of non-negative int64 values below 2^53 (0 for 0)."""
    _, exponent = np.frexp(x.astype(np.float64))
    return np.where(x > 0, exponent, 0).astype(np.int64)


def _shift(x: np.ndarray, amount: np.ndarray) -> np.ndarray:
    """floor(x · 2^amount) for non-negative int64 x, any amount (results below 2^63)."""
    left = np.clip(amount, 0, 62)
    right = np.clip(-amount, 0, 63)
    return np.where(amount >= 0, x << left, np.where(right >= 63, 0, x >> right))


def _special(kinds_a, signs_a, kinds_b, signs_b, kind_c, sign_c, sig_a, sig_b):
    """(any NaN result, ±inf result, the sign of that inf) of c + Σ a·b under IEEE rules."""
    nan = (kinds_a == NAN).any(axis=1) | (kinds_b == NAN).any(axis=1) | (kind_c == NAN)
    inf_a, inf_b = kinds_a == INF, kinds_b == INF
    zero_a, zero_b = (kinds_a == FINITE) & (sig_a == 0), (kinds_b == FINITE) & (sig_b == 0)
    nan |= ((inf_a & zero_b) | (inf_b & zero_a)).any(axis=1)
    product_inf = inf_a | inf_b
    product_sign = signs_a ^ signs_b
    positive = (product_inf & (product_sign == 0)).any(axis=1) | ((kind_c == INF) & (sign_c == 0))
    negative = (product_inf & (product_sign == 1)).any(axis=1) | ((kind_c == INF) & (sign_c == 1))
    nan |= positive & negative
    return nan, (positive | negative) & ~nan, np.where(negative, 1, 0)


def _encode_f32_toward_zero(sign, total_sign, magnitude, scale, overflow_to_inf: bool):
    """f32 bits of (-1)^sign · magnitude · 2^scale rounded toward zero (magnitude int64 ≥ 0)."""
    length = _bit_length(magnitude)
    ex = length - 1 + scale
    normal_mant = _shift(magnitude, 24 - length)  # 24 significant bits
    field = ex + 127
    normal = (field & 0xFF).astype(np.uint64) << np.uint64(23) | (normal_mant.astype(np.uint64) & np.uint64(0x7FFFFF))
    subnormal = _shift(magnitude, scale + 149).astype(np.uint64)
    bits = np.where(field >= 1, normal, subnormal)
    big = np.uint64(0x7F800000) if overflow_to_inf else np.uint64(0x7F7FFFFF)
    bits = np.where(field > 254, big, bits)
    bits = np.where(magnitude == 0, np.uint64(0), bits)
    return bits | (sign.astype(np.uint64) << np.uint64(31))


def sm90_model(a: np.ndarray, b: np.ndarray, c: np.ndarray, types: dict, options: dict | None = None) -> np.ndarray:
    """The H100/H200 block sum of c + Σ_k a_k·b_k (f16/bf16/tf32/fp8 inputs, f32 c): exact products; R the
    largest of ex(a)+ex(b)+1 over non-zero products and ex(c)+1; every term truncated toward zero to a
    multiple of 2^(R-26); the exact sum rounded toward zero to f32. Returns f32 bits (uint64)."""
    options = options or {}
    window = options.get("window", 26)
    sa, ma, ea, ka = decode(a, types["a"])
    sb, mb, eb, kb = decode(b, types["b"])
    sc, mc, ec, kc = decode(c, types["c"])
    product = ma * mb
    nonzero = product != 0
    # a subnormal's exponent is the format's smallest (the exponent field's); fp8 is read as f16
    ex_a = np.maximum(_bit_length(ma) - 1 + ea, _emin(types["a"]))
    ex_b = np.maximum(_bit_length(mb) - 1 + eb, _emin(types["b"]))
    lead = np.where(nonzero, ex_a + ex_b + 1, np.iinfo(np.int64).min // 2)
    lead_c = np.where(mc != 0, np.maximum(_bit_length(mc) - 1 + ec, _emin(types["c"])) + 1, np.iinfo(np.int64).min // 2)
    r = np.maximum(lead.max(axis=1), lead_c)
    low = r - window
    terms = _shift(product, ea + eb - low[:, None])
    terms = np.where(sa ^ sb, -terms, terms)
    c_term = _shift(mc, ec - low)
    c_term = np.where(sc == 1, -c_term, c_term)
    total = terms.sum(axis=1) + c_term
    sign = (total < 0).astype(np.int64)  # a zero (exact, or rounded to zero) is +0
    zero_sign = options.get("zero_sign")
    if zero_sign is not None:
        sign = np.where(total == 0, zero_sign(sa ^ sb, nonzero, sc, mc), sign)
    d = types.get("d", "f32")
    if d == "f32" and options.get("d_round", "rz") == "rz":
        bits = _encode_f32_toward_zero(sign, sign, np.abs(total), low, options.get("overflow_to_inf", True))
    else:  # another destination or rounding: exactly, through Fractions
        mode = options.get("d_round", "rz")
        bits = np.array([round_fraction(Fraction(int(t)) * Fraction(2) ** int(e), d, mode=mode) if t else 0
                         for t, e in zip(total, low)], dtype=np.uint64)
        zero = (bits & np.uint64((1 << (WIDTH[d] - 1)) - 1)) == 0
        bits = np.where(zero, np.uint64(0), bits)
    nan, inf, inf_sign = _special(ka, sa, kb, sb, kc, sc, ma, mb)
    width = WIDTH[d]
    infinity = np.uint64({"f16": 0x7C00, "f32": 0x7F800000}[d])
    bits = np.where(inf, infinity | (inf_sign.astype(np.uint64) << np.uint64(width - 1)), bits)
    return np.where(nan, np.uint64(options.get("nan", {"f16": 0x7FFF, "f32": 0x7FFFFFFF}[d])), bits)


# --------------------------------------------------------------------------------------------- exact

def _value(sign: int, significand: int, exponent: int) -> Fraction:
    value = Fraction(significand) * (Fraction(2) ** exponent)
    return -value if sign else value


def round_fraction(value: Fraction, ptx_type: str, negative_zero: bool = False, mode: str = "rn") -> int:
    """`value` rounded in `ptx_type` (f16/f32/f64) to nearest even (`mode` "rn") or toward zero ("rz"), as
    bits; overflow gives ±inf."""
    e_bits, m_bits, _ = FORMATS[ptx_type]
    width = 1 + e_bits + m_bits
    sign = 1 if value < 0 or (value == 0 and negative_zero) else 0
    magnitude = abs(value)
    if magnitude == 0:
        return sign << (width - 1)
    bias = (1 << (e_bits - 1)) - 1
    ex = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** ex > magnitude:
        ex -= 1
    lsb = max(ex, 1 - bias) - m_bits
    scaled = magnitude / (Fraction(2) ** lsb)
    kept, rest = divmod(scaled.numerator, scaled.denominator)
    twice = 2 * rest
    if mode == "rn" and (twice > scaled.denominator or (twice == scaled.denominator and kept & 1)):
        kept += 1
    field = lsb + m_bits + bias
    if kept >= 1 << (m_bits + 1):
        kept >>= 1
        field += 1
    if kept < 1 << m_bits:  # subnormal (field stays at the minimum's encoding 0)
        bits = kept
    else:
        bits = (field << m_bits) | (kept - (1 << m_bits))
    if field >= (1 << e_bits) - 1:
        bits = ((1 << e_bits) - 1) << m_bits
    return (sign << (width - 1)) | bits


def exact_model(a: np.ndarray, b: np.ndarray, c: np.ndarray, types: dict) -> np.ndarray:
    """c + Σ a·b exactly, rounded once to nearest even into types["d"]; NaN results the canonical NaN; an exact
    zero sum +0 unless every term is -0 (IEEE addition in any order)."""
    sa, ma, ea, ka = decode(a, types["a"])
    sb, mb, eb, kb = decode(b, types["b"])
    sc, mc, ec, kc = decode(c, types["c"])
    nan, inf, inf_sign = _special(ka, sa, kb, sb, kc, sc, ma, mb)
    d = types["d"]
    width = WIDTH[d]
    out = np.zeros(len(c), dtype=np.uint64)
    canonical = {"f16": 0x7FFF, "f32": 0x7FFFFFFF, "f64": 0x7FFFFFFFFFFFFFFF}[d]
    infinity = {"f16": 0x7C00, "f32": 0x7F800000, "f64": 0x7FF0000000000000}[d]
    for n in range(len(c)):
        if nan[n]:
            out[n] = canonical
            continue
        if inf[n]:
            out[n] = infinity | (int(inf_sign[n]) << (width - 1))
            continue
        total = _value(int(sc[n]), int(mc[n]), int(ec[n]))
        all_negative_zero = mc[n] == 0 and sc[n] == 1
        for k in range(a.shape[1]):
            product = int(ma[n, k]) * int(mb[n, k])
            total += _value(int(sa[n, k] ^ sb[n, k]), product, int(ea[n, k] + eb[n, k]))
            all_negative_zero = all_negative_zero and product == 0 and (sa[n, k] ^ sb[n, k]) == 1
        out[n] = round_fraction(total, d, negative_zero=bool(all_negative_zero))
    return out


def _floats(bits: np.ndarray, ptx_type: str) -> np.ndarray:
    """The values of bit patterns as f64 (exact for every type here)."""
    sign, significand, exponent, kind = decode(bits, ptx_type)
    values = np.ldexp(significand.astype(np.float64), exponent)
    values = np.where(kind == INF, np.inf, np.where(kind == NAN, np.nan, values))
    return np.where(sign == 1, -values, values)


def f64_sum_model(a: np.ndarray, b: np.ndarray, c: np.ndarray, types: dict) -> np.ndarray:
    """fatkit's `exact` numerics as defined: the exact products added to c in f64 in k order (IEEE, rounded to
    nearest), the sum rounded once to nearest even into types["d"]; NaN the canonical NaN. It is the correctly
    rounded c + Σ a·b whenever the partial sums are exact in f64 (terms within 53 bits of each other)."""
    with np.errstate(all="ignore"):
        total = _floats(c, types["c"])
        x, y = _floats(a, types["a"]), _floats(b, types["b"])
        for k in range(a.shape[1]):
            total = total + x[:, k] * y[:, k]
        d = types["d"]
        if d == "f16":
            bits = total.astype(np.float16).view(np.uint16).astype(np.uint64)
            return np.where(np.isnan(total), np.uint64(0x7FFF), bits)
        bits = total.astype(np.float32).view(np.uint32).astype(np.uint64)
        return np.where(np.isnan(total), np.uint64(0x7FFFFFFF), bits)


# --------------------------------------------------------------------------------------------- layouts

def _elements(words: np.ndarray, bits: int) -> np.ndarray:
    """Lane registers (lanes × registers, uint64) → elements (lanes × registers·per), element 0 low."""
    if bits >= 32:
        return words.astype(np.uint64)
    per = 32 // bits
    shifts = np.arange(per, dtype=np.uint64) * np.uint64(bits)
    parts = (words.astype(np.uint64)[:, :, None] >> shifts) & np.uint64((1 << bits) - 1)
    return parts.reshape(words.shape[0], -1)


def mma_terms(form: dict, record: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """(A terms (N×K), B terms (N×K), C (N), where) of every D element of an mma/mma.sp probe record
    (warps·32 lanes × registers: A, B, C, E), with `where[n]` = (warp, lane, D element) of output n. The
    fragment layouts are the PTX ISA's, as fatkit's mma lowering lists them (verified on an H200 with
    integer inputs)."""
    from fatkit.translate.lower.mma import (
        _INPUT_BITS, Form, _a_fragment, _b_fragment, _c_fragment, _metadata_field, _quad_pair_fragment, sparse_position,
    )

    types, shape = form["types"], form["shape"]
    m, k = int(shape[1:shape.index("n")]), int(shape[shape.index("k") + 1:])
    bits = {x: _INPUT_BITS.get(types[x], 32) if x in "ab" else (16 if types[x] == "f16" else 64 if types[x] == "f64"
                                                                 else 32) for x in "abcd"}
    a_k = k // 2 if form["sparse"] else k
    quad = shape == "m8n8k4" and types["a"] == "f16"
    if quad:
        frags = {"a": _quad_pair_fragment("a", form["layouts"][0], "f16"),
                 "b": _quad_pair_fragment("b", form["layouts"][1], "f16"),
                 "c": _quad_pair_fragment("c", "row", types["c"]), "d": _quad_pair_fragment("c", "row", types["d"])}
    else:
        frags = {"a": _a_fragment(m, a_k, bits["a"]), "b": _b_fragment(k, bits["b"]),
                 "c": _c_fragment(m, types["c"]), "d": _c_fragment(m, types["d"])}
    counts = {x: frags[x].registers for x in "abc"}
    lanes = record.shape[0]
    offset = 0
    elements = {}
    for x in "abc":
        elements[x] = _elements(record[:, offset:offset + counts[x]], bits[x])
        offset += counts[x]
    metadata = record[:, offset] if form["sparse"] else None
    where = {x: frags[x].locate() for x in "abc"}
    d_frag = frags["d"]
    per_lane = d_frag.registers * d_frag.per_register
    form_obj = Form(shape, m, k, types["d"], types["a"], types["b"], types["c"], False, None, form["sparse"])
    places = []
    warps = lanes // 32
    for lane in range(32):
        for i in range(per_lane):
            row, col = d_frag.place(lane, i)
            c_lane, c_reg, c_pos = where["c"][row, col]
            terms_a, terms_b = [], []
            if form["sparse"]:
                for stored in range(k // 2):
                    chunk, p, b_rows = sparse_position(types["a"], stored)
                    owner, field = _metadata_field(form_obj, form["selector"], row >= 8, chunk, p)
                    terms_a.append(("a",) + where["a"][row, stored])
                    terms_b.append(("meta", 4 * (row % 8) + owner, field, b_rows, col))
            else:
                base = 4 * ((lane >> 2) & 3) if quad else 0
                for kk in range(base, base + (4 if quad else k)):
                    terms_a.append(("a",) + where["a"][row, kk])
                    terms_b.append(("b",) + where["b"][kk, col])
            places.append((lane, i, (c_lane, c_reg * frags["c"].per_register + c_pos), terms_a, terms_b))
    n_terms = len(places[0][3])
    a_out = np.zeros((warps, len(places), n_terms), dtype=np.uint64)
    b_out = np.zeros_like(a_out)
    c_out = np.zeros((warps, len(places)), dtype=np.uint64)
    per = {x: frags[x].per_register for x in "ab"}
    for w in range(warps):
        rows = slice(32 * w, 32 * w + 32)
        ea, eb, ec = elements["a"][rows], elements["b"][rows], elements["c"][rows]
        for n, (lane, i, (c_lane, c_index), terms_a, terms_b) in enumerate(places):
            c_out[w, n] = ec[c_lane, c_index]
            for t, (ta, tb) in enumerate(zip(terms_a, terms_b)):
                a_out[w, n, t] = ea[ta[1], ta[2] * per["a"] + ta[3]]
                if tb[0] == "b":
                    b_out[w, n, t] = eb[tb[1], tb[2] * per["b"] + tb[3]]
                else:
                    _, meta_lane, field, b_rows, col = tb
                    index = int(metadata[32 * w + meta_lane]) >> (2 * field) & 3
                    b_lane, b_reg, b_pos = where["b"][b_rows[index], col]
                    b_out[w, n, t] = eb[b_lane, b_reg * per["b"] + b_pos]
    where_out = [(w, lane, i) for w in range(warps) for lane, i, *_ in places]
    return a_out.reshape(-1, n_terms), b_out.reshape(-1, n_terms), c_out.reshape(-1), where_out


def d_elements(form: dict, out: np.ndarray) -> np.ndarray:
    """The D elements of an mma probe's output registers, in `mma_terms`' order (warp, lane, element)."""
    bits = 16 if form["types"]["d"] == "f16" else 64 if form["types"]["d"] == "f64" else 32
    elements = _elements(out, bits)
    return elements.reshape(-1)


# --------------------------------------------------------------------------------------------- H200 forms

def _ieee_chain(terms: list, ptx_type: str) -> np.ndarray:
    """Σ of `terms` (arrays of bit patterns of `ptx_type`, or (a, b, types) products) added left to right, each
    addition (or fused multiply-add) rounded to nearest even in f32 (IEEE: NaN canonical, inf-inf NaN, an exact
    zero +0 unless both addends are -0)."""
    count = len(terms[0]) if not isinstance(terms[0], tuple) else len(terms[0][0])
    out = np.zeros(count, dtype=np.uint64)
    width = WIDTH[ptx_type]
    canonical = {"f16": 0x7FFF, "f32": 0x7FFFFFFF, "f64": 0x7FFFFFFFFFFFFFFF}[ptx_type]
    decoded = []
    for term in terms:
        if isinstance(term, tuple):
            x, y, (tx, ty) = term
            decoded.append(("product", decode(x, tx), decode(y, ty)))
        else:
            decoded.append(("value", decode(term, ptx_type)))
    for n in range(count):
        acc = None  # (value Fraction | "nan" | ±inf float, negative zero)
        for item in decoded:
            if item[0] == "value":
                s, m, e, k = (part[n] for part in item[1])
                value = math.nan if k == NAN else (-math.inf if s else math.inf) if k == INF else _value(int(s), int(m), int(e))
                negative_zero = k == FINITE and m == 0 and s == 1
            else:
                (sx, mx, ex_, kx), (sy, my, ey, ky) = ([part[n] for part in d] for d in item[1:])
                s = sx ^ sy
                if kx == NAN or ky == NAN or (kx == INF and ky == FINITE and my == 0) or (ky == INF and kx == FINITE and mx == 0):
                    value = math.nan
                elif kx == INF or ky == INF:
                    value = -math.inf if s else math.inf
                else:
                    value = _value(int(s), int(mx) * int(my), int(ex_ + ey))
                negative_zero = value == 0 and s == 1
            if acc is None:
                acc = (value, negative_zero)
                if isinstance(value, Fraction):
                    bits = round_fraction(value, ptx_type, negative_zero)
                    acc = (_fraction_of(bits, ptx_type), bits >> (width - 1) == 1 and value == 0)
                continue
            total, total_negative_zero = acc
            specials = [x for x in (total, value) if isinstance(x, float)]
            if specials:
                if any(math.isnan(x) for x in specials) or (len(specials) == 2 and specials[0] != specials[1]):
                    acc = (math.nan, False)
                else:
                    acc = (specials[0], False)
                continue
            both_negative = total_negative_zero and negative_zero
            bits = round_fraction(total + value, ptx_type, negative_zero=both_negative and total + value == 0)
            acc = (_fraction_of(bits, ptx_type), both_negative and total + value == 0)
        value, negative_zero = acc
        if isinstance(value, float):
            out[n] = canonical if math.isnan(value) else round_fraction(Fraction(0), ptx_type) | (
                {"f16": 0x7C00, "f32": 0x7F800000, "f64": 0x7FF0000000000000}[ptx_type]) | (
                (1 << (width - 1)) if value < 0 else 0)
        else:
            out[n] = round_fraction(value, ptx_type, negative_zero)
    return out


def _fraction_of(bits: int, ptx_type: str):
    """The value of f16/f32/f64 bits (finite) as a Fraction, or ±inf as a float."""
    s, m, e, k = (part[0] for part in decode(np.array([bits], dtype=np.uint64), ptx_type))
    if k == INF:
        return -math.inf if s else math.inf
    return _value(int(s), int(m), int(e))


def h200_model(form: dict, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """What an H200 gives for the D elements with terms `a`, `b` and accumulators `c` (`mma_terms`' arrays) of an
    mma/mma.sp/wmma form, as its machine code does it (docs/numerics.md):

    - f16/bf16/tf32 inputs: one tensor-core block sum (`sm90_model`) per hardware instruction: the whole K,
      except wmma.m16n16k8 tf32 (two k4 blocks chained); an f16 D is the block's exact window sum rounded to
      nearest even f16;
    - fp8 (e4m3/e5m2): converted exactly to f16, two blocks of K/2 products (k ≡ 0, 1 mod 4 first: the low
      halves of the registers) chained from +0, then c added with one f32 (f16 for an f16 D) addition rounded to
      nearest even;
    - m8n8k4 .f16 (Volta's form): converted to f32, an f32 fma chain in k order, each step rounded to nearest
      even: an f32 D from +0 with c added last; an f16 D as two pairs, fl(fl(a0·b0) + a1·b1) and the same for
      k2, k3, added to c (k0·k1's pair first), that f32 rounded to nearest even f16;
    - f64: an fma chain from c in k order."""
    types = form["types"]
    d = types["d"]
    k = a.shape[1]
    shape = form["shape"]
    if types["a"] == "f64":
        return _ieee_chain([c] + [(a[:, i], b[:, i], ("f64", "f64")) for i in range(k)], "f64")
    if shape == "m8n8k4" and types["a"] == "f16":
        c32 = _f16_to_f32_bits(c) if types["c"] == "f16" else c
        if d == "f16":  # two pairs (k0·k1, k2·k3), each from its first product, added to c: k0·k1's first
            low, high = (_ieee_chain([(a[:, i], b[:, i], ("f16", "f16")) for i in ks], "f32") for ks in ((0, 1), (2, 3)))
            return _ieee_chain([_f32_to_f16_rn(_ieee_chain([c32, low, high], "f32"))], "f16")
        chain = _ieee_chain([np.zeros_like(c)] + [(a[:, i], b[:, i], ("f16", "f16")) for i in range(k)], "f32")
        return _ieee_chain([c32, chain], "f32")
    if types["a"] in ("e4m3", "e5m2"):
        # the low halves of the A/B registers (k ≡ 0, 1 mod 4) make the first f16 mma, the high halves the second
        acc = np.zeros_like(c)
        for part in (0, 1):
            ks = [i for i in range(k) if (i % 4 < 2) == (part == 0)]
            acc = sm90_model(a[:, ks], b[:, ks], acc, {**types, "c": d}, {"d_round": "rn" if d == "f16" else "rz"})
        return _ieee_chain([c, acc], d)
    block = 4 if form.get("wmma") and types["a"] == "tf32" else k
    acc, c_type = c, types["c"]
    for start in range(0, k, block):
        acc = sm90_model(a[:, start:start + block], b[:, start:start + block], acc, {**types, "c": c_type},
                         {"d_round": "rn" if d == "f16" else "rz"})
        c_type = d
    return acc


def _f16_to_f32_bits(bits: np.ndarray) -> np.ndarray:
    return bits.astype(np.uint16).view(np.float16).astype(np.float32).view(np.uint32).astype(np.uint64)


def _f32_to_f16_rn(bits: np.ndarray) -> np.ndarray:
    """f32 bits → f16 bits rounded to nearest even (numpy's conversion; NaN made canonical later)."""
    with np.errstate(all="ignore"):
        return bits.astype(np.uint32).view(np.float32).astype(np.float16).view(np.uint16).astype(np.uint64)
