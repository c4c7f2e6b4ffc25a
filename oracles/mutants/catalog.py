"""The mutation catalog: every operator, in report order."""

from __future__ import annotations

from stagecheck.oracles.mutants.operators import (AssertDropped, AssertMoved, AssertWeakened,
                                                  CarriedOver, CopyDropped, CopyDuplicated,
                                                  CopyHoisted, CopyLengthOffByOne,
                                                  CopyLengthPadded, DtypeNarrowing, EarlyReturn,
                                                  ExceptionType, FullReqIds, GetToIndex,
                                                  GetToPop, IndexToGet, LoopBoundOffByOne,
                                                  MutationOperator, NonBlockingToggled,
                                                  PostStepCount, SwappedViews, WholeBufferCopy)

__all__ = ["CATALOG", "OPERATORS"]

#: The catalog, in report order.
CATALOG: tuple[type[MutationOperator], ...] = (
    FullReqIds, LoopBoundOffByOne, CopyLengthOffByOne, CopyLengthPadded, WholeBufferCopy,
    CopyHoisted, CopyDropped, CopyDuplicated, AssertDropped, AssertWeakened, AssertMoved,
    ExceptionType, GetToIndex, IndexToGet, GetToPop, SwappedViews, CarriedOver,
    DtypeNarrowing, PostStepCount, NonBlockingToggled, EarlyReturn,
)
OPERATORS = {op.name: op for op in CATALOG}
