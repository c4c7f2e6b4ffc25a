"""A shim that replaces the same-module Triton kernel of ``next_positions.py`` with a
reference in plain torch, launched the way Triton launches (``kernel[grid](...)``):
the file then runs without Triton's interpreter (or without triton installed)."""

__all__ = ["_next_position_kernel"]


def _next_positions(grid, positions, out, n, BLOCK):
    out[:n] = positions[:n] + 1


class _Launcher:
    """``kernel[grid](*args)`` calls the reference with the grid first."""

    def __init__(self, reference):
        self.reference = reference

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.reference(grid, *args, **kwargs)


_next_position_kernel = _Launcher(_next_positions)
