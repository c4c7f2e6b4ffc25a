"""Worker processes: code under test runs here, the checker in the parent.

A worker loads the targets (module imports, a file's module-level names: everything
a target's loading executes), builds each scenario's inputs, calls the targets and
sends back what it observed as plain data (``Observation``). The parent checks and
compares. Anything a target does to its own process ends at most its worker: an
exit (``SystemExit`` is caught in the worker; ``os._exit`` ends it), a fatal signal,
a memory blow-up past the worker's limit, closing or writing into the pipe. The
parent sees the worker end, reports that example's call as ``Observation.of_crash``
("exited the interpreter with code 0", "killed by SIGSEGV", "exceeded 4096 MiB"),
starts a fresh worker and goes on. Hangs are enforced from the parent: a call that
has not returned within its time limit (plus a grace period) gets its worker killed,
whatever the target does to signals, threads or exceptions.

The protocol is request/response over a ``multiprocessing`` pipe: the parent sends
``(command, payload)``; the worker answers ``("ok", result)`` or ``("error", text)``
for a failure of stagecheck's own machinery. During a batch, the worker writes the
position it is at (example and side) into a shared counter, so the parent knows
which call crashed or hung.

The package, by side of the pipe: ``child.py`` (the worker process;
``python -m stagecheck.oracles.worker`` starts it, ``__main__.py``), ``protocol.py``
(what both sides share: the position encoding, the memory exit code, target arguments),
``process.py`` (one worker process seen from the parent), ``pool.py`` (the parent's
pool: requests, deadlines, the restart policy) and ``stream.py`` (batches spread over
pools, answered in order). This face only names what they offer.
"""

from __future__ import annotations

from stagecheck.oracles.worker.pool import (DEFAULT_MEMORY_MIB, WorkerEnded, WorkerError,
                                            WorkerPool)
from stagecheck.oracles.worker.process import kill_all
from stagecheck.oracles.worker.protocol import target_arg
from stagecheck.oracles.worker.stream import stream_batches

__all__ = ["DEFAULT_MEMORY_MIB", "WorkerEnded", "WorkerError", "WorkerPool", "kill_all",
           "stream_batches", "target_arg"]
