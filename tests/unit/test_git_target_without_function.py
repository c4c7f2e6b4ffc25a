"""A git target that names a file but no function (``git:HEAD:f.py``) says to add one to
that target: the fix was "write 'path/to/file.py::function' or 'package.module:function'",
which drops the revision."""

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.errors import TargetLoadError
from stagecheck.oracles.targets.target import split_git_spec


@pytest.mark.parametrize("spec", ["git:HEAD:vllm/mamba_utils.py", "git:main:f.py:"])
def test_a_git_target_without_a_function_says_to_add_one(spec):
    with pytest.raises(TargetLoadError) as info:
        split_git_spec(spec)
    said = str(info.value)
    assert messages.GIT_NO_FUNCTION[1].format(value=spec.rstrip(":")) in said, said
    assert "package.module:function" not in said
