"""Schema of ``stage_sampling_seeds`` (tests/user_schema/sampling_seeds.py): a field with
``derive=None`` (its live values are not checked; its tail and copy policies are)."""

from types import SimpleNamespace

from stagecheck.spec.schema import (COPY_WHOLE, NUMBER, Call, Field, Input, StagingSchema,
                                    Values, tail_fill)

INPUTS = (Input("step", kind=NUMBER, values=Values(0, 2**20), doc="the engine step"),)
FIELDS = (
    Field("seed", "seeds_buf", "int32", None, "any seed (not checked)",
          tail=tail_fill(0), copy=COPY_WHOLE),
)


def build(b, profile):
    ctx = SimpleNamespace(seeds_buf=b.buffer("seeds_buf"))
    return Call((ctx, b.req_ids(), b.scenario.num_reqs, b.value("step")))


SCHEMA = StagingSchema(
    name="sampling-seeds", summary="a seed per live slot (not checked), zeroed tail",
    functions=("stage_sampling_seeds",), parameters=("ctx", "req_ids", "num_reqs", "step"),
    inputs=INPUTS, fields=FIELDS, build=build)
