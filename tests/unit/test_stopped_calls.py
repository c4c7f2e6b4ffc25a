"""A call that hung or ended its process (docs/reliability.md, "What a stopped call
costs"): judged by its outcome alone, never by the buffers its worker read back after
stopping it; and the progress line's time left is not extrapolated from the waits for
such calls."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest

from stagecheck.oracles.compare import stopped_kind
from stagecheck.oracles.evaluate import evaluate, judge, stopped
from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.progress import STILL_SECONDS, Progress
from stagecheck.oracles.runner import InProcessRunner
from stagecheck.oracles.sample import sample_scenario
from stagecheck.oracles.targets import load_target
from stagecheck.spec import Observation
from stagecheck.spec.schemas import BUILTIN_SCHEMAS


def _scenario():
    schema = BUILTIN_SCHEMAS["mamba-postprocess"]
    for index in range(200):
        s = sample_scenario(schema, 0, index, 8, 2)
        legacy = load_target("legacy")
        if s.num_reqs >= 2 and not legacy.profile.breaches(s) \
                and legacy.profile.first_missing(s) is None:
            return s
    raise AssertionError("no in-contract scenario with live requests")


def test_a_call_the_worker_timer_stopped_is_judged_by_its_outcome_alone():
    """Its buffers as the target left them halfway (here: untouched) were compared with
    the baseline's, as in-contract info findings whose reason was the invariant's text."""
    legacy = load_target("legacy")
    s = _scenario()
    runner = InProcessRunner([legacy, legacy])
    done = evaluate(legacy, legacy, s, RunOptions(kernel="off"), runner=runner)
    a = done.baseline
    untouched = {name: list(values) for name, values in s.initial_cpu.items()}
    hung = replace(a, exception_type="CallTimedOut", exception_message=None, timed_out=True,
                   cpu=untouched, gpu={k: list(v) for k, v in s.initial_gpu.items()})
    findings = judge(s, legacy, legacy, a, hung)
    assert {(f.invariant, f.severity) for f in findings} == {
        ("expected_outcome", "error"), ("same_outcome", "error")}, findings
    assert stopped(hung).cpu == {} and stopped(hung).gpu == {}
    assert stopped(a) is a                          # a call that returned is as it was
    crashed = replace(a, crashed="killed by SIGSEGV", exception_type="ProcessEnded")
    assert not [f for f in judge(s, legacy, legacy, a, crashed)
                if f.invariant in ("same_buffers", "same_copies", "same_inputs_after")]


def test_stopped_kind():
    assert stopped_kind([Observation.of_hang()]) == "hang"
    assert stopped_kind([Observation.of_crash("killed by SIGSEGV")]) == "crash"
    fine = Observation(None, None, {}, {})
    assert stopped_kind([fine, fine]) is None


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_time_left_leaves_out_the_waits_for_calls_that_hung():
    """16 examples in 0.5 s, then a call that hung for 15 s: the rest goes at the pace
    of the 0.5 s (was: 16 examples per 15.5 s, hours left for 614 examples)."""
    out, clock = io.StringIO(), Clock()
    progress = Progress("diff", "examples", 630, stream=out, tty=False, every=1.0,
                        delay=0.0, clock=clock)
    clock.now += 0.5
    progress.update(16, 630)
    clock.now += 15.0
    progress.update(17, 630, stalled=15.0)
    assert out.getvalue().splitlines()[-1].endswith("15.5 s elapsed, ~18.0 s left")


def test_no_time_left_while_nothing_advances():
    out, clock = io.StringIO(), Clock()
    progress = Progress("diff", "examples", 630, stream=out, tty=False, every=1.0,
                        delay=0.0, clock=clock)
    clock.now += 1.0
    progress.update(10, 630)
    assert "left" in out.getvalue().splitlines()[-1]
    clock.now += STILL_SECONDS + 1.0          # a call's deadline, a shrinker's tries
    progress.update(10, 630)
    assert "left" not in out.getvalue().splitlines()[-1]


def test_time_a_call_waited_for_a_cpu_does_not_count_toward_its_wall_clock(monkeypatch):
    # a worker's own wall-clock limit (3 x the CPU one) fired on a loaded machine while a
    # correct 1,024-slot call of the CPU model waited for a CPU: a hang, a false DIFFERENT
    import time

    from stagecheck.oracles.observe import call
    started = time.monotonic()
    monkeypatch.setattr(call, "thread_waited", lambda: time.monotonic() - started)   # all waited
    monkeypatch.setattr(call, "_WAITED_READ", [float("-inf"), 0.0])   # no figure read yet
    with call.time_limit(0.1):          # 0.1 s of CPU, 0.3 s on the wall clock
        time.sleep(0.7)                 # no CPU: only the wall clock could end it
    monkeypatch.setattr(call, "thread_waited", lambda: 0.0)                       # none waited
    monkeypatch.setattr(call, "_WAITED_READ", [float("-inf"), 0.0])
    with pytest.raises(call.CallTimedOut):
        with call.time_limit(0.1):
            time.sleep(0.7)
    assert call._WALL[2] == 0.0 and call.thread_waited() >= 0.0


def test_the_kernel_says_how_long_this_process_waited_for_a_cpu():
    from stagecheck.oracles.observe import call
    first = call.thread_waited()
    assert first >= 0.0 and call.thread_waited() >= first
