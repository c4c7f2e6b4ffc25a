"""A protocol for a vLLM-v1-shaped BlockTable runner (block_table_*.py beside it): each step the
persistent batch's block-table rows are edited in the pinned table (finished/preempted rows
cleared and condensed, joined/resumed rows added, new blocks appended), the table, the token
positions and request indices are uploaded without blocking, and the slot-mapping kernel reads
them. The protocol plays the scheduler's KV-cache manager: it hands out fresh block ids.
"""
from stagecheck.spec import Operation, Protocol, ProtocolCheck, StepSpace

MAX_PROMPT = 8
MAX_STEPS = 6


def cdiv(a, b):
    return -(-a // b)


def build(ctx):
    cap = ctx.sequence.capacity
    state = ctx.component(cap, MAX_PROMPT + MAX_STEPS + 4, cap * (MAX_PROMPT + 1),
                          ctx.sequence.params["block_size"], ctx.device, pin_memory=True)
    state.proto_blocks = {}      # the scheduler's side: req id -> block ids handed out
    state.proto_next_block = 1
    return state


def _new_blocks(state, req_id, tokens, bs):
    have = state.proto_blocks.setdefault(req_id, [])
    need = cdiv(tokens, bs)
    fresh = list(range(state.proto_next_block, state.proto_next_block + max(0, need - len(have))))
    state.proto_next_block += len(fresh)
    have.extend(fresh)
    return fresh


def execute(ctx):
    state, step = ctx.state, ctx.step
    bs = ctx.sequence.params["block_size"]
    removed = list(step.finished) + list(step.preempted)
    for req_id in removed:
        state.proto_blocks.pop(req_id, None)
    added = []
    for req in list(step.joins) + list(step.resumed):
        tokens = req["computed"] + step.scheduled.get(req["id"], 0)
        state.proto_blocks.pop(req["id"], None)
        added.append((req["id"], req["computed"], _new_blocks(state, req["id"], tokens, bs)))
    appended = {}
    for req_id, computed in step.cached:
        fresh = _new_blocks(state, req_id, computed + step.scheduled.get(req_id, 0), bs)
        if fresh:
            appended[req_id] = fresh
    return state.execute_model(removed, added, appended, dict(step.scheduled))


def observe(ctx):
    s = ctx.state
    bt = s.block_table
    return [(req_id, s.num_computed[req_id],
             [int(x) for x in bt.block_table.np[row, :int(bt.num_blocks_per_row[row])]])
            for row, req_id in enumerate(s.req_ids)]


def positions_non_negative(sequence, trace):
    msgs = []
    for r in trace.reads:
        pos = r["values"].get("positions")
        flat = pos if isinstance(pos, (list, tuple)) else [pos]
        if any(isinstance(p, (int, float)) and p < 0 for p in flat):
            msgs.append(f"step {r['step']}: slot-mapping kernel read a negative position {pos}")
    return msgs


PROTOCOL = Protocol(
    name="block-table-commit",
    summary="block-table rows edited in pinned memory each step, committed to the device "
            "without blocking, read by the slot-mapping kernel",
    functions=("BlockTableRunner", "execute_model"),
    component="BlockTableRunner",
    build=build,
    operations=(Operation("execute", execute, doc="update rows, stage, commit, slot mapping"),),
    device_work=("block_table._slot_mapping_kernel",),
    observe=observe,
    checks=(ProtocolCheck("positions-non-negative",
                          "The slot-mapping kernel reads no negative position.",
                          positions_non_negative),),
    row_order="req_ids",
    space=StepSpace(capacity=(1, 4), steps=(1, MAX_STEPS), max_prompt=MAX_PROMPT,
                    params={"block_size": (2, 4)}),
)
