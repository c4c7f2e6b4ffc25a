"""The same as async_output_protocol.py without observe (optional). Protocol: async output copy of sampled token ids (execute step k, collect step k-1)."""
from stagecheck.spec import Operation, Protocol, ProtocolCheck, StepSpace


def build(ctx):
    state = ctx.component(ctx.sequence.capacity, ctx.device)
    state.collected = []
    return state


def logits_of(step):
    return [1000 * step.index + int(r.split("-")[1]) for r in step.batch]


def execute(ctx):
    batch = list(ctx.step.batch)
    if not batch:
        return
    ctx.state.execute(batch, ctx.tensor(logits_of(ctx.step), "int64"))


def collect(ctx):
    got = ctx.state.get_output()
    ctx.state.collected.extend(sorted(got.items()))


def observe(ctx):
    return list(ctx.state.collected)


def values_are_samples(sequence, trace):
    bad = []
    for state in trace.states:
        for req, v in state or ():
            if (v - 1) % 3 or ((v - 1) // 3) % 1000 != int(req.split("-")[1]):
                bad.append(f"{req} got {v}, which is no sample of its logits")
    return bad


PROTOCOL = Protocol(
    name="async-output-unobserved",
    summary="sampled ids copied D2H into pinned memory on a copy stream, collected a step later",
    functions=("AsyncSampler",),
    component="AsyncSampler",
    build=build,
    operations=(Operation("execute", execute), Operation("collect", collect)),
    device_work=("_sample",),
    space=StepSpace(capacity=(1, 4), steps=(1, 6), max_prompt=4),
    checks=(ProtocolCheck("samples_of_logits",
                          "Every collected value is 3 * logit + 1 of its own request.",
                          values_are_samples),),
)
