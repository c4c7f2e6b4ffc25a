"""Schema of ``forget_finished`` (tests/user_schema/forget_finished.py): a contract on the
inputs alone (no staged buffer, ``fields=()``), with an id set the adapter passes as
None when the scenario says the engine's attribute is None."""

from types import SimpleNamespace

from stagecheck.spec.schema import FLAG, ID_SET, OPTIONAL, Call, Input, StagingSchema, Values

INPUTS = (
    Input("state_columns", values=Values(0, 4096), presence=OPTIONAL,
          doc="state_columns: the block column of each request's running state"),
    Input("finished_req_ids", kind=ID_SET, doc="scheduler_output.finished_req_ids"),
    Input("preempted_req_ids", kind=ID_SET, doc="scheduler_output.preempted_req_ids"),
    Input("preempted_is_none", kind=FLAG, doc="scheduler_output.preempted_req_ids is None"),
)


def mutations(s, inputs):
    gone = set(s.inputs["finished_req_ids"])
    if not s.inputs["preempted_is_none"]:
        gone |= set(s.inputs["preempted_req_ids"])
    inputs["state_columns"] = {r: v for r, v in inputs["state_columns"].items()
                               if r not in gone}
    return inputs


def generate(d, s):
    """Entries for the ids that left, so that forgetting them shows."""
    for name in ("finished_req_ids", "preempted_req_ids"):
        for r in s.inputs[name]:
            if d.chance(3, 4):
                s.inputs["state_columns"][r] = d.integer(0, 4096)


def build(b, profile):
    scheduler_output = SimpleNamespace(
        finished_req_ids=b.id_set("finished_req_ids"),
        preempted_req_ids=None if b.value("preempted_is_none")
        else b.id_set("preempted_req_ids"))
    return Call((scheduler_output, b.table("state_columns"), b.req_ids(),
                 b.scenario.num_reqs))


SCHEMA = StagingSchema(
    name="forget-finished", summary="forgets the state column of every request that left",
    functions=("forget_finished",),
    parameters=("scheduler_output", "state_columns", "req_ids", "num_reqs"),
    inputs=INPUTS, fields=(), build=build, mutations=mutations,
    mutations_prose="state_columns loses every finished id and every preempted id (None: "
                    "none); every other input stays unchanged",
    generate=generate)
