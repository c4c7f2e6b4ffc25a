"""The upstream-style baseline: the two example-based tests upstream wrote for the
refactor, as the yardstick stagecheck's oracles are measured against."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

__all__ = ["UPSTREAM_TESTS", "UpstreamTestFailure", "run_upstream_tests",
           "upstream_example_test", "upstream_missing_index_test"]

_FLAG = "run_prefix_state_migration"

# ======================================================================================
# The upstream-style baseline: two example-based tests
# ======================================================================================

_FOUR = ("mamba_state_idx_buf", "num_scheduled_tokens_buf", "num_computed_tokens_buf",
         "num_draft_tokens_buf")


class UpstreamTestFailure(AssertionError):
    """One of the upstream-style tests failed (as a pytest assertion would)."""


def _upstream_inputs(capacity: int = 8, takes_flag: bool = False):
    # torch: the upstream tests run in a worker; the mutants package loads without it
    import torch

    from stagecheck.impl.buffer import CpuGpuBuffer  # torch too
    ctx = SimpleNamespace()
    for name in _FOUR:
        buf = CpuGpuBuffer(capacity, torch.int32)
        buf.cpu.fill_(-1)          # negative sentinel: untouched slots show
        buf.gpu.fill_(-1)
        setattr(ctx, name, buf)
    if takes_flag:
        ctx.is_prefilling_buf = CpuGpuBuffer(capacity, torch.bool)
    req_ids = ["req-0", "req-1", "req-2", "req-pad"]      # one trailing padded id
    scheduler_output = SimpleNamespace(
        num_scheduled_tokens={"req-0": 3, "req-1": 1, "req-2": 2},
        scheduled_spec_decode_tokens={"req-0": [101, 102], "req-2": [103]})   # req-1: none
    requests = {r: SimpleNamespace(num_computed_tokens=c, num_prompt_tokens=5)
                for r, c in (("req-0", 10), ("req-1", 20), ("req-2", 30))}
    mamba_state_idx = {"req-0": 2, "req-1": 5, "req-2": 7}
    return ctx, scheduler_output, req_ids, 3, requests, mamba_state_idx


def _takes_flag(profile) -> bool:
    return profile is not None and profile.takes(_FLAG)


def _call(func, args, takes_flag: bool):
    kwargs = {_FLAG: True} if takes_flag else {}
    return func(*args, **kwargs)


def upstream_example_test(func: Callable, profile=None) -> None:
    """Stage three requests (one without drafts) plus a padded id into sentinel buffers.

    Checks the live slots of the four buffers, that the CPU tails keep the sentinel,
    and the GPU mirrors of the state-index and scheduled-token buffers. Raises
    (``UpstreamTestFailure`` or whatever the staging call raised) when it fails.
    """
    import torch  # see _upstream_inputs
    takes_flag = _takes_flag(profile)
    args = _upstream_inputs(takes_flag=takes_flag)
    ctx = args[0]
    _call(func, args, takes_flag)
    expected = {"mamba_state_idx_buf": [2, 5, 7], "num_scheduled_tokens_buf": [3, 1, 2],
                "num_computed_tokens_buf": [10, 20, 30], "num_draft_tokens_buf": [2, 0, 1]}
    for name, want in expected.items():
        buf = getattr(ctx, name)
        if buf.np[:3].tolist() != want:
            raise UpstreamTestFailure(f"{name} live slots {buf.np[:3].tolist()} != {want}")
        if (buf.np[3:] != -1).any():
            raise UpstreamTestFailure(f"{name} CPU tail {buf.np[3:].tolist()} lost the sentinel")
    for name in ("mamba_state_idx_buf", "num_scheduled_tokens_buf"):
        buf = getattr(ctx, name)
        want = torch.tensor(expected[name], dtype=torch.int32)
        if not torch.equal(buf.gpu[:3].cpu(), want):
            raise UpstreamTestFailure(f"{name} GPU mirror {buf.gpu[:3].tolist()} != "
                                      f"{want.tolist()}")


def upstream_missing_index_test(func: Callable, profile=None) -> None:
    """A live request without a state index must raise AssertionError."""
    takes_flag = _takes_flag(profile)
    args = list(_upstream_inputs(takes_flag=takes_flag))
    del args[5]["req-1"]
    try:
        _call(func, args, takes_flag)
    except AssertionError:
        return
    except Exception as exc:
        raise UpstreamTestFailure(f"expected AssertionError, got {type(exc).__name__}: "
                                  f"{exc}") from None
    raise UpstreamTestFailure("DID NOT RAISE AssertionError for a missing state index")


def run_upstream_tests(target) -> tuple[str, str] | None:
    """Run the upstream tests of ``target``'s schema on it (in the worker that holds it):
    ``(label, what failed)`` of the first failing test, None when all pass."""
    for label, test in UPSTREAM_TESTS[target.schema.name]:
        try:
            test(target.func, target.profile)
        except (KeyboardInterrupt, SystemExit) as exc:
            return label, f"{type(exc).__name__}: {exc}"
        except BaseException as exc:   # a failing test or a crash of the code under test
            try:
                text = f"{type(exc).__name__}: {exc}"
            except Exception:
                text = type(exc).__name__
            return label, text
    return None


#: schema name -> the example-based tests upstream wrote for it, by label
UPSTREAM_TESTS = {"mamba-postprocess": (("example", upstream_example_test),
                                        ("missing-index", upstream_missing_index_test))}
