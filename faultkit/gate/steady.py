"""The gate's steady-state phase: the node under the gate's everyday load, with no fault.

A candidate that misses its objectives with nothing broken fails users every minute,
whatever it does under a fault; one that is much slower than the config it replaces is a
regression even inside its objectives. So ``faultkit gate`` (:mod:`.gate`) sends the load
its scenarios run in the background (:func:`.load.gate_load_profile`) at the node for
``--steady-s`` seconds (:func:`run_steady_state`), three times in its order:

1. **current** — the config serving now, before the rollout, if the node is ready (if not,
   "not measured" with why: that is no failure of the candidate, only no baseline);
2. **candidate** — once it serves, before any fault, judged on the node's SLOs
   (:func:`judge_steady_state`): a breach *or missing evidence* fails the gate there and no
   scenario runs;
3. **comparison** — after the scenarios passed: candidate vs current
   (:func:`compare_steady_states`); a regression beyond the tolerance fails the gate.

The judge and the comparison are pure; :func:`run_steady_state` and :class:`SteadyPhase`
act. Figures are client-side (:class:`~faultkit.model.windows.WindowSLIs` of the requests that
*arrived* in the window, ``slo.measure.window_slis``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import httpx

from faultkit.gate.load import describe_profile
from faultkit.gate.speculation import SpeculationCheck
from faultkit.inventory import Node, SLOSettings
from faultkit.load.generator import LoadGenerator
from faultkit.load.profile import BACKGROUND_PROFILE, LoadProfile, Target
from faultkit.model.records import CLIENT_SIDE
from faultkit.model.windows import WindowSLIs
from faultkit.probes.health import probe
from slo.checks import WindowObjective, window_objectives
from slo.measure import window_slis
from slo.verdict import CheckResult, Verdict

__all__ = [
    "DEFAULT_STEADY_S",
    "ERROR_RATIO_SLACK",
    "FIGURES",
    "LATENCY_RATIO_MAX",
    "LATENCY_SLACK_S",
    "MIN_STEADY_REQUESTS",
    "STEADY_WARMUP_REQUESTS",
    "THROUGHPUT_RATIO_MIN",
    "FigureChange",
    "SteadyPhase",
    "SteadyState",
    "compare_steady_states",
    "judge_steady_state",
    "run_steady_state",
]

#: ``--steady-s`` default: at the background rate (10 req/s) about 300 requests per window,
#: so the p95 rests on ~15 requests above it, not on one or two.
DEFAULT_STEADY_S = 30.0
#: The fewest requests (and, for TTFT p95, successful ones) a window needs to be judged: with
#: fewer than 20 no request lies above a p95, which is then only the slowest one.
MIN_STEADY_REQUESTS = 20
#: Warm-up requests sent before each window and kept out of it, so the candidate (just
#: started: cold caches, lazy compilation) and the current config (warm) are compared warm.
STEADY_WARMUP_REQUESTS = 4

# The regression tolerance. Two windows of the same seeded open-loop arrivals on a shared
# machine differ by noise; these bounds are chosen, not measured (validate them on the lab),
# so that noise does not fail a gate and a change users would feel does.
#: Latency (TTFT p95, E2E p95) regressed when the candidate's is above BOTH the current's ×
#: this ratio (noise grows with latency: a relative bound) ...
LATENCY_RATIO_MAX = 1.5
#: ... and the current's + this many seconds (on the fast answers of small models a doubled
#: 20 ms TTFT is noise no user notices: an absolute floor).
LATENCY_SLACK_S = 0.1
#: Error ratio regressed when the candidate's is more than this above the current's: one
#: failed request in a hundred, the default ``error_ratio_max``.
ERROR_RATIO_SLACK = 0.01
#: Output tokens/s regressed when the candidate's is below the current's × this ratio. The
#: open loop offers both the same seeded arrivals, so this is goodput of the same users: a
#: fifth less means fewer answers succeeded or answers got shorter.
THROUGHPUT_RATIO_MIN = 0.8

_EXHAUSTION = CLIENT_SIDE - {"shed_client"}  # shed arrivals are lost users, not a gap

Unit = Literal["s", "ratio", "tok/s"]
#: the compared figures: (WindowSLIs field, label, unit), in the table's order
FIGURES: tuple[tuple[str, str, Unit], ...] = (
    ("ttft_p95_s", "TTFT p95", "s"),
    ("error_ratio", "error ratio", "ratio"),
    ("e2e_p95_s", "E2E p95", "s"),
    ("output_tokens_per_s", "output tokens/s", "tok/s"),
)


@dataclass(frozen=True)
class SteadyState:
    """One steady-state window of one config: its client-side SLIs and what the load
    client could not vouch for (``gaps``: each makes the window INCONCLUSIVE)."""

    config: str | None
    slis: WindowSLIs
    #: open-loop sends later than the generator's lateness bound (the client fell behind)
    late_sends: int = 0
    gaps: tuple[str, ...] = ()

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
        return {"config": self.config, "measured": True, "slis": self.slis.to_json(),
                "late_sends": self.late_sends, "gaps": list(self.gaps)}


def judge_steady_state(
    slis: WindowSLIs, slo: SLOSettings, gaps: Sequence[str] = ()
) -> Verdict:
    """Judge a steady-state window on the node's SLOs: its
    :func:`~slo.checks.window_objectives` (error ratio ≤ ``error_ratio_max``, client TTFT
    p95 ≤ ``ttft_s``), the objectives the scenarios' checks and their steady-state
    hypothesis read.

    Missing evidence is never a pass: fewer than :data:`MIN_STEADY_REQUESTS` requests in the
    window, or any of ``gaps``, makes the verdict INCONCLUSIVE; a TTFT p95 that is missing or
    rests on fewer than that many successful requests leaves its check unjudged (the verdict
    is then FAIL if the error ratio failed — all requests failing is evidence — else
    INCONCLUSIVE). Its ``failures`` are the breached objectives with expected/observed/why.
    """
    reasons = list(gaps)
    window = f"the {slis.end - slis.start:g} s window"
    if slis.requests == 0:
        reasons.append(f"no request arrived in {window}: nothing to judge")
    elif slis.requests < MIN_STEADY_REQUESTS:
        reasons.append(f"only {slis.requests} requests arrived in {window}; judging needs at "
                       f"least {MIN_STEADY_REQUESTS} (a longer --steady-s)")
    error_ratio, ttft_p95 = window_objectives(slo)
    return Verdict(checks=(_error_ratio_check(slis, error_ratio), _ttft_check(slis, ttft_p95)),
                   inconclusive=tuple(reasons))


def _error_ratio_check(slis: WindowSLIs, objective: WindowObjective) -> CheckResult:
    name, expected = "steady_error_ratio", f"≤ {objective.limit:g}"
    if slis.error_ratio is None:
        return CheckResult(name, False, expected, "no requests", "no request to count",
                           inconclusive=True)
    observed = f"{slis.error_ratio:.4g} ({slis.failed} of {slis.requests} failed)"
    ok = objective.within(slis.error_ratio)
    why = (f"error ratio {slis.error_ratio:.4g} {'≤' if ok else '>'} objective "
           f"{objective.limit:g} ({slis.failed} of {slis.requests} failed)")
    return CheckResult(name, ok, expected, observed, why)


def _ttft_check(slis: WindowSLIs, objective: WindowObjective) -> CheckResult:
    name, expected = "steady_ttft_p95", f"≤ {objective.limit:g} s"
    p95 = slis.ttft_p95_s
    if p95 is None:
        return CheckResult(name, False, expected, "none",
                           "no successful request produced a first token", inconclusive=True)
    observed = f"{p95:.3f} s over {slis.ok} successful requests"
    if slis.ok < MIN_STEADY_REQUESTS:
        return CheckResult(name, False, expected, observed,
                           f"only {slis.ok} successful requests; a p95 needs at least "
                           f"{MIN_STEADY_REQUESTS}", inconclusive=True)
    ok = objective.within(p95)
    why = f"TTFT p95 {p95:.3f} s {'≤' if ok else '>'} objective {objective.limit:g} s"
    return CheckResult(name, ok, expected, observed, why)


@dataclass(frozen=True)
class FigureChange:
    """One compared figure: current and candidate values (``None``: not measured) and
    whether the candidate regressed beyond the tolerance (``why`` says how, or why the
    figure could not be compared)."""

    key: str
    label: str
    unit: Unit
    current: float | None
    candidate: float | None
    regression: bool = False
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def compare_steady_states(
    current: WindowSLIs | None, candidate: WindowSLIs
) -> tuple[FigureChange, ...]:
    """Candidate vs current, figure by figure (:data:`FIGURES`), with the tolerance above:
    TTFT/E2E p95 regressed when above both × :data:`LATENCY_RATIO_MAX` and
    + :data:`LATENCY_SLACK_S`; error ratio when above + :data:`ERROR_RATIO_SLACK`; output
    tokens/s when below × :data:`THROUGHPUT_RATIO_MIN`. A figure missing on
    either side is not compared (and is no regression): with no current measurement there
    is nothing to regress from, and the candidate's own evidence was judged before."""
    rows = []
    for key, label, unit in FIGURES:
        cur = None if current is None else getattr(current, key)
        cand = getattr(candidate, key)
        if cur is None or cand is None:
            side = "current" if cur is None else "candidate"
            rows.append(FigureChange(key, label, unit, cur, cand, False,
                                     f"not compared: no {side} figure"))
            continue
        why = _regression(unit, label, cur, cand)
        rows.append(FigureChange(key, label, unit, cur, cand, bool(why), why))
    return tuple(rows)


def _regression(unit: Unit, label: str, cur: float, cand: float) -> str:
    """How ``cand`` regressed from ``cur`` beyond the tolerance; empty when it did not."""
    if unit == "s" and cand > cur * LATENCY_RATIO_MAX and cand > cur + LATENCY_SLACK_S:
        return (f"{label} {cand:.3f} s vs {cur:.3f} s (above {LATENCY_RATIO_MAX:g}× and "
                f"+{LATENCY_SLACK_S:g} s)")
    if unit == "ratio" and cand > cur + ERROR_RATIO_SLACK:
        return f"{label} {cand:.3f} vs {cur:.3f} (more than {ERROR_RATIO_SLACK:g} above)"
    if unit == "tok/s" and cand < cur * THROUGHPUT_RATIO_MIN:
        return f"{label} {cand:.1f} vs {cur:.1f} (below {THROUGHPUT_RATIO_MIN:g}×)"
    return ""


async def run_steady_state(
    node: Node | Target,
    seconds: float = DEFAULT_STEADY_S,
    profile: LoadProfile = BACKGROUND_PROFILE,
    *,
    config: str | None = None,
) -> SteadyState:
    """Send ``profile`` at ``node`` for ``seconds`` (after :data:`STEADY_WARMUP_REQUESTS`
    warm-up requests kept out of the window) and return the SLIs of the requests that
    arrived in the window. Every request runs to its end (bounded by the profile's
    timeouts), so the call lasts ``seconds`` plus at most ``total_timeout_s``."""
    target = node if isinstance(node, Target) else Target.from_node(node)
    run = profile.replace(duration_s=seconds, requests=None,
                          warmup=max(profile.warmup, STEADY_WARMUP_REQUESTS))
    result = await LoadGenerator(target, run, id_prefix="steady").run()
    slis = window_slis(result.records, result.t_start, result.t_start + seconds)
    gaps = [f"the load client's ledger invariant was violated: {line}"
            for line in result.violations]
    exhausted = [r for r in result.records if r.error_class in _EXHAUSTION]
    if exhausted:
        gaps.append(f"the load client ran out of resources ({len(exhausted)} requests "
                    f"{exhausted[0].error_class}): the node cannot be judged on them")
    return SteadyState(config, slis, result.late_sends, tuple(gaps))


class SteadyPhase:
    """The gate's steady-state phase on one node: measures, judges, keeps what it found.

    ``seconds == 0`` disables it: every step does nothing and gate.json says "steady state
    not checked". ``say`` prints a progress line (the gate's ``_say``).
    """

    def __init__(self, node: Node, slo: SLOSettings, seconds: float, profile: LoadProfile,
                 *, say: Callable[[str], None], profile_source: str = "",
                 speculation: SpeculationCheck | None = None) -> None:
        self.node, self.slo, self.seconds, self.profile = node, slo, seconds, profile
        self.profile_source, self.say = profile_source, say
        #: the per-workload check of a candidate that changes speculative decoding
        #: (:mod:`.speculation`), measured beside each steady state
        self.speculation = speculation
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
        self.current = await run_steady_state(self.node, self.seconds, self.profile,
                                              config=config)
        verdict = judge_steady_state(self.current.slis, self.slo, self.current.gaps)
        self.say(f"steady state of {what}: {self.current.line()} — {verdict.summary()}")
        if self.speculation is not None:
            await self.speculation.measure("current")

    async def check_candidate(self, config: str) -> str | None:
        """Measure the candidate (serving, before any fault) and judge it on the node's
        SLOs. Returns the gate's ``why`` when it breaches one or cannot be judged (the gate
        fails and stops), ``None`` when it passed or the phase is disabled."""
        if not self.checked:
            return None
        self._start(f"{config} (candidate)")
        self.candidate = await run_steady_state(self.node, self.seconds, self.profile,
                                                config=config)
        verdict = judge_steady_state(self.candidate.slis, self.slo, self.candidate.gaps)
        self.say(f"steady state of {config} (candidate): {self.candidate.line()} — "
                 f"{verdict.summary()}")
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

    def comparison(self) -> tuple[FigureChange, ...]:
        """Candidate vs current (empty until the candidate was measured)."""
        if self.candidate is None:
            return ()
        current = self.current.slis if self.current is not None else None
        return compare_steady_states(current, self.candidate.slis)

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
        }

    def _side(self, state: SteadyState | None, why: str) -> dict[str, Any]:
        if state is None:
            return {"measured": False, "why": why}
        verdict = judge_steady_state(state.slis, self.slo, state.gaps)
        return {**state.to_json(), "verdict": verdict.to_json(), "summary": verdict.summary()}
