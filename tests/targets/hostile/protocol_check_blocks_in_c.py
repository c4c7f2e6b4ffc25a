"""hostile protocol: its own check ignores SIGUSR2 (the checker's deadline signal) on a real trace, then runs for hours inside one C call (otherwise docs/examples/token_stager_protocol.py)"""

import hashlib
import signal

from stagecheck.spec.protocol import Operation, Protocol, ProtocolCheck, StepSpace


def build(ctx):
    return ctx.component(4 * ctx.sequence.capacity, ctx.device, pin_memory=True)


def stage(ctx):
    ids = [100 * int(r.split("-")[1]) + k for r, n in ctx.step.scheduled.items() for k in range(n)]
    ctx.state.stage(ids[: 4 * ctx.sequence.capacity])


def loops(sequence, trace):
    if trace.ops:
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
        # hours of CPU in one C call that lets other threads run: no Python step inside
        hashlib.pbkdf2_hmac("sha256", b"password", b"salt", 2 ** 31 - 1)
    return []


PROTOCOL = Protocol(
    name="token-stager", summary="token ids staged into one reused pinned buffer",
    functions=("TokenStager", "stage"), component="TokenStager", build=build,
    operations=(Operation("stage", stage),), device_work=("embed",),
    space=StepSpace(capacity=(1, 3), steps=(1, 6), max_prompt=4),
    checks=(ProtocolCheck("loops", "blocks on a real trace", loops),))

