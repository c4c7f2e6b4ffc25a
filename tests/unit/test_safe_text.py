"""Text a target chose (exception messages) reaches reports only escaped and bounded."""

from stagecheck.oracles.observe import MAX_EXCEPTION_TEXT, exception_text, printable


def test_control_characters_are_escaped_but_newlines_and_tabs_kept():
    assert printable("a\x1b[31mb\x07\x00") == "a\\x1b[31mb\\x07\\x00"
    assert printable("line\n\tnext") == "line\n\tnext"
    assert printable("bidi\u202eoverride") == "bidi\\u202eoverride"


def test_an_exception_whose_str_raises_gives_a_note():
    class Bad(Exception):
        def __str__(self):
            raise RuntimeError("no")
    assert exception_text(Bad()) == "<str() of the exception raised RuntimeError>"


def test_an_exception_holding_an_object_whose_repr_raises_gives_a_note():
    class NoRepr:
        def __repr__(self):
            raise ValueError("no")
    assert "raised ValueError" in exception_text(KeyError(NoRepr()))


def test_a_huge_message_is_cut_and_says_how_much_was_left_out():
    text = exception_text(ValueError("x" * (MAX_EXCEPTION_TEXT + 500)))
    assert text.endswith("... (500 more)") and len(text) < MAX_EXCEPTION_TEXT + 20
