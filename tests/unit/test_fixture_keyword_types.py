"""The fixture's own keywords of the wrong type fail the test naming the keyword, its value
and the fix, before anything runs: ``strict="no"`` was true (the test failed on info
findings, "--strict: info counts"), and ``shims="tools/shim.py"`` was read letter by
letter ("shim '/' does not exist")."""

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.pytest_plugin import StagecheckFixture


def _failure(call) -> str:
    with pytest.raises(pytest.fail.Exception) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize("value", ["no", 1, None])
@pytest.mark.parametrize("method", ["assert_equivalent", "assert_conforms", "assert_protocol"])
def test_strict_must_be_true_or_false(method, value):
    fixture = StagecheckFixture()
    args = {"assert_equivalent": ("legacy", "single-loop"), "assert_conforms": ("legacy",),
            "assert_protocol": ("legacy", "input-prep-event")}[method]
    said = _failure(lambda: getattr(fixture, method)(*args, examples=3, strict=value))
    assert said == "stagecheck: " + messages.FIXTURE_STRICT_TYPE.format(value=value)


@pytest.mark.parametrize("method", ["run", "assert_protocol"])
def test_one_shim_given_as_text_is_named_with_the_list_to_write(method):
    fixture = StagecheckFixture()
    if method == "run":
        call = lambda: fixture.run("legacy", "single-loop", examples=3, shims="tools/shim.py")  # noqa: E731
    else:
        call = lambda: fixture.assert_protocol("legacy", "input-prep-event", examples=3,  # noqa: E731
                                               shims="tools/shim.py")
    said = _failure(call)
    assert said == "stagecheck: " + messages.FIXTURE_SHIMS_TYPE.format(value="tools/shim.py")
    assert "'/'" not in said


def test_shims_that_are_no_paths_are_refused():
    said = _failure(lambda: StagecheckFixture().run("legacy", "single-loop", examples=3,
                                                    shims=[1]))
    assert said == "stagecheck: " + messages.FIXTURE_SHIMS_TYPE.format(value=[1])
