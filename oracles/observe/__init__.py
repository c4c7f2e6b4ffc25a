"""The run/observe stage: call one target on a fresh build of a scenario, see everything.

One ``observe`` serves every oracle. What differs is the buffer backend the inputs
are built on:

- ``instrumented`` (``observe/instrumented.py``): torch ``CpuGpuBuffer``s whose host
  writes and copies are logged, on CPU or CUDA (the fuzzer, replays, the kernel oracle);
- ``listmodel`` (``observe/listmodel.py``): pure-Python lists with numpy/torch element
  semantics, which CrossHair can reason about (the symbolic oracle, the contract models).

Both log the same ``spec.observation`` events, so one ``Observation`` comes out.

The package's modules: ``build.py`` (the ``Builder`` a schema's ``build`` uses, and the
``Backend`` protocol), ``plain.py`` (what a call left in an input, read back as plain
data), ``call.py`` (``observe``: one call under a time limit),
``backends.py`` (``make_backend``: which backend a call is built on) and one module per
backend. This face only names what they offer.
"""

from __future__ import annotations

from stagecheck.oracles.observe.backends import make_backend
from stagecheck.oracles.observe.build import Backend, Builder, RecordingList, build_inputs
from stagecheck.oracles.observe.call import CallTimedOut, observe, require_device
from stagecheck.oracles.observe.plain import plain
from stagecheck.oracles.text import MAX_EXCEPTION_TEXT, exception_text, printable

__all__ = ["Backend", "Builder", "CallTimedOut", "MAX_EXCEPTION_TEXT", "RecordingList",
           "build_inputs", "exception_text", "make_backend", "observe", "plain", "printable",
           "require_device"]
