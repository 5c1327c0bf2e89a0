"""Write device code entries as files (all kinds unless --ptx/--cubin/--hsaco/--nvvm narrow it), with a
manifest.json naming where each came from."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from fatkit.cli import options

if TYPE_CHECKING:
    from fatkit.errors import FatkitError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_paths(parser, "Files, directories (recursive, links followed), .a archives, wheels or zips.")
    options.add_output(parser, required=True, help="Directory to write into (created if missing).")
    parser.add_argument("--ptx", action="store_true", help="Write PTX entries.")
    parser.add_argument("--cubin", action="store_true", help="Write cubin (NVIDIA ELF) entries.")
    parser.add_argument("--hsaco", action="store_true", help="Write AMD code objects.")
    parser.add_argument("--nvvm", action="store_true", help="Write NVVM/LTO-IR entries (as stored).")
    parser.add_argument("--arch", help="Only this arch: sm_90, compute_90a, gfx942, ...")
    options.add_json(parser, "Print the manifest as JSON.")


def run(args: argparse.Namespace) -> int:
    from fatkit.cli.progress import file_progress
    from fatkit.extract.scan import scan_paths
    from fatkit.extract.write import extract_entries

    chosen = {kind for kind, on in (("ptx", args.ptx), ("elf", args.cubin), ("hsaco", args.hsaco),
                                    ("nvvm", args.nvvm)) if on}
    kinds = chosen or {"ptx", "elf", "hsaco", "nvvm"}
    unreadable: list[FatkitError] = []
    with file_progress(args.paths, "extracting") as on_file:
        manifest = extract_entries(scan_paths(args.paths, on_file=on_file, unreadable=unreadable), args.output, kinds,
                                   args.arch)
    if args.as_json:
        from fatkit.cli.output import print_json

        print_json(manifest)
    else:
        from fatkit.cli.render import render_extract

        render_extract(manifest, args.output)
    from fatkit.cli.output import unreadable_inputs

    return unreadable_inputs(unreadable)
