"""The step-sequence shrinker: from a failing sequence to a shortest one that still fails.

Greedy passes, each proposing smaller variants of the current sequence; the first variant
that still fails (``still_fails``, which the caller evaluates, in batches) is kept and the
passes start again, until none makes progress:

1. steps: keep only the first 1, 2, 4, ... steps and drop blocks of a half, a quarter, ...
   of them (a long sequence whose race shows early loses most of its steps in a few
   rounds), then drop the last step, then any one step, then any two consecutive steps;
2. requests: remove one request (its join and every decision about it);
3. the completion schedule: every operation ``lazy``, then one at a time;
4. decisions: a finish, a preemption, a resumption, a chunk, drafts, acceptance
   (accepted counts towards 1), a dummy step's tokens;
5. sizes: prompts (and prefixes) towards 1, temperatures towards the first one drawn,
   the capacity down to the largest batch.

Every variant is a valid sequence (``spec.steps.unfold`` drops a decision that no longer
applies), and ``StepSequence.size`` (steps, requests, text) only decreases. A one-step
protocol of a staging schema shrinks its scenario with the scenario shrinker
(``oracles/shrink.py``).
"""

from __future__ import annotations

import copy
from typing import Callable, Iterator

from stagecheck.oracles.schemas import load_schema
from stagecheck.oracles.shrink import shrink
from stagecheck.spec.protocol import Protocol
from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.steps import StepSequence, unfold

__all__ = ["MAX_EVALUATIONS", "shrink_sequence"]

#: most predicate evaluations one shrink spends
MAX_EVALUATIONS = 400
#: variants evaluated per batch
BATCH = 8
#: sequences of more steps than this lose prefixes and blocks of steps first (``_steps``)
BLOCKS_FROM = 8


def shrink_sequence(protocol: Protocol, seq: StepSequence,
                    still_fails: Callable[[list[StepSequence]], int | None],
                    max_evaluations: int = MAX_EVALUATIONS,
                    stop: Callable[[], bool] | None = None,
                    batch_size: int = BATCH, reached: int | None = None
                    ) -> tuple[StepSequence, int]:
    """A smallest variant of ``seq`` that ``still_fails``; with the evaluations spent.

    ``reached``: the step at which a run of ``seq`` stopped (a hang, an end of its
    process), so that the steps after it never ran: the first variant tried keeps only
    the steps up to it (one evaluation, where dropping them one at a time would spend the
    few a stopped run gets, each up to the per-operation limit)."""
    if protocol.staging:
        return _shrink_scenario(protocol, seq, still_fails, max_evaluations, stop, batch_size)
    current, spent = _tidy(seq), 0
    if reached is not None and 0 <= reached < len(current.steps) - 1:
        ran = copy.deepcopy(current)
        del ran.steps[reached + 1:]
        spent += 1
        if still_fails([ran]) is not None:
            current = ran
    while spent < max_evaluations and not (stop and stop()):
        improved = False
        for propose in _PASSES:
            size = current.size
            candidates = [c for c in map(_tidy, propose(current)) if c.size < size]
            for start in range(0, len(candidates), batch_size):
                chunk = candidates[start:start + batch_size]
                spent += len(chunk)
                found = still_fails(chunk)
                if found is not None:
                    current, improved = chunk[found], True
                    break
                if spent >= max_evaluations or (stop and stop()):
                    return current, spent
            if improved:
                break
        if not improved:
            break
    return current, spent


def _tidy(seq: StepSequence) -> StepSequence:
    """``seq`` with the decisions that do not apply removed (ids that never joined)."""
    out = copy.deepcopy(seq)
    joined: set[str] = set()
    for step in out.steps:
        joined |= {j["id"] for j in step.joins}
        for name in ("finished", "preempted", "resumed"):
            setattr(step, name, [r for r in getattr(step, name) if r in joined])
        for name in ("chunk", "drafts", "accepted"):
            setattr(step, name, {r: v for r, v in getattr(step, name).items() if r in joined})
        step.accepted = {r: v for r, v in step.accepted.items()
                         if r in step.drafts and v > 1}
        if step.kind == "step":
            step.dummy_tokens = 0
        step.completion = list(step.completion)
        while step.completion and step.completion[-1] == "lazy":
            step.completion.pop()
    return out


def _steps(seq: StepSequence) -> Iterator[StepSequence]:
    """Only the first 1, 2, 4, ... steps (of more than ``BLOCKS_FROM``), then without a
    block of a half, a quarter, ... of them (of even length: an operation whose ``when``
    depends on the step's parity runs at the same steps again only when an even number
    of steps before it goes); then without one step (the last first), then without two
    consecutive steps. One step stays at least, as the generator draws it
    (``spec.steps.BOUNDS``)."""
    n = len(seq.steps)
    if n > BLOCKS_FROM:
        prefixes = []
        k = 1
        while k < n:
            prefixes.append(k)
            out = copy.deepcopy(seq)
            del out.steps[k:]
            yield out
            k *= 2
        block = n // 2
        while block > 2:
            block -= block % 2
            for start in range(0, n - block + 1, block):
                if start + block == n and start in prefixes:
                    continue          # the prefix of ``start`` steps, proposed above
                out = copy.deepcopy(seq)
                del out.steps[start:start + block]
                yield out
            block //= 2
    for k in range(len(seq.steps) - 1, -1, -1) if len(seq.steps) > 1 else ():
        out = copy.deepcopy(seq)
        del out.steps[k]
        yield out
    for k in range(len(seq.steps) - 2, -1, -1) if len(seq.steps) > 2 else ():
        out = copy.deepcopy(seq)
        del out.steps[k:k + 2]
        yield out


def _requests(seq: StepSequence) -> Iterator[StepSequence]:
    ids = [j["id"] for step in seq.steps for j in step.joins]
    for rid in reversed(ids):
        out = copy.deepcopy(seq)
        for step in out.steps:
            step.joins = [j for j in step.joins if j["id"] != rid]
        yield out


def _completions(seq: StepSequence) -> Iterator[StepSequence]:
    if seq.order != "issue":
        out = copy.deepcopy(seq)
        out.order = "issue"
        yield out
    out = copy.deepcopy(seq)
    for step in out.steps:
        step.completion = []
    yield out
    for k, step in enumerate(seq.steps):
        for j, c in enumerate(step.completion):
            if c != "lazy":
                out = copy.deepcopy(seq)
                out.steps[k].completion[j] = "lazy"
                yield out


def _decisions(seq: StepSequence) -> Iterator[StepSequence]:
    for k, step in enumerate(seq.steps):
        for name in ("finished", "preempted", "resumed"):
            for rid in getattr(step, name):
                out = copy.deepcopy(seq)
                getattr(out.steps[k], name).remove(rid)
                yield out
        for name in ("chunk", "drafts", "accepted"):
            for rid in getattr(step, name):
                out = copy.deepcopy(seq)
                del getattr(out.steps[k], name)[rid]
                yield out
        for rid, value in step.drafts.items():
            if value > 1:
                out = copy.deepcopy(seq)
                out.steps[k].drafts[rid] = value - 1
                yield out
        if step.kind == "dummy" and step.dummy_tokens > 1:
            out = copy.deepcopy(seq)
            out.steps[k].dummy_tokens = max(1, step.dummy_tokens // 2)
            yield out


def _sizes(seq: StepSequence) -> Iterator[StepSequence]:
    first = next((j["temperature"] for s in seq.steps for j in s.joins), None)
    for k, step in enumerate(seq.steps):
        for n, join in enumerate(step.joins):
            prompt = join.get("prompt", 1)
            for key, smaller in (("prompt", 1), ("prompt", max(1, prompt // 2)),
                                 ("prompt", max(1, prompt - 1)), ("prefix", 0)):
                if join.get(key, 0) > smaller:
                    out = copy.deepcopy(seq)
                    out.steps[k].joins[n][key] = smaller
                    yield out
            if first is not None and join.get("temperature") != first:
                out = copy.deepcopy(seq)
                out.steps[k].joins[n]["temperature"] = first
                yield out
    widest = max((len(v.batch) for v in unfold(seq) if v.kind == "step"), default=1)
    if seq.capacity > max(1, widest):
        out = copy.deepcopy(seq)
        out.capacity = max(1, widest)
        yield out


_PASSES = (_steps, _requests, _completions, _decisions, _sizes)


def _shrink_scenario(protocol, seq, still_fails, max_evaluations, stop, batch_size):
    schema = load_schema(protocol.staging)

    def as_sequence(s):
        out = copy.deepcopy(seq)
        out.data = {"scenario": s.to_dict()}
        out.capacity = s.capacity
        return out

    smallest, spent = shrink(schema, StagingScenario.from_dict(seq.data["scenario"]),
                             lambda scenarios: still_fails([as_sequence(s) for s in scenarios]),
                             max_evaluations=max_evaluations, stop=stop or (lambda: False),
                             batch_size=batch_size)
    return as_sequence(smallest), spent
