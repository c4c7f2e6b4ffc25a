"""The symbolic scenario: the shape of one path chosen by forks, its values symbolic."""

from __future__ import annotations

from stagecheck.oracles.symbolic._crosshair import assume, fork, symbolic_bool, symbolic_int
from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schema import FIELDS_BY_BUFFER, INT32_MAX, INT32_MIN

__all__ = ["Symbols", "pick", "symbolic_scenario"]

_MAX_DRAFTS = 3


class Symbols:
    """The symbolic values of one path, created before tracing resumes."""

    def __init__(self, space, max_capacity: int, buffers: tuple[str, ...], flagged: bool):
        def sym_int(name: str):
            return symbolic_int(space, name)

        m = max_capacity
        self.sched = [sym_int(f"scheduled_{k}") for k in range(m)]
        self.computed = [sym_int(f"computed_{k}") for k in range(m)]
        self.prompt = [sym_int(f"prompt_{k}") for k in range(m)]
        self.state = [sym_int(f"state_idx_{k}") for k in range(m)]
        self.draft_tokens = [[sym_int(f"draft_{k}_{t}") for t in range(_MAX_DRAFTS)]
                             for k in range(m)]
        self.initial: dict[tuple[str, str], list] = {}
        for buffer in buffers:
            is_bool = FIELDS_BY_BUFFER[buffer].dtype == "bool"
            for view in ("cpu", "gpu"):
                self.initial[buffer, view] = [
                    symbolic_bool(space, f"{buffer}_{view}_{j}") if is_bool
                    else sym_int(f"{buffer}_{view}_{j}") for j in range(m)]
        self.flagged = flagged


def pick(space, desc: str, weighted: list[tuple[int, float]]) -> int:
    """Choose one of ``weighted`` (value, weight) by a chain of forks.

    The weights steer CrossHair's random descent of the path tree (the shapes that
    matter most are tried first); every option stays reachable.
    """
    options = [(v, w) for v, w in weighted if w > 0]
    seen: set = set()
    options = [(v, w) for v, w in options if not (v in seen or seen.add(v))]
    for i, (value, weight) in enumerate(options[:-1]):
        rest = sum(w for _, w in options[i:])
        if fork(space, f"{desc}={value}", weight / rest):
            return value
    return options[-1][0]


def symbolic_scenario(space, sym: Symbols, max_capacity: int) -> StagingScenario:
    """Build (under tracing) a scenario from the path's symbols; forks on its shape.

    Shape (capacity, length of ``req_ids``, ``num_reqs``, repeated ids, which dict
    entries exist, the flag) is chosen by forks; every value (token counts, state
    indices, draft lists, the previous contents of every view) stays symbolic.
    """
    m = max_capacity
    capacity = pick(space, "capacity", [(m, 3.0)] + [(c, 1.0) for c in range(m - 1, 0, -1)])
    length = pick(space, "len_req_ids", [(capacity, 2.0), (capacity - 1, 2.0)]
                   + [(n, 1.0) for n in range(capacity - 2, -1, -1)])
    num_reqs = pick(space, "num_reqs", [(max(length - 1, 0), 3.0), (length, 3.0), (0, 1.0)]
                     + [(n, 1.0) for n in range(1, length)]
                     + [(n, 0.5) for n in range(length + 1, capacity + 2)])  # out of contract

    req_ids: list[str] = []
    for j in range(length):
        if j == 0 or fork(space, f"fresh_id_{j}", 0.9):
            req_ids.append(f"r{j}")
        else:  # repeats an earlier id (out of contract among the live slots)
            req_ids.append(req_ids[pick(space, f"alias_{j}", [(k, 1.0) for k in range(j)])])
    # Values beyond int32 are out of contract (numpy raises at the first such write):
    # one fork decides whether this path may hold any, instead of a fork at every write.
    if fork(space, "values_fit_int32", 0.85):
        for values in (sym.sched, sym.computed, sym.prompt, sym.state):
            for v in values[:len(req_ids)]:
                assume(space, v >= INT32_MIN)
                assume(space, v <= INT32_MAX)
    scheduled, spec_tokens, computed, prompt, state_idx = {}, {}, {}, {}, {}
    live = set(req_ids[:num_reqs])
    # Padded ids: one choice for all of them, stale entries everywhere or none at all.
    stale = fork(space, "padded_ids_stale", 0.5)
    for k, r in enumerate(dict.fromkeys(req_ids)):
        if r in live:
            has_scheduled = has_request = True
            if not fork(space, f"entries_complete_{k}", 0.9):   # out of contract
                if fork(space, f"missing_scheduled_{k}", 0.5):
                    has_scheduled = False
                else:
                    has_request = False
            has_state_idx = fork(space, f"state_idx_has_{k}", 0.85)
            has_drafts = fork(space, f"drafts_has_{k}", 0.6)
        else:
            has_scheduled = has_request = has_state_idx = has_drafts = stale
        if has_scheduled:
            scheduled[r] = sym.sched[k]
        if has_request:
            computed[r] = sym.computed[k]
            prompt[r] = sym.prompt[k]
        if has_drafts:
            # The number of drafts is a list length, which every copy of the list would
            # realize anyway: chosen here, with an empty list (same as absent) least likely.
            count = pick(space, f"num_drafts_{k}", [(1, 3.0), (2, 1.0), (3, 1.0), (0, 1.0)])
            spec_tokens[r] = sym.draft_tokens[k][:count]
        if has_state_idx:
            state_idx[r] = sym.state[k]
    initial_cpu, initial_gpu = {}, {}
    for (buffer, view), values in sym.initial.items():
        values = values[:capacity]
        if FIELDS_BY_BUFFER[buffer].dtype != "bool":
            for v in values:
                assume(space, v >= INT32_MIN)
                assume(space, v <= INT32_MAX)
        (initial_cpu if view == "cpu" else initial_gpu)[buffer] = values
    flag, omit = True, False
    if sym.flagged:
        flag = fork(space, "run_prefix_state_migration", 0.6)
        omit = (not flag) and fork(space, "omit_state_idx_buf", 0.3)
    return StagingScenario(capacity, num_reqs, req_ids, scheduled, spec_tokens, computed,
                           prompt, state_idx, initial_cpu, initial_gpu, flag, omit)
