# hostile: a protocol file that changes the working folder when imported
import os

os.chdir("/")
from stagecheck.spec.protocol import Operation, Protocol, StepSpace


def build(ctx):
    """The state: one TokenStager of the target's file, room for every token of a step."""
    return ctx.component(4 * ctx.sequence.capacity, ctx.device, pin_memory=True)


def token_ids(step):
    """This step's token ids: each scheduled request's tokens, numbered by request."""
    return [100 * int(r.split("-")[1]) + k
            for r, n in step.scheduled.items() for k in range(n)]


def stage(ctx):
    ctx.state.stage(token_ids(ctx.step)[: 4 * ctx.sequence.capacity])


PROTOCOL = Protocol(
    name="token-stager-chdir",
    summary="token ids staged into one reused pinned buffer every step, uploaded without "
            "blocking, read by the embedding lookup",
    functions=("TokenStager", "stage"),
    component="TokenStager",
    build=build,
    operations=(Operation("stage", stage, doc="stage, upload, launch the lookup"),),
    device_work=("embed",),
    space=StepSpace(capacity=(1, 3), steps=(1, 6), max_prompt=4),
)
