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
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Iterator

import fatkit
from fatkit.cache.key import CacheKey, key_of, linked_ptx_hash, ptx_hash, translator_fingerprint
from fatkit.cache.store import Cache, CacheEntry
from fatkit.errors import FatkitError
from fatkit.extract.select import PtxModule
from fatkit.translate import pipeline
from fatkit.translate.passes import Prepared
from fatkit.translate.pipeline import Lowered, Options
from fatkit.translate.targets.ids import TargetId

NO_KERNELS = "the module has no kernels"
_ARCH = re.compile(r"compute_(\d+)([af]?)$")
_VARIANT_ORDER = {"": 0, "f": 1, "a": 2}


@dataclass(frozen=True)
class Candidate:
    ptx_blake3: str
    text: str
    arch: str | None
    where: str  # "path c0.e2 (compute_90)" or "file.ptx"
    units: tuple[str, ...] = ()  # -rdc units linked into one: each unit's ptx_blake3 (docs/cache.md)

    @property
    def linked(self) -> bool:
        return bool(self.units)


@dataclass
class Job:
    """One module (its candidates, newest first) for one target; `sources` lists every place it was seen."""

    candidates: tuple[Candidate, ...]
    target: TargetId  # as requested; translated for its bare processor
    sources: list[str] = field(default_factory=list)


def arch_rank(arch: str | None) -> tuple[int, int]:
    """Sort key, newest first: compute_100 before compute_90; compute_90 before compute_90f and compute_90a."""
    match = _ARCH.match(arch or "")
    return (-int(match.group(1)), _VARIANT_ORDER[match.group(2)]) if match else (0, 0)


def plan(modules: Iterable[PtxModule], targets: list[TargetId], *, per_entry: bool = False) -> tuple[list[Job], int]:
    """Group PTX entries into modules (one per container, or with `per_entry` one per PTX entry), dedupe
    identical modules; one job per target.

    Returns the jobs and how many module occurrences were duplicates of another."""
    containers: dict[tuple[str, int, int | None], list[PtxModule]] = {}
    for module in modules:
        key = (module.source, module.container if module.container is not None else id(module),
               module.entry if per_entry else None)
        containers.setdefault(key, []).append(module)
    unique: dict[tuple[str, ...], tuple[tuple[Candidate, ...], list[str]]] = {}
    for members in containers.values():
        members.sort(key=lambda m: arch_rank(m.arch))
        candidates = tuple(Candidate(linked_ptx_hash(m.members) if m.members else ptx_hash(m.text), m.text, m.arch,
                                     _where(m), tuple(ptx_hash(unit) for unit in m.members)) for m in members)
        unique.setdefault(tuple(c.ptx_blake3 for c in candidates), (candidates, []))[1].append(candidates[0].where)
    jobs = [Job(candidates, t, sources) for t in targets for candidates, sources in unique.values()]
    return jobs, len(containers) - len(unique)


def _where(module: PtxModule) -> str:
    if module.linked:
        return f"{module.source} -rdc units c{'+c'.join(map(str, module.linked))} linked ({module.arch})"
    if module.container is None:
        return module.source
    return f"{module.source} c{module.container}.e{module.entry} ({module.arch})"


def cached_entry(cache: Cache, job: Job, options: Options) -> CacheEntry | None:
    """An entry this translator build stored for the job: a candidate's, under any target id compatible with
    the request. The translator is deterministic, so a stored candidate is the one selection picked; entries
    of another build are stale (translated again and replaced)."""
    for candidate in job.candidates:
        for target in job.target.compatible():
            entry = cache.get(key_of(candidate.ptx_blake3, replace(options, target=target)))
            if entry is not None and entry.manifest.get("translator") == translator_fingerprint():
                return entry
    return None


# --- the work done in a pool process -------------------------------------------------------------------


def translate_jobs(texts: list[str], targets: list[Options]) -> list[dict[str, Any]]:
    """`translate_job` for each of several targets' options, each candidate parsed and prepared once (the
    passes do not depend on the target)."""
    prepared: dict[int, tuple[Prepared | Exception, float]] = {}
    return [translate_job(texts, options, prepared) for options in targets]


def translate_job(texts: list[str], options: Options,
                  prepared: dict[int, tuple[Prepared | Exception, float]] | None = None) -> dict[str, Any]:
    """Select a candidate by lowering, translate it for `options`; a plain dict travels back from the pool
    process. `prepared` holds the candidates already parsed and prepared (or what that raised) with the
    seconds it took, by index; filled as they are.

    Keys: `index` (candidate chosen), `kernels`, `code_object` (bytes | None), `target_id` (of the code
    object), `seconds` (parse to validate of the chosen one), `error` (codegen/validate or internal failure),
    `store` (whether the outcome is the translator's settled answer, worth caching when there is no object).
    """
    prepared = {} if prepared is None else prepared
    best: tuple[int, Lowered, float] | None = None
    failures: list[str] = []
    for index, text in enumerate(texts):
        start = time.perf_counter()
        reused = index in prepared  # then its preparing counts as it would alone
        try:
            if not reused:
                try:
                    prepared[index] = (pipeline.run(text, options, until="passes"), time.perf_counter() - start)
                except Exception as exc:
                    prepared[index] = (exc, time.perf_counter() - start)
            made, preparing = prepared[index]
            if isinstance(made, Exception):
                raise made
            lowered = pipeline.run_from("lower", made, options, until="lower")
        except FatkitError as exc:
            failures.append(str(exc))
            continue
        except Exception as exc:  # a translator bug must not stop the other modules: reported, not cached
            return _outcome(index, [], error=f"internal translator error: {type(exc).__name__}: {exc}")
        elapsed = time.perf_counter() - start + (preparing if reused else 0.0)
        complete = lowered.kernels and len(lowered.kernels) == len(lowered.reports)
        if complete or best is None or len(lowered.kernels) > len(best[1].kernels):
            best = (index, lowered, elapsed)
        if complete:
            break
    if best is None:  # no candidate parses
        return _outcome(0, [], error="; ".join(failures), store=True)
    index, lowered, elapsed = best
    kernels = [r.to_json() for r in lowered.reports]
    if not lowered.kernels:
        return _outcome(index, kernels, error=None if lowered.reports else NO_KERNELS, store=True,
                        seconds=elapsed)
    start = time.perf_counter()
    try:
        translation = pipeline.finish(lowered, options)
    except FatkitError as exc:
        return _outcome(index, kernels, error=str(exc))
    except Exception as exc:
        return _outcome(index, kernels, error=f"internal translator error: {type(exc).__name__}: {exc}")
    kernels = [{"name": r.name, "status": r.status, "reason": r.reason, "line": r.line} for r in translation.kernels]
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
        by = {s: [m for m in self.modules if m["status"] == s]
              for s in ("translated", "cached", "failed", "no-kernels")}
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


def precompile(modules: Iterable[PtxModule], targets: list[TargetId] | list[str], cache: Cache, *, jobs: int = 1,
               options: Options = Options(), on_planned: Callable[[int], None] | None = None,
               on_done: Callable[[dict[str, Any]], None] | None = None, per_entry: bool = False) -> Report:
    """Fill `cache` for every target with `options` (its target is replaced by each of `targets`); returns the
    report. `on_planned(n)` gets the number of modules to translate, `on_done(record)` each finished one (for
    a progress bar). With `per_entry` every PTX entry of a container is translated on its own (ZLUDA's rows:
    it picks among them with its own parser)."""
    started = time.perf_counter()
    started = time.perf_counter()
    parsed = list(dict.fromkeys(t if isinstance(t, TargetId) else TargetId.parse_amd(t) for t in targets))
    report = Report([str(t) for t in parsed], str(cache.directory))
    work, report.duplicates = plan(modules, parsed, per_entry=per_entry)
    # Targets that differ only in features (gfx942, gfx942:xnack-) translate to the same code object: the
    # first is translated, the others are looked up once it is stored.
    pending: list[Job] = []
    same_code: list[Job] = []
    planned: set[tuple[tuple[str, ...], TargetId]] = set()
    for job in work:
        if _from_cache(cache, job, options, report):
            continue
        translation = (tuple(c.ptx_blake3 for c in job.candidates), job.target.bare)
        (same_code if translation in planned else pending).append(job)
        planned.add(translation)
    if on_planned:
        on_planned(len(pending))
    for job, outcome in _run(pending, jobs, options):
        record = _store(cache, job, outcome, options)
        report.modules.append(record)
        if on_done:
            on_done(record)
    for job, outcome in _run([j for j in same_code if not _from_cache(cache, j, options, report)], jobs, options):
        report.modules.append(_store(cache, job, outcome, options))  # the first one's outcome was not stored
    report.problems = [f"{p.key}: {p.reason}" for p in cache.problems]
    report.seconds = time.perf_counter() - started
    return report


def _from_cache(cache: Cache, job: Job, options: Options, report: Report) -> bool:
    """Record the job as served from the cache when the cache has its entry."""
    entry = cached_entry(cache, job, _for(job, options))
    if entry is None:
        return False
    report.modules.append(_record(job, entry.manifest, _status(entry.code_object, entry.manifest, "cached"),
                                  cached=True, ptx=entry.key.ptx_blake3, stored=entry.key.target,
                                  options=entry.key.options))
    return True


def _for(job: Job, options: Options, kernel_jobs: int = 1) -> Options:
    """The options a job is translated with: its bare processor (code objects leave xnack/sramecc unset)."""
    return replace(options, target=job.target.bare, jobs=kernel_jobs)


def _run(jobs: list[Job], workers: int, options: Options) -> Iterator[tuple[Job, dict[str, Any]]]:
    """(job, outcome) pairs as they finish: in this process for one worker or one module, else in a process
    pool. The jobs of one module (its targets) run together, preparing it once (`translate_jobs`). Workers
    beyond the number of modules go to the kernels of each module (Options.jobs)."""
    modules: dict[tuple[str, ...], list[Job]] = {}
    for job in jobs:
        modules.setdefault(tuple(c.ptx_blake3 for c in job.candidates), []).append(job)
    groups = list(modules.values())
    kernel_jobs = max(1, workers // max(1, len(groups)))

    def work(group: list[Job]) -> tuple[list[str], list[Options]]:
        return [c.text for c in group[0].candidates], [_for(job, options, kernel_jobs) for job in group]

    if workers <= 1 or len(groups) <= 1:
        for group in groups:
            yield from zip(group, translate_jobs(*work(group)))
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        running: dict[Future, list[Job]] = {}
        queue = sorted(groups, key=lambda g: len(g[0].candidates[0].text) * len(g), reverse=True)  # big first
        try:
            while queue or running:
                while queue and len(running) < 2 * workers:  # bounded: texts are pickled on submission
                    group = queue.pop(0)
                    running[pool.submit(translate_jobs, *work(group))] = group
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    yield from zip(running.pop(future), future.result())
        finally:
            for future in running:
                future.cancel()


def _store(cache: Cache, job: Job, outcome: dict[str, Any], options: Options) -> dict[str, Any]:
    chosen = job.candidates[outcome["index"]]
    manifest = {
        "kernels": outcome["kernels"], "source": chosen.where, "arch": chosen.arch,
        "seconds": round(outcome["seconds"], 4), "error": outcome["error"], "fatkit_version": fatkit.__version__,
        "translator": translator_fingerprint(), "target_id": outcome["target_id"],
    }
    # Code objects leave xnack/sramecc unset, so they are stored under their own (bare) target id, which
    # every feature setting of the processor can load.
    stored = outcome["target_id"] or str(job.target.bare)
    key = key_of(chosen.ptx_blake3, replace(_for(job, options), target=TargetId.parse_amd(stored)))
    if outcome["store"]:
        cache.put(key, outcome["code_object"], manifest)
        # a shim that hashes one unit's PTX (ZLUDA picks one text of a version-2 wrapper's units) finds the
        # linked code object under that unit's own key too; a unit alone could not run its .extern calls
        for unit in chosen.units:
            cache.put(CacheKey(unit, key.target, key.abi, key.options), outcome["code_object"],
                      {**manifest, "linked_units": list(chosen.units)})
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
        "status": status, "cached": cached, "target": str(job.target), "stored_as": stored, "ptx_blake3": ptx,
        "source": job.sources[0], "also_in": job.sources[1:], "arch": manifest.get("arch"),
        "kernels": manifest.get("kernels", []), "reason": manifest.get("error"),
        "compile_seconds": manifest.get("seconds", 0.0), "candidates": len(job.candidates), "options": options,
        "translator": manifest.get("translator"), "linked": job.candidates[0].linked,
    }
