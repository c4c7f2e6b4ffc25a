from stagecheck.spec import Operation, Protocol, StepSpace


def build(ctx):
    return ctx.component(ctx.sequence.capacity, ctx.device)


def step(ctx):
    ctx.state.step([3 * int(r.split("-")[1]) + ctx.step.index for r in ctx.step.batch])


PROTOCOL = Protocol(
    name="positions-torch-consumer",
    summary="positions uploaded each step and read by plain torch operations (no device work)",
    functions=("Positions",),
    component="Positions",
    build=build,
    operations=(Operation("step", step, lambda s: len(s.batch) > 0),),
    observe=lambda ctx: ctx.state.out.tolist(),
    space=StepSpace(capacity=(1, 3), steps=(1, 5), max_prompt=3),
)
