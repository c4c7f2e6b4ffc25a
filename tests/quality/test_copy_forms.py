"""Every host-to-device copy form is a ``Copy``; a write of nothing is no write; a hazard
finding names the slots the pending copy may read (issue 20, items 2 and 3)."""

import os
import pathlib
import subprocess
import sys

import pytest

from stagecheck.oracles.campaign import run_campaign
from stagecheck.oracles.observe import observe
from stagecheck.oracles.observe.fast import FastBackend
from stagecheck.oracles.observe.instrumented import InstrumentedBackend
from stagecheck.oracles.options import CampaignConfig, RunOptions
from stagecheck.oracles.schemas import load_schema
from stagecheck.oracles.targets import load_target
from stagecheck.spec import Copy, HostWrite, check
from tests.helpers import scenario

ROOT = pathlib.Path(__file__).resolve().parents[2]
FUNCTION = "stage_postprocess_inputs_to_gpu"
FORMS = ["equivalent_raw_copy_", "equivalent_to_device_copy", "equivalent_copy_helper",
         "equivalent_clone_to_device_copy", "equivalent_foreach_copy",
         "equivalent_to_device_copy_true"]
HAZARD = f"tests/targets/buggy_raw_copy_then_recount_drafts.py::{FUNCTION}"
BACKENDS = {
    "fast": (FastBackend, RunOptions()),
    "instrumented": (InstrumentedBackend, RunOptions()),
    "deferred": (lambda: InstrumentedBackend("cpu", True), RunOptions(deferred_copies=True)),
}


def form(name: str):
    return load_target(f"tests/targets/{name}.py::{FUNCTION}")


def copies(o):
    return sorted((e for e in o.events if type(e) is Copy), key=lambda c: c.buffer)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", FORMS)
def test_each_form_logs_the_copies_copy_to_gpu_logs(name, backend):
    make, options = BACKENDS[backend]
    for s in (scenario(), scenario(num_reqs=0), scenario(num_reqs=1, capacity=6)):
        expected = observe(load_target("single-loop"), s, options, make())
        seen = observe(form(name), s, options, make())
        assert copies(seen) == copies(expected) and len(copies(seen)) == 4
        assert seen.gpu == expected.gpu and seen.cpu == expected.cpu
        assert check(s, seen, form(name).profile) == []


@pytest.mark.parametrize("deferred", [False, True], ids=["cpu", "deferred"])
@pytest.mark.parametrize("name", FORMS)
def test_a_copy_form_refactor_is_equivalent_to_legacy(name, deferred):
    config = CampaignConfig.from_options(examples=150, deferred_copies=deferred)
    result = run_campaign(load_target("legacy"), form(name), config)
    assert result.verdict() == "equivalent", [f.message for f in result.errors]


def test_two_identical_raw_copy_targets_are_equivalent():
    for deferred in (False, True):
        config = CampaignConfig.from_options(examples=150, deferred_copies=deferred)
        result = run_campaign(form("equivalent_raw_copy_"), form("equivalent_raw_copy_"), config)
        assert result.verdict() == "equivalent", [f.message for f in result.errors]
        assert [f for f in result.findings if f.invariant == "copy_discipline"] == []


def test_the_cli_diff_of_legacy_and_a_raw_copy_refactor_exits_0(tmp_path):
    target = f"{ROOT}/tests/targets/equivalent_raw_copy_.py::{FUNCTION}"
    done = subprocess.run([sys.executable, "-m", "stagecheck", "diff", "legacy", target,
                           "--quiet", "--save-dir", str(tmp_path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_COLOR": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "EQUIVALENT" in done.stdout


def test_a_raw_copy_one_slot_short_is_caught_under_deferred_copies():
    config = CampaignConfig.from_options(examples=150, deferred_copies=True,
                                         out_of_contract=False)
    result = run_campaign(load_target("single-loop"), form("buggy_raw_copy_one_slot_short"),
                          config)
    named = {f.invariant for f in result.errors}
    assert {"copy_discipline", "mirror_consistency"} & named, named


def test_a_hazard_finding_names_the_slots_the_pending_copy_may_read():
    config = CampaignConfig.from_options(examples=150, deferred_copies=True,
                                         out_of_contract=False)
    result = run_campaign(None, load_target(HAZARD), config)
    (hazard,) = [f for f in result.errors if f.invariant == "no_copy_hazard"]
    slots = hazard.extra["slots"]
    assert slots and hazard.slot == slots[0]
    assert f"may still read slots {slots[:8]}" in hazard.message
    shrunk = hazard.scenario
    assert shrunk["num_reqs"] >= 1                   # at least one such slot is kept
    assert all(0 <= slot < shrunk["num_reqs"] for slot in slots)


def test_a_write_of_nothing_is_neither_a_write_nor_a_hazard(tmp_path):
    path = tmp_path / "empty_writes.py"
    source = (ROOT / "impl" / "staging_single_loop.py").read_text()
    path.write_text(source + (
        "\n\ndef stage(ctx, so, req_ids, num_reqs, requests, idx):\n"
        "    stage_postprocess_inputs_to_gpu(ctx, so, req_ids, num_reqs, requests, idx)\n"
        "    buf = ctx.num_draft_tokens_buf\n"
        "    buf.np[:0] = 7\n"
        "    buf.np[num_reqs:num_reqs] = 7\n"
        "    buf.cpu[:0] = 1\n"
        "    buf.cpu[:0].fill_(3)\n"))
    target = load_target(f"{path}::stage")
    for s in (scenario(), scenario(num_reqs=0)):
        o = observe(target, s, RunOptions(deferred_copies=True))
        writes = [e for e in o.events if isinstance(e, HostWrite)]
        assert all(e.slots for e in writes)
        assert len([e for e in writes if e.buffer == "num_draft_tokens_buf"]) == s.num_reqs
        assert o.hazards() == [] and check(s, o, target.profile) == []


def test_the_hazard_fixture_on_an_empty_batch_writes_nothing_and_races_with_nothing():
    target = load_target(HAZARD)
    s = scenario(num_reqs=0)
    o = observe(target, s, RunOptions(deferred_copies=True))
    assert o.hazards() == [] and check(s, o, target.profile) == []


def test_a_hazard_names_every_slot_written_into_the_pending_copy():
    """The three rewrites after the raw copy are one finding naming slots 0, 1 and 2 (the
    CPU model and CUDA agree: tests/gpu/test_protocols_gpu.py states the same)."""
    target = load_target(HAZARD)
    s = scenario()
    o = observe(target, s, RunOptions(deferred_copies=True))
    (hazard,) = [f for f in check(s, o, target.profile) if f.invariant == "no_copy_hazard"]
    assert s.num_reqs == 3 and hazard.extra["slots"] == [0, 1, 2]
    assert "slots [0, 1, 2] through .np" in hazard.message


#: the upload statement of each form, and the same upload followed by a write into slot 0
#: of the draft buffer's host side while the non-blocking copy is pending
UPLOADS = {
    "copy_to_gpu": "buf.copy_to_gpu(num_reqs)",
    "copy_": "buf.gpu[:num_reqs].copy_(buf.cpu[:num_reqs], non_blocking=True)",
    "to_mirror_device": "buf.gpu[:num_reqs] = buf.cpu[:num_reqs].to(buf.gpu.device, "
                        "non_blocking=True)",
}


@pytest.mark.parametrize("via", ["np", "cpu"])
@pytest.mark.parametrize("upload", sorted(UPLOADS))
def test_a_write_after_each_upload_form_is_a_hazard_under_deferred_copies(tmp_path, upload, via):
    """The CPU model of deferred copies sees the race for every form (``.to`` of the
    mirror's device was missed: on the CPU model that device is the CPU)."""
    path = tmp_path / "write_after.py"
    path.write_text(
        "def stage(ctx, so, req_ids, num_reqs, requests, idx):\n"
        "    bufs = (ctx.mamba_state_idx_buf, ctx.num_scheduled_tokens_buf,\n"
        "            ctx.num_computed_tokens_buf, ctx.num_draft_tokens_buf)\n"
        "    for i, r in enumerate(req_ids[:num_reqs]):\n"
        "        bufs[0].np[i] = idx[r]\n"
        "        bufs[1].np[i] = so.num_scheduled_tokens[r]\n"
        "        bufs[2].np[i] = requests[r].num_computed_tokens\n"
        "        bufs[3].np[i] = len(so.scheduled_spec_decode_tokens.get(r, ()))\n"
        "    for buf in bufs:\n"
        f"        {UPLOADS[upload]}\n"
        f"    ctx.num_draft_tokens_buf.{via}[0] = 99\n")
    target = load_target(f"{path}::stage")
    s = scenario()
    o = observe(target, s, RunOptions(deferred_copies=True))
    hazards = [f for f in check(s, o, target.profile) if f.invariant == "no_copy_hazard"]
    assert hazards and hazards[0].extra["slots"] == [0], [f.message for f in hazards]


NUMPY_WRITES = {   # after its copy, an equal value back into the draft counts' host side
    "put": "np.put(db.np, [0], [db.np[0]])",
    "method put": "db.np.put([0], [db.np[0]])",
    "copyto": "np.copyto(db.np[:num_reqs], db.np[:num_reqs].copy())",
    "putmask": "np.putmask(db.np[:num_reqs], db.np[:num_reqs] >= 0, db.np[:num_reqs].copy())",
    "ufunc out": "np.add(db.np[:num_reqs], 0, out=db.np[:num_reqs])",
    "in-place operator": "view = db.np[:num_reqs]\nview += 0",
    # views of another shape (an audit: each passed, EQUIVALENT)
    "reshaped view": "db.np.reshape(1, -1)[0, 0] = db.np[0]",
    "flat": "db.np.flat[0] = db.np[0]",
    "unsqueezed .cpu view": "db.cpu.unsqueeze(0)[0, 0] = int(db.np[0])",
}


@pytest.mark.parametrize("form_name", NUMPY_WRITES)
def test_a_numpy_write_after_the_copy_is_seen_even_of_an_equal_value(form_name, tmp_path):
    source = (ROOT / "impl" / "staging_single_loop.py").read_text()
    body = NUMPY_WRITES[form_name]
    path = tmp_path / "numpy_write.py"
    path.write_text("import numpy as np\n" + source + "\n\ndef wrapped(ctx, scheduler_output, "
                    "req_ids, num_reqs, requests, mamba_state_idx):\n    "
                    f"{FUNCTION}(ctx, scheduler_output, req_ids, num_reqs, requests, "
                    "mamba_state_idx)\n    db = ctx.num_draft_tokens_buf\n    if num_reqs:\n"
                    "        " + body.replace("\n", "\n        ") + "\n")
    target = load_target(f"{path}::wrapped", load_schema("mamba-postprocess"))
    s = scenario()
    seen = observe(target, s, RunOptions(), InstrumentedBackend())
    writes = [e for e in seen.events if type(e) is HostWrite and e.buffer.startswith("num_draft")]
    assert writes, seen.events
    found = [f.invariant for f in check(s, seen, target.profile) if f.severity == "error"]
    assert "copy_discipline" in found, found


#: after its copy, writes into the draft counts' host side that select no element (an
#: audit: each was "written through .np at slots [0]" or every slot: exit 1)
EMPTY_WRITES = {
    "np.put": "np.put(db.np, [], [])",
    "np.putmask": "np.putmask(db.np, np.zeros(db.np.shape, bool), 7)",
    "np.place": "np.place(db.np, np.zeros(db.np.shape, bool), [7])",
    "np.copyto where": "np.copyto(db.np, 7, where=np.zeros(db.np.shape, bool))",
    "bool tensor key": "db.cpu[torch.zeros(db.cpu.shape, dtype=torch.bool)] = 7",
    "masked_fill_": "db.cpu.masked_fill_(torch.zeros(db.cpu.shape, dtype=torch.bool), 7)",
    "index_fill_": "db.cpu.index_fill_(0, torch.tensor([], dtype=torch.long), 7)",
    "scatter_": "db.cpu.scatter_(0, torch.tensor([], dtype=torch.long), "
                "torch.tensor([], dtype=db.cpu.dtype))",
    "index_put_": "db.cpu.index_put_((torch.tensor([], dtype=torch.long),), "
                  "torch.tensor([], dtype=db.cpu.dtype))",
}
#: the same forms writing the last live slot alone, an equal value: that slot is named
LAST_SLOT_WRITES = {
    "np.putmask": "m = np.arange(db.np.shape[0]) == num_reqs - 1\n"
                  "np.putmask(db.np, m, db.np.copy())",
    "masked_fill_": "m = torch.arange(db.cpu.shape[0]) == num_reqs - 1\n"
                    "db.cpu.masked_fill_(m, int(db.np[num_reqs - 1]))",
    "index_fill_": "db.cpu.index_fill_(0, torch.tensor([num_reqs - 1]), int(db.np[num_reqs - 1]))",
    "bool tensor key": "m = torch.arange(db.cpu.shape[0]) == num_reqs - 1\n"
                       "db.cpu[m] = int(db.np[num_reqs - 1])",
    # a host copy into the host side (an audit: unseen under --deferred-copies alone)
    "copy_ of a clone": "db.cpu[num_reqs - 1:num_reqs].copy_("
                        "db.cpu[num_reqs - 1:num_reqs].clone())",
}


def _after_the_copy(tmp_path, body: str):
    source = (ROOT / "impl" / "staging_single_loop.py").read_text()
    path = tmp_path / "late_write.py"
    path.write_text("import numpy as np\nimport torch\n" + source + "\n\ndef wrapped(ctx, "
                    "scheduler_output, req_ids, num_reqs, requests, mamba_state_idx):\n    "
                    f"{FUNCTION}(ctx, scheduler_output, req_ids, num_reqs, requests, "
                    "mamba_state_idx)\n    db = ctx.num_draft_tokens_buf\n    if num_reqs:\n"
                    "        " + body.replace("\n", "\n        ") + "\n")
    return load_target(f"{path}::wrapped", load_schema("mamba-postprocess"))


@pytest.mark.parametrize("deferred", [False, True], ids=["cpu", "deferred"])
@pytest.mark.parametrize("form_name", EMPTY_WRITES)
def test_a_masked_or_indexed_write_of_nothing_is_no_write(form_name, deferred, tmp_path):
    target = _after_the_copy(tmp_path, EMPTY_WRITES[form_name])
    s = scenario()
    seen = observe(target, s, RunOptions(deferred_copies=deferred),
                   None if deferred else InstrumentedBackend())
    writes = [e for e in seen.events if type(e) is HostWrite and e.buffer.startswith("num_draft")]
    assert len(writes) == s.num_reqs, writes        # the staging loop's own, one per slot
    assert check(s, seen, target.profile) == [] and seen.hazards() == []


@pytest.mark.parametrize("form_name", LAST_SLOT_WRITES)
def test_a_masked_or_indexed_write_names_the_slots_it_selects(form_name, tmp_path):
    target = _after_the_copy(tmp_path, LAST_SLOT_WRITES[form_name])
    s = scenario()
    seen = observe(target, s, RunOptions(deferred_copies=True))
    late = [f for f in check(s, seen, target.profile) if f.severity == "error"]
    assert {f.invariant for f in late} == {"copy_discipline", "no_copy_hazard"}, late
    assert s.num_reqs == 3
    (hazard,) = [f for f in late if f.invariant == "no_copy_hazard"]
    assert hazard.extra["slots"] == [2], hazard.message


def test_a_write_after_a_blocking_read_of_the_mirror_races_with_nothing(tmp_path):
    """Reading the mirror on the host (``tolist``) waits for the queued copies: a write
    after it is written after its copy (``copy_discipline``), never a race."""
    source = (ROOT / "impl" / "staging_single_loop.py").read_text()
    path = tmp_path / "read_then_write.py"
    path.write_text(source + "\n\ndef wrapped(ctx, scheduler_output, req_ids, num_reqs, "
                    "requests, mamba_state_idx):\n    "
                    f"{FUNCTION}(ctx, scheduler_output, req_ids, num_reqs, requests, "
                    "mamba_state_idx)\n    db = ctx.num_draft_tokens_buf\n    if num_reqs:\n"
                    "        _ = db.gpu[:num_reqs].tolist()\n        db.np[0] = db.np[0]\n")
    target = load_target(f"{path}::wrapped", load_schema("mamba-postprocess"))
    s = scenario()
    seen = observe(target, s, RunOptions(deferred_copies=True), InstrumentedBackend("cpu", True))
    found = {f.invariant for f in check(s, seen, target.profile) if f.severity == "error"}
    assert "copy_discipline" in found and "no_copy_hazard" not in found, found


@pytest.mark.parametrize("deferred", [False, True], ids=["cpu", "deferred"])
def test_a_clone_changed_before_its_upload_is_caught(deferred, tmp_path):
    """A clone of a host range uploaded into the mirror is a copy of that range (an audit:
    ``cpu[:n].clone().to(device)`` was "copied 0 time(s)", DIFFERENT for equal values);
    what the code changes in the clone is not the buffer's, so the mirror then differs."""
    source = (ROOT / "tests" / "targets" / "equivalent_clone_to_device_copy.py").read_text()
    line = "        buf.gpu[:num_reqs] = buf.cpu[:num_reqs].clone().to(buf.gpu.device, " \
           "non_blocking=True)"
    assert line in source
    changed = tmp_path / "clone_changed.py"
    changed.write_text(source.replace(line, "        clone = buf.cpu[:num_reqs].clone()\n"
                                            "        clone.clamp_(max=3)\n"
                                            "        buf.gpu[:num_reqs] = clone.to(buf.gpu.device,"
                                            " non_blocking=True)"))
    config = CampaignConfig.from_options(examples=150, deferred_copies=deferred)
    result = run_campaign(load_target("legacy"), load_target(f"{changed}::{FUNCTION}"), config)
    assert result.verdict() == "different"
    assert {f.invariant for f in result.errors} >= {"mirror_consistency"}, \
        [f.message for f in result.errors]
    assert not [f for f in result.errors if f.invariant == "copy_discipline"], \
        [f.message for f in result.errors]


#: uploads through the pieces ``split``, ``tensor_split``, ``chunk``-like calls give (an
#: audit: the instrumented buffers lost the pieces of a tuple result, "copied 0 time(s)")
PIECE_UPLOADS = {
    "split": "buf.gpu.split([num_reqs, buf.gpu.shape[0] - num_reqs])[0].copy_("
             "buf.cpu.split([num_reqs, buf.cpu.shape[0] - num_reqs])[0], non_blocking=True)",
    "tensor_split": "buf.gpu.tensor_split([num_reqs])[0].copy_("
                    "buf.cpu.tensor_split([num_reqs])[0], non_blocking=True)",
    "torch.split": "torch.split(buf.gpu, [num_reqs, buf.gpu.shape[0] - num_reqs])[0].copy_("
                   "torch.split(buf.cpu, [num_reqs, buf.cpu.shape[0] - num_reqs])[0], "
                   "non_blocking=True)",
}
#: after the copy, an equal value back into slot 0 of the draft counts through a piece
PIECE_WRITES = {
    "split": "db.cpu.split(1)[0].fill_(int(db.np[0]))",
    "chunk": "db.cpu.chunk(db.cpu.shape[0])[0].fill_(int(db.np[0]))",
    "unbind": "db.cpu.unbind(0)[0].fill_(int(db.np[0]))",
    "iteration": "list(db.cpu)[0].fill_(int(db.np[0]))",
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("upload", PIECE_UPLOADS)
def test_an_upload_through_split_pieces_is_the_copy_copy_to_gpu_makes(upload, backend, tmp_path):
    source = (ROOT / "tests" / "targets" / "equivalent_raw_copy_.py").read_text()
    line = "        buf.gpu[:num_reqs].copy_(buf.cpu[:num_reqs], non_blocking=True)"
    assert line in source
    path = tmp_path / "pieces.py"
    path.write_text(source.replace(line, "        " + PIECE_UPLOADS[upload]))
    target = load_target(f"{path}::{FUNCTION}")
    make, options = BACKENDS[backend]
    for s in (scenario(), scenario(num_reqs=0)):
        expected = observe(load_target("single-loop"), s, options, make())
        seen = observe(target, s, options, make())
        assert copies(seen) == copies(expected) and len(copies(seen)) == 4
        assert check(s, seen, target.profile) == []


@pytest.mark.parametrize("deferred", [False, True], ids=["cpu", "deferred"])
@pytest.mark.parametrize("piece", PIECE_WRITES)
def test_a_write_through_a_piece_after_the_copy_is_seen(piece, deferred, tmp_path):
    target = _after_the_copy(tmp_path, PIECE_WRITES[piece])
    s = scenario()
    seen = observe(target, s, RunOptions(deferred_copies=deferred),
                   None if deferred else InstrumentedBackend())
    found = {f.invariant for f in check(s, seen, target.profile) if f.severity == "error"}
    assert "copy_discipline" in found, found
    if deferred:
        assert "no_copy_hazard" in found, found
