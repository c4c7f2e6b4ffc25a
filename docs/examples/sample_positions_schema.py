from types import SimpleNamespace

from stagecheck.spec.schema import (COPY_WHOLE, MAY_MISS, OPTIONAL, Call, Field, Input,
                                    MissingPolicy, StagingSchema, Values, tail_fill)

INPUTS = (
    Input("num_scheduled_tokens", values=Values(1, 2**20)),
    Input("spec_decode_tokens", dtype="int-list", presence=OPTIONAL),
    Input("num_computed_tokens", values=Values(0, 2**30), presence=MAY_MISS,
          group="requests"),
)
FIELDS = (
    Field("sample_pos", "sample_pos_buf", "int32",
          lambda q: q.num_computed_tokens + q.num_scheduled_tokens - 1,
          "requests[r].num_computed_tokens + num_scheduled_tokens[r] - 1",
          tail=tail_fill(-1), copy=COPY_WHOLE, missing=MissingPolicy("num_computed_tokens")),
    Field("num_drafts", "num_drafts_buf", "int32",
          lambda q: len(q.get("spec_decode_tokens", [])),
          "len(scheduled_spec_decode_tokens.get(r, []))"),
)


def build(b, profile):
    ctx = SimpleNamespace(sample_pos_buf=b.buffer("sample_pos_buf"),
                          num_drafts_buf=b.buffer("num_drafts_buf"))
    scheduler_output = SimpleNamespace(
        num_scheduled_tokens=b.table("num_scheduled_tokens"),
        scheduled_spec_decode_tokens=b.table("spec_decode_tokens"))
    requests = b.objects(num_computed_tokens="num_computed_tokens")
    return Call((ctx, scheduler_output, b.req_ids(), b.scenario.num_reqs, requests))


SCHEMA = StagingSchema(
    name="sample-positions", summary="last-token positions and draft counts per slot",
    functions=("stage_sample_positions",),
    parameters=("ctx", "scheduler_output", "req_ids", "num_reqs", "requests"),
    inputs=INPUTS, fields=FIELDS, build=build)
