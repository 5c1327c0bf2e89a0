"""The flags several commands share, declared once: the same spelling, parsing and help everywhere.

`--target` is parsed here, by `TargetId`, for every command; a value that is not a target is a usage error
(exit 2) before any file is read. A shared flag a new change needs (a numerics mode, say) is one function
here that the commands taking it call.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from fatkit.errors import UsageError

if TYPE_CHECKING:
    from fatkit.translate.pipeline import Options
    from fatkit.translate.targets.ids import TargetId, Vendor

AMD_ONLY: tuple[Vendor, ...] = ("amd",)


def target_list(vendors: tuple[Vendor, ...]) -> Callable[[str], list[TargetId]]:
    """argparse's `type` for `--target`: comma-separated targets of these vendors."""
    def parse(text: str) -> list[TargetId]:
        from fatkit.translate.targets.ids import TargetId  # commands without --target (inspect) never load it

        try:
            return TargetId.parse_list(text, vendors=vendors)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(exc.message) from None

    return parse


def one_target(text: str) -> TargetId:
    from fatkit.translate.targets.ids import TargetId

    try:
        return TargetId.parse_amd(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def add_paths(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help=help)


def add_targets(parser: argparse.ArgumentParser, *, vendors: tuple[Vendor, ...] = AMD_ONLY, required: bool = True,
                help: str = "AMD target ids, comma-separated: gfx942,gfx1100 (features allowed: "
                            "gfx942:sramecc+:xnack-).") -> None:
    parser.add_argument("--target", dest="targets", type=target_list(vendors), required=required, metavar="TARGETS",
                        help=help)


def add_jobs(parser: argparse.ArgumentParser, help: str = "Translations run in parallel.") -> None:
    parser.add_argument("-j", "--jobs", type=_positive, default=os.cpu_count() or 1, metavar="N",
                        help=f"{help} (default: the number of CPUs)")


def add_mma_numerics(parser: argparse.ArgumentParser) -> None:
    """--mma-numerics, onto Options.mma_numerics (translation_options maps it by name)."""
    parser.add_argument("--mma-numerics", type=_mma_numerics, default="default", metavar="MODEL",
                        help="Tensor-core arithmetic of mma/wmma (docs/numerics.md): sm90 (H100/H200 bit for bit), "
                             "exact (exact sum, one rounding; the most accurate) or native (the AMD target's "
                             "MFMA/WMMA where a form maps onto them, within a stated bound; else sm90). Default: "
                             "native on targets with matrix instructions (gfx90a, gfx942, gfx950, gfx11, gfx12), "
                             "else sm90.")


def _mma_numerics(value: str) -> str:
    from fatkit.translate.pipeline import DEFAULT_MMA_NUMERICS, MMA_NUMERICS  # deferred: a heavy import

    if value not in MMA_NUMERICS and value != DEFAULT_MMA_NUMERICS:
        raise argparse.ArgumentTypeError(f"one of {', '.join(MMA_NUMERICS)}, not {value!r}")
    return value


def add_json(parser: argparse.ArgumentParser, help: str = "Print the report as JSON.") -> None:
    parser.add_argument("--json", dest="as_json", action="store_true", help=help)


def add_cache(parser: argparse.ArgumentParser, help: str = "Cache directory (default $FATKIT_CACHE_DIR, else "
                                                           "$XDG_CACHE_HOME/fatkit, else ~/.cache/fatkit).") -> None:
    parser.add_argument("--cache", dest="cache_dir", type=Path, metavar="DIR", help=help)


def add_output(parser: argparse.ArgumentParser, *, required: bool, help: str) -> None:
    parser.add_argument("-o", "--output", type=Path, required=required, metavar="DIR", help=help)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"at least 1, not {value}")
    return value


def translation_options(args: argparse.Namespace) -> Options:
    """The translator's Options from the flags whose destinations are named like its fields (`--emit` → emit,
    `--jobs` → jobs): a flag added for a new Options field reaches the translation, and the cache key, with no
    edit here. The target is set per target by the command."""
    from fatkit.translate.pipeline import Options  # the translator: only commands that translate load it

    return Options(**{f.name: getattr(args, f.name) for f in fields(Options)
                      if f.name != "target" and hasattr(args, f.name)})


def choice(parser: argparse.ArgumentParser, flag: str, value: str, allowed: tuple[str, ...]) -> None:
    """A usage error (exit 2) unless `value` is one of `allowed`."""
    if value not in allowed:
        parser.error(f"argument {flag}: one of {', '.join(allowed)}, not {value!r}")
