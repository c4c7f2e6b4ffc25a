"""The invariants of host-side staging, each stated once: in prose and as a check.

Every oracle (spec, differential, kernel, symbolic, mutants) uses these
statements; none restates them. A check takes the scenario, what one target was
observed to do, and the target's profile, and returns findings (empty = holds).
Severity follows the contract: a violation on an in-contract input is an error,
on an input that should not happen it is info. ``padded_read`` is always info.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable

from stagecheck.spec.findings import ERROR, INFO, Finding
from stagecheck.spec.observation import HostWrite, Observation
from stagecheck.spec.scenario import (StagingScenario, contract_breaches, first_missing_state_index,
                           initial_values)
from stagecheck.spec.schema import FIELDS_BY_BUFFER, TargetProfile


@dataclass(frozen=True)
class Invariant:
    id: str
    statement: str
    check: Callable[[StagingScenario, Observation, TargetProfile], list[Finding]]
    always_info: bool = False


def _same(a, b) -> bool:
    return (bool(a) == bool(b)) if isinstance(a, bool) or isinstance(b, bool) else a == b


def _first_diff(xs: list, ys: list) -> list[int]:
    return [i for i, (x, y) in enumerate(zip(xs, ys)) if not _same(x, y)]


def _finding(inv: str, message: str, **kw) -> Finding:
    return Finding(invariant=inv, severity=ERROR, message=message, **kw)


def check_expected_outcome(s, o, p):
    if o.timed_out:
        return [_finding("expected_outcome", "the call did not return within the time limit (hang)",
                         extra={"kind": "hang"})]
    if first_missing_state_index(s, p) is None and not o.returned:
        return [_finding("expected_outcome",
                         f"raised {o.exception_type}: {o.exception_message} on an input where "
                         "every live request has a state index",
                         extra={"kind": "unexpected-exception"})]
    return []


def check_missing_index_assertion(s, o, p):
    missing = first_missing_state_index(s, p)
    if missing is None or o.timed_out:
        return []
    slot, req_id = missing
    out = []
    if o.returned:
        out.append(_finding("missing_index_assertion",
                            f"returned normally although live request {req_id!r} (slot {slot}) "
                            "has no state index", slot=slot, extra={"kind": "no-raise"}))
        return out
    if not o.raised("AssertionError"):
        out.append(_finding("missing_index_assertion",
                            f"raised {o.exception_type} instead of AssertionError for missing "
                            f"state index of {req_id!r}", slot=slot,
                            expected="AssertionError", extra={"kind": "wrong-type"}))
    elif not names_request(o.exception_message or "", req_id):
        out.append(_finding("missing_index_assertion",
                            f"AssertionError message {o.exception_message!r} does not name the "
                            f"request id {req_id!r}", slot=slot, extra={"kind": "message"}))
    if o.copies("mamba_state_idx_buf"):
        out.append(_finding("missing_index_assertion",
                            "the state-index buffer was copied to the device before the "
                            f"assertion for {req_id!r} was raised", field="state_idx",
                            slot=slot, extra={"kind": "copied-before-raise"}))
    return out


def names_request(message: str, req_id: str) -> bool:
    """Whether ``message`` names ``req_id`` as a whole token ('req-1' is not in 'req-12')."""
    return re.search(r"(?<![\w-])" + re.escape(req_id) + r"(?![\w-])", message) is not None


def check_slot_alignment(s, o, p):
    if not o.returned:
        return []
    out = []
    live = s.live_ids
    for f in p.staged_fields(s.run_prefix_state_migration):
        values = o.cpu.get(f.buffer)
        if values is None:
            continue
        bad, expected_at = [], {}
        for i, r in enumerate(live[: len(values)]):
            try:
                want = f.derive(s, r)
            except KeyError:
                continue
            if not _same(values[i], want):
                bad.append(i)
                expected_at[i] = want
        if bad:
            i = bad[0]
            out.append(_finding("slot_alignment",
                                f"{f.name}[{i}] holds {values[i]!r}, expected {f.derivation} = "
                                f"{expected_at[i]!r} for request {live[i]!r}",
                                field=f.name, slot=i, view="cpu", candidate=values[i],
                                expected=expected_at[i],
                                extra={"slots": bad, "values": values}))
    return out


def check_no_tail_write(s, o, p):
    out = []
    n = max(s.num_reqs, 0)
    for buffer in p.buffers():
        for view, final in (("cpu", o.cpu), ("gpu", o.gpu)):
            if buffer not in final:
                continue
            before = initial_values(s, buffer, view)
            bad = [n + i for i in _first_diff(final[buffer][n:], before[n:])]
            if bad:
                i = bad[0]
                out.append(_finding("no_tail_write",
                                    f"{view} tail slot {i} of {buffer} changed from "
                                    f"{before[i]!r} to {final[buffer][i]!r}",
                                    field=_field_name(buffer), slot=i, view=view,
                                    expected=before[i], candidate=final[buffer][i],
                                    extra={"slots": bad}))
    return out


def check_mirror_consistency(s, o, p):
    if not o.returned:
        return []
    out = []
    n = s.num_reqs
    for f in p.staged_fields(s.run_prefix_state_migration):
        if f.buffer not in o.cpu or f.buffer not in o.gpu:
            continue
        bad = _first_diff(o.gpu[f.buffer][:n], o.cpu[f.buffer][:n])
        if bad:
            i = bad[0]
            out.append(_finding("mirror_consistency",
                                f"gpu {f.name}[{i}] = {o.gpu[f.buffer][i]!r} but cpu holds "
                                f"{o.cpu[f.buffer][i]!r}", field=f.name, slot=i, view="gpu",
                                expected=o.cpu[f.buffer][i], candidate=o.gpu[f.buffer][i],
                                extra={"slots": bad}))
    return out


def check_copy_discipline(s, o, p):
    if not o.returned:
        return []
    out = []
    n = s.num_reqs
    staged = p.staged_fields(s.run_prefix_state_migration)
    for f in staged:
        copies = o.copies(f.buffer)
        ranges = [(c.start, c.stop) for c in copies]
        if len(copies) != 1 or ranges[0] != (0, n):
            out.append(_finding("copy_discipline",
                                f"{f.name} copied {len(copies)} time(s) over {ranges}; expected "
                                f"exactly once over [0, {n})", field=f.name,
                                expected=[(0, n)], candidate=ranges, extra={"kind": "range"}))
            continue
        step = o.last_step
        position = step.index(copies[0])
        late = [e for e in step[position + 1:]
                if isinstance(e, HostWrite) and e.buffer == f.buffer]
        if late:
            out.append(_finding("copy_discipline",
                                f"{f.name} written through .{late[0].via} at slots "
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
                                f"{buffer} must not be staged with "
                                f"run_prefix_state_migration={s.run_prefix_state_migration}, "
                                f"but it was {'copied' if o.copies(buffer) else 'written'}",
                                field=_field_name(buffer), extra={"kind": "not-staged"}))
    return out


def check_inputs_unchanged(s, o, p):
    if not o.inputs_after:
        return []
    before = inputs_snapshot(s)
    out = []
    for name, value in before.items():
        after = o.inputs_after.get(name)
        if after != value:
            out.append(_finding("inputs_unchanged", f"{name} was mutated by the call",
                                field=name, expected=value, candidate=after))
    return out


def check_no_copy_hazard(s, o, p):
    out, seen = [], set()
    for e in o.hazards():
        kind = "write-into-pending-copy" if isinstance(e, HostWrite) else "stale-transfer"
        if (e.buffer, kind) in seen:
            continue
        seen.add((e.buffer, kind))
        if isinstance(e, HostWrite):
            out.append(_finding("no_copy_hazard",
                                f"host write to {e.buffer} slots {list(e.slots)[:8]} through "
                                f".{e.via} while a queued copy of those slots had not executed",
                                field=_field_name(e.buffer), slot=(e.slots or (None,))[0],
                                extra={"kind": kind}))
        else:
            out.append(_finding("no_copy_hazard",
                                f"the device received {list(e.received)[:8]} for {e.buffer} "
                                f"slots {list(e.slots)[:8]}, the host held "
                                f"{list(e.queued)[:8]} when the copy was queued",
                                field=_field_name(e.buffer), slot=e.slots[0], view="gpu",
                                expected=list(e.queued), candidate=list(e.received),
                                extra={"kind": kind}))
    return out


def check_padded_read(s, o, p):
    reads = sorted({i for i in o.req_ids_reads if i >= s.num_reqs})
    if not reads:
        return []
    return [Finding("padded_read", INFO,
                    f"read req_ids{reads[:8]} at or past num_reqs={s.num_reqs} (padded entries)",
                    slot=reads[0], extra={"slots": reads})]


def inputs_snapshot(s: StagingScenario) -> dict:
    """The inputs as plain data, the way ``Observation.inputs_after`` records them."""
    return {
        "req_ids": list(s.req_ids),
        "num_scheduled_tokens": dict(s.num_scheduled_tokens),
        "scheduled_spec_decode_tokens": {k: list(v) for k, v in s.spec_decode_tokens.items()},
        "requests": {r: [s.num_computed_tokens[r], s.num_prompt_tokens.get(r)]
                     for r in s.num_computed_tokens},
        "mamba_state_idx": dict(s.mamba_state_idx),
    }


def _field_name(buffer: str) -> str:
    f = FIELDS_BY_BUFFER.get(buffer)
    return f.name if f else buffer


INVARIANTS: tuple[Invariant, ...] = (
    Invariant("slot_alignment",
              "For every staged field and every slot i < num_reqs, slot i holds the value "
              "derived from req_ids[i] (see spec.schema.FIELDS).", check_slot_alignment),
    Invariant("no_tail_write",
              "CPU views and GPU mirrors at slots >= num_reqs are bit-identical to before the "
              "call, on success and on failure.", check_no_tail_write),
    Invariant("mirror_consistency",
              "After the call and a device sync, gpu[:num_reqs] == cpu[:num_reqs] for every "
              "staged buffer.", check_mirror_consistency),
    Invariant("copy_discipline",
              "Each staged buffer is copied exactly once, over [0, num_reqs), after its last "
              "host write; a buffer the generation does not stage is neither written nor "
              "copied.", check_copy_discipline),
    Invariant("missing_index_assertion",
              "A live request without a state index raises AssertionError whose message names "
              "the request id, and no copy of the state-index buffer has been issued when it "
              "is raised.", check_missing_index_assertion),
    Invariant("expected_outcome",
              "On an in-contract input where every live request has a state index, the call "
              "returns normally (no exception, no hang).", check_expected_outcome),
    Invariant("inputs_unchanged",
              "The scheduler output, the request states, mamba_state_idx and req_ids are not "
              "mutated.", check_inputs_unchanged),
    Invariant("no_copy_hazard",
              "No host write lands in a range whose queued host-to-device copy has not yet "
              "executed (even a write of an equal value), and every completed copy delivered "
              "the bytes the host held when it was queued. Only asynchronous copies (pinned "
              "memory on CUDA, or the CPU model of them) can violate it.",
              check_no_copy_hazard),
    Invariant("padded_read",
              "Entries of req_ids at and past num_reqs are not read (reported as info).",
              check_padded_read, always_info=True),
)
INVARIANTS_BY_ID = {inv.id: inv for inv in INVARIANTS}

#: What two runs of one scenario (baseline and candidate) must share, each stated once;
#: ``oracles/compare.py`` checks them, ``kernel_results`` is the kernel oracle's.
DIFFERENCES: dict[str, str] = {
    "same_outcome": "Both generations end the same way (return, or the same exception type).",
    "same_message": "Both raise with the same message text (info: the contract is the type "
                    "and the request id).",
    "same_buffers": "Every CPU view and GPU mirror, live slots and tail, ends identical.",
    "same_copies": "Each buffer is copied over the same ranges.",
    "same_inputs_after": "The inputs look the same after both calls.",
    "same_fields": "Both stage the same fields (info where a generation adds or drops one).",
    "kernel_results": "The postprocess kernel gives bit-identical results on both sides' "
                      "mirrors.",
}


def statement(invariant: str) -> str:
    """The prose of an invariant or difference, by id ('' for an unknown id)."""
    inv = INVARIANTS_BY_ID.get(invariant)
    return inv.statement if inv else DIFFERENCES.get(invariant, "")


def check(s: StagingScenario, o: Observation, profile: TargetProfile, side: str = "candidate",
          in_contract: bool | None = None) -> list[Finding]:
    """Check one observed run against every invariant."""
    breaches = contract_breaches(s)
    if in_contract is None:
        in_contract = not breaches
    findings: list[Finding] = []
    for inv in INVARIANTS:
        if not in_contract and inv.id in ("expected_outcome", "missing_index_assertion"):
            continue   # the contract says nothing about the outcome of such inputs
        for f in inv.check(s, o, profile):
            extra = f.extra
            if not in_contract:
                extra = {**extra, "context": "out of contract: " + "; ".join(breaches[:2])}
            findings.append(replace(
                f, side=side, in_contract=in_contract, extra=extra,
                severity=INFO if inv.always_info or not in_contract else f.severity))
    return findings
