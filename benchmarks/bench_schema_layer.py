"""The cost of the schema layer for the seed function, in one run (issue 14).

    python benchmarks/bench_schema_layer.py [--repeats 3] [--examples 1000]
                                            [--scenarios 1000] [--passes 3] [--seed 0]

Issue 14 asks for "the overhead of the schema layer against today's hard-wired path for
the seed function, in one run (goal: under 10%)". This script compares two revisions
of this repository that differ by the schema layer alone:

- ``8143489`` (hard-wired): the last commit where ``stage_postprocess_inputs_to_gpu`` is
  wired into spec/ and oracles/ (fixed FIELDS, one contract, dedicated invariants);
- ``6320050`` (schema layer): the commit that introduced ``spec/schema.py``,
  ``spec/schemas/`` (the seed function as the ``mamba-postprocess`` schema), the
  scenario space of ``spec/space.py`` and the generic invariants, with no other change
  of engine (both run the in-process hypothesis campaign). Later commits (22f878f and
  after) changed the engine (workers, a batched engine) and would not measure the
  layer itself.

Two figures, each timed at both revisions:

1. campaign: ``run_campaign(load_target("legacy"), load_target("single-loop"),
   CampaignConfig(examples=N, seed=SEED+r, run=RunOptions(kernel="off")))`` -- both
   streams (in contract, out of contract), the kernel oracle off; examples per second
   = (examples actually run) / the campaign's time (the project preload, target
   loading and a 20-example warm-up campaign happen before, untimed). Hypothesis draws
   the scenarios, and each revision draws them its own way (6320050 routes every
   decision through ``spec.space``), so the two campaigns see different (equally
   many) scenarios.
2. pipeline: ``evaluate(legacy, single-loop, s, RunOptions(kernel="off"))`` (observe
   both sides, check both against the spec, compare) over ONE fixed list of scenarios,
   the same at both revisions: drawn once (half in contract, half out of contract)
   by the hard-wired revision's strategies, saved in its flat JSON form, and read at
   each revision with ``StagingScenario.from_dict`` (6320050 reads the flat keys into
   ``inputs``, as it does for replay files of earlier versions). This leaves out
   hypothesis, which dominates a campaign and can hide the layer's cost. Each pass
   then runs ``evaluate()``'s body once more with its two halves timed apart, example
   by example: ``observe`` (both sides: build the buffers from the scenario, call,
   record) and ``judge`` (contract breaches, check of both sides, compare).

Interleaving, for a shared machine: one long-lived process per revision (set up,
warmed up, then idle on a pipe while the other one runs); the parent sends them the
same work in turn, alternating which goes first (ABBA), so that load from elsewhere
hits both alike. Per repeat: one campaign each, then ``--passes`` pipeline passes
each (the best pass per side counts). Every time is taken twice: wall clock
(``perf_counter``) and the process's CPU time (``process_time``, which does not count
the time the process waits for a core that another program holds); the overhead is
given for both. Overhead = (time per example with the schema layer) / (time per
example hard-wired) - 1, paired within a repeat; the table gives the median over the
repeats and [min..max].

How each revision is made importable (the package maps stagecheck.spec -> spec/,
stagecheck.impl -> impl/, stagecheck.oracles -> oracles/ through setuptools'
package-dir, so a worktree on PYTHONPATH does not import):

- ``git worktree add --detach TMP/wt-REV REV`` (removed again at the end);
- ``PY -m pip install --no-deps --no-build-isolation --no-index --target TMP/site-REV
  TMP/wt-REV``: a regular (non-editable) install of that revision into its own folder,
  built by the setuptools already in the running environment (nothing is downloaded;
  numpy, torch and hypothesis are not installed there);
- each measuring process runs ``PY -P THIS_FILE --child ...`` with
  ``PYTHONPATH=TMP/site-REV`` and its working directory in TMP: numpy, torch and
  hypothesis come from PY's own site-packages (e.g. /work/main/.venv), and
  ``stagecheck`` from TMP/site-REV, because PYTHONPATH precedes site-packages and an
  editable install of the checkout (``pip install -e .``) appends its finder to the
  END of ``sys.meta_path``; ``-P`` keeps this file's folder off ``sys.path``. Each
  child checks that ``stagecheck``, ``stagecheck.spec``, ``stagecheck.impl`` and
  ``stagecheck.oracles`` were imported from its folder, and stops otherwise.

Needs: Python >= 3.11, run from a clone of this repository (it holds both revisions)
with the usual environment, e.g. ``python -m venv .venv && .venv/bin/pip install -e
'.[test]'`` (CPU torch is enough), then ``.venv/bin/python
benchmarks/bench_schema_layer.py``. Everything is made under one temporary folder and
removed at the end (``--keep`` keeps it). 1 to 3 minutes with the defaults on 2 shared
cores (55 s on an idle machine).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
HARD_WIRED, SCHEMA = "8143489", "6320050"
LABELS = {HARD_WIRED: "hard-wired", SCHEMA: "schema layer"}
WARMUP_EXAMPLES = 20


# --------------------------------------------------------------------------- children
# Run under PYTHONPATH=TMP/site-REV. They use only names that are the same at both
# revisions (run_campaign, CampaignConfig, RunOptions, load_target, evaluate, observe,
# check, compare, StagingScenario.from_dict); contract_breaches moved and took the
# schema, and is looked up at each.

def _check_origin(site: str) -> None:
    import stagecheck
    import stagecheck.impl
    import stagecheck.oracles
    import stagecheck.spec
    site = os.path.realpath(site)
    for module in (stagecheck, stagecheck.spec, stagecheck.impl, stagecheck.oracles):
        where = os.path.realpath(module.__file__)
        if not where.startswith(site + os.sep):
            raise SystemExit(f"{module.__name__} imported from {where}, not from {site}")


def _reply(obj: dict) -> None:
    sys.stdout.write("RESULT " + json.dumps(obj) + "\n")
    sys.stdout.flush()


def _child_generate(args) -> None:
    """Draw the fixed scenario list with this revision's strategies (run at 8143489)."""
    from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings

    from stagecheck.oracles._preload import preload_project_modules
    from stagecheck.oracles.generate import out_of_contract_scenarios, staging_scenarios
    preload_project_modules()
    half = max(1, args.scenarios // 2)
    drawn: list[dict] = []
    for strategy in (staging_scenarios(8).map(lambda s: ("", s)), out_of_contract_scenarios(8)):
        @settings(max_examples=half, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck), phases=(Phase.generate,))
        @hyp_seed(args.seed)
        @given(strategy)
        def collect(labeled):
            drawn.append(labeled[1].to_dict())
        collect()
    with open(args.scenario_file, "w", encoding="utf-8") as fh:
        json.dump(drawn, fh)
    _reply({"scenarios": len(drawn)})


def _child_serve(args) -> None:
    """Set up, warm up, then answer ``campaign SEED`` and ``pipeline`` lines on stdin."""
    from stagecheck.oracles._preload import preload_project_modules
    preload_project_modules()     # as run_campaign does; outside every timed part

    from stagecheck.oracles.campaign import run_campaign
    from stagecheck.oracles.compare import compare
    from stagecheck.oracles.evaluate import evaluate
    from stagecheck.oracles.observe import observe
    from stagecheck.oracles.options import CampaignConfig, RunOptions
    from stagecheck.oracles.targets import load_target
    from stagecheck.spec import ERROR, StagingScenario, check
    try:      # 6320050: the contract belongs to the schema
        from stagecheck.spec.space import contract_breaches as _breaches

        def breaches(target, s):
            return _breaches(target.schema, s)
    except ImportError:   # 8143489: one hard-wired contract
        from stagecheck.spec.scenario import contract_breaches as _breaches

        def breaches(target, s):
            return _breaches(s)

    a, b = load_target("legacy"), load_target("single-loop")
    options = RunOptions(kernel="off")
    with open(args.scenario_file, encoding="utf-8") as fh:
        scenarios = [StagingScenario.from_dict(d) for d in json.load(fh)]
    wall, cpu = time.perf_counter, time.process_time

    # warm-up (lazy imports, first calls into torch), and what each side sees
    run_campaign(a, b, CampaignConfig(examples=WARMUP_EXAMPLES, seed=args.seed + 10_000,
                                      run=options))
    findings = [evaluate(a, b, s, options).findings for s in scenarios]
    _reply({"scenarios": len(scenarios),
            "in_contract": sum(not breaches(b, s) for s in scenarios),
            "with_findings": sum(bool(f) for f in findings),
            "error_findings": sum(x.severity == ERROR for f in findings for x in f),
            "invariants": sorted({x.invariant for f in findings for x in f})})

    for line in sys.stdin:
        command = line.split()
        if not command:
            continue
        if command[0] == "quit":
            return
        if command[0] == "campaign":
            config = CampaignConfig(examples=args.examples, seed=int(command[1]), run=options)
            w, c = wall(), cpu()
            result = run_campaign(a, b, config)
            w, c = wall() - w, cpu() - c
            _reply({"examples": result.examples_in_contract + result.examples_out_of_contract,
                    "in": result.examples_in_contract, "out": result.examples_out_of_contract,
                    "wall": w, "cpu": c, "seconds": result.seconds,
                    "findings": len(result.findings),
                    "errors": sum(f.severity == ERROR for f in result.findings)})
        elif command[0] == "pipeline":
            out = {"scenarios": len(scenarios)}
            w, c = wall(), cpu()
            for s in scenarios:
                evaluate(a, b, s, options)
            out["evaluate"] = (wall() - w, cpu() - c)
            # evaluate()'s body, its two halves timed apart example by example (the
            # observations are dropped at once, as in evaluate(), not kept for a 2nd loop)
            ow = oc = jw = jc = 0.0
            for s in scenarios:
                w0, c0 = wall(), cpu()
                ob = observe(b, s, options)
                oa = observe(a, s, options)
                w1, c1 = wall(), cpu()
                in_contract = not breaches(b, s)
                found = check(s, ob, b.profile, "candidate", in_contract)
                found = check(s, oa, a.profile, "baseline", in_contract) + found
                found += compare(s, oa, ob, a.profile, b.profile, in_contract)
                w2, c2 = wall(), cpu()
                ow, oc, jw, jc = ow + w1 - w0, oc + c1 - c0, jw + w2 - w1, jc + c2 - c1
            out["observe"], out["judge"] = (ow, oc), (jw, jc)
            _reply(out)
        else:
            raise SystemExit(f"unknown command {line!r}")


def _child_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", choices=("generate", "serve"), required=True)
    parser.add_argument("--site", required=True)
    parser.add_argument("--scenario-file", required=True)
    parser.add_argument("--scenarios", type=int, default=1000)
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    _check_origin(args.site)
    (_child_generate if args.child == "generate" else _child_serve)(args)


# --------------------------------------------------------------------------- parent

def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout}\n"
                         f"{done.stderr}")


def _prepare(rev: str, tmp: str) -> str:
    """A worktree of ``rev`` and a --target install of it; the install folder."""
    tree, site = os.path.join(tmp, f"wt-{rev}"), os.path.join(tmp, f"site-{rev}")
    _run(["git", "-C", str(ROOT), "worktree", "add", "--detach", tree, rev])
    _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
          "--no-build-isolation", "--no-index", "--disable-pip-version-check",
          "--target", site, tree])
    return site


class Child:
    """One revision's process: ``ask(command)`` sends a line and waits for its answer."""

    def __init__(self, kind: str, rev: str, site: str, tmp: str, args) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
        env.update(PYTHONPATH=site, PYTHONHASHSEED="0")
        self.rev, self.log = rev, os.path.join(tmp, f"{kind}-{rev}.log")
        self._stderr = open(self.log, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-P", os.path.abspath(__file__), "--child", kind, "--site", site,
             "--scenario-file", os.path.join(tmp, "scenarios.json"),
             "--scenarios", str(args.scenarios), "--examples", str(args.examples),
             "--seed", str(args.seed)],
            cwd=tmp, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr, text=True, bufsize=1)

    def answer(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])
        self.proc.wait()
        with open(self.log) as fh:
            raise SystemExit(f"{LABELS.get(self.rev, self.rev)} process ({self.rev}) exited "
                             f"{self.proc.returncode}:\n{fh.read()[-4000:]}")

    def ask(self, command: str) -> dict:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.answer()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()


def main() -> None:
    if "--child" in sys.argv:
        _child_main(sys.argv[1:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--examples", type=int, default=1000,
                        help="campaign examples per stream (default 1000, two streams)")
    parser.add_argument("--scenarios", type=int, default=1000,
                        help="size of the fixed scenario list of the pipeline (default 1000)")
    parser.add_argument("--passes", type=int, default=3,
                        help="pipeline passes per side and repeat, the best counts (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    if sys.version_info < (3, 11):
        raise SystemExit("needs Python >= 3.11 (python -P)")

    started = time.perf_counter()
    tmp = tempfile.mkdtemp(prefix="bench-schema-layer-")
    trees = [os.path.join(tmp, f"wt-{rev}") for rev in (HARD_WIRED, SCHEMA)]
    children: dict[str, Child] = {}
    try:
        sites = {rev: _prepare(rev, tmp) for rev in (HARD_WIRED, SCHEMA)}
        gen = Child("generate", HARD_WIRED, sites[HARD_WIRED], tmp, args)
        gen.answer()
        gen.close()
        children = {rev: Child("serve", rev, sites[rev], tmp, args)
                    for rev in (HARD_WIRED, SCHEMA)}
        summary = {rev: child.answer() for rev, child in children.items()}
        campaigns: dict[str, list[dict]] = {HARD_WIRED: [], SCHEMA: []}
        pipelines: dict[str, list[dict]] = {HARD_WIRED: [], SCHEMA: []}
        flip = False
        for r in range(args.repeats):
            for rev in _order(flip):
                campaigns[rev].append(children[rev].ask(f"campaign {args.seed + r}"))
            flip = not flip
            passes: dict[str, list[dict]] = {HARD_WIRED: [], SCHEMA: []}
            for _ in range(args.passes):
                for rev in _order(flip):
                    passes[rev].append(children[rev].ask("pipeline"))
                flip = not flip
            for rev in passes:    # the best pass of each part, by CPU time
                best = {"scenarios": passes[rev][0]["scenarios"]}
                for part in ("evaluate", "observe", "judge"):
                    best[part] = min((p[part] for p in passes[rev]), key=lambda t: t[1])
                pipelines[rev].append(best)
            print(f"  repeat {r + 1}/{args.repeats}: campaign "
                  + ", ".join(f"{LABELS[rev]} {_rate(campaigns[rev][-1], 'wall'):.0f} ex/s"
                              for rev in (HARD_WIRED, SCHEMA))
                  + "; pipeline "
                  + ", ".join(f"{LABELS[rev]} {_per_us(pipelines[rev][-1], 'evaluate', 0):.0f}"
                              for rev in (HARD_WIRED, SCHEMA)) + " us/example (wall)",
                  flush=True)
    finally:
        for child in children.values():
            child.close()
        for tree in trees:
            if os.path.isdir(tree):
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", tree],
                               capture_output=True)
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    _report(args, summary, campaigns, pipelines, time.perf_counter() - started)


def _order(flip: bool) -> tuple[str, str]:
    return (SCHEMA, HARD_WIRED) if flip else (HARD_WIRED, SCHEMA)


def _rate(c: dict, clock: str) -> float:
    return c["examples"] / c[clock]


def _per_us(p: dict, part: str, clock: int) -> float:
    return 1e6 * p[part][clock] / p["scenarios"]


def _spread(xs: list[float], fmt: str) -> str:
    return (f"{format(statistics.median(xs), fmt)} "
            f"[{format(min(xs), fmt)}..{format(max(xs), fmt)}]")


def _report(args, summary: dict, campaigns: dict, pipelines: dict, wall: float) -> None:
    print()
    print(f"schema layer ({SCHEMA}) vs hard-wired ({HARD_WIRED}): seed function, legacy vs "
          f"single-loop, kernel oracle off, CPU")
    print(f"{args.repeats} interleaved repeats; median [min..max] over the repeats; overhead = "
          f"schema/hard-wired time per example - 1, paired per repeat")
    rows = [("campaign, examples/s", True,
             lambda rev, clock: [_rate(c, clock) for c in campaigns[rev]])]
    for part, name in (("evaluate", "pipeline evaluate(), us/example"),
                       ("observe", "  observe() x2, us/example"),
                       ("judge", "  contract+check x2+compare, us/ex")):
        rows.append((name, False, lambda rev, clock, part=part: [
            _per_us(p, part, 0 if clock == "wall" else 1) for p in pipelines[rev]]))
    medians: dict[tuple[str, str], float] = {}
    for clock, title in (("wall", "wall clock (perf_counter)"),
                         ("cpu", "CPU time of the process (process_time)")):
        head = f"{title:38} {'hard-wired':>18} {'schema layer':>18} {'overhead %':>22}"
        print()
        print(head)
        print("-" * len(head))
        for name, rate, values in rows:     # rate: higher is better
            hw, sc = values(HARD_WIRED, clock), values(SCHEMA, clock)
            over = [100 * ((h / s if rate else s / h) - 1) for h, s in zip(hw, sc)]
            medians[name, clock] = statistics.median(over)
            print(f"{name:38} {_spread(hw, '.0f'):>18} {_spread(sc, '.0f'):>18} "
                  f"{_spread(over, '+.1f'):>22}")
    print()
    print(f"campaign: {args.examples} examples per stream, seeds {args.seed}.."
          f"{args.seed + args.repeats - 1}; pipeline: best of {args.passes} passes over "
          f"{summary[HARD_WIRED]['scenarios']} fixed scenarios (drawn at {HARD_WIRED})")
    for rev in (HARD_WIRED, SCHEMA):
        c, p = campaigns[rev][0], summary[rev]
        print(f"{LABELS[rev]:>12} ({rev}): campaign ran {c['in']}+{c['out']} examples, "
              f"{c['findings']} findings ({c['errors']} errors); fixed list: "
              f"{p['in_contract']} in contract, {p['with_findings']} with findings "
              f"({p['error_findings']} errors), invariants {', '.join(p['invariants']) or '-'}")
    camp, pipe = "campaign, examples/s", "pipeline evaluate(), us/example"
    print(f"\noverhead of the schema layer (median, wall / CPU): campaign "
          f"{medians[camp, 'wall']:+.1f}% / {medians[camp, 'cpu']:+.1f}%, per-example pipeline "
          f"{medians[pipe, 'wall']:+.1f}% / {medians[pipe, 'cpu']:+.1f}% (goal: under 10%)")
    print(f"whole run {wall:.0f} s. Command: python benchmarks/bench_schema_layer.py "
          f"--repeats {args.repeats} --examples {args.examples} --scenarios {args.scenarios} "
          f"--passes {args.passes} --seed {args.seed}")


if __name__ == "__main__":
    main()
