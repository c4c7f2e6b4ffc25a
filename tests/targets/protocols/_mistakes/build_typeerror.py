"""A protocol whose build makes the component, then raises a TypeError in its own code
(len of a number): its own mistake at its line, not the arguments it gave ctx.component."""

from stagecheck.spec.protocol import Operation, Protocol, StepSpace


def build(ctx):
    stager = ctx.component(4 * ctx.sequence.capacity, ctx.device, pin_memory=True)
    stager.proto_seen = dict.fromkeys(range(len(5)))
    return stager


def stage(ctx):
    ids = [100 * int(r.split("-")[1]) + k for r, n in ctx.step.scheduled.items() for k in range(n)]
    ctx.state.stage(ids[: 4 * ctx.sequence.capacity])


PROTOCOL = Protocol(
    name="token-stager", summary="token ids staged into one reused pinned buffer",
    functions=("TokenStager", "stage"), component="TokenStager", build=build,
    operations=(Operation("stage", stage),), device_work=("embed",),
    space=StepSpace(capacity=(1, 3), steps=(1, 4), max_prompt=4),
)
