"""Protocol: _prepare_inputs shape: positions / query_start_loc staged through CpuGpuBuffer
numpy views, uploaded non_blocking, plus a structured-output bitmask upload."""
from stagecheck.spec import Operation, Protocol, StepSpace


def build(ctx):
    state = ctx.component(8 * ctx.sequence.capacity, ctx.sequence.capacity, ctx.device)
    state.collected = []
    state.last_n = 0
    return state


def prepare(ctx):
    step = ctx.step
    starts = dict(step.cached)
    for r in list(step.joins) + list(step.resumed):
        starts[r["id"]] = r["computed"]
    batch = list(step.batch)
    ctx.state.last_n = len(batch)
    if not batch:
        return
    computed = [starts.get(r, 0) for r in batch]
    scheduled = [step.scheduled[r] for r in batch]
    bitmask = [1 if int(r.split("-")[1]) % 2 == 0 else 2 for r in batch]
    ctx.state.prepare_and_run(computed, scheduled, bitmask)


def collect(ctx):
    if ctx.state.last_n:
        ctx.state.collected.append(ctx.state.collect(ctx.state.last_n))


PROTOCOL = Protocol(
    name="prepare-positions",
    summary="positions/query_start_loc through CpuGpuBuffer numpy views and a grammar bitmask upload",
    functions=("InputPreparer",),
    component="InputPreparer",
    build=build,
    operations=(Operation("prepare", prepare),
                Operation("collect", collect, when=lambda step: step.index % 3 == 2)),
    device_work=("_forward", "_apply_bitmask"),
    observe=lambda ctx: list(ctx.state.collected),
    space=StepSpace(capacity=(1, 4), steps=(1, 8), max_prompt=6),
)
