"""What in a PTX kernel will be hard to run on AMD GPUs: per-kernel findings with severity, line and targets.

`analyse(module)` looks at every `.entry` together with every `.func` it can reach (direct calls,
and for indirect calls every function whose address the module takes) and reports one `Hazard` per
instruction, special register, directive or called function that falls under a kind of `HAZARD_KINDS`.
That table is the taxonomy: kind → severity, affected targets, message template. Detection maps PTX
to kinds through the smaller tables below it.

Severities: "error" (no AMD counterpart: must be rewritten or emulated wholesale), "warning" (runs,
but the translation needs care and may differ), "info" (worth knowing). Targets name what a finding
affects: "wave32" (RDNA, gfx10–gfx12, one PTX warp per wave), "wave64" (CDNA, gfx908–gfx950, two PTX
warps per wave), or single target families (`gfx942`) when only some members of a class are affected
(shared memory against each target's LDS size).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from fatkit.errors import FatkitError, UsageError
from fatkit.translate.coverage import refusal
from fatkit.translate.ptx import ast
from fatkit.translate.ptx.parser import parse_ptx
from fatkit.translate.targets.ids import TargetId

if TYPE_CHECKING:
    from fatkit.extract.model import Binary

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITIES = (ERROR, WARNING, INFO)  # worst first
WAVE32, WAVE64 = "wave32", "wave64"
BOTH = (WAVE32, WAVE64)
KIB = 1024

# --------------------------------------------------------------------------------------------------
# targets


@dataclass(frozen=True)
class TargetFamily:
    """AMD GPUs that behave alike here: one wave size and one LDS size per workgroup."""

    name: str  # gfx942, or gfx11 for every gfx11xx
    wave: str
    lds_bytes: int


TARGET_FAMILIES: tuple[TargetFamily, ...] = (
    TargetFamily("gfx906", WAVE64, 64 * KIB),
    TargetFamily("gfx908", WAVE64, 64 * KIB),
    TargetFamily("gfx90a", WAVE64, 64 * KIB),
    TargetFamily("gfx942", WAVE64, 64 * KIB),
    TargetFamily("gfx950", WAVE64, 160 * KIB),
    TargetFamily("gfx10", WAVE32, 64 * KIB),
    TargetFamily("gfx11", WAVE32, 64 * KIB),
    TargetFamily("gfx12", WAVE32, 64 * KIB),
)
_FAMILIES = {f.name: f for f in TARGET_FAMILIES}


def target_family(target: str | TargetId) -> TargetFamily:
    """The family of an AMD target id (`gfx942`, `gfx942:sramecc+:xnack-`, `gfx1100`, `gfx1201`): the ones
    lint knows the wave size and LDS of (TargetId.family)."""
    family = None
    try:
        parsed = target if isinstance(target, TargetId) else TargetId.parse_amd(target)
        family = _FAMILIES.get(parsed.family)
    except UsageError:
        pass  # named below, with what lint knows
    if family is None:
        known = ", ".join(f.name for f in TARGET_FAMILIES if f.wave == WAVE64)
        raise UsageError(f"unknown AMD target {str(target)!r} for lint: expected {known}, gfx10xx–gfx12xx, "
                         "wave32 or wave64")
    return family


def target_names(target: str | TargetId) -> frozenset[str]:
    """The names a Hazard's `targets` may use for `target`: its wave class and family, or for `wave32`/
    `wave64` the class and all its families (a finding affects the class if it affects any member)."""
    if target in BOTH:
        return frozenset([target, *(f.name for f in TARGET_FAMILIES if f.wave == target)])
    family = target_family(target)
    return frozenset([family.wave, family.name])


def _lds_targets(static_bytes: int) -> tuple[str, ...]:
    """Families whose LDS is smaller than `static_bytes`, a whole wave class named by its class."""
    over = [f for f in TARGET_FAMILIES if static_bytes > f.lds_bytes]
    targets: list[str] = []
    for wave in BOTH:
        members = [f for f in TARGET_FAMILIES if f.wave == wave]
        hit = [f for f in members if f in over]
        targets.extend([wave] if hit == members else [f.name for f in hit])
    return tuple(targets)


def _lds_by_size(used: int = 0, *, over: int = 0) -> str:
    """`64 KiB on gfx908/gfx90a/gfx942/RDNA, 160 KiB on gfx950`: the LDS per target family less `used`,
    only of the families with less LDS than `over`."""
    groups: dict[int, list[str]] = {}
    for f in TARGET_FAMILIES:
        if over and over <= f.lds_bytes:
            continue
        label = "RDNA" if f.wave == WAVE32 else f.name
        if label not in groups.setdefault(f.lds_bytes, []):
            groups[f.lds_bytes].append(label)
    return ", ".join(f"{_bytes(lds - used)} on {'/'.join(names)}" for lds, names in groups.items())


def _bytes(n: int) -> str:
    return f"{n // KIB} KiB" if n % KIB == 0 else f"{n} bytes"


# --------------------------------------------------------------------------------------------------
# the taxonomy


@dataclass(frozen=True)
class HazardKind:
    """What one kind of finding means. `message` is a str.format template; `{name}` is the instruction,
    register, directive or function found, other fields are kind-specific."""

    severity: str
    targets: tuple[str, ...]
    message: str


HAZARD_KINDS: dict[str, HazardKind] = {
    # errors: no AMD counterpart
    "tcgen05": HazardKind(ERROR, BOTH, "{name}: 5th-generation tensor core and tensor memory (sm_100a) have no AMD "
                                       "counterpart"),
    "cluster": HazardKind(ERROR, BOTH, "{name}: thread-block clusters and distributed shared memory do not exist "
                                       "on AMD (fatkit runs a cluster, of the shape the PTX fixes or the launch gives, "
                                       "as one workgroup, which the shim launches so: docs/runtime.md)"),
    "multimem": HazardKind(ERROR, BOTH, "{name}: NVLink multicast memory has no AMD counterpart"),
    "texture": HazardKind(ERROR, (WAVE64,), "{name}: gfx942/gfx950 (CDNA3/4) have no image instructions and HIP "
                                            "no texture objects for them (gfx908/gfx90a: not translated); RDNA "
                                            "samples through HIP's texture objects (docs/runtime.md)"),
    "surface": HazardKind(ERROR, (WAVE64,), "{name}: gfx942/gfx950 (CDNA3/4) have no image instructions and HIP "
                                            "no surface objects for them (gfx908/gfx90a: not translated); RDNA "
                                            "accesses HIP's surface objects (docs/runtime.md)"),
    "dynamic-parallelism": HazardKind(ERROR, BOTH, "calls {name}: device-side kernel launches (dynamic "
                                                   "parallelism) are not available on AMD"),
    "shared-memory": HazardKind(ERROR, (), "{bytes} bytes of static shared memory exceed the LDS of {where}"),
    "not-translated": HazardKind(ERROR, BOTH, "{name}: not translated: {reason}"),
    # warnings: translatable with care
    "tensor-map": HazardKind(WARNING, BOTH, "{name}: tensor-map (TMA) copies and descriptors have no AMD hardware: "
                                            "emulated with ordinary loads and stores over fatkit's tensor-map "
                                            "layout, which needs a runtime that encodes maps with it "
                                            "(docs/runtime.md)"),
    "warp-shuffle": HazardKind(WARNING, (WAVE64,), "{name}: a wave64 wave holds two 32-lane PTX warps; source lanes, "
                                                   "clamps and the 32-bit member mask apply per half"),
    "warp-vote": HazardKind(WARNING, (WAVE64,), "{name}: votes and ballots are over a 32-lane warp with 32-bit "
                                                "masks; a wave64 wave computes them per half"),
    "warp-activemask": HazardKind(WARNING, (WAVE64,), "{name}: the 32-bit active mask is one half of a wave64 "
                                                      "wave's 64-bit exec mask"),
    "warp-elect": HazardKind(WARNING, (WAVE64,), "{name}: elects one lane per PTX warp, i.e. per half of a wave64 "
                                                 "wave"),
    "warp-match": HazardKind(WARNING, BOTH, "{name}: no AMD instruction; emulated with a loop over the warp's "
                                            "lanes"),
    "warp-reduce": HazardKind(WARNING, BOTH, "{name}: no AMD instruction; emulated with a cross-lane reduction"),
    "warp-sync": HazardKind(WARNING, BOTH, "{name}: assumes independent thread scheduling; diverged lanes of an "
                                           "AMD wave cannot wait for each other"),
    "laneid": HazardKind(WARNING, (WAVE64,), "{name} counts 0–31 in PTX; a wave64 lane id counts 0–63 and is "
                                             "taken modulo 32"),
    "lanemask": HazardKind(WARNING, (WAVE64,), "{name} is a 32-bit lane mask; wave64 masks are 64-bit and are "
                                               "cut per 32-lane half"),
    "wgmma": HazardKind(WARNING, BOTH, "{name}: warpgroup MMA (sm_90a); computed when issued, each warp's rows as "
                                       "mma.sync steps with operands gathered from shared memory through the "
                                       "matrix descriptors"),
    "mma": HazardKind(WARNING, BOTH, "{name}: tensor-core MMA; emulated with lane exchanges and scalar arithmetic "
                                     "(exact for integers; floats summed in f64, rounded once), far slower than "
                                     "MFMA (CDNA) or WMMA (RDNA3+), which it does not use yet"),
    "ldmatrix": HazardKind(WARNING, BOTH, "{name}: loads tensor-core fragments in NVIDIA's lane layout; emulated "
                                          "with shared-memory loads and lane permutes"),
    "stmatrix": HazardKind(WARNING, BOTH, "{name}: stores tensor-core fragments in NVIDIA's lane layout; emulated "
                                          "with lane permutes and shared-memory stores"),
    "movmatrix": HazardKind(WARNING, BOTH, "{name}: transposes a fragment across lanes; emulated with lane "
                                           "permutes"),
    "cp-async": HazardKind(WARNING, BOTH, "{name}: asynchronous global→shared copy; becomes a synchronous copy "
                                          "and its groups and waits no-ops"),
    "cp-async-bulk": HazardKind(WARNING, BOTH, "{name}: bulk copy by the TMA engine; done by the issuing "
                                               "thread's own loads and stores"),
    "mbarrier": HazardKind(WARNING, BOTH, "{name}: shared-memory transaction barrier; emulated with LDS atomics "
                                          "and polling"),
    "approx": HazardKind(WARNING, BOTH, "{name}: approximate result; AMD's approximation differs in the last "
                                        "bits"),
    "rounding-mode": HazardKind(WARNING, BOTH, "{name}: rounding chosen per instruction; AMD sets rounding in the "
                                               "wave's mode register, switched around it"),
    "ftz-mix": HazardKind(WARNING, BOTH, "{name}: the kernel mixes .ftz and non-.ftz f32 arithmetic ({ftz} vs "
                                         "{plain} instructions); AMD's denormal mode is per kernel, so the "
                                         "{minority} ones need explicit handling"),
    "printf": HazardKind(WARNING, BOTH, "calls {name}: device printf fills a buffer the shim drains (docs/runtime.md)"),
    "assert": HazardKind(WARNING, BOTH, "calls {name}: device assert prints and traps; needs printf support"),
    "device-heap": HazardKind(WARNING, BOTH, "calls {name}: fatkit's per-module heap serves it (docs/runtime.md)"),
    "extern-call": HazardKind(WARNING, BOTH, "calls {name}, not defined in this module: runs only where another "
                                             "-rdc unit of the binary defines it (translate links them)"),
    "address-size-32": HazardKind(WARNING, BOTH, "the module uses .address_size 32: AMD code objects are 64-bit, "
                                                 "so pointers are widened"),
    "cluster-launch-control": HazardKind(WARNING, BOTH, "{name}: cluster launch control never cancels a cluster on "
                                                        "AMD (every workgroup runs): the kernel does its own work"),
    "cluster-register": HazardKind(WARNING, BOTH, "{name}: cluster special register; AMD gives it the values "
                                                  "of the cluster shape the PTX fixes or the launch gives (of one CTA "
                                                  "without either)"),
    "grid-sync": HazardKind(WARNING, BOTH, "{name}: the cooperative-groups grid-sync workspace; fatkit serves it "
                                           "from a per-module word (docs/runtime.md), and the kernel needs a "
                                           "cooperative launch (every block resident at once)"),
    # info
    "dynamic-shared-memory": HazardKind(INFO, BOTH, "{name}: dynamic shared memory, size unknown at compile time; "
                                                    "with {static} bytes static, a launch may ask for at most "
                                                    "{room}"),
    "proxy-fence": HazardKind(INFO, BOTH, "{name}: async-proxy fence; an ordinary fence once async copies are "
                                          "emulated"),
    "grid-dependency": HazardKind(INFO, BOTH, "{name}: programmatic dependent launch; a no-op when launches are "
                                              "serialised"),
    "register-realloc": HazardKind(INFO, BOTH, "{name}: warpgroup register reallocation; ignored on AMD"),
    "trap": HazardKind(INFO, BOTH, "{name}: stops the kernel; on AMD the whole queue is aborted"),
    "dynamic-stack": HazardKind(INFO, BOTH, "{name}: dynamic stack allocation; uses AMD scratch memory"),
    "hardware-id": HazardKind(INFO, BOTH, "{name}: hardware placement id; AMD's counterpart has other ranges"),
    "clock": HazardKind(INFO, BOTH, "{name}: counts at another rate on AMD (s_memtime; on gfx11 the constant "
                                    "100 MHz REALTIME clock; s_memrealtime)"),
}

# --------------------------------------------------------------------------------------------------
# detection: PTX → kinds

# kinds the families they name cannot run (images: none on gfx942/gfx950; on gfx908/gfx90a not translated)
_MISSING_HARDWARE = frozenset({"texture", "surface"})

# base opcode → kind, for opcodes every form of which is one hazard
OPCODE_KINDS: dict[str, str] = {
    "wgmma": "wgmma",
    "tcgen05": "tcgen05",
    "tensormap": "tensor-map",
    "mapa": "cluster",
    "getctarank": "cluster",
    "clusterlaunchcontrol": "cluster-launch-control",
    "multimem": "multimem",
    **dict.fromkeys(("tex", "tld4", "txq", "istypep"), "texture"),
    **dict.fromkeys(("suld", "sust", "sured", "suq"), "surface"),
    "shfl": "warp-shuffle",
    "vote": "warp-vote",
    "activemask": "warp-activemask",
    "elect": "warp-elect",
    "match": "warp-match",
    "redux": "warp-reduce",
    "mma": "mma",
    "wmma": "mma",
    "ldmatrix": "ldmatrix",
    "stmatrix": "stmatrix",
    "movmatrix": "movmatrix",
    "mbarrier": "mbarrier",
    "griddepcontrol": "grid-dependency",
    "setmaxnreg": "register-realloc",
    "trap": "trap",
    "brkpt": "trap",
    **dict.fromkeys(("alloca", "stacksave", "stackrestore"), "dynamic-stack"),
}

# (base opcode, first modifier) → kind, for hazards that are one form of an opcode
FORM_KINDS: dict[tuple[str, str], str] = {
    ("bar", "warp"): "warp-sync",
    ("barrier", "cluster"): "cluster",
    ("st", "async"): "cluster",  # stores into another CTA's shared memory
    ("red", "async"): "cluster",
    ("cp", "async"): "cp-async",
    ("fence", "proxy"): "proxy-fence",
    ("fence", "mbarrier_init"): "mbarrier",
}

# modifiers that make any instruction a hazard
MODIFIER_KINDS: dict[str, str] = {
    "approx": "approx",
    "multicast::cluster": "cluster",
    "tensor": "tensor-map",  # cp.async.bulk.tensor, cp.reduce.async.bulk.tensor
    "tensormap": "tensor-map",  # prefetch.tensormap, prefetch.global.tensormap
    "tensormap::generic": "tensor-map",  # fence.proxy.tensormap::generic
}

# directed rounding on floating-point results (the integer roundings rni/rzi/rmi/rpi of cvt need no mode)
DIRECTED_ROUNDING = frozenset({"rz", "rm", "rp", "rna", "rs"})
ROUNDING_OPCODES = frozenset({"add", "sub", "mul", "fma", "mad", "div", "rcp", "sqrt", "cvt"})
# f32 arithmetic whose denormal behaviour `.ftz` chooses (approximations are counted under "approx")
FTZ_OPCODES = frozenset({"add", "sub", "mul", "fma", "mad", "div", "rcp", "sqrt", "rsqrt", "min", "max", "abs",
                         "neg", "setp", "set"})

SPECIAL_REGISTER_KINDS: dict[str, str] = {
    "%laneid": "laneid",
    **dict.fromkeys(("%lanemask_eq", "%lanemask_le", "%lanemask_lt", "%lanemask_ge", "%lanemask_gt"), "lanemask"),
    **dict.fromkeys(("%clusterid", "%nclusterid", "%cluster_ctaid", "%cluster_nctaid", "%cluster_ctarank",
                     "%cluster_nctarank", "%is_explicit_cluster"), "cluster-register"),
    **dict.fromkeys(("%warpid", "%nwarpid", "%smid", "%nsmid", "%gridid"), "hardware-id"),
    **dict.fromkeys(("%envreg1", "%envreg2"), "grid-sync"),
    **dict.fromkeys(("%clock", "%clock_hi", "%clock64", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi"),
                    "clock"),
}

# functions a module calls without defining them → kind (anything else: "extern-call")
EXTERN_FUNCTION_KINDS: dict[str, str] = {
    "vprintf": "printf",
    "__assertfail": "assert",
    "__assert_fail": "assert",
    "malloc": "device-heap",
    "free": "device-heap",
}
DEVICE_RUNTIME_PREFIXES = ("cuda", "__cudaCDP")  # cudaLaunchDeviceV2, cudaGetParameterBufferV2, …

_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*")


@lru_cache(maxsize=4096)
def _classify(opcode: str, modifiers: tuple[str, ...]) -> tuple[str, ...]:
    """The hazard kinds an instruction form falls under (its operands aside)."""
    kinds: list[str] = []
    if opcode in OPCODE_KINDS:
        kinds.append(OPCODE_KINDS[opcode])
    if modifiers:
        form = FORM_KINDS.get((opcode, modifiers[0]))
        if form is None and opcode == "cp" and "async" in modifiers:  # cp.reduce.async.bulk
            form = "cp-async"
        if form == "cp-async" and "bulk" in modifiers:
            form = "cp-async-bulk"
        if form is not None:
            kinds.append(form)
        for modifier in modifiers:
            kind = MODIFIER_KINDS.get(modifier)
            if kind is not None:
                kinds.append(kind)
        if opcode in ROUNDING_OPCODES and not DIRECTED_ROUNDING.isdisjoint(modifiers):
            kinds.append("rounding-mode")
        if opcode == "div" and "full" in modifiers:
            kinds.append("approx")
    if "tensor-map" in kinds:  # a TMA copy or fence is that, not also a bulk copy or a proxy fence
        kinds = [k for k in kinds if k not in ("cp-async-bulk", "proxy-fence")]
    return tuple(dict.fromkeys(kinds))


@lru_cache(maxsize=4096)
def _ftz_form(opcode: str, modifiers: tuple[str, ...]) -> bool | None:
    """True/False for f32 arithmetic with/without `.ftz`; None where `.ftz` does not apply."""
    if opcode not in FTZ_OPCODES or "f32" not in modifiers or "approx" in modifiers or "full" in modifiers:
        return None
    return "ftz" in modifiers


# --------------------------------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class Hazard:
    """One finding: its kind (a key of HAZARD_KINDS), severity, the PTX line, a message and the AMD
    targets it affects. `function` names the `.func` it is in when that is not the kernel itself."""

    kind: str
    severity: str
    line: int
    message: str
    targets: tuple[str, ...]
    function: str | None = None

    def affects(self, names: frozenset[str]) -> bool:
        """Whether the finding concerns a target described by `target_names(...)`."""
        return not names.isdisjoint(self.targets)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "severity": self.severity, "line": self.line,
                               "message": self.message, "targets": list(self.targets)}
        if self.function is not None:
            out["function"] = self.function
        return out


def worst(severities: Iterable[str]) -> str | None:
    """The worst of some severities, None for none."""
    ranks = [SEVERITIES.index(s) for s in severities]
    return SEVERITIES[min(ranks)] if ranks else None


@dataclass(frozen=True)
class KernelHazards:
    """The findings of one `.entry` and the functions it reaches, in line order.

    `static_shared_bytes`: `.shared` variables it uses (its own, its functions', module-level ones
    they name), laid out with their alignment. `dynamic_shared`: the unsized `.extern .shared`
    arrays it uses, whose size the launch sets.
    """

    name: str
    line: int
    hazards: tuple[Hazard, ...]
    static_shared_bytes: int = 0
    dynamic_shared: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()  # the module's .funcs it reaches

    @property
    def worst(self) -> str | None:
        return worst(h.severity for h in self.hazards)

    def for_target(self, target: str) -> KernelHazards:
        """Only the findings that affect `target` (a gfx name, `wave32` or `wave64`)."""
        names = target_names(target)
        return replace(self, hazards=tuple(h for h in self.hazards if h.affects(names)))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "line": self.line,
            "worst": self.worst,
            "static_shared_bytes": self.static_shared_bytes,
            "dynamic_shared": list(self.dynamic_shared),
            "functions": list(self.functions),
            "hazards": [h.to_json() for h in self.hazards],
        }


# --------------------------------------------------------------------------------------------------
# analysis


@dataclass
class _FunctionFacts:
    """What one function body holds, before the call graph joins functions into kernels."""

    findings: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)  # kind, line, message fields
    calls: set[str] = field(default_factory=set)  # callee names of direct calls
    indirect_call: bool = False
    symbols: set[str] = field(default_factory=set)  # every non-register name it uses
    shared: list[ast.Variable] = field(default_factory=list)  # its own .shared declarations
    ftz: list[tuple[int, str]] = field(default_factory=list)  # (line, name) of f32 arithmetic with .ftz
    plain: list[tuple[int, str]] = field(default_factory=list)  # … and without


def analyse(module: ast.Module) -> list[KernelHazards]:
    """The hazards of every kernel (`.entry` with a body) of `module`, in module order."""
    return _Analysis(module).kernels()


class _Analysis:
    def __init__(self, module: ast.Module):
        self.module = module
        self.functions: dict[str, ast.Function] = {}
        for f in module.functions:  # a definition wins over declarations of the same name
            if f.body is not None or f.name not in self.functions:
                self.functions[f.name] = f
        self.shared_globals = {v.name: v for v in module.variables if v.state_space == "shared"}
        self.operand_cache: dict[int, tuple[tuple[str, ...], tuple[ast.Name, ...]]] = {}
        self.facts = {name: self._facts(f) for name, f in self.functions.items() if f.body is not None}
        self.address_taken = self._address_taken()

    # -- per function -------------------------------------------------------------------------------

    def _facts(self, function: ast.Function) -> _FunctionFacts:
        facts = _FunctionFacts()
        findings, symbols = facts.findings, facts.symbols
        operand_facts = self._operand_facts
        for statement in function.statements():
            kind = type(statement)
            if kind is ast.Instruction:
                ins = statement
                opcode, modifiers, line = ins.opcode, ins.modifiers, ins.line
                kinds = _classify(opcode, modifiers)
                refused = refusal(opcode, modifiers)  # the coverage table translate refuses by
                for found in kinds:
                    # a hardware some families lack stays an error there, however well the others translate it
                    translated = refused is None and found not in _MISSING_HARDWARE
                    findings.append((found, line, {"name": ins.name, "translated": translated}))
                if refused is not None and not any(HAZARD_KINDS[k].severity == ERROR and HAZARD_KINDS[k].targets == BOTH
                                                   for k in kinds):
                    findings.append(("not-translated", line, {"name": ins.name, "reason": refused}))
                ftz = _ftz_form(opcode, modifiers)
                if ftz is not None:
                    (facts.ftz if ftz else facts.plain).append((line, ins.name))
                operands = ins.operands
                if opcode == "call":
                    operands = self._call(ins, facts)
                for operand in operands:
                    names, specials = operand_facts(operand)
                    symbols.update(names)
                    for register in specials:
                        found = SPECIAL_REGISTER_KINDS.get(register.name)
                        if found is not None:
                            findings.append((found, line, {"name": _register_text(register)}))
            elif kind is ast.Variable and statement.state_space == "shared":
                facts.shared.append(statement)
            elif kind is ast.TargetList and statement.directive == "calltargets":
                facts.calls.update(name for name in statement.targets if name in self.functions)
        return facts

    def _call(self, ins: ast.Instruction, facts: _FunctionFacts) -> tuple[ast.Operand, ...]:
        """Record the callee of a `call`; returns the operands left to scan (arguments, returns)."""
        operands = ins.operands
        for i, operand in enumerate(operands):
            if type(operand) is ast.Name:
                callee = self.functions.get(operand.name)
                if callee is None:  # a register: an indirect call
                    facts.indirect_call = True
                elif callee.body is None:
                    facts.findings.append((_extern_kind(callee.name), ins.line, {"name": callee.name}))
                else:
                    facts.calls.add(callee.name)
                return operands[:i] + operands[i + 1:]
        return operands

    def _operand_facts(self, operand: ast.Operand) -> tuple[tuple[str, ...], tuple[ast.Name, ...]]:
        """(symbols, special registers) an operand names; operands are shared nodes, so cached by id."""
        key = id(operand)
        hit = self.operand_cache.get(key)
        if hit is None:
            symbols: list[str] = []
            specials: list[ast.Name] = []
            _collect(operand, symbols, specials)
            hit = self.operand_cache[key] = (tuple(symbols), tuple(specials))
        return hit

    def _address_taken(self) -> set[str]:
        """Functions an indirect call may reach: those named anywhere but as a direct callee."""
        taken: set[str] = set()
        for facts in self.facts.values():
            taken.update(name for name in facts.symbols if name in self.functions)
        for variable in self.module.variables:
            if variable.initializer is not None:
                names: list[str] = []
                _collect(variable.initializer, names, [])
                taken.update(name for name in names if name in self.functions)
        return taken

    # -- per kernel ---------------------------------------------------------------------------------

    def kernels(self) -> list[KernelHazards]:
        return [self._kernel(f) for f in self.module.kernels if f.body is not None and f is self.functions[f.name]]

    def _reached(self, kernel: ast.Function) -> list[str]:
        """The kernel and the functions it can call, transitively, in discovery order."""
        order, seen = [kernel.name], {kernel.name}
        i = 0
        while i < len(order):
            facts = self.facts.get(order[i])
            i += 1
            if facts is None:
                continue
            callees = sorted(facts.calls)
            if facts.indirect_call:
                callees += sorted(self.address_taken)
            for callee in callees:
                if callee not in seen:
                    seen.add(callee)
                    order.append(callee)
        return order

    def _kernel(self, kernel: ast.Function) -> KernelHazards:
        reached = self._reached(kernel)
        hazards: dict[tuple[str, int], Hazard] = {}

        def add(kind: str, line: int, function: str | None, targets: tuple[str, ...] | None = None,
                **fields: Any) -> None:
            spec = HAZARD_KINDS[kind]
            # an instruction form translate lowers (coverage.py) runs, however hard: at worst a warning
            severity = WARNING if spec.severity == ERROR and fields.get("translated") else spec.severity
            if (kind, line) not in hazards:
                hazards[(kind, line)] = Hazard(kind, severity, line, spec.message.format(**fields),
                                               spec.targets if targets is None else targets, function)

        if self.module.address_size == 32:
            add("address-size-32", kernel.line, None)
        # a cluster of one CTA (`.reqnctapercluster 1, 1, 1`, `.maxclusterrank 1`, with or without
        # `.explicitcluster`) is the CTA itself
        declared = {d.name: d.values for d in kernel.directives}
        shape = declared.get("reqnctapercluster") or declared.get("maxclusterrank")
        if shape is None or math.prod(shape) != 1:
            for directive in kernel.directives:
                if "cluster" in directive.name:  # a fixed or launch-given shape translates
                    add("cluster", kernel.line, None, name=f".{directive.name}", translated=True)
        ftz: list[tuple[int, str, str | None]] = []  # (line, instruction, function) of f32 arithmetic
        plain: list[tuple[int, str, str | None]] = []
        symbols: set[str] = set()
        local_shared: list[ast.Variable] = []
        for name in reached:
            function = self.functions[name]
            where = None if name == kernel.name else name
            facts = self.facts.get(name)
            if facts is None:  # declared, not defined, and reached through a function pointer
                add(_extern_kind(name), function.line, None, name=name)
                continue
            for kind, line, fields in facts.findings:
                add(kind, line, where, **fields)
            ftz += [(line, ins, where) for line, ins in facts.ftz]
            plain += [(line, ins, where) for line, ins in facts.plain]
            symbols |= facts.symbols
            local_shared += facts.shared
        if ftz and plain:
            minority = ftz if len(ftz) < len(plain) else plain
            line, name, where = min(minority)
            add("ftz-mix", line, where, name=name, ftz=len(ftz), plain=len(plain),
                minority=".ftz" if minority is ftz else "non-.ftz")
        shared = local_shared + [v for name, v in self.shared_globals.items() if name in symbols]
        static_bytes, dynamic = _shared_layout(shared)
        if static_bytes > min(f.lds_bytes for f in TARGET_FAMILIES):
            add("shared-memory", kernel.line, None, _lds_targets(static_bytes), bytes=static_bytes,
                where=_lds_by_size(over=static_bytes))
        for variable in dynamic:
            add("dynamic-shared-memory", variable.line, None, name=variable.name, static=static_bytes,
                room=_lds_by_size(static_bytes))
        ordered = sorted(hazards.values(), key=lambda h: (h.line, h.kind))
        return KernelHazards(kernel.name, kernel.line, tuple(ordered), static_bytes,
                             tuple(v.name for v in dynamic), tuple(reached[1:]))


def _extern_kind(name: str) -> str:
    """The kind of calling `name`, a function the module declares but does not define."""
    kind = EXTERN_FUNCTION_KINDS.get(name)
    if kind is None:
        kind = "dynamic-parallelism" if name.startswith(DEVICE_RUNTIME_PREFIXES) else "extern-call"
    return kind


def _register_text(register: ast.Name) -> str:
    return register.name if register.component is None else f"{register.name}.{register.component}"


def _collect(node: Any, symbols: list[str], specials: list[ast.Name]) -> None:
    """The non-register names and the special registers inside an operand or initializer."""
    kind = type(node)
    if kind is ast.Name:
        name = node.name
        if name[0] != "%":
            symbols.append(name)
        elif ast.is_special_register(name):
            specials.append(node)
    elif kind is ast.Address:
        if node.base is not None:
            _collect(node.base, symbols, specials)
        for item in node.extra:
            _collect(item, symbols, specials)
    elif kind in (ast.Vector, ast.ArgList, ast.InitList):
        for item in node.items:
            _collect(item, symbols, specials)
    elif kind is ast.Pair:
        _collect(node.first, symbols, specials)
        _collect(node.second, symbols, specials)
    elif kind in (ast.Negated, ast.Minus):
        _collect(node.operand, symbols, specials)
    elif kind is ast.SymbolRef:
        symbols.append(node.name)
    elif kind is ast.Expr:
        symbols.extend(_IDENTIFIER.findall(node.text))


def _shared_layout(variables: list[ast.Variable]) -> tuple[int, list[ast.Variable]]:
    """Bytes of the sized `.shared` variables laid out in order with their alignment, and the unsized
    (dynamic) ones."""
    offset = 0
    dynamic = []
    for variable in variables:
        size = variable.size_bytes
        if size is None:
            if None in variable.array:
                dynamic.append(variable)
            continue
        align = variable.align or variable.element_size or 1
        offset = -(-offset // align) * align + size
    return offset, dynamic


# --------------------------------------------------------------------------------------------------
# modules: PTX text and binaries


@dataclass(frozen=True)
class ModuleHazards:
    """The hazards of one PTX module, or why it could not be read (`parsed` False, `error` set)."""

    source: str
    arch: str | None
    parsed: bool
    error: str | None = None
    kernels: tuple[KernelHazards, ...] = ()

    @property
    def hazards(self) -> Iterator[Hazard]:
        return (h for k in self.kernels for h in k.hazards)

    @property
    def worst(self) -> str | None:
        return ERROR if not self.parsed else worst(h.severity for h in self.hazards)

    def for_target(self, target: str) -> ModuleHazards:
        return replace(self, kernels=tuple(k.for_target(target) for k in self.kernels))

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "arch": self.arch,
            "parsed": self.parsed,
            "error": self.error,
            "worst": self.worst,
            "kernels": [k.to_json() for k in self.kernels],
        }


def lint_ptx(text: str, *, source: str = "<ptx>", arch: str | None = None) -> ModuleHazards:
    """Parse and analyse one module; a module that does not parse is reported, not raised."""
    try:
        module = parse_ptx(text, source=source)
    except FatkitError as exc:
        return ModuleHazards(source, arch, False, str(exc))
    return ModuleHazards(source, module.arch or arch, True, None, tuple(analyse(module)))


def lint_binary(binary: Binary) -> Iterator[ModuleHazards]:
    """The hazards of every PTX entry of a scanned binary. A standalone `.ptx` file is named by its path,
    an entry inside a container `path#c<container>.e<entry>` (the numbers `fatkit inspect` shows)."""
    for container in binary.containers:
        for entry in container.entries:
            if entry.kind != "ptx":
                continue
            standalone = binary.format == "ptx" and len(binary.containers) == 1 and len(container.entries) == 1
            source = binary.path if standalone else f"{binary.path}#c{container.index}.e{entry.index}"
            try:
                text = entry.payload.rstrip(b"\0").decode("utf-8", "replace")
            except FatkitError as exc:
                yield ModuleHazards(source, entry.arch, False, exc.message)
                continue
            yield lint_ptx(text, source=source, arch=entry.arch)


def summarize(modules: Iterable[ModuleHazards]) -> dict[str, Any]:
    """Counts over modules: modules read and not, kernels, findings by severity and by kind."""
    modules = list(modules)
    hazards = [h for m in modules for h in m.hazards]
    by_kind = Counter(h.kind for h in hazards)
    return {
        "modules": len(modules),
        "unparsed": sum(not m.parsed for m in modules),
        "kernels": sum(len(m.kernels) for m in modules),
        "worst": worst(m.worst for m in modules if m.worst is not None),
        "by_severity": {s: sum(h.severity == s for h in hazards) for s in SEVERITIES},
        "by_kind": dict(sorted(by_kind.items(), key=lambda kv: (SEVERITIES.index(HAZARD_KINDS[kv[0]].severity),
                                                                 -kv[1], kv[0]))),
    }
