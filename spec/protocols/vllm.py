"""What vLLM's GPU model runner is given each step, made from a ``StepView``.

Shared by the built-in protocols of vLLM's runner: the scheduler output of a step
(``scheduler_output``), the sampled token ids of a step (``sampled_rows``), and the
operations of a step (``execute_model``, ``sample_tokens``, ``dummy_run``).

The scheduler output holds what the runner's ``_update_states`` and ``_prepare_inputs``
read upstream (vllm/v1/core/sched/output.py): ``finished_req_ids``,
``scheduled_new_reqs`` (``req_id``, ``num_computed_tokens``, ``prompt_token_ids``,
``sampling_params.temperature``), ``scheduled_cached_reqs`` (parallel lists ``req_ids``,
``num_computed_tokens``, ``resumed_req_ids``), ``num_scheduled_tokens``,
``total_num_scheduled_tokens``, ``scheduled_spec_decode_tokens`` and
``preempted_req_ids``. A preempted request also appears among the finished ones (the
runner forgets its rows) and comes back as a new request that prefills again: the V1
runner's handling of a preemption without a cached prefix. Each object is a
``spec.schema.StandIn``: a runner that reads anything else gets a clear error naming it
(a limit of the protocol, never a finding about the code).
"""

from __future__ import annotations

from stagecheck.spec.schema import StandIn
from stagecheck.spec.steps import StepView

__all__ = ["SchedulerOutput", "dummy_run", "execute_model", "row_order", "sample_tokens",
           "sampled_rows", "scheduler_output"]

#: the token id every accepted position of a sampled row holds (rejected ones: -1)
SAMPLED_TOKEN = 7


class SchedulerOutput(StandIn):
    """``SchedulerOutput`` of one step (see the module doc)."""


class NewRequestData(StandIn):
    """An item of ``scheduled_new_reqs``."""


class SamplingParams(StandIn):
    """``sampling_params`` of a new request."""


class CachedRequestData(StandIn):
    """``scheduled_cached_reqs``."""


def _new(item: dict) -> NewRequestData:
    new = NewRequestData()
    new.req_id, new.num_computed_tokens = item["id"], item["computed"]
    new.prompt_token_ids = list(range(item["prompt"]))
    params = SamplingParams()
    params.temperature = item["temperature"]
    new.sampling_params = params
    return new


def scheduler_output(view: StepView) -> SchedulerOutput:
    """The scheduler output of step ``view``."""
    out = SchedulerOutput()
    out.finished_req_ids = set(view.finished) | set(view.preempted)
    out.preempted_req_ids = set(view.preempted)
    out.scheduled_new_reqs = [_new(item) for item in view.joins + view.resumed]
    cached = CachedRequestData()
    cached.req_ids = [r for r, _ in view.cached]
    cached.num_computed_tokens = [c for _, c in view.cached]
    cached.resumed_req_ids = set()
    out.scheduled_cached_reqs = cached
    out.num_scheduled_tokens = dict(view.scheduled)
    out.total_num_scheduled_tokens = view.total_tokens
    out.scheduled_spec_decode_tokens = {r: [SAMPLED_TOKEN + 1] * k
                                        for r, k in view.drafts.items()}
    return out


def sampled_rows(view: StepView, order: list[str]) -> list[list[int]]:
    """The sampled token ids of step ``view``, one row per request in the runner's row
    ``order``: each accepted position holds a token, each rejected draft -1; as wide as
    one token plus the most drafts of the step."""
    width = 1 + max(view.drafts.values(), default=0)
    return [[SAMPLED_TOKEN] * view.accepted.get(r, 1) + [-1] * (width - view.accepted.get(r, 1))
            for r in order]


def row_order(state, path: str) -> list[str]:
    """The runner's rows (request ids; holes left out) at dotted ``path`` of ``state``."""
    value = state
    for part in path.split("."):
        value = getattr(value, part)
    return [r for r in value if r is not None]


def is_step(view: StepView) -> bool:
    return view.kind == "step"


def has_batch(view: StepView) -> bool:
    return view.kind == "step" and bool(view.scheduled)


def is_dummy(view: StepView) -> bool:
    return view.kind == "dummy"


def execute_model(ctx) -> None:
    ctx.state.execute_model(scheduler_output(ctx.step))


def sample_tokens(path: str):
    """The ``sample_tokens`` operation of a runner whose rows are at ``path``."""
    def run(ctx) -> None:
        rows = sampled_rows(ctx.step, row_order(ctx.state, path))
        ctx.state.sample_tokens(ctx.tensor(rows, "int64"))
    return run


def dummy_run(ctx) -> None:
    ctx.state._dummy_run(ctx.step.dummy_tokens)
