"""``--junit-xml -`` and ``--markdown -`` write their document to stdout alone, as ``--json -``
does (the text report goes to stderr): the text report was printed after the XML on
stdout, so ``stagecheck diff A B --junit-xml - > report.xml`` wrote a file no XML parser
reads ("junk after document element")."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.helpers import run_stagecheck


@pytest.mark.parametrize("option", ["--junit-xml", "--markdown"])
def test_a_report_on_stdout_is_alone_there(option):
    proc = run_stagecheck("diff", "legacy", "single-loop", "--examples", "3", option, "-",
                          "--no-save", timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert "tried 3 in-contract" not in proc.stdout, proc.stdout
    assert "tried 3 in-contract" in proc.stderr, proc.stderr
    if option == "--junit-xml":
        ET.fromstring(proc.stdout)          # the whole of stdout is the XML document
    else:
        assert proc.stdout.startswith("## stagecheck diff"), proc.stdout[:200]
