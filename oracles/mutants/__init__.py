"""The mutants oracle: how strong are stagecheck's oracles against realistic refactoring
mistakes? Operators (``operators.py``, on the base class of ``mutation.py``) form the
catalog (``catalog.py``); ``generate.py`` applies them to a target's source;
``runners.py`` runs every oracle on every mutant, next to the upstream-style example
tests (``upstream.py``); ``matrix.py`` holds the kill matrix and its scores.
"""

from stagecheck.oracles.mutants.catalog import CATALOG, OPERATORS
from stagecheck.oracles.mutants.generate import Mutant, generate_mutants
from stagecheck.oracles.mutants.matrix import (ORACLES, STAGECHECK_ORACLES, MutantResult,
                                               MutationReport, OracleOutcome)
from stagecheck.oracles.mutants.mutation import Location, MutationOperator
from stagecheck.oracles.mutants.runners import (DEFAULT_BUDGET, DEFAULT_SYMBOLIC_TIMEOUT,
                                                SYMBOLIC_MAX_CAPACITY, MutantsConfig,
                                                evaluate_mutant, list_mutants, parse_list,
                                                run_mutants)
from stagecheck.oracles.mutants.upstream import upstream_example_test, upstream_missing_index_test

__all__ = [
    "CATALOG", "DEFAULT_BUDGET", "DEFAULT_SYMBOLIC_TIMEOUT", "OPERATORS",
    "ORACLES", "STAGECHECK_ORACLES", "SYMBOLIC_MAX_CAPACITY", "Location", "Mutant",
    "MutantResult", "MutantsConfig", "MutationOperator", "MutationReport", "OracleOutcome",
    "evaluate_mutant", "generate_mutants", "list_mutants", "parse_list", "run_mutants",
    "upstream_example_test", "upstream_missing_index_test",
]
