"""Target spellings and directory walks, the same on every command.

Every command that takes `--target` parses it with the one TargetId parser (cli/options.py): the same
spellings are accepted everywhere they apply, the same mistakes are usage errors (exit 2) everywhere. A
directory of symbolic links is inspected, precompiled and repacked like the files it points to.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import sample
from tests.test_cli import fatkit

AMD = ["gfx942", "gfx942:xnack-", "gfx942:sramecc+:xnack-", "gfx1100", "gfx90a", "gfx906", "gfx1201"]
NVIDIA = ["sm_90", "sm_90:wave64"]
WRONG = ["gfx942:xnack", "gfx942:xnack+:xnack-", "gfx942:wavefrontsize64+", "gfx800", "vulkan", "sm90", ""]
REPACK_SAMPLE = Path(__file__).parent / "samples" / "repack" / "librepack.so"
TINY = """.version 8.0
.target sm_90
.address_size 64
.visible .entry tiny(.param .u64 out)
{
.reg .b64 %rd<2>;
ld.param.u64 %rd1, [out];
st.global.u32 [%rd1], 7;
ret;
}
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ptx") / "tiny.ptx"
    path.write_text(TINY)
    return path


@pytest.mark.parametrize("spelling", AMD + NVIDIA)
def test_translate_accepts_every_spelling(spelling, tiny):
    out = fatkit("translate", str(tiny), "--target", spelling, "--dump-after", "lower").stdout
    assert "define" in out and "tiny" in out and f"for {spelling.lower()}" in out


@pytest.mark.parametrize("spelling", AMD)
def test_lint_accepts_every_amd_spelling(spelling, tiny):
    report = json.loads(fatkit("lint", "--json", "--target", spelling, str(tiny)).stdout)
    assert report["target"] == spelling and report["modules"][0]["kernels"][0]["name"] == "tiny"


def test_precompile_lookup_and_repack_accept_every_amd_spelling(tiny, tmp_path):
    cache = tmp_path / "cache"
    report = json.loads(fatkit("precompile", "--json", str(tiny), "--target", ",".join(AMD), "--cache",
                               str(cache), "-j", "1").stdout)
    assert report["targets"] == AMD
    assert {m["target"]: m["status"] for m in report["modules"]} == {t: m for t, m in zip(
        AMD, ["translated", "cached", "cached", "translated", "translated", "translated", "translated"])}
    for spelling in AMD:  # entries are stored for the bare processor, which every feature setting loads
        hit = json.loads(fatkit("cache", "lookup", "--json", "--ptx", str(tiny), "--target", spelling, "--cache",
                                str(cache)).stdout)
        assert hit["hit"] and hit["entry"]["target"] == spelling.split(":")[0]
    if not REPACK_SAMPLE.exists():
        pytest.fail(f"{REPACK_SAMPLE} is missing (tests/samples/repack/build.sh builds it)")
    repacked = json.loads(fatkit("repack", "--json", str(REPACK_SAMPLE), "--target", ",".join(AMD), "-o",
                                 str(tmp_path / "out"), "--cache", str(cache), "-j", "1", check=None).stdout)
    processors = sorted({t.split(":")[0] for t in AMD})  # code objects load on every xnack/sramecc setting
    assert repacked["binaries"][0]["status"] in ("repacked", "partial")
    assert sorted({m["target"] for b in repacked["binaries"] for m in b["modules"]}) == processors


@pytest.mark.parametrize("spelling", WRONG + ["host"])
def test_every_command_refuses_the_same_spellings(spelling, tiny, tmp_path):
    commands = [
        ["translate", str(tiny), "--dump-after", "parse"],
        ["precompile", str(tiny), "--cache", str(tmp_path / "cache")],
        ["repack", str(tiny), "-o", str(tmp_path / "out")],
        ["cache", "lookup", "--ptx", str(tiny), "--cache", str(tmp_path / "cache")],
    ]
    if spelling not in ("sm90",):  # lint also takes the wave classes, not NVIDIA or host targets
        commands.append(["lint", str(tiny)])
    for command in commands:
        proc = fatkit(*command, "--target", spelling, check=2)
        assert "--target" in proc.stderr, (command, proc.stderr)
    assert not (tmp_path / "cache").exists() and not (tmp_path / "out").exists()  # refused before any work


def test_nvidia_targets_are_refused_where_only_amd_code_applies(tiny, tmp_path):
    for spelling in NVIDIA:
        for command in (["precompile", str(tiny), "--cache", str(tmp_path / "c")], ["lint", str(tiny)],
                        ["repack", str(tiny), "-o", str(tmp_path / "o")]):
            fatkit(*command, "--target", spelling, check=2)


# --- directory walks ---------------------------------------------------------------------------------


@pytest.fixture()
def linked(tmp_path) -> tuple[Path, list[Path]]:
    """A directory of symbolic links to sample binaries: one file reached twice, a link into a directory of
    links, and a directory link that loops back to the top."""
    real = tmp_path / "real"
    real.mkdir()
    files = []
    for name in ("nv_lib.so", "nv_kern_sm90.ptx", "amd_hip_two_tu"):
        shutil.copy(sample(name), real / name)
        files.append(real / name)
    links = tmp_path / "links"
    (links / "sub").mkdir(parents=True)
    os.symlink(files[0], links / "a_lib.so")
    os.symlink(files[0], links / "sub" / "same_lib.so")  # the same real file again: scanned once
    os.symlink(files[1], links / "b.ptx")
    os.symlink(files[2], links / "sub" / "c_app")
    os.symlink(links, links / "sub" / "loop")  # back to the top: skipped
    return links, files


def test_inspect_a_directory_of_links_like_its_files(linked):
    links, files = linked
    through_links = json.loads(fatkit("inspect", "--json", str(links)).stdout)
    direct = json.loads(fatkit("inspect", "--json", *map(str, files)).stdout)
    assert [Path(b["path"]).name for b in through_links["binaries"]] == ["a_lib.so", "b.ptx", "c_app"]
    real = {str(Path(b["path"]).resolve()): b for b in through_links["binaries"]}  # link → the file it names
    assert sorted(real) == sorted(b["path"] for b in direct["binaries"])
    for binary in direct["binaries"]:
        assert {k: v for k, v in real[binary["path"]].items() if k != "path"} == \
            {k: v for k, v in binary.items() if k != "path"}
    assert through_links["summary"] == direct["summary"]


def test_precompile_and_repack_a_directory_of_links(linked, tmp_path):
    links, files = linked
    cache = tmp_path / "cache"
    report = json.loads(fatkit("precompile", "--json", str(links), "--target", "gfx1100", "--cache", str(cache),
                               "-j", "1").stdout)
    direct = json.loads(fatkit("precompile", "--json", *map(str, files), "--target", "gfx1100", "--cache",
                               str(tmp_path / "cache2"), "-j", "1").stdout)
    assert report["modules_total"] == direct["modules_total"] >= 2
    assert report["modules_translated"] == direct["modules_translated"]
    assert sorted(m["ptx_blake3"] for m in report["modules"]) == sorted(m["ptx_blake3"] for m in direct["modules"])
    out = tmp_path / "out"
    repacked = json.loads(fatkit("repack", "--json", str(links), "--target", "gfx1100", "-o", str(out), "--cache",
                                 str(cache), check=None).stdout)
    by_name = {Path(b["source"]).name: b for b in repacked["binaries"]}
    assert set(by_name) == {"a_lib.so", "c_app"}  # ELF files only, the twice-linked one once
    assert by_name["a_lib.so"]["status"] in ("repacked", "partial") and by_name["c_app"]["status"] == "no-ptx"
    assert (out / "links" / "a_lib.so").is_file() and not (out / "links" / "a_lib.so").is_symlink()


def test_an_empty_walk_says_so(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    os.symlink(tmp_path / "gone", empty / "dangling")
    for command in (["inspect"], ["precompile", "--target", "gfx942", "--cache", str(tmp_path / "c")],
                    ["repack", "--target", "gfx942", "-o", str(tmp_path / "o")]):
        proc = fatkit(*command, str(empty), check=1)
        assert "no files under this directory (1 broken symbolic link)" in proc.stderr and proc.stdout == ""
    assert not (tmp_path / "c").exists() and not (tmp_path / "o").exists()  # refused before anything was made
    os.unlink(empty / "dangling")
    for command in (["inspect"], ["precompile", "--target", "gfx942", "--cache", str(tmp_path / "c")],
                    ["repack", "--target", "gfx942", "-o", str(tmp_path / "o")]):  # an empty directory
        proc = fatkit(*command, str(empty), check=1)
        assert proc.stderr.strip().endswith("no files under this directory") and proc.stdout == ""
    assert not (tmp_path / "c").exists() and not (tmp_path / "o").exists()


def test_a_walk_names_what_it_passes_over(tmp_path, monkeypatch):
    """A broken link in a tree is named and does not fail the command; a directory that cannot be listed is an
    input nothing was read from (exit 1), like an unreadable file."""
    tree = tmp_path / "tree"
    (tree / "locked").mkdir(parents=True)
    shutil.copy(sample("nv_kern_sm90.ptx"), tree / "kern.ptx")
    os.symlink(tmp_path / "gone.so.1", tree / "libgone.so")
    report = json.loads(fatkit("inspect", "--json", str(tree)).stdout)
    broken = [b for b in report["binaries"] if b["path"].endswith("libgone.so")]
    assert [b["format"] for b in broken] == ["unreadable"]
    assert broken[0]["errors"][0]["message"] == f"broken symbolic link (to {tmp_path / 'gone.so.1'})"
    proc = fatkit("precompile", str(tree), "--target", "gfx1100", "--cache", str(tmp_path / "c"), "-j", "1")
    assert "broken symbolic link" in proc.stderr

    from fatkit.extract.scan import scan_paths

    real_iterdir = Path.iterdir

    def iterdir(self):
        if self.name == "locked":
            raise PermissionError(13, "Permission denied")
        return real_iterdir(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    unreadable: list = []
    binaries = list(scan_paths([tree], unreadable=unreadable))
    assert [str(e) for e in unreadable] == [f"{tree / 'locked'}: cannot list this directory: Permission denied"]
    assert sorted(Path(b.path).name for b in binaries) == ["kern.ptx", "libgone.so", "locked"]


def test_a_flag_named_like_a_new_options_field_reaches_the_translation(monkeypatch):
    """What a change adding `Options.mma_numerics` and `--mma-numerics` needs from the CLI: nothing else."""
    import argparse
    import dataclasses

    from fatkit.cache import make_key
    from fatkit.cli import options
    from fatkit.translate import pipeline

    numerics = dataclasses.make_dataclass("Numerics", [("mma_numerics", str, dataclasses.field(default="sm90"))],
                                          bases=(pipeline.Options,), frozen=True)
    monkeypatch.setattr(pipeline, "Options", numerics)
    parsed = options.translation_options(argparse.Namespace(mma_numerics="exact", jobs=3, emit="asm", paths=[]))
    assert (parsed.mma_numerics, parsed.jobs, parsed.emit) == ("exact", 3, "asm")
    default = options.translation_options(argparse.Namespace(jobs=3, emit="asm"))
    assert default.mma_numerics == "sm90"
    target = dataclasses.replace(parsed, target="gfx942")
    assert make_key(TINY, target) != make_key(TINY, dataclasses.replace(default, target="gfx942"))
