"""The device model's CUDA backend, the copy forms and the protocols on a real GPU.

Skipped where torch sees no CUDA device (``conftest.py``); run on the H200 with
``python -m pytest -q tests/gpu/test_protocols_gpu.py``. Each test states on CUDA what the
CPU-model tests state on the CPU (tests/unit/test_device_model.py,
tests/quality/test_copy_forms.py, tests/quality/test_protocols.py): the same hazards from
the same code, the same copy events from every copy form, and the same verdict on every
protocol fixture. Device work is queued ahead of the copies (``torch.cuda._sleep``) so that
they really lag behind the host.
"""

import pathlib
import subprocess
import sys
import threading
import time

import pytest
import torch

from stagecheck.oracles.device import device_model
from stagecheck.oracles.observe import observe
from stagecheck.oracles.observe.fast import FastCudaBackend
from stagecheck.oracles.observe.instrumented import InstrumentedBackend
from stagecheck.oracles.options import CampaignConfig, RunOptions
from stagecheck.oracles.campaign import run_campaign
from stagecheck.oracles.protocol import ProtocolConfig, run_protocol_campaign
from stagecheck.oracles.targets import load_target
from stagecheck.spec import Copy, check
from stagecheck.spec.observation import (DEVICE_READ_PENDING_WRITE, HOST_TOUCH_PENDING_DOWNLOAD,
                                         HOST_WRITE_PENDING_UPLOAD)
from tests.helpers import scenario
from tests.protocol_catalog import BUILTIN, expected, fixtures, reports, target

pytestmark = pytest.mark.cuda

#: device work queued ahead of the copies (about a millisecond on an H200)
BUSY = 2_000_000
FORMS = ["equivalent_raw_copy_", "equivalent_to_device_copy", "equivalent_copy_helper",
         "equivalent_clone_to_device_copy", "equivalent_foreach_copy",
         "equivalent_to_device_copy_true"]
STAGE = "stage_postprocess_inputs_to_gpu"


def kinds(model):
    return [h.kind for h in model.hazards]


# ---------------------------------------------------------------- the device model

def test_the_cuda_backend_sees_a_host_write_into_a_pending_upload():
    model = device_model("cuda", busy_cycles=BUSY)
    with model.activate():
        host = torch.arange(8, dtype=torch.int32).pin_memory()
        dev = torch.zeros(8, dtype=torch.int32, device="cuda")
        torch.cuda._sleep(50 * BUSY)                   # the copy waits behind this
        dev[:4].copy_(host[:4], non_blocking=True)
        assert model.in_flight() == 1
        host.numpy()[1] = 99                           # the DMA has not read it yet
        torch.cuda.synchronize()
        assert dev.tolist()[1] == 99                   # it read the page late
    assert kinds(model) == [HOST_WRITE_PENDING_UPLOAD] and model.hazards[0].slots == (1,)


def test_the_cuda_backend_sees_a_read_of_a_pending_download_and_an_event_makes_it_safe():
    model = device_model("cuda", busy_cycles=BUSY)
    with model.activate():
        dev = torch.arange(4, dtype=torch.int32, device="cuda")
        out = torch.zeros(4, dtype=torch.int32, pin_memory=True)
        torch.cuda._sleep(50 * BUSY)
        out.copy_(dev, non_blocking=True)
        landed = torch.cuda.Event()
        landed.record()
        assert out.tolist() == [0, 0, 0, 0]           # not landed yet
        assert kinds(model) == [HOST_TOUCH_PENDING_DOWNLOAD]
        landed.synchronize()
        assert out.tolist() == [0, 1, 2, 3] and len(model.hazards) == 1


def test_the_device_generic_event_and_stream_are_tracked_on_cuda():
    # torch.Event() / torch.Stream() (vLLM's runner makes torch.Event() now) as the CUDA
    # backend's tracked event and stream: the wait they give is seen
    model = device_model("cuda", busy_cycles=BUSY)
    with model.activate():
        dev = torch.arange(4, dtype=torch.int32, device="cuda")
        out = torch.zeros(4, dtype=torch.int32, pin_memory=True)
        side = torch.Stream()
        side.wait_stream(torch.cuda.current_stream())
        torch.cuda._sleep(50 * BUSY)
        with torch.cuda.stream(side):
            out.copy_(dev, non_blocking=True)
            landed = torch.Event()
            landed.record()
        assert out.tolist() == [0, 0, 0, 0]           # not landed yet
        assert kinds(model) == [HOST_TOUCH_PENDING_DOWNLOAD]
        landed.synchronize()
        assert out.tolist() == [0, 1, 2, 3] and len(model.hazards) == 1
    assert not model.gates.forced


def test_the_cuda_backend_sees_a_consumer_on_another_stream_without_a_wait():
    model = device_model("cuda", busy_cycles=BUSY)
    with model.activate():
        host = torch.tensor([4, 5], dtype=torch.int32).pin_memory()
        mirror = torch.zeros(2, dtype=torch.int32, device="cuda")
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            # about half a second ahead of the copy: the host's own first launch (a fresh
            # process's first kernels) may take longer than a shorter delay, which then
            # ran out before the consumer was released (the test was flaky at 50 x BUSY)
            torch.cuda._sleep(500 * BUSY)
            mirror.copy_(host, non_blocking=True)
        model.launch("forward", lambda: mirror.add_(0), {"mirror": mirror})
        torch.cuda.synchronize()
        model.finish()
    assert DEVICE_READ_PENDING_WRITE in kinds(model)
    assert model.reads_log[0][2]["mirror"] == [0, 0]   # it ran before the copy


def test_the_cuda_backend_is_silent_on_ordered_code_and_writes_of_nothing():
    model = device_model("cuda", busy_cycles=BUSY)
    with model.activate():
        host = torch.zeros(4, dtype=torch.int32).pin_memory()
        dev = torch.zeros(4, dtype=torch.int32, device="cuda")
        side = torch.cuda.Stream()
        done = torch.cuda.Event()
        for step in range(3):
            done.synchronize()
            host.numpy()[:] = step
            host[:0] = 7
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                dev.copy_(host, non_blocking=True)
            torch.cuda.current_stream().wait_stream(side)
            model.launch("forward", lambda: dev.add_(0), {"dev": dev})
            done.record()
            fresh = torch.tensor([step] * 4, dtype=torch.int32).pin_memory()
            dev.copy_(fresh, non_blocking=True)        # a fresh pinned tensor per call
            del fresh
        model.finish()
    assert model.hazards == [] and model.mismatches == []


def test_a_gate_holds_a_copy_until_the_host_waits_and_a_wait_it_cannot_see_never_hangs():
    model = device_model("cuda")                      # no busy cycles: only the gate holds
    with model.activate():
        host = torch.arange(4, dtype=torch.int32).pin_memory()
        dev = torch.zeros(4, dtype=torch.int32, device="cuda")
        dev.copy_(host, non_blocking=True)
        time.sleep(0.05)
        assert model.in_flight() == 1                  # the host has not waited: held
        torch.cuda.synchronize()
        assert model.in_flight() == 0 and dev.tolist() == [0, 1, 2, 3]
    gates = model.gates
    assert gates.available and gates.forced == 0
    gates.hold(torch.cuda.current_stream().cuda_stream)
    dev.zero_()
    assert dev.tolist() == [0, 0, 0, 0]                # a wait no interception sees
    assert gates.forced == 1                           # the watchdog opened the gate


# ---------------------------------------------------------------- the copy forms

@pytest.mark.parametrize("name", FORMS)
def test_each_copy_form_logs_the_copies_of_copy_to_gpu_on_cuda(name):
    ref = load_target("single-loop")
    form = load_target(f"tests/targets/{name}.py::{STAGE}")
    options = RunOptions(device="cuda", gpu_busy_cycles=BUSY)
    for s in (scenario(), scenario(num_reqs=0)):
        for backend in (lambda: InstrumentedBackend("cuda"), FastCudaBackend):
            a = observe(ref, s, options, backend())
            b = observe(form, s, options, backend())
            assert sorted((e for e in b.events if type(e) is Copy), key=lambda c: c.buffer) == \
                sorted((e for e in a.events if type(e) is Copy), key=lambda c: c.buffer)
            assert (b.cpu, b.gpu) == (a.cpu, a.gpu)
            assert check(s, b, form.profile) == []


#: copy spellings written into the raw-copy fixture (an audit's, first checked on the CPU)
INLINE_FORMS = {
    "split": "buf.gpu.split([num_reqs, buf.gpu.shape[0] - num_reqs])[0].copy_("
             "buf.cpu.split([num_reqs, buf.cpu.shape[0] - num_reqs])[0], non_blocking=True)",
    "pinned clone": "buf.gpu[:num_reqs].copy_(buf.cpu[:num_reqs].clone().pin_memory(), "
                    "non_blocking=True)",
}


@pytest.mark.parametrize("form_name", INLINE_FORMS)
def test_each_inline_copy_form_logs_the_copies_of_copy_to_gpu_on_cuda(form_name, tmp_path):
    source = pathlib.Path("tests/targets/equivalent_raw_copy_.py").read_text()
    line = "        buf.gpu[:num_reqs].copy_(buf.cpu[:num_reqs], non_blocking=True)"
    assert line in source
    path = tmp_path / "form.py"
    path.write_text(source.replace(line, "        " + INLINE_FORMS[form_name]))
    ref, form = load_target("single-loop"), load_target(f"{path}::{STAGE}")
    options = RunOptions(device="cuda", gpu_busy_cycles=BUSY)
    for s in (scenario(), scenario(num_reqs=0)):
        for backend in (lambda: InstrumentedBackend("cuda"), FastCudaBackend):
            a = observe(ref, s, options, backend())
            b = observe(form, s, options, backend())
            assert sorted((e for e in b.events if type(e) is Copy), key=lambda c: c.buffer) == \
                sorted((e for e in a.events if type(e) is Copy), key=lambda c: c.buffer)
            assert (b.cpu, b.gpu) == (a.cpu, a.gpu)


def test_a_raw_copy_refactor_is_equivalent_to_legacy_on_cuda():
    config = CampaignConfig.from_options(examples=300, device="cuda", gpu_busy_cycles=BUSY)
    result = run_campaign(load_target("legacy"),
                          load_target(f"tests/targets/equivalent_raw_copy_.py::{STAGE}"), config)
    assert result.verdict() == "equivalent", [f.message for f in result.errors]


def test_a_rewrite_after_a_raw_copy_is_a_hazard_naming_its_slots_on_cuda():
    target = load_target(f"tests/targets/buggy_raw_copy_then_recount_drafts.py::{STAGE}")
    s = scenario()
    o = observe(target, s, RunOptions(device="cuda", gpu_busy_cycles=BUSY))
    (hazard,) = [f for f in check(s, o, target.profile) if f.invariant == "no_copy_hazard"]
    assert hazard.extra["slots"] == [0, 1, 2]


# ---------------------------------------------------------------- the protocols

BUGGY = [(p, f) for p in BUILTIN for f in fixtures(p, "buggy")]
CLEAN = [(p, f) for p in BUILTIN for f in fixtures(p, "fixed") + fixtures(p, "equivalent")]
CUDA = dict(device="cuda", busy_cycles=BUSY)


@pytest.mark.parametrize("protocol,path", BUGGY, ids=lambda v: getattr(v, "name", v))
def test_a_buggy_fixture_is_found_on_cuda_as_on_the_cpu_model(protocol, path):
    result = run_protocol_campaign(None, target(path), protocol,
                                   ProtocolConfig(sequences=100, **CUDA))
    assert result.verdict() == "different"
    names = expected(path)
    assert any(reports(f, name) for f in result.errors for name in names), \
        ([(f.invariant, f.extra.get("kind")) for f in result.errors], names)


@pytest.mark.parametrize("protocol,path", CLEAN, ids=lambda v: getattr(v, "name", v))
def test_a_fixed_or_equivalent_fixture_is_clean_on_cuda(protocol, path):
    result = run_protocol_campaign(None, target(path), protocol,
                                   ProtocolConfig(sequences=40, **CUDA))
    assert result.errors == [], [f.message for f in result.errors]
    assert result.gates_forced == 0, result.stalls     # the model saw every wait


def test_a_single_call_protocol_on_cuda_keeps_legacy_equal_to_single_loop():
    result = run_protocol_campaign("legacy", "single-loop", "single-call:mamba-postprocess",
                                   ProtocolConfig(sequences=100, **CUDA))
    assert result.verdict() == "equivalent", [f.message for f in result.errors]


@pytest.mark.parametrize("protocol", BUILTIN)
def test_the_command_line_on_cuda_exits_1_on_a_buggy_fixture_and_0_on_the_fixed(protocol,
                                                                               tmp_path):
    buggy, (fixed,) = fixtures(protocol, "buggy")[0], fixtures(protocol, "fixed")
    for path, code, examples in ((buggy, 1, "100"), (fixed, 0, "40")):
        proc = subprocess.run([sys.executable, "-m", "stagecheck", "spec", target(path),
                               "--protocol", protocol, "--device", "cuda", "--examples",
                               examples, "--gpu-busy-cycles", str(BUSY), "-q",
                               "--save-dir", str(tmp_path)], capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == code, proc.stdout + proc.stderr
        assert "on CUDA" in proc.stdout


# ------------------------------------------- pinned memory reused (tests/targets/protocols/_reuse)


def _reuse(name: str) -> str:
    import os
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "targets", "protocols", "_reuse", name)


@pytest.mark.parametrize("name,component,protocol,errors", [
    ("scratch_ordered_download.py", "Scratch", "scratch_protocol.py", False),
    ("scratch_cleared_after_sync.py", "Scratch", "scratch_protocol.py", False),
    ("scratch_pageable.py", "Scratch", "scratch_protocol.py", False),
    ("stop_flag_polled_until_ready.py", "StopChecker", "stop_flag_protocol.py", False),
    ("stop_flag_polled_once.py", "StopChecker", "stop_flag_protocol.py", True),
])
def test_reused_pinned_memory_gets_the_cpu_models_verdict_on_cuda(name, component, protocol,
                                                                   errors):
    result = run_protocol_campaign(None, f"{_reuse(name)}::{component}", _reuse(protocol),
                                   ProtocolConfig(sequences=60, **CUDA))
    assert bool(result.errors) == errors, [f.message for f in result.errors]


def test_a_wait_stagecheck_cannot_see_is_reported_with_where_the_host_waited(tmp_path):
    # the host's write after the unseen wait is a race to stagecheck (it saw no wait), and
    # the note says why: where the host waited unseen
    fixture = f"{_reuse('scratch_unseen_sync.py')}::Scratch"
    result = run_protocol_campaign(None, fixture, _reuse("scratch_protocol.py"),
                                   ProtocolConfig(sequences=4, **CUDA))
    assert result.gates_forced >= 1
    assert any("step (scratch_unseen_sync.py:" in where for where in result.stalls), \
        result.stalls
    proc = subprocess.run([sys.executable, "-m", "stagecheck", "spec", fixture, "--protocol",
                           _reuse("scratch_protocol.py"), "--device", "cuda", "--examples", "3",
                           "--save-dir", str(tmp_path)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert "the watchdog opened every gate" in proc.stdout
    assert "step (scratch_unseen_sync.py:" in proc.stdout


def test_unordered_copies_into_one_pinned_buffer_are_a_race_on_cuda():
    result = run_protocol_campaign(None, f"{_reuse('scratch_unordered_download.py')}::Scratch",
                                   _reuse("scratch_protocol.py"),
                                   ProtocolConfig(sequences=60, **CUDA))
    assert any(f.invariant == "no_copy_hazard" for f in result.findings), \
        [f.message for f in result.findings]


@pytest.mark.parametrize("protocol", BUILTIN)
def test_a_fixed_fixtures_sequences_leave_no_thread_and_need_no_fresh_worker_on_cuda(protocol):
    # the gates' watchdog once outlived each run: every sequence then asked for a fresh
    # worker (one torch import and CUDA start per sequence: 1 sequence/s instead of ~70)
    from stagecheck.oracles.protocol import load_protocol
    from stagecheck.oracles.protocol import run as protocol_run
    from stagecheck.oracles.protocol.campaign import _ops_per_sequence
    from stagecheck.oracles.protocol.generate import sample_sequence
    from stagecheck.oracles.targets import target_ref
    from stagecheck.oracles.worker.protocol import RESTART
    loaded = load_protocol(protocol)
    (path,) = fixtures(protocol, "fixed")
    refs = [target_ref(f"{path}::{loaded.component}")]
    options = {"device": "cuda", "timeout": 30.0, "busy_cycles": 0,
               "ops": _ops_per_sequence(loaded, 8)}
    batch = [(i, sample_sequence(loaded, 0, i, steps=8).to_dict()) for i in range(4)]
    answer = protocol_run.run_batch(protocol, refs, batch, options)
    assert tuple(answer[-1]) != RESTART
    assert [a[0] for a in answer] == [0, 1, 2, 3]          # every sequence, one worker
    assert not any(t.name == "stagecheck-gates" for t in threading.enumerate())


# --------------------- torch operations the host issues (tests/targets/protocols/_early)


@pytest.mark.parametrize("name,component,errors", [
    ("positions_event_window.py", "Positions", False),
    ("positions_written_early.py", "Positions", True),
    ("counts_read_after_event.py", "Counts", False),
    ("counts_read_before_event.py", "Counts", True),
    ("mapping_after_unique.py", "Mapping", False),
    ("mapping_without_wait.py", "Mapping", True),
])
def test_host_issued_operations_get_the_cpu_models_verdict_on_cuda(name, component, errors):
    # on CUDA such operations are really queued; the CPU model runs them at once and marks
    # what they made run early (a read in place, indices_*.py, is the CPU model's only: on
    # CUDA a pinned host tensor given to device work is read where torch reads it)
    import os
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "targets", "protocols", "_early")
    protocol = os.path.join(here, name.split("_")[0] + "_protocol.py")
    result = run_protocol_campaign(None, f"{os.path.join(here, name)}::{component}", protocol,
                                   ProtocolConfig(sequences=60, **CUDA))
    assert bool(result.errors) == errors, [f.message for f in result.errors]
    if not errors:
        assert not result.infos, [f.message for f in result.infos]
    # the protocol's observe reads result.out on the device: its gates open at once
    # (counted, where the read is), never through the watchdog's 0.25 s stall
    assert all(w.startswith("a read of device memory by the checker's call")
               for w in result.stalls), result.stalls


# ------------------ device work that indexes part of a table (tests/targets/protocols/_tables)


@pytest.mark.parametrize("name,errors", [("block_table_fixed.py", False),
                                         ("block_table_buggy.py", True)])
def test_a_kernel_indexing_a_block_table_gets_the_cpu_models_verdict_on_cuda(name, errors):
    # the elements an advanced index picks are computed on the device behind the gates and
    # noted when the run finishes: stale rows the kernel never reads are not compared
    import os
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "targets", "protocols", "_tables")
    result = run_protocol_campaign(None, f"{os.path.join(here, name)}::BlockTableRunner",
                                   os.path.join(here, "block_table_protocol.py"),
                                   ProtocolConfig(sequences=60, **CUDA))
    assert bool(result.errors) == errors, [f.message for f in result.errors]
    assert result.gates_forced == 0, result.stalls
    for finding in result.errors:
        assert "block_table[(1" not in finding.message, finding.message


# ------------- device work judged by the elements it read and wrote (races_at_end.py)

@pytest.mark.parametrize("row", [0, 2])
def test_a_scatter_into_another_block_than_a_pending_download_reads_is_no_race_on_cuda(row):
    # the CUDA backend took ``kv[blocks, offsets] = values`` as a write of all of kv: a
    # pending download of another block raced with it (--strict failed correct code on
    # the GPU, not on the CPU model); the positions are now judged when the run ends
    model = device_model("cuda", busy_cycles=BUSY)
    with model.activate():
        kv = torch.arange(8, dtype=torch.int32, device="cuda").reshape(4, 2)
        back = torch.zeros(2, dtype=torch.int32).pin_memory()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(50 * BUSY)
            back.copy_(kv[0], non_blocking=True)          # block 0 offloaded
        blocks = torch.tensor([row], device="cuda")
        offsets = torch.tensor([1], device="cuda")
        values = torch.tensor([9], dtype=torch.int32, device="cuda")

        def forward():
            kv[blocks, offsets] = values

        model.launch("forward", forward, {"kv": kv, "blocks": blocks, "offsets": offsets,
                                          "values": values})
        torch.cuda.synchronize()
        model.finish()
    if row:
        assert model.hazards == []
    else:
        (h,) = model.hazards
        assert (h.kind, h.slots) == (DEVICE_READ_PENDING_WRITE, (1,))
        assert h.by.endswith("overwrites it")


@pytest.mark.parametrize("row", [0, 2])
def test_an_upload_after_a_launch_races_only_with_what_the_work_read_on_cuda(row):
    # device work given a whole KV table reads one block of it; an upload into another
    # block after the launch, on a stream not ordered after it, was a race on CUDA only
    model = device_model("cuda", busy_cycles=BUSY)
    with model.activate():
        kv = torch.arange(8, dtype=torch.int32, device="cuda").reshape(4, 2)
        model.name_region(kv, "kv")
        out = torch.zeros(2, dtype=torch.int32, device="cuda")
        rows = torch.tensor([2], device="cuda")
        model.launch("attend", lambda: out.copy_(kv[rows].reshape(-1) + 1),
                     {"kv": kv, "rows": rows, "out": out})
        host = torch.tensor([5, 6], dtype=torch.int32).pin_memory()
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            kv[row].copy_(host, non_blocking=True)        # a load into block ``row``
        torch.cuda.synchronize()
        model.finish()
    if row != 2:
        assert model.hazards == []
    else:
        (h,) = model.hazards
        assert (h.kind, h.slots) == (DEVICE_READ_PENDING_WRITE, (4, 5))
        assert h.by.endswith("overwrites it")


@pytest.mark.parametrize("row", [0, 2])
def test_a_load_pending_at_a_launch_races_only_with_what_the_work_reads_on_cuda(row):
    # a load into block ``row`` still pending at the launch of work given the whole KV
    # table, unordered with it, was a race whatever the work indexed (both backends)
    model = device_model("cuda", busy_cycles=BUSY)
    with model.activate():
        kv = torch.arange(8, dtype=torch.int32, device="cuda").reshape(4, 2)
        model.name_region(kv, "kv")
        host = torch.tensor([5, 6], dtype=torch.int32).pin_memory()
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            torch.cuda._sleep(50 * BUSY)
            kv[row].copy_(host, non_blocking=True)        # a load into block ``row``
        out = torch.zeros(2, dtype=torch.int32, device="cuda")
        rows = torch.tensor([2], device="cuda")
        model.launch("attend", lambda: out.copy_(kv[rows].reshape(-1) + 1),
                     {"kv": kv, "rows": rows, "out": out})
        torch.cuda.synchronize()
        model.finish()
    if row != 2:
        assert model.hazards == []
    else:
        (h,) = model.hazards
        assert (h.kind, h.region, h.slots) == (DEVICE_READ_PENDING_WRITE, "kv", (4, 5))
        assert h.by.endswith("reads it")
