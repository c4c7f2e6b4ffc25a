"""The compare stage: every difference between the baseline's and the candidate's run.

Severity of a difference: error on an in-contract input where both calls returned
normally (or where their outcomes differ); info on the contract's failure path (a
missing state index, where partial writes may differ), on inputs that should not
happen, where the two generations' contracts differ, and for a changed message text.
What each difference means is stated once, in ``spec.invariants.DIFFERENCES``.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import compress, count
from operator import ne

from stagecheck.oracles import messages
from stagecheck.spec import ERROR, INFO, Finding, Observation, StagingScenario, TargetProfile
from stagecheck.spec.invariants import input_difference


class _Absent:
    """A slot past the end of a view one side left shorter."""

    def __repr__(self) -> str:
        return "absent (its view is shorter)"


ABSENT = _Absent()

__all__ = ["STOPPED_WORDS", "compare", "ended", "known_stop", "outcome", "stopped_kind"]


def _copy_ranges(o: Observation, buffer: str) -> list[tuple[int, int]]:
    return [(c.start, c.stop) for c in o.copies(buffer)]


def compare(s: StagingScenario, a: Observation, b: Observation, pa: TargetProfile,
            pb: TargetProfile, in_contract: bool | None = None) -> list[Finding]:
    """Differences between baseline ``a`` and candidate ``b`` on scenario ``s``."""
    if in_contract is None:
        in_contract = not pa.breaches(s)
    out: list[Finding] = []
    # The two contracts can differ: e.g. with run_prefix_state_migration=False the later
    # generation does not need state indices, an older one does. Where one side's
    # missing-input policy applies and the other's does not, differences are info.
    missing_a, missing_b = pa.first_missing(s), pb.first_missing(s)
    contracts_differ = (missing_a is None) != (missing_b is None)
    both_returned = a.returned and b.returned
    context: list[str] = []        # why an info difference is allowed, made when needed

    def severity(strict: bool) -> str:
        return ERROR if in_contract and strict and not contracts_differ else INFO

    def add(inv: str, message: str, strict: bool, extra: dict | None = None,
            error: bool = False, **kw) -> None:
        """One difference; ``error``: an error even where the contract allows it (with
        why, as an info finding has)."""
        allowed = severity(strict) == INFO
        extra = dict(extra or {})
        if allowed and not context:
            context.append(_context(s, pa, pb, in_contract, contracts_differ, a, b))
        if allowed and context[0]:
            extra["context"] = context[0]
        out.append(Finding(inv, ERROR if error else severity(strict), message, side="both",
                           in_contract=in_contract, extra=extra, **kw))

    if (a.exception_type, a.timed_out, a.crashed) != (b.exception_type, b.timed_out, b.crashed):
        # a failure path may raise where the other raised nothing, never stall or end the
        # engine: a hang or an end of the process the baseline did not have is an error on
        # any input, shrunk as a stopped call is (its kind: by size, one try at a time)
        worse = ended(a) and not ended(b) and severity(True) == INFO
        add("same_outcome", f"baseline {outcome(a)}, candidate {outcome(b)}"
            + (messages.OUTCOME_WORSE_ON_ANY_INPUT if worse else ""), True,
            {"kind": stopped_kind([b])} if worse else None, error=worse,
            baseline=outcome(a), candidate=outcome(b))
    elif a.exception_message != b.exception_message:
        add("same_message", "same exception type, different message text (the contract is the "
            "type and the request id; logs matched on the text would change)", False,
            baseline=a.exception_message, candidate=b.exception_message)
    strict_state = both_returned
    # a call stopped by its deadline or the end of its process left no buffers, copies or
    # inputs to read (what its worker read back after its own timer stopped it is what
    # the call left halfway, not what it staged): same_outcome says it all
    stopped = a.timed_out or b.timed_out or a.crashed is not None or b.crashed is not None
    fields_a = {f.buffer for f in pa.staged_fields(s)}
    fields_b = {f.buffer for f in pb.staged_fields(s)}
    for buffer in sorted(fields_a ^ fields_b):
        who = "baseline" if buffer in fields_a else "candidate"
        name = pa.schema.field_of_buffer(buffer).name
        add("same_fields", f"only the {who} stages {name}{_flags(pa, s)}", False, field=name,
            extra={"kind": who})
    for buffer in sorted(fields_a & fields_b):
        name = pa.schema.field_of_buffer(buffer).name
        for view, va, vb in (("cpu", a.cpu.get(buffer), b.cpu.get(buffer)),
                             ("gpu", a.gpu.get(buffer), b.gpu.get(buffer))):
            if stopped or va is None or vb is None or va == vb:
                continue
            slots = list(compress(count(), map(ne, va, vb)))    # one C loop
            # a view one side left shorter (an array it put in place of the buffer's):
            # its slots past the shorter one differ too
            slots += range(min(len(va), len(vb)), max(len(va), len(vb)))
            i = slots[0]
            where = "live" if i < s.num_reqs else "tail"
            x, y = (va[i] if i < len(va) else ABSENT), (vb[i] if i < len(vb) else ABSENT)
            add("same_buffers", f"{view} {name}[{i}] ({where}): baseline {x!r}, candidate "
                f"{y!r}", strict_state, field=name, slot=i, view=view, baseline=x,
                candidate=y, extra={"slots": slots, "baseline_values": va,
                                    "candidate_values": vb})
        ra, rb = _copy_ranges(a, buffer), _copy_ranges(b, buffer)
        if ra != rb and not stopped:
            add("same_copies", f"{name} copied over {ra} by the baseline, {rb} by the candidate",
                strict_state, field=name, baseline=ra, candidate=rb)
    if a.inputs_after != b.inputs_after and not stopped:   # a stopped call left none to read
        keys = [k for k in a.inputs_after if a.inputs_after.get(k) != b.inputs_after.get(k)]
        for k in keys:
            base, cand = input_difference(a.inputs_after.get(k), b.inputs_after.get(k))
            add("same_inputs_after", f"{k} differs after the call", strict_state, field=k,
                baseline=base, candidate=cand)
    return out


def _flags(p: TargetProfile, s: StagingScenario) -> str:
    """The scenario's keyword flags, as `` (flag=value)`` (empty for a schema without)."""
    shown = [f"{k}={s.inputs[k]}" for k in p.schema.keywords if k in s.inputs]
    return f" ({', '.join(shown)})" if shown else ""


def _context(s: StagingScenario, pa: TargetProfile, pb: TargetProfile, in_contract: bool,
             contracts_differ, a: Observation, b: Observation) -> str:
    """Why a difference on this scenario is allowed (info), in one line."""
    missing = pa.first_missing(s) or pb.first_missing(s)
    failure = "" if not missing else (
        f"failure path: live request {missing[1]!r} (slot {missing[0]}) has no "
        f"{missing[2].missing.input}, so both raise and partial writes may differ")
    if not in_contract:
        # a missing input the targets do read explains a difference better than a breach
        # of an input they may not read at all: it comes first where there is one
        return "out of contract: " + "; ".join(([failure] if failure else []) +
                                               pa.breaches(s)[:2 - bool(failure)])
    if contracts_differ:
        return (f"the two contracts differ{_flags(pa, s)}: only one side needs "
                f"{missing[2].missing.input}")
    if failure or (a.returned and b.returned):
        return failure
    return (f"baseline {outcome(a)}, candidate {outcome(b)}: what a call that did not return "
            "left staged is not held to the other's (the outcome is the finding)")


def stopped_kind(observations) -> str | None:
    """"hang" if a call of ``observations`` hung, "crash" if one ended its process,
    else None."""
    if any(o.timed_out for o in observations):
        return "hang"
    if any(o.crashed is not None for o in observations):
        return "crash"
    return None


#: how a report names the calls of each stopped kind
STOPPED_WORDS = {"hang": "hung", "crash": "ended its process"}


def known_stop(findings: list[Finding], kind: str) -> list[Finding]:
    """``findings`` of an out-of-contract example whose call hung or ended its process
    (``kind``) after the in-contract stream found such a call, an error: the same error
    again, so its ``same_outcome`` is info, with why (one error per bug, shrunk once)."""
    return [replace(f, severity=INFO, message=f.message.removesuffix(
        messages.OUTCOME_WORSE_ON_ANY_INPUT), extra={**f.extra, "context": (
        f"{f.extra.get('context', 'out of contract')}; "
        + messages.KNOWN_STOP.format(what=STOPPED_WORDS[kind]))})
        if f.invariant == "same_outcome" and f.severity == ERROR
        and f.extra.get("kind") == kind else f for f in findings]


def ended(o: Observation) -> bool:
    """The call ended by itself: it returned or raised (no hang, its process alive)."""
    return not o.timed_out and o.crashed is None


def outcome(o: Observation) -> str:
    if o.timed_out:
        return "hung"
    if o.crashed is not None:
        return f"ended its process ({o.crashed})"
    if o.exception_type is None:
        return "returned"
    return f"raised {o.exception_type}"
