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
``process.py`` (one worker process seen from the parent), ``deadlines.py`` (how long a
call, a batch and loading may take), ``pool.py`` (the parent's pool: requests, the
deadlines enforced, the restart policy), ``blame.py`` (which call a worker's end is
blamed on: the runs again of an ended batch, and ``WorkerDied`` for an end between calls),
``later.py`` (what the code under test left that could end its worker after the run,
asked at ``stop``) and ``stream.py`` (batches spread over pools, answered in order). This face only names
what they offer.
"""

from __future__ import annotations

import importlib as _importlib

#: each name this face offers -> the module of the package that defines it, imported on
#: first use: a worker can be started (``process.prestart``) before the pool and what it
#: imports (targets, observe, the spec) are loaded
_OFFERED = {"DEFAULT_MEMORY_MIB": "protocol", "WorkerEnded": "pool", "WorkerError": "pool",
            "WorkerPool": "pool", "kill_all": "process", "stream_batches": "stream",
            "target_arg": "protocol"}

__all__ = ["DEFAULT_MEMORY_MIB", "WorkerEnded", "WorkerError", "WorkerPool", "kill_all",
           "stream_batches", "target_arg"]


def __getattr__(name: str):
    module = _OFFERED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
