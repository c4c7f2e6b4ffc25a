"""hostile protocol: blocks every signal, then sleeps for an hour when imported (a C call
the dry run's own limit cannot stop: the worker's end does; otherwise
docs/examples/token_stager_protocol.py)."""

import signal
import time

signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals) - {signal.SIGKILL, signal.SIGSTOP})
time.sleep(3600)
from stagecheck.spec.protocol import Operation, Protocol, StepSpace  # noqa: E402


def build(ctx):
    return ctx.component(4 * ctx.sequence.capacity, ctx.device, pin_memory=True)


def stage(ctx):
    ids = [100 * int(r.split("-")[1]) + k for r, n in ctx.step.scheduled.items() for k in range(n)]
    ctx.state.stage(ids[: 4 * ctx.sequence.capacity])


PROTOCOL = Protocol(
    name="token-stager", summary="token ids staged into one reused pinned buffer",
    functions=("TokenStager", "stage"), component="TokenStager", build=build,
    operations=(Operation("stage", stage),), device_work=("embed",),
    space=StepSpace(capacity=(1, 3), steps=(1, 6), max_prompt=4))
