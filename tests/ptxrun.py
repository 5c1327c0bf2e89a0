"""What the translator tests share: PTX kernels built and run on the CPU (`host` target), float bit helpers.

`table_kernel`/`run_table` make a kernel where thread i applies a list of PTX snippets to a[i], b[i] and
returns one 64-bit result per snippet, so a family of instructions is checked against Python in one launch.
"""

from __future__ import annotations

import ctypes
import struct

from tests.ptxframes import entry

M32, M64 = (1 << 32) - 1, (1 << 64) - 1
HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"


def f32(x: float) -> float:
    return ctypes.c_float(x).value


def bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def from_bits(b: int) -> float:
    return struct.unpack("<f", struct.pack("<I", b))[0]


def signed(x: int) -> int:
    return x - (1 << 32) if x & 0x80000000 else x


def table_kernel(name: str, ops: list[str]) -> str:
    """A kernel where thread i reads a[i], b[i] (32 bits each) and op k writes out[i*len(ops)+k] (64 bits).

    Each op's PTX leaves its result in %rd10, or in %r10 (then zero-extended).
    """
    body = []
    for k, op in enumerate(ops):
        body.append(op.replace("@K", str(k)))
        if "%rd10," not in op:
            body.append("cvt.u64.u32 %rd10, %r10;")
        body.append(f"st.global.u64 [%rd8+{8 * k}], %rd10;")
    return HEADER + "\n" + entry(name, "u64 pa, u64 pb, u64 pout",
                                 ".pred %p<4>, .b16 %rs<2>, .b32 %r<16>, .f32 %f<8>, .b64 %rd<16>, .f64 %fd<2>", f"""
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.u32 %r2, [%rd5];
    add.s64 %rd6, %rd2, %rd4;
    ld.global.u32 %r3, [%rd6];
    mov.b32 %f2, %r2;
    mov.b32 %f3, %r3;
    mul.wide.u32 %rd7, %r1, {8 * len(ops)};
    add.s64 %rd8, %rd3, %rd7;
    {chr(10).join(body)}
    ret;
""")


def run_table(name: str, ops: list[str], a: list[int], b: list[int], target: str = "host") -> list[list[int]]:
    """On `target`: the host JIT, or an AMD code object on fatkit.emulate (tests/amdrun.py)."""
    from tests.amdrun import program as make_program
    program = make_program(table_kernel(name, ops), target)
    n = len(a)
    in_a, in_b = (ctypes.c_uint32 * n)(*a), (ctypes.c_uint32 * n)(*b)
    out = (ctypes.c_uint64 * (n * len(ops)))()
    program.launch(name, [in_a, in_b, out], block=(n, 1, 1))
    return [list(out[i * len(ops):(i + 1) * len(ops)]) for i in range(n)]
