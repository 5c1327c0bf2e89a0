"""Show the NVIDIA and AMD device code inside binaries and whether it can run on AMD GPUs.

Each binary gets a verdict: yes (PTX for every module with kernels), partial, no (cubins or NVVM only),
native (AMD code objects already there) or none (no device code).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from fatkit.cli import EXIT_GATE, EXIT_OK, options

if TYPE_CHECKING:
    from fatkit.errors import FatkitError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_paths(parser, "Files, directories (recursive, links followed), .a archives, wheels or zips.")
    options.add_json(parser, "Print the full report as JSON.")
    parser.add_argument("--kernels", action="store_true",
                        help="List kernels with resources; judge kernel by kernel (reads every entry).")
    parser.add_argument("--hashes", action="store_true", help="Add each entry's BLAKE3 (the cache key for PTX).")
    parser.add_argument("--hazards", action="store_true",
                        help="Add a summary of the PTX kernels' AMD portability hazards (see fatkit lint).")
    parser.add_argument("--require-ptx", action="store_true",
                        help="Exit 3 unless every kernel of every binary has PTX.")


def run(args: argparse.Namespace) -> int:
    from fatkit.cli.progress import file_progress
    from fatkit.extract.kernels import describe
    from fatkit.extract.report import judge, summarize
    from fatkit.extract.scan import scan_paths

    binaries: list[dict[str, Any]] = []
    unreadable: list[FatkitError] = []
    with file_progress(args.paths, "inspecting") as on_file:
        for binary in scan_paths(args.paths, on_file=on_file, unreadable=unreadable):
            describe(binary, kernels=args.kernels, hashes=args.hashes)
            if args.kernels:
                binary.verdict = judge(binary, by_kernel=True)
            report = binary.to_json()
            if args.hazards:
                from fatkit.cli.lint import hazard_summary

                report["hazards"] = hazard_summary(binary)
            binaries.append(report)
    summary = summarize(binaries)
    if args.as_json:
        from fatkit.cli.output import print_json

        print_json({"binaries": binaries, "summary": summary})
    else:
        from fatkit.cli.render import render_inspect

        render_inspect(binaries, summary, kernels=args.kernels)
        if args.hazards:
            from fatkit.cli.lint import render_hazard_summary

            render_hazard_summary(binaries)
    if unreadable:
        from fatkit.cli.output import unreadable_inputs

        return unreadable_inputs(unreadable)
    if args.require_ptx and any(b["verdict"]["amd"] in ("no", "partial") for b in binaries):
        return EXIT_GATE
    return EXIT_OK
