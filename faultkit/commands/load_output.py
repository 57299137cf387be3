"""What ``faultkit load`` leaves behind: the summary a person reads, ``--json`` and ``--csv``.

Kept apart from the command (``faultkit/commands/load.py``), which parses options and runs
the load; everything here is a pure function of the run's result.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from faultkit.commands.summary_text import errors_and_goodput, ms
from faultkit.load import LoadProfile, LoadResult, LoadSummary, Target
from faultkit.load.connections import ReuseStats
from faultkit.load.generator import LATENESS_BOUND_S

__all__ = ["append_csv", "connections_line", "format_summary", "summary_row", "write_json"]


def format_summary(
    s: LoadSummary,
    profile: LoadProfile,
    *,
    late_sends: int = 0,
    connections: ReuseStats | None = None,
) -> str:
    """The human summary, in the layout of the issue.

    With connection reuse on, one line says what the pool did (``connections``).

    Open loop only: a user-facing TTFT line (from the scheduled arrival, see
    ``stats.user_ttft_s``), the number of arrivals shed by the client's in-flight cap, and
    ``late_sends`` (requests sent later than ``LATENESS_BOUND_S``) when there are any.
    """
    if profile.open_loop:
        cap = f" (cap {profile.concurrency})" if profile.concurrency else ""
        shape = f"Rate: {profile.rate:g} req/s{cap}"
    else:
        shape = f"Concurrency: {profile.workers}"
    lines = [
        f"Requests: {s.requests}   {shape}   Duration: {s.duration_s:.1f} s",
        f"TTFT  p50 {ms(s.ttft.p50)}  p95 {ms(s.ttft.p95)}  p99 {ms(s.ttft.p99)}",
    ]
    if profile.open_loop:
        u = s.user_ttft
        lines.append(f"TTFT from arrival  p50 {ms(u.p50)}  p95 {ms(u.p95)}  p99 {ms(u.p99)}")
    lines += [
        f"TPOT  p50 {ms(s.tpot.p50)}   p95 {ms(s.tpot.p95)}",
        f"Throughput: {s.output_token_rate_tps:.0f} tok/s   "
        f"Request rate: {s.request_rate_rps:.1f} req/s   Errors: {100 * s.error_rate:.1f} %",
    ]
    if profile.open_loop:
        late = (
            f"   Sent late (> {LATENESS_BOUND_S * 1000:.0f} ms): {late_sends}" if late_sends else ""
        )
        lines.append(f"Shed by client: {s.shed_client}{late}")
    if profile.reuse_connections and connections is not None:
        lines.append(connections_line(connections))
    lines += errors_and_goodput(s)
    return "\n".join(lines)


def write_json(
    path: Path, target: Target, profile: LoadProfile, result: LoadResult, summary: LoadSummary
) -> None:
    data = {
        "target": {"name": target.name, "base_url": target.base_url, "model": target.model},
        "profile": profile.to_json(),
        "t_start": result.t_start,
        "t_end": result.t_end,
        "summary": summary.to_json(),
        "late_sends": result.late_sends,
        "connections": result.connections.to_json() if result.connections else None,
        "violations": result.violations,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def summary_row(target: Target, profile: LoadProfile, s: LoadSummary) -> dict[str, Any]:
    """One flat CSV row: target, load shape, counts, rates and every percentile."""
    row: dict[str, Any] = {
        "target": target.name,
        "model": target.model,
        "concurrency": profile.concurrency,
        "rate": profile.rate,
        "input_tokens": profile.input_tokens,
        "output_tokens": profile.output_tokens,
        "requests": s.requests,
        "ok": s.ok,
        "failed": s.failed,
        "unknown": s.unknown,
        "duration_s": s.duration_s,
        "request_rate_rps": s.request_rate_rps,
        "output_token_rate_tps": s.output_token_rate_tps,
        "error_rate": s.error_rate,
        "goodput_rps": s.goodput_rps,
    }
    for name in ("ttft", "tpot", "itl", "e2e"):
        dist = getattr(s, name)
        for stat in ("mean", "p50", "p90", "p95", "p99", "p999"):
            row[f"{name}_{stat}_s"] = getattr(dist, stat)
    return row


def append_csv(path: Path, target: Target, profile: LoadProfile, s: LoadSummary) -> None:
    row = summary_row(target, profile, s)
    new = not path.exists() or path.stat().st_size == 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)


def connections_line(stats: ReuseStats) -> str:
    """What the connection pool did, for people: reuse is never silent about its cost."""
    line = f"Connections: {stats.reused} reused (each proven open first)"
    if stats.found_closed:
        line += f", {stats.found_closed} found closed by the server and not used"
    if stats.no_reuse:
        line += f"; fresh ones for {', '.join(stats.no_reuse)} (it closes kept-alive connections)"
    return line
