"""torch imported by a call without the call's time limit running (oracles/device/torchload)."""

import subprocess
import sys
import textwrap

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
