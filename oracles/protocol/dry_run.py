"""``protocol check FILE TARGET``'s dry run: the protocol's build, operations, observe and
checks through one target on the CPU model, where a mistake of the protocol shows as the
``SchemaError`` its run raises; then the target against itself, where two runs of one
step sequence that differ (an ``observe``, a ``when`` or a result that reads a clock or
random numbers) are the protocol's mistake, as ``diff`` would refuse them later
(``PROTOCOL_UNSTEADY``)."""

from __future__ import annotations

from dataclasses import replace

from stagecheck.oracles.options import ProtocolConfig
from stagecheck.oracles.protocol.campaign import ProtocolResult, run_protocol_campaign

__all__ = ["DRY_RUN_SEQUENCES", "STEADY_SEQUENCES", "dry_run"]

#: step sequences the dry run runs through the target, and then through the target
#: against itself
DRY_RUN_SEQUENCES, STEADY_SEQUENCES = 10, 3


def dry_run(spec: str, target: str, shims: tuple[str, ...] = ()) -> ProtocolResult:
    """The campaign's own runs, unshrunk, on ``DRY_RUN_SEQUENCES`` sequences; what the code
    under test shows there is counted, not judged, by ``protocol check``."""
    config = ProtocolConfig(sequences=DRY_RUN_SEQUENCES, device="cpu", jobs=1, shrink=False,
                            shims=shims)
    ran = run_protocol_campaign(None, target, spec, config)
    run_protocol_campaign(target, target, spec, replace(config, sequences=STEADY_SEQUENCES))
    return ran
