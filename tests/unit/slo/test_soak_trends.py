"""The soak's judgements (slo.trend): a memory line heading for the container's limit, noise
around a flat line, a warm-up that fills memory once, a rising preemption rate — and how
Docker's memory stats (cgroup v1 and v2) are read."""

from __future__ import annotations

import random

import pytest

from faultkit.docker.host import MemoryStats
from slo.trend import DAY_S, MIN_RISE_BYTES, counter_trend, memory_trend, steady_chance

MIB = 2**20


def line(slope_bps: float, start: float = 100 * MIB, seconds: int = 60, noise: float = 0.0,
         seed: int = 1) -> list[tuple[float, float]]:
    rng = random.Random(seed)
    return [(1000.0 + t, start + slope_bps * t + rng.gauss(0, noise)) for t in range(seconds)]


def test_a_steady_leak_reaches_a_small_limit_within_the_day() -> None:
    # 2 MiB/s into a 256 MiB container: llama-bad-cacheram's shape
    trend = memory_trend(line(2 * MIB), 256 * MIB)
    assert trend.reaches_limit
    assert trend.slope_bps == pytest.approx(2 * MIB)
    assert trend.seconds_to_limit is not None and trend.seconds_to_limit < 60
    assert "within" in trend.why


def test_a_slow_rise_beyond_the_horizon_passes_with_its_projection() -> None:
    # 100 KiB/s for 10 min into 20 GiB: ~58 h to the limit
    points = line(100 * 1024, seconds=600)
    trend = memory_trend(points, 20 * 2**30)
    assert not trend.reaches_limit and trend.seconds_to_limit_low is not None
    assert trend.seconds_to_limit_low > DAY_S
    assert "beyond" in trend.why


def test_noise_around_a_flat_line_is_not_a_trend() -> None:
    for seed in range(20):
        trend = memory_trend(line(0.0, noise=2 * MIB, seed=seed), 256 * MIB)
        assert not trend.reaches_limit, (seed, trend.why)


def test_a_tiny_slope_under_the_minimum_rise_is_not_a_trend() -> None:
    slope = MIN_RISE_BYTES / 200  # a quarter of the minimum rise over the 45 s fit
    trend = memory_trend(line(slope), 110 * MIB)  # even a limit just above
    assert not trend.reaches_limit and "under the" in trend.why


def test_the_warm_up_is_left_out_of_the_fit() -> None:
    # +50 MiB in the first 10 s (caches filling), then flat: no leak
    points = [(1000.0 + t, (100 + min(t, 10) * 5) * MIB) for t in range(60)]
    trend = memory_trend(points, 256 * MIB)
    assert not trend.reaches_limit
    assert trend.t_from is not None and trend.t_from >= 1000.0 + 60 * 0.25 - 1


def test_no_limit_or_too_few_samples_reach_nothing() -> None:
    assert "no memory limit" in memory_trend(line(2 * MIB), None).why
    assert "too few" in memory_trend(line(2 * MIB, seconds=4), 256 * MIB).why


def test_a_rising_preemption_rate() -> None:
    t0, t1 = 1000.0, 1060.0
    steady = [(t0 + t, float(t)) for t in range(61)]  # 1/s throughout
    rising = [(t0 + t, float(t * t) / 60) for t in range(61)]  # accelerating
    assert not counter_trend(steady, t0, t1).rising
    found = counter_trend(rising, t0, t1)
    assert found.rising and found.second_half is not None and found.first_half is not None
    assert found.second_half > 1.5 * found.first_half
    assert not counter_trend([(t0 + t, 0.0) for t in range(61)], t0, t1).rising
    assert "too few" in counter_trend([(t0, 0.0)], t0, t1).why


@pytest.mark.parametrize(("first", "second", "rising"), [
    (0, 3, False),   # the known-good config's soak: p = 0.125, noise
    (0, 6, False),   # p = 0.016: not below 1 %
    (0, 7, True),    # p = 0.0078
    (2, 12, True),   # p = 0.0065
    (5, 9, False),   # p = 0.21: a steady rate's spread
    (40, 80, True),  # p < 0.001 and twice the first half
    (100, 140, False),  # significant, but not 1.5× the first half
])
def test_rising_needs_a_rise_a_steady_rate_rarely_gives(first: int, second: int,
                                                        rising: bool) -> None:
    points = [(0.0, 0.0), (1.0, float(first)), (2.0, float(first + second))]
    trend = counter_trend(points, 0.0, 2.0)
    assert trend.rising is rising, trend.why
    assert trend.why.endswith("rising")


def test_the_steady_chance_is_the_binomial_tail() -> None:
    assert steady_chance(0, 3) == 1 / 8
    assert steady_chance(0, 0) == 1.0
    assert steady_chance(3, 3) == 42 / 64  # P(X >= 3), X ~ Binomial(6, 1/2)
    # a steady rate reads "rising" in at most 1 % of soaks: the test's false-alarm rate
    rng = random.Random(7)
    alarms = 0
    for _ in range(2000):
        n = rng.randint(3, 60)
        second = sum(rng.random() < 0.5 for _ in range(n))
        points = [(0.0, 0.0), (1.0, float(n - second)), (2.0, float(n))]
        alarms += counter_trend(points, 0.0, 2.0).rising
    assert alarms <= 0.01 * 2000


def test_a_counter_reset_counts_as_a_restart_from_zero() -> None:
    points = [(0.0, 10.0), (1.0, 12.0), (2.0, 1.0), (3.0, 3.0)]
    trend = counter_trend(points, 0.0, 2.0)  # halves [0, 1] and [1, 2]
    assert (trend.first_half, trend.second_half) == (2.0, 1.0)


@pytest.mark.parametrize(("memory", "anon", "limit"), [
    ({"usage": 300, "limit": 1000, "stats": {"total_rss": 200, "rss": 150, "cache": 100}},
     200, 1000),                                                   # cgroup v1
    ({"usage": 300, "limit": 1000, "stats": {"anon": 180, "file": 120}}, 180, 1000),  # v2
    ({"usage": 300}, None, None),                                   # nothing more reported
])
def test_docker_memory_stats_read_the_anonymous_memory(
    memory: dict[str, object], anon: int | None, limit: int | None
) -> None:
    stats = MemoryStats.from_docker(memory)
    assert (stats.usage, stats.anon, stats.limit) == (300, anon, limit)


def test_a_ramp_that_slows_down_is_a_warm_up_not_a_leak() -> None:
    # the real vLLM node over a 30 s soak: 5.8 MiB/s, then 2.3 MiB/s
    points = [(1000.0 + t, (1470 + 60 * (1 - 0.95 ** t)) * MIB) for t in range(30)]
    trend = memory_trend(points, 3 * 2**30)
    assert not trend.reaches_limit and "slowing down" in trend.why, trend.why


def test_a_leak_killed_at_its_limit_and_restarted_still_reaches_it() -> None:
    """sim-vllm-bad-leak in a gate: OOM-killed 20 s into the soak, back at
    ~20 MiB; one line through both sides read "not rising". Each stretch is judged apart."""
    before = [(1000.0 + t, 150 * MIB + 2.5 * MIB * t) for t in range(40)]  # up to ~250 MiB
    after = [(1040.0 + t, 20 * MIB + 2.5 * MIB * t) for t in range(20)]
    trend = memory_trend([*before, *after], 256 * MIB)
    assert trend.reaches_limit, trend.why
    assert trend.why.startswith("memory fell by over half 1 time(s) (a restart)"), trend.why
    assert trend.t_to is not None and trend.t_to < 1040.0  # the stretch before the restart
    assert trend.slope_bps == pytest.approx(2.5 * MIB)


def test_a_flat_node_that_restarted_is_judged_on_its_longest_stretch() -> None:
    before = [(1000.0 + t, 100 * MIB) for t in range(15)]
    after = [(1015.0 + t, 30 * MIB) for t in range(45)]
    trend = memory_trend([*before, *after], 256 * MIB)
    assert not trend.reaches_limit
    assert trend.t_from is not None and trend.t_from >= 1015.0
    assert "(a restart)" in trend.why and "not rising" in trend.why
