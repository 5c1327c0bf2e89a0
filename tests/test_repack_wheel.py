"""Wheel repack: a wheel built here (a pure-Python package + nv_lib.so), installed by pip after the repack; the
RECORD checked line by line; reproducibility; ZIP64 records; and one real wheel from the corpus."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from fatkit.formats.elf import ElfView
from fatkit.repack import wheel as wheel_module
from fatkit.formats.fatkit_amd import SECTION_NAME, read_payload
from fatkit.repack.wheel import read_wheel, repack_wheel, rewrite_record
from tests.corpus import CORPUS_DIR
from tests.helpers import sample

DATE = (2024, 5, 6, 7, 8, 10)
WHEEL_NAME = "demo_pkg-0.1-py3-none-linux_x86_64.whl"
RECORD = "demo_pkg-0.1.dist-info/RECORD"


@dataclass(frozen=True)
class Item:
    """One member of a test wheel."""

    name: str
    data: bytes
    method: int = zipfile.ZIP_DEFLATED
    mode: int = 0o644


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def build_wheel(path: Path, items: list[Item], *, record: str | None = None, record_name: str = RECORD) -> Path:
    """A wheel of `items` (in order) with a correct RECORD last, unless `record` gives RECORD's text."""
    if record is None:
        record = "".join(record_line(i.name, i.data) for i in items) + f"{record_name},,\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for item in [*items, Item(record_name, record.encode())]:
            info = zipfile.ZipInfo(item.name, DATE)
            info.compress_type = item.method
            info.external_attr = (0o100000 | item.mode) << 16
            archive.writestr(info, item.data)
    return path


def demo_items(library: bytes) -> list[Item]:
    metadata = b"Metadata-Version: 2.1\nName: demo-pkg\nVersion: 0.1\n"
    wheel = b"Wheel-Version: 1.0\nGenerator: fatkit-tests\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n"
    return [
        Item("demo_pkg/__init__.py", b"from pathlib import Path\n\nVALUE = (Path(__file__).parent / 'data.txt')"
                                     b".read_text().strip()\n"),
        Item("demo_pkg/data.txt", b"forty-two\n", zipfile.ZIP_STORED),
        Item("demo_pkg/libkern.so", library, mode=0o755),
        Item("demo_pkg/run.sh", b"#!/bin/sh\necho demo\n", zipfile.ZIP_STORED, 0o755),
        Item("demo_pkg-0.1.dist-info/METADATA", metadata),
        Item("demo_pkg-0.1.dist-info/WHEEL", wheel),
    ]


@pytest.fixture(scope="module")
def demo_wheel(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("wheel")
    return build_wheel(directory / "in" / WHEEL_NAME, demo_items(sample("nv_lib.so").read_bytes()))


@pytest.fixture(scope="module")
def repacked(demo_wheel, tmp_path_factory):
    out = tmp_path_factory.mktemp("repacked")
    return repack_wheel(demo_wheel, out, ["gfx942"])


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def record_problems(path: Path) -> list[str]:
    """Everything wrong between a wheel's RECORD and its members (empty when every line and hash matches)."""
    with zipfile.ZipFile(path) as archive:
        names = [i.filename for i in archive.infolist() if not i.filename.endswith("/")]
        record_name = next(n for n in names if n.endswith(".dist-info/RECORD"))
        rows = list(csv.reader(io.StringIO(archive.read(record_name).decode())))
        listed = {row[0]: row for row in rows if row}
        problems = [f"not in RECORD: {n}" for n in names if n not in listed]
        problems += [f"in RECORD, not in the wheel: {n}" for n in listed if n not in names]
        for name, row in listed.items():
            if name == record_name or name not in names:
                continue
            data = archive.read(name)
            if row[1:] != record_line(name, data).strip().split(",")[1:]:
                problems.append(f"hash or size of {name} differ: {row}")
    return problems


# --- the built wheel -----------------------------------------------------------------------------------


def test_repacked_wheel_installs_with_pip_and_imports(repacked, tmp_path):
    assert repacked.status == "repacked" and repacked.patched == ["demo_pkg/libkern.so"]
    target = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-cache-dir",
                          "--disable-pip-version-check", "--target", str(target), str(repacked.destination)],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    imported = subprocess.run([sys.executable, "-c", "import demo_pkg; print(demo_pkg.VALUE)"], cwd=target,
                              capture_output=True, text=True, timeout=60)
    assert imported.stdout.strip() == "forty-two", imported.stderr
    installed = target / "demo_pkg" / "libkern.so"
    assert os.stat(installed).st_mode & 0o111  # pip kept the executable bit from the external attributes
    view = ElfView(installed.read_bytes())
    section = next(s for s in view.sections if s.name == SECTION_NAME)
    manifest = read_payload(installed.read_bytes()[section.offset:section.offset + section.size])
    assert manifest.targets == ("gfx942",) and manifest.code_objects
    assert all(k.status == "ok" for m in manifest.modules for k in m.kernels)


def test_record_matches_every_member(demo_wheel, repacked):
    assert record_problems(demo_wheel) == []  # the input was right: so is the fixture
    assert record_problems(repacked.destination) == []
    member = repacked.members[0]
    with zipfile.ZipFile(repacked.destination) as archive:
        data = archive.read("demo_pkg/libkern.so")
    assert (member.size, member.sha256) == (len(data), hashlib.sha256(data).hexdigest())


def test_other_members_keep_bytes_order_method_time_and_attributes(demo_wheel, repacked):
    with zipfile.ZipFile(demo_wheel) as before, zipfile.ZipFile(repacked.destination) as after:
        old, new = before.infolist(), after.infolist()
        assert [i.filename for i in old] == [i.filename for i in new]
        for a, b in zip(old, new):
            assert (a.compress_type, a.external_attr, a.create_system, a.date_time, a.flag_bits) == \
                   (b.compress_type, b.external_attr, b.create_system, b.date_time, b.flag_bits), a.filename
            if a.filename not in ("demo_pkg/libkern.so", RECORD):
                assert before.read(a) == after.read(b) and (a.CRC, a.compress_size) == (b.CRC, b.compress_size)
        library_before, library_after = before.read("demo_pkg/libkern.so"), after.read("demo_pkg/libkern.so")
    # the patched library is the original plus the section: every original byte of code and data kept
    assert len(library_after) > len(library_before)
    with zipfile.ZipFile(demo_wheel) as before, zipfile.ZipFile(repacked.destination) as after:
        old_lines, new_lines = (z.read(RECORD).decode().splitlines() for z in (before, after))
    changed = [old.split(",")[0] for old, new in zip(old_lines, new_lines) if old != new]
    assert len(new_lines) == len(old_lines) and changed == ["demo_pkg/libkern.so"]


def test_repack_is_reproducible(demo_wheel, repacked, tmp_path):
    again = repack_wheel(demo_wheel, tmp_path, ["gfx942"])
    assert again.destination.read_bytes() == repacked.destination.read_bytes()
    assert again.to_json()["members"][0]["sha256"] == repacked.to_json()["members"][0]["sha256"]


def test_json_names_members_not_temporary_files(repacked):
    report = json.loads(json.dumps(repacked.to_json()))
    assert report["format"] == "wheel" and report["status"] == "repacked" and report["copied"] == 5
    member = report["members"][0]
    assert member["member"] == "demo_pkg/libkern.so" and member["patched"] and member["status"] == "repacked"
    assert member["source"].endswith(f"{WHEEL_NAME}!demo_pkg/libkern.so")
    assert member["destination"] == f"{repacked.destination}!demo_pkg/libkern.so"
    assert "fatkit-wheel-" not in json.dumps(report)
    assert report["code_objects"] == member["code_objects"] >= 1 and report["kernels_failed"] == 0


def test_a_wheel_without_ptx_is_copied_byte_for_byte(tmp_path):
    source = build_wheel(tmp_path / "in" / "plain-1.0-py3-none-any.whl",
                         [Item("plain/__init__.py", b"X = 1\n"), Item("plain/k.hsaco",
                                                                        sample("amd_gfx942_v6.hsaco").read_bytes())],
                         record_name="plain-1.0.dist-info/RECORD")
    result = repack_wheel(source, tmp_path / "out", ["gfx942"])
    assert result.status == "no-ptx" and result.members == [] and result.patched == []
    assert result.destination.read_bytes() == source.read_bytes()


def test_a_member_that_cannot_be_patched_is_kept_and_named(tmp_path):
    """nv_noshdr carries PTX but has no section header table: its repack is an error, the wheel is partial."""
    items = demo_items(sample("nv_lib.so").read_bytes()) + [
        Item("demo_pkg/noshdr", sample("nv_noshdr").read_bytes(), mode=0o755)]
    source = build_wheel(tmp_path / "in" / WHEEL_NAME, items)
    result = repack_wheel(source, tmp_path / "out", ["gfx942"])
    assert result.status == "partial" and result.patched == ["demo_pkg/libkern.so"]
    kept = next(m for m in result.members if m.name == "demo_pkg/noshdr")
    assert kept.result.status == "error" and "section header" in kept.result.reason
    assert "demo_pkg/noshdr" in result.reason and "fatkit-wheel-" not in result.reason
    with zipfile.ZipFile(source) as before, zipfile.ZipFile(result.destination) as after:
        assert after.read("demo_pkg/noshdr") == before.read("demo_pkg/noshdr")
    assert record_problems(result.destination) == []

    alone = build_wheel(tmp_path / "in2" / WHEEL_NAME, [items[0], items[-1]])
    refused = repack_wheel(alone, tmp_path / "out2", ["gfx942"])
    assert refused.status == "error" and refused.destination is None and not any((tmp_path / "out2").iterdir())


def test_cli_repacks_a_wheel(demo_wheel, repacked, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "fatkit", "repack", str(demo_wheel), "--target", "gfx942",
                           "-o", str(tmp_path), "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["summary"]["repacked"] == 1
    assert report["binaries"][0]["format"] == "wheel" and report["binaries"][0]["patched"] == ["demo_pkg/libkern.so"]
    assert (tmp_path / WHEEL_NAME).read_bytes() == repacked.destination.read_bytes()


# --- pieces ----------------------------------------------------------------------------------------------


def test_record_rewrite_keeps_other_lines_byte_for_byte():
    text = (b'a/x.py,sha256=AAA,3\r\n"a/odd, name.so",sha256=BBB,10\r\n'
            b'a/lib.so,sha256=CCC,5\r\na-1.dist-info/RECORD,,\r\n')
    out, appended = rewrite_record(text, {"a/odd, name.so": ("sha256=NEW", 11), "a/new.so": ("sha256=N2", 7)})
    assert out == (b'a/x.py,sha256=AAA,3\r\n"a/odd, name.so",sha256=NEW,11\r\n'
                   b'a/lib.so,sha256=CCC,5\r\na-1.dist-info/RECORD,,\r\na/new.so,sha256=N2,7\r\n')
    assert appended == ["a/new.so"]
    unterminated, _ = rewrite_record(b"a/x.py,sha256=A,1", {"b.so": ("sha256=B", 2)})
    assert unterminated == b"a/x.py,sha256=A,1\nb.so,sha256=B,2\n"


def test_zip64_records_are_written_where_sizes_pass_the_limit(demo_wheel, tmp_path, monkeypatch):
    """Lower the ZIP64 threshold so the ZIP64 local, central and end records are written for a small wheel."""
    monkeypatch.setattr(wheel_module, "ZIP64_LIMIT", 100)
    result = repack_wheel(demo_wheel, tmp_path, ["gfx942"])
    data = result.destination.read_bytes()
    assert wheel_module.ZIP64_END_SIGNATURE in data and wheel_module.ZIP64_LOCATOR_SIGNATURE in data
    with zipfile.ZipFile(result.destination) as after, zipfile.ZipFile(demo_wheel) as before:
        assert after.testzip() is None
        assert [after.read(i.filename) for i in before.infolist() if i.filename != RECORD and "libkern" not in
                i.filename] == [before.read(i) for i in before.infolist() if i.filename != RECORD and "libkern" not in
                                i.filename]
    assert record_problems(result.destination) == []
    assert [m.name for m in read_wheel(data).members] == [i.filename for i in zipfile.ZipFile(demo_wheel).infolist()]


# --- a real wheel --------------------------------------------------------------------------------------


@pytest.mark.corpus
def test_corpus_wheel_jax_cuda12_plugin(tmp_path):
    """The whole jax_cuda12_plugin 0.10.2 wheel (fetch.py keeps the wheels it downloads, in wheels/): its three
    libraries with PTX (_linalg, _prng, _solver) are patched, the other 14 members copied."""
    found = sorted((CORPUS_DIR / "wheels").glob("jax_cuda12_plugin-0.10.2-*.whl"))
    if not found:
        pytest.skip("jax_cuda12_plugin wheel not fetched (run ../shared/corpus/fetch.py)")
    source = found[0]
    before = sha256(source)
    result = repack_wheel(source, tmp_path / "out", ["gfx942"], cache=tmp_path / "cache", jobs=2)
    assert sha256(source) == before
    assert result.status in ("repacked", "partial"), result.to_json()
    assert result.patched == [f"jax_cuda12_plugin/{n}.so" for n in ("_linalg", "_prng", "_solver")]
    assert result.kernels_ok > 0 and result.code_objects >= 3
    assert record_problems(result.destination) == []
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(result.destination) as new:
        assert [i.filename for i in old.infolist()] == [i.filename for i in new.infolist()]
        for a, b in zip(old.infolist(), new.infolist()):
            assert (a.external_attr, a.date_time, a.compress_type) == (b.external_attr, b.date_time, b.compress_type)
            if a.filename not in result.patched and not a.filename.endswith("RECORD"):
                assert (a.CRC, a.compress_size, a.file_size) == (b.CRC, b.compress_size, b.file_size)
    again = repack_wheel(source, tmp_path / "again", ["gfx942"], cache=tmp_path / "cache")  # served by the cache
    assert again.cached == len(again.modules) > 0
    assert again.destination.read_bytes() == result.destination.read_bytes()
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-cache-dir",
                          "--disable-pip-version-check", "--target", str(tmp_path / "site"), str(result.destination)],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr


def test_a_bzip2_library_is_compressed_again_with_bzip2(tmp_path):
    items = [Item(i.name, i.data, zipfile.ZIP_BZIP2 if i.name.endswith(".so") else i.method, i.mode)
             for i in demo_items(sample("nv_lib.so").read_bytes())]
    result = repack_wheel(build_wheel(tmp_path / "in" / WHEEL_NAME, items), tmp_path / "out", ["gfx942"])
    assert result.status == "repacked"
    with zipfile.ZipFile(result.destination) as archive:
        assert archive.getinfo("demo_pkg/libkern.so").compress_type == zipfile.ZIP_BZIP2
        assert archive.testzip() is None
    assert record_problems(result.destination) == []
