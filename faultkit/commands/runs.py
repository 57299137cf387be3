"""``faultkit runs``: the run and gate directories under ``--runs-dir``, newest first.

One aligned line each: stamp, scenario, node, verdict (PASS / FAIL / INCONCLUSIVE; a
gate's decision), detection, recovery and lost requests, or ``--json`` for a JSON list.
``--scenario NAME`` keeps one scenario's runs (``cold_start``: every node's), and
``--phases`` adds each restarted engine's recovery phases (the slowest one in the table,
all of them in the JSON: the cold starts of a catalogue run, side by side).
The files are read by :mod:`reports.runs` through :mod:`reports.load`, never parsed here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import click

from reports.runs import RunEntry, list_runs

HEADER = ("STAMP", "SCENARIO", "NODE", "VERDICT", "DETECTION", "RECOVERY", "LOST")
PHASE_HEADER = ("SLOWEST PHASE",)
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


def _slowest(e: RunEntry) -> str:
    phase = e.slowest_phase
    return NONE if phase is None else f"{phase.phase} ({phase.duration_s:.1f} s)"


def row(e: RunEntry) -> tuple[str, ...]:
    """The cells of one entry's line, in :data:`HEADER` order (and the slowest phase when
    the phases were read)."""
    slowest = (_slowest(e),) if e.phases is not None else ()
    return (
        e.stamp,
        _scenario(e),
        e.node or NONE,
        e.verdict or NONE,
        _detection(e),
        _recovery(e),
        NONE if e.lost is None else str(e.lost),
        *slowest,
    )


def format_table(entries: Sequence[RunEntry], *, phases: bool = False) -> str:
    """The header and one line per entry, each column padded to its widest cell."""
    header = HEADER + PHASE_HEADER if phases else HEADER
    padded = ((*cells, *(NONE,) * (len(header) - len(cells)))
              for cells in (row(e) for e in entries))  # a gate has no phases
    rows = [header, *padded]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
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
@click.option("--scenario", default=None, metavar="NAME",
              help="only the runs of this scenario (e.g. cold_start: every node's)")
@click.option("--phases", is_flag=True,
              help="read each run whole and add its recovery phases (a restarted engine's)")
def runs(runs_dir: Path, as_json: bool, limit: int | None, scenario: str | None,
         phases: bool) -> None:
    """List the run and gate directories under --runs-dir, newest first."""
    entries = [e for e in list_runs(runs_dir, phases=phases)
               if scenario is None or e.scenario == scenario][:limit]
    if as_json:
        click.echo(json.dumps([e.to_json() for e in entries], indent=2))
    elif not entries:
        which = f" of scenario {scenario}" if scenario else ""
        click.echo(f"no run directories{which} under {runs_dir}", err=True)
    else:
        click.echo(format_table(entries, phases=phases))
