"""TMA on the H200: the original kernels with NVIDIA's tensor maps against fatkit's re-lowered sm_90 PTX with
fatkit's maps, and both against the numpy model (tests/tma.py).

    python verification/tma.py build -o DIR      # here: the PTX (original, re-lowered), the cases, the helpers
    python DIR/tma.py run DIR [-o OUT]           # on the GPU machine: numpy and the CUDA driver (libcuda) only
    python verification/tma.py sample CASES RAW -o tests/samples/h200/tma_samples.npz   # a run → test sample

A child process runs the cases in order until one fails (a faulting kernel spoils its CUDA context), and
the next child goes on after it; the original kernel runs first, so a case whose error names the `orig`
kernel was refused by NVIDIA's hardware itself. The valid cases run first, then the probes of
tests/tma.py's probe_cases and the device-built maps (those that may fault last); the run ends with a line
per probe. A case that gives no answer within CASE_TIMEOUT seconds is killed and recorded as timed
out, and the next child goes on after it, so no fault or hang loses the other cases. Results:
OUT/tma_results.json and OUT/tma_raw.npz (written after every child, so a run cut short keeps what it found).

The original kernels run with maps from the driver's own cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col;
the re-lowered ones (fatkit's lowering of cp.async.bulk.tensor into loads and stores, for the `sm_90` target)
with the 128-byte maps of fatkit's reference encoder (fatkit/runtime.py) over the same device memory. Cases:
tile loads (ranks 1-5, swizzles none/32/64/128 B, boxes partly or wholly outside, traversal strides, zero and
NaN fill, 1-8-byte elements), im2col loads, tile stores and reductions inside the tensor, all with the first
coordinate on a 16-byte boundary and the expect-tx bytes the copy transfers; tma.coverage_cases: one case each of the NaN fill under every swizzle, traversal
strides and a box wholly outside; the same copies issued under elect.sync by one or two warps of a 64-thread
block (tma.elected_cases; fatkit spreads each over the lanes of its warp, passes/elected.py); the probes; and
a map built on the device with tensormap.replace (its bytes against the driver's encoding of the same map, and a load
through it). The record of each case says whether NVIDIA and fatkit agree byte for byte, and whether
each agrees with the model (with the first differing bytes).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import queue
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
THREADS = 64
PATIENCE = 1 << 16  # mbarrier wait tries before a thread gives up (and reports it): a wrong count costs ~1 s, not minutes
CASE_TIMEOUT = 30  # seconds a child may take for one case (module loading included) before it is killed


# ------------------------------------------------------------------------------------------- build (here)

def replace_cases() -> list[dict]:
    """The device-built map (tests/tma.py REPLACE): flags bit 0 replaces dimension 0's element stride too,
    bit 1 loads through the map; without bit 1 only the map is built and copied out (never faults)."""
    question = ("the map built on the device from zero bytes: its bytes against the driver's encoding of the "
                "same map, and whether a load through it faults on NVIDIA")
    return [{"kind": "replace", "name": f"probe.replace.{what}", "flags": flags, "probe": question,
             "may_fault": bool(flags & 2)}
            for what, flags in (("dump", 0), ("dump.stride0", 1), ("load.stride0", 3), ("load", 2))]


def cases() -> list[dict]:
    """Every case in the order the run takes them: valid ones, then probes (those that may fault last)."""
    sys.path.insert(0, str(HERE.parent))
    from tests import tma

    valid = [tma.anchor_case(swizzle, coords) for swizzle in range(4) for coords in ([0, 0], [48, 60], [-16, -3])]
    valid += tma.edge_cases() + [tma.load_case(s) for s in range(40)]
    valid += [tma.im2col_case(s) for s in range(8)] + [tma.store_case(s) for s in range(12)]
    valid += tma.coverage_cases() + tma.elected_cases()
    probes = tma.probe_cases()
    safe = [case for case in probes if not case.get("may_fault")]
    return valid + safe + replace_cases() + [case for case in probes if case.get("may_fault")]


def build(out: Path) -> None:
    sys.path.insert(0, str(HERE.parent))
    from fatkit.translate.pipeline import Options, translate
    from tests import tma

    out.mkdir(parents=True, exist_ok=True)
    modules = {"tma": tma.module(), "replace": tma.REPLACE, "elected": tma.elected_module()}
    for name, text in modules.items():
        (out / f"{name}.orig.ptx").write_text(text)
        translation = translate(text, Options(target="sm_90"))
        bad = [(k.name, k.reason) for k in translation.kernels if k.status != "ok"]
        if bad:
            raise SystemExit(f"{name}: not translated: {bad}")
        (out / f"{name}.fatkit.ptx").write_bytes(translation.product)
    listed = cases()
    (out / "cases.json").write_text(json.dumps(listed, indent=1))
    shutil.copy(HERE.parent / "tests" / "tma.py", out / "tma_model.py")
    shutil.copy(HERE.parent / "fatkit" / "runtime.py", out / "fatkit_runtime.py")
    shutil.copy(Path(__file__), out / "tma.py")
    print(f"wrote {len(listed)} cases ({sum('probe' in c for c in listed)} probes) and {2 * len(modules)} PTX "
          f"modules to {out}")


# recorded H200 cases kept as regression samples (sample()): each NVIDIA box is whole, because the run
# completed with the expect-tx NVIDIA transfers or never completed (its wait ran out long after the copy
# landed); none completed early on a smaller expect-tx. They cover the NaN fill of f64/bf16/f32, swizzled
# rows shorter than the span, dimension 0's stride, strides of outer dimensions, im2col's batch stride and
# an in-bounds reduction.
SAMPLED = ("anchor.swizzle3.-16.-3", "load4d.5", "load4d.4.aligned", "load4d.10.aligned", "load1d.37.aligned",
           "load2d.24.aligned", "load2d.21.aligned", "load4d.8.aligned", "load5d.20.aligned", "load3d.31.aligned",
           "im2col3d.7", "im2col5d.4", "im2col4d.6", "reduce_xor2d.7")


def sample(cases_file: Path, raw_file: Path, out: Path) -> None:
    """The SAMPLED cases of a run (its cases.json and tma_raw.npz) as a test sample: per case its
    description ('NAME:case', JSON), its tensor ('NAME:tensor'), a store's source box ('NAME:source') and
    NVIDIA's result ('NAME:nvidia': the shared box of a load, the tensor after a store)."""
    sys.path.insert(0, str(HERE.parent))
    from tests import tma

    by_name = {case["name"]: case for case in json.loads(cases_file.read_text())}
    arrays: dict[str, np.ndarray] = {}
    with np.load(raw_file) as raw:
        for name in SAMPLED:
            case = by_name[name]
            arrays[f"{name}:case"] = np.frombuffer(json.dumps(case).encode(), np.uint8)
            arrays[f"{name}:tensor"] = tma.tensor(case)
            if case["kind"] == "store":
                arrays[f"{name}:source"] = tma.source(case)
            arrays[f"{name}:nvidia"] = raw[f"{name}:orig"]
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **arrays)
    print(f"wrote {len(SAMPLED)} cases to {out} ({out.stat().st_size} bytes)")


# ------------------------------------------------------------------------------------------- the driver

class Driver:
    """The few CUDA driver calls the run needs, through ctypes."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.check("cuInit", 0)
        device, context = ctypes.c_int(), ctypes.c_void_p()
        self.check("cuDeviceGet", ctypes.byref(device), 0)
        self.check("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
        self.check("cuCtxSetCurrent", context)
        u64p, u32p, intp = (ctypes.POINTER(t) for t in (ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int))
        self.lib.cuTensorMapEncodeTiled.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                                                    u64p, u64p, u32p, u32p] + [ctypes.c_int] * 4
        self.lib.cuTensorMapEncodeIm2col.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                                                     u64p, u64p, intp, intp, ctypes.c_uint32, ctypes.c_uint32, u32p] \
            + [ctypes.c_int] * 4

    def error(self, code: int) -> str:
        text = ctypes.c_char_p()
        self.lib.cuGetErrorString(code, ctypes.byref(text))
        return f"{code} ({text.value.decode() if text.value else '?'})"

    def check(self, name: str, *args) -> None:
        code = getattr(self.lib, name)(*args)
        if code:
            raise RuntimeError(f"{name}: {self.error(code)}")

    def module(self, image: bytes) -> ctypes.c_void_p:
        handle = ctypes.c_void_p()
        self.check("cuModuleLoadData", ctypes.byref(handle), ctypes.c_char_p(image + b"\0"))
        return handle

    def function(self, module: ctypes.c_void_p, name: str) -> ctypes.c_void_p:
        handle = ctypes.c_void_p()
        self.check("cuModuleGetFunction", ctypes.byref(handle), module, name.encode())
        return handle

    def alloc(self, size: int) -> int:
        pointer = ctypes.c_uint64()
        self.check("cuMemAlloc_v2", ctypes.byref(pointer), ctypes.c_size_t(max(size, 16)))
        return pointer.value

    def upload(self, pointer: int, data: np.ndarray) -> None:
        self.check("cuMemcpyHtoD_v2", ctypes.c_uint64(pointer), data.ctypes.data_as(ctypes.c_void_p),
                   ctypes.c_size_t(data.nbytes))

    def download(self, pointer: int, size: int) -> np.ndarray:
        data = np.zeros(size, np.uint8)
        self.check("cuCtxSynchronize")
        self.check("cuMemcpyDtoH_v2", data.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint64(pointer),
                   ctypes.c_size_t(size))
        return data

    def free(self, pointer: int) -> None:
        self.check("cuMemFree_v2", ctypes.c_uint64(pointer))

    def launch(self, function: ctypes.c_void_p, params: list, threads: int) -> None:
        """params: ctypes objects, one a kernel parameter (the map as a 128-byte array)."""
        pointers = (ctypes.c_void_p * len(params))(*[ctypes.cast(ctypes.pointer(p), ctypes.c_void_p) for p in params])
        self.check("cuLaunchKernel", function, 1, 1, 1, threads, 1, 1, 0, None, pointers, None)
        self.check("cuCtxSynchronize")

    def encode(self, case: dict, address: int) -> bytes:
        """NVIDIA's map for the case (raises with the driver's error when it refuses the parameters)."""
        storage = np.zeros(256, np.uint8)
        start = (-storage.ctypes.data) % 64
        image = storage[start:start + 128]
        rank = case["rank"]
        dims = (ctypes.c_uint64 * rank)(*case["dims"])
        strides = (ctypes.c_uint64 * max(rank - 1, 1))(*case["strides"])
        steps = (ctypes.c_uint32 * rank)(*case["steps"])
        if case["kind"] == "im2col":
            lower = (ctypes.c_int * (rank - 2))(*case["lower"])
            upper = (ctypes.c_int * (rank - 2))(*case["upper"])
            code = self.lib.cuTensorMapEncodeIm2col(image.ctypes.data, case["data_type"], rank, address, dims, strides,
                                                    lower, upper, case["channels"], case["pixels"], steps, 0,
                                                    case["swizzle"], 0, int(case["nan"]))
        else:
            box = (ctypes.c_uint32 * rank)(*case["box"])
            code = self.lib.cuTensorMapEncodeTiled(image.ctypes.data, case["data_type"], rank, address, dims, strides,
                                                   box, steps, 0, case["swizzle"], 0, int(case["nan"]))
        if code:
            raise RuntimeError(f"cuTensorMapEncode: {self.error(code)}")
        return image.tobytes()


def _params(case: dict, values: list, image: bytes) -> list:
    """ctypes objects for the kernel's parameters (tma_model.arguments order, then an elected kernel's warps)."""
    params = [(ctypes.c_uint8 * 128).from_buffer_copy(image), ctypes.c_uint64(values[1])]
    params += [ctypes.c_uint32(v) for v in values[2:9]]  # five coordinates, bytes, patience
    rest = values[9:]
    if case["kind"] == "im2col":
        params += [ctypes.c_uint16(v) for v in rest[:3]]
    elif case["kind"] == "store":
        params.append(ctypes.c_uint64(rest[0]))
    if "elected" in case:
        params.append(ctypes.c_uint32(case["elected"]))
    return params


def _first_difference(a: np.ndarray, b: np.ndarray) -> str:
    bad = np.flatnonzero(a != b)
    if not len(bad):
        return ""
    first = bad[0]
    return (f"{len(bad)} bytes differ, first at {first}: {a[first:first + 8].tobytes().hex()} vs "
            f"{b[first:first + 8].tobytes().hex()}")


# ------------------------------------------------------------------------------------------- run (GPU)

def run(directory: Path, out: Path | None) -> int:
    cases = json.loads((directory / "cases.json").read_text())
    records: dict[int, dict] = {}
    raw: dict[str, np.ndarray] = {}  # "case:orig|fatkit|model" → the shared-memory box (a store: the tensor)
    position = 0
    # a child runs cases in order until one fails (a kernel that faults spoils its CUDA context), then the
    # next child goes on after it
    while position < len(cases):
        finished, problem = _child(directory, position)
        for record in finished:
            for kind, data in record.pop("raw", {}).items():  # the whole buffers, kept apart from the summary
                raw[f"{record['name']}:{kind}"] = np.frombuffer(bytes.fromhex(data), np.uint8)
            records[record["index"]] = record
            print(json.dumps(record), flush=True)
        position = finished[-1]["index"] + 1 if finished else position
        if (not finished or "error" not in finished[-1]) and position < len(cases):
            records[position] = {"index": position, "name": cases[position]["name"],
                                 "error": problem or "child died"}
            print(json.dumps(records[position]), flush=True)
            position += 1
        if out is not None:  # after every child: a run cut short by its caller keeps what it found
            _save(out, [records[i] for i in sorted(records)], raw)
    results = [records[i] for i in sorted(records)]
    agreed = sum(1 for r in results if r.get("nvidia_vs_fatkit") == "")
    modelled = sum(1 for r in results if r.get("nvidia_vs_model") == "")
    print(f"\n{len(results)} cases: NVIDIA = fatkit in {agreed}, NVIDIA = model in {modelled}, "
          f"errors {sum(1 for r in results if 'error' in r)}")
    print("probes:")
    for record in results:
        if "probe" in cases[record["index"]]:
            print(f"  {record['name']}: {_outcome(record)}")
    if out is not None:
        _save(out, results, raw)
    return 0


def _outcome(record: dict) -> str:
    """A probe's result in one line: fault, completion, agreement."""
    if "error" in record:
        return f"FAULT ({record['error'][:120]})"
    parts = [f"{key} {record[key]}" for key in ("orig_completed", "fatkit_completed") if key in record]
    parts += [f"{key} {'same' if record[key] == '' else record[key][:80]}"
              for key in ("nvidia_vs_fatkit", "nvidia_vs_model", "fatkit_vs_model") if key in record]
    parts += [f"{key} {record[key]}" for key in ("nvidia_map_vs_driver", "fatkit_map_is_encoders") if key in record]
    return ", ".join(parts)


def _child(directory: Path, first: int) -> tuple[list[dict], str]:
    """Run cases from `first` on in a child process: the records it finished, and why it stopped (its error
    output, or the timeout of a case that gave no answer within CASE_TIMEOUT seconds, when it is killed)."""
    child = subprocess.Popen([sys.executable, __file__, "cases", str(directory), "--index", str(first)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()

    def forward() -> None:  # the child's lines, then None at its end
        for line in child.stdout:
            lines.put(line)
        lines.put(None)

    errors: list[str] = []
    threading.Thread(target=forward, daemon=True).start()
    threading.Thread(target=lambda: errors.extend(child.stderr), daemon=True).start()
    finished = []
    while True:
        try:
            line = lines.get(timeout=CASE_TIMEOUT)
        except queue.Empty:
            child.kill()
            child.wait()
            return finished, f"timed out: no answer within {CASE_TIMEOUT} s"
        if line is None:
            child.wait()
            return finished, "".join(errors).strip()[-400:]
        if line.startswith("{"):
            finished.append(json.loads(line))


def _save(out: Path, results: list[dict], raw: dict[str, np.ndarray]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "tma_results.json").write_text(json.dumps(results, indent=1))
    np.savez_compressed(out / "tma_raw.npz", **raw)


def run_from(directory: Path, first: int) -> None:
    """Cases from `first` on in this process, a JSON line each, until one fails."""
    sys.path.insert(0, str(directory))
    sys.path.insert(0, str(Path.cwd()))  # the repository: fatkit_runtime imports fatkit.errors
    import fatkit_runtime as runtime
    import tma_model as tma

    cases = json.loads((directory / "cases.json").read_text())
    driver = Driver()
    modules = _Modules(driver, directory)
    for index in range(first, len(cases)):
        case = cases[index]
        record = {"index": index, "name": case["name"]}
        try:
            run_one = _run_replace if case["kind"] == "replace" else _run_case
            record.update(run_one(driver, modules, runtime, tma, case))
        except Exception as error:  # noqa: BLE001 (recorded; the parent goes on in a fresh process)
            record["error"] = f"{type(error).__name__}: {error}"
        print(json.dumps(record), flush=True)
        if "error" in record:
            return


class _Modules(dict):
    """(module, kind) → the loaded module, each loaded (JIT-compiled by the driver) when a case first needs it:
    a child that starts after a fault loads only what its cases use."""

    def __init__(self, driver: Driver, directory: Path) -> None:
        super().__init__()
        self.driver, self.directory = driver, directory

    def __missing__(self, key: tuple[str, str]) -> ctypes.c_void_p:
        name, kind = key
        self[key] = self.driver.module((self.directory / f"{name}.{kind}.ptx").read_bytes())
        return self[key]


def _run_case(driver: Driver, modules: dict, runtime, tma, case: dict) -> dict:
    memory = tma.tensor(case)
    tensor = driver.alloc(memory.nbytes)
    box = tma.source(case)
    source = driver.alloc(box.nbytes)
    driver.upload(source, box)
    result = {}
    outputs = {}
    for kind in case.get("kinds", ("orig", "fatkit")):
        driver.upload(tensor, memory)
        out = driver.alloc(tma.out_bytes(THREADS))
        driver.upload(out, np.zeros(tma.out_bytes(THREADS), np.uint8))
        if kind == "orig":
            image = driver.encode(case, tensor)
        elif case["kind"] == "im2col":
            image = runtime.encode_im2col(case["data_type"], tensor, case["dims"], case["strides"], case["lower"],
                                          case["upper"], case["channels"], case["pixels"], case["steps"],
                                          swizzle=case["swizzle"], oob_fill=int(case["nan"]))
        else:
            image = runtime.encode_tensor_map(case["data_type"], tensor, case["dims"], case["strides"], case["box"],
                                              case["steps"], swizzle=case["swizzle"], oob_fill=int(case["nan"]))
        elected = "elected" in case
        function = driver.function(modules["elected" if elected else "tma", kind],
                                   ("elected_" if elected else "") + tma.kernel_name(case))
        try:
            driver.launch(function, _params(case, tma.arguments(case, image, out, PATIENCE, source), image), THREADS)
        except RuntimeError as error:
            raise RuntimeError(f"the {kind} kernel: {error}") from error
        if case["kind"] == "store":
            outputs[kind] = driver.download(tensor, memory.nbytes)
        else:
            raw = driver.download(out, tma.out_bytes(THREADS))
            outputs[kind] = raw[:tma.SHARED_BYTES]
            result[f"{kind}_completed"] = bool((raw[tma.SHARED_BYTES:].view(np.uint32) == 1).all())
        driver.free(out)
    driver.free(tensor)
    driver.free(source)
    want = tma.expected_elected(case, memory, case["elected"]) if "elected" in case else tma.expected(case, memory)
    result["raw"] = {kind: data.tobytes().hex() for kind, data in outputs.items()}
    result["raw"]["model"] = np.asarray(want, np.uint8).tobytes().hex()
    if len(outputs) == 2:
        result["nvidia_vs_fatkit"] = _first_difference(outputs["orig"], outputs["fatkit"])
    if "orig" in outputs:
        result["nvidia_vs_model"] = _first_difference(outputs["orig"], want)
    if "fatkit" in outputs:
        result["fatkit_vs_model"] = _first_difference(outputs["fatkit"], want)
    return result


def _run_replace(driver: Driver, modules: dict, runtime, tma, case: dict) -> dict:
    """The device-built map (replace_cases): both versions build it over the same tensor; with a load, the box
    is compared with the model, and either way the map NVIDIA's kernel wrote with the driver's encoding."""
    spec = tma.REPLACE_MAP
    memory = np.random.default_rng(5).integers(0, 256, spec["tensor_bytes"], dtype=np.uint8)
    tensor = driver.alloc(memory.nbytes)
    driver.upload(tensor, memory)
    outputs, maps = {}, {}
    for kind in ("orig", "fatkit"):
        out, built = driver.alloc(1024), driver.alloc(128)
        driver.upload(out, np.zeros(1024, np.uint8))
        driver.upload(built, np.zeros(128, np.uint8))
        function = driver.function(modules["replace", kind], "build")
        try:
            driver.launch(function, [ctypes.c_uint64(out), ctypes.c_uint64(built), ctypes.c_uint64(0),
                                     ctypes.c_uint64(tensor), ctypes.c_uint32(case["flags"]),
                                     ctypes.c_uint32(PATIENCE)], 1)
        except RuntimeError as error:
            raise RuntimeError(f"the {kind} kernel: {error}") from error
        outputs[kind] = driver.download(out, 128)
        maps[kind] = driver.download(built, 128).tobytes()
        driver.free(out)
        driver.free(built)
    tiled = {"kind": "load", "rank": 2, **spec}
    driver_map = driver.encode(tiled, tensor)
    encoded = runtime.encode_tensor_map(spec["data_type"], tensor, spec["dims"], spec["strides"], spec["box"],
                                        spec["steps"], swizzle=spec["swizzle"], oob_fill=int(spec["nan"]))
    driver.free(tensor)
    differing = [i for i in range(128) if maps["orig"][i] != driver_map[i]]
    result = {"nvidia_map": maps["orig"].hex(), "driver_map": driver_map.hex(),
              "nvidia_map_vs_driver": f"bytes {differing} differ" if differing else "same",
              "fatkit_map_is_encoders": maps["fatkit"] == encoded}
    if case["flags"] & 2:
        want = tma.load(memory, spec["dims"], spec["strides"], spec["size"], spec["box"], spec["steps"],
                        spec["coords"], spec["swizzle"], spec["nan"])[:128]
        result.update({"nvidia_vs_fatkit": _first_difference(outputs["orig"], outputs["fatkit"]),
                       "nvidia_vs_model": _first_difference(outputs["orig"], want),
                       "fatkit_vs_model": _first_difference(outputs["fatkit"], want)})
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("build", "run", "cases", "sample"))
    parser.add_argument("directory", nargs="?", type=Path, help="run: the build directory; sample: its cases.json")
    parser.add_argument("raw", nargs="?", type=Path, help="sample: the run's tma_raw.npz")
    parser.add_argument("-o", "--output", type=Path)
    parser.add_argument("--index", type=int, default=0)
    arguments = parser.parse_args()
    if arguments.mode == "build":
        build(arguments.output or HERE / "build-tma")
        return 0
    if arguments.mode == "sample":
        sample(arguments.directory, arguments.raw, arguments.output or HERE.parent / "tests" / "samples" / "h200"
               / "tma_samples.npz")
        return 0
    if arguments.mode == "cases":
        run_from(arguments.directory or HERE, arguments.index)
        return 0
    return run(arguments.directory or HERE, arguments.output)


if __name__ == "__main__":
    sys.exit(main())
