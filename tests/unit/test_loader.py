"""File targets: every global name resolves at load time (never a NameError in a run)."""

from __future__ import annotations

import textwrap

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.errors import TargetLoadError
from stagecheck.oracles.targets import load_function_from_source, load_shims, load_target

HEADER = "import numpy as np\nimport math\nfrom typing import Any\n"


def load(body: str, name: str = "f", shims=None):
    return load_function_from_source(HEADER + textwrap.dedent(body), "t.py", name,
                                     shims=shims)


def unresolved(body: str, name: str = "f", shims=None) -> str:
    with pytest.raises(TargetLoadError) as info:
        load(body, name, shims)
    problem, fix = messages.TARGET_UNRESOLVED
    assert problem.split("{count}")[1].split(":")[0] in info.value.problem
    assert info.value.fix == fix.format(function=name)
    return str(info.value)


def test_an_engine_helper_is_refused_at_load_time_naming_name_module_and_fix():
    text = unresolved('''
        from vllm.utils.helpers import clamp_tokens

        def f(x):
            return clamp_tokens(x)
    ''')
    assert "'clamp_tokens' (used by f) from module 'vllm.utils.helpers'" in text
    assert "--shim FILE.py" in text


def test_a_helper_of_a_helper_is_followed():
    text = unresolved('''
        from vllm.logger import init_logger
        logger = init_logger(__name__)

        def _helper(x):
            logger.debug("x")
            return x

        def f(x):
            return _helper(x)
    ''')
    assert "'init_logger' (used by logger) from module 'vllm.logger'" in text


def test_names_defined_nowhere_are_refused():
    text = unresolved('''
        try:
            from fast import kernel
        except ImportError:
            kernel = None

        def f(x):
            return kernel(x)
    ''')
    assert "'kernel' (used by f), not defined by a module-level def" in text


def test_what_needs_no_resolution_loads():
    f = load('''
        from vllm.config import VllmConfig          # annotation only: dropped
        from vllm.decorators import trace            # decorator: dropped
        LIMIT = 2 ** 31 - 1
        COUNTER = 0

        @trace
        def f(x: VllmConfig, scale=LIMIT) -> VllmConfig:
            global COUNTER
            COUNTER += 1
            def inner(y):
                return [math.floor(v) for v in y] + [len(x)]
            squares = {k: k * k for k in range(3)}
            return inner(x), np.int32(scale), squares, COUNTER, Any
    ''')
    assert f([1.5])[0] == [1, 1]


def test_a_local_that_shadows_an_engine_import_is_not_a_use():
    f = load('''
        from vllm.utils import cdiv_unknown

        def f(cdiv_unknown):
            return cdiv_unknown + 1
    ''')
    assert f(1) == 2


def test_shipped_vllm_shims_apply_to_the_modules_they_stand_for():
    for module in ("vllm.utils.math_utils", "vllm.utils"):
        f = load(f'''
            from {module} import cdiv, round_up as ru

            def f(a, b):
                return cdiv(a, b), ru(a, b)
        ''')
        assert f(7, 2) == (4, 8)
        assert any("cdiv from stagecheck.impl.shims.vllm" in n for n in f.__stagecheck_shimmed__)
    # the same name from another module is not vLLM's cdiv: refused
    assert "'cdiv' (used by f) from module 'other.pkg'" in unresolved('''
        from other.pkg import cdiv

        def f(a, b):
            return cdiv(a, b)
    ''')


def test_user_shims_offer_every_top_level_name_but_modules_and_dunders(tmp_path):
    shim = tmp_path / "shim.py"
    shim.write_text("import os\n\ndef clamp_tokens(x):\n    return max(0, x)\n\n"
                    "kernel = abs\nnp = 'not numpy'\n_private = 1\n__version__ = '1'\n")
    assert set(load_shims([str(shim)])) == {"clamp_tokens", "kernel", "np", "_private"}
    listed = tmp_path / "listed.py"
    listed.write_text("import math as tl\n\n__all__ = ['tl', '_k']\n_k = 1\nother = 2\n")
    assert set(load_shims([str(listed)])) == {"tl", "_k"}    # __all__: exactly those


def test_user_shims_replace_any_module_level_name_the_target_uses(tmp_path):
    shim = tmp_path / "shim.py"
    shim.write_text("def clamp_tokens(x):\n    return max(0, x)\n\nkernel = abs\n"
                    "def _scale(x):\n    return 10 * x\nLIMIT = None\nlen = 'unused'\n")
    offered = load_shims([str(shim)])
    f = load('''
        from vllm.utils.helpers import clamp_tokens
        from math import floor as LIMIT

        def _scale(x):
            return engine_only(x)          # replaced: its own names need no resolution

        def f(x):
            return clamp_tokens(x), kernel(x), _scale(x), LIMIT, len([x]), np.int64(2)
    ''', shims=offered)
    assert f(-3) == (0, 3, -30, None, 1, 2)   # a builtin the file does not define stays
    assert {n.split(" ")[0] for n in f.__stagecheck_shimmed__} == {
        "clamp_tokens", "kernel", "_scale", "LIMIT"}
    assert any("_scale from" in n and "replacing the file's own" in n
               for n in f.__stagecheck_shimmed__)


def test_shim_files_that_are_missing_or_broken_are_load_errors(tmp_path):
    with pytest.raises(TargetLoadError, match="does not exist"):
        load_shims([str(tmp_path / "none.py")])
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(TargetLoadError, match="cannot be imported.*boom"):
        load_shims([str(broken)])


def test_load_target_records_the_shims_and_the_pinned_file(tmp_path):
    path = tmp_path / "mamba_utils.py"
    path.write_text(textwrap.dedent('''
        from vllm.utils.math_utils import cdiv

        def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs,
                                            requests, mamba_state_idx):
            return cdiv(num_reqs, 2)
    '''))
    target = load_target(f"{path}::stage_postprocess_inputs_to_gpu")
    assert target.resolved == f"{path}::stage_postprocess_inputs_to_gpu"
    assert target.sha is None and target.shimmed and target.record()["shims"]


def test_the_fixture_takes_shims_as_the_cli_does(tmp_path):
    from stagecheck.oracles.pytest_plugin import as_target
    path = tmp_path / "mamba_utils.py"
    path.write_text(textwrap.dedent('''
        from vllm.v1.worker.block_table import clamp_blocks

        def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs,
                                            requests, mamba_state_idx):
            return clamp_blocks(num_reqs)
    '''))
    spec = f"{path}::stage_postprocess_inputs_to_gpu"
    with pytest.raises(TargetLoadError, match="clamp_blocks"):
        as_target(spec, "candidate")
    shim = tmp_path / "shim.py"
    shim.write_text("def clamp_blocks(n):\n    return n\n")
    assert as_target(spec, "candidate", [str(shim)]).func(None, None, [], 3, {}, {}) == 3


@pytest.mark.parametrize("imports", ["import triton\nimport triton.language as tl\n",
                                     "from vllm.triton_utils import tl, triton\n"])
def test_a_triton_kernel_keeps_its_decorator_and_constexpr_annotations(imports):
    triton = pytest.importorskip("triton")
    f = load_function_from_source(imports + textwrap.dedent('''
        from vllm.decorators import trace

        @triton.jit
        def _kernel(x_ptr, n, BLOCK: tl.constexpr):
            offsets = tl.arange(0, BLOCK)
            tl.store(x_ptr + offsets, offsets, mask=offsets < n)

        @trace
        def f():
            return _kernel
    '''), "t.py", "f")
    kernel = f()
    assert type(kernel).__module__.startswith("triton.runtime")     # a Triton function
    assert kernel.arg_names == ["x_ptr", "n", "BLOCK"]
    assert kernel.fn.__annotations__ == {"BLOCK": triton.language.constexpr}
    assert f.__stagecheck_shimmed__ == ()      # triton is honoured, not a shim
    assert triton.__name__ == "triton"


def test_a_shim_file_whose_name_does_not_end_in_py_is_read_as_python(tmp_path):
    """An audit: a shim named without '.py' passed the command line's check and then
    failed inside the worker ('NoneType' object has no attribute 'loader', exit 3)."""
    shim = tmp_path / "vllm_helpers"
    shim.write_text("def cdiv(a, b):\n    return -(a // -b)\n")
    assert load_shims([str(shim)])["cdiv"].value(7, 2) == 4


def test_a_class_target_names_the_commands_that_drive_a_class(tmp_path):
    path = tmp_path / "component.py"
    path.write_text("class Staging:\n    def step(self):\n        pass\n")
    with pytest.raises(TargetLoadError) as info:
        load_target(f"{path}::Staging")
    said = str(info.value)
    assert "'Staging'" in said and "is a class, not a function" in said
    # bench, mutants and symbolic take no --protocol: the hint names diff and spec
    assert "by 'stagecheck diff' or 'stagecheck spec' with --protocol" in said


def test_a_methods_unresolved_name_suggests_loading_the_class_and_method():
    """An audit: for ``file.py::GPUModelRunner._stage`` the fix said to load
    'package.module:_stage', which names no module-level function."""
    text = unresolved('''
        from vllm.model_executor.layers import obscure_helper

        class GPUModelRunner:
            def _stage(self, n):
                return obscure_helper(n)
    ''', "GPUModelRunner._stage")
    assert "'package.module:GPUModelRunner._stage'" in text


def test_a_dotted_name_of_a_file_and_its_function_gets_the_file_form(tmp_path, monkeypatch):
    """An audit: ``pkg.mod.func`` whose ``pkg/mod.py`` exists was refused with the list of
    forms alone."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("def func():\n    pass\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TargetLoadError) as raised:
        load_target("pkg.mod.func")
    assert "(did you mean pkg/mod.py::func?)" in str(raised.value)
    with pytest.raises(TargetLoadError) as raised:      # no such file: no guess
        load_target("pkg.other.func")
    assert "did you mean" not in str(raised.value)


@pytest.mark.parametrize("spec", ["tests/targets/equivalent_raw_copy_.py:stage",
                                  "some/dir/module:stage"])
def test_a_file_with_one_colon_is_told_to_take_two(spec):
    with pytest.raises(TargetLoadError) as raised:
        load_target(spec)
    path = spec.rpartition(":")[0]
    assert str(raised.value) == messages.TARGET_ONE_COLON[0].format(value=spec) + "; " + \
        messages.TARGET_ONE_COLON[1].format(path=path, name="stage")
