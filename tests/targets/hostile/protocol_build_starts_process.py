"""hostile protocol: its own build starts a process in a session of its own and leaves it
running (otherwise docs/examples/token_stager_protocol.py)."""

import subprocess
import sys

from stagecheck.spec.protocol import Operation, Protocol, StepSpace


def build(ctx):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(103)"],
                     start_new_session=True)
    return ctx.component(4 * ctx.sequence.capacity, ctx.device, pin_memory=True)


def stage(ctx):
    ids = [100 * int(r.split("-")[1]) + k for r, n in ctx.step.scheduled.items() for k in range(n)]
    ctx.state.stage(ids[: 4 * ctx.sequence.capacity])


PROTOCOL = Protocol(
    name="token-stager", summary="token ids staged into one reused pinned buffer",
    functions=("TokenStager", "stage"), component="TokenStager", build=build,
    operations=(Operation("stage", stage),), device_work=("embed",),
    space=StepSpace(capacity=(1, 3), steps=(1, 6), max_prompt=4))
