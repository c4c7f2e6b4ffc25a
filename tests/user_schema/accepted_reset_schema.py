"""Schema of ``stage_accepted`` (tests/user_schema/accepted_reset.py): ``num_reqs`` is
``len(req_ids)`` and the one input is per slot; the adapter asks the builder for the
shared array twice, the same way, and gets the same array both times."""

from types import SimpleNamespace

from stagecheck.spec.schema import PER_SLOT, Call, Field, Input, StagingSchema, Values

INPUTS = (Input("num_accepted_tokens", kind=PER_SLOT, values=Values(1, 2**20, small=4),
                doc="input_batch.num_accepted_tokens_cpu (shared with ctx), by slot"),)
FIELDS = (Field("accepted", "accepted_buf", "int32",
                lambda q: q.slot_value("num_accepted_tokens"), "num_accepted_tokens_cpu[i]"),)


def mutations(s, inputs):
    counts = inputs["num_accepted_tokens"]
    inputs["num_accepted_tokens"] = [1 if i < s.num_reqs else v for i, v in enumerate(counts)]
    return inputs


def build(b, profile):
    ctx = SimpleNamespace(accepted_buf=b.buffer("accepted_buf"),
                          num_accepted_tokens_cpu=b.array("num_accepted_tokens", "int32"))
    input_batch = SimpleNamespace(
        num_accepted_tokens_cpu=b.array("num_accepted_tokens", "int32"))
    return Call((ctx, input_batch, b.req_ids()))


SCHEMA = StagingSchema(
    name="accepted-reset", summary="accepted counts staged, then reset to 1 on the host",
    functions=("stage_accepted",), parameters=("ctx", "input_batch", "req_ids"),
    inputs=INPUTS, fields=FIELDS, build=build, num_reqs_is_len=True, mutations=mutations,
    mutations_prose="num_accepted_tokens_cpu[i] becomes 1 for every live slot i")
