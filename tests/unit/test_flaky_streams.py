"""A hypothesis stream that hypothesis calls flaky passes only where the failure that made
it so was an error finding the stream recorded (an audit: a failure of stagecheck's own,
caused by a target that broke its worker, was swallowed as flaky and the run passed)."""

from hypothesis.errors import FlakyFailure

from stagecheck.oracles.campaign_hypothesis import _other_failure


class Found(Exception):
    """Stands for the stream's own error-found exception."""


def test_a_flaky_error_finding_is_let_pass():
    assert _other_failure(FlakyFailure("flaky", [Found()]), Found) is None


def test_any_other_failure_behind_flaky_is_raised_again():
    broken = RuntimeError("stagecheck failed inside its worker")
    assert _other_failure(FlakyFailure("flaky", [Found(), broken]), Found) is broken
    chained = FlakyFailure("flaky", [Found()])
    chained.__cause__ = broken
    assert _other_failure(chained, Found) is broken
