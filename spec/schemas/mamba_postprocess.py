"""The seed: ``stage_postprocess_inputs_to_gpu`` of vLLM's Mamba path, all three generations.

``stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
mamba_state_idx[, *, run_prefix_state_migration])`` writes, for every live slot ``i``
and ``r = req_ids[i]``, the state index, scheduled, computed and draft token counts
into four int32 buffers of ``ctx`` (the later generation also ``is_prefilling``), then
copies ``[0, num_reqs)`` of each to the device (domain.md section 2). A live request
without a state index raises ``AssertionError`` naming it. The later generation takes
the keyword ``run_prefix_state_migration``: with it False the state-index buffer is
neither required, written nor copied (and ``ctx.mamba_state_idx_buf`` may be None).
"""

from __future__ import annotations

from itertools import compress, repeat
from types import SimpleNamespace

from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.space import SMALL
from stagecheck.spec.schema import (FLAG, INT32_MAX, MAY_MISS, OPTIONAL, Call, Consumer, Field,
                                    Input, MissingPolicy, StagingSchema, Values)

FLAG_NAME = "run_prefix_state_migration"
#: Block size the "engine" regime's state indices assume.
ENGINE_BLOCK = 4

_COUNTS = Values(0, INT32_MAX, small=16,
                 special=(0, 1, 65_535, 65_536, 1 << 20, INT32_MAX - 1, INT32_MAX))

INPUTS = (
    Input("num_scheduled_tokens", values=_COUNTS,
          doc="scheduler_output.num_scheduled_tokens: tokens scheduled this step"),
    Input("spec_decode_tokens", dtype="int-list", presence=OPTIONAL, length=(0, 16),
          drafts=True, doc="scheduler_output.scheduled_spec_decode_tokens: draft token ids (absent: none)"),
    Input("num_computed_tokens", values=_COUNTS, group="requests",
          doc="requests[r].num_computed_tokens"),
    Input("num_prompt_tokens", values=_COUNTS, group="requests",
          doc="requests[r].num_prompt_tokens"),
    Input("mamba_state_idx", values=Values(0, INT32_MAX, small=64), presence=MAY_MISS,
          doc="mamba_state_idx: the block column of the running state (preprocess fills it)"),
    Input(FLAG_NAME, kind=FLAG, default=True,
          doc="keyword of the later generation: stage the state index (and need it)"),
    Input("omit_state_idx_buf", kind=FLAG, default=False,
          doc="with the flag False: ctx.mamba_state_idx_buf is None"),
)


def _later(profile) -> bool:
    return profile.takes(FLAG_NAME)


FIELDS = (
    Field("state_idx", "mamba_state_idx_buf", "int32", lambda q: q.mamba_state_idx,
          "mamba_state_idx[r]", missing=MissingPolicy("mamba_state_idx"),
          when=lambda p, s: not _later(p) or s.inputs[FLAG_NAME], read_by_consumer=True,
          when_prose=f"on every call ({FLAG_NAME}=True, where the generation takes it)",
          nullable=_later),
    Field("scheduled", "num_scheduled_tokens_buf", "int32", lambda q: q.num_scheduled_tokens,
          "scheduler_output.num_scheduled_tokens[r]", read_by_consumer=True),
    Field("computed", "num_computed_tokens_buf", "int32", lambda q: q.num_computed_tokens,
          "requests[r].num_computed_tokens", read_by_consumer=True),
    Field("draft", "num_draft_tokens_buf", "int32",
          lambda q: len(q.get("spec_decode_tokens", ())),
          "len(scheduler_output.scheduled_spec_decode_tokens.get(r, []))", read_by_consumer=True,
          column=lambda inputs, live: list(map(len, map(inputs["spec_decode_tokens"].get,
                                                         live, repeat(()))))),
    Field("is_prefilling", "is_prefilling_buf", "bool",
          lambda q: q.num_computed_tokens < q.num_prompt_tokens,
          "requests[r].num_computed_tokens < requests[r].num_prompt_tokens",
          when=lambda p, s: _later(p), offered=_later,
          when_prose=f"by the later generation (the one that takes {FLAG_NAME})"),
)


def build(b, profile) -> Call:
    s = b.scenario
    ctx = SimpleNamespace()
    omit = _later(profile) and not s.inputs[FLAG_NAME] and s.inputs["omit_state_idx_buf"]
    for f in FIELDS:
        if f.offered(profile):
            setattr(ctx, f.buffer, None if (omit and f.name == "state_idx")
                    else b.buffer(f.buffer))
    scheduler_output = SimpleNamespace(
        num_scheduled_tokens=b.table("num_scheduled_tokens"),
        scheduled_spec_decode_tokens=b.table("spec_decode_tokens"))
    requests = b.objects(num_computed_tokens="num_computed_tokens",
                         num_prompt_tokens="num_prompt_tokens")
    kwargs = {FLAG_NAME: s.inputs[FLAG_NAME]} if _later(profile) else {}
    return Call((ctx, scheduler_output, b.req_ids(), s.num_reqs, requests,
                 b.table("mamba_state_idx")), kwargs)


def generate(d, s) -> None:
    """Engine-like values half of the time: each request schedules its drafts plus at
    least one token, and its state index is the block column of the running state, as
    the preprocess step leaves it, so the postprocess kernel acts on them; otherwise any
    int32 counts (drawn already). The buffer may be omitted only with the flag False."""
    if s.inputs[FLAG_NAME]:
        s.inputs["omit_state_idx_buf"] = False
    if d.pick(("engine", "wide")) != "engine":
        return
    tables = s.inputs
    if len(s.req_ids) > SMALL and getattr(d, "integers", None) is not None:
        _engine_values_in_bulk(d, s)
        return
    for r in s.req_ids:
        if r not in tables["num_scheduled_tokens"]:
            continue
        drafts = len(tables["spec_decode_tokens"].get(r, []))
        tables["num_scheduled_tokens"][r] = drafts + 1 + d.size(0, 8)
        if r in tables["num_computed_tokens"]:
            tables["num_computed_tokens"][r] = (d.integer(0, 64) if not d.chance(1, 2)
                                                else d.integer(65_536, 200_000))
            tables["num_prompt_tokens"][r] = d.integer(0, 128)
            if r in tables["mamba_state_idx"]:
                running = (tables["num_computed_tokens"][r] + tables["num_scheduled_tokens"][r]
                           - drafts)
                tables["mamba_state_idx"][r] = max(0, (running - 1) // ENGINE_BLOCK
                                                   - d.size(0, 1))


def _engine_values_in_bulk(d, s) -> None:
    """``generate``'s engine-like values for a large batch: each decision drawn for
    every request at once (``Draw.integers``/``chances``: the same distribution)."""
    tables = s.inputs
    scheduled, computed = tables["num_scheduled_tokens"], tables["num_computed_tokens"]
    prompt, state, drafts = (tables["num_prompt_tokens"], tables["mamba_state_idx"],
                             tables["spec_decode_tokens"])
    ids = list(compress(s.req_ids, map(scheduled.__contains__, s.req_ids)))
    n = len(ids)
    extra, small = d.integers(0, 8, n), d.chances(1, 2, n)
    low, high = d.integers(0, 64, n), d.integers(65_536, 200_000, n)
    prompts, back = d.integers(0, 128, n), d.integers(0, 1, n)
    counts = list(map(len, map(drafts.get, ids, repeat(()))))
    tokens = [draft + 1 + more for draft, more in zip(counts, extra)]
    scheduled.update(zip(ids, tokens))     # ids it holds already: its order stays
    # the requests with a computed count, each table set in their order (a table that
    # lacks one of them gets it in that order, as one by one)
    keep = list(compress(range(n), map(computed.__contains__, ids)))
    kept = list(map(ids.__getitem__, keep))
    done = [low[k] if small[k] else high[k] for k in keep]
    computed.update(zip(kept, done))
    prompt.update(zip(kept, map(prompts.__getitem__, keep)))
    state.update([(r, max(0, (finished + tokens[k] - counts[k] - 1) // ENGINE_BLOCK - back[k]))
                  for r, finished, k in zip(kept, done, keep) if r in state])


def bench(n: int):
    """In contract, deterministic: ``n`` live requests, every one with a state index and a
    prompt length, every other one with draft tokens (the others absent), capacity ``n``."""
    req_ids = [f"req-{i}" for i in range(n)]
    return StagingScenario(
        n, n, req_ids,
        {"num_scheduled_tokens": {r: 1 + (i * 7) % 512 for i, r in enumerate(req_ids)},
         "spec_decode_tokens": {r: list(range(i % 4)) for i, r in enumerate(req_ids)
                                if i % 2 == 1},
         "num_computed_tokens": {r: (i * 131) % 4096 for i, r in enumerate(req_ids)},
         "num_prompt_tokens": {r: 2048 for r in req_ids},
         "mamba_state_idx": {r: (i * 3) % 1000 for i, r in enumerate(req_ids)},
         FLAG_NAME: True, "omit_state_idx_buf": False}, schema=SCHEMA.name)


SCHEMA = StagingSchema(
    name="mamba-postprocess",
    summary="vLLM's Mamba postprocess staging: state index, scheduled, computed and draft "
            "token counts (and is_prefilling in the later generation) per live slot, each "
            "buffer copied over [0, num_reqs)",
    functions=("stage_postprocess_inputs_to_gpu",),
    parameters=("ctx", "scheduler_output", "req_ids", "num_reqs", "requests", "mamba_state_idx"),
    keywords=(FLAG_NAME,),
    inputs=INPUTS,
    fields=FIELDS,
    build=build,
    generate=generate,
    bench=bench,
    consumer=Consumer("mamba-postprocess-kernel"),
)
