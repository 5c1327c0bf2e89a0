"""`precompile`: every PTX module under some paths, translated once per target into the cache.

A module is one fatbin container (or one `.ptx` file). When a container carries PTX for several compute
capabilities, the candidates are tried newest first (highest compute_XX; at equal numbers the portable
entry before the `f` family and the `a` arch-specific one) and the first whose every kernel lowers is
translated; when none lowers completely, the one with the most lowered kernels (the newest on ties). Only
lowering decides, so rejected candidates cost no codegen. Identical modules (the same PTX texts) met in
several binaries are translated once. What the cache already holds for a target is not translated again.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import fatkit
from fatkit.cache.key import (TRANSLATOR_ABI, CacheKey, compatible_targets, make_key, normalize_target,
                              options_key, ptx_hash, translator_fingerprint)
from fatkit.cache.store import Cache, CacheEntry
from fatkit.errors import FatkitError
from fatkit.extract.select import PtxModule
from fatkit.translate.pipeline import STAGES, Lowered, Options

_STAGE = dict(STAGES)
NO_KERNELS = "the module has no kernels"
_ARCH = re.compile(r"compute_(\d+)([af]?)$")
_VARIANT_ORDER = {"": 0, "f": 1, "a": 2}


@dataclass(frozen=True)
class Candidate:
    ptx_blake3: str
    text: str
    arch: str | None
    where: str  # "path c0.e2 (compute_90)" or "file.ptx"


@dataclass
class Job:
    """One module (its candidates, newest first) for one target; `sources` lists every place it was seen."""

    candidates: tuple[Candidate, ...]
    target: str  # normalised target id as requested
    sources: list[str] = field(default_factory=list)

    @property
    def processor(self) -> str:
        return self.target.split(":")[0]


def arch_rank(arch: str | None) -> tuple[int, int]:
    """Sort key, newest first: compute_100 before compute_90; compute_90 before compute_90f and compute_90a."""
    match = _ARCH.match(arch or "")
    return (-int(match.group(1)), _VARIANT_ORDER[match.group(2)]) if match else (0, 0)


def plan(modules: Iterable[PtxModule], targets: list[str]) -> tuple[list[Job], int]:
    """Group PTX entries into modules (one per container), dedupe identical modules; one job per target.

    Returns the jobs and how many module occurrences were duplicates of another."""
    containers: dict[tuple[str, int], list[PtxModule]] = {}
    for module in modules:
        key = (module.source, module.container if module.container is not None else id(module))
        containers.setdefault(key, []).append(module)
    unique: dict[tuple[str, ...], tuple[tuple[Candidate, ...], list[str]]] = {}
    for members in containers.values():
        members.sort(key=lambda m: arch_rank(m.arch))
        candidates = tuple(Candidate(ptx_hash(m.text), m.text, m.arch, _where(m)) for m in members)
        unique.setdefault(tuple(c.ptx_blake3 for c in candidates), (candidates, []))[1].append(candidates[0].where)
    jobs = [Job(candidates, normalize_target(t), sources) for t in targets for candidates, sources in unique.values()]
    return jobs, len(containers) - len(unique)


def _where(module: PtxModule) -> str:
    if module.container is None:
        return module.source
    return f"{module.source} c{module.container}.e{module.entry} ({module.arch})"


def cached_entry(cache: Cache, job: Job, options: Options) -> CacheEntry | None:
    """An entry this translator build stored for the job: a candidate's, under any target id compatible with
    the request. The translator is deterministic, so a stored candidate is the one selection picked; entries
    of another build are stale (translated again and replaced)."""
    for candidate in job.candidates:
        for target in compatible_targets(job.target):
            entry = cache.get(CacheKey(candidate.ptx_blake3, target, TRANSLATOR_ABI, options_key(options)))
            if entry is not None and entry.manifest.get("translator") == translator_fingerprint():
                return entry
    return None


# --- the work done in a pool process -------------------------------------------------------------------


def translate_job(texts: list[str], processor: str, opt_level: int, kernel_jobs: int = 1,
                  mma_numerics: str = "sm90") -> dict[str, Any]:
    """Select a candidate by lowering, translate it; a plain dict travels back from the pool process.

    Keys: `index` (candidate chosen), `kernels`, `code_object` (bytes | None), `target_id` (of the code
    object), `seconds` (parse to validate of the chosen one), `error` (codegen/validate or internal failure),
    `store` (whether the outcome is the translator's settled answer, worth caching when there is no object).
    """
    options = Options(target=processor, opt_level=opt_level, jobs=kernel_jobs, mma_numerics=mma_numerics)
    best: tuple[int, Lowered, float] | None = None
    failures: list[str] = []
    for index, text in enumerate(texts):
        start = time.perf_counter()
        try:
            lowered = _STAGE["lower"](_STAGE["passes"](_STAGE["parse"](text, options), options), options)
        except FatkitError as exc:
            failures.append(str(exc))
            continue
        except Exception as exc:  # a translator bug must not stop the other modules: reported, not cached
            return _outcome(index, [], error=f"internal translator error: {type(exc).__name__}: {exc}")
        elapsed = time.perf_counter() - start
        complete = lowered.kernels and len(lowered.kernels) == len(lowered.reports)
        if complete or best is None or len(lowered.kernels) > len(best[1].kernels):
            best = (index, lowered, elapsed)
        if complete:
            break
    if best is None:  # no candidate parses
        return _outcome(0, [], error="; ".join(failures), store=True)
    index, lowered, elapsed = best
    kernels = [{"name": r.name, "status": r.status, "reason": r.reason, "line": r.line} for r in lowered.reports]
    if not lowered.kernels:
        return _outcome(index, kernels, error=None if lowered.reports else NO_KERNELS, store=True,
                        seconds=elapsed)
    start = time.perf_counter()
    try:
        translation = _STAGE["validate"](_STAGE["codegen"](lowered, options), options)
    except FatkitError as exc:
        return _outcome(index, kernels, error=str(exc))
    except Exception as exc:
        return _outcome(index, kernels, error=f"internal translator error: {type(exc).__name__}: {exc}")
    return _outcome(index, kernels, code_object=translation.product, target_id=translation.validated.target_id,
                    seconds=elapsed + time.perf_counter() - start, store=True)


def _outcome(index: int, kernels: list[dict[str, Any]], *, code_object: bytes | None = None,
             target_id: str | None = None, seconds: float = 0.0, error: str | None = None,
             store: bool = False) -> dict[str, Any]:
    return {"index": index, "kernels": kernels, "code_object": code_object, "target_id": target_id,
            "seconds": seconds, "error": error, "store": store}


# --- the run -------------------------------------------------------------------------------------------


@dataclass
class Report:
    targets: list[str]
    cache: str
    modules: list[dict[str, Any]] = field(default_factory=list)
    duplicates: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        by = {s: [m for m in self.modules if m["status"] == s] for s in ("translated", "cached", "failed", "no-kernels")}
        kernels = [k for m in self.modules for k in m["kernels"]]
        served = by["translated"] + by["cached"]
        return {
            "modules_total": len(self.modules),
            "modules_translated": len(by["translated"]),
            "modules_cached": len(by["cached"]),
            "modules_failed": len(by["failed"]),
            "modules_without_kernels": len(by["no-kernels"]),
            "modules_duplicate": self.duplicates,
            "kernels_ok": sum(k["status"] == "ok" for k in kernels),
            "kernels_failed": sum(k["status"] != "ok" for k in kernels),
            "seconds": round(self.seconds, 3),
            "compile_seconds_translated": round(sum(m["compile_seconds"] for m in by["translated"]), 3),
            "compile_seconds_saved": round(sum(m["compile_seconds"] for m in served), 3),
        }

    def to_json(self) -> dict[str, Any]:
        return {"fatkit_version": fatkit.__version__, "cache": self.cache, "targets": self.targets,
                **self.summary(), "problems": self.problems, "modules": self.modules}


def precompile(modules: Iterable[PtxModule], targets: list[str], cache: Cache, *, jobs: int = 1,
               opt_level: int = 2, mma_numerics: str = "sm90", on_planned: Callable[[int], None] | None = None,
               on_done: Callable[[dict[str, Any]], None] | None = None) -> Report:
    """Fill `cache` for every target; returns the report. `on_planned(n)` gets the number of modules to
    translate, `on_done(record)` each finished one (for a progress bar)."""
    started = time.perf_counter()
    normalized = [normalize_target(t) for t in targets]
    report = Report(normalized, str(cache.directory))
    work, report.duplicates = plan(modules, normalized)
    pending: list[Job] = []
    for job in work:
        options = Options(target=job.processor, opt_level=opt_level, mma_numerics=mma_numerics)
        entry = cached_entry(cache, job, options)
        if entry is None:
            pending.append(job)
        else:
            report.modules.append(_record(job, entry.manifest, _status(entry.code_object, entry.manifest, "cached"),
                                          cached=True, ptx=entry.key.ptx_blake3, stored=entry.key.target,
                                          options=entry.key.options))
    if on_planned:
        on_planned(len(pending))
    for job, outcome in _run(pending, jobs, opt_level, mma_numerics):
        record = _store(cache, job, outcome, opt_level, mma_numerics)
        report.modules.append(record)
        if on_done:
            on_done(record)
    report.problems = [f"{p.key}: {p.reason}" for p in cache.problems]
    report.seconds = time.perf_counter() - started
    return report


def _run(jobs: list[Job], workers: int, opt_level: int, mma_numerics: str):
    """(job, outcome) pairs as they finish: in this process for one worker or one job, else in a process pool.
    Workers beyond the number of jobs go to the kernels of each module (translate_job's kernel_jobs)."""
    kernel_jobs = max(1, workers // max(1, len(jobs)))
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            yield job, translate_job([c.text for c in job.candidates], job.processor, opt_level, kernel_jobs,
                                     mma_numerics)
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        running: dict[Future, Job] = {}
        queue = sorted(jobs, key=lambda j: len(j.candidates[0].text), reverse=True)  # big modules first
        try:
            while queue or running:
                while queue and len(running) < 2 * workers:  # bounded: texts are pickled on submission
                    job = queue.pop(0)
                    running[pool.submit(translate_job, [c.text for c in job.candidates], job.processor,
                                        opt_level, kernel_jobs, mma_numerics)] = job
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    yield running.pop(future), future.result()
        finally:
            for future in running:
                future.cancel()


def _store(cache: Cache, job: Job, outcome: dict[str, Any], opt_level: int, mma_numerics: str) -> dict[str, Any]:
    chosen = job.candidates[outcome["index"]]
    manifest = {
        "kernels": outcome["kernels"], "source": chosen.where, "arch": chosen.arch,
        "seconds": round(outcome["seconds"], 4), "error": outcome["error"], "fatkit_version": fatkit.__version__,
        "translator": translator_fingerprint(), "target_id": outcome["target_id"],
    }
    # Code objects leave xnack/sramecc unset, so they are stored under their own (bare) target id, which
    # every feature setting of the processor can load.
    stored = outcome["target_id"] or job.processor
    key = make_key(chosen.text, stored, Options(target=job.processor, opt_level=opt_level, mma_numerics=mma_numerics))
    if outcome["store"]:
        cache.put(key, outcome["code_object"], manifest)
    return _record(job, manifest, _status(outcome["code_object"], manifest, "translated"), cached=False,
                   ptx=chosen.ptx_blake3, stored=stored if outcome["store"] else None, options=key.options)


def _status(code_object: bytes | None, manifest: dict[str, Any], served: str) -> str:
    """`served` (translated/cached) with a code object; "no-kernels" for a module of device functions or data
    only (nothing to translate, nothing wrong); else "failed"."""
    if code_object:
        return served
    return "no-kernels" if manifest.get("error") == NO_KERNELS else "failed"


def _record(job: Job, manifest: dict[str, Any], status: str, *, cached: bool, ptx: str, stored: str | None,
            options: str) -> dict[str, Any]:
    return {
        "status": status, "cached": cached, "target": job.target, "stored_as": stored, "ptx_blake3": ptx,
        "source": job.sources[0], "also_in": job.sources[1:], "arch": manifest.get("arch"),
        "kernels": manifest.get("kernels", []), "reason": manifest.get("error"),
        "compile_seconds": manifest.get("seconds", 0.0), "candidates": len(job.candidates), "options": options,
        "translator": manifest.get("translator"),
    }
