"""Metric definitions on hand-made records."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from faultkit.load.stats import (
    distribution,
    e2e_s,
    itl_values,
    percentile,
    summarize,
    tpot_s,
    ttft_s,
    user_e2e_s,
    user_ttft_s,
)
from faultkit.model.records import RequestRecord


def rec(
    i: int,
    *,
    t0: float = 100.0,
    ttft: float | None = 0.2,
    dur: float = 1.0,
    tokens: int | None = 11,
    status: str = "ok",
    error_class: str | None = None,
    prompt: int | None = 20,
    itl: tuple[float, ...] = (),
) -> RequestRecord:
    first = None if ttft is None else t0 + ttft
    last = None if first is None else t0 + dur - 0.1
    return RequestRecord(
        id=f"r{i}",
        node="n",
        kind="chat",
        t_invoke=t0,
        status=status,  # type: ignore[arg-type]
        t_end=t0 + dur,
        t_first_token=first,
        t_last_token=last,
        error_class=error_class,
        output_tokens=tokens,
        prompt_tokens=prompt,
        itl_s=itl,
    )


def test_per_request_definitions() -> None:
    r = rec(0, t0=10.0, ttft=0.25, dur=2.0, tokens=8)
    assert ttft_s(r) == pytest.approx(0.25)
    # TPOT = (t_last − t_first) / (tokens − 1) = (11.9 − 10.25) / 7
    assert tpot_s(r) == pytest.approx(1.65 / 7)
    assert e2e_s(r) == pytest.approx(2.0)


@pytest.mark.parametrize("tokens", [None, 0, 1])
def test_tpot_undefined_for_one_token_or_less(tokens: int | None) -> None:
    assert tpot_s(rec(0, tokens=tokens)) is None


def test_ttft_undefined_without_a_token() -> None:
    assert ttft_s(rec(0, ttft=None)) is None
    assert tpot_s(rec(0, ttft=None)) is None


def test_user_facing_latency_counts_from_the_scheduled_arrival() -> None:
    # arrived at 9.7, sent late at 10.0, first token 10.25, end 12.0
    r = dataclasses.replace(rec(0, t0=10.0, ttft=0.25, dur=2.0), t_scheduled=9.7)
    assert ttft_s(r) == pytest.approx(0.25)  # from invoke: unchanged
    assert e2e_s(r) == pytest.approx(2.0)
    assert user_ttft_s(r) == pytest.approx(0.55)
    assert user_e2e_s(r) == pytest.approx(2.3)
    no_schedule = rec(1, t0=10.0, ttft=0.25, dur=2.0)  # an old ledger line
    assert user_ttft_s(no_schedule) == ttft_s(no_schedule)
    assert user_e2e_s(no_schedule) == e2e_s(no_schedule)
    assert user_ttft_s(rec(2, ttft=None)) is None


def test_summary_user_latency_and_client_side_counts() -> None:
    records = [
        dataclasses.replace(rec(0, t0=1.0, ttft=0.1), t_scheduled=0.5),
        dataclasses.replace(rec(1, t0=2.0, ttft=0.2), t_scheduled=2.0),
        rec(2, t0=3.0, ttft=None, dur=0.0, status="fail", error_class="shed_client", tokens=0),
        rec(3, t0=3.0, ttft=None, status="fail", error_class="shed_client", tokens=0),
        rec(4, t0=3.5, ttft=None, status="fail", error_class="client_exhausted", tokens=0),
    ]
    s = summarize(records)
    assert (s.requests, s.ok, s.failed, s.shed_client, s.client_exhausted) == (5, 2, 3, 2, 1)
    assert (s.ttft.min, s.ttft.max) == pytest.approx((0.1, 0.2))
    assert (s.user_ttft.min, s.user_ttft.max) == pytest.approx((0.2, 0.6))
    assert s.user_e2e.max == pytest.approx(1.5)
    assert s.error_rate == pytest.approx(3 / 5)  # shed arrivals are lost requests
    assert s.to_json()["user_ttft"]["count"] == 2


def test_percentile_interpolates_linearly() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0], 99) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([4.0, 1.0, 3.0, 2.0], 0) == 1.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 100) == 4.0
    with pytest.raises(ValueError, match=r"\[0, 100\]"):
        percentile([1.0], 101)


@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=50),
    st.sampled_from([0.0, 50.0, 90.0, 95.0, 99.0, 99.9, 100.0]),
)
def test_percentile_matches_numpy(values: list[float], q: float) -> None:
    got = percentile(values, q)
    assert got == pytest.approx(float(np.percentile(values, q)), rel=1e-9, abs=1e-6)


def test_distribution_fields() -> None:
    d = distribution([float(v) for v in range(1, 1001)])
    assert d.count == 1000
    assert (d.min, d.max, d.mean) == (1.0, 1000.0, 500.5)
    assert d.p50 == pytest.approx(500.5)
    assert d.p999 == pytest.approx(999.001)
    assert distribution([]).p50 is None


def test_summarize_counts_throughput_errors_and_goodput() -> None:
    records = [
        rec(0, t0=0.0, ttft=0.1, dur=1.0, tokens=11, itl=(0.1, 0.2)),
        rec(1, t0=1.0, ttft=0.5, dur=1.0, tokens=11, itl=(0.3,)),
        rec(2, t0=2.0, ttft=0.2, dur=3.0, tokens=5),
        rec(3, t0=3.0, ttft=None, status="fail", error_class="reset", tokens=0),
        rec(4, t0=3.0, ttft=None, status="fail", error_class="http_429", tokens=0),
        rec(5, t0=4.0, ttft=0.1, status="unknown", error_class="cancelled", tokens=3),
    ]
    s = summarize(records, ttft_max_s=0.3)
    assert (s.requests, s.ok, s.failed, s.unknown) == (6, 3, 2, 1)
    assert s.duration_s == pytest.approx(5.0)  # first invoke 0.0 → last end 5.0
    assert s.error_rate == pytest.approx(3 / 6)
    assert s.errors_by_class == {"cancelled": 1, "http_429": 1, "reset": 1}
    assert s.total_output_tokens == 27  # ok requests only
    assert s.output_token_rate_tps == pytest.approx(27 / 5.0)
    assert s.request_rate_rps == pytest.approx(3 / 5.0)
    assert s.input_token_rate_tps == pytest.approx(60 / 5.0)
    assert s.ttft.count == 3  # latency over ok requests only
    assert s.ttft.max == pytest.approx(0.5)
    assert s.itl.count == 3
    assert s.goodput_ratio == pytest.approx(2 / 6)  # r1's TTFT 0.5 > 0.3
    assert s.goodput_rps == pytest.approx(2 / 5.0)
    assert s.to_json()["ttft"]["p50"] == pytest.approx(0.2)
    assert summarize(records, duration_s=10.0).request_rate_rps == pytest.approx(0.3)


def test_summarize_empty_ledger() -> None:
    s = summarize([])
    assert (s.requests, s.error_rate, s.request_rate_rps, s.ttft.count) == (0, 0.0, 0.0, 0)


def test_itl_values_flatten() -> None:
    assert itl_values([rec(0, itl=(1.0, 2.0)), rec(1, itl=(3.0,))]) == [1.0, 2.0, 3.0]


def test_public_names_are_pinned() -> None:
    import faultkit.load

    assert set(faultkit.load.__all__) == {
        "PERCENTILES", "BackgroundLoad", "Clock", "Distribution", "Ledger", "LoadGenerator",
        "LoadProfile", "LoadResult", "LoadSummary", "RequestRunner", "SSEParser",
        "StreamInterpreter", "StreamOutcome", "Target", "arrival_offsets",
        "classify_exception", "distribution", "e2e_s", "itl_values", "parse_stream",
        "percentile", "summarize", "synthetic_prompt", "tpot_s", "ttft_s",
    }  # fmt: skip
    assert all(hasattr(faultkit.load, name) for name in faultkit.load.__all__)
