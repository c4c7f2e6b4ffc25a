"""Colour rules: on a terminal, off when piped, NO_COLOR honoured, --color decides."""

from __future__ import annotations

import io

import pytest

from stagecheck.oracles import cli
from stagecheck.oracles.report.style import COLOR_CHOICES, colorize, paint, use_color


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class Closed(io.StringIO):
    def isatty(self) -> bool:
        raise ValueError("I/O operation on closed file")


@pytest.mark.parametrize("choice, stream, environ, expected", [
    ("auto", Tty(), {}, True),                       # a terminal
    ("auto", io.StringIO(), {}, False),              # piped / redirected / captured
    ("auto", Tty(), {"NO_COLOR": "1"}, False),       # NO_COLOR, any non-empty value
    ("auto", Tty(), {"NO_COLOR": "no"}, False),
    ("auto", Tty(), {"NO_COLOR": ""}, True),         # empty: not set
    ("auto", Tty(), {"TERM": "dumb"}, False),
    ("auto", Closed(), {}, False),
    ("auto", object(), {}, False),                   # no isatty at all
    ("always", io.StringIO(), {"NO_COLOR": "1"}, True),   # an explicit flag wins
    ("never", Tty(), {}, False),
    # FORCE_COLOR (force-color.org), as pytest reads it: set and non-empty forces colour
    ("auto", io.StringIO(), {"FORCE_COLOR": "1"}, True),      # piped, in CI
    ("auto", io.StringIO(), {"FORCE_COLOR": "0"}, True),      # any non-empty value
    ("auto", io.StringIO(), {"FORCE_COLOR": ""}, False),      # empty: not set
    ("auto", Tty(), {"FORCE_COLOR": "1", "TERM": "dumb"}, True),
    ("auto", Closed(), {"FORCE_COLOR": "1"}, True),
    ("auto", io.StringIO(), {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),  # NO_COLOR wins
    ("never", Tty(), {"FORCE_COLOR": "1"}, False),            # an explicit flag wins
])
def test_use_color_rules(choice, stream, environ, expected):
    assert use_color(choice, stream, environ) is expected


def test_unknown_choice_is_an_error_and_the_cli_offers_the_same_choices():
    with pytest.raises(ValueError):
        use_color("sometimes", Tty(), {})
    (color,) = [a for a in cli.build_parser()._subparsers._group_actions[0].choices["diff"]
                ._actions if "--color" in a.option_strings]
    assert tuple(color.choices) == COLOR_CHOICES


def test_colorize_touches_only_the_verdict_and_the_section_headers():
    text = "\n".join(["stagecheck: a vs b on cpu", "verdict: DIFFERENT — 1 error",
                      "", "ERRORS (spec violations)", "  verdict: inside a finding stays",
                      "INFO (differences)", "  1 × reason"])
    out = colorize(text).split("\n")
    assert out[0] == "stagecheck: a vs b on cpu"
    assert out[1] == paint("verdict: DIFFERENT — 1 error", "red")
    assert out[3] == paint("ERRORS (spec violations)", "red")
    assert out[5] == paint("INFO (differences)", "cyan")
    assert out[6] == "  1 × reason"
    assert colorize("verdict: EQUIVALENT — x").startswith("\x1b[1;32m")
    assert colorize("verdict: UNDECIDED on 3 path(s)").startswith("\x1b[1;33m")
    assert colorize(text, on=False) == text
    assert "\x1b" not in colorize(text, on=False)
