"""``faultkit dashboard``: a Grafana dashboard JSON for the inventory's SLOs and chaos runs.

The panels come from the same SLO definitions as ``faultkit rules`` (:mod:`slo.dashboard`);
the chaos-run annotations from the run directories under ``--runs-dir``
(:func:`reports.runs.list_runs`, gate scenarios included), one per run with its start,
end and a one-line text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import click

from faultkit.commands.input import inventory_option
from faultkit.inventory import load_inventory
from reports.runs import RunEntry, list_runs
from slo.dashboard import RunAnnotation, build_dashboard


def _figure(value: float | None, missing: str) -> str:
    return missing if value is None else f"{value:.1f} s"


def annotation_text(entry: RunEntry) -> str:
    """``kill on sim-vllm: PASS; detection 1.5 s (alert); recovery 2.5 s; lost 31 (dir)``."""
    head = f"{entry.scenario or 'run'} on {entry.node or '?'}: {entry.verdict or 'not judged'}"
    if entry.kind == "gate":
        parts = [f"{entry.passed}/{entry.scenarios} scenarios passed"]
    elif entry.not_applicable:
        parts = ["no outage (request-level fault)"]
    else:
        signal = f" ({entry.detect_signal})" if entry.detect_signal else ""
        parts = [f"detection {_figure(entry.detection_s, 'none')}{signal}",
                 f"recovery {_figure(entry.recovery_s, 'none')}"]
    if entry.lost is not None:
        parts.append(f"lost {entry.lost}")
    return f"{head}; " + "; ".join(parts) + f" ({entry.path.name})"


def run_annotations(entries: Sequence[RunEntry]) -> list[RunAnnotation]:
    """One annotation per entry that recorded both its start and its end, oldest first."""
    return [
        RunAnnotation(
            time=e.t_start,
            time_end=max(e.t_end, e.t_start),
            text=annotation_text(e),
            node=e.node or "",
            scenario=e.scenario or "",
            verdict=e.verdict or "not judged",
        )
        for e in reversed(entries)
        if e.t_start is not None and e.t_end is not None
    ]


@click.command()
@inventory_option
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="write the dashboard JSON here (default: stdout)",
)
@click.option(
    "--runs-dir",
    default="runs",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="where run directories live (their runs become annotations)",
)
@click.option(
    "--max-runs",
    type=click.IntRange(min=0),
    default=200,
    show_default=True,
    help="annotate at most the N newest runs",
)
def dashboard(
    inventory_path: Path, output: Path | None, runs_dir: Path, max_runs: int
) -> None:
    """Write a Grafana dashboard for the inventory's SLOs, annotated with the chaos runs.

    Import it in Grafana (Dashboards → Import) and pick the Prometheus datasource for
    DS_PROMETHEUS, or provision the file.
    """
    inventory = load_inventory(inventory_path)
    annotations = run_annotations(list_runs(runs_dir, include_gate_runs=True)[:max_runs])
    board = build_dashboard(inventory, annotations)
    text = json.dumps(board, indent=2) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    output.write_text(text, encoding="utf-8")
    click.echo(f"wrote {output} ({len(board['panels'])} panels, "
               f"{len(annotations)} chaos runs)", err=True)
