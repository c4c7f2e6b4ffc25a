"""The campaign's kernel-impact probe (a mixin of the campaign's search): after the
search, each kept finding's scenario through the kernel oracle, and for an error finding
not yet seen to reach the kernel, the other examples that showed it, then new ones.
"""

from __future__ import annotations

from stagecheck.oracles import interrupt
from stagecheck.spec import ERROR, StagingScenario

__all__ = ["IMPACT_PROBE_EXAMPLES", "KernelImpactProbe"]

#: examples the kernel-impact probe draws at most after the search
IMPACT_PROBE_EXAMPLES = 60


class KernelImpactProbe:
    """The search's kernel-impact probe (``_Search`` in ``oracles/campaign.py`` gives the
    runner, the judge, the collector and the shrinking)."""

    def kernel_impact(self) -> None:
        """Run each kept finding's scenario through the kernel oracle; for an error finding
        not seen to reach the kernel, the other examples that showed it, then new ones."""
        if self.config.run.kernel == "off" or self.schema.consumer is None:
            return
        with self.doing_now("kernel impact"):
            self._kernel_impact()

    def _kernel_impact(self) -> None:
        judged: dict[str, list] = {}    # scenario (JSON) -> its findings with the kernel's

        def judge(s: StagingScenario) -> list:
            """The example's findings with the kernel oracle's verdict, run once per
            example (findings of one example, and errors sharing witnesses, share it)."""
            text = s.to_json()
            if text not in judged:
                judged[text] = self.evaluate(s, kernel=True)
            return judged[text]

        for f in self.collector.findings():
            if interrupt.requested():
                return
            if f.key in self.stopped_keys:
                continue       # a call that hung or ended its process staged nothing
            if f.kernel_impact is None and f.scenario is not None:
                s = StagingScenario.from_dict(f.scenario)
                self.collector.note_impact(g for g in judge(s) if g.key == f.key)
        pending = self.collector.open_impact() - self.stopped_keys
        for key in [f.key for f in self.collector.findings() if f.key in pending]:
            for s in self.collector.witnesses(key):       # other examples that showed it
                if key not in self.collector.open_impact() or interrupt.requested():
                    break
                self.collector.note_impact(g for g in judge(s) if g.key == key)
        open_keys = self.collector.open_impact() - self.stopped_keys
        for index in range(IMPACT_PROBE_EXAMPLES):
            if not open_keys & self.collector.open_impact() or interrupt.requested():
                break
            s = self.scenario("in", self.config.examples + index)
            found = self.evaluate(s, backend=self.backend(), kernel=True)
            if self.last_stopped:     # a target that hangs: each more costs a deadline
                break
            self.collector.note_impact(f for f in found if f.key in open_keys)
            # a difference the search did not keep (it stops at its first error) that
            # reaches the kernel is a finding too: the stream's first error may not
            reaching = [f for f in found if f.severity == ERROR and f.kernel_impact
                        and f.key not in self.collector]
            if reaching:      # kept, then shrunk as a stream's first error is
                self.record(reaching, s, "impact probe")
                self.shrink(s, reaching)
