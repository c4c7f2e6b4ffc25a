"""Protocols on the command line: ``diff``/``spec`` with a protocol, ``protocol list|check``,
and ``replay`` of a saved protocol finding.

``diff A B --protocol NAME|FILE`` and ``spec T --protocol NAME|FILE`` run the protocol
campaign (``oracles/protocol``: step sequences through both targets, judged, the first
error shrunk) instead of one staging call per example. Without ``--protocol`` the
protocol is chosen by the target's name where exactly one built-in protocol drives that
class or method and no staging schema describes it (``chosen_protocol``); the report and
stderr say so. An option a protocol run does not read is refused (exit 2), or said not to
apply where ``[tool.stagecheck]`` set it. The files: a replay file per finding, ``--json``;
then the text report with each finding's step table.

``protocol check FILE [TARGET]`` validates a protocol declaration: every problem on its own
line, naming the part, its value and the fix (exit 2); then a dry run of the step generator
(each operation's ``when``), and with a target a dry run of ``build``, the operations,
``observe`` and the checks on a few step sequences through it (a mistake of the protocol
there is a problem too; the code's findings are counted, not judged).
"""

from __future__ import annotations

import ast
import pathlib
import shlex
from dataclasses import dataclass, replace

from stagecheck.oracles import messages
from stagecheck.oracles.commands.base import (EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE,
                                              VERDICT_EXIT, Command, Outcome, file_named,
                                              schema_code_error, shim_option)
from stagecheck.oracles.commands.outputs import Outputs
from stagecheck.oracles.commands.progress import progress_of
from stagecheck.oracles.errors import SchemaError, StagecheckError, TargetLoadError, UsageError
from stagecheck.oracles.observe import require_device
from stagecheck.oracles.options import (OPTIONS, PROTOCOL_FIELDS, ProtocolConfig, ReplayConfig,
                                        flag_of, options_of)
from stagecheck.oracles.protocol import (check_protocol, load_protocol, protocol_for_target,
                                         protocol_spec, run_protocol_campaign)
from stagecheck.oracles.protocol.component import classes_in
from stagecheck.oracles.protocol.dry_run import dry_run
from stagecheck.oracles.protocol.problems import CHECK_SEQUENCES, dry_run_problems, unchosen
from stagecheck.oracles.protocol.ran import never_ran_lines
from stagecheck.oracles.report.escape import escape
from stagecheck.oracles.report.finding_text import alike
from stagecheck.oracles.report.protocol_json import render_protocol_json
from stagecheck.oracles.report.protocol_replay import (load_protocol_replay, replay_protocol,
                                                       save_protocol_findings)
from stagecheck.oracles.report.protocol_text import (protocol_finding_lines, render_protocol,
                                                      sequence_table)
from stagecheck.oracles.report.replay import new_run_id, save_run, untrusted_parts
from stagecheck.oracles.report.text import replay_verdict, verdict_said
from stagecheck.oracles.stdio import note, shown
from stagecheck.oracles.targets import is_file_spec, trusted_path
from stagecheck.oracles.text import closest, did_you_mean
from stagecheck.spec.protocol import Protocol
from stagecheck.spec.protocols import BUILTIN_PROTOCOLS, protocols_driving
from stagecheck.spec.schema_mistakes import SchemaCodeFailed
from stagecheck.spec.schemas import schema_for_function

__all__ = ["COMMANDS", "ProtocolCampaignCommand", "ProtocolCommand", "chosen_protocol",
           "protocol_replay_flags",
           "replay_protocol_outcome"]

#: the options of diff/spec a protocol run reads besides PROTOCOL_FIELDS: how the verdict
#: reads and where the files go
_PRESENTATION = ("protocol", "strict", "json", "save_dir", "verbose", "color", "quiet",
                 "save_infos", "no_save")
#: the reports of diff/spec a protocol run does not write
_NOT_WRITTEN = ("junit_xml", "markdown")


def chosen_protocol(values: dict, baseline: str | None, candidate: str,
                    command: str | None = None) -> tuple[str | None, str | None]:
    """``(protocol spec, the name that chose it)``: ``--protocol`` when given; else the
    built-in protocol the targets' names imply (``protocol_for_target``) where no
    ``--schema`` was given and no staging schema describes the name (a staging function
    stays one call per example); ``(None, None)`` when none. A name several built-in
    protocols drive is a ``UsageError`` (said of ``command``'s argument, where given)."""
    if values.get("protocol"):
        return values["protocol"], None
    if values.get("schema"):
        return None, None
    found = {}
    for side, target in (("baseline", baseline), ("candidate", candidate)):
        if target is None:
            continue
        name = target.rsplit("::", 1)[-1] if "::" in target else target.rsplit(":", 1)[-1]
        protocol = protocol_for_target(target)
        if schema_for_function(name.split(".")[-1]) is not None:
            continue                # a staging function: one call per example
        if protocol is not None:
            found[side] = (protocol.name, name)
            continue
        driving = protocols_driving(name)
        if len(driving) > 1:
            error = UsageError.of(messages.PROTOCOL_TARGET_AMBIGUOUS, target, name=name,
                                  protocols=", ".join(driving))
            if command is not None:
                error.located("argument " + ("TARGET" if command == "spec" else side.upper()))
            raise error
    names = {p for p, _ in found.values()}
    if len(names) > 1:
        raise UsageError.of(messages.PROTOCOL_TARGETS_DISAGREE, baseline=found["baseline"][0],
                            candidate=found["candidate"][0])
    if not found:
        return None, None
    return next(iter(found.values()))


def _refuse_unread(command: str, values: dict, protocol: str,
                   from_config: set | frozenset = frozenset(), staging: bool = True) -> None:
    """A set option the protocol run does not read is exit 2 naming it, never ignored; one
    that ``[tool.stagecheck]`` set (for the project's one-call runs) is said not to apply.
    The options it names as read leave out ``--max-capacity`` unless the protocol is a
    one-call staging protocol (``staging``), the only kind that reads it."""
    reads = set(PROTOCOL_FIELDS.values())
    for option in options_of(command):
        if option.action == "const" or option.name in reads or option.name in _PRESENTATION:
            continue
        value = values.get(option.field)
        if option.dest in from_config:
            if not values.get("quiet"):
                note("stagecheck: " + messages.PROTOCOL_CONFIG_UNUSED.format(
                    key=option.key or option.name, protocol=protocol))
            continue
        if option.name in _NOT_WRITTEN:
            if value:
                raise UsageError.of(messages.PROTOCOL_REPORT_UNSUPPORTED, value,
                                    flag=option.flag).located(f"option {option.flag}")
            continue
        default = option.default_value()
        if value is not None and value != default and not (value == () and default is None):
            switch = option.action in ("switch", "negated")
            read = ", ".join(OPTIONS[o].flag for o in PROTOCOL_FIELDS.values()
                             if staging or o != "max_capacity") + (
                " and the report options (" + ", ".join(
                    OPTIONS[o].flag for o in _PRESENTATION
                    if o in OPTIONS and OPTIONS[o].flag and o != "protocol") + ")")
            raise UsageError.of(messages.PROTOCOL_OPTION_UNUSED, "" if switch else value,
                                given=option.flag if switch else f"{option.flag} {value}",
                                flag=option.flag, protocol=protocol, reads=read
                                ).located(f"option {option.flag}")


def _refuse_bare_file(target: str | None, protocol: Protocol, argument: str) -> None:
    """A ``.py`` path given as a protocol run's target without ``::NAME`` is exit 2 saying
    to name the protocol's component class in it (the staging function, for a one-step
    protocol of a staging schema), never ``::FUNCTION`` where a class is meant."""
    if not isinstance(target, str) or not target.strip().endswith(".py") \
            or is_file_spec(target):
        return
    if protocol.component:      # the file's class closest to it, where it has no such one
        name = closest(protocol.component, classes_in(target)) or protocol.component
        what = f"component class {name}"
    else:
        functions = [f for f in protocol.functions if isinstance(f, str) and f]
        what, name = "staging function", functions[0] if functions else "FUNCTION"
    raise TargetLoadError.of(messages.PROTOCOL_TARGET_FILE, target, what=what,
                             protocol=protocol.name, name=name).located(f"argument {argument}")


def protocol_replay_flags(baseline: str | None, candidate: str, shims: tuple[str, ...],
                          protocol: str, anywhere: bool = False) -> str:
    """What the printed ``stagecheck replay FILE`` line must add to run as printed: the
    targets, shims and protocol file outside the repository (a replay file runs only
    code the user chose; ``anywhere``: every file, to run from any folder)."""
    file = protocol.rpartition(":")[0] if ".py:" in protocol else protocol
    parts, top = untrusted_parts({"baseline": baseline, "candidate": candidate,
                                  "shims": list(shims)}, anywhere)
    if file.endswith(".py") and not trusted_path(file, top):   # as replay's check_trusted
        parts["schema"] = file
    words = []
    if "baseline" in parts or "candidate" in parts:
        if baseline is not None:
            words += [flag_of("replay", "baseline"), baseline]
        words += [flag_of("replay", "candidate"), candidate]
    for s in shims if "shims" in parts else ():
        words += [flag_of("replay", "shims"), s]
    if "schema" in parts:
        words += [flag_of("replay", "protocol"), protocol]
    return "".join(" " + shlex.quote(w) for w in words)


@dataclass(frozen=True)
class ProtocolRun:
    """``diff``/``spec`` with a protocol: the targets, the protocol (and the name that
    chose it, when the target's name did), the config, ``--strict``."""

    baseline: str | None
    candidate: str
    spec: str
    protocol: Protocol
    config: ProtocolConfig
    strict: bool
    chosen_by: str | None
    save: bool = True           # --no-save: no replay file
    save_infos: bool = False    # --save-infos: info findings saved too


class ProtocolCampaignCommand(Command):
    """``diff``/``spec`` with a protocol (``campaign.CampaignCommand`` hands over)."""

    reports = ("json",)
    colored = True

    def __init__(self, name: str) -> None:
        self.name = name

    def configure(self, args, values: dict) -> ProtocolRun:
        baseline = args.baseline if self.name == "diff" else None
        candidate = args.candidate if self.name == "diff" else args.target
        spec, chosen_by = chosen_protocol(values, baseline, candidate, self.name)
        config = ProtocolConfig.from_values(values)
        require_device(config.device)
        try:
            protocol = load_protocol(spec)
        except StagecheckError as exc:
            raise exc.located("option --protocol" if chosen_by is None
                              else "argument " + ("CANDIDATE" if baseline else "TARGET")
                              ) from None
        for target, argument in ((baseline, "BASELINE"),
                                 (candidate, "CANDIDATE" if baseline else "TARGET")):
            _refuse_bare_file(target, protocol, argument)
        from_config = getattr(args, "from_config", frozenset())
        _refuse_unread(self.name, values, spec, from_config, protocol.staging)
        if values.get("max_capacity") is not None and not protocol.staging:
            if "max_capacity" not in from_config:
                low, high = protocol.space.capacity
                raise UsageError.of(messages.PROTOCOL_CAPACITY_UNUSED, values["max_capacity"],
                                    protocol=protocol.name, low=low, high=high
                                    ).located("option --max-capacity")
            if not values.get("quiet"):       # the project's setting for one-call runs
                note("stagecheck: " + messages.PROTOCOL_CONFIG_UNUSED.format(
                    key="max-capacity", protocol=spec))
            config = replace(config, max_capacity=ProtocolConfig.max_capacity)
        if chosen_by is not None and not values.get("quiet"):
            note("stagecheck: " + messages.PROTOCOL_CHOSEN.format(protocol=spec, name=chosen_by))
        if not values.get("quiet"):
            for target in (baseline, candidate):
                said = component_note(protocol, target)
                if said:
                    note("stagecheck: note: " + said)
        return ProtocolRun(baseline, candidate, spec, protocol, config,
                           values.get("strict", False), chosen_by, not values.get("no_save"),
                           bool(values.get("save_infos")))

    def run(self, run: ProtocolRun, values: dict, outputs: Outputs) -> Outcome:
        progress = progress_of(values, f"{self.name} --protocol {run.protocol.name}",
                               "sequences", run.config.sequences, counters=("findings",))
        arguments = (["BASELINE"] if run.baseline else []) + \
            ["CANDIDATE" if run.baseline else "TARGET"]
        try:
            result = run_protocol_campaign(run.baseline, run.candidate, run.protocol,
                                           run.config, progress.update if progress else None)
            if progress:       # the last line says where the run ended, shrinking included
                progress.update(result.sequences_run, findings=len(result.findings))
        except StagecheckError as exc:
            index = getattr(exc, "target_index", None)
            if index is None and isinstance(exc, SchemaError):   # the protocol's own code
                raise exc.located("option --protocol") from None
            raise exc.located(shim_option(exc) or (f"argument {arguments[index]}"
                                                   if index is not None else "arguments")
                              ) from None
        finally:
            if progress:
                progress.close()
        spec = protocol_spec(run.protocol)
        verdict = "interrupted" if result.interrupted else result.verdict(run.strict)
        saved, manifest = {}, None   # every error finding is saved (never lost), infos
        if run.save:                 # with --save-infos; as every run keeps them
            saved, manifest = outputs.attempt("--save-dir", outputs.save_dir, lambda: save_run(
                result, outputs.save_dir, new_run_id(), self.name,
                {"baseline": run.baseline, "candidate": run.candidate, "protocol": spec},
                verdict, infos=run.save_infos, write=lambda kept: save_protocol_findings(
                    result, outputs.save_dir, spec, run.config.shims, kept))) or ({}, None)
        files = {"--json": lambda: render_protocol_json(result, saved, run.strict)}
        if result.interrupted:
            where = ", ".join(shown(p) for p in saved.values())
            return Outcome(verdict, 0, result, files, interrupted=(
                result.sequences_run, result.findings, "step sequence(s)",
                f"; saved: {where}" if where else ""))
        flags = protocol_replay_flags(run.baseline, run.candidate, run.config.shims, spec)
        lines = {k: shown(v) + flags for k, v in saved.items()}
        text = render_protocol(result, lines, strict=run.strict)
        if run.chosen_by is not None:
            text = messages.PROTOCOL_CHOSEN.format(protocol=run.spec, name=run.chosen_by) + \
                "\n" + text
        if manifest:
            # after a blank line, as the one-call report has it: a pytest test printed last
            # is copied to the end of the output without it (was: a SyntaxError)
            text += "\n\n" + messages.MANIFEST_LINE.format(count=len(saved),
                                                          path=shown(manifest))
        unsaved = sum(1 for f in result.findings if f.severity != "error" and f.id not in saved)
        notes = (messages.INFOS_NOT_SAVED.format(count=unsaved),) if unsaved and run.save \
            else ()
        return Outcome(verdict, VERDICT_EXIT[verdict], result, files, text, notes=notes,
                       said=verdict_said(result, run.strict, protocol=True))


def replay_protocol_outcome(config: ReplayConfig) -> Outcome:
    """``replay`` of a saved protocol finding: its shortest step sequence run again through
    the saved targets (or those given); exit 1 while it still shows an error finding."""
    try:
        saved, _ = load_protocol_replay(config.file)
    except StagecheckError as exc:
        raise exc.located("argument FILE") from None
    base = config.baseline or saved.get("baseline")
    cand = config.candidate or saved.get("candidate")
    sides = (["--baseline"] if base else []) + ["--candidate"]
    try:        # no CUDA here: exit 2 as spec says it, before a worker tries it
        require_device(config.device or saved.get("device") or "cpu")
    except StagecheckError as exc:
        raise exc.located("option --device" if config.device
                          else "argument FILE (its field 'device')") from None
    try:
        findings = replay_protocol(config.file, config.baseline, config.candidate,
                                   config.protocol, config.device, config.shims)
    except StagecheckError as exc:
        index = getattr(exc, "target_index", None)
        if config.protocol and repr(config.protocol) in getattr(exc, "problem", ""):
            exc.where = "option --protocol"          # the file the user gave, not FILE
            raise exc from None
        given = index is not None and getattr(config, sides[index][2:]) is not None
        raise exc.located(shim_option(exc, None if config.shims else "argument FILE") or (
            "argument FILE" if index is None else f"argument {sides[index]}" if given else
            f"the {sides[index][2:]} target (give another with {sides[index]})")) from None
    errors = [f for f in findings if f.severity == "error"]
    before = saved["finding"]
    what = f"{base} vs {cand}" if base else str(cand)
    lines = [f"replay of {escape(shown(config.file))}: protocol "
             f"{escape(str(config.protocol or saved.get('protocol')))}, {escape(what)} on "
             f"{escape(str(config.device or saved.get('device', 'cpu')))}",
             f"saved finding: [{escape(str(before.get('id')))}] "
             f"{escape(str(before.get('message')))}"]
    lines.append(replay_verdict(len(errors), not base, "step sequence", protocol=True))
    if base and alike(errors, exact=True):
        lines.append(messages.BOTH_VIOLATE_PROTOCOL_ALIKE)
    for f in sorted(errors, key=lambda f: f.id != before.get("id")):   # the saved one first
        head, *rest = protocol_finding_lines(f, table=False)
        lines += [head + (" (the saved finding)" if f.id == before.get("id") else ""), *rest]
    again = [f for f in findings if f.id == before.get("id") and f.severity != "error"]
    for f in again:                 # the saved info finding, as it shows now
        lines += protocol_finding_lines(f)
    shown_by = errors[:1] or again[:1]
    if shown_by:                    # the sequence replayed, and the run that showed it
        lines += ["  shown by:", *("    " + row for row in sequence_table(shown_by[0]))]
    if before.get("severity") != "error":     # an info finding's file: does it still show?
        lines.append(messages.REPLAY_INFO_STILL.format(id=before.get("id"))
                     if again else messages.REPLAY_INFO_GONE.format(id=before.get("id")))
    return Outcome("different" if errors else "equivalent",
                   EXIT_FINDINGS if errors else EXIT_CLEAN, findings, text="\n".join(lines))


class ProtocolCommand(Command):
    """``protocol list`` and ``protocol check NAME|FILE``."""

    name = "protocol"

    def configure(self, args, values: dict):
        what = getattr(args, "protocol_command", None) or "list"
        if what == "list":
            return what, None, None, None, ()
        target = getattr(args, "target", None)
        try:        # the declaration as it is: 'check' lists every problem itself
            protocol = load_protocol(args.protocol, checked=False)
        except StagecheckError as exc:
            raise exc.located("argument PROTOCOL") from None
        if target is not None and isinstance(protocol, Protocol):
            _refuse_bare_file(target, protocol, "TARGET")
        shims = tuple(values.get("shims") or ())
        if target is None and shims:
            raise UsageError.of(messages.PROTOCOL_CHECK_SHIM_UNUSED, shims[0],
                                protocol=shlex.quote(args.protocol)).located("option --shim")
        return what, protocol, args.protocol, target, shims

    def run(self, config, values: dict, outputs: Outputs) -> Outcome:
        what, protocol, where, target, shims = config
        if what == "list":
            return Outcome("listed", EXIT_CLEAN, text="\n".join(
                f"{name}: {', '.join(p.functions)} — {p.summary}"
                for name, p in BUILTIN_PROTOCOLS.items()))
        name = protocol.name if isinstance(protocol, Protocol) else where
        problems = check_protocol(protocol)     # every problem, then what a dry run shows
        if isinstance(protocol, Protocol):
            problems += [p for p in dry_run_problems(protocol) if p not in problems]
        ran = None
        if not problems and target is not None:
            try:
                ran = dry_run(where, target, shims)
            except (SchemaError, SchemaCodeFailed) as exc:   # the protocol's mistake, run
                if getattr(exc, "target_index", None) is not None:
                    raise exc.located("argument TARGET") from None
                if getattr(exc, "fix", None) == messages.PROTOCOL_CODE_RAISED[1]:
                    exc.fix = messages.PROTOCOL_CODE_RAISED_CHECK_FIX   # not this command again
                said = schema_code_error(exc, {"protocol": where}) if isinstance(
                    exc, SchemaCodeFailed) else file_named(exc, {"protocol": where})
                problems.append(_unprefixed(str(said), name))
            except StagecheckError as exc:
                raise exc.located(shim_option(exc) or "argument TARGET") from None
        if problems:
            for problem in problems:
                note("stagecheck: error: " + messages.PROTOCOL_CHECK_PROBLEM.format(
                    name=name, where=where, problem=problem))
            note("stagecheck: error: " + messages.PROTOCOL_CHECK_FAILED.format(
                name=name, where=where, count=len(problems)))
            return Outcome("problems", EXIT_USAGE, problems)
        lines = _summary(protocol, where, target, shims)
        if ran is None:
            lines.insert(1, messages.PROTOCOL_CHECK_NOT_RUN.format(
                where=shlex.quote(where), component=protocol.component or "Class",
                parts=_listed(["build", "the operations' run"]
                              + ["observe"] * bool(protocol.observe))))
        else:
            lines.insert(1, messages.PROTOCOL_CHECK_DRY_RUN.format(
                target=target, count=ran.sequences_run,
                parts=_listed(["build", "every operation"] + ["observe"] * bool(protocol.observe)
                              + ["the protocol's checks"] * bool(protocol.checks))))
            if ran.findings:
                lines.insert(2, messages.PROTOCOL_CHECK_DRY_FINDINGS.format(
                    count=len(ran.findings), target=shlex.quote(target),
                    where=shlex.quote(where)))
        at = 2 + bool(ran is not None and ran.findings)   # what no sequence ran: a warning
        lines[at:at] = ["  " + escape(w) for w in never_ran_lines(
            unchosen(protocol) if ran is None else ran.never_ran, "of the dry run",
            messages.PROTOCOL_NEVER_REACHED_CHECK)]
        return Outcome("checked", EXIT_CLEAN, protocol, text="\n".join(lines))


def _unprefixed(problem: str, name: str) -> str:
    """A dry run's error without the ``protocol 'NAME'`` it starts with: the problem line
    (``PROTOCOL_CHECK_PROBLEM``) names the protocol already."""
    for head in (f"protocol {name!r}: ", f"protocol {name!r} "):
        if problem.startswith(head):
            return problem[len(head):]
    return problem


def _listed(parts: list[str]) -> str:
    """``a, b and c``: the parts of a protocol a dry run ran (those it declares)."""
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def component_note(protocol: Protocol, target: str | None) -> str | None:
    """A note when ``target`` (``FILE::Class``) drives a class other than the protocol's
    ``component`` and its file has no module-level class of that name (a misspelt
    ``component``, which the target's class silently overrides)."""
    if not target or not protocol.component or "::" not in target:
        return None
    path, _, name = target.rpartition("::")
    if name == protocol.component or not is_file_spec(target):
        return None
    try:
        tree = ast.parse(pathlib.Path(path).read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None
    classes = sorted(n.name for n in tree.body if isinstance(n, ast.ClassDef))
    if name not in classes or protocol.component in classes:
        return None
    return messages.PROTOCOL_COMPONENT_ABSENT.format(
        component=protocol.component, path=path, target=name,
        guess=did_you_mean(protocol.component, classes))


def _summary(protocol: Protocol, where: str, target: str | None = None,
             shims: tuple[str, ...] = ()) -> list[str]:
    # what the protocol file wrote (names, summary, parameters) is escaped as a report's
    # text is: a name holding a newline or a terminal escape shows as written, inert
    space = protocol.space
    lines = [messages.PROTOCOL_CHECK_OK.format(name=escape(protocol.name), where=escape(where),
                                               count=CHECK_SEQUENCES),
             f"  summary: {escape(protocol.summary)}",
             f"  drives: {escape(', '.join(protocol.functions))}"
             + (f" (component {escape(protocol.component)})" if protocol.component else ""),
             *(["  note: " + said] if (said := component_note(protocol, target)) else []),
             "  one step: " + " -> ".join(escape(op.name) for op in protocol.operations)]
    if protocol.staging:
        lines.append(f"  one staging call of schema {protocol.staging} per sequence")
    else:
        lines.append(f"  steps per sequence {space.steps[0]}..{space.steps[1]}, batch of "
                     f"{space.capacity[0]}..{space.capacity[1]} request(s), drafts up to "
                     f"{space.max_drafts}, dummy steps {'on' if space.dummy else 'off'}, "
                     f"preemption {'on' if space.preemption else 'off'}, prompts up to "
                     f"{space.max_prompt} token(s), temperatures "
                     f"{', '.join(f'{t:g}' for t in space.temperatures)}"
                     + "".join(f", {escape(name)} in {escape(', '.join(map(repr, values)))}"
                               for name, values in space.params.items()))
    if protocol.device_work:
        lines.append(f"  device work: {escape(', '.join(protocol.device_work))}")
    if protocol.checks:
        lines.append("  its own checks: " + ", ".join(c.id for c in protocol.checks))
    target = shlex.quote(target) if target else \
        f"path/to/component.py::{protocol.component or 'function'}"
    lines.append(f"  run it: stagecheck spec {target} --protocol {shlex.quote(where)}"
                 + "".join(f" --shim {shlex.quote(shown(s))}" for s in shims))
    return lines


COMMANDS = {"diff": ProtocolCampaignCommand("diff"), "spec": ProtocolCampaignCommand("spec"),
            "protocol": ProtocolCommand()}
