"""The mutation catalog: every operator, in report order, and the equivalent mutants no
operator can recognise on its own."""

from __future__ import annotations

from stagecheck.oracles.mutants.operators import (AssertDropped, AssertMoved, AssertWeakened,
                                                  CarriedOver, CopyDropped, CopyDuplicated,
                                                  CopyHoisted, CopyLengthOffByOne,
                                                  CopyLengthPadded, DtypeNarrowing, EarlyReturn,
                                                  ExceptionType, FullReqIds, GetToIndex,
                                                  GetToPop, IndexToGet, LoopBoundOffByOne,
                                                  MutationOperator, NonBlockingToggled,
                                                  PostStepCount, SwappedViews, WholeBufferCopy)

__all__ = ["CATALOG", "EQUIVALENT_MUTANTS", "OPERATORS"]

#: The catalog, in report order.
CATALOG: tuple[type[MutationOperator], ...] = (
    FullReqIds, LoopBoundOffByOne, CopyLengthOffByOne, CopyLengthPadded, WholeBufferCopy,
    CopyHoisted, CopyDropped, CopyDuplicated, AssertDropped, AssertWeakened, AssertMoved,
    ExceptionType, GetToIndex, IndexToGet, GetToPop, SwappedViews, CarriedOver,
    DtypeNarrowing, PostStepCount, NonBlockingToggled, EarlyReturn,
)
OPERATORS = {op.name: op for op in CATALOG}


#: Equivalent mutants no operator can recognise on its own:
#: (operator, function, line) -> reason. Lines are those of the target's source.
EQUIVALENT_MUTANTS: dict[tuple[str, str, int], str] = {}
