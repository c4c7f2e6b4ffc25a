"""Docs generated from the code stay in step with it."""

import pathlib

from stagecheck.spec.__main__ import render

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_spec_page_is_what_python_m_spec_prints():
    assert (ROOT / "docs" / "spec.md").read_text() == render(), \
        "docs/spec.md is stale: run 'python -m stagecheck.spec > docs/spec.md'"


def test_readme_quickstart_is_two_commands_and_ci_runs_the_second():
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Quickstart")[1].split("```bash")[1].split("```")[0]
    commands = [line for line in block.strip().splitlines() if line.strip()]
    assert len(commands) == 2
    assert "stagecheck diff legacy single-loop" in commands[0]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert commands[0] in ci and commands[1] in ci
