"""The frame of a test kernel, built once: `.visible .entry`, its parameters, register declarations and the
loads of every parameter, so a test's PTX text holds only what the test is about.

    entry("saxpy", "u64 px, u64 py, f32 a, u32 n", ".pred %p<2>, .b32 %r<8>, .f32 %f<4>, .b64 %rd<8>", body)

gives

    .visible .entry saxpy(.param .u64 px, .param .u64 py, .param .f32 a, .param .u32 n)
    {
        .reg .pred %p<2>;          (one line per declaration of `registers`, in their order)
        ...
        ld.param.u64 %rd1, [px];   (each parameter, in order, into the next register of its type's family:
        ld.param.u64 %rd2, [py];    64-bit integers %rd, 32-bit %r, 16-bit %rs, .f32 %f, .f64 %fd, from 1)
        ld.param.f32 %f1, [a];
        ld.param.u32 %r1, [n];
    <body>}

`directives` (.maxntid, .reqnctapercluster ...) follow the parameter list; `declarations` (.shared/.local
variables) stand between the registers and the loads, as nvcc puts them;
`global_pointers` follows the loads with `cvta.to.global.u64 %rdK, %rdK;` for every 64-bit parameter.
The body is the caller's text as written, less a first newline (it ends with its own `ret;` and newline).
"""

from __future__ import annotations

_FAMILIES = {"u64": "%rd", "s64": "%rd", "b64": "%rd", "u32": "%r", "s32": "%r", "b32": "%r", "u16": "%rs",
             "s16": "%rs", "b16": "%rs", "f32": "%f", "f64": "%fd"}


def entry(name: str, params: str, registers: str, body: str, *, directives: str = "", declarations: str = "",
          global_pointers: bool = False) -> str:
    """The kernel `name` (see the module's docstring): `params` "type name, ...", `registers` ".type %x<n>, ..."."""
    typed = [param.split() for param in params.split(",")] if params.strip() else []
    used: dict[str, int] = {}
    loads, pointers = [], []
    for ptx_type, param in typed:
        family = _FAMILIES[ptx_type]
        used[family] = used.get(family, 0) + 1
        register = f"{family}{used[family]}"
        loads.append(f"    ld.param.{ptx_type} {register}, [{param}];\n")
        if family == "%rd":
            pointers.append(f"    cvta.to.global.u64 {register}, {register};\n")
    signature = ", ".join(f".param .{ptx_type} {param}" for ptx_type, param in typed)
    declared = "".join(f"    .reg {register.strip()};\n" for register in registers.split(","))
    extra = "".join(f"    {line.strip()}\n" for line in declarations.splitlines() if line.strip())
    head = f".visible .entry {name}({signature}){' ' + directives if directives else ''}\n{{\n"
    pointers_to_global = "".join(pointers) if global_pointers else ""
    return f"{head}{declared}{extra}{''.join(loads)}{pointers_to_global}{body.removeprefix(chr(10))}}}\n"
