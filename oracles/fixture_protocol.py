"""The pytest fixture's ``assert_protocol``: its keywords checked as the command line
checks a protocol run's options, the ``ProtocolConfig`` they make, and the command line
that re-runs a protocol campaign.
"""

from __future__ import annotations

import shlex
from dataclasses import replace

from stagecheck.oracles import messages
from stagecheck.oracles.errors import UsageError
from stagecheck.oracles.options import (PROTOCOL_FIELDS, PROTOCOL_FIXTURE_OWN,
                                        PROTOCOL_LIBRARY_FIELDS, ProtocolConfig, fixture_options, option_for,
                                        protocol_fixture_options, validated)
from stagecheck.oracles.text import did_you_mean

__all__ = ["builtin_protocols", "protocol_config", "protocol_keyword_problems",
           "protocol_reproduce_hint"]


def protocol_keyword_problems(options: dict, protocol, loaded=None) -> list[str]:
    """One line per bad keyword of ``assert_protocol``, as the command line refuses a
    protocol run's options: an unknown keyword; a campaign keyword a protocol run does
    not read (``kernel=``, ``steps=``...); a bad value; and, once the protocol is
    ``loaded``, ``max_capacity=`` of a protocol that draws its own capacities."""
    known = protocol_fixture_options()
    shown_known = ", ".join(f"{k}=" for k in known)
    name = getattr(protocol, "name", protocol)
    problems: list[str] = []
    if loaded is not None:
        if options.get("max_capacity") is not None and not loaded.staging:
            low, high = loaded.space.capacity
            problems.append(str(UsageError.of(
                messages.FIXTURE_PROTOCOL_CAPACITY_UNUSED, options["max_capacity"],
                protocol=loaded.name, low=low, high=high).located("keyword max_capacity")))
        return problems
    campaign = set(fixture_options())
    for key in sorted(options):
        value = options[key]
        if key in known:
            try:
                validated("diff", {key: tuple(value) if key == "shims" and isinstance(
                    value, list) else value})
            except UsageError as exc:
                problems.append(str(exc.located(f"keyword {exc.option or key}")))
            continue
        if key in campaign:
            option = option_for("diff", key)
            problems.append(str(UsageError.of(
                messages.FIXTURE_PROTOCOL_OPTION_UNUSED, value, keyword=key,
                protocol=name, flag=option.flag if option and option.flag else f"{key}=",
                known=shown_known).located(f"keyword {key}")))
        else:
            hint = did_you_mean(key, [*known, *PROTOCOL_FIXTURE_OWN]) or (
                messages.DID_YOU_MEAN.format(option=PROTOCOL_FIELDS[key] + "=")
                if PROTOCOL_FIELDS.get(key) in PROTOCOL_FIXTURE_OWN else "")
            problems.append(str(UsageError.of(messages.FIXTURE_PROTOCOL_UNKNOWN, key,
                                              known=shown_known, hint=hint
                                              ).located(f"keyword {key}")))
    return problems


def protocol_config(examples, seed, device, options: dict):
    """The ``ProtocolConfig`` of ``assert_protocol``, built from the keywords as the
    command line builds it from its options (``ProtocolConfig.from_values``)."""
    values = {"examples": examples, "seed": seed, "device": device,
              **{k: tuple(v) if k == "shims" else v for k, v in options.items()
                 if k not in PROTOCOL_LIBRARY_FIELDS}}
    values.update(validated("diff", values))
    config = ProtocolConfig.from_values(values)
    library = {k: v for k, v in options.items() if k in PROTOCOL_LIBRARY_FIELDS}
    return replace(config, **library) if library else config


def builtin_protocols() -> list[str]:
    from stagecheck.spec.protocols import BUILTIN_PROTOCOLS  # first use (fixture_targets.as_target)
    return list(BUILTIN_PROTOCOLS)


def protocol_reproduce_hint(result, baseline, target, protocol) -> str:
    """The ``stagecheck diff|spec ... --protocol`` line that re-runs a protocol campaign,
    when the targets and the protocol are given as text."""
    if not isinstance(target, str) or not (baseline is None or isinstance(baseline, str)) \
            or not isinstance(protocol, str):
        return ""
    c = result.config
    command = "diff" if baseline is not None else "spec"
    words = [t for t in (baseline, target) if t is not None] + [
        "--protocol", protocol, "--examples", str(c.sequences), "--seed", str(c.seed)]
    if c.device != "cpu":
        words += ["--device", c.device]
    for shim in c.shims:
        words += ["--shim", shim]
    return messages.FIXTURE_PROTOCOL_REPRODUCE.format(
        command=f"stagecheck {command} " + " ".join(shlex.quote(w) for w in words))
