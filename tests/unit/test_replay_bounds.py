"""Replay files are untrusted input: bounded, and they run only code the user chose."""

import json

import pytest

from stagecheck.oracles.errors import ScenarioError, UsageError
from stagecheck.oracles.report.replay import REPLAY_VERSION, check_trusted, load_replay
from stagecheck.oracles.targets import repository_root
from tests.helpers import scenario


def _write(tmp_path, scenario_dict, **fields):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"baseline": "legacy", "candidate": "single-loop",
                                "finding": {"scenario": scenario_dict}, **fields}))
    return str(path)


def test_a_saved_scenario_loads(tmp_path):
    saved, s = load_replay(_write(tmp_path, scenario().to_dict()))
    assert s.capacity == 6 and saved["candidate"] == "single-loop"


@pytest.mark.parametrize("change, why", [
    ({"capacity": 10**7}, "capacity=10000000"),
    ({"capacity": 1.5}, "capacity=1.5"),
    ({"capacity": "6"}, "capacity='6'"),
    ({"num_reqs": 10**30}, "num_reqs="),
    ({"num_reqs": 7}, "more than capacity"),
    ({"req_ids": ["r"] * 100_000}, "100,000 entries"),
    ({"initial_cpu": {"x": [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]}}, "nested"),
    ({"initial_gpu": {"x": [2**70]}}, "outside int64"),
    ({"req_ids": ["req-a\x1b[2J"]}, "control characters"),
])
def test_out_of_bounds_scenarios_are_refused_before_anything_is_built(tmp_path, change, why):
    data = {**scenario().to_dict(), **change}
    with pytest.raises(ScenarioError, match=why.replace("(", r"\(").replace("*", r"\*")):
        load_replay(_write(tmp_path, data))


@pytest.mark.parametrize("version", [1, REPLAY_VERSION])
def test_the_formats_this_stagecheck_wrote_load(tmp_path, version):
    _, s = load_replay(_write(tmp_path, scenario().to_dict(), stagecheck_replay=version))
    assert s.capacity == 6


@pytest.mark.parametrize("version, said, fix", [
    (REPLAY_VERSION + 1, f'was written by a newer stagecheck: its "stagecheck_replay" is '
                         f'{REPLAY_VERSION + 1}, and this one reads formats 1 to {REPLAY_VERSION}',
     "upgrade stagecheck"),
    (0, 'holds "stagecheck_replay": 0, which is not a format number',
     f'set "stagecheck_replay" to {REPLAY_VERSION}'),
    ("2", 'holds "stagecheck_replay": "2", which is not a format number', "or remove the key"),
    (None, 'holds "stagecheck_replay": null, which is not a format number', "format this"),
    (True, 'holds "stagecheck_replay": true, which', "format this"),
])
def test_a_replay_file_of_a_format_this_stagecheck_does_not_read_is_refused(tmp_path, version,
                                                                             said, fix):
    path = _write(tmp_path, scenario().to_dict(), stagecheck_replay=version)
    with pytest.raises(ScenarioError) as info:
        load_replay(path)
    assert said in str(info.value) and repr(path) in str(info.value)
    assert fix in info.value.fix and "ValueError" not in str(info.value)


def test_deep_json_nesting_is_a_malformed_file_not_a_traceback(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ScenarioError, match="nested too deeply"):
        load_replay(str(path))


def test_targets_outside_the_repository_are_refused_unless_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)            # not a git repository: the folder is the boundary
    assert repository_root() == str(tmp_path.resolve())
    inside = {"baseline": "legacy", "candidate": f"{tmp_path}/t.py::f"}
    check_trusted(inside, "r.json")
    for outside in ({"candidate": "/elsewhere/t.py::f"}, {"candidate": "os:system"},
                    {"candidate": "git:HEAD:/elsewhere/t.py::f"},
                    {"shims": ["/elsewhere/shim.py"]}):
        with pytest.raises(UsageError, match="--baseline|--shim") as info:
            check_trusted({**inside, **outside}, "r.json")
        assert "does not run code a replay file chose" in str(info.value)
    check_trusted({**inside, "candidate": "os:system"}, "r.json", candidate="legacy")
    check_trusted({**inside, "shims": ["/elsewhere/shim.py"]}, "r.json", shims_given=True)


def test_a_schema_file_a_replay_file_names_runs_only_when_the_command_line_names_it(
        tmp_path, monkeypatch):
    """A schema file is code the checker runs: inside the repository or not, a replay file
    cannot make the checker run it (issue 21)."""
    monkeypatch.chdir(tmp_path)
    for schema in (f"{tmp_path}/s.py", f"{tmp_path}/s.py:S", "/elsewhere/s.py:S"):
        saved = {"baseline": "legacy", "candidate": "single-loop", "schema": schema}
        with pytest.raises(UsageError, match="--schema") as info:
            check_trusted(saved, "r.json")
        assert "runs none that a replay file names" in str(info.value)
        check_trusted(saved, "r.json", schema_given=True)
    check_trusted({"baseline": "legacy", "candidate": "single-loop",
                   "schema": "mamba-postprocess"}, "r.json")


def test_text_outside_the_scenario_is_escaped_when_loaded(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"baseline": "legacy", "candidate": "single-loop",
                                "finding": {"scenario": scenario().to_dict(),
                                            "id": "x\x1b[31m", "message": "m\x1b]0;t\x07"}}))
    saved, _ = load_replay(str(path))
    assert saved["finding"]["id"] == "x\\x1b[31m"
    assert saved["finding"]["message"] == "m\\x1b]0;t\\x07"
    assert saved["finding"]["scenario"]["req_ids"] == scenario().req_ids


def test_the_paths_a_replay_file_runs_are_kept_as_saved(tmp_path):
    # a target file named with an escape or a byte that is not UTF-8 is a real file the
    # saving run ran: escaped when read, the finding named no file and could not be replayed
    named = ("evil\x1b[31m.py::f", "b\udcfe.py::f")
    path = _write(tmp_path, scenario().to_dict(), baseline=named[0], candidate=named[1],
                  shims=["s\x1b.py"], schema="k\udcff.py")
    saved, _ = load_replay(path)
    assert (saved["baseline"], saved["candidate"]) == named
    assert saved["shims"] == ["s\x1b.py"] and saved["schema"] == "k\udcff.py"
