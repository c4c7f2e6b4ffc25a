"""The step generator: step sequences drawn like a scheduler would make them.

``sample_sequence(protocol, seed, index)`` is deterministic in ``(seed, index)`` and draws,
within the protocol's ``StepSpace``: a capacity, the protocol's parameters, and step after
step the scheduler's decisions: running requests finish or are preempted, preempted ones
resume, new ones join (short prompts mostly, sometimes with a computed prefix), prompts
are prefilled in chunks, decoding requests get draft tokens and the device accepts some of
them (their counts come back by the protocol's device-to-host copies), dummy steps come
between real ones; every step's operations get a completion (``lazy`` mostly, the latest
the streams allow; ``eager`` and ``drain`` too); half the sequences run the ready
operations of several streams newest first (``StepSequence.order``). The batch rows the engine condenses and
swaps follow from who finishes, who joins and who prefills.

A one-step protocol of a staging schema draws its step's scenario from the schema's
scenario space (``oracles/sample.py``), as ``stagecheck diff`` does.
"""

from __future__ import annotations

import itertools
import random

from stagecheck.oracles.sample import sample_scenario
from stagecheck.oracles.schemas import load_schema
from stagecheck.spec.protocol import Protocol
from stagecheck.spec.steps import Step, StepSequence, Unfolding

__all__ = ["sample_sequence"]

#: chances (in 100) of each completion for an operation
COMPLETION_WEIGHTS = {"lazy": 70, "eager": 15, "drain": 15}
#: the share of sequences whose device runs ready operations of several streams newest
#: first (the rest: in issue order)
NEWEST_FIRST = 0.5


def sample_sequence(protocol: Protocol, seed: int, index: int, max_capacity: int = 8,
                    max_steps: int | None = None, steps: int | None = None) -> StepSequence:
    """The ``index``-th sequence of ``protocol`` for ``seed`` (see the module doc); at most
    ``max_steps`` steps, or exactly ``steps``."""
    rng = random.Random(f"stagecheck-protocol:{protocol.name}:{seed}:{index}")
    if protocol.staging:
        scenario = sample_scenario(load_schema(protocol.staging), seed, index, max_capacity)
        seq = StepSequence(protocol.name, scenario.capacity, [Step()],
                           data={"scenario": scenario.to_dict()})
        seq.steps[0].completion = [_completion(rng)]
        return seq
    space = protocol.space
    low, high = space.capacity
    capacity = rng.randint(low, high)
    lo_steps, hi_steps = space.steps
    hi_steps = min(hi_steps, max_steps) if max_steps else hi_steps
    drawn = hi_steps if rng.random() < 0.7 else rng.randint(lo_steps, max(lo_steps, hi_steps))
    steps = steps or drawn
    params = {name: rng.choice(values) for name, values in space.params.items()}
    seq = StepSequence(protocol.name, capacity, [], params)
    operations = len(protocol.operations)
    made = 0
    unfolding = Unfolding(capacity)     # the steps so far, replayed once each
    for _ in range(steps):
        views = unfolding.views
        batch = views[-1].batch if views and views[-1].kind == "step" else \
            _last_batch(views)
        prefilling = unfolding.prefilling()
        preempted = list(unfolding.preempted)
        if space.dummy and seq.steps and rng.random() < 0.25:
            step = Step(kind="dummy", dummy_tokens=rng.randint(1, 2 * capacity))
        else:
            step = Step()
            for r in batch:
                if r not in prefilling and rng.random() < 0.25:
                    step.finished.append(r)
                elif space.preemption and rng.random() < 0.08:
                    step.preempted.append(r)
            step.resumed = [r for r in preempted if rng.random() < 0.5]
            room = capacity - (len(batch) - len(step.finished) - len(step.preempted)) \
                - len(step.resumed)
            chance = 0.8 if len(batch) == 0 else 0.35
            while room > 0 and rng.random() < chance:
                size = _prompt(rng, space.max_prompt)
                step.joins.append({"id": f"req-{made}", "prompt": size,
                                   "prefix": rng.randint(0, size - 1) if rng.random() < 0.2
                                   else 0,
                                   "temperature": rng.choice(space.temperatures)})
                made += 1
                room -= 1
                chance *= 0.7
            for r in batch + [j["id"] for j in step.joins] + step.resumed:
                if rng.random() < 0.3:
                    step.chunk[r] = rng.randint(1, space.max_prompt)
                if space.max_drafts:
                    k = rng.randint(0, space.max_drafts) if rng.random() < 0.7 else 0
                    if k:
                        step.drafts[r] = k
                        step.accepted[r] = rng.randint(1, k + 1)
        step.completion = [_completion(rng) for _ in range(operations)]
        seq.steps.append(step)
        unfolding.add(step)
    # drawn apart from the rest, so every other decision of the sequence stays as it was
    if random.Random(f"stagecheck-protocol-order:{protocol.name}:{seed}:{index}"
                     ).random() < NEWEST_FIRST:
        seq.order = "newest"
    return seq


#: ``COMPLETION_WEIGHTS`` as ``random.choices`` takes them once accumulated (what it makes
#: of ``weights`` on every call: the same draw)
_COMPLETIONS = list(COMPLETION_WEIGHTS)
_CUMULATIVE = list(itertools.accumulate(COMPLETION_WEIGHTS.values()))


def _completion(rng: random.Random) -> str:
    return rng.choices(_COMPLETIONS, cum_weights=_CUMULATIVE)[0]


def _prompt(rng: random.Random, most: int) -> int:
    """Short prompts mostly (a step or two of prefill), sometimes up to ``most``."""
    return rng.randint(1, min(3, most)) if rng.random() < 0.6 else rng.randint(1, most)


def _last_batch(views) -> list[str]:
    for view in reversed(views):
        if view.kind == "step":
            return view.batch
    return []
