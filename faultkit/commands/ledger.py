"""``faultkit ledger``: read a ledger file — JSON lines for humans, figures from its columns.

``LEDGER`` is a columnar ledger (``ledger.arrows``), a JSON-lines ledger
(``ledger.jsonl``) or a run directory holding one (``ledger.arrows`` preferred).

* ``faultkit ledger cat LEDGER`` prints one JSON line per record, exactly as
  ``ledger.jsonl`` holds it (``RequestRecord.to_json()``), in file order.
* ``faultkit ledger summary LEDGER [--window 60s] [--json FILE]`` prints the load summary
  of ``faultkit load`` (``colstats.summarize_file``) and, with ``--window``, the SLIs of
  each window of that length (``colstats.fixed_windows``; the definitions of the run's
  ``slis``: requests belong to a window by their arrival).

Both read the file one batch at a time: memory does not grow with the ledger. A torn last
batch (a crash while the ledger was written) is skipped with one line on stderr.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from faultkit.commands.input import FiniteFloat
from faultkit.commands.summary_text import errors_and_goodput, ms
from faultkit.load.colstats import fixed_windows, summarize_file
from faultkit.load.ledgerfile import iter_records
from faultkit.load.stats import Distribution, LoadSummary
from faultkit.model.durations import parse_duration
from faultkit.model.windows import WindowSLIs

_LEDGER = click.Path(exists=True, path_type=Path)
_SECONDS = FiniteFloat(gt=0, unit="s")


@click.group()
def ledger() -> None:
    """Read a ledger: JSON lines for humans, summaries from its columns."""


@ledger.command()
@click.argument("path", type=_LEDGER)
def cat(path: Path) -> None:
    """Print LEDGER (a ledger file or a run directory) as JSON lines."""
    problems: list[str] = []
    out = sys.stdout
    try:
        for record in iter_records(path, problems=problems):
            out.write(json.dumps(record.to_json(), separators=(",", ":")) + "\n")
        out.flush()
    except BrokenPipeError:  # `| head`: the reader has seen enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return
    _warn(problems)


@ledger.command()
@click.argument("path", type=_LEDGER)
@click.option("--window", "window", help="also the SLIs of each window of this length (60s, 5m)")
@click.option("--ttft-max", type=_SECONDS, help="goodput threshold on TTFT (s)")
@click.option("--tpot-max", type=_SECONDS, help="goodput threshold on TPOT (s)")
@click.option("--json", "json_path", help="write the figures as JSON to this file (- = stdout)")
def summary(
    path: Path,
    window: str | None,
    ttft_max: float | None,
    tpot_max: float | None,
    json_path: str | None,
) -> None:
    """Print the load summary of LEDGER (a ledger file or a run directory)."""
    width = _window_s(window) if window else None
    problems: list[str] = []
    s = summarize_file(path, ttft_max_s=ttft_max, tpot_max_s=tpot_max, problems=problems)
    windows = fixed_windows(path, width) if width else []
    if json_path:
        data: dict[str, Any] = {"summary": s.to_json(), "windows": [w.to_json() for w in windows]}
        text = json.dumps(data, indent=2) + "\n"
        if json_path == "-":
            click.echo(text, nl=False)
        else:
            Path(json_path).write_text(text, encoding="utf-8")
    if json_path != "-":
        click.echo(format_ledger_summary(s))
        if windows:
            click.echo(format_windows(windows))
    _warn(problems)


def _window_s(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--window") from None
    if not seconds > 0:
        raise click.BadParameter(f"must be > 0 (got {text!r})", param_hint="--window")
    return seconds


def _warn(problems: list[str]) -> None:
    for line in problems:
        click.secho(f"warning: {line}", fg="yellow", err=True)


def _dist(name: str, d: Distribution) -> str:
    return (
        f"{name:<10} n {d.count:<10} p50 {ms(d.p50):>9}  p95 {ms(d.p95):>9}  "
        f"p99 {ms(d.p99):>9}  p99.9 {ms(d.p999):>9}  max {ms(d.max):>9}"
    )


def format_ledger_summary(s: LoadSummary) -> str:
    """The summary of a ledger file: counts, rates, every distribution, errors by class."""
    lines = [
        f"Requests: {s.requests}   ok {s.ok}   failed {s.failed}   unknown {s.unknown}   "
        f"Duration: {s.duration_s:.1f} s",
        f"Request rate: {s.request_rate_rps:.1f} req/s   Throughput: "
        f"{s.output_token_rate_tps:.0f} tok/s   Errors: {100 * s.error_rate:.2f} %",
        _dist("TTFT", s.ttft),
        _dist("user TTFT", s.user_ttft),
        _dist("TPOT", s.tpot),
        _dist("ITL", s.itl),
        _dist("E2E", s.e2e),
    ]
    lines += errors_and_goodput(s)
    return "\n".join(lines)


def format_windows(windows: list[WindowSLIs]) -> str:
    """One line per window: offset, requests, error ratio, TTFT and E2E percentiles."""
    t0 = windows[0].start
    lines = [
        f"{'from s':>8} {'requests':>9} {'errors':>7}  {'TTFT p50':>9} {'p95':>9} "
        f"{'p99':>9}  {'E2E p50':>9} {'p99':>9}"
    ]
    for w in windows:
        ratio = "—" if w.error_ratio is None else f"{100 * w.error_ratio:.1f}%"
        lines.append(
            f"{w.start - t0:>8.0f} {w.requests:>9} {ratio:>7}  {ms(w.ttft_p50_s):>9} "
            f"{ms(w.ttft_p95_s):>9} {ms(w.ttft_p99_s):>9}  {ms(w.e2e_p50_s):>9} "
            f"{ms(w.e2e_p99_s):>9}"
        )
    return "\n".join(lines)
