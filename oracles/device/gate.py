"""Host-opened gates on CUDA streams: device work queued behind one waits for the host.

The CUDA backend's ``lazy`` completion puts a gate in front of every copy and every piece
of device work it issues, so that each runs on the device when the program's own
synchronization lets it (the latest point, as the CPU model's ``lazy`` completes them),
not when the device happens to reach it. A gate is the driver's stream memory operation
``cuStreamWaitValue32`` on a counter in pinned memory: the stream waits until the counter
reaches the gate's number. Each stream has a counter of its own; its gates are numbered in
issue order and the counter only grows, so opening gate ``n`` of a stream opens every gate
issued on that stream before it, and no other stream's.

The host opens gates where it waits for the device, and only those it waits for: a
synchronization of a stream or an event, a blocking copy (its stream up to it, and what
that stream waited for through events), ``torch.cuda.synchronize`` (every stream). A
copy on another stream that the host never waited for stays queued, as it may on a GPU.
A wait the interception does not see (a torch operation that synchronizes inside) would
wait for a gate forever: a watchdog thread opens every gate once the host has made no
call into the model for ``STALL_S`` seconds while gates are closed, and counts it
(``forced``); the run then goes on with copies completing earlier than the latest point,
never with a hang.

Where the driver has no stream memory operations (``available`` is False) nothing is
held, and copies lag only behind the device work queued with ``busy_cycles``.
"""

from __future__ import annotations

import ctypes
import functools
import sys
import threading
import time
from dataclasses import dataclass

__all__ = ["STALLS_KEPT", "STALL_S", "StreamGates"]

#: seconds without a call into the model, gates closed, before the watchdog opens them
STALL_S = 0.25
#: places the host was stalled at that a run keeps (for reports), of the first stalls
STALLS_KEPT = 5
#: streams that can hold gates in one run (their counters are made when the run starts:
#: pinned memory is never allocated while gates are closed); more streams hold none
STREAMS = 64
#: ``CU_STREAM_WAIT_VALUE_GEQ``: wait until ``(int32)(*addr - value) >= 0``
_WAIT_GEQ = 0x0
_POLL_S = 0.02


@functools.lru_cache(maxsize=1)
def _driver():
    """``cuStreamWaitValue32_v2`` and ``cuMemHostGetDevicePointer_v2`` of the CUDA
    driver, or None where either is missing (looked up once per process)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        wait = lib.cuStreamWaitValue32_v2
        pointer = lib.cuMemHostGetDevicePointer_v2
    except (OSError, AttributeError):
        return None
    wait.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    wait.restype = ctypes.c_int
    pointer.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p, ctypes.c_uint]
    pointer.restype = ctypes.c_int
    return wait, pointer


@dataclass
class _Counter:
    """The counter in pinned memory that the gates of one stream wait on."""

    value: object            # a numpy view of it: the host writes the open number here
    address: int             # its device address, for ``cuStreamWaitValue32``
    issued: int = 0          # the number of the last gate put on the stream
    opened: int = 0          # every gate of the stream up to this number is open


class StreamGates:
    """The gates of one device model's run (see the module doc)."""

    def __init__(self, torch, driver=None) -> None:
        self.forced = 0          # times the watchdog opened the gates
        self.stalls: list[str] = []   # where the host was each time (a few, for reports)
        self._torch = torch
        self._host_thread = threading.get_ident()
        self.last_call = time.monotonic()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self._counters: dict[int, _Counter] = {}     # stream handle -> its counter
        driver = driver if driver is not None else _driver()
        self._free: list[_Counter] = self._new_counters(driver) if driver is not None else []
        self.available = bool(self._free)
        if self.available:
            self._wait = driver[0]

    def _new_counters(self, driver) -> list[_Counter]:
        """``STREAMS`` counters in one block of pinned memory the device can read (none:
        the driver gave no device address for it)."""
        torch = self._torch
        with torch._C.DisableTorchFunction():
            self._memory = torch.zeros(STREAMS, dtype=torch.int32, pin_memory=True)
        address = ctypes.c_uint64()
        if driver[1](ctypes.byref(address), ctypes.c_void_p(self._memory.data_ptr()), 0) != 0:
            return []
        values = self._memory.numpy()
        return [_Counter(values[k:k + 1], address.value + 4 * k) for k in range(STREAMS)]

    def hold(self, stream_handle: int) -> int:
        """Put a closed gate on the stream whose driver handle is ``stream_handle``; its
        number on that stream (0: none, the driver refused it)."""
        self.last_call = time.monotonic()
        if not self.available or self._closed.is_set():
            return 0
        with self._lock:
            counter = self._counters.get(stream_handle)
            if counter is None:
                if not self._free:        # more streams than counters: this one holds none
                    return 0
                counter = self._counters[stream_handle] = self._free.pop(0)
            number = counter.issued + 1
            code = self._wait(ctypes.c_void_p(stream_handle), counter.address, number,
                              _WAIT_GEQ)
            if code != 0:             # the stream takes no gate: hold nothing from now on
                self.available = False
                return 0
            counter.issued = number
            if self._thread is None and not self._closed.is_set():
                self._thread = threading.Thread(target=self._watch, daemon=True,
                                                name="stagecheck-gates")
                self._thread.start()
        return number

    def open(self, upto: dict | None = None) -> None:
        """Open the gates of each stream up to the number ``upto`` gives its handle (every
        gate of every stream by default)."""
        self.last_call = time.monotonic()
        with self._lock:
            for handle, counter in self._counters.items():
                number = counter.issued if upto is None else min(upto.get(handle, 0),
                                                                 counter.issued)
                if number > counter.opened:
                    counter.opened = number
                    counter.value[0] = number

    def is_open(self, stream_handle: int, number: int) -> bool:
        """Whether gate ``number`` of the stream ``stream_handle`` is open."""
        counter = self._counters.get(stream_handle)
        return counter is None or number <= counter.opened

    def all_open(self) -> bool:
        """Whether no gate is closed (called with the lock held, or after ``close``)."""
        return all(c.issued <= c.opened for c in self._counters.values())

    def close(self) -> None:
        """The run is over: open every gate and end the watchdog before returning, so
        that no thread of the checker's own is left when the worker looks for threads the
        code under test left running (``no_process_left``)."""
        self.open()
        self._closed.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _watch(self) -> None:
        """The watchdog: runs while a gate is closed (it ends once all are open, or at
        ``close``)."""
        while not self._closed.wait(_POLL_S):
            with self._lock:
                if self.all_open():
                    self._thread = None
                    return
            if time.monotonic() - self.last_call > STALL_S:
                where = self._where_host_waits() if len(self.stalls) < STALLS_KEPT else None
                self.open()           # first: nothing between the stall and the opening
                self.forced += 1
                if where is not None:
                    self.stalls.append(where)
        with self._lock:
            self._thread = None

    def opened_early(self, upto: dict, why: str) -> None:
        """Open the gates ``upto`` gives (as ``open``) for a read the checker itself makes
        of device memory (``why``: where), counted with the watchdog's openings: copies
        there complete earlier than the latest point, without a stall."""
        with self._lock:
            closed = any(upto.get(handle, 0) > c.opened for handle, c in self._counters.items())
        if closed:
            self.forced += 1
            if len(self.stalls) < STALLS_KEPT and why not in self.stalls:
                self.stalls.append(why)
            self.open(upto)

    def _where_host_waits(self) -> str:
        frame = sys._current_frames().get(self._host_thread)
        if frame is None:
            return "unknown"
        return where_in(frame)


def where_in(frame, depth: int = 4) -> str:
    """The last ``depth`` calls of the stack ending at ``frame``, innermost first.

    Read from the frames alone (no source lines, no file system): the watchdog calls it
    while the host is stalled, and a call that lets go of the interpreter lock there (as
    ``traceback``'s look-up of source files does) could leave the watchdog waiting for
    the lock behind a host that waits for the gate it is about to open."""
    calls = []
    while frame is not None and len(calls) < depth:
        code = frame.f_code
        calls.append(f"{code.co_name} ({code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno})")
        frame = frame.f_back
    return " <- ".join(calls)
