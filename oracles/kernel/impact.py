"""Kernel oracle 2: does a staging difference reach the consumer's results?

Inside a differential run (``evaluate``), run the schema's consumer on each side's
staged GPU mirrors and compare what it computes. The built-in consumer is the Mamba
postprocess kernel (``mamba_postprocess_results_differ``): it runs on identical
cloned states, and what it wrote is compared.

The kernel reads only slots ``< num_reqs`` of the staged arrays (oracle 1 checks that
with garbage tails), so two sides whose live mirrors agree give identical results; the
kernel runs only when they differ, unless ``always`` is asked for, which also proves
that shortcut on the run at hand.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from stagecheck.spec import ERROR, Finding, Observation, StagingScenario
from stagecheck.spec.invariants import expected_value
from stagecheck.spec.scenario import MISSING
from stagecheck.spec.schema import INT32_MAX, INT32_MIN, TargetProfile

if TYPE_CHECKING:
    from stagecheck.oracles.kernel.scenarios import KernelScenario

__all__ = ["CONSUMERS", "KernelImpact", "annotate", "consumer_fields", "kernel_impact",
           "mamba_postprocess_results_differ", "staged_live"]


def consumer_fields(profile: TargetProfile) -> tuple:
    """The staged fields the schema's consumer reads."""
    return tuple(f for f in profile.schema.fields if f.read_by_consumer)

#: The state tensors the impact check runs the kernel on: two layers in two groups,
#: with different shapes and dtypes, conv and temporal states sharing each page.
IMPACT_LAYERS = (      # LayerSpec arguments (kernel/scenarios.py: torch is imported with it,
    # only when a kernel runs; most findings are settled without one)
    dict(group=0, conv_width=3, conv_inner=2, conv_dtype="float32",
              temporal_shape=[2, 2], temporal_dtype="float16"),
    dict(group=1, conv_width=2, conv_inner=3, conv_dtype="bfloat16",
              temporal_shape=[3], temporal_dtype="float32", temporal_first=True, pad_bytes=4),
)
#: Contexts the impact check tries: block sizes and how many drafts were accepted.
IMPACT_BLOCK_SIZES = (1, 4)
IMPACT_ACCEPTED = ("one", "all")
MAX_IMPACT_COLUMNS = 1 << 16


def _live(values: list, n: int) -> list[int]:
    return [int(v) for v in values[:n]]


def staged_live(s: StagingScenario, o: Observation | None,
                profile: TargetProfile) -> dict[str, list[int]] | None:
    """The consumer-read arrays, live slots only: from mirrors, or from the spec."""
    fields = consumer_fields(profile)
    if o is None:   # what the spec says the mirrors should hold
        out = {}
        for f in fields:
            values = [expected_value(s, f, i, r) for i, r in enumerate(s.live_ids)]
            if any(v is MISSING for v in values):
                return None
            out[f.name] = [int(v) for v in values]
        return out
    if not all(f.buffer in o.gpu for f in fields):
        return None
    return {f.name: _live(o.gpu[f.buffer], s.num_reqs) for f in fields}


def _accepted(s: StagingScenario, accepted_mode: str) -> list[int]:
    """Accepted tokens per live request: one, or every draft and the bonus token."""
    drafts = [len(s.inputs["spec_decode_tokens"].get(r, ())) for r in s.live_ids]
    return [1 if accepted_mode == "one" else d + 1 for d in drafts]


def _decisions(s: StagingScenario, side: dict, block_size: int, accepted_mode: str) -> list:
    """What the kernel decides for each live request of one side (pure integer math)."""
    from stagecheck.impl.postprocess_ref import kernel_decisions   # torch (see _context)
    return kernel_decisions(side["state_idx"], side["scheduled"], side["computed"],
                            side["draft"], _accepted(s, accepted_mode), s.num_reqs, block_size)


def _settled_without_running(backend: str, a: dict, b: dict, decided: list[list]) -> bool:
    """Whether both sides' decisions (``decided``) are alike, so that the reference need
    not run: it does what its decisions say on the tables and states both runs share, so
    the same decisions write the same results (a swap of two counts that keeps their sum,
    say). With equal arrays (``--kernel always``) it runs anyway, as asked; the Triton
    backend always runs."""
    return backend == "reference" and a != b and decided[0] == decided[1]


def _context(s: StagingScenario, decided: list[list], block_size: int,
             accepted_mode: str) -> "KernelScenario":
    """Block tables, accepted counts and states for one impact run over both sides, whose
    decisions are ``decided`` (``_decisions``).

    Every block column a decision of either side touches gets its own physical block;
    every other column maps to block 0, which no decision touches. So long-context
    values (columns in the tens of thousands) cost table width, not state memory.
    Columns past ``MAX_IMPACT_COLUMNS`` stay out of the table: the kernel skips them.
    """
    # torch: the kernel's modules load only when staged values differ (a clean run never)
    from stagecheck.oracles.kernel.scenarios import KernelScenario, LayerSpec, SparseTable
    n = s.num_reqs
    accepted = _accepted(s, accepted_mode)
    used: set[tuple[int, int]] = set()
    for decisions in decided:
        for i, d in enumerate(decisions):
            if d is not None:
                used.update((i, c) for c in (d.src, d.dest, d.src + d.bias)
                            if 0 <= c < MAX_IMPACT_COLUMNS)
    columns = 1 + max((c for _, c in used), default=0)
    physical = {pair: 1 + k for k, pair in enumerate(sorted(used))}
    num_blocks = 1 + len(physical)
    tables = []
    for g in range(len(IMPACT_LAYERS)):   # each group its own permutation of the blocks
        shift = g * 7919
        tables.append(SparseTable(n, columns, {
            pair: 1 + (block - 1 + shift) % len(physical) for pair, block in physical.items()}))
    seed = zlib.crc32(s.to_json().encode())
    return KernelScenario(block_size=block_size, num_reqs=n, num_blocks=num_blocks,
                          state_idx=[], num_scheduled=[], num_computed=[], num_draft=[],
                          num_accepted=accepted, block_tables=tables,
                          layers=[LayerSpec(**layer) for layer in IMPACT_LAYERS], seed=seed)


def _run_side(context: "KernelScenario", side: dict, backend: str, device: str, tables):
    from stagecheck.oracles.kernel.scenarios import KernelScenario, build_kernel_inputs  # torch
    k = KernelScenario(**{**context.__dict__, "state_idx": side["state_idx"],
                          "num_scheduled": side["scheduled"], "num_computed": side["computed"],
                          "num_draft": side["draft"], "num_accepted": list(context.num_accepted)})
    inputs = build_kernel_inputs(k, device, tables)
    return inputs.run(backend)


def mamba_postprocess_results_differ(s: StagingScenario, a: dict, b: dict,
                                     backend: str = "reference", device: str = "cpu") -> list[str]:
    """Run the kernel on both sides' live staged arrays, context by context.

    Stops at the first context whose results differ and returns its differences.
    """
    # torch: see _context
    from stagecheck.oracles.kernel.scenarios import build_block_tables, compare_kernel_outputs
    out: list[str] = []
    for block_size in IMPACT_BLOCK_SIZES:
        for mode in IMPACT_ACCEPTED:
            decided = [_decisions(s, side, block_size, mode) for side in (a, b)]
            if _settled_without_running(backend, a, b, decided):
                continue      # the same results (``_settled_without_running``)
            context = _context(s, decided, block_size, mode)
            # both runs read one set of tables (the kernel never writes them: kernel
            # oracle 1 checks that); long-context tables are megabytes
            tables = build_block_tables(context, device)
            ra = _run_side(context, a, backend, device, tables)
            rb = _run_side(context, b, backend, device, tables)
            # the staged inputs differ by construction; compare what the kernel wrote
            diffs = [d for d in compare_kernel_outputs(ra, rb)
                     if not d.startswith(("state_idx", "num_scheduled", "num_computed",
                                          "num_draft"))]
            out += [f"block_size={block_size}, accepted={mode}: {d}" for d in diffs]
            if out:
                return out
    return out


def _fits_int32(arrays: dict[str, list[int]]) -> bool:
    return all(INT32_MIN <= v <= INT32_MAX for values in arrays.values() for v in values)


@dataclass
class KernelImpact:
    """What the kernel oracle concluded for one example: how the consumer's results
    differ (empty: the same, or the kernel did not need to run)."""

    differences: list[str] = field(default_factory=list)

    @property
    def impact(self) -> bool:
        return bool(self.differences)


#: built-in consumers by name (``Consumer.name`` in a schema)
CONSUMERS = {"mamba-postprocess-kernel": mamba_postprocess_results_differ}


def _results_differ(profile: TargetProfile):
    consumer = profile.schema.consumer
    if consumer is None:
        return None
    return consumer.results_differ or CONSUMERS.get(consumer.name)


def kernel_impact(s: StagingScenario, a: Observation | None, b: Observation,
                  profile: TargetProfile, backend: str = "reference", device: str = "cpu",
                  always: bool = False) -> KernelImpact | None:
    """Compare the consumer's results on side ``a`` (or the spec's values) and side ``b``.

    None when the consumer would not run on both sides (a call raised), or the schema
    has none.
    """
    results_differ = _results_differ(profile)
    if results_differ is None or (a is not None and not a.returned) or not b.returned:
        return None
    la, lb = staged_live(s, a, profile), staged_live(s, b, profile)
    if la is None or lb is None or not (_fits_int32(la) and _fits_int32(lb)):
        return None       # no staged int32 buffer holds such values: the kernel never runs
    if any(len(v) != s.num_reqs for side in (la, lb) for v in side.values()):
        return None       # fewer slots than live requests (num_reqs above capacity): the
                          # kernel's launch is outside its contract, so undecided
    differ = la != lb
    if not differ and not always:
        return KernelImpact()
    return KernelImpact(results_differ(s, la, lb, backend, device))


def annotate(findings: list[Finding], s: StagingScenario, a: Observation | None,
             b: Observation, profile: TargetProfile, backend: str = "reference",
             device: str = "cpu", always: bool = False) -> list[Finding]:
    """The findings with ``kernel_impact`` set; plus ``kernel_results`` if nothing explains
    a kernel difference. A schema without a consumer leaves them as they are."""
    if _results_differ(profile) is None:
        return findings
    readers = frozenset(f.name for f in consumer_fields(profile))
    # ``a`` None: a spec run, whose reference (the staging the spec expects) returns; a
    # target that raises there stops the kernel as it would against a baseline that
    # returned (was: read as "both raise", impact "no" in spec and "yes" in diff)
    both_raise = a is not None and not a.returned and not b.returned
    one_raises = not both_raise and ((a is not None and not a.returned) or not b.returned)
    result = None
    if findings or always:
        result = kernel_impact(s, a, b, profile, backend, device, always)
    out = []
    for f in findings:
        if one_raises and f.invariant in ("same_outcome", "expected_outcome", "missing_input"):
            impact = True     # the kernel runs on one side and not on the other
        elif both_raise or result is None:
            impact = False if both_raise else None
        elif f.field is not None and f.field not in readers:
            impact = False    # e.g. is_prefilling: the kernel does not read it
        elif f.slot is not None and f.slot >= s.num_reqs:
            impact = False    # a tail slot: never read by the kernel
        else:
            impact = result.impact
        extra = f.extra
        if impact and result is not None and result.differences:
            extra = {**extra, "kernel": result.differences[:3]}
        out.append(replace(f, kernel_impact=impact, extra=extra))
    if result is not None and result.impact and not findings:
        out.append(Finding(
            "kernel_results", ERROR, "the kernel's results differ although no staging finding "
            "explains it: " + result.differences[0], kernel_impact=True,
            extra={"kernel": result.differences[:5]}))
    return out
