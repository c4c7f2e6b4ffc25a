"""A method target (``path.py::Class.method``) is mutated like a function target: its
mutants load through the loader's method form (an audit: ``stagecheck mutants`` of a
method said the file had 'no module-level function' and exited 2)."""

import ast
import dataclasses

from stagecheck.oracles.cli import main
from stagecheck.oracles.mutants.generate import functions_in_scope, generate_mutants
from stagecheck.oracles.schemas import load_schema
from stagecheck.spec.schema import TargetProfile

SOURCE = '''
import numpy as np


def _minus_one():
    return -1


class Runner:
    def other(self):
        return 0

    def stage(self, num_reqs):
        out = self.buf.np[:num_reqs]
        for i, r in enumerate(self.req_ids[:num_reqs]):
            out[i] = self.table.get(r, _minus_one())
        self.buf.copy_to_gpu(num_reqs)
'''
METHOD = "tests/targets/specdec-backup-tokens/signatures/eagle_seq_lens.py" \
         "::EagleProposer.prepare_next_token_ids_padded"


def test_a_method_and_the_module_functions_it_calls_are_in_scope():
    assert functions_in_scope(ast.parse(SOURCE), "Runner.stage") == ("_minus_one", "Runner.stage")


def test_the_mutants_of_a_method_change_the_method_and_load():
    mutants = generate_mutants(SOURCE, "r.py", "Runner.stage")
    assert mutants, "no mutant of a method"
    assert {m.location.function for m in mutants} >= {"stage"}
    for m in mutants:
        assert m.function == "Runner.stage"
        assert callable(m.load())
    assert any("self.buf.copy_to_gpu" in m.diff for m in mutants)


def test_mutants_list_of_a_method_target_exits_0(capsys):
    code = main(["mutants", METHOD, "--list"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "prepare_next_token_ids_padded:" in out and "no module-level function" not in err


WHOLE_BATCH = '''
from types import SimpleNamespace

from stagecheck.spec.schema import Call, Field, Input, StagingSchema


def build(b, profile):
    return Call((SimpleNamespace(req_ids=b.req_ids(), table=b.table("v"),
                                 buf=b.buffer("buf")), b.scenario.num_reqs))


SCHEMA = StagingSchema(name="whole", summary="s", functions=("stage",),
                       parameters=("self", "num_reqs"), num_reqs_is_len=True,
                       inputs=(Input("v"),), fields=(Field("v", "buf", "int32",
                                                           lambda q: q.v, "v[r]"),),
                       build=build)
'''
WHOLE_SOURCE = SOURCE.replace("self.table.get(r, _minus_one())", "self.table[r]")


def test_a_longer_req_ids_slice_is_equivalent_only_where_num_reqs_is_len(tmp_path):
    # an audit: under a num_reqs_is_len schema, req_ids and req_ids[:num_reqs + 1] are
    # req_ids[:num_reqs]; the report said 'NOT EQUIVALENT (no reason): a gap'
    (tmp_path / "whole_schema.py").write_text(WHOLE_BATCH)
    schema = load_schema(str(tmp_path / "whole_schema.py"))
    for whole in (True, False):
        s = schema if whole else dataclasses.replace(schema, num_reqs_is_len=False)
        mutants = generate_mutants(WHOLE_SOURCE, "r.py", "Runner.stage", TargetProfile(s))
        labeled = {m.description for m in mutants
                   if m.equivalent_reason and m.operator != "non_blocking_toggled"}
        longer = {m.description for m in mutants
                  if m.operator == "full_req_ids" and "self.req_ids" in m.description
                  or m.operator == "loop_bound_off_by_one" and "num_reqs + 1 in self.req_ids"
                  in m.description}
        assert len(longer) == 2
        assert (labeled == longer) if whole else not labeled
