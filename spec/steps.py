"""Step sequences as plain data: what an engine's scheduler decides, step after step.

A ``StepSequence`` is what a protocol's steps are driven with: a capacity (the most
requests in the batch), protocol parameters (e.g. a block size), and one ``Step`` per
engine step. A step holds the scheduler's *decisions* only: which running requests
finish or are preempted, which preempted ones resume, which new ones join (prompt length,
a prefix already computed, a sampling temperature), how many prompt tokens each
prefilling request gets (its chunk), how many draft tokens each decoding request gets and
how many of them the device accepts, whether the step is a dummy step (a forward over a
made-up batch of ``dummy_tokens`` tokens, as an idle data-parallel rank runs), and the
completion in force during each of its operations (``lazy``, ``eager``, ``drain``:
``oracles/device/cpu.py``). The sequence also says which of the operations ready on
different streams the device runs first (``order``): the one issued first (``issue``), or
the one issued last (``newest``), so that copies and device work that no stream order or
event orders run in both orders.

``unfold`` replays the decisions with a small scheduler model and gives what each step
looks like to the engine (``StepView``): the batch, each request's computed tokens at the
start of the step, the tokens scheduled, the drafts and accepted tokens. A decision that
does not apply any more (a request that never joined, a batch over capacity) is dropped,
so every edit of a sequence (the shrinker's) is again a valid sequence.

The model of the scheduler: a joined request prefills its prompt in chunks, then decodes
one token plus its drafts per step; the scheduler counts scheduled tokens as computed
(every draft assumed accepted, as vLLM's scheduler does under async scheduling; the
engine corrects from what the device accepted); a preempted request leaves the batch and
forgets its progress, and resumes by prefilling again from nothing.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["COMPLETION_CHOICES", "ORDER_CHOICES", "Step", "StepSequence", "StepView",
           "Unfolding", "unfold"]

#: the completions a step's operations may run under (``oracles/device/cpu.py``)
COMPLETION_CHOICES = ("lazy", "eager", "drain")
#: which ready operation of several streams the device runs first (``StepSequence.order``)
ORDER_CHOICES = ("issue", "newest")


@dataclass
class Step:
    """The scheduler's decisions for one engine step (see the module doc)."""

    kind: str = "step"                                   # "step" | "dummy"
    finished: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    joins: list[dict] = field(default_factory=list)      # {"id", "prompt", "prefix", "temperature"}
    chunk: dict[str, int] = field(default_factory=dict)  # prefill tokens this step (absent: all)
    drafts: dict[str, int] = field(default_factory=dict)   # draft tokens of a decode
    accepted: dict[str, int] = field(default_factory=dict)  # 1..drafts+1 (absent: 1)
    dummy_tokens: int = 0
    completion: list[str] = field(default_factory=list)  # per operation (absent: lazy)

    def completion_of(self, k: int) -> str:
        return self.completion[k] if k < len(self.completion) else "lazy"


class Params(dict):
    """A sequence's drawn parameters (``ctx.sequence.params``): a name the space does not
    declare is a ``KeyError`` that lists the names it does."""

    def __missing__(self, key):
        names = ", ".join(repr(k) for k in self) or "none (StepSpace(params=...) declares them)"
        raise KeyError(f"{key!r} is not a parameter of the step space; its parameters: {names}")


@dataclass
class StepSequence:
    """A protocol's steps, as plain data (prints, saves as JSON, shrinks, replays)."""

    protocol: str
    capacity: int
    steps: list[Step] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)   # a one-step protocol's own input
                                                          # (a staging scenario)
    order: str = "issue"    # of ready operations on several streams, which runs first

    def __post_init__(self) -> None:
        if type(self.params) is not Params:
            self.params = Params(self.params)

    def to_dict(self) -> dict:
        """Plain JSON data (a copy: nothing of it is shared with this sequence); ``order``
        only where it is not ``issue`` (a sequence saved before it existed reads the same)."""
        data = {"protocol": self.protocol, "capacity": self.capacity,
                "steps": [vars(step) for step in self.steps], "params": self.params,
                "data": self.data}
        if self.order != "issue":
            data["order"] = self.order
        return json.loads(json.dumps(data))

    @classmethod
    def from_dict(cls, data: dict) -> "StepSequence":
        """The sequence ``data`` (``to_dict``) holds; ``ValueError``/``TypeError`` naming the
        key, its value and the range unless every value stays within what the step
        generator draws (``BOUNDS``): an edited replay file is refused, never run."""
        if not isinstance(data, dict):
            raise TypeError(f"a step sequence is a JSON object, got {type(data).__name__}")
        _check_sequence(data)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown step-sequence keys {sorted(unknown)}; expected "
                             f"{sorted(known)}")
        steps = []
        step_keys = {f.name for f in dataclasses.fields(Step)}
        for k, step in enumerate(data.get("steps", [])):
            if not isinstance(step, dict) or set(step) - step_keys:
                raise ValueError(f"step {k} is not a step: {step!r:.200}")
            steps.append(Step(**step))
        order = data.get("order", "issue")
        if order not in ORDER_CHOICES:
            raise ValueError(f"order {order!r} is not one of {', '.join(ORDER_CHOICES)}")
        return cls(protocol=data["protocol"], capacity=data["capacity"], steps=steps,
                   params=dict(data.get("params", {})), data=dict(data.get("data", {})),
                   order=order)

    @property
    def size(self) -> tuple:
        """How big the sequence is to a reader: steps, requests, then the sum of its
        numbers (tokens, drafts, the capacity), the completions that are not lazy, its
        text."""
        ids = {j["id"] for s in self.steps for j in s.joins}
        numbers = self.capacity + sum(
            sum(j.get("prompt", 0) + j.get("prefix", 0) for j in s.joins)
            + sum(s.chunk.values()) + sum(s.drafts.values()) + sum(s.accepted.values())
            + s.dummy_tokens for s in self.steps)
        eager = sum(c != "lazy" for s in self.steps for c in s.completion) + \
            (self.order != "issue")
        return (len(self.steps), len(ids), numbers, eager, len(json.dumps(self.to_dict())))


#: the ranges of a sequence's numbers: what the step generator draws within any step space
#: (``StepSpace``: capacity and steps 1..1024, prompts 1..4096, drafts 0..4096; a dummy step
#: at most twice the capacity's tokens), and request ids as it names them (short text)
BOUNDS = {"capacity": (1, 1024), "steps": (1, 1024), "prompt": (1, 4096),
          "prefix": (0, 4095), "drafts": (0, 4096), "chunk": (1, 4096), "accepted": (1, 4097),
          "dummy_tokens": (0, 2048), "completion": (0, 1024), "id": (1, 64)}
_JOIN_KEYS = ("id", "prompt", "prefix", "temperature")


def _whole(where: str, value: Any, bound: str, high: int | None = None) -> int:
    low, top = BOUNDS[bound]
    top = top if high is None else high
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= top:
        raise ValueError(f"{where} = {value!r:.80} is not a whole number in [{low}, {top}]")
    return value


def _request_id(where: str, value: Any) -> str:
    low, high = BOUNDS["id"]
    if not isinstance(value, str) or not low <= len(value) <= high or \
            not value.isprintable():
        raise ValueError(f"{where} = {value!r:.80} is not a request id (printable text of "
                         f"{low} to {high} characters, e.g. 'req-0')")
    return value


def _check_step(k: int, step: dict, joined: set) -> None:
    where = f"steps[{k}]"
    if step.get("kind", "step") not in ("step", "dummy"):
        raise ValueError(f"{where}.kind = {step['kind']!r:.80} is not 'step' or 'dummy'")
    for name in ("finished", "preempted", "resumed", "joins", "completion"):
        if not isinstance(step.get(name, []), list):
            raise TypeError(f"{where}.{name} = {step[name]!r:.80} is not a list")
    for name in ("chunk", "drafts", "accepted"):
        if not isinstance(step.get(name, {}), dict):
            raise TypeError(f"{where}.{name} = {step[name]!r:.80} is not an object of "
                            "request id -> count")
        for rid, value in step.get(name, {}).items():
            _request_id(f"{where}.{name} key", rid)
            _whole(f"{where}.{name}[{rid!r}]", value, name)
    for name in ("finished", "preempted", "resumed"):
        for n, rid in enumerate(step.get(name, [])):
            _request_id(f"{where}.{name}[{n}]", rid)
    for n, join in enumerate(step.get("joins", [])):
        at = f"{where}.joins[{n}]"
        if not isinstance(join, dict) or set(join) - set(_JOIN_KEYS) or "id" not in join:
            raise ValueError(f"{at} = {join!r:.80} is not a join (an object with an 'id' and "
                             f"at most the keys {', '.join(_JOIN_KEYS)})")
        rid = _request_id(f"{at}.id", join["id"])
        if rid in joined:
            raise ValueError(f"{at}.id = {rid!r} joined before (each request joins once)")
        joined.add(rid)
        _whole(f"{at}.prompt", join.get("prompt", 1), "prompt")
        # below the largest prompt: one at or past its own prompt reads as prompt - 1
        # (``Unfolding.add``), as the shrinker leaves it when it shortens the prompt
        _whole(f"{at}.prefix", join.get("prefix", 0), "prefix")
        temperature = join.get("temperature", 1.0)
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or \
                not 0 <= temperature < float("inf"):
            raise ValueError(f"{at}.temperature = {temperature!r:.80} is not a number >= 0")
    _whole(f"{where}.dummy_tokens", step.get("dummy_tokens", 0), "dummy_tokens")
    completion = step.get("completion", [])
    _whole(f"{where}.completion's length", len(completion), "completion")
    for n, c in enumerate(completion):
        if c not in COMPLETION_CHOICES:
            raise ValueError(f"{where}.completion[{n}] = {c!r:.80} is not one of "
                             f"{', '.join(COMPLETION_CHOICES)}")


def _check_sequence(data: dict) -> None:
    """``ValueError``/``TypeError`` naming the first key of ``data`` out of ``BOUNDS``."""
    for key in ("protocol", "capacity", "steps"):
        if key not in data:
            raise ValueError(f"the key {key!r} is missing")
    if not isinstance(data["protocol"], str) or not data["protocol"]:
        raise ValueError(f"protocol = {data['protocol']!r:.80} is not a protocol name")
    _whole("capacity", data["capacity"], "capacity")
    steps = data["steps"]
    if not isinstance(steps, list):
        raise TypeError(f"steps = {steps!r:.80} is not a list of steps")
    _whole("the number of steps", len(steps), "steps")
    for name in ("params", "data"):
        if not isinstance(data.get(name, {}), dict):
            raise TypeError(f"{name} = {data[name]!r:.80} is not an object")
    for name, value in data.get("params", {}).items():
        if not isinstance(value, (bool, int, float, str, type(None))) or value != value:
            raise ValueError(f"params[{name!r}] = {value!r:.80} is not a plain value")
    step_keys = {f.name for f in dataclasses.fields(Step)}
    joined: set[str] = set()
    for k, step in enumerate(steps):
        if not isinstance(step, dict) or set(step) - step_keys:
            raise ValueError(f"step {k} is not a step: {step!r:.200}")
        _check_step(k, step, joined)


@dataclass
class StepView:
    """One step as the engine sees it (``unfold``)."""

    index: int
    kind: str
    finished: list[str]          # left the batch: finished
    preempted: list[str]         # left the batch: preempted (progress forgotten)
    joins: list[dict]            # new requests: id, computed (prefix), prompt, temperature
    resumed: list[dict]          # preempted requests back: id, computed (0), prompt, temperature
    cached: list[tuple[str, int]]    # requests still in the batch: (id, computed at the start)
    scheduled: dict[str, int]    # every request of the batch -> tokens this step
    drafts: dict[str, int]       # requests with drafts -> how many
    accepted: dict[str, int]     # every request of the batch -> tokens the device accepts
    dummy_tokens: int
    completion: list[str]

    def completion_of(self, k: int) -> str:
        """The completion in force during operation ``k`` of this step."""
        return self.completion[k] if k < len(self.completion) else "lazy"

    @property
    def batch(self) -> list[str]:
        """The requests scheduled this step: continuing ones, then new and resumed."""
        return [r for r, _ in self.cached] + [j["id"] for j in self.joins + self.resumed]

    @property
    def total_tokens(self) -> int:
        return sum(self.scheduled.values())


def unfold(seq: StepSequence) -> list[StepView]:
    """Replay the decisions of ``seq``; a view per step (see the module doc)."""
    unfolding = Unfolding(seq.capacity)
    for step in seq.steps:
        unfolding.add(step)
    return unfolding.views


class Unfolding:
    """The scheduler model of ``unfold``, one step at a time: ``add`` replays a step's
    decisions and gives its view; between steps, what the scheduler holds (the step
    generator draws the next step from it, without replaying the steps before)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.prompt: dict[str, int] = {}
        self.computed: dict[str, int] = {}
        self.temperature: dict[str, float] = {}
        self.running: list[str] = []       # the last step's batch, in scheduling order
        self.preempted: list[str] = []     # preempted and not resumed, oldest first
        self.seen: set[str] = set()
        self.views: list[StepView] = []

    def prefilling(self) -> set[str]:
        """Requests of the last batch that have not finished their prompt."""
        return {r for r in self.running if self.computed[r] < self.prompt[r]}

    def add(self, step: Step) -> StepView:
        index = len(self.views)
        if step.kind == "dummy":
            tokens = max(1, int(step.dummy_tokens or 1))
            view = StepView(index, "dummy", [], [], [], [], [], {}, {}, {}, tokens,
                            list(step.completion))
            self.views.append(view)
            return view
        prompt, computed, temperature = self.prompt, self.computed, self.temperature
        running, preempted, seen = self.running, self.preempted, self.seen
        # most steps finish, preempt and resume nobody: their lists are empty
        finished = [r for r in _unique(step.finished) if r in running] \
            if step.finished else []
        leaving = [r for r in _unique(step.preempted) if r in running and r not in finished] \
            if step.preempted else []
        if finished or leaving:
            gone = set(finished) | set(leaving)
            cached = [r for r in running if r not in gone]
        else:
            cached = list(running)
        resumed = [r for r in _unique(step.resumed) if r in preempted] \
            if step.resumed and preempted else []
        room = max(self.capacity - len(cached), 0)
        resumed = resumed[:room]
        joins = []
        for j in step.joins:
            rid = j.get("id")
            if len(resumed) + len(joins) >= room or not isinstance(rid, str) or rid in seen:
                continue
            size = max(1, int(j.get("prompt", 1)))
            prefix = min(max(0, int(j.get("prefix", 0))), size - 1)
            joins.append({"id": rid, "computed": prefix, "prompt": size,
                          "temperature": float(j.get("temperature", 1.0))})
        for r in leaving:
            computed[r] = 0
        for j in joins:
            seen.add(j["id"])
            prompt[j["id"]], computed[j["id"]] = j["prompt"], j["computed"]
            temperature[j["id"]] = j["temperature"]
        batch = cached + resumed + [j["id"] for j in joins]
        scheduled, drafts, accepted = {}, {}, {}
        for r in batch:
            left = prompt[r] - computed[r]
            if left > 0:
                scheduled[r] = min(max(1, int(step.chunk.get(r, left))), left)
                accepted[r] = 1
            else:
                k = max(0, int(step.drafts.get(r, 0)))
                if k:
                    drafts[r] = k
                scheduled[r] = 1 + k
                accepted[r] = min(max(1, int(step.accepted.get(r, 1))), k + 1)
        view = StepView(
            index, "step", finished, leaving, joins,
            [{"id": r, "computed": computed[r], "prompt": prompt[r],
              "temperature": temperature[r]} for r in resumed],
            [(r, computed[r]) for r in cached], scheduled, drafts, accepted, 0,
            list(step.completion))
        self.views.append(view)
        for r in batch:
            computed[r] += scheduled[r]
        self.running = batch
        self.preempted = [r for r in preempted if r not in resumed] + leaving
        return view


def _unique(ids) -> list[str]:
    return list(dict.fromkeys(r for r in ids if isinstance(r, str)))
