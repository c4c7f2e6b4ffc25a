"""An interrupt the checker passes on to a worker that is still starting (its handler for
``interrupt.FORWARDED`` not installed yet, so the signal ends it) is the interrupt, never
an end of the worker blamed on the code it was loading (was: "loading ... ended the worker
process: killed by SIGUSR1" before "interrupted by SIGINT", an audit of protocol runs)."""

import signal

import pytest

from stagecheck.oracles import interrupt
from stagecheck.oracles.worker.pool import WorkerPool


def test_an_interrupt_passed_to_a_worker_still_starting_is_the_interrupt_not_the_code():
    pool = WorkerPool()
    interrupt.reset()
    interrupt.request(signal.SIGINT)      # before the worker exists: told as it starts
    try:
        with pytest.raises(interrupt.Interrupted) as raised:
            pool.call("time", "sleep", 30.0, deadline=60.0)
        assert raised.value.signum == signal.SIGINT
    finally:
        interrupt.reset()
        pool.close()
