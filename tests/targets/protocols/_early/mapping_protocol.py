from stagecheck.spec import Operation, Protocol, StepSpace


def build(ctx):
    state = ctx.component(ctx.sequence.capacity, ctx.device)
    state.seen = []
    return state


def step(ctx):
    ctx.state.seen.append(ctx.state.step([int(r.split("-")[1]) % 2 for r in ctx.step.batch]))


PROTOCOL = Protocol(
    name="mapping-unique",
    summary="a per-request mapping staged in one pinned buffer, its distinct values taken "
            "on the device",
    functions=("Mapping",),
    component="Mapping",
    build=build,
    operations=(Operation("step", step, lambda s: len(s.batch) > 0),),
    observe=lambda ctx: list(ctx.state.seen),
    space=StepSpace(capacity=(1, 3), steps=(1, 5), max_prompt=3),
)
