"""hostile protocol: its own check raises an exception whose __str__ calls os._exit(0) (otherwise docs/examples/token_stager_protocol.py)"""

import os

from stagecheck.spec.protocol import Operation, Protocol, ProtocolCheck, StepSpace


def build(ctx):
    return ctx.component(4 * ctx.sequence.capacity, ctx.device, pin_memory=True)


def stage(ctx):
    ids = [100 * int(r.split("-")[1]) + k for r, n in ctx.step.scheduled.items() for k in range(n)]
    ctx.state.stage(ids[: 4 * ctx.sequence.capacity])


class Hostile(Exception):
    def __str__(self):
        os._exit(0)


def raises(sequence, trace):
    if trace.ops:
        raise Hostile("said by its arguments")
    return []


PROTOCOL = Protocol(
    name="token-stager", summary="token ids staged into one reused pinned buffer",
    functions=("TokenStager", "stage"), component="TokenStager", build=build,
    operations=(Operation("stage", stage),), device_work=("embed",),
    space=StepSpace(capacity=(1, 3), steps=(1, 6), max_prompt=4),
    checks=(ProtocolCheck("raises", "raises on a real trace", raises),))
