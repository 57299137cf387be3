"""slo.uncertainty: 95 % intervals that hold the truth about 95 % of the time, Wilson's
interval at the edges, and what borderline means."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from slo.uncertainty import percentile_interval, ratio_interval, straddles, wilson_interval


def test_the_bootstrap_interval_of_a_p95_covers_the_true_one() -> None:
    """300 requests from an exponential latency (mean 0.2 s): the interval of their p95
    holds the distribution's own p95 in about 95 % of 200 independent windows."""
    truth = -0.2 * math.log(0.05)
    rng = random.Random(11)
    covered = 0
    for trial in range(200):
        window = [rng.expovariate(5.0) for _ in range(300)]
        interval = percentile_interval(window, 95, resamples=300, seed=trial)
        assert interval is not None
        covered += interval[0] <= truth <= interval[1]
    assert 0.88 <= covered / 200 <= 0.99


def test_no_values_no_interval() -> None:
    assert percentile_interval([], 95) is None
    assert wilson_interval(0, 0) is None


def test_wilson_is_honest_at_zero_and_stays_in_range() -> None:
    low, high = wilson_interval(0, 300) or (1.0, 0.0)
    assert low == pytest.approx(0.0, abs=1e-12)
    assert high == pytest.approx(0.01264, abs=1e-4)  # 0 of 300: up to 1.3 %
    low, high = wilson_interval(300, 300) or (0.0, 0.0)
    assert high == 1.0 and low == pytest.approx(0.98736, abs=1e-4)
    low, high = wilson_interval(5, 100) or (0.0, 0.0)
    assert low < 0.05 < high


def test_a_ratio_of_medians_and_its_interval() -> None:
    rng = random.Random(3)
    fast = [rng.uniform(0.9, 1.1) * 0.01 for _ in range(50)]
    slow = [rng.uniform(0.9, 1.1) * 0.02 for _ in range(50)]
    ratio, low, high = ratio_interval(fast, slow, statistics.median, seed=1)
    assert low <= ratio <= high < 0.6
    assert ratio_interval(fast, slow, statistics.median, seed=1) == (ratio, low, high)


def test_borderline_is_an_interval_holding_the_limit() -> None:
    assert straddles((0.9, 1.1), 1.0)
    assert straddles((1.0, 1.1), 1.0)  # the limit included
    assert not straddles((0.5, 0.9), 1.0)
    assert not straddles(None, 1.0)
