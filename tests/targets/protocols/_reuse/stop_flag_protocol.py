"""Protocol: per-step stop flags downloaded into persistent pinned memory, collected
after polling the copy's event with query()."""
from stagecheck.spec import Operation, Protocol, StepSpace


def build(ctx):
    return ctx.component(ctx.sequence.capacity, ctx.device, pin_memory=True)


def launch(ctx):
    batch = list(ctx.step.batch)
    ids = [7 * int(r.split("-")[1]) + ctx.step.index for r in batch]
    ctx.state.launch(batch, ctx.tensor(ids, "int64"))


def collect(ctx):
    ctx.state.collect()


def observe(ctx):
    return list(ctx.state.stopped)


PROTOCOL = Protocol(
    name="stop-flag-poll-noobs",
    summary="stop flags downloaded into a persistent pinned buffer, read after event.query()",
    functions=("StopChecker",),
    component="StopChecker",
    build=build,
    operations=(
        Operation("launch", launch, lambda step: len(step.batch) > 0),
        Operation("collect", collect),
    ),
    device_work=("_check_stop",),

    space=StepSpace(capacity=(1, 4), steps=(1, 6), max_prompt=3),
)
