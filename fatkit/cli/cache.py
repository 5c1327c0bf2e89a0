"""Query and maintain the translation cache (docs/cache.md): what a shim would load (lookup), what the cache
holds (ls), its health (verify), its size (gc)."""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from fatkit.cli import EXIT_INPUT, EXIT_OK, options
from fatkit.errors import FatkitError, InputError

if TYPE_CHECKING:
    from fatkit.cache import Cache, CacheEntry

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)B?", re.IGNORECASE)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="cache_command", metavar="COMMAND", required=True)
    lookup_parser = commands.add_parser("lookup", help="Find the code object a shim would load for FILE on "
                                                       "TARGET; exit 1 on a miss.")
    lookup_parser.add_argument("--ptx", type=Path, required=True, metavar="FILE",
                               help="What cuModuleLoadData gets: PTX text or a fatbin.")
    lookup_parser.add_argument("--target", type=options.one_target, required=True, metavar="TARGET",
                               help="The device's target id, e.g. gfx942:sramecc+:xnack-.")
    options.add_output(lookup_parser, required=False, help="Write the code object here.")
    lookup_parser.set_defaults(cache_run=lookup)
    ls_parser = commands.add_parser("ls", help="Every entry, least recently used first.")
    ls_parser.add_argument("--zluda-db", type=Path, metavar="FILE",
                           help="List the rows of ZLUDA's cache database instead: which are fatkit's, and whether "
                                "ZLUDA would load each (docs/zluda.md).")
    ls_parser.set_defaults(cache_run=list_entries)
    verify_parser = commands.add_parser("verify", help="Check the database file and every entry's checksum; exit 1 "
                                                       "when anything is wrong.")
    verify_parser.set_defaults(cache_run=verify)
    gc_parser = commands.add_parser("gc", help="Delete corrupt entries and stale ones (of another translator "
                                               "ABI version or cache key scheme), then evict least recently used "
                                               "entries beyond the size limit.")
    gc_parser.add_argument("--max-size", metavar="SIZE", type=_parse_size,
                           help="New size limit, kept in the cache (e.g. 500M, 20G).")
    gc_parser.set_defaults(cache_run=gc)
    for command in (lookup_parser, ls_parser, verify_parser, gc_parser):
        options.add_cache(command)
        options.add_json(command, "Print JSON.")


def run(args: argparse.Namespace) -> int:
    status: int = args.cache_run(args)
    return status


def _open(cache_dir: Optional[Path], *, write: bool = False) -> Cache:
    from fatkit.cache import Cache, default_cache_dir
    from fatkit.cache.store import DB_NAME, CacheError

    directory = cache_dir or default_cache_dir()
    if not write and not (directory / DB_NAME).exists():
        raise CacheError(f"no cache here ({DB_NAME} missing)", path=str(directory))
    return Cache(directory, read_only=not write)


def _entry_json(entry: CacheEntry) -> dict[str, Any]:
    return {"ptx_blake3": entry.key.ptx_blake3, "target": entry.key.target, "abi": entry.key.abi,
            "options": entry.key.options, "size": entry.size, "has_code_object": entry.code_object is not None,
            "last_access_ms": entry.last_access, **entry.manifest}


def _report_problems(cache: Cache) -> None:
    from fatkit.cli.output import warn

    for problem in cache.problems:
        warn(f"ignored a corrupt cache entry {problem.key}: {problem.reason}")


def lookup(args: argparse.Namespace) -> int:
    from fatkit.cache import find, make_key, ptx_texts
    from fatkit.cli.output import console, print_json

    ptx, target, output, cache_dir = args.ptx, str(args.target), args.output, args.cache_dir
    try:
        if ptx.exists() and not ptx.is_file():  # a FIFO would block the read for a writer
            raise InputError("not a regular file", path=str(ptx))
        image = ptx.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=str(ptx)) from None
    try:
        texts = ptx_texts(image)
    except FatkitError as exc:  # a corrupt fatbin, an empty file: the error names the file
        raise exc.located(str(ptx)) from None
    with _open(cache_dir) as cache:
        entry = find(cache, image, target)
        _report_problems(cache)
    keys = [str(make_key(text, target)) for text in texts]
    if entry is not None and output is not None:
        output.write_bytes(entry.code_object)
    if args.as_json:
        print_json({"hit": entry is not None, "keys_tried": keys, "entry": _entry_json(entry) if entry else None,
                    "output": str(output) if entry and output else None})
    elif entry is None:
        console().print(f"miss: {', '.join(keys) or 'no PTX in the file'}", highlight=False)
    else:
        ok = sum(k["status"] == "ok" for k in entry.kernels)
        console().print(f"hit: {entry.key} — {len(entry.code_object or b'')} bytes, {ok}/{len(entry.kernels)} kernels, "
                        f"translated in {entry.manifest.get('seconds', 0):.2f} s from {entry.manifest.get('source')}"
                        + (f"; written to {output}" if output else ""), highlight=False)
        for kernel in entry.kernels:
            if kernel["status"] != "ok":
                console().print(f"  [yellow]{kernel['name']}: {kernel['reason']}[/]", highlight=False)
    return EXIT_INPUT if entry is None else EXIT_OK


def list_entries(args: argparse.Namespace) -> int:
    from fatkit.cli.output import console, print_json, table
    from fatkit.cli.render import _size

    if args.zluda_db is not None:
        return _list_zluda_rows(args.zluda_db, args.as_json)
    with _open(args.cache_dir) as cache:
        entries = list(cache.entries())
        limit = cache.max_size()
        _report_problems(cache)
    if args.as_json:
        print_json({"cache": str(cache.directory), "max_size": limit, "total_size": sum(e.size for e in entries),
                    "entries": [_entry_json(e) for e in entries]})
        return EXIT_OK
    rows = table(("ptx", "target", "abi", "opts", "kernels", "size", "last used", "source"), right=("kernels", "size"),
                 fold=True)
    for e in entries:
        ok = sum(k["status"] == "ok" for k in e.kernels)
        kernels = f"{ok}/{len(e.kernels)}" if e.code_object is not None else "[red]none[/]"
        rows.add_row(e.key.ptx_blake3[:16], e.key.target, str(e.key.abi), e.key.options, kernels, _size(e.size),
                     time.strftime("%Y-%m-%d %H:%M", time.localtime(e.last_access / 1000)),
                     str(e.manifest.get("source")))
    console().print(rows)
    console().print(f"{len(entries)} entries, {_size(sum(e.size for e in entries))} of {_size(limit)}; "
                    f"{cache.path}", highlight=False)
    return EXIT_OK


def _list_zluda_rows(database: Path, as_json: bool) -> int:
    from fatkit.cache import zluda
    from fatkit.cli.output import console, print_json, table
    from fatkit.cli.render import _size

    rows = list(zluda.list_rows(database))
    if as_json:
        print_json({"database": str(database), "rows": rows})
        return EXIT_OK
    shown = table(("id", "ptx", "by", "device", "backend key", "zluda build", "size", "last used", "sm", "ZLUDA"),
                  right=("id", "size", "sm"), fold=True)
    for r in rows:
        verdict = f"[green]{r['verdict']}[/]" if r["loads"] else f"[bold red]{r['verdict']}[/]"
        shown.add_row(str(r["id"]), r["hash"][:16], "fatkit" if r["by_fatkit"] else "ZLUDA", r["device"],
                      r["backend_key"], r["zluda_version"][:12] + ("" if r["newest_key"] else " [dim](other key)[/]"),
                      _size(r["size"]), time.strftime("%Y-%m-%d %H:%M", time.localtime(r["last_access_ms"] / 1000)),
                      "-" if r["sm_version"] is None else str(r["sm_version"]), verdict)
    console().print(shown)
    fatkit_rows = sum(r["by_fatkit"] for r in rows)
    console().print(f"{len(rows)} rows ({fatkit_rows} fatkit's, {len(rows) - fatkit_rows} ZLUDA's), "
                    f"{sum(not r['loads'] for r in rows)} that ZLUDA would not load; {database}", highlight=False)
    return EXIT_OK


def verify(args: argparse.Namespace) -> int:
    from fatkit.cli.output import console, print_json

    with _open(args.cache_dir) as cache:
        integrity = cache.integrity()
        intact = sum(1 for _ in cache.entries())
        problems = [{"key": str(p.key), "reason": p.reason} for p in cache.problems]
    if args.as_json:
        print_json({"intact": intact, "corrupt": problems, "integrity": integrity or ["ok"]})
    else:
        for line in integrity:
            console().print(f"[bold red]database:[/] {line}", highlight=False)
        for p in problems:
            console().print(f"[bold red]corrupt:[/] {p['key']}: {p['reason']}", highlight=False)
        console().print(f"{intact} intact, {len(problems)} corrupt entries"
                        + ("" if integrity else "; database file sound"), highlight=False)
    return EXIT_INPUT if integrity or problems else EXIT_OK


def gc(args: argparse.Namespace) -> int:
    from fatkit.cli.output import console, print_json
    from fatkit.cli.render import _size

    with _open(args.cache_dir, write=True) as cache:
        evicted = cache.set_max_size(args.max_size) if args.max_size else []
        removed, more = cache.gc()
        evicted += more
        left, limit = cache.total_size(), cache.max_size()
    if args.as_json:
        print_json({"removed": [str(k) for k in removed], "evicted": [str(k) for k in evicted], "total_size": left,
                    "max_size": limit})
    else:
        console().print(f"removed {len(removed)} corrupt or stale, evicted {len(evicted)}; "
                        f"{_size(left)} of {_size(limit)} used", highlight=False)
    return EXIT_OK


def _parse_size(text: str) -> int:
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"a size like 500M or 20G, not {text!r}")
    return int(float(match.group(1)) * 1000 ** "BKMGT".index((match.group(2) or "B").upper()))
