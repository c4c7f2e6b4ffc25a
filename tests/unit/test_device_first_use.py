"""A worker's first use of the device is made before its first call, and a hang the
checker ends is traced with the clock that passed its deadline (oracles/worker/pool.py).

On the H200 a worker made the driver's initialisation inside its first call's deadline
(6 s of CPU time in 4.3 s where three test processes started at once), and 3 of 3 runs of
the batched-engine CUDA tests ended a correct call as a hang (docs/cuda.md,
docs/results/h200_hang_probe/)."""

import json
import textwrap

import pytest

from stagecheck.oracles.targets import load_target
from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.sample import sample_scenario
from stagecheck.oracles.worker.deadlines import TRACE_HANGS_ENV
from stagecheck.oracles.worker.pool import WorkerPool
from stagecheck.oracles.worker.protocol import observing

#: a target that ignores its worker's own time-limit signals and spins: only the checker
#: can end it
BLOCKS_ITS_TIMERS = textwrap.dedent("""
    import signal

    def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
                                        mamba_state_idx):
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        signal.signal(signal.SIGPROF, signal.SIG_IGN)
        while True:
            pass
""")


def _pool_with(spec: str) -> tuple[WorkerPool, object]:
    target = load_target(spec)
    pool = WorkerPool()
    pool.load([target.ref], {target.ref.schema: target.schema})
    return pool, target


def _spins_once(path):
    """What the checker saw of one call of the spinning target at ``path``."""
    pool, target = _pool_with(f"{path}::stage_postprocess_inputs_to_gpu")
    try:
        ((_, (seen,)),) = pool.observe([0], [(0, sample_scenario(target.schema, 1, 0))],
                                       RunOptions(timeout=0.1))
    finally:
        pool.discard()
    return seen


def test_a_pool_on_the_cpu_makes_no_first_use_request():
    pool, target = _pool_with("legacy")
    try:
        ((_, (seen,)),) = pool.observe([0], [(0, sample_scenario(target.schema, 1, 0))],
                                       RunOptions())
        assert seen.exception_type is None and not seen.timed_out
        assert pool.device is None
        assert pool.clone().device is None
    finally:
        pool.close()


def test_a_hang_the_checker_ends_is_traced_with_its_clock(tmp_path, monkeypatch):
    path = tmp_path / "spins.py"
    path.write_text(BLOCKS_ITS_TIMERS)
    trace = tmp_path / "hangs.jsonl"
    monkeypatch.setenv(TRACE_HANGS_ENV, str(trace))
    assert _spins_once(path).timed_out
    (line,) = trace.read_text().splitlines()
    hang = json.loads(line)
    cpu_deadline, wall_deadline = hang["deadline"]
    assert hang["position"] == observing(0, 0)         # in the call, not before it
    assert hang["cpu"] > cpu_deadline or hang["wall"] > wall_deadline, hang


def test_no_trace_is_written_unless_asked(tmp_path, monkeypatch):
    monkeypatch.delenv(TRACE_HANGS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "spins.py"
    path.write_text(BLOCKS_ITS_TIMERS)
    assert _spins_once(path).timed_out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spins.py"]


def test_a_device_that_cannot_start_is_a_clean_error_before_any_call():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device: its first use succeeds")
    from stagecheck.oracles.errors import StagecheckError
    pool, target = _pool_with("legacy")
    try:
        with pytest.raises(StagecheckError) as raised:
            pool.observe([0], [(0, sample_scenario(target.schema, 1, 0))],
                         RunOptions(device="cuda"))
        assert "inside its worker" in raised.value.problem
    finally:
        pool.discard()
