"""The progress lines of ``diff`` and ``symbolic`` count the whole run (issue 23, item
10), through the command line in a subprocess (not a terminal: one plain line per
interval): ``diff`` counts both streams and the edge cases as one, and ends on
``finished: N/N`` with N every example it ran; ``symbolic`` counts the paths explored
while the worker explores, then the paths judged."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(r"^stagecheck (\w+): (finished: )?(?:([a-z ]+?) )?(\d+)(?:/(\d+))? (\w+)")


def _progress(*args: str) -> tuple[subprocess.CompletedProcess, list[tuple]]:
    env = {**os.environ, "STAGECHECK_PROGRESS_INTERVAL": "0.2"}
    done = subprocess.run([sys.executable, "-m", "stagecheck", *args], capture_output=True,
                          text=True, timeout=600, cwd=ROOT, env=env)
    lines = [m.groups() for m in map(LINE.match, done.stderr.splitlines()) if m]
    return done, lines


def test_diff_counts_both_streams_and_the_edge_cases_as_one(tmp_path):
    done, lines = _progress("diff", "legacy", "single-loop", "--examples", "2000",
                            "--save-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    totals = {int(total) for *_, total, _ in lines if total}
    assert totals == {2000 + 2000 + 100 + 100}, lines      # one total, the whole run
    final = lines[-1]
    assert final[1] == "finished: " and final[3] == final[4] == "4200", final
    counts = [int(count) for *_, count, _, _ in lines]
    assert counts == sorted(counts)                        # never back to 0 in a phase
    assert any(phase == "edge cases" for _, _, phase, *_ in lines[:-1]), lines


def test_symbolic_counts_the_paths_while_they_are_explored(tmp_path):
    done, lines = _progress("symbolic", "legacy", "single-loop", "--timeout", "12")
    assert done.returncode == 0, done.stderr
    exploring = [int(count) for _, final, phase, count, _, _ in lines
                 if phase == "exploring" and not final]
    assert exploring and max(exploring) > 0, lines         # not "0 paths" for the budget
    assert exploring == sorted(exploring)
    final = lines[-1]
    assert final[1] == "finished: " and final[3] == final[4], final
    assert int(final[3]) >= max(exploring)
    assert re.search(rf"finished: {final[3]}/{final[3]} paths, {final[3]} judged",
                     done.stderr)
