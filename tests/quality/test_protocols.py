"""The built-in protocols on their fixtures, on the CPU model of the device: every buggy
fixture gives an error finding naming its hazard or divergence, every fixed and equivalent
one gives none; fixed against buggy is DIFFERENT, fixed against equivalent EQUIVALENT."""

import pytest

from stagecheck.oracles.protocol import ProtocolConfig, run_protocol_campaign
from tests.protocol_catalog import BUILTIN, expected, fixtures, reports, target

BUGGY = [(p, f) for p in BUILTIN for f in fixtures(p, "buggy")]
CLEAN = [(p, f) for p in BUILTIN for f in fixtures(p, "fixed") + fixtures(p, "equivalent")]
#: sequences a clean fixture must pass (the buggy ones are found within a few)
CLEAN_BUDGET = 60


def test_every_builtin_protocol_has_buggy_and_fixed_fixtures():
    for protocol in BUILTIN:
        assert fixtures(protocol, "buggy") and fixtures(protocol, "fixed"), protocol


@pytest.mark.parametrize("protocol,path", BUGGY, ids=lambda v: getattr(v, "name", v))
def test_a_buggy_fixture_is_found_naming_its_hazard_or_divergence(protocol, path):
    result = run_protocol_campaign(None, target(path), protocol, ProtocolConfig(sequences=200))
    assert result.verdict() == "different"
    names = expected(path)
    assert any(reports(f, name) for f in result.errors for name in names), \
        ([(f.invariant, f.extra.get("kind")) for f in result.errors], names)
    for f in result.errors:
        assert f.scenario["protocol"] == protocol and f.extra["table"]
    shortest = min(len(f.scenario["steps"]) for f in result.errors)
    assert shortest <= 4          # shrunk to a few steps


@pytest.mark.parametrize("protocol,path", CLEAN, ids=lambda v: getattr(v, "name", v))
def test_a_fixed_or_equivalent_fixture_gives_no_error(protocol, path):
    result = run_protocol_campaign(None, target(path), protocol,
                                   ProtocolConfig(sequences=CLEAN_BUDGET))
    assert result.errors == [], [f.message for f in result.errors]
    assert result.sequences_run == CLEAN_BUDGET


@pytest.mark.parametrize("protocol", BUILTIN)
def test_fixed_against_its_buggy_variant_is_different(protocol):
    (fixed,) = fixtures(protocol, "fixed")
    buggy = fixtures(protocol, "buggy")[0]
    result = run_protocol_campaign(target(fixed), target(buggy), protocol,
                                   ProtocolConfig(sequences=200))
    assert result.verdict() == "different"
    assert {f.side for f in result.errors} <= {"candidate", "both"}
    assert any(f.side == "candidate" for f in result.errors)


EQUIVALENT = [(p, f) for p in BUILTIN for f in fixtures(p, "equivalent")]


@pytest.mark.parametrize("protocol,rewrite", EQUIVALENT, ids=lambda v: getattr(v, "name", v))
def test_fixed_against_each_equivalent_rewrite_is_equivalent(protocol, rewrite):
    """Every equivalent fixture against the fixed one (a kernel given whole buffers and a
    count reads only the live slots: what it never reads is not compared)."""
    (fixed,) = fixtures(protocol, "fixed")
    result = run_protocol_campaign(target(fixed), target(rewrite), protocol,
                                   ProtocolConfig(sequences=60))
    assert result.verdict() == "equivalent", [f.message for f in result.errors]


def test_an_upstream_restaging_race_without_effect_is_info():
    (path,) = [f for f in fixtures("mamba-align-steps", "equivalent")
               if "restaging" in f.name]
    result = run_protocol_campaign(None, target(path), "mamba-align-steps",
                                   ProtocolConfig(sequences=100))
    assert result.errors == []
    hazards = [f for f in result.infos if f.invariant == "no_copy_hazard"]
    assert hazards and all(f.extra.get("context") for f in hazards)


def test_the_progress_line_says_when_an_error_finding_is_shrunk():
    # an audit's progress line read '0/1 sequences, 0 findings' through 140 s of shrinking
    from stagecheck.oracles import messages
    calls = []
    (path,) = fixtures("input-prep-event", "buggy")[:1]
    result = run_protocol_campaign(None, target(path), "input-prep-event",
                                   ProtocolConfig(sequences=50),
                                   progress=lambda *a, **kw: calls.append(kw))
    assert any(f.severity == "error" for f in result.findings)
    phases = [kw.get("phase") for kw in calls if "phase" in kw]
    assert phases[:1] == [messages.PROGRESS_SHRINKING] and phases[-1] == ""
    shrinking = next(kw for kw in calls if kw.get("phase") == messages.PROGRESS_SHRINKING)
    assert shrinking["findings"] >= 1 and shrinking["estimate"] is False
