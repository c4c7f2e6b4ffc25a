"""``preprocess_mamba`` on its fused path: vLLM's Mamba prefix-caching preprocess step.

``preprocess_mamba(scheduler_output, kv_cache_config, cache_config, mamba_state_idx,
input_batch, requests, forward_context, mamba_state_copy_funcs, copy_bufs, align_ctx)``
(v0.27 on) decides, for every request of the batch, whether its running Mamba state
must move to another block column before the step runs. It first removes from
``mamba_state_idx`` the ids the scheduler output names as finished, preempted (None:
none) or resumed. Then, for every ``i`` and ``r = input_batch.req_ids[i]`` (all of
them: ``num_reqs`` is ``len(req_ids)``), with ``c = requests[r].num_computed_tokens``,
``s = scheduler_output.num_scheduled_tokens[r]`` and ``B`` the Mamba block size:

- ``curr = cdiv(c + s, B) - 1``: the column that will hold the running state (the
  ``num_speculative_blocks`` terms upstream cancel out);
- ``prev = mamba_state_idx[r]`` if it has an entry (after the cleanup), else
  ``(c - 1) // B`` (-1 for a request with nothing computed);
- the state moves when ``prev != -1`` and ``prev != curr``: then the accepted-token
  bias is ``num_accepted_tokens_cpu[i] - 1`` and ``num_accepted_tokens_cpu[i]``
  becomes 1; in every case ``mamba_state_idx[r]`` becomes ``curr``.

With ``align_ctx`` given (the fused path) three int32 buffers of ``align_ctx`` are
staged: ``mamba_state_idx_buf[i] = curr``, ``precopy_src_col_buf[i] = prev`` on a move
else -1, ``precopy_token_bias_buf[i] = bias`` on a move else 0; each is copied over
``[0, num_reqs)``, then the pre-copy kernel is launched. An empty batch returns right
after the cleanup: nothing is staged or copied. The scalar path (``align_ctx`` None)
stages no per-slot buffer (it gathers pointer metadata of state tensors for a batched
memcpy), so the adapter always takes the fused path; ``align_ctx.replayssm`` is None
(the ReplaySSM variant of an unreleased revision takes another path when it is set).
"""

from __future__ import annotations

from types import SimpleNamespace

from stagecheck.spec.scenario import RequestView, StagingScenario
from stagecheck.spec.schema import (INT32_MAX, NUMBER, OPTIONAL, PER_SLOT, Call, CopyPolicy, Field,
                                    Input, Signature, StagingSchema, StandIn, Values)
from stagecheck.spec.schemas.cleanup import CLEANUP_INPUTS, dropped, tidy

#: token counts: their sum fits int32 even with block size 1
_COUNTS = Values(0, 2**30, small=40, special=(0, 1, 2**30))

INPUTS = (
    Input("num_scheduled_tokens", values=_COUNTS,
          doc="scheduler_output.num_scheduled_tokens: tokens scheduled this step"),
    Input("num_computed_tokens", values=_COUNTS, group="requests",
          doc="requests[r].num_computed_tokens"),
    Input("mamba_state_idx", values=Values(-1, INT32_MAX, small=64, special=(-1, 0)),
          presence=OPTIONAL,
          doc="mamba_state_idx: the column of the running state after the previous step "
              "(absent: a new or resumed request)"),
    Input("num_accepted_tokens", kind=PER_SLOT, values=Values(1, INT32_MAX, small=4,
                                                              special=(1, 2)),
          doc="input_batch.num_accepted_tokens_cpu: accepted tokens of the previous step, "
              "by slot (int32)"),
    Input("block_size", kind=NUMBER, values=Values(1, 4096, small=16, special=(1, 4, 16, 1024)),
          doc="copy_bufs.mamba_spec.block_size"),
    Input("num_speculative_blocks", kind=NUMBER, values=Values(0, 4, small=4),
          doc="copy_bufs.mamba_spec.num_speculative_blocks"),
    *CLEANUP_INPUTS,
)


def decide(q) -> tuple[int, int, bool]:
    """``(curr, prev, moves)`` of the request in slot ``q.slot``: the column that holds
    its running state after this step, the column that held it before (the entry after
    the cleanup, else computed), and whether the state moves."""
    block = q.input("block_size")
    computed = q.num_computed_tokens
    curr = -(-(computed + q.num_scheduled_tokens) // block) - 1
    if q.has("mamba_state_idx") and q.id not in dropped(q.scenario):
        prev = q.mamba_state_idx
    else:
        prev = (computed - 1) // block
    return curr, prev, prev != -1 and prev != curr


def _src_col(q) -> int:
    _, prev, moves = decide(q)
    return prev if moves else -1


def _token_bias(q) -> int:
    return q.slot_value("num_accepted_tokens") - 1 if decide(q)[2] else 0


def fused(profile) -> bool:
    """Whether the target takes ``align_ctx`` (v0.27 on): only then are the three
    buffers staged; the earlier nine-parameter release has the scalar path alone."""
    return "align_ctx" in profile.parameters


def _fused_call(profile, scenario) -> bool:
    return fused(profile)


_COPY = CopyPolicy("live", skip_when_empty=True)
_WHEN = ("on the fused path (align_ctx given: v0.27 on), for a non-empty batch; never by "
         "the nine-parameter signature")
_STAGED = dict(copy=_COPY, when=_fused_call, offered=fused, when_prose=_WHEN)
FIELDS = (
    Field("state_idx", "mamba_state_idx_buf", "int32", lambda q: decide(q)[0],
          "cdiv(num_computed_tokens[r] + num_scheduled_tokens[r], block_size) - 1",
          **_STAGED),
    Field("src_col", "precopy_src_col_buf", "int32", _src_col,
          "prev if the state moves (prev != -1 and prev != curr) else -1, where prev = "
          "mamba_state_idx[r] after the cleanup, else (num_computed_tokens[r] - 1) // "
          "block_size", **_STAGED),
    Field("token_bias", "precopy_token_bias_buf", "int32", _token_bias,
          "num_accepted_tokens_cpu[i] - 1 if the state moves else 0", **_STAGED),
)


def mutations(s, inputs: dict) -> dict:
    """The cleanup, then ``curr`` recorded for every request, and the accepted count of
    every request whose state moves reset to 1."""
    gone = dropped(s)
    table = {r: v for r, v in inputs["mamba_state_idx"].items() if r not in gone}
    accepted = inputs["num_accepted_tokens"]
    for i, r in enumerate(s.req_ids):
        curr, _, moves = decide(RequestView(s, i, r))
        if moves:
            accepted[i] = 1
        table[r] = curr
    inputs["mamba_state_idx"] = table
    return inputs


class FusedAlignContext:
    """Stand-in for the engine's spec-decode GPU context: the three staging buffers, one
    Mamba group, no ReplaySSM, and the two device-side steps of the fused path (the lazy
    binding to the forward context's state tensors and block tables, and the pre-copy
    kernel launch), which stagecheck does not model: they record that they ran."""

    def __init__(self, state_idx, src_col, token_bias) -> None:
        self.mamba_state_idx_buf = state_idx
        self.precopy_src_col_buf = src_col
        self.precopy_token_bias_buf = token_bias
        self.mamba_group_ids = [0]
        self.replayssm = None
        self.is_initialized = False
        self.precopy_launches: list[int] = []

    def initialize_from_forward_context(self, kv_cache_config, forward_context,
                                        mamba_state_copy_funcs, block_tables) -> None:
        self.is_initialized = True

    def run_fused_precopy(self, *, num_reqs, state_idx_gpu, src_col_gpu, token_bias_gpu,
                          idx_mapping=None) -> None:
        self.precopy_launches.append(num_reqs)


class PointerColumn(StandIn):
    """One column of the scalar path's pointer metadata (``src_ptrs``, ``dst_ptrs``,
    ``sizes``): its host view, which upstream reads before it loops over the Mamba
    groups (there are none: nothing is written into it, nothing copied from it)."""

    def __init__(self) -> None:
        self.np: list[int] = []


class ScalarCopyBuffers(StandIn):
    """Stand-in for the engine's pre-copy buffers of the scalar path: no Mamba group, so
    a state move gathers no pointer metadata and the batched copy has nothing to do."""

    def __init__(self, mamba_spec) -> None:
        self.mamba_group_ids: list[int] = []
        self.mamba_spec = mamba_spec
        self.offset = -1
        self.src_ptrs, self.dst_ptrs, self.sizes = PointerColumn(), PointerColumn(), \
            PointerColumn()


def build_scalar(b, profile) -> Call:
    """The nine-parameter signature (vLLM v0.17: no ``align_ctx``): the scalar path.
    Its decisions show in what it leaves in ``mamba_state_idx`` and
    ``num_accepted_tokens_cpu``; the pointer metadata it gathers for the batched copy is
    not modelled (the copy buffers have no Mamba group)."""
    call = build(b, profile)
    copy_bufs = ScalarCopyBuffers(call.args[8].mamba_spec)
    return Call((*call.args[:8], copy_bufs), call.kwargs)


def build(b, profile) -> Call:
    s = b.scenario
    preempted = b.id_set("preempted_req_ids")
    scheduler_output = SimpleNamespace(
        num_scheduled_tokens=b.table("num_scheduled_tokens"),
        finished_req_ids=b.id_set("finished_req_ids"),
        preempted_req_ids=None if s.inputs["preempted_is_none"] else preempted,
        scheduled_cached_reqs=SimpleNamespace(resumed_req_ids=b.id_set("resumed_req_ids")))
    block_table = SimpleNamespace(get_device_tensor=lambda n: None)
    input_batch = SimpleNamespace(req_ids=b.req_ids(), block_table=[block_table],
                                  num_accepted_tokens_cpu=b.array("num_accepted_tokens",
                                                                  "int32"))
    requests = b.objects(num_computed_tokens="num_computed_tokens")
    mamba_spec = SimpleNamespace(block_size=s.inputs["block_size"],
                                 num_speculative_blocks=s.inputs["num_speculative_blocks"])
    copy_bufs = SimpleNamespace(mamba_group_ids=[0], mamba_spec=mamba_spec, offset=-1)
    align_ctx = FusedAlignContext(b.buffer("mamba_state_idx_buf"),
                                  b.buffer("precopy_src_col_buf"),
                                  b.buffer("precopy_token_bias_buf")) if fused(profile) else None
    return Call((scheduler_output, SimpleNamespace(), SimpleNamespace(enable_prefix_caching=True),
                 b.table("mamba_state_idx"), input_batch, requests, {}, (), copy_bufs,
                 align_ctx))


def generate(d, s) -> None:
    """Engine-like steps half of the time: a small block size, each request one decode
    step (1-4 tokens) or a prefill chunk past what it computed, its entry the column its
    previous step ended in (or none, as a new request), 1-4 accepted tokens; so states
    stay, move one column, or start. Always: entries of requests that left the batch
    (``req-gone``), and a None preempted set is empty."""
    tables = s.inputs
    if d.chance(1, 2):
        tables["mamba_state_idx"]["req-gone"] = d.integer(0, 64)
    if d.pick(("engine", "wide")) == "engine":
        block = tables["block_size"] = d.pick((4, 16, 2, 64))
        tables["num_speculative_blocks"] = d.size(0, 2)
        for i, r in enumerate(s.req_ids):
            computed = d.integer(0, 4 * block)
            tables["num_computed_tokens"][r] = computed
            tables["num_scheduled_tokens"][r] = (1 + d.size(0, 3) if d.chance(3, 4)
                                                 else d.integer(1, 3 * block))
            if computed and d.chance(3, 4):
                tables["mamba_state_idx"][r] = -(-computed // block) - 1 - d.size(0, 1)
            else:
                tables["mamba_state_idx"].pop(r, None)
            tables["num_accepted_tokens"][i] = 1 + d.size(0, 3)
    tidy(tables)


def bench(n: int):
    """In contract, deterministic: ``n`` requests in a batch of capacity ``n``, block
    size 16, decode steps of 1-4 tokens, every other state moving one column."""
    req_ids = [f"req-{i}" for i in range(n)]
    computed = {r: 16 * (i % 7) + (15 if i % 2 else 3) for i, r in enumerate(req_ids)}
    return StagingScenario(
        n, n, req_ids,
        {"num_scheduled_tokens": {r: 1 + i % 4 for i, r in enumerate(req_ids)},
         "num_computed_tokens": computed,
         "mamba_state_idx": {r: -(-c // 16) - 1 for r, c in computed.items() if c},
         "num_accepted_tokens": [1 + i % 3 for i in range(n)],
         "block_size": 16, "num_speculative_blocks": 1,
         "finished_req_ids": ["req-gone"], "preempted_req_ids": [], "preempted_is_none": True,
         "resumed_req_ids": []}, schema=SCHEMA.name)


SCHEMA = StagingSchema(
    name="mamba-preprocess-fused",
    summary="vLLM's Mamba preprocess on its fused path: mamba_state_idx cleaned of "
            "finished/preempted/resumed ids, then for every request of the batch the "
            "column of its running state, and the source column and accepted-token bias "
            "of a state move (-1 and 0 without one), each copied over [0, num_reqs); an "
            "empty batch stages nothing",
    functions=("preprocess_mamba",),
    parameters=("scheduler_output", "kv_cache_config", "cache_config", "mamba_state_idx",
                "input_batch", "requests", "forward_context", "mamba_state_copy_funcs",
                "copy_bufs", "align_ctx"),
    releases="v0.27 on",
    signatures=(Signature(("scheduler_output", "kv_cache_config", "cache_config",
                           "mamba_state_idx", "input_batch", "requests", "forward_context",
                           "mamba_state_copy_funcs", "copy_bufs"), build_scalar,
                          releases="v0.17",
                          note="no align_ctx: the scalar path, checked through the inputs it "
                               "changes"),),
    num_reqs_is_len=True,
    inputs=INPUTS,
    fields=FIELDS,
    build=build,
    mutations=mutations,
    mutations_prose="mamba_state_idx loses every finished, preempted (None: none) and "
                    "resumed id, then maps every request of the batch to its curr column; "
                    "input_batch.num_accepted_tokens_cpu[i] becomes 1 where the state of "
                    "slot i moves; every other input stays unchanged",
    generate=generate,
    bench=bench,
)
