"""The instrumented buffer sees writes through .np, .cpu and anything else, and copies."""

import numpy as np

from stagecheck.oracles.observe import RecordingList
from stagecheck.oracles.observe.instrumented import InstrumentedBuffer
from stagecheck.spec import Copy, HostWrite


def make():
    events = []
    return InstrumentedBuffer("b", [1, 2, 3, 4], [9, 9, 9, 9], "int32", "cpu", events), events


def test_writes_through_np_and_views_of_it_record_slots():
    buf, events = make()
    buf.np[1] = 5
    buf.np[2:4] = [7, 8]
    view = buf.np[1:]
    view[2] = 0
    assert events == [HostWrite("b", (1,), "np"), HostWrite("b", (2, 3), "np"),
                      HostWrite("b", (3,), "np")]


def test_writes_through_cpu_record_slots():
    buf, events = make()
    buf.cpu[0] = 3
    buf.cpu[1:3].fill_(0)
    assert events == [HostWrite("b", (0,), "cpu"), HostWrite("b", (1, 2), "cpu")]


def test_untracked_write_is_seen_before_the_copy_and_copy_is_logged():
    buf, events = make()
    np.copyto(buf._raw[0:1], 99)           # bypasses both recording views
    out = buf.copy_to_gpu(2)
    assert events == [HostWrite("b", (0,), "untracked"), Copy("b", 0, 2, 2)]
    assert buf.final_gpu() == [99, 2, 9, 9] and out.tolist() == [99, 2]
    buf.copy_to_gpu()
    assert events[-1] == Copy("b", 0, 4, None)


def test_int32_overflow_raises_like_numpy_and_is_not_logged():
    buf, events = make()
    try:
        buf.np[0] = 2**31
    except OverflowError:
        pass
    else:
        raise AssertionError("numpy 2 raises OverflowError for out-of-range int32 writes")
    assert events == []


def test_recording_list_reads():
    reads = []
    ids = RecordingList(["a", "b", "c"], reads)
    assert ids[:2] == ["a", "b"] and ids[-1] == "c"
    for i, (_, r) in enumerate(zip(range(1), ids)):
        pass
    assert reads == [0, 1, 2, 0]
