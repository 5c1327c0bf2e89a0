"""The `amdgpu` target: `amdgcn-amd-amdhsa` code objects v5 for one processor, linked to ET_DYN with ld.lld.

Kernels use the `amdgpu_kernel` calling convention with one explicit argument per PTX parameter of the
same size and alignment, so the explicit kernarg segment is CUDA's parameter buffer byte for byte. An
array parameter (`.param .align 8 .b8 p[16]`, a by-value struct) is a `byref([16 x i8]) align 8` pointer
into the kernarg segment: LLVM lays it out with exactly that size and alignment (a plain `[16 x i8]`
argument would be aligned to 1), and `ld.param [p+8]` becomes a load at an offset from the pointer.
`.shared` variables are LDS (address space 3); `bar.sync 0` is s_barrier between workgroup fences.
%ntid and %nctaid come from the code object v5 implicit arguments (hidden_block_count_* at 0/4/8,
hidden_group_size_* at 12/14/16). LLVM fatal errors abort the process they happen in, so codegen runs in
a child Python process; ziglang's ld.lld (PyPI) links the relocatable object it returns.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from functools import cached_property
from pathlib import Path

from llvmlite import binding as llvm
from llvmlite import ir

from fatkit.errors import FatkitError, FormatError
from fatkit.formats.hsaco import CodeObject, parse_code_object
from fatkit.translate.targets.base import LoweredKernel, PointerTo, Target

TRIPLE = "amdgcn-amd-amdhsa"
CODE_OBJECT_VERSION = 500  # module flag value for code object v5; LLVM 22 defaults to v6
_WORKITEM_ID = {c: f"llvm.amdgcn.workitem.id.{c}" for c in "xyz"}
_WORKGROUP_ID = {c: f"llvm.amdgcn.workgroup.id.{c}" for c in "xyz"}
_BLOCK_COUNT_OFFSET = {"x": 0, "y": 4, "z": 8}  # i32 hidden_block_count_*
_GROUP_SIZE_OFFSET = {"x": 12, "y": 14, "z": 16}  # i16 hidden_group_size_*
_CODEGEN_TIMEOUT_S = 300
EMIT_KINDS = ("obj", "asm", "llvm")  # what `emit` writes besides linked code objects


def wavefront_size(processor: str) -> int:
    """The default wave size LLVM compiles for: 64 on GCN/CDNA (gfx6–gfx9), 32 on RDNA (gfx10 and later)."""
    major = re.match(r"gfx(\d+)(?=[0-9a-f]{2}\b)", processor)
    return 32 if major and int(major.group(1)) >= 10 else 64


def _target_machine(processor: str, opt_level: int = 2) -> llvm.TargetMachine:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(
        cpu=processor, opt=opt_level, reloc="pic", codemodel="default")


class AmdgpuTarget(Target):
    triple = TRIPLE
    stack_address_space = 5
    global_address_space = 1
    constant_address_space = 4
    shared_address_space = 3

    def __init__(self, processor: str) -> None:
        self.processor = processor
        self.name = processor

    @cached_property
    def data_layout(self) -> str:
        return str(_target_machine(self.processor).target_data)

    @property
    def wavefront_size(self) -> int:
        return wavefront_size(self.processor)

    def define_kernel(self, module, signature, param_types):
        types = [PointerTo(t, addrspace=4) if isinstance(t, ir.ArrayType) else t for t in param_types]
        function = ir.Function(module, ir.FunctionType(ir.VoidType(), types), signature.name)
        function.calling_convention = "amdgpu_kernel"
        for argument, param in zip(function.args, signature.params):
            argument.name = param.name
            if param.array:
                argument.add_attribute("byref")
                argument.attributes.align = param.align
        builder = ir.IRBuilder(function.append_basic_block("entry"))
        return function, builder, list(function.args)

    def special_register(self, builder, register, component):
        module, i32 = builder.module, ir.IntType(32)
        if register in ("%tid", "%ctaid"):
            name = (_WORKITEM_ID if register == "%tid" else _WORKGROUP_ID)[component]
            return builder.call(_intrinsic(module, name, i32, ()), [])
        implicit = builder.call(
            _intrinsic(module, "llvm.amdgcn.implicitarg.ptr", ir.PointerType(addrspace=4), ()), [])
        i8 = ir.IntType(8)
        if register == "%nctaid":
            slot = builder.gep(implicit, [ir.Constant(ir.IntType(64), _BLOCK_COUNT_OFFSET[component])],
                               source_etype=i8)
            return builder.load(slot, typ=i32, align=4)
        slot = builder.gep(implicit, [ir.Constant(ir.IntType(64), _GROUP_SIZE_OFFSET[component])],
                           source_etype=i8)
        return builder.zext(builder.load(slot, typ=ir.IntType(16), align=2), i32)

    def barrier(self, builder):
        builder.fence("release", "workgroup")
        builder.call(_intrinsic(builder.module, "llvm.amdgcn.s.barrier", ir.VoidType(), ()), [])
        builder.fence("acquire", "workgroup")

    def finish_module(self, module: ir.Module) -> None:
        i32 = ir.IntType(32)
        module.add_named_metadata(
            "llvm.module.flags", [ir.Constant(i32, 1), "amdhsa_code_object_version",
                                  ir.Constant(i32, CODE_OBJECT_VERSION)])

    def codegen(self, kernels: list[LoweredKernel], opt_level: int) -> bytes:
        """Compile in a child process to a relocatable object, then link it to an ET_DYN code object."""
        return link(self.emit(kernels, opt_level, "obj"))

    def emit(self, kernels: list[LoweredKernel], opt_level: int, kind: str) -> bytes:
        """The kernels linked into one LLVM module, optimised and compiled in a child process, as `kind`:
        "obj" (a relocatable object), "asm" (AMDGPU assembly) or "llvm" (the optimised IR)."""
        if kind not in EMIT_KINDS:
            raise FatkitError(f"cannot emit {kind!r}; one of {', '.join(EMIT_KINDS)}")
        payload = "\0".join(k.llvm_ir for k in kernels).encode()
        child = subprocess.run(
            [sys.executable, "-c", "from fatkit.translate.targets.amdgpu import codegen_child; codegen_child()",
             self.processor, str(opt_level), kind],
            input=payload, capture_output=True, timeout=_CODEGEN_TIMEOUT_S)
        if child.returncode != 0:
            detail = child.stderr.decode(errors="replace").strip().splitlines()[-5:]
            raise FatkitError(f"LLVM codegen for {self.processor} failed (exit {child.returncode}): "
                              + " | ".join(detail))
        return child.stdout

    def validate(self, product: bytes, kernels: list[LoweredKernel]) -> CodeObject:
        """Re-read the code object: processor, v5, kernel names, explicit kernarg layout, LDS size, wave size."""
        try:
            code_object = parse_code_object(product)
        except FormatError as error:
            raise FatkitError(f"the produced code object does not parse: {error}") from error
        if code_object.processor != self.processor:
            raise FatkitError(f"code object is for {code_object.processor}, expected {self.processor}")
        if code_object.code_object_version != 5:
            raise FatkitError(f"code object version {code_object.code_object_version}, expected 5")
        produced = {k.name: k for k in code_object.kernels}
        expected = {k.signature.name: k for k in kernels}
        if set(produced) != set(expected):
            raise FatkitError(f"code object holds kernels {sorted(produced)}, expected {sorted(expected)}")
        for name, lowered in expected.items():
            _check_kernel(produced[name], lowered, self.wavefront_size)
        return code_object


def _check_kernel(kernel, lowered: LoweredKernel, wave: int) -> None:
    signature = lowered.signature
    explicit = [(a.get(".offset"), a.get(".size")) for a in kernel.args
                if not str(a.get(".value_kind", "")).startswith("hidden_")]
    layout = [(p.offset, p.size) for p in signature.params]
    if explicit != layout:
        raise FatkitError(f"{signature.name}: kernel arguments {explicit} differ from CUDA's layout {layout}")
    if kernel.kernarg_size < signature.size:
        raise FatkitError(f"{signature.name}: kernarg segment of {kernel.kernarg_size} bytes is smaller than "
                          f"the {signature.size} bytes of PTX parameters")
    if kernel.group_segment_size > lowered.shared_bytes:  # fewer where LLVM removed an unused variable
        raise FatkitError(f"{signature.name}: {kernel.group_segment_size} bytes of LDS, more than the "
                          f"{lowered.shared_bytes} bytes of .shared variables")
    if kernel.wavefront_size != wave:
        raise FatkitError(f"{signature.name}: wavefront size {kernel.wavefront_size}, expected {wave}")


def _intrinsic(module: ir.Module, name: str, result: ir.Type, args: tuple[ir.Type, ...]) -> ir.Function:
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(result, args), name)


def link(relocatable: bytes) -> bytes:
    """`ld.lld -shared --no-undefined` (ziglang's LLD) of one relocatable object into a code object."""
    with tempfile.TemporaryDirectory(prefix="fatkit-link-") as tmp:
        source, output = Path(tmp, "kernels.o"), Path(tmp, "kernels.hsaco")
        source.write_bytes(relocatable)
        linker = subprocess.run(
            [sys.executable, "-m", "ziglang", "ld.lld", "-shared", "--no-undefined", str(source), "-o",
             str(output)], capture_output=True, timeout=_CODEGEN_TIMEOUT_S)
        if linker.returncode != 0:
            raise FatkitError("ld.lld failed: " + linker.stderr.decode(errors="replace").strip())
        return output.read_bytes()


def codegen_child() -> None:
    """Child process entry: NUL-separated LLVM modules on stdin → what argv[3] asks for on stdout."""
    processor, opt_level, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    texts = sys.stdin.buffer.read().decode().split("\0")
    machine = _target_machine(processor, opt_level)
    module = llvm.parse_assembly(texts[0])
    for text in texts[1:]:
        module.link_in(llvm.parse_assembly(text))
    module.verify()
    if opt_level:
        tuning = llvm.create_pipeline_tuning_options(speed_level=opt_level)
        builder = llvm.create_pass_builder(machine, tuning)
        builder.getModulePassManager().run(module, builder)
    if kind == "llvm":
        sys.stdout.buffer.write(str(module).encode())
    elif kind == "asm":
        sys.stdout.buffer.write(machine.emit_assembly(module).encode())
    else:
        sys.stdout.buffer.write(machine.emit_object(module))
