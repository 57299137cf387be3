"""The requests behind a window's figures: which arrived in it, which succeeded, and their
latencies — one selection for :func:`slo.measure.window_slis` (the SLIs) and
:mod:`slo.uncertainty` (how sure they are)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from faultkit.load.stats import e2e_s, percentile, tpot_s, ttft_s
from faultkit.model.records import RequestRecord
from faultkit.model.windows import WindowSLIs

__all__ = ["WindowSamples", "arrival", "pooled_samples", "samples_slis", "user_ttft",
           "window_samples"]


def arrival(r: RequestRecord) -> float:
    """When the user arrived (:attr:`RequestRecord.arrival`)."""
    return r.arrival


def user_ttft(r: RequestRecord) -> float | None:
    """User-facing TTFT: first token − arrival (None without a first token)."""
    return None if r.t_first_token is None else r.t_first_token - arrival(r)


@dataclass(frozen=True)
class WindowSamples:
    """The per-request values behind a window's SLIs (:func:`window_samples`): the requests
    that arrived in it, the successful ones, and their TTFT, user-facing TTFT, TPOT and E2E
    — what :func:`window_slis` summarises and :mod:`slo.uncertainty` resamples."""

    chosen: tuple[RequestRecord, ...]
    good: tuple[RequestRecord, ...]
    ttft: tuple[float, ...]
    user_ttft: tuple[float, ...]
    tpot: tuple[float, ...]
    e2e: tuple[float, ...]


def window_samples(requests: Sequence[RequestRecord], start: float, end: float
                   ) -> WindowSamples:
    """The requests that *arrived* in [start, end) and their latencies (successful ones)."""
    chosen = tuple(r for r in requests if start <= arrival(r) < end)
    good = tuple(r for r in chosen if r.status == "ok")
    return WindowSamples(
        chosen=chosen, good=good,
        ttft=tuple(t for r in good if (t := ttft_s(r)) is not None),
        user_ttft=tuple(t for r in good if (t := user_ttft(r)) is not None),
        tpot=tuple(t for r in good if (t := tpot_s(r)) is not None),
        e2e=tuple(e2e_s(r) for r in good))


def pooled_samples(parts: Sequence[WindowSamples]) -> WindowSamples:
    """Several windows' samples as one body of evidence (a borderline window measured
    again: docs/definitions.md, "Uncertainty")."""
    return WindowSamples(*(tuple(v for part in parts for v in getattr(part, name))
                           for name in ("chosen", "good", "ttft", "user_ttft", "tpot", "e2e")))


def samples_slis(w: WindowSamples, start: float, end: float, span: float | None = None
                 ) -> WindowSLIs:
    """The SLIs of a window's samples (:func:`slo.measure.window_slis`), or of several
    windows' pooled (:func:`pooled_samples`: ``start`` of the first, ``end`` of the last,
    and ``span`` the seconds they cover together, which ``output_tokens_per_s`` is over)."""
    chosen, good, ttft, user, tpot, e2e = w.chosen, w.good, w.ttft, w.user_ttft, w.tpot, w.e2e
    tokens = sum(r.output_tokens or 0 for r in good)
    span = end - start if span is None else span
    return WindowSLIs(
        start=start,
        end=end,
        requests=len(chosen),
        ok=len(good),
        failed=len(chosen) - len(good),
        error_ratio=(len(chosen) - len(good)) / len(chosen) if chosen else None,
        ttft_p50_s=percentile(ttft, 50),
        ttft_p95_s=percentile(ttft, 95),
        ttft_p99_s=percentile(ttft, 99),
        user_ttft_p50_s=percentile(user, 50),
        user_ttft_p95_s=percentile(user, 95),
        user_ttft_p99_s=percentile(user, 99),
        tpot_p50_s=percentile(tpot, 50),
        tpot_p95_s=percentile(tpot, 95),
        e2e_p50_s=percentile(e2e, 50),
        e2e_p95_s=percentile(e2e, 95),
        e2e_p99_s=percentile(e2e, 99),
        output_tokens_per_s=tokens / span if span > 0 and good else None,
    )
