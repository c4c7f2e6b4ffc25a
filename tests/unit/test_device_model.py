"""The CPU model of the device: copies, streams, events, completion, the four hazards."""

import dataclasses

import numpy as np
import pytest
import torch

from stagecheck.oracles.device import device_model
from stagecheck.oracles.device.spans import span_of
from stagecheck.spec.observation import (DEVICE_READ_PENDING_WRITE, HOST_TOUCH_PENDING_DOWNLOAD,
                                         HOST_WRITE_PENDING_DOWNLOAD,
                                         HOST_WRITE_PENDING_UPLOAD, PINNED_REUSED_PENDING_COPY)

CUDA = torch.device("cuda", 0)


def kinds(model):
    return [h.kind for h in model.hazards]


def pinned(values):
    t = torch.tensor(values, dtype=torch.int32, pin_memory=True)
    return t


def test_activation_replaces_torch_cuda_and_restores_it():
    real_event, real_available = torch.cuda.Event, torch.cuda.is_available
    model = device_model()
    with model.activate():
        assert torch.cuda.is_available()
        assert torch.cuda.Event is not real_event
        assert torch.cuda.current_stream() == torch.cuda.default_stream()
    assert torch.cuda.Event is real_event and torch.cuda.is_available is real_available
    assert not torch.cuda.is_available()


def test_device_and_pinned_allocations_are_told_apart():
    model = device_model()
    with model.activate():
        host = pinned([1, 2])
        dev = torch.zeros(2, dtype=torch.int32, device="cuda")
        plain = torch.zeros(2)
        assert host.is_pinned() and not plain.is_pinned()
        assert dev.device.type == "cuda" and dev.is_cuda
        assert model.memory(dev) == "device" and model.memory(host) == "pinned"
        assert model.memory(plain) == "pageable"
        assert (dev + 1).device.type == "cuda"          # device work gives device tensors
        assert torch.empty(3, dtype=torch.int32, device=CUDA).tolist() == [-7777] * 3
        with pytest.raises(TypeError, match="numpy"):
            dev.numpy()
        with pytest.raises(RuntimeError, match="same device"):
            dev + torch.ones(2, dtype=torch.int32)


@pytest.mark.parametrize("form", ["copy_", "to", "cuda-method", "setitem"])
def test_every_upload_form_is_a_copy_that_reads_the_host_when_it_runs(form):
    model = device_model()                   # lazy: nothing runs until waited for
    with model.activate():
        host = pinned([1, 2, 3, 4])
        dev = torch.zeros(4, dtype=torch.int32, device=CUDA)
        if form == "copy_":
            dev[:2].copy_(host[:2], non_blocking=True)
            out = dev
        elif form == "to":
            out = host[:2].to(CUDA, non_blocking=True)
        elif form == "cuda-method":
            out = host[:2].cuda(non_blocking=True)
        else:
            dev[:2] = host[:2]               # torch's assignment blocks: it has run
            out = dev
        pending = form != "setitem"
        assert model.in_flight() == (1 if pending else 0)
        host.numpy()[0] = 9                  # the DMA has not read the page yet
        torch.cuda.synchronize()
        assert out.tolist()[0] == (9 if pending else 1)
        assert kinds(model) == ([HOST_WRITE_PENDING_UPLOAD] if pending else [])
        if pending:
            assert model.hazards[0].slots == (0,)


@pytest.mark.parametrize("index", [slice(0, 4), slice(None), (slice(0, 4),), Ellipsis])
def test_an_assignment_into_a_basic_view_of_device_memory_is_ordered_after_a_pending_upload(
        index):
    # dev[0:4] = host is a blocking upload on the current stream: it runs after the
    # pending one, as on CUDA (the view was once a plain tensor, its assignment a host
    # write that the pending upload then overwrote: [1, 1, 1, 1])
    model = device_model()                   # lazy
    with model.activate():
        first, second = pinned([1, 1, 1, 1]), pinned([2, 2, 2, 2])
        dev = torch.zeros(4, dtype=torch.int32, device=CUDA)
        dev.copy_(first, non_blocking=True)
        view = dev[index]
        assert model.memory(view) == "device" and view.device.type == "cuda"
        dev[index] = second
        torch.cuda.synchronize()
        assert dev.tolist() == [2, 2, 2, 2]
        assert kinds(model) == []


def test_eager_completion_runs_everything_when_issued():
    model = device_model(completion="eager")
    with model.activate():
        host = pinned([1, 2])
        dev = torch.zeros(2, dtype=torch.int32, device=CUDA)
        dev.copy_(host, non_blocking=True)
        assert model.in_flight() == 0
        host.numpy()[0] = 5
        torch.cuda.synchronize()
        assert dev.tolist() == [1, 2]
        # the host never waited: the write still races with the copy (a race does not
        # depend on the schedule that happened to run)
        assert kinds(model) == [HOST_WRITE_PENDING_UPLOAD]


def test_waiting_on_an_event_makes_the_reuse_safe():
    model = device_model()
    with model.activate():
        host = pinned([1, 2])
        dev = torch.zeros(2, dtype=torch.int32, device=CUDA)
        done = torch.cuda.Event()
        dev.copy_(host, non_blocking=True)
        done.record()
        done.synchronize()
        host.numpy()[:] = [7, 8]
        host[0] = 3                          # through torch too
        assert model.hazards == []
        assert dev.tolist() == [1, 2]


@pytest.mark.parametrize("made", ["torch.Event", "torch.cuda.Event"])
def test_the_device_generic_event_and_stream_are_the_models(made):
    # vLLM makes its events with torch.Event() now: on a CPU build torch's raises "cpu
    # backend doesn't support events" (a false step_outcome finding before)
    model = device_model()
    with model.activate():
        host = pinned([1, 2])
        dev = torch.zeros(2, dtype=torch.int32, device=CUDA)
        side = torch.Stream()
        done = torch.Event() if made == "torch.Event" else torch.cuda.Event()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            dev.copy_(host, non_blocking=True)
            done.record()
        host[0] = 5                          # before the wait: a race
        assert kinds(model) == [HOST_WRITE_PENDING_UPLOAD]
        done.synchronize()
        host[1] = 6                          # after it: safe
        assert len(model.hazards) == 1
    assert not isinstance(torch.Event, type) or "stagecheck" not in torch.Event.__module__


def test_a_like_factory_asked_for_host_memory_gives_host_memory():
    # torch.empty_like(dev, device="cpu").pin_memory(): a pinned buffer shaped like a
    # device tensor (before, the model kept it a device tensor and pin_memory raised)
    model = device_model()
    with model.activate():
        dev = torch.zeros(2, 3, dtype=torch.int64, device=CUDA)
        for host in (torch.empty_like(dev, device="cpu"), torch.zeros_like(dev, device="cpu"),
                     torch.full_like(dev, 4, device=torch.device("cpu"))):
            assert model.memory(host) == "pageable" and host.device.type == "cpu"
            assert host.shape == (2, 3) and host.dtype == torch.int64
            assert model.memory(host.pin_memory()) == "pinned"
        assert model.memory(torch.empty_like(dev)) == "device"
        with pytest.raises(RuntimeError, match="cannot pin 'torch.cuda.LongTensor'"):
            dev.pin_memory()


def test_a_write_of_nothing_is_not_a_hazard():
    model = device_model()
    with model.activate():
        host = pinned([1, 2, 3])
        dev = torch.zeros(3, dtype=torch.int32, device=CUDA)
        dev.copy_(host, non_blocking=True)
        host[:0] = 5
        host[3:] = 1
        host.numpy()[:0] = 4
        torch.cuda.synchronize()
    assert model.hazards == []


def test_an_equal_value_write_through_torch_is_a_hazard():
    model = device_model()
    with model.activate():
        host = pinned([1, 2, 3])
        dev = torch.zeros(3, dtype=torch.int32, device=CUDA)
        dev.copy_(host, non_blocking=True)
        host[1] = 2
    assert [(h.kind, h.slots) for h in model.hazards] == [(HOST_WRITE_PENDING_UPLOAD, (1,))]


def test_a_download_read_before_it_landed_is_a_hazard_and_after_a_wait_is_not():
    model = device_model()
    with model.activate():
        dev = torch.arange(4, dtype=torch.int32, device=CUDA)
        out = torch.zeros(4, dtype=torch.int32, pin_memory=True)
        out.copy_(dev, non_blocking=True)
        landed = torch.cuda.Event()
        landed.record()
        early = out.tolist()                  # not landed yet: old bytes
        assert early == [0, 0, 0, 0]
        assert kinds(model) == [HOST_TOUCH_PENDING_DOWNLOAD]
        landed.synchronize()
        assert out.tolist() == [0, 1, 2, 3]
        assert len(model.hazards) == 1


def test_to_cpu_non_blocking_lands_in_pinned_memory_and_cpu_blocks():
    model = device_model()
    with model.activate():
        dev = torch.arange(3, dtype=torch.int32, device=CUDA)
        late = dev.to("cpu", non_blocking=True)
        assert late.is_pinned() and model.in_flight() == 1
        now = dev.cpu()
        assert now.tolist() == [0, 1, 2] and not now.is_pinned()
        assert model.hazards == []


def test_a_consumer_on_another_stream_without_a_wait_reads_a_pending_upload():
    model = device_model()
    with model.activate():
        host = pinned([4, 5])
        mirror = torch.zeros(2, dtype=torch.int32, device=CUDA)
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            mirror.copy_(host, non_blocking=True)
        seen = []
        model.launch("forward", lambda: seen.append(mirror.tolist()), {"mirror": mirror})
        torch.cuda.current_stream().synchronize()      # runs the consumer, not the copy
        assert seen == [[0, 0]]
        assert kinds(model) == [DEVICE_READ_PENDING_WRITE]
        assert model.reads_log == [((), "forward", {"mirror": [0, 0]})]


def test_waiting_for_the_copy_stream_orders_the_consumer_after_it():
    model = device_model()
    with model.activate():
        host = pinned([4, 5])
        mirror = torch.zeros(2, dtype=torch.int32, device=CUDA)
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            mirror.copy_(host, non_blocking=True)
        torch.cuda.current_stream().wait_stream(side)
        seen = []
        model.launch("forward", lambda: seen.append(mirror.tolist()), {"mirror": mirror})
        torch.cuda.current_stream().synchronize()
        assert seen == [[4, 5]] and model.hazards == []


def test_a_pinned_buffer_handed_to_a_download_while_its_upload_is_pending_is_a_hazard():
    model = device_model()
    with model.activate():
        host = pinned([1, 2])
        a = torch.zeros(2, dtype=torch.int32, device=CUDA)
        b = torch.ones(2, dtype=torch.int32, device=CUDA)
        a.copy_(host, non_blocking=True)
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            host.copy_(b, non_blocking=True)      # not ordered after the upload
        assert PINNED_REUSED_PENDING_COPY in kinds(model)
    model = device_model()
    with model.activate():
        host = pinned([1, 2])
        a = torch.zeros(2, dtype=torch.int32, device=CUDA)
        b = torch.ones(2, dtype=torch.int32, device=CUDA)
        a.copy_(host, non_blocking=True)
        host.copy_(b, non_blocking=True)          # the same stream: ordered after it
        assert model.hazards == []


def test_a_fresh_pinned_tensor_per_call_is_safe():
    model = device_model()
    with model.activate():
        dev = torch.zeros(3, dtype=torch.int32, device=CUDA)
        for step in range(3):
            staging = torch.from_numpy(np.array([step] * 3, dtype=np.int32)).pin_memory()
            dev.copy_(staging, non_blocking=True)
            del staging
        torch.cuda.synchronize()
        assert dev.tolist() == [2, 2, 2] and model.hazards == []


def test_a_pageable_upload_reads_its_source_when_issued():
    model = device_model()
    with model.activate():
        host = torch.tensor([1, 2], dtype=torch.int32)         # not pinned
        dev = torch.zeros(2, dtype=torch.int32, device=CUDA)
        dev.copy_(host, non_blocking=True)
        host[0] = 9
        torch.cuda.synchronize()
        assert dev.tolist() == [1, 2] and model.hazards == []


def test_a_polled_event_completes():
    model = device_model()
    with model.activate():
        dev = torch.zeros(2, dtype=torch.int32, device=CUDA)
        dev.copy_(pinned([1, 1]), non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        polls = 0
        while not event.query():
            polls += 1
        assert 0 < polls < 5
        assert dev.tolist() == [1, 1]


def test_drain_runs_what_is_queued_without_teaching_the_host():
    model = device_model()
    with model.activate():
        host = pinned([1, 2])
        dev = torch.zeros(2, dtype=torch.int32, device=CUDA)
        dev.copy_(host, non_blocking=True)
        model.boundary("drain")
        assert model.in_flight() == 0
        host.numpy()[0] = 3                 # the copy ran, but the host never waited
        model.sweep()
        torch.cuda.synchronize()
        assert dev.tolist() == [1, 2]
        assert kinds(model) == [HOST_WRITE_PENDING_UPLOAD]


def test_named_regions_name_the_slots_of_a_hazard():
    model = device_model()
    with model.activate():
        host = torch.zeros(6, dtype=torch.int32, pin_memory=True)
        dev = torch.zeros(6, dtype=torch.int32, device=CUDA)
        model.name_region(host, "input_ids.cpu")
        model.name_region(dev, "input_ids.gpu")
        dev[:4].copy_(host[:4], non_blocking=True)
        host.numpy()[2:6] = 1
        model.sweep()
    (hazard,) = model.hazards
    assert hazard.region == "input_ids.cpu" and hazard.slots == (2, 3)
    assert "input_ids.cpu[0:4] -> input_ids.gpu[0:4]" in hazard.pending


def test_a_column_write_races_only_with_the_rows_it_touches():
    model = device_model()
    with model.activate():
        table = torch.zeros(4, 3, dtype=torch.int32, pin_memory=True)
        dev = torch.zeros(4, 3, dtype=torch.int32, device=CUDA)
        dev[2:].copy_(table[2:], non_blocking=True)
        table[:2, 0] = 1                      # rows 0 and 1 only
        assert model.hazards == []
        table[:, 1] = 1                       # every row: rows 2 and 3 race
        assert [h.slots for h in model.hazards] == [(7, 10)]


def test_ordered_code_across_streams_with_fresh_pinned_tensors_is_silent():
    """The CPU twin of the GPU tier's test of the same name (tests/gpu)."""
    model = device_model()
    with model.activate():
        host = torch.zeros(4, dtype=torch.int32, pin_memory=True)
        dev = torch.zeros(4, dtype=torch.int32, device=CUDA)
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
            dev.copy_(fresh, non_blocking=True)
            del fresh
        model.finish()
    assert model.hazards == [] and model.mismatches == []
    assert [values["dev"] for _, _, values in model.reads_log] == [[0] * 4, [1] * 4, [2] * 4]


def test_host_index_tensors_index_device_data_and_are_read_when_issued():
    model = device_model()
    with model.activate():
        dev = torch.arange(10, 15, dtype=torch.int32, device=CUDA)
        rows = torch.tensor([3, 0], dtype=torch.int64)
        picked = dev[rows]                           # CUDA takes host indices
        assert picked.is_cuda and picked.tolist() == [13, 10]
        dev[rows] = torch.tensor(7, dtype=torch.int32)
        dev.index_put_((rows,), torch.tensor([1, 2], dtype=torch.int32, device=CUDA))
        assert dev.tolist() == [2, 11, 12, 1, 14]
        with pytest.raises(RuntimeError, match="same device"):   # host values are not
            dev[rows] = torch.tensor([5, 6], dtype=torch.int32)   # indices: CUDA refuses
        assert model.hazards == []


def test_a_host_index_tensor_a_download_has_not_written_is_a_hazard():
    model = device_model()
    with model.activate():
        dev = torch.arange(4, dtype=torch.int64, device=CUDA)
        order = torch.zeros(2, dtype=torch.int64, pin_memory=True)
        order.copy_(dev[2:], non_blocking=True)      # the indices come back later
        dev[order]                                   # used before they landed
        assert kinds(model) == [HOST_TOUCH_PENDING_DOWNLOAD]


def test_an_empty_device_tensor_made_from_a_host_range_is_a_copy_of_no_slot():
    """On CUDA every empty device tensor may lie at address 0, outside every region: made
    from ``buf.cpu[2:2]`` it still counts as slot 2 of that host side (``.to(device)`` of an
    empty range then assigned into the mirror is a copy of no slot, as copy_to_gpu(0) is)."""
    from stagecheck.oracles.device.forms import Pairs, mirror_copy

    class Buffer:
        name = "buf"

    buffer = Buffer()
    host, mirror = torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
    pairs = Pairs()
    pairs.add(buffer, span_of(host), span_of(mirror))
    made = torch.empty(0, dtype=torch.int32)
    pairs.made_from(made, host[2:2])
    assert mirror_copy(pairs, span_of(mirror[2:2]), span_of(made)) == (buffer, 2, 2)
    assert mirror_copy(pairs, span_of(mirror[1:1]), span_of(made)) is None


def test_device_work_is_compared_only_where_it_reads():
    """A kernel given a whole buffer and a count reads the live slots only: the others are
    None in what it read, and what the host meant there is not checked."""
    model = device_model("cpu")
    with model.activate():
        host = torch.tensor([1, 2, 3, 4], dtype=torch.int32).pin_memory()
        dev = torch.zeros(4, dtype=torch.int32, device="cuda")
        dev.copy_(host, non_blocking=True)
        host.numpy()[3] = 9                        # a slot the work never reads
        model.launch("kernel", lambda: dev[:2] * 2, {"dev": dev})
        torch.cuda.synchronize()
        model.finish()
    assert model.reads_log[0][2]["dev"] == [1, 2, None, None]
    assert model.mismatches == []


@pytest.mark.parametrize("kernel,read,index", [
    # a block table given whole, of which the work reads row 0 by a basic index, or by
    # request and block (an advanced index, vLLM's slot mapping): row 1 is a stale row of
    # a finished request, cleared on the host, never uploaded again
    (lambda tab, idx: tab[0:1, 0] * 2, [[1, None], [None, None]], [None]),
    (lambda tab, idx: tab[idx, idx + 1] * 2, [[None, 2], [None, None]], [0]),
    (lambda tab, idx: tab[idx] * 2, [[1, 2], [None, None]], [0]),
    (lambda tab, idx: tab[:, 0][idx] + 0, [[1, None], [None, None]], [0]),
    (lambda tab, idx: tab[1 - idx, 1] + 0, [[None, None], [None, 4]], [0]),
    (lambda tab, idx: tab[tab[:, 0] > 0, 1] + 0, [[1, 2], [3, 4]], [None]),  # the mask: all
    (lambda tab, idx: tab[0][torch.cat([idx == 0, idx == 1])] + 0, [[1, 2], [None, None]],
     [0]),                  # a mask made of something else: what it selects from, all
])
def test_device_work_on_a_table_is_compared_only_at_the_elements_it_reads(kernel, read,
                                                                          index):
    model = device_model("cpu")
    with model.activate():
        host = torch.tensor([[1, 2], [3, 4]], dtype=torch.int32).pin_memory()
        dev = torch.zeros(2, 2, dtype=torch.int32, device="cuda")
        idx_host = torch.zeros(1, dtype=torch.int64).pin_memory()
        idx = torch.zeros(1, dtype=torch.int64, device="cuda")
        dev.copy_(host, non_blocking=True)
        idx.copy_(idx_host, non_blocking=True)
        torch.cuda.synchronize()
        host.numpy()[1, 0] = 9                     # row 1 no longer live: cleared, not sent
        model.launch("kernel", lambda: kernel(dev, idx), {"tab": dev, "idx": idx})
        torch.cuda.synchronize()
        model.finish()
    assert model.reads_log[0][2]["tab"] == read
    assert model.reads_log[0][2]["idx"] == index
    assert model.mismatches == []


def test_numpy_of_a_pending_download_is_a_view_not_a_read():
    """vLLM's ``async_copy_to_np``: ``x.to("cpu", non_blocking=True).numpy()`` makes a view
    of pinned memory a download still writes; read after the copy's event it is correct
    code, so making the view is no hazard (a tolist() of the tensor before the event is)."""
    import torch

    from stagecheck.oracles.device import device_model

    model = device_model("cpu", "lazy", 0)
    with model.activate():
        dev = torch.arange(4, device="cuda")
        event = torch.cuda.Event()
        host = dev.to("cpu", non_blocking=True)
        view = host.numpy()
        event.record()
        assert model.hazards == []
        event.synchronize()
        assert view.tolist() == [0, 1, 2, 3] and model.hazards == []
        again = dev.to("cpu", non_blocking=True)
        again.tolist()                         # read before any wait: a hazard
        assert [h.kind for h in model.hazards] == ["host-read-pending-download"]
    model.release()


@pytest.mark.parametrize("dtype", [torch.int32, torch.bool, torch.float32])
def test_raw_writes_into_pending_copies_are_found_by_value_for_every_dtype(dtype):
    """Integer and bool memory is kept as its bytes only, float memory as a copy: a raw
    write the sweep finds names the same slots either way, for an upload's source and a
    download's destination; writing the value it held already is no change."""
    model = device_model()
    with model.activate():
        host = torch.zeros(6, dtype=dtype, pin_memory=True)
        back = torch.zeros(6, dtype=dtype, pin_memory=True)
        dev = torch.zeros(6, dtype=dtype, device=CUDA)
        model.name_region(host, "up.cpu")
        model.name_region(back, "down.cpu")
        dev[1:5].copy_(host[1:5], non_blocking=True)
        back[:3].copy_(dev[:3], non_blocking=True)
        host.numpy()[0] = 1                   # outside the upload
        host.numpy()[4] = 0                   # the value it held
        model.sweep()
        assert model.hazards == []
        host.numpy()[2:4] = 1
        back.numpy()[1] = 1
        model.sweep()
    found = {(h.region, h.slots) for h in model.hazards}
    assert found == {("up.cpu", (2, 3)), ("down.cpu", (1,))}
    assert kinds(model).count(HOST_WRITE_PENDING_DOWNLOAD) == 1


def test_a_pool_of_pinned_buffers_in_a_list_or_dict_is_named_by_its_items():
    from types import SimpleNamespace
    from stagecheck.oracles.protocol.context import _name_tensors
    model = device_model()
    with model.activate():
        state = SimpleNamespace(pool=[pinned([1, 2]), pinned([3, 4])],
                                by_kind={"ids": pinned([5, 6])})
        _name_tensors(model, state)
        assert model.describe(span_of(state.pool[1]))[0] == "pool[1]"
        assert model.describe(span_of(state.by_kind["ids"]))[0] == "by_kind['ids']"


def test_memory_reached_by_two_paths_is_named_by_the_shortest():
    # a handler holding the runner's KV caches (``store.src_tensor``, ``load.dst_tensor``)
    # renamed ``gpu_kv`` after the deeper path: a store's download was said as
    # "download load.dst_tensor[0:2] -> load.src_tensor[0:2]" (found writing a protocol
    # for vLLM's CPU KV offloading worker)
    from types import SimpleNamespace
    from stagecheck.oracles.protocol.context import _name_tensors
    model = device_model()
    with model.activate():
        cpu_kv = torch.zeros(4, 2, dtype=torch.int32, pin_memory=True)
        gpu_kv = torch.zeros(4, 2, dtype=torch.int32, device=CUDA)
        state = SimpleNamespace(gpu_kv=gpu_kv, cpu_kv=cpu_kv,
                                store=SimpleNamespace(src_tensor=gpu_kv, dst_tensor=cpu_kv),
                                load=SimpleNamespace(src_tensor=cpu_kv, dst_tensor=gpu_kv[:]))
        _name_tensors(model, state)
        assert model.describe(span_of(cpu_kv))[0] == "cpu_kv"
        assert model.describe(span_of(gpu_kv))[0] == "gpu_kv"


def test_a_race_in_a_two_dimensional_tensor_is_said_by_row_and_column():
    from stagecheck.spec.protocol_invariants import _hazard_message
    model = device_model()
    with model.activate():
        table = torch.zeros(3, 4, dtype=torch.int32, pin_memory=True)
        model.name_region(table, "block_table.cpu")
        dev = torch.empty(3, 4, dtype=torch.int32, device=CUDA)
        dev.copy_(table, non_blocking=True)
        table[1, 2] = 7                       # the upload has not read it yet
    (h,) = model.hazards
    assert (h.kind, h.region, h.slots, h.row) == (HOST_WRITE_PENDING_UPLOAD,
                                                  "block_table.cpu", (6,), 4)
    message = _hazard_message(dataclasses.asdict(h) | {"step": 0, "op": "prepare"})
    assert "block_table.cpu elements (row, column) [(1, 2)]" in message, message
    # the pending copy's rows in the same terms: whole rows as numpy writes them (was
    # block_table.cpu[0:12], flat element indices beside the hazard's (row, column))
    assert "block_table.cpu[0:3, :] -> " in h.pending, h.pending


def test_a_copy_of_part_of_a_row_is_said_by_row_and_column():
    model = device_model()
    with model.activate():
        table = torch.zeros(3, 4, dtype=torch.int32, pin_memory=True)
        model.name_region(table, "block_table.cpu")
        dev = torch.empty(3, 4, dtype=torch.int32, device=CUDA)
        dev[1:3].copy_(table[1:3], non_blocking=True)
        dev[0, 1:3].copy_(table[0, 1:3], non_blocking=True)
        table[2, 0] = 7
        table[0, 2] = 7
    first, second = model.hazards
    assert "block_table.cpu[1:3, :] -> " in first.pending, first.pending
    assert "block_table.cpu[(0, 1), (0, 2)] -> " in second.pending, second.pending


@pytest.mark.parametrize("ordered", [False, True])
def test_device_work_that_overwrites_what_a_pending_download_reads_races_with_it(ordered):
    # the work's write is seen only while it runs (an ``out`` argument): it is checked
    # against the copies open and unordered when it was launched, not only later ones
    model = device_model()
    with model.activate():
        ids = torch.arange(2, dtype=torch.int32, device=CUDA)
        back = pinned([0, 0])
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            back.copy_(ids, non_blocking=True)
        if ordered:
            torch.cuda.current_stream().wait_stream(side)
        model.launch("sample", lambda: ids.copy_(ids * 3 + 1), {"ids": ids})
        torch.cuda.synchronize()
    if ordered:
        assert model.hazards == []
    else:
        (h,) = model.hazards
        assert (h.kind, h.slots) == (DEVICE_READ_PENDING_WRITE, (0, 1))
        assert "device work sample" in h.by and h.by.endswith("overwrites it")


@pytest.mark.parametrize("row", [0, 2])
def test_device_work_scattering_by_tensor_index_writes_only_what_the_index_picks(row):
    # ``kv[blocks, offsets] = values`` (a KV-cache write by block and offset) was noted as
    # a write of all of ``kv``: a pending download of another block was said to race with
    # it (an info finding that failed --strict on correct code; found writing a protocol
    # for vLLM's CPU KV offloading worker)
    model = device_model()
    with model.activate():
        kv = torch.arange(8, dtype=torch.int32, device=CUDA).reshape(4, 2)
        back = pinned([0, 0])
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            back.copy_(kv[0], non_blocking=True)          # block 0 offloaded
        blocks = torch.tensor([row], device=CUDA)
        offsets = torch.tensor([1], device=CUDA)
        values = torch.tensor([9], dtype=torch.int32, device=CUDA)

        def forward():
            kv[blocks, offsets] = values

        model.launch("forward", forward, {"kv": kv, "blocks": blocks, "offsets": offsets,
                                          "values": values})
        torch.cuda.synchronize()
    if row:
        assert model.hazards == []
    else:
        (h,) = model.hazards
        assert (h.kind, h.slots) == (DEVICE_READ_PENDING_WRITE, (1,))
        assert h.by.endswith("overwrites it")


@pytest.mark.parametrize("row", [0, 2])
def test_a_load_pending_at_a_launch_races_only_with_what_the_work_reads(row):
    # the other direction: a load into block ``row`` still pending when device work given
    # the whole KV table is launched, unordered with it, was a race whatever the work
    # indexed (the table taken as read whole at the launch); the work reads block 2 only
    model = device_model()
    with model.activate():
        kv = torch.arange(8, dtype=torch.int32, device=CUDA).reshape(4, 2)
        model.name_region(kv, "kv")
        host = pinned([5, 6])
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            kv[row].copy_(host, non_blocking=True)        # a load into block ``row``
        out = torch.zeros(2, dtype=torch.int32, device=CUDA)
        model.launch("attend", lambda: out.copy_(kv[2] + 1), {"kv": kv, "out": out})
        torch.cuda.synchronize()
    if row != 2:
        assert model.hazards == []
    else:
        (h,) = model.hazards
        assert (h.kind, h.region, h.slots) == (DEVICE_READ_PENDING_WRITE, "kv", (4, 5))
        assert h.by.endswith("reads it")


@pytest.mark.parametrize("row", [0, 2])
def test_an_upload_after_a_launch_races_only_with_what_the_work_read(row):
    # device work given a whole KV table reads one block of it; a later upload of a
    # resumed request's KV into another block, on a stream not ordered after the work,
    # was said to race with it (the table was taken as read whole: an info finding that
    # failed --strict on correct code; found writing a protocol for vLLM's CPU KV
    # offloading worker)
    model = device_model()
    with model.activate():
        kv = torch.arange(8, dtype=torch.int32, device=CUDA).reshape(4, 2)
        model.name_region(kv, "kv")
        out = torch.zeros(2, dtype=torch.int32, device=CUDA)
        model.launch("attend", lambda: out.copy_(kv[2] + 1), {"kv": kv, "out": out})
        host = pinned([5, 6])
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            kv[row].copy_(host, non_blocking=True)        # a load into block ``row``
        torch.cuda.synchronize()
    if row != 2:
        assert model.hazards == []
    else:
        (h,) = model.hazards
        assert (h.kind, h.slots) == (DEVICE_READ_PENDING_WRITE, (4, 5))
        assert h.by.endswith("overwrites it")


def test_a_float_download_into_fresh_pinned_memory_is_no_host_write():
    # fresh pinned memory is poisoned with NaN: a sweep before the download landed saw
    # NaN where NaN was, which torch.equal calls a change (an info race after a full
    # synchronize, so --strict failed correct code)
    model = device_model()
    with model.activate():
        x = torch.ones(3, dtype=torch.float32, device=CUDA)
        out = x.to("cpu", non_blocking=True)
        model.sweep()
        torch.cuda.synchronize()
        assert out.tolist() == [1.0, 1.0, 1.0]
    assert model.hazards == []


def test_part_of_the_rows_of_a_2d_tensor_is_named_by_row_and_column():
    # a column of a (3, 4) buffer was said as flat offsets, "pos_cpu[0, 4, 8]", which
    # reads as a 3-D index
    model = device_model("cpu")
    with model.activate():
        host = torch.zeros((3, 4), dtype=torch.int64, pin_memory=True)
        model.name_region(host, "pos_cpu")
        assert model._name(host[:, :1]) == "pos_cpu[(0, 0), (1, 0), (2, 0)]"
        assert model._name(host[1, 1:3]) == "pos_cpu[(1, 1), (1, 2)]"
        assert model._name(host[1:]) == "pos_cpu[1:3, :]"        # whole rows: numpy's rows
        # three dimensions: flat offsets (rows of the last dimension, [3:6, :], read as a
        # numpy index pointing past the first dimension's 2 planes)
        cube = torch.zeros((2, 3, 4), dtype=torch.int64, pin_memory=True)
        model.name_region(cube, "kv_idx.cpu")
        assert model._name(cube[1]) == "kv_idx.cpu[12:24]"
        assert model._name(cube[0, 1]) == "kv_idx.cpu[4:8]"


def test_a_pending_download_of_nothing_is_not_named_as_unlanded():
    # an empty batch's download wrote nothing: a report's "possibly a read before a
    # download landed" named it as "pinned tensor 1[] -> pinned tensor 1[]"
    model = device_model()
    with model.activate():
        dev = torch.arange(4, dtype=torch.int32, device=CUDA)
        out = torch.zeros(4, dtype=torch.int32).pin_memory()
        out[:0].copy_(dev[:0], non_blocking=True)
        assert model.unlanded() == ()
        out[:2].copy_(dev[:2], non_blocking=True)
        (named,) = model.unlanded()
        assert "[0:2]" in named
        torch.cuda.synchronize()
        assert model.unlanded() == ()


def test_a_foreach_copy_is_one_pending_upload_per_pair():
    # torch._foreach_copy_(dsts, srcs, non_blocking=True) queues one copy per pair: each
    # reads its pinned source late, and a host write into one before the sync is a hazard
    model = device_model()
    with model.activate():
        hosts = [pinned([1, 2]), pinned([3, 4])]
        devs = [torch.zeros(2, dtype=torch.int32, device=CUDA) for _ in hosts]
        torch._foreach_copy_(devs, hosts, non_blocking=True)
        assert model.in_flight() == 2
        hosts[1].numpy()[0] = 9
        torch.cuda.synchronize()
        assert kinds(model) == [HOST_WRITE_PENDING_UPLOAD]
        assert devs[0].tolist() == [1, 2]


@pytest.mark.parametrize("ordered", [False, True])
def test_device_work_writing_through_a_foreach_op_races_with_a_pending_download(ordered):
    # torch._foreach_copy_(dsts, srcs) in device work writes every tensor of dsts: one a
    # download still reads on an unordered stream races with it
    model = device_model()
    with model.activate():
        ids = torch.arange(2, dtype=torch.int32, device=CUDA)
        other = torch.zeros(2, dtype=torch.int32, device=CUDA)
        back = pinned([0, 0])
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            back.copy_(ids, non_blocking=True)
        if ordered:
            torch.cuda.current_stream().wait_stream(side)
        new = torch.full((2,), 5, dtype=torch.int32, device=CUDA)
        model.launch("update", lambda: torch._foreach_copy_([other, ids], [new, new]),
                     {"ids": ids, "other": other, "new": new})
        torch.cuda.synchronize()
    if ordered:
        assert model.hazards == []
    else:
        (h,) = model.hazards
        assert (h.kind, h.slots) == (DEVICE_READ_PENDING_WRITE, (0, 1))
        assert h.by.endswith("overwrites it")


class _Buffer:
    name = "counts"

    def __init__(self) -> None:
        self.copies: list = []

    def on_copy(self, start: int, stop: int) -> None:
        self.copies.append((start, stop))


@pytest.mark.parametrize("n", [2, 0])
def test_an_upload_of_a_pinned_clone_of_a_host_range_is_a_copy_of_that_range(n):
    # vllm-ascend's gpu[:n].copy_(cpu[:n].clone().pin_memory(), non_blocking=True): the
    # pinned clone is a pinned region of its own, and an empty one shares its address
    # with every other empty tensor; both were "copied 0 time(s)" (an audit)
    model = device_model()
    with model.activate():
        host, buffer = pinned([1, 2, 3]), _Buffer()
        dev = torch.zeros(3, dtype=torch.int32, device=CUDA)
        model.pair(buffer, host, dev)
        dev[:n].copy_(host[:n].clone().pin_memory(), non_blocking=True)
        torch.cuda.synchronize()
        assert buffer.copies == [(0, n)]
        assert dev.tolist()[:n] == [1, 2][:n]
