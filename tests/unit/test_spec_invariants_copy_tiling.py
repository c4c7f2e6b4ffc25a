"""A copy split into adjacent copies that cover the expected range once is said so."""

from stagecheck.spec.invariants import _tiled


def test_adjacent_copies_covering_the_range_once_are_said_to_tile_it():
    assert "together they copy (0, 5) exactly" in _tiled([(0, 2), (2, 5)], [(0, 5)])
    assert "split into 3 copies" in _tiled([(2, 5), (0, 1), (1, 2)], [(0, 5)])


def test_overlapping_short_or_empty_copies_are_not():
    assert _tiled([(0, 3), (2, 5)], [(0, 5)]) == ""       # slot 2 twice
    assert _tiled([(0, 2), (3, 5)], [(0, 5)]) == ""       # slot 2 never
    assert _tiled([(0, 5), (0, 5)], [(0, 5)]) == ""       # a double copy
    assert _tiled([(0, 0), (0, 0)], [(0, 0)]) == ""       # nothing to tell apart
    assert _tiled([(0, 5)], [(0, 5)]) == ""
