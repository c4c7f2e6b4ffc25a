"""torch imported by a call without the call's time limit running (oracles/device/torchload)."""

import subprocess
import sys
import textwrap

import pytest

from stagecheck.oracles.errors import UsageError
from stagecheck.oracles.targets import load_target
from stagecheck.oracles.worker.pool import WorkerEnded, WorkerPool

SCRIPT = textwrap.dedent("""
    import signal, sys, time
    assert "torch" not in sys.modules
    from stagecheck.oracles.device.torchload import import_torch

    def expire(signum, frame):
        raise TimeoutError("the call's time limit")

    signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, 0.02)   # far less than a first import of torch
    started = time.perf_counter()
    torch = import_torch()
    took = time.perf_counter() - started
    left = signal.getitimer(signal.ITIMER_REAL)[0]
    assert hasattr(torch, "Tensor") and torch.zeros(2).tolist() == [0.0, 0.0]
    assert took > 0.02, took                      # the limit would have fired without it
    assert 0 < left <= 0.02, left                 # and the call gets back what was left
    try:
        time.sleep(0.5)
    except TimeoutError:
        print("limit kept")
    assert import_torch() is torch
""")


def test_a_first_import_of_torch_neither_is_cut_off_nor_uses_the_calls_time():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "limit kept"


def test_a_workers_own_import_of_torch_inside_a_call_is_not_timed_as_the_call():
    """The checker's deadline for a call pauses while the worker imports torch for its own
    first use inside the call (oracles/worker/pool.py, ``protocol.UNTIMED``): the import
    takes about a second of CPU, ten times the deadline here, and a worker that never
    needs torch never imports it."""
    legacy = load_target("legacy")         # its file never names torch
    pool = WorkerPool()
    try:
        pool.load([legacy.ref], {legacy.ref.schema: legacy.schema})
        with pytest.raises(WorkerEnded) as ended:   # the deadline holds in this pool ...
            pool.call("time", "sleep", 2.0, deadline=0.1)
        assert ended.value.hung
        try:                 # ... and the first use of the device imports torch inside it
            pool.call("stagecheck.oracles.observe.call", "require_device", "cuda",
                      deadline=0.1)
        except UsageError as refused:                 # no GPU here: the call's own answer
            assert "cuda" in str(refused)
    finally:
        pool.close()
