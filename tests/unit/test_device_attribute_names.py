"""The device model is one object made of mixins (``model.py``, ``races.py``, ``work.py``,
``intent.py``, ``races_at_end.py``) and a backend (``cpu.py``, ``cuda.py``): a data
attribute one of them sets on ``self`` must not share its name with a method of the
backend's class, or it hides that method on the instance. The CUDA backend, which cannot be
built without a GPU, once named its held races ``self._held`` and so hid
``CudaDevice._held``: torch calls on device tensors raised TypeError in the GPU tier only."""

import ast
import inspect
import textwrap

import pytest

from stagecheck.oracles.device.cpu import CpuDevice
from stagecheck.oracles.device.cuda import CudaDevice


def _assigned(cls) -> dict[str, str]:
    """``self.<name> = ...`` in the source of ``cls`` and its bases: name -> where."""
    out = {}
    for klass in cls.__mro__:
        if klass is object or not klass.__module__.startswith(("stagecheck.", __name__)):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
            for target in targets:
                for t in ast.walk(target):
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                            and t.value.id == "self":
                        out.setdefault(t.attr, f"{klass.__name__} line {node.lineno}")
    return out


def _hidden(backend) -> dict[str, str]:
    return {name: where for name, where in _assigned(backend).items()
            if callable(inspect.getattr_static(backend, name, None))}


@pytest.mark.parametrize("backend", [CpuDevice, CudaDevice], ids=lambda c: c.__name__)
def test_no_attribute_of_the_device_model_hides_a_method(backend):
    assert not _hidden(backend), _hidden(backend)
    assert "hazards" in _assigned(backend) and "_queries" in _assigned(CudaDevice)


class _Shadowing(CudaDevice):
    """What ``races_at_end.py`` once did."""

    def __init__(self):
        self._held = []


def test_the_check_finds_a_hidden_method():
    assert set(_hidden(_Shadowing)) == {"_held"}
