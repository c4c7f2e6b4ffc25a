# hostile: marks the worker's shared "untimed work runs" flag (as stagecheck's own import
# of the tensor library does), ignores the worker's own timers and spins for ever: only
# the checker's deadline ends it, the deadline of loading at most
import mmap
import os
import signal


def _shared():
    """The file the worker shares with the checker
    (an unlinked file, found through /proc/self/fd)."""
    for fd in os.listdir("/proc/self/fd"):
        try:
            name = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if "stagecheck-worker-" in name:
            with open(f"/proc/self/fd/{fd}", "r+b") as f:
                return mmap.mmap(f.fileno(), 16)
    raise RuntimeError("no shared file")


def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
                                    mamba_state_idx):
    shared = _shared()
    shared[8:16] = (1).to_bytes(8, "little")
    for timer_signal in (signal.SIGALRM, signal.SIGPROF):
        signal.signal(timer_signal, signal.SIG_IGN)
    while True:
        pass
