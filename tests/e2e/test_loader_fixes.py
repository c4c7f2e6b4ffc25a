"""File targets (issue 23, item 4): a Triton kernel defined in the target's own module
runs (``@triton.jit`` is kept; Triton's interpreter on the CPU), or is replaced by a
reference a shim supplies; a shim may replace any module-level name the target uses
(its own definitions and private names included; a constant None too); and the fix
each load error suggests works when followed: each test below follows it, through the
command line in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stagecheck.oracles import messages

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "tests" / "targets" / "same_module_kernel"
SCHEMA = str(KERNEL / "next_positions_schema.py")
REFERENCE = f"{KERNEL / 'next_positions.py'}::stage_next_positions"
PLANTED = f"{KERNEL / 'next_positions_vllm_import.py'}::stage_next_positions"


def _stagecheck(*args: str, env: dict | None = None, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stagecheck", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd, env=env)


def _env(**changes) -> dict:
    env = dict(os.environ)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _report(tmp_path) -> list[str]:
    return ["--json", str(tmp_path / "r.json"), "--save-dir", str(tmp_path / "f"), "--quiet"]


def _errors(tmp_path) -> set[str]:
    data = json.loads((tmp_path / "r.json").read_text())
    return {f["invariant"] for f in data["findings"] if f["severity"] == "error"}


# ------------------------------------------------------------------ same-module kernels

def test_a_same_module_triton_kernel_runs_under_the_interpreter_the_loader_selects(tmp_path):
    pytest.importorskip("triton")
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("with a GPU Triton compiles: a CPU run of a kernel needs TRITON_INTERPRET=1 "
                    "(the next test)")
    args = _report(tmp_path)
    done = _stagecheck("spec", "--schema", SCHEMA, REFERENCE, "--examples", "20", *args,
                       env=_env(TRITON_INTERPRET=None))
    assert done.returncode == 0, done.stdout + done.stderr
    assert _errors(tmp_path) == set() and "CONFORMS" in done.stdout


def test_a_planted_kernel_bug_is_found_through_the_vllm_triton_import(tmp_path):
    pytest.importorskip("triton")
    args = _report(tmp_path)
    done = _stagecheck("diff", "--schema", SCHEMA, REFERENCE, PLANTED, "--examples", "20",
                       "--no-out-of-contract", *args, env=_env(TRITON_INTERPRET="1"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "TypeError" not in done.stdout and "next[0]" in done.stdout
    assert _errors(tmp_path) >= {"same_buffers"}


def test_a_shim_may_supply_a_reference_for_a_same_module_kernel(tmp_path):
    pytest.importorskip("triton")
    args = _report(tmp_path)
    done = _stagecheck("diff", "--schema", SCHEMA, "--shim",
                       str(KERNEL / "reference_kernel_shim.py"), REFERENCE, PLANTED,
                       "--examples", "20", "--no-out-of-contract", *args,
                       env=_env(TRITON_INTERPRET="1"))
    # the shim's reference replaces both kernels: the planted one is gone too
    assert done.returncode == 0, done.stdout + done.stderr
    assert "_next_position_kernel from" in done.stdout
    assert "replacing the file's own" in done.stdout


# ------------------------------------------------------------------ each fix, followed

STAGING = '''
def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
                                    mamba_state_idx):
    bufs = (ctx.mamba_state_idx_buf, ctx.num_scheduled_tokens_buf,
            ctx.num_computed_tokens_buf, ctx.num_draft_tokens_buf)
    for buf in bufs:
        assert buf is not None
    drafts = scheduler_output.scheduled_spec_decode_tokens
    for i, req_id in enumerate(req_ids[:num_reqs]):
        assert req_id in mamba_state_idx, f"no state index for {req_id!r}: run preprocess"
        bufs[0].np[i] = mamba_state_idx[req_id]
        bufs[1].np[i] = {scheduled}
        bufs[2].np[i] = requests[req_id].num_computed_tokens
        bufs[3].np[i] = len(drafts.get(req_id, ()))
    for buf in bufs:
        buf.copy_to_gpu(num_reqs)
'''
SCHEDULED = "scheduler_output.num_scheduled_tokens[req_id]"


def _target(tmp_path, header: str, scheduled: str, name: str = "mamba_utils.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(header) + STAGING.replace("{scheduled}", scheduled))
    return f"{path}::stage_postprocess_inputs_to_gpu"


def _shim(tmp_path, text: str) -> str:
    path = tmp_path / "my_shims.py"
    path.write_text(textwrap.dedent(text))
    return str(path)


def _follow(tmp_path, target: str, shim_text: str, *expected: str):
    """The load error names each of ``expected`` and suggests --shim; following it works."""
    first = _stagecheck("spec", target, "--examples", "20", "--save-dir", str(tmp_path / "f"))
    assert first.returncode == 2, first.stdout + first.stderr
    assert "--shim FILE.py" in first.stderr and "Traceback" not in first.stderr
    for word in expected:
        assert word in first.stderr, first.stderr
    done = _stagecheck("spec", target, "--examples", "20", "--quiet", "--save-dir",
                       str(tmp_path / "f"), "--shim", _shim(tmp_path, shim_text))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "CONFORMS" in done.stdout
    return done


def test_a_private_name_the_loader_cannot_compile_comes_from_a_shim_even_as_none(tmp_path):
    target = _target(tmp_path, '''
        try:
            from engine_ext import fast_count as _fast_count
        except ImportError:
            _fast_count = None
    ''', "(_fast_count(req_id) if _fast_count is not None else "
         "scheduler_output.num_scheduled_tokens[req_id])")
    problem = messages.TARGET_UNRESOLVED[0].split("{count}")[1].split(":")[0]
    _follow(tmp_path, target, "_fast_count = None\n", "'_fast_count'", problem)


def test_an_honoured_import_that_fails_comes_from_a_shim(tmp_path):
    target = _target(tmp_path, '''
        from torch.no_such_module import scheduled_count
    ''', "scheduled_count(scheduler_output, req_id)")
    _follow(tmp_path, target, '''
        def scheduled_count(scheduler_output, req_id):
            return scheduler_output.num_scheduled_tokens[req_id]
    ''', "'scheduled_count'", "fails to import")


def test_a_module_level_statement_that_raises_names_itself_and_a_shim_replaces_it(tmp_path):
    target = _target(tmp_path, '''
        def _build_table():
            raise RuntimeError("needs the engine's config")

        _SCALE = _build_table()
    ''', "scheduler_output.num_scheduled_tokens[req_id] * _SCALE")
    done = _follow(tmp_path, target, "_SCALE = 1\n",
                   "the module-level statement of '_SCALE' raised RuntimeError")
    assert done.returncode == 0


def test_the_module_function_form_the_fix_names_works_where_the_package_is_installed(
        tmp_path):
    package = tmp_path / "enginepkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text(
        "def scheduled_count(so, r):\n    return so.num_scheduled_tokens[r]\n")
    file_target = _target(package, "from enginepkg.helpers import scheduled_count\n",
                          "scheduled_count(scheduler_output, req_id)", name="staging.py")
    first = _stagecheck("spec", file_target, "--examples", "20")
    assert first.returncode == 2 and "'package.module:stage_postprocess_inputs_to_gpu'" in \
        first.stderr, first.stderr
    done = _stagecheck("spec", "enginepkg.staging:stage_postprocess_inputs_to_gpu",
                       "--examples", "20", "--quiet", "--save-dir", str(tmp_path / "f"),
                       env=_env(PYTHONPATH=str(tmp_path)))
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_alias_target_names_its_def_and_that_def_loads(tmp_path):
    """The fix the message gives works when followed."""
    target = tmp_path / "stager.py"
    source = (ROOT / "impl" / "staging_single_loop.py").read_text()
    source = source.replace("def stage_postprocess_inputs_to_gpu(", "def _stage(")
    target.write_text(source + "\n\nstage_postprocess_inputs_to_gpu = _stage\n")
    aliased = _stagecheck("diff", "single-loop", f"{target}::stage_postprocess_inputs_to_gpu",
                          "--examples", "5", "--quiet", "--no-save")
    assert aliased.returncode == 2, aliased.stdout + aliased.stderr
    fix = messages.TARGET_ASSIGNED_FIX_ALIAS.format(
        value=f"{target}::stage_postprocess_inputs_to_gpu", refers="_stage", file=str(target))
    assert fix in aliased.stderr, aliased.stderr
    followed = _stagecheck("diff", "single-loop", f"{target}::_stage", "--examples", "5",
                           "--quiet", "--no-save")
    assert followed.returncode == 0, followed.stdout + followed.stderr


def test_mutants_of_an_async_target_say_it_is_one(tmp_path):
    target = tmp_path / "stager.py"
    source = (ROOT / "impl" / "staging_single_loop.py").read_text()
    target.write_text(source.replace("def stage_postprocess_inputs_to_gpu(",
                                     "async def stage_postprocess_inputs_to_gpu("))
    proc = _stagecheck("mutants", f"{target}::stage_postprocess_inputs_to_gpu", "--list")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "with async def" in proc.stderr and messages.MUTANTS_ASYNC_TARGET[1] in proc.stderr
