"""Pass 7, storage: the declarations lowering turns into allocas, per function (`Prepared.storage`).

Every scalar `.reg` (its `.reg` parameters included) gets its PTX type; every `.local` variable and every
`.param` variable of a call sequence gets a buffer of its bytes and alignment (pass 1 gave each call
sequence's `param0` its own name, so each is sized exactly). `.shared` variables are memory lowering lays
out with the module's; other state spaces inside a function are not supported.
"""

from __future__ import annotations

import dataclasses

from fatkit.translate.passes.base import Buffer, Prepared, Storage, each_function, fail, register_types
from fatkit.translate.ptx import ast


def run(prepared: Prepared) -> Prepared:
    storage = dict(prepared.storage)

    def record(function: ast.Function, _) -> ast.Function:
        storage[function.name] = function_storage(function)
        return function

    prepared = each_function(prepared, record)
    return dataclasses.replace(prepared, storage={k: v for k, v in storage.items() if k not in prepared.failures})


def function_storage(function: ast.Function) -> Storage:
    """The registers and buffers of one function (its nested blocks, if any, already flattened by pass 1)."""
    buffers: dict[str, Buffer] = {}
    for variable in [*function.variables(), *function.params, *function.returns]:
        space = variable.state_space
        if space == "reg":
            if variable.vector or variable.array or (variable.type != "pred" and variable.type not in ast.TYPE_SIZES):
                raise fail(function, variable, f".reg .{variable.type} {variable.name}: only scalar registers "
                                               "of a sized type or .pred are supported")
        elif space in ("local", "param") and variable not in function.params + function.returns:
            if variable.size_bytes is None:
                raise fail(function, variable, f"only sized .{space} variables are supported ({variable.name})")
            size, align = variable.size_bytes, variable.align or variable.element_size
            if variable.name in buffers:  # the same name in one scope: one buffer big enough for both
                known = buffers[variable.name]
                size, align = max(size, known.size), max(align, known.align)
            buffers[variable.name] = Buffer(variable.name, space, size, align)
        elif space not in ("shared", "param"):
            raise fail(function, variable, f"variables in .{space} are not supported yet ({variable.name})")
    return Storage(register_types(function), tuple(buffers.values()))
