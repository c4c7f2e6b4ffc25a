"""The built-in staging protocols, and the choice of one by a target's name.

Four protocols of vLLM's GPU model runner (``docs/protocols.md``): the input-preparation
event (``input_prep_event``), the Mamba align staging step after step
(``mamba_align_steps``), a device-to-host copy read back on the next step
(``valid_count_readback``), and batch rows moved while their counts come back
(``condense_inflight_d2h``); and ``single_call(schema)``, a staging call as a protocol of
one step.
"""

from __future__ import annotations

from stagecheck.spec.protocol import Protocol
from stagecheck.spec.protocols import (condense_inflight_d2h, input_prep_event,
                                       mamba_align_steps, valid_count_readback)
from stagecheck.spec.protocols.single_call import single_call

__all__ = ["BUILTIN_PROTOCOLS", "protocol_for_function", "protocols_driving", "single_call"]

#: name -> protocol, in the order ``docs/protocols.md`` shows them
BUILTIN_PROTOCOLS: dict[str, Protocol] = {
    p.name: p for p in (input_prep_event.PROTOCOL, mamba_align_steps.PROTOCOL,
                        valid_count_readback.PROTOCOL, condense_inflight_d2h.PROTOCOL)
}


def protocol_for_function(name: str) -> Protocol | None:
    """The built-in protocol that drives a target called ``name`` (a function, a method
    ``Class.method`` or a class), if exactly one does."""
    parts = name.split(".")
    found = [p for p in BUILTIN_PROTOCOLS.values()
             if parts[-1] in p.functions or (len(parts) > 1 and parts[0] == p.component
                                            and parts[-1] in p.functions)]
    return found[0] if len(found) == 1 else None


def protocols_driving(name: str) -> list[str]:
    """The names of the built-in protocols that drive a target called ``name``: its last
    part one of their functions, or the class they build (``GPUModelRunner``)."""
    parts = name.split(".")
    return sorted(p.name for p in BUILTIN_PROTOCOLS.values()
                  if parts[-1] in p.functions or parts[-1] == p.component)
