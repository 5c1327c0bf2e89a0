"""The `fatkit` command as a user runs it: output, JSON keys, exit codes, extraction, bad input."""

from __future__ import annotations

import json
import os
import zipfile
import subprocess
import sys
from pathlib import Path

import pytest

from fatkit.formats import fatbin

SAMPLES = Path(__file__).parent / "samples"


def fatkit(*args: str, check: int | None = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "fatkit", *args], capture_output=True, text=True, timeout=120)
    if check is not None:
        assert proc.returncode == check, proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr + proc.stdout
    return proc


def test_inspect_json_carries_the_documented_keys():
    out = json.loads(fatkit("inspect", "--json", str(SAMPLES / "nv_rdc"), str(SAMPLES / "amd_hip_two_tu")).stdout)
    assert [Path(b["path"]).name for b in out["binaries"]] == ["nv_rdc", "amd_hip_two_tu"]
    for b in out["binaries"]:
        assert {"path", "containers", "verdict", "errors"} <= b.keys()
        for c in b["containers"]:
            assert {"found_by", "section", "entries"} <= c.keys()
            for e in c["entries"]:
                assert {"kind", "arch", "compression"} <= e.keys()
                assert e["kind"] in ("ptx", "elf", "nvvm", "hsaco", "host")
    assert out["binaries"][0]["verdict"]["amd"] == "yes"
    assert out["binaries"][1]["verdict"]["amd"] == "native"
    assert out["summary"]["binaries"] == 2


def test_inspect_table_names_sections_and_verdict():
    text = fatkit("inspect", str(SAMPLES / "nv_rdc")).stdout
    assert "__nv_relfatbin" in text and ".nv_fatbin" in text
    assert "AMD: yes" in text
    assert "compute_90" in text


def test_inspect_kernels_lists_resources():
    out = json.loads(fatkit("inspect", "--json", "--kernels", str(SAMPLES / "nv_mode_none")).stdout)
    cubin_kernels = [k for c in out["binaries"][0]["containers"] for e in c["entries"] if e["kind"] == "elf"
                     for k in e["kernels"]]
    assert cubin_kernels and all("registers" in k and "param_bytes" in k for k in cubin_kernels)
    text = fatkit("inspect", "--kernels", str(SAMPLES / "nv_mode_none")).stdout
    assert cubin_kernels[0]["name"] in text


def test_require_ptx_gate(tmp_path):
    cubin_only = tmp_path / "cubin_only.fatbin"
    cubin_only.write_bytes(fatbin.build_container([
        fatbin.EntrySpec(kind=fatbin.KIND_ELF, sm=90, payload=(SAMPLES / "nv_kern_sm90.cubin").read_bytes())]))
    fatkit("inspect", "--require-ptx", str(SAMPLES / "nv_mode_default"))
    proc = fatkit("inspect", "--require-ptx", str(cubin_only), check=3)
    assert "AMD: no" in proc.stdout


def test_missing_file_is_a_clean_error(tmp_path):
    proc = fatkit("inspect", str(tmp_path / "nope.so"), check=1)
    assert "error:" in proc.stderr and "nope.so" in proc.stderr


def test_hostile_file_never_tracebacks(tmp_path):
    data = bytearray((SAMPLES / "nv_mode_default").read_bytes())
    for i in range(0x40, len(data), 97):  # corrupt bytes all over, headers included
        data[i] ^= 0xA5
    path = tmp_path / "corrupt"
    path.write_bytes(bytes(data))
    proc = fatkit("inspect", "--json", "--kernels", str(path))
    json.loads(proc.stdout)


def test_extract_writes_safe_names_and_manifest(tmp_path):
    out = tmp_path / "out"
    fatkit("extract", str(SAMPLES / "nv_mode_default"), str(SAMPLES / "amd_hip_two_tu"), "-o", str(out))
    manifest = json.loads((out / "manifest.json").read_text())
    written = {f["file"] for f in manifest["files"]}
    assert written == {p.name for p in out.iterdir()} - {"manifest.json"}
    assert {f["kind"] for f in manifest["files"]} >= {"ptx", "elf", "hsaco"}
    for f in manifest["files"]:
        assert "/" not in f["file"] and ":" not in f["file"] and not f["file"].startswith(".")
        assert (out / f["file"]).stat().st_size == f["size"]


def test_extract_filters_by_kind_and_arch(tmp_path):
    out = tmp_path / "out"
    manifest = json.loads(fatkit("extract", str(SAMPLES / "nv_mode_default"), "-o", str(out), "--ptx",
                                 "--arch", "compute_90", "--json").stdout)
    assert manifest["files"] and all(f["kind"] == "ptx" and f["arch"] == "compute_90" for f in manifest["files"])
    text = (out / manifest["files"][0]["file"]).read_text()
    assert ".version" in text and not text.endswith("\0")


@pytest.mark.parametrize("args", [["inspect"], ["extract", str(SAMPLES / "nv_rdc")], ["bogus"]])
def test_usage_errors_exit_2(args):
    fatkit(*args, check=2)


def test_extract_never_writes_outside_the_output_directory(tmp_path):
    """Hostile member names (`../`, absolute paths) and identifiers cannot steer where files go."""
    wheel = tmp_path / "evil-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.write(SAMPLES / "nv_fb_ident.fatbin", "../../../escaped/../x.fatbin")
        z.write(SAMPLES / "nv_lib.so", "/abs/path/lib.so")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    out = tmp_path / "out"
    fatkit("extract", str(wheel), "-o", str(out))
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p not in before]
    assert written and all(p.parent == out for p in written)
    assert {p: p.read_bytes() for p in before} == before  # inputs untouched


def test_hashes_find_identical_payloads_across_binaries():
    """nv_stripped and nv_noshdr hold the same fatbins: with --hashes the summary counts the copies."""
    out = json.loads(fatkit("inspect", "--json", "--hashes", str(SAMPLES / "nv_stripped"),
                            str(SAMPLES / "nv_noshdr")).stdout)
    first, second = ([e["hash"] for c in b["containers"] for e in c["entries"]] for b in out["binaries"])
    assert first == second and len(first[0]) == 64
    assert out["summary"]["duplicate_entries"] >= len(first)
    summary = json.loads(fatkit("inspect", "--json", str(SAMPLES / "nv_noshdr")).stdout)["summary"]
    assert "duplicate_entries" not in summary


def test_inspect_json_imports_only_the_readers_of_what_the_file_holds():
    """The start-up path of `inspect --json` (BENCHMARKS.md, "Start-up on small files"): a host ELF with
    NVIDIA fatbins loads no writer (construct), no translator, no table renderer and no reader of formats the
    file does not hold."""
    code = ("import sys\nfrom fatkit.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print(' '.join(sorted(sys.modules)), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code, "inspect", "--json", str(SAMPLES / "nv_lib.so")],
                          capture_output=True, text=True, timeout=120)
    assert json.loads(proc.stdout)["binaries"][0]["containers"]
    loaded = set(proc.stderr.split())
    assert "fatkit.formats.fatbin" in loaded  # the scan did run
    unwanted = {"construct", "llvmlite", "rich", "typer", "zstandard", "msgpack", "blake3", "fatkit.translate",
                "fatkit.translate.targets.ids", "fatkit.formats.hsaco", "fatkit.formats.fatkit_amd",
                "fatkit.formats.ar", "fatkit.formats.offload_bundle", "fatkit.cache"}
    assert loaded & unwanted == set()


def test_named_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    """A FIFO named on the command line: opening it would block for a writer; it is refused, exit 1."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "fatkit", "inspect", str(fifo)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert f"error: nothing read from {fifo}: not a regular file" in proc.stderr.splitlines()


@pytest.mark.parametrize("cut", [4, 16, 100, 1000])
def test_truncated_input_exits_1_with_one_line_naming_file_and_offset(tmp_path, cut):
    path = tmp_path / f"cut{cut}.fatbin"
    path.write_bytes((SAMPLES / "nv_kern.fatbin").read_bytes()[:cut])
    for command in (["inspect"], ["inspect", "--json"], ["extract", "-o", str(tmp_path / "out")], ["lint"]):
        proc = fatkit(*command, str(path), check=1)
        errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert errors == [f"error: nothing read from {path}: offset 0x0: "
                          + errors[0].split(": offset 0x0: ", 1)[-1]], proc.stderr
        assert "runs past the end" in errors[0]
        if "--json" in command:
            assert json.loads(proc.stdout)["binaries"][0]["errors"]


def test_a_file_read_in_part_and_a_good_file_still_exit_0(tmp_path):
    """Exit 1 is for inputs nothing was read from: a corrupt file whose containers were found is a report."""
    data = bytearray((SAMPLES / "nv_lib.so").read_bytes())
    data[0x28:0x30] = (len(data) + 0x1000).to_bytes(8, "little")  # e_shoff past the end: no section table
    path = tmp_path / "noshdr.so"
    path.write_bytes(bytes(data))
    out = json.loads(fatkit("inspect", "--json", str(path), str(SAMPLES / "nv_kern.fatbin")).stdout)
    assert out["binaries"][0]["errors"] and out["binaries"][0]["containers"]


def test_zip_without_device_code_is_reported(tmp_path):
    """A zip whose members cannot hold GPU code used to print nothing at all."""
    path = tmp_path / "docs.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("README.txt", "no GPU code here\n")
    text = fatkit("inspect", str(path)).stdout
    assert text.startswith(f"{path}  zip") and "AMD: none" in text
    out = json.loads(fatkit("inspect", "--json", str(path)).stdout)
    assert [(b["path"], b["format"]) for b in out["binaries"]] == [(str(path), "zip")]


def test_truncated_section_table_is_reported_once(tmp_path):
    path = tmp_path / "cut.so"
    path.write_bytes((SAMPLES / "nv_lib.so").read_bytes()[:1000])
    out = json.loads(fatkit("inspect", "--json", str(path), check=1).stdout)
    messages = [(e["offset"], e["message"]) for e in out["binaries"][0]["errors"]]
    assert messages and len(messages) == len(set(messages))


def test_directory_table_shows_why_a_binary_was_not_read(tmp_path):
    """More than DETAIL_LIMIT binaries are one table; the errors of each used to be left out of it."""
    kern = (SAMPLES / "nv_kern.fatbin").read_bytes()
    for i in range(6):
        (tmp_path / f"k{i}.fatbin").write_bytes(kern)
    (tmp_path / "cut.fatbin").write_bytes(kern[:100])
    proc = fatkit("inspect", str(tmp_path), check=1)
    assert "! cut.fatbin: offset 0x0: fatbin container" in proc.stdout
    assert f"error: nothing read from {tmp_path / 'cut.fatbin'}: offset 0x0" in proc.stderr


def test_translate_names_an_unreadable_input_once(tmp_path):
    path = tmp_path / "cut.fatbin"
    path.write_bytes((SAMPLES / "nv_kern.fatbin").read_bytes()[:100])
    proc = fatkit("translate", "--target", "gfx942", "-o", str(tmp_path / "out"), str(path), check=1)
    assert proc.stderr.count(str(path)) == 1, proc.stderr
    assert f"! {path}: offset 0x0: fatbin container" in proc.stderr


@pytest.mark.parametrize("command", [[], ["inspect"], ["extract"], ["translate"], ["lint"], ["precompile"],
                                     ["repack"], ["cache"]])
def test_help_documents_the_exit_codes(command):
    text = "".join(fatkit(*command, "--help").stdout.split())  # argparse wraps lines, inside words too
    assert "exitcodes:0ok;1aninputortranslationfailure" in text and "2usage;3a--require-ptx/--fail-ongate" in text


def test_repack_refuses_a_missing_path_before_writing(tmp_path):
    out = tmp_path / "out"
    proc = fatkit("repack", "--target", "gfx942", "-o", str(out), str(SAMPLES / "nv_lib.so"),
                  str(tmp_path / "nope.so"), check=1)
    assert proc.stderr.splitlines() == [f"error: no such file or directory: {tmp_path / 'nope.so'}"]
    assert not out.exists() and not proc.stdout


@pytest.mark.parametrize("cut", [4, 100, 1000])
def test_cache_lookup_of_a_truncated_fatbin_is_an_error_not_a_miss(tmp_path, cut):
    """It said `miss: no PTX in the file`, as if the fatbin were whole and held only cubins."""
    path = tmp_path / "cut.fatbin"
    path.write_bytes((SAMPLES / "nv_kern.fatbin").read_bytes()[:cut])
    proc = fatkit("cache", "lookup", "--cache", str(tmp_path / "cache"), "--target", "gfx942", "--ptx", str(path),
                  check=1)
    assert proc.stderr.startswith(f"error: {path}: offset 0x0: fatbin container") and "miss" not in proc.stdout


def test_cache_lookup_names_the_file_and_never_waits_on_a_fifo(tmp_path):
    empty = tmp_path / "empty.ptx"
    empty.write_bytes(b"")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path, why in ((empty, "the image holds neither a fatbin nor PTX text"), (fifo, "not a regular file")):
        proc = subprocess.run([sys.executable, "-m", "fatkit", "cache", "lookup", "--cache", str(tmp_path / "c"),
                               "--target", "gfx942", "--ptx", str(path)], capture_output=True, text=True, timeout=60)
        assert (proc.returncode, proc.stderr) == (1, f"error: {path}: {why}\n")


@pytest.mark.parametrize("args", [(), ("--json",), ("--kernels",)])
def test_a_reader_that_closed_the_pipe_gets_the_shells_status_not_an_error(args):
    """`fatkit inspect … | head`: the reader's end is closed before fatkit writes, so its first write fails;
    that is 141 (128 + SIGPIPE, what a shell reports) with nothing on stderr, not 1 (an input failure)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "fatkit", "inspect", *args, str(SAMPLES / "nv_lib.so")],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (141, "")
