"""Clusters of CTAs on the H200: NVIDIA's own cluster kernels against fatkit's single-workgroup form of them
re-lowered to sm_90 PTX, and against the AMD executor (fatkit.emulate, gfx942 and gfx1100).

    python verification/clusters.py build -o DIR     # here (about a minute): nvcc and ptxas from pip, fatkit, the executor
    python DIR/clusters.py run DIR -o OUT             # on the GPU machine (under a minute): numpy and libcuda only
                                                      # (results: OUT/clusters_results.json; build dir ~0.2 MB)
                                                      # (tma.py, which build copies to DIR, gives the driver)

The kernels (verification/cuda/clusters.cu, compiled by nvcc -ptx -arch=sm_90) use `__cluster_dims__`,
cooperative groups' cluster.sync() (barrier.cluster), map_shared_rank (mapa, ld/atom.shared::cluster),
query_shared_rank (getctarank), the cluster registers, per-CTA __syncthreads() that diverge between the CTAs
of a cluster, and dynamic shared memory; a hand-written kernel (tests/test_translate_cluster.py's
ELECTED_MULTICAST) has one warp multicast a TMA box into the CTAs of a mask under elect.sync (NVIDIA's map
from cuTensorMapEncodeTiled, fatkit's from its encoder). Each runs in two forms:

- static: the PTX as nvcc wrote it (`.explicitcluster .reqnctapercluster cx, cy, cz`), launched by
  cuLaunchKernel; fatkit's form runs each cluster as one CTA of k·blockDim threads (lower/cluster.py);
- launch-given: the same PTX without `.reqnctapercluster` (a shape only the launch gives), launched by
  cuLaunchKernelEx with the cluster dimension attribute; fatkit's form reads the shape from the hidden
  parameter after CUDA's (docs/runtime.md), which the run writes as fatkit.runtime.plan_cluster_launch says.

fatkit's forms are launched with the geometry plan_cluster_launch gives (stored in cases.json at build).
The executor's outputs for the same inputs are computed at build and stored (executor.npz). A child process
runs each case (a fault spoils only its own CUDA context) under a timeout; the record says, per case, whether
NVIDIA = fatkit's sm_90 form, NVIDIA = the executor on gfx942 and on gfx1100 (with the first differing words).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

try:  # tma.py's driver: next to this script here and in a build directory (build copies it)
    from .tma import Driver
except ImportError:  # run as a script
    from tma import Driver

HERE = Path(__file__).resolve().parent
CASE_TIMEOUT = 60  # seconds a child may take for one case
PROCESSORS = ("gfx942", "gfx1100")

# name → kernel, grid (CTAs), block, cluster shape of the launch, dynamic shared bytes a CTA, input words, output words
CASES = {
    "ring.static": ("ring", (16, 1, 1), (64, 1, 1), (4, 1, 1), 0, 16 * 64, 16 * 64 * 4),
    "ring.launch4": ("ring", (16, 1, 1), (64, 1, 1), (4, 1, 1), 0, 16 * 64, 16 * 64 * 4),
    "ring.launch2": ("ring", (16, 1, 1), (64, 1, 1), (2, 1, 1), 0, 16 * 64, 16 * 64 * 4),
    "registers.static": ("registers", (4, 4, 1), (8, 4, 1), (2, 2, 1), 0, 0, 16 * 16 * 32),
    "registers.launch": ("registers", (4, 4, 1), (8, 4, 1), (1, 2, 1), 0, 0, 16 * 16 * 32),
    "divergent.static": ("divergent", (4, 1, 1), (96, 1, 1), (2, 1, 1), 96 * 4, 4 * 96, 4 * 96 * 2),
    "divergent.launch": ("divergent", (4, 1, 1), (96, 1, 1), (2, 1, 1), 96 * 4, 4 * 96, 4 * 96 * 2),
    # tests/test_translate_cluster.py's ELECTED_MULTICAST: rank 0's warp multicasts a 32-word TMA box (a tensor
    # of 64 words, through a tensor map) into the CTAs of the mask under elect.sync
    "multicast.static": ("elected_multicast", (8, 1, 1), (32, 1, 1), (4, 1, 1), 0, 64, 8 * 32),
    "multicast.launch": ("elected_multicast", (8, 1, 1), (32, 1, 1), (4, 1, 1), 0, 64, 8 * 32),
}
MASKS = {"multicast.static": 0b1011, "multicast.launch": 0b0110}  # the multicast cases' ctaMask
PLACEHOLDER_ADDRESS = 1 << 16  # fatkit's map's tensor at build; the run writes the tensor's (a u64 at offset 0)


def _form(name: str) -> str:
    return "static" if name.endswith(".static") else "launch"


def _module(name: str) -> str:
    return "multicast" if name.startswith("multicast.") else "clusters"


def _launch_given(ptx: str) -> str:
    """The PTX with its cluster shapes left to the launch (`.explicitcluster` alone)."""
    if ".explicitcluster" not in ptx:
        ptx = ptx.replace(".reqnctapercluster", ".explicitcluster .reqnctapercluster")
    return re.sub(r"\.reqnctapercluster[^\n]*\n", "\n", ptx)


# ------------------------------------------------------------------------------------------- build (here)

def build(out: Path) -> None:
    sys.path.insert(0, str(HERE.parent))
    from fatkit import runtime
    from fatkit.formats.hsaco import parse_code_object
    from fatkit.translate.pipeline import Options, translate
    from tests.amdrun import EmulatedProgram
    from tests.test_translate_cluster import ELECTED_MULTICAST

    out.mkdir(parents=True, exist_ok=True)
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise SystemExit("nvcc not on PATH (pip install nvidia-cuda-nvcc)")
    original = out / "clusters.static.orig.ptx"
    subprocess.run([nvcc, "-ptx", "-arch=sm_90", str(HERE / "cuda" / "clusters.cu"), "-o", str(original)], check=True)
    texts = {("clusters", "static"): original.read_text(), ("multicast", "static"): ELECTED_MULTICAST}
    for module in ("clusters", "multicast"):
        texts[module, "launch"] = _launch_given(texts[module, "static"])
    metadata = {}
    executors = {}
    for (module, form), text in texts.items():
        (out / f"{module}.{form}.orig.ptx").write_text(text)
        translation = translate(text, Options(target="sm_90"))
        bad = [(k.name, k.reason) for k in translation.kernels if k.status != "ok"]
        if bad:
            raise SystemExit(f"{module}.{form}: not translated for sm_90: {bad}")
        (out / f"{module}.{form}.fatkit.ptx").write_bytes(translation.product)
        for processor in PROCESSORS:
            code_object = translate(text, Options(target=processor)).product
            executors[module, form, processor] = EmulatedProgram(code_object)
            entries = {k[".name"]: k for k in parse_code_object(code_object).metadata["amdhsa.kernels"]}
            metadata[module, form, processor] = entries
    rng = np.random.default_rng(2190)
    inputs, outputs, cases = {}, {}, []
    for name, (kernel, grid, block, cluster, shared, words_in, words_out) in CASES.items():
        form, module = _form(name), _module(name)
        a = rng.integers(0, 1 << 32, max(words_in, 1), dtype=np.uint64).astype(np.uint32)
        inputs[name] = a
        entry = metadata[module, form, PROCESSORS[0]][kernel]
        # the sm_90 form: the shim's geometry (its LDS check is the AMD device's, not the H200's)
        sm90 = runtime.plan_cluster_launch(entry, grid, block, cluster if form == "launch" else None, shared,
                                           lds_bytes=1 << 30)
        case = {"name": name, "module": module, "kernel": kernel, "form": form, "grid": grid, "block": block,
                "cluster": cluster, "shared": shared, "words_in": words_in, "words_out": words_out,
                "fatkit": {"grid": sm90.grid, "block": sm90.block, "shared": sm90.dynamic_shared_bytes,
                           "tail": sm90.kernarg_tail.hex()}}
        if module == "multicast":  # fatkit's map of the 64-word tensor, a 32-word box (UINT32)
            case["mask"] = MASKS[name]
            case["map"] = runtime.encode_tensor_map(2, PLACEHOLDER_ADDRESS, [64], [], [32]).hex()
        cases.append(case)
        for processor in PROCESSORS:
            plan = runtime.plan_cluster_launch(metadata[module, form, processor][kernel], grid, block,
                                               cluster if form == "launch" else None, shared)
            result = np.zeros(words_out, np.uint32)
            if module == "multicast":
                args = [result, case["mask"], runtime.encode_tensor_map(2, a.ctypes.data, [64], [], [32])]
            else:
                args = ([a] if words_in else []) + [result]
            executors[module, form, processor].launch(
                kernel, args + ([plan.kernarg_tail] if plan.kernarg_tail else []), grid=plan.grid, block=plan.block,
                shared_bytes=plan.dynamic_shared_bytes, buffers=(a,))
            outputs[f"{name}@{processor}"] = result
    np.savez_compressed(out / "inputs.npz", **inputs)
    np.savez_compressed(out / "executor.npz", **outputs)
    (out / "cases.json").write_text(json.dumps(cases, indent=1))
    shutil.copy(Path(__file__), out / "clusters.py")
    shutil.copy(HERE / "tma.py", out / "tma.py")
    print(f"wrote {len(cases)} cases to {out}")


# ------------------------------------------------------------------------------------------- the driver

class _LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: the id, padding to 8 bytes, a 64-byte value (here the cluster dimension)."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("x", ctypes.c_uint), ("y", ctypes.c_uint),
                ("z", ctypes.c_uint), ("rest", ctypes.c_char * 52)]


class _LaunchConfig(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(_LaunchAttribute)), ("count", ctypes.c_uint)]


CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4


class ClusterDriver(Driver):
    """tma.py's driver calls, and launches of a grid (with the cluster shape given at the launch, or none)."""

    def allocate(self, data: np.ndarray) -> int:
        pointer = self.alloc(data.nbytes)
        self.upload(pointer, data)
        return pointer

    def words(self, pointer: int, count: int) -> np.ndarray:
        return self.download(pointer, 4 * count).view(np.uint32)

    def launch_grid(self, function, params: list, grid, block, shared: int, cluster=None) -> None:
        pointers = (ctypes.c_void_p * len(params))(*[ctypes.cast(ctypes.pointer(p), ctypes.c_void_p) for p in params])
        if shared:
            self.check("cuFuncSetAttribute", function, 8, shared)  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        if cluster is None:
            self.check("cuLaunchKernel", function, *grid, *block, shared, None, pointers, None)
        else:
            attribute = _LaunchAttribute(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, b"", *cluster)
            config = _LaunchConfig((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block), shared, None,
                                   ctypes.pointer(attribute), 1)
            self.check("cuLaunchKernelEx", ctypes.byref(config), function, pointers, None)
        self.check("cuCtxSynchronize")


def _difference(a: np.ndarray, b: np.ndarray) -> str:
    bad = np.flatnonzero(a != b)
    if not len(bad):
        return ""
    return f"{len(bad)} words differ, first at {bad[0]}: {a[bad[0]:bad[0] + 4].tolist()} vs {b[bad[0]:bad[0] + 4].tolist()}"


# ------------------------------------------------------------------------------------------- run (GPU)

def run_case(directory: Path, name: str) -> dict:
    """One case in this process: NVIDIA's kernel, fatkit's sm_90 form, both against the executor's outputs."""
    case = next(c for c in json.loads((directory / "cases.json").read_text()) if c["name"] == name)
    a = np.load(directory / "inputs.npz")[name]
    executor = np.load(directory / "executor.npz")
    driver = ClusterDriver()
    results = {}
    for kind in ("orig", "fatkit"):
        image = (directory / f"{case['module']}.{case['form']}.{kind}.ptx").read_bytes()
        function = driver.function(driver.module(image), case["kernel"])
        out = np.zeros(case["words_out"], np.uint32)
        pointers = ([driver.allocate(a)] if case["words_in"] else []) + [driver.allocate(out)]
        params: list = [ctypes.c_uint64(p) for p in pointers]
        if case["module"] == "multicast":  # out, the mask, the map (NVIDIA's, or fatkit's moved to the tensor)
            if kind == "orig":
                tiled = {"kind": "tile", "data_type": 2, "rank": 1, "dims": [64], "strides": [], "box": [32],
                         "steps": [1], "swizzle": 0, "nan": False}  # no interleave, swizzle, promotion; zero fill
                tensor_map = bytearray(driver.encode(tiled, pointers[0]))
            else:
                tensor_map = bytearray.fromhex(case["map"])
                tensor_map[0:8] = pointers[0].to_bytes(8, "little")
            params = [params[1], ctypes.c_uint32(case["mask"]), (ctypes.c_uint8 * 128).from_buffer_copy(tensor_map)]
        try:
            if kind == "orig":
                driver.launch_grid(function, params, case["grid"], case["block"], case["shared"],
                              case["cluster"] if case["form"] == "launch" else None)
            else:
                plan = case["fatkit"]
                if plan["tail"]:
                    params.append((ctypes.c_uint8 * 16).from_buffer_copy(bytes.fromhex(plan["tail"])))
                driver.launch_grid(function, params, plan["grid"], plan["block"], plan["shared"])
        except RuntimeError as error:
            raise RuntimeError(f"the {kind} kernel: {error}") from error
        results[kind] = driver.words(pointers[-1], case["words_out"])
    record = {"name": name, "nvidia_vs_fatkit": _difference(results["orig"], results["fatkit"])}
    for processor in PROCESSORS:
        record[f"nvidia_vs_{processor}"] = _difference(results["orig"], executor[f"{name}@{processor}"])
    return record


def run(directory: Path, out: Path | None) -> int:
    cases = [c["name"] for c in json.loads((directory / "cases.json").read_text())]
    records = []
    for name in cases:
        try:
            done = subprocess.run([sys.executable, __file__, "case", str(directory), "--name", name],
                                  capture_output=True, text=True, timeout=CASE_TIMEOUT, check=False)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            record = json.loads(lines[-1]) if lines else {"name": name, "error": done.stderr.strip()[-400:]}
        except subprocess.TimeoutExpired:
            record = {"name": name, "error": f"timed out after {CASE_TIMEOUT} s"}
        records.append(record)
        print(json.dumps(record), flush=True)
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            (out / "clusters_results.json").write_text(json.dumps(records, indent=1))
    keys = ["nvidia_vs_fatkit", *(f"nvidia_vs_{p}" for p in PROCESSORS)]
    agreed = {key: sum(1 for r in records if r.get(key) == "") for key in keys}
    print(f"\n{len(records)} cases: " + ", ".join(f"{k} agree {v}" for k, v in agreed.items())
          + f", errors {sum(1 for r in records if 'error' in r)}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("build", "run", "case"))
    parser.add_argument("directory", nargs="?", type=Path)
    parser.add_argument("-o", "--output", type=Path)
    parser.add_argument("--name")
    arguments = parser.parse_args()
    if arguments.mode == "build":
        build(arguments.output or HERE / "build-clusters")
        return 0
    if arguments.mode == "case":
        try:
            record = run_case(arguments.directory, arguments.name)
        except Exception as error:  # noqa: BLE001 (recorded; the parent goes on with the next case)
            record = {"name": arguments.name, "error": f"{type(error).__name__}: {error}"}
        print(json.dumps(record), flush=True)
        return 0
    return run(arguments.directory or HERE, arguments.output)


if __name__ == "__main__":
    sys.exit(main())
