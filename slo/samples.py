"""The requests behind a window's figures: which arrived in it, which succeeded, and their
latencies — one selection for :func:`slo.measure.window_slis` (the SLIs) and
:mod:`slo.uncertainty` (how sure they are)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from faultkit.load.stats import e2e_s, tpot_s, ttft_s
from faultkit.model.records import RequestRecord

__all__ = ["WindowSamples", "arrival", "user_ttft", "window_samples"]


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
