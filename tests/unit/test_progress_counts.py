"""Progress counts and rates cover the whole run (issue 23, item 10): a campaign's
streams and edge cases are one count, a part that runs short leaves the total, the
rate is over the whole run, a time-bounded part says the time it has left."""

from __future__ import annotations

import io

from stagecheck.oracles.campaign import edge_examples, progress_plan
from stagecheck.oracles.options import CampaignConfig
from stagecheck.oracles.progress import PartsCount, Progress


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_the_campaign_plan_is_both_streams_then_their_edge_cases():
    config = CampaignConfig.from_options(examples=300)
    assert edge_examples(config) == 15
    assert progress_plan(config) == [("random in", 300), ("random out", 300),
                                     ("edge in", 15), ("edge out", 15)]
    assert progress_plan(CampaignConfig.from_options(examples=300, out_of_contract=False)) \
        == [("random in", 300), ("edge in", 15)]


def test_the_parts_of_a_run_are_one_count():
    count = PartsCount([("random in", 300), ("random out", 300), ("edge in", 15),
                        ("edge out", 15)])
    assert count.totals() == (0, 630)
    assert count.at("random in", 120, 300) == (120, 630)
    assert count.at("random in", 300, 300) == (300, 630)
    assert count.at("random out", 300, 300) == (600, 630)
    assert count.at("edge in", 15, 15) == (615, 630)       # not 15/15
    assert count.at("edge out", 3, 15) == (618, 630)
    assert count.finish() == (618, 618)


def test_a_stream_that_stops_at_its_first_error_leaves_the_total():
    count = PartsCount([("random in", 300), ("random out", 300), ("edge in", 15)])
    assert count.at("random in", 4, 300) == (4, 630 - 15)   # not yet known short
    assert count.at("random out", 10, 300) == (14, 4 + 300 + 15)
    assert count.finish() == (14, 14)                       # the edge cases never ran


def test_the_rate_and_the_time_left_are_the_whole_run_s():
    out, clock = io.StringIO(), Clock()
    progress = Progress("diff", "examples", 630, stream=out, tty=False, every=5.0,
                        clock=clock)
    clock.now += 10.0
    progress.update(600, 630)                # 600 in 10 s
    clock.now += 5.0
    progress.update(615, 630, phase="edge cases")
    assert out.getvalue().splitlines()[-1] == ("stagecheck diff: edge cases 615/630 examples, "
                                               "41 examples/s, 15.0 s elapsed, ~0.4 s left")


def test_a_time_bounded_part_without_a_total_says_its_time_left():
    out, clock = io.StringIO(), Clock()
    progress = Progress("symbolic", "paths", stream=out, tty=False, every=1.0, clock=clock)
    clock.now += 2.0
    progress.update(8, None, phase="exploring", ends_at=clock.now + 28.0)
    assert out.getvalue() == ("stagecheck symbolic: exploring 8 paths, 4 paths/s, 2.0 s "
                              "elapsed, ~28.0 s left\n")
    clock.now += 1.0
    progress.update(8, 8, phase="", judged=8)
    progress.close()
    assert out.getvalue().splitlines()[-1] == ("stagecheck symbolic: finished: 8/8 paths, "
                                               "8 judged, 2.67 paths/s, 3.0 s elapsed")


def test_work_that_is_not_examples_is_named_and_has_no_time_left():
    # the kernel impact of 18 findings took 8 s after the line had said "~0.2 s left"
    from stagecheck.oracles.commands.progress import DOING, CampaignProgress
    out, clock = io.StringIO(), Clock()
    progress = Progress("diff", "examples", 630, stream=out, tty=False, every=5.0,
                        clock=clock)
    told = CampaignProgress(progress, CampaignConfig.from_options(examples=300))
    clock.now += 10.0
    told("in", 300, 300, findings=2)
    clock.now += 5.0
    told("out", 290, 300, findings=2, doing="kernel impact")
    assert out.getvalue().splitlines()[-1] == (
        f"stagecheck diff: {DOING['kernel impact']} 590/630 examples, 2 findings, "
        "39 examples/s, 15.0 s elapsed")
    clock.now += 5.0
    told("out", 300, 300, findings=2)
    assert out.getvalue().splitlines()[-1].endswith("left")


def test_the_last_line_of_a_run_that_ended_before_its_total_says_no_time_left():
    # a protocol search that stopped at its first error ended with "~19 min 04 s left"
    out, clock = io.StringIO(), Clock()
    progress = Progress("spec", "sequences", 300, stream=out, tty=False, every=1.0,
                        clock=clock)
    clock.now += 3.0
    progress.update(3, 300, findings=1)
    assert out.getvalue().splitlines()[-1].endswith("left")      # while it runs
    progress.close()
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("stagecheck spec: finished: 3/300 sequences")
    assert "left" not in last
