"""The invariants of host-side staging, each stated once: in prose and as a check.

Every oracle (spec, differential, kernel, symbolic, mutants) uses these statements;
none restates them. They hold for every staging function; what differs between
functions (which buffers, what a slot holds, the tail, copy and missing-input
policies, the declared mutations) is read from the target's schema through its
``TargetProfile``. A check takes the scenario, what one target was observed to do
and the target's profile, and returns findings (empty = holds). Severity follows the
contract: a violation on an in-contract input is an error, on an input that should
not happen it is info. ``padded_read`` is always info.
"""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass, replace
from itertools import compress, count, repeat
from operator import ne
from types import MappingProxyType
from typing import Any, Callable

from stagecheck.spec.contents import initial_values
from stagecheck.spec.findings import ERROR, INFO, Finding
from stagecheck.spec.observation import Hazard, HostWrite, Observation
from stagecheck.spec.scenario import MISSING, RequestView, StagingScenario
from stagecheck.spec.schema import FLAG, ID_SET, NUMBER, PER_REQUEST, PER_SLOT, TargetProfile
from stagecheck.spec.schema_mistakes import SchemaCodeFailed

__all__ = ["DIFFERENCES", "INVARIANTS", "INVARIANTS_BY_ID", "Invariant", "check",
           "column_disagreement", "column_values", "expected_column", "expected_inputs_after",
           "input_difference", "inputs_snapshot", "names_request", "statement"]


@dataclass(frozen=True)
class Invariant:
    id: str
    statement: str
    check: Callable[[StagingScenario, Observation, TargetProfile], list[Finding]]
    always_info: bool = False


def _same(a, b) -> bool:
    return (bool(a) == bool(b)) if isinstance(a, bool) or isinstance(b, bool) else a == b


def _diff(xs: list, ys: list) -> list[int]:
    """The positions where ``xs`` and ``ys`` differ (``_same``), up to the shorter."""
    if xs == ys:        # equal values are the same (True == 1 holds for _same too)
        return []
    return [i for i in _unequal(xs, ys) if not _same(xs[i], ys[i])]


def _unequal(xs: list, ys: list):
    """The positions where ``x != y``, up to the shorter list (one C loop): every
    position where two ints or bools are not ``_same`` is among them."""
    return compress(count(), map(ne, xs, ys))


def _finding(inv: str, message: str, **kw) -> Finding:
    return Finding(invariant=inv, severity=ERROR, message=message, **kw)


def _field_name(p: TargetProfile, buffer: str) -> str:
    f = p.schema.field_of_buffer(buffer)
    return f.name if f else buffer


def names_request(message: str, req_id: str) -> bool:
    """Whether ``message`` names ``req_id`` as a whole token ('req-1' is not in 'req-12')."""
    return re.search(r"(?<![\w-])" + re.escape(req_id) + r"(?![\w-])", message) is not None


def expected_value(s: StagingScenario, f, i: int, r: str) -> Any:
    """What slot ``i`` of ``f`` must hold for request ``r``; MISSING when ``r`` lacks an
    input, or when the field checks no values (``derive=None``)."""
    if f.derive is None:
        return MISSING
    try:
        value = f.derive(RequestView(s, i, r))
    except KeyError:
        return MISSING
    except Exception as exc:       # the schema's mistake: only KeyError means "lacks"
        raise SchemaCodeFailed.of(f"field {f.name!r}: derive (slot {i}, {r!r})", exc) from None
    if type(value) is not int and _unholdable(f, value):
        raise _unholdable_error(f, i, r, value)
    return value


def _unholdable(f, value) -> bool:
    """A derive's value of a type no slot of ``f``'s buffer holds (a string, a fraction,
    None): the schema's mistake, never a slot that 'holds 0, expected '0''. Integral floats
    and numpy scalars are held; MISSING is no value."""
    if value is MISSING or type(value) is int:
        return False
    if f.dtype == "bool":       # numpy's bool is no numbers.Integral: by its name
        return not (isinstance(value, bool) or type(value).__name__ == "bool_")
    return not (isinstance(value, numbers.Integral) or (
        isinstance(value, numbers.Real) and float(value).is_integer()))


def _unholdable_error(f, i: int, r: str, value) -> SchemaCodeFailed:
    return SchemaCodeFailed(f"field {f.name!r}: derive (slot {i}, {r!r})", None,
                            f"returned {value!r} (a {type(value).__name__}), which its "
                            f"{f.dtype} buffer cannot hold")


# --------------------------------------------------------------------------- checks

def check_expected_outcome(s, o, p):
    if o.timed_out:
        return [_finding("expected_outcome", "the call did not return within the time limit "
                         "(hang)", extra={"kind": "hang"})]
    if o.crashed is not None:
        return [_finding("expected_outcome", f"the call never returned: {o.crashed}",
                         extra={"kind": "crash"})]
    if p.first_missing(s) is None and not o.returned:
        return [_finding("expected_outcome",
                         f"raised {o.exception_type}"
                         f"{': ' + o.exception_message if o.exception_message else ''} on an "
                         "input where every live request has every input it needs",
                         extra={"kind": "unexpected-exception"})]
    return []


def check_missing_input(s, o, p):
    missing = p.first_missing(s)
    if missing is None or o.timed_out or o.crashed is not None:
        return []
    slot, req_id, f = missing
    policy = f.missing
    if o.returned:
        return [_finding("missing_input",
                         f"returned normally although live request {req_id!r} (slot {slot}) "
                         f"has no {policy.input}", slot=slot, field=f.name,
                         extra={"kind": "no-raise"})]
    out = []
    if not o.raised(policy.exception):
        out.append(_finding("missing_input",
                            f"raised {o.exception_type} instead of {policy.exception} for the "
                            f"missing {policy.input} of {req_id!r}"
                            + (f" ({o.exception_type}: {o.exception_message})"
                               if o.exception_message else ""), slot=slot, field=f.name,
                            expected=policy.exception, extra={"kind": "wrong-type"}))
    elif policy.kind == "assertion" and not any(
            names_request(o.exception_message or "", r) for r in _asserted_ids(s, p, req_id)):
        out.append(_finding("missing_input",
                            f"{policy.exception} message {o.exception_message!r} does not name "
                            f"the request id {req_id!r}", slot=slot, field=f.name,
                            extra={"kind": "message"}))
    if policy.kind == "assertion" and o.copies(f.buffer):
        out.append(_finding("missing_input",
                            f"the {f.name} buffer was copied to the device before the "
                            f"{policy.exception} for {req_id!r} was raised", field=f.name,
                            slot=slot, extra={"kind": "copied-before-raise"}))
    return out


def _asserted_ids(s: StagingScenario, p: TargetProfile, first: str) -> list[str]:
    """The live requests an assertion's message may name: ``first`` (the first live
    request a missing-input policy applies to) and every other live request an assertion
    policy applies to (with several, the code may check them in any order)."""
    policed = [f for f in p.staged_fields(s) if f.missing is not None
               and f.missing.kind == "assertion"]
    return [first] + [r for i, r in enumerate(s.live_ids) if r != first
                      and any(f.missing.applies_to(s, i, r) for f in policed)]


def expected_column(p: TargetProfile, s: StagingScenario, f) -> list:
    """What every live slot of ``f`` must hold, in slot order (MISSING where the request
    lacks an input); computed once per scenario for every side (``TargetProfile.memo``)."""
    return p.memo(s, ("expected", f.name), lambda p, s: _expected_column(s, f),
                  per_schema=True)


#: the types of derived values that need no closer look (``_unholdable``)
_PLAIN_INT = frozenset({int, type(MISSING)})


def _expected_column(s: StagingScenario, f) -> list:
    live = s.live_ids
    if f.column is not None and f.derive is not None:
        return column_values(s, f)
    name = _plain_attribute(f.derive)
    if name is not None and isinstance(s.inputs.get(name), dict):
        table = s.inputs[name]      # slot i holds inputs[name][r]: the lookups in one C loop
        return list(map(table.get, live, repeat(MISSING)))
    if f.derive is None:
        return [MISSING] * len(live)
    # expected_value slot by slot, on one request view moved from slot to slot
    derive, view, out = f.derive, RequestView(s, 0, ""), []
    for i, r in enumerate(live):
        view.slot, view.id = i, r
        try:
            out.append(derive(view))
        except KeyError:
            out.append(MISSING)
        except Exception as exc:   # the schema's mistake: only KeyError means "lacks"
            raise SchemaCodeFailed.of(f"field {f.name!r}: derive (slot {i}, {r!r})",
                                   exc) from None
    if not set(map(type, out)) <= _PLAIN_INT:
        for i, value in enumerate(out):
            if _unholdable(f, value):
                raise _unholdable_error(f, i, live[i], value)
    return out


def column_values(s: StagingScenario, f) -> list:
    """``f.column`` on ``s``: one value per live request, given each table read-only (a
    column that changed the scenario would change what every invariant compares the
    calls with); whatever it raises, or a list of the wrong length, is the schema's
    mistake (``SchemaCodeFailed``)."""
    live = s.live_ids
    inputs = {name: MappingProxyType(v) if type(v) is dict else v
              for name, v in s.inputs.items()}
    try:
        column = list(f.column(inputs, live))
    except Exception as exc:
        raise SchemaCodeFailed.of(f"field {f.name!r}: column", exc) from None
    if len(column) != len(live):
        raise SchemaCodeFailed(f"field {f.name!r}: column", ValueError(
            f"it gave {len(column)} values for {len(live)} live requests"))
    return column


class _Probe:
    """Stands for a request view to learn whether a derivation is ``q.NAME`` alone."""

    __slots__ = ("names",)

    def __init__(self) -> None:
        self.names: list[str] = []

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        self.names.append(name)
        return _Probe.MARK

    MARK = object()


_PLAIN: dict[int, tuple[Any, str | None]] = {}


def _plain_attribute(derive) -> str | None:
    """``NAME`` when ``derive`` is ``lambda q: q.NAME`` (it reads one attribute of the
    request view and returns it unchanged), else None; learned once per function."""
    kept = _PLAIN.get(id(derive))
    if kept is not None and kept[0] is derive:
        return kept[1]
    probe = _Probe()
    try:
        plain = derive(probe) is _Probe.MARK and len(probe.names) == 1
    except Exception:
        plain = False
    name = probe.names[0] if plain else None
    _PLAIN[id(derive)] = (derive, name)
    return name


def check_slot_alignment(s, o, p):
    if not o.returned:
        return []
    out = []
    live = s.live_ids
    for f in p.staged_fields(s):
        values = o.cpu.get(f.buffer)
        if values is None or f.derive is None:
            continue
        want = expected_column(p, s, f)
        n = min(len(want), len(values))
        if values[:n] == want[:n]:       # the whole live range at once
            continue
        bad = [i for i in _unequal(values[:n], want[:n])
               if want[i] is not MISSING and not _same(values[i], want[i])]
        if bad and f.column is not None:
            _column_agrees(s, f, want, bad)
        if bad:
            i = bad[0]
            out.append(_finding("slot_alignment",
                                f"{f.name}[{i}] holds {values[i]!r}, expected {f.derivation} = "
                                f"{want[i]!r} for request {live[i]!r}",
                                field=f.name, slot=i, view="cpu", candidate=values[i],
                                expected=want[i],
                                extra={"slots": bad, "values": values}))
    return out


def column_disagreement(s, f, column: list, slots) -> tuple[int, Any, Any] | None:
    """The first of ``slots`` where ``column`` (``f.column``'s values on ``s``) is not
    what ``derive`` gives, as ``(slot, column's value, derive's value)``; None where they
    agree on every one (``MISSING`` agrees only with ``MISSING``). ``schema check`` asks
    it of every live slot of its dry run, ``slot_alignment`` of the slots it would
    report."""
    live = s.live_ids
    for i in slots:
        meant, got = expected_value(s, f, i, live[i]), column[i]
        if got is not meant and (got is MISSING or meant is MISSING or got != meant):
            return i, got, meant
    return None


def _column_agrees(s, f, want: list, slots: list[int]) -> None:
    """A column (``Field.column``) is a shortcut for ``derive``: before a slot it
    computed is reported, ``derive`` says the same there, or the schema is wrong (a
    column that disagrees only on sizes ``schema check`` did not draw)."""
    found = column_disagreement(s, f, want, slots)
    if found is not None:
        i, got, meant = found
        raise SchemaCodeFailed(f"field {f.name!r}: column", ValueError(
            f"it gives {got!r} for slot {i} ({s.live_ids[i]!r}) where derive gives "
            f"{'no value (a missing input)' if meant is MISSING else repr(meant)}; "
            "column must equal derive on every slot"))


def check_tail_policy(s, o, p):
    out = []
    n = max(s.num_reqs, 0)
    staged = {f.buffer: f for f in p.staged_fields(s)}
    for buffer in p.buffers():
        f = staged.get(buffer)
        policy = f.tail.kind if f is not None else "untouched"
        if policy == "free":
            continue
        if policy == "fill":
            values = o.cpu.get(buffer)
            if not o.returned or values is None:
                continue
            bad = [n + i for i, v in enumerate(values[n:]) if not _same(v, f.tail.value)]
            if bad:
                i = bad[0]
                out.append(_finding("tail_policy",
                                    f"cpu tail slot {i} of {buffer} holds {values[i]!r}; the "
                                    f"tail must be filled with {f.tail.value!r}",
                                    field=f.name, slot=i, view="cpu", expected=f.tail.value,
                                    candidate=values[i], extra={"slots": bad, "kind": "fill"}))
            continue
        for view, final in (("cpu", o.cpu), ("gpu", o.gpu)):
            after = final.get(buffer)
            if after is None:
                continue
            before = initial_values(s, p.schema, buffer, view)
            if after == before:
                continue
            bad = [n + i for i in _diff(after[n:], before[n:])]
            if bad:
                i = bad[0]
                out.append(_finding("tail_policy",
                                    f"{view} tail slot {i} of {buffer} changed from "
                                    f"{before[i]!r} to {after[i]!r}",
                                    field=_field_name(p, buffer), slot=i, view=view,
                                    expected=before[i], candidate=after[i],
                                    extra={"slots": bad}))
    return out


def _mirrored(f, s: StagingScenario) -> int:
    """How many leading slots the device must mirror after a successful call."""
    if f.copy.kind == "whole":
        return s.capacity
    return s.num_reqs if f.copy.kind == "live" else 0


def check_mirror_consistency(s, o, p):
    if not o.returned:
        return []
    out = []
    for f in p.staged_fields(s):
        if f.buffer not in o.cpu or f.buffer not in o.gpu:
            continue
        n = _mirrored(f, s)
        gpu, cpu = o.gpu[f.buffer], o.cpu[f.buffer]
        # and the slots a mirror the code resized (gpu.resize_(0)) no longer has, or the
        # first past the buffer's end of one it made longer
        bad = _diff(gpu[:n], cpu[:n]) + list(range(min(len(gpu), n), min(len(cpu), n)))
        if not bad and len(gpu) > len(cpu):
            bad = [len(cpu)]
        if bad:
            i = bad[0]
            held = repr(gpu[i]) if i < len(gpu) else f"absent (the mirror has {len(gpu)} slots)"
            want = repr(cpu[i]) if i < len(cpu) else f"no such slot (the buffer has {len(cpu)})"
            out.append(_finding("mirror_consistency",
                                f"gpu {f.name}[{i}] = {held} but cpu holds {want}",
                                field=f.name, slot=i, view="gpu",
                                expected=cpu[i] if i < len(cpu) else None,
                                candidate=gpu[i] if i < len(gpu) else None,
                                extra={"slots": bad}))
    return out


def _tiled(ranges: list, expected: list) -> str:
    """A note where several copies together cover the one expected range exactly, each
    slot once (the values the device gets are the same; the policy asks for one copy)."""
    if len(ranges) < 2 or len(expected) != 1:
        return ""
    spans = sorted(r for r in ranges if r[0] < r[1])
    start, stop = expected[0]
    at = start
    for a, b in spans:
        if a != at:
            return ""
        at = b
    if at != stop or not spans:        # (copies of nothing: no telling them apart)
        return ""
    return (f" (together they copy {expected[0]} exactly, each slot once: split into "
            f"{len(ranges)} copies where the policy asks for one)")


def check_copy_discipline(s, o, p):
    if not o.returned:
        return []
    out = []
    n = s.num_reqs
    staged = p.staged_fields(s)
    for f in staged:
        copies = o.copies(f.buffer)
        ranges = [(c.start, c.stop) for c in copies]
        if f.copy.kind == "none":
            expected: list = []
        elif f.copy.kind == "whole":
            expected = [(0, s.capacity)]
        else:
            expected = [(0, n)]
        allowed = [expected] + ([[]] if f.copy.skip_when_empty and n == 0 else [])
        if ranges not in allowed:
            out.append(_finding("copy_discipline",
                                f"{f.name} copied {len(copies)} time(s) over {ranges}; expected "
                                f"{f.copy.describe()}: {expected}{_tiled(ranges, expected)}",
                                field=f.name,
                                expected=expected, candidate=ranges, extra={"kind": "range"}))
            continue
        if not copies:
            continue
        late = o.writes_after(copies[-1])
        if late:
            out.append(_finding("copy_discipline",
                                f"{f.name} written {_through(late[0].via)} at slots "
                                f"{list(late[0].slots)[:8]} after its copy to the device",
                                field=f.name, slot=(late[0].slots or (None,))[0],
                                extra={"kind": "write-after-copy"}))
    staged_buffers = {f.buffer for f in staged}
    for buffer in p.buffers():
        if buffer in staged_buffers:
            continue
        touched = o.writes(buffer) + o.copies(buffer)
        if touched:
            out.append(_finding("copy_discipline",
                                f"{buffer} must not be staged on this call, but it was "
                                f"{'copied' if o.copies(buffer) else 'written'}",
                                field=_field_name(p, buffer), extra={"kind": "not-staged"}))
    return out


def _plain_input(kind: str, value: Any) -> Any:
    if kind == PER_REQUEST:
        kinds = set(map(type, value.values()))
        if kinds == {list}:         # a table of lists: each copied, in one C loop
            return dict(zip(value, map(list, value.values())))
        if list in kinds:
            return {k: list(v) if isinstance(v, list) else v for k, v in value.items()}
        return dict(value)
    if kind == ID_SET:
        return sorted(value)
    if kind == PER_SLOT:
        return list(value)
    return value


def inputs_snapshot(profile: TargetProfile, s: StagingScenario) -> dict:
    """The inputs of ``s`` as plain data, the way ``Observation.inputs_after`` records them:
    ``req_ids`` and every input that is not a flag or a number, by name."""
    snap = {"req_ids": list(s.req_ids)}
    for inp in profile.schema.inputs:
        if inp.kind not in (FLAG, NUMBER) and inp.name in s.inputs:
            snap[inp.name] = _plain_input(inp.kind, s.inputs[inp.name])
    return snap


def expected_inputs_after(profile: TargetProfile, s: StagingScenario) -> dict:
    """What the inputs must look like after a successful call: as before, except the
    mutations the schema declares."""
    return profile.memo(s, "inputs_after", _expected_inputs_after, per_schema=True)


def _expected_inputs_after(profile: TargetProfile, s: StagingScenario) -> dict:
    snap = inputs_snapshot(profile, s)
    mutate = profile.schema.mutations
    return mutate(s, snap) if mutate is not None else snap


#: entries of an input a finding keeps where the two values differ, and items of a list
INPUT_ENTRIES_SHOWN = 20
LIST_ITEMS_SHOWN = 50


def input_difference(expected: Any, after: Any) -> tuple[Any, Any]:
    """What a finding about an input that changed keeps of the two values: of two dicts,
    the entries that differ (at most ``INPUT_ENTRIES_SHOWN``), each list cut to its first
    ``LIST_ITEMS_SHOWN`` items and its length, so a target that puts twenty million
    items into an input leaves a finding (and a replay file) of a few lines."""
    if isinstance(expected, dict) and isinstance(after, dict):
        keys = [k for k in list(expected) + [k for k in after if k not in expected]
                if expected.get(k, _NOTHING) != after.get(k, _NOTHING)]
        shown = keys[:INPUT_ENTRIES_SHOWN]
        more = {"...": f"{len(keys) - len(shown)} more entries differ"} \
            if len(keys) > len(shown) else {}
        return ({k: _cut(expected[k]) for k in shown if k in expected} | more,
                {k: _cut(after[k]) for k in shown if k in after} | more)
    return _cut(expected), _cut(after)


_NOTHING = object()


def _cut(value: Any) -> Any:
    if isinstance(value, list) and len(value) > LIST_ITEMS_SHOWN:
        return value[:LIST_ITEMS_SHOWN] + [f"... ({len(value) - LIST_ITEMS_SHOWN} more items)"]
    if isinstance(value, dict) and len(value) > LIST_ITEMS_SHOWN:
        kept = dict(list(value.items())[:LIST_ITEMS_SHOWN])
        return kept | {"...": f"{len(value) - LIST_ITEMS_SHOWN} more entries"}
    return value


def _through(via: str) -> str:
    """How a host write reached a buffer, in words: ``through .np`` or ``.cpu``, or
    through memory the buffer's views do not record (a ``torch.from_numpy`` of it, a
    ctypes pointer: seen as changed values when the next copy or the call's end looks)."""
    if via == "untracked":
        return "through a view of its host memory that is not .np or .cpu"
    return f"through .{via}"


def check_inputs_unchanged(s, o, p):
    if not o.inputs_after or o.crashed is not None:
        return []
    declared = p.schema.mutations is not None
    if declared and not o.returned:
        return []       # a failed call may have mutated part of what it declares
    # without declared mutations: the inputs as given, compared without copying them
    expected = expected_inputs_after(p, s) if declared else _inputs_as_given(p, s)
    out = []
    for name, value in expected.items():
        after = o.inputs_after.get(name, value)
        if after != value:
            what = "does not hold what the declared mutation leaves" if declared else \
                "was mutated by the call"
            shown, left = input_difference(expected_inputs_after(p, s)[name], after)
            out.append(_finding("inputs_unchanged", f"{name} {what}", field=name,
                                expected=shown, candidate=left))
    for name, after in o.inputs_after.items():
        if "." in name and name not in expected:    # a holder's attribute (Builder.place)
            out.append(_finding("inputs_unchanged",
                                f"{name} was {after}: the engine's next step reads "
                                "what it left",
                                field=name, expected="unchanged", candidate=after))
    return out


def _inputs_as_given(p: TargetProfile, s: StagingScenario) -> dict:
    """``inputs_snapshot`` of ``s`` for comparing only: the scenario's own containers
    where the snapshot would copy them (an id set sorted, as the snapshot has it)."""
    return p.memo(s, "inputs_as_given", _as_given, per_schema=True)


def _as_given(profile: TargetProfile, s: StagingScenario) -> dict:
    out = {"req_ids": s.req_ids if type(s.req_ids) is list else list(s.req_ids)}
    for inp in profile.schema.inputs:
        if inp.kind in (FLAG, NUMBER) or inp.name not in s.inputs:
            continue
        value = s.inputs[inp.name]
        # a table or a per-slot list equals its snapshot (a copy, its lists copied)
        same = type(value) is (dict if inp.kind == PER_REQUEST else
                               list if inp.kind == PER_SLOT else None)
        out[inp.name] = value if same else _plain_input(inp.kind, value)
    return out


def check_no_copy_hazard(s, o, p):
    """One finding per buffer and kind of hazard, naming every slot of it the run raced on
    (the writes into one pending copy are one bug, whatever their number)."""
    groups: dict[tuple, list] = {}
    for e in o.hazards():
        if isinstance(e, Hazard):
            key = (e.region, e.kind)
        else:
            key = (e.buffer, "write-into-pending-copy" if isinstance(e, HostWrite)
                   else "stale-transfer")
        groups.setdefault(key, []).append(e)
    out = []
    for (buffer, kind), events in groups.items():
        e = events[0]
        if isinstance(e, HostWrite):
            written = sorted({i for w in events for i in w.slots})
            pending = sorted({i for w in events for i in (w.pending_slots or w.slots)})
            out.append(_finding("no_copy_hazard",
                                f"host write to {e.buffer} slots {written[:8]} "
                                f"{_through(e.via)} while a copy the host had not seen "
                                f"complete may still read slots {pending[:8]}",
                                field=_field_name(p, e.buffer), slot=pending[0],
                                extra={"kind": kind, "slots": pending}))
        elif isinstance(e, Hazard):
            slots = sorted({i for h in events for i in h.slots})
            out.append(_finding("no_copy_hazard",
                                f"{e.by} of {e.region} slots {slots[:8]} while "
                                f"{e.pending} was not seen complete",
                                field=e.region, slot=slots[0],
                                extra={"kind": kind, "slots": slots}))
        else:
            out.append(_finding("no_copy_hazard",
                                f"the device received {list(e.received)[:8]} for {e.buffer} "
                                f"slots {list(e.slots)[:8]}, the host held "
                                f"{list(e.queued)[:8]} when the copy was queued",
                                field=_field_name(p, e.buffer), slot=e.slots[0], view="gpu",
                                expected=list(e.queued), candidate=list(e.received),
                                extra={"kind": kind, "slots": list(e.slots)}))
    return out


def check_padded_read(s, o, p):
    if p.schema.num_reqs_is_len:
        return []
    reads = sorted(set(filter(s.num_reqs.__le__, o.req_ids_reads)))
    if not reads:
        return []
    return [Finding("padded_read", INFO,
                    f"read req_ids{reads[:8]} at or past num_reqs={s.num_reqs} (padded entries)",
                    slot=reads[0], extra={"slots": reads})]


def names_listed(names) -> str:
    """``names`` comma-separated, the first 8, then `` ...`` where there are more."""
    return ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")


def check_no_process_left(s, o, p):
    if not o.left_running:
        return []
    return [Finding("no_process_left", INFO,
                    f"left {len(o.left_running)} process(es) running when it returned "
                    f"({names_listed(o.left_running)}); stagecheck ended them",
                    extra={"processes": list(o.left_running)})]


def check_process_unchanged(s, o, p):
    if not o.changed:
        return []
    return [Finding("process_unchanged", INFO,
                    f"left {names_listed(o.changed)} rebound when it returned; stagecheck put "
                    f"{'it' if len(o.changed) == 1 else 'them'} back",
                    extra={"changed": list(o.changed)})]


INVARIANTS: tuple[Invariant, ...] = (
    Invariant("slot_alignment",
              "For every staged field and every slot i < num_reqs, slot i holds the value the "
              "schema derives from the inputs of r = req_ids[i].", check_slot_alignment),
    Invariant("tail_policy",
              "Slots >= num_reqs follow the buffer's tail policy: an untouched tail (every "
              "buffer not staged on the call included) is bit-identical to before the call in "
              "the CPU view and the GPU mirror, on success and on failure; a tail filled by "
              "design holds its fill value in every CPU slot after a successful call.",
              check_tail_policy),
    Invariant("mirror_consistency",
              "After the call and a device sync, the GPU mirror equals the CPU view over what "
              "the buffer's copy policy uploads ([0, num_reqs) or the whole buffer).",
              check_mirror_consistency),
    Invariant("copy_discipline",
              "Each staged buffer is copied as its copy policy says (once over [0, num_reqs), "
              "once whole, or never), after its last host write; a buffer that is not staged "
              "on the call is neither written nor copied.", check_copy_discipline),
    Invariant("missing_input",
              "A live request that lacks an input a staged field needs gets that field's "
              "missing-input policy: the declared exception (an AssertionError naming the "
              "request id, where the policy is an assertion; with several such requests, the "
              "id of any of them), raised before any copy of the field's buffer.",
              check_missing_input),
    Invariant("expected_outcome",
              "On an in-contract input where every live request has every input it needs, the "
              "call returns normally (no exception, no hang).", check_expected_outcome),
    Invariant("inputs_unchanged",
              "The inputs (scheduler output, requests, input batch, index dicts, req_ids) are "
              "not mutated, except as the schema declares; a declared mutation happens exactly "
              "as declared. The objects that hold them (the scheduler output, the buffers' "
              "owner) keep holding them: no attribute that held an input or a buffer is "
              "replaced or deleted.", check_inputs_unchanged),
    Invariant("no_copy_hazard",
              "No access races with a copy or device work that the host issued and has not "
              "seen complete (no synchronization, event or blocking operation ordered after "
              "it; the kinds of spec.observation.HAZARD_KINDS). Above all, no host write "
              "lands in slots that a host-to-device copy still reads: not even a write of an "
              "equal value, while a write of no element is no write; the finding names the "
              "slots the pending copy may read. Across engine steps, likewise, the host "
              "neither reads nor writes pinned slots a device-to-host copy has not yet "
              "written, no device work reads a mirror whose upload is pending, and no pinned "
              "memory is reused while a copy of it is. Every completed copy delivered the bytes "
              "the host held when it was issued. Only asynchronous copies (pinned memory on "
              "CUDA, or the CPU model of them) can violate it.",
              check_no_copy_hazard),
    Invariant("padded_read",
              "Entries of req_ids at and past num_reqs are not read (reported as info).",
              check_padded_read, always_info=True),
    Invariant("no_process_left",
              "The call leaves no process it started running when it returns (reported as "
              "info: no staged value depends on it, but an engine would leak a process per "
              "step; stagecheck ends such processes after each call).",
              check_no_process_left, always_info=True),
    Invariant("process_unchanged",
              "The call leaves the builtins of its process as it found them (reported as "
              "info: no staged value depends on it, but an engine would run every later "
              "step with the change; stagecheck puts them back after each call).",
              check_process_unchanged, always_info=True),
)
INVARIANTS_BY_ID = {inv.id: inv for inv in INVARIANTS}

#: What two runs of one scenario (baseline and candidate) must share, each stated once;
#: ``oracles/compare.py`` checks them, ``kernel_results`` is the kernel oracle's.
DIFFERENCES: dict[str, str] = {
    "same_outcome": "Both generations end the same way (return, or the same exception type); "
                    "a hang or an end of the process where the baseline ended its call is an "
                    "error on any input, in contract or not.",
    "same_message": "Both raise with the same message text (info: the contract is the type "
                    "and the request id).",
    "same_buffers": "Every CPU view and GPU mirror, live slots and tail, ends identical.",
    "same_copies": "Each buffer is copied over the same ranges.",
    "same_inputs_after": "The inputs look the same after both calls.",
    "same_fields": "Both stage the same fields (info where a generation adds or drops one).",
    "kernel_results": "The consumer (the postprocess kernel) gives bit-identical results on "
                      "both sides' mirrors.",
}


def statement(invariant: str) -> str:
    """The prose of an invariant or difference, by id ('' for an unknown id)."""
    inv = INVARIANTS_BY_ID.get(invariant)
    return inv.statement if inv else DIFFERENCES.get(invariant, "")


def check(s: StagingScenario, o: Observation, profile: TargetProfile, side: str = "candidate",
          in_contract: bool | None = None) -> list[Finding]:
    """Check one observed run against every invariant."""
    breaches = profile.breaches(s) if not in_contract else []
    if in_contract is None:
        in_contract = not breaches
    findings: list[Finding] = []
    for inv in INVARIANTS:
        if not in_contract and inv.id in ("expected_outcome", "missing_input"):
            continue   # the contract says nothing about the outcome of such inputs
        for f in inv.check(s, o, profile):
            extra = f.extra
            if not in_contract:
                extra = {**extra, "context": "out of contract: " + "; ".join(breaches[:2])}
            findings.append(replace(
                f, side=side, in_contract=in_contract, extra=extra,
                severity=INFO if inv.always_info or not in_contract else f.severity))
    return findings
