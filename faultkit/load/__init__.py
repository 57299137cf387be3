"""Streaming load generation and the request ledger.

* :class:`LoadProfile` / :class:`Target` — what to send and where.
* :class:`LoadGenerator` — closed/open-loop scheduler; :class:`BackgroundLoad` — the same
  as an async context manager for scenarios, with a clean drain.
* :class:`Ledger` — one terminal :class:`~faultkit.model.records.RequestRecord` per request,
  written as JSON lines while running; the invariant check.
* ``stats`` — TTFT / TPOT / ITL / E2E and throughput as pure functions over records
  (:func:`summarize`, :func:`percentile`, …).
* ``sse`` — the stream parser and its classification rules.
* ``columnar``, ``ledgerfile`` — the columnar ledger file (``ledger.arrows``): schema,
  writer, readers; ``quantiles``, ``colstats`` — exact summaries and windows computed from
  that file in bounded memory (docs/ledger.md). Import them from their modules: they
  need pyarrow, which the rest of the package does not load.
"""

from faultkit.load.background import BackgroundLoad
from faultkit.load.client import RequestRunner, classify_exception
from faultkit.load.generator import LoadGenerator, LoadResult, arrival_offsets
from faultkit.load.ledger import Clock, Ledger
from faultkit.load.profile import LoadProfile, Target
from faultkit.load.prompts import synthetic_prompt
from faultkit.load.sse import SSEParser, StreamInterpreter, StreamOutcome, parse_stream
from faultkit.load.stats import (
    PERCENTILES,
    Distribution,
    LoadSummary,
    distribution,
    e2e_s,
    itl_values,
    percentile,
    summarize,
    tpot_s,
    ttft_s,
)

__all__ = [
    "PERCENTILES",
    "BackgroundLoad",
    "Clock",
    "Distribution",
    "Ledger",
    "LoadGenerator",
    "LoadProfile",
    "LoadResult",
    "LoadSummary",
    "RequestRunner",
    "SSEParser",
    "StreamInterpreter",
    "StreamOutcome",
    "Target",
    "arrival_offsets",
    "classify_exception",
    "distribution",
    "e2e_s",
    "itl_values",
    "parse_stream",
    "percentile",
    "summarize",
    "synthetic_prompt",
    "tpot_s",
    "ttft_s",
]
