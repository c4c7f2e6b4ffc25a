"""Parts of a protocol declaration of the wrong type are each named with their value and
a fix (``check_protocol``), never taken as something else: a ``StepSpace(dummy="no")``
would turn dummy steps on, a ``name`` that is a number is not "empty", a ``checks`` that
is no tuple is not ``checks[0] None``, and a missing ``summary`` would print as None."""

import dataclasses

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.protocol.problems import check_protocol
from stagecheck.spec.protocol import Operation, Protocol, StepSpace


def _protocol(**changes):
    good = Protocol(name="p", summary="s", functions=("C",), component="C",
                    build=lambda ctx: None, operations=(Operation("run", lambda ctx: None),))
    assert check_protocol(good) == []
    return dataclasses.replace(good, **changes)


def test_name_that_is_no_text_is_named_as_such():
    problems = check_protocol(_protocol(name=123))
    assert problems == [messages.PROTOCOL_PROBLEM_NAME.format(value=123)]
    assert "is empty" not in problems[0] and "123" in problems[0]


@pytest.mark.parametrize("summary", [None, 5, ("a",)])
def test_summary_must_be_text(summary):
    assert check_protocol(_protocol(summary=summary)) == [
        messages.PROTOCOL_PROBLEM_SUMMARY.format(value=summary)]


@pytest.mark.parametrize("checks", ["x", None, [1]])
def test_checks_that_are_no_tuple_are_named_with_their_value(checks):
    assert check_protocol(_protocol(checks=checks)) == [
        messages.PROTOCOL_PROBLEM_CHECKS.format(value=checks)]


@pytest.mark.parametrize("part", ["dummy", "preemption"])
@pytest.mark.parametrize("value", ["no", 0, 1, None])
def test_step_space_flags_must_be_bools(part, value):
    space = StepSpace(**{part: value})
    assert check_protocol(_protocol(space=space)) == [
        messages.PROTOCOL_PROBLEM_FLAG.format(part=part, value=value)]
