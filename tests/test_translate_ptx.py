"""The PTX front-end on hand-written snippets: one test per grammar feature, errors, round trips."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fatkit.errors import FatkitError
from fatkit.translate.ptx import OPCODES, PtxSyntaxError, parse_ptx, print_ptx
from fatkit.translate.ptx.ast import (
    Address,
    Alias,
    ArgList,
    Block,
    CallPrototype,
    Directive,
    Expr,
    File,
    FloatImm,
    Function,
    Guard,
    InitList,
    Instruction,
    IntImm,
    Label,
    Loc,
    Name,
    Negated,
    Pair,
    Pragma,
    Section,
    SectionData,
    Sink,
    SymbolRef,
    TargetList,
    Variable,
    Vector,
    is_special_register,
)

HEADER = ".version 9.0\n.target sm_90\n.address_size 64\n"


def roundtrip(text: str):
    """Parse `text`, check that printing and re-parsing gives the same tree, return the tree."""
    module = parse_ptx(text)
    printed = print_ptx(module)
    assert parse_ptx(printed) == module, printed
    return module


def body(statements: str, *, header: str = ".visible .entry k()") -> tuple:
    """The statements of one kernel whose body is `statements`."""
    module = roundtrip(f"{HEADER}{header}\n{{\n{statements}\n}}\n")
    return module.kernels[0].body.statements


def instruction(text: str) -> Instruction:
    (ins,) = [s for s in body(".reg .b32 %r<9>;\n.reg .pred %p<3>;\n" + text) if type(s) is Instruction]
    return ins


def operands(text: str) -> tuple:
    return instruction(text).operands


def error(text: str) -> PtxSyntaxError:
    with pytest.raises(PtxSyntaxError) as info:
        parse_ptx(text, source="snippet.ptx")
    return info.value


# --------------------------------------------------------------------------------------------------
# module directives


def test_header_directives():
    module = roundtrip(".version 9.2\n.target sm_90a, texmode_independent\n.address_size 32\n")
    assert module.version == (9, 2)
    assert module.target == ("sm_90a", "texmode_independent")
    assert module.arch == "sm_90a"
    assert module.address_size == 32
    assert module.items == ()


def test_header_without_address_size_and_with_family_target():
    module = roundtrip(".version 8.8\n.target sm_100f\n")
    assert (module.version, module.target, module.address_size) == ((8, 8), ("sm_100f",), None)


def test_header_directives_may_end_in_semicolons():
    module = roundtrip(".version 7.0;\n.target sm_80;\n.address_size 64;\n")
    assert (module.version, module.target, module.address_size) == ((7, 0), ("sm_80",), 64)


def test_file_directives():
    module = roundtrip(HEADER + '.file 1 "/src/a.cu"\n.file 2 "b.cuh", 1712345678, 4096\n')
    assert module.items == (File(1, "/src/a.cu"), File(2, "b.cuh", 1712345678, 4096))


def test_debug_section():
    text = HEADER + (
        ".section .debug_info\n{\n.b32 626\n.b8 2,0\n.b32 .debug_abbrev\n$L__info_string0:\n"
        ".b8 95,90,0\n.b64 $L__func_begin0\n.b32 $L__func_end0-$L__func_begin0\n}\n"
        ".section .debug_macinfo { }\n"
    )
    section, empty = roundtrip(text).items
    assert section.name == ".debug_info"
    assert section.entries == (
        SectionData("b32", (IntImm(626),)),
        SectionData("b8", (IntImm(2), IntImm(0))),
        SectionData("b32", (Name(".debug_abbrev"),)),
        Label("$L__info_string0"),
        SectionData("b8", (IntImm(95), IntImm(90), IntImm(0))),
        SectionData("b64", (Name("$L__func_begin0"),)),
        SectionData("b32", (Expr("$L__func_end0-$L__func_begin0"),)),
    )
    assert section.entries[3].line == 9
    assert empty == Section(".debug_macinfo", ())


def test_pragma_and_alias():
    module = roundtrip(HEADER + '.pragma "nounroll";\n.func f()\n{\nret;\n}\n.alias g, f;\n')
    pragma, function, alias = module.items
    assert pragma == Pragma(("nounroll",))
    assert alias == Alias("g", "f")
    assert function.name == "f"


# --------------------------------------------------------------------------------------------------
# variables


def module_variables(text: str) -> tuple[Variable, ...]:
    return roundtrip(HEADER + text).variables


def test_variables_in_every_state_space():
    found = module_variables(
        ".global .align 16 .b8 buffer[256];\n.const .v4 .f32 coefficients;\n.shared .align 8 .u64 slots[4][8];\n"
        ".local .b32 scratch;\n.tex .u32 legacy_tex;\n.global .texref tex;\n.global .samplerref sampler;\n"
        ".global .surfref surface;\n"
    )
    assert [(v.state_space, v.type, v.name) for v in found] == [
        ("global", "b8", "buffer"),
        ("const", "f32", "coefficients"),
        ("shared", "u64", "slots"),
        ("local", "b32", "scratch"),
        ("tex", "u32", "legacy_tex"),
        ("global", "texref", "tex"),
        ("global", "samplerref", "sampler"),
        ("global", "surfref", "surface"),
    ]
    buffer, coefficients, slots = found[:3]
    assert (buffer.align, buffer.array, buffer.size_bytes) == (16, (256,), 256)
    assert (coefficients.vector, coefficients.size_bytes) == (4, 16)
    assert (slots.array, slots.size_bytes) == ((4, 8), 256)
    assert found[5].size_bytes is None


def test_linkage_and_attributes():
    found = module_variables(
        ".visible .global .align 4 .u32 exported;\n.extern .shared .align 16 .b8 dynamic_smem[];\n"
        ".weak .global .align 4 .b32 weak_one = 3;\n.common .global .align 8 .u64 common_one;\n"
        ".global .attribute(.managed) .align 4 .s32 managed;\n"
    )
    assert [v.linkage for v in found] == ["visible", "extern", "weak", "common", None]
    assert found[1].array == (None,) and found[1].size_bytes is None
    assert found[4].attributes == (".managed",)


def test_initializers():
    found = module_variables(
        ".global .u32 hex = 0xFF;\n.global .s32 negative = -5;\n.global .f32 single = 0f3F800000;\n"
        ".global .f64 double = 0d4000000000000000;\n.global .f64 decimal = 1.5;\n"
        ".global .align 4 .b32 nested[2][2] = {{1, 2}, {3, 4}};\n"
        ".global .align 8 .u64 table[3] = {generic(nested), generic(nested)+8, 0};\n"
        ".global .align 8 .u64 offset_pointer = hex+4;\n.global .align 8 .u64 plain_pointer = hex;\n"
        ".global .u32 unsigned_literal = 7U;\n"
    )
    init = {v.name: v.initializer for v in found}
    assert init["hex"] == IntImm(255, 16)
    assert init["negative"] == IntImm(-5)
    assert init["single"] == FloatImm(0x3F800000, 32) and init["single"].value == 1.0
    assert init["double"] == FloatImm(0x4000000000000000, 64) and init["double"].value == 2.0
    assert init["decimal"].decimal and init["decimal"].value == 1.5
    assert init["nested"] == InitList((InitList((IntImm(1), IntImm(2))), InitList((IntImm(3), IntImm(4)))))
    assert init["table"] == InitList((SymbolRef("nested", 0, True), SymbolRef("nested", 8, True), IntImm(0)))
    assert init["offset_pointer"] == SymbolRef("hex", 4)
    assert init["plain_pointer"] == Name("hex")
    assert init["unsigned_literal"] == IntImm(7, 10, True)


def test_sampler_initializer():
    module = roundtrip(
        ".version 9.0\n.target sm_90, texmode_independent\n"
        ".global .samplerref s = { addr_mode_0 = wrap, filter_mode = linear };\n"
    )
    assert module.variables[0].initializer == InitList((Expr("addr_mode_0 = wrap"), Expr("filter_mode = linear")))


def test_several_names_in_one_declaration_and_register_ranges():
    statements = body(".reg .pred %p<4>;\n.reg .b32 a, b, c;\n.reg .v2 .f32 pair;\n")
    assert [(v.name, v.count) for v in statements] == [("%p", 4), ("a", None), ("b", None), ("c", None), ("pair", None)]
    assert statements[4].vector == 2 and statements[4].element_size == 8


# --------------------------------------------------------------------------------------------------
# functions


def test_kernel_parameters():
    module = roundtrip(
        HEADER + ".visible .entry k(\n.param .u64 .ptr .global .align 16 k_p0,\n.param .align 8 .b8 k_p1[48],\n"
        ".param .u32 k_p2\n)\n{\nret;\n}\n"
    )
    (kernel,) = module.kernels
    assert kernel.is_kernel and kernel.linkage == "visible"
    pointer, aggregate, scalar = kernel.params
    assert (pointer.ptr, pointer.ptr_space, pointer.ptr_align, pointer.type) == (True, "global", 16, "u64")
    assert (aggregate.align, aggregate.array, aggregate.size_bytes) == (8, (48,), 48)
    assert scalar == Variable("param", "u32", "k_p2")


def test_functions_declarations_and_return_parameters():
    module = roundtrip(
        HEADER + ".extern .func (.param .b32 func_retval0) vprintf\n(\n.param .b64 vprintf_param_0,\n"
        ".param .b64 vprintf_param_1\n)\n;\n.func (.param .b64 r) twice(.reg .b32 x)\n{\nret;\n}\n"
        ".weak .func nothing()\n{\nret;\n}\n.func no_parameter_list\n{\nret;\n}\n"
    )
    vprintf, twice, nothing, bare = module.functions
    assert vprintf.body is None and vprintf.linkage == "extern"
    assert [p.name for p in vprintf.params] == ["vprintf_param_0", "vprintf_param_1"]
    assert vprintf.returns == (Variable("param", "b32", "func_retval0"),)
    assert twice.params == (Variable("reg", "b32", "x"),) and twice.returns[0].name == "r"
    assert nothing.linkage == "weak" and nothing.params == ()
    assert bare.params == () and bare.body.statements == (Instruction("ret", (), ()),)
    assert module.function("vprintf") is vprintf and module.kernels == ()


def test_performance_directives():
    module = roundtrip(
        HEADER + ".entry a() .maxntid 256, 1, 1 .minnctapersm 2\n{\nret;\n}\n"
        ".entry b()\n.reqntid 64\n.maxnreg 32\n{\nret;\n}\n"
        ".entry c() .explicitcluster .reqnctapercluster 2, 1, 1 .maxclusterrank 8\n{\nret;\n}\n"
        ".func d() .noreturn\n{\ntrap;\n}\n"
    )
    a, b, c, d = module.functions
    assert a.directives == (Directive("maxntid", (256, 1, 1)), Directive("minnctapersm", (2,)))
    assert a.directive("maxntid").values == (256, 1, 1) and a.directive("maxnreg") is None
    assert b.directives == (Directive("reqntid", (64,)), Directive("maxnreg", (32,)))
    assert c.directives == (
        Directive("explicitcluster"),
        Directive("reqnctapercluster", (2, 1, 1)),
        Directive("maxclusterrank", (8,)),
    )
    assert d.directives == (Directive("noreturn"),)


# --------------------------------------------------------------------------------------------------
# statements


def test_labels_guards_and_nested_scopes():
    statements = body(
        ".reg .pred %p<3>;\n$L__BB0_1:\n@%p1 bra $L__BB0_1;\n@!%p2 bra.uni $L__BB0_1;\n"
        "{\n.reg .pred p;\n{\nsetp.ne.s32 p, 1, 0;\n}\n}\nret;"
    )
    _, label, taken, not_taken, scope, ret = statements
    assert label == Label("$L__BB0_1")
    assert taken.guard == Guard("%p1") and taken.operands == (Name("$L__BB0_1"),)
    assert not_taken.guard == Guard("%p2", negated=True) and not_taken.modifiers == ("uni",)
    assert type(scope) is Block and type(scope.statements[1]) is Block
    inner = scope.statements[1].statements[0]
    assert inner.name == "setp.ne.s32"
    assert list(Function("entry", "k", body=Block(statements)).instructions())[-2:] == [inner, ret]


def test_callprototype_and_indirect_call():
    statements = body(
        ".reg .b64 %rd1;\n{\n.param .b32 param0;\n.param .b32 retval0;\n"
        "prototype_5 : .callprototype (.param .b32 _) _ (.param .b32 _, .param .align 8 .b8 _[16]);\n"
        "call (retval0), \n%rd1, \n(\nparam0\n)\n, prototype_5;\n}\n"
    )
    scope = statements[1]
    prototype, call = scope.statements[2:]
    assert type(prototype) is CallPrototype and prototype.name == "prototype_5"
    assert [p.name for p in prototype.returns] == ["_"]
    assert [p.array for p in prototype.params] == [(), (16,)]
    assert call.operands == (
        ArgList((Name("retval0"),)),
        Name("%rd1"),
        ArgList((Name("param0"),)),
        Name("prototype_5"),
    )


def test_branch_and_call_target_lists():
    statements = body(
        ".reg .b32 %r1;\n$L_brx_0: .branchtargets L0, L1, L2;\nbrx.idx %r1, $L_brx_0;\n"
        "L0:\nL1:\nL2:\n$Ltargets: .calltargets f, g;\nret;",
        header=".visible .entry k()",
    )
    targets = statements[1]
    assert targets == TargetList("branchtargets", "$L_brx_0", ("L0", "L1", "L2"))
    assert statements[2].name == "brx.idx"
    assert statements[6] == TargetList("calltargets", "$Ltargets", ("f", "g"))


def test_loc_forms():
    statements = body(".loc 1 15 3\n.loc 2 373 9, function_name $L__info_string1, inlined_at 1 7 3\nret;")
    assert statements[0] == Loc(1, 15, 3)
    assert statements[1] == Loc(2, 373, 9, "$L__info_string1", (1, 7, 3))


def test_pragma_in_a_body():
    assert body('.pragma "nounroll";\nret;')[0] == Pragma(("nounroll",))


# --------------------------------------------------------------------------------------------------
# instructions and operands


def test_modifier_chains_with_qualifiers():
    ins = instruction(
        "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32 "
        "{%r1, %r2, %r3, %r4}, {%r5, %r6}, {%r7, %r8}, {%r1, %r2, %r3, %r4}, %r1, 0x0;"
    )
    assert ins.opcode == "mma"
    assert ins.modifiers[:3] == ("sp::ordered_metadata", "sync", "aligned")
    assert ins.has("sync", "aligned") and not ins.has("trans")
    tensor = instruction(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
        "[%r1], [%r2, {%r3, %r4}], [%r5];"
    )
    assert tensor.modifiers == (
        "async", "bulk", "tensor", "2d", "shared::cluster", "global", "tile", "mbarrier::complete_tx::bytes"
    )
    assert tensor.operands[1] == Address(Name("%r2"), 0, (Vector((Name("%r3"), Name("%r4"))),))


def test_address_operands():
    assert operands("ld.global.u32 %r1, [%r2];") == (Name("%r1"), Address(Name("%r2")))
    assert operands("ld.global.u32 %r1, [%r2+8];")[1] == Address(Name("%r2"), 8)
    assert operands("ld.local.u32 %r1, [%r2+-8];")[1] == Address(Name("%r2"), -8)
    assert operands("ld.local.u32 %r1, [%r2-16];")[1] == Address(Name("%r2"), -16)
    assert operands("ld.shared.u32 %r1, [smem+0x10];")[1] == Address(Name("smem"), 16)
    assert operands("ld.shared.u32 %r1, [256];")[1] == Address(None, 256)
    assert operands("st.param.b32 [param0+0], %r1;")[0] == Address(Name("param0"), 0)


def test_vector_pair_sink_and_negated_operands():
    assert operands("ld.global.v4.u32 {%r1, %r2, _, %r4}, [%r5];")[0] == Vector(
        (Name("%r1"), Name("%r2"), Sink(), Name("%r4"))
    )
    assert operands("shfl.sync.idx.b32 %r1|%p1, %r2, 0, 31, -1;")[0] == Pair(Name("%r1"), Name("%p1"))
    assert operands("setp.lt.and.s32 %p1|%p2, %r1, %r2, !%p0;")[-1] == Negated(Name("%p0"))
    assert operands("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], 4096;")[0] == Sink()
    assert operands("mov.b64 %r1, {%r2, %r3};")[1] == Vector((Name("%r2"), Name("%r3")))


def test_immediates():
    assert operands("add.s32 %r1, %r2, -1;")[2] == IntImm(-1)
    assert operands("and.b32 %r1, %r2, 0xFFFF0000;")[2] == IntImm(0xFFFF0000, 16)
    assert operands("mov.b16 %r1, 0x8000U;")[1] == IntImm(0x8000, 16, True)
    assert operands("mov.b32 %r1, 017;")[1] == IntImm(15, 8)
    assert operands("mov.b32 %r1, 0b101;")[1] == IntImm(5, 2)
    assert operands("mov.f32 %r1, 0fBF800000;")[1] == FloatImm(0xBF800000, 32)
    assert operands("mov.f32 %r1, -0f3F800000;")[1] == FloatImm(0xBF800000, 32)
    assert operands("mov.f64 %r1, 0d3FF0000000000000;")[1].value == 1.0
    assert operands("mov.f64 %r1, 2.5e3;")[1].value == 2500.0
    assert operands("add.s64 %r1, %r2, 9223372036854775807;")[2] == IntImm(2**63 - 1)


def test_special_registers_and_symbols():
    ops = operands("mov.u32 %r1, %tid.x;")
    assert ops[1] == Name("%tid", "x") and ops[1].is_special_register
    for register in ("%laneid", "%lanemask_lt", "%envreg3", "%clock64", "%pm7_64", "%cluster_ctarank"):
        assert is_special_register(register)
        assert operands(f"mov.u32 %r1, {register};")[1] == Name(register)
    assert not is_special_register("%r1")
    assert operands("mov.u64 %r1, $str;")[1] == Name("$str")
    assert operands("mov.u64 %r1, $str+5;")[1] == SymbolRef("$str", 5)


def test_call_operands_and_expressions():
    call = instruction("call.uni (retval0), \nvprintf, \n(\nparam0, \nparam1\n);")
    assert call.operands == (ArgList((Name("retval0"),)), Name("vprintf"), ArgList((Name("param0"), Name("param1"))))
    assert instruction("call.uni _Z3foov;").operands == (Name("_Z3foov"),)
    # an integer constant expression is its value (ptx/constexpr.py); one naming a symbol stays as written
    assert operands("mov.u32 %r1, (1 << 4) | 3;")[1] == IntImm(19, 10, False)
    assert operands("mov.u32 %r1, (sym << 4) | 3;")[1] == Expr("(sym << 4) | 3")


def test_texture_operands():
    ops = operands("tex.2d.v4.f32.f32 {%r1, %r2, %r3, %r4}, [tex, sampler, {%r5, %r6}];")
    assert ops[1] == Address(Name("tex"), 0, (Name("sampler"), Vector((Name("%r5"), Name("%r6")))))


def test_instructions_without_operands():
    for text in ("ret;", "exit;", "trap;", "ret ;", "bar.sync 0;", "fence.proxy.async.shared::cta;"):
        assert instruction(text).operands == (() if "bar" not in text else (IntImm(0),))


def test_every_opcode_of_the_table_parses():
    statements = "\n".join(f"{opcode}.x %r1;" for opcode in sorted(OPCODES))
    parsed = [s for s in body(".reg .b32 %r1;\n" + statements) if type(s) is Instruction]
    assert [ins.opcode for ins in parsed] == sorted(OPCODES)
    assert {"tcgen05", "wgmma", "mbarrier", "cp", "mma", "setmaxnreg", "vadd4", "brx"} <= set(OPCODES)


# --------------------------------------------------------------------------------------------------
# comments, positions, equality


def test_comments_are_ignored_and_positions_kept():
    text = HEADER + (
        "/* a\nblock comment */ .visible .entry k() // trailing\n{\n\t// a line comment\n\tret; /* inline */\n}\n"
    )
    module = roundtrip(text)
    kernel = module.kernels[0]
    assert (kernel.line, kernel.column) == (5, 18)
    ret = kernel.body.statements[0]
    assert (ret.line, ret.column) == (8, 2)


def test_equality_ignores_positions():
    a = parse_ptx(HEADER + ".entry k()\n{\nret;\n}\n")
    b = parse_ptx("\n\n" + HEADER + "\t.entry   k  (  )  {  ret ;  }")
    assert a == b
    assert a.kernels[0].line != b.kernels[0].line


def test_fatbin_form_with_trailing_nul():
    text = "\n" * 8 + HEADER + ".visible .entry k()\n{\nret;\n}\n\0"
    assert parse_ptx(text) == parse_ptx(HEADER + ".visible .entry k() { ret; }")


def test_printed_text_is_canonical():
    source = HEADER + ".visible .entry k(.param .u32 n) .maxntid 32, 1, 1 { @!%p1 bra $L; $L: ret; }"
    text = print_ptx(parse_ptx(source))
    assert text.splitlines() == [
        ".version 9.0",
        ".target sm_90",
        ".address_size 64",
        "",
        ".visible .entry k(",
        "\t.param .u32 n",
        ")",
        ".maxntid 32, 1, 1",
        "{",
        "\t@!%p1 bra $L;",
        "$L:",
        "\tret;",
        "}",
    ]


# --------------------------------------------------------------------------------------------------
# errors


def test_unknown_opcode_is_located():
    e = error(HEADER + ".entry k()\n{\n    frobnicate.u32 %r1;\n}\n")
    assert (e.source, e.line, e.column, e.text) == ("snippet.ptx", 6, 5, "frobnicate.u32")
    assert "unknown instruction 'frobnicate'" in str(e)
    assert str(e).startswith("snippet.ptx:6:5: ")
    assert isinstance(e, FatkitError)


@pytest.mark.parametrize(
    ("statement", "message", "fragment"),
    [
        ("add.s32 %r1 %r2, 1;", "malformed operand", "%r1 %r2"),
        ("ld.global.u32 %r1, [%r2+%r3];", "malformed address operand", "[%r2+%r3]"),
        ("ld..u32 %r1, [%r2];", "malformed modifier chain", "ld..u32"),
        ("add.s32 %r1, , %r2;", "empty operand", ""),
        ("mov.u32 %r1, 1", "not terminated", "mov.u32 %r1, 1"),
        (".frobnicate 3;", "unknown directive '.frobnicate'", ".frobnicate 3;"),
        (".reg .b32 .b32 %r1;", "unexpected '.b32'", ".b32"),
        (".reg %r1;", "needs a state space and a type", ".reg %r1"),
        (".branchtargets a, b;", "needs a label", ".branchtargets a, b;"),
        ("ld.global.v4.u32 {%r1, %r2, [%r3];", "not terminated", "ld.global.v4.u32 {%r1, %r2, [%r3];"),
    ],
)
def test_malformed_statements(statement, message, fragment):
    e = error(HEADER + ".entry k()\n{\n" + statement + "\n}\n")
    assert message in e.message
    assert e.line == 6
    if fragment:
        assert e.text == fragment


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        (HEADER + "add.s32 %r1, %r2, 1;\n", "instruction outside a function", 4),
        (HEADER + "L1:\n", "label outside a function", 4),
        (HEADER + "{\n}\n", "block outside a function", 4),
        (HEADER + ".entry k()\n{\nret;\n", "'{' is never closed", 5),
        (HEADER + ".entry k()\n{\nret;\n}\n}\n", "'}' without a matching '{'", 8),
        (HEADER + ".version 9.0\n", "second .version directive", 4),
        (HEADER + "/* never closed\n", "unterminated comment", 4),
        (HEADER + ".entry k() {\n.entry j() { ret; }\n}\n", "function inside a function", 5),
        (HEADER + ".entry (.param .b32 r) k() { ret; }\n", "a kernel has no return parameters", 4),
        (HEADER + ".entry k() .maxntid x { ret; }\n", "malformed function header directive", 4),
        (HEADER + ".entry k(.param .b32 a = 1) { ret; }\n", "a parameter is one", 4),
        (HEADER + ".entry k() {\n.loc 1 2\nret; }\n", "malformed .loc directive", 5),
        (HEADER + ".entry k()\n" + "{\n" * 300 + "}\n" * 300, "blocks nested more than 200 deep", 206),
    ],
)
def test_malformed_modules(text, message, line):
    e = error(text)
    assert message in e.message and e.line == line


# --------------------------------------------------------------------------------------------------
# robustness


SAMPLE = (Path(__file__).parent / "samples" / "ptx" / "hopper.sm_90a.ptx").read_text()
_EDITS = st.lists(
    st.tuples(
        st.floats(0, 1, exclude_max=True),
        st.sampled_from(["insert", "delete", "replace"]),
        st.sampled_from(list("{}[]()<>;:,.@!%$_|+-=\"0fxU \n") + ["//", "/*", ".reg", ".b32", ".entry", "generic("]),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=150, deadline=None)
@given(_EDITS)
def test_damaged_text_parses_or_raises_a_syntax_error(edits):
    text = SAMPLE
    for where, action, piece in edits:
        pos = int(where * len(text))
        if action == "insert":
            text = text[:pos] + piece + text[pos:]
        elif action == "delete":
            text = text[:pos] + text[pos + len(piece):]
        else:
            text = text[:pos] + piece + text[pos + 1:]
    try:
        module = parse_ptx(text)
    except PtxSyntaxError as e:
        assert e.line >= 1 and e.column >= 1
        return
    assert parse_ptx(print_ptx(module)) == module


def test_crlf_line_endings():
    assert parse_ptx(SAMPLE.replace("\n", "\r\n")) == parse_ptx(SAMPLE)
