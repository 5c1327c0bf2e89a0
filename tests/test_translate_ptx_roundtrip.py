"""Real PTX through the front-end: parse, print, re-parse to an equal tree, and ptxas on the printed text.

Two sources: the PTX nvcc 13.0 emits for the CUDA programs in tests/ptx_sources (committed under
tests/samples/ptx by tests/ptx_sources/build.sh), and every PTX module of the public corpus (extracted
with fatkit's scanner; `corpus` tests). ptxas checks are skipped where the installed ptxas rejects the
original module (a newer `.version`, an unsupported target), so they test the printer, not ptxas.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fatkit.translate.ptx import ast, parse_ptx, print_ptx
from tests.corpus import CORPUS_DIR, corpus_files

SAMPLES = sorted((Path(__file__).parent / "samples" / "ptx").glob("*.ptx"))
PTXAS = shutil.which("ptxas")
CORPUS_PTXAS_MAX_BYTES = 300_000  # ptxas takes seconds per 100 KB of PTX; larger modules are covered by parsing


def fatbin_form(text: str) -> str:
    """The text as a fatbin stores it (docs/formats.md §4): comments removed, lines de-indented, 8 leading
    newlines, a trailing NUL."""
    without_comments = re.sub(r"//[^\n]*", "", text)
    return "\n" * 8 + "\n".join(line.lstrip() for line in without_comments.split("\n")) + "\0"


def assert_ptxas_accepts(original: str, module: ast.Module, tmp_path: Path) -> None:
    """ptxas assembles the printed module wherever it assembles the original."""
    if PTXAS is None:
        pytest.skip("ptxas not on PATH")
    arch = module.arch or "sm_75"

    def ptxas(name: str, text: str) -> subprocess.CompletedProcess:
        path = tmp_path / name
        path.write_text(text)
        return subprocess.run(
            [PTXAS, "-O0", f"-arch={arch}", str(path), "-o", str(tmp_path / (name + ".cubin"))],
            capture_output=True,
            text=True,
            timeout=600,
        )

    reference = ptxas("original.ptx", original.rstrip("\0"))
    if reference.returncode != 0:
        pytest.skip(f"this ptxas rejects the original module ({arch}, .version {module.version}): "
                    f"{reference.stderr.strip().splitlines()[0]}")
    printed = ptxas("printed.ptx", print_ptx(module))
    assert printed.returncode == 0, printed.stderr


# --------------------------------------------------------------------------------------------------
# nvcc-made samples


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_sample_roundtrip(path: Path):
    text = path.read_text()
    module = parse_ptx(text, source=path.name)
    assert module.functions
    assert parse_ptx(print_ptx(module)) == module
    assert parse_ptx(fatbin_form(text)) == module


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_sample_printed_is_accepted_by_ptxas(path: Path, tmp_path: Path):
    text = path.read_text()
    assert_ptxas_accepts(text, parse_ptx(text), tmp_path)


def _everything(module: ast.Module):
    for item in module.items:
        yield item
        if type(item) is ast.Function:
            yield from item.params
            yield from item.statements()


def _operands(operand):
    yield operand
    for child in getattr(operand, "items", ()) or ():
        yield from _operands(child)
    for name in ("first", "second", "operand"):
        if hasattr(operand, name):
            yield from _operands(getattr(operand, name))
    if type(operand) is ast.Address:
        for child in operand.extra:
            yield from _operands(child)


def test_samples_cover_the_language():
    """What the committed samples exercise, so that a rebuild that loses a feature fails here."""
    assert SAMPLES, "run tests/ptx_sources/build.sh"
    nodes = [node for path in SAMPLES for node in _everything(parse_ptx(path.read_text()))]
    instructions = [n for n in nodes if type(n) is ast.Instruction]
    opcodes = {i.opcode for i in instructions}
    assert {
        "shfl", "vote", "match", "redux", "activemask", "bar", "barrier", "atom", "red", "fence", "membar",
        "mma", "ldmatrix", "stmatrix", "movmatrix", "wmma", "wgmma", "tcgen05", "cp", "mbarrier", "tex",
        "tld4", "suld", "sust", "call", "alloca", "setmaxnreg", "elect", "griddepcontrol", "prmt", "lop3",
        "dp4a", "vadd4", "cvt", "ex2", "tanh", "trap", "nanosleep", "st", "ld", "ldu", "prefetch", "mapa",
        "getctarank", "isspacep", "clusterlaunchcontrol", "brev", "bfind", "shf",
    } <= opcodes, sorted(opcodes)
    names = {i.name for i in instructions}
    assert any(n.startswith("cp.async.bulk.tensor.2d.shared::cluster") for n in names)
    assert any("::" in m for i in instructions for m in i.modifiers)
    operand_types = {type(o) for i in instructions for op in i.operands for o in _operands(op)}
    assert {
        ast.Name, ast.Sink, ast.IntImm, ast.FloatImm, ast.Address, ast.Vector, ast.Pair, ast.ArgList
    } <= operand_types
    assert any(type(n) is ast.Section for n in nodes)
    assert any(type(n) is ast.Loc and n.inlined_at for n in nodes)
    assert any(type(n) is ast.File for n in nodes)
    assert any(type(n) is ast.CallPrototype for n in nodes)
    assert any(type(n) is ast.Pragma for n in nodes)
    assert any(type(n) is ast.Block for n in nodes)
    assert any(i.guard is not None and i.guard.negated for i in instructions)
    variables = [n for n in nodes if type(n) is ast.Variable]
    assert {v.state_space for v in variables} >= {"reg", "param", "shared", "global", "const", "local"}
    assert any(v.linkage == "extern" and v.array == (None,) for v in variables)
    assert any(v.ptr for v in variables)
    assert any(type(v.initializer) is ast.InitList and any(type(x) is ast.SymbolRef for x in v.initializer.items)
               for v in variables)
    functions = [n for n in nodes if type(n) is ast.Function]
    directives = {d.name for f in functions for d in f.directives}
    assert {
        "maxntid", "minnctapersm", "maxnreg", "reqnctapercluster", "explicitcluster", "maxclusterrank"
    } <= directives
    assert any(f.body is None and f.linkage == "extern" for f in functions)
    assert any(f.returns for f in functions)
    assert any("debug" in parse_ptx(p.read_text()).target for p in SAMPLES)


def test_samples_cover_video_selectors_and_wide_registers():
    """operands.sm_90.ptx: video selectors and masks (`%r1.b3`, `%r2.h30`, `%r3.b7654`), negated vmad
    operands (ast.Minus), cvt.pack, `.b128` and vector registers, WARP_SZ."""
    module = parse_ptx((Path(__file__).parent / "samples" / "ptx" / "operands.sm_90.ptx").read_text())
    nodes = list(_everything(module))
    instructions = [n for n in nodes if type(n) is ast.Instruction]
    operands = [o for i in instructions for op in i.operands for o in _operands(op)]
    components = {o.component for o in operands if type(o) is ast.Name and o.component}
    assert {"b1", "h1", "b3", "b0", "h0", "h21", "h30", "b31", "b7654", "b0123", "b20"} <= components
    assert any(type(o) is ast.Minus for o in operands)
    assert {"vadd", "vabsdiff", "vmax", "vshl", "vset", "vmad", "vavrg2", "vset4", "vmin4"} <= \
        {i.opcode for i in instructions}
    assert any(i.opcode == "cvt" and "pack" in i.modifiers for i in instructions)
    variables = [n for n in nodes if type(n) is ast.Variable]
    assert any(v.type == "b128" for v in variables) and any(v.vector == 4 and v.state_space == "reg" for v in variables)
    assert any(type(o) is ast.Name and o.name == "WARP_SZ" for o in operands)


def test_new_operand_syntax_round_trips():
    text = """.version 8.3
.target sm_90
.address_size 64
.visible .entry k()
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    .reg .b128 %q;
    .reg .v4 .u32 %v;
    .reg .pred %p;
    vmad.s32.s32.u32.po %r0, %r1.b3, %r2.h1, %r3;
    vmad.s32.u32.u32 %r0, -%r1, -%r2, - %r3;
    vadd4.u32.u32.u32 %r0.b3210, %r1.b7654, %r2.b0123, %r3;
    vsub2.s32.s32.s32.sat %r0.h0, %r1.h32, %r2.h01, %r3;
    @%p mov.b64 {%r0, %r1}, %rd1;
    mov.b128 %q, {%rd1, %rd2};
    mov.u32 %v.x, WARP_SZ;
    st.global.v4.u32 [%rd1], %v;
    ret;
}
"""
    module = parse_ptx(text)
    assert parse_ptx(print_ptx(module)) == module
    ins = [s for s in module.functions[0].statements() if type(s) is ast.Instruction]
    assert ins[1].operands[1:] == (ast.Minus(ast.Name("%r1")), ast.Minus(ast.Name("%r2")), ast.Minus(ast.Name("%r3")))
    assert ins[2].operands[0] == ast.Name("%r0", "b3210") and ins[3].operands[1] == ast.Name("%r1", "h32")
    assert ins[7].operands[1] == ast.Name("%v")


# --------------------------------------------------------------------------------------------------
# the public corpus


def _corpus_ptx() -> list:
    """(corpus file, k) for the k-th PTX entry of every corpus file, or one skipped case without corpus."""
    from fatkit.extract.scan import scan_path

    cases = []
    for path in corpus_files():
        ptx_entries = [e for binary in scan_path(path) for e in binary.entries if e.kind == "ptx"]
        name = path.relative_to(CORPUS_DIR).as_posix() if path.is_relative_to(CORPUS_DIR) else path.name
        cases += [pytest.param(path, k, id=f"{name}!{k}") for k in range(len(ptx_entries))]
    return cases or [pytest.param(None, None, marks=pytest.mark.skip(reason="corpus not fetched"))]


def _corpus_entry(path: Path, k: int) -> str:
    from fatkit.extract.scan import scan_path

    entry = [e for binary in scan_path(path) for e in binary.entries if e.kind == "ptx"][k]
    payload = entry.payload
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        return payload.decode("latin-1")


CORPUS_PTX = _corpus_ptx()


@pytest.mark.corpus
@pytest.mark.parametrize(("path", "k"), CORPUS_PTX)
def test_corpus_module_roundtrip(path: Path, k: int):
    text = _corpus_entry(path, k)
    module = parse_ptx(text, source=f"{path.name}!{k}")
    assert module.version is not None and module.target
    assert parse_ptx(print_ptx(module)) == module


@pytest.mark.corpus
@pytest.mark.parametrize(("path", "k"), CORPUS_PTX)
def test_corpus_module_printed_is_accepted_by_ptxas(path: Path, k: int, tmp_path: Path):
    text = _corpus_entry(path, k)
    if len(text) > CORPUS_PTXAS_MAX_BYTES:
        pytest.skip(f"{len(text)} bytes: above the ptxas cap of {CORPUS_PTXAS_MAX_BYTES}")
    assert_ptxas_accepts(text, parse_ptx(text), tmp_path)
