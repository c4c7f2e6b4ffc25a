"""How much memory code under test may take: a worker in all, and one call of schema or
protocol code in the checker (``guard.MEMORY_MIB``). Standard library only."""

from __future__ import annotations

import os

__all__ = ["DEFAULT_MEMORY_MIB", "default_memory_mib"]

#: memory a worker may hold: resident bytes (checked by the parent from ``/proc``, so
#: shared mappings count too) and its data segment (``RLIMIT_DATA``, set in the worker)
DEFAULT_MEMORY_MIB = 4096


def default_memory_mib() -> int:
    """``DEFAULT_MEMORY_MIB``, or ``STAGECHECK_MEMORY_MIB`` (a machine with less memory)."""
    given = os.environ.get("STAGECHECK_MEMORY_MIB", "")
    return int(given) if given.isdigit() and int(given) >= 64 else DEFAULT_MEMORY_MIB
