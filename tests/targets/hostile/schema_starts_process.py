"""hostile schema file: starts a process when imported (otherwise
tests/user_schema/sampling_seeds_schema.py)."""

import subprocess


from types import SimpleNamespace

subprocess.Popen(["sleep", "1239"], start_new_session=True)

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
