"""Contracts CrossHair can check, on the real staging generations over a model buffer.

``run_legacy`` and ``run_single_loop`` run the builtin generations themselves
(``impl/staging_legacy.py``, ``impl/staging_single_loop.py``), not a restatement of
them, on the list model of ``CpuGpuBuffer`` (``oracles/observe/listmodel.py``: pairs
of Python lists with int32 semantics, a value outside int32 raising ``OverflowError``
as numpy 2 does), through the pipeline's one ``observe``. They return the scenario
and what was observed, as the spec's own data types.

This module is the one place where ``spec`` uses the machinery (``observe`` and its
list backend, neither of which imports torch): the contracts are statements about
running a generation, and the pipeline's observation is what the invariants check.

Contracts are PEP 316 docstrings (``pre:`` / ``post:``), chosen over icontract and
deal because: CrossHair 0.0.113 parses them natively, with no decorator layer whose
wrappers it must see through (icontract's ``OLD`` snapshots and its re-raising of
violations add paths of their own); they add no runtime dependency to the spec
package, which must stay importable without any checker; and ``__return__`` is all
the contracts need. (deal is not installed here.)

Each postcondition is a one-line predicate below that *asks* the statement in
``spec.invariants``: ``not INVARIANTS_BY_ID[<id>].check(...)``. The invariants stay
stated once; the predicates only name them for the contract. The preconditions use
``spec.contract_breaches``, so "in contract" means the same here as for the fuzzer.
Run ``crosshair check spec/models.py --per_condition_timeout=20``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from stagecheck.impl import staging_legacy, staging_single_loop
from stagecheck.spec.invariants import INVARIANTS_BY_ID
from stagecheck.spec.observation import Observation
from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schemas.mamba_postprocess import SCHEMA
from stagecheck.spec.space import contract_breaches

#: Largest buffer the contracts consider; CrossHair's search stays small and fast.
MAX_CAPACITY = 3
#: Both generations stage the same four fields and take no flag.
PROFILE = SCHEMA.profile()
BUFFERS = PROFILE.buffers()


# --------------------------------------------------------------------------------------
# Running a model: plain inputs in, (scenario, observation) out
# --------------------------------------------------------------------------------------

@dataclass
class ModelRun:
    """One model call as the spec sees it."""

    scenario: StagingScenario
    observation: Observation


Ints = tuple[int, int, int]   # one value per request (or per slot); MAX_CAPACITY long


def scenario_of(capacity: int, num_ids: int, num_reqs: int, scheduled: Ints, computed: Ints,
                drafts: Ints, state_idx: Ints, missing: int, initial_cpu: Ints,
                initial_gpu: Ints) -> StagingScenario:
    """The scenario the contracted entry points run, from ints and fixed-length tuples.

    A batch of ``capacity`` slots holds ``num_ids`` request ids named ``"r<j>"``, the
    first ``num_reqs`` live and the rest padded (``shape_ok`` bounds all three).
    Request ``j`` has ``scheduled[j]`` tokens scheduled, ``computed[j]`` computed,
    ``drafts[j] % 4`` draft tokens if live (absent from the dict when 0) and state
    index ``state_idx[j]``; live request ``missing`` (any other value: none) has no
    state index. Every buffer starts from ``initial_cpu[:capacity]`` and
    ``initial_gpu[:capacity]``.

    Fixed-length tuples of ints keep the search on values (symbolic ints) rather
    than on list lengths and dict key sets; ids are opaque to the staging code, so
    naming them by position loses nothing that matters to it.
    """
    req_ids = [f"r{j}" for j in range(num_ids)]
    spec_tokens, state_indices = {}, {}
    for j, r in enumerate(req_ids):
        # Choices are made for live requests only (padded ones have a state index and
        # no drafts), and so that the common case is the default: CrossHair takes the
        # "true" side of a fresh branch less often (1 in 4).
        live = j < num_reqs
        count = drafts[j] % 4 if live else 0
        if not count == 0:
            spec_tokens[r] = [0] * count
        if live and j == missing:
            continue
        state_indices[r] = state_idx[j]
    return StagingScenario(
        capacity=capacity, num_reqs=num_reqs, req_ids=req_ids,
        inputs={"num_scheduled_tokens": {r: scheduled[j] for j, r in enumerate(req_ids)},
                "spec_decode_tokens": spec_tokens,
                "num_computed_tokens": {r: computed[j] for j, r in enumerate(req_ids)},
                "num_prompt_tokens": {r: computed[j] for j, r in enumerate(req_ids)},
                "mamba_state_idx": state_indices,
                "run_prefix_state_migration": True, "omit_state_idx_buf": False},
        initial_cpu={b: list(initial_cpu[:capacity]) for b in BUFFERS},
        initial_gpu={b: list(initial_gpu[:capacity]) for b in BUFFERS})


def shape_ok(capacity: int, num_ids: int, num_reqs: int) -> bool:
    """Bounds on the size of the modelled batch (the staging contract is ``in_contract``)."""
    return 1 <= capacity <= MAX_CAPACITY and 0 <= num_reqs <= num_ids <= capacity


def run_model(stage: Callable, s: StagingScenario) -> ModelRun:
    """Call a staging generation on fresh list-model inputs built from ``s``; observe it."""
    # the documented exception (docs/architecture.md): spec imports the machinery only
    # here, when a model runs, so that ``import stagecheck.spec`` stays the statement alone
    from stagecheck.oracles.observe import observe
    from stagecheck.oracles.observe.listmodel import ListBackend
    from stagecheck.oracles.targets import target_from_callable
    target = target_from_callable(stage, getattr(stage, "__module__", "model"))
    return ModelRun(s, observe(target, s, backend=ListBackend(), time_limited=False))


# --------------------------------------------------------------------------------------
# Contract predicates: each asks one invariant of spec/invariants.py, by id
# --------------------------------------------------------------------------------------

def in_contract(s: StagingScenario) -> bool:
    """The input can happen: ``spec.contract_breaches`` finds nothing."""
    return not contract_breaches(SCHEMA, s)


def _holds(invariant_id: str, run: ModelRun) -> bool:
    return not INVARIANTS_BY_ID[invariant_id].check(run.scenario, run.observation, PROFILE)


def slot_alignment(run: ModelRun) -> bool:
    """Invariant ``slot_alignment``: slot i < num_reqs holds the value derived from req_ids[i]."""
    return _holds("slot_alignment", run)


def tail_policy(run: ModelRun) -> bool:
    """Invariant ``tail_policy``: slots >= num_reqs of every view are unchanged."""
    return _holds("tail_policy", run)


def mirror_consistency(run: ModelRun) -> bool:
    """Invariant ``mirror_consistency``: gpu[:num_reqs] == cpu[:num_reqs] after the call."""
    return _holds("mirror_consistency", run)


def copy_discipline(run: ModelRun) -> bool:
    """Invariant ``copy_discipline``: one copy over [0, num_reqs), after the last write."""
    return _holds("copy_discipline", run)


def missing_input(run: ModelRun) -> bool:
    """Invariant ``missing_input``: AssertionError naming the id, no state copy yet."""
    return _holds("missing_input", run)


def expected_outcome(run: ModelRun) -> bool:
    """Invariant ``expected_outcome``: returns normally when every live id has an index."""
    return _holds("expected_outcome", run)


def inputs_unchanged(run: ModelRun) -> bool:
    """Invariant ``inputs_unchanged``: the call mutates none of its inputs."""
    return _holds("inputs_unchanged", run)


# --------------------------------------------------------------------------------------
# The contracted entry points (what `crosshair check spec/models.py` analyses)
# --------------------------------------------------------------------------------------

def run_legacy(capacity: int, num_ids: int, num_reqs: int, scheduled: Ints, computed: Ints,
               drafts: Ints, state_idx: Ints, missing: int, initial_cpu: Ints,
               initial_gpu: Ints) -> ModelRun:
    """Run the legacy generation on one in-contract input (see ``scenario_of``).

    pre: shape_ok(capacity, num_ids, num_reqs)
    pre: in_contract(scenario_of(capacity, num_ids, num_reqs, scheduled, computed, drafts, state_idx, missing, initial_cpu, initial_gpu))
    post: slot_alignment(__return__)
    post: tail_policy(__return__)
    post: mirror_consistency(__return__)
    post: copy_discipline(__return__)
    post: missing_input(__return__)
    post: expected_outcome(__return__)
    post: inputs_unchanged(__return__)
    """
    return run_model(staging_legacy.stage_postprocess_inputs_to_gpu,
                     scenario_of(capacity, num_ids, num_reqs, scheduled, computed, drafts,
                                 state_idx, missing, initial_cpu, initial_gpu))


def run_single_loop(capacity: int, num_ids: int, num_reqs: int, scheduled: Ints,
                    computed: Ints, drafts: Ints, state_idx: Ints, missing: int,
                    initial_cpu: Ints, initial_gpu: Ints) -> ModelRun:
    """Run the single-loop generation on one in-contract input (see ``scenario_of``).

    pre: shape_ok(capacity, num_ids, num_reqs)
    pre: in_contract(scenario_of(capacity, num_ids, num_reqs, scheduled, computed, drafts, state_idx, missing, initial_cpu, initial_gpu))
    post: slot_alignment(__return__)
    post: tail_policy(__return__)
    post: mirror_consistency(__return__)
    post: copy_discipline(__return__)
    post: missing_input(__return__)
    post: expected_outcome(__return__)
    post: inputs_unchanged(__return__)
    """
    return run_model(staging_single_loop.stage_postprocess_inputs_to_gpu,
                     scenario_of(capacity, num_ids, num_reqs, scheduled, computed, drafts,
                                 state_idx, missing, initial_cpu, initial_gpu))
