"""The PTX translator: `ptx/` reads PTX into a typed AST; later stages lower it for AMD GPUs."""
