"""Runs the differential suite on an NVIDIA GPU: original PTX against fatkit's re-lowered PTX.

    python verification/runner.py BUILD_DIR [--out results.json] [--repeat 20] [--only SUBSTRING]

BUILD_DIR is what `verification/build.py` wrote: `manifest.json` and, per case, `<case>.orig.ptx` (an `-rdc`
program's: `<case>.orig.cubin`, its units linked by nvlink) and `<case>.fatkit.ptx`. Needs only numpy and cupy (the GPU machine has them; fatkit itself is not needed
there). For every case: fresh random inputs (plus the edge values the manifest lists), outputs poisoned
with 0xA5 bytes before each run, both modules loaded through the CUDA driver (the PTX is JIT-compiled by
the driver), launched with the same arguments, outputs compared bit for bit (or within `ulp` units in the
last place of f32 results, for `.approx` forms), and each kernel timed with CUDA events (median of
`--repeat` runs after a warm-up). Writes one JSON record per case.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import cupy as cp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import probe_numerics  # noqa: E402  (the mma cases' kernels and input distributions)

POISON = 0xA5
TABLE_BLOCK = 256  # threads per block of the table cases (their thread count is a multiple)
DTYPES = {"u8": np.uint8, "s8": np.int8, "u16": np.uint16, "s16": np.int16, "u32": np.uint32, "s32": np.int32,
          "u64": np.uint64, "s64": np.int64, "f32": np.float32, "f64": np.float64}


def spread_bits(count: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """Float bit patterns (f32 or f64) with every exponent field equally likely: normals across the whole range,
    subnormals, ±0, ±inf, NaNs; an eighth of them at f16/bf16/f32 rounding ties, an eighth near overflow."""
    if width == 32:
        bits = probe_numerics._spread_f32(count, rng)
        near = rng.integers(0, count, count // 8)
        bits[near] = (bits[near] & np.uint32(0x807FFFFF)) | np.uint32(0x7F000000)
        return bits
    sign = rng.integers(0, 2, count, dtype=np.uint64) << np.uint64(63)
    exponent = rng.integers(0, 2048, count, dtype=np.uint64) << np.uint64(52)
    mantissa = rng.integers(0, 1 << 52, count, dtype=np.uint64)
    ties = rng.random(count) < 0.125  # f32 ties: the 29 dropped bits exactly half
    mantissa = np.where(ties, (mantissa & np.uint64(~((1 << 29) - 1) & ((1 << 52) - 1))) | np.uint64(1 << 28), mantissa)
    return sign | exponent | mantissa


def generate(spec: dict, rng: np.random.Generator, spread: bool = False) -> np.ndarray:
    """An input array: `edge` values first (cycled as the manifest says), the rest random of the dtype; with
    `spread`, float arrays are exponent-spread bit patterns (`spread_bits`) instead."""
    dtype, count = np.dtype(DTYPES[spec["dtype"]]), spec["count"]
    kind = spec.get("random", "bits")
    if spread and spec["dtype"] in ("f32", "f64"):
        return spread_bits(count, 32 if spec["dtype"] == "f32" else 64, rng).view(dtype)
    if kind == "bits":
        data = rng.integers(0, 256, size=count * dtype.itemsize, dtype=np.uint8).view(dtype)
    elif kind == "uniform":
        low, high = spec.get("low", 0.0), spec.get("high", 1.0)
        data = rng.uniform(low, high, size=count).astype(dtype)
    elif kind == "range":
        low, high = spec.get("low", 0), spec.get("high", 1 << 16)
        data = rng.integers(low, high, size=count).astype(dtype)
    else:
        raise ValueError(f"unknown random kind {kind}")
    edges = spec.get("edges")
    if edges:
        raw = np.array(edges, dtype=np.uint64)
        pattern = np.resize(raw, min(count, len(raw) * spec.get("edge_repeat", 1)))
        head = data[: len(pattern)].view(np.uint8).reshape(len(pattern), dtype.itemsize)
        head[:] = pattern.view(np.uint8).reshape(-1, 8)[:, : dtype.itemsize]
    return data


def table_inputs(count: int, edges: list[int], rng: np.random.Generator) -> list[np.ndarray]:
    """a, b, c of a table case: every (edge, edge) pair first, then random 64-bit patterns."""
    a = rng.integers(0, 1 << 64, size=count, dtype=np.uint64)
    b = rng.integers(0, 1 << 64, size=count, dtype=np.uint64)
    c = rng.integers(0, 1 << 64, size=count, dtype=np.uint64)
    pairs = np.array([(x, y) for x in edges for y in edges], dtype=np.uint64)[:count]
    a[: len(pairs)], b[: len(pairs)] = pairs[:, 0], pairs[:, 1]
    c[: len(pairs)] = np.resize(np.array(edges, dtype=np.uint64), len(pairs))[::-1]
    # then exponent-spread values (a quarter of the threads): f64 patterns, f32 ones in the low word (random
    # high word), f16/bf16-range f32 values with ties; in thirds, so that each operand width sees them
    start, spread = len(pairs) + 768, count // 4
    third = spread // 3
    for x in (a, b, c):
        x[start:start + third] = spread_bits(third, 64, rng)
        low = spread_bits(third, 32, rng).astype(np.uint64)
        x[start + third:start + 2 * third] = (x[start + third:start + 2 * third] & np.uint64(0xFFFFFFFF00000000)) | low
        f16 = probe_numerics.float_bits("f16", third, "wide", rng) | (probe_numerics.float_bits("f16", third, "wide", rng)
                                                                     << np.uint64(16))
        x[start + 2 * third:start + 3 * third] = (x[start + 2 * third:start + 3 * third]
                                                  & np.uint64(0xFFFFFFFF00000000)) | f16
    # small values too: shift counts, bit positions and lane numbers live in the low bits
    a[len(pairs): len(pairs) + 256] %= 70
    b[len(pairs) + 128: len(pairs) + 512] %= 70
    c[len(pairs) + 256: len(pairs) + 768] %= 70
    return [a, b, c]


class Launch:
    """One kernel with its arguments, run from a loaded module."""

    def __init__(self, module: cp.RawModule, case: dict, arrays: list, outputs: list[int]):
        self.kernel = module.get_function(case["kernel"])
        self.case, self.arrays, self.outputs = case, arrays, outputs

    def args(self) -> tuple:
        values = []
        for spec, array in zip(self.case["params"], self.arrays):
            if spec["kind"] == "scalar":
                values.append(DTYPES[spec["dtype"]](spec["value"]))
            else:
                values.append(array)
        return tuple(values)

    def run(self) -> None:
        self.kernel(tuple(self.case["grid"]), tuple(self.case["block"]), self.args(),
                    shared_mem=self.case.get("shared", 0))


def ulp_distance(x: np.ndarray, y: np.ndarray, width: int) -> np.ndarray:
    """Distance in units in the last place between float bit patterns of `width` bits (NaN to NaN: 0)."""
    unsigned, floating = (np.uint32, np.float32) if width == 32 else (np.uint64, np.float64)
    sign = 1 << (width - 1)

    def ordered(bits: np.ndarray) -> list[int]:  # bit patterns → integers in the order of their values
        return [(sign - 1 - (v - sign)) if v >= sign else v + sign for v in (int(b) for b in bits)]
    both_nan = np.isnan(x.astype(unsigned).view(floating)) & np.isnan(y.astype(unsigned).view(floating))
    distance = np.array([abs(p - q) for p, q in zip(ordered(x), ordered(y))], dtype=object)
    return np.where(both_nan, 0, distance)


def f64_nan_pairs(expected: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Where both f64 words (uint64) are NaNs: IEEE 754 and the PTX ISA leave a NaN result's sign and payload
    open (which input NaN propagates, or the canonical one), so only NaN-ness is compared there."""
    return np.isnan(expected.view(np.float64)) & np.isnan(got.view(np.float64))


def compare(case: dict, expected: bytes, got: bytes) -> tuple[bool, str, np.ndarray]:
    """(equal within the case's tolerance, what differs, the indices of differing 64-bit words)."""
    if expected == got:
        return True, "", np.array([], dtype=np.int64)
    if len(expected) % 8:
        return False, "outputs differ", np.array([], dtype=np.int64)
    e, g = np.frombuffer(expected, dtype=np.uint64), np.frombuffer(got, dtype=np.uint64)
    bad = np.nonzero(e != g)[0]
    if case.get("f64_nan_open"):
        open_bits = f64_nan_pairs(e[bad], g[bad])
        if open_bits.all():
            return True, f"NaN bits: {len(bad)} f64 NaN results of another sign or payload", bad
    ulp, kind = case.get("ulp", 0), case.get("ulp_type", "f32")
    if ulp and kind == "f64":
        distance = ulp_distance(e[bad], g[bad], 64)
        if distance.max() <= ulp:
            return True, f"within {int(distance.max())} ulp (f64)", bad
    elif ulp and case["kind"] == "table":  # the f32 result is the low word; the high word must match
        distance = ulp_distance((e[bad] & 0xFFFFFFFF).astype(np.uint32), (g[bad] & 0xFFFFFFFF).astype(np.uint32), 32)
        if np.all((e[bad] >> 32) == (g[bad] >> 32)) and distance.max() <= ulp:
            return True, f"within {int(distance.max())} ulp", bad
    elif ulp:  # a program whose outputs are all f32
        e32, g32 = np.frombuffer(expected, dtype=np.uint32), np.frombuffer(got, dtype=np.uint32)
        words = np.nonzero(e32 != g32)[0]
        distance = ulp_distance(e32[words], g32[words], 32)
        if distance.max() <= ulp:
            return True, f"within {int(distance.max())} ulp (f32)", bad
    first = [f"[{i}] nvidia {int(e[i]):#018x} fatkit {int(g[i]):#018x}" for i in bad[:4]]
    return False, f"{len(bad)} of {len(e)} words differ: " + "; ".join(first), bad


def _reads_envreg(ptx: str, kernel: str) -> bool:
    """Whether the kernel reads %envreg: cooperative groups' grid.sync() finds its workspace there, which only a
    cooperative launch sets (the re-lowered kernel is launched the same way)."""
    start = ptx.find(f".entry {kernel}(")
    end = ptx.find(".entry ", start + 1)
    return start >= 0 and "%envreg" in ptx[start:end if end > 0 else len(ptx)]


MMA_WARPS = 32  # warps an mma case runs (its exact outputs and the replay keep REPLAY_WARPS of them)
REPLAY_WARPS = 4
REPLAY_TABLE_THREADS = 256
replay_arrays: dict[str, np.ndarray] = {}  # what the AMD replay needs: inputs and the original PTX's outputs
replay_index: list[dict] = []
exact_arrays: dict[str, np.ndarray] = {}  # `exact` mma cases: inputs and fatkit's outputs, judged by report.py
failed_mma_arrays: dict[str, np.ndarray] = {}  # a failing sm90 case whole: inputs and both outputs, to study the model


def _replay_table(case: dict, module: cp.RawModule, host_inputs: list[np.ndarray]) -> None:
    """The table case on its first REPLAY_TABLE_THREADS threads: inputs and the original PTX's output."""
    count = REPLAY_TABLE_THREADS
    inputs = [x[:count].copy() for x in host_inputs]
    out = cp.full(count * 8, POISON, dtype=cp.uint8)
    kernel = module.get_function(case["kernel"])
    kernel((1, 1, 1), (count, 1, 1), (*(cp.asarray(x) for x in inputs), out, np.uint32(count)))
    key = case["name"]
    for name, x in zip("abc", inputs):
        replay_arrays[f"{key}:{name}"] = x
    replay_arrays[f"{key}:out"] = cp.asnumpy(out).view(np.uint64)
    replay_index.append({"name": key, "family": case["family"], "ptx": {"table": case["kernel"]},
                         "kernel": case["kernel"], "grid": [1, 1, 1], "block": [count, 1, 1], "shared": 0,
                         "args": [{"array": f"{key}:a"}, {"array": f"{key}:b"}, {"array": f"{key}:c"},
                                  {"output": f"{key}:out"}, {"scalar": "u32", "value": count}],
                         "compare": {"ulp": case.get("ulp", 0), "ulp_type": case.get("ulp_type", "f32")}})


def run_mma_case(case: dict, build: Path, rng: np.random.Generator) -> dict:
    """An mma/wmma case: the lane records of its distribution through the original PTX and fatkit's; sm90
    compared bit for bit, exact kept for the host reference (report.py)."""
    record = {"name": case["name"], "family": case["family"], "kernel": case["kernel"], "inputs": case["inputs"]}
    if case.get("status") != "translated":
        record.update(status="not-translated", reason=case.get("reason"))
        return record
    form, kind = case["form"], case["kind"]
    try:
        if kind == "mma":
            host = probe_numerics.mma_record(form, case["distribution"], rng, 32 * MMA_WARPS)
            shape, dtype = probe_numerics.mma_output_shape(form, 32 * MMA_WARPS)
        else:
            host = probe_numerics.wmma_record(form, case["distribution"], rng, MMA_WARPS)
            shape, dtype = probe_numerics.wmma_output_shape(form, MMA_WARPS)
        outputs = []
        for path in (case["original"], case["relowered"]):
            module = cp.RawModule(path=str(build / path))
            out = cp.full(shape, 0xA5, dtype=cp.uint8) if dtype == np.uint8 else cp.full(shape, 0xA5A5A5A5, dtype=dtype)
            module.get_function(case["kernel"])((MMA_WARPS, 1, 1), (32, 1, 1), (cp.asarray(host), out))
            cp.cuda.runtime.deviceSynchronize()
            outputs.append(cp.asnumpy(out))
        keep = 32 * REPLAY_WARPS if kind == "mma" else REPLAY_WARPS
        if case["numerics"] == "exact":
            exact_arrays[f"{case['name']}:in"] = host[:keep]
            exact_arrays[f"{case['name']}:out"] = outputs[1][:keep]
            record.update(status="pending-reference", form=form, kind=kind)
            return record
        ok = bool(np.array_equal(outputs[0], outputs[1]))
        bad = np.nonzero(outputs[0].reshape(-1) != outputs[1].reshape(-1))[0]
        detail = "" if ok else f"{len(bad)} of {outputs[0].size} words differ: " + "; ".join(
            f"[{i}] nvidia {int(outputs[0].reshape(-1)[i]):#x} fatkit {int(outputs[1].reshape(-1)[i]):#x}"
            for i in bad[:4])
        if not ok and form["types"]["d"] == "f64" and f64_nan_pairs(outputs[0].reshape(-1)[bad],
                                                                     outputs[1].reshape(-1)[bad]).all():
            # DMMA's NaN against fatkit's fma chain's: both NaN, sign and payload open (docs/numerics.md)
            ok, detail = True, f"NaN bits: {len(bad)} f64 NaN results of another sign or payload"
        record.update(status="pass" if ok else "fail", detail=detail)
        if not ok:
            failed_mma_arrays[f"{case['name']}:in"] = host
            failed_mma_arrays[f"{case['name']}:nvidia"] = outputs[0]
            failed_mma_arrays[f"{case['name']}:fatkit"] = outputs[1]
        if not case["name"].endswith("@wave64"):
            key = case["name"]
            replay_arrays[f"{key}:in"] = host[:keep]
            replay_arrays[f"{key}:out"] = outputs[0][:keep]
            replay_index.append({"name": key, "family": case["family"], "ptx": {kind: form["name"]},
                                 "kernel": case["kernel"], "grid": [REPLAY_WARPS, 1, 1],
                                 "block": [32, 1, 1], "shared": 0,
                                 "args": [{"array": f"{key}:in"}, {"output": f"{key}:out"}], "compare": {"ulp": 0}})
    except Exception as exc:  # a load or launch failure is a failed case, with the driver's words
        record.update(status="error", detail=f"{type(exc).__name__}: {exc}"[:500])
    return record


def run_case(case: dict, build: Path, repeat: int, rng: np.random.Generator, spread: bool = False) -> dict:
    if case.get("kind") in ("mma", "wmma"):
        return run_mma_case(case, build, rng)
    record = {"name": case["name"] + (".spread" if spread else ""), "family": case["family"],
              "kernel": case["kernel"], "inputs": case.get("inputs") or program_input_kinds(case, spread)}
    if case.get("status") != "translated":
        record.update(status="not-translated", reason=case.get("reason"))
        return record
    try:
        # an -rdc program's original is a cubin (nvlink's), loaded by the driver as it is: fatkit's PTX says
        ptx = case["original"] if case["original"].endswith(".ptx") else case["relowered"]
        cooperative = _reads_envreg((build / ptx).read_text(), case["kernel"])
        original = cp.RawModule(path=str(build / case["original"]), enable_cooperative_groups=cooperative)
        relowered = cp.RawModule(path=str(build / case["relowered"]), enable_cooperative_groups=cooperative)
        if case["kind"] == "table":
            host_inputs = table_inputs(case["count"], case["edges"], rng)
            params = [{"kind": "in"}] * 3 + [{"kind": "out", "bytes": case["count"] * 8}]
            case = {**case, "params": params + [{"kind": "scalar", "dtype": "u32", "value": case["count"]}],
                    "grid": [case["count"] // TABLE_BLOCK, 1, 1], "block": [TABLE_BLOCK, 1, 1]}
        else:
            host_inputs = [generate(p, rng, spread) if p["kind"] in ("in", "inout") else None for p in case["params"]]
        results = []
        timings = []
        for module in (original, relowered):
            arrays, outputs = [], []
            for index, spec in enumerate(case["params"]):
                if spec["kind"] in ("in", "inout"):
                    arrays.append(cp.asarray(host_inputs[index]))
                    if spec["kind"] == "inout":
                        outputs.append(index)
                elif spec["kind"] == "out":
                    arrays.append(cp.full(spec["bytes"], POISON, dtype=cp.uint8))
                    outputs.append(index)
                else:
                    arrays.append(None)
            launch = Launch(module, case, arrays, outputs)
            launch.run()
            cp.cuda.runtime.deviceSynchronize()
            results.append(b"".join(cp.asnumpy(arrays[i]).tobytes() for i in outputs))
            timings.append(time_launch(launch, case, host_inputs, repeat))
        if case["kind"] == "table" and not spread:
            _replay_table(case, original, host_inputs)
        ok, detail, bad = compare(case, results[0], results[1])
        record.update(status="pass" if ok else "fail", detail=detail, original_ms=timings[0],
                      relowered_ms=timings[1])
        if not ok and case["kind"] == "table":  # the inputs of the first differing threads, to reproduce them
            a, b, c = host_inputs
            record["failing_inputs"] = [[hex(int(a[i])), hex(int(b[i])), hex(int(c[i]))] for i in bad[:16]]
    except Exception as exc:  # a load or launch failure is a failed case, with the driver's words
        record.update(status="error", detail=f"{type(exc).__name__}: {exc}"[:500])
    return record


# float results of these kernels come from small integers (mma.cu's float forms): exact whatever the arithmetic
_EXACT_FLOAT_KERNELS = ("f16", "bf16", "tf32", "e4m3", "e5m2", "f64")


def program_input_kinds(case: dict, spread: bool) -> list[str]:
    """What a program case's inputs are: random bits/values, exponent-spread floats, or small integers."""
    if case["family"].startswith("program:mma") and any(t in case["kernel"] for t in _EXACT_FLOAT_KERNELS) \
            and not case["kernel"].endswith(("s8", "u8", "s4", "u4")):
        return ["integer"]
    kinds = set()
    for p in case.get("params", []):
        if p["kind"] not in ("in", "inout"):
            continue
        if spread and p["dtype"] in ("f32", "f64"):
            kinds.add("spread")
        elif p.get("random") == "range" and p["dtype"] in ("f32", "f64"):
            kinds.add("integer")
        else:
            kinds.add("random")
    return sorted(kinds) or ["random"]


def has_float_inputs(case: dict) -> bool:
    return any(p["kind"] in ("in", "inout") and p["dtype"] in ("f32", "f64") for p in case.get("params", []))


def time_launch(launch: Launch, case: dict, host_inputs: list, repeat: int) -> float:
    """Median milliseconds of `repeat` launches (in-place kernels re-run on their own output: time only)."""
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    launch.run()
    for _ in range(repeat):
        start.record()
        launch.run()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--only", default=None)
    parser.add_argument("--replay-out", type=Path, default=None,
                        help="where to write replay.npz + replay_index.json, mma_exact.npz and mma_failed.npz")
    parser.add_argument("--seed", type=int, default=None,
                        help="the inputs' random seed (a run's results name theirs): the same build, cases and seed "
                             "give the same inputs again")
    args = parser.parse_args()
    manifest = json.loads((args.build / "manifest.json").read_text())
    seed = args.seed if args.seed is not None else time.time_ns() & 0xFFFFFFFF
    rng = np.random.default_rng(seed)
    records, started = [], time.perf_counter()
    device = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    for case in manifest["cases"]:
        if args.only and args.only not in case["name"]:
            continue
        # an exponent-spread run for programs with float inputs, except --use_fast_math builds (`ulp`): their
        # .approx functions have error bounds only on restricted domains (sin/cos: absolute, within ±π…), so
        # spread arguments have no result to compare; each .approx form meets spread inputs in the table cases
        spread_run = case.get("kind") == "program" and has_float_inputs(case) and not case.get("ulp")
        runs = [False] + ([True] if spread_run else [])
        for spread in runs:
            record = run_case(case, args.build, args.repeat, rng, spread)
            records.append(record)
            if record["status"] not in ("pass", "not-translated", "pending-reference"):
                print(f"{record['status']:5s} {record['name']}: {record.get('detail', '')}", flush=True)
        if len(records) % 200 < len(runs):  # partial results survive a run cut short
            save(args, manifest, device, seed, records)
    counts = {s: sum(r["status"] == s for r in records) for s in ("pass", "fail", "error", "not-translated")}
    print(f"{len(records)} cases on {device} in {time.perf_counter() - started:.0f} s (seed {seed}): {counts}")
    save(args, manifest, device, seed, records)


def save(args, manifest: dict, device: str, seed: int, records: list[dict]) -> None:
    result = {"device": device, "seed": seed, "manifest": manifest["meta"], "cases": records}
    out = args.out or args.build / "results.json"
    out.write_text(json.dumps(result, indent=1))
    if args.replay_out:
        args.replay_out.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(args.replay_out / "replay.npz", **replay_arrays)
        (args.replay_out / "replay_index.json").write_text(json.dumps({"device": device, "seed": seed,
                                                                       "cases": replay_index}, indent=0))
        np.savez_compressed(args.replay_out / "mma_exact.npz", **exact_arrays)
        np.savez_compressed(args.replay_out / "mma_failed.npz", **failed_mma_arrays)


if __name__ == "__main__":
    sys.exit(main())
