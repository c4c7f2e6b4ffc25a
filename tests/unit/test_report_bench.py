"""bench: the ratio column agrees with the medians beside it; the per-round ratio is shown
in its own, labelled column."""

from __future__ import annotations

import pathlib
import re

from stagecheck.oracles import messages
from stagecheck.oracles.bench import BenchResult, BenchRow
from stagecheck.oracles.cli import main
from stagecheck.oracles.report import render_bench

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "docs" / "examples"


def bench() -> BenchResult:
    # the case of the issue: medians 15.14 vs 15.23 µs, per-round median ratio 0.956
    rows = [BenchRow(1, 4.1e-6, 3.9e-6, 0.97, 0.95, 0.99, 40, 100),
            BenchRow(8, 15.14e-6, 15.23e-6, 0.956, 0.93, 1.02, 40, 30),
            BenchRow(64, 80.0e-6, 60.0e-6, 0.76, 0.74, 0.78, 40, 8),
            BenchRow(1024, 1500e-6, 1800e-6, 1.21, 1.18, 1.25, 20, 1)]
    return BenchResult("legacy", "single-loop", "cpu", rows, seconds=3.0, repeats=20,
                       min_time=0.5)


def table_rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("|")] for line in text.splitlines()
            if re.match(r"\s*\d+ \|", line)]


def test_ratio_column_agrees_with_the_medians_shown():
    text = render_bench(bench())
    rows = table_rows(text)
    assert len(rows) == 4
    for num_reqs, base, cand, ratio, per_round in rows:
        shown = float(cand) / float(base)
        assert abs(float(ratio) - shown) <= 0.002, (num_reqs, base, cand, ratio)
        # same direction: a ratio < 1 only when the candidate's median is smaller
        assert (float(ratio) < 1) == (float(cand) < float(base)), num_reqs
    eight = rows[1]
    assert eight[1:4] == ["15.14", "15.23", "1.006"]
    assert eight[4] == "0.956 (0.930..1.020)"


def test_the_report_says_how_each_ratio_is_computed():
    text = render_bench(bench())
    assert "ratio (candidate/baseline)" in text and "per-round ratio: median (IQR)" in text
    assert messages.BENCH_RATIOS in text
    data = bench().to_dict()
    assert data["rows"][1]["ratio_of_medians"] == 15.23e-6 / 15.14e-6
    assert data["rows"][1]["ratio"] == 0.956
    assert "ratio_of_medians" in data["ratio"]


def test_a_schema_without_a_bench_scenario_is_named_before_any_timing(capsys):
    # an audit: bench of the docs' worked example said "the baseline ... raised
    # StagecheckError: schema ... declares no bench scenario ... run 'stagecheck diff' to
    # see why", as if the staging function had raised
    target = f"{EXAMPLES}/sample_positions.py::stage_sample_positions"
    code = main(["bench", "--schema", f"{EXAMPLES}/sample_positions_schema.py", target,
                 target])
    err = capsys.readouterr().err
    assert code == 2
    problem, fix = messages.BENCH_NO_SCENARIO
    assert "option --schema: " + problem.format(schema="sample-positions",
                                                value=target) in err
    assert fix in err and "raised" not in err
