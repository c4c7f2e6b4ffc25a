"""The worker's shared position counter leaves nothing in the temporary folder: its file
is unlinked as it is made (the worker inherits the descriptor), so a checker killed
mid-run leaves no file behind (it left one per worker before)."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")

CHECKER = textwrap.dedent("""
    import os, sys
    from stagecheck.oracles.worker.process import WorkerProcess
    worker = WorkerProcess(1024)
    worker.ends_within(0.5)           # the keeper started its worker
    names = [os.readlink(f"/proc/{worker.process.pid}/fd/{fd}")
             for fd in os.listdir(f"/proc/{worker.process.pid}/fd")]
    print(sum("stagecheck-worker-" in name for name in names), len(os.listdir(sys.argv[1])),
          flush=True)
    os._exit(0)                       # as a kill would: no cleanup runs
""")


def test_a_killed_checker_leaves_no_counter_file(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", CHECKER, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # the keeper holds the counter's descriptor (it passes it on to the worker) ...
    # ... yet no file of it is in the folder, during the run (0) or after it
    assert done.stdout.split() == ["1", "0"], done.stdout
    assert [p.name for p in tmp_path.iterdir()] == []
