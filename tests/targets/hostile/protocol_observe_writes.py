"""hostile protocol: its observe writes into the component's pinned buffer while the upload still reads it (otherwise docs/examples/token_stager_protocol.py)"""

from stagecheck.spec.protocol import Operation, Protocol, StepSpace


def build(ctx):
    return ctx.component(4 * ctx.sequence.capacity, ctx.device, pin_memory=True)


def stage(ctx):
    ids = [100 * int(r.split("-")[1]) + k for r, n in ctx.step.scheduled.items() for k in range(n)]
    ctx.state.stage(ids[: 4 * ctx.sequence.capacity])


def observe(ctx):
    ctx.state.ids_np[:] = 12345      # a write into the pinned buffer the upload reads
    return [1]


PROTOCOL = Protocol(
    name="token-stager", summary="token ids staged into one reused pinned buffer",
    functions=("TokenStager", "stage"), component="TokenStager", build=build,
    operations=(Operation("stage", stage),), device_work=("embed",),
    space=StepSpace(capacity=(1, 3), steps=(1, 6), max_prompt=4),
    observe=observe)

