"""Builds the differential suite: original PTX and fatkit's re-lowered PTX for every case, plus a manifest.

    python verification/build.py [-o verification/build] [--only SUBSTRING[,SUBSTRING...]]

Cases: one kernel per instruction form (verification/families.py) and the CUDA programs of
verification/programs.py, compiled by nvcc to PTX for several compute_* versions and optimisation levels.
Each is translated by fatkit for the `sm_90` verification target (and, where it uses warp collectives or
lane registers, for `sm_90:wave64` too: an emulated 64-lane wave running the CDNA algorithm); a case fatkit
cannot translate is kept in the manifest with the reason (the report counts it as not passing). Then, on the GPU machine:

    python verification/runner.py verification/build      # needs numpy + cupy only
    python verification/report.py verification/build/results.json   # here: REPORT.md + results.json
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from families import all_cases, table_module  # noqa: E402
from probe_numerics import DISTRIBUTIONS, WMMA_FORMS, mma_forms, mma_kernel, wmma_kernel  # noqa: E402
from programs import PROGRAMS  # noqa: E402

from fatkit.errors import FatkitError  # noqa: E402
from fatkit.translate.link import link_modules  # noqa: E402
from fatkit.translate.pipeline import Options, translate  # noqa: E402

TARGET = "sm_90"
# Cases with warp collectives or lane registers also run as an emulated 64-lane wave (the CDNA algorithm).
WAVE64_TARGET = "sm_90:wave64"
WARP_LEVEL = re.compile(r"\b(?:shfl|vote|match|redux|activemask|elect|ldmatrix|stmatrix|movmatrix|w?mma)\.|%laneid|%lanemask_")
TABLE_THREADS = 16384  # the 57² edge pairs, exponent-spread values, random bit patterns (runner.table_inputs)
# What each mma input distribution of probe_numerics is, as results.json's input kinds name them
MMA_INPUT_KINDS = {"normal": "random", "bits": "random", "wide": "spread", "subnormal": "spread",
                   "overflow": "spread", "zeros": "edge", "cancel": "edge"}
MMA_HEADER = ".version 8.7\n.target sm_90\n.address_size 64\n\n"
# 64-bit input patterns every table case sees in every (a, b) pair: integer boundaries, f32 values in the
# low word (±0, ±1, ±inf, NaNs, subnormals, extremes, ties), f64 values, f16/bf16 values in the low half.
EDGES = [
    0, 1, 2, 31, 32, 33, 63, 64, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
    0x100000000, 0x7FFFFFFFFFFFFFFF, 0x8000000000000000, 0xFFFFFFFFFFFFFFFF,
    0x3F800000, 0xBF800000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7FA00000, 0x00000001, 0x007FFFFF,
    0x00800000, 0x80000001, 0x7F7FFFFF, 0x3F000000, 0x3FC00000, 0x40200000, 0xC0200000, 0x4B000001,
    0x3FF0000000000000, 0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000, 0x000FFFFFFFFFFFFF,
    0x0010000000000000, 0x7FEFFFFFFFFFFFFF, 0x3FE0000000000000, 0x4330000000000001,
    0x3C00, 0x7C00, 0xFC00, 0x7E00, 0x03FF, 0x0400, 0x7BFF, 0x3800, 0x3C007E00, 0x7F80, 0x3F80BF80,
]


def _translate(text: str, target: str, mma_numerics: str = "sm90") -> tuple[bytes | None, dict[str, str]]:
    """The re-lowered PTX and each kernel's status ("ok" or the reason it is not)."""
    try:
        translation = translate(text, Options(target=target, mma_numerics=mma_numerics))
    except FatkitError as exc:
        return None, {"*": str(exc)}
    except Exception as exc:  # a translator bug: recorded as the case's failure, the suite goes on
        return None, {"*": f"translator crashed: {type(exc).__name__}: {exc}"}
    return translation.product, {k.name: "ok" if k.status == "ok" else (k.reason or k.status)
                                 for k in translation.kernels}


def _records(name: str, family: str, kernels: list[tuple[str, str]], original: Path, out: Path,
             text: str | None = None) -> list[dict]:
    """One record per (label, kernel) and target: the native one, and the emulated wave64 for warp-level
    code. A record is named `name.label` (just `name` where the label is the name). fatkit translates
    `text` (default: the original's, which is PTX then; an `-rdc` program's original is a linked cubin)."""
    text = original.read_text() if text is None else text
    records = []
    for target in (TARGET, WAVE64_TARGET) if WARP_LEVEL.search(text) else (TARGET,):
        product, statuses = _translate(text, target)
        tag = "" if target == TARGET else "@wave64"
        relowered = out / f"{original.name.split('.orig.')[0]}{tag}.fatkit.ptx"
        for label, kernel in kernels:
            status = statuses.get(kernel, statuses.get("*", "kernel not found in the module"))
            record = {"name": f"{name}{'.' + label if label != name else ''}{tag}", "family": family,
                      "target": target, "kernel": kernel, "label": label, "original": original.name}
            if product is None or status != "ok":
                record.update(status="not-translated", reason=status)
            else:
                if not relowered.exists():
                    relowered.write_bytes(product)
                record.update(status="translated", relowered=relowered.name)
            records.append(record)
    return records


def build_tables(out: Path, only: str | None) -> list[dict]:
    records = []
    for case in all_cases():
        if only and not any(part in case.name for part in only.split(",")):
            continue
        original = out / f"{case.name}.orig.ptx"
        original.write_text(table_module(case, TARGET))
        for record in _records(case.name, case.family, [(case.name, case.name)], original, out):
            del record["label"]
            record.update(kind="table", count=TABLE_THREADS, edges=EDGES, ulp=case.ulp, ulp_type=case.ulp_type,
                          inputs=["edge", "spread", "random"])
            records.append(record)
    return records


def build_mma(out: Path, only: str | None) -> list[dict]:
    """Every mma/mma.sp/wmma form of probe_numerics with registers (wmma: tiles) straight from random inputs of
    each distribution: `sm90` translations compared with the H200 bit for bit (native and wave64), `exact` ones
    with the host reference (verification/mma_reference.py) after the run."""
    records = []
    forms = [(f["name"], f, MMA_HEADER + mma_kernel(f), "mma") for f in mma_forms()]
    forms += [(name, {"name": name, "shape": shape, "a": a, "c": c, "d": d, "wmma": True},
               MMA_HEADER + wmma_kernel(name, shape, a, c, d), "wmma") for name, shape, a, c, d in WMMA_FORMS]
    for name, form, text, kind in forms:
        if only and not any(part in name for part in only.split(",")):
            continue
        original = out / f"{name}.orig.ptx"
        original.write_text(text)
        for numerics, targets in (("sm90", (TARGET, WAVE64_TARGET)), ("exact", (TARGET,))):
            for target in targets:
                product, statuses = _translate(text, target, numerics)
                tag = "" if target == TARGET else "@wave64"
                relowered = out / f"{name}.{numerics}{tag}.fatkit.ptx"
                status = statuses.get(name, statuses.get("*", "kernel not found in the module"))
                if product is not None:
                    relowered.write_bytes(product)
                for dist in DISTRIBUTIONS:
                    if numerics == "exact" and (kind == "wmma" or form["types"]["a"] not in
                                                ("f16", "bf16", "tf32", "e4m3", "e5m2")):
                        continue  # integer and f64 forms compute alike in both numerics
                    record = {"name": f"{name}.{dist}.{numerics}{tag}", "family": f"mma:{numerics}",
                              "target": target, "kernel": name, "original": original.name, "kind": kind,
                              "form": form, "distribution": dist, "numerics": numerics,
                              "inputs": [MMA_INPUT_KINDS[dist]]}
                    if product is None or status != "ok":
                        record.update(status="not-translated", reason=status)
                    else:
                        record.update(status="translated", relowered=relowered.name)
                    records.append(record)
    return records


def _program_original(nvcc: str, program, stem: str, arch: str, flags: tuple[str, ...], out: Path,
                      ) -> tuple[Path, str | None]:
    """The original the runner loads and the PTX fatkit translates (None: the original's own text). A CUDA
    program: nvcc's PTX. A hand-written PTX one (verification/ptx/): its text, the original with
    `original_edit` applied. An `-rdc` one: each unit's PTX (`nvcc -rdc=true`), for fatkit linked by
    fatkit.translate.link, for the original compiled relocatable by ptxas and linked by nvlink into one
    sm_90 cubin, as `nvcc -rdc=true` builds a binary's device code."""
    if program.source.endswith(".ptx"):
        text = (HERE / "ptx" / program.source).read_text()
        original = out / f"{stem}.orig.ptx"
        if program.original_edit is None:
            original.write_text(text)
            return original, None
        before, after = program.original_edit
        if before not in text:
            raise SystemExit(f"{program.source} no longer holds {before!r} (its original_edit)")
        original.write_text(text.replace(before, after))
        return original, text
    if not program.rdc_units:
        original = out / f"{stem}.orig.ptx"
        subprocess.run([nvcc, "-ptx", f"-arch={arch}", *flags, str(HERE / "cuda" / program.source), "-o",
                        str(original)], check=True, capture_output=True)
        return original, None
    units, cubins = [], []
    for index, source in enumerate((program.source, *program.rdc_units)):
        ptx, cubin = out / f"{stem}.unit{index}.ptx", out / f"{stem}.unit{index}.cubin"
        subprocess.run([nvcc, "-ptx", "-rdc=true", f"-arch={arch}", *flags, str(HERE / "cuda" / source), "-o",
                        str(ptx)], check=True, capture_output=True)
        subprocess.run([_tool(nvcc, "ptxas"), "-c", f"-arch={TARGET}", str(ptx), "-o", str(cubin)], check=True,
                       capture_output=True)
        units.append((source, ptx.read_text()))
        cubins.append(str(cubin))
    original = out / f"{stem}.orig.cubin"
    subprocess.run([_tool(nvcc, "nvlink"), f"-arch={TARGET}", *cubins, "-o", str(original)], check=True,
                   capture_output=True)
    linked = link_modules(units)
    if linked is None:
        raise SystemExit(f"{program.name}: its -rdc units reference nothing of each other")
    if linked.unresolved:
        raise SystemExit(f"{program.name}: nothing defines {', '.join(sorted(linked.unresolved))}")
    return original, linked.text


def _tool(nvcc: str, name: str) -> str:
    """ptxas/nvlink: beside nvcc, else on PATH."""
    beside = Path(nvcc).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} not found beside {nvcc} or on PATH: the -rdc program cases need it")
    return found


def build_programs(out: Path, only: str | None) -> list[dict]:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise SystemExit("nvcc not on PATH: the CUDA program cases need it")
    records = []
    for program in PROGRAMS:
        for variant, arch, flags in program.built_variants():
            stem = f"{program.name}.{arch}.{variant}"
            if only and not any(part in stem for part in only.split(",")):
                continue
            original, text = _program_original(nvcc, program, stem, arch, flags, out)
            launches = {launch.label: launch for launch in program.launches}
            entries = [(label, launch.kernel) for label, launch in launches.items()]
            for record in _records(stem, f"program:{program.name}", entries, original, out, text):
                launch = launches[record.pop("label")]
                record.update(kind="program", grid=launch.grid, block=launch.block, shared=launch.shared,
                              params=[p.manifest() for p in launch.params],
                              ulp=launch.fast_math_ulp if "--use_fast_math" in flags else 0,
                              f64_nan_open=launch.f64_outputs)
                records.append(record)
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--output", type=Path, default=HERE / "build")
    parser.add_argument("--only", default=None)
    args = parser.parse_args()
    if args.output.exists():
        shutil.rmtree(args.output)
    args.output.mkdir(parents=True)
    started = time.perf_counter()
    cases = build_tables(args.output, args.only) + build_mma(args.output, args.only) + build_programs(args.output,
                                                                                                       args.only)
    meta = {"targets": [TARGET, WAVE64_TARGET], "built": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "command": "python verification/build.py" + (f" --only {args.only}" if args.only else "")}
    (args.output / "manifest.json").write_text(json.dumps({"meta": meta, "cases": cases}, indent=1))
    translated = sum(c["status"] == "translated" for c in cases)
    print(f"{len(cases)} cases, {translated} translated, in {time.perf_counter() - started:.0f} s → {args.output}")


if __name__ == "__main__":
    main()
