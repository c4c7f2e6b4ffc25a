"""hostile protocol: its own check calls os.fork() on a real trace (otherwise docs/examples/token_stager_protocol.py)"""

import os

from stagecheck.spec.protocol import Operation, Protocol, ProtocolCheck, StepSpace


def build(ctx):
    return ctx.component(4 * ctx.sequence.capacity, ctx.device, pin_memory=True)


def stage(ctx):
    ids = [100 * int(r.split("-")[1]) + k for r, n in ctx.step.scheduled.items() for k in range(n)]
    ctx.state.stage(ids[: 4 * ctx.sequence.capacity])


def forks(sequence, trace):
    if trace.ops:
        os.fork()         # the copy would carry on the checker's run
    return []


PROTOCOL = Protocol(
    name="token-stager", summary="token ids staged into one reused pinned buffer",
    functions=("TokenStager", "stage"), component="TokenStager", build=build,
    operations=(Operation("stage", stage),), device_work=("embed",),
    space=StepSpace(capacity=(1, 3), steps=(1, 6), max_prompt=4),
    checks=(ProtocolCheck("forks", "forks on a real trace", forks),))

