from stagecheck.spec import Operation, Protocol, StepSpace


def build(ctx):
    return ctx.component(ctx.sequence.capacity, ctx.device)


def step(ctx):
    ctx.state.step([int(r.split("-")[1]) + 10 * ctx.step.index for r in ctx.step.batch])


PROTOCOL = Protocol(
    name="offsets-read-in-place",
    summary="offsets a device work reads in place from pinned memory (a UVA view), its "
            "results never read back",
    functions=("Offsets",),
    component="Offsets",
    build=build,
    operations=(Operation("step", step, lambda s: len(s.batch) > 0),),
    device_work=("_offset",),
    observe=lambda ctx: ctx.state.steps,
    space=StepSpace(capacity=(1, 3), steps=(1, 5), max_prompt=3),
)
