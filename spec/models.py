"""Pure-Python models of the staging generations, with contracts CrossHair can check.

The models re-state the two older generations of ``stage_postprocess_inputs_to_gpu``
(domain.md section 2) over plain lists and dicts: a model buffer is a pair of lists
(``cpu``, ``gpu``) plus a shared event log, written through ``.np[i] = v`` (int32
semantics: a value outside int32 raises ``OverflowError``, as numpy 2 does) and copied
with ``copy_to_gpu(n)``. ``run_legacy`` and ``run_single_loop`` run one model on plain
inputs and return the scenario and what was observed, as the spec's own data types.

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

from spec.invariants import INVARIANTS_BY_ID
from spec.observation import Copy, HostWrite, Observation
from spec.scenario import StagingScenario, contract_breaches
from spec.schema import INT32_MAX, INT32_MIN, TargetProfile

#: Largest buffer the contracts consider; CrossHair's search stays small and fast.
MAX_CAPACITY = 3
#: Both modelled generations stage the same four fields and take no flag.
PROFILE = TargetProfile(takes_flag=False)
BUFFERS = PROFILE.buffers()


# --------------------------------------------------------------------------------------
# The model buffer and inputs
# --------------------------------------------------------------------------------------

class _HostView:
    """``.np`` of a model buffer: item assignment writes ``cpu`` and logs the write."""

    def __init__(self, owner: "ModelBuffer") -> None:
        self._owner = owner

    def __setitem__(self, i: int, value: int) -> None:
        owner = self._owner
        if not 0 <= i < len(owner.cpu):
            raise IndexError(f"index {i} is out of bounds for axis 0 with size {len(owner.cpu)}")
        if not INT32_MIN <= value <= INT32_MAX:
            raise OverflowError("Python integer out of bounds for int32")
        owner.cpu[i] = value
        owner.log.append(HostWrite(owner.name, (i,), "np"))

    def __len__(self) -> int:
        return len(self._owner.cpu)


class ModelBuffer:
    """A paired buffer as two lists; ``log`` is shared by every buffer of one call."""

    def __init__(self, name: str, cpu: list[int], gpu: list[int], log: list) -> None:
        self.name = name
        self.cpu = cpu
        self.gpu = gpu
        self.log = log
        self.np = _HostView(self)

    def copy_to_gpu(self, n: int | None = None) -> list[int]:
        """``gpu[:n] = cpu[:n]`` (``n=None``: everything); logged as a ``Copy``."""
        stop = len(self.cpu) if n is None else len(range(len(self.cpu))[:n])
        self.log.append(Copy(self.name, 0, stop, n))
        for i in range(stop):
            self.gpu[i] = self.cpu[i]
        return self.gpu[:stop]


class ModelContext:
    """The four staged buffers (``ctx`` of the real code)."""

    def __init__(self, buffers: dict[str, ModelBuffer]) -> None:
        self.mamba_state_idx_buf = buffers["mamba_state_idx_buf"]
        self.num_scheduled_tokens_buf = buffers["num_scheduled_tokens_buf"]
        self.num_computed_tokens_buf = buffers["num_computed_tokens_buf"]
        self.num_draft_tokens_buf = buffers["num_draft_tokens_buf"]


class ModelSchedulerOutput:
    def __init__(self, num_scheduled_tokens: dict[str, int],
                 scheduled_spec_decode_tokens: dict[str, list[int]]) -> None:
        self.num_scheduled_tokens = num_scheduled_tokens
        self.scheduled_spec_decode_tokens = scheduled_spec_decode_tokens


class ModelRequest:
    def __init__(self, num_computed_tokens: int, num_prompt_tokens: int) -> None:
        self.num_computed_tokens = num_computed_tokens
        self.num_prompt_tokens = num_prompt_tokens


# --------------------------------------------------------------------------------------
# The generations, over the model buffer
# --------------------------------------------------------------------------------------

def _legacy_state_idx(ctx, req_ids, num_reqs, mamba_state_idx) -> None:
    state_idx_np = ctx.mamba_state_idx_buf.np
    for i, req_id in enumerate(req_ids[:num_reqs]):
        assert req_id in mamba_state_idx, (
            f"mamba state index for request {req_id!r} is missing: "
            "preprocess must run before stage_mamba_state_idx_to_gpu")
        state_idx_np[i] = mamba_state_idx[req_id]
    ctx.mamba_state_idx_buf.copy_to_gpu(num_reqs)


def _legacy_token_counts(ctx, scheduler_output, req_ids, num_reqs, requests) -> None:
    scheduled_np = ctx.num_scheduled_tokens_buf.np
    computed_np = ctx.num_computed_tokens_buf.np
    draft_np = ctx.num_draft_tokens_buf.np
    spec_tokens = scheduler_output.scheduled_spec_decode_tokens
    for i, req_id in enumerate(req_ids[:num_reqs]):
        scheduled_np[i] = scheduler_output.num_scheduled_tokens[req_id]
        computed_np[i] = requests[req_id].num_computed_tokens
        draft_np[i] = len(spec_tokens.get(req_id, ()))
    ctx.num_scheduled_tokens_buf.copy_to_gpu(num_reqs)
    ctx.num_computed_tokens_buf.copy_to_gpu(num_reqs)
    ctx.num_draft_tokens_buf.copy_to_gpu(num_reqs)


def stage_legacy(ctx, scheduler_output, req_ids, num_reqs, requests, mamba_state_idx) -> None:
    """Legacy generation: helper A (state index, then its copy), then helper B."""
    assert ctx.mamba_state_idx_buf is not None
    assert ctx.num_scheduled_tokens_buf is not None
    assert ctx.num_computed_tokens_buf is not None
    assert ctx.num_draft_tokens_buf is not None
    _legacy_state_idx(ctx, req_ids, num_reqs, mamba_state_idx)
    _legacy_token_counts(ctx, scheduler_output, req_ids, num_reqs, requests)


def stage_single_loop(ctx, scheduler_output, req_ids, num_reqs, requests,
                      mamba_state_idx) -> None:
    """Single-loop generation: one loop writes all four views, then four copies."""
    state_idx_buf = ctx.mamba_state_idx_buf
    scheduled_buf = ctx.num_scheduled_tokens_buf
    computed_buf = ctx.num_computed_tokens_buf
    draft_buf = ctx.num_draft_tokens_buf
    assert state_idx_buf is not None
    assert scheduled_buf is not None
    assert computed_buf is not None
    assert draft_buf is not None
    spec_tokens = scheduler_output.scheduled_spec_decode_tokens
    for i, req_id in enumerate(req_ids[:num_reqs]):
        assert req_id in mamba_state_idx, (
            f"mamba state index for request {req_id!r} is missing: "
            "preprocess must run before stage_postprocess_inputs_to_gpu")
        state_idx_buf.np[i] = mamba_state_idx[req_id]
        scheduled_buf.np[i] = scheduler_output.num_scheduled_tokens[req_id]
        computed_buf.np[i] = requests[req_id].num_computed_tokens
        draft_buf.np[i] = len(spec_tokens.get(req_id, ()))
    state_idx_buf.copy_to_gpu(num_reqs)
    scheduled_buf.copy_to_gpu(num_reqs)
    computed_buf.copy_to_gpu(num_reqs)
    draft_buf.copy_to_gpu(num_reqs)


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
        num_scheduled_tokens={r: scheduled[j] for j, r in enumerate(req_ids)},
        spec_decode_tokens=spec_tokens,
        num_computed_tokens={r: computed[j] for j, r in enumerate(req_ids)},
        num_prompt_tokens={r: computed[j] for j, r in enumerate(req_ids)},
        mamba_state_idx=state_indices,
        initial_cpu={b: list(initial_cpu[:capacity]) for b in BUFFERS},
        initial_gpu={b: list(initial_gpu[:capacity]) for b in BUFFERS},
        run_prefix_state_migration=True)


def shape_ok(capacity: int, num_ids: int, num_reqs: int) -> bool:
    """Bounds on the size of the modelled batch (the staging contract is ``in_contract``)."""
    return 1 <= capacity <= MAX_CAPACITY and 0 <= num_reqs <= num_ids <= capacity


def run_model(stage, s: StagingScenario) -> ModelRun:
    """Call a model generation on fresh model inputs built from ``s``; observe it.

    The exceptions the real code can raise on these inputs (``AssertionError``,
    ``KeyError``, ``OverflowError``, ``IndexError``) are observations; anything else
    is a fault of the model and propagates.
    """
    log: list = []
    buffers = {b: ModelBuffer(b, list(s.initial_cpu[b]), list(s.initial_gpu[b]), log)
               for b in BUFFERS}
    scheduler_output = ModelSchedulerOutput(
        dict(s.num_scheduled_tokens), {r: list(t) for r, t in s.spec_decode_tokens.items()})
    requests = {r: ModelRequest(c, s.num_prompt_tokens[r])
                for r, c in s.num_computed_tokens.items()}
    req_ids = list(s.req_ids)
    mamba_state_idx = dict(s.mamba_state_idx)
    exc_type = exc_msg = None
    mro: tuple[str, ...] = ()
    try:
        stage(ModelContext(buffers), scheduler_output, req_ids, s.num_reqs, requests,
              mamba_state_idx)
    except (AssertionError, KeyError, OverflowError, IndexError) as exc:
        exc_type, exc_msg = type(exc).__name__, str(exc)
        mro = tuple(k.__name__ for k in type(exc).__mro__)
    after = StagingScenario(
        s.capacity, s.num_reqs, req_ids, scheduler_output.num_scheduled_tokens,
        scheduler_output.scheduled_spec_decode_tokens,
        {r: q.num_computed_tokens for r, q in requests.items()},
        {r: q.num_prompt_tokens for r, q in requests.items()}, mamba_state_idx)
    observation = Observation(
        exception_type=exc_type, exception_message=exc_msg,
        cpu={b: list(buf.cpu) for b, buf in buffers.items()},
        gpu={b: list(buf.gpu) for b, buf in buffers.items()},
        events=list(log),
        inputs_after=_inputs_of(after), exception_mro=mro)
    return ModelRun(s, observation)


def _inputs_of(s: StagingScenario) -> dict:
    from spec.invariants import inputs_snapshot
    return inputs_snapshot(s)


# --------------------------------------------------------------------------------------
# Contract predicates: each asks one invariant of spec/invariants.py, by id
# --------------------------------------------------------------------------------------

def in_contract(s: StagingScenario) -> bool:
    """The input can happen: ``spec.contract_breaches`` finds nothing."""
    return not contract_breaches(s)


def _holds(invariant_id: str, run: ModelRun) -> bool:
    return not INVARIANTS_BY_ID[invariant_id].check(run.scenario, run.observation, PROFILE)


def slot_alignment(run: ModelRun) -> bool:
    """Invariant ``slot_alignment``: slot i < num_reqs holds the value derived from req_ids[i]."""
    return _holds("slot_alignment", run)


def no_tail_write(run: ModelRun) -> bool:
    """Invariant ``no_tail_write``: slots >= num_reqs of every view are unchanged."""
    return _holds("no_tail_write", run)


def mirror_consistency(run: ModelRun) -> bool:
    """Invariant ``mirror_consistency``: gpu[:num_reqs] == cpu[:num_reqs] after the call."""
    return _holds("mirror_consistency", run)


def copy_discipline(run: ModelRun) -> bool:
    """Invariant ``copy_discipline``: one copy over [0, num_reqs), after the last write."""
    return _holds("copy_discipline", run)


def missing_index_assertion(run: ModelRun) -> bool:
    """Invariant ``missing_index_assertion``: AssertionError naming the id, no state copy yet."""
    return _holds("missing_index_assertion", run)


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
    """Run the legacy model on one in-contract input (see ``scenario_of``).

    pre: shape_ok(capacity, num_ids, num_reqs)
    pre: in_contract(scenario_of(capacity, num_ids, num_reqs, scheduled, computed, drafts, state_idx, missing, initial_cpu, initial_gpu))
    post: slot_alignment(__return__)
    post: no_tail_write(__return__)
    post: mirror_consistency(__return__)
    post: copy_discipline(__return__)
    post: missing_index_assertion(__return__)
    post: expected_outcome(__return__)
    post: inputs_unchanged(__return__)
    """
    return run_model(stage_legacy, scenario_of(capacity, num_ids, num_reqs, scheduled, computed,
                                                drafts, state_idx, missing, initial_cpu,
                                                initial_gpu))


def run_single_loop(capacity: int, num_ids: int, num_reqs: int, scheduled: Ints,
                    computed: Ints, drafts: Ints, state_idx: Ints, missing: int,
                    initial_cpu: Ints, initial_gpu: Ints) -> ModelRun:
    """Run the single-loop model on one in-contract input (see ``scenario_of``).

    pre: shape_ok(capacity, num_ids, num_reqs)
    pre: in_contract(scenario_of(capacity, num_ids, num_reqs, scheduled, computed, drafts, state_idx, missing, initial_cpu, initial_gpu))
    post: slot_alignment(__return__)
    post: no_tail_write(__return__)
    post: mirror_consistency(__return__)
    post: copy_discipline(__return__)
    post: missing_index_assertion(__return__)
    post: expected_outcome(__return__)
    post: inputs_unchanged(__return__)
    """
    return run_model(stage_single_loop, scenario_of(capacity, num_ids, num_reqs, scheduled,
                                                    computed, drafts, state_idx, missing,
                                                    initial_cpu, initial_gpu))
