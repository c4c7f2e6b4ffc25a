"""Target files are read as Python reads source files."""

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.errors import TargetLoadError
from stagecheck.oracles.targets import MAX_SOURCE_BYTES, decode_source, read_file_target


def test_a_pep_263_declaration_and_a_bom_are_honoured():
    assert "café" in decode_source("# -*- coding: latin-1 -*-\nx = 'café'\n".encode("latin-1"),
                                   "f.py", "f.py::f")
    assert decode_source(b"\xef\xbb\xbfx = 1\r\n", "f.py", "f.py::f") == "x = 1\n"


@pytest.mark.parametrize("data, template", [
    (b"x = '\xe9'\n", messages.TARGET_UNDECODABLE),
    (b"# coding: no-such-codec\nx = 1\n", messages.TARGET_UNDECODABLE),
    (b"\x7fELF\x00\x01", messages.TARGET_BINARY),
    (b"#" * (MAX_SOURCE_BYTES + 1), messages.TARGET_TOO_LARGE),
])
def test_a_file_python_cannot_read_is_a_load_error_naming_it(data, template):
    with pytest.raises(TargetLoadError) as info:
        decode_source(data, "some/file.py", "some/file.py::f")
    assert "'some/file.py'" in info.value.problem
    assert info.value.fix.startswith(template[1].split("{")[0])


def test_a_folder_given_as_a_file_target_says_so(tmp_path):
    (tmp_path / "pkg.py").mkdir()
    with pytest.raises(TargetLoadError, match="is a folder"):
        read_file_target(f"{tmp_path / 'pkg.py'}::f")
