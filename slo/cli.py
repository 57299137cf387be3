"""``faultkit rules`` and ``faultkit budget``: the SLO side of the command line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click

from faultkit.inventory import Inventory, load_inventory
from slo.budget import format_table, parse_window, review
from slo.prom import Prometheus
from slo.rules import render_rules


def _inventory(path: str | None) -> Inventory:
    if path is not None:
        return load_inventory(path)
    # the embedded default is the testbed, described like any user's lab
    import testbed

    # (under an editable install testbed may be a namespace package without __file__)
    return load_inventory(Path(next(iter(testbed.__path__))) / "inventory.yaml")


_INVENTORY = click.option("--inventory", "inventory_path", type=click.Path(dir_okay=False),
                          envvar="FAULTKIT_INVENTORY",
                          help="inventory file (default: the testbed's)")


#: a Prometheus duration (``0s``, ``30s``, ``2m``, ``1h30m``): units largest first, each once
_PROM_DURATION = re.compile(r"(?:\d+y)?(?:\d+w)?(?:\d+d)?(?:\d+h)?(?:\d+m)?(?:\d+s)?(?:\d+ms)?")


def _prom_duration(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Accept a Prometheus duration for an alert's ``for:``; anything else is bad input."""
    text = value.strip()
    if not text or not _PROM_DURATION.fullmatch(text):
        raise click.BadParameter(
            f"{value!r}: must be a Prometheus duration ≥ 0s, such as 0s, 30s, 2m or 1h30m"
        )
    return text


@click.command()
@_INVENTORY
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True),
              help="write the rules file here (default: stdout)")
@click.option("--node-down-for", default="0s", show_default=True, callback=_prom_duration,
              help="`for:` of FaultkitNodeDown (0s = first failed scrape)")
def rules(inventory_path: str | None, output: str | None, node_down_for: str) -> None:
    """Write Prometheus alerting and recording rules for the inventory's SLOs.

    Check them with `promtool check rules FILE` and add the file to `rule_files:`.
    """
    text = render_rules(_inventory(inventory_path), node_down_for=node_down_for)
    if output:
        Path(output).write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)


@click.command()
@_INVENTORY
@click.option("--window", default=None, help="SLO window, e.g. 30d (default: the SLO's)")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, writable=True),
              help="also write the review as JSON to this file ('-' = stdout only JSON)")
@click.option("--runs-dir", default="runs", show_default=True,
              type=click.Path(file_okay=False), help="where run directories live")
@click.option("--prometheus", "prometheus_url", default=None,
              help="Prometheus URL (default: the inventory's)")
def budget(inventory_path: str | None, window: str | None, json_path: str | None,
           runs_dir: str, prometheus_url: str | None) -> None:
    """SLO error-budget review: SLI, budget left, burn rates, alerts, chaos runs."""
    if window is not None:
        try:
            parse_window(window)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--window") from None
    inventory = _inventory(inventory_path)
    with Prometheus(prometheus_url or inventory.prometheus.url) as prom:
        data = review(inventory, prom, window=window, runs_dir=Path(runs_dir))
    text = json.dumps(data, indent=2, sort_keys=False)
    if json_path == "-":
        click.echo(text)
        return
    if json_path:
        Path(json_path).write_text(text + "\n", encoding="utf-8")
    click.echo(format_table(data))
