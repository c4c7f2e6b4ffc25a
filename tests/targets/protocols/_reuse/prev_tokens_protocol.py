"""Protocol: the previous step's sampled ids bounce through one pinned buffer."""
from stagecheck.spec import Operation, Protocol, StepSpace


def build(ctx):
    state = ctx.component(ctx.sequence.capacity, ctx.device)
    state.collected = []
    return state


def execute(ctx):
    n = len(ctx.step.batch)
    if n:
        ctx.state.execute(ctx.tensor([ctx.step.index + k for k in range(n)], "int64"))


def collect(ctx):
    ctx.state.collected.append(ctx.state.collect())


def observe(ctx):
    return list(ctx.state.collected)


PROTOCOL = Protocol(
    name="prev-tokens",
    summary="sampled ids downloaded to pinned memory, fed back as the next step's input ids",
    functions=("PrevTokenInputs",),
    component="PrevTokenInputs",
    build=build,
    operations=(Operation("execute", execute),
                Operation("collect", collect, when=lambda step: step.index % 2 == 1)),
    device_work=("_forward",),
    observe=observe,
    space=StepSpace(capacity=(1, 3), steps=(2, 6), max_prompt=3),
)
