"""docs/schemas.md says what a schema author needs (issue 23, item 7), and says it right:
the scenario a hook receives has every attribute the page lists, the copy forms it says
are observed are logged, the torch dtype it tells authors to use is torch's, and its
bridge of an unmapped signature is a schema that loads with one more adapter."""

from __future__ import annotations

import pathlib
import re
import types

import pytest

from stagecheck.oracles.observe import Builder, make_backend
from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.sample import sample_scenario
from stagecheck.oracles.schemas import check_schema
from stagecheck.spec.observation import Copy
from stagecheck.spec.schemas import BUILTIN_SCHEMAS

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "schemas.md").read_text()


def _section(title: str) -> str:
    return PAGE.split(f"### {title}\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]


def _first_column(section: str) -> list[str]:
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [name for row in rows for name in re.findall(r"`([^`]+)`", row.split("|")[1])]


def test_the_scenario_has_every_attribute_the_page_lists():
    names = _first_column(_section("The scenario a hook receives"))
    assert {"capacity", "num_reqs", "req_ids", "live_ids", "inputs", "initial_cpu",
            "initial_gpu", "schema", "s.<input>"} <= set(names)
    for schema in BUILTIN_SCHEMAS.values():
        s = sample_scenario(schema, 0, 3)
        for name in names:
            if name == "s.<input>":
                first = schema.inputs[0].name
                assert getattr(s, first) is s.inputs[first]
            else:
                assert hasattr(s, name), name
        assert s.live_ids == s.req_ids[:s.num_reqs]
        assert set(s.inputs) == {i.name for i in schema.inputs}


def test_the_copy_forms_the_page_says_are_logged_are_logged():
    section = _section("Which copies are observed")
    assert "Every host-to-device copy form of a staged buffer" in section.replace("\n", " ")
    logged = [row for row in section.splitlines() if row.startswith("| `")
              and row.rstrip().endswith("| yes |")]
    assert logged and all("copy_to_gpu" in row for row in logged)
    schema = BUILTIN_SCHEMAS["mamba-postprocess"]
    s = sample_scenario(schema, 0, 1)
    for kind in ("fast", "instrumented"):
        b = Builder(s, schema.profile(), make_backend(kind, RunOptions()))
        buf = b.buffer(schema.fields[0].buffer)
        buf.copy_to_gpu(1)
        buf.copy_to_gpu()
        assert [(e.start, e.stop) for e in b.events if isinstance(e, Copy)] == \
            [(0, 1), (0, s.capacity)]
    assert "docs/protocols.md" in section


def test_the_torch_dtype_the_page_names_is_torch_s():
    torch = pytest.importorskip("torch")
    assert 'b.dtype("bool")' in _section("Torch dtypes") and "`torch.bool`" in \
        _section("Torch dtypes")
    schema = BUILTIN_SCHEMAS["mamba-postprocess"]
    b = Builder(sample_scenario(schema, 0, 0), schema.profile(), make_backend("fast",
                                                                               RunOptions()))
    assert b.dtype("bool") is torch.bool


def test_the_page_s_bridge_adds_an_adapter_that_schema_check_accepts():
    block = PAGE.split("## Signatures: one schema across releases", 1)[1]
    code = re.search(r"```python\n(.*?)```", block, re.S).group(1)
    module = types.ModuleType("bridge_from_the_docs")
    exec(compile(code, "docs/schemas.md", "exec"), module.__dict__)
    builtin = BUILTIN_SCHEMAS["specdec-backup-tokens"]
    assert len(module.SCHEMA.signatures) == len(builtin.signatures) + 1
    assert module.SCHEMA.signatures[-1].parameters[-2:] == ("discard_request_indices",
                                                           "num_discarded_requests")
    assert check_schema(module.SCHEMA) == []
