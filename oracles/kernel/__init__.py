"""The kernel oracles: the postprocess kernel's scenarios, its impact on a differential
run (oracle 2, ``impact.py``), and the kernel against its reference (oracle 1,
``campaign.py``). The kernel and its reference are code under test, in ``impl/``.

This module is the one place that decides how Triton runs: compiled where torch sees
a GPU, through Triton's interpreter (``TRITON_INTERPRET=1``) where it does not. That
must be decided before triton is first imported, so everything that runs the kernel
gets it through ``postprocess_function``.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Callable

from stagecheck.oracles import messages
from stagecheck.oracles.errors import StagecheckError

__all__ = ["postprocess_function", "require_kernel_backend", "select_triton_mode",
           "use_interpreter_without_gpu"]


def select_triton_mode(device: str) -> None:
    """Run the kernel through Triton's interpreter for ``device`` "cpu", compiled for
    "cuda" (a no-op once triton is loaded: it reads the variable at import)."""
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)


def use_interpreter_without_gpu() -> None:
    """Select Triton's interpreter where torch sees no GPU.

    An explicit ``TRITON_INTERPRET`` in the environment is left as the user set it.
    """
    import torch  # heavy: the kernel's torch loads when a kernel runs
    if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
        select_triton_mode("cpu")


def postprocess_function(backend: str) -> Callable:
    """The kernel's entry point for ``backend`` ("reference" needs no triton)."""
    backends = ("triton", "reference")
    if backend not in backends:
        raise ValueError(f"backend must be one of {backends}, got backend={backend!r}")
    if backend == "reference":
        from stagecheck.impl.postprocess_ref import mamba_postprocess_reference  # torch
        return mamba_postprocess_reference
    use_interpreter_without_gpu()
    try:
        # triton, after TRITON_INTERPRET is decided (above)
        from stagecheck.impl.postprocess import mamba_postprocess
    except ImportError as exc:
        raise StagecheckError.of(messages.TRITON_EXTRA_MISSING, what="the Triton kernel backend",
                                 error=f"{exc}", alternative=" (or use the reference "
                                 "backend)") from None

    def triton_postprocess(*args, **kwargs):
        return mamba_postprocess(*args, backend="triton", **kwargs)
    return triton_postprocess


def require_kernel_backend(options) -> None:
    """Before a run: the kernel backend ``options`` (``RunOptions``) will use can run,
    else a ``StagecheckError`` (exit 2) naming the backend, what failed and the fix.

    The reference backend is plain torch (a dependency); the Triton one imports triton
    and the kernel module here (the kernel oracle runs in this process), so a triton that is found but
    fails to import, or breaks the kernel's definition, stops the run before it starts
    rather than passing every example the kernel never ran on. ``--kernel off``: no check.
    """
    if options.kernel == "off":
        return
    backend = options.resolved_kernel_backend
    if backend != "triton":
        return      # the reference backend is plain torch, which every run imports
    if importlib.util.find_spec("triton") is None:
        postprocess_function("triton")       # not installed: the kernel extra's message
    try:
        use_interpreter_without_gpu()
        import triton  # noqa: F401  (found; does it import?)
        from stagecheck.impl.postprocess import mamba_postprocess  # noqa: F401
    except Exception as exc:     # anything the import of a broken install raises
        raise StagecheckError.of(messages.KERNEL_BACKEND_BROKEN, backend=backend,
                                 error=f"{type(exc).__name__}: {exc}") from None
