"""``schema = "tools/schema.py"`` in ``[tool.stagecheck]`` is taken from the
pyproject.toml's folder, as ``save-dir`` and ``shims`` are: run from a subfolder (where
the file is still found, upwards) it was taken from the current folder and the run
stopped with "schema file 'tools/schema.py' does not exist". A built-in name stays a name."""

import os

import pytest

from stagecheck.oracles.config import load_config


@pytest.mark.parametrize("value, expected", [
    ("tools/schema.py", "{root}/tools/schema.py"),
    ("tools/schema.py:OTHER", "{root}/tools/schema.py:OTHER"),
    ("mamba-all-specdec", "mamba-all-specdec"),
    ("/abs/schema.py", "/abs/schema.py"),
])
def test_a_schema_file_of_the_table_is_taken_from_its_folder(tmp_path, value, expected):
    (tmp_path / "pyproject.toml").write_text(f'[tool.stagecheck]\nschema = "{value}"\n')
    (tmp_path / "sub").mkdir()
    config = load_config(str(tmp_path / "sub"))
    assert config.values["schema"] == expected.format(root=tmp_path)
    assert os.path.isabs(config.values["schema"]) == (value != "mamba-all-specdec")
