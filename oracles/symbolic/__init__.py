"""The symbolic oracle: CrossHair explores both targets on list-model buffers.

``scenario.py`` builds one path's scenario from symbolic values, ``explore.py`` runs
the exploration (symbolic phase, concrete torch replay, fidelity check), ``result.py``
holds what came out; ``_crosshair.py`` alone touches CrossHair's internals.
"""

from stagecheck.oracles.symbolic.explore import model_backend, observations_differ, run_symbolic
from stagecheck.oracles.symbolic.result import (LostPath, SymbolicInconclusive, SymbolicResult,
                                                raise_if_inconclusive)

__all__ = ["LostPath", "SymbolicInconclusive", "SymbolicResult", "model_backend",
           "observations_differ", "raise_if_inconclusive", "run_symbolic"]
