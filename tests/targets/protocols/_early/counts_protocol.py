from stagecheck.spec import Operation, Protocol, StepSpace


def build(ctx):
    state = ctx.component(ctx.sequence.capacity, ctx.device)
    state.seen = []
    return state


def step(ctx):
    counts = [int(r.split("-")[1]) + 1 for r in ctx.step.batch]
    ctx.state.seen.append(ctx.state.step(counts))


PROTOCOL = Protocol(
    name="counts-readback",
    summary="counts copied back on a side stream, read on the host a step later",
    functions=("Counts",),
    component="Counts",
    build=build,
    operations=(Operation("step", step, lambda s: len(s.batch) > 0),),
    observe=lambda ctx: list(ctx.state.seen),
    space=StepSpace(capacity=(1, 3), steps=(1, 5), max_prompt=3),
)
