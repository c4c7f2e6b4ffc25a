"""What a protocol campaign's runs reached, beside their findings.

``note_forced`` counts the runs whose gates the CUDA backend's watchdog opened (their
copies completed earlier than the latest point). ``note_ran`` notes which operations and
device work each drawn sequence's runs ran, and ``never_ran`` names those of the protocol
that none ran: an operation whose ``when`` is false at every step drawn, or device work
no operation launched, was checked of nothing, so a clean verdict says nothing of it; the
reports (text, ``--json``'s ``never_ran``, ``protocol check``'s dry run) warn of it.
"""

from __future__ import annotations

from stagecheck.oracles import messages
from stagecheck.oracles.device.gate import STALLS_KEPT
from stagecheck.spec.protocol import Protocol, Trace
from stagecheck.spec.protocol_invariants import END_OF_RUN

__all__ = ["never_ran", "never_ran_lines", "note_forced", "note_ran"]


def note_forced(result, sides) -> None:
    """Count the runs of one sequence (``sides``: ``(meant, seen)`` per target) in which
    the CUDA backend's watchdog opened the gates, and keep the first places the host was
    (``Trace.forced``): a run there was checked with copies completing earlier than the
    latest point, so a race it holds may have gone unseen."""
    for _, wire in sides:    # the scheduled run: a run as meant closes no gate (and a
        _forced(result, Trace.from_wire(wire))   # race-free sequence sends its one run twice)


def _forced(result, trace: Trace) -> None:
    if trace.forced_count:
        result.gates_forced += 1
        result.stalls += [w for w in trace.forced if w not in result.stalls]
        del result.stalls[STALLS_KEPT:]


def note_ran(result, steps: int, sides) -> None:
    """Note a drawn sequence of ``steps`` steps: the operations (by name) and the device
    work (by path) that any run of it (``sides``: ``(meant, seen)`` per target) ran, and
    what ``note_forced`` notes of its scheduled runs (each run decoded once)."""
    result.steps_run += steps
    cut = True          # every run of it ended early (a raise or a hang, the build's too)
    for pair in sides:
        for k, wire in enumerate(pair):
            trace = Trace.from_wire(wire)
            if k == 1:                        # the scheduled run
                _forced(result, trace)
            cut = cut and (trace.stopped is not None or trace.failed() is not None)
            result.ran |= {("operation", op["op"]) for op in trace.ops
                           if isinstance(op.get("step"), int) and op["step"] >= 0
                           and op.get("op") != END_OF_RUN}
            result.ran |= {("device work", read["work"]) for read in trace.reads}
    if cut and sides:
        result.cut_short += 1


def never_ran(protocol: Protocol, result) -> dict:
    """``{"operations", "device_work", "sequences", "steps", "cut_short"}``: the
    operations and device work of ``protocol`` that no drawn sequence of ``result`` ran,
    how many sequences and steps were run (nothing is named before a sequence ran), and in
    how many of those sequences every run ended early (raised or hung)."""
    ran = result.ran if result.sequences_run else None

    def missing(kind: str, names) -> list[str]:
        return [] if ran is None else [n for n in names if (kind, n) not in ran]

    return {"operations": missing("operation", [op.name for op in protocol.operations]),
            "device_work": missing("device work", list(protocol.device_work)),
            "sequences": result.sequences_run, "steps": result.steps_run,
            "cut_short": result.cut_short}


def never_ran_lines(never: dict | None, run: str = "run",
                    reached: str = messages.PROTOCOL_NEVER_REACHED) -> list[str]:
    """One warning line per operation or device work ``never`` (``never_ran``) names;
    ``run``: how the sequences were run (``run``, ``of the dry run``); ``reached``: the
    why of one that every run ended before (where the findings that say why are)."""
    if not never:
        return []
    # every sequence's runs ended early: what never ran was not reached (was: "make its
    # when true", when the build raised in every run)
    cut = 0 < never["sequences"] == never.get("cut_short", 0)
    return [messages.PROTOCOL_NEVER_RAN.format(
        what=what, name=name, sequences=never["sequences"], steps=never["steps"], run=run,
        why=reached if cut else messages.PROTOCOL_NEVER_RAN_WHY[what])
        for what, key in (("operation", "operations"), ("device work", "device_work"))
        for name in never.get(key, ())]
