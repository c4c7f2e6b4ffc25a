"""Which example the findings collector keeps for a finding seen on several."""

from stagecheck.oracles.collect import TEXT_TIES_UP_TO, FindingsCollector
from stagecheck.spec import INFO, Finding, StagingScenario


def _scenario(capacity: int, num_reqs: int, value: int) -> StagingScenario:
    ids = [f"r{k}" for k in range(num_reqs)]
    return StagingScenario.from_dict({
        "capacity": capacity, "num_reqs": num_reqs, "req_ids": ids,
        "inputs": {"n": {r: value for r in ids}}, "initial_cpu": {}, "initial_gpu": {}})


def _kept(scenarios) -> dict:
    collector = FindingsCollector()
    for k, s in enumerate(scenarios):
        collector.add([Finding("same_buffers", INFO, "differs")], s, k + 1)
    (finding,) = collector.findings()
    return finding.scenario


def test_of_equal_shape_the_shorter_text_is_kept_at_small_sizes():
    long, short = _scenario(8, 3, 123456789), _scenario(8, 3, 1)
    assert _kept([long, short]) == short.to_dict()


def test_of_equal_shape_the_first_is_kept_past_the_text_bound():
    capacity = TEXT_TIES_UP_TO + 1
    long, short = _scenario(capacity, 3, 123456789), _scenario(capacity, 3, 1)
    assert _kept([long, short]) == long.to_dict()


def test_a_smaller_shape_replaces_the_kept_one_at_every_size():
    capacity = TEXT_TIES_UP_TO * 4
    big, small = _scenario(capacity, 5, 1), _scenario(capacity, 2, 123456789)
    assert _kept([big, small]) == small.to_dict()
    assert _kept([small, big]) == small.to_dict()


def _kept_final(scenarios, finals) -> dict:
    collector = FindingsCollector()
    for k, (s, final) in enumerate(zip(scenarios, finals)):
        collector.add([Finding("same_buffers", INFO, "differs")], s, k + 1, final=final)
    (finding,) = collector.findings()
    return finding.scenario


def test_of_two_examples_shrinkers_settled_on_the_smaller_is_kept():
    """An audit: the fixture's hypothesis stream records hypothesis's shrunk example
    (final), then the scenario shrinker's smaller one from it (final too); the first was
    kept, 8 requests where the shrinker had found 1."""
    hypothesis, shrinker = _scenario(8, 8, 0), _scenario(8, 1, 0)
    assert _kept_final([hypothesis, shrinker], [True, True]) == shrinker.to_dict()
    assert _kept_final([shrinker, hypothesis], [True, True]) == shrinker.to_dict()
    # a shrinker's example still beats a smaller one no shrinker settled on
    smaller = _scenario(8, 1, 0)
    assert _kept_final([hypothesis, smaller], [True, False]) == hypothesis.to_dict()
