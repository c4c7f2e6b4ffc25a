from stagecheck.spec import Operation, Protocol, StepSpace


def build(ctx):
    return ctx.component(8 * ctx.sequence.capacity, ctx.device, pin_memory=True)


def step(ctx):
    ids = [10 * int(r.split("-")[1]) + ctx.step.index for r in ctx.step.batch]
    prev = ctx.tensor([i + 1 for i in ids], "int64")
    ctx.state.step(ids, prev)


PROTOCOL = Protocol(
    name="scratch-reuse",
    summary="one scratch buffer used by an upload and a download",
    functions=("Scratch",),
    component="Scratch",
    build=build,
    operations=(Operation("step", step, lambda s: len(s.batch) > 0),),
    device_work=("_forward",),
    observe=lambda ctx: list(ctx.state.results),
    space=StepSpace(capacity=(1, 3), steps=(1, 4), max_prompt=3),
)
