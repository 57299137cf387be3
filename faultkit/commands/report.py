"""``faultkit report``: re-render incident reports (and gate / budget summaries) from files."""

from __future__ import annotations

import json
from pathlib import Path

import click

from faultkit.commands.input import BadInput
from faultkit.rundir import BUDGET_MD, GATE_MD, GateResult, RunDir, UnreadableRunFile
from reports.errors import NotARunDirectory, ReportError
from reports.load import RUN_FILES, is_run_dir
from reports.render import render_budget, render_gate, render_incident


def _read_json(path: Path, what: str) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: cannot read the {what} JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ReportError(f"{path}: the {what} JSON must be an object")
    return data


def _require_incident_run(run_dir: Path) -> None:
    """Bad input, before anything is written: a path that is no run directory, or a gate's
    steady-state window — a run with no fault, so no incident to report, judged in its
    gate's gate.json."""
    from faultkit.experiment.steady import STEADY_SCENARIO

    if not is_run_dir(run_dir):
        raise BadInput(str(NotARunDirectory(str(run_dir), RUN_FILES)))
    try:
        scenario = RunDir(run_dir).info().scenario
    except UnreadableRunFile:  # the report says what is wrong with run.json
        return
    if scenario == STEADY_SCENARIO:
        raise BadInput(f"{run_dir}: a gate's steady-state window (no fault), judged in that "
                       "gate's gate.json: it has no incident report (re-render the gate "
                       "with `faultkit report --gate GATE_DIR/gate.json`)")


@click.command()
@click.argument("run_dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--gate",
    "gate_json",
    type=click.Path(path_type=Path),
    help="also render gate.md next to this gate JSON",
)
@click.option(
    "--budget",
    "budget_json",
    type=click.Path(path_type=Path),
    help="also render budget.md next to this budget JSON",
)
def report(run_dirs: tuple[Path, ...], gate_json: Path | None, budget_json: Path | None) -> None:
    """Re-render incident.md and timeline.png for each RUN_DIR from its files alone."""
    if not run_dirs and gate_json is None and budget_json is None:
        raise click.UsageError("give at least one RUN_DIR (or --gate / --budget JSON)")
    for run_dir in run_dirs:  # every one checked before any is rendered
        _require_incident_run(run_dir)
    for run_dir in run_dirs:
        out = render_incident(run_dir)
        click.echo(f"wrote {out} and {RunDir(run_dir).timeline_png}")
    if gate_json is not None:
        result = GateResult.from_json(_read_json(gate_json, "gate"))
        click.echo(f"wrote {render_gate(result, gate_json.with_name(GATE_MD))}")
    if budget_json is not None:
        out = render_budget(_read_json(budget_json, "budget"), budget_json.with_name(BUDGET_MD))
        click.echo(f"wrote {out}")
