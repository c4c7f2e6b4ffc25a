"""A run that stopped (a hang, an end of the process) at step k never ran the steps after
it, so its shrunk sequence ends at step k: the table of a hang or crash found on an
8-step sequence shows the steps that ran, not 4 (was: a stopped run's 4 evaluations each
dropped one trailing step, 8 -> 4, and the table listed two steps that never ran)."""

from stagecheck.oracles.protocol.campaign import stopped_step
from stagecheck.oracles.protocol.shrink import shrink_sequence
from stagecheck.spec.findings import Finding
from stagecheck.spec.protocols import BUILTIN_PROTOCOLS
from stagecheck.spec.steps import Step, StepSequence


def _sequence(steps: int) -> StepSequence:
    protocol = BUILTIN_PROTOCOLS["condense-inflight-d2h"]
    first = {"id": "req-0", "prompt": 1, "temperature": 0.0, "prefix": 0}
    return StepSequence(protocol.name, capacity=1,
                        steps=[Step(joins=[first])] + [Step() for _ in range(steps - 1)])


def test_a_stopped_run_keeps_only_the_steps_that_ran_first():
    protocol = BUILTIN_PROTOCOLS["condense-inflight-d2h"]
    tried = []

    def still_fails(candidates):         # the run stops at step 1, whatever comes after
        tried.extend(len(c.steps) for c in candidates)
        return next((k for k, c in enumerate(candidates) if len(c.steps) >= 2), None)

    smallest, spent = shrink_sequence(protocol, _sequence(8), still_fails, max_evaluations=4,
                                      batch_size=1, reached=1)
    assert len(smallest.steps) == 2, tried
    assert tried[0] == 2 and spent <= 4


def test_without_a_stopping_step_nothing_is_cut_unasked():
    protocol = BUILTIN_PROTOCOLS["condense-inflight-d2h"]
    smallest, _ = shrink_sequence(protocol, _sequence(3), lambda cs: None, max_evaluations=4,
                                  batch_size=1, reached=None)
    assert len(smallest.steps) == 3


def test_the_stopping_step_is_the_last_step_a_stopped_finding_names():
    hang = Finding("step_outcome", "error", "step 1 (collect) hung", side="candidate",
                   extra={"kind": "hang", "step": 1, "operation": "collect"})
    crash = Finding("step_outcome", "error", "step 3 (execute) ended its process",
                    side="baseline", extra={"kind": "crash", "step": 3})
    race = Finding("no_copy_hazard", "error", "race", side="candidate", extra={"step": 6})
    assert stopped_step([hang, race]) == 1
    assert stopped_step([hang, crash]) == 3
    assert stopped_step([race]) is None
    whole = Finding("step_outcome", "error", "the run hung", side="candidate",
                    extra={"kind": "hang"})              # where it stopped is not known
    assert stopped_step([hang, whole]) is None


def test_a_process_ended_at_an_operation_lists_the_operations_that_returned_before_it():
    # an operation that ended its worker process (os._exit, a crash) left a table of one
    # row: the steps' operations before it, which returned, were missing (a hang's table,
    # whose worker reports its trace, lists them); their completion and copies in flight
    # are unknown (the process took them with it): "-" and "?"
    from stagecheck.oracles.protocol.campaign import BUSY, _stopped_trace
    from stagecheck.spec.protocol import Operation, Protocol
    protocol = Protocol(name="p", summary="", functions=("C",), component="C",
                        build=lambda ctx: None,
                        operations=(Operation("execute", lambda ctx: None),
                                    Operation("collect", lambda ctx: None,
                                              when=lambda step: step.index % 2 == 1)))
    seq = _sequence(3)
    # positions: build, (0 execute), (1 execute), (1 collect), (2 execute), end
    trace = _stopped_trace(protocol, seq, BUSY + 1 + 3, "ended its process (code 7)")
    assert [(op["step"], op["op"]) for op in trace.ops] == [(0, "execute"), (1, "execute"),
                                                            (1, "collect")]
    assert [op["outcome"] for op in trace.ops] == [None, None, "ended its process (code 7)"]
    assert trace.failed()["op"] == "collect"
    assert all(op["in_flight"] == "?" for op in trace.ops[:-1])
