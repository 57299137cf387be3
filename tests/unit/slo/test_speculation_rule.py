"""The per-workload speculation verdict (slo.speculation): wins, loses or no difference
within noise, from the requests' TPOTs with and without speculation."""

from __future__ import annotations

import random

import pytest

from faultkit.model.records import RequestRecord, Status
from slo.speculation import (
    MIN_REQUESTS,
    NOISE,
    ClassFigures,
    class_figures,
    combined,
    judge_class,
    ratio_interval,
)


def figures(tpots: list[float], workload: str = "free", drafted: float | None = None,
            accepted: float | None = None) -> ClassFigures:
    return ClassFigures(workload, len(tpots), len(tpots), tuple(tpots), None, drafted,
                        accepted)


def jittered(centre: float, n: int = 60, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [centre * rng.uniform(0.9, 1.1) for _ in range(n)]


def test_twice_as_fast_wins_and_names_the_acceptance() -> None:
    verdict = judge_class(figures(jittered(0.010), "extractive", 400, 300),
                          figures(jittered(0.020, seed=2), "extractive"))
    assert verdict.outcome == "wins"
    assert verdict.high is not None and verdict.high < 1 - NOISE
    assert "75% of drafted tokens accepted" in verdict.why


def test_half_as_fast_loses() -> None:
    verdict = judge_class(figures(jittered(0.030)), figures(jittered(0.020, seed=2)))
    assert verdict.outcome == "loses"
    assert verdict.low is not None and verdict.low > 1 + NOISE


def test_the_same_distribution_is_no_difference() -> None:
    verdict = judge_class(figures(jittered(0.020, seed=3)), figures(jittered(0.020, seed=4)))
    assert verdict.outcome == "no difference"
    assert verdict.low is not None and verdict.high is not None
    assert verdict.low <= 1.0 <= verdict.high


def test_a_small_shift_inside_the_noise_is_no_difference() -> None:
    verdict = judge_class(figures(jittered(0.0204, n=400, seed=5)),
                          figures(jittered(0.0200, n=400, seed=6)))
    assert verdict.outcome == "no difference"


def test_too_few_requests_tell_nothing_apart() -> None:
    verdict = judge_class(figures([0.001] * (MIN_REQUESTS - 1)), figures(jittered(0.02)))
    assert verdict.outcome == "no difference" and verdict.ratio is None
    assert "too few timed requests with speculation" in verdict.why


def test_the_interval_is_reproducible_and_brackets_the_ratio() -> None:
    a, b = jittered(0.01), jittered(0.02, seed=9)
    first, second = ratio_interval(a, b), ratio_interval(a, b)
    assert first == second
    ratio, low, high = first
    assert low <= ratio <= high


def test_figures_from_the_ledger_and_their_union() -> None:
    def rec(i: int, status: Status, out: int, gap: float) -> RequestRecord:
        return RequestRecord(id=f"r-{i}", node="n", kind="chat", t_invoke=0.0,
                             status=status, t_end=1.0, t_first_token=0.1,
                             t_last_token=0.1 + gap * (out - 1), output_tokens=out,
                             workload="free")
    records = [rec(0, "ok", 11, 0.02), rec(1, "ok", 11, 0.04), rec(2, "fail", 0, 0.0)]
    free = class_figures("free", records, seconds=2.0, drafted=40, accepted=10)
    assert (free.requests, free.ok) == (3, 2)
    assert free.tpot_s == pytest.approx((0.02, 0.04))
    assert free.output_tokens_per_s == pytest.approx(11.0)
    assert free.acceptance_rate == pytest.approx(0.25)
    both = combined("mixed", [free, figures([0.01], "extractive", 10, 9)])
    assert both.tpot_s == pytest.approx((0.02, 0.04, 0.01))
    assert (both.drafted_tokens, both.accepted_tokens) == (50, 19)
    assert combined("mixed", [free, figures([0.01])]).drafted_tokens is None
