"""Summaries from the ledger file equal the in-memory ones, field by field.

Exact: every count, sum, rate, min, max and percentile (same ranks, same interpolation).
The one documented difference: a distribution's ``mean`` is summed per chunk by numpy
(pairwise) rather than left to right over the sorted values, so it may differ in the last
bits; it is compared to 1e-12 relative.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faultkit.load.quantiles as quantiles
from faultkit.load.colstats import fixed_windows, summarize_file, window_figures
from faultkit.load.ledgerfile import ArrowLedgerWriter
from faultkit.load.quantiles import StreamingDistribution, exact_percentiles
from faultkit.load.stats import Distribution, LoadSummary, distribution, percentile, summarize
from faultkit.model.records import JsonlWriter, RequestRecord
from slo.measure import window_slis

T0 = 1_767_268_800.0


def ledger(n: int, seed: int = 0) -> list[RequestRecord]:
    """Known records of every shape ``summarize`` distinguishes (seeded, so fixed)."""
    rng = random.Random(seed)
    out: list[RequestRecord] = []
    for i in range(n):
        sched = T0 + i * 0.05
        t = sched + rng.choice([0.0, 0.0, 0.001, 0.08])  # some sent late
        u = rng.random()
        rid = f"s-{i:06d}"
        if u < 0.75:
            tokens = rng.choice([1, 2, 5, 16, None])
            gaps = tuple(rng.lognormvariate(-4, 0.4) for _ in range(rng.randrange(0, 6)))
            first = t + rng.lognormvariate(-2.5, 0.6)
            out.append(RequestRecord(
                rid, "n", "chat", t, "ok", first + sum(gaps) + 0.001, first - 0.01, first,
                first + sum(gaps), 200, None, None, "stop", rng.choice([10, None]), tokens,
                tokens is not None, len(gaps) + 2, len(gaps) + 1, gaps,
                rng.choice([sched, None]), False,
            ))  # fmt: skip
        elif u < 0.8:  # ok without a content chunk: no TTFT, no TPOT
            out.append(RequestRecord(rid, "n", "completion", t, "ok", t + 0.3, t_scheduled=sched))
        elif u < 0.9:
            cls = rng.choice(["http_5xx", "reset", "timeout_total", "", None])
            gaps = (0.01, 0.02) if cls == "reset" else ()
            out.append(RequestRecord(
                rid, "n", "chat", t, "fail", t + 0.2, error_class=cls, itl_s=gaps,
                t_first_token=t + 0.1 if gaps else None, t_scheduled=sched,
            ))  # fmt: skip
        elif u < 0.95:
            out.append(RequestRecord(rid, "n", "chat", sched, "fail", sched,
                                     error_class="shed_client", t_scheduled=sched))  # fmt: skip
        else:
            out.append(RequestRecord(rid, "n", "chat", t, "unknown", t + 9.0,
                                     error_class="cancelled", t_scheduled=sched))  # fmt: skip
    return out


def write_arrow(path: Path, records: list[RequestRecord], batch_rows: int = 64) -> Path:
    with ArrowLedgerWriter(path, batch_rows=batch_rows) as writer:
        for r in records:
            writer.write(r)
    return path


def assert_same_distribution(got: Distribution, want: Distribution) -> None:
    for field in dataclasses.fields(Distribution):
        g, w = getattr(got, field.name), getattr(want, field.name)
        if field.name == "mean" and w is not None:
            assert g == pytest.approx(w, rel=1e-12, abs=0)
        else:
            assert g == w, field.name


def assert_same_summary(got: LoadSummary, want: LoadSummary) -> None:
    for field in dataclasses.fields(LoadSummary):
        g, w = getattr(got, field.name), getattr(want, field.name)
        if isinstance(w, Distribution):
            assert_same_distribution(g, w)
        else:
            assert g == w, field.name


@pytest.fixture(params=["one pass", "several passes"])
def small_memory(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Also run with tiny hold/gather limits, so that every narrowing step is exercised."""
    if request.param == "several passes":
        monkeypatch.setattr(quantiles, "HOLD_MAX", 7)
        monkeypatch.setattr(quantiles, "GATHER_MAX", 5)


@pytest.mark.usefixtures("small_memory")
@pytest.mark.parametrize(
    "limits",
    [{}, {"ttft_max_s": 0.1, "tpot_max_s": 0.02, "e2e_max_s": 0.3, "duration_s": 42.0}],
)
def test_summary_from_the_file_equals_the_in_memory_summary(
    tmp_path: Path, limits: dict[str, float]
) -> None:
    records = ledger(1500)
    path = write_arrow(tmp_path / "ledger.arrows", records)
    assert_same_summary(summarize_file(path, **limits), summarize(records, **limits))  # type: ignore[arg-type]


def test_known_figures(tmp_path: Path) -> None:
    """A hand-checkable ledger: the figures themselves, not only their equality."""
    records = [
        RequestRecord("a", "n", "chat", 10.0, "ok", 11.0, t_first_token=10.1,
                      t_last_token=10.9, output_tokens=5, itl_s=(0.2, 0.2, 0.2, 0.2)),
        RequestRecord("b", "n", "chat", 10.5, "ok", 12.5, t_first_token=10.8,
                      t_last_token=12.4, output_tokens=3, itl_s=(0.8, 0.8)),
        RequestRecord("c", "n", "chat", 11.0, "fail", 11.5, error_class="http_5xx"),
    ]  # fmt: skip
    s = summarize_file(write_arrow(tmp_path / "l.arrows", records))
    assert (s.requests, s.ok, s.failed, s.duration_s) == (3, 2, 1, 2.5)
    assert s.ttft.p50 == pytest.approx(0.2) and s.ttft.max == pytest.approx(0.3)
    assert s.itl.count == 6 and s.itl.p50 == pytest.approx(0.2)
    assert s.tpot.p50 == pytest.approx((0.2 + 0.8) / 2)
    assert s.errors_by_class == {"http_5xx": 1} and s.total_output_tokens == 8
    assert_same_summary(s, summarize(records))


def test_a_jsonl_ledger_and_an_empty_one(tmp_path: Path) -> None:
    records = ledger(300, seed=3)
    with JsonlWriter(tmp_path / "ledger.jsonl") as w:
        for r in records:
            w.write(r)
    assert_same_summary(summarize_file(tmp_path), summarize(records))
    empty = write_arrow(tmp_path / "empty.arrows", [])
    assert_same_summary(summarize_file(empty), summarize([]))


floats = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@given(st.lists(floats | st.sampled_from([0.0, -0.0, 1.5, 2.0]), max_size=60), st.integers(1, 9))
@settings(max_examples=150, deadline=None)
def test_streaming_distribution_is_exact(values: list[float], chunk: int) -> None:
    array = np.array(values, dtype=np.float64)
    want = distribution(values)
    for hold, gather in ((1 << 21, 1 << 23), (3, 4), (0, 0)):
        quantiles.HOLD_MAX, quantiles.GATHER_MAX = hold, gather
        try:
            d = StreamingDistribution()
            while d.needs_pass:
                d.begin_pass()
                for i in range(0, len(array), chunk):
                    d.feed(array[i : i + chunk])
                d.end_pass()
        finally:
            quantiles.HOLD_MAX, quantiles.GATHER_MAX = 1 << 21, 1 << 23
        got = d.result()
        for field in ("count", "min", "max", "p50", "p90", "p95", "p99", "p999"):
            assert getattr(got, field) == getattr(want, field), (field, hold)
        if want.mean is None:
            assert got.mean is None
        else:  # summed pairwise per chunk, not left to right: the last bits may differ
            assert got.mean == pytest.approx(want.mean, rel=1e-9, abs=1e-9)


@given(st.lists(floats, max_size=40), st.sampled_from([0.0, 12.5, 50.0, 99.9, 100.0]))
def test_exact_percentiles_match_percentile(values: list[float], q: float) -> None:
    assert exact_percentiles(np.array(values), [q]) == [percentile(values, q)]


def test_windows_equal_slo_window_slis(tmp_path: Path) -> None:
    records = ledger(2000, seed=7)
    path = write_arrow(tmp_path / "ledger.arrows", records, batch_rows=300)
    bounds = [(T0, T0 + 30), (T0 + 25, T0 + 61.3), (T0 + 500, T0 + 600), (T0 - 5, T0 + 1e4)]
    for window, (start, end) in zip(window_figures(path, bounds), bounds, strict=True):
        assert window.to_json() == dataclasses.asdict(window_slis(records, start, end))


def test_windows_in_groups_of_bounded_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import faultkit.load.colstats as colstats

    monkeypatch.setattr(colstats, "WINDOW_ROWS", 150)  # several groups, several passes
    records = ledger(1200, seed=11)
    path = write_arrow(tmp_path / "ledger.arrows", records)
    windows = fixed_windows(path, 10.0)
    assert sum(w.requests for w in windows) == len(records)
    assert windows[0].start == min(r.t_scheduled or r.t_invoke for r in records)
    for w in windows:
        assert w.to_json() == dataclasses.asdict(window_slis(records, w.start, w.end))
    assert fixed_windows(write_arrow(tmp_path / "e.arrows", []), 10.0) == []
