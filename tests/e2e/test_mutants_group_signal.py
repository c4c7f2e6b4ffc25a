"""``mutants --jobs 2`` stopped by a signal to its whole process group (what ``timeout``
and a terminal's Ctrl-C send), or by a pool process killed from outside: the pool's
processes end at once, maybe before the parent's handler has run, and the pool breaks
(``BrokenProcessPool``). The group signal is an interrupt (exit 143, the partial matrix
saved), the kill from outside is no verdict (exit 2, ``MUTANTS_POOL_ENDED``); neither is
an internal error, and no process outlives the run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from stagecheck.oracles import messages
from tests.e2e.test_hostile import (ROOT, _assert_none_outlive, _descendants, _read_pipes,
                                   _wait_for)

MUTANT_LINE = re.compile(r"\[\d+/\d+\] m\d+ ")


def _pool_processes(parent: int) -> list[int]:
    """The ``--jobs`` pool's processes: the parent's children started by multiprocessing's
    spawn (not its resource tracker)."""
    out = []
    for pid in _descendants(parent):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().replace(b"\0", b" ")
            with open(f"/proc/{pid}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except OSError:
            continue
        if ppid == parent and b"spawn_main" in args:
            out.append(pid)
    return out


@pytest.mark.parametrize("how", ["group-sigterm", "pool-process-killed"])
def test_mutants_with_jobs_stopped_from_outside_is_never_an_internal_error(tmp_path, how):
    proc = subprocess.Popen([sys.executable, "-m", "stagecheck", "mutants", "legacy", "--jobs",
                             "2", "--budget", "10", "--json", "m.json"], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    # one reader per pipe: communicate() beside a thread reading stderr took its last
    # lines under load
    lines, printed, readers = _read_pipes(proc)
    seen: set[int] = set()

    def one_mutant_finished():
        """a mutant's line of the matrix on stderr, and the pool running"""
        seen.update(_descendants(proc.pid))
        return any(MUTANT_LINE.match(line) for line in lines) and _pool_processes(proc.pid)
    _wait_for(one_mutant_finished, 600)     # the event, not a time
    assert proc.poll() is None, "the campaign ended before the signal; give it more budget"
    if how == "group-sigterm":
        os.killpg(proc.pid, signal.SIGTERM)
    else:
        os.kill(_pool_processes(proc.pid)[0], signal.SIGKILL)
    proc.wait(timeout=120)
    for reader in readers:
        reader.join(timeout=30)
    out, err = "".join(printed), "".join(lines)
    assert "internal error" not in err and "Traceback" not in out + err, err[-2000:]
    if how == "group-sigterm":
        assert proc.returncode == 143, err[-2000:]
        assert "interrupted by SIGTERM" in err
        document = json.loads((tmp_path / "m.json").read_text())
        assert document["verdict"] == "interrupted"
    else:
        assert proc.returncode == 2, err[-2000:]
        assert messages.MUTANTS_POOL_ENDED[0].format(jobs=2) in err
    _assert_none_outlive(seen, proc.pid)
