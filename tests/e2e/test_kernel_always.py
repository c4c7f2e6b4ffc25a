"""``--kernel always`` runs the kernel oracle on every example, and a kernel backend that
cannot run is exit 2 before the run (issue 20, item 6)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

from stagecheck.oracles import messages
from stagecheck.oracles.campaign import run_campaign
from stagecheck.oracles.options import CampaignConfig, RunOptions
from stagecheck.oracles.targets import load_target

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "stagecheck", *map(str, args)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=cwd)


def test_kernel_always_judges_every_example_of_every_stream():
    config = CampaignConfig(examples=15, max_capacity=8, edge_examples=2,
                            run=RunOptions(kernel="always"))
    result = run_campaign(load_target("legacy"), load_target("single-loop"), config)
    ran = result.examples_in_contract + result.examples_out_of_contract + result.examples_edge
    assert ran == 15 + 15 + 4
    assert result.examples_kernel >= ran and result.kernel_seconds > 0
    auto = run_campaign(load_target("legacy"), load_target("single-loop"),
                        CampaignConfig(examples=15, max_capacity=8, edge_examples=2))
    assert auto.examples_kernel < ran          # auto: the kept findings' examples only


def test_kernel_always_says_what_it_ran_in_the_text_and_json_reports(tmp_path):
    out = tmp_path / "r.json"
    proc = run("diff", "legacy", "single-loop", "--kernel", "always", "--examples", "10",
               "--max-capacity", "8", "--json", out, "--save-dir", tmp_path / "found",
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    examples = report["examples"]
    assert examples["kernel"] >= (examples["in_contract"] + examples["out_of_contract"]
                                  + examples["edge"])
    head = messages.KERNEL_ALWAYS_RAN.split("{")[0]
    assert head in proc.stdout and f"ran on {examples['kernel']} example(s)" in proc.stdout
    # an audit: "ran on 631 example(s), every one judged" beside 630 tried; now the count
    # says how it relates to the examples tried
    tried = examples["in_contract"] + examples["out_of_contract"] + examples["edge"]
    assert messages.KERNEL_ALWAYS_EVERY.format(tried=tried) in proc.stdout
    extra = examples["kernel"] - tried
    assert (messages.KERNEL_ALWAYS_MORE.format(extra=extra) in proc.stdout) == (extra > 0)


def test_a_triton_that_is_found_but_fails_to_import_is_exit_2_before_the_run(tmp_path):
    fake = tmp_path / "site" / "triton"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise RuntimeError('libtriton.so: undefined symbol')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'site'}{os.pathsep}{ROOT}"}
    proc = run("diff", "legacy", "single-loop", "--kernel-backend", "triton", "--examples",
               "5", "--save-dir", tmp_path / "found", env=env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "triton kernel backend cannot run here" in proc.stderr
    assert "undefined symbol" in proc.stderr and "--kernel-backend reference" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not (tmp_path / "found").exists()          # nothing ran, nothing was saved
    # the same install with the kernel oracle off, or the reference backend, runs
    off = run("diff", "legacy", "single-loop", "--kernel", "off", "--examples", "5",
              "--max-capacity", "8", "--save-dir", tmp_path / "found2", env=env,
              cwd=tmp_path)
    assert off.returncode == 0, off.stderr
