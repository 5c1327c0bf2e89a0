"""The coverage table (fatkit/translate/coverage.py) against the parser's opcodes, lowering and lint.

Every opcode the parser knows has a row; every row's example, one instruction in a kernel of its own, is
lowered: a LOWERED row's kernel lowers, a REFUSED row's is refused with the row's reason, and
lint reports an error at that line exactly then.
"""

from __future__ import annotations

import re

import pytest

from fatkit.formats.hsaco import parse_code_object
from fatkit.translate.coverage import EXAMPLE_KERNEL, FORMS, LOWERED, REFUSED, form_of
from fatkit.translate.hazards import ERROR, analyse
from fatkit.translate.lower.core import HANDLERS
from fatkit.translate.pipeline import Options, lower, parse, passes, translate
from fatkit.translate.ptx import parse_ptx
from fatkit.translate.ptx.opcodes import OPCODES


def test_every_opcode_of_the_parser_has_a_row_and_every_row_an_opcode():
    opcodes = {form.opcode for form in FORMS}
    assert opcodes == set(OPCODES)
    for opcode in OPCODES:  # the row for forms no other row names
        assert form_of(opcode, ()).modifiers == ()
    assert len({(f.opcode, f.modifiers) for f in FORMS}) == len(FORMS)


def test_a_lowered_opcode_has_a_handler_and_an_opcode_without_one_is_not_lowered():
    handled = {opcode for opcode, _ in HANDLERS}
    for form in FORMS:
        if form.status == LOWERED:
            assert form.opcode in handled, form
    for opcode in set(OPCODES) - handled:
        assert all(f.status != LOWERED for f in FORMS if f.opcode == opcode), opcode
    # a handler the table keeps from every form of its opcode would never run: its row must say lowered
    for opcode in handled:
        assert form_of(opcode, ()).status == LOWERED, f"{opcode} has a lowering; its row still refuses it"


# words of a reason that says a form is merely not done, not why it cannot be
_NOT_YET = re.compile(r"not (supported|translated|lowered|modelled|implemented|derived)( yet)?|\byet\b|"
                      r"\btodo\b|\bneeds?\b|does not (emulate|lower|derive|translate)|this lowering", re.I)
# what a refusal must name: a hardware or ABI that is missing
_IMPOSSIBILITY = re.compile(r"\b(AMD|HIP|ABI|hardware|no such|has no|have no|no [a-z-]+ (instruction|memory))", re.I)


def test_every_form_is_lowered_or_refused_for_a_missing_hardware_or_abi():
    for form in FORMS:
        assert form.status in (LOWERED, REFUSED), form
        assert bool(form.reason) == (form.status == REFUSED), form
        if form.status == REFUSED:
            assert not _NOT_YET.search(form.reason), form
            assert _IMPOSSIBILITY.search(form.reason), form


def test_the_not_yet_words_are_caught():
    for reason in ("instruction not supported yet", "the face-space derivatives are not derived",
                   "fatkit does not emulate warpgroup MMA yet", "needs a map from those codes"):
        assert _NOT_YET.search(reason), reason


def _kernel(form) -> str:
    return EXAMPLE_KERNEL.replace("{example}", form.example)


def _example_line(text: str, form) -> int:
    first = form.example.splitlines()[0].strip()
    return next(number for number, line in enumerate(text.splitlines(), 1) if line.strip() == first)


EXAMPLES = [f for f in FORMS if f.example is not None]
IMAGE_OPCODES = {"tex", "tld4", "txq", "suld", "sust", "sured", "suq"}


def test_only_rows_that_lower_nothing_lack_an_example():
    assert all(f.status != LOWERED for f in FORMS if f.example is None)
    assert len(EXAMPLES) >= len(FORMS) - 2


@pytest.mark.parametrize("form", EXAMPLES, ids=[f"{f.opcode}{''.join('.' + m for m in f.modifiers)}" for f in EXAMPLES])
def test_each_row_is_what_lowering_and_lint_do(form):
    text = _kernel(form)
    module = parse_ptx(text)
    instructions = [i for i in module.kernels[0].instructions() if i.opcode == form.opcode]
    assert instructions and all(form_of(i.opcode, i.modifiers) == form for i in instructions), \
        "the example is of another row's form"
    # textures and surfaces have image instructions on RDNA only (gfx942 refuses them: test_translate_texture)
    options = Options(target="gfx1100" if form.opcode in IMAGE_OPCODES else "gfx942")
    (report,) = lower(passes(parse(text, options), options), options).reports
    (kernel,) = analyse(module)
    wave = "wave32" if form.opcode in IMAGE_OPCODES else "wave64"  # the hazards of the family lowered for
    errors = {h.line for h in kernel.hazards if h.severity == ERROR and wave in h.targets}
    if form.status == LOWERED:
        assert report.status == "ok", report.reason
        assert not errors & {i.line for i in instructions}
    else:
        assert report.status == "unsupported" and report.reason.endswith(form.reason), report.reason
        assert report.line == _example_line(text, form)
        assert report.line in errors
        not_translated = [h for h in kernel.hazards if h.kind == "not-translated"]
        assert all(h.message.endswith(form.reason) for h in not_translated)


def test_the_table_is_written_to_the_isa_sections():
    """Rows follow the order of ptx/opcodes.py's sections, so that a reader finds an opcode where the ISA has it."""
    order = {opcode: index for index, opcode in enumerate(OPCODES)}
    positions = [order[f.opcode] for f in FORMS]
    assert positions == sorted(positions)
    assert all(re.fullmatch(r"[a-z0-9]+", f.opcode) for f in FORMS)


@pytest.mark.parametrize("processor", ["gfx942", "gfx1100"])
def test_llvm_compiles_every_lowered_example(processor):
    """Each LOWERED row's example as a kernel of one module, through LLVM's AMDGPU codegen: none of them may
    make LLVM abort (codegen would isolate and report such a kernel, `LLVM codegen failed`)."""
    header, _, body = EXAMPLE_KERNEL.partition(".visible .entry example")
    kernels = [f".visible .entry example_{index}" + body.replace("{example}", form.example)
               for index, form in enumerate(EXAMPLES) if form.status == LOWERED]
    translation = translate(header + "".join(kernels), Options(target=processor))
    failed = [(r.name, r.reason) for r in translation.kernels if r.status != "ok"]
    refused_here = [(name, reason) for name, reason in failed if "LLVM codegen failed" not in reason]
    assert [name for name, reason in failed if "LLVM codegen failed" in reason] == []
    # what a processor itself cannot give (gfx942 has no image instructions)
    # is all that may be refused
    assert all(processor in reason for _, reason in refused_here), refused_here
    assert len(parse_code_object(translation.product).kernels) == len(kernels) - len(failed)
