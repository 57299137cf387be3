"""``WindowSLIs``: the client-side SLIs of the requests that arrived in one window.

One definition for the two places that compute it: ``slo.measure.window_slis`` (from the
records in memory, for a scenario's measurement) and ``faultkit.load.colstats`` (from the
columnar ledger file, for soak-sized runs). docs/definitions.md defines each field.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["WindowSLIs"]


@dataclass(frozen=True, slots=True)
class WindowSLIs:
    """Client-side SLIs of the requests that *arrived* (were scheduled) in ``[start, end)``.

    Latencies are over ok requests; ``error_ratio`` = failed / requests (None without
    requests); ``output_tokens_per_s`` = ok requests' output tokens / window length.
    """

    start: float
    end: float
    requests: int = 0
    ok: int = 0
    failed: int = 0
    error_ratio: float | None = None  # None when no requests
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    ttft_p99_s: float | None = None
    #: TTFT from the user's scheduled arrival (open loop), not from the send
    user_ttft_p50_s: float | None = None
    user_ttft_p95_s: float | None = None
    user_ttft_p99_s: float | None = None
    tpot_p50_s: float | None = None
    tpot_p95_s: float | None = None
    e2e_p50_s: float | None = None
    e2e_p95_s: float | None = None
    e2e_p99_s: float | None = None
    output_tokens_per_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
