"""The gate's steady-state phase: the node under the gate's everyday load, with no fault.

A candidate that misses its objectives with nothing broken fails users every minute,
whatever it does under a fault; one that is much slower than the config it replaces is a
regression even inside its objectives. So ``faultkit gate`` (:mod:`.gate`) sends the load
its scenarios run in the background (:func:`.load.gate_load_profile`) at the node for
``--steady-s`` seconds (:func:`run_steady_state`: a steady-state run of the experiment
runner, :mod:`faultkit.experiment.steady`, its evidence in ``steady/`` of the gate's
directory), three times in its order:

1. **current** — the config serving now, before the rollout, if the node is ready (if not,
   "not measured" with why: that is no failure of the candidate, only no baseline);
2. **candidate** — once it serves, before any fault, judged on the node's SLOs
   (:func:`.steady_judge.judge_steady_state`): a breach *or missing evidence* fails the
   gate there and no scenario runs;
3. **comparison** — after the scenarios passed: candidate vs current
   (:func:`.steady_judge.compare_steady_states`); a regression beyond the tolerance fails
   the gate.

The judge and the comparison are pure (:mod:`.steady_judge`); :func:`run_steady_state` and
:class:`SteadyPhase` act. Figures are client-side
(:class:`~faultkit.model.windows.WindowSLIs` of the requests that *arrived* in the window,
``slo.measure.window_slis``), each judged one with its 95 % interval
(:func:`samples_intervals`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from faultkit.experiment.speculation import SpeculationCheck
from faultkit.experiment.state import ExperimentState
from faultkit.experiment.steady import STEADY_SCENARIO, run_steady
from faultkit.gate.capability import (
    KV_RATIO_MIN,
    Capabilities,
    capability_regressions,
    context_limit_now,
    read_capabilities,
)
from faultkit.gate.load import describe_profile
from faultkit.gate.steady_judge import (
    ERROR_RATIO_SLACK,
    LATENCY_RATIO_MAX,
    LATENCY_SLACK_S,
    THROUGHPUT_RATIO_MIN,
    FigureChange,
    borderline_checks,
    compare_steady_states,
    judge_steady_state,
)
from faultkit.inventory import Inventory, Node
from faultkit.load.profile import BACKGROUND_PROFILE, LoadProfile
from faultkit.model.records import RequestRecord
from faultkit.model.windows import WindowSLIs
from faultkit.probes.health import probe
from faultkit.rundir import RunDir
from slo.samples import WindowSamples, pooled_samples, samples_slis, window_samples
from slo.uncertainty import Interval, percentile_interval, wilson_interval
from slo.verdict import Verdict

__all__ = [
    "DEFAULT_STEADY_S",
    "SteadyPhase",
    "SteadyState",
    "run_steady_state",
]

#: ``--steady-s`` default: at the background rate (10 req/s) about 300 requests per window,
#: so the p95 rests on ~15 requests above it, not on one or two.
DEFAULT_STEADY_S = 30.0

@dataclass(frozen=True)
class SteadyState:
    """One steady-state window of one config: its client-side SLIs and what the load
    client could not vouch for (``gaps``: each makes the window INCONCLUSIVE)."""

    config: str | None
    slis: WindowSLIs
    #: open-loop sends later than the generator's lateness bound (the client fell behind)
    late_sends: int = 0
    gaps: tuple[str, ...] = ()
    #: 95 % intervals of the judged figures, by WindowSLIs field (:func:`samples_intervals`)
    intervals: Mapping[str, Interval] = field(default_factory=dict)
    #: the steady-state run's directory (its ledger, timeline, series, container evidence)
    run_dir: Path | None = None
    #: the requests behind the figures (kept in memory for pooling, not written)
    samples: WindowSamples | None = field(default=None, repr=False, compare=False)
    #: the seconds of load the figures cover (two windows pooled: both)
    span_s: float | None = None
    #: a borderline window measured again: the first window alone, and why it was rerun
    first_window: SteadyState | None = None
    rerun_why: str = ""

    def line(self) -> str:
        """``301 requests, TTFT p95 0.081 s, E2E p95 0.520 s, error ratio 0.000, 240.0
        output tokens/s`` (``—`` for a figure that is missing)."""
        s = self.slis

        def fmt(value: float | None, pattern: str) -> str:
            return "—" if value is None else pattern.format(value)

        return (f"{s.requests} requests, TTFT p95 {fmt(s.ttft_p95_s, '{:.3f} s')}, "
                f"E2E p95 {fmt(s.e2e_p95_s, '{:.3f} s')}, "
                f"error ratio {fmt(s.error_ratio, '{:.3f}')}, "
                f"{fmt(s.output_tokens_per_s, '{:.1f}')} output tokens/s")

    def to_json(self) -> dict[str, Any]:
        out = {"config": self.config, "measured": True, "slis": self.slis.to_json(),
               "late_sends": self.late_sends, "gaps": list(self.gaps),
               "intervals": {k: list(v) for k, v in self.intervals.items()},
               "run_dir": None if self.run_dir is None else str(self.run_dir)}
        if self.first_window is not None:
            out["rerun"] = {"why": self.rerun_why, "first_window": self.first_window.to_json()}
        return out

    @classmethod
    def of_window(cls, config: str | None, records: Sequence[RequestRecord], start: float,
                  end: float, *, late_sends: int = 0, gaps: Sequence[str] = (),
                  run_dir: Path | None = None) -> SteadyState:
        """The steady state of the requests that arrived in ``[start, end)``."""
        samples = window_samples(records, start, end)
        return cls(config, samples_slis(samples, start, end), late_sends, tuple(gaps),
                   samples_intervals(samples), run_dir, samples, end - start)

    def pooled_with(self, second: SteadyState, why: str) -> SteadyState:
        """This window and ``second`` of the same config as one body of evidence: the SLIs
        and intervals of both windows' requests, both windows' gaps and late sends;
        ``run_dir`` is the second's (the first is in ``first_window``)."""
        if self.samples is None or second.samples is None:
            raise ValueError("a steady state without its samples cannot be pooled")
        samples = pooled_samples((self.samples, second.samples))
        span = (self.span_s or 0.0) + (second.span_s or 0.0)
        return SteadyState(
            self.config, samples_slis(samples, self.slis.start, second.slis.end, span),
            self.late_sends + second.late_sends, (*self.gaps, *second.gaps),
            samples_intervals(samples), second.run_dir, samples, span,
            first_window=self, rerun_why=why)


def samples_intervals(w: WindowSamples) -> dict[str, Interval]:
    """95 % intervals of the judged figures of a window's samples (:mod:`slo.uncertainty`):
    the bootstrap for the TTFT and E2E p95s, Wilson's for the error ratio; a figure without
    requests has none."""
    found = {"ttft_p95_s": percentile_interval(w.ttft, 95),
             "e2e_p95_s": percentile_interval(w.e2e, 95),
             "error_ratio": wilson_interval(len(w.chosen) - len(w.good), len(w.chosen))}
    return {k: v for k, v in found.items() if v is not None}


async def run_steady_state(
    node: Node,
    inventory: Inventory,
    runs_dir: Path,
    seconds: float = DEFAULT_STEADY_S,
    profile: LoadProfile = BACKGROUND_PROFILE,
    *,
    side: str = "current",
    config: str | None = None,
) -> SteadyState:
    """Send ``profile`` at ``node`` for ``seconds`` through the experiment runner (a
    steady-state run, :func:`faultkit.experiment.steady.run_steady`, its evidence in a run
    directory under ``runs_dir`` named for ``side``) and return the SLIs of the requests
    that arrived in the window. The call lasts ``seconds`` plus the warm-up and at most
    the profile's ``total_timeout_s``."""
    try:
        run = RunDir.create(runs_dir, f"{STEADY_SCENARIO}-{side}", node.name)
    except OSError as exc:
        now = time.time()
        nothing = window_samples((), now, now + seconds)
        return SteadyState(config, samples_slis(nothing, now, now + seconds), gaps=(
            f"the steady-state run's directory cannot be created under {runs_dir} "
            f"({exc.strerror or exc}); no load was sent",))
    state = ExperimentState(scenario=STEADY_SCENARIO, case=side, node=node,
                            inventory=inventory, run=run, load_profile=profile)
    window = await run_steady(state, seconds)
    return SteadyState.of_window(config, window.records, window.start, window.end,
                                 late_sends=window.late_sends, gaps=window.gaps,
                                 run_dir=state.run.path)


class SteadyPhase:
    """The gate's steady-state phase on one node: measures, judges, keeps what it found.

    ``seconds == 0`` disables it: every step does nothing and gate.json says "steady state
    not checked". ``say`` prints a progress line (the gate's ``_say``).
    """

    def __init__(self, node: Node, inventory: Inventory, seconds: float, profile: LoadProfile,
                 *, say: Callable[[str], None], runs_dir: Path, profile_source: str = "",
                 speculation: SpeculationCheck | None = None,
                 compare_capabilities: bool = False) -> None:
        self.node, self.inventory, self.seconds, self.profile = node, inventory, seconds, profile
        self.slo = inventory.slo_for(node)
        self.profile_source, self.say = profile_source, say
        #: where each steady-state run keeps its evidence (a run directory per side)
        self.runs_dir = runs_dir
        #: the per-workload check of a candidate that changes speculative decoding
        #: (:mod:`.speculation`), measured beside each steady state
        self.speculation = speculation
        #: where each config's capabilities are read beside its steady state
        #: (:mod:`.capability`; ``None``: not compared)
        self.prometheus_url = inventory.prometheus.url if compare_capabilities else None
        self.capabilities: dict[str, Capabilities] = {}
        self.current: SteadyState | None = None
        self.current_why = "not measured: the gate stopped before measuring it"
        self.candidate: SteadyState | None = None
        self.candidate_why = "not measured: the candidate never served"

    @property
    def checked(self) -> bool:
        return self.seconds > 0

    def _start(self, what: str) -> None:
        self.say(f"steady state of {what}: {self.seconds:g} s of the gate's load "
                 f"({describe_profile(self.profile)}), no fault")

    async def measure_current(self, config: str | None) -> None:
        """Measure the config serving now, if the node is ready; else record why not."""
        if not self.checked:
            return
        what = f"{config or 'the current config'} (current)"
        async with httpx.AsyncClient() as client:
            ready = await probe(self.node, client)
        if not ready.ok:
            self.current_why = (f"not measured: {self.node.name} was not ready before the "
                                f"rollout ({ready.detail}); no baseline to compare with")
            self.say(f"steady state of {what}: {self.current_why}")
            return
        self._start(what)
        self.current = await run_steady_state(self.node, self.inventory, self.runs_dir,
                                              self.seconds, self.profile, side="current",
                                              config=config)
        verdict = judge_steady_state(self.current.slis, self.slo, self.current.gaps,
                                     self.current.intervals)
        self.say(f"steady state of {what}: {self.current.line()} — {verdict.summary()}")
        await self._read_capabilities("current")
        if self.speculation is not None:
            await self.speculation.measure("current")

    async def _read_capabilities(self, side: str) -> None:
        if self.prometheus_url is None:
            return
        found = await read_capabilities(self.node, self.prometheus_url)
        self.capabilities[side] = found
        context = (f"{found.context_tokens:,} tokens" if found.context_tokens is not None
                   else found.context_source)
        kv = (f"{found.kv_cache_tokens:,} tokens" if found.kv_cache_tokens is not None
              else found.kv_source)
        self.say(f"capabilities, {side}: context limit per request {context}; KV cache {kv}")

    async def current_context_limit(self) -> int | None:
        """The current config's context limit per request, for the limits probe: as read
        beside its steady state, else read now (call it before the rollout); ``None`` when
        the engine did not say."""
        found = self.capabilities.get("current")
        if found is not None:
            return found.context_tokens
        tokens, source = await context_limit_now(self.node)
        if tokens is None:
            self.say(f"the current config's context limit per request: {source}; the limits "
                     "probe will not send it")
        return tokens

    def capability_why(self, config: str) -> str | None:
        """The gate's ``why`` when the candidate serves less than the current config
        (:func:`.capability.capability_regressions`), else ``None``."""
        found = self._capability_regressions()
        if not found:
            return None
        return f"{config} serves less than the current config: " + "; ".join(found)

    def _capability_regressions(self) -> list[str]:
        """The candidate's capability regressions (empty until both sides were read)."""
        current, candidate = self.capabilities.get("current"), self.capabilities.get("candidate")
        return capability_regressions(current, candidate) if current and candidate else []

    async def check_candidate(self, config: str) -> str | None:
        """Measure the candidate (serving, before any fault), compare its capabilities
        with the current config's and judge it on the node's SLOs — a second window pooled
        with the first where an SLO check is borderline. Returns the gate's ``why`` when it
        serves less, breaches an SLO or cannot be judged (the gate fails and stops),
        ``None`` when it passed or the phase is disabled."""
        if not self.checked:
            return None
        self._start(f"{config} (candidate)")
        self.candidate = await run_steady_state(self.node, self.inventory, self.runs_dir,
                                                self.seconds, self.profile, side="candidate",
                                                config=config)
        verdict = self._judge(self.candidate)
        self.say(f"steady state of {config} (candidate): {self.candidate.line()} — "
                 f"{verdict.summary()}")
        await self._read_capabilities("candidate")
        if less := self.capability_why(config):
            return less  # a sure FAIL, whatever the window's SLOs: gate.json keeps both
        if borderline := borderline_checks(verdict, self.candidate.slis, self.slo,
                                           self.candidate.intervals):
            rerun_why = (f"{', '.join(borderline)} borderline in the first window (its 95 % "
                         "interval holds the objective): judged on both windows' requests")
            self.say(f"steady state of {config} (candidate): {rerun_why}; a second "
                     f"{self.seconds:g} s window")
            second = await run_steady_state(self.node, self.inventory, self.runs_dir,
                                            self.seconds, self.profile,
                                            side="candidate-rerun", config=config)
            self.candidate = self.candidate.pooled_with(second, rerun_why)
            verdict = self._judge(self.candidate)
            self.say(f"steady state of {config} (candidate, both windows): "
                     f"{self.candidate.line()} — {verdict.summary()}")
        if verdict.passed:
            if self.speculation is None:
                return None
            await self.speculation.measure("candidate")
            return self.speculation.failure()
        if verdict.outcome == "FAIL":
            breaches = "; ".join(f"{c.name}: {c.why}" for c in verdict.failures)
            return f"{config} fails its SLOs before any fault: {breaches}"
        missing = "; ".join(verdict.missing_evidence)
        return (f"{config} could not be judged before any fault (steady state INCONCLUSIVE "
                f"— missing evidence: {missing})")

    def _judge(self, state: SteadyState) -> Verdict:
        return judge_steady_state(state.slis, self.slo, state.gaps, state.intervals)

    def comparison(self) -> tuple[FigureChange, ...]:
        """Candidate vs current (empty until the candidate was measured)."""
        if self.candidate is None:
            return ()
        current = self.current.slis if self.current is not None else None
        return compare_steady_states(
            current, self.candidate.slis,
            self.current.intervals if self.current is not None else None,
            self.candidate.intervals)

    def regression_why(self) -> str | None:
        """The gate's ``why`` when the candidate regressed beyond the tolerance, else None."""
        found = [row.why for row in self.comparison() if row.regression]
        if not found:
            return None
        against = (self.current.config if self.current else None) or "the current config"
        return f"regression vs current ({against}): " + "; ".join(found)

    def to_json(self) -> dict[str, Any]:
        """gate.json ``steady_state`` (schema: docs/run-directory.md, "The gate directory")."""
        if not self.checked:
            return {"checked": False, "seconds": 0,
                    "why": "steady state not checked (--steady-s 0)"}
        rows = self.comparison()
        return {
            "checked": True,
            "seconds": self.seconds,
            "profile": self.profile.to_json(),
            "profile_source": self.profile_source,
            "tolerance": {"latency_ratio_max": LATENCY_RATIO_MAX,
                          "latency_slack_s": LATENCY_SLACK_S,
                          "error_ratio_slack": ERROR_RATIO_SLACK,
                          "throughput_ratio_min": THROUGHPUT_RATIO_MIN},
            "current": self._side(self.current, self.current_why),
            "candidate": self._side(self.candidate, self.candidate_why),
            "comparison": [row.to_json() for row in rows],
            "regressions": [row.why for row in rows if row.regression],
            "speculation": None if self.speculation is None else self.speculation.to_json(),
            "capabilities": self._capabilities_json(),
        }

    def _capabilities_json(self) -> dict[str, Any] | None:
        if self.prometheus_url is None:
            return None
        current, candidate = self.capabilities.get("current"), self.capabilities.get("candidate")
        return {"current": current.to_json() if current else None,
                "candidate": candidate.to_json() if candidate else None,
                "kv_ratio_min": KV_RATIO_MIN,
                "regressions": self._capability_regressions()}

    def _side(self, state: SteadyState | None, why: str) -> dict[str, Any]:
        if state is None:
            return {"measured": False, "why": why}
        verdict = self._judge(state)
        return {**state.to_json(), "verdict": verdict.to_json(), "summary": verdict.summary()}
