"""What the code under test leaves in its worker that could end it later is found when the
pool stops the worker (``oracles/worker/later.py``, ``WorkerPool.close``): a thread still
running, a ``threading.Timer`` not yet fired, a later dump of faulthandler that exits. It
is ``WorkerDied`` (exit 2, no verdict), as an end between calls is: before, a run whose
last request came before the timer fired passed (docs/reliability.md, "A worker that ends
between calls"). And a worker reused for other targets (``load(fresh=False)``: mutants)
names the targets whose calls ran in it, not the ones loaded now."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.sample import sample_scenario
from stagecheck.oracles.targets import load_target
from stagecheck.oracles.worker.blame import WorkerDied
from stagecheck.oracles.worker.later import idle_pool_worker, still_running
from stagecheck.oracles.worker.pool import WorkerPool

FUNC = "stage_postprocess_inputs_to_gpu"
STAGES = f"""
def {FUNC}(ctx, scheduler_output, req_ids, num_reqs, requests, mamba_state_idx):
    bufs = (ctx.mamba_state_idx_buf, ctx.num_scheduled_tokens_buf,
            ctx.num_computed_tokens_buf, ctx.num_draft_tokens_buf)
    for i, r in enumerate(req_ids[:num_reqs]):
        assert r in mamba_state_idx, f"no state index for {{r}}"
        bufs[0].np[i] = mamba_state_idx[r]
        bufs[1].np[i] = scheduler_output.num_scheduled_tokens[r]
        bufs[2].np[i] = requests[r].num_computed_tokens
        bufs[3].np[i] = len(scheduler_output.scheduled_spec_decode_tokens.get(r, []))
    for b in bufs:
        b.copy_to_gpu(num_reqs)
"""
#: what each target leaves behind after it stages (indented into its body)
LEAVES = {
    "timer": ("import os\nimport threading\n",
              "threading.Timer(60, os._exit, (0,)).start()"),
    "cancelled_timer": ("import os\nimport threading\n",
                        "t = threading.Timer(60, os._exit, (0,))\n    t.start()\n    t.cancel()"),
    "thread": ("import threading\nimport time\n",
               "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()"),
    "faulthandler": ("import faulthandler\n",
                     "faulthandler.dump_traceback_later(60, exit=True)"),
    "faulthandler_cancelled": (
        "import faulthandler\n",
        "faulthandler.dump_traceback_later(60, exit=True)\n"
        "    faulthandler.cancel_dump_traceback_later()"),
    "faulthandler_no_exit": ("import faulthandler\n",
                             "faulthandler.dump_traceback_later(60)"),
    "joined_thread": ("import threading\n",
                      "t = threading.Thread(target=len, args=((),))\n    t.start()\n"
                      "    t.join()"),
    "torch": ("import torch\n", "torch.ones(4).sum()"),
    "timer_soon": ("import os\nimport threading\n",
                   "threading.Timer(2.0, os._exit, (0,)).start()"),
    # a pool kept for the process's life, as engines keep one: idle once a call returns
    "idle_pool": ("from concurrent.futures import ThreadPoolExecutor\n"
                  "_POOL = ThreadPoolExecutor(2)\n", "_POOL.submit(len, ()).result()"),
    "busy_pool": ("import time\nfrom concurrent.futures import ThreadPoolExecutor\n"
                  "_POOL = ThreadPoolExecutor(2)\n", "_POOL.submit(time.sleep, 60)"),
    # a CPU-time limit the kernel ends the worker at, once reached (an audit: a hard limit
    # reached in a later call read as "killed from outside", and its fresh worker passed)
    "cpu_limit": ("import resource\n", "resource.setrlimit(resource.RLIMIT_CPU, (100000, "
                  "resource.getrlimit(resource.RLIMIT_CPU)[1]))"),
    "cpu_limit_kept": ("import resource\n", "resource.setrlimit(resource.RLIMIT_CPU, "
                       "resource.getrlimit(resource.RLIMIT_CPU))"),
}


def _file(tmp_path, kind: str) -> str:
    imports, leave = LEAVES[kind]
    path = tmp_path / f"{kind}.py"
    path.write_text(imports + STAGES + f"    {leave}\n")
    return f"{path}::{FUNC}"


def _load(pool: WorkerPool, specs: list[str], fresh: bool = True):
    targets = [load_target(spec) for spec in specs]
    return pool.load([t.ref for t in targets], {t.ref.schema: t.schema for t in targets},
                     fresh=fresh)


def _run(pool: WorkerPool, targets, count: int = 3) -> None:
    sides = list(range(len(targets)))
    batch = [(i, sample_scenario(targets[0].schema, i, 0)) for i in range(count)]
    answer = pool.observe(sides, batch, RunOptions(timeout=5))
    assert all(o.crashed is None for _, seen in answer for o in seen)


@pytest.mark.parametrize("kind, named", [
    ("timer", "threading.Timer"),
    ("thread", "running sleep"),
    ("busy_pool", "running _worker"),
    ("faulthandler", "faulthandler.dump_traceback_later(60, exit=True), armed"),
    ("cpu_limit", "the CPU-time limit (RLIMIT_CPU) lowered to 100000 s"),
])
def test_what_could_end_the_worker_later_is_worker_died_at_close(tmp_path, kind, named):
    spec = _file(tmp_path, kind)
    pool = WorkerPool()
    targets = _load(pool, [spec])
    _run(pool, targets)
    with pytest.raises(WorkerDied) as info:
        pool.close()
    text = str(info.value)
    assert named in text and f"a call of {spec!r}" in text
    assert "will call os._exit" in text or kind != "timer"     # not stagecheck's guard
    assert messages.WORKER_LEFT_BEHIND[1] in text
    assert pool._process is None


@pytest.mark.parametrize("specs", [
    ["legacy", "single-loop"],
    ["cancelled_timer"], ["faulthandler_cancelled"], ["faulthandler_no_exit"],
    ["joined_thread"], ["torch"], ["idle_pool"], ["cpu_limit_kept"],
])
def test_nothing_left_behind_closes_quietly(tmp_path, specs):
    pool = WorkerPool()
    targets = _load(pool, [s if s in ("legacy", "single-loop") else _file(tmp_path, s)
                           for s in specs])
    _run(pool, targets)
    pool.close()
    assert pool._process is None


def test_an_idle_pool_worker_is_told_from_a_busy_one():
    """``idle_pool_worker``: waiting on an empty queue is idle; running submitted work, or
    holding work not yet taken, is not; the workers of a pool shut down end."""
    def workers(pool):
        return [t for t in threading.enumerate() if t in pool._threads]

    pool = ThreadPoolExecutor(1)
    pool.submit(len, ()).result()
    deadline = time.monotonic() + 10
    while not all(idle_pool_worker(t) for t in workers(pool)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert workers(pool) and all(idle_pool_worker(t) for t in workers(pool))
    gate = threading.Event()
    running = pool.submit(gate.wait, 30)
    queued = pool.submit(len, ())
    assert not any(idle_pool_worker(t) for t in workers(pool))
    assert not idle_pool_worker(threading.current_thread())
    gate.set()
    running.result(), queued.result()
    pool.shutdown(wait=True)
    assert not any(t.is_alive() for t in pool._threads)


def test_a_worker_the_kernel_ends_at_a_cpu_limit_set_in_it_is_the_calls_crash(tmp_path):
    """The kernel's SIGKILL at a hard RLIMIT_CPU the call set is the call's end, said as
    such (the keeper reads the limit before it reaps the worker), never "killed by
    SIGKILL", which is retried in a fresh worker and, passing there, excused."""
    path = tmp_path / "cpu_limit_spins.py"
    path.write_text("import resource\n" + STAGES + "    resource.setrlimit(resource.RLIMIT_CPU,"
                    " (1, 1))\n    while True:\n        pass\n")
    pool = WorkerPool()
    targets = _load(pool, [f"{path}::{FUNC}"])
    batch = [(0, sample_scenario(targets[0].schema, 0, 0))]
    ((_, (seen,)),) = pool.observe([0], batch, RunOptions(timeout=60))
    assert seen.crashed == messages.KILLED_AT_CPU_LIMIT.format(limit=1)
    pool.close()


def test_still_running_is_the_one_rule_of_both_checks():
    """``still_running`` (what a call's check and a protocol sequence's check both ask):
    a started thread and a pending ``threading.Timer`` are; a cancelled timer, a
    stagecheck thread, the main thread and a finished thread are not."""
    gate = threading.Event()
    worker = threading.Thread(target=gate.wait, args=(30,))
    own = threading.Thread(target=gate.wait, args=(30,), name="stagecheck-reader")
    pending = threading.Timer(60, len, ((),))
    cancelled = threading.Timer(60, len, ((),))
    for t in (worker, own, pending, cancelled):
        t.start()
    cancelled.cancel()
    try:
        assert still_running(worker) and still_running(pending)
        assert not still_running(cancelled) and not still_running(own)
        assert not still_running(threading.main_thread())
    finally:
        gate.set()
        pending.cancel()
        for t in (worker, own, pending, cancelled):
            t.join(5)
    assert not still_running(worker)


def test_a_worker_closed_before_any_call_is_not_asked(tmp_path):
    pool = WorkerPool()
    _load(pool, [_file(tmp_path, "timer")])
    pool.close()        # loading left nothing, and no call ran: nothing to ask


def test_a_reused_worker_names_the_targets_whose_calls_ran_in_it(tmp_path):
    """Mutants load one target after another into one worker (``fresh=False``): a timer
    the first left ends the worker while the second is loaded; the end names the first
    (was: the second, whose side index the first's calls had)."""
    first = _file(tmp_path, "timer_soon")
    pool = WorkerPool()
    _run(pool, _load(pool, [first]), count=1)
    process = pool._process
    second = _load(pool, ["legacy"], fresh=False)
    assert pool._process is process          # reused, with its history
    deadline = time.monotonic() + 30
    while process.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(WorkerDied) as info:
        _run(pool, second, count=1)
    text = str(info.value)
    assert f"after calls of {first!r} had returned" in text and "'legacy'" not in text
    pool.close()


def test_a_reused_worker_left_behind_names_every_target_that_ran(tmp_path):
    first = _file(tmp_path, "timer")
    pool = WorkerPool()
    _run(pool, _load(pool, [first]), count=1)
    _run(pool, _load(pool, ["legacy"], fresh=False), count=1)
    with pytest.raises(WorkerDied) as info:
        pool.close()
    assert f"after calls of {first!r} and 'legacy' had returned" in str(info.value)


class _Closing:
    """A runner whose close finds what a worker left behind."""

    def close(self):
        from stagecheck.oracles.worker.blame import left_behind
        raise left_behind(["a threading.Timer that will call os._exit"], ["x.py::f"], True)


def test_a_run_without_errors_has_no_verdict_but_errors_found_stand(capsys):
    """What a worker holds at its close comes after every call of the run: a run that
    found no error would have passed (no verdict: WorkerDied), one that found errors keeps
    them (exit 1; was: exit 2 or 1 by the timer's luck, ``stops_after``), said on stderr."""
    from stagecheck.oracles.runner import close_after_campaign
    with pytest.raises(WorkerDied):
        close_after_campaign(_Closing(), found_errors=False)
    close_after_campaign(_Closing(), found_errors=True)
    err = capsys.readouterr().err
    assert err.startswith("stagecheck: note: the code under test left in its worker")
    assert "the error findings stand" in err
