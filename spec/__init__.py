"""The executable specification of host-side staging.

Knows nothing of hypothesis, the CLI or CUDA: staging schemas (what one staging
function must do, ``schema.py``; the built-in ones in ``schemas/``), the scenario
space they induce and its contract (``space.py``), the scenario and observation as
plain data, and the invariants, each stated once (``invariants.py``).
"""

from stagecheck.spec.findings import ERROR, INFO, Finding
from stagecheck.spec.invariants import (DIFFERENCES, INVARIANTS, INVARIANTS_BY_ID, Invariant,
                                        check, expected_inputs_after, inputs_snapshot,
                                        statement)
from stagecheck.spec.observation import Copy, HostWrite, Observation
from stagecheck.spec.protocol import Operation, Protocol, ProtocolCheck, StepSpace
from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schema import Field, Input, StagingSchema, StandIn, TargetProfile
from stagecheck.spec.schemas import BUILTIN_SCHEMAS, DEFAULT_SCHEMA, schema_for_function
from stagecheck.spec.space import contract_breaches, draw_breach, draw_scenario, malformed

__all__ = [
    "BUILTIN_SCHEMAS", "DEFAULT_SCHEMA", "DIFFERENCES", "ERROR", "INFO", "INVARIANTS",
    "INVARIANTS_BY_ID", "Copy", "Field", "Finding", "HostWrite", "Input", "Invariant",
    "Observation", "Operation", "Protocol", "ProtocolCheck", "StagingScenario",
    "StagingSchema", "StandIn", "StepSpace", "TargetProfile", "check",
    "contract_breaches", "draw_breach", "draw_scenario", "expected_inputs_after",
    "inputs_snapshot", "malformed", "schema_for_function", "statement",
]
