"""``schema list|show|check``: the built-in staging schemas, what one declares, a schema
file checked with the scenario space it induces. Nothing is written but the report;
problems go to stderr."""

from __future__ import annotations

from stagecheck.oracles.commands.base import EXIT_CLEAN, EXIT_USAGE, Command, Outcome, schema_of
from stagecheck.oracles.stdio import note
from stagecheck.oracles.commands.outputs import Outputs
from stagecheck.oracles.schemas import check_schema, schema_space
from stagecheck.spec.prose import render_schema
from stagecheck.spec.schemas import BUILTIN_SCHEMAS

__all__ = ["COMMANDS", "SchemaCommand"]


class SchemaCommand(Command):
    name = "schema"

    def configure(self, args, values: dict):
        what = args.schema_command or "list"
        if what == "list":
            return what, None
        # 'check' lists every problem itself; a schema with problems is no use elsewhere
        return what, schema_of(args.schema, "argument SCHEMA", checked=what != "check")

    def run(self, config, values: dict, outputs: Outputs) -> Outcome:
        what, schema = config
        if what == "list":
            return Outcome("listed", EXIT_CLEAN, text="\n".join(
                f"{name}: {', '.join(s.functions)} — {s.summary}"
                for name, s in BUILTIN_SCHEMAS.items()))
        if what == "check":
            problems = check_schema(schema)
            if problems:
                for problem in problems:
                    note(f"stagecheck: error: schema {schema.name!r}: {problem}")
                return Outcome("problems", EXIT_USAGE, problems)
        lines = list(render_schema(schema))
        if what == "check":
            space = schema_space(schema)
            lines.append(f"\nschema {schema.name!r}: the declarations and a dry run on 30 "
                         "drawn scenarios are fine.")
            lines.append(f"scenario space over {space['scenarios']} drawn in-contract "
                         "scenarios:")
            for key, value in space.items():
                if key not in ("scenarios", "out-of-contract breaches"):
                    lines.append(f"  {key}: {value}")
            lines.append("out-of-contract stream, breaches drawn:")
            for key, value in space["out-of-contract breaches"].items():
                lines.append(f"  {key}: {value}")
        return Outcome("shown", EXIT_CLEAN, schema, text="\n".join(lines))


COMMANDS = {"schema": SchemaCommand()}
