"""An inputs-only staging step: it stages no buffer, it only forgets the running-state
column of every request the scheduler says has left (finished or preempted). The
scheduler's ``preempted_req_ids`` is None on a step that preempted nothing."""


def forget_finished(scheduler_output, state_columns, req_ids, num_reqs):
    """Drop the entry of every finished or preempted request from ``state_columns``
    (absent ids are fine); the live batch is left alone."""
    gone = set(scheduler_output.finished_req_ids)
    gone |= scheduler_output.preempted_req_ids or set()
    for req_id in gone:
        state_columns.pop(req_id, None)


def planted_keeps_preempted(scheduler_output, state_columns, req_ids, num_reqs):
    """Planted bug: preempted requests keep their column."""
    for req_id in scheduler_output.finished_req_ids:
        state_columns.pop(req_id, None)


def planted_iterates_none(scheduler_output, state_columns, req_ids, num_reqs):
    """Planted bug: iterates ``preempted_req_ids`` without the None case."""
    for req_id in scheduler_output.finished_req_ids:
        state_columns.pop(req_id, None)
    for req_id in scheduler_output.preempted_req_ids:
        state_columns.pop(req_id, None)


def planted_clears_live(scheduler_output, state_columns, req_ids, num_reqs):
    """Planted bug: also forgets the first live request."""
    forget_finished(scheduler_output, state_columns, req_ids, num_reqs)
    if num_reqs:
        state_columns.pop(req_ids[0], None)
