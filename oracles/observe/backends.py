"""Which buffer backend one call is built on: the factory beside the backends it makes.

``fast`` (``fast.py``): plain numpy buffers on the CPU, reused pinned buffers on CUDA,
copies logged; ``instrumented`` (``instrumented.py``): torch buffers whose every host
write and copy is logged, with the CPU model of deferred copies. The backends import
numpy and torch; this module imports them only when a backend is made, and torch for
the observe stage's CUDA questions only when one is asked (``torch_module``): the
observe stage's one boundary to its heavy libraries. A CPU run on the fast backend never
imports torch, the list backend (CrossHair) neither numpy nor torch.
"""

from __future__ import annotations

from stagecheck.oracles.device.torchload import import_torch
from stagecheck.oracles.options import RunOptions

__all__ = ["backend_kind", "make_backend", "torch_module"]


def make_backend(kind: str, options: RunOptions):
    """The buffers of one call: ``fast`` (plain numpy buffers on the CPU, reused pinned
    buffers on CUDA) or ``instrumented`` (every write and copy logged)."""
    if backend_kind(kind, options) == "fast":
        from stagecheck.oracles.observe.fast import FastBackend, FastCudaBackend  # numpy
        return FastCudaBackend() if options.device == "cuda" else FastBackend()
    from stagecheck.oracles.observe.instrumented import InstrumentedBackend  # torch
    return InstrumentedBackend(options.device, options.deferred_copies)


def backend_kind(backend: str, options: RunOptions) -> str:
    """The fast backend where it was asked for and sees what matters (real copies, not
    the CPU model of asynchronous ones), else the instrumented one."""
    return "fast" if backend == "fast" and not options.deferred_copies else "instrumented"


def torch_module():
    """torch, imported on first use (seconds; a CPU run on the fast backend never needs it),
    untimed (``torchload.import_torch``)."""
    return import_torch()
