"""The campaign's hypothesis stream (a mixin of the campaign's search): the hypothesis
engine's two streams, and the batched engine's bounded edge-case stream, with
hypothesis's own shrinking and example database.

hypothesis is imported only when a stream runs: a worker that explores symbolically
imports the campaign without it.
"""

from __future__ import annotations

from stagecheck.oracles import interrupt
from stagecheck.oracles._preload import preload_project_modules
from stagecheck.spec import ERROR, Finding, StagingScenario
from stagecheck.spec.space import SMALL

__all__ = ["HypothesisStream"]


class HypothesisStream:
    """The search's hypothesis stream (``_Search`` in ``oracles/campaign.py`` gives the
    runner, the judge, the collector and the shrinking)."""

    def hypothesis_stream(self, stream: str, examples: int, database, derandomize: bool,
                          engine: str) -> int:
        # hypothesis only for this stream: a worker that imports this module (the symbolic
        # exploration) runs without it
        from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings
        from hypothesis.errors import Flaky    # heavy: loaded with hypothesis itself
        preload_project_modules()     # hypothesis's constant pool: the same however run

        from stagecheck.oracles.generate import (out_of_contract_scenarios,  # hypothesis too
                                                 staging_scenarios)
        c = self.config
        strategy = (staging_scenarios(c.max_capacity, self.schema, c.max_drafts)
                    .map(lambda s: ("", s)) if stream == "in" else
                    out_of_contract_scenarios(c.max_capacity, self.schema, c.max_drafts))
        # examples drawn; and how many had been when the first error showed: hypothesis
        # then shrinks it, and its tries are no examples of the stream (was: "tried 207"
        # where 40 were drawn and 167 shrank the error)
        counter, drawn = [0], [None]

        class _StreamStopped(BaseException):
            """``stop_after_stopped``: the stream ends here."""

        class _ErrorFound(Exception):
            def __init__(self, found: list[Finding], scenario: StagingScenario) -> None:
                super().__init__()
                self.found, self.scenario = found, scenario

        class _LargeErrorFound(BaseException):
            """An error on a scenario larger than the small band: hypothesis's shrinker
            would redraw hundreds of requests per step, so it is not asked (a
            BaseException passes through it); the scenario shrinker takes it. So is an
            error of a call that hung or ended its process: hypothesis would replay it,
            a deadline each time."""

            def __init__(self, found: list[Finding], scenario: StagingScenario) -> None:
                super().__init__()
                self.found, self.scenario = found, scenario

        @settings(max_examples=examples, deadline=None, database=database,
                  suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                  derandomize=derandomize,
                  phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink))
        @hyp_seed(self.config.seed)
        @given(strategy)
        def probe(labeled):
            _, s = labeled
            counter[0] += 1
            self.examples += 1
            # a large example runs on the fast buffers (the instrumented ones cost ten
            # times as much per slot), and instrumented where it shows an error
            large = s.capacity > SMALL and self.backend() == "fast"
            findings = self.evaluate(s, backend="fast" if large else "instrumented",
                                     kernel=self.kernel_every)
            if large and any(f.severity == ERROR for f in findings) and not self.last_stopped:
                findings = self.evaluate(s, kernel=self.kernel_every) or findings
            stopped = self.last_stopped
            errors = self.record(findings, s, engine)
            interrupt.check()   # after every example (recorded): a signal stops the stream
            if errors:
                drawn[0] = counter[0] if drawn[0] is None else drawn[0]
                if stopped:
                    self.error_stopped.add(stopped)
                raise (_ErrorFound if s.capacity <= SMALL and not stopped
                       else _LargeErrorFound)(errors, s)
            self.tick(stream, counter[0], examples)
            if self.stop_after_stopped(stream, stopped, counter[0], examples):
                raise _StreamStopped()

        # one database key per (baseline, candidate, stream): campaigns never share examples
        probe.hypothesis.inner_test._hypothesis_internal_add_digest = repr(
            (self.result.baseline, self.result.candidate, stream, self.config.max_capacity,
             self.schema.name)).encode()
        try:
            probe()
        except _ErrorFound as found:   # the shrunk example, replayed by hypothesis, wins
            self.record(found.found, found.scenario, engine, final=True)
            self.shrink(found.scenario, found.found, engine)  # the smallest batch, too
        except _LargeErrorFound as found:
            self.shrink(found.scenario, found.found, engine)
        except _StreamStopped:         # what the stream recorded so far stays
            pass
        except interrupt.Interrupted:  # what the stream recorded so far stays
            pass
        except Flaky as exc:    # a call that hung or was killed, then passed when replayed:
            failed = _other_failure(exc, _ErrorFound)  # the finding the stream recorded
            if failed is not None:      # stays; anything else that failed once (stagecheck
                raise failed from None  # itself, broken by the code) is not a pass
        return counter[0] if drawn[0] is None else drawn[0]


def _other_failure(flaky: BaseException, found: type) -> BaseException | None:
    """The first exception that made hypothesis call the stream ``flaky`` other than a
    ``found`` error finding (which the stream recorded before raising it): hypothesis
    groups them in ``exceptions`` (``FlakyFailure``), or chains one as the cause."""
    for failure in list(getattr(flaky, "exceptions", None) or ()) + [flaky.__cause__]:
        if failure is not None and not isinstance(failure, found):
            return failure
    return None
