"""``faultkit runs``: the run and gate directories under ``--runs-dir``, newest first.

One aligned line each: stamp, scenario, node, verdict (PASS / FAIL / INCONCLUSIVE; a
gate's decision), detection, recovery and lost requests, or ``--json`` for a JSON list.
The files are read by :mod:`reports.runs` through :mod:`reports.load`, never parsed here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import click

from reports.runs import RunEntry, list_runs

HEADER = ("STAMP", "SCENARIO", "NODE", "VERDICT", "DETECTION", "RECOVERY", "LOST")
NONE = "—"


def _detection(e: RunEntry) -> str:
    if e.kind == "gate" or e.lost is None:  # a gate, or no measurement
        return NONE
    if e.not_applicable:
        return "n/a"
    if e.detection_s is None:
        return "not detected"
    signal = f" ({e.detect_signal})" if e.detect_signal else ""
    return f"{e.detection_s:.1f} s{signal}"


def _recovery(e: RunEntry) -> str:
    if e.kind == "gate" or e.lost is None:
        return NONE
    if e.not_applicable:
        return "n/a"
    return "not recovered" if e.recovery_s is None else f"{e.recovery_s:.1f} s"


def _scenario(e: RunEntry) -> str:
    name = e.scenario or NONE
    if e.kind == "gate" and e.scenarios:
        name += f" ({e.passed}/{e.scenarios} passed)"
    return name


def row(e: RunEntry) -> tuple[str, ...]:
    """The cells of one entry's line, in :data:`HEADER` order."""
    return (
        e.stamp,
        _scenario(e),
        e.node or NONE,
        e.verdict or NONE,
        _detection(e),
        _recovery(e),
        NONE if e.lost is None else str(e.lost),
    )


def format_table(entries: Sequence[RunEntry]) -> str:
    """The header and one line per entry, each column padded to its widest cell."""
    rows = [HEADER, *(row(e) for e in entries)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
        for r in rows
    )


@click.command()
@click.option(
    "--runs-dir",
    default="runs",
    show_default=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="where run directories live",
)
@click.option("--json", "as_json", is_flag=True, help="print a JSON list instead of a table")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="show only the N newest directories",
)
def runs(runs_dir: Path, as_json: bool, limit: int | None) -> None:
    """List the run and gate directories under --runs-dir, newest first."""
    entries = list_runs(runs_dir)[:limit]
    if as_json:
        click.echo(json.dumps([e.to_json() for e in entries], indent=2))
    elif not entries:
        click.echo(f"no run directories under {runs_dir}", err=True)
    else:
        click.echo(format_table(entries))
