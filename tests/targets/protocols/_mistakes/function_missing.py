"""A protocol whose operation asks the step context for a function the target's file does
not define (ctx.function('token_ids')): the protocol's mistake, naming the name."""

from stagecheck.spec.protocol import Operation, Protocol, StepSpace


def build(ctx):
    return ctx.component(4 * ctx.sequence.capacity, ctx.device, pin_memory=True)


def stage(ctx):
    ids = ctx.function("token_ids")(ctx.step.scheduled)
    ctx.state.stage(ids[: 4 * ctx.sequence.capacity])


PROTOCOL = Protocol(
    name="token-stager", summary="token ids staged into one reused pinned buffer",
    functions=("TokenStager", "stage"), component="TokenStager", build=build,
    operations=(Operation("stage", stage),), device_work=("embed",),
    space=StepSpace(capacity=(1, 3), steps=(1, 4), max_prompt=4),
)
