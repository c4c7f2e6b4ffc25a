"""Staging protocols: what a sequence of engine steps must do, declared once.

A ``Protocol`` declares, in the style of a staging schema (``spec/schema.py``):

- the **state** that persists across steps (``build``): usually an instance of the
  target's own component (``component``, e.g. ``GPUModelRunner``, built with the device
  the machinery gives), holding the pinned buffers and their device mirrors, the events,
  the request dicts;
- the **device work** (``device_work``): methods of the state, by dotted path
  (``_model_forward``, ``align_ctx.run_fused_precopy``), that stand for kernels: a call
  is queued on the current stream, and what it reads is recorded when the device runs it;
- the **operations of one step** (``operations``), in the engine's order (state update,
  input preparation, the device work, the copies back), each a function of a
  ``StepContext`` (``execute_model``, ``sample_tokens``, a dummy step); ``when`` says on
  which steps it runs;
- what the host holds after a step that must not depend on when copies completed
  (``observe``: plain data, e.g. each request's computed tokens);
- what the step generator may draw (``space``: capacity, steps, drafts, dummy steps,
  preemption, parameters such as a block size);
- its own invariants (``checks``), besides those stated once below for every protocol.

A one-step protocol of a staging schema (``staging``) is a single staging call: its step
stages a scenario of that schema and the schema's invariants judge it
(``spec/protocols/single_call.py``).

Nothing here imports the machinery, torch or hypothesis: ``build`` and the operations get
a ``StepContext`` from ``oracles/protocol`` as an argument. The invariants every protocol
must hold are ``PROTOCOL_INVARIANTS`` (prose + check over what a run was seen to do, a
``Trace``); the race itself is ``no_copy_hazard`` of ``spec/invariants.py``, stated once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol as TypingProtocol

from stagecheck.spec.steps import StepSequence, StepView

__all__ = ["CHECK_ID", "Operation", "Protocol", "ProtocolCheck", "StepContext", "StepSpace", "Trace",
           "always"]


def always(step: StepView) -> bool:
    return True


class StepContext(TypingProtocol):
    """What ``build``, the operations and ``observe`` receive (``oracles/protocol``)."""

    state: Any                   # what ``build`` returned
    step: StepView | None        # the step being run (None in ``build``)
    sequence: StepSequence
    device: Any                  # the device to build the component with

    def component(self, *args, **kwargs) -> Any:
        """An instance of the target's component class (the target's own file)."""

    def function(self, name: str) -> Callable | None:
        """A module-level function of the target's file, or None."""

    def tensor(self, values: list, dtype: str) -> Any:
        """A device tensor holding ``values`` (``dtype``: "int32", "int64", "float32")."""

    def stage(self, scenario: dict) -> Any:
        """Run the target as one staging call on ``scenario`` (one-step protocols)."""


@dataclass(frozen=True)
class Operation:
    """One operation of a step: ``run(ctx)`` does it and may return plain data that the
    host holds afterwards (compared like ``observe``)."""

    name: str
    run: Callable[[StepContext], Any]
    when: Callable[[StepView], bool] = always
    doc: str = ""


@dataclass(frozen=True)
class StepSpace:
    """What the step generator draws for a protocol (``oracles/protocol/generate.py``)."""

    capacity: tuple[int, int] = (1, 4)       # requests in the batch, at most
    steps: tuple[int, int] = (1, 8)          # steps per sequence
    max_prompt: int = 12                     # prompt tokens of a joining request
    max_drafts: int = 0                      # draft tokens per decode (0: no spec decode)
    dummy: bool = False                      # dummy steps (a forward over a made-up batch)
    preemption: bool = True                  # requests preempted and resumed
    temperatures: tuple[float, ...] = (0.0, 0.5, 0.7, 1.0)
    params: dict[str, tuple] = field(default_factory=dict)   # name -> values to draw from


#: what a ``ProtocolCheck.id`` may be (``check_protocol`` refuses any other): its findings'
#: ids and their replay files' names start with it
CHECK_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}")


@dataclass(frozen=True)
class ProtocolCheck:
    """An invariant of one protocol: ``check(sequence, trace)`` returns messages, each a
    violation (``trace`` is the run with every operation completing when issued)."""

    id: str
    statement: str
    check: Callable[[StepSequence, "Trace"], list[str]]


@dataclass(frozen=True)
class Protocol:
    """Everything stagecheck needs to drive one engine component step after step."""

    name: str
    summary: str
    functions: tuple[str, ...]           # target names (class, method, function) it drives
    build: Callable[[StepContext], Any]
    operations: tuple[Operation, ...]
    component: str = ""                  # the class of the target's file the state is made of
    device_work: tuple[str, ...] = ()    # dotted paths, from the state, of device work
    observe: Callable[[StepContext], Any] | None = None
    space: StepSpace = StepSpace()
    checks: tuple[ProtocolCheck, ...] = ()
    staging: str | None = None           # a one-step protocol of this staging schema
    row_order: str = ""                  # dotted path of the batch's row order (req ids)
    doc: str = ""

    def operation(self, name: str) -> Operation:
        for op in self.operations:
            if op.name == name:
                return op
        raise KeyError(name)


@dataclass
class Trace:
    """What one run of a step sequence was seen to do, as plain data.

    ``ops``: per operation run, ``{"step", "op", "completion", "outcome" (None: it
    returned; else what ended it), "in_flight" (copies issued and not yet run after it),
    "hazards" (dicts of ``spec.observation.Hazard``), "result"}``; ``reads``: per device
    work, in launch order, ``{"step", "op", "work", "values": {argument: values}}``;
    ``meant``: the device work that read other values than the host meant when it
    launched it (``{"step", "op", "work", "arg", "slots", "meant", "read", "in_place"}``;
    ``in_place``: pinned memory the work read where it lies);
    ``states``: ``observe`` after each step; ``staging``: for a one-step protocol, the
    staging call's judgement; ``stopped``: the run ended early (``hung``, or how its
    process ended); ``downloads``: the device-to-host copies into pinned memory it issued;
    ``stale``: host reads of pinned memory before a download into it landed whose values the
    download then changed (``{"step", "op", "region", "slots", "pending", "read",
    "written"}``; the CPU model only); ``landed``: the downloads into pinned memory in
    the order they were issued, with the values each wrote when it landed (``{"step",
    "op", "download", "values"}``; the CPU model only); ``left_running``: the names of
    the processes the sequence's code left running (ended by stagecheck); ``forced``: where
    the host was each time the CUDA backend's watchdog opened the device's gates (a wait the
    model did not see: copies then completed earlier than the latest point; a few places),
    ``forced_count``: how many times it did.
    """

    ops: list[dict] = field(default_factory=list)
    reads: list[dict] = field(default_factory=list)
    meant: list[dict] = field(default_factory=list)
    states: list[Any] = field(default_factory=list)
    staging: list[dict] = field(default_factory=list)
    stopped: str | None = None
    downloads: int = 0                   # copies into pinned host memory it issued
    stale: list[dict] = field(default_factory=list)
    landed: list[dict] = field(default_factory=list)
    left_running: list[str] = field(default_factory=list)
    forced: list[str] = field(default_factory=list)
    forced_count: int = 0

    def to_wire(self) -> tuple:
        return (self.ops, self.reads, self.meant, self.states, self.staging, self.stopped,
                self.downloads, self.stale, self.landed, self.left_running, self.forced,
                self.forced_count)

    @classmethod
    def from_wire(cls, wire) -> "Trace":
        return wire if isinstance(wire, Trace) else cls(*wire)

    @property
    def hazards(self) -> list[dict]:
        return [dict(h, step=op["step"], op=op["op"]) for op in self.ops for h in op["hazards"]]

    @property
    def race_free(self) -> bool:
        """No hazard, every device work read what the host meant, no download into pinned
        memory (whose unsynchronized host reads no interception sees): then every
        completion schedule gives this run's values, and its ``meant`` run is this one."""
        return (not self.downloads and not self.meant and self.stopped is None
                and not any(op["hazards"] or op["outcome"] for op in self.ops))

    def failed(self) -> dict | None:
        """The first operation that did not return, if any."""
        for op in self.ops:
            if op["outcome"] is not None:
                return op
        return None
