"""PTX integer constant expressions (fatkit/translate/ptx/constexpr.py) and WARP_SZ in them.

Expected values are C's 64-bit arithmetic worked by hand (the PTX ISA defines constant expressions as C's):
unsigned promotion, truncating division, shifts of the left operand's type.
"""

from __future__ import annotations

import numpy as np
import pytest

from fatkit.translate.ptx import parse_ptx
from fatkit.translate.ptx.ast import IntImm, SymbolRef
from fatkit.translate.ptx.constexpr import evaluate
from tests.amdrun import TARGETS, program


@pytest.mark.parametrize("text, value, unsigned", [
    ("WARP_SZ", 32, False),
    ("WARP_SZ*4", 128, False),
    ("WARP_SZ - 1", 31, False),
    ("(1 << 5) - 1", 31, False),
    ("0x10 | 0b11 | 010", 27, False),  # hex, binary, octal
    ("-7 / 2", -3, False),  # truncates toward zero
    ("-7 % 2", -1, False),
    ("7 / -2", -3, False),
    ("-1 >> 60", -1, False),  # arithmetic shift of a signed value
    ("-1U >> 60", 15, True),  # logical shift of an unsigned one
    ("-1 < 0U", 0, False),  # -1 converted to unsigned: 2^64 - 1, not less than 0
    ("-1 < 0", 1, False),
    ("1U - 2", (1 << 64) - 1, True),  # unsigned wraps
    ("0x7fffffffffffffff + 1", -(1 << 63), False),  # signed 64-bit wraps
    ("1 << 64", 0, False),
    ("!0 + !5 + ~0", 0, False),  # 1 + 0 + (-1)
    ("2 > 1 ? WARP_SZ : 0", 32, False),
    ("1 && 0 || 3", 1, False),
    ("6 & 3 ^ 1", 3, False),  # & binds tighter than ^: (6 & 3) ^ 1
    ("1 + 2 * 3 << 1", 14, False),  # (1 + 6) << 1
])
def test_constant_expressions_are_evaluated_as_c_in_64_bits(text, value, unsigned):
    assert evaluate(text) == (value, unsigned)


@pytest.mark.parametrize("text", ["sym+4", "1 / 0", "1.5 * 2", "(1 + 2", "1 +", "", "WARP_SZ WARP_SZ"])
def test_what_is_not_an_integer_constant_is_left_alone(text):
    assert evaluate(text) is None


KERNEL = """.version 8.0
.target sm_80
.address_size 64
.global .align 4 .u32 sizes[3] = {WARP_SZ, WARP_SZ*2, (WARP_SZ << 1) + 1};
.global .align 4 .b8 perwarp[WARP_SZ*4];
.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b32 buf[WARP_SZ];
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    add.u32 %r2, %r1, WARP_SZ-1;
    mul.lo.u32 %r3, %r1, WARP_SZ/8;
    st.global.u32 [%rd1], %r2;
    st.global.u32 [%rd1+4], %r3;
    ld.global.u32 %r4, [sizes+8];
    st.global.u32 [%rd1+8], %r4;
    mov.u64 %rd2, perwarp;
    st.global.u32 [%rd2+124], %r1;
    mov.u32 %r5, buf;
    st.shared.u32 [%r5+124], %r1;
    ret;
}
"""


def test_warp_sz_sizes_arrays_and_fills_initializers():
    module = parse_ptx(KERNEL)
    sizes, perwarp = module.variables
    assert sizes.initializer.items == (IntImm(32, 10, False), IntImm(64, 10, False), IntImm(65, 10, False))
    assert perwarp.array == (128,)
    assert next(v for v in module.kernels[0].variables() if v.name == "buf").array == (32,)
    add, mul = [i for i in module.kernels[0].instructions() if i.opcode in ("add", "mul")]
    assert add.operands[2] == IntImm(31, 10, False) and mul.operands[2] == IntImm(4, 10, False)
    # a symbol plus a constant expression is an address with an offset
    wrapped = parse_ptx(KERNEL.replace("mov.u64 %rd2, perwarp;", "mov.u64 %rd2, perwarp+WARP_SZ*4-1;"))
    mov = next(i for i in wrapped.kernels[0].instructions() if i.opcode == "mov" and i.operands[0].name == "%rd2")
    assert mov.operands[1] == SymbolRef("perwarp", 127, False)


@pytest.mark.parametrize("target", TARGETS)
def test_warp_sz_expressions_run(target):
    out = np.zeros(4, dtype=np.uint64)
    program(KERNEL, target).launch("k", [out], block=(1, 1, 1))
    words = out.view(np.uint32)
    assert list(words[:3]) == [31, 0, 65]
