"""Digests of what fatkit makes of a set of PTX modules, to show that a change leaves the products alone.

    python benchmarks/same_products.py [--ir-only] [--target gfx942 ...] --out DIGESTS.json PTX...
    python benchmarks/same_products.py ... --against BASE.json PTX...

For every PTX file (by its name) and target: the sha256 of each lowered kernel's LLVM IR and of the product
(the linked code object's bytes; skipped with `--ir-only`). Run it once in a checkout of the base (PYTHONPATH
at that tree) with `--out`, then in the changed tree with `--against` the base's file: it lists every module,
target and kernel whose IR or product differs and exits 1 if any does (`--ir-only`: the IR, a kernel lowering
refuses being one missing). Equal IR gives an equal product (codegen is deterministic), so `--ir-only` is the
quick check while working; a change that alters the IR needs the products.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from fatkit.errors import FatkitError
from fatkit.translate.pipeline import Options, run, run_from


def digests(path: Path, targets: list[str], ir_only: bool) -> dict[str, dict[str, str]]:
    """target → {kernel name: IR digest, "product": product digest (or the FatkitError's text)}."""
    prepared = run(path.read_text(), Options(target=targets[0]), until="passes")
    found: dict[str, dict[str, str]] = {}
    for target in targets:
        options = Options(target=target)
        row: dict[str, str] = {}
        try:
            lowered = run_from("lower", prepared, options, until="lower")
            for kernel in lowered.kernels:
                row[kernel.signature.name] = hashlib.sha256(kernel.llvm_ir.encode()).hexdigest()
            if not ir_only:
                row["product"] = hashlib.sha256(run_from("codegen", lowered, options).product).hexdigest()
        except FatkitError as error:
            row["error"] = str(error)
        found[target] = row
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--target", action="append", dest="targets")
    parser.add_argument("--ir-only", action="store_true")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--against", type=Path)
    args = parser.parse_args()
    targets = args.targets or ["gfx942", "gfx1100"]
    found = {path.name: digests(path, targets, args.ir_only) for path in args.paths}
    if args.out:
        args.out.write_text(json.dumps(found, indent=1, sort_keys=True))
    if args.against:
        base = json.loads(args.against.read_text())
        differ = [f"{path} {target} {key}" for path, per_target in found.items()
                  for target, row in per_target.items()
                  for key in sorted((set(row) | set(base.get(path, {}).get(target, {})))
                                    - ({"product", "error"} if args.ir_only else set()))
                  if row.get(key) != base.get(path, {}).get(target, {}).get(key)]
        print("\n".join(differ) if differ else f"same: {len(found)} modules × {len(targets)} targets")
        sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
