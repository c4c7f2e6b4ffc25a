"""``preprocess_mamba_all_specdec``: vLLM's Mamba "all" cache mode with speculative decoding.

``preprocess_mamba_all_specdec(scheduler_output, input_batch, mamba_state_idx, num_reqs,
prev_last_scheduled_idx_buf)`` first removes from ``mamba_state_idx`` every id that
the scheduler output names as finished, preempted or resumed
(``scheduler_output.preempted_req_ids`` may be None: none preempted); then, for every
live slot ``i`` and ``r = input_batch.req_ids[i]``, stages ``mamba_state_idx.get(r, -1)``
(the block index of the last token ``r`` scheduled on the previous step; -1: none)
into one int32 buffer, fills every slot from ``num_reqs`` to the end with -1, and
copies the whole buffer to the device. A request without an entry is no error: it
stages -1. Upstream from v0.25 to v0.31 (removed in v0.32).

The None case of ``preempted_req_ids`` is a flag, not an empty set: it is its own code
path upstream (``or set()``), and a rewrite that iterates the attribute directly only
fails there.
"""

from __future__ import annotations

from types import SimpleNamespace

from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schema import (COPY_WHOLE, INT32_MAX, OPTIONAL, Call, Field, Input,
                                    StagingSchema, Values, tail_fill)
from stagecheck.spec.schemas.cleanup import CLEANED, CLEANUP_INPUTS, dropped, tidy

INPUTS = (
    Input("mamba_state_idx", values=Values(0, INT32_MAX, small=64, special=(0, 1, INT32_MAX)),
          presence=OPTIONAL,
          doc="mamba_state_idx: block index of the request's last scheduled token on the "
              "previous step (absent: none)"),
    *CLEANUP_INPUTS,
)


def prev_last_scheduled(q) -> int:
    if q.id in dropped(q.scenario):
        return -1
    return q.get("mamba_state_idx", -1)


FIELDS = (
    Field("prev_last_idx", "prev_last_scheduled_idx_buf", "int32", prev_last_scheduled,
          "-1 if r is finished, preempted or resumed, else mamba_state_idx.get(r, -1)",
          tail=tail_fill(-1), copy=COPY_WHOLE),
)


def mutations(s, inputs: dict) -> dict:
    """The cleanup: every finished, preempted (unless None) and resumed id is popped."""
    gone = dropped(s)
    inputs["mamba_state_idx"] = {r: v for r, v in inputs["mamba_state_idx"].items()
                                 if r not in gone}
    return inputs


def build(b, profile) -> Call:
    s = b.scenario
    preempted = b.id_set("preempted_req_ids")
    scheduler_output = SimpleNamespace(
        finished_req_ids=b.id_set("finished_req_ids"),
        preempted_req_ids=None if s.inputs["preempted_is_none"] else preempted,
        scheduled_cached_reqs=SimpleNamespace(resumed_req_ids=b.id_set("resumed_req_ids")))
    input_batch = SimpleNamespace(req_ids=b.req_ids())
    return Call((scheduler_output, input_batch, b.table("mamba_state_idx"), s.num_reqs,
                 b.buffer("prev_last_scheduled_idx_buf")))


def generate(d, s) -> None:
    """What the generic drawing misses: entries of requests that left the batch (the ids
    the cleanup exists for, e.g. a finished ``req-gone``), and a None preempted set."""
    table = s.inputs["mamba_state_idx"]
    if d.chance(1, 2):
        table["req-gone"] = d.integer(0, 64)
    if d.chance(1, 4):    # a request both cleaned and still in the batch
        live = s.live_ids
        if live:
            s.inputs[d.pick(CLEANED)].append(live[d.size(0, len(live) - 1)])
    tidy(s.inputs)


def bench(n: int):
    """In contract, deterministic: ``n`` live requests, one in three with an entry, one
    in five resumed, two padded ids, capacity ``n + 4``."""
    req_ids = [f"req-{i}" for i in range(n + 2)]
    return StagingScenario(
        n + 4, n, req_ids,
        {"mamba_state_idx": {r: (i * 7) % 997 for i, r in enumerate(req_ids) if i % 3},
         "finished_req_ids": ["req-gone"], "preempted_req_ids": [],
         "preempted_is_none": True,
         "resumed_req_ids": [r for i, r in enumerate(req_ids[:n]) if i % 5 == 4]},
        schema=SCHEMA.name)


SCHEMA = StagingSchema(
    name="mamba-all-specdec",
    summary="vLLM's Mamba all-mode spec-decode preprocess: mamba_state_idx cleaned of "
            "finished/preempted/resumed ids, then each live slot's previous last scheduled "
            "block index (-1: none), the tail filled with -1, the whole buffer copied",
    functions=("preprocess_mamba_all_specdec",),
    parameters=("scheduler_output", "input_batch", "mamba_state_idx", "num_reqs",
                "prev_last_scheduled_idx_buf"),
    inputs=INPUTS,
    fields=FIELDS,
    build=build,
    mutations=mutations,
    mutations_prose="mamba_state_idx loses every id in scheduler_output.finished_req_ids, "
                    "preempted_req_ids (None: none) and scheduled_cached_reqs.resumed_req_ids "
                    "(absent ids are no error); every other input stays unchanged",
    generate=generate,
    bench=bench,
)
