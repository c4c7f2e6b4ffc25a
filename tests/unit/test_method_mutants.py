"""A method target (``path.py::Class.method``) is mutated like a function target: its
mutants load through the loader's method form (an audit: ``stagecheck mutants`` of a
method said the file had 'no module-level function' and exited 2)."""

import ast

from stagecheck.oracles.cli import main
from stagecheck.oracles.mutants.generate import functions_in_scope, generate_mutants

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
