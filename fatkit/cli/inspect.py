"""`fatkit inspect`: what GPU code is inside, is there PTX, what would block AMD."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List

import typer

import fatkit
from fatkit.cli import EXIT_GATE, app
from fatkit.cli.lint import hazard_summary, render_hazard_summary
from fatkit.cli.progress import file_progress
from fatkit.cli.render import render_inspect
from fatkit.extract.report import summarize
from fatkit.extract.scan import scan_paths


@app.command()
def inspect(
    paths: List[Path] = typer.Argument(..., help="Files, directories (recursive), .a archives, wheels or zips."),
    as_json: bool = typer.Option(False, "--json", help="Print the full report as JSON."),
    kernels: bool = typer.Option(False, "--kernels",
                                 help="List kernels with resources; judge kernel by kernel (reads every entry)."),
    hashes: bool = typer.Option(False, "--hashes", help="Add each entry's BLAKE3 (the cache key for PTX)."),
    hazards: bool = typer.Option(False, "--hazards",
                                 help="Add a summary of the PTX kernels' AMD portability hazards (see fatkit lint)."),
    require_ptx: bool = typer.Option(False, "--require-ptx",
                                     help="Exit 3 unless every kernel of every binary has PTX."),
) -> None:
    """Show the NVIDIA and AMD device code inside binaries and whether it can run on AMD GPUs."""
    binaries = []
    with file_progress(paths, "inspecting") as on_file:
        for binary in scan_paths(paths, on_file=on_file):
            report = binary.to_json(with_kernels=kernels, with_hash=hashes)
            if hazards:
                report["hazards"] = hazard_summary(binary)
            binaries.append(report)
    summary = summarize(binaries)
    if as_json:
        report = {"fatkit_version": fatkit.__version__, "binaries": binaries, "summary": summary}
        # indented for people at a terminal; compact (and 5x faster to write) for pipes
        sys.stdout.write(json.dumps(report, indent=2 if sys.stdout.isatty() else None) + "\n")
    else:
        render_inspect(binaries, summary, kernels=kernels)
        if hazards:
            render_hazard_summary(binaries)
    if require_ptx and any(b["verdict"]["amd"] in ("no", "partial") for b in binaries):
        raise typer.Exit(EXIT_GATE)
