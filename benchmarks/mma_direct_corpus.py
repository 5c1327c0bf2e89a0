"""How many of the mma.sync in PTX modules take lower/mma_direct.py's path under `--mma-numerics native`: per
mma, whether an operand (A, B) is loaded in the matrix instruction's layout and whether C is loaded and D
stored in it, or everything moves between lanes (lower/mma.Gather).

    python -m fatkit extract --ptx -o /tmp/ptx ~/.cache/fatkit-corpus
    python benchmarks/mma_direct_corpus.py [--target gfx942] /tmp/ptx/*.ptx

Modules without mma.sync are skipped unread by the translator. The count comes from the two decisions
themselves (`mma_native.direct_gather`, `DirectResult.prepare`), wrapped for the run.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fatkit.translate.lower import mma_direct, mma_native  # noqa: E402
from fatkit.translate.pipeline import Options, translate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="gfx942")
    parser.add_argument("modules", nargs="+", type=Path)
    args = parser.parse_args()
    tally: collections.Counter[str] = collections.Counter()
    gather, prepare = mma_native.direct_gather, mma_native.DirectResult.prepare

    def counted_gather(*arguments):
        chosen = gather(*arguments)
        direct = sorted(chosen.loads) if isinstance(chosen, mma_direct.DirectGather) else []
        tally["operands loaded: " + (", ".join(direct) or "none")] += 1
        return chosen

    def counted_prepare(self, *arguments):
        stored = prepare(self, *arguments)
        tally["C loaded, D stored natively" if stored else "D moved"] += 1
        return stored

    mma_native.direct_gather = counted_gather
    mma_native.DirectResult.prepare = counted_prepare  # type: ignore[method-assign]
    for module in args.modules:
        text = module.read_text()
        if "mma.sync" not in text:
            continue
        before = sum(n for key, n in tally.items() if key.startswith("operands"))
        translate(text, Options(target=args.target, mma_numerics="native"))
        mmas = sum(n for key, n in tally.items() if key.startswith("operands")) - before
        print(f"{module.name}: {mmas} native mma.sync")
    for key, n in sorted(tally.items()):
        print(f"{key}: {n}")


if __name__ == "__main__":
    main()
