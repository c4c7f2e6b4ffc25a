"""Schema of ``stage_next_positions`` (a staging function with a same-module Triton
kernel)."""

from types import SimpleNamespace

from stagecheck.spec.schema import Call, Field, Input, StagingSchema, Values

INPUTS = (Input("num_scheduled_tokens", values=Values(1, 2**20)),)
FIELDS = (
    Field("position", "positions_buf", "int32", lambda q: q.num_scheduled_tokens - 1,
          "num_scheduled_tokens[r] - 1"),
    Field("next", "next_buf", "int32", lambda q: q.num_scheduled_tokens,
          "num_scheduled_tokens[r] (the kernel's position + 1)"),
)


def build(b, profile):
    ctx = SimpleNamespace(positions_buf=b.buffer("positions_buf"), next_buf=b.buffer("next_buf"))
    scheduler_output = SimpleNamespace(num_scheduled_tokens=b.table("num_scheduled_tokens"))
    return Call((ctx, scheduler_output, b.req_ids(), b.scenario.num_reqs))


SCHEMA = StagingSchema(
    name="next-positions", summary="last positions and, from a Triton kernel, next ones",
    functions=("stage_next_positions",),
    parameters=("ctx", "scheduler_output", "req_ids", "num_reqs"),
    inputs=INPUTS, fields=FIELDS, build=build)
