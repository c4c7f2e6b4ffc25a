"""The differential runner: one scenario, two targets, every difference reported.

Both targets run on fresh builds of the same scenario; each observation is checked
against the spec (``spec.check``) and the two are compared here. Severity of a
difference: error on an in-contract input where both calls returned normally (or
where their outcomes differ); info on the contract's failure path (a missing state
index, where partial writes may differ) and on inputs that should not happen.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings

from oracles.run import observe
from oracles.strategies import out_of_contract_scenarios, staging_scenarios
from oracles.targets import Target
from spec import ERROR, INFO, Finding, Observation, StagingScenario, TargetProfile, check
from spec.findings import FindingsResult
from spec.scenario import contract_breaches, first_missing_state_index
from spec.schema import FIELDS_BY_BUFFER

__all__ = ["CampaignConfig", "CampaignResult", "compare", "evaluate", "preload_project_modules",
           "run_campaign"]


def _copy_ranges(o: Observation, buffer: str) -> list[tuple[int, int]]:
    return [(c.start, c.stop) for c in o.copies(buffer)]


def compare(s: StagingScenario, a: Observation, b: Observation, pa: TargetProfile,
            pb: TargetProfile, in_contract: bool | None = None) -> list[Finding]:
    """Differences between baseline ``a`` and candidate ``b`` on scenario ``s``."""
    if in_contract is None:
        in_contract = not contract_breaches(s)
    flag = s.run_prefix_state_migration
    out: list[Finding] = []
    # The two contracts can differ: with the flag False the later generation does not
    # need state indices, an older one does. Differences that follow from that are info.
    contracts_differ = (pa.requires_state_idx(flag) != pb.requires_state_idx(flag)
                        and (first_missing_state_index(s, pa) or first_missing_state_index(s, pb)))
    both_returned = a.returned and b.returned
    context = _context(s, pa, pb, in_contract, contracts_differ)

    def severity(strict: bool) -> str:
        return ERROR if in_contract and strict and not contracts_differ else INFO

    def add(inv: str, message: str, strict: bool, **kw) -> None:
        f = Finding(inv, severity(strict), message, side="both", in_contract=in_contract, **kw)
        if f.severity == INFO and context:
            f.extra["context"] = context
        out.append(f)

    if (a.exception_type, a.timed_out) != (b.exception_type, b.timed_out):
        add("same_outcome", f"baseline {_outcome(a)}, candidate {_outcome(b)}", True,
            baseline=_outcome(a), candidate=_outcome(b))
    elif a.exception_message != b.exception_message:
        add("same_message", "same exception type, different message text (the contract is the "
            "type and the request id; logs matched on the text would change)", False,
            baseline=a.exception_message, candidate=b.exception_message)
    strict_state = both_returned
    fields_a = {f.buffer for f in pa.staged_fields(flag)}
    fields_b = {f.buffer for f in pb.staged_fields(flag)}
    for buffer in sorted(fields_a ^ fields_b):
        who = "baseline" if buffer in fields_a else "candidate"
        add("same_fields", f"only the {who} stages {FIELDS_BY_BUFFER[buffer].name} "
            f"(run_prefix_state_migration={flag})", False, field=FIELDS_BY_BUFFER[buffer].name,
            extra={"kind": who})
    for buffer in sorted(fields_a & fields_b):
        name = FIELDS_BY_BUFFER[buffer].name
        for view, va, vb in (("cpu", a.cpu.get(buffer), b.cpu.get(buffer)),
                             ("gpu", a.gpu.get(buffer), b.gpu.get(buffer))):
            if va is None or vb is None or va == vb:
                continue
            slots = [i for i, (x, y) in enumerate(zip(va, vb)) if x != y]
            i = slots[0]
            where = "live" if i < s.num_reqs else "tail"
            add("same_buffers", f"{view} {name}[{i}] ({where}): baseline {va[i]!r}, candidate "
                f"{vb[i]!r}", strict_state, field=name, slot=i, view=view, baseline=va[i],
                candidate=vb[i], extra={"slots": slots, "baseline_values": va,
                                        "candidate_values": vb})
        ra, rb = _copy_ranges(a, buffer), _copy_ranges(b, buffer)
        if ra != rb:
            add("same_copies", f"{name} copied over {ra} by the baseline, {rb} by the candidate",
                strict_state, field=name, baseline=ra, candidate=rb)
    if a.inputs_after != b.inputs_after:
        keys = [k for k in a.inputs_after if a.inputs_after.get(k) != b.inputs_after.get(k)]
        for k in keys:
            add("same_inputs_after", f"{k} differs after the call", strict_state, field=k,
                baseline=a.inputs_after.get(k), candidate=b.inputs_after.get(k))
    return out


def _context(s: StagingScenario, pa: TargetProfile, pb: TargetProfile, in_contract: bool,
             contracts_differ) -> str:
    """Why a difference on this scenario is allowed (info), in one line."""
    if not in_contract:
        return "out of contract: " + "; ".join(contract_breaches(s)[:2])
    if contracts_differ:
        return ("the two contracts differ: with run_prefix_state_migration=False only one side "
                "needs state indices")
    missing = first_missing_state_index(s, pa) or first_missing_state_index(s, pb)
    if missing:
        return (f"failure path: live request {missing[1]!r} (slot {missing[0]}) has no state "
                "index, so both raise and partial writes may differ")
    return ""


def _outcome(o: Observation) -> str:
    if o.timed_out:
        return "hung"
    if o.exception_type is None:
        return "returned"
    return f"raised {o.exception_type}"


def evaluate(baseline: Target | None, candidate: Target, s: StagingScenario,
             device: str = "cpu", timeout: float | None = 5.0, deferred: bool = False,
             gpu_busy_cycles: int = 0, kernel: str = "auto", kernel_backend: str | None = None,
             steps: int = 1) -> tuple[list[Finding], Observation | None, Observation]:
    """Spec findings for each side plus their differences, for one scenario.

    With ``baseline`` None only the candidate is run and checked against the spec (and
    the kernel oracle compares its mirrors with the values the spec derives).
    ``kernel``: "auto" runs the kernel oracle where live mirrors differ, "always" on
    every example, "off" never. ``steps`` stages the scenario that many times on the
    same buffers, waiting for each step's copies before the next (as an engine must).
    """
    in_contract = not contract_breaches(s)
    b, _ = observe(candidate, s, device, timeout, deferred, gpu_busy_cycles, steps)
    findings = check(s, b, candidate.profile, "candidate", in_contract)
    a = None
    if baseline is not None:
        a, _ = observe(baseline, s, device, timeout, deferred, gpu_busy_cycles, steps)
        findings = check(s, a, baseline.profile, "baseline", in_contract) + findings
        findings += compare(s, a, b, baseline.profile, candidate.profile, in_contract)
    if kernel != "off":
        from oracles.kernel_oracle import annotate
        backend = kernel_backend or ("triton" if device == "cuda" else "reference")
        findings = annotate(findings, s, a, b, backend, device, always=kernel == "always")
    return findings, a, b


@dataclass
class CampaignConfig:
    examples: int = 300            # per stream: in contract, and out of contract
    seed: int = 0
    device: str = "cpu"
    max_capacity: int = 8
    timeout: float = 5.0           # seconds per staging call before it counts as a hang
    out_of_contract: bool = True
    deferred_copies: bool = False  # CPU model of asynchronous copies (hazard detection)
    gpu_busy_cycles: int = 0       # CUDA: device work queued ahead of each call's copies
    kernel: str = "auto"           # kernel oracle: "auto" (where live mirrors differ),
                                   # "always", or "off"
    kernel_backend: str | None = None   # None: triton on cuda, reference on cpu
    steps: int = 1                 # staging calls per example on the same buffers
    database: object = None        # a hypothesis example database (None: none kept)
    derandomize: bool = False      # hypothesis derandomize (the explicit seed still rules;
                                   # no example database is used with it)


@dataclass
class CampaignResult(FindingsResult):
    baseline: str | None      # None: the spec oracle alone on the candidate
    candidate: str
    config: CampaignConfig
    findings: list[Finding] = field(default_factory=list)
    examples_in_contract: int = 0
    examples_out_of_contract: int = 0
    seconds: float = 0.0


class _ErrorFound(Exception):
    def __init__(self, findings: list[Finding], scenario: StagingScenario) -> None:
        super().__init__(findings[0].message)
        self.findings, self.scenario = findings, scenario


def _size(s: StagingScenario) -> tuple:
    return (s.capacity, s.num_reqs, len(s.req_ids), len(s.to_json()))


_PRELOADED = False


def preload_project_modules() -> None:
    """Import the project's modules once, so that runs reproduce whichever way they start.

    Hypothesis draws part of its integers from a pool of constants it collects from
    every *local* module loaded at the time (test files excluded), and the pool grows
    as modules are imported; the same seed then gives other examples. Loading the
    project's modules first makes the pool the same for ``stagecheck mutants``,
    ``python -m oracles.mutants``, worker processes and pytest.
    """
    global _PRELOADED
    if _PRELOADED:
        return
    _PRELOADED = True
    import importlib
    import os
    import pkgutil

    import torch
    if not torch.cuda.is_available():   # as the CLI and the tests do, before triton loads
        os.environ.setdefault("TRITON_INTERPRET", "1")
    for package in ("spec", "impl", "oracles"):
        try:
            pkg = importlib.import_module(package)
        except ImportError:
            continue
        for info in pkgutil.iter_modules(pkg.__path__, package + "."):
            try:
                importlib.import_module(info.name)
            except Exception:   # an optional dependency (triton) missing: that one stays out
                pass


IMPACT_PROBE_EXAMPLES = 60


def _probe_impact(baseline, candidate, config: CampaignConfig, kept: dict, impact: dict,
                  record) -> None:
    """For error findings not yet seen to reach the kernel, look further.

    A search stops at its first error and shrinks it towards values on which the kernel
    does nothing; this phase draws more in-contract examples (no shrinking) and records
    on which of them each difference changes the kernel's results.
    """
    open_keys = {k for k, (_, f) in kept.items() if f.severity == ERROR and not impact.get(k)}
    if not open_keys:
        return

    class _Settled(Exception):
        pass

    @settings(max_examples=IMPACT_PROBE_EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), phases=(Phase.generate,))
    @hyp_seed(config.seed + 1)
    @given(staging_scenarios(config.max_capacity))
    def probe(s):
        findings, _, _ = evaluate(baseline, candidate, s, config.device, config.timeout,
                                  config.deferred_copies, config.gpu_busy_cycles,
                                  config.kernel, config.kernel_backend, config.steps)
        for f in findings:
            if f.key in open_keys and f.kernel_impact is not None:
                impact[f.key] = bool(impact.get(f.key)) or f.kernel_impact
        if all(impact.get(k) for k in open_keys):
            raise _Settled()

    try:
        probe()
    except _Settled:
        pass


def run_campaign(baseline: Target | None, candidate: Target,
                 config: CampaignConfig | None = None, progress=None) -> CampaignResult:
    """Fuzz both targets; keep the smallest example of every distinct finding.

    Error findings stop the search and are shrunk by hypothesis to a minimal
    scenario; info findings are collected along the way (the smallest example seen).
    """
    config = config or CampaignConfig()
    preload_project_modules()
    result = CampaignResult(baseline.spec if baseline else None, candidate.spec, config)
    kept: dict[tuple, tuple[tuple, Finding]] = {}
    first_seen: dict[tuple, int] = {}
    total = [0]
    started = time.perf_counter()

    impact: dict[tuple, bool | None] = {}

    def record(findings: list[Finding], s: StagingScenario) -> None:
        size = _size(s)
        for f in findings:
            # a difference reaches the kernel if it did on any example that showed it
            if f.kernel_impact is not None:
                impact[f.key] = bool(impact.get(f.key)) or f.kernel_impact
            first_seen.setdefault(f.key, total[0])
            f.examples_to_find = first_seen[f.key]
            if f.key not in kept or size < kept[f.key][0]:
                f.scenario = s.to_dict()
                kept[f.key] = (size, f)

    streams = [("in", staging_scenarios(config.max_capacity).map(lambda s: ("", s)))]
    if config.out_of_contract:
        streams.append(("out", out_of_contract_scenarios(config.max_capacity)))
    for stream, strategy in streams:
        counter = [0]

        @settings(max_examples=config.examples, deadline=None,
                  database=None if config.derandomize else config.database,
                  suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                  derandomize=config.derandomize,
                  phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink))
        @hyp_seed(config.seed)
        @given(strategy)
        def probe(labeled):
            _, s = labeled
            counter[0] += 1
            total[0] += 1
            findings, _, _ = evaluate(baseline, candidate, s, config.device, config.timeout,
                                      config.deferred_copies, config.gpu_busy_cycles,
                                      config.kernel, config.kernel_backend, config.steps)
            record(findings, s)
            errors = [f for f in findings if f.severity == ERROR]
            if errors:
                raise _ErrorFound(errors, s)
            if progress is not None:
                progress(stream, counter[0], config.examples)

        # one database key per (baseline, candidate, stream): campaigns never share examples
        probe.hypothesis.inner_test._hypothesis_internal_add_digest = repr(
            (result.baseline, result.candidate, stream, config.max_capacity)).encode()
        try:
            probe()
        except _ErrorFound as found:   # the shrunk example, replayed by hypothesis
            for f in found.findings:   # the shrunk example wins
                f.scenario = found.scenario.to_dict()
                kept[f.key] = ((-1,), f)
        if stream == "in":
            result.examples_in_contract = counter[0]
        else:
            result.examples_out_of_contract = counter[0]
    if config.kernel != "off":
        _probe_impact(baseline, candidate, config, kept, impact, record)
    for key, (_, f) in kept.items():
        if impact.get(key) is not None:
            f.kernel_impact = impact[key]
    result.findings = sorted((f for _, f in kept.values()),
                             key=lambda f: (f.severity != ERROR, f.invariant, f.side,
                                            str(f.field)))
    result.seconds = time.perf_counter() - started
    return result
