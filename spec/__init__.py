"""The executable specification of host-side staging.

Knows nothing of hypothesis, the CLI or CUDA: the staged-field schema, the
scenario and observation as plain data, the contract, and the invariants.
"""

from stagecheck.spec.findings import ERROR, INFO, Finding
from stagecheck.spec.invariants import (DIFFERENCES, INVARIANTS, INVARIANTS_BY_ID, Invariant, check,
                                        inputs_snapshot, statement)
from stagecheck.spec.observation import Copy, HostWrite, Observation
from stagecheck.spec.scenario import StagingScenario, contract_breaches, first_missing_state_index
from stagecheck.spec.schema import FIELDS, FLAG, StagedField, TargetProfile

__all__ = [
    "DIFFERENCES", "ERROR", "INFO", "FIELDS", "FLAG", "INVARIANTS", "INVARIANTS_BY_ID",
    "Copy", "Finding", "HostWrite", "Invariant", "Observation", "StagedField",
    "StagingScenario", "TargetProfile", "check", "contract_breaches",
    "first_missing_state_index", "inputs_snapshot", "statement",
]
