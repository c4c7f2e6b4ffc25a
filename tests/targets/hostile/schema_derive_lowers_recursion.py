"""hostile schema: a derive function that lowers the recursion limit to 25 after its 300th call (past schema check's dry run) (otherwise tests/user_schema/attention_lengths_schema.py)."""

import sys

_CALLS = [0]


def _query_len(q):
    _CALLS[0] += 1
    if _CALLS[0] > 300:
        sys.setrecursionlimit(25)
    return q.num_scheduled_tokens

from types import SimpleNamespace

from stagecheck.spec.schema import (COPY_WHOLE, PER_SLOT, Call, Field, Input, StagingSchema,
                                    Values, tail_fill)

INPUTS = (
    Input("num_scheduled_tokens", values=Values(1, 2**20),
          doc="scheduler_output.num_scheduled_tokens"),
    Input("num_computed_tokens", kind=PER_SLOT, values=Values(0, 2**30),
          doc="input_batch.num_computed_tokens_cpu, by slot"),
)
FIELDS = (
    Field("seq_len", "seq_lens", "int32",
          lambda q: q.slot_value("num_computed_tokens") + q.num_scheduled_tokens,
          "num_computed_tokens_cpu[i] + num_scheduled_tokens[r]",
          tail=tail_fill(0), copy=COPY_WHOLE),
    Field("query_len", "query_lens", "int32", _query_len, "num_scheduled_tokens[r]"),
)


def build(b, profile):
    attn = SimpleNamespace(seq_lens=b.buffer("seq_lens"), query_lens=b.buffer("query_lens"))
    input_batch = SimpleNamespace(req_ids=b.req_ids(),
                                  num_computed_tokens_cpu=b.array("num_computed_tokens", "int32"))
    scheduler_output = SimpleNamespace(num_scheduled_tokens=b.table("num_scheduled_tokens"))
    return Call((attn, input_batch, scheduler_output, b.scenario.num_reqs))


SCHEMA = StagingSchema(
    name="attention-lengths", summary="sequence and query lengths per live slot",
    functions=("stage_attention_lengths",),
    parameters=("attn", "input_batch", "scheduler_output", "num_reqs"),
    inputs=INPUTS, fields=FIELDS, build=build)
