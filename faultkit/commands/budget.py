"""``faultkit budget``: the SLO error-budget review from Prometheus (:func:`slo.budget.review`)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from faultkit.commands.input import inventory_option
from faultkit.inventory import load_inventory
from slo.budget import format_table, parse_window, review
from slo.prom import Prometheus


@click.command()
@inventory_option
@click.option("--window", default=None, help="SLO window, e.g. 30d (default: the SLO's)")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, writable=True),
              help="also write the review as JSON to this file ('-' = stdout only JSON)")
@click.option("--runs-dir", default="runs", show_default=True,
              type=click.Path(file_okay=False), help="where run directories live")
@click.option("--prometheus", "prometheus_url", default=None,
              help="Prometheus URL (default: the inventory's)")
def budget(inventory_path: Path, window: str | None, json_path: str | None,
           runs_dir: str, prometheus_url: str | None) -> None:
    """SLO error-budget review: SLI, budget left, burn rates, alerts, chaos runs."""
    if window is not None:
        try:
            parse_window(window)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--window") from None
    inventory = load_inventory(inventory_path)
    with Prometheus(prometheus_url or inventory.prometheus.url) as prom:
        data = review(inventory, prom, window=window, runs_dir=Path(runs_dir))
    text = json.dumps(data, indent=2, sort_keys=False)
    if json_path == "-":
        click.echo(text)
        return
    if json_path:
        Path(json_path).write_text(text + "\n", encoding="utf-8")
    click.echo(format_table(data))
