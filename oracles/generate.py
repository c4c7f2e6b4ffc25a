"""Hypothesis strategies that build staging scenarios by construction (the generate stage).

``staging_scenarios`` yields only in-contract inputs (``spec.contract_breaches`` is
empty for every one of them); ``out_of_contract_scenarios`` yields inputs that
should not happen, each labeled with the breach it carries.
"""

from __future__ import annotations

import random

from hypothesis import strategies as st

from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schema import FIELDS, INT32_MAX, INT32_MIN

#: Token counts: small values most of the time, with long-context values above
#: 65,535 and values at the top of the int32 range drawn on purpose.
token_counts = st.one_of(
    st.integers(0, 16),
    st.integers(0, INT32_MAX),
    st.sampled_from([0, 1, 65_535, 65_536, 1 << 20, INT32_MAX - 1, INT32_MAX]),
)
#: How previous buffer contents are made: "sentinel" fills every CPU view with -1 and
#: every GPU mirror with -2 (True/False for bool buffers), as upstream tests do, so a
#: shrunk example reads easily; "random" draws every slot of every view independently
#: (any int32 bit pattern, extremes included) from a seeded generator. One draw each
#: instead of one per slot keeps generation cheap; shrinking goes to "sentinel".
FILLS = ("sentinel", "random")
_EXTREMES = (INT32_MIN, -1, 0, 1, INT32_MAX)


def buffer_contents(fill: str, seed: int, capacity: int) -> tuple[dict, dict]:
    rng = random.Random(seed)
    cpu, gpu = {}, {}
    for f in FIELDS:
        if fill == "sentinel":
            cpu[f.buffer] = [True] * capacity if f.dtype == "bool" else [-1] * capacity
            gpu[f.buffer] = [False] * capacity if f.dtype == "bool" else [-2] * capacity
            continue
        for table in (cpu, gpu):
            if f.dtype == "bool":
                table[f.buffer] = [rng.random() < 0.5 for _ in range(capacity)]
            else:
                table[f.buffer] = [rng.choice(_EXTREMES) if rng.random() < 0.2
                                   else rng.randint(INT32_MIN, INT32_MAX)
                                   for _ in range(capacity)]
    return cpu, gpu
state_indices = st.one_of(st.integers(0, 64), st.integers(0, INT32_MAX))
REGIMES = ("engine", "wide")
ENGINE_BLOCK = 4   # block size the "engine" regime's state indices assume


@st.composite
def staging_scenarios(draw, max_capacity: int = 8) -> StagingScenario:
    """In-contract scenarios.

    Guarantees: 0 <= num_reqs <= capacity; num_reqs <= len(req_ids) <= capacity
    (trailing padded ids); live ids unique and present in num_scheduled_tokens and
    requests; live values fit int32. Free: engine-like values (scheduled >= drafts + 1,
    state index at the running block) or any int32 counts, empty and full batches, requests without
    drafts (absent or empty list), live requests without a state index (the
    contract's error path), stale dict entries for padded ids, independent initial
    contents of every CPU view and GPU mirror, and both values of the flag.
    """
    capacity = draw(st.integers(1, max_capacity))
    num_reqs = draw(st.integers(0, capacity))
    length = draw(st.integers(num_reqs, capacity))
    numbers = draw(st.lists(st.integers(0, 4 * max_capacity), min_size=length,
                            max_size=length, unique=True))
    req_ids = [f"req-{k}" for k in numbers]
    # "engine": the values a running engine stages (each request schedules its drafts plus
    # at least one token; the state index is the block column of the running state, as
    # the preprocess step leaves it) so the kernel acts on them; "wide": any int32 count.
    regime = draw(st.sampled_from(REGIMES))
    scheduled, spec_tokens, computed, prompt, state_idx = {}, {}, {}, {}, {}
    for position, r in enumerate(req_ids):
        live = position < num_reqs
        # padded ids may be stale entries in the dicts, or gone
        if not live and not draw(st.booleans()):
            continue
        drafts = draw(st.integers(0, 3))   # 0: absent; 1: empty list; 2..3: 1..4 drafts
        if drafts == 1:
            spec_tokens[r] = []
        elif drafts > 1:
            spec_tokens[r] = draw(st.lists(st.integers(0, 50_000), min_size=1, max_size=4))
        n_drafts = len(spec_tokens.get(r, []))
        if regime == "engine":
            scheduled[r] = n_drafts + 1 + draw(st.integers(0, 8))
            computed[r] = draw(st.one_of(st.integers(0, 64), st.integers(65_536, 200_000)))
            prompt[r] = draw(st.integers(0, 128))
            running = computed[r] + scheduled[r] - n_drafts
            index = max(0, (running - 1) // ENGINE_BLOCK - draw(st.integers(0, 1)))
        else:
            scheduled[r] = draw(token_counts)
            computed[r] = draw(token_counts)
            prompt[r] = draw(token_counts)
            index = draw(state_indices)
        if draw(st.integers(0, 7)) != 7:  # about one in eight lacks a state index
            state_idx[r] = index
    initial_cpu, initial_gpu = buffer_contents(draw(st.sampled_from(FILLS)),
                                               draw(st.integers(0, 2**32 - 1)), capacity)
    flag = draw(st.booleans().map(lambda b: not b))   # shrinks towards True
    omit = (not flag) and draw(st.booleans())
    return StagingScenario(capacity, num_reqs, req_ids, scheduled, spec_tokens, computed, prompt,
                           state_idx, initial_cpu, initial_gpu, flag, omit)


BREACHES = ("missing from num_scheduled_tokens", "missing from requests",
            "num_reqs above capacity", "value beyond int32")


@st.composite
def out_of_contract_scenarios(draw, max_capacity: int = 8) -> tuple[str, StagingScenario]:
    """``(breach, scenario)``: an in-contract scenario with one breach of the contract."""
    breach = draw(st.sampled_from(BREACHES))
    s = draw(staging_scenarios(max_capacity))
    if breach == "num_reqs above capacity":
        extra = draw(st.integers(1, 3))
        for k in range(s.capacity + extra - len(s.req_ids)):
            r = f"req-x{k}"
            s.req_ids.append(r)
        for r in s.req_ids:
            s.num_scheduled_tokens.setdefault(r, 1)
            s.num_computed_tokens.setdefault(r, 0)
            s.num_prompt_tokens.setdefault(r, 1)
            s.mamba_state_idx.setdefault(r, 0)
        s.num_reqs = s.capacity + extra
        return breach, s
    if s.num_reqs == 0:
        s.num_reqs = 1
        if not s.req_ids:
            s.req_ids.append("req-x0")
        r = s.req_ids[0]
        s.num_scheduled_tokens.setdefault(r, 1)
        s.num_computed_tokens.setdefault(r, 0)
        s.num_prompt_tokens.setdefault(r, 1)
    victim = s.req_ids[draw(st.integers(0, s.num_reqs - 1))]
    if breach == "missing from num_scheduled_tokens":
        s.num_scheduled_tokens.pop(victim, None)
    elif breach == "missing from requests":
        s.num_computed_tokens.pop(victim, None)
        s.num_prompt_tokens.pop(victim, None)
    else:
        table = draw(st.sampled_from(["num_scheduled_tokens", "num_computed_tokens",
                                      "mamba_state_idx"]))
        value = draw(st.one_of(st.integers(INT32_MAX + 1, 2**40),
                               st.integers(-(2**40), INT32_MIN - 1)))
        getattr(s, table)[victim] = value
    return breach, s
