"""A single staging call is a protocol of one step.

``single_call(schema)`` is the protocol whose one step stages one scenario of a staging
schema (``spec/schema.py``): the scenario is the sequence's ``data["scenario"]``, drawn
from the schema's scenario space; the operation calls the target once on the schema's
inputs, its buffers on the device model; the schema's invariants judge the call, and two
targets are compared as ``stagecheck diff`` compares them. What ``stagecheck diff`` and
``stagecheck spec`` find on a scenario, this protocol finds on the same scenario.
"""

from __future__ import annotations

from stagecheck.spec.protocol import Operation, Protocol, StepSpace
from stagecheck.spec.schema import StagingSchema

__all__ = ["single_call"]


def _stage(ctx):
    return ctx.stage(ctx.sequence.data["scenario"])


def single_call(schema: StagingSchema, staging: str | None = None) -> Protocol:
    """The one-step protocol of ``schema``'s staging function; ``staging``: how a worker
    loads the schema again (a schema file's path; default: its name, a built-in's)."""
    return Protocol(
        name=f"single-call:{schema.name}",
        summary=f"one call of {', '.join(schema.functions)} on a scenario of schema "
                f"{schema.name!r}, judged by the schema's invariants",
        functions=schema.functions,
        build=lambda ctx: None,
        operations=(Operation("stage", _stage, doc="the staging call"),),
        space=StepSpace(steps=(1, 1)),
        staging=staging or schema.name,
    )
