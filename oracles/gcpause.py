"""How the cyclic garbage collector runs while stagecheck makes many short-lived objects.

A search (the checker) and a batch of calls (the worker) each make hundreds of thousands
of short-lived containers: scenarios, request objects, tables, observations. With the
default thresholds the collector would walk every long-lived object (numpy, torch,
hypothesis, the targets) again and again. ``fewer_collections`` freezes what exists when
the work starts and collects the young generation less often; nested uses are one.
Standard library only.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager

__all__ = ["YOUNG_THRESHOLD", "fewer_collections"]

#: allocations between two collections of the young generation while the work runs
YOUNG_THRESHOLD = 50_000
_DEPTH = [0]


@contextmanager
def fewer_collections():
    """Freeze the objects that exist now and collect the young generation every
    ``YOUNG_THRESHOLD`` allocations, until the outermost use ends."""
    if _DEPTH[0]:
        _DEPTH[0] += 1
        try:
            yield
        finally:
            _DEPTH[0] -= 1
        return
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(threshold[0], YOUNG_THRESHOLD), *threshold[1:])
    _DEPTH[0] = 1
    try:
        yield
    finally:
        _DEPTH[0] = 0
        gc.set_threshold(*threshold)
        gc.unfreeze()
