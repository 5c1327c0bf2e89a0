"""`fatkit cache lookup|ls|verify|gc`: what a shim would load, what the cache holds, its health, its size."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from fatkit.cache import Cache, CacheEntry, default_cache_dir, find, make_key, ptx_texts, zluda
from fatkit.cache.store import DB_NAME, CacheError
from fatkit.cli import EXIT_INPUT, app
from fatkit.cli.render import _size, console
from fatkit.errors import InputError

cache_app = typer.Typer(help="Query and maintain the translation cache (docs/cache.md).", no_args_is_help=True)
app.add_typer(cache_app, name="cache")

CACHE_OPTION = typer.Option(None, "--cache", metavar="DIR",
                            help="Cache directory (default $FATKIT_CACHE_DIR, else $XDG_CACHE_HOME/fatkit, "
                                 "else ~/.cache/fatkit).")
JSON_OPTION = typer.Option(False, "--json", help="Print JSON.")
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)B?", re.IGNORECASE)


def _open(cache_dir: Optional[Path], *, write: bool = False) -> Cache:
    directory = cache_dir or default_cache_dir()
    if not write and not (directory / DB_NAME).exists():
        raise CacheError(f"no cache here ({DB_NAME} missing)", path=str(directory))
    return Cache(directory, read_only=not write)


def _entry_json(entry: CacheEntry) -> dict[str, Any]:
    return {"ptx_blake3": entry.key.ptx_blake3, "target": entry.key.target, "abi": entry.key.abi,
            "options": entry.key.options, "size": entry.size, "has_code_object": entry.code_object is not None,
            "last_access_ms": entry.last_access, **entry.manifest}


def _report_problems(cache: Cache) -> None:
    err = Console(stderr=True)
    for problem in cache.problems:
        err.print(f"[yellow]! ignored a corrupt cache entry {problem.key}: {problem.reason}[/]", highlight=False)


@cache_app.command()
def lookup(
    ptx: Path = typer.Option(..., "--ptx", metavar="FILE", help="What cuModuleLoadData gets: PTX text or a fatbin."),
    target: str = typer.Option(..., "--target", help="The device's target id, e.g. gfx942:sramecc+:xnack-."),
    cache_dir: Optional[Path] = CACHE_OPTION,
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the code object here."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Find the code object a shim would load for FILE on TARGET; exit 1 on a miss."""
    try:
        image = ptx.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=str(ptx)) from None
    with _open(cache_dir) as cache:
        entry = find(cache, image, target)
        _report_problems(cache)
    keys = [str(make_key(text, target)) for text in ptx_texts(image)]
    if entry is not None and output is not None:
        output.write_bytes(entry.code_object)
    if as_json:
        sys.stdout.write(json.dumps({"hit": entry is not None, "keys_tried": keys,
                                     "entry": _entry_json(entry) if entry else None,
                                     "output": str(output) if entry and output else None}, indent=2) + "\n")
    elif entry is None:
        console().print(f"miss: {', '.join(keys) or 'no PTX in the file'}", highlight=False)
    else:
        ok = sum(k["status"] == "ok" for k in entry.kernels)
        console().print(f"hit: {entry.key} — {len(entry.code_object)} bytes, {ok}/{len(entry.kernels)} kernels, "
                        f"translated in {entry.manifest.get('seconds', 0):.2f} s from {entry.manifest.get('source')}"
                        + (f"; written to {output}" if output else ""), highlight=False)
        for kernel in entry.kernels:
            if kernel["status"] != "ok":
                console().print(f"  [yellow]{kernel['name']}: {kernel['reason']}[/]", highlight=False)
    if entry is None:
        raise typer.Exit(EXIT_INPUT)


@cache_app.command("ls")
def list_entries(
    cache_dir: Optional[Path] = CACHE_OPTION,
    zluda_db: Optional[Path] = typer.Option(None, "--zluda-db", metavar="FILE",
                                            help="List the rows of ZLUDA's cache database instead: which are "
                                                 "fatkit's, and whether ZLUDA would load each (docs/zluda.md)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Every entry, least recently used first."""
    if zluda_db is not None:
        _list_zluda_rows(zluda_db, as_json)
        return
    with _open(cache_dir) as cache:
        entries = list(cache.entries())
        limit = cache.max_size()
        _report_problems(cache)
    if as_json:
        sys.stdout.write(json.dumps({"cache": str(cache.directory), "max_size": limit,
                                     "total_size": sum(e.size for e in entries),
                                     "entries": [_entry_json(e) for e in entries]}, indent=2) + "\n")
        return
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("ptx", "target", "abi", "opts", "kernels", "size", "last used", "source"):
        table.add_column(col, justify="right" if col in ("kernels", "size") else "left", overflow="fold")
    for e in entries:
        ok = sum(k["status"] == "ok" for k in e.kernels)
        kernels = f"{ok}/{len(e.kernels)}" if e.code_object is not None else "[red]none[/]"
        table.add_row(e.key.ptx_blake3[:16], e.key.target, str(e.key.abi), e.key.options, kernels, _size(e.size),
                      time.strftime("%Y-%m-%d %H:%M", time.localtime(e.last_access / 1000)),
                      str(e.manifest.get("source")))
    console().print(table)
    console().print(f"{len(entries)} entries, {_size(sum(e.size for e in entries))} of {_size(limit)}; "
                    f"{cache.path}", highlight=False)


def _list_zluda_rows(database: Path, as_json: bool) -> None:
    rows = list(zluda.list_rows(database))
    if as_json:
        sys.stdout.write(json.dumps({"database": str(database), "rows": rows}, indent=2) + "\n")
        return
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("id", "ptx", "by", "device", "backend key", "zluda build", "size", "last used", "sm", "ZLUDA"):
        table.add_column(col, justify="right" if col in ("id", "size", "sm") else "left", overflow="fold")
    for r in rows:
        verdict = f"[green]{r['verdict']}[/]" if r["loads"] else f"[bold red]{r['verdict']}[/]"
        table.add_row(str(r["id"]), r["hash"][:16], "fatkit" if r["by_fatkit"] else "ZLUDA", r["device"],
                      r["backend_key"], r["zluda_version"][:12] + ("" if r["newest_key"] else " [dim](other key)[/]"),
                      _size(r["size"]), time.strftime("%Y-%m-%d %H:%M", time.localtime(r["last_access_ms"] / 1000)),
                      "-" if r["sm_version"] is None else str(r["sm_version"]), verdict)
    console().print(table)
    fatkit_rows = sum(r["by_fatkit"] for r in rows)
    console().print(f"{len(rows)} rows ({fatkit_rows} fatkit's, {len(rows) - fatkit_rows} ZLUDA's), "
                    f"{sum(not r['loads'] for r in rows)} that ZLUDA would not load; {database}", highlight=False)


@cache_app.command()
def verify(cache_dir: Optional[Path] = CACHE_OPTION, as_json: bool = JSON_OPTION) -> None:
    """Check the database file and every entry's checksum; exit 1 when anything is wrong."""
    with _open(cache_dir) as cache:
        integrity = cache.integrity()
        intact = sum(1 for _ in cache.entries())
        problems = [{"key": str(p.key), "reason": p.reason} for p in cache.problems]
    if as_json:
        sys.stdout.write(json.dumps({"intact": intact, "corrupt": problems, "integrity": integrity or ["ok"]},
                                    indent=2) + "\n")
    else:
        for line in integrity:
            console().print(f"[bold red]database:[/] {line}", highlight=False)
        for p in problems:
            console().print(f"[bold red]corrupt:[/] {p['key']}: {p['reason']}", highlight=False)
        console().print(f"{intact} intact, {len(problems)} corrupt entries"
                        + ("" if integrity else "; database file sound"), highlight=False)
    if integrity or problems:
        raise typer.Exit(EXIT_INPUT)


@cache_app.command()
def gc(
    cache_dir: Optional[Path] = CACHE_OPTION,
    max_size: Optional[str] = typer.Option(None, "--max-size", metavar="SIZE",
                                           help="New size limit, kept in the cache (e.g. 500M, 20G)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Delete corrupt entries and those of other translator ABI versions, then evict least recently used
    entries beyond the size limit."""
    with _open(cache_dir, write=True) as cache:
        evicted = cache.set_max_size(_parse_size(max_size)) if max_size else []
        removed, more = cache.gc()
        evicted += more
        left, limit = cache.total_size(), cache.max_size()
    if as_json:
        sys.stdout.write(json.dumps({"removed": [str(k) for k in removed], "evicted": [str(k) for k in evicted],
                                     "total_size": left, "max_size": limit}, indent=2) + "\n")
    else:
        console().print(f"removed {len(removed)} corrupt or stale, evicted {len(evicted)}; "
                        f"{_size(left)} of {_size(limit)} used", highlight=False)


def _parse_size(text: str) -> int:
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise typer.BadParameter(f"a size like 500M or 20G, not {text!r}", param_hint="--max-size")
    return int(float(match.group(1)) * 1000 ** "BKMGT".index((match.group(2) or "B").upper()))
