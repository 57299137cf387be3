"""The gate's steady-state judgements, pure: a window judged on the node's SLOs (missing
evidence is never a pass; a figure whose 95 % interval holds its objective says it is
borderline) and the candidate compared with the current config within a tolerance
(:mod:`.steady` measures; docs/gate.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from faultkit.inventory import SLOSettings
from faultkit.model.windows import WindowSLIs
from slo.checks import WindowObjective, window_objectives
from slo.uncertainty import Interval, straddles
from slo.verdict import CheckResult, Verdict

__all__ = [
    "ERROR_RATIO_SLACK",
    "FIGURES",
    "LATENCY_RATIO_MAX",
    "LATENCY_SLACK_S",
    "MIN_STEADY_REQUESTS",
    "THROUGHPUT_RATIO_MIN",
    "FigureChange",
    "borderline_checks",
    "compare_steady_states",
    "judge_steady_state",
]

#: The fewest requests (and, for TTFT p95, successful ones) a window needs to be judged: with
#: fewer than 20 no request lies above a p95, which is then only the slowest one.
MIN_STEADY_REQUESTS = 20
# The regression tolerance. Two windows of the same seeded open-loop arrivals on a shared
# machine differ by noise, so that noise must not fail a gate and a change users would feel
# must. Held against 30 repeated gates of known-good configs (docs/gate.md, "Figures on the
# testbed"): the ratio alone was exceeded by noise (×1.75 on a 10 ms p95), the absolute
# floor never (at most 0.55 of it) — both halves are needed.
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

Unit = Literal["s", "ratio", "tok/s"]
#: the compared figures: (WindowSLIs field, label, unit), in the table's order
FIGURES: tuple[tuple[str, str, Unit], ...] = (
    ("ttft_p95_s", "TTFT p95", "s"),
    ("error_ratio", "error ratio", "ratio"),
    ("e2e_p95_s", "E2E p95", "s"),
    ("output_tokens_per_s", "output tokens/s", "tok/s"),
)


def judge_steady_state(
    slis: WindowSLIs, slo: SLOSettings, gaps: Sequence[str] = (),
    intervals: Mapping[str, Interval] | None = None,
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
    found = intervals or {}
    checks = (_borderline(_error_ratio_check(slis, error_ratio), found.get("error_ratio"),
                          error_ratio.limit, "{:.4g}"),
              _borderline(_ttft_check(slis, ttft_p95), found.get("ttft_p95_s"),
                          ttft_p95.limit, "{:.3f} s"))
    return Verdict(checks=checks, inconclusive=tuple(reasons))


def borderline_checks(verdict: Verdict, slis: WindowSLIs, slo: SLOSettings,
                      intervals: Mapping[str, Interval]) -> tuple[str, ...]:
    """The judged SLO checks of a steady-state ``verdict`` that another window could
    decide: those whose 95 % interval holds the objective (the same test
    :func:`judge_steady_state` words in their ``why``). None when the window was
    INCONCLUSIVE — missing evidence is not made up by measuring again. An error ratio with
    no failure is not among them: "0 of N failed" is the best a window of N requests can
    show, and its interval only says N is small (0 of 300 reaches 0.0126; a 1 % objective
    needs about 380 requests), which a longer ``--steady-s`` answers, not chance."""
    if verdict.outcome == "INCONCLUSIVE":
        return ()
    limits = dict(_judged(slo))
    return tuple(c.name for c in verdict.checks if not c.inconclusive and c.name in limits
                 and straddles(intervals.get(limits[c.name][0]), limits[c.name][1])
                 and not (c.name == "steady_error_ratio" and slis.failed == 0))


def _judged(slo: SLOSettings) -> tuple[tuple[str, tuple[str, float]], ...]:
    """Each judged check's name, with the SLI its interval is of and its objective's limit."""
    error_ratio, ttft_p95 = window_objectives(slo)
    return (("steady_error_ratio", ("error_ratio", error_ratio.limit)),
            ("steady_ttft_p95", ("ttft_p95_s", ttft_p95.limit)))


def _borderline(result: CheckResult, interval: Interval | None, limit: float,
                pattern: str) -> CheckResult:
    """``result``, its ``why`` saying so when the figure's interval holds the objective's
    limit: the evidence cannot tell whether it met it (slo.uncertainty.straddles)."""
    if result.inconclusive or interval is None or not straddles(interval, limit):
        return result
    low, high = (pattern.format(v) for v in interval)
    return dataclasses.replace(result, why=f"{result.why}; borderline: its 95 % interval "
                                           f"{low}–{high} holds the objective")


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
    current_interval: Interval | None = None
    candidate_interval: Interval | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def compare_steady_states(
    current: WindowSLIs | None, candidate: WindowSLIs,
    current_intervals: Mapping[str, Interval] | None = None,
    candidate_intervals: Mapping[str, Interval] | None = None,
) -> tuple[FigureChange, ...]:
    """Candidate vs current, figure by figure (:data:`FIGURES`), with the tolerance above:
    TTFT/E2E p95 regressed when above both × :data:`LATENCY_RATIO_MAX` and
    + :data:`LATENCY_SLACK_S` and, where both windows have a 95 % interval, the candidate's
    lies wholly above the current's (overlapping intervals: within noise, said so); error
    ratio when above + :data:`ERROR_RATIO_SLACK`; output tokens/s when below ×
    :data:`THROUGHPUT_RATIO_MIN`. A figure missing on
    either side is not compared (and is no regression): with no current measurement there
    is nothing to regress from, and the candidate's own evidence was judged before."""
    rows = []
    for key, label, unit in FIGURES:
        cur = None if current is None else getattr(current, key)
        cand = getattr(candidate, key)
        spans = ((current_intervals or {}).get(key), (candidate_intervals or {}).get(key))
        if cur is None or cand is None:
            side = "current" if cur is None else "candidate"
            rows.append(FigureChange(key, label, unit, cur, cand, False,
                                     f"not compared: no {side} figure", *spans))
            continue
        why = _regression(unit, label, cur, cand)
        if why and unit == "s" and _overlap(*spans):
            rows.append(FigureChange(key, label, unit, cur, cand, False,
                                     f"{why}, but within noise: the two windows' 95 % "
                                     "intervals overlap", *spans))
            continue
        rows.append(FigureChange(key, label, unit, cur, cand, bool(why), why, *spans))
    return tuple(rows)


def _overlap(current: Interval | None, candidate: Interval | None) -> bool:
    """Whether the two windows' intervals of a latency overlap: its rise beyond the
    tolerance is then within what two windows of one config can differ by, and no
    regression (a latency is judged so only where both windows have an interval)."""
    return current is not None and candidate is not None and candidate[0] <= current[1]


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
