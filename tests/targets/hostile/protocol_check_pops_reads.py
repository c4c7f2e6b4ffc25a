"""hostile protocol: its own check consumes the trace it is given (pops every read), which the comparison of two targets reads afterwards (otherwise docs/examples/token_stager_protocol.py)"""


from stagecheck.spec.protocol import Operation, Protocol, ProtocolCheck, StepSpace


def build(ctx):
    return ctx.component(4 * ctx.sequence.capacity, ctx.device, pin_memory=True)


def stage(ctx):
    ids = [100 * int(r.split("-")[1]) + k for r, n in ctx.step.scheduled.items() for k in range(n)]
    ctx.state.stage(ids[: 4 * ctx.sequence.capacity])


def ids_not_negative(sequence, trace):
    bad = []
    while trace.reads:
        read = trace.reads.pop()
        bad += [v for v in read["values"].get("ids", []) if v < 0]
    return [f"negative ids {bad}"] if bad else []


PROTOCOL = Protocol(
    name="token-stager", summary="token ids staged into one reused pinned buffer",
    functions=("TokenStager", "stage"), component="TokenStager", build=build,
    operations=(Operation("stage", stage),), device_work=("embed",),
    space=StepSpace(capacity=(1, 3), steps=(1, 6), max_prompt=4),
    checks=(ProtocolCheck("ids-not-negative", "every id the lookup reads is >= 0",
                          ids_not_negative),))
