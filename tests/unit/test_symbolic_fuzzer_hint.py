"""symbolic's UNDECIDED verdict names a ``stagecheck diff`` that runs as printed: with the
run's --schema and --shim (an audit: for a target only a schema file describes, the printed
command lacked --schema and was exit 2, 'no built-in schema describes function ...')."""

from types import SimpleNamespace

from stagecheck.oracles import messages
from stagecheck.oracles.commands.symbolic import diff_flags
from stagecheck.oracles.report import render_symbolic


def undecided(baseline="a.py::f", candidate="b.py::f"):
    return SimpleNamespace(
        baseline=baseline, candidate=candidate, paths_explored=9, paths_unsupported=0,
        paths_timed_out=0, paths_ignored=0, seconds=1.0, exhausted=False, max_paths=None,
        paths_concretized=9, first_counterexample_seconds=None, errors=[], infos=[],
        verdict=lambda strict: "undecided")


def test_the_flags_are_the_runs_schema_and_shims_quoted():
    assert diff_flags(None, ()) == ""
    assert diff_flags("my schema.py", ("s1.py", "s 2.py")) == \
        " --schema 'my schema.py' --shim s1.py --shim 's 2.py'"


def test_the_suggested_diff_carries_them():
    text = render_symbolic(undecided(), flags=diff_flags("s.py:NAME", ("x.py",)))
    line = messages.SYMBOLIC_UNDECIDED.format(paths=9, infos=0, baseline="a.py::f",
                                              candidate="b.py::f",
                                              flags=" --schema s.py:NAME --shim x.py")
    assert line in text
    assert text.rstrip().endswith("stagecheck diff a.py::f b.py::f --schema s.py:NAME "
                                  "--shim x.py")
