"""Device linking of `-rdc` units (fatkit/translate/link.py): which PTX modules of a binary are linked, the
linked module running on the host, names that collide, what stays unresolved, and the cache key a shim
computes for a linked unit."""

from __future__ import annotations

import ctypes
import json

import numpy as np
import pytest

from fatkit.cache import Cache, find, find_linked, linked_ptx_hash, ptx_hash
from fatkit.cache.precompile import precompile
from fatkit.errors import FatkitError
from fatkit.extract.scan import scan_paths
from fatkit.extract.select import ptx_modules
from fatkit.formats.hsaco import parse_code_object
from fatkit.translate.link import link_modules, linkable
from fatkit.translate.pipeline import Options, translate
from fatkit.translate.link import link_units
from tests import amdrun as tests_amdrun
from tests.amdrun import TARGETS, EmulatedProgram, HostProgram
from tests.amdrun import program as loaded_program
from tests.helpers import sample
from tests.ptxframes import entry

HEADER = ".version 8.5\n.target sm_80\n.address_size 64\n"


def _modules(name: str, link: bool):
    return list(ptx_modules(scan_paths([sample(name)]), on_error=pytest.fail,
                            link_rdc=link_units if link else None))


def test_the_rdc_units_of_a_binary_are_one_linked_module():
    units = _modules("nv_rdc_var", link=False)
    assert [(m.container, m.arch) for m in units] == [(1, "compute_90"), (2, "compute_90")]
    assert ".extern .func (.param .b32 func_retval0) _Z10rdc_lookupi" in units[0].text
    (linked,) = _modules("nv_rdc_var", link=True)
    assert (linked.container, linked.linked, linked.stem) == (None, (1, 2), "nv_rdc_var.rdc.compute_90")
    assert linked.members == (units[0].text, units[1].text)
    assert ".extern" not in linked.text  # every declaration resolved by the other unit's definition
    # the first -rdc sample: rdc.cu's kernel calls kern.cu's rdc_helper
    (rdc,) = _modules("nv_rdc", link=True)
    assert rdc.linked == (1, 2)
    # units that define nothing for each other stay apart (bitsandbytes' six units are such)
    assert not linkable([HEADER + ".visible .entry a() { ret; }", HEADER + ".visible .entry b() { ret; }"])


@pytest.mark.parametrize("target", TARGETS)
def test_a_kernel_calling_and_reading_another_units_definitions_runs_linked(target):
    (linked,) = _modules("nv_rdc_var", link=True)
    translation = translate(linked.text, Options(target=target))
    assert {k.name: k.status for k in translation.kernels} == {"_Z7rdc_usePfi": "ok", "_Z15rdc_define_onlyPi": "ok"}
    program = HostProgram(translation.product) if target == "host" else EmulatedProgram(translation.product)
    n = 29
    out = (ctypes.c_float * 32)(*([-1.0] * 32))
    program.launch("_Z7rdc_usePfi", [out, n], block=(32, 1, 1))
    table = [0.5, 1.5, 2.5, 3.5]  # rdc_define.cu: rdc_scale = 3, rdc_table, its twice(v) = 2v + 1000
    expected = [(2 * i + 1000) * 3 + table[i & 3] + 2 * i for i in range(n)] + [-1.0] * 3
    assert list(out) == expected
    counts = (ctypes.c_int32 * 32)()
    program.launch("_Z15rdc_define_onlyPi", [counts], block=(32, 1, 1))
    assert list(counts) == [2 * i + 1000 + 3 for i in range(32)]
    if target != "host":
        assert sorted(k.name for k in parse_code_object(translation.product).kernels) == [
            "_Z15rdc_define_onlyPi", "_Z7rdc_usePfi"]


def test_each_device_link_of_a_binary_links_its_own_units():
    """nv_rdc_two_links holds two device links that both define rdc_lookup: each link's units are linked
    together (the linked image of each names their symbols), never with the other link's."""
    units = _modules("nv_rdc_two_links", link=False)
    assert len(units) == 4
    with pytest.raises(FatkitError, match="_Z10rdc_lookupi is defined in both"):
        link_modules([(str(u.container), u.text) for u in units])  # as one link: nvlink's multiple definition
    first, second = _modules("nv_rdc_two_links", link=True)
    assert (first.linked, second.linked) == ((units[0].container, units[1].container),
                                             (units[2].container, units[3].container))
    assert first.stem != second.stem and ".extern" not in first.text + second.text
    n = 29
    table = [0.5, 1.5, 2.5, 3.5]
    for target in ("host", "gfx1100"):
        program = tests_amdrun.program(first.text, target)
        out = np.full(32, -1.0, dtype=np.float32)
        program.launch("_Z7rdc_usePfi", [out, n], block=(32, 1, 1))  # rdc_define.cu's rdc_lookup: 2i + 1000
        assert list(out) == [(2 * i + 1000) * 3 + table[i & 3] + 2 * i for i in range(n)] + [-1.0] * 3
        program = tests_amdrun.program(second.text, target)
        out = np.full(32, -1.0, dtype=np.float32)
        program.launch("_Z5b_usePfi", [out, n], block=(32, 1, 1))  # rdc_b_define.cu's: 7i, b_scale = 5
        assert list(out) == [7 * i + 5 for i in range(n)] + [-1.0] * 3


def test_a_unit_alone_names_the_extern_it_lacks():
    user = _modules("nv_rdc_var", link=False)[0]
    (report,) = [r for r in _lowered_reports(user.text) if r.name == "_Z7rdc_usePfi"]
    assert report.status == "unsupported"
    # the first reference met: the variable the kernel's module-level memory needs
    assert ".extern .global rdc_scale: no PTX module linked with this one defines it" in report.reason


def _lowered_reports(text: str):
    from fatkit.translate.pipeline import lower, parse, passes

    options = Options(target="gfx942")
    return lower(passes(parse(text, options), options), options).reports


# Two units that both have an internal `counter`, `$str` and `bump`, one calling what the other exports
# (`shared_add`, `base`), and references nothing defines (`missing`, `absent`).
UNIT_A = HEADER + """
.extern .func (.param .b32 out) shared_add(.param .b32 x);
.extern .func missing();
.extern .global .align 4 .u32 base;
.extern .global .align 4 .u32 absent;
.global .align 4 .u32 counter = 10;
.global .align 1 .b8 $str[2] = {65, 0};
.func (.param .b32 out) bump(.param .b32 x)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [x];
    ld.global.u32 %r2, [counter];
    add.u32 %r1, %r1, %r2;
    st.param.b32 [out], %r1;
    ret;
}
""" + entry("uses", "u64 p", ".b32 %r<6>, .b64 %rd<3>", """
    ld.global.u32 %r1, [base];
    {
    .param .b32 a;
    .param .b32 r;
    st.param.b32 [a], %r1;
    call (r), bump, (a);
    ld.param.b32 %r2, [r];
    }
    {
    .param .b32 a;
    .param .b32 r;
    st.param.b32 [a], %r2;
    call (r), shared_add, (a);
    ld.param.b32 %r3, [r];
    }
    mov.u64 %rd2, $str;
    ld.global.u8 %r4, [%rd2];
    add.u32 %r3, %r3, %r4;
    st.global.u32 [%rd1], %r3;
    ret;
""") + """.visible .entry calls_missing()
{
    call missing, ();
    ret;
}
""" + entry("reads_absent", "u64 p", ".b32 %r<2>, .b64 %rd<2>", """
    ld.global.u32 %r1, [absent];
    st.global.u32 [%rd1], %r1;
    ret;
""")
UNIT_B = HEADER + """
.visible .global .align 4 .u32 base = 1000;
.global .align 4 .u32 counter = 20000;
.global .align 1 .b8 $str[2] = {66, 0};
.func (.param .b32 out) bump(.param .b32 x)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [x];
    ld.global.u32 %r2, [counter];
    mul.lo.u32 %r1, %r1, %r2;
    st.param.b32 [out], %r1;
    ret;
}
.weak .func (.param .b32 out) shared_add(.param .b32 x)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [x];
    {
    .param .b32 a;
    .param .b32 r;
    st.param.b32 [a], %r1;
    call (r), bump, (a);
    ld.param.b32 %r2, [r];
    }
    mov.u64 %rd1, $str;
    st.param.b32 [out], %r2;
    ret;
}
"""
UNIT_B = UNIT_B.replace("    mov.u64 %rd1, $str;\n", "")


@pytest.mark.parametrize("target", TARGETS)
def test_internal_names_stay_per_unit_and_unresolved_references_are_named(target):
    linked = link_modules([("a.ptx", UNIT_A), ("b.ptx", UNIT_B)])
    assert linked is not None and linked.unresolved == {"missing": "a.ptx", "absent": "a.ptx"}
    text = linked.text
    translation = translate(text, Options(target=target))
    reports = {k.name: k for k in translation.kernels}
    assert reports["uses"].status == "ok"
    assert "missing is declared .extern and no PTX module linked with this one defines it" in \
        reports["calls_missing"].reason
    assert reports["reads_absent"].status == "unsupported" and ".extern .global absent" in \
        reports["reads_absent"].reason and "no PTX module linked with this one defines it" in \
        reports["reads_absent"].reason
    out = (ctypes.c_uint32 * 1)()
    program = HostProgram(translation.product) if target == "host" else EmulatedProgram(translation.product)
    program.launch("uses", [out])
    # A's bump adds A's counter (10) to base (1000); B's shared_add calls B's bump (× B's counter, 20000);
    # then A's "$str" ('A' = 65)
    assert out[0] == (1000 + 10) * 20000 + 65


@pytest.mark.parametrize("target", TARGETS)
def test_two_visible_definitions_are_an_error_and_weak_ones_keep_the_first(target):
    visible = HEADER + ".visible .global .align 4 .u32 twice_defined = {value};\n"
    user = HEADER + """.extern .global .align 4 .u32 twice_defined;
""" + entry("k", "u64 p", ".b32 %r<2>, .b64 %rd<2>", """
    ld.global.u32 %r1, [twice_defined];
    st.global.u32 [%rd1], %r1;
    ret;
""")
    with pytest.raises(FatkitError, match="twice_defined is defined in both one.ptx and two.ptx"):
        link_modules([("user.ptx", user), ("one.ptx", visible.format(value=1)), ("two.ptx", visible.format(value=2))])
    weak = [(name, text.replace(".visible", ".weak")) for name, text in
            [("one.ptx", visible.format(value=1)), ("two.ptx", visible.format(value=2))]]
    program = loaded_program(link_modules([("user.ptx", user), *weak]).text, target)
    out = (ctypes.c_uint32 * 1)()
    program.launch("k", [out])
    assert out[0] == 1
    strong_last = [("user.ptx", user), weak[0], ("two.ptx", visible.format(value=2))]
    program = loaded_program(link_modules(strong_last).text, target)
    program.launch("k", [out])
    assert out[0] == 2  # a .visible definition wins over a .weak one met before it
    assert link_modules([("one.ptx", visible.format(value=1)), ("k.ptx", HEADER + ".visible .entry e() { ret; }")]) \
        is None  # nothing declared .extern: nothing to link


def test_precompile_stores_the_linked_unit_under_the_key_a_shim_computes(tmp_path):
    """The shim, given one device link's units (a version-2 wrapper's prelinked fatbins), hashes the units'
    PTX with linked_ptx_hash; that finds what precompile stored for the linked module."""
    (linked,) = _modules("nv_rdc_var", link=True)
    with Cache(tmp_path / "cache") as cache:
        report = precompile([linked], ["gfx942"], cache).to_json()
        (record,) = report["modules"]
        assert record["status"] == "translated" and record["ptx_blake3"] == linked_ptx_hash(linked.members)
        assert record["source"] == f"{linked.source} -rdc units c1+c2 linked (compute_90)"
        data = sample("nv_rdc_var").read_bytes()
        (binary,) = scan_paths([sample("nv_rdc_var")])
        images = [data[c.offset:c.offset + c.size] for c in binary.containers if c.section == "__nv_relfatbin"]
        assert len(images) == 2
        for order in (images, images[::-1]):  # registration order does not matter
            entry = find_linked(cache, order, "gfx942:sramecc+:xnack-")
            assert entry is not None
            assert {k.name for k in parse_code_object(entry.code_object).kernels} == {"_Z7rdc_usePfi",
                                                                                       "_Z15rdc_define_onlyPi"}
        # a shim hashing one unit's PTX finds the linked code object too (ZLUDA picks one unit's text)
        for image in images:
            entry = find(cache, image, "gfx942")
            assert entry is not None and entry.code_object == find_linked(cache, images, "gfx942").code_object
            assert set(entry.manifest["linked_units"]) == {ptx_hash(text) for text in linked.members}
    assert linked_ptx_hash([b"x"]) == ptx_hash(b"x")
    assert linked_ptx_hash(["a", "b"]) == linked_ptx_hash(["b", "a"]) != linked_ptx_hash(["a", "c"])


def test_fatkit_translate_and_precompile_link_the_units(tmp_path):
    from tests.test_cli import fatkit

    out = json.loads(fatkit("translate", "--json", str(sample("nv_rdc_var")), "--target", "gfx1100",
                            "-o", str(tmp_path / "out")).stdout)
    (module,) = out["modules"]
    assert module["linked"] == [1, 2] and module["container"] is None
    assert {k["name"]: k["status"] for k in module["kernels"]} == {"_Z7rdc_usePfi": "ok", "_Z15rdc_define_onlyPi": "ok"}
    assert module["output"].endswith("nv_rdc_var.rdc.compute_90.gfx1100.hsaco")
    report = json.loads(fatkit("precompile", "--json", str(sample("nv_rdc")), "--target", "gfx1100",
                               "--cache", str(tmp_path / "cache")).stdout)
    (record,) = report["modules"]
    assert record["status"] == "translated" and "-rdc units c1+c2 linked" in record["source"]
    assert all(k["status"] == "ok" for k in record["kernels"]) and len(record["kernels"]) == 8


def test_a_reference_no_unit_defines_is_reported_with_its_symbol_and_unit():
    from fatkit.extract.select import PtxModule, _rdc_linked

    units = [(PtxModule("lib.so", index + 1, 0, "compute_80", f"lib.so.c{index + 1}", text), True)
             for index, text in enumerate((UNIT_A, UNIT_B))]
    problems: list[str] = []
    (linked,) = _rdc_linked("lib.so", "lib.so", units, problems.append, link_units)
    assert linked.linked == (1, 2) and linked.stem == "lib.so.rdc.compute_80"
    assert problems == [f"lib.so: {name}, declared .extern in the -rdc unit c1.e0 (compute_80), is defined by no "
                        "unit of the binary: the kernels reaching it are not translated"
                        for name in ("absent", "missing")]
