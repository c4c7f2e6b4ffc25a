"""The cleanup of ``mamba_state_idx``, shared by the schemas whose staging does it.

Before it stages, the engine drops from ``mamba_state_idx`` every request that
finished, was preempted (the scheduler's preempted set may be None: no preemption this
step) or resumed. Both schemas that stage after this cleanup (``mamba_all_specdec``,
``mamba_preprocess_fused``) declare these inputs and read them the same way.
"""

from __future__ import annotations

from stagecheck.spec.schema import FLAG, ID_SET, Input

__all__ = ["CLEANED", "CLEANUP_INPUTS", "dropped", "tidy"]

#: the three id sets the cleanup removes from ``mamba_state_idx``
CLEANED = ("finished_req_ids", "preempted_req_ids", "resumed_req_ids")

#: the inputs the cleanup reads: the three id sets, and whether the preempted one is None
CLEANUP_INPUTS = (
    Input("finished_req_ids", kind=ID_SET, doc="scheduler_output.finished_req_ids"),
    Input("preempted_req_ids", kind=ID_SET,
          doc="scheduler_output.preempted_req_ids (empty when preempted_is_none)"),
    Input("preempted_is_none", kind=FLAG, default=False,
          doc="scheduler_output.preempted_req_ids is None (no preemption this step)"),
    Input("resumed_req_ids", kind=ID_SET,
          doc="scheduler_output.scheduled_cached_reqs.resumed_req_ids"),
)


def dropped(s) -> set[str]:
    """The ids the cleanup removes from ``mamba_state_idx`` on scenario ``s``."""
    out = set(s.inputs["finished_req_ids"]) | set(s.inputs["resumed_req_ids"])
    if not s.inputs["preempted_is_none"]:
        out |= set(s.inputs["preempted_req_ids"])
    return out


def tidy(inputs: dict) -> None:
    """Each cleaned id set sorted without repeats, and no preempted ids where the set is
    None (a generate hook's last step)."""
    for name in CLEANED:
        inputs[name] = sorted(set(inputs[name]))
    if inputs["preempted_is_none"]:
        inputs["preempted_req_ids"] = []
