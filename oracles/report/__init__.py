"""The report stage: one renderer per format (text, JSON, JUnit XML, Markdown), replay
files, and a finding as a ready pytest test; ``escape`` makes echoed text safe in each,
``style`` decides and applies colour."""

from stagecheck.oracles.report.escape import escape
from stagecheck.oracles.report.json import json_document, render_json
from stagecheck.oracles.report.junit import render_junit
from stagecheck.oracles.report.markdown import render_markdown
from stagecheck.oracles.report.replay import DEFAULT_SAVE_DIR, load_replay, save_findings
from stagecheck.oracles.report.snippet import pytest_example
from stagecheck.oracles.report.finding_text import finding_lines, slot_table
from stagecheck.oracles.report.text import (render_bench, render_campaign, render_kernel,
                                            render_mutants, render_replay, render_symbolic)

__all__ = ["DEFAULT_SAVE_DIR", "escape", "finding_lines", "json_document", "load_replay",
           "pytest_example", "render_bench", "render_campaign", "render_json", "render_junit",
           "render_kernel", "render_markdown", "render_mutants", "render_replay",
           "render_symbolic", "save_findings", "slot_table"]
