"""The invariants of every staging protocol, each stated once: in prose and as a check.

A step sequence runs twice per target: once with every operation completing when it is
issued (``meant``: what the host meant, the order a reader of the code assumes) and once
under the completion schedule the sequence carries (``seen``: copies and device work
completing as late as the streams and events allow, unless the schedule says otherwise).
The checks compare what each run was seen to do (``spec.protocol.Trace``):

- ``step_outcome``: every operation of a valid sequence returns;
- ``device_read_as_meant``: every device work reads what the host meant when it launched
  it: for each element last written by an upload, the value that upload's host source
  held at the launch; and the same values under any schedule as when everything completes
  when issued;
- ``readback_as_written``: what the host holds after each step (``Protocol.observe``,
  and what each operation returned) and what each download wrote into pinned memory do
  not depend on when copies completed, and no host read of pinned memory sees a value
  that a download into it, not yet landed, then changes (the CPU model: whether or not
  the protocol observes what was read);
- ``no_copy_hazard`` (``spec/invariants.py``): no access races with a copy or device work
  the host had not seen complete. A race whose effect this sequence does not show (the
  same bytes written again, a later upload that covers every slot before any device work
  reads it) is info; with one of the divergences above it is an error;
- the protocol's own ``checks``.

Comparing two targets (``compare_runs``): both targets' ``meant`` runs launch the same
device work reading the same values, hold the same host state after every step and end
every operation the same way (``PROTOCOL_DIFFERENCES["same_trace"]``).
"""

from __future__ import annotations

import pickle
import re
from dataclasses import dataclass
from itertools import zip_longest
from typing import Callable

from stagecheck.spec.findings import ERROR, INFO, Finding
from stagecheck.spec.invariants import names_listed, statement as invariant_statement
from stagecheck.spec.observation import slot_text
from stagecheck.spec.protocol import Protocol, Trace
from stagecheck.spec.protocol_values import first_difference as _first_difference
from stagecheck.spec.protocol_values import same as _same, shown as _shown
from stagecheck.spec.schema_mistakes import SchemaCodeFailed
from stagecheck.spec.steps import StepSequence

__all__ = ["PROTOCOL_DIFFERENCES", "PROTOCOL_INVARIANTS", "check_run", "compare_runs",
           "protocol_statement"]


@dataclass(frozen=True)
class ProtocolInvariant:
    id: str
    statement: str


PROTOCOL_INVARIANTS: tuple[ProtocolInvariant, ...] = (
    ProtocolInvariant(
        "step_outcome",
        "Every operation of every step of a valid step sequence returns: no exception, no "
        "hang, no end of the process."),
    ProtocolInvariant(
        "device_read_as_meant",
        "Every device work reads what the host meant when it launched it: each element "
        "last written (before the launch) by an upload holds the value that upload's host "
        "source held at the launch, and pinned memory it reads in place holds what it held "
        "at the launch; and it reads the same values whatever the completion "
        "schedule as when every copy and kernel completes when it is issued."),
    ProtocolInvariant(
        "readback_as_written",
        "What the host holds after each step (what the protocol observes, what each "
        "operation returned), values read back from the device included, is the same "
        "whatever the completion schedule as when every copy and kernel completes when it "
        "is issued, and so are the values each download into pinned memory wrote there; "
        "and no host read of pinned memory sees a value that a download into it, not yet "
        "landed, then changes."),
)
PROTOCOL_DIFFERENCES: dict[str, str] = {
    "same_trace": "Run on the same step sequence with every operation completing when "
                  "issued, both targets end every operation the same way, launch the same "
                  "device work reading the same values, and hold the same host state after "
                  "every step.",
}
#: why a race that changed nothing observable is allowed (info)
NO_EFFECT = ("a race without an effect on what the device work read or the host read back "
             "in this step sequence (the same bytes, or a later copy that covers them before "
             "any reader): harmless here, fragile under change")

#: why a race with an upload that a torch operation the host issued read is an error
#: whatever it changed (the CPU model ran the upload early; on CUDA the operation's result
#: is in no trace either)
FORCED_EARLY = ("the host issued torch {operation} on device tensors queued behind this "
                "upload: the CPU model runs such operations (those the protocol does not "
                "declare as device_work) at once, and so ran the upload early, and what they "
                "compute is in no trace, so no completion schedule could show this write's "
                "effect; on a GPU the upload may run after the write and copy its values. "
                "Wait for the upload (an event recorded after it) before writing, or declare "
                "the consumer in the protocol's device_work so that the model can delay it")


def protocol_statement(invariant: str) -> str:
    """The prose of a protocol invariant or difference (else of a staging invariant)."""
    for inv in PROTOCOL_INVARIANTS:
        if inv.id == invariant:
            return inv.statement
    return PROTOCOL_DIFFERENCES.get(invariant) or invariant_statement(invariant)


#: the operation a run's trace records for what ran when the run ended (its last queued
#: work: ``oracles/protocol/run.py``)
END_OF_RUN = "(end of the run)"


def _ran(record: dict | None) -> str:
    """An operation one run ran where the other ran another (or none)."""
    return "no more operation" if record is None else _where(record)


def _where(record: dict) -> str:
    op = record["op"]
    if isinstance(record["step"], int) and record["step"] < 0:    # the state's build
        return f"{op} (before step 0)"
    if op == END_OF_RUN:       # the step is the last one the run had issued work in
        return f"at the end of the run (after step {record['step']})"
    return f"step {record['step']} ({op})" if not op.startswith("(") else \
        f"step {record['step']} {op}"


#: how a hazard calls memory the device model has no name for (``DeviceModel.describe``)
UNNAMED = "an unnamed tensor"
UNNAMED_SAID = "memory the state does not hold (a tensor made during the run)"


def _hazard_message(h: dict) -> str:
    """``step 2 (execute_model): host write (...) of ids_cpu slots [1] while ...``, or, for
    an operation that raced (its ``by`` ends ``reads it``, ``writes it``, ``overwrites
    it``), ``... : download X -> Y #4 ... reads slots [0] of Z, while ...``."""
    region = UNNAMED_SAID if h["region"] == UNNAMED else h["region"]
    row = h.get("row", 0)
    slots = ("elements (row, column) " if row else "slots ") + slot_text(h["slots"], row)
    by = h["by"]
    if by.endswith(" it"):
        what = f"{by[:-3]} {slots} of {region}, while"
    else:
        what = f"{by} of {region} {slots} while"
    return f"{_where(h)}: {what} {h['pending']} was not seen complete"


def _finding(inv: str, message: str, side: str, severity: str = ERROR, **kw) -> Finding:
    extra = kw.pop("extra", {})
    return Finding(invariant=inv, severity=severity, message=message, side=side, extra=extra,
                   **kw)


def _observed(path: str) -> str:
    """Where ``observe``'s result differs (``_first_difference``'s path), as an
    expression: ``observe()['computed']['req-1']``, ``observe()[0][1]``."""
    head, bracket, rest = path.partition("[")
    return "observe()" + (f"[{head!r}]" if head else "") + bracket + rest


def _outcome(trace: Trace, side: str) -> list[Finding]:
    failed = trace.failed()
    if failed is None:
        return []
    kind = ("hang" if failed["outcome"] == "hung" else
            "crash" if failed["outcome"].startswith("ended its process") else "exception")
    return [_finding("step_outcome", f"{_where(failed)} {failed['outcome']}", side,
                     field=failed["op"], extra={"kind": kind, "step": failed["step"],
                                                "operation": failed["op"]})]


#: device work's reads under the drawn schedule against the meant run's (None: not read)
READ_SCHEDULE = ("{where}: {work} read {what} = {seen} under this completion schedule, "
                 "{meant} when every copy and kernel completes when issued")
UNREAD_SCHEDULE = ("{where}: {work} did not read {what} under this completion schedule, "
                   "but read it = {meant} when every copy and kernel completes when issued")
UNREAD_MEANT = ("{where}: {work} read {what} = {seen} under this completion schedule, "
                "and not at all when every copy and kernel completes when issued")


def _reads(meant: Trace, seen: Trace, side: str) -> list[Finding]:
    out = []
    for m in seen.meant[:1] or meant.meant[:1]:
        slots = m["slots"]
        # one slot's values as values (``ids[1] = 300``), several as lists
        one = len(m["meant"]) == 1 == len(m["read"])
        held, read = _shown(m["meant"][0], m["read"][0], 400) if one else \
            _shown(m["meant"][:8], m["read"][:8], 400)
        out.append(_finding(
            "device_read_as_meant",
            f"{_where(m)}: {m['work']} read {m['arg']}{slot_text(slots, m.get('row', 0))} "
            f"= {read}, but the host held {held} for it at the launch ("
            + ("it reads that pinned memory in place, not a copy of it)" if m.get("in_place")
               else "the last copies into those slots read that host memory)"),
            side, field=f"{m['work']}({m['arg']})",
            slot=slots[0] if slots else None, expected=m["meant"], candidate=m["read"],
            extra={"kind": "host-intent", "step": m["step"], "operation": m["op"],
                   "slots": slots}))
    for k, (a, b) in enumerate(zip(meant.reads, seen.reads)):
        if a["values"] != b["values"]:
            path, x, y = _first_difference(a["values"], b["values"])
            xs, ys = _shown(x, y, 120)
            form = UNREAD_SCHEDULE if y is None else UNREAD_MEANT if x is None else READ_SCHEDULE
            out.append(_finding(
                "device_read_as_meant", form.format(
                    where=_where(b), work=b["work"], what=path or "its arguments",
                    seen=ys, meant=xs), side, field=_read_field(b["work"], path),
                expected=x, candidate=y,
                extra={"kind": "schedule", "step": b["step"], "operation": b["op"],
                       "launch": k, **_unlanded(seen, _upto(seen, b))}))
            break
    return out


def _read_field(work: str, path: str) -> str:
    """``work(arg)``: the device work and the argument whose read moved (the head of
    ``_first_difference``'s path, ``temperature`` of ``temperature[0]``), so that a
    finding's id names the memory as well as the work; ``work`` where the path is empty."""
    arg = path.partition("[")[0].partition(".")[0]
    return f"{work}({arg})" if arg else work


#: the likely cause of a value read back that differs, where downloads had not landed
UNLANDED = ("possibly a read before a download landed: {downloads} had not been seen "
            "landed when {where} began (no event or "
            "synchronization the host waited for was ordered after {it}); a read of {its} "
            "pinned memory before waiting for {it} (a numpy view reads nothing the model "
            "sees) reads what was there before: wait for {its} event first")


def _unlanded(seen: Trace, ops: list) -> dict:
    """``{"context": ...}`` naming the downloads into pinned memory the host had not seen
    land when the last of operation records ``ops`` with some began (a numpy read of them
    before the operation waited for them read what was there before: one it waited for
    later in the same operation is named too, as the read may come first); ``{}`` where
    there is none, or where ``seen`` has a race of its own to explain what differs."""
    if seen.hazards:
        return {}
    for op in reversed(ops):
        if op.get("unlanded"):
            downloads = op["unlanded"]
            many = len(downloads) > 1
            return {"context": UNLANDED.format(
                downloads=", ".join(downloads[:3]) + (" ..." if len(downloads) > 3 else ""),
                where=_where(op), it="them" if many else "it",
                its="their" if many else "its")}
    return {}


def _upto(seen: Trace, b: dict) -> list:
    """``seen``'s operation records up to the one record ``b`` (a launch, a landed
    download, an operation's own) names by its step and operation, that one included."""
    keys = [(op["step"], op["op"]) for op in seen.ops]
    key = (b["step"], b["op"])
    return seen.ops[:keys.index(key) + 1] if key in keys else \
        [op for op in seen.ops if op["step"] <= b["step"]]


def _readback(meant: Trace, seen: Trace, side: str) -> list[Finding]:
    for s in seen.stale[:1]:
        read, written = _shown(s["read"][:8], s["written"][:8], 160)
        return [_finding("readback_as_written",
                         f"{_where(s)}: the host read {s['region']}"
                         f"{slot_text(s['slots'], s.get('row', 0))} = {read} "
                         f"before {s['pending']} had written it; it then wrote {written} "
                         "there", side, field=stable_region(s["region"]),
                         slot=s["slots"][0] if s["slots"] else None, expected=s["written"],
                         candidate=s["read"],
                         extra={"kind": "stale-read", "step": s["step"],
                                "operation": s["op"], "slots": s["slots"]})]
    for k, (a, b) in enumerate(zip(meant.states, seen.states)):
        if a != b:
            path, x, y = _first_difference(a, b)
            xs, ys = _shown(x, y, 160)
            return [_finding("readback_as_written",
                             f"after step {k} the host holds {_observed(path)} = "
                             f"{ys} under this completion schedule, {xs} when "
                             "every copy and kernel completes when issued", side,
                             # one identity for the state, whichever item differs: the
                             # item moves as shrinking drops steps and requests
                             field="state", expected=x, candidate=y,
                             extra={"kind": "state", "step": k,
                                    **_unlanded(seen, [op for op in seen.ops
                                                          if op["step"] <= k])})]
    for a, b in zip(meant.ops, seen.ops):
        if a["result"] != b["result"]:
            path, x, y = _first_difference(a["result"], b["result"])
            xs, ys = _shown(x, y, 160)
            return [_finding("readback_as_written",
                             f"{_where(b)} returned {path or 'a value'} = {ys} under this "
                             f"completion schedule, {xs} when every copy and kernel "
                             "completes when issued", side, field=b["op"],
                             expected=x, candidate=y,
                             extra={"kind": "result", "step": b["step"], "operation": b["op"],
                                    **_unlanded(seen, _upto(seen, b))})]
    for a, b in zip(meant.landed, seen.landed):
        if a["download"] != b["download"]:
            break                 # the host issued other downloads: nothing to pair
        if not _same(a["values"], b["values"]):
            path, x, y = _first_difference(a["values"], b["values"])
            xs, ys = _shown(x, y, 160)
            return [_finding("readback_as_written",
                             f"{_where(b)}: {b['download']} wrote {path or 'its values'} = "
                             f"{ys} into pinned memory under this completion schedule, {xs} "
                             "when every copy and kernel completes when issued", side,
                             field=b["download"].split(" -> ")[-1].split("[")[0],
                             expected=x, candidate=y,
                             extra={"kind": "landed", "step": b["step"],
                                    "operation": b["op"],
                                    **_unlanded(seen, _upto(seen, b))})]
    return []


#: an allocation the device model named by its counter (``pinned tensor 3``): a finding's
#: field, and so its id, leaves the counter out (it moves when other allocations do)
_COUNTED = re.compile(r"^(pinned tensor) \d+$")


def stable_region(region: str) -> str:
    """``region`` as a finding's field: without an allocation counter."""
    return _COUNTED.sub(r"\1", region)


def _hazards(seen: Trace, side: str, observable: bool) -> list[Finding]:
    out, shown = [], set()
    for h in seen.hazards:
        key = (h["kind"], h["region"])
        if key in shown:
            continue
        shown.add(key)
        extra = {"kind": h["kind"], "step": h["step"], "operation": h["op"],
                 "slots": list(h["slots"]), "pending": h["pending"]}
        forced = h.get("forced")
        if forced:          # its effect could not be explored: never called harmless
            extra["context"] = FORCED_EARLY.format(operation=forced)
        elif not observable:
            extra["context"] = NO_EFFECT
        out.append(_finding("no_copy_hazard", _hazard_message(h),
                            side, ERROR if observable or forced else INFO,
                            field=stable_region(h["region"]),
                            slot=h["slots"][0], extra=extra))
    return out


def check_run(protocol: Protocol, seq: StepSequence, meant: Trace, seen: Trace,
              side: str = "candidate") -> list[Finding]:
    """One target's runs of ``seq`` against every protocol invariant (see the module doc)."""
    outcome = _outcome(meant, side) or _outcome(seen, side)
    if meant.stopped or seen.stopped:
        stopped = meant.stopped or seen.stopped
        return outcome or [_finding("step_outcome", f"the run {stopped}", side,
                                    extra={"kind": "hang" if stopped == "hung" else "crash"})]
    findings = list(outcome)
    if not outcome:
        findings += _reads(meant, seen, side) + _readback(meant, seen, side)
        for k, check in enumerate(protocol.checks):
            # a copy of each: a check that consumes what it is given (``reads.pop()``)
            # must not change what the other checks and the comparison of two targets
            # read (a pickle's round trip: plain data, five times faster than deepcopy)
            given = pickle.loads(pickle.dumps((seq, meant), pickle.HIGHEST_PROTOCOL))
            for message in _check_messages(k, check, *given, protocol.name):
                findings.append(_finding(check.id, message, side, extra={
                    "kind": check.id, "statement": check.statement}))
    # a race has an effect where what was read or read back differs, or where the run
    # under this schedule ended an operation otherwise than the run as meant (it raised
    # on values a late copy left)
    observable = any(f.invariant in ("device_read_as_meant", "readback_as_written")
                     for f in findings) or _outcomes(meant) != _outcomes(seen)
    return findings + _hazards(seen, side, observable) + _left(seen, side)


def _outcomes(trace: Trace) -> list:
    """How each operation of a run ended, in order (None: it returned)."""
    return [op["outcome"] for op in trace.ops]


def _left(seen: Trace, side: str) -> list[Finding]:
    """``no_process_left`` (``spec/invariants.py``; info, as for one call): processes the
    sequence's code started and left running when its operations returned."""
    if not seen.left_running:
        return []
    threads = [n[len("thread "):] for n in seen.left_running if n.startswith("thread ")]
    processes = [n for n in seen.left_running if not n.startswith("thread ")]
    said = []
    if processes:
        said.append(f"{len(processes)} process(es) ({names_listed(processes)}), which "
                    "stagecheck ended")
    if threads:
        said.append(f"{len(threads)} thread(s) ({names_listed(threads)}), whose worker "
                    "stagecheck replaced")
    return [_finding("no_process_left", "the step sequence left running " +
                     " and ".join(said), side, INFO,
                     extra={"kind": "no_process_left", "processes": list(seen.left_running)})]


def _check_messages(k: int, check, seq: StepSequence, trace: Trace,
                    protocol: str = "") -> list[str]:
    """The first message of a protocol's own check on ``trace`` (none: it holds); what
    the check raises, or an answer that is not a list of strings, is the protocol file's
    mistake (``SchemaCodeFailed``), never a finding."""
    where = (f"protocol {protocol!r}: " if protocol else "") + \
        f"checks[{k}] ({getattr(check, 'id', '?')!r})"
    try:
        messages = check.check(seq, trace)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:    # GeneratorExit, an exception class of its own too
        raise SchemaCodeFailed.of(where, exc) from None
    if type(messages) not in (list, tuple) or not all(isinstance(m, str) for m in messages):
        raise SchemaCodeFailed(where, None, f"returned {_kind(messages)}, not a list of "
                               "messages (strings; an empty list where it holds)")
    # a plain str of each, made without calling the check's own methods: a str subclass
    # whose __str__ ends the process, hangs or raises is read as the text it holds
    return [_shortened(str.__str__(m)) for m in messages[:1]]


#: the longest message of a protocol's own check a report shows
MAX_CHECK_MESSAGE = 2000


def _shortened(text: str) -> str:
    if len(text) <= MAX_CHECK_MESSAGE:
        return text
    return f"{text[:MAX_CHECK_MESSAGE]}... ({len(text) - MAX_CHECK_MESSAGE} more characters)"


def _kind(value) -> str:
    """What a check returned, said without calling its own methods (its ``__repr__``)."""
    if type(value) in (list, tuple, dict, str, int, float, bool, type(None)):
        text = repr(value)      # cut short with "...", so that it reads as cut (was: a
        shown = text if len(text) <= 80 else text[:77] + "..."     # string left open)
        return f"a {type(value).__name__} {shown}" if type(value) is str else shown
    return f"an object of type {type(value).__name__}"


def compare_runs(protocol: Protocol, seq: StepSequence, a: Trace, b: Trace) -> list[Finding]:
    """Differences between the baseline's and the candidate's ``meant`` runs of ``seq``."""
    def diff(message: str, **kw) -> list[Finding]:
        return [_finding("same_trace", message, "both", **kw)]
    if (a.stopped, [o["outcome"] for o in a.ops]) != (b.stopped, [o["outcome"] for o in b.ops]):
        for x, y in zip(a.ops, b.ops):
            if x["outcome"] != y["outcome"]:
                return diff(f"{_where(y)}: baseline {x['outcome'] or 'returned'}, candidate "
                            f"{y['outcome'] or 'returned'}", field=y["op"],
                            baseline=x["outcome"], candidate=y["outcome"],
                            extra={"kind": "outcome", "step": y["step"], "operation": y["op"]})
        for x, y in zip_longest(a.ops, b.ops):    # which operation ran differs (a when)
            if x is None or y is None or (x["step"], x["op"]) != (y["step"], y["op"]):
                return diff(f"the baseline ran {_ran(x)}, the candidate {_ran(y)}",
                            extra={"kind": "outcome"})
        return diff(f"baseline {a.stopped or 'ran every step'}, candidate "
                    f"{b.stopped or 'ran every step'}", extra={"kind": "outcome"})
    for x, y in zip(a.reads, b.reads):
        if (x["work"], x["values"]) != (y["work"], y["values"]):
            found = _first_difference(x["values"], y["values"]) if x["work"] == y["work"] \
                else ("", x["work"], y["work"])
            base, cand = _shown(found[1], found[2], 120)
            return diff(f"{_where(y)}: {y['work']} read {found[0] or 'its arguments'} = "
                        f"{cand} (candidate), {base} (baseline)",
                        field=y["work"], baseline=found[1], candidate=found[2],
                        extra={"kind": "device-read", "step": y["step"], "operation": y["op"]})
    if len(a.reads) != len(b.reads):
        return diff(f"the baseline launched {len(a.reads)} device work(s), the candidate "
                    f"{len(b.reads)}", extra={"kind": "device-work"},
                    baseline=len(a.reads), candidate=len(b.reads))
    for k, (x, y) in enumerate(zip(a.states, b.states)):
        if x != y:
            path, u, v = _first_difference(x, y)
            base, cand = _shown(u, v, 160)
            return diff(f"after step {k} the host holds {_observed(path)} = "
                        f"{cand} "
                        f"(candidate), {base} (baseline)", field=path or "state",
                        baseline=u, candidate=v, extra={"kind": "state", "step": k})
    for x, y in zip(a.ops, b.ops):
        if x["result"] != y["result"]:
            path, u, v = _first_difference(x["result"], y["result"])
            base, cand = _shown(u, v, 160)
            return diff(f"{_where(y)} returned {path or 'a value'} = {cand} (candidate), "
                        f"{base} (baseline)", field=f"{y['op']}{path}", baseline=u,
                        candidate=v, extra={"kind": "result", "step": y["step"],
                                            "operation": y["op"]})
    return []


CheckFunction = Callable[[StepSequence, Trace], list[str]]
