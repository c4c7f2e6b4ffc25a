"""The keeper: the one process between the checker and a worker, which outlives the worker.

``python -I -S keeper.py CONTROL_FD STATUS_FD -- WORKER_ARGV...`` (``process.py`` starts
it; the standard library only, so it starts in milliseconds without ``site``). It makes
itself a *child subreaper* (Linux ``PR_SET_CHILD_SUBREAPER``): every process the target
starts and leaves behind, whatever its session or process group (``setsid``,
``start_new_session``, a double fork that daemonizes), is re-parented to the keeper
when its own parent ends, never to init. So when the worker ends (by itself, or because
the checker closed ``CONTROL_FD``, or because the checker died and its end of the pipe
closed with it) the keeper kills the worker's session and then every process it is
the parent of, again and again until it has no child left, writes the worker's wait
status on ``STATUS_FD`` and exits.

What the keeper writes on ``STATUS_FD``, one line each: ``pid N`` (the worker, at once),
``exit STATUS`` (the raw wait status of the worker), ``swept K`` (processes it killed
after the worker ended) and, before ``exit``, ``cpulimit N`` where the kernel killed the
worker at a hard ``RLIMIT_CPU`` of N s set in it (``cpu_limit_end``).

The module also holds the process-tree helpers the worker uses after each call to find
and end what a call left running (``children``, ``left_running``, ``end_tree``).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import resource
import select
import signal
import sys
import time

__all__ = ["PR_SET_CHILD_SUBREAPER", "children", "comm", "end_tree", "left_running",
           "make_subreaper", "main", "state"]

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
#: seconds the keeper keeps killing re-parented processes before it gives up (a process
#: that forks faster than it is killed; never seen but by a fork bomb)
SWEEP_SECONDS = 5.0


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def make_subreaper() -> bool:
    """Make this process the child subreaper of its descendants (Linux); False elsewhere."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent(signum: int = signal.SIGKILL) -> bool:
    """Have the kernel send ``signum`` to this process when its parent ends (Linux)."""
    return _prctl(PR_SET_PDEATHSIG, int(signum))


def children(pid: int, every_thread: bool = True) -> list[int]:
    """The children of ``pid``: every thread's (``/proc/PID/task/TID/children``), or the
    main thread's only."""
    out: list[int] = []
    if every_thread:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return out
    else:
        return _main_thread_children(pid)
    for tid in tasks:
        try:
            fd = os.open(f"/proc/{pid}/task/{tid}/children", os.O_RDONLY)
        except OSError:
            continue
        try:
            out += [int(p) for p in os.read(fd, 65536).split()]
        except (OSError, ValueError):
            pass
        finally:
            os.close(fd)
    return out


#: /proc/PID/task/PID/children files kept open (path -> (fd, device, inode)): a worker
#: reads two after every call, and reading an open one again costs a microsecond where
#: opening it costs tens (the kernel writes it afresh on each read from offset 0)
_KEPT: dict[str, tuple[int, int, int]] = {}


def _main_thread_children(pid: int) -> list[int]:
    """The children of ``pid``'s main thread, from a file kept open; one that is gone,
    or whose descriptor is no longer that file (code under test closed it, and its
    number may name another file now), is opened afresh."""
    path = f"/proc/{pid}/task/{pid}/children"
    kept = _KEPT.get(path)
    if kept is not None:
        fd, dev, ino = kept
        try:
            seen = os.fstat(fd)
            if (seen.st_dev, seen.st_ino) == (dev, ino):
                return [int(p) for p in os.pread(fd, 65536, 0).split()]
        except (OSError, ValueError):
            pass
        del _KEPT[path]        # not ours any more: never closed (its number may be reused)
    try:
        fd = os.open(path, os.O_RDONLY)
        if fd < 3:      # a number code under test closed (fd 1): it stays free, as it left it
            fd, low = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10), fd
            os.close(low)
    except OSError:
        return []
    try:
        seen = os.fstat(fd)
        out = [int(p) for p in os.pread(fd, 65536, 0).split()]
    except (OSError, ValueError):
        os.close(fd)
        return []
    if len(_KEPT) < 8:
        _KEPT[path] = (fd, seen.st_dev, seen.st_ino)
    else:
        os.close(fd)
    return out


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def state(pid: int) -> str:
    """The process's state letter (``Z`` a zombie, ``T`` stopped); ``""`` when gone."""
    fields = _stat(pid)
    return fields[0] if fields else ""


def comm(pid: int) -> str:
    """The process's command name (at most 15 characters), ``?`` when gone."""
    try:
        with open(f"/proc/{pid}/comm", "rb") as fh:
            return fh.read().decode("utf-8", "replace").strip() or "?"
    except OSError:
        return "?"


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _tree(roots: list[int]) -> list[int]:
    seen: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.append(pid)
        todo += children(pid)
    return seen


def end_tree(roots: list[int], reap: bool = False) -> None:
    """SIGKILL ``roots`` and every descendant of them (stopped first, so none forks
    while the tree is read); ``reap``: wait for those that are this process's children."""
    tree = _tree(roots)
    for pid in tree:
        try:
            os.kill(pid, signal.SIGSTOP)
        except OSError:
            pass
    tree = _tree(tree)          # what forked before it stopped
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if reap:
        mine = set(children(os.getpid()))
        for pid in tree:
            if pid in mine:
                try:
                    os.waitpid(pid, 0)
                except OSError:
                    pass


def left_running(keeper: int | None = None,
                 every_thread: bool = True) -> tuple[list[int], list[int]]:
    """What runs besides this worker after a call: (processes the code under test left
    running: this process's live children and, under a keeper, the keeper's other
    children (what was re-parented to it); copies of this process it forked, which end
    themselves when they come back to stagecheck's code, and processes on their way out
    (``/proc`` shows no command line for them any more))."""
    me = os.getpid()
    mine = children(me, every_thread)
    others = [p for p in children(keeper, False) if p != me] if keeper else []
    if not mine and not others:
        return [], []
    own, session = _cmdline(me), os.getsid(0)
    left, copies = list(others), []
    for pid in mine:
        if state(pid) in ("", "Z", "X"):
            continue
        try:
            same_session = os.getsid(pid) == session
        except OSError:
            continue
        if same_session and _cmdline(pid) in (own, b""):
            copies.append(pid)
        else:
            left.append(pid)
    return [p for p in left if state(p) not in ("", "Z", "X")], copies


# ------------------------------------------------------------------------------ the keeper

def _sweep(worker: int, statuses: dict[int, int]) -> int:
    """Kill the worker's session, then every child of the keeper until none is left;
    how many processes were killed besides the worker (``statuses``: what was reaped on
    the way, pid -> wait status)."""
    me = os.getpid()
    statuses.update(_reap())
    if worker not in statuses:       # alive (or a zombie not reaped yet): its pid is ours
        try:
            os.killpg(worker, signal.SIGKILL)
        except OSError:
            pass
    killed: set[int] = set()
    deadline = time.monotonic() + SWEEP_SECONDS
    while time.monotonic() < deadline:
        statuses.update(_reap())
        kids = [p for p in children(me) if state(p) not in ("", "Z", "X")]
        if not kids:
            statuses.update(_reap())
            if not [p for p in children(me) if state(p) not in ("", "Z", "X")]:
                break
            continue
        killed.update(p for p in kids if p != worker)
        end_tree(kids)
        time.sleep(0.001)
    statuses.update(_reap())
    return len(killed)


def cpu_limit_end(pid: int) -> int | None:
    """The hard ``RLIMIT_CPU`` (seconds) of the ended, unreaped child ``pid`` when it was
    killed by SIGKILL having used it, and it is lower than this process's own (set in the
    child, not inherited from the checker's environment): the kernel ended it, at a
    limit the code under test set, not a ``kill -9`` from outside. None otherwise."""
    try:
        with open(f"/proc/{pid}/limits") as fh:
            line = next(row for row in fh if row.startswith("Max cpu time"))
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        hard = line.split()[4]
        if hard == "unlimited":
            return None
        used = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        own = resource.getrlimit(resource.RLIMIT_CPU)[1]
    except (OSError, StopIteration, IndexError, ValueError):
        return None
    if own != resource.RLIM_INFINITY and int(hard) >= own:
        return None
    return int(hard) if used + 0.1 >= int(hard) else None


def _reap(worker: int | None = None, notes: list[str] | None = None) -> list[tuple[int, int]]:
    """Wait for every child that ended: (pid, wait status) of each. The worker, killed by
    SIGKILL, is looked at before it is reaped (``cpu_limit_end``: a note on ``notes``)."""
    out = []
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except OSError:             # no child left (ChildProcessError) or none to wait for
            return out
        if info is None or not info.si_pid:
            return out
        if info.si_pid == worker and notes is not None and info.si_code == os.CLD_KILLED \
                and info.si_status == signal.SIGKILL:
            limit = cpu_limit_end(worker)
            if limit is not None:
                notes.append(f"cpulimit {limit}")
        try:
            pid, status = os.waitpid(info.si_pid, os.WNOHANG)
        except OSError:
            return out
        if pid == 0:
            return out
        out.append((pid, status))


def main(argv: list[str]) -> int:
    control, status_fd = int(argv[0]), int(argv[1])
    worker_argv = argv[argv.index("--") + 1:]
    # the checker owns interrupts and ends the keeper by closing CONTROL_FD; a signal the
    # code under test sends its parent (this process) changes nothing
    ignored = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE,
               signal.SIGUSR1, signal.SIGUSR2)
    for signum in ignored:
        signal.signal(signum, signal.SIG_IGN)
    for fd in (control, status_fd):
        os.set_inheritable(fd, False)
    make_subreaper()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    keeper_pid = os.getpid()
    pid = os.fork()
    if pid == 0:          # the worker: a session of its own, and it dies with the keeper
        try:
            for signum in ignored:     # an ignored signal stays ignored across exec
                signal.signal(signum, signal.SIG_DFL)
            os.setsid()
            die_with_parent()
            if os.getppid() != keeper_pid:     # the keeper ended before that took effect
                os._exit(1)
            os.execv(worker_argv[0], worker_argv)
        finally:
            os._exit(127)

    def say(line: str) -> None:
        try:
            os.write(status_fd, (line + "\n").encode())
        except OSError:
            pass

    say(f"pid {pid}")
    statuses: dict[int, int] = {}
    notes: list[str] = []
    waiting = select.poll()       # not select(): the checker's descriptors may pass 1,023
    for fd in (control, wake_r):
        waiting.register(fd, select.POLLIN)
    while pid not in statuses:
        statuses.update(_reap(pid, notes))
        if pid in statuses:
            break
        try:
            ready = [fd for fd, _ in waiting.poll(1000)]
        except InterruptedError:
            continue
        if wake_r in ready:
            try:
                os.read(wake_r, 512)
            except OSError:
                pass
        if control in ready:
            try:
                data = os.read(control, 512)
            except OSError:
                data = b""
            if not data:          # the checker closed its end, or is gone: stop
                break
    swept = _sweep(pid, statuses)
    status = statuses.get(pid)
    if status is None:
        try:
            _, status = os.waitpid(pid, 0)
        except OSError:
            status = signal.SIGKILL      # reaped by no one we know of: killed
    for line in notes:
        say(line)
    say(f"exit {status}")
    say(f"swept {swept}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
