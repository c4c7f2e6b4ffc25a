"""A protocol whose operation's when returns a number, not a bool."""

from stagecheck.spec.protocol import Operation, Protocol, StepSpace


def build(ctx):
    return ctx.component(4 * ctx.sequence.capacity, ctx.device, pin_memory=True)


def stage(ctx):
    ids = [100 * int(r.split("-")[1]) + k for r, n in ctx.step.scheduled.items() for k in range(n)]
    ctx.state.stage(ids[: 4 * ctx.sequence.capacity])


def has_tokens(step):
    return len(step.scheduled)


PROTOCOL = Protocol(
    name="token-stager", summary="token ids staged into one reused pinned buffer",
    functions=("TokenStager", "stage"), component="TokenStager", build=build,
    operations=(Operation("stage", stage, when=has_tokens),), device_work=("embed",),
    space=StepSpace(capacity=(1, 3), steps=(1, 4), max_prompt=4),
)
