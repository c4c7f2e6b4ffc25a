"""The schema of tests/user_schema/sampling_seeds.py whose adapter reads ``.device`` of a
buffer's device view (which the list model of the symbolic oracle does not offer)."""

from types import SimpleNamespace

from stagecheck.spec.schema import (COPY_WHOLE, NUMBER, Call, Field, Input, StagingSchema,
                                    Values, tail_fill)

INPUTS = (Input("step", kind=NUMBER, values=Values(0, 2**20), doc="the engine step"),)
FIELDS = (
    Field("seed", "seeds_buf", "int32", None, "any seed (not checked)",
          tail=tail_fill(0), copy=COPY_WHOLE),
)


def build(b, profile):
    seeds = b.buffer("seeds_buf")
    ctx = SimpleNamespace(seeds_buf=seeds, device=seeds.gpu.device)
    return Call((ctx, b.req_ids(), b.scenario.num_reqs, b.value("step")))


SCHEMA = StagingSchema(
    name="sampling-seeds", summary="a seed per live slot (not checked), zeroed tail",
    functions=("stage_sampling_seeds",), parameters=("ctx", "req_ids", "num_reqs", "step"),
    inputs=INPUTS, fields=FIELDS, build=build)
