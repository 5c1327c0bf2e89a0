"""Where the fetched public corpus lives (../shared/corpus/fetch.py writes it; it is never committed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CORPUS_DIR = Path(os.environ.get("FATKIT_CORPUS_DIR", Path.home() / ".cache" / "fatkit-corpus")).expanduser()


def corpus_files(index_name: str = "index.tsv") -> list[Path]:
    """Every corpus binary fetch.py verified (from its index.tsv; the Windows DLLs fetched with
    `--tsv ../shared/corpus/windows.tsv` are in index-windows.tsv), in listing order."""
    index = CORPUS_DIR / index_name
    if not index.exists():
        return []
    return [Path(line.split("\t", 1)[0]) for line in index.read_text().splitlines() if line.strip()]


def corpus_file(member: str) -> Path:
    """The fetched file whose path ends with `member` (a wheel member path), or skip the test."""
    for path in corpus_files() + corpus_files("index-windows.tsv"):
        if path.as_posix().endswith("/" + member):
            return path
    pytest.skip(f"corpus file {member} not fetched (run ../shared/corpus/fetch.py)")
