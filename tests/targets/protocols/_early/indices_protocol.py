from stagecheck.spec import Operation, Protocol, StepSpace


def build(ctx):
    return ctx.component(ctx.sequence.capacity, ctx.device)


def step(ctx):
    ctx.state.step([(int(r.split("-")[1]) + ctx.step.index) % ctx.sequence.capacity
                    for r in ctx.step.batch])


PROTOCOL = Protocol(
    name="indices-read-in-place",
    summary="indices a device work reads in place from pinned memory (a UVA view)",
    functions=("Indices",),
    component="Indices",
    build=build,
    operations=(Operation("step", step, lambda s: len(s.batch) > 0),),
    device_work=("_gather",),
    observe=lambda ctx: ctx.state.out.tolist(),
    space=StepSpace(capacity=(1, 3), steps=(1, 5), max_prompt=3),
)
