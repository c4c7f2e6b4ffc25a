"""Pinned memory reused across copies, end to end (``tests/targets/protocols/_reuse/``):
the host may clear or reuse a pinned buffer once it knows the upload read it; a download
and an upload that no stream order or event orders race whichever lands first; a host
read of a download's destination before it landed is an error when the download then
changes what was read, even where the protocol observes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import ROOT, assert_outcome, run_stagecheck

HERE = os.path.join(ROOT, "tests", "targets", "protocols", "_reuse")

CASES = [
    ("scratch_unordered_download.py", "Scratch", "scratch_protocol.py", 1,
     ("no_copy_hazard", "device_read_as_meant", "run newest first")),
    ("scratch_ordered_download.py", "Scratch", "scratch_protocol.py", 0, ()),
    ("scratch_cleared_after_sync.py", "Scratch", "scratch_protocol.py", 0, ()),
    ("scratch_pageable.py", "Scratch", "scratch_protocol.py", 0, ()),
    ("stop_flag_polled_once.py", "StopChecker", "stop_flag_protocol.py", 1,
     ("readback_as_written", "before download", "no_copy_hazard")),
    ("stop_flag_polled_until_ready.py", "StopChecker", "stop_flag_protocol.py", 0, ()),
    ("prev_tokens_event_wait.py", "PrevTokenInputs", "prev_tokens_protocol.py", 0, ()),
    ("prev_tokens_host_sync.py", "PrevTokenInputs", "prev_tokens_protocol.py", 0, ()),
    ("prev_tokens_no_wait.py", "PrevTokenInputs", "prev_tokens_protocol.py", 1,
     ("no_copy_hazard", "pinned-reused-pending-copy")),
    ("prep_event_sync.py", "InputPreparer", "prep_protocol.py", 0, ()),
    # a race whose effect is a raise of the run under the schedule (not of the run as
    # meant) is that error's cause, not a harmless info finding
    ("prep_sync_too_late.py", "InputPreparer", "prep_protocol.py", 1,
     ("1 error(s) from 2 error finding(s), 0 info finding(s)",
      "[no_copy_hazard-", "host-write-pending-upload query_start_loc.cpu")),
] + [
    (name, "AsyncSampler", protocol, code, words)
    for protocol in ("async_output_protocol.py", "async_output_unobserved_protocol.py")
    for name, code, words in (
        ("async_output_fixed.py", 0, ()),
        # device work that overwrites what a pending download reads: seen when the work
        # runs, said at the step that launched it; an error with or without observe (the
        # download wrote other values than when every copy completes when issued)
        ("async_output_sample_overwrites_pending_copy.py", 1,
         ("step 1 (execute): device work _sample", "overwrites slots [0] of sampled_gpu",
          "readback_as_written")),
        ("async_output_copy_without_wait_stream.py", 1,
         ("step 0 (execute): download sampled_gpu", "device-read-pending-write")))
]


@pytest.mark.parametrize("name, component, protocol, code, words", CASES,
                         ids=[c[0] for c in CASES])
def test_reused_pinned_memory_gets_the_right_verdict(name, component, protocol, code, words,
                                                     tmp_path):
    proc = run_stagecheck("spec", f"{os.path.join(HERE, name)}::{component}", "--protocol",
                          os.path.join(HERE, protocol), "--save-dir", tmp_path, "--examples",
                          "120")
    assert_outcome(proc, code, words)


def test_an_upload_the_device_orders_after_a_download_reads_what_it_delivers(tmp_path):
    # the event the current stream waits on and a host synchronization are the same
    # protocol: the consumer reads the downloaded ids either way (before, the stream wait
    # was reported as reading other values than the host held at the launch)
    proc = run_stagecheck("diff",
                          f"{os.path.join(HERE, 'prev_tokens_host_sync.py')}::PrevTokenInputs",
                          f"{os.path.join(HERE, 'prev_tokens_event_wait.py')}::PrevTokenInputs",
                          "--protocol", os.path.join(HERE, "prev_tokens_protocol.py"),
                          "--save-dir", tmp_path)
    assert_outcome(proc, 0, ("EQUIVALENT",))


def test_a_class_target_with_a_syntax_error_says_so_not_that_the_class_is_missing(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\n\n\nclass Scratch(:\n    pass\n")
    protocol = os.path.join(HERE, "scratch_protocol.py")
    for args in (("spec", f"{broken}::Scratch", "--protocol", protocol, "--save-dir",
                  str(tmp_path)),
                 ("protocol", "check", protocol, f"{broken}::Scratch")):
        proc = run_stagecheck(*args, timeout=300)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "is not valid Python (line 4: invalid syntax)" in proc.stderr, proc.stderr
        assert "has no module-level class" not in proc.stderr


@pytest.mark.parametrize("dtype, code", [('"torch.int64"', 0), ("torch.int64", 0),
                                         ('"int46"', 2)])
def test_ctx_tensor_takes_a_dtype_name_with_or_without_torch_or_the_dtype(dtype, code,
                                                                          tmp_path):
    source = open(os.path.join(HERE, "prev_tokens_protocol.py")).read()
    protocol = tmp_path / "dtype_protocol.py"
    protocol.write_text("import torch\n" + source.replace('"int64"', dtype))
    proc = run_stagecheck("spec",
                          f"{os.path.join(HERE, 'prev_tokens_event_wait.py')}::PrevTokenInputs",
                          "--protocol", protocol, "--examples", "10", "--no-save")
    assert proc.returncode == code, proc.stdout + proc.stderr
    if code:
        assert "ctx.tensor got dtype 'int46'" in proc.stderr
        assert "give a torch dtype's name ('int32', 'int64'" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_record_stream_of_a_side_stream_copy_is_no_finding(tmp_path):
    """vLLM-style async output: the sampled ids are downloaded on a side stream after
    ``record_stream`` keeps them alive for it (was: step_outcome 'raised RuntimeError:
    unknown parameter type', exit 1, on correct code)."""
    (tmp_path / "runner.py").write_text(textwrap.dedent('''
        import torch

        class Runner:
            def __init__(self, max_reqs, device):
                self.device, self.side, self.pending = device, torch.cuda.Stream(), None

            def _forward(self, logits, out):
                out.copy_(logits * 2)

            def execute(self, logits):
                out = torch.empty_like(logits)
                self._forward(logits, out)
                self.side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(self.side):
                    out.record_stream(self.side)
                    host = out.to("cpu", non_blocking=True)
                    done = torch.cuda.Event()
                    done.record()
                previous, self.pending = self.pending, (host, done)
                if previous is None:
                    return []
                previous[1].synchronize()
                return previous[0].tolist()
    '''))
    (tmp_path / "protocol.py").write_text(textwrap.dedent('''
        from stagecheck.spec import Operation, Protocol, StepSpace

        def execute(ctx):
            if ctx.step.batch:
                return ctx.state.execute(ctx.tensor([len(r) for r in ctx.step.batch], "int64"))

        PROTOCOL = Protocol(name="side-copy", summary="a side-stream download kept alive",
                            functions=("Runner",), component="Runner",
                            build=lambda ctx: ctx.component(ctx.sequence.capacity, ctx.device),
                            operations=(Operation("execute", execute),),
                            device_work=("_forward",), space=StepSpace(steps=(1, 4)))
    '''))
    proc = subprocess.run([sys.executable, "-m", "stagecheck", "spec", "runner.py::Runner",
                           "--protocol", "protocol.py", "--examples", "30", "-q", "--no-save"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "HOLDS THE PROTOCOL" in proc.stdout


GENERIC_RUNNER = '''
import torch

class Runner:
    def __init__(self, max_reqs, device):
        self.side = torch.Stream()
        self.ids_cpu = torch.zeros(max_reqs, dtype=torch.int64, pin_memory=True)
        self.ids_gpu = torch.zeros(max_reqs, dtype=torch.int64, device=device)
        self.out = torch.zeros(max_reqs, dtype=torch.int64, device=device)
        self.ready = torch.Event()

    def _forward(self, ids, out):
        out.copy_(ids * 2)

    def execute(self, ids):
        n = len(ids)
        torch.cuda.nvtx.range_push("prepare")
        self.ready.synchronize()
        self.ids_cpu[:n] = torch.tensor(ids)
        self.side.wait_stream(torch.accelerator.current_stream())
        with self.side:
            self.ids_gpu[:n].copy_(self.ids_cpu[:n], non_blocking=True)
            self.ready.record()
        WAIT
        torch.cuda.nvtx.range_pop()
        self._forward(self.ids_gpu[:n], self.out[:n])
        return self.out[:n].tolist()
'''

GENERIC_PROTOCOL = '''
from stagecheck.spec import Operation, Protocol, StepSpace

def execute(ctx):
    if ctx.step.batch:
        return ctx.state.execute([ctx.step.scheduled[r] for r in ctx.step.batch])

PROTOCOL = Protocol(name="generic-streams", summary="an upload on a side stream",
                    functions=("Runner",), component="Runner",
                    build=lambda ctx: ctx.component(ctx.sequence.capacity, ctx.device),
                    operations=(Operation("execute", execute),),
                    device_work=("_forward",), space=StepSpace(steps=(1, 4)))
'''


@pytest.mark.parametrize("wait, code, said", [
    ("torch.accelerator.current_stream().wait_stream(self.side)", 0, "HOLDS THE PROTOCOL"),
    ("pass", 1, "device-read-pending-write")])
def test_the_device_generic_stream_api_is_modelled(tmp_path, wait, code, said):
    """torch.accelerator, 'with stream:' and NVTX ranges (was: step_outcome findings,
    'Cannot access accelerator device when none is available', on correct code); a
    consumer that forgets to wait for the side stream is still found."""
    (tmp_path / "runner.py").write_text(GENERIC_RUNNER.replace("WAIT", wait))
    (tmp_path / "protocol.py").write_text(GENERIC_PROTOCOL)
    proc = subprocess.run([sys.executable, "-m", "stagecheck", "spec", "runner.py::Runner",
                           "--protocol", "protocol.py", "--examples", "30", "-q", "--no-save"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert said in proc.stdout, proc.stdout
