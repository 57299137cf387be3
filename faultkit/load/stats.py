"""Latency and throughput metrics as pure functions over a ledger (a list of RequestRecord).

Definitions (docs/definitions.md, "Latency"; every report and SLO check uses these):

* **TTFT** = ``t_first_token − t_invoke``: time to the first chunk with non-empty
  ``content`` (or ``reasoning_content``). A role-only first chunk does not count.
* **TPOT** = ``(t_last_token − t_first_token) / (output_tokens − 1)``, where
  ``output_tokens`` is the server's ``usage.completion_tokens`` when it was given, else the
  number of content chunks; undefined (None) for ≤ 1 token.
* **ITL** = the gaps between successive content chunks (per chunk, not per token; one chunk
  may carry several tokens), i.e. ``RequestRecord.itl_s``.
* **E2E** = ``t_end − t_invoke``.
* **User-facing TTFT / E2E** = ``t_first_token`` / ``t_end`` − ``t_scheduled`` (the user's
  arrival; ``t_invoke`` when the record has none): they count from the scheduled arrival,
  as wrk2's coordinated-omission correction and GuideLLM do, so time an open-loop arrival
  spent waiting on a late client is not hidden. Equal to TTFT / E2E in a closed loop.

Arrivals the open loop shed (``shed_client``) are failures, counted in the error rate and
in ``LoadSummary.shed_client``; they have no latency.

Latency distributions are over **successful** (``ok``) requests only; failures are counted
in the error rate by class. Percentiles use linear interpolation between closest ranks
(numpy's default ``linear`` method). Throughput is over the run's wall-clock ``duration_s``
(given, else first ``t_invoke`` to last ``t_end``). All times are seconds.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from faultkit.model.records import RequestRecord

__all__ = [
    "PERCENTILES",
    "Distribution",
    "LoadSummary",
    "distribution",
    "e2e_s",
    "itl_values",
    "percentile",
    "summarize",
    "tpot_s",
    "ttft_s",
    "user_e2e_s",
    "user_ttft_s",
]

#: The percentiles every distribution reports (p50, p90, p95, p99, p99.9).
PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0, 99.9)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0–100) with linear interpolation; None for no values."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100] (got {q})")
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    frac = pos - lo
    return ordered[lo] + (ordered[hi] - ordered[lo]) * frac


def ttft_s(record: RequestRecord) -> float | None:
    """TTFT = t_first_token − t_invoke (None if no content chunk arrived)."""
    if record.t_first_token is None:
        return None
    return record.t_first_token - record.t_invoke


def tpot_s(record: RequestRecord) -> float | None:
    """TPOT = (t_last_token − t_first_token) / (output_tokens − 1); None for ≤ 1 token."""
    n = record.output_tokens
    if n is None or n <= 1 or record.t_first_token is None or record.t_last_token is None:
        return None
    return (record.t_last_token - record.t_first_token) / (n - 1)


def e2e_s(record: RequestRecord) -> float:
    """E2E = t_end − t_invoke."""
    return record.t_end - record.t_invoke


def user_ttft_s(record: RequestRecord) -> float | None:
    """User-facing TTFT = t_first_token − (t_scheduled or t_invoke); None without a token.

    User-facing TTFT counts from the scheduled arrival, as wrk2's coordinated-omission
    correction and GuideLLM do: it includes any time the client took to send the request
    after the user arrived, so it is never below :func:`ttft_s`.
    """
    if record.t_first_token is None:
        return None
    return record.t_first_token - record.arrival


def user_e2e_s(record: RequestRecord) -> float:
    """User-facing E2E = t_end − (t_scheduled or t_invoke), from the scheduled arrival."""
    return record.t_end - record.arrival


def itl_values(records: Iterable[RequestRecord]) -> list[float]:
    """All inter-chunk gaps (ITL) of the given records, flattened."""
    return [gap for r in records for gap in r.itl_s]


@dataclass(frozen=True, slots=True)
class Distribution:
    """Count, mean, min, max and the :data:`PERCENTILES` of a sample (seconds)."""

    count: int
    mean: float | None = None
    min: float | None = None
    max: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    p999: float | None = None


def distribution(values: Sequence[float]) -> Distribution:
    """Summarise ``values`` (empty → count 0 and all None)."""
    if not values:
        return Distribution(0)
    ordered = sorted(values)
    p = [percentile(ordered, q) for q in PERCENTILES]
    return Distribution(
        count=len(ordered),
        mean=sum(ordered) / len(ordered),
        min=ordered[0],
        max=ordered[-1],
        p50=p[0],
        p90=p[1],
        p95=p[2],
        p99=p[3],
        p999=p[4],
    )


@dataclass(frozen=True, slots=True)
class LoadSummary:
    """Everything ``faultkit load`` prints and writes to ``--json``.

    Rates are per second of ``duration_s``. ``error_rate`` = (fail + unknown) / requests.
    ``goodput_rps`` counts ok requests meeting every given threshold (all ok requests
    when no threshold is given); ``goodput_ratio`` is that count over all requests.
    ``user_ttft``/``user_e2e`` are the user-facing distributions (from the scheduled
    arrival, :func:`user_ttft_s`) over ok requests; ``shed_client`` and
    ``client_exhausted`` count the requests of those client-side error classes.
    """

    requests: int
    ok: int
    failed: int
    unknown: int
    duration_s: float
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    e2e: Distribution
    request_rate_rps: float
    output_token_rate_tps: float
    input_token_rate_tps: float | None
    total_output_tokens: int
    error_rate: float
    errors_by_class: dict[str, int] = field(default_factory=dict)
    goodput_rps: float = 0.0
    goodput_ratio: float = 0.0
    thresholds: dict[str, float] = field(default_factory=dict)
    user_ttft: Distribution = field(default_factory=lambda: Distribution(0))
    user_e2e: Distribution = field(default_factory=lambda: Distribution(0))
    shed_client: int = 0
    client_exhausted: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _meets(record: RequestRecord, limits: dict[str, float]) -> bool:
    checks = {"ttft_s": ttft_s(record), "tpot_s": tpot_s(record), "e2e_s": e2e_s(record)}
    for name, limit in limits.items():
        value = checks[name]
        if name == "ttft_s" and value is None:
            return False  # no token at all: not good
        if value is not None and value > limit:
            return False
    return True


def summarize(
    records: Sequence[RequestRecord],
    *,
    duration_s: float | None = None,
    ttft_max_s: float | None = None,
    tpot_max_s: float | None = None,
    e2e_max_s: float | None = None,
) -> LoadSummary:
    """Summarise a ledger: latency distributions, throughput, errors, goodput.

    ``duration_s`` defaults to the span from the first invoke to the last end. Thresholds
    (seconds) define goodput; a request without a TPOT (≤ 1 token) passes the TPOT check.
    """
    if duration_s is None:
        duration_s = (
            max(r.t_end for r in records) - min(r.t_invoke for r in records) if records else 0.0
        )
    ok = [r for r in records if r.status == "ok"]
    failed = sum(1 for r in records if r.status == "fail")
    unknown = sum(1 for r in records if r.status == "unknown")
    errors = Counter(r.error_class or "other" for r in records if r.status != "ok")
    limits = {
        name: value
        for name, value in (("ttft_s", ttft_max_s), ("tpot_s", tpot_max_s), ("e2e_s", e2e_max_s))
        if value is not None
    }
    good = sum(1 for r in ok if _meets(r, limits))
    out_tokens = sum(r.output_tokens or 0 for r in ok)
    prompt_known = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    per_s = (lambda n: n / duration_s) if duration_s > 0 else (lambda n: 0.0)
    return LoadSummary(
        requests=len(records),
        ok=len(ok),
        failed=failed,
        unknown=unknown,
        duration_s=duration_s,
        ttft=distribution([v for r in ok if (v := ttft_s(r)) is not None]),
        tpot=distribution([v for r in ok if (v := tpot_s(r)) is not None]),
        itl=distribution(itl_values(ok)),
        e2e=distribution([e2e_s(r) for r in ok]),
        request_rate_rps=per_s(len(ok)),
        output_token_rate_tps=per_s(out_tokens),
        input_token_rate_tps=per_s(sum(prompt_known)) if prompt_known else None,
        total_output_tokens=out_tokens,
        error_rate=(failed + unknown) / len(records) if records else 0.0,
        errors_by_class=dict(sorted(errors.items())),
        goodput_rps=per_s(good),
        goodput_ratio=good / len(records) if records else 0.0,
        thresholds=limits,
        user_ttft=distribution([v for r in ok if (v := user_ttft_s(r)) is not None]),
        user_e2e=distribution([user_e2e_s(r) for r in ok]),
        shed_client=errors.get("shed_client", 0),
        client_exhausted=errors.get("client_exhausted", 0),
    )
