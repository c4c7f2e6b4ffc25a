"""The budget line of ``mutants`` names the budgets of the oracles that ran only: with
``--oracles spec,differential`` it said "symbolic 160 paths per mutant (... at most 60 s)",
a budget nothing spent, and with ``--oracles symbolic`` "30 examples per stream (spec,
differential)"."""

import pytest

from stagecheck.oracles.mutants.matrix import MutationReport
from stagecheck.oracles.report.text import render_mutants


def _budget_line(oracles):
    report = MutationReport(target="t.py::f", filename="t.py", function="f",
                            oracles=list(oracles), budget=30, symbolic_timeout=60.0,
                            symbolic_paths=160)
    return render_mutants(report).splitlines()[1]


def test_example_oracles_alone_say_no_symbolic_budget():
    line = _budget_line(["spec", "differential"])
    assert line.startswith("budget 30 examples per stream (spec, differential);"), line
    assert "symbolic" not in line and "paths" not in line


def test_symbolic_alone_says_no_example_budget():
    line = _budget_line(["symbolic"])
    assert line.startswith("budget symbolic 160 paths per mutant"), line
    assert "examples per stream" not in line


@pytest.mark.parametrize("oracles, streams", [(["spec"], "(spec)"),
                                              (["differential", "kernel"], "(differential)")])
def test_the_streams_named_are_the_oracles_selected(oracles, streams):
    line = _budget_line(oracles)
    assert f"examples per stream {streams}" in line, line


def test_every_oracle_keeps_both_budgets():
    line = _budget_line(["spec", "differential", "symbolic"])
    assert "30 examples per stream (spec, differential), symbolic 160 paths per mutant" in line
