"""`fatkit extract`: write PTX, cubins and AMD code objects out of binaries, with a manifest."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from fatkit.cli import app
from fatkit.cli.progress import file_progress
from fatkit.cli.render import render_extract
from fatkit.extract.scan import scan_paths
from fatkit.extract.write import extract_entries


@app.command()
def extract(
    paths: List[Path] = typer.Argument(..., help="Files, directories (recursive), .a archives, wheels or zips."),
    output: Path = typer.Option(..., "-o", "--output", help="Directory to write into (created if missing)."),
    ptx: bool = typer.Option(False, "--ptx", help="Write PTX entries."),
    cubin: bool = typer.Option(False, "--cubin", help="Write cubin (NVIDIA ELF) entries."),
    hsaco: bool = typer.Option(False, "--hsaco", help="Write AMD code objects."),
    nvvm: bool = typer.Option(False, "--nvvm", help="Write NVVM/LTO-IR entries (as stored)."),
    arch: Optional[str] = typer.Option(None, "--arch", help="Only this arch: sm_90, compute_90a, gfx942, ..."),
    as_json: bool = typer.Option(False, "--json", help="Print the manifest as JSON."),
) -> None:
    """Write device code entries as files (all kinds unless --ptx/--cubin/--hsaco/--nvvm narrow it)."""
    chosen = {kind for kind, on in (("ptx", ptx), ("elf", cubin), ("hsaco", hsaco), ("nvvm", nvvm)) if on}
    kinds = chosen or {"ptx", "elf", "hsaco", "nvvm"}
    with file_progress(paths, "extracting") as on_file:
        manifest = extract_entries(scan_paths(paths, on_file=on_file), output, kinds, arch)
    if as_json:
        json.dump(manifest, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render_extract(manifest, output)
