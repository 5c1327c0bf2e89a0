"""Replays the H200 recording on fatkit's AMD code objects, on the CPU: verification/replay/ holds, for a
deterministic subset of the suite (every table case on its first 256 threads, every `sm90` mma/wmma case on 4
warps), the inputs and the original PTX's outputs an H200 gave (`replay.npz`) and how each case was launched
(`replay_index.json`: the PTX source — a table case of families.py or a kernel of probe_numerics.py —, kernel,
grid, block, arguments in PTX parameter order).

    python verification/replay.py [--targets gfx1100,gfx942] [--only SUBSTRING]

Each case's PTX is translated for each target and run with `fatkit.emulate.launch` (the AMD executor, a
separate package of fatkit); outputs are compared bit for bit, or within the case's ulp bound for `.approx`
forms. This module imports without fatkit.emulate: `main` says so and stops when the executor is missing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

RECORDING = HERE / "replay"
MMA_HEADER = ".version 8.7\n.target sm_90\n.address_size 64\n\n"


def case_ptx(source: dict) -> str:
    """The PTX text a recorded case ran: a table case regenerated from families.py, a probe kernel from
    probe_numerics.py (both deterministic)."""
    from families import all_cases, table_module
    from probe_numerics import WMMA_FORMS, mma_forms, mma_kernel, wmma_kernel

    if "table" in source:
        case = next(c for c in all_cases() if c.name == source["table"])
        return table_module(case, "sm_90")
    if "mma" in source:
        form = next(f for f in mma_forms() if f["name"] == source["mma"])
        return MMA_HEADER + mma_kernel(form)
    name, shape, a, c, d = next(w for w in WMMA_FORMS if w[0] == source["wmma"])
    return MMA_HEADER + wmma_kernel(name, shape, a, c, d)


def launch_arguments(case: dict, arrays) -> tuple[list, list[tuple[str, np.ndarray]]]:
    """The executor's argument list (fresh copies of the recorded inputs; outputs poisoned with 0xA5) and the
    (recorded key, output array) pairs to compare."""
    args, outputs = [], []
    for spec in case["args"]:
        if "array" in spec:
            args.append(np.array(arrays[spec["array"]]))
        elif "output" in spec:
            expected = arrays[spec["output"]]
            out = np.full(expected.shape, 0xA5, dtype=np.uint8).view(expected.dtype) if expected.dtype.itemsize == 1 \
                else np.frombuffer(b"\xa5" * expected.nbytes, dtype=expected.dtype).reshape(expected.shape).copy()
            args.append(out)
            outputs.append((spec["output"], out))
        else:
            args.append(np.dtype({"u32": np.uint32, "s32": np.int32, "u64": np.uint64}[spec["scalar"]]).type(spec["value"]))
    return args, outputs


def _ulps(expected: np.ndarray, got: np.ndarray, kind: str) -> int:
    """The largest distance in units in the last place between the words' f32 low halves (or whole f64s);
    table words must agree in their high halves for f32."""
    e, g = expected.view(np.uint64).astype(object), got.view(np.uint64).astype(object)
    width = 64 if kind == "f64" else 32
    if width == 32 and any((x >> 32) != (y >> 32) for x, y in zip(e, g)):
        return 1 << 62
    sign = 1 << (width - 1)

    def ordered(v: int) -> int:
        v &= (1 << width) - 1
        return sign - 1 - (v - sign) if v >= sign else v + sign
    return max(abs(ordered(x) - ordered(y)) for x, y in zip(e, g))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", default="gfx1100,gfx942")
    parser.add_argument("--only", default=None)
    args = parser.parse_args()
    try:
        from fatkit.emulate import launch
    except ImportError:
        print("fatkit.emulate (the AMD executor) is not installed in this checkout: nothing to replay on", file=sys.stderr)
        return 2
    from fatkit.translate.pipeline import Options, translate

    index = json.loads((RECORDING / "replay_index.json").read_text())
    failures = 0
    with np.load(RECORDING / "replay.npz") as arrays:
        for target in args.targets.split(","):
            passed = 0
            for case in index["cases"]:
                if args.only and args.only not in case["name"]:
                    continue
                code_object = translate(case_ptx(case["ptx"]), Options(target=target)).product
                call, outputs = launch_arguments(case, arrays)
                launch(code_object, case["kernel"], tuple(case["grid"]), tuple(case["block"]), call,
                       shared=case["shared"])
                ok = True
                for key, out in outputs:
                    expected = arrays[key]
                    if np.array_equal(out, expected):
                        continue
                    bound = case["compare"].get("ulp", 0)
                    if not bound or _ulps(expected, out, case["compare"].get("ulp_type", "f32")) > bound:
                        ok = False
                passed += ok
                failures += not ok
                if not ok:
                    print(f"fail {target} {case['name']}", flush=True)
            print(f"{target}: {passed} passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
