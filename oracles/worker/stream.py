"""The batch stream: batches spread over pools, answered in order while workers run ahead."""

from __future__ import annotations

from collections import deque

from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.worker.blame import WorkerDied
from stagecheck.oracles.worker.pool import WorkerPool
from stagecheck.spec.observation import Observation

__all__ = ["stream_batches"]


def stream_batches(pools: list[WorkerPool], sides: list[int], batches, options: RunOptions,
                   backend: str = "fast", sample_every: int = 0, depth: int = 2):
    """Answers to ``batches`` (an iterable of ``[(index, scenario), ...]``), in order,
    one iterable of ``(index, observations)`` per batch, while the workers already run
    the next ones.

    Batch ``j`` goes to ``pools[j % len(pools)]``; each worker has up to ``depth``
    batches in hand, so it never waits for the checker, and the checker reads the
    answers in the order the batches were drawn. Every answer depends only on its
    batch: the results are those of one worker, whatever the number of pools. Closing
    the generator early waits for the batches still in hand (and drops their answers),
    so each worker is idle and in step again afterwards; once an answer ended with a
    call that hung or ended its process, it ends their workers instead (the next
    request starts a fresh one), since each batch in hand may cost another deadline. An answer ends with an example
    whose call hung or ended its process: a search stops there in contract (it is an
    error), and a target that ends every call would otherwise cost a new worker per
    example of the batch.
    """
    batches = iter(batches)
    pending: deque = deque()       # (pool, payload), in the order posted
    posted = 0

    def fill() -> None:
        nonlocal posted
        while len(pending) < depth * len(pools):
            batch = next(batches, None)
            if batch is None:
                return
            pool = pools[posted % len(pools)]
            payload = (sides, list(batch), options, backend, sample_every)
            pool.post(payload)
            pending.append((pool, payload))
            posted += 1

    stopped = False            # an answer ended with a call that hung or ended its process
    try:
        fill()
        while pending:
            pool, payload = pending[0]
            answer = _next_answer(pending)
            if _ends_stopped(answer):
                stopped = True
                rest = _unanswered(payload, answer)
                if rest:        # the examples after the call that stopped: asked again
                    again = (payload[0], rest, *payload[2:])
                    pool.post(again)
                    pending.append((pool, again))
            fill()
            yield _pumping(answer, [pool for pool, _ in pending])
    finally:
        if stopped:
            # the batches in hand are of a target that hangs (or ends its process): each
            # may cost another deadline before its answer comes, for nothing. Their
            # workers are ended instead; the next request starts a fresh one
            for pool in {id(pool): pool for pool, _ in pending}.values():
                pool.discard()
            pending.clear()
        lost = None     # a worker that ended between calls: no verdict (``blame.py``)
        while pending:
            pool = pending[0][0]
            try:
                _next_answer(pending)     # dropped answers
            except Exception as exc:    # its worker is beyond use: the next request starts one
                lost = lost or (exc if isinstance(exc, WorkerDied) else None)
                pool.discard()
                for k in range(len(pending) - 1, -1, -1):
                    if pending[k][0] is pool:
                        del pending[k]
        if lost is not None:
            raise lost


def _pumping(answer: list, pools: list[WorkerPool]):
    """The items of ``answer``; before each, the pipes of the batches still in hand move
    what they can without waiting (``WorkerPool.pump``): while the checker judges, its
    workers get the rest of their requests and write their answers, instead of waiting
    for the checker's next wait. A pipe holds 1 MiB where the system lets it be widened
    (64 KiB elsewhere); each worker has two batches in hand, of up to ``BATCH_SLOTS``
    slots each (about 90 KB of request and 48 KB of answer per 1,024 slots)."""
    for item in answer:
        for pool in pools:
            pool.pump()
        yield item


def _unanswered(payload: tuple, answer: list) -> list:
    """The examples of ``payload``'s batch that ``answer`` (cut short by a call that hung
    or ended its process) holds no observations of."""
    answered = {index for index, _ in answer}
    return [(index, s) for index, s in payload[1] if index not in answered]


def _ends_stopped(answer: list) -> bool:
    """Whether ``answer`` ends with an example whose call hung or ended its process."""
    return bool(answer) and any(o.timed_out or o.crashed is not None for o in answer[-1][1])


def _next_answer(pending) -> list[tuple[int, list[Observation]]]:
    """The answer to the oldest pending batch; a worker restarted on the way gets the
    batches its old process had in hand again."""
    pool, payload = pending.popleft()
    restarts = pool.restarts
    answer = pool.collect(payload)
    if pool.restarts != restarts:
        for other, again in pending:
            if other is pool:
                pool.post(again)
    return answer
