"""Staging protocols: step sequences through the code under test, on the device model.

``load.py`` (protocols by name or file, ``check_protocol``), ``generate.py`` (the step
generator), ``component.py`` and ``context.py`` (the code under test and what a protocol
is given, in the worker), ``run.py`` (one sequence through one target: a trace),
``judge.py`` (traces to findings), ``shrink.py`` (shortest failing sequence),
``campaign.py`` (``run_protocol_campaign``). The statement of what a protocol must do is
``spec/protocol.py`` and ``spec/protocol_invariants.py``; the built-in protocols are
``spec/protocols/``.
"""

from stagecheck.oracles.protocol.campaign import (ProtocolConfig, ProtocolResult,
                                                  check_sequence, run_protocol_campaign)
from stagecheck.oracles.protocol.load import load_protocol, protocol_for_target, protocol_spec
from stagecheck.oracles.protocol.problems import check_protocol

__all__ = ["ProtocolConfig", "ProtocolResult", "check_protocol", "check_sequence", "load_protocol",
           "protocol_for_target", "protocol_spec", "run_protocol_campaign"]
