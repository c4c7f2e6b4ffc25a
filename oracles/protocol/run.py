"""One step sequence through one target, on the device model: what it was seen to do.

``run_sequence`` builds the protocol's state on a fresh device model (the CPU model, or
CUDA), runs every operation of every step in order under the completion the sequence says
(or every operation completing when issued: ``meant``), and returns a
``spec.protocol.Trace``: per operation its outcome, the copies still in flight after it
and the hazards it raised; what each device work read; what the host held after each
step; the device work that read other values than the host meant. Each operation runs
under the per-call time limit; a hang is its outcome and ends the run.

``run_batch`` is the worker's entry point (``WorkerPool.call``): both runs of every
sequence of a batch for each target, as plain data.
"""

from __future__ import annotations

import dataclasses
import gc
import threading
from typing import Any

from stagecheck.oracles import guard, messages
from stagecheck.oracles.device import device_model
from stagecheck.oracles.device.torchload import import_torch
from stagecheck.oracles.errors import SchemaError
from stagecheck.oracles.gcpause import fewer_collections
from stagecheck.oracles.observe.call import CallTimedOut, fired_count, raise_if_fired, time_limit
from stagecheck.oracles.protocol.component import load_code
from stagecheck.oracles.protocol.context import (DeviceResultUsed, RunContext, prepare_state,
                                                 raised_by_work, release_state)
from stagecheck.oracles.protocol.load import load_protocol, refuse_patches
from stagecheck.oracles.protocol.own_code import (ProtocolExited, ProtocolStartedProcess,
                                                  built_class, call_refused,
                                                  component_lacks, lacking_guess,
                                                  own_exits_refused, protocol_mistake,
                                                  refuse_own_hang)
from stagecheck.oracles.protocol.problems import when_problem
from stagecheck.oracles.protocol.results import plain, plain_result, refuse_device_values
from stagecheck.oracles.schemas import load_schema
from stagecheck.oracles.text import exception_text
from stagecheck.oracles.worker.later import still_running
from stagecheck.oracles.worker.protocol import RESTART, end_left_running, next_position
from stagecheck.spec.protocol import Protocol, Trace
from stagecheck.spec.schema import StandInUnsupported
from stagecheck.spec.steps import StepSequence, unfold

__all__ = ["RUNS", "run_batch", "run_sequence"]

#: the two runs of every sequence: every operation completing when issued (what the host
#: meant), and the sequence's own completion schedule
RUNS = ("meant", "seen")
#: the name of the record of what ran when the run ended (everything still queued)
END = "(end of the run)"


def run_sequence(code, protocol: Protocol, seq: StepSequence, run: str,
                 options: dict, views: list | None = None) -> Trace:
    """Run ``seq`` on ``code`` (``component.Code``); ``run`` is ``meant`` or ``seen``
    (``views``: ``unfold(seq)``, where the caller has it)."""
    meant = run == "meant"
    model = device_model(options["device"], "eager" if meant else "lazy",
                         options.get("busy_cycles", 0))
    model.order = seq.order
    ctx = RunContext(model, code, protocol, seq, options)
    made: list = []
    try:
        with own_exits_refused(protocol, code):
            trace = _run(model, ctx, protocol, seq, meant, options, views, made, code)
    except ProtocolExited as exc:      # the protocol's own build (run, observe: said there)
        said = messages.PROTOCOL_CODE_STARTED if isinstance(exc, ProtocolStartedProcess) \
            else messages.PROTOCOL_CODE_EXITED
        raise SchemaError.of(said, protocol.name, error=str(exc), where=exc.where) from None
    finally:        # the run's objects freed now, not by the garbage collector
        release_state(made)
        model.release()
    gates = getattr(model, "gates", None)     # the CUDA backend's (final once released)
    if gates is not None and gates.forced:
        trace.forced, trace.forced_count = list(gates.stalls), gates.forced
    return trace


class _Limited:
    """One call of code under test: a new position (the worker's parent sees it start)
    under its time limit. Leaving the block normally after the limit fired raises
    ``CallTimedOut``: the code caught the interruption and returned, a hang all the same."""

    __slots__ = ("_timer", "fired")

    def __init__(self, limit: float | None) -> None:
        self._timer = time_limit(limit)

    def __enter__(self) -> "_Limited":
        next_position()
        self.fired = fired_count()
        self._timer.__enter__()
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if self._timer.__exit__(kind, exc, tb):
            return True
        if kind is None:
            raise_if_fired(self.fired)
        return False

    def swallowed(self) -> bool:
        """The limit fired during the block (surfacing as another exception, maybe)."""
        return fired_count() != self.fired


def _run(model, ctx, protocol: Protocol, seq: StepSequence, meant: bool, options: dict,
         views: list | None, made: list, code) -> Trace:
    trace = Trace()
    limit = _call_limit(protocol, options)
    with model.activate():
        try:
            try:
                with _Limited(limit):
                    ctx.state = protocol.build(ctx)
                with model.passthrough():
                    made += prepare_state(model, ctx.state, protocol)
                # every pinned tensor the state holds is named now: the first step's
                # look for unnamed ones (``RunContext.step``) would find none
                ctx.named_now()
            except CallTimedOut as exc:
                refuse_own_hang(protocol, protocol.build, exc, code, "build", limit)
                trace.stopped = "hung while building the protocol's state"
                return _finish(model, trace, ctx)
            except StandInUnsupported as exc:
                raise _limit(protocol, exc) from None
            except (SchemaError, MemoryError, ProtocolExited):
                raise
            except BaseException as exc:    # an exit or an exception class of its own too
                where = call_refused(protocol.build, exc)
                if where is not None:         # the component never ran: not its finding
                    raise SchemaError.of(messages.PROTOCOL_BUILD_MISMATCH, protocol.name,
                                         component=built_class(code, protocol),
                                         where=where,
                                         error=exception_text(exc, type(exc))) from None
                mistake = protocol_mistake(protocol.build, exc, code)
                if mistake is not None:       # the protocol's own build: never a finding
                    raise SchemaError.of(messages.PROTOCOL_BUILD_RAISED, protocol.name,
                                         where=mistake,
                                         error=exception_text(exc, type(exc))) from None
                trace.ops.append(_record(-1, "build", "", "raised " +
                                         exception_text(exc, type(exc)), model, 0, None))
                return _finish(model, trace, ctx)
            for view in views if views is not None else unfold(seq):
                ctx.step = view
                for k, op in enumerate(protocol.operations):
                    try:
                        active = op.when(view)
                    except BaseException as exc:    # the protocol's own function: exit 2
                        active = exc
                    if active is False:
                        continue
                    if active is not True:
                        raise SchemaError.of(messages.PROTOCOL_INVALID, protocol.name,
                                             count=1, problems=when_problem(
                                                 k, op, active, view.index))
                    completion = "eager" if meant else view.completion_of(k)
                    model.where = f"step {view.index}, {op.name}"
                    model.location = (view.index, op.name)
                    before = len(model.hazards)
                    outcome, result, unlanded = None, None, ()
                    call = _Limited(limit)
                    try:
                        with call:
                            # queued device work the completion runs now hangs within
                            # the limit of the operation it runs before
                            model.boundary(completion)
                            if model.pinned_downloads and not meant:
                                unlanded = model.unlanded()
                            result = op.run(ctx)
                    except CallTimedOut as exc:
                        refuse_own_hang(protocol, op.run, exc, code,
                                         f"code for operation {op.name!r}", limit)
                        outcome = "hung"
                    except StandInUnsupported as exc:
                        raise _limit(protocol, exc) from None
                    except (SchemaError, MemoryError):
                        raise
                    except BaseException as exc:    # the code under test failed: observed
                        if call.swallowed():  # its time limit, surfacing as another
                            refuse_own_hang(protocol, op.run, exc, code,    # exception
                                             f"code for operation {op.name!r}", limit)
                            outcome = "hung"
                        elif (mistake := protocol_mistake(op.run, exc, code)) is not None:
                            # the protocol's own code: never a finding
                            if (cls := component_lacks(exc, code)) is not None:
                                raise SchemaError.of(
                                    messages.PROTOCOL_COMPONENT_LACKS, protocol.name,
                                    operation=op.name, where=mistake, kind=cls, attr=exc.name,
                                    target=code.ref.spec, guess=lacking_guess(exc)) from None
                            raise SchemaError.of(messages.PROTOCOL_CODE_RAISED, protocol.name,
                                                 operation=op.name, where=mistake,
                                                 error=exception_text(exc, type(exc))) from None
                        else:
                            outcome = "raised " + exception_text(exc, type(exc)) + \
                                raised_by_work(exc)
                    model.sweep()        # host writes of this operation into pending copies
                    if outcome is None and result is not None:
                        refuse_device_values(model, protocol, result,
                                             f"operation {op.name!r}", view.index)
                        with model.passthrough():
                            result = plain_result(protocol, result,
                                                  f"operation {op.name!r}", view.index)
                    trace.ops.append(_record(view.index, op.name, completion, outcome,
                                             model, before, result, unlanded))
                    if outcome is not None:
                        return _finish(model, trace, ctx)
                if protocol.observe is not None:
                    before_observe = len(model.hazards)
                    with model.passthrough():
                        try:
                            with _Limited(limit):
                                observed = protocol.observe(ctx)
                        except CallTimedOut as exc:
                            refuse_own_hang(protocol, protocol.observe, exc, code,
                                             f"observe after step {view.index}", limit)
                            trace.ops.append(_record(      # the code under test hung
                                view.index, "observe", "", "hung", model,
                                len(model.hazards), None))
                            return _finish(model, trace, ctx)
                        except StandInUnsupported as exc:
                            raise _limit(protocol, exc) from None
                        except (SchemaError, MemoryError):
                            raise
                        except BaseException as exc:    # an exit or interrupt too
                            mistake = protocol_mistake(protocol.observe, exc, code)
                            if mistake is not None:    # the protocol's own code: exit 2
                                raise SchemaError.of(
                                    messages.PROTOCOL_OBSERVE_RAISED, protocol.name,
                                    where=mistake, step=view.index,
                                    error=exception_text(exc, type(exc))) from None
                            trace.ops.append(_record(      # the code under test raised
                                view.index, "observe", "", "raised " +
                                exception_text(exc, type(exc)), model, len(model.hazards),
                                None))
                            return _finish(model, trace, ctx)
                        _refuse_observe_writes(model, protocol, before_observe, view.index)
                        refuse_device_values(model, protocol, observed, "observe",
                                             view.index)
                        trace.states.append(plain_result(protocol, observed, "observe",
                                                          view.index))
                else:
                    trace.states.append(None)
        finally:
            model.where, model.location = "the end of the run", ("end", "")
        return _finish(model, trace, ctx)


def _refuse_observe_writes(model, protocol: Protocol, before: int, step: int) -> None:
    """``observe`` reads what the host holds; a write it made into pinned memory that a
    copy still reads or fills (seen by a sweep right after it) is the protocol's mistake
    (exit 2), never the code under test's race. On the CPU model only, where nothing
    lands in host memory while observe runs (on CUDA a download may, and the next
    operation's sweep sees such a write, as before)."""
    if model.kind != "cpu-model":
        return
    model.sweep()
    if len(model.hazards) > before:
        raise SchemaError.of(messages.PROTOCOL_OBSERVE_WROTE, protocol.name, step=step,
                             region=model.hazards[before].region)


def _finish(model, trace: Trace, ctx) -> Trace:
    """Everything still queued runs (the run's end), then what device work read."""
    before = len(model.hazards)
    try:
        with _Limited(_call_limit(ctx.protocol, ctx.options)):
            model.finish()
    except CallTimedOut:                  # queued device work the end of the run ran
        if trace.failed() is None and trace.stopped is None:
            trace.stopped = "hung at the end of the run (queued device work)"
    except StandInUnsupported as exc:     # a limit of the model, met by queued work
        raise _limit(ctx.protocol, exc) from None
    except BaseException as exc:      # device work the end of the run ran raised
        if trace.failed() is None and trace.stopped is None:
            trace.stopped = "raised at the end of the run: " + exception_text(
                exc, type(exc)) + raised_by_work(exc)
    if len(model.hazards) > before:   # races seen when the last queued work ran
        last = trace.ops[-1]["step"] if trace.ops else 0
        trace.ops.append(_record(last, END, "", None, model, before, None))
    _rehome(trace)
    trace.reads = [{"step": where[0] if where else None, "op": where[1] if where else "",
                    "work": work, "values": plain(values)}
                   for where, work, values in model.reads_log]
    trace.meant = [{"step": m["where"][0] if m["where"] else None,
                    "op": m["where"][1] if m["where"] else "", "work": m["work"],
                    "arg": m["arg"], "region": m["region"], "slots": m["slots"],
                    "row": m.get("row", 0), "meant": plain(m["meant"]),
                    "read": plain(m["read"]), "in_place": m.get("in_place", False)}
                   for m in model.mismatches]
    trace.landed = [{"step": op.location[0] if op.location else None,
                     "op": op.location[1] if op.location else "", "download": op.describe(),
                     "values": plain(values)}
                    for op, values in sorted(model.landed, key=lambda e: e[0].index)]
    trace.staging = ctx.staged
    trace.downloads = model.pinned_downloads
    trace.stale = [{"step": s["where"][0] if s["where"] else None,
                    "op": s["where"][1] if s["where"] else "", "region": s["region"],
                    "slots": s["slots"], "pending": s["pending"], "read": plain(s["read"]),
                    "written": plain(s["written"]), "row": s.get("row", 0)}
                   for s in model.stale_reads]
    return trace


def _rehome(trace: Trace) -> None:
    """A race seen when queued device work ran later (``Hazard.at``) belongs to the
    operation that issued the access that raced: moved to its record (the first of that
    step and operation), and an end-of-run record left without races dropped."""
    where = {}
    for record in trace.ops:
        where.setdefault((record["step"], record["op"]), record)
    moved = False
    for record in trace.ops:
        keep = []
        for h in record["hazards"]:
            home = where.get(tuple(h["at"])) if h.get("at") else None
            if home is not None and home is not record:
                home["hazards"].append(h)
                moved = True
            else:
                keep.append(h)
        record["hazards"] = keep
    if moved and trace.ops and trace.ops[-1]["op"] == END and not trace.ops[-1]["hazards"] \
            and trace.ops[-1]["outcome"] is None:
        trace.ops.pop()


def _call_limit(protocol: Protocol, options: dict) -> float | None:
    """Seconds each call of a run may take: ``--timeout``; none for a one-call staging
    protocol, whose staging call keeps the limits of a single call's observation."""
    return None if protocol.staging else options["timeout"]


def _record(step: int, name: str, completion: str, outcome: str | None, model, before: int,
            result: Any, unlanded: tuple = ()) -> dict:
    hazards = model.hazards
    with model.passthrough():
        record = {"step": step, "op": name, "completion": completion, "outcome": outcome,
                  "in_flight": model.in_flight(),
                  "hazards": [dataclasses.asdict(h) | {"slots": list(h.slots)}
                              for h in hazards[before:]] if len(hazards) > before else [],
                  "result": result}     # plain already (``plain_result``)
    if unlanded:        # downloads into pinned memory the host had not seen land at its start
        record["unlanded"] = list(unlanded)
    return record


def _limit(protocol: Protocol, exc: StandInUnsupported) -> SchemaError:
    used = isinstance(exc, DeviceResultUsed)
    return SchemaError.of(messages.PROTOCOL_DEVICE_RESULT_USED if used
                          else messages.PROTOCOL_STAND_IN, exc.stand_in,
                          protocol=protocol.name, operation=exc.operation)


# ============================================================================ the worker

_PROTOCOLS: dict[str, Protocol] = {}


#: torch's modules whose functions and classes a protocol file must leave as they are: the
#: device model intercepts them, and a file that replaces one (``Tensor.copy_``) at import
#: would make every copy of the code under test a no-op
_TORCH_MODULES = ("torch", "torch.cuda")


def _protocol(spec: str) -> Protocol:
    """The protocol ``spec`` names, loaded once per worker; a protocol file that changes
    torch's functions or stagecheck's own when it loads is its mistake (exit 2)."""
    if spec not in _PROTOCOLS:
        import_torch()
        before = guard.snapshot(_TORCH_MODULES)
        protocol = load_protocol(spec)
        refuse_patches(before, spec, _TORCH_MODULES)
        _PROTOCOLS[spec] = protocol
    return _PROTOCOLS[spec]


def run_batch(protocol_spec: str, refs: list, batch: list, options: dict) -> list:
    """In a worker: both runs of each ``(index, sequence dict)`` of ``batch`` for every
    target of ``refs``; ``[(index, [(meant wire, seen wire) per target])]``."""
    protocol = _protocol(protocol_spec)
    schema = None
    if protocol.staging:
        schema = load_schema(options.get("schema") or protocol.staging)
    codes = [load_code(ref, protocol.component, schema) for ref in refs]
    with fewer_collections():   # a run makes thousands of short-lived objects
        return _run_batch(protocol, codes, batch, options)


def _run_batch(protocol: Protocol, codes: list, batch: list, options: dict) -> list:
    out = []
    for index, data in batch:
        seq = StepSequence.from_dict(data)
        sides = []
        hung = False
        threads = False
        for code in codes:
            before = set(threading.enumerate())
            # each run its own views of the steps: the protocol's functions get them, and
            # one that changes them (``when`` clearing ``step.scheduled``) changes only its
            # own run, not the next target's
            meant = _warm_up(code, protocol, seq, options)
            if meant is not None and (_hung(meant) or meant.stopped):
                traces = (meant, meant)     # it hangs with nothing held back: once is enough
            elif _hung(seen := run_sequence(code, protocol, seq, "seen", options)) \
                    or seen.race_free or seen.stopped:
                traces = (seen, seen)       # schedule-independent, or it hangs: once is enough
            else:
                traces = (meant or run_sequence(code, protocol, seq, "meant", options), seen)
            hung |= any(_hung(t) for t in traces)
            # processes the sequence's code left running (ended), and threads it started
            # that still run (a thread cannot be ended: the worker is, after this answer)
            left = list(end_left_running()) + [
                f"thread {t.name}" for t in threading.enumerate()
                if t not in before and still_running(t)]
            threads |= any(name.startswith("thread ") for name in left)
            if left:
                traces = (traces[0], dataclasses.replace(traces[1], left_running=left))
            sides.append(tuple(t.to_wire() for t in traces))
        out.append((index, sides))
        _freeze_once()
        if hung:        # the answer ends with a hang: the search stops there, and every
            break       # further sequence would likely wait out its limit again
        if threads:     # the rest (and the next batch) in a fresh worker: no thread's CPU
            out.append(RESTART)     # time charged to its sequences
            break
    return out


def _hung(trace: Trace) -> bool:
    return (trace.failed() or {}).get("outcome") == "hung"


#: the targets (by id of their ``Code``) whose first sequence on CUDA ran as meant first
_WARMED: set[int] = set()


def _warm_up(code, protocol: Protocol, seq: StepSequence, options: dict) -> Trace | None:
    """On CUDA, a target's first sequence in this process runs as meant (every operation
    completing when issued: no gate closed) before its scheduled run, and that run is
    kept as the sequence's run as meant. CUDA loads a kernel's module on the kernel's
    first launch, and the load waits for the device: behind a closed gate it would stall
    until the watchdog opened every gate (``gate.py``), and the scheduled run would go on
    with its copies completed early. None where nothing ran (the CPU model, or warm)."""
    if options.get("device") != "cuda" or id(code) in _WARMED:
        return None
    _WARMED.add(id(code))
    return run_sequence(code, protocol, seq, "meant", options)


_FROZEN: list = []


def _freeze_once() -> None:
    """After the first sequence a process ran: what is loaded by now (torch and what the
    device model imports of it, the targets) is left out of every later garbage
    collection (``gc.freeze``). A run frees its own objects
    (``DeviceModel.release``), but collections still happen while it allocates, and
    each full one would walk torch's hundreds of thousands of objects again. (A batch
    also runs under ``fewer_collections``, which freezes what exists at its start and
    collects the young generation less often.)"""
    if not _FROZEN:
        gc.freeze()
        _FROZEN.append(True)


def load_targets(protocol_spec: str, refs: list, options: dict) -> list:
    """In a worker: load each target's code as a run will; per target ``(name, keywords,
    shimmed)``: the component class's name and None, or (a one-step staging protocol) its
    spec and the keywords it takes; the names shims gave it. A load error is raised."""
    protocol = _protocol(protocol_spec)
    schema = None
    if protocol.staging:
        schema = load_schema(options.get("schema") or protocol.staging)
    names = []
    for ref in refs:
        code = load_code(ref, protocol.component, schema)
        if protocol.staging:
            target = code.staging_target()
            names.append((target.spec, sorted(target.profile.keywords), list(target.shimmed)))
        else:
            names.append((code.component().__name__, None, list(code.shimmed)))
    return names
