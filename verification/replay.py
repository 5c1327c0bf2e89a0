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
import math
import sys
import time
from collections import Counter
from functools import cache
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
    from families import table_module
    from probe_numerics import WMMA_FORMS, mma_forms, mma_kernel, wmma_kernel

    if "table" in source:
        case = _table_cases()[source["table"]]
        return table_module(case, "sm_90")
    if "mma" in source:
        form = next(f for f in mma_forms() if f["name"] == source["mma"])
        return MMA_HEADER + mma_kernel(form)
    name, shape, a, c, d = next(w for w in WMMA_FORMS if w[0] == source["wmma"])
    return MMA_HEADER + wmma_kernel(name, shape, a, c, d)


@cache
def _table_cases() -> dict:
    from families import all_cases

    return {c.name: c for c in all_cases()}


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


def replay_case(case: dict, target: str, arrays) -> tuple[str, str]:
    """One recorded case on one AMD target: ("pass" | "known" | "fail" | "error", detail); "known": f64 mma
    outputs whose only differences are NaN bits (KNOWN_F64_MMA_NAN). A pass that is not bit for bit
    (NaN bits the ISA leaves open, an `.approx` result within its bound) says so in its detail."""
    from fatkit.emulate import launch
    from fatkit.errors import FatkitError
    from fatkit.translate.pipeline import Options, translate

    try:
        # the recorded outputs are an H200's: sm90's bits (the AMD targets' default is native)
        code_object = translate(case_ptx(case["ptx"]), Options(target=target, mma_numerics="sm90")).product
        call, outputs = launch_arguments(case, arrays)
        launch(code_object, case["kernel"], tuple(case["grid"]), tuple(case["block"]), call, shared=case["shared"])
    except FatkitError as error:
        return "error", f"{type(error).__name__}: {error}"
    notes, status = [], "pass"
    for key, out in outputs:
        expected = arrays[key]
        if case["name"] in SHARED_ADDRESS_OUTPUTS:  # the H200's addresses moved by where the variable lies
            shift = np.unique((_words(out).astype(object) - _words(expected).astype(object)) % (1 << 32))
            if shift.size != 1:
                return "fail", f"{key}: the addresses differ from the H200's by more than the variable's placement"
            notes.append(f"{key}: {SHARED_ADDRESS} (H200 {_hex(expected, 0)} {target} {_hex(out, 0)})")
            status = "known"
            continue
        differ = _differing_words(expected, out)
        if not differ:
            continue
        words = _words(expected).size
        first = differ[0]
        judged = [_judge_word(case, arrays, i, int(_words(expected)[i]), int(_words(out)[i])) for i in differ]
        bad = [i for i, verdict in zip(differ, judged) if verdict is None]
        if bad:
            return "fail", f"{key}: {len(bad)} of {words} words differ beyond what the ISA leaves open; first " \
                           f"[{bad[0]}] H200 {_hex(expected, bad[0])} {target} {_hex(out, bad[0])}"
        kinds = Counter(judged)
        if KNOWN_F64_MMA_NAN in kinds:
            status = "known"
        notes.append(f"{key}: " + ", ".join(f"{n} words {kind}" for kind, n in sorted(kinds.items()))
                     + f" (first [{first}] H200 {_hex(expected, first)} {target} {_hex(out, first)})")
    return status, "; ".join(notes)


# cases whose output is the address of a .shared variable (mapa of it to the CTA's own rank): where the variable
# lies is the implementation's (an H200 puts a kernel's shared variables after 1 KiB it reserves, at 0x400; fatkit
# at LDS offset 0), so the replay checks that every lane's address is the H200's moved by one constant; the H200
# runs check the value against the original PTX's, and the _offset twin of this case, relative to the variable
SHARED_ADDRESS_OUTPUTS = {"cl_mapa_shared_cluster_u32"}
SHARED_ADDRESS = "a .shared variable's address, the implementation's choice (known)"
# a known departure (docs/numerics.md): an H200's DMMA gives f64 NaNs of another sign or payload than the fma
# chain fatkit lowers f64 mma to; every non-NaN element must still agree bit for bit
KNOWN_F64_MMA_NAN = "f64 NaN bits of DMMA (known, docs/numerics.md)"
# the operations whose NaN results' sign and payload the PTX ISA leaves open (an H200 gives the canonical NaN,
# AMD hardware an input NaN made quiet, or its own default NaN; the executor's default NaN is the host FPU's)
NAN_OPEN = {"add", "sub", "mul", "fma", "div", "sqrt", "rcp", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh"}
LANES = {"f64": (64, 11), "f32": (32, 8), "f16": (16, 5), "f16x2": (16, 5), "bf16": (16, 8), "bf16x2": (16, 8)}


def _operation(case: dict) -> tuple[str, str]:
    """(operation, lane format) of a float/half table case: fp_div_approx_f32 → ("div", "f32")."""
    parts = case["name"].split("_")
    return parts[1], parts[-1]


def _is_nan(bits: int, width: int, exponent: int) -> bool:
    mantissa = width - 1 - exponent
    return (bits >> mantissa) & ((1 << exponent) - 1) == (1 << exponent) - 1 and bits & ((1 << mantissa) - 1) != 0


def _judge_word(case: dict, arrays, index: int, want: int, got: int) -> str | None:
    """Why a word that differs from the H200's still passes ("NaN bits", "within the .approx bound"), or None."""
    if case["family"].startswith("mma") and "_f64_f64_f64_f64" in case["name"]:
        return KNOWN_F64_MMA_NAN if _is_nan(want, 64, 11) and _is_nan(got, 64, 11) else None
    if case["family"] not in ("float", "half"):
        return None
    op, lanes = _operation(case)
    if lanes not in LANES:
        return None
    width, exponent = LANES[lanes]
    mask = (1 << width) - 1
    pairs = [((want >> s) & mask, (got >> s) & mask) for s in range(0, 64, width)]
    if op in NAN_OPEN and all(w == g or (_is_nan(w, width, exponent) and _is_nan(g, width, exponent))
                              for w, g in pairs):
        return "NaN bits"
    bound = case["compare"].get("ulp", 0)
    if not bound:
        return None
    if lanes == "f64":  # rcp.approx.ftz.f64: the bound is in units of the upper word's last bit
        return "within the .approx bound" if _ulps(np.array([want], np.uint64), np.array([got], np.uint64), "f64") \
            <= bound else None
    if lanes != "f32" or want >> 32 != got >> 32:
        return None
    x, y = (_f32(int(arrays[spec["array"]].reshape(-1).view(np.uint64)[index]), "ftz" in case["name"])
            for spec in case["args"][:2])
    result = _f32(got, False)
    if math.isnan(result):
        return None
    within = _approx_bound(op, x, y, result)
    if within is None:  # no ISA bound for this input: the recorded H200-to-H200 bound in ulps
        within = _ulps(np.array([want], np.uint64), np.array([got], np.uint64), "f32") <= bound
    return "within the .approx bound" if within else None


def _f32(word: int, flush: bool) -> float:
    bits = word & 0xFFFFFFFF
    value = float(np.array([bits], np.uint32).view(np.float32)[0])
    return math.copysign(0.0, value) if flush and value and abs(value) < 2.0 ** -126 else value


# The f32 `.approx` forms the recording holds, with the PTX ISA's error bound as a predicate of (x, y, result):
# an AMD result that differs from the H200's passes when the ISA's bound holds for it against the exact function
# (Python's math on the f32 inputs), and the ISA bounds that input; NaN for NaN is the ISA leaving NaNs open.
def _ulps_at(got: float, want: float) -> float:
    exponent = max(math.frexp(want)[1] - 1, -126) if want else -126
    return abs(got - want) / 2.0 ** (exponent - 23)


def _approx_bound(op: str, x: float, y: float, got: float) -> bool | None:
    """True/False: within / outside the ISA's bound; None: the ISA bounds no result for this input."""
    try:
        if op == "rcp":
            return _ulps_at(got, 1 / x) <= 1 if x and math.isfinite(x) and abs(1 / x) >= 2.0 ** -126 else None
        if op == "sqrt":
            return abs(got / math.sqrt(x) - 1) <= 2 ** -23 if x > 0 and math.isfinite(x) else None
        if op == "rsqrt":
            return abs(got * math.sqrt(x) - 1) <= 2 ** -22.9 if x > 0 and math.isfinite(x) else None
        if op == "lg2":
            if not (x > 0 and math.isfinite(x)) or x == 1:
                return None
            log = math.log2(x)
            return abs(got - log) <= 2 ** -22 if 0.5 < x < 2 else abs(got / log - 1) <= 2 ** -22
        if op == "ex2":
            return _ulps_at(got, 2.0 ** x) <= 2 if math.isfinite(x) and -126 <= x < 128 else None
        if op in ("sin", "cos"):
            function = math.sin if op == "sin" else math.cos
            if abs(x) <= 2 * math.pi:
                return abs(got - function(x)) <= 2 ** -20.5
            return abs(got - function(x)) <= 2 ** -14.7 if abs(x) <= 100 * math.pi else None
        if op == "tanh":
            return abs(got - math.tanh(x)) <= 2 ** -11 * abs(math.tanh(x)) if math.isfinite(x) else None
        if op == "div":
            quotient = x / y
            in_range = 2.0 ** -126 <= abs(quotient) < 2.0 ** 128 and math.isfinite(x) and math.isfinite(y)
            return _ulps_at(got, quotient) <= 2 if in_range else None
    except (ZeroDivisionError, OverflowError, ValueError):
        return None
    raise ValueError(op)


def _word(array: np.ndarray) -> int:
    return 8 if array.nbytes % 8 == 0 else array.dtype.itemsize


def _words(array: np.ndarray) -> np.ndarray:
    return array.reshape(-1).view(np.uint64 if _word(array) == 8 else array.dtype)


def _differing_words(expected: np.ndarray, got: np.ndarray) -> list[int]:
    e, g = _words(expected).view(np.uint8).reshape(-1, _word(expected)), _words(got).view(np.uint8).reshape(-1, _word(got))
    return [int(i) for i in np.nonzero((e != g).any(axis=1))[0]]


def _hex(array: np.ndarray, index: int) -> str:
    return f"{int.from_bytes(_words(array)[index:index + 1].tobytes(), 'little'):#x}"


def replay(targets: list[str], only: str | None = None, cases: list[dict] | None = None,
           on_result=None) -> list[dict]:
    """Every recorded case (or `cases`, or those whose name contains `only`) on each target: a list of
    {name, family, target, status, detail}."""
    chosen = cases if cases is not None else [c for c in recorded_cases() if not only or only in c["name"]]
    results = []
    with np.load(RECORDING / "replay.npz") as arrays:
        for target in targets:
            for case in chosen:
                status, detail = replay_case(case, target, arrays)
                result = {"name": case["name"], "family": case["family"], "target": target, "status": status,
                          "detail": detail}
                results.append(result)
                if on_result:
                    on_result(result)
    return results


def recorded_cases() -> list[dict]:
    return json.loads((RECORDING / "replay_index.json").read_text())["cases"]


def ci_subset() -> list[dict]:
    """What tests/test_verification_replay.py replays (the whole recording takes too long for CI): every table
    case, and every sixteenth `mma:sm90` case in the index's order."""
    mma = [case for case in recorded_cases() if case["family"].startswith("mma")]
    return [case for case in recorded_cases() if not case["family"].startswith("mma")] + mma[::16]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", default="gfx1100,gfx942")
    parser.add_argument("--only", default=None)
    parser.add_argument("--results", type=Path, default=None,
                        help="write the per-case results here (verification/replay_results.json feeds REPORT.md)")
    args = parser.parse_args()
    try:
        import fatkit.emulate  # noqa: F401
    except ImportError:
        print("fatkit.emulate (the AMD executor) is not installed in this checkout: nothing to replay on", file=sys.stderr)
        return 2

    def say(result: dict) -> None:
        if result["status"] != "pass":
            print(f"{result['status']} {result['target']} {result['name']}: {result['detail']}", flush=True)

    started = time.monotonic()
    results = replay(args.targets.split(","), args.only, on_result=say)
    seconds = time.monotonic() - started
    print(summary_table(results))
    print(f"{len(results)} case runs in {seconds:.0f} s")
    if args.results:
        args.results.write_text(json.dumps({"command": "python verification/replay.py " + " ".join(sys.argv[1:]),
                                            "seconds": round(seconds), "results": results}, indent=1))
    return 1 if any(r["status"] not in ("pass", "known") for r in results) else 0


def summary_table(results: list[dict]) -> str:
    """Markdown: per family, passed / run on each target."""
    targets = list(dict.fromkeys(r["target"] for r in results))
    families = sorted({r["family"] for r in results})
    lines = ["| family | " + " | ".join(targets) + " |", "|---|" + "---|" * len(targets)]
    for family in families + ["all"]:
        cells = []
        for target in targets:
            members = [r for r in results if r["target"] == target and family in ("all", r["family"])]
            known = sum(r["status"] == "known" for r in members)
            cells.append(f"{sum(r['status'] == 'pass' for r in members)} / {len(members)}"
                         + (f" (+{known} known)" if known else ""))
        label = "**all**" if family == "all" else family
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
