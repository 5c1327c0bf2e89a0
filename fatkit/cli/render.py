"""Human output: rich tables over the serialised report (the same dicts `--json` prints)."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console

from fatkit.cli.output import console, table

VERDICT_STYLE = {"yes": "bold green", "partial": "bold yellow", "no": "bold red", "native": "bold cyan",
                 "none": "dim"}
FORMAT_NAMES = {"elf-shared": "ELF shared object", "elf-exec": "ELF executable", "elf-pie": "ELF PIE executable",
                "elf-rel": "ELF relocatable object",
                "pe-dll": "PE DLL (Windows)", "pe-exe": "PE executable (Windows)", "pe": "PE image (unreadable)",
                "cubin": "cubin", "hsaco": "AMD code object", "fatbin": "fatbin", "offload-bundle": "offload bundle",
                "ccob": "compressed offload bundle", "ptx": "PTX", "other": "data"}
DETAIL_LIMIT = 5  # up to this many binaries are shown container by container


def _size(n: int) -> str:
    scaled = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if scaled < 1000 or unit == "GB":
            return f"{scaled:.0f} {unit}" if unit == "B" else f"{scaled:.1f} {unit}"
        scaled /= 1000
    return str(n)


def _verdict(v: dict[str, Any]) -> str:
    style = VERDICT_STYLE.get(v["amd"], "")
    return f"[{style}]{v['amd']}[/]"


def _found_by(c: dict[str, Any]) -> str:
    parts = []
    for how in c["found_by"]:
        if how == "wrapper" and c.get("wrapper"):
            parts.append(f"wrapper v{c['wrapper']['version']}")
        else:
            parts.append(how)
    return ", ".join(parts)


def render_inspect(binaries: list[dict[str, Any]], summary: dict[str, Any], *, kernels: bool) -> None:
    out = console()
    if len(binaries) <= DETAIL_LIMIT:
        for b in binaries:
            _render_binary(out, b, kernels=kernels)
    else:
        _render_tree(out, binaries)
    if len(binaries) > 1:
        out.print(f"[bold]{summary['binaries']} binaries[/], {summary['containers']} containers, "
                  f"{summary['entries']} entries — AMD: {_verdict(summary)} "
                  f"({', '.join(f'{k} {v}' for k, v in summary['verdicts'].items())})")
    if summary.get("duplicate_entries"):
        out.print(f"{summary['duplicate_entries']} entries are byte-identical to another one (same BLAKE3)")


def _render_binary(out: Console, b: dict[str, Any], *, kernels: bool) -> None:
    v = b["verdict"]
    kind = FORMAT_NAMES.get(b["format"], b["format"])
    out.print(f"[bold]{short_path(b['path'])}[/]  [dim]{kind}, {_size(b['size'])}[/]", highlight=False)
    out.print(f"  AMD: {_verdict(v)} — {v['reason']}", highlight=False)
    if v["kernels_without_ptx"]:
        names = ", ".join(v["kernels_without_ptx"][:5])
        more = len(v["kernels_without_ptx"]) - 5
        out.print(f"  without PTX: {names}" + (f" … and {more} more" if more > 0 else ""), highlight=False)
    for lib in v["libraries"]:
        out.print(f"  needs {lib['soname']} ({lib['library']}) → on AMD: {lib['amd']}", highlight=False)
    for note in b["notes"]:
        out.print(f"  [dim]note: {note}[/]", highlight=False)
    if b["containers"]:
        rows = table(("#", "offset", "section", "found by", "format", "kind", "arch", "compression", "size"),
                     right=("#", "offset", "size"))
        for c in b["containers"]:
            where = [str(c["index"]), f"0x{c['offset']:x}", c["section"] or "-", _found_by(c), c["format"]]
            shown: list[dict[str, Any] | None] = [e for e in c["entries"] if e["kind"] != "host"] or [None]
            for e in shown:
                if e is None:
                    rows.add_row(*where, "[dim](empty)[/]", "", "", "")
                else:
                    rows.add_row(*where, e["kind"], e["arch"], e["compression"] or "-", _size(e["size"] or 0))
                where = [""] * 5
        out.print(rows)
        _render_repacked(out, b)
    if kernels:
        _render_kernels(out, b)
    for err in b["errors"]:
        place = f"offset 0x{err['offset']:x}: " if err["offset"] is not None else ""
        out.print(f"  [yellow]! {place}{err['message']}[/]", highlight=False)
    out.print()


def _render_repacked(out: Console, b: dict[str, Any]) -> None:
    """The code objects `fatkit repack` added (`.fatkit_amd`): which PTX each was translated from, what failed."""
    for c in b["containers"]:
        if "manifest" not in c:
            continue
        for e in c["entries"]:
            origin = e.get("translated_from")
            if origin:
                failed = f", {origin['kernels_failed']} not translated" if origin["kernels_failed"] else ""
                out.print(f"  {c['index']}.{e['index']} {e['arch']} ← PTX {', '.join(origin['sources'])} "
                          f"({origin['arch']}, BLAKE3 {origin['ptx_blake3'][:16]}…): {origin['kernels']} kernels"
                          f"{failed}", highlight=False)
        for m in c["manifest"]["modules"]:
            place = f"PTX {', '.join(m['sources'])} for {m['target']}"
            if m["bundle_id"] is None and m["status"] != "no-kernels":
                out.print(f"  [yellow]not translated[/]: {place}: {m['reason']}", highlight=False)
            for k in m["kernels"]:
                if k["status"] != "ok":  # the reason names the kernel and its PTX line
                    out.print(f"  [yellow]not translated[/] ({place}): {k['reason'] or k['name']}", highlight=False)


def _render_kernels(out: Console, b: dict[str, Any]) -> None:
    rows = table(("c.e", "kind", "arch", "kernel", "param bytes", "regs", "shared"),
                 right=("param bytes", "regs", "shared"))
    for c in b["containers"]:
        for e in c["entries"]:
            for k in e.get("kernels", []):
                rows.add_row(f"{c['index']}.{e['index']}", e["kind"], e["arch"], k["name"],
                             _opt(k.get("param_bytes")), _opt(k.get("registers")), _opt(k.get("shared_bytes")))
    if rows.row_count:
        out.print(rows)


def _opt(value: Any) -> str:
    return "-" if value is None else str(value)


# "kernel: line N: " before what an unsupported kernel stopped at (lower/core.py's Unsupported)
_PLACE = re.compile(r"^[^:\s]+: line \d+: ")


def reason_without_place(reason: str) -> str:
    """A kernel's reason without the kernel and PTX line: what to group kernels by."""
    return _PLACE.sub("", reason, count=1)


def grouped_reasons(reasons: list[str]) -> list[tuple[str, int]]:
    """Why kernels were not translated, most frequent first, grouped without the kernel and PTX line."""
    return Counter(reason_without_place(r) for r in reasons).most_common()


def short_path(path: str) -> str:
    """Archive and wheel members without the archive's directory: `dir/wheel.whl!pkg/lib.so` →
    `wheel.whl!pkg/lib.so`."""
    outer, bang, member = path.partition("!")
    return f"{outer.rsplit('/', 1)[-1]}!{member}" if bang else path


def _render_tree(out: Console, binaries: list[dict[str, Any]]) -> None:
    outers = {b["path"].partition("!")[0] for b in binaries}
    one_archive = len(outers) == 1 and all("!" in b["path"] for b in binaries)
    if one_archive:
        out.print(f"[bold]{outers.pop()}[/]", highlight=False)
        base = ""
    else:
        base = os.path.commonpath([os.path.dirname(o) or "." for o in outers])
        if base not in ("", "."):
            out.print(f"[bold]{base}/[/]", highlight=False)
            base += "/"
    rows = table(("binary", "containers", "PTX", "cubin", "AMD code", "AMD"), fold=True)
    empty = 0
    for b in binaries:
        v = b["verdict"]
        if v["amd"] == "none" and not b["errors"]:
            empty += 1
            continue
        name = b["path"].partition("!")[2] if one_archive else short_path(b["path"].removeprefix(base))
        rows.add_row(name, str(len(b["containers"])), " ".join(v["ptx_archs"]) or "-",
                     " ".join(v["cubin_archs"]) or "-", " ".join(v["amd_targets"]) or "-", _verdict(v))
    out.print(rows)
    if empty:
        out.print(f"[dim]… and {empty} {'binary' if empty == 1 else 'binaries'} without NVIDIA or AMD device code "
                  "(listed by --json)[/]")
    for b in binaries:  # what the table cannot show: why a binary was read only in part, or not at all
        for err in b["errors"]:
            place = f"offset 0x{err['offset']:x}: " if err["offset"] is not None else ""
            out.print(f"[yellow]! {short_path(b['path'].removeprefix(base))}: {place}{err['message']}[/]",
                      highlight=False)


def render_extract(manifest: dict[str, Any], output: Path) -> None:
    out = console()
    kinds = Counter(f["kind"] for f in manifest["files"])
    count = len(manifest["files"])
    out.print(f"wrote {count} file{'' if count == 1 else 's'} to {output} "
              f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items())) or 'nothing matched'}); "
              f"manifest: {output / 'manifest.json'}", highlight=False)
    for err in manifest["errors"]:
        out.print(f"[yellow]! {err['path']}: {err['message']}[/]", highlight=False)
